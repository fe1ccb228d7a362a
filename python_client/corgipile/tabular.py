"""Typed tables from Parquet files and mixed DataFrames (CSV files: csvfile.py).

Each source becomes one table whose columns keep their names and get their
types by one rule (corgipile._types: boolean, integer, bigint, double
precision, text, and the dates, timestamps and decimals a source declares),
NULL where the source had no value, plus ``id bigint`` (the row's 0-based
position in the source). corgipile.train takes it directly: text and
boolean feature columns are one-hot encoded by the server's stored
preprocessing, and a NULL category is all zeros (a NULL number skips the
row). The result's ``features`` leaves out what train() would refuse or
cannot learn from (dates, identifiers, columns without values, more
categories than it encodes), and ``left_out`` says why (suggest.py).

How the bytes travel, with no Python per value:

- Parquet (needs pyarrow): record batches are written as CSV by Arrow's
  C++ writer and streamed with ``COPY`` straight into the typed table;
- DataFrames: pandas writes the CSV (NaN, NA and None as empty fields,
  which COPY reads as NULL), streamed the same way; a frame of numbers and
  booleans without missing values goes by binary COPY (loaders.py).
"""

from __future__ import annotations

import csv
import io
import os
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np
import psycopg
from psycopg import sql

from ._tables import (
    MAX_COLUMNS,
    LoadResult,
    array_blocker,
    check_names,
    create_table,
    nul_error,
    pick_columns,
    progress_bar,
    row_limits,
    source_order,
    table_name,
    too_wide,
)
from ._types import infer_arrow, parse_kind
from .csvfile import load_csv
from .errors import LoadError
from .suggest import finish_typed

__all__ = ["load_csv", "load_parquet", "load_frame_columns"]


# -- DataFrames of mixed types ------------------------------------------------------

def _copy_csv_chunks(conn: psycopg.Connection[Any], ident: sql.Identifier,
                     columns: list[str], chunks: Iterable[tuple[bytes, int]], bar: Any) -> None:
    query = sql.SQL("COPY {} ({}) FROM STDIN (FORMAT csv)").format(
        ident, sql.SQL(", ").join(sql.Identifier(c) for c in columns))
    with conn.cursor().copy(query) as copy:
        for data, rows in chunks:
            copy.write(data)
            if bar is not None:
                bar.update(rows)


def _typed_columns(kinds: dict[str, str], label: str | None, feature_type: str
                   ) -> dict[str, str]:
    return {c: "float4" if k == "float8" and feature_type == "float4" and c != label else k
            for c, k in kinds.items()}


def _frame_for_copy(frame: Any, kinds: dict[str, str]) -> Any:
    """The frame's values as COPY's CSV input reads them into kinds:
    booleans as true/false, whole numbers of a float column as integers,
    text without NUL characters."""
    import pandas as pd

    out = frame.copy()
    for c, kind in kinds.items():
        s = out[c]
        if kind == "bool" and s.dtype == object:
            out[c] = s.map(lambda v: None if pd.isna(v) else bool(v))
        elif kind in ("int4", "int8") and pd.api.types.is_float_dtype(s.dtype):
            vals = s.dropna()
            frac = vals[vals != np.round(vals)]
            if len(frac):
                raise LoadError(f"column {c!r} is not an integer: {frac.iloc[0]!r} (row "
                                f"{frac.index[0]})", column=c, fix={"types": {c: "float"}})
            out[c] = s.astype("Int64")
        elif kind == "text" and (pd.api.types.is_object_dtype(s.dtype)
                                 or pd.api.types.is_string_dtype(s.dtype)):
            nul = s.astype("string").str.contains("\x00", regex=False).fillna(False)
            if nul.any():
                raise nul_error(f"the DataFrame, row {int(np.argmax(nul.to_numpy()))}", c)
    return out


