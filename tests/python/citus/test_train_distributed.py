"""corgipile.train() on a Citus distributed table (nodes/dist_train.c on the
coordinator, nodes/shard_round.c on the workers): one model from every
shard's CorgiPile epochs, the preprocessing of the same rows on one node,
seeded weights, and failures that leave nothing behind."""

from __future__ import annotations

import threading
from collections.abc import Callable

import numpy as np
import psycopg
import pytest
from sklearn.linear_model import LogisticRegression

import corgipile

N_ROWS = 8000


def _distribute(conn: psycopg.Connection, table: str, shards: int = 4) -> None:
    conn.execute(f"SELECT create_distributed_table('{table}', 'id', shard_count => {shards})")


def _by_label(conn: psycopg.Connection, rows: int) -> str:
    """A distributed table stored by label (every shard's first rows are
    one class), and a local copy of the same rows, as a user would load it."""
    conn.execute(f"""
        CREATE TABLE src AS
        SELECT i AS id, x1, x2, x3,
               (1.5 * x1 - 2 * x2 + 0.3 * x3 + n > 0.4)::int AS label
          FROM (SELECT i, (i * 0.6180339887) % 1 * 3 AS x1,
                       (i * 0.4142135623) % 1 AS x2,
                       (i * 0.7320508075) % 1 * 10 - 5 AS x3,
                       ((i * 0.2360679774) % 1 - 0.5) * 1.5 AS n
                  FROM generate_series(1, {rows}) i) q""")
    conn.execute("CREATE TABLE dl (id int, x1 float8, x2 float8, x3 float8, label int)")
    _distribute(conn, "dl")
    conn.execute("INSERT INTO dl SELECT * FROM src ORDER BY label, id")
    conn.execute("CREATE TABLE loc AS SELECT * FROM src ORDER BY label, id")
    return "dl"


@pytest.fixture
def by_label(coordinator, schema) -> str:
    return _by_label(coordinator, N_ROWS)


def _accuracy(conn: psycopg.Connection, model: str) -> float:
    return conn.execute(
        "SELECT avg((corgipile.predict_class(%s, l.*)::int = l.label)::int)::float8 FROM loc l",
        (model,)).fetchone()[0]


def _train(conn: psycopg.Connection, table: str, name: str, extra: str = "") -> list[tuple]:
    return conn.execute(
        f"SELECT epoch, tuples, loss FROM corgipile.train('{table}', 'logistic', "
        f"features => 'x1,x2,x3', model_name => '{name}', seed => 5{extra})").fetchall()


def test_default_training_matches_single_node_and_sklearn(coordinator, by_label):
    rows = _train(coordinator, "dl", "m_dist")
    assert rows[0][1] == N_ROWS                  # every shard's rows, each epoch
    _train(coordinator, "loc", "m_loc")
    x = np.array(coordinator.execute("SELECT x1, x2, x3 FROM loc").fetchall())
    y = np.array([r[0] for r in coordinator.execute("SELECT label FROM loc").fetchall()])
    xs = (x - x.mean(axis=0)) / x.std(axis=0)
    sk = LogisticRegression(C=1.0).fit(xs, y).score(xs, y)
    dist, local = _accuracy(coordinator, "m_dist"), _accuracy(coordinator, "m_loc")
    assert abs(dist - local) <= 0.01, (dist, local)
    assert abs(dist - sk) <= 0.01, (dist, sk)
    # one model, stored on the coordinator, trained on the distributed table
    kind, relation = coordinator.execute(
        "SELECT model, relation FROM corgipile.models WHERE model_name = 'm_dist'").fetchone()
    assert kind == "logistic" and relation.endswith("dl")


def _stopping(conn: psycopg.Connection, model: str) -> tuple[int, dict, list]:
    return conn.execute(
        "SELECT jsonb_array_length(history), params->'stopping', weights "
        "FROM corgipile.models WHERE model_name = %s", (model,)).fetchone()


