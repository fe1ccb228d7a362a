#!/usr/bin/env python3
"""Peak memory of a backend training and evaluating on a one-hot encoded
table (issue 19 §3): prints the VmHWM growth of each backend as JSON.

    scripts/measure_onehot_memory.py --dsn "host=... port=..." \
        --rows 100000 --categories 80000

    scripts/measure_onehot_memory.py --dsn "..." --long-values 300 \
        --value-kb 960 --work-mem 2GB

Each step runs in a new session, and its backend's peak resident set
(VmHWM of /proc/<pid>/status, read on the server with pg_read_file, so the
role must be a superuser or have pg_read_server_files) is read before and
after, with RssShmem: VmHWM counts the shared buffers the backend touched,
which are not its own memory, so "private_mb" is VmHWM's growth less
RssShmem's (shared pages stay mapped once touched).  The table is
t(label int, x1 float8, x2 float8, cat text) with cat = 'c' || (g %
categories): every category occurs.  With --long-values N it is instead N
rows of N distinct values of --value-kb kB each that do not compress (md5
hex), and only the training is measured (issue 29: 300 values of 960 kB
under work_mem 2GB).
"""
from __future__ import annotations

import argparse
import json
import time

import psycopg


def status_kb(conn) -> dict[str, int]:
    """VmHWM and RssShmem of the session's backend, in kB."""
    pid = conn.execute("SELECT pg_catalog.pg_backend_pid()").fetchone()[0]
    status = conn.execute("SELECT pg_catalog.pg_read_file(%s)",
                          (f"/proc/{pid}/status",)).fetchone()[0]
    return {line.split(":")[0]: int(line.split()[1]) for line in status.splitlines()
            if line.startswith(("VmHWM:", "RssShmem:"))}


def measured(dsn: str, sql: str, settings: dict[str, str]) -> dict:
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("SET corgipile.progress = off")
        for k, v in settings.items():
            conn.execute(f"SET {k} = '{v}'")
        before = status_kb(conn)
        t0 = time.monotonic()
        try:
            rows = len(conn.execute(sql).fetchall())
            error = None
        except psycopg.Error as exc:
            rows, error = 0, f"{exc.sqlstate}: {exc.diag.message_primary}"
        seconds = time.monotonic() - t0
        after = status_kb(conn)
    growth = (after["VmHWM"] - before["VmHWM"]) / 1024
    shared = (after["RssShmem"] - before["RssShmem"]) / 1024
    return {"vmhwm_before_mb": round(before["VmHWM"] / 1024, 1),
            "vmhwm_after_mb": round(after["VmHWM"] / 1024, 1),
            "growth_mb": round(growth, 1), "shared_mb": round(shared, 1),
            "private_mb": round(growth - shared, 1), "rows": rows, "error": error,
            "seconds": round(seconds, 1)}


def fresh_table(dsn: str, t: str, select: str) -> float:
    """Table t as select (the model of earlier runs dropped); its size in MB,
    TOAST included."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f"DROP TABLE IF EXISTS {t}")
        conn.execute(f"CREATE TABLE {t} AS {select}")
        conn.execute(f"ANALYZE {t}")
        conn.execute("SELECT corgipile.drop_model(model_name) FROM corgipile.models "
                     "WHERE model_name OPERATOR(pg_catalog.=) 'onehot_mem_m'")
        size = conn.execute("SELECT pg_catalog.pg_table_size(%s::regclass)", (t,)).fetchone()[0]
    return round(size / 2**20, 1)


def long_values(args: argparse.Namespace) -> None:
    t = args.table
    size_mb = fresh_table(
        args.dsn, t,
        "SELECT (g % 2) AS label, g::float8 AS x, "
        "(SELECT pg_catalog.string_agg(pg_catalog.md5(g::text || ':' || k), '') "
        f"   FROM pg_catalog.generate_series(1, {args.value_kb * 1000 // 32}) AS k) AS cat "
        f"FROM pg_catalog.generate_series(1, {args.long_values}) AS g")
    out = {"long_values": args.long_values, "value_kb": args.value_kb,
           "table_mb": size_mb, "work_mem": args.work_mem}
    out["train"] = measured(
        args.dsn,
        f"SELECT * FROM corgipile.train('{t}', 'svm', features => 'x, cat', "
        f"model_name => 'onehot_mem_m', max_epoch_num => {args.epochs}, seed => 1)",
        {"work_mem": args.work_mem})
    print(json.dumps(out, indent=1))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dsn", required=True)
    ap.add_argument("--rows", type=int, default=100_000)
    ap.add_argument("--categories", type=int, default=80_000)
    ap.add_argument("--table", default="onehot_mem")
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--buffer-size", default="10%")
    ap.add_argument("--work-mem", default="4MB")
    ap.add_argument("--long-values", type=int, default=0,
                    help="N rows of N distinct long text values instead")
    ap.add_argument("--value-kb", type=int, default=960)
    args = ap.parse_args()
    if args.long_values:
        long_values(args)
        return
    t = args.table
    size_mb = fresh_table(
        args.dsn, t,
        "SELECT (g % 2) AS label, (g % 97)::float8 AS x1, "
        f"(g % 13)::float8 / 3 AS x2, 'c' || (g % {args.categories}) AS cat "
        f"FROM pg_catalog.generate_series(1, {args.rows}) AS g")
    settings = {"work_mem": args.work_mem}
    out = {"rows": args.rows, "categories": args.categories, "table_mb": size_mb,
           "work_mem": args.work_mem, "buffer_size": args.buffer_size, "epochs": args.epochs}
    out["train"] = measured(
        args.dsn,
        f"SELECT * FROM corgipile.train('{t}', 'logistic', features => 'x1, x2, cat', "
        f"model_name => 'onehot_mem_m', max_categories => {args.categories}, "
        f"max_epoch_num => {args.epochs}, buffer_size => '{args.buffer_size}', seed => 1)",
        settings)
    out["evaluate"] = measured(
        args.dsn, f"SELECT * FROM corgipile.evaluate('onehot_mem_m', '{t}')", settings)
    out["predict"] = measured(
        args.dsn, f"SELECT pg_catalog.count(*) FROM {t} AS r "
        f"WHERE corgipile.predict_class('onehot_mem_m', r) IS NOT NULL", settings)
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
