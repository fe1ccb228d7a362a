"""Loaders against the engine: exact values after COPY, layouts the engine
trains on, storage orders, CSV and LIBSVM parsing."""

from __future__ import annotations

import numpy as np
import psycopg
import pytest
from psycopg import sql

import corgipile
from client_helpers import linear_task, make_table
from corgipile import loaders


def _rows(conn, table, cols="id, label, features"):
    return conn.execute(sql.SQL("SELECT " + cols + " FROM {} ORDER BY ctid").format(
        sql.Identifier(table))).fetchall()


def test_numpy_array_layout_is_exact_and_trains_like_the_same_rows(client, conn):
    x, y = linear_task(500, 6, seed=2)
    x[0, 0] = 1e-300  # extreme values survive the binary encoding
    x[1, 1] = -123456.789012345678
    result = client.load_numpy("loaded", x, y)
    assert (result.rows, result.n_features, result.layout) == (500, 6, "array")
    assert result.train_params() == {"features": "features", "label": "label"}
    rows = _rows(conn, "loaded")
    assert [r[0] for r in rows] == list(range(500))
    assert [r[1] for r in rows] == y.tolist()
    assert np.array_equal(np.array([r[2] for r in rows]), x)
    types = dict(conn.execute("SELECT attname, format_type(atttypid, atttypmod) FROM "
                              "pg_attribute WHERE attrelid = 'loaded'::regclass AND attnum > 0"
                              ).fetchall())
    assert types == {"id": "bigint", "label": "integer", "features": "double precision[]"}
    make_table(conn, "inserted", x, y)
    a = client.train("loaded", "svm", shuffle="no_shuffle", max_epoch_num=2, seed=1)
    b = client.train("inserted", "svm", shuffle="no_shuffle", max_epoch_num=2, seed=1)
    assert np.array_equal(a.weights, b.weights)


@pytest.mark.parametrize("layout", ["columns", "sparse"])
def test_other_layouts_train_to_the_same_model(client, conn, layout):
    x, y = linear_task(400, 5, seed=4)
    x[np.abs(x) < 0.3] = 0.0  # some zeros for the sparse layout
    client.load_numpy("dense_t", x, y)
    result = client.load_numpy("other_t", x, y, layout=layout)
    params = result.train_params()
    if layout == "columns":
        assert params["features"] == '"x1", "x2", "x3", "x4", "x5"'
        cols = [r[0] for r in conn.execute(
            "SELECT attname FROM pg_attribute WHERE attrelid = 'other_t'::regclass "
            "AND attnum > 0 ORDER BY attnum").fetchall()]
        assert cols == ["id", "label", "x1", "x2", "x3", "x4", "x5"]
    else:
        assert params["feature_indices"] == "feature_indices" and params["n_features"] == 5
        first = conn.execute("SELECT feature_indices, features FROM other_t WHERE id = 0"
                             ).fetchone()
        nz = np.flatnonzero(x[0])
        assert first == (nz.tolist(), x[0, nz].tolist())
    # raw features: standardize's default differs between dense (on) and
    # sparse (scale_only) layouts; plain SGD (average=False): the default
    # schedule's l2 is applied lazily to sparse rows and its average is
    # sampled at another spacing, so the layouts agree closely, not exactly
    common = dict(shuffle="no_shuffle", max_epoch_num=2, seed=1, standardize="off",
                  average=False)
    dense = client.train("dense_t", "logistic", **common)
    other = client.train("other_t", "logistic", **common, **params)
    assert other.n_features == 5
    np.testing.assert_allclose(other.weights, dense.weights, rtol=1e-12, atol=1e-12)


