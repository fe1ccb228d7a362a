"""Hostile replays against parallel training (workers => N) with
cache affinity: each process trains the same slots (the same blocks) for
the whole training, so a bad row always lands in the same process, and
that process may be a worker.  An unprivileged role's bad row in a
worker's share, or its own statement_timeout in the middle of a parallel
epoch, stops every process, stores nothing and leaks no shared memory.

Every test runs under the autouse check of conftest.py that the postmaster
never restarted (a backend crash restarts them all).
"""

from __future__ import annotations

import psycopg
import pytest
from psycopg import errors

from server_probe import dsm_mappings, workers_of


def models_named(conn, name: str) -> int:
    return conn.execute("SELECT count(*) FROM corgipile.models WHERE model_name = %s",
                        (name,)).fetchone()[0]


@pytest.fixture
def hostile(conn, roles):
    """An unprivileged role's session and its table of 20,000 rows (about
    110 pages: 7 buffers of 16 pages, so both processes hold slots)."""
    role = roles.create("par")
    session = roles.connect(role)
    session.execute("SET corgipile.progress = off")
    session.execute(
        "CREATE TABLE pts AS SELECT g AS id, CASE WHEN g % 2 = 0 THEN 1 ELSE -1 END AS label, "
        "ARRAY[CASE WHEN g % 2 = 0 THEN 1.0 ELSE -1.0 END + sin(g), cos(g)]::float8[] "
        "AS features FROM generate_series(1, 20000) g")
    # the first parallel context of a session maps the session's own
    # segment for good: count the segments after one
    session.execute("SELECT count(*) FROM corgipile.train('pts', 'svm', model_name => 'warm', "
                    "workers => 2, max_epoch_num => 1, buffer_size => '16 pages')")
    return session


def test_bad_row_in_a_workers_share_stops_everything(hostile, conn):
    """A label the model refuses, in one block.  Which process owns that
    block depends on the seed (the first epoch's order); over these seeds
    the block falls at least once to the worker (its error carries the
    'parallel worker' context) and at least once to the leader.  Every time:
    the error, no model, no worker left, no segment leaked."""
    session = hostile
    pid = session.info.backend_pid
    session.execute("UPDATE pts SET label = 7 WHERE id = 15000")
    mapped = dsm_mappings(pid)
    where = set()
    for seed in range(1, 9):
        with pytest.raises(errors.DataException, match="not a valid svm label") as info:
            session.execute("SELECT * FROM corgipile.train('pts', 'svm', model_name => 'bad', "
                            "workers => 2, buffer_size => '16 pages', seed => %s)", (seed,))
        where.add("parallel worker" in (info.value.diag.context or ""))
        assert session.execute("SELECT 1").fetchone() == (1,)
        assert not workers_of(conn, pid)
        assert dsm_mappings(pid) == mapped
        assert models_named(session, "bad") == 0
    assert where == {True, False}, where


def test_statement_timeout_in_a_parallel_epoch_stops_everything(hostile, conn):
    """The role's own statement_timeout cancels a long parallel training in
    the middle of an epoch: every process stops, nothing is stored."""
    session = hostile
    pid = session.info.backend_pid
    mapped = dsm_mappings(pid)
    session.execute("SET statement_timeout = '700ms'")
    with pytest.raises(errors.QueryCanceled):
        session.execute("SELECT * FROM corgipile.train('pts', 'svm', model_name => 'long', "
                        "workers => 2, buffer_size => '16 pages', max_epoch_num => 100000)")
    session.execute("RESET statement_timeout")
    assert session.execute("SELECT 1").fetchone() == (1,)
    assert not workers_of(conn, pid)
    assert dsm_mappings(pid) == mapped
    assert models_named(session, "long") == 0


def test_parallel_settings_refuse_what_is_not_theirs(hostile):
    """The parallel settings are enums: nothing else is accepted, and the
    block cache size (memory per process) is a superuser's setting."""
    session = hostile
    with pytest.raises(psycopg.Error, match="parallel_sync"):
        session.execute("SET corgipile.parallel_sync = 'none'")
    with pytest.raises(psycopg.Error, match="parallel_grab"):
        session.execute("SET corgipile.parallel_grab = 'both'")
    with pytest.raises(errors.InsufficientPrivilege):
        session.execute("SET corgipile.block_cache_size = '64GB'")
