"""A model stored on the coordinator is on every worker (model/model_sync.c,
model/model_copy.c): copied in the coordinator's transaction with two-phase
commit by train, import, rename, grant, revoke, annotate, reassign and drop;
nothing left on a worker when the coordinator aborts; model_hash and
check_model_copies say whether every node holds the same model."""

from __future__ import annotations

import json

import psycopg
import pytest
from predict_helpers import create_role, drop_role, hashes, make_tables, train, worker_rows

WEIGHTS = [0.1 + 0.2, 1e-300, 3.141592653589793, -2.5e17]


def _import(conn: psycopg.Connection, name: str, weights=WEIGHTS) -> None:
    conn.execute(
        "SELECT corgipile.import_model(%s, 'linear', 'elsewhere.t', 'y', ARRAY['a','b','c'], NULL, 3,"
        " %s::float8[], NULL, '{\"layout\": \"columns\"}', '[]')", (name, weights))


def _everywhere(citus, coordinator, model: str) -> None:
    """The model is on every node, the same everywhere."""
    h = hashes(citus, coordinator, model)
    assert h[0] is not None and len(h[0]) == 64
    assert h == [h[0]] * 3, h


def _nowhere(citus, coordinator, model: str) -> None:
    assert hashes(citus, coordinator, model) == [None, None, None]


def _no_prepared(citus) -> None:
    assert worker_rows(citus, "SELECT gid FROM pg_prepared_xacts") == [[], []]


def test_train_copies_the_model_to_every_worker(citus, coordinator, schema):
    _, local = make_tables(coordinator, "rt", rows=2000)
    train(coordinator, local, "logistic", "rm_train")
    _everywhere(citus, coordinator, "rm_train")
    # the workers' rows read as the coordinator's: owner, weights, preprocessing
    # (float8 read back in the server's shortest exact digits: every bit)
    sql = ("SELECT owner, weights, preprocess, params, history, created_at FROM corgipile.models"
           " WHERE model_name = 'rm_train'")
    ours = coordinator.execute(sql).fetchall()
    assert ours[0][2] is not None  # standardized: preprocessing travels too
    for theirs in worker_rows(citus, sql):
        assert theirs == ours
    assert coordinator.execute("SELECT * FROM corgipile.check_model_copies()").fetchall() == []
    _no_prepared(citus)


def test_import_keeps_every_bit_of_the_weights(citus, coordinator, schema):
    _import(coordinator, "rm_bits")
    for rows in worker_rows(citus, "SELECT weights FROM corgipile.models WHERE model_name = 'rm_bits'"):
        assert rows == [(WEIGHTS,)]  # the server's shortest exact digits: every bit
    _everywhere(citus, coordinator, "rm_bits")


def test_many_models_in_one_transaction(citus, coordinator, schema):
    """Several models changed by one statement reach the workers together,
    and go together."""
    names = [f"rm_many_{i}" for i in range(4)]
    with coordinator.transaction():
        for name in names:
            _import(coordinator, name)
    for name in names:
        _everywhere(citus, coordinator, name)
    coordinator.execute("SELECT corgipile.drop_model(model_name) FROM corgipile.models "
                        "WHERE model_name LIKE 'rm_many_%' ORDER BY model_name")
    for name in names:
        _nowhere(citus, coordinator, name)


def test_copy_models_writes_a_missing_copy_again(citus, coordinator, schema):
    """A worker that lost a model (or joined after it was stored) gets it
    back from copy_models(), and check_model_copies() is empty again."""
    _import(coordinator, "rm_again")
    with citus.connect(citus.worker_ports[0]) as worker:
        worker.execute("DELETE FROM corgipile.model_store WHERE model_name = 'rm_again'")
    assert coordinator.execute(
        "SELECT node_port, node_hash FROM corgipile.check_model_copies()").fetchall() == [
        (citus.worker_ports[0], None)]
    assert coordinator.execute("SELECT corgipile.copy_models('rm_again')").fetchone()[0] == 1
    _everywhere(citus, coordinator, "rm_again")
    assert coordinator.execute("SELECT * FROM corgipile.check_model_copies()").fetchall() == []
    with pytest.raises(psycopg.errors.UndefinedObject, match="no_such_model"):
        coordinator.execute("SELECT corgipile.copy_models('no_such_model')")


