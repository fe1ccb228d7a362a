#!/usr/bin/env python3
"""corgipile.shuffle_table against CREATE TABLE AS ... ORDER BY random().

Builds a table several times larger than work_mem and times, alternately
and on the same server, the two ways of writing a fully shuffled copy with
the same work_mem.  Prints a Markdown table (and --output writes it).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

import psycopg


def timed(conn: psycopg.Connection, query: str) -> float:
    t0 = time.perf_counter()
    conn.execute(query)
    return time.perf_counter() - t0


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
            print(f"run {i + 1}: shuffle_table {ours[-1]:.2f} s, ORDER BY random() {theirs[-1]:.2f} s",
                  file=sys.stderr, flush=True)
        for name in ("shuf_ours", "shuf_sort"):
            conn.execute(f"DROP TABLE IF EXISTS {name}")
    a, b = statistics.median(ours), statistics.median(theirs)
    text = "\n".join([
        f"Table: {args.rows:,} rows x {args.dims} float8 features, {size}; work_mem {wm}; "
        f"median of {args.repeat} alternating runs.",
        "",
        "| method | seconds | ratio |",
        "|---|---:|---:|",
        f"| `CREATE TABLE ... AS SELECT * ... ORDER BY random()` | {b:.2f} | 1.00 |",
        f"| `corgipile.shuffle_table(src, dst)` | {a:.2f} | {a / b:.2f} |",
        "",
        f"shuffle_table is {b / a:.1f}x as fast as ORDER BY random().",
    ])
    print(text)
    if args.output:
        with open(args.output, "w") as f:
            f.write(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
