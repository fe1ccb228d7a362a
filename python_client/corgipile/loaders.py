"""Loading training data at COPY speed.

Sources: numpy arrays, pandas DataFrames, CSV and Parquet files, and
LIBSVM/SVMlight files. Each becomes one table, written with ``COPY ... FROM
STDIN`` in a single transaction (the table is created in it too). CSV and
Parquet files and DataFrames with text, booleans or missing values become
typed tables of columns (see :mod:`corgipile.tabular`); numbers go through
binary COPY, built by numpy. Array columns get ``STORAGE MAIN`` when a row
fits a page, so wide rows stay in their pages instead of moving to TOAST.

Table layouts (``layout=``), matching corgipile.train's defaults:

- ``"array"``: ``id bigint, label, features float8[]`` — train with the
  defaults (``label => 'label', features => 'features'``);
- ``"columns"``: ``id bigint, label, <one float8 column per feature>`` —
  train with ``features => 'x1, x2, ...'`` (the loader returns the list
  in :attr:`LoadResult.features`);
- ``"sparse"``: ``id bigint, label, feature_indices int4[], features
  float8[]`` with 0-based indices of the non-zero features — train with
  ``feature_indices => 'feature_indices'``.

Storage order (``order=``), to reproduce the paper's cases:

- ``"given"``: rows in input order;
- ``"label"``: clustered by label (stable sort), SGD's worst case;
- ``"feature:J"``: ordered by feature J (an index, or a column name);
- ``"random"``: shuffled once (``seed=`` for a fixed order).

``id`` is always the row's position in the input (0-based), whatever the
storage order. Dense layouts are encoded with numpy in bulk, so the
Python cost per row is nil; the sparse layout goes through psycopg's
binary ``write_row``. A tqdm bar shows progress on inputs of 100,000 rows
or more when stderr is a terminal (``progress=True/False`` forces it).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import psycopg
from psycopg import sql

from . import _binary
from ._sql import quote_ident
from ._tables import (
    LoadResult,
    create_table,
    frame_columns,
    labels_of,
    pick_columns,
    progress_bar,
    source_order,
    sql_name,
    storage_main,
    table_name,
)
from ._types import frame_kinds
from .errors import LoadError
from .suggest import finish_typed, suggest_model
from .tabular import load_csv, load_frame_columns, load_parquet
from .training import transaction

__all__ = ["LoadResult", "load_numpy", "load_dataframe", "load_csv", "load_parquet",
           "load_libsvm", "load_csr", "read_libsvm", "table_name", "suggest_model"]

_FLOAT_TYPES = ("float8", "float4")


# -- order ---------------------------------------------------------------------

def _order_index(order: str, n: int, labels: np.ndarray | None,
                 feature_values: Any, seed: int | None) -> np.ndarray | None:
    """Row permutation for the storage order (None = as given).
    feature_values(j) returns feature j for every row."""
    if order in ("given", None):
        return None
    if order == "label":
        if labels is None:
            raise ValueError("order='label' needs labels")
        return np.argsort(labels, kind="stable")
    if order == "random":
        return np.random.default_rng(seed).permutation(n)
    if isinstance(order, str) and order.startswith("feature:"):
        key = order.split(":", 1)[1]
        return np.argsort(feature_values(key), kind="stable")
    raise ValueError(f"unknown order {order!r}: use 'given', 'label', 'feature:J' or 'random'")


def _feature_index(key: str | int, names: Sequence[str] | None, d: int) -> int:
    if isinstance(key, int) or (isinstance(key, str) and key.lstrip("-").isdigit()):
        j = int(key)
        if not 0 <= j < d:
            raise ValueError(f"feature {j} out of range: there are {d} features (0-based)")
        return j
    if names is not None and key in names:
        return list(names).index(key)
    raise ValueError(f"no feature named {key!r}")


def _check_feature_type(feature_type: str) -> None:
    if feature_type not in _FLOAT_TYPES:
        raise ValueError("feature_type is 'float8' or 'float4'")


def _finish(conn: psycopg.Connection[Any], ident: sql.Identifier, analyze: bool) -> None:
    if analyze:
        conn.execute(sql.SQL("ANALYZE {}").format(ident))


# -- public loaders ----------------------------------------------------------------

def load_numpy(conn: psycopg.Connection[Any], table: str, x: Any, y: Any = None, *,
               layout: str = "array", order: str = "given", columns: Sequence[str] | None = None,
               feature_type: str = "float8", if_exists: str = "fail", temporary: bool = False,
               seed: int | None = None, progress: bool | None = None, analyze: bool = True,
               label_name: str = "label", _integral_float_labels: bool = False) -> LoadResult:
    """Write a 2-D array of features (and optional labels) into a new table.
    NaN in x is a missing value: written as NULL (an element of the
    features array, or a column).

    x: array-like (n, d); y: array-like (n,) of labels (-1/+1, 0/1, bool,
    class ids, or values for regression) or None for no label column.
    layout: "array", "columns" (names from columns=, default x1..xd) or
    "sparse" (the non-zero entries of each row).
    feature_type: "float8" or "float4" (half the space).
    if_exists: "fail", "replace" (drop and recreate) or "append".
    label_name: the label column's name (default "label").
    """
    arr = np.asarray(x, dtype=np.float64)
    if arr.ndim != 2 or arr.shape[1] == 0:
        raise ValueError("x must be a 2-D array with at least one feature")
    n, d = arr.shape
    labels, kind = labels_of(y, n, _integral_float_labels) if y is not None else (None, None)
    _check_feature_type(feature_type)
    if layout == "columns":
        names = list(columns) if columns is not None else [f"x{j + 1}" for j in range(d)]
        if len(names) != d or len(set(names)) != d:
            raise ValueError(f"columns= needs {d} distinct names")
        if {"id", label_name} & set(names):
            raise ValueError(f"feature columns cannot be called id or {label_name}")
    elif layout in ("array", "sparse"):
        names = list(columns) if columns is not None else None  # type: ignore[assignment]
        if label_name in ("id", "features", "feature_indices"):
            raise ValueError(f"the label column cannot be called {label_name}")
    else:
        raise ValueError(f"unknown layout {layout!r}: use 'array', 'columns' or 'sparse'")
    perm = _order_index(order, n, labels,
                        lambda key: arr[:, _feature_index(key, names, d)], seed)
    ids = np.arange(n, dtype=np.int64)
    if perm is not None:
        arr, ids = arr[perm], ids[perm]
        if labels is not None:
            labels = labels[perm]
    ident = table_name(table)
    with transaction(conn):
        columns_sql: list[tuple[str, str]] = [("id", "int8")]
        if kind is not None:
            columns_sql.append((label_name, kind))
        if layout == "array":
            columns_sql.append(("features", feature_type + "[]"))
        elif layout == "columns":
            columns_sql += [(c, feature_type) for c in names]
        else:
            columns_sql += [("feature_indices", "int4[]"), ("features", feature_type + "[]")]
        first = create_table(conn, ident, columns_sql, if_exists, temporary)
        if layout == "array":  # before the rows go in: it applies to new rows
            storage_main(conn, ident, "features", 64 + d * (8 if feature_type == "float8" else 4))
        ids = ids + first
        bar = progress_bar(n, progress, f"COPY {table}")
        try:
            col_names = [c for c, _ in columns_sql]
            # NaN is a missing value (as in pandas and scikit-learn): NULL,
            # which the engine skips or imputes (train(missing => ...));
            # the packed binary rows have no NULLs, so such arrays go row by row
            if layout != "sparse" and kind != "text" and not np.isnan(arr).any():
                parts = [] if labels is None else [(kind, labels)]
                parts.append((feature_type + ("[]" if layout == "array" else ""), arr))
                _binary.write(conn, ident, col_names, ids, parts, bar)  # type: ignore[arg-type]
            else:
                _binary.write_rows(conn, ident, col_names, [t for _, t in columns_sql],
                                   _py_rows(ids, labels, arr, layout), bar)
        finally:
            if bar is not None:
                bar.close()
        _finish(conn, ident, analyze)
    return _result(table, n, d, layout, labels, names if layout == "columns" else None,
                   label_name)


def _py_rows(ids: np.ndarray, labels: np.ndarray | None, x: np.ndarray, layout: str
             ) -> Iterable[tuple[Any, ...]]:
    for i in range(x.shape[0]):
        head: tuple[Any, ...] = (int(ids[i]),)
        if labels is not None:
            lab = labels[i]
            head += (lab.item() if hasattr(lab, "item") else lab,)
        values = [None if v != v else v for v in x[i].tolist()]  # NaN: NULL
        if layout == "sparse":
            nz = np.flatnonzero(x[i])
            yield head + (nz.tolist(), [values[j] for j in nz.tolist()])
        elif layout == "array":
            yield head + (values,)
        else:
            yield head + tuple(values)


def _result(table: str, n: int, d: int, layout: str, labels: np.ndarray | None,
            names: Sequence[str] | None, label_name: str = "label") -> LoadResult:
    if layout == "columns":
        assert names is not None
        features = ", ".join(quote_ident(c) for c in names)
    else:
        features = "features"
    model, why = suggest_model(labels)
    return LoadResult(table=table, rows=n, n_features=d, layout=layout,
                      label=sql_name(label_name) if labels is not None else None,
                      features=features,
                      feature_indices="feature_indices" if layout == "sparse" else None,
                      suggested_model=model, suggestion=why)


def load_dataframe(conn: psycopg.Connection[Any], table: str, frame: Any, *,
                   label: Any = "label", features: Sequence[str] | None = None,
                   exclude: Sequence[str] | None = None, layout: str = "columns",
                   types: dict[str, str] | None = None, **kwargs: Any) -> LoadResult:
    """Write a pandas DataFrame: label= names the label column (None for
    none), which keeps its name and type in the table; features= the
    feature columns (default: all other columns), or exclude= the columns
    to leave out. Column types follow the loaders' one rule
    (corgipile._types): text (object, string, category) stays text and
    boolean stays boolean, for the server to one-hot encode; integers are
    integer or bigint by their values; datetimes are timestamps; NaN, NA
    and None become NULL. types= overrides a column's type ('text',
    'integer', ...). Column names that are not strings are written as text
    (0 -> "0"). A frame of numbers and booleans without missing values goes
    through binary COPY and also takes layout="array". Other options as in
    load_numpy."""
    allowed = {"order", "seed", "feature_type", "if_exists", "temporary", "progress",
               "analyze"}
    unknown = set(kwargs) - allowed - {"label_name"}
    if unknown:
        raise ValueError(f"load_dataframe got an unexpected option {sorted(unknown)[0]!r}")
    options = {k: v for k, v in kwargs.items() if k in allowed}
    _check_feature_type(options.get("feature_type", "float8"))
    names = frame_columns(frame)
    frame = frame.set_axis(names, axis=1)
    label = None if label is None else str(label)
    if label is not None and label not in names:
        raise LoadError(f"the DataFrame has no column {label!r} (columns: {', '.join(names)})",
                        fix={"label": None})
    picked = pick_columns(names, label, features, exclude)
    cols = ([label] if label is not None else []) + picked
    kinds = frame_kinds(frame, cols, label, types)
    binary = all(kinds[c] in ("bool", "int4", "int8", "float8") for c in cols)
    missing = binary and bool(frame[cols].isna().to_numpy().any())
    if binary and not missing:
        return _load_frame_binary(conn, table, frame, label, picked, kinds, layout, **options)
    if layout != "columns":
        what = "missing values" if missing else "columns other than numbers and booleans"
        raise LoadError(f"layout {layout!r} holds numbers only and this frame has {what}",
                        fix={"layout": "columns"},
                        advice="missing values become NULL, text is one-hot encoded by the "
                               "server")
    return load_frame_columns(conn, table, frame, label, picked, kinds, **options)


def _load_frame_binary(conn: psycopg.Connection[Any], table: str, frame: Any,
                       label: str | None, names: list[str], kinds: dict[str, str],
                       layout: str, *, order: str = "given", seed: int | None = None,
                       feature_type: str = "float8", if_exists: str = "fail",
                       temporary: bool = False, progress: bool | None = None,
                       analyze: bool = True) -> LoadResult:
    """A frame of numbers and booleans without missing values, by binary
    COPY: columns keep their types (array layout: one float array)."""
    n, d = len(frame), len(names)
    if layout not in ("columns", "array"):
        raise ValueError(f"unknown layout {layout!r} for a DataFrame: use 'columns' or 'array'")
    kinds = dict(kinds)
    for c in names:
        if kinds[c] == "float8":
            kinds[c] = feature_type
    labels = frame[label].to_numpy() if label is not None else None
    perm = _order_index(order, n, labels, lambda key: frame[names[_feature_index(
        key, names, d)]].to_numpy(), seed)
    ids = np.arange(n, dtype=np.int64)
    sub = frame if perm is None else frame.iloc[perm]
    if perm is not None:
        ids = ids[perm]
    columns: list[tuple[str, str]] = [("id", "int8")]
    parts: list[_binary.Part] = []
    if layout == "array":
        if label is not None:
            columns.append((label, kinds[label]))
            parts.append((kinds[label], _as_kind(sub[label], kinds[label])))
        columns.append(("features", feature_type + "[]"))
        parts.append((feature_type + "[]", sub[names].to_numpy(dtype=np.float64)))
    else:
        for c in source_order(list(frame.columns), label, names):
            columns.append((c, kinds[c]))
            parts.append((kinds[c], _as_kind(sub[c], kinds[c])))
    ident = table_name(table)
    with transaction(conn):
        first = create_table(conn, ident, columns, if_exists, temporary)
        if layout == "array":
            storage_main(conn, ident, "features", 64 + d * (8 if feature_type == "float8" else 4))
        bar = progress_bar(n, progress, f"COPY {table}")
        try:
            _binary.write(conn, ident, [c for c, _ in columns], ids + first, parts, bar)
        finally:
            if bar is not None:
                bar.close()
        return finish_typed(conn, ident, table, n, label, names, layout, analyze, kinds)


def _as_kind(series: Any, kind: str) -> np.ndarray:
    """A column without missing values as the numpy array of its type."""
    dtype = {"bool": np.bool_, "int4": np.int64, "int8": np.int64, "float8": np.float64,
             "float4": np.float64}[kind]
    return np.asarray(series.to_numpy(dtype=dtype))


def load_csr(conn: psycopg.Connection[Any], table: str, x: Any, y: Any = None, *,
             feature_type: str = "float8", if_exists: str = "fail", temporary: bool = False,
             progress: bool | None = None, analyze: bool = True,
             label_name: str = "label") -> LoadResult:
    """Write a scipy sparse matrix (CSR, or anything .tocsr() takes) as the
    sparse layout (``feature_indices`` 0-based, ``features``), without
    densifying it; y as in load_numpy. n_features in the result is the
    matrix's width (pass it to train: a trailing all-zero column has no
    index in the table)."""
    csr = x.tocsr()
    csr.sort_indices()
    n, d = csr.shape
    if d == 0:
        raise ValueError("x must have at least one feature")
    labels, kind = labels_of(y, n, False) if y is not None else (None, None)
    _check_feature_type(feature_type)
    indptr, indices = csr.indptr, csr.indices.astype(np.int64)
    values = csr.data.astype(np.float64)
    ident = table_name(table)
    columns = [("id", "int8")]
    if kind is not None:
        columns.append((label_name, kind))
    columns += [("feature_indices", "int4[]"), ("features", feature_type + "[]")]
    with transaction(conn):
        first = create_table(conn, ident, columns, if_exists, temporary)
        widest = int(np.diff(indptr).max()) if n else 0
        for col in ("feature_indices", "features"):
            storage_main(conn, ident, col, 64 + widest * (4 + (8 if feature_type == "float8"
                                                               else 4)))
        bar = progress_bar(n, progress, f"COPY {table}")

        def rows() -> Iterable[tuple[Any, ...]]:
            for i in range(n):
                a, b = indptr[i], indptr[i + 1]
                head: tuple[Any, ...] = (i + first,)
                if labels is not None:
                    head += (labels[i].item(),)
                yield head + (indices[a:b].tolist(), values[a:b].tolist())

        try:
            _binary.write_rows(conn, ident, [c for c, _ in columns], [t for _, t in columns],
                               rows(), bar)
        finally:
            if bar is not None:
                bar.close()
        _finish(conn, ident, analyze)
    result = _result(table, n, d, "sparse", labels, None,
                     label_name if labels is not None else "label")
    return result


def read_libsvm(path: str | os.PathLike[str], *, n_features: int | None = None,
                zero_based: bool | str = "auto", progress: bool | None = None
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, int]:
    """Parse a LIBSVM/SVMlight file into CSR arrays:
    (labels, row offsets, 0-based column indices, values, n_features).

    zero_based: "auto" treats the indices as 1-based unless an index 0
    appears (as scikit-learn does); qid:... and # comments are ignored."""
    labels: list[float] = []
    offsets = [0]
    indices: list[int] = []
    values: list[float] = []
    size = os.path.getsize(path)
    bar = None
    show = progress if progress is not None else (
        size >= 64 << 20 and bool(getattr(sys.stderr, "isatty", lambda: False)()))
    if show:
        from tqdm import tqdm

        bar = tqdm(total=size, desc=f"read {Path(path).name}", unit="B", unit_scale=True,
                   file=sys.stderr)
    try:
        with open(path, "rb") as f:
            for lineno, raw in enumerate(f, 1):
                if bar is not None:
                    bar.update(len(raw))
                line = raw.split(b"#", 1)[0].strip()
                if not line:
                    continue
                parts = line.split()
                try:
                    labels.append(float(parts[0]))
                    for item in parts[1:]:
                        key, _, val = item.partition(b":")
                        if key == b"qid":
                            continue
                        if not _:
                            raise ValueError
                        indices.append(int(key))
                        values.append(float(val))
                except ValueError:
                    raise ValueError(f"{path}, line {lineno}: not in LIBSVM format "
                                     "(<label> <index>:<value> ...)") from None
                offsets.append(len(indices))
    finally:
        if bar is not None:
            bar.close()
    idx = np.array(indices, dtype=np.int64)
    if zero_based == "auto":
        zero_based = bool(idx.size) and int(idx.min()) == 0
    if not zero_based:
        idx -= 1
    if idx.size and idx.min() < 0:
        raise ValueError(f"{path}: negative feature index")
    d = int(idx.max()) + 1 if idx.size else 0
    if n_features is not None:
        if d > n_features:
            raise ValueError(f"{path}: feature index {d - 1} (0-based) >= n_features "
                             f"{n_features}")
        d = n_features
    if d == 0:
        raise ValueError(f"{path}: no features")
    return (np.array(labels, dtype=np.float64), np.array(offsets, dtype=np.int64), idx,
            np.array(values, dtype=np.float64), d)


