"""scripts/convergence_study.py --quick against the test server.

The smoke run trains every strategy at both buffers on both orderings of a
3,000-image subset of Fashion-MNIST, one seed, two epochs, and writes its
CSV, JSON, markdown tables and PNG plots.  Checks that they are complete
and sane, not what the study concludes.
"""

from __future__ import annotations

import csv
import json
import math
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "convergence_study.py"
DATA = Path("/usr/share/datasets/fashion-mnist")
STRATEGIES = {"no_shuffle", "block_only", "corgipile", "sliding_window", "mrs",
              "shuffle_once", "epoch_shuffle"}
TASKS = {"fashion-binary", "fashion-10"}
ORDERINGS = {"clustered", "feature"}
BUFFERS = {"10%", "2%"}
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.fixture
def study(dsn, tmp_path):
    if not DATA.is_dir():
        pytest.skip(f"{DATA} missing (Debian package dataset-fashion-mnist)")
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "--quick", "--dsn", dsn, "--output-dir", str(tmp_path)],
        capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return tmp_path, proc.stdout


def test_quick_run_writes_complete_results(study):
    out, stdout = study
    report = json.loads((out / "convergence-results.json").read_text())
    assert report["protocol"]["epochs"] == 2
    assert report["protocol"]["seeds"] == [1]
    assert report["protocol"]["quick"] is True

    # every epoch of every run in the CSV, every strategy in every setting
    with open(out / "convergence-results.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert rows, "empty CSV"
    seen = defaultdict(set)
    epochs = defaultdict(list)
    for r in rows:
        acc = float(r["validation_score"])
        assert 0.0 <= acc <= 1.0, r
        assert 0.0 <= float(r["train_score"]) <= 1.0, r
        loss = float(r["loss"])
        assert math.isfinite(loss) and loss >= 0, r
        if r["stage"] == "main":
            seen[(r["task"], r["ordering"], r["buffer"])].add(r["strategy"])
        epochs[(r["stage"], r["task"], r["ordering"], r["buffer"], r["block_size"],
                r["strategy"], r["seed"])].append(int(r["epoch"]))
    assert set(seen) == {(t, o, b) for t in TASKS for o in ORDERINGS for b in BUFFERS}
    for setting, strategies in seen.items():
        assert strategies == STRATEGIES, setting
    for run, es in epochs.items():
        assert es == [1, 2], run
    assert any(r["stage"] == "sweep" and r["block_size"] == "4" for r in rows)

    # tuples per epoch: N for every strategy, 2(N - R) + R > N for mrs
    n_rows = {name: d["rows"] for name, d in report["datasets"].items()}
    for run in report["runs"]:
        n = n_rows[{"fashion-binary": {"clustered": "clustered-binary", "feature": "feature"},
                    "fashion-10": {"clustered": "clustered-10", "feature": "feature"}}
                   [run["task"]][run["ordering"]]]
        for h in run["history"]:
            if run["strategy"] == "mrs":
                assert n < h["tuples"] < 2 * n, run["model_name"]
            else:
                assert h["tuples"] == n, run["model_name"]
        assert run["final_validation_score"] == run["history"][-1]["validation_score"]

    # the summary has one entry per setting and strategy, with sane accuracies
    main = [s for s in report["summary"] if s["stage"] == "main"]
    assert len(main) == len(TASKS) * len(ORDERINGS) * len(BUFFERS) * len(STRATEGIES)
    for s in main:
        assert 0.0 <= s["final_accuracy_min"] <= s["final_accuracy_mean"] \
            <= s["final_accuracy_max"] <= 1.0, s
    # a trained model beats chance on the held-out images after a full shuffle
    for s in main:
        if s["strategy"] == "shuffle_once":
            assert s["final_accuracy_mean"] > (0.8 if s["task"] == "fashion-binary" else 0.5), s

    # acceptance checks computed for both statements
    kinds = {c["check"] for c in report["acceptance"]}
    assert kinds == {"corgipile within 0.5 pp of shuffle_once",
                     "worse than shuffle_once on clustered data"}
    md = (out / "convergence-results.md").read_text()
    for strategy in STRATEGIES:
        assert f"| {strategy} |" in md

    # the feeding order of one epoch, per strategy (Fig. 3 style): every row
    # once, except mrs; a full shuffle mixes the classes better than no shuffle
    views = {(v["strategy"], v["block_size"]): v for v in report["feeding_order"]}
    assert set(views) >= {(s, None) for s in STRATEGIES - {"epoch_shuffle"}}
    n = report["datasets"]["clustered-10"]["rows"]
    for (strategy, _), v in views.items():
        assert (v["rows_fed"] > n) if strategy == "mrs" else (v["rows_fed"] == n), v["strategy"]
        for column in zip(*v["class_share"]):
            assert abs(sum(column) - 1) < 1e-3
    assert views[("shuffle_once", None)]["tv_from_uniform"] < views[("no_shuffle", None)]["tv_from_uniform"]

    # one PNG per task, ordering and buffer, plus the block-size sweep and the order
    pngs = sorted((out / "img").glob("convergence-*.png"))
    expected = {f"convergence-{t}-{o}-{b.replace('%', 'pct')}.png"
                for t in TASKS for o in ORDERINGS for b in BUFFERS} | {
                    "convergence-block-size.png", "convergence-order.png"}
    assert {p.name for p in pngs} == expected
    for p in pngs:
        data = p.read_bytes()
        assert len(data) > 10_000, p
        assert data[:8] == PNG_MAGIC, p
    assert {f["file"] for f in report["figures"]} == {f"img/{name}" for name in expected}


GRAB_DATASETS = {"synthetic-clustered", "synthetic-feature", "fashion-binary", "fashion-10"}


def _quick_study(mode, dsn, out):
    """Run the script's --grab or --parallel mode, --quick, into out."""
    if not DATA.is_dir():
        pytest.skip(f"{DATA} missing (Debian package dataset-fashion-mnist)")
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), mode, "--quick", "--dsn", dsn, "--output-dir", str(out)],
        capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return out


