#!/usr/bin/env python3
"""How long a training takes to answer a cancel, per shuffle strategy.

The tests check that a cancel ends a training with nothing stored; how
fast it does is this benchmark's figure, since a bound in seconds would
make a test depend on the machine's load.  For each strategy, single- and
double-buffered, a training that would run for a million epochs is
started on a 150,000-row table (the tests' long table), and once the
server reports its second epoch (a progress NOTICE: later epochs read
cached rows), pg_cancel_backend() is sent from another session; the
latency is from that call's return to the training's error reaching the
client.  The rounds interleave the strategies; the report gives the
median and the largest latency of each.

  .venv/bin/python scripts/bench_cancel.py --dsn "dbname=bench" --rounds 5 --output out.md
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import re
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

import psycopg

from corgipile.strategies import ALL

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_epochs import report

TABLE = ("CREATE TABLE IF NOT EXISTS bench_cancel AS SELECT CASE WHEN g % 2 = 0 THEN 1 ELSE -1 "
         "END AS label, ARRAY[g % 2, (g % 13) / 13.0, (g % 7) / 7.0, 1, 0, 0, 0, 0, 0, 0]"
         "::float8[] AS features FROM generate_series(1, 150000) g")
# the strategies with a helper thread that trains (double_buffer => true)
DOUBLE = ("corgipile", "epoch_shuffle", "grab")


def one_cancel(dsn: str, shuffle: str, double: bool) -> float:
    """Seconds from pg_cancel_backend() to the training's error."""
    session = psycopg.connect(dsn, autocommit=True)
    second_epoch = threading.Event()
    done = threading.Event()
    outcome: dict = {}

    def notice(diag) -> None:
        found = re.search(r" epoch=(\d+)/", diag.message_primary or "")
        if found and int(found.group(1)) >= 2:
            second_epoch.set()

    def run() -> None:
        try:
            session.execute("SELECT * FROM corgipile.train('bench_cancel', 'svm', shuffle => %s, "
                            "model_name => 'bench_cancelled', max_epoch_num => 1000000, "
                            "double_buffer => %s)", (shuffle, double))
            outcome["error"] = None
        except psycopg.Error as exc:
            outcome["error"] = exc
        outcome["done"] = time.perf_counter()
        done.set()

    session.execute("SET corgipile.progress = on")
    session.add_notice_handler(notice)
    pid = session.info.backend_pid
    worker = threading.Thread(target=run)
    worker.start()
    if not second_epoch.wait(300):
        raise SystemExit(f"{shuffle}: no second epoch within 300 s")
    with psycopg.connect(dsn, autocommit=True) as other:
        other.execute("SELECT pg_cancel_backend(%s)", (pid,))
        sent = time.perf_counter()
    worker.join()
    session.close()
    if not isinstance(outcome["error"], psycopg.errors.QueryCanceled):
        raise SystemExit(f"{shuffle}: the training ended with {outcome['error']!r}")
    return outcome["done"] - sent


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dsn", default="", help="libpq connection string (default: PG*)")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--output", help="also write the Markdown table here")
    args = parser.parse_args()

    with psycopg.connect(args.dsn, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS corgipile")
        conn.execute(TABLE)
        conn.execute("VACUUM ANALYZE bench_cancel")
    arms = [(s, False) for s in ALL] + [(s, True) for s in DOUBLE]
    seconds: dict[tuple[str, bool], list[float]] = {arm: [] for arm in arms}
    for r in range(args.rounds):
        # rotate the order each round, so no arm always follows the same one
        for arm in arms[r % len(arms):] + arms[:r % len(arms)]:
            seconds[arm].append(one_cancel(args.dsn, *arm))
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True, cwd=Path(__file__).resolve().parents[1]).stdout.strip()
    lines = [f"Run {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC, commit "
             f"{commit}, {platform.machine()} ({os.cpu_count()} cores, load average "
             f"{os.getloadavg()[0]:.1f} at the end); {args.rounds} cancels per arm, sent after "
             "the second epoch of a 150,000-row training.", "",
             "| strategy | double_buffer | median (ms) | largest (ms) |", "|---|---|---|---|"]
    for (shuffle, double), xs in seconds.items():
        lines.append(f"| {shuffle} | {'on' if double else 'off'} | "
                     f"{1000 * statistics.median(xs):.1f} | {1000 * max(xs):.1f} |")
    report(lines, args.output)
    return 0


if __name__ == "__main__":
    sys.exit(main())
