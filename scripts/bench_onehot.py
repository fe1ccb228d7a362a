#!/usr/bin/env python3
"""CPU seconds and peak memory of training on a one-hot encoded table
(issue 19 §3): prints one JSON line per run.

    scripts/bench_onehot.py --dsn "..." --label after --categories 1000 5000 \
        --repeats 3

For each number of categories K: a table t_K(label, x1, x2, cat) of --rows
rows (cat = 'c' || (g % K)), trained with logistic regression for --epochs
epochs in a fresh session each time, once with l2 = 0 and once with l2 =
1e-4.  The backend's CPU seconds (utime + stime of /proc/<pid>/stat) and
its VmHWM growth are read with pg_read_file (superuser).  --label tags the
lines, to compare builds of the engine run one after the other.
"""
from __future__ import annotations

import argparse
import json
import os
import time

import psycopg

TICKS = os.sysconf("SC_CLK_TCK")


def proc(conn, pid, name):
    return conn.execute("SELECT pg_catalog.pg_read_file(%s)", (f"/proc/{pid}/{name}",)).fetchone()[0]


def cpu_s(conn, pid) -> float:
    fields = proc(conn, pid, "stat").rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def hwm_mb(conn, pid) -> float:
    for line in proc(conn, pid, "status").splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dsn", required=True)
    ap.add_argument("--label", required=True)
    ap.add_argument("--rows", type=int, default=100_000)
    ap.add_argument("--categories", type=int, nargs="+", default=[1000])
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--l2", type=float, nargs="+", default=[0.0, 1e-4])
    args = ap.parse_args()
    with psycopg.connect(args.dsn, autocommit=True) as admin:
        for k in args.categories:
            t = f"onehot_bench_{k}"
            if admin.execute("SELECT pg_catalog.to_regclass(%s)", (t,)).fetchone()[0] is None:
                admin.execute(
                    f"CREATE TABLE {t} AS SELECT (g % 2) AS label, (g % 97)::float8 AS x1, "
                    f"(g % 13)::float8 / 3 AS x2, 'c' || (g % {k}) AS cat "
                    f"FROM pg_catalog.generate_series(1, {args.rows}) AS g")
            for rep in range(args.repeats):
                for l2 in args.l2:
                    with psycopg.connect(args.dsn, autocommit=True) as s:
                        s.execute("SET corgipile.progress = off")
                        pid = s.execute("SELECT pg_catalog.pg_backend_pid()").fetchone()[0]
                        c0, h0, w0 = cpu_s(admin, pid), hwm_mb(admin, pid), time.monotonic()
                        s.execute(
                            f"SELECT * FROM corgipile.train('{t}', 'logistic', "
                            f"features => 'x1, x2, cat', max_categories => {k}, "
                            f"max_epoch_num => {args.epochs}, l2 => {l2}, seed => 1, "
                            f"model_name => 'onehot_bench_m')").fetchall()
                        w1, c1, h1 = time.monotonic(), cpu_s(admin, pid), hwm_mb(admin, pid)
                        s.execute("SELECT corgipile.drop_model('onehot_bench_m')")
                    print(json.dumps({"label": args.label, "categories": k, "l2": l2,
                                      "repeat": rep, "cpu_s": round(c1 - c0, 2),
                                      "wall_s": round(w1 - w0, 2),
                                      "vmhwm_growth_mb": round(h1 - h0, 1)}), flush=True)


if __name__ == "__main__":
    main()