@pytest.fixture
def grab_study(dsn, tmp_path):
    return _quick_study("--grab", dsn, tmp_path)


def test_grab_quick_run_writes_complete_results(grab_study):
    """--grab --quick: every dataset x rate x strategy, each epoch's gap
    f(w) - f* (never below 0 beyond the solver's tolerance) and held-out
    accuracy, the epoch-time comparison and the issue's three goals."""
    out = grab_study
    report = json.loads((out / "convergence-grab.json").read_text())
    assert report["protocol"]["epochs"] == 2
    assert report["protocol"]["seeds"] == [1]
    assert report["protocol"]["quick"] is True
    assert set(report["datasets"]) == GRAB_DATASETS
    for name, d in report["datasets"].items():
        assert d["grad_norm"] < 1e-5, (name, d)

    with open(out / "convergence-grab.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    epochs = defaultdict(list)
    for r in rows:
        gap = float(r["gap"])
        assert math.isfinite(gap) and gap > -1e-7, r
        assert 0.0 <= float(r["validation_score"]) <= 1.0, r
        epochs[(r["dataset"], r["rate"], r["strategy"])].append(int(r["epoch"]))
    # every dataset at a constant and a decaying rate (fashion-10 also at a
    # second constant rate), each with the three strategies
    settings = {(d, rate) for d, rate, _ in epochs}
    assert {(d, rate) for d in GRAB_DATASETS for rate in ("constant", "decaying")} <= settings
    assert set(epochs) == {(d, rate, s) for d, rate in settings
                           for s in ("shuffle_once", "corgipile", "grab")}
    assert all(es == [1, 2] for es in epochs.values()), epochs

    summary = report["summary"]
    assert {t["dataset"] for t in summary["timing"]} == GRAB_DATASETS
    assert all(t["corgipile_epoch_s"] > 0 and t["grab_epoch_s"] > 0 for t in summary["timing"])
    goals = {c["goal"].split(" (")[0] for c in summary["checks"]}
    assert len(goals) == 3, goals
    md = (out / "convergence-grab.md").read_text()
    assert "grab / corgipile" in md and "Goals" in md


PAR_DATASETS = {"synthetic-clustered", "fashion-binary"}
PAR_ARMS = {"corgipile N=1", "corgipile N=2", "CD-GraB N=2", "ID-GraB N=2"}


@pytest.fixture
def parallel_study(dsn, tmp_path):
    return _quick_study("--parallel", dsn, tmp_path)


def test_parallel_quick_run_writes_complete_results(parallel_study):
    """--parallel --quick: on both label-clustered tables, corgipile at N = 1
    and 2, CD-GraB and ID-GraB at N = 2, each epoch's gap f(w) - f* and
    held-out accuracy, and the issue's accuracy goal per setting."""
    out = parallel_study
    report = json.loads((out / "convergence-parallel.json").read_text())
    assert report["protocol"]["epochs"] == 2
    assert report["protocol"]["seeds"] == [1]
    assert report["protocol"]["quick"] is True
    assert set(report["datasets"]) == PAR_DATASETS
    for name, d in report["datasets"].items():
        assert d["grad_norm"] < 1e-5, (name, d)

    with open(out / "convergence-parallel.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    epochs = defaultdict(list)
    for r in rows:
        gap = float(r["gap"])
        assert math.isfinite(gap) and gap > -1e-7, r
        assert 0.0 <= float(r["validation_score"]) <= 1.0, r
        assert int(r["workers"]) == (1 if r["arm"].endswith("N=1") else 2), r
        epochs[(r["dataset"], r["rate"], r["arm"])].append(int(r["epoch"]))
    assert set(epochs) == {(d, "constant", a) for d in PAR_DATASETS for a in PAR_ARMS}
    assert all(es == [1, 2] for es in epochs.values()), epochs

    # the trainings at N = 2 differ from N = 1's, and the two GraB orders differ
    final = {(r["dataset"], r["arm"]): float(r["gap"]) for r in rows if r["epoch"] == "2"}
    for d in PAR_DATASETS:
        assert final[(d, "corgipile N=2")] != final[(d, "corgipile N=1")]
        assert final[(d, "CD-GraB N=2")] != final[(d, "ID-GraB N=2")]

    checks = report["summary"]["checks"]
    assert {(c["dataset"], c["rate"]) for c in checks} == {(d, "constant") for d in PAR_DATASETS}
    md = (out / "convergence-parallel.md").read_text()
    assert "CD-GraB N=2" in md and "Goal" in md
