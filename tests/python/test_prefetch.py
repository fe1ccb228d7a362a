"""Blocks read in a random order are prefetched a block at a time
(extension/util/prefetch.c: one POSIX_FADV_WILLNEED over the block's pages,
on the segment file opened read-only).  EXPLAIN ANALYZE counts the runs the
OS was asked for; the advice changes no row and no weight."""

from __future__ import annotations

import re

import pytest
from psycopg import sql

from datagen import linear_task, weights


def fill(conn, table: str, rows: int, temp: bool = False) -> None:
    x, y = linear_task(rows, 6, seed=31)
    conn.execute(sql.SQL("CREATE {} TABLE {} (label int, features float8[])").format(
        sql.SQL("TEMP" if temp else ""), sql.Identifier(table)))
    with conn.cursor().copy(sql.SQL("COPY {} FROM STDIN (FORMAT BINARY)").format(
            sql.Identifier(table))) as cp:
        cp.set_types(["int4", "float8[]"])
        for i in range(rows):
            cp.write_row((int(y[i]), x[i].tolist()))


def explain_train(conn, table: str, name: str, shuffle: str = "corgipile") -> dict[str, int]:
    """EXPLAIN ANALYZE of a one-epoch training without the first pass (so
    that epoch 1 reads every block from the heap): BlockShuffle's counts."""
    conn.execute("DELETE FROM corgipile.models WHERE model_name = %s", (name,))
    plan = "\n".join(r[0] for r in conn.execute(sql.SQL(
        "EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) "
        "SELECT * FROM corgipile.train({}, 'svm', seed => 3, max_epoch_num => 1, "
        "standardize => 'off', block_size => '4', shuffle => {}, model_name => {})").format(
            sql.Literal(table), sql.Literal(shuffle), sql.Literal(name))).fetchall())
    return {k: int(v) for k, v in re.findall(r"(Blocks|Prefetched Blocks): (\d+)", plan)}


@pytest.mark.parametrize("temp", [False, True], ids=["heap", "temp"])
def test_every_block_but_the_first_is_prefetched(conn, temp):
    conn.execute("SET corgipile.progress = off")
    fill(conn, "pf", 6000, temp=temp)
    counts = explain_train(conn, "pf", "pf_on")
    # the blocks of 4 pages are many; each one's successor was asked for
    # while it was converted, the first one read without (the advice found
    # the segment file, a temporary table's too)
    assert counts["Blocks"] > 10
    assert counts["Prefetched Blocks"] == counts["Blocks"] - 1


def test_prefetch_follows_effective_io_concurrency_and_changes_no_weight(conn):
    conn.execute("SET corgipile.progress = off")
    fill(conn, "pf2", 6000)
    on = explain_train(conn, "pf2", "pf2_on")
    conn.execute("SET effective_io_concurrency = 0")
    off = explain_train(conn, "pf2", "pf2_off")
    conn.execute("RESET effective_io_concurrency")
    assert on["Prefetched Blocks"] == on["Blocks"] - 1
    assert off["Prefetched Blocks"] == 0
    assert weights(conn, "pf2_on") == weights(conn, "pf2_off")
    # a sequential order is the kernel's read-ahead's: nothing asked, no line
    assert "Prefetched Blocks" not in explain_train(conn, "pf2", "pf2_seq", "no_shuffle")
