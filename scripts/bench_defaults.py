#!/usr/bin/env python3
"""A default training against the fastest export and scikit-learn's exact
solver, on a large table: 2M rows x 28 features stored by
label, 10 % of the labels flipped (scripts/bench_parallel.py's generator),
200k rows held out (another seed of the same generator).

Contenders, interleaved (the order rotates each round), each scored on the
held-out rows:

- corgipile: ``corgipile.train(table, 'logistic', seed => 1)`` with every
  other parameter at its default, then ``corgipile.evaluate(model, test)``;
- export + scikit-learn: the rows by binary COPY straight into numpy (one
  structured dtype over the COPY stream: no per-row Python), then
  ``make_pipeline(StandardScaler(), LogisticRegression(max_iter=5000))``
  (lbfgs, the exact solver) fitted, and the test rows exported and scored
  the same way.  The fit runs with one BLAS/OpenMP thread and with the
  library's default threads; the faster of the two counts (on a loaded
  2-core machine, two OpenMP threads spin against each other).

Wall seconds from the client; CPU seconds of the backend (the server runs
on this machine) and, for scikit-learn's side, of this process too (the
parse and the fit): on a loaded machine the wall clock measures the load
as much as the work.  Prints a Markdown table; --output writes it.

  .venv/bin/python scripts/bench_defaults.py --rounds 3 --update-doc
"""
from __future__ import annotations

import argparse
import datetime
import os
import platform
import statistics
import subprocess
import sys
import time

import numpy as np
import psycopg
from psycopg import sql
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from threadpoolctl import threadpool_limits

sys.path.insert(0, os.path.dirname(__file__))
from bench_epochs import backend_cpu, report
from bench_parallel import make_table
from real_datasets import copy_bytes, replace_between

DOC = os.path.join(os.path.dirname(__file__), "..", "docs", "real-datasets.md")
BEGIN, END = "<!-- bench_defaults:begin -->", "<!-- bench_defaults:end -->"

# COPY BINARY: an 11-byte signature, 4 bytes of flags, 4 of header extension
HEADER = 19


def copy_dtype(dims: int) -> np.dtype:
    """One row of ``COPY (SELECT label, features) TO STDOUT (FORMAT BINARY)``
    with an int label and a float8[] of dims entries, big-endian."""
    return np.dtype([("nfields", ">i2"), ("label_len", ">i4"), ("label", ">i4"),
                     ("array_len", ">i4"), ("ndim", ">i4"), ("flags", ">i4"),
                     ("elem_oid", ">u4"), ("dim", ">i4"), ("lbound", ">i4"),
                     ("x", [("len", ">i4"), ("v", ">f8")], (dims,))])


def export_binary(conn: psycopg.Connection, table: str, dims: int) -> tuple[np.ndarray, np.ndarray]:
    """The table's rows as numpy arrays, by binary COPY: the fastest export
    measured here (no per-row Python: the stream is one structured array)."""
    data = copy_bytes(conn, sql.SQL(
        "COPY (SELECT label, features FROM {}) TO STDOUT (FORMAT BINARY)").format(
        sql.Identifier(table)))
    dt = copy_dtype(dims)
    n = (len(data) - HEADER - 2) // dt.itemsize
    if HEADER + n * dt.itemsize + 2 != len(data):
        raise RuntimeError(f"{table}: rows are not all {dims}-wide float8 arrays without NULLs")
    rec = np.frombuffer(data, dtype=dt, count=n, offset=HEADER)
    if n and (np.any(rec["nfields"] != 2) or np.any(rec["dim"] != dims)):
        raise RuntimeError(f"{table}: unexpected COPY layout")
    return rec["x"]["v"].astype(np.float64), rec["label"].astype(np.int64)


def run_corgipile(conn, table: str, test: str) -> dict:
    conn.execute("DELETE FROM corgipile.models WHERE model_name = 'bench_defaults'")
    c0, t0 = backend_cpu(conn), time.perf_counter()
    rows = conn.execute(
        "SELECT epoch, loss FROM corgipile.train(%s::regclass, 'logistic', "
        "model_name => 'bench_defaults', seed => 1)", (table,)).fetchall()
    train_s, train_cpu = time.perf_counter() - t0, backend_cpu(conn) - c0
    t1 = time.perf_counter()
    acc = conn.execute("SELECT value FROM corgipile.evaluate('bench_defaults', %s::regclass) "
                       "WHERE metric = 'accuracy'", (test,)).fetchone()[0]
    return {"train": train_s, "cpu": train_cpu, "score": time.perf_counter() - t1,
            "accuracy": acc, "epochs": sum(1 for r in rows if r[0] is not None)}


