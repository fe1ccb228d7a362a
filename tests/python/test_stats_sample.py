"""A table above corgipile.stats_sample_size learns its standardizing
statistics from a random sample of blocks (first_pass.c, sample_plan), and
the sampled blocks wait in the block cache for epoch 1: the first epoch
reads every heap page once, whether or not the table fits the cache.
Counted with the backend's own buffer statistics
(pg_stat_get_xact_blocks_fetched: one per page a scan reads), which do not
depend on timing.  A table within the sample size is read whole, as before
(the pinned-weights tests hold that)."""

from __future__ import annotations

import numpy as np
import pytest
from psycopg import sql

from datagen import accuracy, linear_task


@pytest.fixture
def table(conn):
    x, y = linear_task(40000, 5, seed=3)
    # unscaled, off-centre features, stored clustered by label
    x = x * [1.0, 10.0, 100.0, 0.1, 3.0] + [5.0, -50.0, 1000.0, 0.0, 2.0]
    conn.execute("CREATE TABLE ss (id int, label int, features float8[])")
    with conn.cursor().copy("COPY ss FROM STDIN (FORMAT BINARY)") as cp:
        cp.set_types(["int4", "int4", "float8[]"])
        for i in np.argsort(y, kind="stable"):
            cp.write_row((int(i), int(y[i]), x[i].tolist()))
    conn.execute("VACUUM ANALYZE ss")
    conn.execute("SET corgipile.progress = off")
    return conn


def pages(conn) -> int:
    return conn.execute("SELECT relpages FROM pg_class WHERE relname = 'ss'").fetchone()[0]


def train_fetches(conn, name: str, epochs: int, extra: str = "") -> int:
    """Heap pages the training fetched (in one transaction)."""
    conn.execute("BEGIN")
    before = conn.execute("SELECT pg_stat_get_xact_blocks_fetched('ss'::regclass)").fetchone()[0]
    conn.execute(f"SELECT * FROM corgipile.train('ss', 'logistic', model_name => '{name}', "
                 f"max_epoch_num => {epochs}, seed => 7, block_size => '1'{extra})").fetchall()
    after = conn.execute("SELECT pg_stat_get_xact_blocks_fetched('ss'::regclass)").fetchone()[0]
    conn.execute("COMMIT")
    return after - before


def first_pass_message(conn, name: str) -> str:
    notices = []
    conn.add_notice_handler(lambda d: notices.append(d.message_primary))
    conn.execute("SET client_min_messages = debug1")
    try:
        conn.execute(f"SELECT * FROM corgipile.train('ss', 'logistic', model_name => '{name}', "
                     "max_epoch_num => 1, seed => 7, block_size => '1')").fetchall()
    finally:
        conn.execute("RESET client_min_messages")
        conn._notice_handlers.clear()
    return next(n for n in notices if "first pass" in n)


@pytest.mark.parametrize("validation", ["", ", validation => '10%'"])
@pytest.mark.parametrize("epochs", [1, 3])
def test_one_heap_read_larger_than_the_cache(table, epochs, validation):
    conn = table
    n = pages(conn)
    assert n > 100
    # a sample of 32 one-page blocks; a cache of about a quarter of the table
    conn.execute("SET corgipile.stats_sample_size = '16kB'")
    conn.execute("SET corgipile.block_cache_size = '400kB'")
    assert "32 of" in first_pass_message(conn, "msg")
    fetched = train_fetches(conn, f"one_{epochs}", epochs, validation)
    # epoch 1 reads the pages the sample did not; later epochs read the
    # blocks the cache could not hold
    cached_pages = n - (fetched - n) // max(epochs - 1, 1) if epochs > 1 else None
    if epochs == 1:
        assert fetched == n
    else:
        assert (fetched - n) % (epochs - 1) == 0 and 0 < cached_pages < n
    # the whole pass (no sample): the table, then epoch 1's share again
    conn.execute("SET corgipile.stats_sample_size = 0")
    assert train_fetches(conn, f"full_{epochs}", epochs, validation) > fetched


def test_one_heap_read_within_the_cache(table):
    conn = table
    n = pages(conn)
    conn.execute("SET corgipile.stats_sample_size = '16kB'")
    conn.execute("SET corgipile.block_cache_size = '512MB'")
    assert train_fetches(conn, "sampled", 3) == n
    # within the sample size: the whole table read once, as before
    conn.execute("RESET corgipile.stats_sample_size")
    assert "0 of" in first_pass_message(conn, "msg2")
    assert train_fetches(conn, "whole", 3) == n


def test_sampled_statistics_train_as_well(table):
    """The sample's means and deviations are close to the table's, and the
    model scores as well as with the exact ones; a seed gives the same
    sample and the same weights."""
    conn = table
    conn.execute("SET corgipile.block_cache_size = '512MB'")
    models = {}
    for size in ("0", "16kB", "16kB"):
        conn.execute(sql.SQL("SET corgipile.stats_sample_size = {}").format(sql.Literal(size)))
        name = f"acc_{size}_{len(models)}"
        conn.execute(f"SELECT * FROM corgipile.train('ss', 'logistic', model_name => '{name}', "
                     "max_epoch_num => 5, seed => 2, block_size => '1')").fetchall()
        models[name] = conn.execute(
            "SELECT preprocess, weights FROM corgipile.models "
            "WHERE model_name = %s", (name,)).fetchone()
        # the model says where its statistics came from (0: every row)
        sampled = conn.execute(
            "SELECT (params->>'stats_sample_blocks')::int, (params->>'n_blocks')::int "
            "FROM corgipile.models WHERE model_name = %s", (name,)).fetchone()
        if size == "0":
            assert sampled[0] == 0
        else:
            assert 32 <= sampled[0] < sampled[1]
    exact, s1, s2 = models.values()
    assert s1 == s2
    assert s1[1] != exact[1]
    assert s1[0]["rows"] < exact[0]["rows"]
    m0, d0 = (np.array(exact[0]["features"][0][k]) for k in ("mean", "std"))
    m1, d1 = (np.array(s1[0]["features"][0][k]) for k in ("mean", "std"))
    # a clustered table: 32 blocks of a label each
    assert np.all(np.abs(m1 - m0) < 0.25 * d0)
    assert np.all(np.abs(d1 / d0 - 1) < 0.25)
    names = list(models)
    a_exact = accuracy(conn, names[0], "ss")
    a_sampled = accuracy(conn, names[1], "ss")
    assert a_sampled > a_exact - 0.01, (a_sampled, a_exact)
