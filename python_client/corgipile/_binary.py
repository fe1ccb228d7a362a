"""Rows in PostgreSQL's binary COPY format, built by numpy in bulk (one
structured array per chunk of rows), so that the Python cost per value is
nil. Used by the loaders for arrays and for data frames of numbers; values
here are never NULL (a NULL needs a variable-length record: the text path
of tabular.py carries those)."""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import Any

import numpy as np
import psycopg
from psycopg import sql

__all__ = ["write", "write_rows"]

_HEADER = b"PGCOPY\n\xff\r\n\x00" + struct.pack(">ii", 0, 0)
_TRAILER = struct.pack(">h", -1)
_CHUNK_BYTES = 4 << 20
# each type's value as numpy writes it (big-endian), and an array's element type
_BIN = {"bool": "?", "int4": ">i4", "int8": ">i8", "float4": ">f4", "float8": ">f8"}
_ELEM_OID = {"float8": 701, "float4": 700}

# a part of a row: (type, values); values 1-D: one column; 2-D with a scalar
# type: one column per values column; 2-D with an array type ("float8[]"):
# one array column holding each row's values
Part = tuple[str, np.ndarray]


def _fields(parts: Sequence[Part]) -> tuple[list[tuple[Any, ...]], int]:
    fields: list[tuple[Any, ...]] = [("n", ">i2"), ("id_len", ">i4"), ("id", ">i8")]
    ncols = 1
    for k, (kind, values) in enumerate(parts):
        if kind.endswith("[]"):
            fields += [(f"a{k}_len", ">i4"), (f"a{k}_ndim", ">i4"), (f"a{k}_flags", ">i4"),
                       (f"a{k}_elem", ">u4"), (f"a{k}_dim", ">i4"), (f"a{k}_lb", ">i4"),
                       (f"v{k}", [("len", ">i4"), ("x", _BIN[kind[:-2]])], (values.shape[1],))]
            ncols += 1
        elif values.ndim == 2:
            fields.append((f"v{k}", [("len", ">i4"), ("x", _BIN[kind])], (values.shape[1],)))
            ncols += values.shape[1]
        else:
            fields.append((f"v{k}", [("len", ">i4"), ("x", _BIN[kind])]))
            ncols += 1
    return fields, ncols


def records(ids: np.ndarray, parts: Sequence[Part]) -> np.ndarray:
    """Every row's binary COPY tuple, as one structured array."""
    fields, ncols = _fields(parts)
    rec = np.empty(len(ids), dtype=np.dtype(fields))
    rec["n"] = ncols
    rec["id_len"] = 8
    rec["id"] = ids
    for k, (kind, values) in enumerate(parts):
        elem = kind[:-2] if kind.endswith("[]") else kind
        size = np.dtype(_BIN[elem]).itemsize
        if kind.endswith("[]"):
            d = values.shape[1]
            rec[f"a{k}_len"] = 20 + d * (4 + size)
            rec[f"a{k}_ndim"] = 1
            rec[f"a{k}_flags"] = 0
            rec[f"a{k}_elem"] = _ELEM_OID[elem]
            rec[f"a{k}_dim"] = d
            rec[f"a{k}_lb"] = 1
        rec[f"v{k}"]["len"] = size
        rec[f"v{k}"]["x"] = values
    return rec


def write(conn: psycopg.Connection[Any], ident: sql.Identifier, names: list[str],
          ids: np.ndarray, parts: Sequence[Part], bar: Any) -> None:
    """COPY the rows (id, then the parts) into columns names of ident."""
    n = len(ids)
    row_bytes = 64 + sum(12 * (v.shape[1] if v.ndim == 2 else 1) for _, v in parts)
    step = max(1, _CHUNK_BYTES // row_bytes)
    query = sql.SQL("COPY {} ({}) FROM STDIN (FORMAT BINARY)").format(
        ident, sql.SQL(", ").join(sql.Identifier(c) for c in names))
    with conn.cursor().copy(query) as copy:
        copy.write(_HEADER)
        for start in range(0, n, step):
            stop = min(n, start + step)
            copy.write(records(ids[start:stop],
                               [(kind, v[start:stop]) for kind, v in parts]).tobytes())
            if bar is not None:
                bar.update(stop - start)
        copy.write(_TRAILER)


def write_rows(conn: psycopg.Connection[Any], ident: sql.Identifier, names: list[str],
               types: list[str], rows: Any, bar: Any) -> None:
    """COPY rows of Python values (psycopg's binary dumpers), for what the
    bulk path cannot carry: text labels, sparse rows of varying length."""
    query = sql.SQL("COPY {} ({}) FROM STDIN (FORMAT BINARY)").format(
        ident, sql.SQL(", ").join(sql.Identifier(c) for c in names))
    with conn.cursor().copy(query) as copy:
        copy.set_types(types)
        for i, row in enumerate(rows, 1):
            copy.write_row(row)
            if bar is not None and i % 4096 == 0:
                bar.update(4096)
        if bar is not None:
            bar.update(bar.total - bar.n)
