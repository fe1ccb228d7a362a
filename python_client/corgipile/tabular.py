"""Typed tables from CSV files, Parquet files and mixed DataFrames.

Each source becomes one table whose columns keep their names and their
types (boolean, integer, bigint, double precision, text), NULL where the
source had no value, plus ``id bigint`` (the row's 0-based position in the
source). corgipile.train takes it directly: text and boolean feature
columns are one-hot encoded by the server's stored preprocessing, and a
NULL category is all zeros (a NULL number skips the row).

How the bytes travel, with no Python per value:

- CSV: the file's bytes are streamed with ``COPY ... (FORMAT csv)`` into a
  temporary table of text columns, and one ``INSERT ... SELECT`` casts them
  on the server (``na_values`` become NULL there). Types are inferred from
  the first ``sample_rows`` records and can be overridden (``types=``);
- Parquet (needs pyarrow): record batches are written as CSV by Arrow's
  C++ writer and streamed with ``COPY`` straight into the typed table;
- DataFrames: pandas writes the CSV (NaN, NA and None as empty fields,
  which COPY reads as NULL), streamed the same way.

Layouts: ``"columns"`` (one column per feature, ``features => 'a, b, c'``)
or ``"array"`` (``features float8[]``, numeric features only). ``"auto"``
picks array when every feature is numeric and has no missing value in the
sample, columns otherwise.
"""

from __future__ import annotations

import csv
import io
import os
import re
import sys
import uuid
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
import psycopg
from psycopg import errors as pgerrors
from psycopg import sql

from ._sql import quote_ident
from ._tables import (LoadResult, create_table, pick_columns, progress_bar, sql_name,
                      suggest_model, table_name)

__all__ = ["NA_VALUES", "SAMPLE_ROWS", "infer_type", "load_csv", "load_parquet",
           "load_frame_columns"]

# what counts as a missing value in a CSV field (as pandas' defaults, short)
NA_VALUES: tuple[str, ...] = ("", "NA", "N/A", "NaN", "nan", "NULL", "null")
SAMPLE_ROWS = 10_000
PROGRESS_BYTES = 64 << 20
_CHUNK = 1 << 20
# a row up to this size stays in its page with STORAGE MAIN (a heap page
# holds one tuple of at most ~8160 bytes; TOAST moves wider values out)
_PAGE_ROW_BYTES = 8000

# SQL type (as written in CREATE TABLE) -> its pg_catalog name for casts
_CAST = {"boolean": "pg_catalog.bool", "integer": "pg_catalog.int4",
         "bigint": "pg_catalog.int8", "double precision": "pg_catalog.float8",
         "real": "pg_catalog.float4", "text": "pg_catalog.text"}
_ALIASES = {"bool": "boolean", "boolean": "boolean", "int": "integer", "int4": "integer",
            "integer": "integer", "int8": "bigint", "bigint": "bigint",
            "float": "double precision", "float8": "double precision",
            "double": "double precision", "double precision": "double precision",
            "float4": "real", "real": "real", "text": "text", "str": "text",
            "string": "text"}
_NUMERIC = ("integer", "bigint", "double precision", "real")
# the values each type's input function takes, for locating a bad field
_PATTERN = {
    "boolean": r"^\s*(t|true|f|false|y|yes|n|no|on|off|1|0)\s*$",
    "integer": r"^\s*[+-]?[0-9]+\s*$",
    "bigint": r"^\s*[+-]?[0-9]+\s*$",
    "double precision": (r"^\s*[+-]?(([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?"
                         r"|inf|infinity|nan)\s*$"),
}
_PATTERN["real"] = _PATTERN["double precision"]
_WHAT = {"boolean": "a boolean", "integer": "an integer", "bigint": "an integer",
         "double precision": "a number", "real": "a number"}

_BOOL_WORDS = {"true", "false", "t", "f", "yes", "no"}
_INT_RE = re.compile(r"\s*[+-]?[0-9]+\s*\Z")
_FLOAT_RE = re.compile(r"\s*[+-]?(([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?"
                       r"|inf|infinity)\s*\Z", re.I)


def sql_type(name: str) -> str:
    """A type given by the caller ('int', 'float', 'text', 'bool', ...) as
    the SQL name the loaders create."""
    try:
        return _ALIASES[name.strip().lower()]
    except KeyError:
        raise ValueError(f"unknown column type {name!r}: use one of boolean, integer, "
                         "bigint, float (double precision), real, text") from None


