"""MADlib: svm_classification and logregr_train with the 'igd' optimizer.

Runs only when the target database has a `madlib` schema (MADlib installed
with madpack); otherwise each run is skipped with the reason.  MADlib
reports no per-iteration figures, so a run is one training call: its time
divided by the iterations done is the epoch time, and the held-out score is
measured once, on the final model.

Settings, as close to the engine's as MADlib allows:
  svm_classification: params 'init_stepsize=<learning_rate>,
    decay_factor=<decay>, max_iter=<epochs>, tolerance=0, lambda=<l2>'
    (MADlib decays the step as init_stepsize * decay_factor^iteration, like
    the engine; its lambda scales an L2 term of its own objective).
  logregr_train(..., optimizer := 'igd', max_iter := <epochs>,
    tolerance := 0): MADlib's IGD for logistic regression has a fixed step
    size of its own; the learning rate and L2 settings cannot be passed.
"""

from __future__ import annotations

import os
import time
from typing import Any

import psycopg
from psycopg import sql

from .config import TrainSettings
from .datasets import Dataset
from ._db import one, value
from .results import FAILED, Epoch, Run

SCHEMA = "madlib"


def unavailable_reason(conn: psycopg.Connection[Any]) -> str | None:
    """None when MADlib is there, else why the MADlib runs are skipped."""
    has = conn.execute("SELECT 1 FROM pg_namespace WHERE nspname = %s", (SCHEMA,)).fetchone()
    if has is None:
        db = conn.info.dbname
        return (f"MADlib is not installed in database {db!r} (no schema {SCHEMA!r}); "
                "install MADlib and run `madpack install` on this database to include it")
    return None


def _independent(ds: Dataset) -> str:
    """MADlib takes the features as a SQL expression (text)."""
    if ds.array_element is not None:
        return sql.Identifier(ds.feature_columns[0]).as_string(None) + "::float8[]"
    return "ARRAY[" + ", ".join(sql.Identifier(c).as_string(None)
                                for c in ds.feature_columns) + "]::float8[]"


def _positive_text(ds: Dataset) -> str:
    lab = sql.Identifier(ds.label).as_string(None)
    return lab if ds.label_is_bool else f"({lab} > 0)"


_n = 0


def _out_table() -> str:
    global _n
    _n += 1
    return f"corgipile_bench_madlib_{os.getpid()}_{_n}"


def _drop(conn: psycopg.Connection[Any], *tables: str) -> None:
    for t in tables:
        conn.execute(sql.SQL("DROP TABLE IF EXISTS {}").format(sql.Identifier(t)))


def _score(conn: psycopg.Connection[Any], ds: Dataset, w: list[float], b: float) -> float | None:
    """Held-out accuracy of margin w.x + b (computed in plain SQL)."""
    feat = ds.features_sql()
    q = sql.SQL(
        "SELECT avg((((SELECT sum(a * x) FROM unnest(%(w)s::float8[], {f}) AS u(a, x)) + %(b)s > 0)"
        " = {pos})::int)::float8 FROM {t} WHERE {nn}").format(
        f=feat, pos=ds.positive_sql(), t=ds.rel(ds.scored_table), nn=ds.not_null_sql())
    score = value(conn, q, {"w": w, "b": b})
    return None if score is None else float(score)


def run(conn: psycopg.Connection[Any], ds: Dataset, model: str, order: str, cfg: TrainSettings,
        copy: tuple[str, float] | None) -> Run:
    method = f"madlib ({order})"
    reason = unavailable_reason(conn)
    if reason is not None:
        return Run.skipped(ds.name, model, method, "madlib", order, reason)
    if model not in ("svm", "logistic"):
        return Run.skipped(ds.name, model, method, "madlib", order,
                           f"no MADlib runner for model {model!r} (svm and logistic only)")
    r = Run(ds.name, model, method, "madlib", order)
    if order == "shuffle_once":
        assert copy is not None
        table, r.setup_seconds = copy
        r.setup = "CREATE TABLE ... AS SELECT * ... ORDER BY random()"
    elif order == "no_shuffle":
        table = ds.table
    else:
        return Run.skipped(ds.name, model, method, "madlib", order,
                           f"unknown order {order!r} for MADlib (shuffle_once or no_shuffle)")
    out = _out_table()
    try:
        if model == "svm":
            params = (f"init_stepsize={cfg.learning_rate!r}, decay_factor={cfg.decay!r}, "
                      f"max_iter={cfg.epochs}, tolerance=0, lambda={cfg.l2!r}")
            t0 = time.perf_counter()
            conn.execute(
                "SELECT madlib.svm_classification(%s, %s, %s, %s, 'linear', NULL, NULL, %s, false)",
                (table, out, _positive_text(ds), _independent(ds), params))
            seconds = time.perf_counter() - t0
            coef, iters, mapping = one(conn, sql.SQL(
                "SELECT coef, num_iterations, __dep_var_mapping::text[] FROM {}").format(
                    sql.Identifier(out)))
            w, b = list(coef[:-1]), coef[-1]     # fit_intercept: the intercept is last
            # MADlib maps the first dependent value to -1: flip if that was "true"
            if mapping and str(mapping[0]).lower() in ("true", "t", "1"):
                w, b = [-v for v in w], -b
            r.extra["params"] = params
        else:
            indep = f"array_prepend(1::float8, {_independent(ds)})"
            t0 = time.perf_counter()
            conn.execute(
                "SELECT madlib.logregr_train(%s, %s, %s, %s, NULL, %s, 'igd', 0)",
                (table, out, _positive_text(ds), indep, cfg.epochs))
            seconds = time.perf_counter() - t0
            coef, iters = one(conn, sql.SQL("SELECT coef, num_iterations FROM {}").format(
                sql.Identifier(out)))
            b, w = coef[0], list(coef[1:])       # the intercept is the leading 1
        iters = int(iters or cfg.epochs)
        r.epochs = [Epoch(epoch=iters, seconds=seconds, test_score=_score(conn, ds, w, b))]
        r.extra["weights"] = [*w, b]
        r.notes.append("one training call; epoch time = call time / iterations")
    except psycopg.Error as e:
        r.status, r.reason = FAILED, str(e).strip()
    finally:
        try:
            _drop(conn, out, out + "_summary")
        except psycopg.Error:
            pass
    return r
