"""Private helpers of the loaders (loaders.py for arrays, sparse matrices and
libsvm files; tabular.py for CSV, Parquet and data frames): naming and
creating the table, choosing the feature columns, and what a load returns.
Both modules import this one, which imports neither.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import psycopg
from pglast import ast, parser
from psycopg import sql

from ._sql import is_node as _is
from ._sql import quote_ident

# show a progress bar from this many rows when stderr is a terminal
PROGRESS_ROWS = 100_000

@dataclass(frozen=True)
class LoadResult:
    """What a loader wrote: the table, the row count, and the names to pass
    to corgipile.train (``train_params()``)."""

    table: str
    rows: int
    n_features: int
    layout: str
    label: str | None
    features: str
    feature_indices: str | None = None
    suggested_model: str | None = None
    suggestion: str | None = None

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
    if y.dtype == np.bool_:
        return "bool"
    if np.issubdtype(y.dtype, np.integer):
        if y.size and (y.min() < -2**31 or y.max() >= 2**31):
            return "int8"
        return "int4"
    if np.issubdtype(y.dtype, np.floating):
        if integral_floats and y.size and np.all(np.isfinite(y)) and np.all(y == np.round(y)) \
                and np.abs(y).max() < 2**31:
            return "int4"
        return "float8"
    if y.dtype.kind in "US" or y.dtype == object:
        return "text"
    raise ValueError(f"unsupported label dtype {y.dtype}")

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

def create_table(conn: psycopg.Connection[Any], ident: sql.Identifier, columns: list[tuple[str, str]],
            if_exists: str, temporary: bool) -> int:
    """Create the table (per if_exists); returns the first id to use."""
    if if_exists not in ("fail", "replace", "append"):
        raise ValueError("if_exists is 'fail', 'replace' or 'append'")
    cols = sql.SQL(", ").join(sql.SQL("{} " + typ).format(sql.Identifier(name))
                              for name, typ in columns)
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

def pick_columns(names: Sequence[str], label: str | None, features: Sequence[str] | None,
                  exclude: Sequence[str] | None) -> list[str]:
    """The feature columns: features= as given, or every column but the
    label and exclude=; unknown names are errors that list the columns."""
    for given, what in ((features, "feature"), (exclude, "excluded")):
        unknown = [c for c in given or () if c not in names]
        if unknown:
            raise ValueError(f"no column {unknown[0]!r} ({what} columns must be among: "
                             f"{', '.join(names)})")
    if features is not None and exclude is not None:
        raise ValueError("give the feature columns or the columns to exclude, not both")
    if features is not None:
        if label is not None and label in features:
            raise ValueError(f"the label column {label!r} cannot also be a feature")
        return list(features)
    picked = [c for c in names if c != label and c not in set(exclude or ())]
    if not picked:
        raise ValueError("no feature columns are left")
    return picked


def progress_bar(n: int, progress: bool | None, desc: str) -> Any:
    show = progress if progress is not None else (
        n >= PROGRESS_ROWS and bool(getattr(sys.stderr, "isatty", lambda: False)()))
    if not show:
        return None
    from tqdm import tqdm

    return tqdm(total=n, desc=desc, unit="row", unit_scale=True, file=sys.stderr)
