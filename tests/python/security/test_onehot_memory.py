"""One-hot features stay within memory: the reproductions of
the issue, as a hostile role, measured by the backend's peak resident set.

Dense one-hot indicators would take rows x categories x 8 bytes: 10 GB
for a 4.3 MB table with 80,000 categories, 20 GB for evaluate() of an
imported model with 2^20 categories (scripts/measure_onehot_memory.py
measures it).  Rows are sparse (one entry per feature column) and every
buffer has a byte budget, so each backend's VmHWM growth is asserted to
stay below 200 MB, far above what sparse rows need (~40 MB) and far below
what dense ones would.

The peak is VmHWM of /proc/<pid>/status of the hostile session's backend,
read by the superuser fixture with pg_read_file (a fresh session per step,
so each figure is that step's own).  Every test also runs under the
autouse check of conftest.py that no backend crashed.
"""

from __future__ import annotations

import json

import pytest
from psycopg import errors

# the stated bound on a step's peak growth, with a wide margin (see above)
BUDGET_MB = 200


def _quiet(conn) -> None:
    conn.execute("SET corgipile.progress = off")


def _vm_hwm_mb(admin, session) -> float:
    pid = session.execute("SELECT pg_catalog.pg_backend_pid()").fetchone()[0]
    status = admin.execute("SELECT pg_catalog.pg_read_file(%s)",
                           (f"/proc/{pid}/status",)).fetchone()[0]
    for line in status.splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024.0
    raise AssertionError("no VmHWM line in /proc/<pid>/status")


def _growth_mb(roles, role, conn, sql, params=None):
    """Run sql in a fresh session of role; (its rows, its VmHWM growth)."""
    s = roles.connect(role)
    _quiet(s)
    before = _vm_hwm_mb(conn, s)
    rows = s.execute(sql, params).fetchall()
    grown = _vm_hwm_mb(conn, s) - before
    s.close()
    # shown with pytest -s: the figures docs/security.md quotes
    print(f"\n{sql[:60]}...: VmHWM {before:.1f} MB + {grown:.1f} MB")
    return rows, grown


def test_80000_categories_train_and_evaluate_within_budget(roles, conn):
    """The issue's table, at its size: 100k rows, one text column of 80,000
    values, max_categories => 80000 (before: an attempt at 10 GB)."""
    role = roles.create()
    s = roles.connect(role)
    _quiet(s)
    s.execute("CREATE TABLE wide AS SELECT (g % 2) AS label, (g % 97)::float8 AS x, "
              "'c' || (g % 80000) AS cat FROM generate_series(1, 100000) g")
    _, train_mb = _growth_mb(
        roles, role, conn,
        "SELECT * FROM corgipile.train('wide', 'logistic', features => 'x, cat', "
        "model_name => 'wide_m', max_categories => 80000, max_epoch_num => 2, seed => 1)")
    assert train_mb < BUDGET_MB, f"training grew the backend by {train_mb:.0f} MB"
    n = s.execute("SELECT n_features FROM corgipile.models WHERE model_name = 'wide_m'"
                  ).fetchone()[0]
    assert n == 80001
    metrics, eval_mb = _growth_mb(
        roles, role, conn, "SELECT * FROM corgipile.evaluate('wide_m', 'wide')")
    assert eval_mb < BUDGET_MB, f"evaluate grew the backend by {eval_mb:.0f} MB"
    m = dict(metrics)
    assert m["unseen_values"] == 0
    # the model learnt something: x carries no signal, but each category
    # (1-2 rows each) is memorised after two epochs
    assert m["accuracy"] > 0.6
    _, predict_mb = _growth_mb(
        roles, role, conn,
        "SELECT count(*) FROM wide t WHERE corgipile.predict_class('wide_m', t) IS NOT NULL")
    assert predict_mb < BUDGET_MB


