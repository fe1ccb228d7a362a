"""Reading blocks of heap pages from PostgreSQL into numpy arrays.

A reader fetches all the blocks of a buffer in one statement and parses the
answer with one ``np.frombuffer`` (no Python per row), three ways:

* ``method='server'``: ``corgipile.block_rows(...)`` (the extension's C
  function) returns each block's rows already converted by the engine, as
  packed little-endian float32 bytes: one ``np.frombuffer`` per block.  With
  ``model => 'm'`` it applies the model's label encoding and preprocessing
  (standardize, one-hot categories).
* ``method='copy'``: ``COPY (<one TID range scan per block, UNION ALL>) TO
  STDOUT (FORMAT BINARY)``; rows of fixed width (the usual case: one numeric
  array of a fixed length, or numeric columns, a numeric label) are checked
  and split into columns in one vectorised step over a structured dtype.
  Rows that are not (text labels, sparse rows, NULL elements, ragged arrays)
  fall back to psycopg's row parser.
* ``method='select'``: the same query as a binary SELECT parsed row by row
  by psycopg (the slow, general path).

A block is read with a TID range scan (PostgreSQL 14+)::

    SELECT label, features, <block>::int8 FROM ONLY t
     WHERE ctid >= '(p,0)' AND ctid < '(q,0)' AND <row is usable>

Every reader runs in one REPEATABLE READ transaction that imports the
epoch's exported snapshot (``SET TRANSACTION SNAPSHOT``), so all readers of
all ranks see the same rows.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

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
_COPY_SIGNATURE = b"PGCOPY\n\xff\r\n\x00"
# a block query's bounds when the caller binds them (%s)
_PLACEHOLDER = sql.Placeholder()

BLOCK_ROWS_SIGNATURE = ("corgipile.block_rows(pg_catalog.regclass, pg_catalog.int8[], "
                        "pg_catalog.int4, pg_catalog.text, pg_catalog.text, pg_catalog.text, "
                        "pg_catalog.text, pg_catalog.text, pg_catalog.int4, pg_catalog.text)")


class NumpyArrayLoader(Loader):
    """A one-dimensional (or flattened) numeric array as a numpy array.

    The binary array format interleaves a 4-byte length with each element;
    a structured dtype reads the values in one step.  An array with a NULL
    element loads as None (the engine skips such rows)."""

    format = Format.BINARY
    _dtypes: dict[int, np.dtype] = {}

    def load(self, data: Any) -> np.ndarray | None:
        buf = memoryview(data)
        ndim, has_null, elem = _HEAD.unpack_from(buf, 0)
        if ndim == 0:
            return np.empty(0, dtype=np.dtype(_ELEMENTS[elem]).newbyteorder("="))
        if has_null:
            return None
        n = 1
        for k in range(ndim):
            n *= struct.unpack_from("!i", buf, 12 + 8 * k)[0]
        dt = self._dtypes.get(elem)
        if dt is None:
            dt = self._dtypes[elem] = np.dtype([("len", ">i4"), ("v", _ELEMENTS[elem])])
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
    elem: str = "float8"  # array mode: the wire element type, 'float4' or 'float8'
    model: str | None = None  # read through corgipile.block_rows with this model
    nullable_features: tuple[str, ...] = ()  # category columns a model encodes NULL

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
        Reading leaves the last test to the client (the array header's
        has-NULL flag is free to read, where array_position would walk every
        element on the server)."""
        conds = [sql.SQL("{} IS NOT NULL").format(sql.Identifier(self.label))]
        arrays = [] if self.mode == "columns" else list(self.features)
        if self.indices:
            arrays.append(self.indices)
        for c in self.features:
            if c not in self.nullable_features:
                conds.append(sql.SQL("{} IS NOT NULL").format(sql.Identifier(c)))
        if self.indices:
            conds.append(sql.SQL("{} IS NOT NULL").format(sql.Identifier(self.indices)))
        for c in arrays if inside_arrays else []:
            conds.append(sql.SQL("pg_catalog.array_position({}, NULL) IS NULL")
                         .format(sql.Identifier(c)))
        return sql.SQL(" AND ").join(conds)

    def block_query(self, lo: sql.Composable = _PLACEHOLDER,
                    hi: sql.Composable = _PLACEHOLDER) -> sql.Composed:
        return sql.SQL(
            "SELECT {cols} FROM ONLY {rel} WHERE ctid OPERATOR(pg_catalog.>=) {lo}::pg_catalog.tid"
            " AND ctid OPERATOR(pg_catalog.<) {hi}::pg_catalog.tid AND {usable}"
        ).format(cols=self.select_list(), rel=self.relation(), usable=self.usable(), lo=lo, hi=hi)

    def block_template(self, conn: psycopg.Connection[Any]) -> str:
        """One block's scan as text with {tag}, {lo} and {hi} for whole
        numbers: the buffer's statement is this joined by UNION ALL, so SQL
        is composed once per reader, not once per buffer (COPY takes no
        parameters).  Rows come block after block, each in page order
        (readers run with max_parallel_workers_per_gather = 0)."""
        text = sql.SQL(
            "SELECT {cols}, {{tag}}::pg_catalog.int8 FROM ONLY {rel} "
            "WHERE ctid OPERATOR(pg_catalog.>=) '({{lo}},0)'::pg_catalog.tid "
            "AND ctid OPERATOR(pg_catalog.<) '({{hi}},0)'::pg_catalog.tid AND {usable}"
        ).format(cols=self.select_list(), rel=self.relation(),
                 usable=self.usable(False)).as_string(conn)
        return text

    def count_query(self) -> sql.Composed:
        """Usable rows per page (equal shares across ranks, resuming)."""
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

    def slice(self, a: int, b: int) -> Rows:
        """Rows a..b (views, no copy)."""
        return Rows(None if self.x is None else self.x[a:b], self.y[a:b],
                    None if self.ids is None else self.ids[a:b],
                    indices=None if self.indices is None else self.indices[a:b],
                    values=None if self.values is None else self.values[a:b])

    def take(self, order: np.ndarray) -> Rows:
        """The rows in this order (one gather per array)."""
        y = [self.y[i] for i in order] if isinstance(self.y, list) else self.y[order]
        if self.x is None:
            return Rows(None, y, None if self.ids is None else self.ids[order],
                        indices=[self.indices[i] for i in order] if self.indices else [],
                        values=[self.values[i] for i in order] if self.values else [])
        return Rows(self.x[order], y, None if self.ids is None else self.ids[order])


