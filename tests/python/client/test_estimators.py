"""SGDClassifier / SGDRegressor: the scikit-learn protocol over the engine."""

from __future__ import annotations

import numpy as np
import pytest

import corgipile

from client_helpers import linear_task


def test_classifier_on_a_table(client, points, conn):
    clf = corgipile.SGDClassifier(client, model="svm", max_epoch_num=5, seed=1,
                                  learning_rate=0.05)
    assert clf.fit("points") is clf
    assert clf.model_name_.startswith("points_svm_")
    assert clf.coef_.shape == (1, 4) and clf.intercept_.shape == (1,)
    assert list(clf.classes_) == [-1, 1] and clf.n_features_in_ == 4 and clf.n_iter_ == 5
    model = client.get_model(clf.model_name_)
    assert np.array_equal(clf.coef_[0], model.weights[:-1])
    assert clf.intercept_[0] == model.weights[-1]
    pred = clf.predict("heldout")
    assert pred.shape == (200,) and set(np.unique(pred)) <= {-1.0, 1.0}
    expected = [r[0] for r in conn.execute(
        "SELECT corgipile.predict(%s, h) FROM heldout h", (clf.model_name_,)).fetchall()]
    assert pred.tolist() == expected
    acc = clf.score("heldout")
    labels = [r[0] for r in conn.execute("SELECT label FROM heldout").fetchall()]
    assert acc == pytest.approx(np.mean(pred == np.array(labels)))
    assert acc > 0.85
    # queries, where= and arrays give the same answers
    x, y = points
    assert np.array_equal(clf.predict(x[600:]), pred)
    assert clf.score(x[600:], y[600:]) == pytest.approx(acc)
    assert np.array_equal(clf.predict("SELECT * FROM points WHERE id < 10"),
                          clf.predict("points", where="id < 10"))
    assert np.array_equal(np.where(clf.decision_function(x[600:]) >= 0, 1.0, -1.0), pred)


def test_get_set_params_and_refit_by_name(client, points):
    clf = corgipile.SGDClassifier(client, model="logistic", model_name="clf", max_epoch_num=2)
    assert clf.get_params() == {"client": client, "model": "logistic", "model_name": "clf",
                                "max_epoch_num": 2}
    clf.fit("points")
    first = clf.coef_.copy()
    assert clf.set_params(max_epoch_num=4, seed=3) is clf
    clf.fit("points")  # same model_name: replaced
    assert clf.n_iter_ == 4 and not np.array_equal(first, clf.coef_)
    assert [i.name for i in client.list_models()] == ["clf"]
    clone = type(clf)(**clf.get_params())
    assert clone.get_params() == clf.get_params() and not hasattr(clone, "model_")
    assert "SGDClassifier(model='logistic'" in repr(clf)


def test_fit_on_arrays_through_a_temporary_table(client, conn):
    x, y = linear_task(500, 3, seed=12)
    clf = corgipile.SGDClassifier(client, max_epoch_num=5, seed=2).fit(x[:400], y[:400])
    assert clf.model_.relation == "(arrays)" and clf.model_name_.startswith("arrays_svm_")
    score = clf.score(x[400:], y[400:])
    assert score == pytest.approx(np.mean(clf.predict(x[400:]) == y[400:])) and score > 0.7
    assert conn.execute("SELECT count(*) FROM pg_class WHERE relname LIKE 'corgipile_fit_%'"
                        ).fetchone() == (0,)
    with pytest.raises(ValueError, match="needs y"):
        clf.fit(x)
    with pytest.raises(ValueError, match="label column"):
        clf.fit("points", y)


def test_unfitted_and_wrong_model(client, points):
    with pytest.raises(RuntimeError, match="not fitted"):
        corgipile.SGDClassifier(client).predict("points")
    with pytest.raises(ValueError, match="takes model in"):
        corgipile.SGDClassifier(client, model="linear").fit("points")
    with pytest.raises(ValueError, match="takes model in"):
        corgipile.SGDRegressor(client, model="svm").fit("points")


def test_from_model_wraps_a_stored_model(client, points):
    client.train("points", "svm", model_name="stored", max_epoch_num=2)
    clf = corgipile.SGDClassifier.from_model(client, "stored")
    assert clf.model_name_ == "stored" and clf.coef_.shape == (1, 4)
    assert clf.score("heldout") > 0.5


def test_regressor(client, conn):
    rng = np.random.default_rng(0)
    x = rng.uniform(-1, 1, size=(600, 3))
    y = x @ np.array([1.5, -2.0, 0.5]) + 0.3 + 0.01 * rng.normal(size=600)
    client.load_numpy("reg", x[:500], y[:500])
    client.load_numpy("reg_test", x[500:], y[500:])
    reg = corgipile.SGDRegressor(client, max_epoch_num=15, learning_rate=0.05, seed=1)
    reg.fit("reg")
    assert reg.coef_.shape == (3,) and reg.intercept_.shape == (1,)
    np.testing.assert_allclose(reg.coef_, [1.5, -2.0, 0.5], atol=0.1)
    r2 = reg.score("reg_test")
    assert r2 > 0.95
    assert reg.score(x[500:], y[500:]) == pytest.approx(r2, rel=1e-9)
    metrics = client.evaluate(reg.model_name_, "SELECT * FROM reg_test")
    assert metrics["r2"] == pytest.approx(r2, rel=1e-9) and metrics["rmse"] > 0



def _three_classes(n, seed):
    rng = np.random.default_rng(seed)
    centers = np.array([[1.0, 0.0], [-1.0, 1.0], [0.0, -1.0]])
    y = rng.integers(0, 3, size=n)
    return centers[y] + 0.3 * rng.normal(size=(n, 2)), y


def test_softmax_classifier_with_integer_and_text_classes(client, conn):
    x, y = _three_classes(600, 1)
    client.load_numpy("three", x[:450], y[:450])
    client.load_numpy("three_test", x[450:], y[450:])
    clf = corgipile.SGDClassifier(client, model="softmax", max_epoch_num=8, seed=1)
    clf.fit("three")
    assert clf.coef_.shape == (3, 2) and clf.intercept_.shape == (3,)
    assert list(clf.classes_) == [0, 1, 2]
    acc = clf.score("three_test")
    assert acc > 0.9
    assert clf.score(x[450:], y[450:]) == pytest.approx(acc)
    # text classes: predictions are the class names (corgipile.predict_class)
    conn.execute("CREATE TABLE animals AS SELECT id, (ARRAY['cat','dog','eel'])[label + 1] "
                 "AS label, features FROM three")
    pets = corgipile.SGDClassifier(client, model="softmax", max_epoch_num=8, seed=1)
    pets.fit("animals")
    assert list(pets.classes_) == ["cat", "dog", "eel"]
    names = pets.predict(x[450:])
    assert set(names) <= {"cat", "dog", "eel"}
    assert np.mean(names == np.array(["cat", "dog", "eel"])[y[450:]]) > 0.9
    rows = client.execute("SELECT id, label FROM animals WHERE id < 5 ORDER BY id "
                          f"PREDICT BY {pets.model_name_}").fetchall()
    assert all(isinstance(r[2], str) for r in rows)
    assert pets.score("animals") > 0.9
