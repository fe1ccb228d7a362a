"""CSV files as typed tables.

The file's bytes are streamed with ``COPY ... (FORMAT csv)`` into a
temporary table of text columns, and one ``INSERT ... SELECT`` casts them
on the server (``na_values`` become NULL there); when every column is kept
in file order they go straight into the typed table, as ``psql \\copy``
would. Types are inferred from the first ``sample_rows`` records by the
loaders' one rule (corgipile._types) and can be overridden (``types=``).
A file with more columns than a table holds loads its numbers as one array
column: pandas parses it in chunks, binary COPY writes them.

Layouts: ``"columns"`` (one column per feature, ``features => 'a, b, c'``)
or ``"array"`` (``features float8[]``, numeric features only). ``"auto"``
picks array when every feature is numeric and has no missing value in the
sample, columns otherwise.
"""

from __future__ import annotations

import csv
import os
import re
import uuid
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import psycopg
from psycopg import errors as pgerrors
from psycopg import sql

from ._tables import (
    MAX_COLUMNS,
    LoadResult,
    array_blocker,
    byte_bar,
    check_names,
    choose_layout,
    create_table,
    nul_error,
    pick_columns,
    progress_bar,
    row_limits,
    source_order,
    storage_main,
    table_name,
    too_wide,
)
from ._types import KINDS, column_sql, infer_text, integral_text, parse_kind
from .errors import LoadError
from .suggest import finish_typed

__all__ = ["NA_VALUES", "SAMPLE_ROWS", "load_csv"]

# what counts as a missing value in a CSV field (as pandas' defaults, short)
NA_VALUES: tuple[str, ...] = ("", "NA", "N/A", "NaN", "nan", "NULL", "null")
SAMPLE_ROWS = 10_000
_CHUNK = 1 << 20
_BOM = b"\xef\xbb\xbf"


def _utf8(encoding: str) -> bool:
    return encoding.lower().replace("-", "").replace("_", "") in ("utf8", "utf8sig")


def _data_start(path: str | os.PathLike[str], encoding: str) -> int:
    """Where the file's text starts: after a UTF-8 byte order mark."""
    if not _utf8(encoding):
        return 0
    with open(path, "rb") as f:
        return len(_BOM) if f.read(len(_BOM)) == _BOM else 0


def _sample(path: str | os.PathLike[str], delimiter: str, header: bool, encoding: str,
            rows: int) -> tuple[list[str], list[list[str]]]:
    # utf-8-sig reads a byte order mark as the mark it is, not as the first
    # column name's first character
    with open(path, newline="", encoding="utf-8-sig" if _utf8(encoding) else encoding) as f:
        reader = csv.reader(f, delimiter=delimiter)
        first = next(reader, None)
        if first is None:
            raise LoadError(f"{path}: empty file")
        sample: list[list[str]] = [] if header else [first]
        for row in reader:
            if len(sample) >= rows:
                break
            if row:
                sample.append(row)
    names = [h.strip() for h in first] if header else [f"x{j + 1}" for j in range(len(first))]
    for k, row in enumerate(sample):
        if len(row) != len(names):
            raise LoadError(f"{path}, line {k + (2 if header else 1)}: {len(row)} fields, "
                            f"expected {len(names)}")
    for k, row in enumerate(sample):
        for j, v in enumerate(row):
            if "\x00" in v:
                raise nul_error(f"{path}, line {k + (2 if header else 1)}", names[j])
    return names, sample


