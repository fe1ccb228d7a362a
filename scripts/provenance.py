"""Where a figure comes from: the line a benchmark script prints above its
results, and that the docs carry with them (date, commit, machine, load).

The machine is shared: the load average says how much else ran, and a
commit with uncommitted changes is marked, since its figures then belong
to no commit.
"""

from __future__ import annotations

import datetime
import os
import platform
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def commit() -> str:
    """The checkout's short commit, '+ changes' when the tracked files
    differ from it, '?' outside a git checkout."""
    try:
        head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
                              capture_output=True, text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(ROOT), "diff", "--quiet", "HEAD", "--"],
                               capture_output=True).returncode != 0
    except (OSError, subprocess.CalledProcessError):
        return "?"
    return head + (" + changes" if dirty else "")


def load() -> str:
    """The 1, 5 and 15 minute load averages."""
    return " / ".join(f"{x:.1f}" for x in os.getloadavg())


def machine() -> str:
    return f"{platform.machine()}, {os.cpu_count()} cores"


def run_line(server: str | None = None) -> str:
    """'Run 2026-11-28 01:02 UTC, commit abc1234, x86_64, 2 cores, load
    average 1.2 / 1.5 / 2.0 (1, 5, 15 min)[, PostgreSQL 15.x]': printed at
    the start and the end of a run, so the load on both sides is known."""
    now = datetime.datetime.now(datetime.timezone.utc)
    return (f"Run {now:%Y-%m-%d %H:%M} UTC, commit {commit()}, {machine()}, load average "
            f"{load()} (1, 5, 15 min)" + (f", PostgreSQL {server}" if server else ""))


if __name__ == "__main__":
    # for shell scripts: python3 scripts/provenance.py
    print(run_line())