def infer_type(values: Iterable[str]) -> str:
    """The narrowest type that reads every (non-missing) value: boolean,
    integer, bigint, double precision, else text. No value at all: text."""
    seen = False
    is_bool = is_int = is_float = True
    big = False
    for v in values:
        seen = True
        if is_bool and v.strip().lower() not in _BOOL_WORDS:
            is_bool = False
        if is_int:
            if _INT_RE.match(v):
                if not big and not -2**31 <= int(v) < 2**31:
                    big = True
                if big and not -2**63 <= int(v) < 2**63:
                    is_int = False
            else:
                is_int = False
        if is_float and not is_int and not _FLOAT_RE.match(v):
            is_float = False
        if not (is_bool or is_int or is_float):
            return "text"
    if not seen:
        return "text"
    if is_bool:
        return "boolean"
    if is_int:
        return "bigint" if big else "integer"
    return "double precision" if is_float else "text"


# -- shared pieces ---------------------------------------------------------------

def _bar(total: int, progress: bool | None, desc: str, unit: str) -> Any:
    show = progress if progress is not None else (
        total >= PROGRESS_BYTES and bool(getattr(sys.stderr, "isatty", lambda: False)()))
    if not show:
        return None
    from tqdm import tqdm

    return tqdm(total=total, desc=desc, unit=unit, unit_scale=True, file=sys.stderr)


def _check_names(names: Sequence[str], label: str | None, layout: str) -> None:
    reserved = {"id"} | ({"features"} if layout == "array" else set())
    clash = [c for c in names if c in reserved]
    if label is not None and label in reserved:
        clash.append(label)
    if clash:
        raise ValueError(f"column {clash[0]!r} clashes with the loader's own column of that "
                         "name (id, and features in the array layout): exclude or rename it")
    if len(set(names)) != len(names):
        dup = next(c for c in names if list(names).count(c) > 1)
        raise ValueError(f"column {dup!r} appears twice")


def _layout(layout: str, feature_types: dict[str, str], maybe_null: set[str]) -> str:
    if layout in ("auto", None):
        numeric = all(t in _NUMERIC for t in feature_types.values())
        return "array" if numeric and not (maybe_null & set(feature_types)) else "columns"
    if layout == "array":
        bad = [c for c, t in feature_types.items() if t not in _NUMERIC]
        if bad:
            raise ValueError(f"layout 'array' holds numbers only, but column {bad[0]!r} is "
                             f"{feature_types[bad[0]]}: use layout='columns' (the server "
                             "one-hot encodes text and boolean columns)")
        return "array"
    if layout == "columns":
        return "columns"
    raise ValueError(f"unknown layout {layout!r} for a table of columns: use 'auto', "
                     "'columns' or 'array'")