def test_default_stops_by_the_single_node_rule(coordinator, schema):
    """Above 50,000 rows one node's default stops when its averaged model's
    objective on a seeded sample of about 10,000 rows improves by less than
    0.5%; a distributed default applies the same rule to the same figure,
    each shard scoring the average on its share of the sample, and stops
    within an epoch of it (the round that scores an average trains one more
    epoch), deterministically."""
    rows = 60000
    _by_label(coordinator, rows)
    for name in ("stop_d1", "stop_d2"):
        _train(coordinator, "dl", name)
    _train(coordinator, "loc", "stop_l")
    d1, d2, local = (_stopping(coordinator, m) for m in ("stop_d1", "stop_d2", "stop_l"))
    assert local[1]["figure"] == "averaged model's objective on the sample"
    assert local[1]["converged"] and local[0] < 20
    stop = d1[1]
    assert stop["figure"] == "averaged model's objective on the sample of every shard", stop
    assert stop["converged"] and stop["rule"] == "default"
    # every shard's share of one node's 10,000 rows, each rounded up
    assert 10000 <= stop["rows"] <= 10004
    assert stop["epochs_compared"] == d1[0] - 2
    assert 2 <= d1[0] <= local[0] + 2, (d1[0], local[0])
    assert d1 == d2
    dist, single = _accuracy(coordinator, "stop_d1"), _accuracy(coordinator, "stop_l")
    assert abs(dist - single) <= 0.01, (dist, single)


def test_preprocessing_is_the_single_node_one(coordinator, schema):
    """Categories, a text label and standardizing statistics learnt on each
    shard and merged give what one node learns from the same rows."""
    coordinator.execute("""
        CREATE TABLE src AS
        SELECT i AS id, (i * 0.37) % 7 AS num,
               (ARRAY['red','green','blue','teal'])[1 + i % 4] || CASE WHEN i % 97 = 0 THEN 'x' ELSE '' END AS colour,
               CASE WHEN (i * 0.37) % 7 > 3 THEN 'yes' ELSE 'no' END AS answer
          FROM generate_series(1, 3000) i""")
    coordinator.execute("CREATE TABLE dt (id int, num float8, colour text, answer text)")
    _distribute(coordinator, "dt")
    coordinator.execute("INSERT INTO dt SELECT * FROM src")
    args = "'logistic', label => 'answer', features => 'num,colour', max_epoch_num => 2, seed => 1"
    coordinator.execute(f"SELECT * FROM corgipile.train('dt', {args}, model_name => 'pd')").fetchall()
    coordinator.execute(f"SELECT * FROM corgipile.train('src', {args}, model_name => 'pl')").fetchall()
    got = dict(coordinator.execute(
        "SELECT model_name, jsonb_build_array(preprocess, classes, n_features) "
        "FROM corgipile.models WHERE model_name IN ('pd', 'pl')").fetchall())
    dist, local = got["pd"], got["pl"]
    assert dist[1:] == local[1:]
    features_d, features_l = dist[0].pop("features"), local[0].pop("features")
    assert dist[0] == local[0]
    for fd, fl in zip(features_d, features_l, strict=True):
        for key in ("std", "mean"):
            if key in fd:
                assert fd[key] == pytest.approx(fl[key], rel=1e-12)
                fd.pop(key), fl.pop(key)
        assert fd == fl


def test_same_seed_same_weights(coordinator, by_label):
    for name in ("s1", "s2"):
        _train(coordinator, "dl", name, ", max_epoch_num => 4")
    w = coordinator.execute(
        "SELECT model_name, weights FROM corgipile.models WHERE model_name IN ('s1','s2') "
        "ORDER BY 1").fetchall()
    assert w[0][1] == w[1][1]
    coordinator.execute("SET corgipile.distributed_local_epochs = 2")
    _train(coordinator, "dl", "s3", ", max_epoch_num => 4")
    w3 = coordinator.execute("SELECT weights FROM corgipile.models WHERE model_name = 's3'").fetchone()
    assert w3[0] != w[0][1]


def test_client_trains_on_a_distributed_table(citus, coordinator, by_label, schema):
    with citus.connect() as conn:
        conn.execute(f"SET search_path = {schema}, public")
        client = corgipile.Client(conn, progress=False)
        model = client.train("dl", "logistic", features="x1,x2,x3", model_name="cm", seed=3,
                             max_epoch_num=3)
    assert len(model.history) == 3
    assert _accuracy(coordinator, "cm") > 0.8


