"""The Bismarck-architecture baseline: a C aggregate and an epoch loop.

The aggregate bismarck.sgd() is shipped in benchmarks/bismarck/ (extension
corgipile_bismarck, schema bismarck), apart from the product.  As in
Bismarck, one SQL aggregate call is one epoch of per-tuple SGD whose state
is the model; this driver passes each epoch the previous weights and that
epoch's learning rate (learning_rate * decay**epoch, the engine's schedule).

Orders:
  shuffle_once  Bismarck's answer to stored order: a copy made once with
                CREATE TABLE ... AS SELECT * FROM t ORDER BY random(), timed
                and counted as the run's setup; every epoch scans the copy.
  no_shuffle    the table as stored (what Bismarck and MADlib do on data
                assumed to be shuffled already).
"""

from __future__ import annotations

import os
import time
from typing import Any

import psycopg
from psycopg import sql

from ._db import BackendCpu, Stopwatch, value
from .config import TrainSettings
from .datasets import Dataset, score_query
from .results import FAILED, Epoch, Run

EXTENSION = "corgipile_bismarck"
MODELS = ("svm", "logistic", "linear")
INSTALL_HINT = "build and install it with `make -C benchmarks/bismarck install` (PG_CONFIG selects the server)"

_copies = 0


def ensure_extension(conn: psycopg.Connection[Any]) -> str | None:
    """Create the extension in this database if needed.  Returns None when it
    is there, else why the baseline must be skipped."""
    row = conn.execute("SELECT installed_version FROM pg_catalog.pg_available_extensions "
                       "WHERE name OPERATOR(pg_catalog.=) %s",
                       (EXTENSION,)).fetchone()
    if row is None:
        return f"the {EXTENSION} extension is not installed on the server; {INSTALL_HINT}"
    if row[0] is None:
        try:
            conn.execute(sql.SQL("CREATE EXTENSION IF NOT EXISTS {}").format(sql.Identifier(EXTENSION)))
        except psycopg.Error as e:
            return f"could not CREATE EXTENSION {EXTENSION} in this database: {str(e).strip()}"
    return None


def shuffle_once_copy(conn: psycopg.Connection[Any], ds: Dataset, seed: int) -> tuple[str, float]:
    """CREATE TABLE <copy> AS SELECT * FROM <table> ORDER BY random(), as
    Bismarck shuffled.  Returns the copy's quoted name and the seconds it
    took (setseed() makes the order reproducible)."""
    global _copies
    _copies += 1
    name = f"corgipile_bench_shuffled_{os.getpid()}_{_copies}"
    conn.execute("SELECT pg_catalog.setseed(%s)", ((seed % 1000 + 1) / 1003.0,))
    t0 = time.perf_counter()
    conn.execute(sql.SQL("CREATE TABLE {} AS SELECT * FROM {} ORDER BY pg_catalog.random()").format(
        sql.Identifier(name), ds.rel()))
    seconds = time.perf_counter() - t0
    qual = str(value(conn, "SELECT %s::pg_catalog.regclass::pg_catalog.text", (name,)))
    return qual, seconds


def epoch_query(ds: Dataset, table: str) -> sql.Composed:
    """One epoch: the aggregate over the table in scan order.  The composite
    result is taken apart outside the aggregating subquery so that the
    aggregate runs once."""
    return sql.SQL(
        "SELECT (e).weights, (e).tuples, (e).loss, (e).score FROM ("
        "SELECT bismarck.sgd({feat}, {lab}, %(model)s, %(weights)s::pg_catalog.float8[], "
        "%(lr)s::pg_catalog.float8, %(l2)s::pg_catalog.float8) AS e FROM {t}) AS r").format(
        feat=ds.features_sql(), lab=ds.label_sql(), t=ds.rel(table))


def train(conn: psycopg.Connection[Any], ds: Dataset, model: str, table: str, cfg: TrainSettings,
          score: bool = True) -> tuple[list[Epoch], list[float]]:
    """The epoch loop over `table`; returns the epochs and the final weights."""
    weights: list[float] | None = None
    epochs: list[Epoch] = []
    q = epoch_query(ds, table)
    sq = score_query(ds, model, sql.SQL(
        "bismarck.margin(%(weights)s::pg_catalog.float8[], {})").format(ds.features_sql()))
    cpu = BackendCpu(conn)
    for e in range(cfg.epochs):
        with Stopwatch(cpu) as watch:
            row = conn.execute(q, {"model": model, "weights": weights, "lr": cfg.rate(e),
                                   "l2": cfg.l2}).fetchone()
        if row is None or row[0] is None:
            raise ValueError(f"{table} has no rows with a non-NULL label and features")
        weights = list(row[0])
        test = value(conn, sq, {"weights": weights}) if score else None
        epochs.append(Epoch(epoch=e + 1, seconds=watch.seconds, loss=row[2], train_score=row[3],
                            test_score=test, cpu_seconds=watch.cpu_seconds))
    assert weights is not None
    return epochs, weights


def run(conn: psycopg.Connection[Any], ds: Dataset, model: str, order: str, cfg: TrainSettings,
        copy: tuple[str, float] | None) -> Run:
    """One Bismarck run; `copy` is the shuffled copy and its creation time
    (for order shuffle_once)."""
    method = f"bismarck ({order})"
    if model not in MODELS:
        return Run.skipped(ds.name, model, method, "bismarck", order,
                           f"the Bismarck aggregate has no model {model!r} "
                           f"({', '.join(MODELS)} only)")
    r = Run(ds.name, model, method, "bismarck", order)
    if order == "shuffle_once":
        assert copy is not None
        table, r.setup_seconds = copy
        r.setup = "CREATE TABLE ... AS SELECT * ... ORDER BY random()"
    elif order == "no_shuffle":
        table = ds.table
    else:
        return Run.skipped(ds.name, model, method, "bismarck", order,
                           f"unknown order {order!r} for the Bismarck baseline "
                           "(shuffle_once or no_shuffle)")
    try:
        r.epochs, weights = train(conn, ds, model, table, cfg)
        r.extra["weights"] = weights
    except (psycopg.Error, ValueError) as e:
        r.status, r.reason = FAILED, str(e).strip()
    return r
