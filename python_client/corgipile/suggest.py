"""What a load suggests training with: the model its labels fit, and the
loaded feature columns train() takes as they are (the others left out,
each with the reason), so that the train command a loader prints runs as
printed."""

from __future__ import annotations

from typing import Any

import numpy as np
import psycopg
from psycopg import sql

from ._sql import quote_ident
from ._tables import LoadResult, label_type, sql_name
from ._types import KINDS
from .params import train_defaults

__all__ = ["MAX_CLASSES", "suggest_model", "plan_features", "finish_typed"]

# at most this many distinct integer labels look like classes; more look
# like a count or a measurement (regression)
MAX_CLASSES = 20


def suggest_model(labels: np.ndarray | None) -> tuple[str | None, str | None]:
    """(the model that fits these labels, why), or (None, None) without
    labels: svm for two classes the engine takes as binary (-1/+1, 0/1,
    booleans), softmax for more classes or for other class values (text,
    {1, 2}, ...), linear for a continuous label."""
    if labels is None or labels.size == 0:
        return None, None
    kind = label_type(labels, False)
    if kind == "float8":
        return "linear", "the label is continuous (non-integer numbers)"
    values = set(np.unique(labels).tolist())
    n = len(values)
    if kind == "bool" or values in ({-1, 1}, {0, 1}):
        return "svm", ("the label has two classes "
                       f"({', '.join(map(str, sorted(values)))}); logistic works too")
    if kind == "text":
        return "softmax", f"the label has {n} text classes"
    if n > MAX_CLASSES:
        return "linear", (f"the label has {n} distinct integer values; if they are "
                          "classes, use softmax")
    if n < 2:
        return None, "the label has a single value: there is nothing to learn"
    return "softmax", f"the label has {n} classes ({', '.join(map(str, sorted(values)))})"


# text that reads as a date or a time (ISO 8601, as PostgreSQL, pandas and
# most exports write them)
DATE_TEXT = (r"^\s*[0-9]{4}-[0-9]{2}-[0-9]{2}([ T][0-9]{2}:[0-9]{2}(:[0-9]{2}(\.[0-9]+)?)?"
             r"\s*(Z|[+-][0-9]{2}(:?[0-9]{2})?)?)?\s*$")
# from this many rows on, a whole-number or text column whose every value
# differs is an identifier (a row number, a key, a name)
IDENTIFIER_ROWS = 20


def plan_features(conn: psycopg.Connection[Any], ident: sql.Identifier, features: list[str],
                  kinds: dict[str, str]) -> tuple[list[str], dict[str, str]]:
    """The loaded feature columns that train() takes by default, and why
    each other one is left out. The rules are the engine's (params.py reads
    max_categories' default from the server; text and boolean columns are
    one-hot encoded, numbers taken as they are, other types refused), plus
    what would train but cannot generalise: identifiers and dates written
    as text. Costs one scan of plain aggregates; the numbers of distinct
    values are ANALYZE's (exact up to 30,000 rows, where it reads them
    all), counted exactly only for a text column near max_categories."""
    why: dict[str, str] = {}
    exprs: list[sql.Composable] = []
    asks: list[tuple[str, str]] = []
    for c in features:
        spec = KINDS[kinds[c]]
        if not (spec.number or spec.category):
            why[c] = f"a {spec.display} column: train() takes numbers, text and booleans"
            continue
        col = sql.SQL("t.{}").format(sql.Identifier(c))
        asks.append((c, "count"))
        exprs.append(sql.SQL("pg_catalog.count({})").format(col))
        if spec.name in ("int4", "int8"):
            asks += [(c, "min"), (c, "max")]
            exprs += [sql.SQL("pg_catalog.min({})").format(col),
                      sql.SQL("pg_catalog.max({})").format(col)]
        if spec.name == "text":
            asks.append((c, "dates"))
            exprs.append(sql.SQL("pg_catalog.bool_and({} OPERATOR(pg_catalog.~) {})").format(
                col, sql.Literal(DATE_TEXT)))
    if not asks:
        return [c for c in features if c not in why], why
    row = conn.execute(sql.SQL("SELECT pg_catalog.count(*), {} FROM {} t").format(
        sql.SQL(", ").join(exprs), ident)).fetchone()
    assert row is not None
    rows = int(row[0])
    stats: dict[str, dict[str, Any]] = {}
    for (c, what), value in zip(asks, row[1:], strict=True):
        stats.setdefault(c, {})[what] = value
    counted = [c for c in stats if kinds[c] in ("int4", "int8", "text") and stats[c]["count"]]
    distinct = _distinct_estimates(conn, ident, counted, rows)
    max_categories = int(train_defaults(conn).get("max_categories") or 0)
    for c, st in stats.items():
        kind = kinds[c]
        unique = distinct.get(c) == -1.0
        if not st["count"]:
            why[c] = "no values (NULL in every row)"
        elif kind == "text" and st["dates"]:
            why[c] = ("text that reads as dates or times: one category per date learns "
                      "nothing about other dates")
        elif rows >= IDENTIFIER_ROWS and unique and st["count"] == rows and (
                kind == "text" or st["max"] - st["min"] + 1 == rows):
            why[c] = ("an identifier: a different value in every row"
                      + (" (the row numbers)" if kind != "text" else ""))
        elif kind == "text" and max_categories:
            n = _distinct_count(distinct.get(c, 0.0), rows)
            if n > max_categories and n < 2 * max_categories:  # ANALYZE's guess, near the limit
                found = conn.execute(sql.SQL("SELECT pg_catalog.count(DISTINCT t.{}) FROM {} t")
                                     .format(sql.Identifier(c), ident)).fetchone()
                assert found is not None  # an aggregate: one row
                n = int(found[0])
                about = ""
            else:
                about = "about "
            if n > max_categories:
                why[c] = (f"{about}{n} distinct values: train() one-hot encodes at most "
                          f"max_categories ({max_categories}) and refuses more")
    return [c for c in features if c not in why], why


