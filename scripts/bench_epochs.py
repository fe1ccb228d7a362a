#!/usr/bin/env python3
"""Per-epoch cost of each shuffle, as ratios to a plain scan, in one run.

Generates a label-clustered table (--rows, default 2M, x --dims float8
features: about 560 MB, larger than the default shared_buffers), then
measures on the same server, one after the other:
  - a plain scan reading every row's features,
    SELECT sum(features[1] + features[28]), taken between the other runs;
  - epochs of no_shuffle, block_only and corgipile, each single- and
    double-buffered: the first epoch of a training of several, first pass
    included (the pass, or else the epoch, reads the heap and fills the
    block cache) and the later ones (which read the cached blocks);
  - predict() on every row with a stored model, standardized (the
    default) and not (standardize => 'off');
  - with --cold (root, server on this machine): a plain scan and a
    corgipile epoch per block size, with and without prefetch, each after
    dropping the OS page cache.
Prints a Markdown table of seconds and ratios; --output writes it to a file.
The figures are ratios measured in one run, so they hold on a noisy machine;
the absolute seconds are only for orientation.  When the server runs on this
machine, the backend's CPU seconds (user + system, from /proc, the helper
thread of double buffering included) are reported too: on a machine shared
with other work they vary far less than wall-clock seconds.

  .venv/bin/python scripts/bench_epochs.py --rows 2000000 --cold --output out.md
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

# the yardstick: a scan that reads every row's features array
SCAN = "SELECT sum(features[1] + features[{d}]) FROM {t}"


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


def report(lines: list[str], output: str | None) -> None:
    """Print a benchmark's Markdown lines, and write them to output if given."""
    text = "\n".join(lines)
    print(text)
    if output:
        with open(output, "w") as f:
            f.write(text + "\n")


def drop_os_cache() -> bool:
    """Write back and drop the OS page cache (root only); False if not allowed."""
    try:
        os.sync()
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3\n")
        return True
    except OSError:
        return False


def train_cpu(conn, table, name, shuffle, double, epochs, extra=""):
    """Per-epoch wall seconds (from train()'s rows) and the backend's CPU
    seconds of the whole call."""
    conn.execute("DELETE FROM corgipile.models WHERE model_name = %s", (name,))
    c0 = backend_cpu(conn)
    rows = conn.execute(
        "SELECT seconds FROM corgipile.train(%s, 'svm', model_name => %s, "
        f"shuffle => %s, double_buffer => %s, max_epoch_num => %s, seed => 1, "
        f"buffer_size => '10%%'{extra})",
        (table, name, shuffle, double, epochs)).fetchall()
    c1 = backend_cpu(conn)
    return [r[0] for r in rows], (None if c0 is None or c1 is None else c1 - c0)


def cold_section(conn, table, block_sizes, repeat):
    """A plain scan and one corgipile epoch per block size, with the next
    block's pages prefetched (effective_io_concurrency 1, the default) and
    without (0), each after dropping the OS page cache; wall seconds (a cold
    epoch waits for the disk, so CPU seconds miss the point)."""
    lines = ["", "Cold OS page cache (dropped before each run; the table is read through "
             "a ring of shared buffers, so shared_buffers holds none of it): wall seconds, "
             f"median of {repeat}; one epoch (`max_epoch_num => 1`, double-buffered).", "",
             "| what | block_size | pages per block | prefetch | seconds | ratio to cold scan |",
             "|---|---|---:|---|---:|---:|"]
    scans = []
    for _ in range(repeat):
        if not drop_os_cache():
            return ["", "Cold cache: not measured (dropping the OS page cache needs root "
                    "on the server's machine)."]
        scans.append(timed(conn, SCAN.format(t=table, d=DIMS[0])))
    scan = statistics.median(scans)
    lines.append(f"| plain scan | - | - | kernel read-ahead | {scan:.3f} | 1.00 |")
    for bs in block_sizes:
        extra = "" if bs == "default" else f", block_size => '{bs}'"
        for eic in (1, 0):
            conn.execute(f"SET effective_io_concurrency = {eic}")
            walls = []
            for _ in range(repeat):
                drop_os_cache()
                t0 = time.perf_counter()
                train_cpu(conn, table, "bench_cold", "corgipile", True, 1, extra)
                walls.append(time.perf_counter() - t0)
            ppb = conn.execute("SELECT params->>'pages_per_block' FROM corgipile.models "
                               "WHERE model_name = 'bench_cold'").fetchone()[0]
            wall = statistics.median(walls)
            lines.append(f"| epoch, `corgipile` | {bs} | {ppb} | {'on' if eic else 'off'} "
                         f"| {wall:.3f} | {wall / scan:.2f} |")
            print(f"cold {bs} prefetch {eic}: {wall:.3f} s", file=sys.stderr, flush=True)
    conn.execute("RESET effective_io_concurrency")
    return lines


