"""MADlib: svm_classification (IGD) and logregr_train with the 'igd' and
'irls' optimizers.

Runs only when the target database has a `madlib` schema (MADlib installed
with madpack); otherwise each run is skipped with the reason. Its version
is read with ``madlib.version()`` (madpack makes a schema, not an
extension, so pg_extension does not list it).

MADlib reports only a final model, no per-iteration figures. So that "time
to target" is measured, not bounded, each run trains from scratch at
iteration checkpoints (``max_iter`` 1, 2, 3, 5, 10, 20, up to the
setting's epochs, and the epochs themselves), each call timed (wall and the
server backend's CPU seconds) and its model scored on the held-out table:
the run's epoch k entry is the call with max_iter = k, its cumulative time
that call's time. One untimed call with max_iter = 1 comes first. Costs
about twice the training time of a single 20-iteration call (42 iterations).

Settings, as close to the engine's as MADlib allows:
  svm_classification: kernel_params 'fit_intercept=true' (MADlib's docs
    say it is the default, its code (_extract_kernel_params in svm.py_in)
    defaults it to false: without it the model has no intercept and the
    coef has one entry less); params 'init_stepsize=<learning_rate>,
    decay_factor=<decay>, max_iter=<k>, tolerance=0, lambda=<l2 * n>'
    (MADlib decays the step as init_stepsize * decay_factor^iteration, like
    the engine, and shrinks the model by 1 - stepsize * lambda / n before
    each row's step, n the rows without a NULL feature: lambda = l2 * n is
    the engine's factor, applied to the intercept too).
  logregr_train(..., optimizer := 'igd' | 'irls', max_iter := <k>,
    tolerance := 0): MADlib's IGD for logistic regression has a step size
    of its own (0 in its first iteration, 0.01 after: it learns nothing
    until a previous state exists); IRLS is Newton's method, a full pass
    per iteration and a d x d solve. Learning rate and L2 cannot be passed.
    logregr_train has no intercept: the features get a leading 1.

Every name the runner writes into MADlib's arguments is qualified (the
source and output tables with their schema, pg_catalog's operators, types
and functions), since MADlib splices them into SQL it runs with the
session's search path.

Output tables: what the runner reads is checked against MADlib 2.1's
output tables before it is used (see SVM_MODEL, LOGREGR_MODEL and the
summaries below), and a run whose output has another shape fails with a
reason that names the missing column or the unexpected shape, instead of
a score computed from the wrong numbers.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import psycopg
from psycopg import sql

from ._db import BackendCpu, Stopwatch, value
from .config import TrainSettings
from .datasets import Dataset, score_query
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


Table = tuple[str, str]   # (schema, name), each unquoted


def _quoted(table: Table) -> str:
    """schema.name as SQL text, each part quoted where it needs it (MADlib
    takes table names as text and splices them into its own SQL)."""
    return sql.Identifier(*table).as_string(None)


def _columns(conn: psycopg.Connection[Any], table: Table) -> dict[str, str] | None:
    """Column -> SQL type of a table; None if there is no such table."""
    rows = conn.execute(
        "SELECT a.attname, pg_catalog.format_type(a.atttypid, a.atttypmod) "
        "FROM pg_catalog.pg_attribute a JOIN pg_catalog.pg_class c "
        "ON c.oid OPERATOR(pg_catalog.=) a.attrelid JOIN pg_catalog.pg_namespace n "
        "ON n.oid OPERATOR(pg_catalog.=) c.relnamespace "
        "WHERE n.nspname OPERATOR(pg_catalog.=) %s AND c.relname OPERATOR(pg_catalog.=) %s "
        "AND a.attnum OPERATOR(pg_catalog.>) 0 AND NOT a.attisdropped ORDER BY a.attnum",
        table).fetchall()
    if not rows:
        return None
    return dict(rows)


def _type_fits(typ: str, kind: str) -> bool:
    if kind == "float8[]":
        return typ == "double precision[]"
    if kind == "array":
        return typ.endswith("[]")
    if kind == "number":
        return typ in _NUMBER_TYPES
    return True


def check_shape(conn: psycopg.Connection[Any], function: str, table: Table,
                expected: dict[str, str]) -> None:
    """Raise OutputShapeError, naming what differs, unless table has every
    column of expected with a fitting type."""
    cols = _columns(conn, table)
    name = _quoted(table)
    if cols is None:
        raise OutputShapeError(f"madlib.{function} did not create its output table {name}")
    missing = [c for c in expected if c not in cols]
    if missing:
        raise OutputShapeError(
            f"madlib.{function}'s output table {name} has no column "
            f"{', '.join(missing)} (it has: {', '.join(cols)}); the runner reads MADlib "
            f"2.1's output tables, with columns {', '.join(expected)}")
    wrong = [f"{c} is {cols[c]}" for c, kind in expected.items()
             if not _type_fits(cols[c], kind)]
    if wrong:
        raise OutputShapeError(f"madlib.{function}'s output table {name}: unexpected "
                               f"column types: {'; '.join(wrong)}")


def _summary(table: Table) -> Table:
    return (table[0], table[1] + "_summary")


def _read_model(conn: psycopg.Connection[Any], function: str, table: Table,
                columns: list[str], n_coef: int) -> tuple[Any, ...]:
    """The single model row's columns, checked: one row (no grouping), a
    non-NULL coef of n_coef finite numbers, and a summary table reporting no
    failed group."""
    rows = conn.execute(sql.SQL("SELECT {} FROM {}").format(
        sql.SQL(", ").join(map(sql.Identifier, columns)), sql.Identifier(*table))).fetchall()
    if len(rows) != 1:
        raise OutputShapeError(f"madlib.{function}'s output table {_quoted(table)} has "
                               f"{len(rows)} rows; one model row was expected (no grouping)")
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
        sql.Identifier(*_summary(table)))).fetchone()
    if failed is None or failed[0]:
        raise OutputShapeError(f"madlib.{function}'s summary table "
                               f"{_quoted(_summary(table))} reports "
                               f"{failed[0] if failed else 'no row and no'} failed groups")
    return row


def unavailable_reason(conn: psycopg.Connection[Any]) -> str | None:
    """None when MADlib is there, else why the MADlib runs are skipped."""
    has = conn.execute("SELECT 1 FROM pg_catalog.pg_namespace n "
                       "WHERE n.nspname OPERATOR(pg_catalog.=) %s", (SCHEMA,)).fetchone()
    if has is None:
        db = conn.info.dbname
        return (f"MADlib is not installed in database {db!r} (no schema {SCHEMA!r}); "
                "install MADlib and run `madpack install` on this database to include it")
    return None


def _text(conn: psycopg.Connection[Any], expr: sql.Composable) -> str:
    """A SQL expression as the text MADlib splices into its queries."""
    return expr.as_string(conn)


def independent(conn: psycopg.Connection[Any], ds: Dataset, model: str) -> str:
    """MADlib's independent_varname: the features as float8[]; for
    logregr_train (which has no intercept of its own) with a leading 1,
    whose coefficient is the intercept."""
    feats = ds.features_sql(float8=True)
    if model == "svm":
        return _text(conn, feats)
    return _text(conn, sql.SQL("pg_catalog.array_prepend(1::pg_catalog.float8, {})").format(
        feats))


def source_name(conn: psycopg.Connection[Any], table: str) -> str:
    """A relation (regclass text) as schema.name, so that MADlib finds it
    whatever its own queries' search path."""
    nsp, rel = conn.execute(
        "SELECT n.nspname::pg_catalog.text, c.relname::pg_catalog.text "
        "FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n "
        "ON n.oid OPERATOR(pg_catalog.=) c.relnamespace "
        "WHERE c.oid OPERATOR(pg_catalog.=) %s::pg_catalog.regclass", (table,)).fetchone() or ("", "")
    return _quoted((nsp, rel))


