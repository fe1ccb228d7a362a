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
        for c, row in zip(cls, x, strict=True):
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
        for target, row in zip(y, x, strict=True):
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


def test_auc_with_ties_beyond_work_mem(conn):
    """AUC's scores are sorted by tuplesort (model/metrics.c): with work_mem
    far below the rows' scores they spill to disk, and runs of equal scores
    count a half per tied pair, as scikit-learn's roc_auc_score does."""
    rng = np.random.default_rng(8)
    x = rng.integers(0, 3, size=(60000, 2)).astype(float)  # 9 distinct rows
    y = (x.sum(axis=1) + rng.normal(scale=1.5, size=len(x)) > 2).astype(int)
    load_table(conn, "tie_train", x[:2000], y[:2000])
    load_table(conn, "tie_test", x, y)
    conn.execute("SET corgipile.progress = off")
    conn.execute("SELECT count(*) FROM corgipile.train('tie_train', 'logistic', "
                 "model_name => 'tie', max_epoch_num => 2, seed => 1)")
    w = np.array(conn.execute(
        "SELECT array_agg(c.weight ORDER BY c.n) FROM corgipile.model_coefficients('tie') "
        "WITH ORDINALITY AS c(o, f, weight, n)").fetchone()[0])
    scores = x @ w[:-1] + w[-1]
    assert len(np.unique(scores)) == 9
    conn.execute("SET work_mem = '64kB'")
    got = evaluate(conn, "tie", "tie_test")
    conn.execute("RESET work_mem")
    assert got["auc"] == pytest.approx(metrics.roc_auc_score(y, scores), abs=1e-12)


def test_auc_memory_does_not_grow_with_the_rows(conn, dsn):
    """One score a row was kept in memory for AUC (17 bytes a row with the
    sort's index): a million rows took about 16MB more at the peak, a
    billion would have been killed.  Now the sorts take work_mem.  The
    backend's peak above what it holds afterwards (VmHWM - VmRSS) is the
    transient memory: the shared buffers it maps stay mapped, so they
    cancel out."""
    import psycopg

    conn.execute("CREATE TABLE auc_big AS SELECT (g % 2) AS label, "
                 "ARRAY[(g % 1000) / 1000.0, (g % 7) / 7.0]::float8[] AS features "
                 "FROM generate_series(1, 1000000) AS g")
    conn.execute("VACUUM auc_big")
    conn.execute("CREATE TABLE auc_small AS SELECT * FROM auc_big LIMIT 2000")
    conn.execute("SET corgipile.progress = off")
    conn.execute("SELECT count(*) FROM corgipile.train('auc_small', 'svm', model_name => 'auc_m', "
                 "max_epoch_num => 1, seed => 1)")
    with psycopg.connect(dsn, autocommit=True) as s:
        s.execute("SET work_mem = '4MB'")
        pid = s.info.backend_pid

        def status_mb(key: str) -> float:
            with open(f"/proc/{pid}/status") as f:
                return next(int(line.split()[1]) for line in f if line.startswith(key)) / 1024

        s.execute("SELECT count(*) FROM corgipile.evaluate('auc_m', 'auc_small')").fetchone()
        got = dict(s.execute("SELECT metric, value FROM corgipile.evaluate('auc_m', 'auc_big')"
                             ).fetchall())
        transient = status_mb("VmHWM:") - status_mb("VmRSS:")
    # the AUC of the model's scores on the million rows, from its
    # coefficients in original units, by scikit-learn
    coef = dict(conn.execute("SELECT coalesce(feature, 'intercept'), weight FROM "
                             "corgipile.model_coefficients('auc_m')").fetchall())
    g = np.arange(1, 1_000_001)
    scores = (coef["features[1]"] * ((g % 1000) / 1000.0) + coef["features[2]"] * ((g % 7) / 7.0)
              + coef["intercept"])
    assert got["auc"] == pytest.approx(metrics.roc_auc_score(g % 2, scores), abs=1e-6)
    # 16MB before, 3-4MB with the sorts
    assert transient < 9, f"evaluate() of 1M rows peaked {transient:.1f} MB above what it kept"
