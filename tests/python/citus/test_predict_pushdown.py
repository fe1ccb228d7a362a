"""predict(), predict_class() and predict_proba() in a query over a
distributed table run on the workers: Citus pushes the calls down with the
shard queries (they are STABLE and PARALLEL SAFE), and each worker uses its
copy of the model; the calling role's rights hold on every node."""

from __future__ import annotations

import psycopg
import pytest
from predict_helpers import create_role, drop_role, make_tables, train


def _plan(conn: psycopg.Connection, sql: str) -> str:
    return "\n".join(r[0] for r in conn.execute("EXPLAIN (VERBOSE, COSTS OFF) " + sql))


@pytest.mark.parametrize("call", [
    "corgipile.predict('pm_push', t)",
    "corgipile.predict_class('pm_push', t)",
    "corgipile.predict_proba('pm_push', t)",
    "corgipile.predict('pm_push', t.features)",
])
def test_the_call_runs_on_the_workers(citus, coordinator, schema, call):
    dist, local = make_tables(coordinator, "pt", rows=2000)
    train(coordinator, local, "logistic", "pm_push")
    sql = f"SELECT t.id, {call} AS p FROM {dist} AS t"
    plan = _plan(coordinator, sql)
    # the call is in the worker's query; the coordinator only reads its result
    assert "Custom Scan (Citus Adaptive)" in plan
    task_query = next(line for line in plan.splitlines() if "Query:" in line)
    assert call.split("(")[0] + "('pm_push'::text" in task_query
    assert "Output: remote_scan.id, remote_scan.p" in plan
    assert "corgipile" not in plan.split("->  Task")[0]
    ours = coordinator.execute(f"{sql} ORDER BY 1").fetchall()
    theirs = coordinator.execute(f"SELECT t.id, {call} FROM {local} AS t ORDER BY 1").fetchall()
    assert ours == theirs and len(ours) == 2000


def test_an_aggregate_of_predictions_is_computed_on_the_workers(citus, coordinator, schema):
    dist, local = make_tables(coordinator, "pa", rows=2000)
    train(coordinator, local, "svm", "pm_agg")
    sql = f"SELECT count(*) FILTER (WHERE corgipile.predict('pm_agg', t) > 0) FROM {dist} AS t"
    plan = _plan(coordinator, sql)
    task_query = next(line for line in plan.splitlines() if "Query:" in line)
    assert "corgipile.predict('pm_agg'::text, t.*)" in task_query
    assert coordinator.execute(sql).fetchone() == coordinator.execute(
        sql.replace(dist, local)).fetchone()


def test_privileges_are_the_calling_roles_on_every_node(citus, coordinator, schema):
    dist, local = make_tables(coordinator, "pp", rows=1000)
    train(coordinator, local, "logistic", "pm_priv")
    create_role(citus, coordinator, "pp_alice")
    sql = f"SELECT sum(corgipile.predict('pm_priv', t)) FROM {schema}.{dist} AS t"
    expected = coordinator.execute(sql).fetchone()
    try:
        coordinator.execute(f"GRANT USAGE ON SCHEMA {schema} TO pp_alice")
        with citus.connect(user="pp_alice") as alice:
            # no SELECT on the table: nothing from any shard
            with pytest.raises(psycopg.errors.InsufficientPrivilege,
                               match=f'permission denied for table {dist}'):
                alice.execute(sql)
            coordinator.execute(f"GRANT SELECT ON {dist} TO pp_alice")
            # SELECT, no USAGE on the model: the workers refuse it
            with pytest.raises(psycopg.errors.InsufficientPrivilege,
                               match='permission denied for model "pm_priv"'):
                alice.execute(sql)
            coordinator.execute("SELECT corgipile.grant_model('pm_priv', 'pp_alice')")
            assert alice.execute(sql).fetchone() == expected
            coordinator.execute("SELECT corgipile.revoke_model('pm_priv', 'pp_alice')")
            with pytest.raises(psycopg.errors.InsufficientPrivilege,
                               match='permission denied for model "pm_priv"'):
                alice.execute(sql)
    finally:
        coordinator.execute(f"REVOKE ALL ON SCHEMA {schema} FROM pp_alice")
        drop_role(coordinator, "pp_alice")