_n = 0


def _out_table(conn: psycopg.Connection[Any]) -> Table:
    """A fresh output table name in the session's creation schema, named
    with it (MADlib's output check and ours look in one schema)."""
    global _n
    _n += 1
    schema = value(conn, "SELECT pg_catalog.current_schema()::pg_catalog.text")
    if schema is None:
        raise OutputShapeError("no schema to create MADlib's output tables in: the "
                               "search_path names none that exists; set search_path")
    return (str(schema), f"corgipile_bench_madlib_{os.getpid()}_{_n}")


def _drop(conn: psycopg.Connection[Any], table: Table) -> None:
    # MADlib's svm writes <out>_random for the kernels that need one (not linear)
    for name in (table, _summary(table), (table[0], table[1] + "_random")):
        conn.execute(sql.SQL("DROP TABLE IF EXISTS {}").format(sql.Identifier(*name)))


def _score(conn: psycopg.Connection[Any], ds: Dataset, model: str, w: list[float],
           b: float) -> float | None:
    """Held-out accuracy of margin w.x + b, computed in SQL."""
    margin = sql.SQL(
        "((SELECT pg_catalog.sum(u.a OPERATOR(pg_catalog.*) u.x) "
        "FROM ROWS FROM (pg_catalog.unnest(%(w)s::pg_catalog.float8[]), "
        "pg_catalog.unnest({f})) AS u(a, x)) OPERATOR(pg_catalog.+) %(b)s)").format(
        f=ds.features_sql())
    score = value(conn, score_query(ds, model, margin), {"w": w, "b": b})
    return None if score is None else float(score)