def test_rename_grant_revoke_annotate_reassign_drop_follow(citus, coordinator, schema):
    create_role(citus, coordinator, "rp_alice")
    create_role(citus, coordinator, "rp_bob")
    try:
        _import(coordinator, "rm_a")
        coordinator.execute("SELECT corgipile.rename_model('rm_a', 'rm_b')")
        _nowhere(citus, coordinator, "rm_a")
        _everywhere(citus, coordinator, "rm_b")

        usage = "SELECT usage_roles::text[] FROM corgipile.models WHERE model_name = 'rm_b'"
        coordinator.execute("SELECT corgipile.grant_model('rm_b', 'rp_alice')")
        assert worker_rows(citus, usage) == [[(["rp_alice"],)]] * 2
        coordinator.execute("SELECT corgipile.grant_model('rm_b', 'rp_bob')")
        coordinator.execute("SELECT corgipile.revoke_model('rm_b', 'rp_alice')")
        assert worker_rows(citus, usage) == [[(["rp_bob"],)]] * 2
        _everywhere(citus, coordinator, "rm_b")

        coordinator.execute("SELECT corgipile.annotate_model('rm_b', 'query on t', '{\"note\": 1}')")
        notes = worker_rows(citus, "SELECT relation, params->'note' FROM corgipile.models"
                                   " WHERE model_name = 'rm_b'")
        assert notes == [[("query on t", 1)]] * 2

        # a model of alice's, given to bob: the workers' owner follows
        coordinator.execute("SET ROLE rp_alice")
        _import(coordinator, "rm_alice")
        coordinator.execute("RESET ROLE")
        assert coordinator.execute(
            "SELECT corgipile.reassign_models('rp_alice', 'rp_bob')").fetchone()[0] == 1
        owner = "SELECT owner FROM corgipile.models WHERE model_name = 'rm_alice'"
        assert worker_rows(citus, owner) == [[("rp_bob",)]] * 2
        _everywhere(citus, coordinator, "rm_alice")

        coordinator.execute("SELECT corgipile.drop_model('rm_b')")
        coordinator.execute("SELECT corgipile.drop_model('rm_alice')")
        _nowhere(citus, coordinator, "rm_b")
        _nowhere(citus, coordinator, "rm_alice")
        _no_prepared(citus)
    finally:
        drop_role(coordinator, "rp_alice")
        drop_role(coordinator, "rp_bob")


def test_a_role_changes_the_copies_with_its_own_rights(citus, coordinator, schema):
    """The workers' transactions run as the role that changed the model:
    a role's model is its own on every node, and another role cannot
    replace it through apply_model_copy on a worker."""
    create_role(citus, coordinator, "rp_carol")
    create_role(citus, coordinator, "rp_dave")
    try:
        with citus.connect(user="rp_carol") as carol:
            _import(carol, "rm_carol")
        _everywhere(citus, coordinator, "rm_carol")
        assert worker_rows(citus, "SELECT owner FROM corgipile.models WHERE model_name = 'rm_carol'") \
            == [[("rp_carol",)]] * 2
        doc = coordinator.execute("SELECT corgipile.model_hash('rm_carol')").fetchone()[0]
        assert doc
        with citus.connect(citus.worker_ports[0], user="rp_dave") as dave:
            with pytest.raises(psycopg.errors.InsufficientPrivilege,
                               match='must be owner of model "rm_carol" to drop it on this node'):
                dave.execute("SELECT corgipile.apply_model_copy('rm_carol', NULL)")
            with pytest.raises(psycopg.errors.InsufficientPrivilege,
                               match='must be owner of model "rm_forged" to write it on this node'):
                dave.execute("SELECT corgipile.apply_model_copy('rm_forged', %s::jsonb)",
                             (json.dumps({"owner": "rp_carol", "usage_roles": []}),))
        with citus.connect(user="rp_carol") as carol:
            carol.execute("SELECT corgipile.drop_model('rm_carol')")
        _nowhere(citus, coordinator, "rm_carol")
    finally:
        drop_role(coordinator, "rp_carol")
        drop_role(coordinator, "rp_dave")


def test_an_aborted_transaction_leaves_nothing_on_the_workers(citus, coordinator, schema):
    with pytest.raises(psycopg.errors.DivisionByZero):
        with coordinator.transaction():
            _import(coordinator, "rm_abort")
            coordinator.execute("SELECT 1 / 0")
    _nowhere(citus, coordinator, "rm_abort")
    with coordinator.transaction(force_rollback=True):
        _import(coordinator, "rm_abort")
    _nowhere(citus, coordinator, "rm_abort")
    _no_prepared(citus)


def test_a_worker_refusing_at_commit_rolls_back_the_prepared_ones(citus, coordinator, schema):
    """The first role's copies are prepared on both workers, then the second
    role's copy fails on the workers (its grantee exists on the coordinator
    only): the coordinator aborts and every prepared copy is rolled back."""
    create_role(citus, coordinator, "rp_erin")
    coordinator.execute("SET citus.enable_create_role_propagation = off")
    coordinator.execute("CREATE ROLE rp_ghost")
    coordinator.execute("RESET citus.enable_create_role_propagation")
    try:
        with pytest.raises(psycopg.errors.UndefinedObject,
                           match=r'node 127\.0\.0\.1:\d+: role "rp_ghost" of model "rm_ghost" '
                                 r'does not exist on this node'):
            with coordinator.transaction():
                coordinator.execute("SET LOCAL ROLE rp_erin")
                _import(coordinator, "rm_erin")
                coordinator.execute("RESET ROLE")
                _import(coordinator, "rm_ghost")
                coordinator.execute("SELECT corgipile.grant_model('rm_ghost', 'rp_ghost')")
        for model in ("rm_erin", "rm_ghost"):
            _nowhere(citus, coordinator, model)
        _no_prepared(citus)
    finally:
        coordinator.execute("DROP ROLE rp_ghost")
        drop_role(coordinator, "rp_erin")


