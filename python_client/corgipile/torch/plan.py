"""Blocks, their order per epoch, and who reads which of them.

Pure functions of (seed, epoch, table size, ranks, workers): no database,
no torch.  The dataset calls them in every rank and every DataLoader worker,
and because they are deterministic every process computes the same global
plan and takes its own share of it, with no communication.

Sizes come from the engine: ``corgipile.sizing()`` runs its own
``cp_resolve_sizing`` (extension/params/params.c) and ``server_sizing`` asks
it.  ``resolve_sizing`` is the same rule in Python, used only for a server
without the extension (0.4.0); tests/python/torch/test_sizing.py checks
that both agree.  The buffer
named in ``buffer_size`` is the total over all processes, as in the paper's
multi-process CorgiPile (§6.2: ``buffer_size = BS/PN`` per process), so each
of the ranks x workers readers buffers 1/(ranks x workers) of it.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np

PAGE_SIZE = 8192  # BLCKSZ; the dataset reads the server's actual value
TARGET_BLOCKS_PER_BUFFER = 256  # CP_TARGET_BLOCKS_PER_BUFFER
MIN_BUFFER_PAGES = 16  # CP_MIN_BUFFER_PAGES
MAX_BLOCK_BYTES = 10 * 1024 * 1024  # CP_MAX_BLOCK_BYTES

STRATEGIES = ("no_shuffle", "block_only", "corgipile", "shuffle_once")

T = TypeVar("T")  # what a plan orders: blocks, or their indices

MAX_BLOCK_NUMBER = 0xFFFFFFFE  # MaxBlockNumber
UINT32_MAX = 0xFFFFFFFF

# as params.c's parse_size reads them: a number, spaces, then a unit
_SIZE = re.compile(r"^\s*([0-9]+(?:\.[0-9]*)?) *(%|pages?|b|kb|mb|gb|tb)?$", re.IGNORECASE)
_UNIT = {"b": 1, "kb": 1024, "mb": 1024 ** 2, "gb": 1024 ** 3, "tb": 1024 ** 4}


@dataclass(frozen=True)
class Size:
    unit: str  # 'percent', 'pages' or 'bytes'
    value: float


def parse_size(text: str | int | None, what: str, percent_ok: bool = True) -> Size | None:
    """'10%', '64 pages', '4MB' or a number of pages, as the engine reads them."""
    if text is None:
        return None
    if isinstance(text, bool) or (isinstance(text, (int, float)) and not isinstance(text, bool)):
        if text != int(text) or text < 1:
            raise ValueError(f"{what} must be a positive whole number of pages, got {text!r}")
        return Size("pages", float(text))
    m = _SIZE.match(str(text))
    if not m:
        raise ValueError(f"{what} {text!r} is not a size: write e.g. '10%', '64 pages' or '4MB'")
    v, unit = float(m.group(1)), (m.group(2) or "pages").lower()
    if unit == "%":
        if not percent_ok:
            raise ValueError(f"{what} cannot be a percentage; write e.g. '64 pages' or '1MB'")
        if not 0 < v <= 100:
            raise ValueError(f"{what} of {text!r} must be above 0% and at most 100%")
        return Size("percent", v)
    if unit.startswith("page"):
        if v != int(v) or v < 1:
            raise ValueError(f"{what} must be a positive whole number of pages, got {text!r}")
        return Size("pages", v)
    if v <= 0:
        raise ValueError(f"{what} must be positive, got {text!r}")
    return Size("bytes", v * _UNIT[unit])


def _pages(size: Size, n_pages: int, page_size: int) -> float:
    if size.unit == "percent":
        return math.ceil(n_pages * size.value / 100.0)
    if size.unit == "bytes":
        return size.value / page_size
    return size.value


@dataclass(frozen=True)
class Sizing:
    n_pages: int
    pages_per_block: int
    n_blocks: int
    blocks_per_buffer: int  # the total buffer, over all readers


def size_text(size: str | int | None) -> str | None:
    """A block_size or buffer_size as the text train() takes."""
    if size is None:
        return None
    if isinstance(size, bool) or not isinstance(size, (int, str)):
        raise ValueError(f"a size must be text such as '10%', '64 pages' or '4MB', or a whole "
                         f"number of pages; got {size!r}")
    return str(size)


def server_sizing(conn: Any, relation: str, block_size: str | int | None,
                  buffer_size: str | int | None, pages: int | None = None) -> Sizing:
    """The engine's sizing (corgipile.sizing(), extension 0.4.0) of
    relation, or of ``pages`` heap pages when given."""
    row = conn.execute(
        "SELECT n_pages, pages_per_block, n_blocks, blocks_per_buffer FROM corgipile.sizing("
        "%s::pg_catalog.regclass, %s::pg_catalog.text, %s::pg_catalog.text, %s::pg_catalog.int8)",
        (relation, size_text(block_size), size_text(buffer_size), pages)).fetchone()
    return Sizing(int(row[0]), int(row[1]), int(row[2]), int(row[3]))


def has_server_sizing(conn: Any) -> bool:
    row = conn.execute(
        "SELECT pg_catalog.to_regprocedure('corgipile.sizing(pg_catalog.regclass, pg_catalog.text, "
        "pg_catalog.text, pg_catalog.int8)') IS NOT NULL").fetchone()
    return bool(row and row[0])


def resolve_sizing(buffer_size: Size, block_size: Size | None, n_pages: int,
                   page_size: int = PAGE_SIZE) -> Sizing:
    """cp_resolve_sizing in Python, for servers without corgipile.sizing()."""
    buffer_pages = max(1.0, _pages(buffer_size, n_pages, page_size))
    if buffer_size.unit == "percent":
        buffer_pages = max(buffer_pages, min(float(n_pages), float(MIN_BUFFER_PAGES)))
    if block_size is None:
        ppb = min(float(MAX_BLOCK_BYTES // page_size),
                  math.floor(buffer_pages / TARGET_BLOCKS_PER_BUFFER))
    else:
        ppb = float(round(_pages(block_size, n_pages, page_size)))
    ppb = max(1.0, min(ppb, float(MAX_BLOCK_NUMBER)))
    bpb = max(1.0, float(round(buffer_pages / ppb)))
    ppb_i = int(ppb)
    return Sizing(n_pages, ppb_i, (n_pages + ppb_i - 1) // ppb_i, int(min(bpb, float(UINT32_MAX))))


@dataclass(frozen=True, order=True)
class Block:
    """Pages [first_page, end_page) of the table on shard ``shard``."""

    shard: int
    first_page: int
    end_page: int


def table_blocks(pages_per_shard: Sequence[int], pages_per_block: int) -> list[Block]:
    """Every block of every shard, in storage order, shard by shard."""
    out = []
    for s, n in enumerate(pages_per_shard):
        for p in range(0, n, pages_per_block):
            out.append(Block(s, p, min(n, p + pages_per_block)))
    return out


def _rng(*key: int) -> np.random.Generator:
    return np.random.default_rng([int(k) & 0xFFFFFFFFFFFFFFFF for k in key])


def rank_blocks(blocks: Sequence[Block], n_shards: int, strategy: str, seed: int, epoch: int,
                rank: int, world_size: int) -> list[Block]:
    """This rank's blocks for the epoch, in reading order.

    The blocks of each shard are permuted with (seed, epoch) (storage order
    for no_shuffle and shuffle_once) and dealt round-robin to the ranks
    whose home shard it is (rank r's home is shard r % n_shards; a shard
    that is nobody's home is dealt to all ranks).  Every block goes to
    exactly one rank.  With one shard this is the paper's plan: shuffle the
    block indices, rank r takes every world_size-th.
    """
    shuffled = strategy in ("block_only", "corgipile")
    mine: list[Block] = []
    for s in range(n_shards):
        shard = [b for b in blocks if b.shard == s]
        if shuffled:
            order = _rng(seed, epoch, 1, s).permutation(len(shard))
            shard = [shard[i] for i in order]
        owners = [r for r in range(world_size) if r % n_shards == s] or list(range(world_size))
        mine.extend(b for i, b in enumerate(shard) if owners[i % len(owners)] == rank)
    if shuffled and n_shards > 1:
        order = _rng(seed, epoch, 2, rank).permutation(len(mine))
        mine = [mine[i] for i in order]
    return mine


def worker_blocks(blocks: Sequence[T], worker: int, n_workers: int) -> list[T]:
    """A DataLoader worker's share of its rank's blocks: every n_workers-th."""
    return list(blocks[worker::n_workers])


def buffers(blocks: Sequence[T], blocks_per_buffer: int) -> list[list[T]]:
    """Consecutive groups of blocks that are read and shuffled together."""
    k = max(1, blocks_per_buffer)
    return [list(blocks[i:i + k]) for i in range(0, len(blocks), k)]


def tuple_permutation(n: int, seed: int, epoch: int, rank: int, worker: int,
                      buffer_index: int) -> np.ndarray:
    """The order of a buffer's rows: seeded, so a resumed epoch repeats it."""
    return _rng(seed, epoch, 3, rank, worker, buffer_index).permutation(n)


def loader_skips(rows_per_worker: Sequence[int], batch_size: int, batches_seen: int) -> list[int]:
    """How many rows each worker had delivered when the training loop had
    taken ``batches_seen`` batches from a DataLoader over the dataset.

    A DataLoader with n workers (in_order=True, the default) yields batch k
    of worker 0, of worker 1, ..., then batch k+1 of each, dropping workers
    that have run out; each worker batches its own rows.
    """
    n_batches = [math.ceil(r / batch_size) for r in rows_per_worker]
    taken = [0] * len(rows_per_worker)
    left = batches_seen
    k = 0
    while left > 0 and k < max(n_batches, default=0):
        for w, nb in enumerate(n_batches):
            if left == 0:
                break
            if nb > k:
                taken[w] += 1
                left -= 1
        k += 1
    return [min(t * batch_size, r) for t, r in zip(taken, rows_per_worker, strict=True)]