def _label_values(conn: psycopg.Connection[Any], ident: sql.Identifier, label: str
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


def storage_main(conn: psycopg.Connection[Any], ident: sql.Identifier, column: str,
                 row_bytes: int) -> bool:
    """Keep an array column in its row (STORAGE MAIN) when a row fits a
    page: the default (EXTENDED) moves values over ~2 kB out of line to
    TOAST, so a block of pages then holds pointers and every read pays a
    second fetch (docs/loading.md). Wider rows keep the default."""
    if row_bytes > _PAGE_ROW_BYTES:
        return False
    conn.execute(sql.SQL("ALTER TABLE {} ALTER COLUMN {} SET STORAGE MAIN").format(
        ident, sql.Identifier(column)))
    return True


def _finish(conn: psycopg.Connection[Any], ident: sql.Identifier, table: str, rows: int,
            label: str | None, feature_names: list[str], layout: str, analyze: bool) -> Any:

    if analyze:
        conn.execute(sql.SQL("ANALYZE {}").format(ident))
    labels = _label_values(conn, ident, label) if label is not None else None
    model, why = suggest_model(labels)
    features = ", ".join(quote_ident(c) for c in feature_names) if layout == "columns" \
        else "features"
    return LoadResult(table=table, rows=rows, n_features=len(feature_names), layout=layout,
                      label=sql_name(label) if label is not None else None,
                      features=features, suggested_model=model, suggestion=why)


# -- CSV ---------------------------------------------------------------------------

def _sample(path: str | os.PathLike[str], delimiter: str, header: bool, encoding: str,
            rows: int) -> tuple[list[str], list[list[str]]]:
    with open(path, newline="", encoding=encoding) as f:
        reader = csv.reader(f, delimiter=delimiter)
        first = next(reader, None)
        if first is None:
            raise ValueError(f"{path}: empty file")
        sample: list[list[str]] = [] if header else [first]
        for row in reader:
            if len(sample) >= rows:
                break
            if row:
                sample.append(row)
    names = [h.strip() for h in first] if header else [f"x{j + 1}" for j in range(len(first))]
    return names, sample


def load_csv(conn: psycopg.Connection[Any], table: str, path: str | os.PathLike[str], *,
             label: str | int | None = "label", features: Sequence[str] | None = None,
             exclude: Sequence[str] | None = None, delimiter: str = ",", header: bool = True,
             layout: str = "auto", types: dict[str, str] | None = None,
             na_values: Sequence[str] = NA_VALUES, sample_rows: int = SAMPLE_ROWS,
             order: str = "given", seed: int | None = None, feature_type: str = "float8",
             if_exists: str = "fail", temporary: bool = False, progress: bool | None = None,
             analyze: bool = True, encoding: str = "utf-8") -> Any:
    """Load a CSV file into a typed table; see the module docstring.

    label: the label column's name or 0-based number (default "label"; the
    first column when header=False, named "label" then); None for none.
    features / exclude: the feature columns, or the columns to leave out.
    types: {column: type} overriding the inferred types ('text', 'integer',
    'bigint', 'float', 'real', 'boolean'). na_values: fields read as NULL.
    order: "given", "label", "feature:<column>" or "random" (seed=).
    feature_type: "float8" or "float4" for the floating-point features.
    """
    from .training import transaction

    if feature_type not in ("float8", "float4"):
        raise ValueError("feature_type is 'float8' or 'float4'")
    if len(delimiter) != 1:
        raise ValueError("delimiter must be one character")
    names, sample = _sample(path, delimiter, header, encoding, sample_rows)
    for k, row in enumerate(sample):
        if len(row) != len(names):
            raise ValueError(f"{path}, line {k + (2 if header else 1)}: {len(row)} fields, "
                             f"expected {len(names)}")
    if label is None:
        label_idx = None
    elif isinstance(label, int):
        if not 0 <= label < len(names):
            raise ValueError(f"{path}: no column number {label} (there are {len(names)})")
        label_idx = label
    elif label in names:
        label_idx = names.index(label)
    elif not header and label == "label":
        label_idx = 0
    else:
        raise ValueError(f"{path}: no column {label!r} (columns: {', '.join(names)}); "
                         "pass label=")
    if not header and label_idx is not None:
        names[label_idx] = "label"
    label_name = names[label_idx] if label_idx is not None else None
    picked = pick_columns(names, label_name, features, exclude)
    na = set(na_values)
    kept = ([label_name] if label_name is not None else []) + picked
    inferred: dict[str, str] = {}
    maybe_null: set[str] = set()
    for c in kept:
        j = names.index(c)
        vals = [r[j] for r in sample if r[j] not in na]
        if len(vals) < len(sample):
            maybe_null.add(c)
        inferred[c] = infer_type(vals)
    for c, t in (types or {}).items():
        if c not in names:
            raise ValueError(f"types= names column {c!r}, which {path} does not have")
        if c in inferred:
            inferred[c] = sql_type(t)
    if feature_type == "float4":
        inferred.update({c: "real" for c in picked if inferred[c] == "double precision"})
    feature_types = {c: inferred[c] for c in picked}
    layout = _layout(layout, feature_types, maybe_null)
    _check_names(picked, label_name, layout)
    ident = table_name(table)
    stage = f"corgipile_csv_{uuid.uuid4().hex[:12]}"
    stage_ident = sql.Identifier(stage)
    src = [sql.Identifier(f"c{j}") for j in range(len(names))]

    def cast(c: str) -> sql.Composable:
        col = src[names.index(c)]
        return sql.SQL("CASE WHEN s.{c} OPERATOR(pg_catalog.=) ANY (%(na)s::pg_catalog.text[]) "
                       "THEN NULL ELSE s.{c}::{t} END").format(c=col, t=sql.SQL(_CAST[inferred[c]]))

    target: list[tuple[str, str]] = [("id", "bigint")]
    values: list[sql.Composable] = [sql.SQL("s.n OPERATOR(pg_catalog.+) %(first)s")]
    if label_name is not None:
        target.append((label_name, inferred[label_name]))
        values.append(cast(label_name))
    if layout == "array":
        ftype = "real" if feature_type == "float4" else "double precision"
        target.append(("features", ftype + "[]"))
        values.append(sql.SQL("ARRAY[{}]::{}[]").format(
            sql.SQL(", ").join(cast(c) for c in picked), sql.SQL(_CAST[ftype])))
    else:
        target += [(c, inferred[c]) for c in picked]
        values += [cast(c) for c in picked]
    order_by = _order_sql(order, label_name, picked, cast)
    size = os.path.getsize(path)
    options = sql.SQL("FORMAT csv, HEADER {}, DELIMITER {}, ENCODING {}").format(
        sql.SQL("true" if header else "false"), sql.Literal(delimiter),
        sql.Literal(_pg_encoding(encoding)))
    # every column kept, in the file's order, no reordering: COPY straight
    # into the typed table, as psql's \copy would (empty fields are NULL);
    # a field COPY cannot read (an NA in a number column, a bad value) falls
    # back to the text staging below, which also names the line
    direct = (layout == "columns" and order in ("given", None) and set(kept) == set(names)
              and if_exists != "append" and "" in na)
    with transaction(conn):
    
        if direct:
            result = _copy_direct(conn, ident, table, path, names, inferred, na, options,
                                  label_name, picked, if_exists, temporary, progress, size,
                                  analyze)
            if result is not None:
                return result
        first = create_table(conn, ident, target, if_exists, temporary)
        if layout == "array":  # before the rows go in: it applies to new rows
            esize = 4 if feature_type == "float4" else 8
            storage_main(conn, ident, "features", 64 + len(picked) * esize)
        conn.execute(sql.SQL(
            "CREATE TEMPORARY TABLE {} (n bigint GENERATED ALWAYS AS IDENTITY "
            "(MINVALUE 0 START WITH 0), {})").format(
                stage_ident,
                sql.SQL(", ").join(sql.SQL("{} pg_catalog.text").format(c) for c in src)))
        copy_sql = sql.SQL("COPY {} ({}) FROM STDIN ({})").format(
            stage_ident, sql.SQL(", ").join(src), options)
        bar = _bar(size, progress, f"COPY {table}", "B")
        try:
            with conn.transaction():  # a savepoint: COPY's error becomes a ValueError
                with conn.cursor().copy(copy_sql) as copy, open(path, "rb") as f:
                    while chunk := f.read(_CHUNK):
                        copy.write(chunk)
                        if bar is not None:
                            bar.update(len(chunk))
        except (pgerrors.DataError, pgerrors.BadCopyFileFormat) as exc:
            raise ValueError(f"{path}: {exc.diag.message_primary}"
                             f"{' (' + exc.diag.context + ')' if exc.diag.context else ''}"
                             ) from None
        finally:
            if bar is not None:
                bar.close()
        if order == "random":
            conn.execute("SELECT pg_catalog.setseed(%s)",
                         (((seed if seed is not None else 0) % 2**31) / 2**31,))
        insert = sql.SQL("INSERT INTO {t} ({cols}) SELECT {vals} FROM {s} s{order}").format(
            t=ident, cols=sql.SQL(", ").join(sql.Identifier(c) for c, _ in target),
            vals=sql.SQL(", ").join(values), s=stage_ident, order=order_by)
        try:
            with conn.transaction():
                rows = conn.execute(insert, {"na": list(na), "first": first}).rowcount
        except (pgerrors.InvalidTextRepresentation, pgerrors.NumericValueOutOfRange,
                pgerrors.InvalidDatetimeFormat) as exc:
            raise _bad_field(conn, path, stage_ident, names, src, inferred, kept, na, header,
                             str(exc.diag.message_primary)) from None
        conn.execute(sql.SQL("DROP TABLE {}").format(stage_ident))
        result = _finish(conn, ident, table, rows, label_name, picked, layout, analyze)
    return result


def _copy_direct(conn: psycopg.Connection[Any], ident: sql.Identifier, table: str,
                 path: Any, names: list[str], types: dict[str, str], na: set[str],
                 options: sql.Composable, label: str | None, picked: list[str],
                 if_exists: str, temporary: bool, progress: bool | None, size: int,
                 analyze: bool) -> Any:
    """COPY the file straight into a table of its columns (id first, filled
    by a temporary identity); the other na_values of text columns become
    NULL afterwards. None (and nothing done) when COPY cannot read a field."""

    bar = _bar(size, progress, f"COPY {table}", "B")
    try:
        with conn.transaction():
            create_table(conn, ident, [("id", "bigint GENERATED BY DEFAULT AS IDENTITY "
                                         "(MINVALUE 0 START WITH 0)")]
                    + [(c, types[c]) for c in names], if_exists, temporary)
            cur = conn.cursor()
            with cur.copy(sql.SQL("COPY {} ({}) FROM STDIN ({})").format(
                    ident, sql.SQL(", ").join(sql.Identifier(c) for c in names), options)
                    ) as copy, open(path, "rb") as f:
                while chunk := f.read(_CHUNK):
                    copy.write(chunk)
                    if bar is not None:
                        bar.update(len(chunk))
            rows = cur.rowcount
            conn.execute(sql.SQL("ALTER TABLE {} ALTER COLUMN id DROP IDENTITY").format(ident))
            texts = [c for c in names if types[c] == "text"]
            others = sorted(na - {""})
            if texts and others:
                conn.execute(sql.SQL("UPDATE {} SET {} WHERE {}").format(
                    ident,
                    sql.SQL(", ").join(sql.SQL(
                        "{c} = CASE WHEN {c} OPERATOR(pg_catalog.=) ANY (%(na)s::pg_catalog."
                        "text[]) THEN NULL ELSE {c} END").format(c=sql.Identifier(c))
                        for c in texts),
                    sql.SQL(" OR ").join(sql.SQL(
                        "{} OPERATOR(pg_catalog.=) ANY (%(na)s::pg_catalog.text[])").format(
                            sql.Identifier(c)) for c in texts)), {"na": others})
    except (pgerrors.DataError, pgerrors.BadCopyFileFormat):
        return None
    finally:
        if bar is not None:
            bar.close()
    return _finish(conn, ident, table, rows, label, picked, "columns", analyze)


def _order_sql(order: str, label: str | None, picked: list[str],
               cast: Any) -> sql.Composable:
    if order in ("given", None):
        # a temporary table's sequential scan returns the rows as inserted
        # (no parallel or synchronized scans of temporary tables)
        return sql.SQL("")
    if order == "label":
        if label is None:
            raise ValueError("order='label' needs a label")
        return sql.SQL(" ORDER BY {}, s.n").format(cast(label))
    if order == "random":
        return sql.SQL(" ORDER BY pg_catalog.random()")
    if isinstance(order, str) and order.startswith("feature:"):
        key = order.split(":", 1)[1]
        if key.lstrip("-").isdigit():
            j = int(key)
            if not 0 <= j < len(picked):
                raise ValueError(f"feature {j} out of range: there are {len(picked)} features "
                                 "(0-based)")
            key = picked[j]
        if key not in picked:
            raise ValueError(f"no feature named {key!r}")
        return sql.SQL(" ORDER BY {}, s.n").format(cast(key))
    raise ValueError(f"unknown order {order!r}: use 'given', 'label', 'feature:J' or 'random'")


def _pg_encoding(encoding: str) -> str:
    e = encoding.lower().replace("-", "").replace("_", "")
    return {"utf8": "UTF8", "latin1": "LATIN1", "iso88591": "LATIN1", "ascii": "SQL_ASCII",
            "cp1252": "WIN1252", "windows1252": "WIN1252"}.get(e, encoding)


def _bad_field(conn: psycopg.Connection[Any], path: Any, stage: sql.Identifier,
               names: list[str], src: list[sql.Identifier], types: dict[str, str],
               kept: list[str], na: set[str], header: bool, message: str) -> ValueError:
    """The first field that its column's type cannot read, as an error
    naming the line, the column and the value, with the override."""
    for c in kept:
        t = types[c]
        if t not in _PATTERN:
            continue
        row = conn.execute(sql.SQL(
            "SELECT s.n, s.{c} FROM {s} s WHERE NOT s.{c} OPERATOR(pg_catalog.=) "
            "ANY (%s::pg_catalog.text[]) AND s.{c} OPERATOR(pg_catalog.!~*) %s "
            "ORDER BY s.n LIMIT 1").format(c=src[names.index(c)], s=stage),
            (list(na), _PATTERN[t])).fetchone()
        if row is not None:
            line = int(row[0]) + (2 if header else 1)
            return ValueError(f"{path}, line {line}: column {c!r} is not {_WHAT[t]}: "
                              f"{row[1]!r} (its type was inferred from the first rows; "
                              f"pass types={{{c!r}: 'text'}} or another type)")
    return ValueError(f"{path}: {message} (pass types= to choose the column types)")


# -- CSV bytes into a typed table (Parquet, DataFrames) -------------------------------

def _copy_csv_chunks(conn: psycopg.Connection[Any], ident: sql.Identifier,
                     columns: list[str], chunks: Iterable[tuple[bytes, int]], bar: Any) -> None:
    query = sql.SQL("COPY {} ({}) FROM STDIN (FORMAT csv)").format(
        ident, sql.SQL(", ").join(sql.Identifier(c) for c in columns))
    with conn.cursor().copy(query) as copy:
        for data, rows in chunks:
            copy.write(data)
            if bar is not None:
                bar.update(rows)


def _typed_columns(dtypes: dict[str, Any], label: str | None, feature_type: str
                   ) -> dict[str, str]:
    out = {}
    for c, kind in dtypes.items():
        if kind == "double precision" and feature_type == "float4" and c != label:
            kind = "real"
        out[c] = kind
    return out


def _pandas_type(series: Any) -> str:
    import pandas as pd

    dt = series.dtype
    if pd.api.types.is_bool_dtype(dt):
        return "boolean"
    if pd.api.types.is_integer_dtype(dt):
        info = np.iinfo(dt.numpy_dtype if hasattr(dt, "numpy_dtype") else dt)
        return "integer" if info.min >= -2**31 and info.max < 2**31 else "bigint"
    if pd.api.types.is_float_dtype(dt):
        return "double precision"
    if pd.api.types.is_numeric_dtype(dt):
        raise ValueError(f"column {series.name!r} has type {dt}, which the loader does not "
                         "store (use numbers, booleans or text)")
    # object, string, category: text; a column of Python booleans and NA too
    vals = series.dropna()
    if len(vals) and all(isinstance(v, (bool, np.bool_)) for v in vals):
        return "boolean"
    return "text"


def load_frame_columns(conn: psycopg.Connection[Any], table: str, frame: Any,
                       label: str | None, names: list[str], *, order: str = "given",
                       seed: int | None = None, feature_type: str = "float8",
                       if_exists: str = "fail", temporary: bool = False,
                       progress: bool | None = None, analyze: bool = True,
                       types: dict[str, str] | None = None) -> Any:
    """A DataFrame with text, boolean or missing values as a columns-layout
    table: NaN, NA and None become NULL, text stays text."""
    from .training import transaction

    cols = ([label] if label is not None else []) + names
    _check_names(names, label, "columns")
    kinds = {c: _pandas_type(frame[c]) for c in cols}
    for c, t in (types or {}).items():
        if c not in kinds:
            raise ValueError(f"types= names column {c!r}, which is not loaded")
        kinds[c] = sql_type(t)
    kinds = _typed_columns(kinds, label, feature_type)
    sub = frame[cols].reset_index(drop=True)
    n = len(sub)
    perm = _frame_order(order, sub, label, names, seed)
    ids = np.arange(n, dtype=np.int64)
    if perm is not None:
        sub, ids = sub.iloc[perm].reset_index(drop=True), ids[perm]
    ident = table_name(table)
    with transaction(conn):
    
        first = create_table(conn, ident, [("id", "bigint")] + [(c, kinds[c]) for c in cols],
                        if_exists, temporary)
        import pandas as pd


        out = sub.copy()
        for c in cols:  # booleans as true/false even in object columns
            if kinds[c] == "boolean" and out[c].dtype == object:
                out[c] = out[c].map(lambda v: None if pd.isna(v) else bool(v))
        out.insert(0, "id", ids + first)
        bar = progress_bar(n, progress, f"COPY {table}")
        step = max(1, (4 << 20) // max(1, 16 * len(cols)))

        def chunks() -> Iterable[tuple[bytes, int]]:
            for start in range(0, n, step):
                part = out.iloc[start:start + step]
                buf = io.StringIO()
                part.to_csv(buf, index=False, header=False, na_rep="",
                            quoting=csv.QUOTE_MINIMAL, lineterminator="\n")
                yield buf.getvalue().encode("utf-8"), len(part)

        try:
            _copy_csv_chunks(conn, ident, ["id"] + cols, chunks(), bar)
        finally:
            if bar is not None:
                bar.close()
        return _finish(conn, ident, table, n, label, names, "columns", analyze)


def _frame_order(order: str, frame: Any, label: str | None, names: list[str],
                 seed: int | None) -> np.ndarray | None:
    if order in ("given", None):
        return None
    if order == "label":
        if label is None:
            raise ValueError("order='label' needs a label")
        return np.asarray(frame[label].argsort(kind="stable"))
    if order == "random":
        return np.random.default_rng(seed).permutation(len(frame))
    if isinstance(order, str) and order.startswith("feature:"):
        key = order.split(":", 1)[1]
        if key.lstrip("-").isdigit():
            key = names[int(key)]
        if key not in names:
            raise ValueError(f"no feature named {key!r}")
        return np.asarray(frame[key].argsort(kind="stable"))
    raise ValueError(f"unknown order {order!r}: use 'given', 'label', 'feature:J' or 'random'")


# -- Parquet -------------------------------------------------------------------------

def _arrow_type(field: Any) -> str:
    import pyarrow as pa

    t = field.type
    if pa.types.is_dictionary(t):
        t = t.value_type
    if pa.types.is_boolean(t):
        return "boolean"
    if pa.types.is_integer(t):
        return "integer" if t.bit_width < 32 or (t.bit_width == 32 and
                                                 pa.types.is_signed_integer(t)) else "bigint"
    if pa.types.is_floating(t):
        return "double precision"
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return "text"
    raise ValueError(f"Parquet column {field.name!r} has type {t}, which the loader does not "
                     "store (numbers, booleans and strings are)")


def load_parquet(conn: psycopg.Connection[Any], table: str, path: str | os.PathLike[str], *,
                 label: str | None = "label", features: Sequence[str] | None = None,
                 exclude: Sequence[str] | None = None, feature_type: str = "float8",
                 if_exists: str = "fail", temporary: bool = False,
                 progress: bool | None = None, analyze: bool = True,
                 batch_rows: int = 65_536) -> Any:
    """Load a Parquet file (needs pyarrow) into a columns-layout table:
    the columns keep their names and types (numbers, booleans, strings as
    text), nulls stay NULL. Streamed batch by batch in file order."""
    try:
        import pyarrow as pa
        import pyarrow.csv as pacsv
        import pyarrow.parquet as pq
    except ImportError as exc:
        raise ImportError("load_parquet needs pyarrow: pip install 'corgipile[parquet]'"
                          ) from exc
    from .training import transaction

    pf = pq.ParquetFile(path)
    schema = pf.schema_arrow
    names = list(schema.names)
    if label is not None and label not in names:
        raise ValueError(f"{path}: no column {label!r} (columns: {', '.join(names)}); "
                         "pass label=")
    picked = pick_columns(names, label, features, exclude)
    cols = ([label] if label is not None else []) + picked
    _check_names(picked, label, "columns")
    kinds = _typed_columns({c: _arrow_type(schema.field(c)) for c in cols}, label,
                           feature_type)
    n = pf.metadata.num_rows
    ident = table_name(table)
    options = pacsv.WriteOptions(include_header=False, quoting_style="needed")
    with transaction(conn):
    
        first = create_table(conn, ident, [("id", "bigint")] + [(c, kinds[c]) for c in cols],
                        if_exists, temporary)

        def chunks() -> Iterable[tuple[bytes, int]]:
            at = first
            for batch in pf.iter_batches(batch_size=batch_rows, columns=cols):
                arrays = [pa.array(np.arange(at, at + batch.num_rows, dtype=np.int64))]
                for c in cols:
                    a = batch.column(c)
                    if pa.types.is_dictionary(a.type):
                        a = a.dictionary_decode()
                    arrays.append(a)
                at += batch.num_rows
                buf = pa.BufferOutputStream()
                pacsv.write_csv(pa.RecordBatch.from_arrays(arrays, ["id"] + cols), buf, options)
                yield buf.getvalue().to_pybytes(), batch.num_rows


        bar = progress_bar(n, progress, f"COPY {table}")
        try:
            _copy_csv_chunks(conn, ident, ["id"] + cols, chunks(), bar)
        finally:
            if bar is not None:
                bar.close()
        return _finish(conn, ident, table, n, label, picked, "columns", analyze)
