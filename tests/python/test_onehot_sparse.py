"""One-hot columns held as sparse rows and NULL categories.

A table with a text column trains on sparse rows (one entry per feature
column), not on dense rows of every indicator.  The weights must be those
of the dense rows but for the summation order of the margin: checked
against the same table with the indicators written out as float8 columns
(dense rows), in the same row
order (no_shuffle), with and without l2, l1 and mini-batches.

NULL in a category column is all zeros (the column's reference level).
It counts in evaluate()'s unseen_values (and predict's NOTICE) only when
the training rows had no NULL there; the model's preprocess records it as
"nulls": true, and a document without the key (0.3.0) reads as false.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from psycopg import errors


def _quiet(conn) -> None:
    conn.execute("SET corgipile.progress = off")


def _tables(conn) -> None:
    # a text column of 5 values, an unscaled number, and the same rows with
    # the indicators written out (codes in byte order: a, b, c, d, e)
    conn.execute(
        "CREATE TABLE cat_t AS SELECT g AS id, "
        "CASE WHEN (g * 7) % 10 < 5 THEN 1 ELSE 0 END AS label, (g % 7)::float8 / 3 AS x, "
        "(ARRAY['a', 'b', 'c', 'd', 'e'])[1 + (g * 3) % 5] AS cat, "
        "(g % 4) AS y FROM generate_series(1, 3000) g ORDER BY g")
    conn.execute(
        "CREATE TABLE dense_t AS SELECT id, label, x, "
        + ", ".join(f"(cat = '{c}')::int::float8 AS c_{c}" for c in "abcde")
        + ", y FROM cat_t ORDER BY id")


def _weights(conn, name):
    return np.array(conn.execute(
        "SELECT weights FROM corgipile.models WHERE model_name = %s", (name,)).fetchone()[0])


CASES = [
    ("logistic", "l2 => 0"),
    ("logistic", "l2 => 0.01"),
    ("svm", "l1 => 0.001"),
    ("svm", "l2 => 0.01, l1 => 0.0005"),
    ("linear", "batch_size => 8, l2 => 0.01"),
    ("softmax", "l2 => 0.001"),
]


@pytest.mark.parametrize("model,extra", CASES, ids=[f"{m}-{e}" for m, e in CASES])
def test_sparse_onehot_rows_train_the_dense_weights(conn, model, extra):
    _quiet(conn)
    _tables(conn)
    label = "y" if model == "softmax" else "label"
    common = (f"'{model}', label => '{label}', shuffle => 'no_shuffle', "
              f"learning_rate => 0.05, max_epoch_num => 3, standardize => 'off', seed => 7, "
              f"{extra}")
    conn.execute(f"SELECT count(*) FROM corgipile.train('cat_t', {common}, "
                 "features => 'x, cat', model_name => 'sparse_m')")
    conn.execute(f"SELECT count(*) FROM corgipile.train('dense_t', {common}, "
                 "features => 'x, c_a, c_b, c_c, c_d, c_e', model_name => 'dense_m')")
    ws = _weights(conn, "sparse_m")
    wd = _weights(conn, "dense_m")
    assert ws.shape == wd.shape
    assert np.any(wd != 0)
    # only the margin's summation order differs (four partial sums over
    # every feature, or one sum over the row's entries)
    np.testing.assert_allclose(ws, wd, rtol=1e-9, atol=1e-12)


def test_standardized_number_beside_categories(conn):
    """standardize => 'on' centres the number (held explicitly in the sparse
    row) and leaves the indicators alone, as the dense rows did."""
    _quiet(conn)
    _tables(conn)
    conn.execute("SELECT count(*) FROM corgipile.train('cat_t', 'logistic', features => 'x, cat', "
                 "model_name => 'std_m', shuffle => 'no_shuffle', learning_rate => 0.05, "
                 "max_epoch_num => 2, seed => 3)")
    prep = conn.execute("SELECT preprocess FROM corgipile.models WHERE model_name = 'std_m'"
                        ).fetchone()[0]
    mean, std = prep["features"][0]["mean"], prep["features"][0]["std"]
    # the dense table, its x standardized by hand with the stored figures
    conn.execute("CREATE TABLE dense_s AS SELECT id, label, (x - %s) / %s AS x, c_a, c_b, c_c, "
                 "c_d, c_e FROM dense_t ORDER BY id", (mean, std))
    conn.execute("SELECT count(*) FROM corgipile.train('dense_s', 'logistic', "
                 "features => 'x, c_a, c_b, c_c, c_d, c_e', model_name => 'dense_s_m', "
                 "shuffle => 'no_shuffle', learning_rate => 0.05, max_epoch_num => 2, "
                 "seed => 3, standardize => 'off')")
    np.testing.assert_allclose(_weights(conn, "std_m"), _weights(conn, "dense_s_m"),
                               rtol=1e-9, atol=1e-12)
    # predict on raw rows equals the dense model on hand-scaled rows
    same = conn.execute(
        "SELECT bool_and(abs(corgipile.predict('std_m', c) - corgipile.predict('dense_s_m', d)) "
        "< 1e-9) FROM cat_t c JOIN dense_s d USING (id)").fetchone()[0]
    assert same


def test_null_categories_seen_in_training_are_not_unseen(conn):
    _quiet(conn)
    conn.execute("CREATE TABLE nt AS SELECT g % 2 AS label, g::float8 / 100 AS x, "
                 "CASE WHEN g % 5 = 0 THEN NULL ELSE (ARRAY['a', 'b'])[1 + g % 2] END AS cat "
                 "FROM generate_series(1, 500) g")
    conn.execute("SELECT count(*) FROM corgipile.train('nt', 'logistic', features => 'x, cat', "
                 "model_name => 'nm', max_epoch_num => 2, seed => 1)")
    prep = conn.execute("SELECT preprocess FROM corgipile.models WHERE model_name = 'nm'"
                        ).fetchone()[0]
    assert prep["features"][1]["categories"] == ["a", "b"]
    assert prep["features"][1]["nulls"] is True
    m = dict(conn.execute("SELECT * FROM corgipile.evaluate('nm', 'nt')").fetchall())
    assert m["unseen_values"] == 0
    # an unseen value still counts; a NULL does not
    conn.execute("CREATE TABLE nt2 AS SELECT * FROM nt")
    conn.execute("INSERT INTO nt2 VALUES (1, 0.5, 'zzz'), (0, 0.5, 'yyy'), (1, 0.1, NULL)")
    m = dict(conn.execute("SELECT * FROM corgipile.evaluate('nm', 'nt2')").fetchall())
    assert m["unseen_values"] == 2
    # and predict() gives no NOTICE for a NULL
    notices = []
    conn.add_notice_handler(lambda d: notices.append(d.message_primary))
    conn.execute("SELECT corgipile.predict('nm', t) FROM nt t WHERE cat IS NULL").fetchall()
    assert not [n for n in notices if "not trained on" in n]
    conn.execute("SELECT corgipile.predict('nm', t) FROM nt2 t WHERE cat = 'zzz'").fetchall()
    assert [n for n in notices if "not trained on" in n]


def test_null_categories_unseen_in_training_count(conn):
    _quiet(conn)
    conn.execute("CREATE TABLE nn AS SELECT g % 2 AS label, g::float8 / 100 AS x, "
                 "(ARRAY['a', 'b'])[1 + g % 2] AS cat FROM generate_series(1, 300) g")
    conn.execute("SELECT count(*) FROM corgipile.train('nn', 'svm', features => 'x, cat', "
                 "model_name => 'nnm', max_epoch_num => 1, seed => 1)")
    prep = conn.execute("SELECT preprocess FROM corgipile.models WHERE model_name = 'nnm'"
                        ).fetchone()[0]
    assert "nulls" not in prep["features"][1]
    conn.execute("UPDATE nn SET cat = NULL WHERE x < 0.3")
    m = dict(conn.execute("SELECT * FROM corgipile.evaluate('nnm', 'nn')").fetchall())
    assert m["unseen_values"] == 29


def _export(conn, name):
    return list(conn.execute(
        "SELECT model, relation, label, features, feature_indices, n_features, weights, classes, "
        "params, history, preprocess FROM corgipile.models WHERE model_name = %s",
        (name,)).fetchone())


def _import(conn, name, row, prep):
    conn.execute("SELECT corgipile.import_model(%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, "
                 "NULL, %s::jsonb)",
                 [name, *row[:7], json.dumps(row[7]), json.dumps(row[8]), json.dumps(row[9]),
                  json.dumps(prep)])


def test_0_3_0_documents_and_forged_nulls(conn):
    """A preprocess document of 0.3.0 has no "nulls": it reads as false (NULL
    counts as unseen, as it did); a "nulls" that is not a boolean is refused."""
    _quiet(conn)
    conn.execute("CREATE TABLE nt AS SELECT g % 2 AS label, g::float8 / 100 AS x, "
                 "CASE WHEN g % 5 = 0 THEN NULL ELSE (ARRAY['a', 'b'])[1 + g % 2] END AS cat "
                 "FROM generate_series(1, 500) g")
    conn.execute("SELECT count(*) FROM corgipile.train('nt', 'logistic', features => 'x, cat', "
                 "model_name => 'nm', max_epoch_num => 1, seed => 1)")
    row = _export(conn, "nm")
    old = json.loads(json.dumps(row[-1]))
    del old["features"][1]["nulls"]
    _import(conn, "old_format", row, old)
    m = dict(conn.execute("SELECT * FROM corgipile.evaluate('old_format', 'nt')").fetchall())
    assert m["unseen_values"] == 100
    assert conn.execute("SELECT bool_and(corgipile.predict('nm', t) = "
                        "corgipile.predict('old_format', t)) FROM nt t").fetchone()[0]
    forged = json.loads(json.dumps(row[-1]))
    forged["features"][1]["nulls"] = "yes"
    with pytest.raises(errors.DataCorrupted, match='"nulls" of "cat" is not a boolean'):
        _import(conn, "forged", row, forged)
