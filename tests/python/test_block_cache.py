"""The block cache (extension/io/block_cache.c) changes where later epochs read
their rows, never which rows or in which order: the same seed gives
bit-identical weights with the cache off, holding part of the table, and
holding all of it, for every strategy that reads the table each epoch."""

from __future__ import annotations

import numpy as np
import pytest
from psycopg import sql

from corgipile.strategies import ALL as ALL_STRATEGIES
from datagen import linear_task, load_table, weights

# (budget, how much of the table it should hold)
BUDGETS = [("0", "none"), ("96kB", "part"), ("512MB", "all")]


@pytest.fixture
def tables(conn):
    x, y = linear_task(3000, 6, seed=8)
    load_table(conn, "bc_dense", x, y, order="label")
    # rows skipped for NULLs must be skipped from the cache alike
    conn.execute("UPDATE bc_dense SET features = NULL WHERE id % 97 = 0")
    conn.execute("UPDATE bc_dense SET label = NULL WHERE id % 89 = 0")
    rng = np.random.default_rng(3)
    conn.execute("CREATE TABLE bc_sparse (id int, label int, idx int[], vals float8[])")
    with conn.cursor().copy("COPY bc_sparse FROM STDIN (FORMAT BINARY)") as copy:
        copy.set_types(["int4", "int4", "int4[]", "float8[]"])
        for i in np.argsort(y, kind="stable"):
            nnz = int(rng.integers(0, 6))  # empty rows too
            idx = sorted(rng.choice(50, size=nnz, replace=False).tolist())
            copy.write_row((int(i), int(y[i]), idx, [float(v) for v in rng.uniform(-1, 1, nnz)]))
    conn.execute("VACUUM ANALYZE bc_dense")
    conn.execute("ANALYZE bc_sparse")
    conn.execute("SET corgipile.progress = off")
    return conn


def train_explained(conn, query: sql.Composable) -> dict:
    """Run the training under EXPLAIN (ANALYZE, VERBOSE): the TupleShuffle node's
    figures."""
    plan = conn.execute(sql.SQL("EXPLAIN (ANALYZE, VERBOSE, FORMAT JSON) {}").format(query)
                        ).fetchone()[0][0]["Plan"]
    ts = plan["Plans"][0]
    ts["Blocks"] = ts["Plans"][0]["Blocks"]
    return ts


@pytest.mark.parametrize("layout", ["dense", "sparse"])
# shuffle_once reads the table once (CP_SHUFFLE_READS_ONCE): nothing to cache
@pytest.mark.parametrize("shuffle", [s for s in ALL_STRATEGIES if s != "shuffle_once"])
def test_cache_keeps_the_weights(tables, shuffle, layout):
    conn = tables
    digests = []
    for budget, held in BUDGETS:
        conn.execute(sql.SQL("SET corgipile.block_cache_size = {}").format(sql.Literal(budget)))
        name = f"bc_{shuffle}_{layout}_{held}"
        common = sql.SQL("max_epoch_num => 4, seed => 11, learning_rate => 0.05, "
                         "block_size => '1', buffer_size => '6', shuffle => {}, "
                         "model_name => {}").format(sql.Literal(shuffle), sql.Literal(name))
        if layout == "dense":
            q = sql.SQL("SELECT * FROM corgipile.train('bc_dense', 'logistic', {})").format(common)
        else:
            q = sql.SQL("SELECT * FROM corgipile.train('bc_sparse', 'svm', features => 'vals', "
                        "feature_indices => 'idx', {})").format(common)
        ts = train_explained(conn, q)
        cached = ts.get("Cached Blocks", 0)
        if held == "none":
            assert "Cached Blocks" not in ts
        elif held == "part":
            assert 0 < cached < ts["Blocks"]
            # three later epochs read the cached blocks again, the rest from the heap
            assert ts["Blocks Read from Cache"] == 3 * cached
        else:
            assert cached == ts["Blocks"]
            assert ts["Blocks Read from Cache"] == 3 * cached
        digests.append(weights(conn, name))
    assert digests[0] == digests[1] == digests[2]


def test_shuffle_once_fills_no_cache(tables):
    """shuffle_once reads the table in its first epoch only."""
    ts = train_explained(tables, sql.SQL(
        "SELECT * FROM corgipile.train('bc_dense', 'svm', shuffle => 'shuffle_once', "
        "max_epoch_num => 3, seed => 1, model_name => 'bc_once')"))
    assert "Cached Blocks" not in ts
    assert "Buffers Filled" in ts


@pytest.mark.parametrize("seed", [1, 2, 3, 4])
def test_empty_first_block_of_sparse_rows(conn, seed):
    """A block whose rows are all skipped (NULL labels, stored last as
    unlabelled rows often are) read first into a buffer of one-hot rows: the
    buffer had never held a row, and caching the empty block read its row
    offsets before they existed (a segmentation fault on ISLR::Hitters, whose
    59 NULL salaries are stored after the others)."""
    conn.execute("CREATE TABLE bc_unlabelled (y float8, c text, x float8)")
    conn.execute("INSERT INTO bc_unlabelled SELECT 2 * (g % 3) + g / 50.0, 'c' || (g % 3), "
                 "g / 50.0 FROM generate_series(1, 60) g")
    conn.execute("INSERT INTO bc_unlabelled SELECT NULL, 'c' || (g % 3), g "
                 "FROM generate_series(1, 3000) g")
    conn.execute("SET corgipile.progress = off")
    rows = conn.execute("SELECT epoch FROM corgipile.train('bc_unlabelled', 'linear', label => 'y', "
                        "features => 'c, x', block_size => '1', seed => %s, model_name => %s)",
                        (seed, f"bc_unlabelled_{seed}")).fetchall()
    assert len(rows) >= 2
    # scored on the labelled rows (evaluate skips the unlabelled ones too)
    metrics = dict(conn.execute("SELECT metric, value FROM corgipile.evaluate(%s, 'bc_unlabelled')",
                                (f"bc_unlabelled_{seed}",)).fetchall())
    assert np.isfinite(metrics["rmse"]) and metrics["r2"] > 0.9
