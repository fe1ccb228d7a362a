"""Scoring a stored model on a table or query.

``evaluate`` uses the server's ``corgipile.evaluate(model_name, relation)``
when the installed engine has it (checked in pg_proc) and the source is a
table; otherwise it computes the figures here with ``corgipile.predict``:
accuracy for classifiers, R², RMSE and MAE for regression (the same
names as the server's metrics).
"""

from __future__ import annotations

from typing import Any

import psycopg
from psycopg import sql

from .errors import ModelNotFound

__all__ = ["has_server_evaluate", "evaluate", "accuracy", "r2_score", "source_sql",
           "predict_function", "predict_cast", "predict_sql"]


def has_server_evaluate(conn: psycopg.Connection[Any]) -> bool:
    row = conn.execute(
        "SELECT pg_catalog.count(*) FROM pg_catalog.pg_proc p JOIN pg_catalog.pg_namespace n "
        "ON n.oid OPERATOR(pg_catalog.=) p.pronamespace "
        "WHERE n.nspname OPERATOR(pg_catalog.=) 'corgipile' "
        "AND p.proname OPERATOR(pg_catalog.=) 'evaluate'"
    ).fetchone()
    return bool(row and row[0])


def _boolean_classes(classes: Any) -> bool:
    return bool(classes) and all(isinstance(c, bool) for c in classes)


def predict_function(classes: Any) -> str:
    """corgipile.predict returns numbers; models with text classes need
    corgipile.predict_class, and so do boolean ones, whose class text
    ('true'/'false') casts to the label's type (predict_cast)."""
    if classes and any(isinstance(c, str) for c in classes):
        return "predict_class"
    if _boolean_classes(classes):
        return "predict_class"
    return "predict"


def predict_cast(classes: Any) -> str | None:
    """The type a prediction is cast to so that it has the label's type
    (PREDICT BY, the CLI, Client.predict): boolean for a model trained on a
    boolean label; None otherwise (text classes come as text, integer
    labels as float8, which compares with an integer label without a
    cast)."""
    return "pg_catalog.bool" if _boolean_classes(classes) else None


def predict_sql(classes: Any, model: sql.Composable, row: sql.Composable) -> sql.Composable:
    """The prediction of model for row, of the label's type where it is a
    boolean (predict_function, predict_cast)."""
    call = sql.SQL("{}({}, {})").format(
        sql.Identifier("corgipile", predict_function(classes)), model, row)
    cast = predict_cast(classes)
    return call if cast is None else sql.SQL("{}::{}").format(call, sql.SQL(cast))


def model_head(conn: psycopg.Connection[Any], model_name: str) -> tuple[str, str, Any]:
    row = conn.execute("SELECT model, label, classes FROM corgipile.models "
                       "WHERE model_name OPERATOR(pg_catalog.=) %s", (model_name,)).fetchone()
    if row is None:
        raise ModelNotFound(f'model "{model_name}" does not exist')
    return row[0], row[1], row[2]


def source_sql(relation: sql.Composable | None, query: sql.Composable | None
               ) -> sql.Composable:
    """A FROM item aliased s: the table, or the query as a subquery."""
    if query is not None:
        return sql.SQL("({}\n) AS s").format(query)
    assert relation is not None
    return sql.SQL("{} AS s").format(relation)


def accuracy(conn: psycopg.Connection[Any], model_name: str, source: sql.Composable,
             label: str, text_classes: bool = False) -> tuple[float | None, int]:
    """(accuracy, rows scored) of a classifier; rows with a NULL label or
    prediction are left out."""
    if text_classes:
        pred, truth = "corgipile.predict_class({m}, s)", "(s.{label})::pg_catalog.text"
    else:
        pred, truth = ("corgipile.predict({m}, s)",
                       "(s.{label})::pg_catalog.int4::pg_catalog.float8")
    query = sql.SQL(
        "SELECT pg_catalog.avg((p OPERATOR(pg_catalog.=) y)::pg_catalog.int4)"
        "::pg_catalog.float8, pg_catalog.count(*) FROM ("
        "SELECT " + pred + " AS p, " + truth + " AS y FROM {src}) z "
        "WHERE p IS NOT NULL AND y IS NOT NULL").format(
        m=sql.Literal(model_name), label=sql.Identifier(label), src=source)
    row = conn.execute(query).fetchone()
    assert row is not None
    return row[0], int(row[1])


def r2_score(conn: psycopg.Connection[Any], model_name: str, source: sql.Composable,
             label: str) -> tuple[float | None, float | None, float | None, int]:
    """(R², root mean squared error, mean absolute error, rows scored) of a
    regression model."""
    minus = "OPERATOR(pg_catalog.-)"
    query = sql.SQL(
        # 1 - ss / d, NULL when d is 0 (as nullif, whose = cannot be qualified)
        "SELECT CASE WHEN a.d OPERATOR(pg_catalog.=) 0 THEN NULL "
        f"ELSE 1 {minus} (a.ss OPERATOR(pg_catalog./) a.d) END, a.rmse, a.mae, a.n FROM ("
        f"SELECT pg_catalog.sum(pg_catalog.power(y {minus} p, 2)) AS ss, "
        "pg_catalog.var_pop(y) OPERATOR(pg_catalog.*) pg_catalog.count(*) AS d, "
        f"pg_catalog.sqrt(pg_catalog.avg(pg_catalog.power(y {minus} p, 2))) AS rmse, "
        f"pg_catalog.avg(pg_catalog.abs(y {minus} p)) AS mae, pg_catalog.count(*) AS n FROM ("
        "SELECT corgipile.predict({m}, s) AS p, (s.{label})::pg_catalog.float8 AS y "
        "FROM {src}) z "
        "WHERE p IS NOT NULL AND y IS NOT NULL) a").format(
        m=sql.Literal(model_name), label=sql.Identifier(label), src=source)
    row = conn.execute(query).fetchone()
    assert row is not None
    return row[0], row[1], row[2], int(row[3])


# the figures of evaluate() that count rows or values: ints
COUNTS = frozenset({"rows", "skipped_null_label", "skipped_null_features", "unseen_values"})


def evaluate(conn: psycopg.Connection[Any], model_name: str, *,
             relation: sql.Composable | None = None, relation_text: str | None = None,
             query: sql.Composable | None = None) -> dict[str, float | int | None]:
    """{metric: value} for model_name on a table (relation) or a query;
    the counts (rows scored, rows skipped and why, unseen category values)
    as ints. A metric the server gives as NULL (svm's log_loss: no
    probabilities; an R² of a label without variance) is None, not NaN:
    Python's NULL, as psycopg gives it and json.dumps writes it (the
    client README, "The command line")."""
    if query is None and relation_text is not None and has_server_evaluate(conn):
        rows = conn.execute("SELECT metric, value FROM corgipile.evaluate(%s, %s)",
                            (model_name, relation_text)).fetchall()
        return {str(m): int(v) if m in COUNTS and v is not None else _float(v)
                for m, v in rows}
    kind, label, classes = model_head(conn, model_name)
    src = source_sql(relation, query)
    if classes is not None:
        acc, n = accuracy(conn, model_name, src, label,
                          predict_function(classes) == "predict_class")
        return {"accuracy": _float(acc), "rows": n}
    r2, rmse, mae, n = r2_score(conn, model_name, src, label)
    return {"r2": _float(r2), "rmse": _float(rmse), "mae": _float(mae), "rows": n}


def _float(v: Any) -> float | None:
    return None if v is None else float(v)