def load_csv(conn: psycopg.Connection[Any], table: str, path: str | os.PathLike[str], *,
             label: str | int | None = "label", features: Sequence[str] | None = None,
             exclude: Sequence[str] | None = None, delimiter: str = ",", header: bool = True,
             layout: str = "auto", types: dict[str, str] | None = None,
             na_values: Sequence[str] = NA_VALUES, sample_rows: int = SAMPLE_ROWS,
             order: str = "given", seed: int | None = None, feature_type: str = "float8",
             if_exists: str = "fail", temporary: bool = False, progress: bool | None = None,
             analyze: bool = True, encoding: str = "utf-8") -> LoadResult:
    """Load a CSV file into a typed table; see the module docstring.

    label: the label column's name or 0-based number (default "label"; the
    first column when header=False, named "label" then); None for none.
    features / exclude: the feature columns, or the columns to leave out.
    types: {column: type} overriding the inferred types ('text', 'integer',
    'bigint', 'float', 'real', 'numeric', 'boolean', 'date', 'timestamp').
    na_values: fields read as NULL.
    order: "given", "label", "feature:<column>" or "random" (seed=).
    feature_type: "float8" or "float4" for the floating-point features.
    """
    from .training import transaction

    if feature_type not in ("float8", "float4"):
        raise ValueError("feature_type is 'float8' or 'float4'")
    if len(delimiter) != 1:
        raise ValueError("delimiter must be one character")
    names, sample = _sample(path, delimiter, header, encoding, sample_rows)
    if label is None:
        label_idx = None
    elif isinstance(label, int):
        if not 0 <= label < len(names):
            raise LoadError(f"{path}: no column number {label} (there are {len(names)})",
                            fix={"label": None})
        label_idx = label
    elif label in names:
        label_idx = names.index(label)
    elif not header and label == "label":
        label_idx = 0
    else:
        raise LoadError(f"{path}: no column {label!r} (columns: {', '.join(names)})",
                        fix={"label": None})
    if not header and label_idx is not None:
        names[label_idx] = "label"
    label_name = names[label_idx] if label_idx is not None else None
    picked = pick_columns(names, label_name, features, exclude)
    position = {c: j for j, c in reversed(list(enumerate(names)))}  # the first of a name
    na = set(na_values)
    kept = ([label_name] if label_name is not None else []) + picked
    inferred: dict[str, str] = {}
    maybe_null: set[str] = set()
    # a whole number written as a decimal (6.0): COPY's integer input
    # refuses it, the cast below takes it
    decimal_ints: set[str] = set()
    for c in kept:
        j = position[c]
        vals = [r[j] for r in sample if r[j] not in na]
        if len(vals) < len(sample):
            maybe_null.add(c)
        inferred[c] = infer_text(vals, label=c == label_name)
        if any(integral_text(v) for v in vals):
            decimal_ints.add(c)
    given: set[str] = set()
    for c, t in (types or {}).items():
        if c not in names:
            raise LoadError(f"types= names column {c!r}, which {path} does not have",
                            column=c)
        if c in inferred:
            inferred[c] = parse_kind(t, c)
            given.add(c)
    if feature_type == "float4":
        inferred.update({c: "float4" for c in picked if inferred[c] == "float8"})
    decimal_ints = {c for c in decimal_ints if inferred[c] in ("int4", "int8")}
    feature_types = {c: inferred[c] for c in picked}
    wide = len(names) + 1 > MAX_COLUMNS
    layout = choose_layout(layout, feature_types, maybe_null)
    check_names(picked, label_name, layout)
    blocker = array_blocker(feature_types, maybe_null)
    if layout == "columns" and len(picked) + 1 + (label_name is not None) > MAX_COLUMNS:
        raise too_wide(str(path), len(picked), label_name, blocker)
    if wide and layout != "array":
        # its text staging would be a table of every file column
        raise LoadError(f"{path} has {len(names)} columns, more than a table holds, so only "
                        "its numbers load, as one array column", fix={"layout": "array"},
                        advice="or write the columns you want to a smaller file first")
    if wide:
        return _load_csv_wide(conn, table, path, names, label_name, picked, inferred, na,
                              delimiter, header, encoding, feature_type, if_exists,
                              temporary, order, progress, analyze)
    ident = table_name(table)
    stage = f"corgipile_csv_{uuid.uuid4().hex[:12]}"
    stage_ident = sql.Identifier(stage)
    src = [sql.Identifier(f"c{j}") for j in range(len(names))]

    def cast(c: str) -> sql.Composable:
        return sql.SQL("CASE WHEN s.{c} OPERATOR(pg_catalog.=) ANY (%(na)s::pg_catalog.text[]) "
                       "THEN NULL ELSE {v} END").format(
                           c=src[position[c]], v=_cast_text(src[position[c]], inferred[c]))

    target: list[tuple[str, str]] = [("id", "int8")]
    values: list[sql.Composable] = [sql.SQL("s.n OPERATOR(pg_catalog.+) %(first)s")]
    if label_name is not None:
        target.append((label_name, inferred[label_name]))
        values.append(cast(label_name))
    if layout == "array":
        target.append(("features", feature_type + "[]"))
        values.append(sql.SQL("ARRAY[{}]::{}").format(
            sql.SQL(", ").join(cast(c) for c in picked), column_sql(feature_type + "[]")))
    else:
        target = target[:1] + [(c, inferred[c]) for c in source_order(names, label_name, picked)]
        values = values[:1] + [cast(c) for c in source_order(names, label_name, picked)]
    order_by = _order_sql(order, label_name, picked, cast)
    size = os.path.getsize(path)
    start = _data_start(path, encoding)
    options = sql.SQL("FORMAT csv, HEADER {}, DELIMITER {}, ENCODING {}").format(
        sql.SQL("true" if header else "false"), sql.Literal(delimiter),
        sql.Literal(_pg_encoding(encoding)))
    # every column kept, in the file's order, no reordering: COPY straight
    # into the typed table, as psql's \copy would (empty fields are NULL);
    # a field COPY cannot read (an NA in a number column, a bad value) falls
    # back to the text staging below, which also names the line
    direct = (layout == "columns" and order in ("given", None) and set(kept) == set(names)
              and if_exists != "append" and "" in na and not decimal_ints)
    with transaction(conn), row_limits(str(path), len(picked), label_name, lambda: blocker):
        if direct:
            result = _copy_direct(conn, ident, table, path, start, names, inferred, na,
                                  options, label_name, picked, if_exists, temporary,
                                  progress, size, analyze)
            if result is not None:
                return result
        first = create_table(conn, ident, target, if_exists, temporary)
        if layout == "array":  # before the rows go in: it applies to new rows
            esize = 4 if feature_type == "float4" else 8
            storage_main(conn, ident, "features", 64 + len(picked) * esize)
        conn.execute(sql.SQL(
            "CREATE TEMPORARY TABLE {} (n pg_catalog.int8 GENERATED ALWAYS AS IDENTITY "
            "(MINVALUE 0 START WITH 0), {})").format(
                stage_ident,
                sql.SQL(", ").join(sql.SQL("{} pg_catalog.text").format(c) for c in src)))
        copy_sql = sql.SQL("COPY {} ({}) FROM STDIN ({})").format(
            stage_ident, sql.SQL(", ").join(src), options)
        bar = byte_bar(size, progress, f"COPY {table}", "B")
        try:
            with conn.transaction():  # a savepoint: COPY's error becomes the loader's
                _stream(conn, copy_sql, path, start, bar)
        except (pgerrors.DataError, pgerrors.BadCopyFileFormat) as exc:
            raise _copy_error(path, exc, names, delimiter, encoding) from None
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
                pgerrors.InvalidDatetimeFormat, pgerrors.DatetimeFieldOverflow) as exc:
            raise _bad_field(conn, path, stage_ident, names, src, inferred, kept, na, header,
                             given, str(exc.diag.message_primary)) from None
        conn.execute(sql.SQL("DROP TABLE {}").format(stage_ident))
        result = finish_typed(conn, ident, table, rows, label_name, picked, layout, analyze,
                              inferred)
    return result


