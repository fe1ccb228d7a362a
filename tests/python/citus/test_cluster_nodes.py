"""corgipile.cluster_nodes(): the coordinator reaches every worker as the
calling role, and names a node that is down, refuses the role, or has
another corgipile (cluster/node_conn.c, cluster/citus_meta.c)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

import psycopg
import pytest


def test_lists_every_worker_with_its_version(citus, coordinator):
    rows = coordinator.execute(
        "SELECT node_name, node_port, group_id, corgipile_version FROM corgipile.cluster_nodes()"
    ).fetchall()
    nodes = coordinator.execute(
        "SELECT nodename, nodeport, groupid FROM pg_dist_node WHERE groupid <> 0 ORDER BY groupid"
    ).fetchall()
    version = coordinator.execute(
        "SELECT extversion FROM pg_extension WHERE extname = 'corgipile'").fetchone()[0]
    assert [r[:3] for r in rows] == nodes
    assert sorted(r[1] for r in rows) == sorted(citus.worker_ports)
    assert {r[3] for r in rows} == {version}


def test_a_worker_that_is_down_is_named(citus, coordinator):
    port = citus.worker_ports[1]
    citus.stop_worker(1)
    try:
        with pytest.raises(psycopg.errors.ConnectionFailure,
                           match=f"could not connect to node 127.0.0.1:{port}"):
            coordinator.execute("SELECT * FROM corgipile.cluster_nodes()")
    finally:
        citus.start_worker(1)
    assert len(coordinator.execute("SELECT * FROM corgipile.cluster_nodes()").fetchall()) == 2


def test_a_worker_with_another_version_is_named(citus, coordinator):
    port = citus.worker_ports[0]
    with citus.connect(port) as worker:
        worker.execute("UPDATE pg_extension SET extversion = '0.0.1' WHERE extname = 'corgipile'")
        try:
            with pytest.raises(psycopg.errors.ObjectNotInPrerequisiteState,
                               match=f"node 127.0.0.1:{port} has corgipile 0.0.1, this node 0.4.0"):
                coordinator.execute("SELECT * FROM corgipile.cluster_nodes()")
        finally:
            worker.execute("UPDATE pg_extension SET extversion = '0.4.0' WHERE extname = 'corgipile'")


def _reload(conn: psycopg.Connection) -> None:
    """Reload the server's configuration and wait until a new backend has it."""
    before = conn.execute("SELECT pg_conf_load_time()").fetchone()[0]
    conn.execute("SELECT pg_reload_conf()")
    for _ in range(2000):  # the postmaster handles the signal, then new backends see it
        with psycopg.connect(conn.info.dsn, autocommit=True) as fresh:
            if fresh.execute("SELECT pg_conf_load_time()").fetchone()[0] != before:
                return
        time.sleep(0.005)
    raise AssertionError("the server did not reload its configuration")


@contextmanager
def _refusing(citus, i: int, role: str) -> Iterator[None]:
    """Worker i refuses TCP connections of role (pg_hba.conf's first line)."""
    hba = citus.worker_dirs[i] / "data" / "pg_hba.conf"
    kept = hba.read_text()
    hba.write_text(f"host all {role} 127.0.0.1/32 reject\n" + kept)
    with citus.connect(citus.worker_ports[i]) as worker:
        _reload(worker)
        try:
            yield
        finally:
            hba.write_text(kept)
            _reload(worker)


def test_connects_as_the_calling_role(citus, coordinator):
    role = "citus_nodes_role"
    coordinator.execute(f"DROP ROLE IF EXISTS {role}")
    coordinator.execute(f"CREATE ROLE {role} LOGIN")  # Citus creates it on the workers too
    try:
        with citus.connect(user=role) as as_role:
            assert len(as_role.execute("SELECT * FROM corgipile.cluster_nodes()").fetchall()) == 2
            with _refusing(citus, 0, role):
                with pytest.raises(psycopg.errors.ConnectionFailure,
                                   match=f'(?s)node 127.0.0.1:{citus.worker_ports[0]}.*"{role}"'):
                    as_role.execute("SELECT * FROM corgipile.cluster_nodes()")
                # the superuser is not refused: the node saw the calling role
                assert len(coordinator.execute(
                    "SELECT * FROM corgipile.cluster_nodes()").fetchall()) == 2
    finally:
        coordinator.execute(f"DROP ROLE {role}")


def test_without_citus_it_says_so(conn):
    with pytest.raises(psycopg.errors.ObjectNotInPrerequisiteState,
                       match="the citus extension is not in this database"):
        conn.execute("SELECT * FROM corgipile.cluster_nodes()")