CHECKPOINTS = (1, 2, 3, 5, 10, 20)
SVM_KERNEL_PARAMS = "fit_intercept=true"
LOGISTIC_OPTIMIZERS = ("igd", "irls")


def checkpoints(epochs: int) -> list[int]:
    """The max_iter values a run trains with: CHECKPOINTS up to epochs, and
    epochs itself."""
    return sorted({k for k in CHECKPOINTS if k < epochs} | {epochs})


def version(conn: psycopg.Connection[Any]) -> str | None:
    """MADlib's version string (``madlib.version()``), None without it."""
    if unavailable_reason(conn) is not None:
        return None
    has = conn.execute(
        "SELECT 1 FROM pg_catalog.pg_proc p JOIN pg_catalog.pg_namespace n "
        "ON n.oid OPERATOR(pg_catalog.=) p.pronamespace WHERE n.nspname "
        "OPERATOR(pg_catalog.=) %s AND p.proname OPERATOR(pg_catalog.=) 'version' "
        "AND p.pronargs OPERATOR(pg_catalog.=) 0", (SCHEMA,)).fetchone()
    if has is None:
        return None
    row = conn.execute("SELECT madlib.version()").fetchone()
    return None if row is None else str(row[0])


def runs(conn: psycopg.Connection[Any], ds: Dataset, model: str, order: str,
         cfg: TrainSettings, copy: tuple[str, float] | None) -> Iterator[Run]:
    """Every MADlib baseline of a model, one after the other: svm (IGD);
    logistic with igd and with irls."""
    if model == "logistic":
        for o in LOGISTIC_OPTIMIZERS:
            yield run(conn, ds, model, order, cfg, copy, optimizer=o)
    else:
        yield run(conn, ds, model, order, cfg, copy)


def svm_params(cfg: TrainSettings, max_iter: int, rows: int | None) -> str:
    """svm_classification's params text.  MADlib shrinks the model by
    (1 - stepsize * lambda / n) before each row's step, n the rows it trains
    on: lambda = l2 * n is the engine's (1 - lr * l2)."""
    lam = 0.0 if not cfg.l2 else cfg.l2 * (rows or 0)
    return (f"init_stepsize={cfg.learning_rate!r}, decay_factor={cfg.decay!r}, "
            f"max_iter={max_iter}, tolerance=0, lambda={lam!r}")


def _svm_rows(conn: psycopg.Connection[Any], source: str, feats: str) -> int:
    """The rows MADlib's svm counts as n: those whose features hold no NULL."""
    return int(value(conn, sql.SQL(
        "SELECT pg_catalog.count(*) FROM {} WHERE NOT madlib.array_contains_null({})").format(
        sql.SQL(source), sql.SQL(feats))))