def test_storage_orders(client, conn):
    x, y = linear_task(300, 3, seed=8)
    client.load_numpy("by_label", x, y, order="label")
    rows = _rows(conn, "by_label")
    labels = [r[1] for r in rows]
    assert labels == sorted(labels) and labels[0] == -1 and labels[-1] == 1
    assert sorted(r[0] for r in rows) == list(range(300))
    for r in rows[:20]:  # ids still point at the input rows
        assert r[2] == x[r[0]].tolist() and r[1] == y[r[0]]

    client.load_numpy("by_f2", x, y, order="feature:2")
    f2 = [r[2][2] for r in _rows(conn, "by_f2")]
    assert f2 == sorted(f2)

    client.load_numpy("shuffled1", x, y, order="random", seed=3)
    client.load_numpy("shuffled2", x, y, order="random", seed=3)
    ids1 = [r[0] for r in _rows(conn, "shuffled1")]
    assert ids1 == [r[0] for r in _rows(conn, "shuffled2")] and ids1 != list(range(300))

    with pytest.raises(ValueError, match="unknown order"):
        client.load_numpy("bad", x, y, order="sideways")
    with pytest.raises(ValueError, match="out of range"):
        client.load_numpy("bad", x, y, order="feature:3")


def test_label_types_float4_and_if_exists(client, conn):
    x, _ = linear_task(50, 2, seed=1)
    client.load_numpy("booleans", x, x[:, 0] > 0, feature_type="float4")
    assert conn.execute("SELECT pg_typeof(label)::text, pg_typeof(features)::text "
                        "FROM booleans LIMIT 1").fetchone() == ("boolean", "real[]")
    model = client.train("booleans", "logistic", max_epoch_num=1)
    assert model.classes == [False, True]
    client.load_numpy("values", x, x @ np.array([2.0, -1.0]) + 0.5)
    assert conn.execute("SELECT pg_typeof(label)::text FROM values LIMIT 1").fetchone() == (
        "double precision",)
    with pytest.raises(psycopg.errors.DuplicateTable):
        client.load_numpy("values", x, x[:, 0])
    client.load_numpy("values", x[:10], x[:10, 0], if_exists="replace")
    client.load_numpy("values", x[:5], x[:5, 0], if_exists="append")
    assert [r[0] for r in _rows(conn, "values", "id")] == list(range(15))
    unlabeled = client.load_numpy("nolabel", x)
    assert unlabeled.label is None and unlabeled.train_params() == {"features": "features"}
    with pytest.raises(ValueError, match="shape"):
        client.load_numpy("bad", x, x[:3, 0])
    with pytest.raises(ValueError, match="not a table name"):
        client.load_numpy("x; DROP TABLE values", x)
    assert conn.execute("SELECT count(*) FROM values").fetchone() == (15,)


def test_quoted_and_qualified_table_names(client, conn):
    conn.execute("CREATE SCHEMA lab")
    x, y = linear_task(20, 2, seed=1)
    client.load_numpy('lab."Odd Name"', x, y)
    assert conn.execute('SELECT count(*) FROM lab."Odd Name"').fetchone() == (20,)
    model = client.train('lab."Odd Name"', "svm", max_epoch_num=1)
    assert model.relation == 'lab."Odd Name"'


def test_dataframe(client, conn):
    pd = pytest.importorskip("pandas")
    x, y = linear_task(120, 3, seed=6)
    frame = pd.DataFrame({"Age": x[:, 0], "income": x[:, 1], "score": x[:, 2], "y": y})
    result = client.load_dataframe("people", frame, label="y")
    assert result.features == '"Age", "income", "score"'
    # the label keeps its name and type (no renaming to "label")
    assert conn.execute('SELECT "Age", income, score, y FROM people WHERE id = 7'
                        ).fetchone() == (x[7, 0], x[7, 1], x[7, 2], y[7])
    assert result.label == "y" and result.train_params()["label"] == "y"
    model = client.train("people", "svm", max_epoch_num=2, **result.train_params())
    assert model.features == ["Age", "income", "score"]
    preds = client.predict(model.name, frame)  # picks the model's columns by name
    assert np.array_equal(preds, client.predict(model.name, x))
    arr = client.load_dataframe("people_arr", frame, label="y", layout="array",
                                order="feature:income")
    incomes = [r[0][1] for r in _rows(conn, "people_arr", "features")]
    assert incomes == sorted(incomes) and arr.rows == 120
    frame["name"] = "n"
    with pytest.raises(ValueError, match="layout 'array' holds numbers only"):
        client.load_dataframe("bad", frame, label="y", layout="array")


