"""Imputation stored with the model (train(missing => ...)):
against scikit-learn's pipeline of the same model, SimpleImputer for the
NULL numbers, StandardScaler, OneHotEncoder for the text column and
MissingIndicator for missing_indicator, on a small table with NULLs, where
the default training is exact (the polish): the statistics and fills
equal scikit-learn's, and the weights and predictions of every row (those
with a NULL included) match; before imputation those rows had none."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("sklearn")
from sklearn.compose import ColumnTransformer
from sklearn.impute import MissingIndicator, SimpleImputer
from sklearn.linear_model import LogisticRegression, Ridge
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import OneHotEncoder, StandardScaler

N = 240
NUMS = ["a", "b", "c"]


def _data(seed: int = 3):
    """Three numbers on different scales, a with NULLs in one row in 6, b
    in one in 9 (c has none), a text column, a binary and a real label."""
    rng = np.random.default_rng(seed)
    x = np.column_stack([rng.normal(5, 2, N), rng.normal(100, 30, N), rng.uniform(-1, 1, N)])
    cat = rng.choice(["north", "south", "west"], size=N)
    score = (x[:, 0] - 5) / 2 - (x[:, 1] - 100) / 30 + x[:, 2] + (cat == "west") \
        + rng.normal(0, 1.0, N)
    y = (score > 0.3).astype(int)
    target = 3 * x[:, 0] + 0.1 * x[:, 1] - 2 * x[:, 2] + 4 * (cat == "south") \
        + rng.normal(0, 1, N)
    x[rng.random(N) < 1 / 6, 0] = np.nan
    x[rng.random(N) < 1 / 9, 1] = np.nan
    return x, cat, y, target


@pytest.fixture
def table(conn):
    x, cat, y, target = _data()
    conn.execute("CREATE TABLE nul (id int, label int, target float8, a float8, b float8, "
                 "c float8, region text)")
    with conn.cursor().copy("COPY nul FROM STDIN (FORMAT BINARY)") as copy:
        copy.set_types(["int4", "int4", "float8", "float8", "float8", "float8", "text"])
        for i in range(N):
            copy.write_row((i, int(y[i]), float(target[i]),
                            *(None if np.isnan(v) else float(v) for v in x[i]), str(cat[i])))
    conn.execute("ANALYZE nul")
    conn.execute("SET corgipile.progress = off")
    return conn, x, cat, y, target


def _pipeline(strategy: str, indicator: bool, model):
    imputer = (SimpleImputer(strategy="constant", fill_value=0.0) if strategy == "zero"
               else SimpleImputer(strategy=strategy))
    parts = [("num", make_pipeline(imputer, StandardScaler()), [0, 1, 2]),
             ("cat", OneHotEncoder(), [3])]
    if indicator:
        parts.append(("ind", MissingIndicator(), [0, 1, 2]))
    return make_pipeline(ColumnTransformer(parts), model)


def _frame(x, cat):
    import pandas as pd

    return pd.DataFrame({"a": x[:, 0], "b": x[:, 1], "c": x[:, 2], "region": cat})


def _train(conn, name: str, kind: str, label: str, strategy: str, indicator: bool) -> dict:
    conn.execute("SELECT count(*) FROM corgipile.train('nul', %s, model_name => %s, "
                 "label => %s, features => 'a, b, c, region', seed => 1, missing => %s, "
                 "missing_indicator => %s)", (kind, name, label, strategy, indicator))
    return conn.execute("SELECT n_features, weights, preprocess, params, history "
                        "FROM corgipile.models WHERE model_name = %s", (name,)).fetchone()


@pytest.mark.parametrize("strategy,indicator", [("mean", False), ("median", True),
                                                ("zero", False)])
def test_logistic_with_nulls_is_scikit_learns(table, strategy, indicator):
    pd = pytest.importorskip("pandas")
    conn, x, cat, y, _ = table
    n_features, weights, prep, params, history = _train(conn, "imp", "logistic", "label",
                                                        strategy, indicator)
    assert history[0]["tuples"] == N and params["missing"] == strategy
    assert params["polish"]["converged"], params["polish"]
    sk = _pipeline(strategy, indicator,
                   LogisticRegression(max_iter=10000, tol=1e-10)).fit(_frame(x, cat), y)
    ct = sk[0]
    imputer, scaler = ct.named_transformers_["num"]
    # the fill and the statistics of the imputed columns are scikit-learn's
    fills = [f["fill"] for f in prep["features"][:3]]
    assert np.allclose(fills, np.asarray(imputer.statistics_, dtype=float), rtol=1e-12, atol=0)
    assert np.allclose([f["mean"] for f in prep["features"][:3]], scaler.mean_, rtol=1e-12)
    assert np.allclose([f["std"] for f in prep["features"][:3]], scaler.scale_, rtol=1e-12)
    assert [f.get("nulls", False) for f in prep["features"][:3]] == [True, True, False]
    # the same features in the same order (numbers, categories, indicators)
    assert n_features == len(sk[-1].coef_[0]) == (8 if indicator else 6)
    w = np.array(weights)
    # every row is scored, those with a NULL too, and through scikit-learn's
    # transform exactly: the model's own weights on scikit-learn's imputed,
    # scaled and encoded rows give the server's probabilities
    rows = conn.execute("SELECT id, corgipile.predict_proba('imp', n) FROM nul n ORDER BY id"
                        ).fetchall()
    got = np.array([r[1][0] for r in rows])
    assert np.isnan(x[:, 0]).sum() > 20 and not any(r[1] is None for r in rows)
    xt = ct.transform(_frame(x, cat))
    xt = np.asarray(xt.todense() if hasattr(xt, "todense") else xt, dtype=float)
    assert np.abs(got - 1.0 / (1.0 + np.exp(-(xt @ w[:-1] + w[-1])))).max() < 1e-12
    # and the model is the exact solver's, to the polish's bound (a largest
    # gradient entry of 1e-4, scikit-learn's own default): probabilities
    # within 1e-3, as tests/python/test_polish.py holds them
    want = sk.predict_proba(_frame(x, cat))[:, 1]
    assert np.abs(got - want).max() < 1e-3
    metrics = dict(conn.execute("SELECT metric, value FROM corgipile.evaluate('imp', 'nul')"
                                ).fetchall())
    assert metrics["rows"] == N and metrics["skipped_null_features"] == 0
    assert metrics["accuracy"] == pytest.approx(float(np.mean((got > 0.5) == (y == 1))),
                                                abs=1e-12)
    assert abs(metrics["accuracy"] - float(np.mean(sk.predict(_frame(x, cat)) == y))) <= 2 / N
    del pd


def test_linear_with_nulls_is_ridges(table):
    conn, x, cat, _, target = table
    _, weights, prep, params, _ = _train(conn, "imp_lin", "linear", "target", "mean", True)
    assert params["polish"]["converged"], params["polish"]
    sk = _pipeline("mean", True, Ridge(alpha=1.0)).fit(_frame(x, cat), target)
    rows = conn.execute("SELECT id, corgipile.predict('imp_lin', n) FROM nul n ORDER BY id"
                        ).fetchall()
    got = np.array([r[1] for r in rows])
    want = sk.predict(_frame(x, cat))
    assert np.abs(got - want).max() < 1e-4 * np.abs(want).max()


def test_the_default_skips_and_says_how_to_keep_the_rows(table):
    """Before imputation (and with the default): the rows with a NULL are
    left out of training and get no prediction."""
    conn, x, *_ = table
    notices = []
    # a Diagnostic is valid only inside the handler: keep its texts
    conn.add_notice_handler(lambda d: notices.append((d.message_primary, d.message_hint)))
    conn.execute("SELECT count(*) FROM corgipile.train('nul', 'logistic', model_name => 'skp', "
                 "features => 'a, b, c, region', seed => 1)")
    complete = int((~np.isnan(x).any(axis=1)).sum())
    skipped = [d for d in notices if "skipped" in (d[0] or "")]
    assert len(skipped) == 1 and f"skipped {N - complete} rows" in skipped[0][0]
    assert "missing => 'mean'" in (skipped[0][1] or "")
    n_null = conn.execute("SELECT count(*) FROM nul n WHERE corgipile.predict('skp', n) IS NULL"
                          ).fetchone()[0]
    assert n_null == N - complete


@pytest.mark.parametrize("standardize", ["auto", "off"])
def test_without_nulls_imputing_changes_nothing(conn, standardize):
    """On a table without a NULL every imputing training is the skipping
    one, bit for bit: the first pass still caches the rows it reads for
    epoch 1 (an array table, read straight from the page), and nothing
    else converts a row otherwise."""
    from datagen import linear_task, load_table

    x, y = linear_task(3000, 6, seed=8)
    load_table(conn, "full", x, y)
    conn.execute("SET corgipile.progress = off")
    weights = {}
    for missing in ("skip", "mean", "median", "zero"):
        conn.execute("SELECT count(*) FROM corgipile.train('full', 'svm', model_name => %s, "
                     "seed => 4, max_epoch_num => 2, learning_rate => 0.05, "
                     "standardize => %s, missing => %s)", (missing, standardize, missing))
        weights[missing] = conn.execute("SELECT weights FROM corgipile.models "
                                        "WHERE model_name = %s", (missing,)).fetchone()[0]
    assert weights["mean"] == weights["skip"]
    assert weights["median"] == weights["skip"]
    assert weights["zero"] == weights["skip"]


def test_parallel_workers_impute_as_the_leader(table):
    """The leader's first pass learns the fills; workers read them from
    the preprocessing it hands them, and impute the rows they read."""
    conn = table[0]
    conn.execute("CREATE TABLE big AS SELECT g * 1000 + n.id AS id, n.label, n.a, n.b, n.c, "
                 "n.region FROM nul n, generate_series(0, 199) g")
    out = {}
    for workers in (1, 3):
        conn.execute("SELECT count(*) FROM corgipile.train('big', 'logistic', model_name => %s, "
                     "features => 'a, b, c, region', seed => 1, max_epoch_num => 1, "
                     "buffer_size => '5%%', missing => 'mean', missing_indicator => true, "
                     "workers => %s)", (f"w{workers}", workers))
        out[workers] = conn.execute("SELECT preprocess, history, params FROM corgipile.models "
                                    "WHERE model_name = %s", (f"w{workers}",)).fetchone()
    assert out[3][2]["workers"] == 3, out[3][2]
    assert out[3][0] == out[1][0]
    assert out[3][1][0]["tuples"] == out[1][1][0]["tuples"] == 200 * N
