"""A float8[] row is standardized in the same pass that copies and checks it
(datum_convert.c, cp_array_to_doubles_transformed), for training and for
predict(); arrays of other element types are copied first and transformed
after, as before.  Both must give the same doubles: a numeric[] copy of a
float8[] column of short binary fractions holds the same values, so
weights and predictions from the two must be equal bit for bit.  Lengths
that are and are not a multiple of four exercise the vector loop and its
tail."""

from __future__ import annotations

import numpy as np
import pytest
from psycopg import errors

from datagen import linear_task, weights


def load(conn, d: int, seed: int) -> None:
    x, y = linear_task(1500, d, seed=seed)
    # centred away from 0 and spread unevenly, so the transform matters
    x = x * [1.0 + 3 * j for j in range(d)] + [10.0 * j - 4.0 for j in range(d)]
    # multiples of 1/1024 have short exact decimals: numeric[] holds them exactly
    x = np.round(x * 1024.0) / 1024.0
    conn.execute("CREATE TABLE f8 (id int, label int, features float8[])")
    with conn.cursor().copy("COPY f8 FROM STDIN (FORMAT BINARY)") as cp:
        cp.set_types(["int4", "int4", "float8[]"])
        for i in range(len(y)):
            cp.write_row((i, int(y[i]), x[i].tolist()))
    conn.execute("CREATE TABLE num AS SELECT id, label, features::numeric[] AS features "
                 "FROM f8 ORDER BY id")
    assert conn.execute("SELECT bool_and(features::numeric[]::float8[] = features) "
                        "FROM f8").fetchone()[0]


def train(conn, table: str, name: str, shuffle: str) -> list[float]:
    conn.execute(
        "SELECT count(*) FROM corgipile.train(%s, 'logistic', model_name => %s, "
        "standardize => 'on', shuffle => %s, max_epoch_num => 3, seed => 11)",
        (table, name, shuffle))
    return weights(conn, name)


@pytest.mark.parametrize("d", [7, 8])
def test_training_standardizes_float8_arrays_like_other_arrays(conn, d):
    conn.execute("SET corgipile.progress = off")
    load(conn, d, seed=20 + d)
    # no_shuffle: the order of rows does not depend on how they are stored
    # (numeric[] rows are larger, so the tables' blocks differ)
    assert train(conn, "f8", "f8", "no_shuffle") == train(conn, "num", "num", "no_shuffle")


@pytest.mark.parametrize("d", [7, 8])
def test_predict_standardizes_float8_arrays_like_other_arrays(conn, d):
    conn.execute("SET corgipile.progress = off")
    load(conn, d, seed=30 + d)
    train(conn, "f8", "m", "no_shuffle")
    rows = conn.execute(
        "SELECT corgipile.predict('m', f.features), corgipile.predict('m', n.features), "
        "corgipile.predict_proba('m', f.features), corgipile.predict_proba('m', n.features) "
        "FROM f8 f JOIN num n USING (id)").fetchall()
    assert len(rows) == 1500
    assert all(r[0] == r[1] and r[2] == r[3] for r in rows)
    # scores, not only labels, are compared
    assert len({tuple(r[2]) for r in rows}) > 100


@pytest.mark.parametrize("bad", ["NaN", "Infinity", "-Infinity"])
def test_standardized_predict_reports_the_value_read(conn, bad):
    conn.execute("SET corgipile.progress = off")
    load(conn, 7, seed=40)
    train(conn, "f8", "m", "no_shuffle")
    for pos in (1, 5, 7):  # in the vector loop and in its tail
        feats = [0.5] * 7
        with pytest.raises(errors.DataException, match=f"feature value {bad} "):
            conn.execute("SELECT corgipile.predict('m', %s::float8[])",
                         ([*feats[:pos - 1], float(bad), *feats[pos:]],))


def test_standardized_training_reports_the_value_read(conn):
    conn.execute("SET corgipile.progress = off")
    load(conn, 7, seed=41)
    conn.execute("UPDATE f8 SET features[6] = 'Infinity' WHERE id = 700")
    with pytest.raises(errors.DataException, match="feature value Infinity "):
        train(conn, "f8", "bad", "no_shuffle")
