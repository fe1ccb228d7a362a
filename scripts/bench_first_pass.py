#!/usr/bin/env python3
"""The cost of the first pass before epoch 1 (docs/preprocessing.md).

Before 0.3.0 the engine ran SELECT DISTINCT label (softmax) and
SELECT max(index) (sparse without n_features) before epoch 1; 0.3.0 reads
the table once through its own reader instead, learning standardizing
statistics, category dictionaries, classes and the dimension together.
This script times, on one server and in one run (ratios, not absolute
figures, are what carry over to another machine):

  * the old queries, as the engine used to run them;
  * train(..., max_epoch_num => 1) with nothing to learn (standardize =>
    'off', numeric label, known dimension: no pass at all), and with the
    pass (standardize => 'auto', softmax classes, sparse dimension);
  * the pass's own time (the engine reports it at DEBUG1), next to the
    epochs' (epoch 1 also fills the block cache that later epochs read);
  * missing => 'mean', 'median', 'zero' on the dense table with
    one NULL element in a tenth of its rows, next to the default that
    skips them: the median sorts every value the pass learns from.

Usage: PGHOST=... PGPORT=... .venv/bin/python scripts/bench_first_pass.py [--rows N]
(creates and drops tables bfp_* in the connected database).
"""

from __future__ import annotations

import argparse
import datetime
import platform
import time

import psycopg