def test_csv(client, conn, tmp_path):
    path = tmp_path / "data.csv"
    path.write_text("a,b,y\n1.5,2,1\n-1,0.25,-1\n3,4,1\n")
    result = client.load_csv("csv_t", path, label="y")
    assert result.rows == 3 and result.n_features == 2
    assert _rows(conn, "csv_t", "id, y, features") == [
        (0, 1, [1.5, 2.0]), (1, -1, [-1.0, 0.25]), (2, 1, [3.0, 4.0])]
    assert result.train_params() == {"features": "features", "label": "y"}
    assert (result.suggested_model, "two classes" in result.suggestion) == ("svm", True)
    client.load_csv("csv_cols", path, label="y", layout="columns", order="label")
    assert conn.execute("SELECT id, y, a, b FROM csv_cols ORDER BY ctid").fetchall() == [
        (1, -1, -1.0, 0.25), (0, 1, 1.5, 2.0), (2, 1, 3.0, 4.0)]
    noheader = tmp_path / "plain.csv"
    noheader.write_text("1;0.5;0.5\n0;0.1;0.2\n")
    client.load_csv("csv_plain", noheader, header=False, label=0, delimiter=";")
    assert _rows(conn, "csv_plain") == [(0, 1, [0.5, 0.5]), (1, 0, [0.1, 0.2])]
    bad = tmp_path / "bad.csv"
    bad.write_text("a,label\n1,1\nx,1\n")
    with pytest.raises(ValueError, match="line 3: column 'a' is not an integer: 'x'"):
        client.load_csv("csv_bad", bad, sample_rows=1)
    with pytest.raises(ValueError, match="layout 'array' holds numbers only.*'a' is text"):
        client.load_csv("csv_bad", bad, layout="array")
    with pytest.raises(ValueError, match="no column 'label'"):
        client.load_csv("csv_bad", path)
    assert conn.execute("SELECT to_regclass('csv_bad')").fetchone() == (None,)


LIBSVM = """\
+1 1:0.5 3:-1.25 # a comment
-1 2:2 qid:4 4:1e-3
# a whole-line comment

+1 4:7
-1
"""


def test_libsvm_sparse_and_dense(client, conn, tmp_path):
    path = tmp_path / "train.svm"
    path.write_text(LIBSVM)
    sparse = client.load_libsvm("svm_sparse", path)
    assert (sparse.rows, sparse.n_features, sparse.layout) == (4, 4, "sparse")
    assert conn.execute("SELECT id, label, feature_indices, features FROM svm_sparse "
                        "ORDER BY id").fetchall() == [
        (0, 1, [0, 2], [0.5, -1.25]), (1, -1, [1, 3], [2.0, 0.001]), (2, 1, [3], [7.0]),
        (3, -1, [], [])]
    dense = client.load_libsvm("svm_dense", path, layout="dense", order="label")
    assert dense.layout == "array"
    assert _rows(conn, "svm_dense") == [
        (1, -1, [0.0, 2.0, 0.0, 0.001]), (3, -1, [0.0, 0.0, 0.0, 0.0]),
        (0, 1, [0.5, 0.0, -1.25, 0.0]), (2, 1, [0.0, 0.0, 0.0, 7.0])]
    wide = client.load_libsvm("svm_wide", path, n_features=10)
    assert wide.n_features == 10
    with pytest.raises(ValueError, match="n_features"):
        client.load_libsvm("svm_narrow", path, n_features=2)
    zero = tmp_path / "zero.svm"
    zero.write_text("1 0:1 2:2\n0 1:1\n")
    client.load_libsvm("svm_zero", zero)
    assert conn.execute("SELECT feature_indices FROM svm_zero ORDER BY id").fetchall() == [
        ([0, 2],), ([1],)]
    broken = tmp_path / "broken.svm"
    broken.write_text("1 1:1\n1 abc\n")
    with pytest.raises(ValueError, match="line 2"):
        client.load_libsvm("svm_broken", broken)


