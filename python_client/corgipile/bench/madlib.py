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

Output tables: what the runner reads is checked against MADlib 2.1's
output tables before it is used (see SVM_MODEL, LOGREGR_MODEL and the
summaries below), and a run whose output has another shape fails with a
reason that names the missing column or the unexpected shape, instead of
a score computed from the wrong numbers.
"""

from __future__ import annotations

import os
import time
from typing import Any

import psycopg
from psycopg import sql

from .config import TrainSettings
from .datasets import Dataset
from ._db import value
from .results import FAILED, Epoch, Run

SCHEMA = "madlib"

# MADlib 2.1's output tables, as its source creates them
# (src/ports/postgres/modules/svm/svm.py_in, _build_output_tables, and
# regress/logistic.py_in, logregr_train). The docs' table of SVM columns
# still says "__dep_var_mapping", but the code, and a real 2.1 install, name
# the column dep_var_mapping (an array of the dependent expression's type:
# entry 1 is the label mapped to -1, entry 2 the one mapped to +1).
# Column -> the kind of type the runner needs ("float8[]", "number", "array",
# "any").
SVM_MODEL = {"coef": "float8[]", "loss": "number", "norm_of_gradient": "number",
             "num_iterations": "number", "num_rows_processed": "number",
             "num_rows_skipped": "number", "dep_var_mapping": "array"}
SVM_SUMMARY = {"method": "any", "version_number": "any", "source_table": "any",
               "model_table": "any", "dependent_varname": "any",
               "independent_varname": "any", "kernel_func": "any", "kernel_params": "any",
               "grouping_col": "any", "optim_params": "any", "reg_params": "any",
               "num_all_groups": "number", "num_failed_groups": "number",
               "total_rows_processed": "number", "total_rows_skipped": "number"}
LOGREGR_MODEL = {"coef": "float8[]", "log_likelihood": "number", "std_err": "float8[]",
                 "z_stats": "float8[]", "p_values": "float8[]", "odds_ratios": "float8[]",
                 "condition_no": "number", "num_rows_processed": "number",
                 "num_missing_rows_skipped": "number", "num_iterations": "number",
                 "variance_covariance": "float8[]"}
LOGREGR_SUMMARY = {"method": "any", "source_table": "any", "out_table": "any",
                   "dependent_varname": "any", "independent_varname": "any",
                   "optimizer_params": "any", "num_all_groups": "number",
                   "num_failed_groups": "number", "num_rows_processed": "number",
                   "num_missing_rows_skipped": "number", "grouping_col": "any"}

_NUMBER_TYPES = {"smallint", "integer", "bigint", "real", "double precision", "numeric"}


class OutputShapeError(Exception):
    """A MADlib output table is not shaped as the runner expects."""


def _columns(conn: psycopg.Connection[Any], table: str) -> dict[str, str] | None:
    """Column -> SQL type of a table in the session's search path; None if
    there is no such table."""
    rows = conn.execute(
        "SELECT a.attname, pg_catalog.format_type(a.atttypid, a.atttypmod) "
        "FROM pg_catalog.pg_attribute a "
        "WHERE a.attrelid OPERATOR(pg_catalog.=) pg_catalog.to_regclass(%s) "
        "AND a.attnum OPERATOR(pg_catalog.>) 0 AND NOT a.attisdropped ORDER BY a.attnum",
        (sql.Identifier(table).as_string(None),)).fetchall()
    if not rows:
        return None
    return {name: typ for name, typ in rows}


def _type_fits(typ: str, kind: str) -> bool:
    if kind == "float8[]":
        return typ == "double precision[]"
    if kind == "array":
        return typ.endswith("[]")
    if kind == "number":
        return typ in _NUMBER_TYPES
    return True


def check_shape(conn: psycopg.Connection[Any], function: str, table: str,
                expected: dict[str, str]) -> None:
    """Raise OutputShapeError, naming what differs, unless table has every
    column of expected with a fitting type."""
    cols = _columns(conn, table)
    if cols is None:
        raise OutputShapeError(f"madlib.{function} did not create its output table {table}")
    missing = [c for c in expected if c not in cols]
    if missing:
        raise OutputShapeError(
            f"madlib.{function}'s output table {table} has no column "
            f"{', '.join(missing)} (it has: {', '.join(cols)}); the runner reads MADlib "
            f"2.1's output tables, with columns {', '.join(expected)}")
    wrong = [f"{c} is {cols[c]}" for c, kind in expected.items()
             if not _type_fits(cols[c], kind)]
    if wrong:
        raise OutputShapeError(f"madlib.{function}'s output table {table}: unexpected "
                               f"column types: {'; '.join(wrong)}")


def _read_model(conn: psycopg.Connection[Any], function: str, table: str,
                columns: list[str], n_coef: int) -> tuple[Any, ...]:
    """The single model row's columns, checked: one row (no grouping), a
    non-NULL coef of n_coef finite numbers, and a summary table reporting no
    failed group."""
    rows = conn.execute(sql.SQL("SELECT {} FROM {}").format(
        sql.SQL(", ").join(map(sql.Identifier, columns)), sql.Identifier(table))).fetchall()
    if len(rows) != 1:
        raise OutputShapeError(f"madlib.{function}'s output table {table} has {len(rows)} "
                               "rows; one model row was expected (no grouping)")
    row = rows[0]
    coef = row[columns.index("coef")]
    if coef is None:
        raise OutputShapeError(f"madlib.{function}'s model has a NULL coef: the training "
                               "failed (MADlib writes NULL for a failed group)")
    if len(coef) != n_coef or any(c is None or c != c for c in coef):
        raise OutputShapeError(f"madlib.{function}'s coef has {len(coef)} entries "
                               f"({'with NULL/NaN' if len(coef) == n_coef else 'not'} "
                               f"{n_coef} finite numbers: the features plus the intercept)")
    failed = conn.execute(sql.SQL("SELECT num_failed_groups FROM {}").format(
        sql.Identifier(table + "_summary"))).fetchone()
    if failed is None or failed[0]:
        raise OutputShapeError(f"madlib.{function}'s summary table {table}_summary reports "
                               f"{failed[0] if failed else 'no row and no'} failed groups")
    return row


def unavailable_reason(conn: psycopg.Connection[Any]) -> str | None:
    """None when MADlib is there, else why the MADlib runs are skipped."""
    has = conn.execute("SELECT 1 FROM pg_catalog.pg_namespace "
                       "WHERE nspname OPERATOR(pg_catalog.=) %s", (SCHEMA,)).fetchone()
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
        "SELECT pg_catalog.avg((((SELECT pg_catalog.sum(a OPERATOR(pg_catalog.*) x) "
        "FROM ROWS FROM (pg_catalog.unnest(%(w)s::pg_catalog.float8[]), "
        "pg_catalog.unnest({f})) AS u(a, x)) "
        "OPERATOR(pg_catalog.+) %(b)s OPERATOR(pg_catalog.>) 0)"
        " OPERATOR(pg_catalog.=) {pos})::pg_catalog.int4)::pg_catalog.float8 "
        "FROM {t} WHERE {nn}").format(
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
            check_shape(conn, "svm_classification", out, SVM_MODEL)
            check_shape(conn, "svm_classification", out + "_summary", SVM_SUMMARY)
            coef, iters, mapping = _read_model(
                conn, "svm_classification", out,
                ["coef", "num_iterations", "dep_var_mapping"], ds.dims + 1)
            if mapping is None or len(mapping) != 2:
                raise OutputShapeError(
                    f"madlib.svm_classification's dep_var_mapping is {mapping!r}, not the two "
                    "labels mapped to -1 and +1")
            w, b = list(coef[:-1]), coef[-1]     # fit_intercept: the intercept is last
            # dep_var_mapping[1] is the label MADlib maps to -1: flip if that was "true"
            if str(mapping[0]).lower() in ("true", "t", "1"):
                w, b = [-v for v in w], -b
            r.extra["params"] = params
        else:
            indep = f"array_prepend(1::float8, {_independent(ds)})"
            t0 = time.perf_counter()
            conn.execute(
                "SELECT madlib.logregr_train(%s, %s, %s, %s, NULL, %s, 'igd', 0)",
                (table, out, _positive_text(ds), indep, cfg.epochs))
            seconds = time.perf_counter() - t0
            check_shape(conn, "logregr_train", out, LOGREGR_MODEL)
            check_shape(conn, "logregr_train", out + "_summary", LOGREGR_SUMMARY)
            coef, iters = _read_model(conn, "logregr_train", out, ["coef", "num_iterations"],
                                      ds.dims + 1)
            b, w = coef[0], list(coef[1:])       # the intercept is the leading 1
        iters = int(iters or cfg.epochs)
        r.epochs = [Epoch(epoch=iters, seconds=seconds, test_score=_score(conn, ds, w, b))]
        r.extra["weights"] = [*w, b]
        r.notes.append("one training call; epoch time = call time / iterations")
    except psycopg.Error as e:
        r.status, r.reason = FAILED, str(e).strip()
    except OutputShapeError as e:
        r.status, r.reason = FAILED, str(e)
        r.epochs = []
    finally:
        try:
            _drop(conn, out, out + "_summary", out + "_random")
        except psycopg.Error:
            pass
    return r
