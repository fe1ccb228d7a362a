"""CorgiPileDataset: a torch IterableDataset that reads a PostgreSQL table
block by block in CorgiPile's order (the journal paper's §6 multi-process
CorgiPile), split across torch.distributed ranks and DataLoader workers.

Who does what (docs/torch.md has the long version):

* ``__init__`` (every rank's main process) checks the table, columns and
  privileges, settles the seed (rank 0's, broadcast) and prepares epoch 0.
* ``set_epoch(e)`` (every rank's main process, before each epoch, like
  DistributedSampler.set_epoch; it is a collective call when
  torch.distributed is initialised): rank 0 opens one *coordinator*
  session per shard, exports a snapshot (``pg_export_snapshot()``) and
  measures the table's pages in it, and broadcasts both.  The coordinator
  stays open (its transaction idle) until the next ``set_epoch`` or
  ``close()``, so that every reader of every rank can import the snapshot.
* ``__iter__`` (each DataLoader worker, or the main process with
  num_workers=0): computes the epoch's global plan from (seed, epoch, table
  size), takes this rank's and this worker's share, and reads it with its
  own sessions, all in the imported snapshot.  A background thread loads
  the next buffer while the current one is being yielded.
"""

from __future__ import annotations

import queue
import random
import threading
from typing import Any, Callable, Iterator, Sequence

import numpy as np
import psycopg
import torch
import torch.distributed as dist
from psycopg import sql
from torch.utils.data import IterableDataset, get_worker_info

from .._sql import catalog_type
from ..errors import CorgipileError
from . import plan
from .reader import BlockReader, Layout, Rows, concat, connect

_INT = {"smallint", "integer", "bigint"}
_FLOAT = {"real", "double precision", "numeric"}
_NUM_ARRAYS = {"real[]", "double precision[]", "smallint[]", "integer[]", "bigint[]", "numeric[]"}
_INT_ARRAYS = {"smallint[]", "integer[]", "bigint[]"}
STATE_VERSION = 1


def _dist_on() -> bool:
    return dist.is_available() and dist.is_initialized()


