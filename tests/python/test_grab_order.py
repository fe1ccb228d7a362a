"""shuffle => 'grab' against corgipile on a label-clustered table.

The block order GraB computes from the previous epoch's per-block gradient
sums should fit a clustered table better than a random block order: at a
constant learning rate and with the same seed, grab ends with a lower
training loss.  The comparison is a fixed-seed check of that one setting
(the convergence study measures it more widely; docs/grab.md).
"""

from __future__ import annotations

import pytest

from datagen import linear_task, load_table, weights

EPOCHS = 10


@pytest.fixture
def clustered(conn):
    x, y = linear_task(6000, 8, seed=21)
    load_table(conn, "grab_clustered", x, y, order="label")
    return conn


def train(conn, name: str, shuffle: str, seed: int = 5, **extra) -> None:
    args = ", ".join(f"{k} => %({k})s" for k in extra)
    conn.execute(
        "SELECT count(*) FROM corgipile.train('grab_clustered', 'logistic', "
        "model_name => %(name)s, shuffle => %(shuffle)s, seed => %(seed)s, "
        "learning_rate => 0.01, decay => 1.0, max_epoch_num => %(epochs)s"
        + (", " + args if args else "") + ")",
        {"name": name, "shuffle": shuffle, "seed": seed, "epochs": EPOCHS, **extra})


def log_loss(conn, name: str) -> float:
    return conn.execute(
        "SELECT value FROM corgipile.evaluate(%s, 'grab_clustered') WHERE metric = 'log_loss'",
        (name,)).fetchone()[0]


def test_grab_keeps_blocks_in_order_on_small_blocks(clustered):
    conn = clustered
    train(conn, "grab_a", "grab")
    params = conn.execute("SELECT params FROM corgipile.models WHERE model_name = 'grab_a'"
                          ).fetchone()[0]
    # one-page blocks of this table hold far fewer than 100 rows
    assert params["grab_buffer_shuffle"] == "false"
    assert params["grab_projected"] == "false"


def test_grab_reaches_a_lower_training_loss_than_corgipile(clustered):
    conn = clustered
    train(conn, "grab_loss", "grab")
    train(conn, "corgipile_loss", "corgipile")
    grab, corgi = log_loss(conn, "grab_loss"), log_loss(conn, "corgipile_loss")
    assert grab < corgi, (grab, corgi)


def test_grab_same_seed_same_weights(clustered):
    conn = clustered
    train(conn, "grab_s1", "grab", seed=9)
    train(conn, "grab_s2", "grab", seed=9)
    train(conn, "grab_s3", "grab", seed=9, double_buffer=False)
    train(conn, "grab_s4", "grab", seed=10)
    w1 = weights(conn, "grab_s1")
    assert w1 == weights(conn, "grab_s2")
    assert w1 == weights(conn, "grab_s3")
    assert w1 != weights(conn, "grab_s4")
    states = {r[0] for r in conn.execute(
        "SELECT params->>'grab_state' FROM corgipile.models "
        "WHERE model_name IN ('grab_s1', 'grab_s2', 'grab_s3')")}
    assert len(states) == 1


def test_train_by_with_grab_and_warm_start(clustered):
    """The client reads train()'s signature from pg_proc: TRAIN BY takes
    shuffle = 'grab' and warm_start like any other parameter."""
    import corgipile

    conn = clustered
    client = corgipile.Client(conn, progress=False)
    client.execute("SELECT * FROM grab_clustered TRAIN BY logistic "
                   "WITH shuffle = 'grab', max_epoch_num = 2, seed = 1, model_name = 'gw1'")
    client.execute("SELECT * FROM grab_clustered TRAIN BY logistic "
                   "WITH shuffle = 'grab', max_epoch_num = 1, seed = 1, learning_rate = 1e-12, "
                   "warm_start = 'gw1', model_name = 'gw2'")
    w1, w2 = weights(conn, "gw1"), weights(conn, "gw2")
    assert any(w != 0.0 for w in w1)
    assert max(abs(a - b) for a, b in zip(w1, w2)) < 1e-6


def test_estimator_warm_start(clustered, dsn):
    import corgipile

    conn = clustered
    train(conn, "gw_est", "grab")
    clf = corgipile.SGDClassifier(dsn, loss="log_loss", shuffle="grab", warm_start="gw_est",
                                  max_epoch_num=1, learning_rate=1e-12, seed=1)
    clf.fit("grab_clustered")
    # coef_ and intercept_ are in the features' original units
    start = [r[0] for r in conn.execute(
        "SELECT weight FROM corgipile.model_coefficients('gw_est') WITH ORDINALITY "
        "AS c(o, f, weight, n) ORDER BY n")]
    got = list(clf.coef_.ravel()) + list(clf.intercept_.ravel())
    assert max(abs(a - b) for a, b in zip(start, got)) < 1e-6


def test_grab_with_shuffled_buffers_same_seed_same_weights(clustered):
    """Blocks of 8 pages hold more than 100 rows: the buffers are shuffled
    (and dense rows gathered, with their blocks, before training)."""
    conn = clustered
    for name, db in (("gsb1", True), ("gsb2", True), ("gsb3", False)):
        train(conn, name, "grab", seed=4, block_size="8", buffer_size="50%",
              double_buffer=db)
    params = conn.execute("SELECT params FROM corgipile.models WHERE model_name = 'gsb1'"
                          ).fetchone()[0]
    assert params["grab_buffer_shuffle"] == "true"
    w = weights(conn, "gsb1")
    assert w == weights(conn, "gsb2") == weights(conn, "gsb3")
