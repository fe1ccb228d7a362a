"""corgipile.torch.CorgiPileDataset against a real server."""

from __future__ import annotations

import collections
import threading
import time

import numpy as np
import psycopg
import pytest

TORCH_MISSING = ("corgipile.torch needs PyTorch: pip install 'corgipile[torch]' "
                 "(make test installs torch==2.13.0 from requirements-dev.txt)")
torch = pytest.importorskip("torch", reason=TORCH_MISSING)

from torch.utils.data import DataLoader  # noqa: E402

from corgipile.errors import CorgipileError  # noqa: E402
from corgipile.torch import CorgiPileDataset, plan  # noqa: E402
from torch_helpers import make_table, make_uneven_table, torchrun  # noqa: E402

N = 5000

# 3 DataLoader workers on a 2-core machine: torch warns, on purpose here
pytestmark = pytest.mark.filterwarnings("ignore:This DataLoader will create:UserWarning")


def epoch_ids(ds, workers=0, batch_size=64):
    if workers == 0 and batch_size is None:
        return [int(r[2]) for r in ds]
    dl = DataLoader(ds, batch_size=batch_size, num_workers=workers)
    return torch.cat([b[2] for b in dl]).tolist()


def assert_exactly_once(ids, n=N):
    counts = collections.Counter(ids)
    dup = [k for k, c in counts.items() if c > 1]
    assert not dup, f"read twice: {dup[:10]}"
    assert sorted(counts) == list(range(1, n + 1)), f"{n - len(counts)} rows missing"


@pytest.mark.parametrize("workers", [0, 1, 3])
def test_every_row_once_per_epoch_one_rank(dsn, table, workers):
    ds = CorgiPileDataset(dsn, table, id_column="id", seed=3)
    assert ds.sizing.n_blocks > 10
    seen = []
    for epoch in range(2):
        ds.set_epoch(epoch)
        ids = epoch_ids(ds, workers)
        assert_exactly_once(ids)
        seen.append(ids)
    assert seen[0] != seen[1], "epoch 1 repeated epoch 0's order"
    ds.close()


