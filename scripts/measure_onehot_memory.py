#!/usr/bin/env python3
"""Peak memory of a backend training and evaluating on a one-hot encoded
table (issue 19 §3): prints the VmHWM growth of each backend as JSON.

    scripts/measure_onehot_memory.py --dsn "host=... port=..." \
        --rows 100000 --categories 80000

Each step runs in a new session, and its backend's peak resident set
(VmHWM of /proc/<pid>/status, read on the server with pg_read_file, so the
role must be a superuser or have pg_read_server_files) is read before and
after.  The table is t(label int, x1 float8, x2 float8, cat text) with
cat = 'c' || (g % categories): every category occurs.
"""
from __future__ import annotations

import argparse
import json

import psycopg


def vm_hwm_kb(conn) -> int:
    pid = conn.execute("SELECT pg_catalog.pg_backend_pid()").fetchone()[0]
    status = conn.execute("SELECT pg_catalog.pg_read_file(%s)",
                          (f"/proc/{pid}/status",)).fetchone()[0]
    for line in status.splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    raise RuntimeError("no VmHWM in /proc status")


def measured(dsn: str, sql: str, settings: dict[str, str]) -> dict:
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("SET corgipile.progress = off")
        for k, v in settings.items():
            conn.execute(f"SET {k} = '{v}'")
        before = vm_hwm_kb(conn)
        rows = conn.execute(sql).fetchall()
        after = vm_hwm_kb(conn)
    return {"vmhwm_before_mb": round(before / 1024, 1),
            "vmhwm_after_mb": round(after / 1024, 1),
            "growth_mb": round((after - before) / 1024, 1), "rows": len(rows)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dsn", required=True)
    ap.add_argument("--rows", type=int, default=100_000)
    ap.add_argument("--categories", type=int, default=80_000)
    ap.add_argument("--table", default="onehot_mem")
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--buffer-size", default="10%")
    ap.add_argument("--work-mem", default="4MB")
    args = ap.parse_args()
    t = args.table
    with psycopg.connect(args.dsn, autocommit=True) as conn:
        conn.execute(f"DROP TABLE IF EXISTS {t}")
        conn.execute(
            f"CREATE TABLE {t} AS SELECT (g % 2) AS label, (g % 97)::float8 AS x1, "
            f"(g % 13)::float8 / 3 AS x2, 'c' || (g % {args.categories}) AS cat "
            f"FROM pg_catalog.generate_series(1, {args.rows}) AS g")
        conn.execute(f"ANALYZE {t}")
        conn.execute("SELECT corgipile.drop_model(model_name) FROM corgipile.models "
                     "WHERE model_name OPERATOR(pg_catalog.=) 'onehot_mem_m'")
        size = conn.execute("SELECT pg_catalog.pg_table_size(%s::regclass)", (t,)).fetchone()[0]
    settings = {"work_mem": args.work_mem}
    out = {"rows": args.rows, "categories": args.categories, "table_mb": round(size / 2**20, 1),
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