def usable_records(layout: Layout, records: Sequence[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    """Drop rows whose feature array had a NULL element (loaded as None),
    as the engine skips them."""
    if layout.mode == "columns":
        return list(records)
    return [r for r in records if r[1] is not None and (layout.indices is None or r[2] is not None)]


def to_rows(layout: Layout, records: Sequence[tuple[Any, ...]]) -> Rows:
    """Rows parsed by psycopg (the general path) as arrays."""
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
        for r in records:
            if len(r[1]) != d:
                raise CorgipileError(
                    f"a row of {layout.table}.{layout.features[0]} has {len(r[1])} features "
                    f"but the first row had {d}; every row needs the same number")
        x = np.stack([r[1] for r in records]).astype(np.float32) if n else \
            np.empty((0, d), dtype=np.float32)
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
    ids = np.concatenate([p.ids for p in parts]) if parts and parts[0].ids is not None else None
    if parts and parts[0].x is None:
        return Rows(None, y, ids, indices=[i for p in parts for i in p.indices or []],
                    values=[v for p in parts for v in p.values or []])
    return Rows(np.concatenate([p.x for p in parts]), y, ids)


# ---- binary COPY, vectorised ------------------------------------------------

def _fixed_row_dtype(layout: Layout) -> np.dtype | None:
    """The structured dtype of one COPY row when every row has the same
    width, or None (text labels, sparse rows)."""
    if layout.label_kind == "text" or layout.mode == "sparse":
        return None
    label = ">f8" if layout.label_kind == "float" else ">i8"
    fields: list[tuple[Any, ...]] = [("nf", ">i2"), ("ylen", ">i4"), ("y", label)]
    if layout.mode == "array":
        elem = ">f4" if layout.elem == "float4" else ">f8"
        fields += [("alen", ">i4"), ("ndim", ">i4"), ("hasnull", ">i4"), ("eoid", ">u4"),
                   ("dim", ">i4"), ("lb", ">i4"),
                   ("x", [("len", ">i4"), ("v", elem)], (layout.n_features,))]
    else:
        fields += [("x", [("len", ">i4"), ("v", ">f8")], (len(layout.features),))]
    if layout.id_column:
        fields += [("idlen", ">i4"), ("id", ">i8")]
    fields += [("taglen", ">i4"), ("tag", ">i8")]
    return np.dtype(fields)


def parse_copy(layout: Layout, data: bytes | bytearray | memoryview) -> tuple[Rows, np.ndarray] | None:
    """A whole binary COPY answer (header, rows, trailer) as arrays, when
    every row has the layout's fixed width and shape; None otherwise (the
    caller then parses row by row).  One np.frombuffer and one vectorised
    check of every length, dimension and flag."""
    dt = _fixed_row_dtype(layout)
    buf = memoryview(data)
    if dt is None or len(buf) < 21 or bytes(buf[:11]) != _COPY_SIGNATURE:
        return None
    ext = struct.unpack_from("!I", buf, 15)[0]
    start = 19 + ext
    body = len(buf) - start - 2
    if body < 0 or bytes(buf[-2:]) != b"\xff\xff" or body % dt.itemsize:
        return None
    n = body // dt.itemsize
    rec = np.frombuffer(buf, dtype=dt, count=n, offset=start)
    k = 2 + (len(layout.features) if layout.mode == "columns" else 1) + (1 if layout.id_column else 0)
    ok = (rec["nf"] == k).all() and (rec["ylen"] == 8).all() and (rec["taglen"] == 8).all()
    if ok and layout.id_column:
        ok = bool((rec["idlen"] == 8).all())
    if ok and layout.mode == "array":
        d = layout.n_features
        esize = 4 if layout.elem == "float4" else 8
        ok = bool((rec["alen"] == 20 + d * (4 + esize)).all() and (rec["ndim"] == 1).all()
                  and (rec["hasnull"] == 0).all() and (rec["dim"] == d).all()
                  and (rec["x"]["len"] == esize).all())
    elif ok:
        ok = bool((rec["x"]["len"] == 8).all())
    if not ok:
        return None
    y = rec["y"].astype(np.float64 if layout.label_kind == "float" else np.int64)
    ids = rec["id"].astype(np.int64) if layout.id_column else None
    x = rec["x"]["v"].astype(np.float32)
    return Rows(x, y, ids), rec["tag"].astype(np.int64)


def parse_copy_rows(data: bytes | bytearray | memoryview) -> list[tuple[bytes | None, ...]]:
    """The general path: a binary COPY answer as rows of raw field bytes."""
    buf = memoryview(data)
    pos = 19 + struct.unpack_from("!I", buf, 15)[0]
    rows: list[tuple[bytes | None, ...]] = []
    while True:
        nf = struct.unpack_from("!h", buf, pos)[0]
        pos += 2
        if nf == -1:
            return rows
        row: list[bytes | None] = []
        for _ in range(nf):
            ln = struct.unpack_from("!i", buf, pos)[0]
            pos += 4
            if ln < 0:
                row.append(None)
            else:
                row.append(bytes(buf[pos:pos + ln]))
                pos += ln
        rows.append(tuple(row))


# ---- sessions ------------------------------------------------------------------

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


def has_block_rows(conn: psycopg.Connection[Any]) -> bool:
    """Whether the server has corgipile.block_rows and we may call it."""
    row = conn.execute(
        "SELECT pg_catalog.has_function_privilege(p, 'EXECUTE') FROM "
        "pg_catalog.to_regprocedure(%s) AS p WHERE p IS NOT NULL",
        (BLOCK_ROWS_SIGNATURE,)).fetchone()
    return bool(row and row[0])


class BlockReader:
    """One reader's sessions (one per shard), each in the epoch's snapshot."""

    def __init__(self, dsns: Sequence[str], snapshots: Sequence[str | None], layout: Layout,
                 method: str, connect_timeout: int, statement_timeout_ms: int | None,
                 pages_per_block: int = 1):
        self.dsns = list(dsns)
        self.snapshots = list(snapshots)
        self.layout = layout
        self.method = method
        self.pages_per_block = pages_per_block
        self.connect_timeout = connect_timeout
        self.statement_timeout_ms = statement_timeout_ms
        self._conns: dict[int, psycopg.Connection[Any]] = {}
        self._template: str | None = None
        self._server_sql: str | None = None
        self._types: list[int] | None = None

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
        try:
            if self.method == "server":
                return self._read_server(conn, blocks)
            if self.method == "copy":
                return self._read_copy(conn, blocks)
            return self._read_select(conn, blocks)
        except psycopg.OperationalError as e:
            raise CorgipileError(
                f"corgipile.torch: lost the connection to {_safe_dsn(self.dsns[shard])} "
                f"while reading {len(blocks)} blocks of "
                f"{self.layout.schema}.{self.layout.table}: {e}") from e
        except psycopg.Error as e:
            raise CorgipileError(
                f"corgipile.torch: reading {len(blocks)} blocks of "
                f"{self.layout.schema}.{self.layout.table} failed: {e}") from e

    def _buffer_sql(self, conn: psycopg.Connection[Any], blocks: Sequence[tuple[int, int, int]]) -> str:
        if self._template is None:
            self._template = self.layout.block_template(conn)
        t = self._template
        return " UNION ALL ".join(t.format(tag=int(n), lo=int(a), hi=int(b)) for n, a, b in blocks)

    def _read_server(self, conn: psycopg.Connection[Any],
                     blocks: Sequence[tuple[int, int, int]]) -> tuple[Rows, np.ndarray]:
        lo = self.layout
        if self._server_sql is None:
            # called in the target list (a ProjectSet streams its rows);
            # in FROM, a Function Scan would first write every block's bytes
            # to a tuplestore, on disk past work_mem: 2-3x the server's CPU
            self._server_sql = sql.SQL(
                "SELECT (r).page, (r).n_rows, (r).dim, (r).y, (r).x, (r).ids FROM ("
                "SELECT corgipile.block_rows("
                "{rel}::pg_catalog.regclass, %s::pg_catalog.int8[], %s::pg_catalog.int4, "
                "label => %s, features => %s, feature_indices => %s, model => %s, "
                "id_column => %s, n_features => %s, dtype => 'float4') AS r) AS s"
            ).format(rel=sql.Literal(lo.relation().as_string(conn))).as_string(conn)
        if lo.model:
            label = features = indices = None
        else:
            label = sql.Identifier(lo.label).as_string(conn)
            features = ", ".join(sql.Identifier(f).as_string(conn) for f in lo.features)
            indices = sql.Identifier(lo.indices).as_string(conn) if lo.indices else None
        ids_col = lo.id_column
        firsts = [int(a) for _, a, _ in blocks]
        ppb = max(int(b) - int(a) for _, a, b in blocks) if blocks else 1
        ppb = max(ppb, self.pages_per_block)
        cur = conn.cursor(binary=True)
        res = cur.execute(self._server_sql, [firsts, ppb, label, features, indices, lo.model,
                                             ids_col, lo.n_features or None],
                          prepare=True).fetchall()
        xs, ys, ids, which = [], [], [], []
        d = lo.n_features
        # one row per block (several, consecutive, for a large block's
        # chunks), in the order asked
        j = 0
        for page, n, dim, y, x, i in res:
            while blocks[j][1] != page:
                j += 1
            if n == 0:
                continue
            d = dim
            xs.append(np.frombuffer(x, dtype="<f4").reshape(n, dim))
            ys.append(np.frombuffer(y, dtype="<f8"))
            if lo.id_column:
                ids.append(np.frombuffer(i, dtype="<i8"))
            which.append(np.full(n, blocks[j][0], dtype=np.int64))
        if not xs:
            return Rows(np.empty((0, d), np.float32), np.empty(0, _label_dtype(lo)),
                        np.empty(0, np.int64) if lo.id_column else None), np.empty(0, np.int64)
        x_all = np.concatenate(xs) if len(xs) > 1 else xs[0]
        y_all = np.concatenate(ys) if len(ys) > 1 else ys[0]
        return (Rows(x_all, y_all.astype(_label_dtype(lo)),
                     (np.concatenate(ids) if lo.id_column else None)),
                np.concatenate(which))

    def _read_copy(self, conn: psycopg.Connection[Any],
                   blocks: Sequence[tuple[int, int, int]]) -> tuple[Rows, np.ndarray]:
        q = "COPY (" + self._buffer_sql(conn, blocks) + ") TO STDOUT (FORMAT BINARY)"
        data = bytearray()
        with conn.cursor().copy(q) as copy:
            for chunk in copy:
                data += chunk  # one copy of the answer, parsed in place
        parsed = parse_copy(self.layout, data)
        if parsed is not None:
            return parsed
        # ragged, sparse, text or NULL elements: psycopg's loaders, row by row
        types = self._copy_types(conn) + [20]
        loaders = []
        for t in types:
            loader = conn.adapters.get_loader(t, Format.BINARY)
            if loader is None:  # pragma: no cover - the layout admits only types it has
                raise TypeError(f"psycopg has no binary loader for type oid {t}")
            loaders.append(loader(t, conn))
        records = [tuple(None if v is None else ld.load(v) for ld, v in zip(loaders, r, strict=True))
                   for r in parse_copy_rows(data)]
        return self._records(records)

    def _read_select(self, conn: psycopg.Connection[Any],
                     blocks: Sequence[tuple[int, int, int]]) -> tuple[Rows, np.ndarray]:
        cur = conn.cursor(binary=True)
        records = cur.execute(self._buffer_sql(conn, blocks), prepare=False).fetchall()
        return self._records(records)

    def _records(self, records: list[tuple[Any, ...]]) -> tuple[Rows, np.ndarray]:
        records = usable_records(self.layout, records)
        which = np.fromiter((r[-1] for r in records), dtype=np.int64, count=len(records))
        return to_rows(self.layout, [r[:-1] for r in records]), which

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


def _label_dtype(lo: Layout) -> type:
    return np.float64 if lo.label_kind == "float" else np.int64
