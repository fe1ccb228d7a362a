"""The Bismarck baseline (benchmarks/bismarck + corgipile.bench.bismarck)
against the engine and against a plain Python implementation.

What is compared:
  - bit for bit: the aggregate's epoch loop over a copy shuffled once with
    ORDER BY random(), and the engine's `no_shuffle` over that same copy.
    Both visit the rows in storage order and do the same arithmetic, so the
    weights and every epoch's loss and score must be identical.
  - within tolerance: the aggregate over its shuffled copy, and the engine's
    own `shuffle_once` (a different random order, from the engine's
    two-pass shuffle) on the clustered table: the same held-out accuracy and
    final loss up to the noise of a different order.
  - against a reference written here in Python from the update rule, so a
    mistake shared by the engine and the aggregate would still show.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from corgipile.bench import bismarck
from corgipile.bench.config import TrainSettings
from corgipile.bench.datasets import describe_table
from datagen import accuracy, linear_task, load_table, weights


def engine_train(conn, table, model, name, **params):
    params.setdefault("standardize", "off")  # the baseline reads raw features
    args = ", ".join(f"{k} => %({k})s" for k in params)
    return conn.execute(
        f"SELECT epoch, loss, score FROM corgipile.train(%(t)s, %(m)s, model_name => %(n)s, {args})",
        {"t": table, "m": model, "n": name, **params}).fetchall()


@pytest.fixture
def clustered(bconn):
    """3,000 rows x 7 features (7: the dot product's 4-way unrolling has a
    remainder) stored clustered by label, and a held-out table."""
    x, y = linear_task(4000, 7, seed=21)
    load_table(bconn, "clustered", x[:3000], y[:3000], order="label")
    load_table(bconn, "heldout", x[3000:], y[3000:])
    return bconn


@pytest.mark.parametrize("model,l2,feature_type", [
    ("svm", 0.0, "float8[]"),
    ("logistic", 0.0, "float8[]"),
    ("svm", 0.01, "float8[]"),
    ("logistic", 0.001, "float4[]"),
])
def test_same_weights_as_engine_no_shuffle_over_the_same_copy(bconn, model, l2, feature_type):
    conn = bconn
    x, y = linear_task(3000, 7, seed=21)
    load_table(conn, "clustered", x, y, order="label", feature_type=feature_type)
    ds = describe_table(conn, "clustered")
    copy, seconds = bismarck.shuffle_once_copy(conn, ds, seed=3)
    assert seconds > 0
    # the copy is really shuffled: the clustered table starts with 1,500 -1s
    first = [r[0] for r in conn.execute(f"SELECT label FROM {copy} LIMIT 200")]
    assert 40 < sum(1 for v in first if v > 0) < 160, first[:20]

    cfg = TrainSettings(epochs=4, learning_rate=0.05, decay=0.9, l2=l2)
    ours, w_ours = bismarck.train(conn, ds, model, copy, cfg, score=False)
    theirs = engine_train(conn, copy, model, "eng", shuffle="no_shuffle", learning_rate=0.05,
                          decay=0.9, max_epoch_num=4, l2=l2, seed=1)
    w_eng = weights(conn, "eng")

    assert len(w_ours) == 8
    assert any(abs(v) > 1e-3 for v in w_ours)
    assert w_ours == w_eng, max(abs(a - b) for a, b in zip(w_ours, w_eng, strict=True))
    assert [(e.epoch, e.loss, e.train_score) for e in ours] == [tuple(r) for r in theirs]


def test_same_weights_as_engine_shuffle_once_within_tolerance(clustered):
    conn = clustered
    ds = describe_table(conn, "clustered", "heldout")
    copy, _ = bismarck.shuffle_once_copy(conn, ds, seed=5)
    cfg = TrainSettings(epochs=5, learning_rate=0.05, decay=0.95)
    theirs = engine_train(conn, "clustered", "logistic", "eng_so", shuffle="shuffle_once",
                          learning_rate=0.05, decay=0.95, max_epoch_num=5, seed=5)
    ours, w_ours = bismarck.train(conn, ds, "logistic", copy, cfg)
    w_eng = np.array(weights(conn, "eng_so"))

    acc_eng = accuracy(conn, "eng_so", "heldout")
    acc_ours = ours[-1].test_score
    print(f"\nheld-out accuracy: bismarck {acc_ours:.4f}, engine shuffle_once {acc_eng:.4f}; "
          f"final loss {ours[-1].loss:.4f} vs {theirs[-1][1]:.4f}")
    assert acc_eng > 0.85 and acc_ours > 0.85
    assert abs(acc_ours - acc_eng) <= 0.02
    assert math.isclose(ours[-1].loss, theirs[-1][1], rel_tol=0.1)
    w = np.array(w_ours)
    cosine = float(w @ w_eng / (np.linalg.norm(w) * np.linalg.norm(w_eng)))
    assert cosine > 0.98, cosine
    # while the table as stored (clustered) is clearly worse for both
    noshuf, _ = bismarck.train(conn, ds, "logistic", ds.table, cfg)
    assert noshuf[-1].test_score < acc_ours - 0.03


def reference_sgd(rows, model, cfg):
    """Per-tuple SGD written from the update rule, nothing shared."""
    d = len(rows[0][1])
    w = [0.0] * d
    b = 0.0
    out = []
    for e in range(cfg.epochs):
        lr = cfg.learning_rate * cfg.decay ** e
        loss = 0.0
        for label, x in rows:
            y = 1.0 if label > 0 else -1.0
            z = sum(wi * xi for wi, xi in zip(w, x, strict=True)) + b
            if model == "svm":
                loss += max(0.0, 1 - y * z)
                g = -y if y * z < 1 else 0.0
            else:
                loss += math.log1p(math.exp(-y * z))
                g = -y / (1 + math.exp(y * z))
            w = [(1 - lr * cfg.l2) * wi - lr * g * xi for wi, xi in zip(w, x, strict=True)]
            b -= lr * g
        out.append(loss / len(rows))
    return w + [b], out


@pytest.mark.parametrize("model", ["svm", "logistic"])
def test_matches_a_python_reference(bconn, model):
    conn = bconn
    x, y = linear_task(400, 5, seed=4)
    load_table(conn, "small", x, y, order="label")
    ds = describe_table(conn, "small")
    copy, _ = bismarck.shuffle_once_copy(conn, ds, seed=9)
    cfg = TrainSettings(epochs=3, learning_rate=0.1, decay=0.8, l2=0.01)
    epochs, w = bismarck.train(conn, ds, model, copy, cfg, score=False)
    rows = conn.execute(f"SELECT label, features FROM {copy} ORDER BY ctid").fetchall()
    w_ref, losses = reference_sgd(rows, model, cfg)
    assert np.allclose(w, w_ref, rtol=1e-9, atol=1e-12), (w, w_ref)
    assert np.allclose([e.loss for e in epochs], losses, rtol=1e-9)


def test_labels_booleans_and_column_lists(bconn):
    """0/1 labels, boolean labels and a list of feature columns give the
    same model as -1/+1 labels and an array."""
    conn = bconn
    x, y = linear_task(500, 3, seed=8)
    load_table(conn, "base", x, y)
    conn.execute("CREATE TABLE variants AS SELECT id, label, (label > 0) AS flag, "
                 "(label > 0)::int AS zero_one, features, features[1] AS a, features[2] AS b, "
                 "features[3] AS c FROM base ORDER BY id")
    cfg = TrainSettings(epochs=2, learning_rate=0.1, decay=0.9)
    results = []
    for label, features in (("label", "features"), ("flag", "features"),
                            ("zero_one", "a, b, c")):
        ds = describe_table(conn, "variants", label=label, features=features)
        results.append(bismarck.train(conn, ds, "svm", ds.table, cfg, score=False)[1])
    assert results[0] == results[1] == results[2]


def test_run_records_the_copy_time_as_setup(clustered):
    conn = clustered
    ds = describe_table(conn, "clustered", "heldout")
    copy = bismarck.shuffle_once_copy(conn, ds, seed=2)
    cfg = TrainSettings(epochs=2)
    r = bismarck.run(conn, ds, "svm", "shuffle_once", cfg, copy)
    assert r.status == "ok" and r.setup_seconds == copy[1] > 0
    assert [e.epoch for e in r.epochs] == [1, 2]
    assert all(0.0 <= e.test_score <= 1.0 and e.seconds > 0 for e in r.epochs)
    assert all(e.train_score is not None and e.loss >= 0 for e in r.epochs)
    r = bismarck.run(conn, ds, "softmax", "shuffle_once", cfg, copy)
    assert r.status == "skipped" and "softmax" in r.reason