def _cast_text(col: sql.Composable, kind: str) -> sql.Composable:
    """A staged text field read as kind: integers also as 6.0 (a whole
    number written as a decimal, as pandas writes an integer column with
    missing values); a fraction still fails the cast."""
    if kind == "text":
        return sql.SQL("s.{}").format(col)
    if kind in ("int4", "int8"):
        # the regular expression only where there is a point (strpos is cheap)
        return sql.SQL("CASE WHEN pg_catalog.strpos(s.{c}, '.') OPERATOR(pg_catalog.=) 0 "
                       "THEN s.{c}::{t} ELSE pg_catalog.regexp_replace(s.{c}, "
                       "'\\.0*\\s*$', '')::{t} END").format(c=col, t=column_sql(kind))
    return sql.SQL("s.{}::{}").format(col, column_sql(kind))


def _stream(conn: psycopg.Connection[Any], copy_sql: sql.Composed,
            path: str | os.PathLike[str], start: int, bar: Any) -> int:
    """COPY the file's bytes from start; returns the rows COPY counted."""
    cur = conn.cursor()
    with cur.copy(copy_sql) as copy, open(path, "rb") as f:
        f.seek(start)
        while chunk := f.read(_CHUNK):
            copy.write(chunk)
            if bar is not None:
                bar.update(len(chunk))
    return cur.rowcount


def _copy_direct(conn: psycopg.Connection[Any], ident: sql.Identifier, table: str,
                 path: Any, start: int, names: list[str], types: dict[str, str],
                 na: set[str], options: sql.Composable, label: str | None, picked: list[str],
                 if_exists: str, temporary: bool, progress: bool | None, size: int,
                 analyze: bool) -> LoadResult | None:
    """COPY the file straight into a table of its columns (id first, filled
    by a temporary identity); the other na_values of text columns become
    NULL afterwards. None (and nothing done) when COPY cannot read a field."""

    bar = byte_bar(size, progress, f"COPY {table}", "B")
    try:
        with conn.transaction():
            create_table(conn, ident, [("id", "int8")] + [(c, types[c]) for c in names],
                         if_exists, temporary, identity=True)
            rows = _stream(conn, sql.SQL("COPY {} ({}) FROM STDIN ({})").format(
                ident, sql.SQL(", ").join(sql.Identifier(c) for c in names), options),
                path, start, bar)
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
    return finish_typed(conn, ident, table, rows, label, picked, "columns", analyze, types)


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
    return {"utf8": "UTF8", "utf8sig": "UTF8", "latin1": "LATIN1", "iso88591": "LATIN1",
            "ascii": "SQL_ASCII", "cp1252": "WIN1252", "windows1252": "WIN1252"}.get(e, encoding)