def run_sklearn(conn, table: str, test: str, dims: int, threads: int | None) -> dict:
    c0, p0, t0 = backend_cpu(conn), time.process_time(), time.perf_counter()
    x, y = export_binary(conn, table, dims)
    export_s = time.perf_counter() - t0
    pipe = make_pipeline(StandardScaler(), LogisticRegression(max_iter=5000))
    t1 = time.perf_counter()
    with threadpool_limits(threads):
        pipe.fit(x, y)
    fit_s = time.perf_counter() - t1
    # CPU seconds of both processes: the server's COPY and this one's parse and fit
    cpu = backend_cpu(conn) - c0 + time.process_time() - p0
    t2 = time.perf_counter()
    xt, yt = export_binary(conn, test, dims)
    acc = float(np.mean(pipe.predict(xt) == yt))
    return {"export": export_s, "fit": fit_s, "score": time.perf_counter() - t2,
            "accuracy": acc, "n_iter": int(pipe[-1].n_iter_[0]), "cpu": cpu}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dsn", default="")
    ap.add_argument("--rows", type=int, default=2_000_000)
    ap.add_argument("--test-rows", type=int, default=200_000)
    ap.add_argument("--dims", type=int, default=28)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--output")
    ap.add_argument("--update-doc", action="store_true",
                    help=f"replace the figures between the markers in {os.path.normpath(DOC)}")
    args = ap.parse_args()
    table, test = "bench_defaults_2m", "bench_defaults_2m_test"
    with psycopg.connect(args.dsn, autocommit=True) as conn:
        conn.execute("SET corgipile.progress = off")
        make_table(conn, table, args.rows, args.dims, 0.75, noise=0.1)
        make_table(conn, test, args.test_rows, args.dims, 0.125, noise=0.1)
        runs = {"corgipile": [], "sk1": [], "skdefault": []}
        order = list(runs)
        for r in range(args.rounds):
            for name in order[r % 3:] + order[:r % 3]:
                if name == "corgipile":
                    runs[name].append(run_corgipile(conn, table, test))
                else:
                    runs[name].append(run_sklearn(conn, table, test, args.dims,
                                                  1 if name == "sk1" else None))
                print(f"round {r + 1} {name}: {runs[name][-1]}", file=sys.stderr, flush=True)
        server = conn.execute("SHOW server_version").fetchone()[0]
    med = lambda xs: statistics.median(xs)  # noqa: E731
    cg = runs["corgipile"]
    train = med([x["train"] for x in cg])
    best = min(("sk1", "skdefault"), key=lambda k: med([x["export"] + x["fit"] for x in runs[k]]))
    ef = med([x["export"] + x["fit"] for x in runs[best]])
    try:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                                text=True, cwd=os.path.dirname(__file__)).stdout.strip()
    except OSError:
        commit = "?"
    lines = [f"Run {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC on "
             f"{platform.machine()} ({os.cpu_count()} cores, load average "
             f"{os.getloadavg()[0]:.1f} at the end), PostgreSQL {server}, commit {commit}; "
             f"{args.rows:,} training rows x {args.dims} features stored by label (10% of the "
             f"labels flipped), {args.test_rows:,} held out; {args.rounds} interleaved rounds, "
             "medians (min-max) of wall seconds.", "",
             "| contender | held-out accuracy | epochs / lbfgs iterations | train or export + fit "
             "| of which export | CPU seconds (server and client) | scoring the held-out rows |",
             "|---|---|---|---|---|---|---|"]

    def span(xs):
        return f"{med(xs):.2f} ({min(xs):.2f}-{max(xs):.2f})"
    lines.append(f"| corgipile defaults | {cg[0]['accuracy']:.4f} | {cg[0]['epochs']} | "
                 f"{span([x['train'] for x in cg])} | - | {span([x['cpu'] for x in cg])} | "
                 f"{span([x['score'] for x in cg])} |")
    for k, label in (("sk1", "binary COPY + scikit-learn, 1 thread"),
                     ("skdefault", "binary COPY + scikit-learn, default threads")):
        xs = runs[k]
        lines.append(f"| {label} | {xs[0]['accuracy']:.4f} | {xs[0]['n_iter']} | "
                     f"{span([x['export'] + x['fit'] for x in xs])} | "
                     f"{span([x['export'] for x in xs])} | {span([x['cpu'] for x in xs])} | "
                     f"{span([x['score'] for x in xs])} |")
    cpu_ratio = med([x["cpu"] for x in runs[best]]) / med([x["cpu"] for x in cg])
    lines += ["", f"Export + fit (the faster scikit-learn setting) over the default training: "
              f"**{ef / train:.1f}x** in wall seconds, {cpu_ratio:.1f}x in CPU seconds "
              f"(medians); accuracy difference "
              f"{(cg[0]['accuracy'] - runs[best][0]['accuracy']) * 100:+.2f} points."]
    report(lines, args.output)
    if args.update_doc:
        replace_between(DOC, BEGIN, END, "\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
