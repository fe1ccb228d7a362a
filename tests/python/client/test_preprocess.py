"""Preprocessing stored with the model, seen from the client:
coef_ in original units, decision_function on raw rows, and dictionaries
that do not depend on the block order."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.linear_model import Ridge
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

import corgipile


def _unscaled_regression(conn, n=2000):
    """amount in the thousands, age in tens, a small third column: a linear
    label with a little noise."""
    rng = np.random.default_rng(7)
    amount = rng.uniform(1000, 9000, n)
    age = rng.uniform(18, 80, n)
    small = rng.normal(0, 0.01, n)
    y = 3.0 + 0.002 * amount - 0.5 * age + 40.0 * small + rng.normal(0, 0.1, n)
    conn.execute("CREATE TABLE money (id int, amount float8, age float8, small float8, y float8)")
    with conn.cursor().copy("COPY money FROM STDIN") as copy:
        for i in range(n):
            copy.write_row((i, amount[i], age[i], small[i], y[i]))
    conn.execute("ANALYZE money")
    return np.column_stack([amount, age, small]), y


def test_coef_in_original_units_matches_sklearn_pipeline(client, conn):
    x, y = _unscaled_regression(conn)
    model = client.train("money", "linear", label="y", features="amount, age, small",
                         learning_rate=0.01, max_epoch_num=40, seed=1, shuffle="shuffle_once")
    prep = model.preprocess
    assert prep["standardize"] == "on" and [f["name"] for f in prep["features"]] == [
        "amount", "age", "small"]
    # the statistics are scikit-learn's StandardScaler's (population std)
    scaler = StandardScaler().fit(x)
    np.testing.assert_allclose([f["mean"] for f in prep["features"]], scaler.mean_, rtol=1e-12)
    np.testing.assert_allclose([f["std"] for f in prep["features"]], scaler.scale_, rtol=1e-12)
    # coef_ maps the stored (scaled) weights back exactly as the server does
    server = {f: w for _, f, w in conn.execute(
        "SELECT * FROM corgipile.model_coefficients(%s)", (model.name,)).fetchall()}
    np.testing.assert_allclose(model.coef[0], [server["amount"], server["age"], server["small"]],
                               rtol=1e-12)
    assert model.intercept[0] == pytest.approx(server[None], rel=1e-12)
    np.testing.assert_allclose(model.coef[0], model.scaled_coef[0] / scaler.scale_, rtol=1e-12)
    # ... and agrees with a scikit-learn pipeline mapped back to original units
    pipe = make_pipeline(StandardScaler(), Ridge(alpha=1e-6)).fit(x, y)
    ridge = pipe[-1]
    coef = ridge.coef_ / scaler.scale_
    intercept = ridge.intercept_ - np.sum(ridge.coef_ * scaler.mean_ / scaler.scale_)
    np.testing.assert_allclose(model.coef[0], coef, rtol=0.05)
    assert model.intercept[0] == pytest.approx(intercept, rel=0.05)
    # raw rows in: the local decision function is the pipeline's prediction
    np.testing.assert_allclose(model.decision_function(x[:50]), pipe.predict(x[:50]),
                               rtol=0.02, atol=0.05)


def _shop(conn, n=1500):
    rng = np.random.default_rng(11)
    plans = np.array(["Basic", "Pro", "Émigré", "Zeta", "alpha"])
    conn.execute("CREATE TABLE shop (id int, spend float8, plan text, vip boolean, "
                 "visits int, y float8, churned text)")
    rows = []
    for i in range(n):
        plan = plans[rng.integers(len(plans))]
        vip = bool(rng.integers(2))
        spend = float(rng.uniform(0, 5000))
        visits = int(rng.integers(0, 40))
        y = 0.001 * spend + {"Basic": 0.0, "Pro": 2.0, "Émigré": -1.0, "Zeta": 0.5,
                             "alpha": 1.0}[plan] + (1.5 if vip else 0.0) - 0.05 * visits
        rows.append((i, spend, plan, vip, visits, y + rng.normal(0, 0.05),
                     "yes" if y > 2.0 else "no"))
    with conn.cursor().copy("COPY shop FROM STDIN") as copy:
        for r in rows:
            copy.write_row(r)
    conn.execute("ANALYZE shop")


def test_decision_function_equals_server_predict_on_raw_rows(client, conn):
    _shop(conn)
    model = client.train("shop", "linear", label="y", features="spend, plan, vip, visits",
                         learning_rate=0.01, max_epoch_num=5, seed=3)
    assert model.n_features == 1 + 5 + 2 + 1
    raw = conn.execute("SELECT spend, plan, vip, visits FROM shop ORDER BY id LIMIT 200"
                       ).fetchall()
    # unseen and NULL categories: all zeros on both sides
    raw += [(100.0, "Platinum", True, 3), (100.0, None, None, 3)]
    local = model.decision_function(raw)
    server = [r[0] for r in conn.execute(
        "SELECT corgipile.predict(%s, r) FROM unnest(%s::float8[], %s::text[], %s::bool[], "
        "%s::int[]) WITH ORDINALITY AS r(spend, plan, vip, visits, n) ORDER BY n",
        (model.name, *map(list, zip(*raw, strict=False)))).fetchall()]
    np.testing.assert_allclose(local, server, rtol=1e-12, atol=1e-9)
    # a classifier with a text label: the margin behind predict_proba
    clf = client.train("shop", "logistic", label="churned", features="spend, plan, vip, visits",
                       max_epoch_num=5, seed=3)
    assert clf.classes == ["no", "yes"]
    proba = [r[0][0] for r in conn.execute(
        "SELECT corgipile.predict_proba(%s, s) FROM shop s ORDER BY id LIMIT 100",
        (clf.name,)).fetchall()]
    np.testing.assert_allclose(1 / (1 + np.exp(-clf.decision_function(raw[:100]))), proba,
                               rtol=1e-12)
    # pandas frames are read by column name, in any column order
    pd = pytest.importorskip("pandas")
    frame = pd.DataFrame(raw[:20], columns=["spend", "plan", "vip", "visits"])[
        ["vip", "visits", "plan", "spend"]]
    np.testing.assert_allclose(model.decision_function(frame), local[:20], rtol=1e-15)


def test_dictionary_codes_identical_across_seeds(client, conn):
    _shop(conn)
    common = dict(label="churned", features="spend, plan, vip", max_epoch_num=1,
                  block_size="1")
    a = client.train("shop", "svm", seed=1, **common)
    b = client.train("shop", "svm", seed=2, **common)
    cats = [f.get("categories") for f in a.preprocess["features"]]
    # byte order (code-point order for UTF-8), not the database's collation
    assert cats == [None, sorted(["Basic", "Pro", "Émigré", "Zeta", "alpha"]),
                    ["false", "true"]]
    assert cats[1] == ["Basic", "Pro", "Zeta", "alpha", "Émigré"]
    assert a.preprocess == b.preprocess
    assert a.params["seed"] != b.params["seed"]


def test_export_import_keeps_the_preprocessing(client, conn):
    _shop(conn)
    model = client.train("shop", "logistic", label="churned", features="spend, plan, vip",
                         max_epoch_num=2, seed=1)
    doc = corgipile.models.export_model(conn, model.name)
    assert doc["preprocess"] == model.preprocess
    back = corgipile.models.import_model(conn, doc, name="shop_copy")
    assert back.preprocess == model.preprocess
    same = conn.execute(
        "SELECT bool_and(corgipile.predict_class(%s, s) = corgipile.predict_class('shop_copy', s))"
        " FROM shop s", (model.name,)).fetchone()[0]
    assert same
