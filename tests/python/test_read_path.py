"""TupleShuffle deforms heap tuples itself (extension/nodes/tuple_shuffle.c): at
fixed offsets when a tuple has no NULLs, else with heap_deform_tuple.  Rows
stored in awkward shapes (NULLs elsewhere in the row, dropped columns,
columns added with a default after the row was written) must train exactly
like the same rows stored plainly: with no_shuffle the weights depend only
on the rows and their order, so both tables give the same doubles."""

from __future__ import annotations

import numpy as np
from psycopg import sql

from datagen import linear_task, weights


def train_no_shuffle(conn, table: str, features: str, name: str) -> list[float]:
    conn.execute(sql.SQL(
        "SELECT count(*) FROM corgipile.train({}, 'logistic', features => {}, "
        "shuffle => 'no_shuffle', max_epoch_num => 2, seed => 4, model_name => {})").format(
        sql.Literal(table), sql.Literal(features), sql.Literal(name)))
    return weights(conn, name)


def test_nulls_and_dropped_columns_read_like_plain_rows(conn):
    x, y = linear_task(2500, 5, seed=12)
    conn.execute("SET corgipile.progress = off")
    conn.execute("CREATE TABLE messy (id int, gone int, label int, features float8[], note text)")
    conn.execute("ALTER TABLE messy DROP COLUMN gone")
    with conn.cursor().copy("COPY messy (id, label, features, note) FROM STDIN (FORMAT BINARY)") as cp:
        cp.set_types(["int4", "int4", "float8[]", "text"])
        for i in range(len(y)):
            # a NULL after the columns read gives the tuple a null bitmap;
            # NULL labels and features are skipped rows
            label = None if i % 101 == 0 else int(y[i])
            feats = None if i % 103 == 0 else x[i].tolist()
            cp.write_row((i, label, feats, None if i % 3 == 0 else "n"))
    conn.execute("CREATE TABLE plain AS SELECT label, features FROM messy ORDER BY id")
    assert (train_no_shuffle(conn, "messy", "features", "m1")
            == train_no_shuffle(conn, "plain", "features", "p1"))


def test_column_added_with_a_default_reads_its_default(conn):
    x, y = linear_task(1500, 3, seed=13)
    conn.execute("SET corgipile.progress = off")
    conn.execute("CREATE TABLE grown (id int, label int, x1 float8, x2 float8)")
    half = len(y) // 2
    with conn.cursor().copy("COPY grown FROM STDIN (FORMAT BINARY)") as cp:
        cp.set_types(["int4", "int4", "float8", "float8"])
        for i in range(half):
            cp.write_row((i, int(y[i]), float(x[i, 0]), float(x[i, 1])))
    # rows written before this hold two feature columns; x3 reads 0.5 there
    conn.execute("ALTER TABLE grown ADD COLUMN x3 float8 DEFAULT 0.5")
    with conn.cursor().copy("COPY grown FROM STDIN (FORMAT BINARY)") as cp:
        cp.set_types(["int4", "int4", "float8", "float8", "float8"])
        for i in range(half, len(y)):
            cp.write_row((i, int(y[i]), float(x[i, 0]), float(x[i, 1]), float(x[i, 2])))
    conn.execute("CREATE TABLE flat AS SELECT label, x1, x2, x3 FROM grown ORDER BY id")
    got = train_no_shuffle(conn, "grown", "x1, x2, x3", "g1")
    assert got == train_no_shuffle(conn, "flat", "x1, x2, x3", "f1")
    assert np.all(np.isfinite(got))
