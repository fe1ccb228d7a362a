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

Every reader of every rank yields the same number of rows (and so of
batches) per epoch when there is more than one rank (``even_shares``):
DistributedDataParallel's collectives pair up only if every rank takes the
same number of steps.
"""

from __future__ import annotations

import queue
import random
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np
import psycopg
import torch
import torch.distributed as dist
from psycopg import sql
from torch.utils.data import IterableDataset, get_worker_info

from .._sql import catalog_type
from ..errors import CorgipileError
from . import plan
from .reader import BlockReader, Layout, Rows, concat, connect, has_block_rows

_INT = {"smallint", "integer", "bigint"}
_FLOAT = {"real", "double precision", "numeric"}
_NUM_ARRAYS = {"real[]", "double precision[]", "smallint[]", "integer[]", "bigint[]", "numeric[]"}
_INT_ARRAYS = {"smallint[]", "integer[]", "bigint[]"}
STATE_VERSION = 1


def _dist_on() -> bool:
    return dist.is_available() and dist.is_initialized()


class CorgiPileDataset(IterableDataset[tuple[Any, ...]]):
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

    ``buffer_size`` (the total over every rank and reader) and
    ``block_size`` are sized by the engine as ``corgipile.train`` sizes
    them; ``buffer_size=None`` (the default) is train()'s default: the
    whole table when its heap fits the server's maintenance_work_mem (a
    full shuffle), else 10% of it.

    ``dsn`` may be a list: the same table on several servers (shards), read
    as one dataset; rank r prefers shard r % len(dsn).

    ``batch_size``: yield batches of this many rows (x of shape (b, d), y
    of shape (b,)), for ``DataLoader(ds, batch_size=None)``: no per-row
    Python and no collate.  None (the default) yields single rows.
    ``transform`` gets what is yielded: a row's or a batch's x.

    ``even_shares`` (with more than one rank): 'pad' (the default, as
    DistributedSampler with drop_last=False) repeats rows of a reader's own
    share until every reader of every rank has as many rows as the largest
    share; 'drop' (as drop_last=True) stops every reader at the smallest
    share; 'off' yields each share as it is (ranks then take different
    numbers of steps: not for DistributedDataParallel).  Shares are counted
    in the epoch's snapshot (one counting scan per epoch, by rank 0).  All
    ranks must use the same DataLoader num_workers.

    ``method``: 'auto' (the default) reads through the extension's
    ``corgipile.block_rows`` when the server has it (0.4.0) and the layout
    allows (numeric label), else 'copy'; 'server', 'copy' or 'select'
    force one (docs/torch.md compares them).  ``model``: read the columns
    of this stored model with its label encoding and preprocessing
    (standardize, one-hot categories), through ``corgipile.block_rows``; the
    label is then the class number (softmax), 0/1 (binary) or the value
    (linear).
    """

    def __init__(self, dsn: str | Sequence[str], table: str, features: str | Sequence[str] = "features",
                 label: str = "label", id_column: str | None = None,
                 feature_indices: str | None = None, block_size: str | int | None = None,
                 buffer_size: str | int | None = None, shuffle: str = "corgipile",
                 seed: int | None = None, transform: Callable[[torch.Tensor], Any] | None = None,
                 *, n_features: int | None = None, sparse_output: str = "dense",
                 with_block: bool = False, method: str = "auto",
                 shuffled_table: str | None = None, rank: int | None = None,
                 world_size: int | None = None, connect_timeout: int = 10,
                 statement_timeout: int | None = None, prefetch: bool = True,
                 batch_size: int | None = None, even_shares: str = "pad",
                 model: str | None = None):
        super().__init__()
        if shuffle not in plan.STRATEGIES:
            raise ValueError(f"shuffle must be one of {', '.join(plan.STRATEGIES)}; got {shuffle!r}")
        if sparse_output not in ("dense", "coo"):
            raise ValueError(f"sparse_output must be 'dense' or 'coo'; got {sparse_output!r}")
        if method not in ("auto", "server", "select", "copy"):
            raise ValueError(f"method must be 'auto', 'server', 'copy' or 'select'; got {method!r}")
        if even_shares not in ("pad", "drop", "off"):
            raise ValueError(f"even_shares must be 'pad', 'drop' or 'off'; got {even_shares!r}")
        if batch_size is not None and (isinstance(batch_size, bool) or int(batch_size) != batch_size
                                       or batch_size < 1):
            raise ValueError(f"batch_size must be a positive whole number or None; got {batch_size!r}")
        if model is not None and shuffle == "shuffle_once":
            raise ValueError("model= reads the table through the model's preprocessing; "
                             "use shuffle='corgipile' or 'block_only' with it")
        self.dsns = [dsn] if isinstance(dsn, str) else list(dsn)
        if not self.dsns:
            raise ValueError("dsn: give at least one connection string")
        self.shuffle = shuffle
        self.block_size_text = plan.size_text(block_size)
        self.buffer_size_text = plan.size_text(buffer_size)
        self.batch_size = None if batch_size is None else int(batch_size)
        self.even_shares = even_shares
        self.model = model
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
        self.layout, self._server = self._describe(table, features, label, id_column,
                                                   feature_indices, n_features)
        self._method = self._choose_method()
        if shuffle == "shuffle_once":
            self._make_shuffled_copy(shuffled_table or f"{self.layout.table}_shuffled_{self.seed}")
        self.epoch = 0
        self._coordinators: list[psycopg.Connection[Any]] = []
        self._snapshots: list[str | None] = []
        self._pages: list[int] = []
        self._page_size = plan.PAGE_SIZE
        self._sizing: plan.Sizing | None = None
        self._block_rows: list[int] | None = None
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
                  n_features: int | None) -> tuple[Layout, bool]:
        """The table's layout (checked on every shard), and whether every
        shard has corgipile.block_rows."""
        server = True
        layout: Layout | None = None
        for _k, d in enumerate(self.dsns):
            with connect(d, self.connect_timeout, self.statement_timeout,
                         "corgipile.torch") as conn:
                has = has_block_rows(conn)
                server = server and has
                if self.model is not None:
                    if not has:
                        raise CorgipileError(
                            f"corgipile.torch: model={self.model!r} needs corgipile.block_rows on "
                            f"{d!r}: install the extension there or update it "
                            "(ALTER EXTENSION corgipile UPDATE)")
                    o = _model_layout(conn, table, self.model, id_column)
                else:
                    o = _check_table(conn, table, features, label, id_column, feature_indices,
                                     n_features if layout is None else layout.n_features)
                conn.rollback()
            if layout is None:
                layout = o
            elif (o.mode, o.label_kind, o.n_features) != (layout.mode, layout.label_kind,
                                                           layout.n_features):
                raise CorgipileError(
                    f"table {table} differs between shards: {self.dsns[0]!r} has "
                    f"{layout.n_features} {layout.mode} features, another has "
                    f"{o.n_features} {o.mode}")
        assert layout is not None
        return layout, server

    def _choose_method(self) -> str:
        lo = self.layout
        if self.model is not None:
            return "server"
        # numeric or boolean labels (block_rows sends text classes only with a model)
        server_ok = lo.casts.get(lo.label) in ("pg_catalog.int8", "pg_catalog.float8",
                                               "pg_catalog.int4::pg_catalog.int8")
        server_ok = server_ok and not (lo.mode == "sparse" and self.sparse_output == "coo")
        if self.method == "server":
            if not self._server:
                raise CorgipileError("corgipile.torch: method='server' needs corgipile.block_rows "
                                     "(extension 0.4.0) on every server")
            if not server_ok:
                raise CorgipileError("corgipile.torch: method='server' reads numeric labels only "
                                     "(and dense sparse rows); use method='copy', or name a model")
            return "server"
        if self.method == "auto":
            return "server" if self._server and server_ok else "copy"
        return self.method

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
        self._snapshots, self._pages, self._page_size, self._sizing, self._block_rows = info[0]
        for c in old:
            c.close()
        if self._resume is not None:
            if self._resume["epoch"] != self.epoch:
                self._resume = None
            else:
                self._prepare_resume()

    def _export(self) -> tuple[list[psycopg.Connection[Any]], tuple[Any, ...]]:
        conns, snaps, pages = [], [], []
        page_size = plan.PAGE_SIZE
        for d in self.dsns:
            conn = connect(d, self.connect_timeout, None, "corgipile.torch coordinator")
            try:
                conn.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ
                conn.read_only = True
                exported = conn.execute("SELECT pg_catalog.pg_export_snapshot()").fetchone()
                # measured after the snapshot: every row it sees is on these pages
                size = conn.execute(
                    "SELECT pg_catalog.pg_relation_size(%s::pg_catalog.regclass), "
                    "pg_catalog.current_setting('block_size')::pg_catalog.int4",
                    (sql.Identifier(self.layout.schema, self.layout.table).as_string(conn),)
                ).fetchone()
                assert exported is not None and size is not None  # one row each
                snap = exported[0]
                n, page_size = size
            except psycopg.Error as e:
                conn.close()
                raise CorgipileError(f"corgipile.torch: cannot export a snapshot of "
                                     f"{self.layout.table}: {e}") from e
            conns.append(conn)
            snaps.append(snap)
            pages.append(int(n) // int(page_size))
        try:
            sizing = self._resolve_sizing(conns[0], sum(pages), int(page_size))
            counts = None
            if self.world_size > 1 and self.even_shares != "off":
                counts = self._count_rows(conns, pages, sizing.pages_per_block)
        except BaseException:
            for c in conns:
                c.close()
            raise
        return conns, (snaps, pages, int(page_size), sizing, counts)

    def _resolve_sizing(self, conn: psycopg.Connection[Any], pages: int,
                        page_size: int) -> plan.Sizing:
        """The engine's sizing for the table's pages (all shards), asked of
        the server (corgipile.sizing); computed here for a server without it."""
        rel = sql.Identifier(self.layout.schema, self.layout.table).as_string(conn)
        if plan.has_server_sizing(conn):
            try:
                return plan.server_sizing(conn, rel, self.block_size_text, self.buffer_size_text,
                                          pages)
            except psycopg.errors.InvalidParameterValue as e:
                conn.rollback()
                raise ValueError(f"corgipile.torch: {e.diag.message_primary}"
                                 + (f" ({e.diag.message_hint})" if e.diag.message_hint else "")
                                 ) from e
        # a server before 0.4.0: its train() buffered 10% by default
        buffer = plan.parse_size(self.buffer_size_text or "10%", "buffer_size")
        block = plan.parse_size(self.block_size_text, "block_size", percent_ok=False)
        assert buffer is not None
        return plan.resolve_sizing(buffer, block, pages, page_size)

    def _count_rows(self, conns: Sequence[psycopg.Connection[Any]], pages: Sequence[int],
                    ppb: int) -> list[int]:
        """Usable rows of every block (blocks() order), in the snapshot."""
        counts: dict[tuple[int, int], int] = {}
        for s, c in enumerate(conns):
            for page, n in c.execute(self.layout.count_query()).fetchall():
                key = (s, int(page) // ppb)
                counts[key] = counts.get(key, 0) + int(n)
        return [counts.get((b.shard, b.first_page // ppb), 0)
                for b in plan.table_blocks(pages, ppb)]

    def close(self) -> None:
        """End the coordinator sessions (rank 0).  The dataset can still be
        used: the next set_epoch opens new ones."""
        for c in self._coordinators:
            c.close()
        self._coordinators = []

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # noqa: BLE001 - a finalizer must not raise
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
        """The epoch's block and buffer sizes (the engine's, for the
        table's pages on all shards)."""
        assert self._sizing is not None
        return self._sizing

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

    def _reader_buffers(self, worker: int, n_workers: int,
                        rank: int | None = None) -> tuple[list[plan.Block], list[list[int]]]:
        blocks = self.blocks()
        mine = plan.worker_blocks(self.rank_plan(rank), worker, n_workers)
        per_reader = max(1, self.sizing.blocks_per_buffer // (self.world_size * n_workers))
        return blocks, plan.buffers(mine, per_reader)

    def _target_rows(self, n_workers: int, block_rows: Sequence[int] | None) -> int | None:
        """Rows every reader (rank x worker) yields this epoch, or None when
        shares are left as they are (one rank, or even_shares='off')."""
        if self.world_size == 1 or self.even_shares == "off" or block_rows is None:
            return None
        shares = [sum(block_rows[i] for buf in self._reader_buffers(w, n_workers, r)[1]
                      for i in buf)
                  for r in range(self.world_size) for w in range(n_workers)]
        return max(shares) if self.even_shares == "pad" else min(shares)

    # ---- resuming ---------------------------------------------------

    def state_dict(self, batches_seen: int, batch_size: int | None = None,
                   num_workers: int = 0) -> dict[str, Any]:
        """Where this rank is in the epoch: ``batches_seen`` batches taken
        from a DataLoader(dataset, batch_size, num_workers) since this
        epoch's iterator began (drop_last=False; the default in_order).
        With the dataset's own ``batch_size`` (DataLoader(batch_size=None)),
        leave batch_size out."""
        if batch_size is None:
            if self.batch_size is None:
                raise ValueError("state_dict needs the DataLoader's batch_size")
            batch_size = self.batch_size
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
        usable rows per block (one counting scan of the table, unless
        set_epoch counted them already)."""
        assert self._resume is not None
        r = self._resume
        n_workers = max(1, r["num_workers"])
        block_rows = self._block_rows
        if block_rows is None:
            conns = []
            try:
                for s, d in enumerate(self.dsns):
                    c = connect(d, self.connect_timeout, self.statement_timeout, "corgipile.torch")
                    conns.append(c)
                    if self._snapshots[s]:
                        c.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ
                        c.execute(sql.SQL("SET TRANSACTION SNAPSHOT {}").format(
                            sql.Literal(self._snapshots[s])))
                block_rows = self._count_rows(conns, self._pages, self.sizing.pages_per_block)
            finally:
                for c in conns:
                    c.close()
        target = self._target_rows(n_workers, block_rows)
        rows_per_worker = []
        for w in range(n_workers):
            _, bufs = self._reader_buffers(w, n_workers)
            own = sum(block_rows[i] for buf in bufs for i in buf)
            rows_per_worker.append(own if target is None else target)
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
        block_rows = self._block_rows
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
        target = self._target_rows(n_workers, block_rows)
        tuple_shuffle = self.shuffle == "corgipile"
        reader = BlockReader(self.dsns, self._snapshots, self.layout, self._method,
                             self.connect_timeout, self.statement_timeout,
                             self.sizing.pages_per_block)

        todo: list[tuple[int, list[int]]] = []
        skipped = 0
        for k, buf in enumerate(bufs):
            if block_rows is not None and skip > 0 and not todo:
                n = sum(block_rows[i] for i in buf)
                if n <= skip:
                    skip -= n
                    skipped += n
                    continue
            todo.append((k, buf))

        def load(k: int, buf: list[int]) -> tuple[Rows, np.ndarray]:
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
            rows = concat(parts, self.layout)
            which = np.concatenate(owner) if len(owner) > 1 else owner[0]
            n = len(which)
            if tuple_shuffle:
                # the buffer permuted once: one gather per array
                order = plan.tuple_permutation(n, self.seed, self.epoch, self.rank, worker, k)
                return rows.take(order), which[order]
            if rows.x is not None and not rows.x.flags.writeable:
                rows.x = rows.x.copy()
            return rows, which

        def chunks() -> Iterator[tuple[Rows, np.ndarray]]:
            """This reader's rows, buffer by buffer, cut or padded to the
            target; resumed, less what was delivered before."""
            left = None if target is None else target - skipped
            for rows, which in self._prefetched(load, todo):
                if left is not None:
                    if left <= 0:
                        return
                    if len(rows) > left:
                        rows, which = rows.slice(0, left), which[:left]
                    left -= len(rows)
                yield rows, which
            if not left or left <= 0:
                return
            # pad: this reader's own rows again, from the start of its
            # stream (or, with no rows of its own, its rank's or the
            # table's blocks), until it has the target
            own = [(k, b) for k, b in enumerate(bufs)]
            pad = own if block_rows is None or sum(block_rows[i] for b in bufs for i in b) > 0 else []
            if not pad:
                rank_blocks = self.rank_plan()
                if not block_rows or not sum(block_rows[i] for i in rank_blocks):
                    rank_blocks = list(range(len(blocks)))
                pad = [(1_000_000 + k, [i]) for k, i in enumerate(rank_blocks)
                       if block_rows is None or block_rows[i]]
            while left > 0 and pad:
                for k, buf in pad:
                    rows, which = load(k, buf)
                    if len(rows) > left:
                        rows, which = rows.slice(0, left), which[:left]
                    left -= len(rows)
                    if len(rows):
                        yield rows, which
                    if left <= 0:
                        return

        def skipped_chunks() -> Iterator[tuple[Rows, np.ndarray]]:
            s = skip
            for rows, which in chunks():
                if s:
                    if len(rows) <= s:
                        s -= len(rows)
                        continue
                    rows, which = rows.slice(s, len(rows)), which[s:]
                    s = 0
                yield rows, which

        try:
            if self.batch_size is None:
                for rows, which in skipped_chunks():
                    yield from self._emit(rows, which)
            else:
                yield from self._batches(skipped_chunks())
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
                except BaseException as e:  # noqa: BLE001 - handed to the consumer
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

    def _batches(self, chunks: Iterator[tuple[Rows, np.ndarray]]) -> Iterator[tuple[Any, ...]]:
        """Batches of batch_size rows (the last may be shorter) across
        buffer boundaries: slices of the permuted buffers, no copy."""
        bs = self.batch_size
        assert bs is not None
        pending: list[tuple[Rows, np.ndarray]] = []
        have = 0
        for rows, which in chunks:
            start = 0
            if pending:
                need = bs - have
                pending.append((rows.slice(0, need), which[:need]))
                have += min(need, len(rows))
                start = need
                if have < bs:
                    continue
                yield self._pack(concat([p[0] for p in pending], self.layout),
                                 np.concatenate([p[1] for p in pending]))
                pending, have = [], 0
            n = len(rows)
            while start + bs <= n:
                yield self._pack(rows.slice(start, start + bs), which[start:start + bs])
                start += bs
            if start < n:
                pending, have = [(rows.slice(start, n), which[start:])], n - start
        if pending:
            yield self._pack(concat([p[0] for p in pending], self.layout),
                             np.concatenate([p[1] for p in pending]))

    def _labels(self, rows: Rows) -> Any:
        lo = self.layout
        if lo.label_kind == "text":
            return rows.y
        return torch.from_numpy(np.asarray(
            rows.y, dtype=np.float32 if lo.label_kind == "float" else np.int64))

    def _pack(self, rows: Rows, which: np.ndarray) -> tuple[Any, ...]:
        """A batch as tensors: x (b, d), y (b,), ids (b,), blocks (b,)."""
        if rows.x is not None:
            x = torch.from_numpy(rows.x)
        else:
            x = self._sparse_batch(rows.indices or [], rows.values or [])
        if self.transform is not None:
            x = self.transform(x)
        out: tuple[Any, ...] = (x, self._labels(rows))
        if rows.ids is not None:
            out += (torch.from_numpy(np.ascontiguousarray(rows.ids)),)
        if self.with_block:
            out += (torch.from_numpy(np.ascontiguousarray(which)),)
        return out

    def _emit(self, rows: Rows, which: np.ndarray) -> Iterator[tuple[Any, ...]]:
        """Single rows (batch_size=None), for a DataLoader that batches."""
        ys = self._labels(rows)
        x_all = torch.from_numpy(rows.x) if rows.x is not None else None
        ids = torch.from_numpy(np.ascontiguousarray(rows.ids)) if rows.ids is not None else None
        blk = torch.from_numpy(np.ascontiguousarray(which))
        for i in range(len(rows)):
            if x_all is not None:
                x = x_all[i]
            else:
                assert rows.indices is not None and rows.values is not None  # sparse rows
                x = self._sparse_row(rows.indices[i], rows.values[i])
            if self.transform is not None:
                x = self.transform(x)
            out: tuple[Any, ...] = (x, ys[i])
            if ids is not None:
                out += (ids[i],)
            if self.with_block:
                out += (blk[i],)
            yield out

    def _sparse_batch(self, indices: list[np.ndarray], values: list[np.ndarray]) -> torch.Tensor:
        n, b = self.layout.n_features, len(indices)
        rows = np.repeat(np.arange(b), [len(i) for i in indices]) if b else np.empty(0, np.int64)
        cols = np.concatenate(indices).astype(np.int64) if b else np.empty(0, np.int64)
        vals = np.concatenate(values).astype(np.float32) if b else np.empty(0, np.float32)
        if self.sparse_output == "coo":
            return torch.sparse_coo_tensor(torch.from_numpy(np.stack([rows, cols])),
                                           torch.from_numpy(vals), (b, n), check_invariants=False)
        x = torch.zeros(b, n, dtype=torch.float32)
        x[torch.from_numpy(rows), torch.from_numpy(cols)] = torch.from_numpy(vals)
        return x

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


def _resolve(conn: psycopg.Connection[Any], table: str) -> tuple[int, str, str]:
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
    return oid, schema, rel


def _model_layout(conn: psycopg.Connection[Any], table: str, model: str,
                  id_column: str | None) -> Layout:
    """The layout a stored model reads: its label and feature columns, its
    dimension; corgipile.block_rows applies its encoding."""
    row = conn.execute(
        "SELECT model, label, features, feature_indices, n_features FROM corgipile.models "
        "WHERE model_name OPERATOR(pg_catalog.=) %s", (model,)).fetchone()
    if row is None:
        raise CorgipileError(f"corgipile.torch: model {model!r} does not exist (or you may not "
                             "use it); see corgipile.models")
    kind, label, feats, indices, n = row
    oid, schema, rel = _resolve(conn, table)
    types = {name: catalog_type(typ)
             for name, typ, _ in conn.execute(_COLUMNS_SQL, (oid,)).fetchall()}
    if indices:
        mode = "sparse"
    elif len(feats) == 1 and types.get(feats[0], "").endswith("[]"):
        mode = "array"
    else:
        mode = "columns"
    cats = tuple(f for f in feats if types.get(f) in ("text", "character varying", "boolean"))
    if id_column and id_column not in types:
        raise CorgipileError(f"corgipile.torch: column {id_column!r} (id_column) does not exist "
                             f"in table {table!r}")
    return Layout(schema, rel, label, "float" if kind == "linear" else "int", mode, tuple(feats),
                  indices, int(n), id_column, {}, "float4", model, cats)


def _check_table(conn: psycopg.Connection[Any], table: str, features: str | Sequence[str],
                 label: str, id_column: str | None, feature_indices: str | None,
                 n_features: int | None) -> Layout:
    """Resolve the table and columns and check the privileges, with an
    error that names what is missing and how to fix it."""
    oid, schema, rel = _resolve(conn, table)
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
    elem = "float8"
    lt = need(label, "label")
    if lt in _INT:
        kind_, casts[label] = "int", "pg_catalog.int8"
    elif lt == "boolean":
        kind_, casts[label] = "int", "pg_catalog.int4::pg_catalog.int8"
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
            elem = "float4" if t == "real[]" else "float8"
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
                    casts, elem)
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
        assert feature_indices is not None  # the sparse layout
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
