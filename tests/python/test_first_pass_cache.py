"""With standardized dense features, the first pass (preprocess_pass.c) fills
the block cache with the rows it reads and standardizes them once the
statistics are complete, so epoch 1 reads its blocks from memory.  The
cached rows must be the same doubles as converting after the pass: the same
seed gives bit-identical weights with the cache off, holding part of the
table and holding all of it, and the rows skipped for NULLs are reported
once, as before.  With validation => 'N%' the pass keeps each cached
block's held-out rows with it, and epoch 1 hands them to the holdout when
it takes the block from memory, in its own order: the weights and the
held-out figures must not change either."""

from __future__ import annotations

import numpy as np
import psycopg
import pytest
from psycopg import sql

from datagen import linear_task, weights

# the rows take about 170 kB as an array of 6, 100 kB as 3 columns
BUDGETS = {"array": [("0", "none"), ("96kB", "part"), ("512MB", "all")],
           "columns": [("0", "none"), ("48kB", "part"), ("512MB", "all")]}


@pytest.fixture
def table(conn):
    x, y = linear_task(3000, 6, seed=5)
    # centred away from 0 and spread unevenly, so the transform matters
    x = x * [1.0 + 3 * j for j in range(6)] + [10.0 * j - 4.0 for j in range(6)]
    conn.execute("CREATE TABLE fp (id int, label int, features float8[], "
                 "a float8, b float8, c real)")
    with conn.cursor().copy("COPY fp FROM STDIN (FORMAT BINARY)") as cp:
        cp.set_types(["int4", "int4", "float8[]", "float8", "float8", "float4"])
        for i in np.argsort(y, kind="stable"):
            cp.write_row((int(i), int(y[i]), x[i].tolist(), float(x[i, 0]), float(x[i, 1]),
                          float(x[i, 2])))
    # rows skipped for NULLs are skipped from the cache alike, and counted once
    conn.execute("UPDATE fp SET features = NULL, a = NULL WHERE id % 97 = 0")
    conn.execute("UPDATE fp SET label = NULL WHERE id % 89 = 0")
    conn.execute("UPDATE fp SET features[2] = NULL WHERE id % 83 = 0")
    conn.execute("VACUUM ANALYZE fp")
    conn.execute("SET corgipile.progress = off")
    return conn


def explained(conn, query: sql.Composable) -> dict:
    plan = conn.execute(sql.SQL("EXPLAIN (ANALYZE, VERBOSE, FORMAT JSON) {}").format(query)
                        ).fetchone()[0][0]["Plan"]
    ts = plan["Plans"][0]
    ts["Blocks"] = ts["Plans"][0]["Blocks"]
    return ts


# a block of one heap page, and of several (the pass maps pages to blocks)
@pytest.mark.parametrize("block_size", ["1", "3"])
@pytest.mark.parametrize("validation", [None, "10%"])
@pytest.mark.parametrize("double_buffer", [True, False])
@pytest.mark.parametrize("features", ["array", "columns"])
@pytest.mark.parametrize("shuffle", ["corgipile", "no_shuffle", "block_only"])
def test_first_pass_cache_keeps_the_weights(table, shuffle, features, double_buffer,
                                            validation, block_size):
    conn = table
    digests = []
    skipped = []
    for budget, held in BUDGETS[features]:
        conn.execute(sql.SQL("SET corgipile.block_cache_size = {}").format(sql.Literal(budget)))
        name = f"fp_{shuffle}_{features}_{double_buffer}_{validation}_{block_size}_{held}"
        args = sql.SQL(
            "max_epoch_num => 3, seed => 11, learning_rate => 0.05, block_size => {}, "
            "buffer_size => '6', shuffle => {}, double_buffer => {}, model_name => {}{}{}"
        ).format(sql.Literal(block_size), sql.Literal(shuffle), sql.Literal(double_buffer), sql.Literal(name),
                 sql.SQL(", validation => {}").format(sql.Literal(validation))
                 if validation else sql.SQL(""),
                 sql.SQL(", features => 'a, b, c'") if features == "columns"
                 else sql.SQL(""))
        q = sql.SQL("SELECT * FROM corgipile.train('fp', 'logistic', {})").format(args)
        notices = []
        conn.add_notice_handler(lambda d, notices=notices: notices.append(d.message_primary))
        ts = explained(conn, q)
        conn._notice_handlers.clear()
        skipped.append([n for n in notices if "skipped" in n])
        if held == "none":
            assert "Cached Blocks" not in ts
        else:
            cached = ts["Cached Blocks"]
            assert 0 < cached <= ts["Blocks"]
            assert (cached < ts["Blocks"]) == (held == "part")
            if held == "all":
                assert ts["Blocks Cached by First Pass"] == cached
            assert ts["Blocks Read from Cache"] == 2 * cached
        # the held-out rows and their scores with the kept model
        holdout = conn.execute("SELECT params->'holdout' FROM corgipile.models "
                               "WHERE model_name = %s", (name,)).fetchone()[0]
        assert (holdout is not None) == (validation is not None)
        digests.append((weights(conn, name), holdout))
    assert digests[0] == digests[1] == digests[2]
    assert skipped[0] == skipped[1] == skipped[2] and len(skipped[0]) == 1