def _shard_sessions(citus, port: int) -> int:
    with citus.connect(port) as c:
        return c.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE query LIKE '%corgipile.shard_%' "
            "AND pid <> pg_backend_pid()").fetchone()[0]


def _wait_no_sessions(citus) -> None:
    """The workers' backends end once their coordinator's sessions close."""
    for _ in range(5000):
        if all(_shard_sessions(citus, p) == 0 for p in citus.worker_ports):
            return
    raise AssertionError("a worker still runs a shard's training")


def _train_in_thread(citus, schema: str, on_epoch: Callable[[int], None]):
    """Train for ever in a thread; on_epoch(the coordinator backend's pid)
    runs (in that thread, from the NOTICE handler) once epoch 2's NOTICE
    arrives.  Returns (thread, errors)."""
    errors: list[BaseException] = []
    conn = citus.connect()
    conn.execute(f"SET search_path = {schema}, public")
    pid = conn.info.backend_pid
    fired = threading.Event()

    def notice(diag: psycopg.errors.Diagnostic) -> None:
        if not fired.is_set() and "epoch=2/" in (diag.message_primary or ""):
            fired.set()
            try:
                on_epoch(pid)
            except BaseException as e:  # noqa: BLE001 - psycopg would swallow it
                errors.append(e)

    conn.add_notice_handler(notice)

    def run() -> None:
        try:
            conn.execute("SELECT * FROM corgipile.train('dl', 'logistic', features => 'x1,x2,x3', "
                         "model_name => 'never', learning_rate => 0.01, "
                         "max_epoch_num => 1000000, seed => 1)").fetchall()
        except BaseException as e:  # noqa: BLE001 - handed to the test
            errors.append(e)
        finally:
            conn.close()

    t = threading.Thread(target=run)
    t.start()
    return t, errors, pid


def _join(citus, t: threading.Thread, pid: int) -> None:
    """The training ends by itself; if it does not, stop it and say so."""
    t.join(120)
    if t.is_alive():
        with citus.connect() as other:
            other.execute("SELECT pg_cancel_backend(%s::integer)", (pid,))
        t.join()
        raise AssertionError("the training went on")


def test_a_worker_stopped_mid_training_is_named(citus, coordinator, by_label, schema):
    port = citus.worker_ports[1]
    t, errors, pid = _train_in_thread(citus, schema, lambda pid: citus.stop_worker(1))
    try:
        _join(citus, t, pid)
        assert len(errors) == 1 and isinstance(errors[0], psycopg.Error), errors
        assert f"127.0.0.1:{port}" in str(errors[0])
    finally:
        citus.start_worker(1)
    assert coordinator.execute(
        "SELECT count(*) FROM corgipile.models WHERE model_name = 'never'").fetchone()[0] == 0
    _wait_no_sessions(citus)


def test_cancel_stops_the_workers(citus, coordinator, by_label, schema):
    def cancel(pid: int) -> None:
        with citus.connect() as other:
            other.execute("SELECT pg_cancel_backend(%s::integer)", (pid,))

    t, errors, pid = _train_in_thread(citus, schema, cancel)
    _join(citus, t, pid)
    assert len(errors) == 1 and isinstance(errors[0], psycopg.errors.QueryCanceled), errors
    assert coordinator.execute(
        "SELECT count(*) FROM corgipile.models WHERE model_name = 'never'").fetchone()[0] == 0
    _wait_no_sessions(citus)


def test_privileges_are_the_calling_roles_on_every_shard(citus, coordinator, by_label, schema):
    role = f"{schema}_r"
    coordinator.execute(f"CREATE ROLE {role} LOGIN")
    try:
        coordinator.execute(f"GRANT USAGE ON SCHEMA {schema} TO {role}")
        with citus.connect(user=role) as conn:
            conn.execute(f"SET search_path = {schema}, public")
            with pytest.raises(psycopg.errors.InsufficientPrivilege, match="dl"):
                conn.execute("SELECT * FROM corgipile.train('dl', 'logistic', "
                             "features => 'x1,x2,x3', max_epoch_num => 1)")
            # SELECT on the table, but one shard's worker refuses it: the
            # workers check the calling role, not the coordinator's word
            coordinator.execute(f"GRANT SELECT ON dl TO {role}")
            shard, port = coordinator.execute(
                "SELECT shard_name, nodeport FROM citus_shards WHERE table_name = 'dl'::regclass "
                "ORDER BY shardid LIMIT 1").fetchone()
            with citus.connect(port) as worker:
                worker.execute(f"SET search_path = {schema}")
                worker.execute(f"REVOKE SELECT ON {shard} FROM {role}")
            with pytest.raises(psycopg.errors.InsufficientPrivilege, match=f"127.0.0.1:{port}"):
                conn.execute("SELECT * FROM corgipile.train('dl', 'logistic', "
                             "features => 'x1,x2,x3', max_epoch_num => 1)")
        assert coordinator.execute("SELECT count(*) FROM corgipile.models").fetchone()[0] == 0
    finally:
        coordinator.execute(f"DROP OWNED BY {role}")
        coordinator.execute(f"DROP ROLE {role}")