def best(conn, sql, repeat):
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        conn.execute(sql).fetchall()
        times.append(time.perf_counter() - t0)
    return min(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=200_000)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    n, r = args.rows, args.repeat
    with psycopg.connect(autocommit=True) as conn:
        conn.execute("SET corgipile.progress = off")
        conn.execute("DROP TABLE IF EXISTS bfp_dense, bfp_sparse")
        feats = ", ".join(f"sin(g * {k + 1}.37) * {10 ** (k % 4)}" for k in range(28))
        conn.execute(f"CREATE TABLE bfp_dense AS SELECT g AS id, "
                     f"CASE WHEN g % 3 = 0 THEN 1 ELSE -1 END AS label, g % 5 AS cls, "
                     f"ARRAY[{feats}]::float8[] AS features FROM generate_series(1, {n}) g")
        conn.execute(f"CREATE TABLE bfp_sparse AS SELECT g AS id, "
                     f"CASE WHEN g % 3 = 0 THEN 1 ELSE -1 END AS label, "
                     f"ARRAY[g % 1000, 1000 + g % 7, 2000 + g % 13]::int[] AS idx, "
                     f"ARRAY[1.0, sin(g), 3.0 * cos(g)]::float8[] AS vals "
                     f"FROM generate_series(1, {n}) g")
        conn.execute("DROP TABLE IF EXISTS bfp_holes")
        conn.execute("CREATE TABLE bfp_holes AS SELECT id, label, cls, CASE WHEN id % 10 = 0 "
                     "THEN features[:id % 28] || NULL::float8 || features[id % 28 + 2:] "
                     "ELSE features END AS features FROM bfp_dense")
        conn.execute("VACUUM ANALYZE bfp_dense")
        conn.execute("VACUUM ANALYZE bfp_sparse")
        conn.execute("VACUUM ANALYZE bfp_holes")

        def train(table, model, extra):
            return _train(conn, table, model, extra, r)

        rows = []
        scan = best(conn, "SELECT count(*) FROM bfp_dense", r)
        rows.append(("seq scan of the dense table (count(*))", scan))
        distinct = best(conn, "SELECT DISTINCT cls::text FROM ONLY bfp_dense "
                              "WHERE cls IS NOT NULL LIMIT 10001", r)
        rows.append(("old: SELECT DISTINCT label (softmax)", distinct))
        maxidx = best(conn, "SELECT pg_catalog.max(i)::int8 FROM ONLY bfp_sparse AS t, "
                            "LATERAL pg_catalog.unnest(t.idx) AS i", r)
        rows.append(("old: SELECT max(index) (sparse)", maxidx))
        configs = [
            ("dense 28 features, standardize off (no pass)", "bfp_dense", "logistic",
             ", standardize => 'off'"),
            ("dense 28 features, statistics", "bfp_dense", "logistic", ""),
            ("softmax 5 classes, classes only", "bfp_dense", "softmax",
             ", label => 'cls', standardize => 'off'"),
            ("softmax 5 classes, classes and statistics", "bfp_dense", "softmax",
             ", label => 'cls'"),
            ("sparse, n_features given, off (no pass)", "bfp_sparse", "svm",
             ", features => 'vals', feature_indices => 'idx', n_features => 2013, "
             "standardize => 'off'"),
            ("sparse, dimension only", "bfp_sparse", "svm",
             ", features => 'vals', feature_indices => 'idx', standardize => 'off'"),
            ("sparse, dimension and scale", "bfp_sparse", "svm",
             ", features => 'vals', feature_indices => 'idx'"),
            ("dense 28, a NULL in 10% of rows, skipped (statistics)", "bfp_holes", "logistic",
             ""),
            ("dense 28, a NULL in 10% of rows, missing => 'mean'", "bfp_holes", "logistic",
             ", missing => 'mean'"),
            ("dense 28, a NULL in 10% of rows, missing => 'median'", "bfp_holes", "logistic",
             ", missing => 'median'"),
            ("dense 28, a NULL in 10% of rows, missing => 'zero'", "bfp_holes", "logistic",
             ", missing => 'zero'"),
            ("dense 28, a NULL in 10% of rows, missing => 'median', spilled "
             "(maintenance_work_mem 8MB)", "bfp_holes", "logistic", ", missing => 'median'"),
        ]
        passes = {}
        for what, table, model, extra in configs:
            # the median's values beyond maintenance_work_mem go to sorts on disk
            if "spilled" in what:
                conn.execute("SET maintenance_work_mem = '8MB'")
            first, second, own = train(table, model, extra)
            conn.execute("RESET maintenance_work_mem")
            passes[what] = own
            rows.append((f"{what}: epoch 1 / epoch 2", f"{first:.3f} / {second:.3f}"))
        conn.execute("DROP TABLE bfp_dense, bfp_sparse, bfp_holes")

    print(f"# {datetime.date.today()} {platform.node()} {platform.processor() or platform.machine()}"
          f", {n} rows, best of {r}")
    print("| what | seconds |\n| --- | --- |")
    for what, s in rows:
        print(f"| {what} | {s if isinstance(s, str) else f'{s:.3f}'} |")
    print()
    print("| what the pass learns | the pass's own time (s) |\n| --- | --- |")
    for what, cost in passes.items():
        print(f"| {what} | {cost:.3f} |")


def _train(conn, table, model, extra, repeat):
    """The best of repeat trainings' epoch 1 and 2 seconds, as the engine
    reports them (epoch 1 includes the first pass and fills the block
    cache), and the pass's own time (its DEBUG1 message; 0: no pass)."""
    runs = []
    passes = []

    def on_notice(diag):
        msg = diag.message_primary or ""
        if msg.startswith("corgipile: first pass over"):
            passes.append(float(msg.split(": ")[2].split(" s")[0]))

    conn.add_notice_handler(on_notice)
    conn.execute("SET client_min_messages = debug1")
    try:
        for _ in range(repeat):
            n = len(passes)
            rows = conn.execute(f"SELECT model_name, seconds FROM corgipile.train('{table}', "
                                f"'{model}', max_epoch_num => 2, seed => 1{extra})").fetchall()
            if len(passes) == n:
                passes.append(0.0)
            runs.append((rows[0][1], rows[1][1]))
            conn.execute("SELECT corgipile.drop_model(%s)", (rows[0][0],))
    finally:
        conn.execute("RESET client_min_messages")
        conn.remove_notice_handler(on_notice)
    return min(r[0] for r in runs), min(r[1] for r in runs), min(passes)


if __name__ == "__main__":
    main()