def load_libsvm(conn: psycopg.Connection[Any], table: str, path: str | os.PathLike[str], *,
                layout: str = "sparse", n_features: int | None = None,
                zero_based: bool | str = "auto", order: str = "given",
                feature_type: str = "float8", if_exists: str = "fail", temporary: bool = False,
                seed: int | None = None, progress: bool | None = None, analyze: bool = True
                ) -> LoadResult:
    """Write a LIBSVM/SVMlight file: layout "sparse" (default; indices and
    values of the non-zero features) or "dense"/"array" (a full features
    array per row). Integral labels become an integer column."""
    y, offsets, idx, vals, d = read_libsvm(path, n_features=n_features,
                                           zero_based=zero_based, progress=progress)
    n = y.shape[0]
    if layout in ("dense", "array", "columns"):
        x = np.zeros((n, d), dtype=np.float64)
        rows = np.repeat(np.arange(n), np.diff(offsets))
        x[rows, idx] = vals
        return load_numpy(conn, table, x, y, layout="array" if layout == "dense" else layout,
                          order=order, feature_type=feature_type, if_exists=if_exists,
                          temporary=temporary, seed=seed, progress=progress, analyze=analyze,
                          _integral_float_labels=True)
    if layout != "sparse":
        raise ValueError(f"unknown layout {layout!r}: use 'sparse' or 'dense'")
    labels, kind = labels_of(y, n, True)
    row_of = np.repeat(np.arange(n), np.diff(offsets))

    def feature(key: str) -> np.ndarray:
        j = _feature_index(key, None, d)
        col = np.zeros(n, dtype=np.float64)
        mask = idx == j
        col[row_of[mask]] = vals[mask]
        return col

    perm = _order_index(order, n, labels, feature, seed)
    order_rows = perm if perm is not None else np.arange(n)
    ident = table_name(table)
    columns = [("id", "int8"), ("label", kind), ("feature_indices", "int4[]"),
               ("features", feature_type + "[]")]
    with transaction(conn):
        first = create_table(conn, ident, columns, if_exists, temporary)
        # the longest row decides: a row of k entries takes k * (4 + size) bytes
        widest = int(np.diff(offsets).max()) if n else 0
        storage_main(conn, ident, "feature_indices",
                     64 + widest * (4 + (8 if feature_type == "float8" else 4)))
        storage_main(conn, ident, "features",
                     64 + widest * (4 + (8 if feature_type == "float8" else 4)))
        bar = progress_bar(n, progress, f"COPY {table}")

        def rows_iter() -> Iterable[tuple[Any, ...]]:
            for i in order_rows:
                a, b = offsets[i], offsets[i + 1]
                yield (int(i) + first, labels[i].item(), idx[a:b].tolist(), vals[a:b].tolist())

        try:
            _binary.write_rows(conn, ident, [c for c, _ in columns], [t for _, t in columns],
                               rows_iter(), bar)
        finally:
            if bar is not None:
                bar.close()
        _finish(conn, ident, analyze)
    return _result(table, n, d, "sparse", labels, None)