@pytest.mark.parametrize("validation", [None, "10%"])
@pytest.mark.parametrize("features", ["array", "columns"])
@pytest.mark.parametrize("missing", ["mean", "median"])
def test_imputing_gives_the_weights_of_every_cache_budget(table, missing, features, validation):
    """missing => ...: the pass stops caching at the first row it would
    have to impute (the cache holds rows converted before the
    preprocessing, which would skip it); whatever it cached, or not, and
    with held-out rows imputed too, the same seed gives the same model."""
    conn = table
    digests = []
    for budget, held in BUDGETS[features]:
        conn.execute(sql.SQL("SET corgipile.block_cache_size = {}").format(sql.Literal(budget)))
        name = f"fpm_{missing}_{features}_{validation}_{held}"
        q = sql.SQL("SELECT * FROM corgipile.train('fp', 'logistic', max_epoch_num => 3, "
                    "seed => 11, learning_rate => 0.05, block_size => '1', buffer_size => '6', "
                    "model_name => {}, missing => {}{}{})").format(
            sql.Literal(name), sql.Literal(missing),
            sql.SQL(", validation => {}").format(sql.Literal(validation))
            if validation else sql.SQL(""),
            sql.SQL(", features => 'a, b, c'") if features == "columns" else sql.SQL(""))
        ts = explained(conn, q)
        assert ts.get("Blocks Cached by First Pass", 0) < ts["Blocks"]
        row = conn.execute("SELECT preprocess, params->'holdout', history->0->'tuples' "
                           "FROM corgipile.models WHERE model_name = %s", (name,)).fetchone()
        digests.append((weights(conn, name), *row))
    assert digests[0] == digests[1] == digests[2]


def test_imputing_a_table_without_nulls_keeps_the_first_pass_cache(table):
    """With nothing to impute the pass caches as a skipping training does,
    standardized or not."""
    conn = table
    conn.execute("SET corgipile.block_cache_size = '512MB'")
    conn.execute("CREATE TABLE fp_full AS SELECT * FROM fp WHERE label IS NOT NULL "
                 "AND features IS NOT NULL AND array_position(features, NULL) IS NULL")
    for standardize in ("auto", "off"):
        ts = explained(conn, sql.SQL(
            "SELECT * FROM corgipile.train('fp_full', 'logistic', standardize => {}, "
            "missing => 'mean', max_epoch_num => 2, seed => 3, learning_rate => 0.05, "
            "model_name => {})").format(sql.Literal(standardize),
                                        sql.Literal(f"full_{standardize}")))
        assert ts["Blocks Cached by First Pass"] == ts["Cached Blocks"] > 0, standardize


def test_standardize_off_leaves_the_cache_to_epoch_one(table):
    conn = table
    conn.execute("SET corgipile.block_cache_size = '512MB'")
    ts = explained(conn, sql.SQL(
        "SELECT * FROM corgipile.train('fp', 'logistic', standardize => 'off', "
        "max_epoch_num => 2, seed => 3, model_name => 'off')"))
    assert ts["Cached Blocks"] > 0 and ts["Blocks Cached by First Pass"] == 0


BAD_ROWS = {
    "nan": "UPDATE fp SET features[3] = 'NaN' WHERE id = 1234",
    "infinity": "UPDATE fp SET features[5] = '-Infinity' WHERE id = 1234",
    "ragged": "UPDATE fp SET features = features || 1.0::float8 WHERE id = 1234",
    "empty": "UPDATE fp SET features = '{}' WHERE id = 1234",
    "label": "UPDATE fp SET label = 2 WHERE id = 1234",
    "column_nan": "UPDATE fp SET b = 'NaN' WHERE id = 1234",
}


@pytest.mark.parametrize("n_features", [None, 6])
@pytest.mark.parametrize("bad", sorted(BAD_ROWS))
def test_a_bad_row_is_reported_as_without_the_cache(table, bad, n_features):
    """The first pass may meet a bad row before epoch 1 would: the error,
    which names the row, must be the same as with the cache off."""
    conn = table
    conn.execute(BAD_ROWS[bad])
    features = ", features => 'a, b, c'" if bad == "column_nan" else ""
    if n_features and not features:
        features = f", n_features => {n_features}"
    errors = []
    for budget in ("0", "512MB"):
        conn.execute(sql.SQL("SET corgipile.block_cache_size = {}").format(sql.Literal(budget)))
        with pytest.raises(psycopg.Error) as e:
            conn.execute(f"SELECT * FROM corgipile.train('fp', 'logistic', max_epoch_num => 3, "
                         f"seed => 4, block_size => '1', model_name => 'bad'{features})")
        errors.append((type(e.value), e.value.diag.message_primary, e.value.diag.message_detail,
                       e.value.diag.message_hint))
    assert errors[0] == errors[1]
    # the message names the row
    assert "fp" in errors[0][1]
