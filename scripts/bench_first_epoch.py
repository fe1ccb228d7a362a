#!/usr/bin/env python3
"""The first epoch of a default training against a scan, warm and cold, and
the heap reads it takes (docs/engine-benchmark.md, "The first epoch at the
cost of one scan").

On bench_epochs.py's table (--rows x --dims float8, label-clustered), in one
run, rounds interleaved, and for each library given with --lib (the
installed corgipile.so is replaced between connections, atomically, so a
running backend keeps the one it loaded; the last one given stays
installed):

  warm (OS cache and the table's pages in memory as far as they fit):
    - count(*) and the two-feature scan SELECT sum(features[1] + features[D]);
    - the first epoch of a default training (every argument but the seed and
      max_epoch_num left to its default: corgipile, standardized,
      double-buffered): CPU of max_epoch_num => 2 less a later epoch, which
      is (CPU of 4 epochs - CPU of 2) / 2;
    - a later epoch;
  cold (--cold, root, server on this machine; the block cache lowered to
  --cache so that the table is larger than it):
    - count(*) after dropping the OS page cache;
    - a one-epoch default training after dropping it, and a one-epoch
      no_shuffle training with standardize => 'off';
    - the heap pages each fetched (pg_stat_get_xact_blocks_fetched), as a
      multiple of the table's pages: how many times the heap was read;
    the cold queries' order rotates each round, and --settle waits after
    dropping the cache (a VM that hands freed memory back to its host
    makes a query that allocates right after a drop cheaper than one that
    allocates seconds later; waiting gives every query the same state).

CPU seconds are the backend's (user + system from /proc, the helper thread
included): on a machine shared with other work they vary far less than
wall seconds.  Prints Markdown; --output writes it to a file too.

  .venv/bin/python scripts/bench_first_epoch.py --rows 2000000 --cold \\
      --lib before=/tmp/corgipile-main.so --lib after=/tmp/corgipile-new.so
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import time

import psycopg

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import provenance
from bench_epochs import backend_cpu, drop_os_cache, ensure_table, report


def install_lib(path: str, pkglibdir: str) -> None:
    """Replace corgipile.so by path, atomically (a new inode)."""
    dst = os.path.join(pkglibdir, "corgipile.so")
    tmp = dst + ".bench-tmp"
    shutil.copyfile(path, tmp)
    os.chmod(tmp, 0o755)
    os.replace(tmp, dst)


def connect(dsn: str) -> psycopg.Connection:
    conn = psycopg.connect(dsn, autocommit=True)
    conn.execute("SET max_parallel_workers_per_gather = 0")
    conn.execute("SET corgipile.progress = off")
    return conn


def run(conn, query: str, params=None):
    c0 = backend_cpu(conn)
    t0 = time.perf_counter()
    rows = conn.execute(query, params).fetchall()
    wall = time.perf_counter() - t0
    return rows, wall, backend_cpu(conn) - c0


def train(conn, table: str, epochs: int, extra: str = ""):
    conn.execute("DELETE FROM corgipile.models WHERE model_name = 'bfe'")
    return run(conn, f"SELECT epoch, seconds, loss FROM corgipile.train('{table}', 'svm', "
                     f"model_name => 'bfe', seed => 1, max_epoch_num => {epochs}{extra})")


def fetched(conn, table: str, query: str):
    """Wall, CPU and heap pages fetched by query, in one transaction."""
    conn.execute("BEGIN")
    b0 = conn.execute(f"SELECT pg_stat_get_xact_blocks_fetched('{table}'::regclass)").fetchone()[0]
    rows, wall, cpu = run(conn, query)
    b1 = conn.execute(f"SELECT pg_stat_get_xact_blocks_fetched('{table}'::regclass)").fetchone()[0]
    conn.execute("COMMIT")
    return wall, cpu, b1 - b0, rows


def loadavg() -> str:
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dsn", default="")
    parser.add_argument("--rows", type=int, default=2_000_000)
    parser.add_argument("--dims", type=int, default=28)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--lib", action="append", default=[],
                        help="NAME=PATH of a corgipile.so to measure (repeatable)")
    parser.add_argument("--cold", action="store_true")
    parser.add_argument("--cache", default="128MB",
                        help="corgipile.block_cache_size for the cold runs")
    parser.add_argument("--settle", type=float, default=0.0,
                        help="seconds to wait after dropping the OS cache before each cold "
                        "query (on a VM that returns freed memory to its host, so that "
                        "every query finds the same memory state)")
    parser.add_argument("--gather", help="a built scripts/bench_gather.c, run each round: "
                        "the random-gather floor of a later corgipile epoch (2M x 28 shapes)")
    parser.add_argument("--output")
    args = parser.parse_args()
    table = f"bench_{args.rows}_{args.dims}"
    libs = [tuple(x.split("=", 1)) for x in args.lib] or [("installed", None)]
    start = provenance.run_line()
    print(start, file=sys.stderr, flush=True)
    pkglibdir = None
    if libs[0][1] is not None:
        pkglibdir = subprocess.run([os.environ.get("PG_CONFIG", "pg_config"), "--pkglibdir"],
                                   capture_output=True, text=True, check=True).stdout.strip()

    with connect(args.dsn) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS corgipile")
        ensure_table(conn, table, args.rows, args.dims)
        pages, size = conn.execute(
            "SELECT relpages, pg_size_pretty(pg_table_size(%s)) FROM pg_class "
            "WHERE relname = %s", (table, table)).fetchone()
    scan_q = f"SELECT sum(features[1] + features[{args.dims}]) FROM {table}"
    count_q = f"SELECT count(*) FROM {table}"
    res: dict[str, dict[str, list]] = {name: {} for name, _ in libs}
    loads = []

    def add(name, key, value):
        res[name].setdefault(key, []).append(value)

    for rnd in range(args.rounds):
        for name, path in libs:
            if path is not None:
                install_lib(path, pkglibdir)
            loads.append(loadavg())
            with connect(args.dsn) as conn:
                run(conn, scan_q)  # warm, and the library loaded
                train(conn, table, 1)
                for q, key in ((count_q, "count"), (scan_q, "scan")):
                    _, wall, cpu = run(conn, q)
                    add(name, key, cpu)
                _, _, two = train(conn, table, 2)
                _, _, four = train(conn, table, 4)
                _, _, two_b = train(conn, table, 2)
                later = (four - (two + two_b) / 2) / 2
                add(name, "first", (two + two_b) / 2 - later)
                add(name, "later", later)
                for q, key in ((scan_q, "scan"),):
                    add(name, key, run(conn, q)[2])
                if args.gather and name == libs[0][0]:
                    out = subprocess.run([args.gather, "5"], capture_output=True, text=True,
                                         check=True).stdout
                    # "... shuffled min X median Y, ..." ns a row of cp_model_train
                    shuffled = float(out.split("shuffled min")[1].split("median")[1].split(",")[0])
                    res.setdefault("gather", []).append(shuffled * args.rows / 1e9)
                if args.cold:
                    conn.execute(f"SET corgipile.block_cache_size = '{args.cache}'")
                    cold = [
                        ("cold count", count_q),
                        ("cold default", f"SELECT epoch FROM corgipile.train('{table}', 'svm', "
                                         "model_name => 'bfe_cold', seed => 1, max_epoch_num => 1)"),
                        ("cold default 3 epochs",
                         f"SELECT epoch FROM corgipile.train('{table}', 'svm', "
                         "model_name => 'bfe_cold', seed => 1, max_epoch_num => 3)"),
                        ("cold no_shuffle off",
                         f"SELECT epoch FROM corgipile.train('{table}', 'svm', "
                         "model_name => 'bfe_cold', seed => 1, max_epoch_num => 1, "
                         "shuffle => 'no_shuffle', standardize => 'off')"),
                    ]
                    # a different query first each round: none always follows
                    # the same one (what ran before changes the memory state)
                    k = rnd % len(cold)
                    for key, q in cold[k:] + cold[:k]:
                        conn.execute("DELETE FROM corgipile.models WHERE model_name = 'bfe_cold'")
                        if not drop_os_cache():
                            print("cold runs need root", file=sys.stderr)
                            return 1
                        time.sleep(args.settle)
                        wall, cpu, blocks, _ = fetched(conn, table, q)
                        add(name, key, (wall, cpu, blocks / pages))
                    conn.execute("RESET corgipile.block_cache_size")
            print(f"round {rnd + 1} {name} done (load {loads[-1]})", file=sys.stderr, flush=True)

    us = 1e6 / args.rows
    lines = [f"{start}; at the end: load average {provenance.load()}.", "",
             f"Table {table}: {args.rows:,} rows x {args.dims} float8, {size} ({pages} pages); "
             f"{args.rounds} rounds, libraries interleaved; load average during the rounds "
             f"{loads[0]} .. {loads[-1]} (max 1-min {max(float(x.split()[0]) for x in loads):.1f}).",
             "", "Warm: CPU seconds of the backend, mean over rounds (min-max), and µs a row.", "",
             "| library | count(*) | two-feature scan | first epoch, default training | "
             "first / scan | later epoch |", "|---|---:|---:|---:|---:|---:|"]

    def cell(xs):
        return (f"{statistics.mean(xs):.3f} ({min(xs):.3f}-{max(xs):.3f}); "
                f"{statistics.mean(xs) * us:.3f} µs")

    for name, _ in libs:
        r = res[name]
        ratio = [f / s for f, s in zip(r["first"], r["scan"][::2], strict=False)]
        lines.append(f"| {name} | {cell(r['count'])} | {cell(r['scan'])} | {cell(r['first'])} | "
                     f"{statistics.mean(ratio):.2f} ({min(ratio):.2f}-{max(ratio):.2f}) | "
                     f"{cell(r['later'])} |")
    if "gather" in res:
        g = res["gather"]
        lines += ["", f"Random-gather floor (scripts/bench_gather.c: cp_model_train on the "
                  f"cached rows' shapes, shuffled, outside the server, median of 5 epochs), "
                  f"seconds for {args.rows:,} rows: {statistics.mean(g):.3f} "
                  f"({min(g):.3f}-{max(g):.3f}); later epoch / floor: " + ", ".join(
                      f"{name} {statistics.mean(res[name]['later']) / statistics.mean(g):.2f}"
                      for name, _ in libs)]
    if args.cold:
        lines += ["", f"Cold (OS page cache dropped before each, then {args.settle:g} s of settling, "
                  f"the queries' order rotated each round; corgipile.block_cache_size = "
                  f"{args.cache}, so the table does not fit): wall s / CPU s / heap reads "
                  "(pages fetched / table pages), median over rounds; throughput as a "
                  "fraction of count(*)'s in the same round.", "",
                  "| library | what | wall s | CPU s | CPU µs a row | heap reads | "
                  "throughput / count(*) |", "|---|---|---:|---:|---:|---:|---:|"]
        for name, _ in libs:
            r = res[name]
            for key in ("cold count", "cold default", "cold default 3 epochs",
                        "cold no_shuffle off"):
                walls = [w for w, _, _ in r[key]]
                cpus = [c for _, c, _ in r[key]]
                reads = [b for _, _, b in r[key]]
                tput = [cw / w for (cw, _, _), (w, _, _) in zip(r["cold count"], r[key], strict=False)]
                lines.append(f"| {name} | {key} | {statistics.median(walls):.2f} | "
                             f"{statistics.median(cpus):.2f} | "
                             f"{statistics.median(cpus) * us:.2f} | "
                             f"{statistics.median(reads):.2f} | "
                             f"{statistics.median(tput):.2f} ({min(tput):.2f}-{max(tput):.2f}) |")
    report(lines, args.output)
    return 0


if __name__ == "__main__":
    sys.exit(main())
