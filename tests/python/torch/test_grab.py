"""CD-GraB's PairBalance (no server) and across two gloo ranks (server)."""

from __future__ import annotations

import collections

import pytest

TORCH_MISSING = ("corgipile.torch needs PyTorch: pip install 'corgipile[torch]' "
                 "(make test installs torch==2.13.0 from requirements-dev.txt)")
torch = pytest.importorskip("torch", reason=TORCH_MISSING)

from corgipile.torch import pair_balance, reorder  # noqa: E402
from corgipile.torch.grab import _signs  # noqa: E402
from torch_helpers import torchrun  # noqa: E402


def t(rows):
    return torch.tensor(rows, dtype=torch.float64)


def test_reorder_is_algorithm_1():
    assert reorder([5, 6, 7, 8, 9], [1, -1, -1, 1, 1]) == [5, 8, 9, 7, 6]


def test_pair_balance_on_known_vectors():
    # rank 0: pair differences (1,0) and (1,0); rank 1: (-1,0) and (1,0.5).
    # Balanced in the order r0k0, r1k0, r0k1, r1k1 with the greedy rule
    # (sign +1 when |run + c| <= |run - c|):
    #   run 0 -> +1 -> (1,0); (-1,0): +1 -> (0,0); (1,0): +1 -> (1,0);
    #   (1,0.5): |(2,.5)| > |(0,-.5)| -> -1 -> (0,-0.5)
    a = t([[1, 0], [0, 0], [1, 0], [0, 0]])
    b = t([[0, 0], [1, 0], [1, 0.5], [0, 0]])
    assert _signs([a, b], False, None) == [[1, -1, 1, -1], [1, -1, -1, 1]]
    assert pair_balance([[0, 1, 2, 3], [10, 11, 12, 13]], [a, b]) == \
        [[0, 2, 3, 1], [10, 13, 12, 11]]


def test_pair_balance_flattens_a_clustered_order():
    """Eight blocks whose gradients are +1 then -1 (a table clustered by
    label): the reordered prefix sums stay half as far from zero."""
    z = t([[1]] * 4 + [[-1]] * 4)
    (order,) = pair_balance([list(range(8))], [z])
    assert sorted(order) == list(range(8))

    def worst_prefix(o):
        return max(abs(float(z[o[:k]].sum())) for k in range(1, 9))

    assert worst_prefix(list(range(8))) == 4
    assert worst_prefix(order) == 2


def test_pair_balance_odd_and_uneven_ranks():
    g = torch.Generator().manual_seed(0)
    vecs = [torch.randn(5, 3, generator=g, dtype=torch.float64),
            torch.randn(4, 3, generator=g, dtype=torch.float64)]
    orders = [[0, 1, 2, 3, 4], [5, 6, 7, 8]]
    out = pair_balance(orders, vecs)
    assert [sorted(o) for o in out] == orders
    # deterministic, and the randomized variant also gives permutations
    assert pair_balance(orders, vecs) == out
    rnd = pair_balance(orders, vecs, randomized=True, seed=3)
    assert [sorted(o) for o in rnd] == orders
    assert pair_balance(orders, vecs, randomized=True, seed=3) == rnd
    with pytest.raises(ValueError, match="4 vectors"):
        pair_balance([[0, 1, 2]], [vecs[1]])


def test_cd_grab_two_ranks_agree_and_cover_every_block(dsn, table, tmp_path):
    ranks = torchrun(tmp_path, 2, "--dsn", dsn, "--workers", "1", "--epochs", "3", "--grab")
    orders0, orders1 = ranks[0]["orders"], ranks[1]["orders"]
    assert orders0 == orders1, "the ranks computed different block orders"
    for orders in orders0:
        blocks = [b for o in orders for b in o]
        assert sorted(blocks) == list(range(len(blocks))), "a block lost or doubled"
    # each rank keeps its blocks, and the orders do change
    assert sorted(orders0[0][0]) == sorted(orders0[1][0])
    assert orders0[0] != orders0[1]
    # the dataset follows the orders from the next epoch on: the blocks a
    # rank read are its blocks, the first of its order in the first buffer
    for epoch in (1, 2):
        for r in (0, 1):
            order = orders0[epoch - 1][r]
            read = ranks[r]["blocks"][epoch]
            assert sorted(read) == sorted(order)
            assert read.index(order[0]) < 10 and read.index(order[-1]) > len(order) - 10
    for epoch in range(3):
        ids = ranks[0]["epochs"][epoch] + ranks[1]["epochs"][epoch]
        c = collections.Counter(ids)
        assert len(ids) == 5000 and len(c) == 5000