def load_frame_columns(conn: psycopg.Connection[Any], table: str, frame: Any,
                       label: str | None, names: list[str], kinds: dict[str, str], *,
                       order: str = "given", seed: int | None = None,
                       feature_type: str = "float8", if_exists: str = "fail",
                       temporary: bool = False, progress: bool | None = None,
                       analyze: bool = True) -> LoadResult:
    """A DataFrame with text, boolean or missing values as a columns-layout
    table of kinds (_types.frame_kinds): NaN, NA and None become NULL."""
    from .training import transaction

    cols = source_order(list(frame.columns), label, names)
    check_names(names, label, "columns")
    if len(cols) + 1 > MAX_COLUMNS:
        raise too_wide("the DataFrame", len(names), label, array_blocker(
            {c: kinds[c] for c in names}, {c for c in names if frame[c].isna().any()}))
    kinds = _typed_columns({c: kinds[c] for c in cols}, label, feature_type)
    sub = _frame_for_copy(frame[cols].reset_index(drop=True), kinds)
    n = len(sub)
    perm = _frame_order(order, sub, label, names, seed)
    ids = np.arange(n, dtype=np.int64)
    if perm is not None:
        sub, ids = sub.iloc[perm].reset_index(drop=True), ids[perm]
    ident = table_name(table)
    with transaction(conn):
        first = create_table(conn, ident, [("id", "int8")] + [(c, kinds[c]) for c in cols],
                             if_exists, temporary)
        sub.insert(0, "id", ids + first)
        bar = progress_bar(n, progress, f"COPY {table}")
        step = max(1, (4 << 20) // max(1, 16 * len(cols)))

        def chunks() -> Iterable[tuple[bytes, int]]:
            for start in range(0, n, step):
                part = sub.iloc[start:start + step]
                buf = io.StringIO()
                part.to_csv(buf, index=False, header=False, na_rep="",
                            quoting=csv.QUOTE_MINIMAL, lineterminator="\n")
                yield buf.getvalue().encode("utf-8"), len(part)

        try:
            with row_limits("the DataFrame", len(names), label, lambda: array_blocker(
                    {c: kinds[c] for c in names}, {c for c in names if sub[c].isna().any()})):
                _copy_csv_chunks(conn, ident, ["id"] + cols, chunks(), bar)
        finally:
            if bar is not None:
                bar.close()
        return finish_typed(conn, ident, table, n, label, names, "columns", analyze, kinds)


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

def _arrow_for_copy(a: Any, kind: str, name: str, batch_start: int) -> Any:
    """An Arrow column as Arrow's CSV writer should write it for kind:
    dictionaries decoded, whole-number floats as integers, text checked
    for NUL characters."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if pa.types.is_dictionary(a.type):
        a = a.dictionary_decode()
    if kind in ("int4", "int8") and not pa.types.is_integer(a.type):
        try:
            a = pc.cast(a, pa.int64())
        except pa.ArrowInvalid:
            raise LoadError(f"column {name!r} is not an integer in the rows from "
                            f"{batch_start}", column=name, fix={"types": {name: "float"}}
                            ) from None
    if pa.types.is_string(a.type) or pa.types.is_large_string(a.type):
        nul = pc.match_substring(a, "\x00")
        if pc.any(nul).as_py():
            i = pc.index(nul, True).as_py()
            raise nul_error(f"the Parquet file, row {batch_start + i}", name)
    return a


def load_parquet(conn: psycopg.Connection[Any], table: str, path: str | os.PathLike[str], *,
                 label: str | None = "label", features: Sequence[str] | None = None,
                 exclude: Sequence[str] | None = None, types: dict[str, str] | None = None,
                 feature_type: str = "float8", if_exists: str = "fail",
                 temporary: bool = False, progress: bool | None = None,
                 analyze: bool = True, batch_rows: int = 65_536) -> LoadResult:
    """Load a Parquet file (needs pyarrow) into a columns-layout table:
    the columns keep their names and get their types by the loaders' rule
    (numbers, booleans, strings as text, decimals as numeric, dates and
    timestamps); types= overrides it; nulls stay NULL. Streamed batch by
    batch in file order."""
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
        raise LoadError(f"{path}: no column {label!r} (columns: {', '.join(names)})",
                        fix={"label": None})
    picked = pick_columns(names, label, features, exclude)
    cols = source_order(names, label, picked)
    check_names(cols, None, "columns")
    if len(cols) + 1 > MAX_COLUMNS:
        raise too_wide(str(path), len(picked), label, "a Parquet file loads into the columns "
                                                        "layout")
    kinds: dict[str, str] = {}
    for c, t in (types or {}).items():
        if c not in names:
            raise LoadError(f"types= names column {c!r}, which {path} does not have",
                            column=c)
        kinds[c] = parse_kind(t, c)

    def values(name: str) -> Callable[[], Any]:
        return lambda: pf.read(columns=[name]).column(0)

    for c in cols:
        if c not in kinds:
            kinds[c] = infer_arrow(c, schema.field(c).type, values(c), c == label)
    kinds = _typed_columns(kinds, label, feature_type)
    n = pf.metadata.num_rows
    ident = table_name(table)
    options = pacsv.WriteOptions(include_header=False, quoting_style="needed")
    with transaction(conn):
        first = create_table(conn, ident, [("id", "int8")] + [(c, kinds[c]) for c in cols],
                             if_exists, temporary)

        def chunks() -> Iterable[tuple[bytes, int]]:
            at = first
            for batch in pf.iter_batches(batch_size=batch_rows, columns=cols):
                arrays = [pa.array(np.arange(at, at + batch.num_rows, dtype=np.int64))]
                arrays += [_arrow_for_copy(batch.column(c), kinds[c], c, at - first)
                           for c in cols]
                at += batch.num_rows
                buf = pa.BufferOutputStream()
                pacsv.write_csv(pa.RecordBatch.from_arrays(arrays, ["id"] + cols), buf, options)
                yield buf.getvalue().to_pybytes(), batch.num_rows

        bar = progress_bar(n, progress, f"COPY {table}")
        try:
            with row_limits(str(path), len(picked), label,
                             lambda: "a Parquet file loads into the columns layout"):
                _copy_csv_chunks(conn, ident, ["id"] + cols, chunks(), bar)
        finally:
            if bar is not None:
                bar.close()
        return finish_typed(conn, ident, table, n, label, picked, "columns", analyze, kinds)