_COPY_CONTEXT = re.compile(r"line (\d+)(?:, column (c\d+))?")


def _copy_error(path: Any, exc: psycopg.Error, names: list[str], delimiter: str,
                encoding: str) -> LoadError:
    """COPY's refusal of the file, with the line and the file's column
    name (COPY's context names the staging table's c<j>)."""
    message = str(exc.diag.message_primary or exc)
    m = _COPY_CONTEXT.search(exc.diag.context or "")
    line = int(m.group(1)) if m else None
    column = names[int(m.group(2)[1:])] if m and m.group(2) else None
    if "0x00" in message and line is not None:
        # COPY stops at the byte: the field it was in is the one holding a NUL
        column = column or _nul_column(path, line, names, delimiter, encoding)
        if column is not None:
            return nul_error(f"{path}, line {line}", column)
    where = str(path) + (f", line {line}" if line is not None else "") + \
        (f", column {column!r}" if column is not None else "")
    return LoadError(f"{where}: {message}", column=column)


def _nul_column(path: Any, line: int, names: list[str], delimiter: str,
                encoding: str) -> str | None:
    """The column of the field holding a NUL in the record on line."""
    with open(path, newline="", encoding="utf-8-sig" if _utf8(encoding) else encoding,
              errors="replace") as f:
        reader = csv.reader(f, delimiter=delimiter)
        for row in reader:
            if reader.line_num >= line:
                return next((names[j] for j, v in enumerate(row[:len(names)]) if "\x00" in v),
                            None)
    return None


def _bad_field(conn: psycopg.Connection[Any], path: Any, stage: sql.Identifier,
               names: list[str], src: list[sql.Identifier], types: dict[str, str],
               kept: list[str], na: set[str], header: bool, given: set[str],
               message: str) -> LoadError:
    """The first field that its column's type cannot read, as an error
    naming the line, the column and the value, with the override."""
    for c in kept:
        kind = KINDS[types[c]]
        if kind.pattern is None:
            continue
        row = conn.execute(sql.SQL(
            "SELECT s.n, s.{c} FROM {s} s WHERE NOT s.{c} OPERATOR(pg_catalog.=) "
            "ANY (%s::pg_catalog.text[]) AND s.{c} OPERATOR(pg_catalog.!~*) %s "
            "ORDER BY s.n LIMIT 1").format(c=src[names.index(c)], s=stage),
            (list(na), kind.pattern)).fetchone()
        if row is not None:
            line = int(row[0]) + (2 if header else 1)
            how = "its type was given" if c in given else "its type was inferred from the " \
                                                          "first rows"
            return LoadError(f"{path}, line {line}: column {c!r} is not {kind.noun}: "
                             f"{row[1]!r}", column=c, fix={"types": {c: "text"}},
                             advice=f"or another type; {how}")
    return LoadError(f"{path}: {message}", fix={"types": None},
                     advice="to choose the column types")


# -- CSV wider than a table ------------------------------------------------------------

