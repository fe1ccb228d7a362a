#!/usr/bin/env python3
"""Peak backend memory of predicting with a model name that changes per row.

Trains MODELS small models, then runs one query of ROWS rows whose model
name cycles through them, and prints the backend's VmHWM (peak resident
set) before and after the query.  The server must run on this machine (the
backend's /proc entry is read).  Usage: bench_model_cache.py [ROWS [MODELS]]
(the connection comes from the PG* environment variables).
"""
import sys

import psycopg


def vm(pid: int, key: str) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    raise KeyError(key)


def main() -> None:
    rows = int(sys.argv[1]) if len(sys.argv) > 1 else 200_000
    models = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    with psycopg.connect(autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS corgipile")
        conn.execute("SET corgipile.progress = off")
        conn.execute("DROP TABLE IF EXISTS bench_cache_pts")
        conn.execute("CREATE TABLE bench_cache_pts AS SELECT i AS id, "
                     "CASE WHEN i % 2 = 0 THEN 1 ELSE -1 END AS label, "
                     "ARRAY[random(), random()]::float8[] AS features "
                     "FROM generate_series(1, 2000) i")
        for k in range(models):
            conn.execute("SELECT corgipile.drop_model(model_name) FROM corgipile.models "
                         "WHERE model_name = %s", (f"bench_cache_{k}",))
            conn.execute("SELECT count(*) FROM corgipile.train('bench_cache_pts', 'svm', "
                         "model_name => %s, max_epoch_num => 1)", (f"bench_cache_{k}",))
        pid = conn.execute("SELECT pg_backend_pid()").fetchone()[0]
        before = vm(pid, "VmHWM")
        n = conn.execute(
            "SELECT count(corgipile.predict('bench_cache_' || (g %% %s), "
            "ARRAY[0.5, 0.25]::float8[])) FROM generate_series(1, %s) g",
            (models, rows)).fetchone()[0]
        after = vm(pid, "VmHWM")
        print(f"rows={n} models={models} VmHWM before={before} kB after={after} kB "
              f"growth={after - before} kB")


if __name__ == "__main__":
    main()
