"""Reading blocks of heap pages from PostgreSQL into numpy arrays.

A block is read with a TID range scan (PostgreSQL 14+), all the blocks of a
buffer in one statement (UNION ALL of one such scan per block)::

    SELECT label, features FROM ONLY t
     WHERE ctid >= '(p,0)' AND ctid < '(q,0)' AND <row is usable>

in binary format, with loaders that turn a float/int array straight into a
numpy array (no Python list per row).  ``method='copy'`` sends the same
query through ``COPY (...) TO STDOUT (FORMAT BINARY)`` instead;
scripts/bench_torch_dataset.py compares the two (docs/torch.md).

Every reader runs in one REPEATABLE READ transaction that imports the
epoch's exported snapshot (``SET TRANSACTION SNAPSHOT``), so all readers of
all ranks see the same rows.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np
import psycopg
from psycopg import sql
from psycopg.adapt import Loader
from psycopg.pq import Format

from ..errors import CorgipileError

APPLICATION_NAME = "corgipile.torch reader"

# element oid -> numpy dtype of the binary wire format (big-endian)
_ELEMENTS = {700: ">f4", 701: ">f8", 21: ">i2", 23: ">i4", 20: ">i8"}
# array oid -> element oid
_ARRAYS = {1021: 700, 1022: 701, 1005: 21, 1007: 23, 1016: 20}
_HEAD = struct.Struct("!iiI")


class NumpyArrayLoader(Loader):
    """A one-dimensional (or flattened) numeric array as a numpy array.

    The binary array format interleaves a 4-byte length with each element;
    a structured dtype reads the values in one step.  An array with a NULL
    element loads as None (the query already skips such rows, as the engine
    does)."""

    format = Format.BINARY

    def load(self, data: Any) -> np.ndarray | None:
        buf = memoryview(data)
        ndim, has_null, elem = _HEAD.unpack_from(buf, 0)
        if ndim == 0:
            return np.empty(0, dtype=np.dtype(_ELEMENTS[elem]).newbyteorder("="))
        if has_null:
            return None
        dims = struct.unpack_from("!" + "ii" * ndim, buf, 12)
        n = int(np.prod(dims[0::2]))
        dt = np.dtype([("len", ">i4"), ("v", _ELEMENTS[elem])])
        return np.frombuffer(buf, dtype=dt, count=n, offset=12 + 8 * ndim)["v"]


def register_loaders(conn: psycopg.Connection[Any]) -> None:
    for oid in _ARRAYS:
        conn.adapters.register_loader(oid, NumpyArrayLoader)


@dataclass(frozen=True)
class Layout:
    """Which columns to read and how to turn them into (x, y, id)."""

    schema: str
    table: str
    label: str
    label_kind: str  # 'int', 'float', 'bool' or 'text'
    mode: str  # 'array', 'columns' or 'sparse'
    features: tuple[str, ...]  # array: (values,); columns: names; sparse: (values,)
    indices: str | None = None
    n_features: int = 0
    id_column: str | None = None
    casts: dict[str, str] = field(default_factory=dict)  # column -> SQL cast

    def relation(self) -> sql.Composable:
        return sql.Identifier(self.schema, self.table)

    def _col(self, name: str) -> sql.Composable:
        cast = self.casts.get(name)
        ident = sql.Identifier(name)
        return sql.SQL("{}::{}").format(ident, sql.SQL(cast)) if cast else ident

    def select_list(self) -> sql.Composable:
        cols = [self._col(self.label)]
        cols += [self._col(c) for c in self.features]
        if self.indices:
            cols.append(self._col(self.indices))
        if self.id_column:
            cols.append(sql.SQL("{}::pg_catalog.int8").format(sql.Identifier(self.id_column)))
        return sql.SQL(", ").join(cols)

    def usable(self, inside_arrays: bool = True) -> sql.Composable:
        """Rows the engine would train on: no NULL label or feature, and no
        NULL inside a feature array (the engine skips those rows too).
        Reading leaves the last test to the client (the array loader sees
        the has-NULL flag in the array header for free, where
        array_position would walk every element on the server)."""
        conds = [sql.SQL("{} IS NOT NULL").format(sql.Identifier(self.label))]
        arrays = [] if self.mode == "columns" else list(self.features)
        if self.indices:
            arrays.append(self.indices)
        for c in self.features:
            conds.append(sql.SQL("{} IS NOT NULL").format(sql.Identifier(c)))
        if self.indices:
            conds.append(sql.SQL("{} IS NOT NULL").format(sql.Identifier(self.indices)))
        for c in arrays if inside_arrays else []:
            conds.append(sql.SQL("pg_catalog.array_position({}, NULL) IS NULL")
                         .format(sql.Identifier(c)))
        return sql.SQL(" AND ").join(conds)

    def block_query(self, lo: sql.Composable = sql.Placeholder(),
                    hi: sql.Composable = sql.Placeholder()) -> sql.Composable:
        return sql.SQL(
            "SELECT {cols} FROM ONLY {rel} WHERE ctid OPERATOR(pg_catalog.>=) {lo}::pg_catalog.tid"
            " AND ctid OPERATOR(pg_catalog.<) {hi}::pg_catalog.tid AND {usable}"
        ).format(cols=self.select_list(), rel=self.relation(), usable=self.usable(), lo=lo, hi=hi)

    def blocks_query(self, n: int, literal: Sequence[Any] | None = None) -> sql.Composable:
        """n blocks in one statement: one TID range scan per block under an
        Append (UNION ALL), each row tagged with its block's number, so a
        buffer of many small blocks costs one round trip.  Readers run with
        max_parallel_workers_per_gather = 0, so the rows come block after
        block, each in page order: the same order every time."""
        parts = []
        for k in range(n):
            if literal is None:
                tag, lo, hi = sql.Placeholder(), sql.Placeholder(), sql.Placeholder()
            else:
                tag, lo, hi = (sql.Literal(v) for v in literal[3 * k:3 * k + 3])
            parts.append(sql.SQL("SELECT {cols}, {tag}::pg_catalog.int8 FROM ONLY {rel} "
                                 "WHERE ctid OPERATOR(pg_catalog.>=) {lo}::pg_catalog.tid "
                                 "AND ctid OPERATOR(pg_catalog.<) {hi}::pg_catalog.tid AND {usable}")
                         .format(cols=self.select_list(), rel=self.relation(),
                                 usable=self.usable(False), tag=tag, lo=lo, hi=hi))
        return sql.SQL(" UNION ALL ").join(parts)

    def count_query(self) -> sql.Composable:
        """Usable rows per page, for resuming in the middle of an epoch."""
        return sql.SQL(
            "SELECT ((ctid::pg_catalog.text)::pg_catalog.point)[0]::pg_catalog.int8, "
            "pg_catalog.count(*) FROM ONLY {rel} WHERE {usable} GROUP BY 1"
        ).format(rel=self.relation(), usable=self.usable())


@dataclass
class Rows:
    """A buffer's rows as arrays: x (n, d) float32 or the sparse parts, y, ids."""

    x: np.ndarray | None
    y: np.ndarray | list[str]
    ids: np.ndarray | None
    indices: list[np.ndarray] | None = None
    values: list[np.ndarray] | None = None

    def __len__(self) -> int:
        return len(self.y)