def test_unsupported_parameters_are_refused_before_any_node(coordinator, by_label):
    with pytest.raises(psycopg.errors.FeatureNotSupported, match="validation"):
        coordinator.execute("SELECT * FROM corgipile.train('dl', 'logistic', features => 'x1,x2,x3', "
                            "validation => '20%')")


def test_explain_names_the_shards(coordinator, by_label):
    plan = "\n".join(r[0] for r in coordinator.execute(
        "EXPLAIN (COSTS OFF) SELECT * FROM corgipile.train('dl', 'logistic', features => 'x1,x2,x3')"))
    assert "Distributed SGD" in plan and "Shards: 4" in plan


def test_mean_imputation_is_the_single_node_one(coordinator, schema):
    coordinator.execute("""
        CREATE TABLE src AS
        SELECT i AS id, CASE WHEN i % 5 = 0 THEN NULL ELSE (i * 0.37) % 7 END AS num,
               (i * 0.61) % 3 AS other, (i % 3 = 0)::int AS label
          FROM generate_series(1, 2000) i""")
    coordinator.execute("CREATE TABLE dt (id int, num float8, other float8, label int)")
    _distribute(coordinator, "dt")
    coordinator.execute("INSERT INTO dt SELECT * FROM src")
    args = "'logistic', features => 'num,other', missing => 'mean', max_epoch_num => 1, seed => 1"
    for table, name in (("dt", "md"), ("src", "ml")):
        coordinator.execute(f"SELECT * FROM corgipile.train('{table}', {args}, model_name => '{name}')").fetchall()
    got = dict(coordinator.execute(
        "SELECT model_name, preprocess FROM corgipile.models WHERE model_name IN ('md', 'ml')").fetchall())
    assert got["md"]["rows"] == got["ml"]["rows"] == 2000
    fd, fl = got["md"]["features"], got["ml"]["features"]
    assert [f["name"] for f in fd] == [f["name"] for f in fl]
    for a, b in zip(fd, fl, strict=True):
        for key in a:
            if isinstance(a[key], float):
                assert a[key] == pytest.approx(b[key], rel=1e-12), key
            else:
                assert a[key] == b[key], key


@pytest.mark.parametrize("make_citus", [
    "SELECT create_reference_table('{t}')",
    "SELECT citus_add_local_table_to_metadata('{t}')",
])
def test_reference_and_citus_local_tables_train_on_their_rows(coordinator, by_label, make_citus):
    """Once Citus holds a table, its rows are in its shard's table: the name
    the coordinator sees is a shell, which a local training would find empty
    (and Citus refuses its query). One shard trains where it is, and the
    model is the one the same rows give on one node."""
    coordinator.execute("CREATE TABLE held AS SELECT * FROM loc")
    coordinator.execute(make_citus.format(t="held"))
    coordinator.execute("SELECT truncate_local_data_after_distributing_table('held')"
                        if "reference" in make_citus else "SELECT 1")
    rows = _train(coordinator, "held", "m_held")
    assert rows[0][1] == N_ROWS
    _train(coordinator, "loc", "m_loc")
    assert abs(_accuracy(coordinator, "m_held") - _accuracy(coordinator, "m_loc")) <= 0.01
    metrics = dict(coordinator.execute(
        "SELECT metric, value FROM corgipile.evaluate('m_held', 'held')").fetchall())
    assert metrics["rows"] == N_ROWS