def test_20000_categories_with_the_whole_table_in_one_buffer(roles, conn):
    """The issue's worst training case: a 100% buffer (before: 3.15 GB)."""
    role = roles.create()
    s = roles.connect(role)
    _quiet(s)
    s.execute("CREATE TABLE cats AS SELECT (g % 2) AS label, (g % 13)::float8 AS x, "
              "'v' || (g % 20000) AS cat FROM generate_series(1, 100000) g")
    _, train_mb = _growth_mb(
        roles, role, conn,
        "SELECT * FROM corgipile.train('cats', 'svm', features => 'x, cat', "
        "model_name => 'cats_m', max_categories => 20000, max_epoch_num => 2, "
        "buffer_size => '100%', seed => 2)")
    assert train_mb < BUDGET_MB, f"training grew the backend by {train_mb:.0f} MB"


def test_imported_model_with_2_pow_20_categories_evaluates_within_budget(roles, conn):
    """A model whose one column has the most categories a model may have,
    imported by the hostile role (before: evaluate reached 20 GB RSS and
    was killed)."""
    role = roles.create()
    s = roles.connect(role)
    _quiet(s)
    k = 1 << 20
    s.execute("CREATE TABLE few AS SELECT (g % 2) AS label, (g % 7)::float8 AS x, "
              "'k' || (g % 5) AS cat FROM generate_series(1, 20000) g")
    cats = sorted(f"k{i}" for i in range(k))
    prep = {"version": 1, "standardize": "off",
            "features": [{"name": "x", "kind": "number"},
                         {"name": "cat", "kind": "onehot", "categories": cats}],
            "n_model_features": k + 1, "constant_features": 0, "rows": 20000}
    weights = [0.0] * (k + 2)
    weights[0] = 0.25
    for i in range(5):
        weights[1 + cats.index(f"k{i}")] = 1.0 if i % 2 else -1.0
    s.execute("SELECT corgipile.import_model('huge', 'logistic', 'few', 'label', "
              "ARRAY['x', 'cat'], NULL, %s, %s::float8[], '[0, 1]'::jsonb, %s::jsonb, "
              "'[]'::jsonb, NULL, %s::jsonb)",
              (k + 1, weights, json.dumps({"layout": "columns"}), json.dumps(prep)))
    metrics, eval_mb = _growth_mb(roles, role, conn,
                                  "SELECT * FROM corgipile.evaluate('huge', 'few')")
    assert eval_mb < BUDGET_MB, f"evaluate grew the backend by {eval_mb:.0f} MB"
    assert dict(metrics)["unseen_values"] == 0
    rows, predict_mb = _growth_mb(
        roles, role, conn,
        "SELECT count(*) FROM few t WHERE corgipile.predict('huge', t) IS NOT NULL")
    assert rows[0][0] == 20000
    assert predict_mb < BUDGET_MB


def test_a_row_that_cannot_fit_its_buffer_is_an_error_naming_work_mem(roles, conn):
    """A compressed array packs far denser on disk than in memory: 2M zeros
    are ~16 MB as doubles and a few hundred kB in TOAST.  The training
    buffer's budget (the larger of work_mem and 32 times its table bytes)
    and evaluate()'s (work_mem) refuse it with an ERROR, never an OOM."""
    role = roles.create()
    s = roles.connect(role)
    _quiet(s)
    s.execute("CREATE TABLE dense AS SELECT (g % 2) AS label, "
              "array_fill(0::float8, ARRAY[2000000]) AS features FROM generate_series(1, 2) g")
    s.execute("SET work_mem = '1MB'")
    with pytest.raises(errors.ProgramLimitExceeded,
                       match="a training buffer would take more than its budget") as e:
        s.execute("SELECT * FROM corgipile.train('dense', 'svm', model_name => 'dense_m', "
                  "max_epoch_num => 1, standardize => 'off')")
    assert "work_mem" in e.value.diag.message_hint
    # with room it trains, and evaluate() is held to work_mem in turn
    s.execute("SET work_mem = '256MB'")
    s.execute("SELECT * FROM corgipile.train('dense', 'svm', model_name => 'dense_m', "
              "max_epoch_num => 1, standardize => 'off')")
    s.execute("SET work_mem = '1MB'")
    with pytest.raises(errors.ProgramLimitExceeded,
                       match=r"a batch of evaluate\(\) would take more than its budget") as e:
        s.execute("SELECT * FROM corgipile.evaluate('dense_m', 'dense')")
    assert "work_mem" in e.value.diag.message_hint
