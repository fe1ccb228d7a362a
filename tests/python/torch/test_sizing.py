"""Block sizing: corgipile.torch asks the engine (corgipile.sizing, which
runs cp_resolve_sizing) and keeps a Python copy of the rule only for
servers without the extension; both must agree, including at the edges
(TB sizes, the clamps)."""

from __future__ import annotations

import pytest

TORCH_MISSING = ("corgipile.torch needs PyTorch: pip install 'corgipile[torch]' "
                 "(make test installs torch==2.13.0 from requirements-dev.txt)")
torch = pytest.importorskip("torch", reason=TORCH_MISSING)

import psycopg  # noqa: E402

from corgipile.torch import CorgiPileDataset, plan  # noqa: E402
from torch_helpers import make_table  # noqa: E402

SIZES = [(None, "10%"), (None, "1%"), (None, "100%"), ("2", "10%"), ("3 pages", "64 pages"),
         ("1MB", "10%"), (None, "5TB"), ("1TB", "10%"), (None, "1GB"), ("16kB", "0.5MB"),
         (None, "7"), ("8192 b", "3.5%"), (None, "64MB")]
PAGES = [0, 1, 15, 16, 47, 100, 4097, 1_000_000, 40_000_000, 4_294_967_294]


def python_sizing(block, buffer, pages):
    return plan.resolve_sizing(plan.parse_size(buffer, "buffer_size"),
                               plan.parse_size(block, "block_size", percent_ok=False), pages)


def test_python_fallback_equals_the_engine(conn):
    make_table(conn, "s1", 3000)
    make_table(conn, "s2", 40_000, d=16)
    for table in ("s1", "s2"):
        for block, buffer in SIZES:
            for pages in [None] + PAGES:
                server = plan.server_sizing(conn, table, block, buffer, pages)
                n = server.n_pages
                if pages is not None:
                    assert n == pages
                assert python_sizing(block, buffer, n) == server, (table, block, buffer, n)


def test_the_clamps_and_tb(conn):
    make_table(conn, "s3", 10)
    # a block as large as the table's page numbers allow, not larger
    huge = plan.server_sizing(conn, "s3", "1000TB", "10%", 10)
    assert huge.pages_per_block == plan.MAX_BLOCK_NUMBER
    assert python_sizing("1000TB", "10%", 10) == huge
    # a buffer of more blocks than a uint32 counts
    many = plan.server_sizing(conn, "s3", "1", "100000TB", 10)
    assert many.blocks_per_buffer == plan.UINT32_MAX
    assert python_sizing("1", "100000TB", 10) == many


@pytest.mark.parametrize("bad", ["5%", "0", "1.5 pages", "ten", "-3", "10 %x"])
def test_bad_block_sizes_are_refused_by_both(conn, bad):
    make_table(conn, "s4", 10)
    with pytest.raises(psycopg.errors.InvalidParameterValue):
        plan.server_sizing(conn, "s4", bad, "10%")
    conn.rollback()
    with pytest.raises(ValueError):
        python_sizing(bad, "10%", 10)


def test_the_dataset_uses_the_engine_sizing(conn, dsn):
    make_table(conn, "s5", 5000)
    ds = CorgiPileDataset(dsn, "s5", buffer_size="1TB", block_size="3")
    assert ds.sizing == plan.server_sizing(conn, "s5", "3", "1TB")
    with pytest.raises(ValueError, match="invalid block_size '5%'"):
        CorgiPileDataset(dsn, "s5", block_size="5%")
    ds.close()


def test_the_default_buffer_is_trains_default(conn, dsn):
    """buffer_size=None asks the engine for train()'s default: the whole
    table when its heap fits maintenance_work_mem, else 10%."""
    make_table(conn, "s6", 5000)
    ds = CorgiPileDataset(dsn, "s6", block_size="1")
    assert ds.sizing == plan.server_sizing(conn, "s6", "1", None)
    assert ds.sizing.blocks_per_buffer == ds.sizing.n_blocks > 1  # a full shuffle
    ds.close()
    # a server whose maintenance_work_mem the heap exceeds buffers 10% of it
    # (at least 256 blocks, as train() does): sized for a million pages here
    with psycopg.connect(dsn, autocommit=True) as c:
        c.execute("SET maintenance_work_mem = '1MB'")
        big = plan.server_sizing(c, "s6", None, None, 1_000_000)
        assert big == plan.server_sizing(c, "s6", None, "10%", 1_000_000)
        assert big.blocks_per_buffer < big.n_blocks
