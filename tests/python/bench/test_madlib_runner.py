"""The MADlib runner: skipped with a reason when MADlib is absent (it is not
installable on this Debian 12 / PostgreSQL 15 machine), and a clean failure,
not a crash, when a `madlib` schema exists without MADlib in it."""

from __future__ import annotations

import pytest

from corgipile.bench import madlib
from corgipile.bench.config import TrainSettings
from corgipile.bench.datasets import describe_table
from datagen import linear_task, load_table


@pytest.fixture
def small(conn):
    x, y = linear_task(300, 4, seed=2)
    load_table(conn, "small", x, y)
    return conn


@pytest.mark.parametrize("model", ["svm", "logistic"])
@pytest.mark.parametrize("order", ["shuffle_once", "no_shuffle"])
def test_skipped_with_a_reason_without_madlib(small, model, order):
    conn = small
    assert conn.execute("SELECT count(*) FROM pg_namespace WHERE nspname = 'madlib'").fetchone()[0] == 0
    ds = describe_table(conn, "small")
    r = madlib.run(conn, ds, model, order, TrainSettings(epochs=2), ("unused", 0.0))
    assert r.status == "skipped"
    assert r.system == "madlib" and r.model == model and r.order == order
    assert r.method == f"madlib ({order})"
    assert "MADlib is not installed" in r.reason
    assert repr(conn.info.dbname) in r.reason and "madpack install" in r.reason
    assert r.epochs == [] and r.summary == {} and r.setup_seconds == 0.0
    assert madlib.unavailable_reason(conn) == r.reason


def test_reports_a_failure_when_the_schema_has_no_madlib(small):
    conn = small
    conn.execute("CREATE SCHEMA madlib")
    ds = describe_table(conn, "small")
    assert madlib.unavailable_reason(conn) is None
    r = madlib.run(conn, ds, "svm", "no_shuffle", TrainSettings(epochs=2), None)
    assert r.status == "failed"
    assert "svm_classification" in r.reason
    r = madlib.run(conn, ds, "logistic", "no_shuffle", TrainSettings(epochs=2), None)
    assert r.status == "failed" and "logregr_train" in r.reason
    # nothing left behind, and the session still works
    left = conn.execute("SELECT count(*) FROM pg_class WHERE relname LIKE 'corgipile_bench_madlib%'")
    assert left.fetchone()[0] == 0


def test_other_models_are_skipped(small):
    conn = small
    conn.execute("CREATE SCHEMA madlib")
    ds = describe_table(conn, "small")
    r = madlib.run(conn, ds, "softmax", "no_shuffle", TrainSettings(epochs=2), None)
    assert r.status == "skipped" and "softmax" in r.reason
