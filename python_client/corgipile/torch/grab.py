"""CD-GraB across torch.distributed ranks, at the granularity of blocks.

CD-GraB (Cooper et al., NeurIPS 2023, docs/torch.md) orders each worker's
examples for the next epoch from this epoch's gradients: the ranks' i-th
and (i+1)-th examples form pairs, the pair differences of all ranks are
balanced in one sequence (Algorithm 2, PairBalance, over k-major then
rank order), and each rank's new permutation puts the examples whose sign
is +1 first, in visiting order, and those with -1 last, in reverse
(Algorithm 1).  Here an "example" is a block of pages: the training loop
reports each block's gradient sum (or a count-sketch projection of it for
big models), ``step()`` all_gathers them and every rank computes the same
new orders, which the dataset follows from the next epoch on.  Each rank
keeps its own set of blocks across epochs (as the paper's workers keep
their data); only the order changes.

Unlike the paper's parameter server this runs the balancing at the end of
the epoch on the gathered vectors, which gives the same signs (they depend
only on this epoch's gradients) with one collective per epoch.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
import torch
import torch.distributed as dist

if TYPE_CHECKING:
    from .dataset import CorgiPileDataset


def _signs(vectors: Sequence[torch.Tensor], randomized: bool,
           generator: torch.Generator | None) -> list[list[int]]:
    """PairBalance over the ranks' sequences of vectors.

    vectors[i] is rank i's (m_i, d) tensor in visiting order.  Returns the
    sign of each of rank i's vectors.  A rank with an odd count balances its
    last vector on its own (its pair partner is taken as zero)."""
    ranks = len(vectors)
    d = vectors[0].shape[1] if ranks and vectors[0].dim() == 2 else 0
    run = torch.zeros(d, dtype=torch.float64)
    signs = [[0] * v.shape[0] for v in vectors]
    longest = max((v.shape[0] for v in vectors), default=0)
    for k in range(0, longest, 2):
        for i in range(ranks):
            m = vectors[i].shape[0]
            if k >= m:
                continue
            c = vectors[i][k].double()
            if k + 1 < m:
                c = c - vectors[i][k + 1].double()
            if randomized:
                # Alweiss et al.'s randomized balance; needs |c| <= 1, so
                # the vectors are scaled by the largest norm beforehand
                p = float((1.0 - torch.dot(run, c)) / 2.0)
                p = min(1.0, max(0.0, p))
                s = 1 if torch.rand((), generator=generator, dtype=torch.float64) < p else -1
            else:
                # the greedy version of the reference code: keep the running
                # sum small
                s = 1 if torch.linalg.vector_norm(run + c) <= torch.linalg.vector_norm(run - c) else -1
            run += s * c
            signs[i][k] = s
            if k + 1 < m:
                signs[i][k + 1] = -s
    return signs


def reorder(order: Sequence[int], signs: Sequence[int]) -> list[int]:
    """Algorithm 1: +1 examples first in their order, then -1 ones reversed."""
    plus = [b for b, s in zip(order, signs, strict=True) if s > 0]
    minus = [b for b, s in zip(order, signs, strict=True) if s <= 0]
    return plus + minus[::-1]


def pair_balance(orders: Sequence[Sequence[int]], vectors: Sequence[torch.Tensor],
                 randomized: bool = False, seed: int = 0) -> list[list[int]]:
    """Every rank's next order from this epoch's per-example vectors.

    orders[i]: rank i's examples (block numbers) in the order visited;
    vectors[i]: (len(orders[i]), d) their gradient sums in that order."""
    for o, v in zip(orders, vectors, strict=True):
        if len(o) != v.shape[0]:
            raise ValueError(f"{len(o)} examples in an order but {v.shape[0]} vectors")
    if randomized:
        scale = max((float(torch.linalg.vector_norm(v, dim=1).max()) for v in vectors if len(v)),
                    default=1.0) or 1.0
        vectors = [v / (2 * scale) for v in vectors]
    g = torch.Generator().manual_seed(seed)
    signs = _signs(vectors, randomized, g)
    return [reorder(o, s) for o, s in zip(orders, signs, strict=True)]


class _Sorter:
    """Shared part of CDGraB and DRR: the per-rank block sets, fixed for
    the whole run, taken from the dataset's plan of its current epoch."""

    def __init__(self, dataset: CorgiPileDataset, seed: int | None = None) -> None:
        self.dataset = dataset
        self.world_size = dataset.world_size
        self.rank = dataset.rank
        self.seed = dataset.seed if seed is None else seed
        self.epoch = 0
        self.orders = [dataset.rank_plan(r) for r in range(self.world_size)]
        dataset.set_block_orders(self.orders)