def test_a_worker_that_is_down_is_named_and_nothing_is_stored(citus, coordinator, schema):
    port = citus.worker_ports[1]
    citus.stop_worker(1)
    try:
        with pytest.raises(psycopg.errors.ConnectionFailure,
                           match=f"could not connect to node 127.0.0.1:{port}"):
            _import(coordinator, "rm_down")
    finally:
        citus.start_worker(1)
    _nowhere(citus, coordinator, "rm_down")
    _no_prepared(citus)


def test_check_model_copies_names_the_node_that_differs(citus, coordinator, schema):
    _import(coordinator, "rm_check")
    w1, w2 = citus.worker_ports
    with citus.connect(w1) as worker:
        worker.execute("UPDATE corgipile.model_store SET weights[1] = 0.5 WHERE model_name = 'rm_check'")
    with citus.connect(w2) as worker:
        worker.execute("DELETE FROM corgipile.model_store WHERE model_name = 'rm_check'")
        _import(worker, "rm_only_there")
    ours = coordinator.execute("SELECT corgipile.model_hash('rm_check')").fetchone()[0]
    rows = coordinator.execute(
        "SELECT model_name, node_port, coordinator_hash, node_hash FROM corgipile.check_model_copies()"
        " ORDER BY node_port, model_name").fetchall()
    # the ports are the kernel's: either worker may come first
    by = {(r[0], r[1]): (r[2], r[3]) for r in rows}
    assert sorted(by) == sorted([("rm_check", w1), ("rm_check", w2), ("rm_only_there", w2)])
    assert by[("rm_check", w1)][0] == ours and by[("rm_check", w1)][1] not in (None, ours)
    assert by[("rm_check", w2)] == (ours, None)
    assert by[("rm_only_there", w2)][0] is None and by[("rm_only_there", w2)][1] is not None
    # a change on the coordinator writes the whole row again: the copies agree
    coordinator.execute("SELECT corgipile.annotate_model('rm_check', NULL, NULL)")
    with citus.connect(w2) as worker:
        worker.execute("SELECT corgipile.drop_model('rm_only_there')")
    assert coordinator.execute("SELECT * FROM corgipile.check_model_copies()").fetchall() == []


def test_recover_model_copies_finishes_what_a_failure_left(citus, coordinator, schema):
    """Prepared copies left on a worker (the coordinator committed or aborted,
    the worker never heard): recover commits the first, rolls back the
    second, from the coordinator's commit log."""
    _import(coordinator, "rm_recover")
    doc = {"model": "linear", "relation": "elsewhere.t", "label": "y", "features": ["a", "b", "c"],
           "feature_indices": None, "n_features": 3, "weights": [1, 2, 3, 4], "classes": None,
           "params": {"layout": "columns"}, "history": [], "created_at": "2024-01-01T00:00:00",
           "owner": citus.user, "usage_roles": [], "trained_on": None, "preprocess": None}
    sysid = coordinator.execute("SELECT system_identifier FROM pg_control_system()").fetchone()[0]
    committed = coordinator.execute("SELECT pg_current_xact_id()").fetchone()[0]
    with coordinator.transaction(force_rollback=True):
        aborted = coordinator.execute("SELECT pg_current_xact_id()").fetchone()[0]
    gids = {f"corgipile_model_{sysid}_{committed}_0": ("rm_recover", "committed"),
            f"corgipile_model_{sysid}_{aborted}_0": ("rm_never", "rolled back")}
    with citus.connect(citus.worker_ports[0]) as worker:
        for gid, (model, _) in gids.items():
            worker.execute("BEGIN")
            worker.execute("SELECT corgipile.apply_model_copy(%s, %s::jsonb)", (model, json.dumps(doc)))
            worker.execute(f"PREPARE TRANSACTION '{gid}'")
    rows = coordinator.execute(
        "SELECT node_port, gid, action FROM corgipile.recover_model_copies()").fetchall()
    assert sorted(rows) == sorted((citus.worker_ports[0], g, a) for g, (_, a) in gids.items())
    _no_prepared(citus)
    weights = worker_rows(citus, "SELECT model_name, weights FROM corgipile.models"
                                 " WHERE model_name IN ('rm_recover', 'rm_never')")
    assert weights[0] == [("rm_recover", [1.0, 2.0, 3.0, 4.0])]
    coordinator.execute("SELECT corgipile.drop_model('rm_recover')")
    _nowhere(citus, coordinator, "rm_recover")


def test_without_citus_nothing_changes(conn):
    _import(conn, "rm_plain")
    assert len(conn.execute("SELECT corgipile.model_hash('rm_plain')").fetchone()[0]) == 64
    with pytest.raises(psycopg.errors.ObjectNotInPrerequisiteState,
                       match=r"corgipile.check_model_copies\(\) runs on a Citus coordinator"):
        conn.execute("SELECT * FROM corgipile.check_model_copies()")
    conn.execute("SELECT corgipile.drop_model('rm_plain')")
