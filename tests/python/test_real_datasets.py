"""scripts/real_datasets.py (issue 13 section 6) runs end to end against the
real server: every data set loads raw, both sides train and score, and the
table it prints has a row for each."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_real_datasets_script_runs(dsn, conn):
    proc = subprocess.run([sys.executable, str(ROOT / "scripts" / "real_datasets.py"),
                           "--dsn", dsn, "--seeds", "1"],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    rows = [line for line in proc.stdout.splitlines() if line.startswith("| ") and "::" in line]
    assert [r.split("|")[1].strip().split(" ")[0] for r in rows] == [
        "AER::HMDA", "AER::CreditCard", "palmerpenguins::penguins", "carData::Salaries",
        "ISLR::Carseats", "ISLR::Wage"]
    # text columns stayed text in the database
    assert conn.execute(
        "SELECT data_type FROM information_schema.columns WHERE table_schema = 'real_datasets' "
        "AND table_name = 'aer_hmda_train' AND column_name = 'deny'").fetchone() == ("text",)
    # the scikit-learn side scored every data set
    assert all(float(r.split("|")[6]) > 0.2 for r in rows)