class CorgiPileDataset(IterableDataset):
    """Rows of ``table`` as ``(x, y)`` (or ``(x, y, id)`` with ``id_column``).

    ``features`` names one numeric array column, or a list of numeric
    columns; with ``feature_indices`` it names the values array of a sparse
    layout whose 0-based indices are in the ``feature_indices`` array column
    (as corgipile.train takes them).  x is a float32 tensor of n_features
    (sparse rows are made dense, or a sparse COO tensor with
    ``sparse_output='coo'``); y is int64 for integer and boolean labels,
    float32 for other numeric labels, a str for text labels.

    ``shuffle``: 'corgipile' (blocks in a random order, rows shuffled within
    a buffer of blocks), 'block_only', 'no_shuffle' (storage order) or
    'shuffle_once' (reads a fully shuffled copy made once with
    corgipile.shuffle_table, named ``shuffled_table`` or
    '<table>_shuffled_<seed>'; it is reused when it exists).

    ``dsn`` may be a list: the same table on several servers (shards), read
    as one dataset; rank r prefers shard r % len(dsn).
    """

    def __init__(self, dsn: str | Sequence[str], table: str, features: str | Sequence[str] = "features",
                 label: str = "label", id_column: str | None = None,
                 feature_indices: str | None = None, block_size: str | int | None = None,
                 buffer_size: str | int = "10%", shuffle: str = "corgipile",
                 seed: int | None = None, transform: Callable[[torch.Tensor], Any] | None = None,
                 *, n_features: int | None = None, sparse_output: str = "dense",
                 with_block: bool = False, method: str = "select",
                 shuffled_table: str | None = None, rank: int | None = None,
                 world_size: int | None = None, connect_timeout: int = 10,
                 statement_timeout: int | None = None, prefetch: bool = True):
        super().__init__()
        if shuffle not in plan.STRATEGIES:
            raise ValueError(f"shuffle must be one of {', '.join(plan.STRATEGIES)}; got {shuffle!r}")
        if sparse_output not in ("dense", "coo"):
            raise ValueError(f"sparse_output must be 'dense' or 'coo'; got {sparse_output!r}")
        if method not in ("select", "copy"):
            raise ValueError(f"method must be 'select' or 'copy'; got {method!r}")
        self.dsns = [dsn] if isinstance(dsn, str) else list(dsn)
        if not self.dsns:
            raise ValueError("dsn: give at least one connection string")
        self.shuffle = shuffle
        self.block_size = plan.parse_size(block_size, "block_size", percent_ok=False)
        self.buffer_size = plan.parse_size(buffer_size, "buffer_size")
        self.transform = transform
        self.sparse_output = sparse_output
        self.with_block = with_block
        self.method = method
        self.connect_timeout = connect_timeout
        self.statement_timeout = statement_timeout
        self.prefetch = prefetch
        if _dist_on():
            self.rank = dist.get_rank() if rank is None else rank
            self.world_size = dist.get_world_size() if world_size is None else world_size
        else:
            self.rank = 0 if rank is None else rank
            self.world_size = 1 if world_size is None else world_size
        if not 0 <= self.rank < self.world_size:
            raise ValueError(f"rank {self.rank} is not in 0..{self.world_size - 1}")
        # collective calls (seed, snapshot) only when the ranks are the
        # process group's; a dataset given rank/world_size is on its own
        self._collective = (_dist_on() and rank is None and world_size is None
                            and self.world_size > 1)
        self.seed = self._agree_on_seed(seed)
        self.layout = self._describe(table, features, label, id_column, feature_indices, n_features)
        if shuffle == "shuffle_once":
            self._make_shuffled_copy(shuffled_table or f"{self.layout.table}_shuffled_{self.seed}")
        self.epoch = 0
        self._coordinators: list[psycopg.Connection[Any]] = []
        self._snapshots: list[str | None] = []
        self._pages: list[int] = []
        self._page_size = plan.PAGE_SIZE
        self._rank_orders: list[list[int]] | None = None
        self._resume: dict[str, Any] | None = None
        self.set_epoch(0)

    # ---- setting up -------------------------------------------------

    def _agree_on_seed(self, seed: int | None) -> int:
        if seed is None:
            seed = random.SystemRandom().randrange(2 ** 62)
            if self._collective:
                box = [seed]
                dist.broadcast_object_list(box, src=0)
                seed = box[0]
        return int(seed)

    def _describe(self, table: str, features: str | Sequence[str], label: str,
                  id_column: str | None, feature_indices: str | None,
                  n_features: int | None) -> Layout:
        conn = connect(self.dsns[0], self.connect_timeout, self.statement_timeout,
                       "corgipile.torch")
        try:
            with conn:
                layout = _check_table(conn, table, features, label, id_column,
                                      feature_indices, n_features)
            for other in self.dsns[1:]:
                with connect(other, self.connect_timeout, self.statement_timeout,
                             "corgipile.torch") as c2:
                    o = _check_table(c2, table, features, label, id_column, feature_indices,
                                     layout.n_features)
                    if (o.mode, o.label_kind, o.n_features) != (layout.mode, layout.label_kind,
                                                                 layout.n_features):
                        raise CorgipileError(
                            f"table {table} differs between shards: {self.dsns[0]!r} has "
                            f"{layout.n_features} {layout.mode} features, another has "
                            f"{o.n_features} {o.mode}")
        finally:
            conn.close()
        return layout

    def _make_shuffled_copy(self, name: str) -> None:
        """Rank 0 writes the fully shuffled copy on every shard (once);
        the others wait for it."""
        if self.rank == 0:
            for d in self.dsns:
                with connect(d, self.connect_timeout, None, "corgipile.torch") as conn:
                    conn.autocommit = True
                    dst = sql.Identifier(self.layout.schema, name).as_string(conn)
                    have = conn.execute("SELECT pg_catalog.to_regclass(%s)", (dst,)).fetchone()
                    if have is None or have[0] is None:
                        src = sql.Identifier(self.layout.schema, self.layout.table).as_string(conn)
                        conn.execute("SELECT corgipile.shuffle_table(%s::pg_catalog.regclass, %s, %s)",
                                     (src, dst, self.seed))
        if self._collective:
            dist.barrier()
        self.layout = Layout(**{**self.layout.__dict__, "table": name})

    # ---- epochs -----------------------------------------------------

    def set_epoch(self, epoch: int) -> None:
        """Start epoch ``epoch``: a new snapshot, the table measured in it,
        and (in __iter__) the block order of (seed, epoch).  Call it in the
        main process of every rank before creating the epoch's iterator
        (DataLoader workers get a copy of the dataset when the iterator is
        created, so ``persistent_workers=True`` would keep the old epoch)."""
        old = self._coordinators
        self.epoch = int(epoch)
        info: list[Any] = [None]
        if self.rank == 0 or not self._collective:
            self._coordinators, info[0] = self._export()
        if self._collective:
            dist.broadcast_object_list(info, src=0)
            # A broadcast does not wait for the other ranks (gloo's root
            # returns once it has sent), so wait until every rank has left
            # the previous epoch: a slower rank's reader that has not yet
            # imported that epoch's snapshot would otherwise find its
            # exporter gone ("invalid snapshot identifier").
            dist.barrier()
        self._snapshots, self._pages, self._page_size = info[0]
        for c in old:
            c.close()
        if self._resume is not None:
            if self._resume["epoch"] != self.epoch:
                self._resume = None
            else:
                self._prepare_resume()

    def _export(self) -> tuple[list[psycopg.Connection[Any]], tuple[list[str], list[int], int]]:
        conns, snaps, pages = [], [], []
        page_size = plan.PAGE_SIZE
        for d in self.dsns:
            conn = connect(d, self.connect_timeout, None, "corgipile.torch coordinator")
            try:
                conn.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ
                conn.read_only = True
                snap = conn.execute("SELECT pg_catalog.pg_export_snapshot()").fetchone()[0]
                # measured after the snapshot: every row it sees is on these pages
                n, page_size = conn.execute(
                    "SELECT pg_catalog.pg_relation_size(%s::pg_catalog.regclass), "
                    "pg_catalog.current_setting('block_size')::int",
                    (sql.Identifier(self.layout.schema, self.layout.table).as_string(conn),)
                ).fetchone()
            except psycopg.Error as e:
                conn.close()
                raise CorgipileError(f"corgipile.torch: cannot export a snapshot of "
                                     f"{self.layout.table}: {e}") from e
            conns.append(conn)
            snaps.append(snap)
            pages.append(int(n) // int(page_size))
        return conns, (snaps, pages, int(page_size))

    def close(self) -> None:
        """End the coordinator sessions (rank 0).  The dataset can still be
        used: the next set_epoch opens new ones."""
        for c in self._coordinators:
            c.close()
        self._coordinators = []

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass

    def __getstate__(self) -> dict[str, Any]:
        # DataLoader workers get a pickled copy: the sessions stay here
        state = self.__dict__.copy()
        state["_coordinators"] = []
        state["_worker_used"] = False
        return state

    # ---- the plan ---------------------------------------------------

    @property
    def sizing(self) -> plan.Sizing:
        total = sum(self._pages)
        return plan.resolve_sizing(self.buffer_size, self.block_size, total, self._page_size)

    def blocks(self) -> list[plan.Block]:
        """Every block of the table (all shards) this epoch, in storage order."""
        return plan.table_blocks(self._pages, self.sizing.pages_per_block)

    def _reading_strategy(self) -> str:
        return "no_shuffle" if self.shuffle == "shuffle_once" else self.shuffle

    def rank_plan(self, rank: int | None = None) -> list[int]:
        """Indices (into blocks()) of a rank's blocks this epoch, in order."""
        rank = self.rank if rank is None else rank
        blocks = self.blocks()
        if self._rank_orders is not None:
            if len(self._rank_orders) != self.world_size or \
                    sorted(i for o in self._rank_orders for i in o) != list(range(len(blocks))):
                raise CorgipileError(
                    "the block orders given with set_block_orders() no longer cover the "
                    f"table's {len(blocks)} blocks (did the table change size?)")
            return list(self._rank_orders[rank])
        index = {b: i for i, b in enumerate(blocks)}
        mine = plan.rank_blocks(blocks, len(self.dsns), self._reading_strategy(), self.seed,
                                self.epoch, rank, self.world_size)
        return [index[b] for b in mine]

    def set_block_orders(self, orders: Sequence[Sequence[int]] | None) -> None:
        """Use these per-rank block orders (indices into blocks()) from now
        on instead of the (seed, epoch) plan; CDGraB and DRR call this.
        None goes back to the seeded plan."""
        self._rank_orders = None if orders is None else [list(map(int, o)) for o in orders]

    def _reader_buffers(self, worker: int, n_workers: int) -> tuple[list[plan.Block], list[list[int]]]:
        blocks = self.blocks()
        mine = plan.worker_blocks(self.rank_plan(), worker, n_workers)
        per_reader = max(1, self.sizing.blocks_per_buffer // (self.world_size * n_workers))
        return blocks, plan.buffers(mine, per_reader)

    # ---- resuming ---------------------------------------------------

    def state_dict(self, batches_seen: int, batch_size: int, num_workers: int = 0) -> dict[str, Any]:
        """Where this rank is in the epoch: ``batches_seen`` batches taken
        from a DataLoader(dataset, batch_size, num_workers) since this
        epoch's iterator began (drop_last=False; the default in_order)."""
        base = 0
        if self._resume is not None and self._resume["epoch"] == self.epoch:
            base = self._resume["batches_seen"]
        return {"version": STATE_VERSION, "epoch": self.epoch, "seed": self.seed,
                "rank": self.rank, "world_size": self.world_size, "shuffle": self.shuffle,
                "batches_seen": base + int(batches_seen), "batch_size": int(batch_size),
                "num_workers": int(num_workers), "pages": list(self._pages),
                "block_orders": self._rank_orders}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Resume: the next iterator (after set_epoch(state['epoch']), which
        this call already does) yields exactly the rows the interrupted one
        had not yet delivered, in the same order, given a DataLoader with
        the same batch_size and num_workers and an unchanged table."""
        if state.get("version") != STATE_VERSION:
            raise ValueError(f"state_dict version {state.get('version')} is not {STATE_VERSION}")
        for k in ("seed", "world_size", "shuffle", "rank"):
            if state[k] != getattr(self, k):
                raise ValueError(f"cannot resume: the state has {k}={state[k]!r} but this "
                                 f"dataset has {getattr(self, k)!r}")
        self.seed = state["seed"]
        self._rank_orders = state.get("block_orders")
        self._resume = {"epoch": state["epoch"], "batches_seen": state["batches_seen"],
                        "batch_size": state["batch_size"], "num_workers": state["num_workers"]}
        self.set_epoch(state["epoch"])
        if self._pages != state["pages"]:
            raise CorgipileError(
                f"cannot resume epoch {state['epoch']}: the table had {state['pages']} pages "
                f"and has {self._pages} now")

    def _prepare_resume(self) -> None:
        """Turn 'n batches seen' into rows to skip per worker, from the
        usable rows per page (one counting scan of the table)."""
        assert self._resume is not None
        r = self._resume
        n_workers = max(1, r["num_workers"])
        counts: dict[tuple[int, int], int] = {}
        for s, d in enumerate(self.dsns):
            with connect(d, self.connect_timeout, self.statement_timeout, "corgipile.torch") as c:
                if self._snapshots[s]:
                    c.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ
                    c.execute(sql.SQL("SET TRANSACTION SNAPSHOT {}").format(
                        sql.Literal(self._snapshots[s])))
                for page, n in c.execute(self.layout.count_query()).fetchall():
                    counts[(s, int(page))] = int(n)
        blocks = self.blocks()
        block_rows = [sum(counts.get((b.shard, p), 0) for p in range(b.first_page, b.end_page))
                      for b in blocks]
        rows_per_worker = []
        for w in range(n_workers):
            _, bufs = self._reader_buffers(w, n_workers)
            rows_per_worker.append(sum(block_rows[i] for buf in bufs for i in buf))
        skips = plan.loader_skips(rows_per_worker, r["batch_size"], r["batches_seen"])
        # the worker that serves the next batch: the resumed DataLoader's
        # worker 0 takes its role, so the interleaving continues unchanged
        start = plan.loader_skips(rows_per_worker, r["batch_size"], r["batches_seen"] + 1)
        nxt = next((w for w in range(n_workers) if start[w] != skips[w]), 0)
        r.update(skips=skips, rotate=nxt, block_rows=block_rows)

    # ---- iterating --------------------------------------------------

    def __iter__(self) -> Iterator[tuple[Any, ...]]:
        info = get_worker_info()
        worker, n_workers = (0, 1) if info is None else (info.id, info.num_workers)
        if info is not None:
            # a worker's copy of the dataset serves one epoch; a second
            # __iter__ in the same worker means persistent_workers=True,
            # which would repeat the old epoch's plan and snapshot
            if getattr(self, "_worker_used", False):
                raise CorgipileError(
                    "corgipile.torch: DataLoader(persistent_workers=True) is not supported: "
                    "the workers would keep the previous epoch's order and snapshot; leave "
                    "persistent_workers off (workers get the new epoch from set_epoch)")
            self._worker_used = True
        skip = 0
        block_rows = None
        r = self._resume
        if r is not None and r["epoch"] == self.epoch and "skips" in r:
            if max(1, r["num_workers"]) != n_workers:
                raise CorgipileError(
                    f"resuming needs the DataLoader's num_workers={r['num_workers']} as when "
                    f"the state was saved; this one has {0 if info is None else n_workers}")
            worker = (worker + r["rotate"]) % n_workers
            skip = r["skips"][worker]
            block_rows = r["block_rows"]
        blocks, bufs = self._reader_buffers(worker, n_workers)
        tuple_shuffle = self.shuffle == "corgipile"
        reader = BlockReader(self.dsns, self._snapshots, self.layout, self.method,
                             self.connect_timeout, self.statement_timeout)

        todo: list[tuple[int, list[int]]] = []
        for k, buf in enumerate(bufs):
            if block_rows is not None and skip > 0:
                n = sum(block_rows[i] for i in buf)
                if n <= skip:
                    skip -= n
                    continue
            todo.append((k, buf))

        def load(k: int, buf: list[int]) -> tuple[Rows, np.ndarray, np.ndarray]:
            parts, owner = [], []
            # one statement per shard for the buffer's blocks, in buffer order
            i = 0
            while i < len(buf):
                j = i
                while j < len(buf) and blocks[buf[j]].shard == blocks[buf[i]].shard:
                    j += 1
                group = [(n, blocks[n].first_page, blocks[n].end_page) for n in buf[i:j]]
                rows, which = reader.read_blocks(blocks[buf[i]].shard, group)
                parts.append(rows)
                owner.append(which)
                i = j
            rows = concat(parts, self.layout) if parts else None
            which = np.concatenate(owner) if owner else np.empty(0, dtype=np.int64)
            n = len(which)
            order = (plan.tuple_permutation(n, self.seed, self.epoch, self.rank, worker, k)
                     if tuple_shuffle else np.arange(n))
            return rows, which, order

        try:
            for rows, which, order in self._prefetched(load, todo):
                if skip:
                    order = order[skip:]
                    skip = 0
                yield from self._emit(rows, which, order)
        finally:
            reader.close()

    def _prefetched(self, load: Callable[..., Any], todo: list[tuple[int, list[int]]]) -> Iterator[Any]:
        """Load buffer k+1 in a thread while buffer k is being consumed
        (psycopg releases the GIL while it waits for the server)."""
        if not self.prefetch or len(todo) <= 1:
            for k, buf in todo:
                yield load(k, buf)
            return
        q: queue.Queue[Any] = queue.Queue(maxsize=1)
        stop = threading.Event()

        def run() -> None:
            for k, buf in todo:
                if stop.is_set():
                    return
                try:
                    item = ("ok", load(k, buf))
                except BaseException as e:  # handed to the consumer
                    item = ("error", e)
                while not stop.is_set():
                    try:
                        q.put(item, timeout=0.1)
                        break
                    except queue.Full:
                        continue
                if item[0] == "error":
                    return

        t = threading.Thread(target=run, name="corgipile-prefetch", daemon=True)
        t.start()
        try:
            for _ in todo:
                kind, value = q.get()
                if kind == "error":
                    raise value
                yield value
        finally:
            stop.set()
            t.join()

    def _emit(self, rows: Rows, which: np.ndarray, order: np.ndarray) -> Iterator[tuple[Any, ...]]:
        lo = self.layout
        text = lo.label_kind == "text"
        ys = rows.y if text else torch.from_numpy(
            np.asarray(rows.y, dtype=np.float32 if lo.label_kind == "float" else np.int64))
        x_all = torch.from_numpy(rows.x) if rows.x is not None else None
        ids = torch.from_numpy(rows.ids) if rows.ids is not None else None
        blk = torch.from_numpy(which)
        for i in order:
            i = int(i)
            if x_all is not None:
                x = x_all[i]
            else:
                x = self._sparse_row(rows.indices[i], rows.values[i])
            if self.transform is not None:
                x = self.transform(x)
            out: tuple[Any, ...] = (x, ys[i])
            if ids is not None:
                out += (ids[i],)
            if self.with_block:
                out += (blk[i],)
            yield out

    def _sparse_row(self, idx: np.ndarray, val: np.ndarray) -> torch.Tensor:
        n = self.layout.n_features
        if self.sparse_output == "coo":
            return torch.sparse_coo_tensor(torch.from_numpy(idx.astype(np.int64)).unsqueeze(0),
                                           torch.from_numpy(val.astype(np.float32)), (n,),
                                           check_invariants=False)
        x = torch.zeros(n, dtype=torch.float32)
        x[torch.from_numpy(idx.astype(np.int64))] = torch.from_numpy(val.astype(np.float32))
        return x


# ---- checking the table ------------------------------------------------

_COLUMNS_SQL = """
SELECT a.attname, pg_catalog.format_type(a.atttypid, NULL),
       pg_catalog.has_column_privilege(c.oid, a.attnum, 'SELECT')
  FROM pg_catalog.pg_attribute a
  JOIN pg_catalog.pg_class c ON c.oid OPERATOR(pg_catalog.=) a.attrelid
 WHERE c.oid OPERATOR(pg_catalog.=) %s AND a.attnum OPERATOR(pg_catalog.>) 0
   AND NOT a.attisdropped
"""


def _check_table(conn: psycopg.Connection[Any], table: str, features: str | Sequence[str],
                 label: str, id_column: str | None, feature_indices: str | None,
                 n_features: int | None) -> Layout:
    """Resolve the table and columns and check the privileges, with an
    error that names what is missing and how to fix it."""
    where = conn.info.dbname
    try:
        row = conn.execute(
            "SELECT c.oid, n.nspname, c.relname, c.relkind"
            "  FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n"
            "    ON n.oid OPERATOR(pg_catalog.=) c.relnamespace"
            " WHERE c.oid OPERATOR(pg_catalog.=) pg_catalog.to_regclass(%s)", (table,)).fetchone()
    except psycopg.Error as e:
        raise CorgipileError(f"corgipile.torch: {table!r} is not a valid table name: {e}") from e
    if row is None:
        raise CorgipileError(f"corgipile.torch: table {table!r} does not exist in database "
                             f"{where!r}; check the name and the search_path")
    oid, schema, rel, kind = row
    if kind not in ("r", "m"):
        raise CorgipileError(f"corgipile.torch: {table!r} is not a plain table (relkind {kind!r}); "
                             "blocks of heap pages need a table or materialized view")
    cols = {name: (catalog_type(typ), ok)
            for name, typ, ok in conn.execute(_COLUMNS_SQL, (oid,)).fetchall()}
    if isinstance(features, str):
        feat = [features]
        mode = "sparse" if feature_indices else "array"
    else:
        feat = list(features)
        mode = "columns"
        if feature_indices:
            raise ValueError("feature_indices needs features to name one values array column")
        if not feat:
            raise ValueError("features: name at least one column")

    def need(name: str, what: str) -> str:
        if name not in cols:
            raise CorgipileError(
                f"corgipile.torch: column {name!r} ({what}) does not exist in table {table!r}; "
                f"its columns are {', '.join(sorted(cols))}")
        typ, ok = cols[name]
        if not ok:
            raise CorgipileError(
                f"corgipile.torch: permission denied for column {name!r} of table {table!r}; "
                f"GRANT SELECT ON {table} TO {conn.info.user}")
        return typ

    casts: dict[str, str] = {}
    lt = need(label, "label")
    if lt in _INT:
        kind_ = "int"
    elif lt == "boolean":
        kind_, casts[label] = "int", "pg_catalog.int4"
    elif lt in _FLOAT:
        kind_, casts[label] = "float", "pg_catalog.float8"
    elif lt in ("text", "character varying", "character"):
        kind_, casts[label] = "text", "pg_catalog.text"
    else:
        raise CorgipileError(f"corgipile.torch: label column {label!r} of {table!r} has type {lt}; "
                             "expected a numeric, boolean or text type")
    for f in feat:
        t = need(f, "features")
        if mode == "columns":
            if t not in _INT and t not in _FLOAT:
                raise CorgipileError(f"corgipile.torch: feature column {f!r} has type {t}; "
                                     "expected a numeric type")
            casts[f] = "pg_catalog.float8"
        else:
            if t not in _NUM_ARRAYS:
                raise CorgipileError(f"corgipile.torch: features column {f!r} has type {t}; "
                                     "expected a numeric array (float4[], float8[], int[], ...)")
            if t not in ("real[]", "double precision[]"):
                casts[f] = "pg_catalog.float8[]"
    if feature_indices:
        t = need(feature_indices, "feature_indices")
        if t not in _INT_ARRAYS:
            raise CorgipileError(f"corgipile.torch: feature_indices column {feature_indices!r} "
                                 f"has type {t}; expected an integer array")
    if id_column:
        t = need(id_column, "id_column")
        if t not in _INT:
            raise CorgipileError(f"corgipile.torch: id_column {id_column!r} has type {t}; "
                                 "expected an integer type")
    layout = Layout(schema, rel, label, kind_, mode, tuple(feat), feature_indices, 0, id_column,
                    casts)
    rel_sql = layout.relation().as_string(conn)
    if mode == "columns":
        n = len(feat)
    elif n_features:
        n = int(n_features)
    elif mode == "array":
        r = conn.execute(sql.SQL("SELECT pg_catalog.cardinality({}) FROM ONLY {} WHERE {} LIMIT 1")
                         .format(sql.Identifier(feat[0]), sql.SQL(rel_sql), layout.usable())).fetchone()
        n = int(r[0]) if r else 0
    else:
        r = conn.execute(sql.SQL("SELECT pg_catalog.max(i) OPERATOR(pg_catalog.+) 1 FROM ONLY {}, "
                                 "LATERAL pg_catalog.unnest({}) AS u(i) WHERE {}")
                         .format(sql.SQL(rel_sql), sql.Identifier(feature_indices),
                                 layout.usable())).fetchone()
        n = int(r[0]) if r and r[0] is not None else 0
    try:
        conn.rollback()
    except psycopg.Error:
        pass
    return Layout(**{**layout.__dict__, "n_features": n})