def _distinct_estimates(conn: psycopg.Connection[Any], ident: sql.Identifier,
                        columns: list[str], rows: int) -> dict[str, float]:
    """ANALYZE's n_distinct of each column (negative: a share of the rows,
    -1 all of them); the columns are analyzed first when they have none."""
    if not columns:
        return {}
    query = ("SELECT s.attname::pg_catalog.text, s.n_distinct FROM pg_catalog.pg_stats s "
             "JOIN pg_catalog.pg_class c ON c.relname OPERATOR(pg_catalog.=) s.tablename "
             "JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) c.relnamespace "
             "AND n.nspname OPERATOR(pg_catalog.=) s.schemaname "
             "WHERE c.oid OPERATOR(pg_catalog.=) %s::pg_catalog.regclass "
             "AND s.attname OPERATOR(pg_catalog.=) ANY (%s::pg_catalog.text[])")
    args = (ident.as_string(conn), columns)
    found = dict(conn.execute(query, args).fetchall())
    if set(found) != set(columns):
        conn.execute(sql.SQL("ANALYZE {} ({})").format(
            ident, sql.SQL(", ").join(sql.Identifier(c) for c in columns)))
        found = dict(conn.execute(query, args).fetchall())
    return {c: float(v) for c, v in found.items()}


def _distinct_count(estimate: float, rows: int) -> int:
    return int(round(-estimate * rows)) if estimate < 0 else int(estimate)


def label_values(conn: psycopg.Connection[Any], ident: sql.Identifier, label: str
                  ) -> np.ndarray:
    """Up to 22 distinct labels of the loaded table, for suggest_model."""
    rows = conn.execute(sql.SQL(
        "SELECT t.{l} FROM {t} t WHERE t.{l} IS NOT NULL GROUP BY t.{l} LIMIT 22").format(
            l=sql.Identifier(label), t=ident)).fetchall()
    vals = [r[0] for r in rows]
    if vals and all(isinstance(v, bool) for v in vals):
        return np.array(vals, dtype=np.bool_)
    if vals and all(isinstance(v, int) and not isinstance(v, bool) for v in vals):
        return np.array(vals, dtype=np.int64)
    if vals and all(isinstance(v, float) for v in vals):
        return np.array(vals, dtype=np.float64)
    return np.array(vals, dtype=object)


def finish_typed(conn: psycopg.Connection[Any], ident: sql.Identifier, table: str, rows: int,
                 label: str | None, feature_names: list[str], layout: str, analyze: bool,
                 kinds: dict[str, str]) -> LoadResult:
    """ANALYZE, then what to train with: the model the labels suggest and,
    in the columns layout, the features train() takes (plan_features)."""
    if analyze:
        conn.execute(sql.SQL("ANALYZE {}").format(ident))
    labels = label_values(conn, ident, label) if label is not None else None
    model, why = suggest_model(labels)
    left_out: dict[str, str] = {}
    if layout == "columns":
        trained, left_out = plan_features(conn, ident, feature_names, kinds)
        features = ", ".join(quote_ident(c) for c in trained)
    else:
        features = "features"
    return LoadResult(table=table, rows=rows, n_features=len(feature_names), layout=layout,
                      label=sql_name(label) if label is not None else None,
                      features=features, suggested_model=model, suggestion=why,
                      left_out=left_out)