def _load_csv_wide(conn: psycopg.Connection[Any], table: str, path: Any, names: list[str],
                   label: str | None, picked: list[str], kinds: dict[str, str],
                   na: set[str], delimiter: str, header: bool, encoding: str,
                   feature_type: str, if_exists: str, temporary: bool, order: str,
                   progress: bool | None, analyze: bool) -> LoadResult:
    """A file with more columns than a table holds (so more than the text
    staging table holds too), in the array layout: pandas parses it in
    chunks and binary COPY writes them. Rows stay in file order."""
    import pandas as pd

    from . import _binary
    from .training import transaction

    if order not in ("given", None):
        raise LoadError(f"{path} has {len(names)} columns: a file this wide loads in file "
                        "order", fix={"order": "given"})
    label_kind = kinds[label] if label is not None else None
    cols = ([label] if label is not None else []) + picked
    position = {c: j for j, c in reversed(list(enumerate(names)))}
    positions = [position[c] for c in cols]
    ident = table_name(table)
    columns: list[tuple[str, str]] = [("id", "int8")]
    if label is not None:
        columns.append((label, label_kind))  # type: ignore[arg-type]
    columns.append(("features", feature_type + "[]"))
    step = max(1, (32 << 20) // (12 * len(cols)))
    line0 = 2 if header else 1

    dtypes: dict[int, Any] = {position[c]: "float64" for c in picked}
    if label is not None:
        dtypes[position[label]] = str

    def chunks() -> Iterator[Any]:
        # columns are named by their position in the file (header=None)
        return pd.read_csv(path, sep=delimiter, header=None, skiprows=1 if header else 0,
                           usecols=positions, dtype=dtypes, na_values=sorted(na),
                           keep_default_na=False, chunksize=step,
                           encoding="utf-8-sig" if _utf8(encoding) else encoding)

    with transaction(conn):
        first = create_table(conn, ident, columns, if_exists, temporary)
        storage_main(conn, ident, "features",
                     64 + len(picked) * (4 if feature_type == "float4" else 8))
        bar = progress_bar(0, progress, f"COPY {table}")
        rows = 0
        reader = chunks()
        while True:
            try:
                part = next(reader)
            except StopIteration:
                break
            except ValueError:
                raise _wide_bad_field(path, names, positions, picked, na, delimiter, header,
                                      encoding, rows, step) from None
            x = part[positions[-len(picked):]].to_numpy(dtype=np.float64)
            bad = np.argwhere(np.isnan(x))
            if len(bad):
                i, j = bad[0]
                raise LoadError(f"{path}, line {rows + i + line0}: column {picked[j]!r} has no "
                                "value, and the array layout holds numbers only",
                                column=picked[j], fix={"exclude": [picked[j]]},
                                advice="or fill the missing values")
            parts: list[_binary.Part] = []
            if label is not None:
                parts.append((kinds[label], _wide_labels(
                    path, part[position[label]], label, kinds[label], rows + line0)))
            parts.append((feature_type + "[]", x))
            ids = np.arange(rows, rows + len(part), dtype=np.int64) + first
            if label_kind == "text":
                _binary.write_rows(conn, ident, [c for c, _ in columns],
                                   ["int8", "text", feature_type + "[]"],
                                   ((int(i), lab, list(v)) for i, lab, v in
                                    zip(ids, parts[0][1], x, strict=False)), None)
            else:
                _binary.write(conn, ident, [c for c, _ in columns], ids, parts, None)
            rows += len(part)
            if bar is not None:
                bar.update(len(part))
        if bar is not None:
            bar.close()
        return finish_typed(conn, ident, table, rows, label, picked, "array", analyze, kinds)


def _wide_labels(path: Any, values: Any, label: str, kind: str, line: int) -> np.ndarray:
    """A chunk's label fields (text) as the label column's type."""
    missing = values.isna().to_numpy()
    if missing.any():
        i = int(np.argmax(missing))
        raise LoadError(f"{path}, line {line + i}: the label {label!r} has no value, and a "
                        "file this wide loads labelled rows only", column=label,
                        advice="fill or drop those rows")
    if kind == "text":
        return values.to_numpy(dtype=object)
    if kind == "bool":
        words = values.str.strip().str.lower()
        return words.isin(["true", "t", "yes", "y", "on", "1"]).to_numpy()
    import pandas as pd

    numbers = np.asarray(pd.to_numeric(values.str.strip()), dtype=np.float64)
    return numbers.astype(np.int64) if kind in ("int4", "int8") else numbers


def _wide_bad_field(path: Any, names: list[str], positions: list[int], picked: list[str],
                    na: set[str], delimiter: str, header: bool, encoding: str, done: int,
                    step: int) -> LoadError:
    """The first feature field of the failing chunk that is not a number."""
    import pandas as pd

    part = pd.read_csv(path, sep=delimiter, header=None,
                       skiprows=done + (1 if header else 0), nrows=step, usecols=positions,
                       dtype=str, na_values=sorted(na), keep_default_na=False,
                       encoding="utf-8-sig" if _utf8(encoding) else encoding)
    position = {c: j for j, c in reversed(list(enumerate(names)))}
    for c in picked:
        raw = part[position[c]]
        parsed = pd.to_numeric(raw.str.strip(), errors="coerce")
        bad = parsed.isna() & raw.notna()
        if bad.any():
            i = int(np.argmax(bad.to_numpy()))
            return LoadError(f"{path}, line {done + i + (2 if header else 1)}: column {c!r} "
                             f"is not a number: {raw.iloc[i]!r}, and the array layout holds "
                             "numbers only", column=c, fix={"exclude": [c]})
    return LoadError(f"{path}: a feature field is not a number (the array layout holds "
                     "numbers only)")


