"""corgipile.evaluate(model, dist_table): each shard scored on its node
(corgipile.evaluate_partial), the parts merged on the coordinator into the
figures a single-node evaluate of the same rows gives, AUC included
(functions/evaluate_dist.c). Only metrics and score counts cross."""

from __future__ import annotations

import psycopg
import pytest
from predict_helpers import create_role, drop_role, make_tables, train


def _metrics(conn: psycopg.Connection, model: str, table: str) -> dict[str, float]:
    return dict(conn.execute("SELECT metric, value FROM corgipile.evaluate(%s, %s)",
                             (model, table)).fetchall())


@pytest.mark.parametrize("kind,labels", [
    ("logistic", "binary"), ("svm", "binary"), ("softmax", "softmax"), ("linear", "linear")])
def test_equals_single_node_evaluate_exactly(citus, coordinator, schema, kind, labels):
    dist, local = make_tables(coordinator, "ev", labels=labels, rows=6000, nulls=True)
    train(coordinator, local, kind, f"em_{kind}")
    ours = _metrics(coordinator, f"em_{kind}", dist)
    theirs = _metrics(coordinator, f"em_{kind}", local)
    assert ours.keys() == theirs.keys()
    for metric, value in theirs.items():  # to the bit (NaN: svm's log_loss)
        assert ours[metric] == value or (value != value and ours[metric] != ours[metric]), metric
    # NULL labels every 50th row, NULL features every 70th
    assert ours["rows"] + ours["skipped_null_label"] + ours["skipped_null_features"] == 6000
    assert ours["skipped_null_label"] == 120 and ours["skipped_null_features"] > 0
    if kind in ("logistic", "svm"):
        assert 0.5 < ours["auc"] < 1.0


def test_a_shard_sends_metrics_and_score_counts_not_rows(citus, coordinator, schema):
    dist, local = make_tables(coordinator, "es", rows=3000)
    train(coordinator, local, "logistic", "em_part")
    shard, port = coordinator.execute(
        "SELECT shard_name(logicalrelid, s.shardid), n.nodeport FROM pg_dist_shard s"
        " JOIN pg_dist_placement p USING (shardid) JOIN pg_dist_node n USING (groupid)"
        " WHERE logicalrelid = %s::regclass ORDER BY s.shardid LIMIT 1", (dist,)).fetchone()
    model_hash = coordinator.execute("SELECT corgipile.model_hash('em_part')").fetchone()[0]
    with citus.connect(port) as worker:
        rows = worker.execute("SELECT score, positives, negatives, state FROM "
                              "corgipile.evaluate_partial('em_part', %s, %s)",
                              (shard, model_hash)).fetchall()
        scored = worker.execute(f"SELECT count(*), count(DISTINCT features) FROM {shard}").fetchone()
    state, scores = rows[0], rows[1:]
    assert state[0] is None and state[3] is not None
    assert [r[3] for r in scores] == [None] * len(scores)
    # one row per distinct score, strictly ascending, counting every row of the shard
    assert 1 < len(scores) <= scored[1]
    assert all(a[0] < b[0] for a, b in zip(scores, scores[1:], strict=False))
    assert sum(r[1] + r[2] for r in scores) == scored[0]
    with citus.connect(port) as worker:
        with pytest.raises(psycopg.errors.ObjectNotInPrerequisiteState,
                           match='this node\'s copy of model "em_part" differs'):
            worker.execute("SELECT * FROM corgipile.evaluate_partial('em_part', %s, 'x')",
                           (shard,))


def test_a_node_whose_copy_differs_is_named(citus, coordinator, schema):
    dist, local = make_tables(coordinator, "ed", rows=1000)
    train(coordinator, local, "logistic", "em_diff")
    port = citus.worker_ports[1]
    with citus.connect(port) as worker:
        worker.execute("UPDATE corgipile.model_store SET weights[1] = 0 WHERE model_name = 'em_diff'")
    with pytest.raises(psycopg.errors.ObjectNotInPrerequisiteState,
                       match=f"node 127.0.0.1:{port}: this node's copy of model \"em_diff\" differs"):
        _metrics(coordinator, "em_diff", dist)


def test_a_worker_that_is_down_is_named(citus, coordinator, schema):
    dist, local = make_tables(coordinator, "ew", rows=1000)
    train(coordinator, local, "logistic", "em_down")
    port = citus.worker_ports[0]
    citus.stop_worker(0)
    try:
        with pytest.raises(psycopg.errors.ConnectionFailure,
                           match=f"could not connect to node 127.0.0.1:{port}"):
            _metrics(coordinator, "em_down", dist)
    finally:
        citus.start_worker(0)
    assert _metrics(coordinator, "em_down", dist) == _metrics(coordinator, "em_down", local)


def test_a_role_without_select_gets_nothing(citus, coordinator, schema):
    dist, local = make_tables(coordinator, "ep", rows=1000)
    train(coordinator, local, "logistic", "em_priv")
    create_role(citus, coordinator, "ep_bob")
    try:
        coordinator.execute(f"GRANT USAGE ON SCHEMA {schema} TO ep_bob")
        coordinator.execute("SELECT corgipile.grant_model('em_priv', 'ep_bob')")
        with citus.connect(user="ep_bob") as bob:
            bob.execute(f"SET search_path = {schema}")
            with pytest.raises(psycopg.errors.InsufficientPrivilege, match="permission denied"):
                _metrics(bob, "em_priv", dist)
            # SELECT on the coordinator's table only, not on the shards: the workers refuse
            coordinator.execute("SET citus.enable_ddl_propagation = off")
            coordinator.execute(f"GRANT SELECT ON {dist} TO ep_bob")
            coordinator.execute("RESET citus.enable_ddl_propagation")
            with pytest.raises(psycopg.errors.InsufficientPrivilege,
                               match=r"node 127\.0\.0\.1:\d+: permission denied"):
                _metrics(bob, "em_priv", dist)
            coordinator.execute(f"GRANT SELECT ON {dist} TO ep_bob")
            assert _metrics(bob, "em_priv", dist) == _metrics(coordinator, "em_priv", local)
    finally:
        coordinator.execute(f"REVOKE ALL ON SCHEMA {schema} FROM ep_bob")
        drop_role(coordinator, "ep_bob")
