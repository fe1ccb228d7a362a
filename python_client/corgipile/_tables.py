"""Private helpers of the loaders (loaders.py for arrays, sparse matrices and
libsvm files; tabular.py for CSV, Parquet and data frames): naming and
creating the table, choosing the feature columns, and what a load returns.
Both modules import this one, which imports neither.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import psycopg
from pglast import ast, parser
from psycopg import sql

from ._sql import is_node as _is
from ._sql import quote_ident
from ._types import KINDS, column_sql, integer_kind
from .errors import LoadError

# show a progress bar from this many rows when stderr is a terminal
PROGRESS_ROWS = 100_000

@dataclass(frozen=True)
class LoadResult:
    """What a loader wrote: the table, the row count, and the names to pass
    to corgipile.train (``train_params()``). ``features`` names the loaded
    feature columns that train() takes as they are; ``left_out`` the others
    (a date, an identifier, a column without values, more categories than
    train() encodes), each with the reason."""

    table: str
    rows: int
    n_features: int
    layout: str
    label: str | None
    features: str
    feature_indices: str | None = None
    suggested_model: str | None = None
    suggestion: str | None = None
    # loaded columns that features leaves out, each with the reason
    left_out: dict[str, str] = field(default_factory=dict)

    def train_params(self) -> dict[str, Any]:
        """label/features/feature_indices/n_features for client.train."""
        out: dict[str, Any] = {"features": self.features}
        if self.label is not None:
            out["label"] = self.label
        if self.feature_indices is not None:
            out["feature_indices"] = self.feature_indices
            out["n_features"] = self.n_features
        return out

    def __int__(self) -> int:
        return self.rows

def table_name(name: str) -> sql.Identifier:
    """A table name as written in SQL (``points``, ``s.points``,
    ``"My Table"``), checked with PostgreSQL's grammar, as an Identifier."""
    try:
        stmts: Any = parser.parse_sql(f"SELECT * FROM {name}")
    except parser.ParseError:
        stmts = []
    stmt: Any = stmts[0].stmt if len(stmts) == 1 else None
    if (not _is(stmt, ast.SelectStmt) or stmt.whereClause is not None
            or len(stmt.fromClause or ()) != 1 or len(stmt.targetList or ()) != 1
            or any(getattr(stmt, a, None) for a in (
                "sortClause", "limitCount", "limitOffset", "groupClause", "lockingClause",
                "withClause", "distinctClause", "havingClause", "windowClause", "larg"))
            or not _is(stmt.fromClause[0], ast.RangeVar)
            or stmt.fromClause[0].alias is not None or stmt.fromClause[0].catalogname):
        raise ValueError(f"not a table name: {name!r} (quote names with capitals or spaces: "
                         "'\"My Table\"')")
    rv: Any = stmt.fromClause[0]
    return sql.Identifier(rv.schemaname, rv.relname) if rv.schemaname \
        else sql.Identifier(rv.relname)

def label_type(y: np.ndarray, integral_floats: bool) -> str:
    """The column type of an array of labels: bool, int4, int8, float8 or
    text; integral_floats: whole numbers in a float array are integers."""
    if y.dtype == np.bool_:
        return "bool"
    if np.issubdtype(y.dtype, np.integer):
        kind = integer_kind(int(y.min()), int(y.max())) if y.size else "int4"
        if kind is None:
            raise LoadError(f"the labels reach {int(y.max())}, outside bigint's range",
                            advice="pass them as floats or text")
        return kind
    if np.issubdtype(y.dtype, np.floating):
        if integral_floats and y.size and np.all(np.isfinite(y)) and \
                np.all(y == np.round(y)) and np.abs(y).max() < 2.0**63:
            return integer_kind(int(y.min()), int(y.max())) or "float8"
        return "float8"
    if y.dtype.kind in "US" or y.dtype == object:
        return "text"
    raise LoadError(f"labels of dtype {y.dtype} cannot be stored",
                    advice="pass numbers, booleans or strings")


def labels_of(y: Any, n: int, integral_floats: bool) -> tuple[np.ndarray, str]:
    """y checked against n rows, as the array to write and its column type."""
    labels = np.asarray(y)
    if labels.shape != (n,):
        raise ValueError(f"y must have shape ({n},), got {labels.shape}")
    kind = label_type(labels, integral_floats)
    if kind in ("int4", "int8"):
        return labels.astype(np.int64), kind
    if kind == "float8":
        return labels.astype(np.float64), kind
    if kind == "bool":
        return labels.astype(np.bool_), kind
    return labels, kind


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

def create_table(conn: psycopg.Connection[Any], ident: sql.Identifier,
                 columns: list[tuple[str, str]], if_exists: str, temporary: bool,
                 identity: bool = False) -> int:
    """Create the table (per if_exists); returns the first id to use.
    columns: (name, type) with the loaders' type names (_types.KINDS, or
    an array of one: "float8[]"), written with their schema. identity: the
    first column numbers the rows from 0 as they are inserted."""
    if if_exists not in ("fail", "replace", "append"):
        raise ValueError("if_exists is 'fail', 'replace' or 'append'")
    cols = sql.SQL(", ").join(
        sql.SQL("{} {}{}").format(sql.Identifier(name), column_sql(typ),
                                  sql.SQL(" GENERATED BY DEFAULT AS IDENTITY (MINVALUE 0 "
                                          "START WITH 0)" if identity and i == 0 else ""))
        for i, (name, typ) in enumerate(columns))
    temp = sql.SQL("TEMPORARY ") if temporary else sql.SQL("")
    if if_exists == "replace":
        conn.execute(sql.SQL("DROP TABLE IF EXISTS {}").format(ident))
    if if_exists == "append":
        exists = conn.execute("SELECT pg_catalog.to_regclass(%s)",
                              (ident.as_string(conn),)).fetchone()
        if exists and exists[0] is not None:
            row = conn.execute(sql.SQL(
                "SELECT coalesce(pg_catalog.max(t.id) OPERATOR(pg_catalog.+) 1, 0) FROM {} t"
            ).format(ident)).fetchone()
            return int(row[0]) if row else 0
    conn.execute(sql.SQL("CREATE {}TABLE {} ({})").format(temp, ident, cols))
    return 0