def _train_once(conn: psycopg.Connection[Any], ds: Dataset, model: str, source: str,
                out: Table, cfg: TrainSettings, max_iter: int, optimizer: str,
                cpu: BackendCpu, rows: int | None) -> tuple[Stopwatch, list[float], float, int, str]:
    """One MADlib training call from scratch: (its wall and CPU seconds, w,
    b, iterations, the params text passed)."""
    dep = _text(conn, ds.positive_sql())
    indep = independent(conn, ds, model)
    if model == "svm":
        params = svm_params(cfg, max_iter, rows)
        with Stopwatch(cpu) as watch:
            conn.execute(
                "SELECT madlib.svm_classification(%s, %s, %s, %s, 'linear', %s, NULL, %s, false)",
                (source, _quoted(out), dep, indep, SVM_KERNEL_PARAMS, params))
        check_shape(conn, "svm_classification", out, SVM_MODEL)
        check_shape(conn, "svm_classification", _summary(out), SVM_SUMMARY)
        coef, iters, mapping = _read_model(
            conn, "svm_classification", out,
            ["coef", "num_iterations", "dep_var_mapping"], ds.dims + 1)
        # MADlib maps dep_var_mapping[1], the smallest label, to -1: for the
        # runner's boolean label, false to -1 and true to +1
        if mapping != [False, True]:
            raise OutputShapeError(
                f"madlib.svm_classification's dep_var_mapping is {mapping!r}, not "
                "{false,true} (false mapped to -1, true to +1)")
        w, b = list(coef[:-1]), coef[-1]     # fit_intercept: the intercept is last
        return watch, w, b, int(iters or max_iter), params
    with Stopwatch(cpu) as watch:
        conn.execute(
            "SELECT madlib.logregr_train(%s, %s, %s, %s, NULL, %s, %s, 0)",
            (source, _quoted(out), dep, indep, max_iter, optimizer))
    check_shape(conn, "logregr_train", out, LOGREGR_MODEL)
    check_shape(conn, "logregr_train", _summary(out), LOGREGR_SUMMARY)
    coef, iters = _read_model(conn, "logregr_train", out, ["coef", "num_iterations"],
                              ds.dims + 1)
    b, w = coef[0], list(coef[1:])       # the intercept is the leading 1
    return watch, w, b, int(iters or max_iter), f"optimizer={optimizer}, max_iter={max_iter}"


def run(conn: psycopg.Connection[Any], ds: Dataset, model: str, order: str, cfg: TrainSettings,
        copy: tuple[str, float] | None, optimizer: str = "igd") -> Run:
    method = f"madlib ({order})" if optimizer == "igd" else f"madlib {optimizer} ({order})"
    reason = unavailable_reason(conn)
    if reason is not None:
        return Run.skipped(ds.name, model, method, "madlib", order, reason)
    if model not in ("svm", "logistic"):
        return Run.skipped(ds.name, model, method, "madlib", order,
                           f"no MADlib runner for model {model!r} (svm and logistic only)")
    if optimizer not in LOGISTIC_OPTIMIZERS or (model == "svm" and optimizer != "igd"):
        return Run.skipped(ds.name, model, method, "madlib", order,
                           f"no MADlib {optimizer!r} optimizer for {model}")
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
    out: Table | None = None
    try:
        out = _out_table(conn)
        source = source_name(conn, table)
        cpu = BackendCpu(conn)
        rows = (_svm_rows(conn, source, independent(conn, ds, model))
                if model == "svm" and cfg.l2 else None)
        r.extra["madlib_version"] = version(conn)
        r.extra["checkpoints"] = []
        # MADlib's first call in a session imports its Python modules (about
        # half a second here): one untimed call keeps that out of the first
        # checkpoint, and leaves the table's pages cached as for the others
        _train_once(conn, ds, model, source, out, cfg, 1, optimizer, cpu, rows)
        _drop(conn, out)
        previous = 0.0
        w: list[float] = []
        b = 0.0
        for k in checkpoints(cfg.epochs):
            watch, w, b, iters, params = _train_once(conn, ds, model, source, out, cfg, k,
                                                     optimizer, cpu, rows)
            score = _score(conn, ds, model, w, b)
            r.extra["checkpoints"].append({"max_iter": k, "iterations": iters,
                                           "seconds": watch.seconds,
                                           "cpu_seconds": watch.cpu_seconds,
                                           "test_score": score})
            # cumulative time at epoch k = the wall time of the call that
            # trained k iterations from scratch (never less than the last)
            previous_cpu = sum(e.cpu_seconds or 0.0 for e in r.epochs)
            r.epochs.append(Epoch(
                epoch=k, seconds=max(0.0, watch.seconds - previous), test_score=score,
                cpu_seconds=None if watch.cpu_seconds is None
                else max(0.0, watch.cpu_seconds - previous_cpu)))
            previous = max(previous, watch.seconds)
            r.extra["params"] = params
            _drop(conn, out)
        if model == "svm":
            r.extra["kernel_params"] = SVM_KERNEL_PARAMS
        r.extra["weights"] = [*w, b]
        r.notes.append("one training call from scratch per checkpoint (max_iter "
                       f"{', '.join(str(c['max_iter']) for c in r.extra['checkpoints'])}); "
                       "an epoch's time is the difference of consecutive calls' times")
    except psycopg.Error as e:
        r.status, r.reason = FAILED, str(e).strip()
        r.epochs = []
    except OutputShapeError as e:
        r.status, r.reason = FAILED, str(e)
        r.epochs = []
    finally:
        if out is not None:
            try:
                _drop(conn, out)
            except psycopg.Error:
                pass
    return r
