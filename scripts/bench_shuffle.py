#!/usr/bin/env python3
"""corgipile.shuffle_table against CREATE TABLE AS ... ORDER BY random().

Builds a table several times larger than work_mem and times, alternately
and on the same server, the two ways of writing a fully shuffled copy with
the same work_mem.  Wall seconds, and the backend's CPU seconds when the server
runs on this machine (on a shared machine they vary less), with the ratio
of each round (the two methods back to back) as median (min-max).  Prints
a Markdown table under its run line (and --output writes it).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import psycopg

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import provenance
from bench_epochs import backend_cpu


def timed(conn: psycopg.Connection, query: str) -> tuple[float, float | None]:
    """Wall and backend CPU seconds of a statement (CPU None if unknown)."""
    c0 = backend_cpu(conn)
    t0 = time.perf_counter()
    conn.execute(query)
    wall = time.perf_counter() - t0
    c1 = backend_cpu(conn)
    return wall, (None if c0 is None or c1 is None else c1 - c0)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dsn", default="")
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--dims", type=int, default=28)
    parser.add_argument("--work-mem", default="16MB")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--output")
    args = parser.parse_args()
    src = f"shuffle_src_{args.rows}_{args.dims}"
    start = provenance.run_line()
    print(start, file=sys.stderr, flush=True)

    with psycopg.connect(args.dsn, autocommit=True) as conn:
        # the benchmark database holds nothing of value: start from the installed version
        conn.execute("DROP EXTENSION IF EXISTS corgipile CASCADE")
        conn.execute("CREATE EXTENSION corgipile")
        conn.execute("SET max_parallel_workers_per_gather = 0")
        if not conn.execute("SELECT count(*) FROM pg_class WHERE relname = %s", (src,)).fetchone()[0]:
            print(f"generating {args.rows:,} rows ...", file=sys.stderr, flush=True)
            conn.execute(
                f"CREATE TABLE {src} AS SELECT i AS id, i % 2 AS label, "
                f"(SELECT array_agg(random() + 0 * j) FROM generate_series(1, {args.dims}) AS j)"
                f"::float8[] AS features FROM generate_series(1, {args.rows}) AS i")
            conn.execute(f"VACUUM ANALYZE {src}")
        conn.execute(f"SET work_mem = '{args.work_mem}'")
        size, wm = conn.execute("SELECT pg_size_pretty(pg_table_size(%s)), current_setting('work_mem')",
                                (src,)).fetchone()
        ours, theirs = [], []
        for i in range(args.repeat):
            for name in ("shuf_ours", "shuf_sort"):
                conn.execute(f"DROP TABLE IF EXISTS {name}")
            ours.append(timed(conn, f"SELECT corgipile.shuffle_table('{src}', 'shuf_ours', seed => {i})"))
            theirs.append(timed(conn, f"CREATE TABLE shuf_sort AS SELECT * FROM {src} ORDER BY random()"))
            print(f"run {i + 1}: shuffle_table {ours[-1][0]:.2f} s, "
                  f"ORDER BY random() {theirs[-1][0]:.2f} s", file=sys.stderr, flush=True)
        for name in ("shuf_ours", "shuf_sort"):
            conn.execute(f"DROP TABLE IF EXISTS {name}")

    def cell(xs: list[float]) -> str:
        return f"{statistics.median(xs):.2f} ({min(xs):.2f}-{max(xs):.2f})"

    def speedup(k: int) -> str:
        """ORDER BY random() / shuffle_table, per round."""
        if any(o[k] is None or t[k] is None for o, t in zip(ours, theirs, strict=False)):
            return "-"
        return cell([t[k] / o[k] for o, t in zip(ours, theirs, strict=False)])

    cpu_known = all(x[1] is not None for x in ours + theirs)
    text = "\n".join([
        f"{start}; at the end: load average {provenance.load()}.",
        "",
        f"Table: {args.rows:,} rows x {args.dims} float8 features, {size}; work_mem {wm}; "
        f"{args.repeat} rounds of the two methods back to back; median (min-max).",
        "",
        "| method | wall seconds | CPU seconds |",
        "|---|---:|---:|",
        f"| `CREATE TABLE ... AS SELECT * ... ORDER BY random()` | {cell([t[0] for t in theirs])} "
        f"| {cell([t[1] for t in theirs]) if cpu_known else '-'} |",
        f"| `corgipile.shuffle_table(src, dst)` | {cell([o[0] for o in ours])} "
        f"| {cell([o[1] for o in ours]) if cpu_known else '-'} |",
        "",
        f"shuffle_table is {speedup(0)} times as fast as ORDER BY random() in wall seconds, "
        f"{speedup(1)} in CPU seconds (per round).",
    ])
    print(text)
    if args.output:
        with open(args.output, "w") as f:
            f.write(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
