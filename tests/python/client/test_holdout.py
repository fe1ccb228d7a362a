"""validation => 'N%' (a held-out share of the training table's rows) and
the divergence ERROR, through the client: Client.train, TRAIN BY and the
scikit-learn estimators, against the real server."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
from psycopg import errors

import corgipile


@pytest.fixture
def points(conn):
    conn.execute("""
        CREATE TABLE points AS
        SELECT i AS id, CASE WHEN i % 2 = 0 THEN 1 ELSE -1 END AS label,
               ARRAY[CASE WHEN i % 2 = 0 THEN 1.0 ELSE -1.0 END + 1.5 * sin(i * 12.9898),
                     cos(i * 78.233)]::float8[] AS features
        FROM generate_series(1, 4000) AS i""")
    return "points"


def _holdout(conn, name):
    return conn.execute("SELECT params->'holdout' FROM corgipile.models WHERE model_name = %s",
                        (name,)).fetchone()[0]


def test_client_train_holds_out_a_share_of_the_rows(conn, dsn, points):
    """Every epoch reports a validation score; the model records the
    held-out rows, which with the trained ones make the whole table."""
    with corgipile.connect(dsn, progress=False) as client:
        model = client.train(points, "logistic", model_name="h20", validation="20%",
                             seed=3, max_epoch_num=3)
    assert all(e.validation_score is not None for e in model.history)
    holdout = _holdout(conn, "h20")
    assert holdout["fraction"] == 0.2 and holdout["seed"] == "3"
    assert holdout["rows"] + model.history[-1].tuples == 4000
    assert 0.17 * 4000 < holdout["rows"] < 0.23 * 4000
    assert holdout["score"] == pytest.approx(model.history[-1].validation_score)
    assert set(holdout["metrics"]) == {"accuracy", "precision", "recall", "f1", "auc",
                                       "log_loss"}
    assert model.params["validation"] == "20%"


def test_train_by_takes_a_percentage(conn, dsn, points):
    """TRAIN BY ... WITH validation = '20%': a percentage, not a table name."""
    with corgipile.connect(dsn, progress=False) as client:
        rows = client.execute(
            "SELECT * FROM points TRAIN BY svm WITH model_name = tb20, "
            "validation = '20%', seed = 5, max_epoch_num = 2").fetchall()
    assert len(rows) == 2
    assert _holdout(conn, "tb20")["seed"] == "5"


def test_same_seed_same_split_other_seed_other_split(conn, dsn, points):
    with corgipile.connect(dsn, progress=False) as client:
        a = client.train(points, "svm", model_name="a", validation="25%", seed=1,
                         max_epoch_num=1)
        b = client.train(points, "svm", model_name="b", validation="25%", seed=1,
                         max_epoch_num=1, shuffle="shuffle_once")
        c = client.train(points, "svm", model_name="c", validation="25%", seed=2,
                         max_epoch_num=1)
    assert a.history[0].tuples == b.history[0].tuples
    assert _holdout(conn, "a")["rows"] == _holdout(conn, "b")["rows"]
    # two seeds hold out rows independently: the same count would be a coincidence
    assert _holdout(conn, "a")["rows"] != _holdout(conn, "c")["rows"]
    assert a.history[0].tuples != c.history[0].tuples


@pytest.mark.parametrize("bad", ["0%", "100%", "abc%", "20 %", "1e1%"])
def test_bad_percentages_are_refused(dsn, points, bad):
    with corgipile.connect(dsn, progress=False) as client:
        with pytest.raises(errors.InvalidParameterValue, match="not a valid percentage"):
            client.train(points, "svm", validation=bad)


def test_estimator_on_arrays_with_validation(dsn):
    """fit(X, y) with validation='20%': the held-out score of every epoch is
    in history_, and the model keeps the held-out figures."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(1000, 3))
    y = (X @ [1.0, -2.0, 0.5] > 0).astype(int)
    est = corgipile.SGDClassifier(dsn, loss="log_loss", validation="20%", seed=4,
                                  max_epoch_num=3).fit(X, y)
    assert [e.validation_score is not None for e in est.history_] == [True] * 3
    holdout = est.model_.params["holdout"]
    assert holdout["rows"] + est.history_[-1].tuples == 1000
    assert holdout["score"] > 0.8


def test_divergence_is_an_error_and_nothing_is_stored(conn, dsn):
    """Unscaled money amounts, standardize off, 0.3.0's default rate for
    linear (0.01, explicit steps; the default schedule's implicit steps do
    not diverge): the loss is not finite within the first epoch."""
    conn.execute("""
        CREATE TABLE money AS
        SELECT 1000 + (i * 37 % 5000)::float8 AS amount,
               (3 * (1000 + (i * 37 % 5000)) + 50 * sin(i))::float8 AS label
        FROM generate_series(1, 2000) AS i""")
    with corgipile.connect(dsn, progress=False) as client:
        with pytest.raises(errors.NumericValueOutOfRange,
                           match=r'model "m" diverged in epoch 1') as info:
            client.train("money", "linear", model_name="m", features="amount",
                         standardize="off", seed=1, learning_rate=0.01)
    assert "learning_rate" in info.value.diag.message_hint
    assert conn.execute("SELECT count(*) FROM corgipile.models").fetchone()[0] == 0


def test_cli_train_with_a_percentage(cli_env, conn, points, tmp_path):
    """corgipile train ... --validation 20%: a validation score per epoch,
    and in the summary."""
    proc = subprocess.run([sys.executable, "-m", "corgipile", "train", points, "logistic",
                           "--name", "cli20", "--validation", "20%", "--seed", "2",
                           "--epochs", "2"],
                          cwd=tmp_path, env=cli_env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "validation 0." in proc.stdout
    assert _holdout(conn, "cli20")["seed"] == "2"
