"""Private helpers of the loaders (loaders.py for arrays, sparse matrices and
libsvm files; csvfile.py for CSV files; tabular.py for Parquet and data
frames): naming and creating the table, choosing the feature columns and
the layout, the limits of a table's width, and what a load returns.
The loaders import this one, which imports none of them.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import psycopg
from pglast import ast, parser
from psycopg import errors as pgerrors
from psycopg import sql

from ._sql import is_node as _is
from ._sql import quote_ident
from ._types import KINDS, column_sql, integer_kind
from .errors import LoadError

# show a progress bar from this many rows when stderr is a terminal, or
# this many bytes of a file
PROGRESS_ROWS = 100_000
PROGRESS_BYTES = 64 << 20
# a row up to this size stays in its page with STORAGE MAIN (a heap page
# holds one tuple of at most ~8160 bytes; TOAST moves wider values out)
PAGE_ROW_BYTES = 8000
# PostgreSQL's limit on a table's columns (MaxHeapAttributeNumber)
MAX_COLUMNS = 1600

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
    for given, name in zip(frame.columns, names, strict=True):
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


def byte_bar(total: int, progress: bool | None, desc: str, unit: str) -> Any:
    show = progress if progress is not None else (
        total >= PROGRESS_BYTES and bool(getattr(sys.stderr, "isatty", lambda: False)()))
    if not show:
        return None
    from tqdm import tqdm

    return tqdm(total=total, desc=desc, unit=unit, unit_scale=True, file=sys.stderr)


def check_names(names: Sequence[str], label: str | None, layout: str) -> None:
    reserved = {"id"} | ({"features"} if layout == "array" else set())
    clash = [c for c in names if c in reserved]
    if label is not None and label in reserved:
        clash.append(label)
    if clash:
        raise LoadError(f"column {clash[0]!r} clashes with the loader's own column of that "
                        "name (id, and features in the array layout)", column=clash[0],
                        fix={"exclude": [clash[0]]}, advice="or rename it")
    seen: set[str] = set()
    for c in names:
        if c in seen:
            raise LoadError(f"column {c!r} appears twice", column=c,
                            advice="rename one of them")
        seen.add(c)


def choose_layout(layout: str, feature_types: dict[str, str], maybe_null: set[str]) -> str:
    """The layout asked for, checked against the features' types; "auto":
    the array when every feature is a number without missing values."""
    if layout in ("auto", None):
        numeric = all(KINDS[t].number for t in feature_types.values())
        return "array" if numeric and not (maybe_null & set(feature_types)) else "columns"
    if layout == "array":
        bad = [c for c, t in feature_types.items() if not KINDS[t].number]
        if bad:
            raise LoadError(f"layout 'array' holds numbers only, but column {bad[0]!r} is "
                            f"{KINDS[feature_types[bad[0]]].display}", column=bad[0],
                            fix={"layout": "columns"},
                            advice="the server one-hot encodes text and boolean columns")
        return "array"
    if layout == "columns":
        return "columns"
    raise ValueError(f"unknown layout {layout!r} for a table of columns: use 'auto', "
                     "'columns' or 'array'")


def float8_fit(max_row: int = 8160, others: int = 2) -> int:
    """How many double precision columns fit a row beside others (id and
    the label): a heap tuple's header (23 bytes and one NULL bit a column,
    8-aligned) and 8 bytes a value must fit a page's tuple (8160 bytes at
    the default block size)."""
    k = MAX_COLUMNS - others
    while k > 0 and ((23 + (k + others + 7) // 8 + 7) // 8 * 8 + 8 * (k + others)) > max_row:
        k -= 1
    return k


def too_wide(what: str, n_features: int, label: str | None, blocker: str | None
             ) -> LoadError:
    """Too many feature columns for a table, or for a row; blocker: why the
    array layout (one column for them all) does not take them either, or
    None when it does."""
    room = MAX_COLUMNS - 1 - (label is not None)
    fit = float8_fit()
    problem = (f"{what} has {n_features} feature columns, more than a table holds: PostgreSQL "
               f"allows {MAX_COLUMNS} columns a table, so {room} features fit beside id and "
               f"the label" if n_features > room else
               f"{what}: a row of its {n_features} feature columns is wider than a table "
               "row can be (a row must fit a page)")
    if blocker is None:
        return LoadError(f"{problem}; about {fit} columns of double precision fit",
                         fix={"layout": "array"},
                         advice="one array column holds them all (numbers only, no missing "
                                "values)")
    return LoadError(f"{problem}; about {fit} columns of double precision fit, and the array "
                     f"layout, one column for them all, holds numbers only: {blocker}",
                     fix={"features": None}, advice=f"load at most {fit} columns")


def array_blocker(feature_types: dict[str, str], maybe_null: set[str]) -> str | None:
    """Why the features cannot be one array column: the first that is not
    a number or may have no value; None when they can."""
    for c, t in feature_types.items():
        if not KINDS[t].number:
            return f"column {c!r} is {KINDS[t].display}"
    for c in feature_types:
        if c in maybe_null:
            return f"column {c!r} has missing values"
    return None


@contextmanager
def row_limits(what: str, n_features: int, label: str | None,
               blocker: Callable[[], str | None]) -> Iterator[None]:
    """The server's refusal of too many columns, or of a row wider than a
    page, as the loader's error with the layout that fits."""
    try:
        yield
    except (pgerrors.TooManyColumns, pgerrors.ProgramLimitExceeded) as exc:
        if isinstance(exc, pgerrors.ProgramLimitExceeded) and \
                "row is too big" not in str(exc.diag.message_primary):
            raise
        raise too_wide(what, n_features, label, blocker()) from None


def storage_main(conn: psycopg.Connection[Any], ident: sql.Identifier, column: str,
                 row_bytes: int) -> bool:
    """Keep an array column in its row (STORAGE MAIN) when a row fits a
    page: the default (EXTENDED) moves values over ~2 kB out of line to
    TOAST, so a block of pages then holds pointers and every read pays a
    second fetch (docs/loading.md). Wider rows keep the default."""
    if row_bytes > PAGE_ROW_BYTES:
        return False
    conn.execute(sql.SQL("ALTER TABLE {} ALTER COLUMN {} SET STORAGE MAIN").format(
        ident, sql.Identifier(column)))
    return True


def nul_error(where: str, column: str) -> LoadError:
    """A NUL character in a text value (PostgreSQL's text ends at one)."""
    return LoadError(f"{where}: column {column!r} holds a NUL character, which PostgreSQL's "
                     "text cannot store", column=column, advice="remove the NUL characters first")