class DRR(_Sorter):
    """Distributed random reshuffling (the baseline of the CD-GraB paper):
    each rank keeps its blocks and visits them in a fresh random order every
    epoch.  Same interface as CDGraB; add() is a no-op."""

    def add(self, block: int | torch.Tensor, grad: torch.Tensor) -> None:  # interface of CDGraB
        pass

    def step(self) -> list[list[int]]:
        self.epoch += 1
        self.orders = [
            [o[j] for j in np.random.default_rng([self.seed, self.epoch, 4, r]).permutation(len(o))]
            for r, o in enumerate(self.orders)]
        self.dataset.set_block_orders(self.orders)
        return self.orders


class CDGraB(_Sorter):
    """Coordinated distributed gradient balancing over blocks.

    Usage per epoch (every rank)::

        for x, y, block in loader:               # dataset made with with_block=True
            ...                                    # backward per block segment
            grab.add(block_id, grad_vector)        # this block's gradient sum
        grab.step()                                # collective: next orders
        dataset.set_epoch(epoch + 1)

    ``projection_dim``: when set, gradients are count-sketched (a fixed
    random bucket and sign per coordinate) to that many dimensions before
    being kept and gathered, so a big model costs blocks x projection_dim
    floats per rank instead of blocks x parameters.
    """

    def __init__(self, dataset: CorgiPileDataset, dim: int, projection_dim: int | None = None,
                 randomized: bool = False, seed: int | None = None) -> None:
        super().__init__(dataset, seed)
        self.dim = dim
        self.randomized = randomized
        self.out_dim = projection_dim or dim
        self._bucket: torch.Tensor | None = None
        self._sign: torch.Tensor | None = None
        if projection_dim:
            g = torch.Generator().manual_seed(self.seed)
            self._bucket = torch.randint(projection_dim, (dim,), generator=g)
            self._sign = torch.randint(0, 2, (dim,), generator=g).float() * 2 - 1
        self._mine = {b: i for i, b in enumerate(self.orders[self.rank])}
        self._sums = torch.zeros(len(self.orders[self.rank]), self.out_dim, dtype=torch.float64)

    def add(self, block: int | torch.Tensor, grad: torch.Tensor) -> None:
        """Add a gradient (sum over some rows of ``block``) of this rank."""
        b = int(block)
        if b not in self._mine:
            raise ValueError(f"block {b} is not one of rank {self.rank}'s blocks")
        g = grad.detach().reshape(-1).to(torch.float64).cpu()
        if g.numel() != self.dim:
            raise ValueError(f"a gradient of {g.numel()} values; CDGraB was made with dim={self.dim}")
        if self._bucket is not None and self._sign is not None:
            g = torch.zeros(self.out_dim, dtype=torch.float64).index_add_(0, self._bucket, g * self._sign)
        self._sums[self._mine[b]] += g

    def step(self) -> list[list[int]]:
        """Collective: gather every rank's block gradients, run PairBalance,
        give the dataset the next orders; returns them."""
        sizes = [len(o) for o in self.orders]
        longest = max(sizes)
        local = torch.zeros(longest, self.out_dim, dtype=torch.float64)
        local[:sizes[self.rank]] = self._sums
        if dist.is_available() and dist.is_initialized() and self.world_size > 1:
            gathered = [torch.empty_like(local) for _ in range(self.world_size)]
            dist.all_gather(gathered, local)
        else:
            if self.world_size > 1:
                raise RuntimeError("CDGraB.step needs torch.distributed initialised for "
                                   f"world_size={self.world_size}")
            gathered = [local]
        self.epoch += 1
        vectors = [gathered[r][:sizes[r]] for r in range(self.world_size)]
        self.orders = pair_balance(self.orders, vectors, self.randomized, self.seed + self.epoch)
        self._mine = {b: i for i, b in enumerate(self.orders[self.rank])}
        self._sums = torch.zeros(sizes[self.rank], self.out_dim, dtype=torch.float64)
        self.dataset.set_block_orders(self.orders)
        return self.orders