def sql_name(name: str) -> str:
    """name as SQL text for corgipile.train's label: bare when PostgreSQL
    would read it back unchanged, else quoted."""
    from pglast import keywords

    if re.fullmatch(r"[a-z_][a-z0-9_$]*", name) and name not in keywords.RESERVED_KEYWORDS \
            and name not in keywords.TYPE_FUNC_NAME_KEYWORDS \
            and name not in keywords.COL_NAME_KEYWORDS:
        return name
    return quote_ident(name)

def frame_columns(frame: Any) -> list[str]:
    """A DataFrame's column names as the table's: names that are not
    strings as their text (0 -> "0", as pandas' to_sql writes them); two
    columns of one name, or a name of several levels, are errors."""
    import pandas as pd

    if isinstance(frame.columns, pd.MultiIndex):
        raise LoadError("the DataFrame's columns have several levels (a MultiIndex); a table "
                        "column has one name",
                        advice="flatten them first, e.g. frame.columns = "
                               "['_'.join(map(str, c)) for c in frame.columns]")
    names = [c if isinstance(c, str) else str(c) for c in frame.columns]
    seen: dict[str, Any] = {}
    for given, name in zip(frame.columns, names):
        if name in seen:
            how = "" if seen[name] == given else f" (as {seen[name]!r} and {given!r})"
            raise LoadError(f"column {name!r} appears twice in the DataFrame{how}",
                            column=name, advice="rename one of them")
        seen[name] = given
    return names


def pick_columns(names: Sequence[str], label: str | None, features: Sequence[str] | None,
                  exclude: Sequence[str] | None) -> list[str]:
    """The feature columns: features= as given, or every column but the
    label and exclude=; unknown names are errors that list the columns."""
    for given, what in ((features, "feature"), (exclude, "excluded")):
        known = set(names)
        unknown = [c for c in given or () if c not in known]
        if unknown:
            raise ValueError(f"no column {unknown[0]!r} ({what} columns must be among: "
                             f"{', '.join(names)})")
    if features is not None and exclude is not None:
        raise ValueError("give the feature columns or the columns to exclude, not both")
    if features is not None:
        if label is not None and label in features:
            raise ValueError(f"the label column {label!r} cannot also be a feature")
        return list(features)
    left = set(exclude or ())
    picked = [c for c in names if c != label and c not in left]
    if not picked:
        raise ValueError("no feature columns are left")
    return picked


def source_order(names: Sequence[str], label: str | None, picked: Sequence[str]
                 ) -> list[str]:
    """The label and the feature columns in the source's order: every
    loader writes a source's columns as it has them, so the same data makes
    the same table (column order sets the rows' widths, so the pages)."""
    kept = set(picked) | ({label} if label is not None else set())
    return [c for c in names if c in kept]


def progress_bar(n: int, progress: bool | None, desc: str) -> Any:
    show = progress if progress is not None else (
        n >= PROGRESS_ROWS and bool(getattr(sys.stderr, "isatty", lambda: False)()))
    if not show:
        return None
    from tqdm import tqdm

    return tqdm(total=n, desc=desc, unit="row", unit_scale=True, file=sys.stderr)


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
    as text. One scan of the table."""
    from .params import train_defaults

    why: dict[str, str] = {}
    exprs: list[sql.Composable] = []
    asks: list[tuple[str, str]] = []
    for c in features:
        kind = KINDS[kinds[c]]
        if not (kind.number or kind.category):
            why[c] = f"a {kind.display} column: train() takes numbers, text and booleans"
            continue
        col = sql.SQL("t.{}").format(sql.Identifier(c))
        asks.append((c, "count"))
        exprs.append(sql.SQL("pg_catalog.count({})").format(col))
        if kind.name in ("int4", "int8", "text"):
            asks.append((c, "distinct"))
            exprs.append(sql.SQL("pg_catalog.count(DISTINCT {})").format(col))
        if kind.name in ("int4", "int8"):
            asks += [(c, "min"), (c, "max")]
            exprs += [sql.SQL("pg_catalog.min({})").format(col),
                      sql.SQL("pg_catalog.max({})").format(col)]
        if kind.name == "text":
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
    for (c, what), value in zip(asks, row[1:]):
        stats.setdefault(c, {})[what] = value
    max_categories = int(train_defaults(conn).get("max_categories") or 0)
    for c, st in stats.items():
        kind = kinds[c]
        distinct = st.get("distinct")
        if not st["count"]:
            why[c] = "no values (NULL in every row)"
        elif kind == "text" and st["dates"]:
            why[c] = ("text that reads as dates or times: one category per date learns "
                      "nothing about other dates")
        elif rows >= IDENTIFIER_ROWS and distinct == rows and (
                kind == "text" or st["max"] - st["min"] + 1 == rows):
            why[c] = ("an identifier: a different value in every row"
                      + (" (the row numbers)" if kind != "text" else ""))
        elif kind == "text" and max_categories and distinct > max_categories:
            why[c] = (f"{distinct} distinct values: train() one-hot encodes at most "
                      f"max_categories ({max_categories}) and refuses more")
    return [c for c in features if c not in why], why
