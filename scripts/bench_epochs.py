#!/usr/bin/env python3
"""Per-epoch cost of each shuffle, as ratios to a plain scan, in one run.

Generates a table larger than shared_buffers (default 2M rows x 28 float8
features, about 600 MB), then measures on the same server, one after the
other:
  - a plain sequential scan reading the same columns (label, features);
  - an epoch of corgipile, block_only and no_shuffle, each single- and
    double-buffered;
  - predicting every row with a stored model, against the same scan.
Prints a Markdown table of seconds and ratios; --output writes it to a file.
The figures are ratios measured in one run, so they hold on a noisy machine;
the absolute seconds are only for orientation.  When the server runs on this
machine, the backend's CPU seconds (user + system, from /proc, the helper
thread of double buffering included) are reported too: on a machine shared
with other work they vary far less than wall-clock seconds.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import psycopg

SCAN = ("SELECT count(*), sum(label), sum(array_length(features, 1)) FROM {t} "
        "WHERE label IS NOT NULL AND features IS NOT NULL")


def backend_cpu(conn: psycopg.Connection) -> float | None:
    """CPU seconds the connection's backend has used, if its /proc entry is
    readable (the server runs here)."""
    try:
        with open(f"/proc/{conn.info.backend_pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


CPU: list[float] = []  # CPU seconds of the last timed() call, if known


def timed(conn: psycopg.Connection, query: str, params=None) -> float:
    c0 = backend_cpu(conn)
    t0 = time.perf_counter()
    conn.execute(query, params).fetchall()
    elapsed = time.perf_counter() - t0
    c1 = backend_cpu(conn)
    CPU[:] = [] if c0 is None or c1 is None else [c1 - c0]
    return elapsed


def ensure_table(conn: psycopg.Connection, table: str, rows: int, dims: int) -> None:
    exists = conn.execute("SELECT count(*) FROM pg_class WHERE relname = %s", (table,)).fetchone()[0]
    if exists:
        n = conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
        if n == rows:
            return
        conn.execute(f"DROP TABLE {table}")
    print(f"generating {rows:,} rows x {dims} features ...", file=sys.stderr, flush=True)
    conn.execute("SELECT setseed(0.5)")
    # label-clustered, as tables often are; features carry the label signal
    conn.execute(
        f"CREATE TABLE {table} AS SELECT i AS id, "
        f"CASE WHEN i <= {rows // 2} THEN 1 ELSE -1 END AS label, "
        f"(SELECT array_agg(random() * 2 - 1 + CASE WHEN i <= {rows // 2} THEN 0.3 ELSE -0.3 END "
        f"                  + 0 * j) FROM generate_series(1, {dims}) AS j)::float8[] AS features "
        f"FROM generate_series(1, {rows}) AS i")
    conn.execute(f"VACUUM ANALYZE {table}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dsn", default="")
    parser.add_argument("--rows", type=int, default=2_000_000)
    parser.add_argument("--dims", type=int, default=28)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--repeat", type=int, default=3, help="plain scans to take the median of")
    parser.add_argument("--output", help="also write the Markdown table to this file")
    args = parser.parse_args()
    table = f"bench_{args.rows}_{args.dims}"

    with psycopg.connect(args.dsn, autocommit=True) as conn:
        # the benchmark database holds nothing of value: start from the installed version
        conn.execute("DROP EXTENSION IF EXISTS corgipile CASCADE")
        conn.execute("CREATE EXTENSION corgipile")
        conn.execute("SET max_parallel_workers_per_gather = 0")  # training is one process
        conn.execute("SET corgipile.progress = off")
        ensure_table(conn, table, args.rows, args.dims)
        size = conn.execute("SELECT pg_size_pretty(pg_table_size(%s)), "
                            "current_setting('shared_buffers')", (table,)).fetchone()
        timed(conn, SCAN.format(t=table))  # warm the OS cache like every later run
        scans, scan_cpu = [], []
        for _ in range(args.repeat):
            scans.append(timed(conn, SCAN.format(t=table)))
            scan_cpu += CPU
        scan = statistics.median(scans)
        scan_cpu = statistics.mean(scan_cpu) if scan_cpu else None

        results = []
        for shuffle in ("no_shuffle", "block_only", "corgipile"):
            for double in (False, True):
                name = f"bench_{shuffle}_{'db' if double else 'sb'}"
                conn.execute("DELETE FROM corgipile.models WHERE model_name = %s", (name,))
                c0 = backend_cpu(conn)
                rows = conn.execute(
                    "SELECT seconds FROM corgipile.train(%s, 'svm', model_name => %s, "
                    "shuffle => %s, double_buffer => %s, max_epoch_num => %s, seed => 1)",
                    (table, name, shuffle, double, args.epochs)).fetchall()
                c1 = backend_cpu(conn)
                epoch = statistics.median(r[0] for r in rows)
                cpu = None if c0 is None or c1 is None else (c1 - c0) / args.epochs
                results.append((shuffle, double, epoch, cpu))
                print(f"{shuffle:>10} {'double' if double else 'single'}: {epoch:.3f} s/epoch",
                      file=sys.stderr, flush=True)
        preds, pred_cpu = [], []
        for _ in range(args.repeat):
            preds.append(timed(conn, f"SELECT count(corgipile.predict('bench_corgipile_db', "
                                     f"features)) FROM {table}"))
            pred_cpu += CPU
        pred = statistics.median(preds)
        pred_cpu = statistics.mean(pred_cpu) if pred_cpu else None

    def cpu_cells(cpu):
        if scan_cpu is None or cpu is None:
            return " - | - |"
        return f" {cpu:.3f} | {cpu / scan_cpu:.2f} |"

    lines = [
        f"Table: {args.rows:,} rows x {args.dims} float8 features, {size[0]} "
        f"(shared_buffers {size[1]}), stored clustered by label; warm OS cache; "
        f"median of {args.epochs} epochs (svm, per-tuple) and of {args.repeat} scans.",
        "",
        "| what | buffering | seconds | ratio to plain scan | CPU seconds | CPU ratio |",
        "|---|---|---:|---:|---:|---:|",
        f"| plain scan of label, features | - | {scan:.3f} | 1.00 |{cpu_cells(scan_cpu)}",
    ]
    for shuffle, double, epoch, cpu in results:
        lines.append(f"| epoch, `{shuffle}` | {'double' if double else 'single'} | "
                     f"{epoch:.3f} | {epoch / scan:.2f} |{cpu_cells(cpu)}")
    lines.append(f"| `predict()` on every row | - | {pred:.3f} | {pred / scan:.2f} |{cpu_cells(pred_cpu)}")
    nosb = next(e for s, d, e, _ in results if s == "no_shuffle" and d)
    cpdb = next(e for s, d, e, _ in results if s == "corgipile" and d)
    lines += ["", f"CorgiPile (double-buffered) epoch / No-Shuffle (double-buffered) epoch: "
                  f"{cpdb / nosb:.2f}"]
    text = "\n".join(lines)
    print(text)
    if args.output:
        with open(args.output, "w") as f:
            f.write(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
