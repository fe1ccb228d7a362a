"""corgipile.evaluate() against scikit-learn's metrics on the same predictions."""

from __future__ import annotations

import numpy as np
import pytest

from datagen import linear_task, load_table

metrics = pytest.importorskip("sklearn.metrics")


def evaluate(conn, model, table):
    return dict(conn.execute("SELECT metric, value FROM corgipile.evaluate(%s, %s)",
                             (model, table)).fetchall())


@pytest.fixture
def binary(conn):
    x, y = linear_task(3000, 5, seed=21, noise=1.0)
    load_table(conn, "bin_train", x[:2000], y[:2000])
    load_table(conn, "bin_test", x[2000:], y[2000:])
    conn.execute("SET corgipile.progress = off")
    return conn


@pytest.mark.parametrize("model", ["logistic", "svm"])
def test_binary_metrics(binary, model):
    conn = binary
    conn.execute("SELECT count(*) FROM corgipile.train('bin_train', %s, model_name => 'm', "
                 "max_epoch_num => 3, seed => 1)", (model,))
    # the weights in the features' original units (the model is standardized)
    rows = conn.execute("SELECT label, corgipile.predict('m', t), "
                        "(SELECT array_agg(c.weight ORDER BY c.n) FROM "
                        " corgipile.model_coefficients('m') WITH ORDINALITY AS c(o, f, weight, n))"
                        " AS w, features FROM bin_test t").fetchall()
    y = np.array([r[0] for r in rows])
    pred = np.array([r[1] for r in rows])
    w = np.array(rows[0][2])
    scores = np.array([np.dot(w[:-1], r[3]) + w[-1] for r in rows])
    got = evaluate(conn, "m", "bin_test")
    assert got["accuracy"] == pytest.approx(metrics.accuracy_score(y, pred), abs=1e-12)
    assert got["precision"] == pytest.approx(metrics.precision_score(y, pred), abs=1e-12)
    assert got["recall"] == pytest.approx(metrics.recall_score(y, pred), abs=1e-12)
    assert got["f1"] == pytest.approx(metrics.f1_score(y, pred), abs=1e-12)
    assert got["auc"] == pytest.approx(metrics.roc_auc_score(y, scores), abs=1e-9)
    if model == "logistic":
        p = 1 / (1 + np.exp(-scores))
        assert got["log_loss"] == pytest.approx(metrics.log_loss(y, p), rel=1e-9)
    else:
        assert got["log_loss"] is None


def test_softmax_metrics(conn):
    rng = np.random.default_rng(5)
    centers = rng.normal(size=(4, 3)) * 1.5
    cls = rng.integers(0, 4, size=2400)
    x = centers[cls] + rng.normal(size=(2400, 3))
    conn.execute("CREATE TABLE mc (label int, features float8[])")
    with conn.cursor().copy("COPY mc FROM STDIN (FORMAT BINARY)") as copy:
        copy.set_types(["int4", "float8[]"])
        for c, row in zip(cls, x):
            copy.write_row((int(c), row.tolist()))
    conn.execute("CREATE TABLE mc_test AS SELECT * FROM mc")
    conn.execute("SET corgipile.progress = off")
    conn.execute("SELECT count(*) FROM corgipile.train('mc', 'softmax', model_name => 'sm', "
                 "max_epoch_num => 3, seed => 2)")
    rows = conn.execute("SELECT label, corgipile.predict('sm', t), corgipile.predict_proba('sm', t) "
                        "FROM mc_test t").fetchall()
    y = np.array([r[0] for r in rows])
    pred = np.array([r[1] for r in rows])
    proba = np.array([r[2] for r in rows])
    assert np.allclose(proba.sum(axis=1), 1.0)
    got = evaluate(conn, "sm", "mc_test")
    assert got["accuracy"] == pytest.approx(metrics.accuracy_score(y, pred), abs=1e-12)
    assert got["macro_f1"] == pytest.approx(metrics.f1_score(y, pred, average="macro"), abs=1e-12)
    assert got["log_loss"] == pytest.approx(metrics.log_loss(y, proba, labels=[0, 1, 2, 3]), rel=1e-9)


def test_regression_metrics(conn):
    rng = np.random.default_rng(9)
    x = rng.uniform(-1, 1, size=(1500, 4))
    y = x @ np.array([1.5, -2.0, 0.5, 3.0]) + 0.7 + 0.2 * rng.normal(size=1500)
    conn.execute("CREATE TABLE reg (label float8, features float8[])")
    with conn.cursor().copy("COPY reg FROM STDIN (FORMAT BINARY)") as copy:
        copy.set_types(["float8", "float8[]"])
        for target, row in zip(y, x):
            copy.write_row((float(target), row.tolist()))
    conn.execute("SET corgipile.progress = off")
    rows = conn.execute("SELECT score FROM corgipile.train('reg', 'linear', model_name => 'lin', "
                        "max_epoch_num => 10, seed => 4, learning_rate => 0.05)").fetchall()
    assert rows[-1][0] > 0.9
    pred = np.array([r[0] for r in conn.execute("SELECT corgipile.predict('lin', t) FROM reg t")])
    got = evaluate(conn, "lin", "reg")
    assert got["rmse"] == pytest.approx(np.sqrt(metrics.mean_squared_error(y, pred)), rel=1e-9)
    assert got["mae"] == pytest.approx(metrics.mean_absolute_error(y, pred), rel=1e-9)
    assert got["r2"] == pytest.approx(metrics.r2_score(y, pred), rel=1e-9)
    # in the features' original units, whatever the model trained in
    w = [r[0] for r in conn.execute(
        "SELECT weight FROM corgipile.model_coefficients('lin') WITH ORDINALITY AS c(o, f, weight, n) "
        "ORDER BY n")]
    assert np.allclose(w, [1.5, -2.0, 0.5, 3.0, 0.7], atol=0.1)