DIMS = [28]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dsn", default="")
    parser.add_argument("--rows", type=int, default=2_000_000)
    parser.add_argument("--dims", type=int, default=28)
    parser.add_argument("--epochs", type=int, default=10, help="at least 3")
    parser.add_argument("--rounds", type=int, default=3,
                        help="times every configuration is run, rotated and interleaved")
    parser.add_argument("--repeat", type=int, default=5, help="scans and predicts to take the median of")
    parser.add_argument("--first-repeat", type=int, default=3,
                        help="two-epoch runs whose CPU seconds are averaged")
    parser.add_argument("--cold", action="store_true",
                        help="also time cold-cache runs (drops the OS page cache: root, local server)")
    parser.add_argument("--cold-block-sizes", default="default,64kB,1MB,10MB")
    parser.add_argument("--cold-repeat", type=int, default=3)
    parser.add_argument("--output", help="also write the Markdown table to this file")
    args = parser.parse_args()
    table = f"bench_{args.rows}_{args.dims}"
    DIMS[0] = args.dims
    start = provenance.run_line()
    print(start, file=sys.stderr, flush=True)

    with psycopg.connect(args.dsn, autocommit=True) as conn:
        # the benchmark database holds nothing of value: start from the installed version
        conn.execute("DROP EXTENSION IF EXISTS corgipile CASCADE")
        conn.execute("CREATE EXTENSION corgipile")
        conn.execute("SET max_parallel_workers_per_gather = 0")  # training is one process
        conn.execute("SET corgipile.progress = off")
        ensure_table(conn, table, args.rows, args.dims)
        size = conn.execute("SELECT pg_size_pretty(pg_table_size(%s)), "
                            "current_setting('shared_buffers')", (table,)).fetchone()
        scan_q = SCAN.format(t=table, d=args.dims)
        timed(conn, scan_q)  # warm the OS cache like every later run

        def scan_once():
            t = timed(conn, scan_q)
            return t, (CPU[0] if CPU else None)

        # one epoch's figures: wall seconds of the first and the median of the
        # later epochs (train()'s own rows), CPU of a later epoch ((E-epoch
        # run - two-epoch run) / (E - 2)) and of the first epoch of a training
        # of several (two-epoch run - a later epoch): a one-epoch training
        # keeps no block cache, so its first pass cannot fill one.  Each
        # round runs every configuration once, in an order rotated from the
        # previous round's, so that the ratios compare runs taken minutes
        # apart, under the same load, and none always follows the same one.
        configs = [(s, d) for s in ("no_shuffle", "block_only", "corgipile")
                   for d in (False, True)]
        results: dict[tuple[str, bool], list[tuple]] = {c: [] for c in configs}
        scans = [scan_once()]
        for rnd in range(args.rounds):
            k = rnd * 2 % len(configs)
            for shuffle, double in configs[k:] + configs[:k]:
                name = f"bench_{shuffle}_{'db' if double else 'sb'}"
                walls, cpu_all = train_cpu(conn, table, name, shuffle, double, args.epochs)
                # /proc counts CPU in 10 ms ticks: the mean of a few two-epoch runs
                twos = [train_cpu(conn, table, name + "_2", shuffle, double, 2)[1]
                        for _ in range(args.first_repeat)]
                cpu_two = None if None in twos else statistics.mean(twos)
                later_cpu = (None if cpu_all is None or cpu_two is None
                             else (cpu_all - cpu_two) / (args.epochs - 2))
                cpu_one = None if later_cpu is None else cpu_two - later_cpu
                results[(shuffle, double)].append(
                    (walls[0], statistics.median(walls[1:]), cpu_one, later_cpu))
                print(f"round {rnd + 1} {shuffle:>10} {'double' if double else 'single'}: "
                      f"{statistics.median(walls[1:]):.3f} s/epoch", file=sys.stderr, flush=True)
                scans.append(scan_once())  # scans interleaved with the epochs
        # predict() with a standardized model (the default) and a raw one
        train_cpu(conn, table, "bench_raw", "corgipile", True, 1, ", standardize => 'off'")
        preds, raw_preds = [], []
        for _ in range(args.repeat):
            t = timed(conn, f"SELECT count(corgipile.predict('bench_corgipile_db', "
                            f"features)) FROM {table}")
            preds.append((t, CPU[0] if CPU else None))
            t = timed(conn, f"SELECT count(corgipile.predict('bench_raw', features)) FROM {table}")
            raw_preds.append((t, CPU[0] if CPU else None))
            scans.append(scan_once())
        cold = (cold_section(conn, table, args.cold_block_sizes.split(","), args.cold_repeat)
                if args.cold else [])
        server = conn.execute("SHOW server_version").fetchone()[0]

    scan = statistics.median(t for t, _ in scans)
    # /proc counts CPU time in clock ticks (10 ms): means, not medians
    scan_cpus = [c for _, c in scans if c is not None]
    scan_cpu = statistics.mean(scan_cpus) if scan_cpus else None
    pred = statistics.median(t for t, _ in preds)
    pred_cpus = [c for _, c in preds if c is not None]
    pred_cpu = statistics.mean(pred_cpus) if pred_cpus else None
    raw_pred = statistics.median(t for t, _ in raw_preds)
    raw_pred_cpus = [c for _, c in raw_preds if c is not None]
    raw_pred_cpu = statistics.mean(raw_pred_cpus) if raw_pred_cpus else None

    def cpu_cells(cpu):
        if scan_cpu is None or cpu is None:
            return " - | - |"
        return f" {cpu:.3f} | {cpu / scan_cpu:.2f} |"

    def med(config, i):
        values = [r[i] for r in results[config]]
        return None if None in values else statistics.median(values)

    lines = [
        f"{start}, PostgreSQL {server}; at the end: load average {provenance.load()}.",
        "",
        f"Table: {args.rows:,} rows x {args.dims} float8 features, {size[0]} "
        f"(shared_buffers {size[1]}), stored clustered by label; warm OS cache; "
        f"svm, per-tuple, {args.epochs} epochs; {args.rounds} rounds, the configurations' "
        f"order rotated each round, medians over the rounds; plain scan "
        f"`{SCAN.format(t='t', d=args.dims)}`, median of {len(scans)} taken between the "
        "other runs.",
        "",
        "| what | buffering | seconds (first epoch) | seconds (later epochs) | ratio to plain scan "
        "| CPU seconds (first) | CPU ratio (first) | CPU seconds (later) | CPU ratio (later) |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|",
        f"| plain scan | - | {scan:.3f} | | 1.00 |{cpu_cells(scan_cpu)} | |",
    ]
    for shuffle, double in configs:
        first, later = med((shuffle, double), 0), med((shuffle, double), 1)
        lines.append(f"| epoch, `{shuffle}` | {'double' if double else 'single'} | "
                     f"{first:.3f} | {later:.3f} | {later / scan:.2f} |"
                     f"{cpu_cells(med((shuffle, double), 2))}"
                     f"{cpu_cells(med((shuffle, double), 3))}")
    lines.append(f"| `predict()` on every row, standardized model | - | {pred:.3f} | | "
                 f"{pred / scan:.2f} |{cpu_cells(pred_cpu)} | |")
    lines.append(f"| `predict()` on every row, raw-feature model | - | {raw_pred:.3f} | | "
                 f"{raw_pred / scan:.2f} |{cpu_cells(raw_pred_cpu)} | |")

    def ratio(double: bool, i: int) -> str:
        """CorgiPile / No-Shuffle of each round's later epochs: median (min-max)."""
        pairs = zip(results[("corgipile", double)], results[("no_shuffle", double)], strict=False)
        rs = [c[i] / n[i] for c, n in pairs if c[i] is not None and n[i]]
        if not rs:
            return "-"
        return f"{statistics.median(rs):.2f} ({min(rs):.2f}-{max(rs):.2f})"

    lines += ["", "CorgiPile / No-Shuffle, later epochs, per round, median (min-max): "
              f"double-buffered {ratio(True, 1)} (wall), {ratio(True, 3)} (CPU); "
              f"single-buffered {ratio(False, 1)} (wall), {ratio(False, 3)} (CPU)",
              "", "First epoch / plain scan in CPU, per configuration (median over the rounds): "
              + ", ".join(f"{s} {'double' if d else 'single'} "
                          f"{med((s, d), 2) / scan_cpu:.2f}" for s, d in configs
                          if scan_cpu and med((s, d), 2) is not None)]
    lines += cold
    report(lines, args.output)
    return 0


if __name__ == "__main__":
    sys.exit(main())