def usable_records(layout: Layout, records: Sequence[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    """Drop rows whose feature array had a NULL element (loaded as None),
    as the engine skips them."""
    if layout.mode == "columns":
        return list(records)
    return [r for r in records if r[1] is not None and (layout.indices is None or r[2] is not None)]


def to_rows(layout: Layout, records: Sequence[tuple[Any, ...]]) -> Rows:
    records = usable_records(layout, records)
    n = len(records)
    if layout.label_kind == "text":
        y: Any = [r[0] for r in records]
    else:
        y = np.fromiter((r[0] for r in records), dtype=np.float64 if layout.label_kind == "float"
                        else np.int64, count=n)
    ids = None
    if layout.id_column:
        ids = np.fromiter((r[-1] for r in records), dtype=np.int64, count=n)
    if layout.mode == "array":
        d = layout.n_features
        x = np.empty((n, d), dtype=np.float32)
        for i, r in enumerate(records):
            if len(r[1]) != d:
                raise CorgipileError(
                    f"a row of {layout.table}.{layout.features[0]} has {len(r[1])} features "
                    f"but the first row had {d}; every row needs the same number")
            x[i] = r[1]
        return Rows(x, y, ids)
    if layout.mode == "columns":
        k = len(layout.features)
        x = np.array([r[1:1 + k] for r in records], dtype=np.float32).reshape(n, k)
        return Rows(x, y, ids)
    values = [r[1] for r in records]
    indices = [r[2] for r in records]
    for idx in indices:
        if len(idx) and (idx.min() < 0 or idx.max() >= layout.n_features):
            raise CorgipileError(
                f"a feature index of {layout.table}.{layout.indices} is out of range for "
                f"n_features={layout.n_features}; sparse indices are 0-based")
    return Rows(None, y, ids, indices=indices, values=values)


def concat(parts: Sequence[Rows], layout: Layout) -> Rows:
    if len(parts) == 1:
        return parts[0]
    if layout.label_kind == "text":
        y: Any = [v for p in parts for v in p.y]
    else:
        y = np.concatenate([p.y for p in parts]) if parts else np.empty(0)
    ids = np.concatenate([p.ids for p in parts]) if layout.id_column else None
    if layout.mode == "sparse":
        return Rows(None, y, ids, indices=[i for p in parts for i in p.indices or []],
                    values=[v for p in parts for v in p.values or []])
    return Rows(np.concatenate([p.x for p in parts]), y, ids)


def connect(dsn: str, connect_timeout: int, statement_timeout_ms: int | None,
            application_name: str = APPLICATION_NAME) -> psycopg.Connection[Any]:
    """A session with a connect timeout, TCP keepalives (a server that
    vanishes does not hang the reader) and an optional statement timeout."""
    # no parallel Append: a buffer's rows arrive in the same order each time
    options = "-c max_parallel_workers_per_gather=0"
    if statement_timeout_ms:
        options += f" -c statement_timeout={int(statement_timeout_ms)}"
    try:
        return psycopg.connect(dsn, connect_timeout=connect_timeout,
                               application_name=application_name, keepalives=1,
                               keepalives_idle=10, keepalives_interval=5, keepalives_count=3,
                               options=options)
    except psycopg.OperationalError as e:
        raise CorgipileError(f"corgipile.torch: cannot connect to {_safe_dsn(dsn)}: {e}") from e


def _safe_dsn(dsn: str) -> str:
    """The DSN without its password, for error messages."""
    try:
        params = psycopg.conninfo.conninfo_to_dict(dsn)
    except psycopg.ProgrammingError:
        return "the given DSN"
    params.pop("password", None)
    return " ".join(f"{k}={v}" for k, v in params.items()) or "the default server"


class BlockReader:
    """One reader's sessions (one per shard), each in the epoch's snapshot."""

    def __init__(self, dsns: Sequence[str], snapshots: Sequence[str | None], layout: Layout,
                 method: str, connect_timeout: int, statement_timeout_ms: int | None):
        self.dsns = list(dsns)
        self.snapshots = list(snapshots)
        self.layout = layout
        self.method = method
        self.connect_timeout = connect_timeout
        self.statement_timeout_ms = statement_timeout_ms
        self._conns: dict[int, psycopg.Connection[Any]] = {}
        self._queries: dict[int, str] = {}

    def _conn(self, shard: int) -> psycopg.Connection[Any]:
        conn = self._conns.get(shard)
        if conn is None:
            conn = connect(self.dsns[shard], self.connect_timeout, self.statement_timeout_ms)
            register_loaders(conn)
            conn.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ
            conn.read_only = True
            snap = self.snapshots[shard] if shard < len(self.snapshots) else None
            try:
                if snap:
                    conn.execute(sql.SQL("SET TRANSACTION SNAPSHOT {}").format(sql.Literal(snap)))
                else:
                    conn.execute("SELECT 1")  # opens the transaction: its own snapshot
            except psycopg.Error as e:
                conn.close()
                raise CorgipileError(
                    f"corgipile.torch: cannot import the epoch's snapshot {snap!r} on "
                    f"{_safe_dsn(self.dsns[shard])}: {e}; the session that exported it "
                    "(rank 0's dataset, in set_epoch) must stay open while the epoch runs"
                ) from e
            self._conns[shard] = conn
        return conn

    def read_blocks(self, shard: int, blocks: Sequence[tuple[int, int, int]]) -> tuple[Rows, np.ndarray]:
        """Rows of several blocks (number, first page, end page) of one
        shard, in one statement; and the block number of each row."""
        conn = self._conn(shard)
        params: list[Any] = []
        for num, first, end in blocks:
            params += [num, f"({first},0)", f"({end},0)"]
        try:
            if self.method == "copy":
                q = sql.SQL("COPY ({}) TO STDOUT (FORMAT BINARY)").format(
                    self.layout.blocks_query(len(blocks), params))
                types = self._copy_types(conn) + [20]  # before COPY holds the session
                with conn.cursor().copy(q) as copy:
                    copy.set_types(types)
                    records = list(copy.rows())
            else:
                q = self._queries.get(len(blocks))
                if q is None:
                    q = self._queries[len(blocks)] = self.layout.blocks_query(
                        len(blocks)).as_string(conn)
                cur = conn.cursor(binary=True)
                records = cur.execute(q, params, prepare=False).fetchall()
        except psycopg.OperationalError as e:
            raise CorgipileError(
                f"corgipile.torch: lost the connection to {_safe_dsn(self.dsns[shard])} "
                f"while reading {len(blocks)} blocks of "
                f"{self.layout.schema}.{self.layout.table}: {e}") from e
        records = usable_records(self.layout, records)
        which = np.fromiter((r[-1] for r in records), dtype=np.int64, count=len(records))
        return to_rows(self.layout, [r[:-1] for r in records]), which

    _types: list[int] | None = None

    def _copy_types(self, conn: psycopg.Connection[Any]) -> list[int]:
        if self._types is None:
            zero = sql.Literal("(0,0)")
            desc = conn.execute(sql.SQL("SELECT * FROM ({}) AS q LIMIT 0").format(
                self.layout.block_query(zero, zero))).description or []
            self._types = [d.type_code for d in desc]
        return self._types

    def close(self) -> None:
        for conn in self._conns.values():
            try:
                conn.close()
            except psycopg.Error:
                pass
        self._conns.clear()