def test_every_row_once_two_ranks_two_workers(dsn, table, tmp_path):
    """2 ranks x 2 DataLoader workers, real torchrun processes on gloo."""
    ranks = torchrun(tmp_path, 2, "--dsn", dsn, "--workers", "2", "--epochs", "2")
    for epoch in range(2):
        per_rank = [r["epochs"][epoch] for r in ranks]
        assert all(len(p) > N // 4 for p in per_rank), "a rank got almost nothing"
        assert not set(per_rank[0]) & set(per_rank[1])
        assert_exactly_once(per_rank[0] + per_rank[1])
    assert ranks[0]["epochs"][0] != ranks[0]["epochs"][1]


def test_ranks_without_distributed_partition_the_rows(dsn, table):
    """rank/world_size given explicitly (no process group): the union of
    every rank x worker covers the table once, for several shapes."""
    for world, workers in [(3, 2), (2, 1), (4, 3)]:
        ids = []
        for r in range(world):
            ds = CorgiPileDataset(dsn, table, id_column="id", seed=11, rank=r, world_size=world,
                                  even_shares="off")
            ids += epoch_ids(ds, workers)
            ds.close()
        assert_exactly_once(ids)


@pytest.mark.parametrize("even", ["pad", "drop"])
def test_even_shares_give_every_reader_as_many_rows(conn, dsn, even):
    """Blocks of very unequal row counts, 3 ranks x 2 workers: every reader
    yields the same number of rows (the largest share, padded with rows of
    its own share; or the smallest), so every rank takes as many steps."""
    make_uneven_table(conn)
    n_live = conn.execute("SELECT count(*) FROM uneven").fetchone()[0]
    world, workers, bs = 3, 2, 16
    per_reader, all_ids = [], []
    for r in range(world):
        ds = CorgiPileDataset(dsn, "uneven", id_column="id", seed=11, rank=r, world_size=world,
                              even_shares=even, batch_size=bs, block_size=1, buffer_size="30%")
        counts = ds._block_rows
        assert counts is not None and min(counts) == 0 and max(counts) > 1.5 * n_live / len(counts)
        batches = list(DataLoader(ds, batch_size=None, num_workers=workers))
        assert all(len(b[2]) <= bs for b in batches)
        ids = torch.cat([b[2] for b in batches]).tolist()
        per_reader.append(len(batches))
        all_ids.append(ids)
        ds.close()
    assert len(set(per_reader)) == 1, f"ranks took {per_reader} steps"
    flat = [i for ids in all_ids for i in ids]
    if even == "pad":
        assert set(flat) == {r[0] for r in conn.execute("SELECT id FROM uneven")}
        assert len(flat) > n_live
        # a rank repeats only rows of its own share
        for ids in all_ids:
            assert not set(ids) & {i for other in all_ids if other is not ids for i in other}
    else:
        assert len(flat) == len(set(flat)) < n_live


def test_same_seed_same_order_other_seed_other_order(dsn, table):
    a = CorgiPileDataset(dsn, table, id_column="id", seed=5)
    b = CorgiPileDataset(dsn, table, id_column="id", seed=5)
    c = CorgiPileDataset(dsn, table, id_column="id", seed=6)
    oa, ob, oc = (epoch_ids(d, 0, None) for d in (a, b, c))
    assert oa == ob
    assert oa != oc
    # the order depends on (seed, epoch) only: a dataset that went through
    # other epochs first gives the same epoch 2
    a.set_epoch(1)
    a.set_epoch(2)
    c2 = CorgiPileDataset(dsn, table, id_column="id", seed=5)
    c2.set_epoch(2)
    assert epoch_ids(a, 0, None) == epoch_ids(c2, 0, None)
    for d in (a, b, c, c2):
        d.close()


def test_rows_are_shuffled_within_and_across_blocks(dsn, table):
    ds = CorgiPileDataset(dsn, table, id_column="id", seed=1)
    ids = np.array(epoch_ids(ds, 0, None))
    # far from storage order, and the first buffer holds rows from more
    # than one block (pages are ~ 100+ rows)
    assert abs(np.corrcoef(ids, np.arange(len(ids)))[0, 1]) < 0.5
    first = ids[:200]
    assert first.max() - first.min() > 1000
    ds.close()


def test_no_shuffle_and_block_only(dsn, table):
    ns = CorgiPileDataset(dsn, table, id_column="id", shuffle="no_shuffle")
    assert epoch_ids(ns, 0, None) == list(range(1, N + 1))
    bo = CorgiPileDataset(dsn, table, id_column="id", shuffle="block_only", seed=2)
    ids = epoch_ids(bo, 0, None)
    assert_exactly_once(ids)
    assert ids != sorted(ids)
    # within a block rows stay in storage order: at most one run of
    # consecutive ids per block (two blocks may happen to follow each other)
    runs = sum(1 for a, b in zip(ids, ids[1:], strict=False) if b != a + 1) + 1
    assert bo.sizing.n_blocks // 2 < runs <= bo.sizing.n_blocks
    ns.close()
    bo.close()


def test_shuffle_once_reads_a_shuffled_copy(dsn, table, conn):
    ds = CorgiPileDataset(dsn, table, id_column="id", shuffle="shuffle_once", seed=9)
    assert ds.layout.table == "pts_shuffled_9"
    assert conn.execute("SELECT count(*) FROM pts_shuffled_9").fetchone()[0] == N
    ids = epoch_ids(ds, 2)
    assert_exactly_once(ids)
    assert abs(np.corrcoef(ids, np.arange(N))[0, 1]) < 0.2
    ds.close()


def test_resume_mid_epoch_gives_the_remaining_rows_in_order(dsn, table):
    bs, workers = 64, 2
    ds = CorgiPileDataset(dsn, table, id_column="id", seed=4, buffer_size="30%")
    ds.set_epoch(1)
    full = [b[2].tolist() for b in DataLoader(ds, batch_size=bs, num_workers=workers)]
    n_batches = len(full)
    # a checkpoint early, one near the end (after a worker may have run
    # out), and one in a resumed epoch
    for k in (5, n_batches - 2):
        state = ds.state_dict(batches_seen=k, batch_size=bs, num_workers=workers)
        fresh = CorgiPileDataset(dsn, table, id_column="id", seed=4, buffer_size="30%")
        fresh.load_state_dict(state)
        rest = [b[2].tolist() for b in DataLoader(fresh, batch_size=bs, num_workers=workers)]
        assert rest == full[k:]
        if k == 5:
            again = fresh.state_dict(batches_seen=3, batch_size=bs, num_workers=workers)
            third = CorgiPileDataset(dsn, table, id_column="id", seed=4, buffer_size="30%")
            third.load_state_dict(again)
            assert [b[2].tolist() for b in DataLoader(third, batch_size=bs,
                                                      num_workers=workers)] == full[k + 3:]
            third.close()
        fresh.close()
    ds.close()


def test_resume_needs_the_same_setup(dsn, table):
    ds = CorgiPileDataset(dsn, table, id_column="id", seed=4)
    state = ds.state_dict(batches_seen=1, batch_size=10, num_workers=2)
    other = CorgiPileDataset(dsn, table, id_column="id", seed=5)
    with pytest.raises(ValueError, match="seed"):
        other.load_state_dict(state)
    same = CorgiPileDataset(dsn, table, id_column="id", seed=4)
    same.load_state_dict(state)
    with pytest.raises(CorgipileError, match="num_workers=2"):
        list(same)
    for d in (ds, other, same):
        d.close()


def test_one_snapshot_per_epoch(dsn, table, conn):
    """Rows committed while an epoch runs are not in it; the next has them."""
    ds = CorgiPileDataset(dsn, table, id_column="id", seed=1, buffer_size="5%", block_size=1)
    it = iter(ds)
    first = [int(next(it)[2]) for _ in range(10)]
    conn.execute("INSERT INTO pts SELECT i, 0, ARRAY[i::float4, 0, 0, 0] "
                 "FROM generate_series(100001, 100500) i")
    conn.execute("DELETE FROM pts WHERE id <= 100")
    rest = [int(r[2]) for r in it]
    assert_exactly_once(first + rest)
    ds.set_epoch(1)
    ids = epoch_ids(ds, 2)
    assert len(ids) == N - 100 + 500 and len(set(ids)) == len(ids)
    assert min(ids) == 101 and max(ids) == 100500
    ds.close()


def test_sparse_layout(conn, dsn):
    conn.execute("CREATE TABLE sp (id int, label float8, idx int4[], val float4[])")
    conn.execute("INSERT INTO sp SELECT i, i * 0.5, ARRAY[i % 7, 7 + i % 3], "
                 "ARRAY[i::float4, -1] FROM generate_series(1, 400) i")
    conn.execute("INSERT INTO sp VALUES (401, 1, NULL, NULL), (402, 1, ARRAY[1, NULL], ARRAY[1, 2])")
    ds = CorgiPileDataset(dsn, "sp", features="val", feature_indices="idx", id_column="id", seed=1)
    assert ds.layout.n_features == 10
    rows = list(ds)
    assert sorted(int(r[2]) for r in rows) == list(range(1, 401))  # NULL rows skipped
    for x, y, i in rows:
        i = int(i)
        want = torch.zeros(10)
        want[i % 7] = i
        want[7 + i % 3] = -1
        assert torch.equal(x, want)
        assert y.dtype == torch.float32 and float(y) == i * 0.5
    wide = CorgiPileDataset(dsn, "sp", features="val", feature_indices="idx", n_features=20,
                            sparse_output="coo")
    x = next(iter(wide))[0]
    assert x.is_sparse and x.shape == (20,)
    ds.close()
    wide.close()


def test_column_list_and_text_labels(conn, dsn):
    conn.execute("CREATE TABLE cols (a int, b numeric, c float8, cls text)")
    conn.execute("INSERT INTO cols SELECT i, i / 2.0, -i, 'k' || (i % 2) FROM generate_series(1, 300) i")
    ds = CorgiPileDataset(dsn, "cols", features=["a", "b", "c"], label="cls", shuffle="no_shuffle")
    rows = list(ds)
    assert len(rows) == 300
    x, y = rows[4]
    assert torch.equal(x, torch.tensor([5.0, 2.5, -5.0])) and y == "k1"
    ds.close()


def test_dense_values_and_transform(dsn, table):
    ds = CorgiPileDataset(dsn, table, id_column="id", transform=lambda x: x * 2)
    for x, y, i in ds:
        assert x.dtype == torch.float32 and x.shape == (4,)
        assert float(x[0]) == 2 * int(i) and float(x[1]) == 1.0
        assert y.dtype == torch.int64 and int(y) == int(i) % 3
    ds.close()


def test_persistent_workers_are_refused(dsn, table):
    ds = CorgiPileDataset(dsn, table, id_column="id", seed=1)
    dl = DataLoader(ds, batch_size=500, num_workers=1, persistent_workers=True)
    assert_exactly_once(torch.cat([b[2] for b in dl]).tolist())
    ds.set_epoch(1)
    with pytest.raises(CorgipileError, match=r"persistent_workers=True\) is not supported"):
        list(dl)
    ds.close()


def test_copy_reading_gives_the_same_rows(dsn, table):
    a = CorgiPileDataset(dsn, table, id_column="id", seed=8)
    b = CorgiPileDataset(dsn, table, id_column="id", seed=8, method="copy")
    assert epoch_ids(a, 0, None) == epoch_ids(b, 0, None)
    a.close()
    b.close()


def test_shards(conn, dsn, postgresql):
    """The same table in two databases is one dataset; rank r reads shard
    r % 2 when every shard has ranks."""
    make_table(conn, n=3000)
    dbname2 = postgresql.info.dbname + "_s2"
    conn.execute(f"CREATE DATABASE {dbname2}")
    try:
        dsn2 = dsn.replace(f"dbname={postgresql.info.dbname}", f"dbname={dbname2}")
        with psycopg.connect(dsn2, autocommit=True) as c2:
            c2.execute("CREATE TABLE pts (id int, label int, features float4[])")
            c2.execute("INSERT INTO pts SELECT i, 1, ARRAY[i, 0, 0, 0]::float4[] "
                       "FROM generate_series(3001, 5000) i")
        ids = []
        for r in range(2):
            ds = CorgiPileDataset([dsn, dsn2], "pts", id_column="id", seed=1, rank=r, world_size=2,
                                  even_shares="off")
            mine = epoch_ids(ds, 2)
            shard = {int(i) <= 3000 for i in mine}
            assert shard == {r == 0}, f"rank {r} read another rank's shard"
            ids += mine
            ds.close()
        assert_exactly_once(ids)
        # one rank reads both shards
        ds = CorgiPileDataset([dsn, dsn2], "pts", id_column="id", seed=1)
        assert_exactly_once(epoch_ids(ds, 0))
        ds.close()
    finally:
        conn.execute(f"DROP DATABASE {dbname2} WITH (FORCE)")


def test_missing_table_column_and_privilege(conn, dsn, table):
    with pytest.raises(CorgipileError, match=r"table 'nope' does not exist"):
        CorgiPileDataset(dsn, "nope")
    with pytest.raises(CorgipileError, match=r"column 'feats' \(features\) does not exist.*features"):
        CorgiPileDataset(dsn, table, features="feats")
    with pytest.raises(CorgipileError, match=r"column 'lbl' \(label\) does not exist"):
        CorgiPileDataset(dsn, table, label="lbl")
    with pytest.raises(CorgipileError, match="expected a numeric array"):
        CorgiPileDataset(dsn, table, features="id")
    with pytest.raises(ValueError, match="shuffle must be one of"):
        CorgiPileDataset(dsn, table, shuffle="random")
    role = f"cp_torch_reader_{conn.info.backend_pid}"
    conn.execute(f"CREATE ROLE {role} LOGIN")
    try:
        conn.execute(f"GRANT SELECT (id, label) ON pts TO {role}")
        with pytest.raises(CorgipileError, match=rf"permission denied for column "
                                                 rf"'features'.*GRANT SELECT ON pts TO {role}"):
            CorgiPileDataset(dsn + f" user={role}", table)
    finally:
        conn.execute(f"REVOKE ALL ON pts FROM {role}")
        conn.execute(f"DROP ROLE {role}")


def test_unreachable_server_fails_fast(table):
    t0 = time.monotonic()
    with pytest.raises(CorgipileError, match="cannot connect"):
        CorgiPileDataset("host=127.0.0.1 port=1 dbname=x", "pts", connect_timeout=2)
    assert time.monotonic() - t0 < 30


def test_dropped_connection_raises_instead_of_hanging(conn, dsn, table):
    ds = CorgiPileDataset(dsn, table, id_column="id", seed=1, buffer_size=2, block_size=1)
    it = iter(ds)
    next(it)
    pids = [r[0] for r in conn.execute(
        "SELECT pid FROM pg_stat_activity WHERE application_name = 'corgipile.torch reader' "
        "AND datname = current_database()")]
    assert pids
    for pid in pids:
        conn.execute("SELECT pg_terminate_backend(%s)", (pid,))
    result: dict = {}

    def drain():
        try:
            for _ in it:
                pass
        except BaseException as e:  # noqa: BLE001 - handed to the test's thread
            result["error"] = e

    t = threading.Thread(target=drain, daemon=True)
    t.start()
    t.join(60)
    assert not t.is_alive(), "the iterator hung after its connection was dropped"
    assert isinstance(result.get("error"), CorgipileError)
    assert "lost the connection" in str(result["error"])
    ds.close()


def test_sizing_matches_the_engine():
    """cp_resolve_sizing's rule: a block is 1/256 of the buffer, 1 page to
    10 MB; a percentage buffer is at least 16 pages."""
    pct = plan.parse_size("10%", "buffer_size")
    assert plan.resolve_sizing(pct, None, 100) == plan.Sizing(100, 1, 100, 16)
    assert plan.resolve_sizing(pct, None, 1_000_000) == plan.Sizing(1_000_000, 390, 2565, 256)
    big = plan.parse_size("1GB", "buffer_size")
    assert plan.resolve_sizing(big, None, 10_000_000).pages_per_block == 512
    assert plan.resolve_sizing(pct, plan.parse_size("1MB", "b", False), 1000).pages_per_block == 128
    with pytest.raises(ValueError, match="percentage"):
        plan.parse_size("5%", "block_size", percent_ok=False)


def test_loader_skips_follow_the_dataloader_interleaving():
    # worker 0 has 3 batches, worker 1 one: order w0 w1 w0 w0
    assert plan.loader_skips([25, 10], 10, 2) == [10, 10]
    assert plan.loader_skips([25, 10], 10, 3) == [20, 10]
    assert plan.loader_skips([25, 10], 10, 4) == [25, 10]