def test_libsvm_tables_train(client, conn, tmp_path):
    x, y = linear_task(300, 6, seed=9)
    x[np.abs(x) < 0.4] = 0
    path = tmp_path / "gen.svm"
    path.write_text("".join(
        f"{int(y[i]):+d} " + " ".join(f"{j + 1}:{float(x[i, j])!r}" for j in np.flatnonzero(x[i]))
        + "\n" for i in range(len(y))))
    sparse = client.load_libsvm("gen_sparse", path, n_features=6, order="label")
    dense = client.load_libsvm("gen_dense", path, n_features=6, layout="dense", order="label")
    a = client.train("gen_sparse", "svm", max_epoch_num=3, seed=2, **sparse.train_params())
    assert a.history[-1].score > 0.8
    assert client.evaluate(a.name, "gen_sparse")["accuracy"] > 0.8
    # the same rows in the same order: the same model from either layout
    common = dict(shuffle="no_shuffle", max_epoch_num=2, seed=2, standardize="off",
                  average=False)
    s = client.train("gen_sparse", "svm", **common, **sparse.train_params())
    d = client.train("gen_dense", "svm", **common, **dense.train_params())
    np.testing.assert_allclose(s.weights, d.weights, rtol=1e-12, atol=1e-12)


def test_progress_bar_on_large_inputs(client, capsys):
    x, y = linear_task(2000, 3, seed=1)
    client.load_numpy("bar_t", x, y, progress=True)
    err = capsys.readouterr().err
    assert "COPY bar_t" in err and "2.00k/2.00k" in err
    client.load_numpy("quiet_t", x, y)  # small and not a terminal: no bar
    assert "quiet_t" not in capsys.readouterr().err


def test_table_name_parsing():
    assert loaders.table_name("t").as_string(None) == '"t"'
    assert loaders.table_name('S."My T"').as_string(None) == '"s"."My T"'
    for bad in ("t u", "t; drop table t", "t WHERE true", "(select 1)", "", "a.b.c.d"):
        with pytest.raises(ValueError):
            loaders.table_name(bad)


def test_load_result_int_and_dataclass():
    r = corgipile.LoadResult("t", 3, 2, "array", "label", "features")
    assert int(r) == 3


def test_csv_columns_exclude_label_types_and_suggestions(client, conn, tmp_path):
    path = tmp_path / "mixed.csv"
    path.write_text("id_code,a,b,note,Kind,price\n"
                    "x1,1,2,hello,cat,1.5\nx2,3,4,bye,dog,2.25\nx3,5,6,hi,eel,3\n")
    # --exclude: everything but the label and the excluded columns
    r = client.load_csv("ex", path, label="Kind", exclude=["id_code", "note", "price"])
    assert r.n_features == 2 and r.label == '"Kind"'
    assert conn.execute('SELECT "Kind", pg_typeof("Kind")::text, features FROM ex '
                        'ORDER BY id').fetchall() == [
        ("cat", "text", [1.0, 2.0]), ("dog", "text", [3.0, 4.0]), ("eel", "text", [5.0, 6.0])]
    assert r.suggested_model == "softmax" and "3 text classes" in r.suggestion
    # --columns: just these, in this order; a float label suggests linear
    r = client.load_csv("picked", path, label="price", features=["b", "a"], layout="columns")
    assert conn.execute("SELECT price, pg_typeof(price)::text, b, a FROM picked "
                        "WHERE id = 1").fetchone() == (2.25, "double precision", 4.0, 3.0)
    assert r.suggested_model == "linear" and r.features == '"b", "a"'
    model = client.train("picked", r.suggested_model, max_epoch_num=1, **r.train_params())
    assert model.label == "price" and model.features == ["b", "a"]
    with pytest.raises(ValueError, match="no column 'nope'.*among: id_code, a, b"):
        client.load_csv("bad", path, label="price", exclude=["nope"])
    with pytest.raises(ValueError, match="label column 'price' cannot also be a feature"):
        client.load_csv("bad", path, label="price", features=["a", "price"])
    with pytest.raises(ValueError, match="not both"):
        client.load_csv("bad", path, label="price", features=["a"], exclude=["b"])


@pytest.mark.parametrize("labels, model", [
    ([-1, 1, 1], "svm"), ([0, 1, 0], "svm"), ([True, False, True], "svm"),
    ([1, 2, 3], "softmax"), ([1, 2, 1], "softmax"), (["yes", "no", "no"], "softmax"),
    ([0.5, 1.25, 3.0], "linear"), (list(range(50)), "linear"), ([4, 4, 4], None)])
def test_suggested_model(labels, model):
    from corgipile.loaders import suggest_model

    assert suggest_model(np.array(labels))[0] == model
    assert suggest_model(None) == (None, None)
