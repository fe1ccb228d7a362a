"""shuffle => 'grab' against corgipile on a label-clustered table.

The block order GraB computes from the previous epoch's per-block gradient
sums should fit a clustered table better than a random block order: at a
constant learning rate and with the same seed, grab ends with a lower
training loss.  The comparison is a fixed-seed check of that one setting
(the convergence study measures it more widely; docs/grab.md).
"""

from __future__ import annotations

import numpy as np
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


def gaussian_classes(n: int, d: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Two overlapping Gaussian classes (scripts/grab_simulation.py's table):
    the loss has a minimum at a finite, small |w|, so that 10 epochs get near
    it and what is left of the gap is what the order costs.  (On nearly
    separable data such as linear_task's, every order is still far from a
    minimum at a large |w| after 10 epochs and ends at the same gap:
    docs/grab.md.)"""
    rng = np.random.default_rng(seed)
    y = np.where(rng.random(n) < 0.5, -1, 1)
    mu = rng.normal(size=d)
    mu *= 1.6 / np.linalg.norm(mu)
    return rng.normal(size=(n, d)) + 0.3 + y[:, None] * mu[None, :], y


def min_log_loss(x: np.ndarray, y: np.ndarray) -> float:
    """f*: the minimum of the mean log loss (no penalty, as the engine's l2 = 0),
    by Newton's method."""
    a = np.hstack([x, np.ones((len(y), 1))])
    w = np.zeros(a.shape[1])
    for _ in range(30):
        p = 1.0 / (1.0 + np.exp(y * (a @ w)))
        h = (a * (p * (1 - p))[:, None]).T @ a / len(y)
        w -= np.linalg.solve(h, a.T @ (-y * p) / len(y))
    return float(np.mean(np.logaddexp(0.0, -y * (a @ w))))


def test_grab_halves_corgipiles_gap_on_clustered_gaussians(conn):
    """The issue's goal on a small table: at a constant rate, grab's final
    f(w) - f* is at most half of corgipile's.  Measured over 3 tables x 5
    seeds the ratio was 0.004-0.38 (this pair: 0.016); docs/grab.md."""
    x, y = gaussian_classes(20000, 8, seed=0)
    load_table(conn, "grab_gauss", x, y, order="label")
    fstar = min_log_loss(x, y)
    gap = {}
    for shuffle in ("corgipile", "grab"):
        conn.execute(
            "SELECT count(*) FROM corgipile.train('grab_gauss', 'logistic', "
            "model_name => %s, shuffle => %s, seed => 5, learning_rate => 0.01, decay => 1.0, "
            "max_epoch_num => 10, standardize => 'off')", (f"gauss_{shuffle}", shuffle))
        gap[shuffle] = conn.execute(
            "SELECT value FROM corgipile.evaluate(%s, 'grab_gauss') WHERE metric = 'log_loss'",
            (f"gauss_{shuffle}",)).fetchone()[0] - fstar
    assert gap["corgipile"] > 0 and gap["grab"] > 0, gap
    assert gap["grab"] <= 0.5 * gap["corgipile"], gap


def test_grab_buffer_setting(clustered):
    """corgipile.grab_buffer overrides the rows-per-block rule; the choice is
    recorded in params and shown by EXPLAIN."""
    conn = clustered
    for mode, recorded, shown in (("shuffled", "true", "shuffled"),
                                  ("kept", "false", "kept in order"),
                                  ("auto", "false", "kept in order")):
        conn.execute(f"SET corgipile.grab_buffer = {mode}")
        plan = "\n".join(r[0] for r in conn.execute(
            "EXPLAIN (COSTS OFF) SELECT * FROM corgipile.train('grab_clustered', 'logistic', "
            "shuffle => 'grab')"))
        assert f"GraB Buffer: {shown}" in plan, plan
        train(conn, f"gbuf_{mode}", "grab")
        params = conn.execute("SELECT params FROM corgipile.models WHERE model_name = %s",
                              (f"gbuf_{mode}",)).fetchone()[0]
        assert params["grab_buffer_shuffle"] == recorded, (mode, params)
    # kept and auto (which keeps on this table) train the same way; shuffled does not
    assert weights(conn, "gbuf_kept") == weights(conn, "gbuf_auto")
    assert weights(conn, "gbuf_kept") != weights(conn, "gbuf_shuffled")
    conn.execute("RESET corgipile.grab_buffer")
    with pytest.raises(Exception, match="grab_buffer"):
        conn.execute("SET corgipile.grab_buffer = sideways")


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
    assert max(abs(a - b) for a, b in zip(w1, w2, strict=True)) < 1e-6


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
    assert max(abs(a - b) for a, b in zip(start, got, strict=True)) < 1e-6


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


def test_grab_units_same_seed_same_weights(clustered):
    """corgipile.grab_unit_blocks groups blocks into GraB units: recorded in
    params, and the same seed gives the same weights with and without the
    helper thread."""
    conn = clustered
    conn.execute("SET corgipile.grab_unit_blocks = 4")
    try:
        for name, db in (("gu1", True), ("gu2", True), ("gu3", False)):
            train(conn, name, "grab", seed=4, double_buffer=db)
    finally:
        conn.execute("RESET corgipile.grab_unit_blocks")
    params = conn.execute("SELECT params FROM corgipile.models WHERE model_name = 'gu1'"
                          ).fetchone()[0]
    assert params["grab_unit_blocks"] == 4
    assert params["grab_granularity"] == "blocks"
    w = weights(conn, "gu1")
    assert w == weights(conn, "gu2") == weights(conn, "gu3")
    train(conn, "gu_block", "grab", seed=4)
    assert weights(conn, "gu_block") != w


def test_grab_buffer_rule_follows_the_step(conn):
    """From the second epoch GraB's epoch (its order, the buffer kept) needs
    rate x mean g^2 x block-mean |x|^2 <= 0.2, else the epoch is corgipile's:
    on features ten times larger a large rate gives random, shuffled later
    epochs, a small one keeps them all (params shows both)."""
    x, y = linear_task(6000, 8, seed=21)
    load_table(conn, "grab_wide", 10.0 * x, y, order="label")
    for name, rate in (("gr_small", 0.0001), ("gr_large", 0.5)):
        conn.execute(
            "SELECT count(*) FROM corgipile.train('grab_wide', 'logistic', "
            "model_name => %s, shuffle => 'grab', seed => 5, learning_rate => %s, "
            "decay => 1.0, max_epoch_num => %s, standardize => 'off')", (name, rate, EPOCHS))
    small, large = (conn.execute("SELECT params FROM corgipile.models WHERE model_name = %s",
                                 (n,)).fetchone()[0] for n in ("gr_small", "gr_large"))
    assert small["grab_epochs_kept"] == EPOCHS, small
    assert small["grab_step"] <= 0.2 < large["grab_step"], (small["grab_step"], large["grab_step"])
    assert large["grab_epochs_kept"] < EPOCHS, large
    assert large["grab_buffer_shuffle"] == "true"
    # ... and a random block order (corgipile's)
    assert small["grab_epochs_random"] == 0
    assert large["grab_epochs_random"] == EPOCHS - large["grab_epochs_kept"], large
