"""The MADlib runner: skipped with a reason when MADlib is absent (it cannot
be built on this machine: no source download; docs/benchmarks.md describes
building MADlib 2.1 by hand), a clean failure, not a crash, when a `madlib`
schema exists without MADlib in it, and, against a stub of MADlib 2.1's
functions that records its arguments, the arguments the runner passes
(fit_intercept, the iteration checkpoints, igd and irls) and what it reads."""

from __future__ import annotations

import numpy as np
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


# -- the output tables' shape ------------------------------------------------------------

_FAKE = r"""
CREATE SCHEMA madlib;
-- what the fake writes: the shape to produce and the coefficients
CREATE TABLE madlib.fake (shape text, coef float8[], mapping boolean[]);
-- every call's arguments, in order: what the runner passed
CREATE TABLE madlib.calls (n serial, fn text, kernel_params text, params text,
                           max_iter integer, optimizer text, tolerance float8);

CREATE FUNCTION madlib.version() RETURNS text LANGUAGE sql
AS $$ SELECT 'MADlib version: 2.1.0, git revision: fake, cmake configuration time: x' $$;

CREATE FUNCTION madlib.svm_classification(source text, model text, dep text, ind text,
        kernel text, kernel_params text, grouping_col text, params text, verbose boolean)
RETURNS void LANGUAGE plpgsql AS $f$
DECLARE
    f madlib.fake;
BEGIN
    INSERT INTO madlib.calls (fn, kernel_params, params)
        VALUES ('svm_classification', kernel_params, params);
    SELECT * INTO f FROM madlib.fake;
    IF f.shape = '2.1' THEN
        EXECUTE format('CREATE TABLE %I AS SELECT %L::float8[] AS coef, 0.5::float8 AS loss,
            0.1::float8 AS norm_of_gradient, 7 AS num_iterations, 300::bigint AS
            num_rows_processed, 0::bigint AS num_rows_skipped, %L::boolean[] AS dep_var_mapping',
            model, f.coef, f.mapping);
    ELSIF f.shape = 'old mapping name' THEN  -- what the runner used to read
        EXECUTE format('CREATE TABLE %I AS SELECT %L::float8[] AS coef, 0.5::float8 AS loss,
            0.1::float8 AS norm_of_gradient, 7 AS num_iterations, 300::bigint AS
            num_rows_processed, 0::bigint AS num_rows_skipped,
            ARRAY[''false'', ''true'']::text[] AS __dep_var_mapping', model, f.coef);
    ELSIF f.shape = 'short coef' THEN
        EXECUTE format('CREATE TABLE %I AS SELECT %L::float8[] AS coef, 0.5::float8 AS loss,
            0.1::float8 AS norm_of_gradient, 7 AS num_iterations, 300::bigint AS
            num_rows_processed, 0::bigint AS num_rows_skipped, %L::boolean[] AS dep_var_mapping',
            model, f.coef[1:2], f.mapping);
    END IF;
    EXECUTE format('CREATE TABLE %I AS SELECT ''svm''::text AS method, ''2.1.0''::text AS
        version_number, %L::text AS source_table, %L::text AS model_table, %L::text AS
        dependent_varname, %L::text AS independent_varname, %L::text AS kernel_func,
        ''''::text AS kernel_params, ''NULL''::text AS grouping_col, %L::text AS optim_params,
        ''''::text AS reg_params, 1 AS num_all_groups, 0 AS num_failed_groups,
        300::bigint AS total_rows_processed, 0::bigint AS total_rows_skipped',
        model || '_summary', source, model, dep, ind, kernel, params);
END
$f$;

CREATE FUNCTION madlib.logregr_train(source text, output text, dep text, ind text,
        grouping_col text, max_iter integer, optimizer text, tolerance float8)
RETURNS void LANGUAGE plpgsql AS $f$
DECLARE
    f madlib.fake;
BEGIN
    INSERT INTO madlib.calls (fn, max_iter, optimizer, tolerance)
        VALUES ('logregr_train', max_iter, optimizer, tolerance);
    SELECT * INTO f FROM madlib.fake;
    EXECUTE format('CREATE TABLE %I AS SELECT %s AS coef, -1.5::float8 AS log_likelihood,
        %L::float8[] AS std_err, %L::float8[] AS z_stats, %L::float8[] AS p_values,
        %L::float8[] AS odds_ratios, 10::float8 AS condition_no, 300 AS num_rows_processed,
        0 AS num_missing_rows_skipped, %s AS num_iterations,
        NULL::float8[] AS variance_covariance',
        output, CASE f.shape WHEN 'failed group' THEN 'NULL::float8[]'
                             ELSE quote_literal(f.coef) || '::float8[]' END,
        f.coef, f.coef, f.coef, f.coef,
        CASE f.shape WHEN 'no num_iterations' THEN '3 AS iterations_done, 3' ELSE '3' END);
    IF f.shape = 'no num_iterations' THEN
        EXECUTE format('ALTER TABLE %I DROP COLUMN num_iterations', output);
    END IF;
    EXECUTE format('CREATE TABLE %I AS SELECT ''logregr''::varchar AS method,
        %L::varchar AS source_table, %L::varchar AS out_table, %L::varchar AS
        dependent_varname, %L::varchar AS independent_varname, ''optimizer=igd''::varchar AS
        optimizer_params, 1 AS num_all_groups, %s AS num_failed_groups,
        300 AS num_rows_processed, 0 AS num_missing_rows_skipped, NULL::text AS grouping_col',
        output || '_summary', source, output, dep, ind,
        CASE f.shape WHEN 'failed group' THEN '1' ELSE '0' END);
END
$f$;
"""


@pytest.fixture
def fake_madlib(small):
    """A stub `madlib` schema whose svm_classification and logregr_train
    create output tables shaped as MADlib 2.1 documents and creates them
    (svm.py_in, logistic.py_in), or shaped wrongly on request, holding
    coefficients the test chose. It is a fake of MADlib's output tables,
    not a database mock: the runner's SQL runs on the real server, against
    real tables. A real MADlib 2.1 cannot be installed on this machine (no
    Debian package for PostgreSQL 15), so the real run is not tested here."""
    small.execute(_FAKE)
    return small


def _centroid_coef(conn):
    """A usable linear classifier of the small table (difference of the
    class means), so that the score the runner computes means something."""
    rows = conn.execute("SELECT label, features FROM small").fetchall()
    y = np.array([r[0] for r in rows])
    x = np.array([r[1] for r in rows])
    pos, neg = x[y > 0].mean(axis=0), x[y <= 0].mean(axis=0)
    w = pos - neg
    return w, -float(w @ (pos + neg) / 2)


def _fake(conn, shape, coef, mapping=(False, True)):
    conn.execute("DELETE FROM madlib.fake")
    conn.execute("INSERT INTO madlib.fake VALUES (%s, %s, %s)", (shape, coef, list(mapping)))


def _calls(conn):
    return conn.execute("SELECT fn, kernel_params, params, max_iter, optimizer, tolerance "
                        "FROM madlib.calls ORDER BY n").fetchall()


@pytest.mark.parametrize("mapping", [(False, True), (True, False)])
def test_svm_reads_madlib_2_1_output(fake_madlib, mapping):
    conn = fake_madlib
    w, b = _centroid_coef(conn)
    # MADlib maps dep_var_mapping[1] to -1: with (true, false) its
    # coefficients separate "false" as the positive side
    sign = -1.0 if mapping[0] else 1.0
    _fake(conn, "2.1", [*(sign * w), sign * b], mapping)
    ds = describe_table(conn, "small")
    cfg = TrainSettings(epochs=4, learning_rate=0.05, decay=0.9, l2=0.001)
    (r,) = madlib.runs(conn, ds, "svm", "no_shuffle", cfg, None)
    assert r.status == "ok", r.reason
    np.testing.assert_allclose(r.extra["weights"], [*w, b])
    # one call from scratch per checkpoint, each with an intercept
    # (MADlib's code defaults fit_intercept to false, whatever its docs say)
    assert _calls(conn) == [
        ("svm_classification", "fit_intercept=true",
         f"init_stepsize=0.05, decay_factor=0.9, max_iter={k}, tolerance=0, lambda=0.001",
         None, None, None) for k in (1, 2, 3, 4)]
    assert [e.epoch for e in r.epochs] == [1, 2, 3, 4]
    cum = r.cumulative_seconds()
    assert cum == sorted(cum)
    assert [c["max_iter"] for c in r.extra["checkpoints"]] == [1, 2, 3, 4]
    assert cum[-1] == pytest.approx(max(c["seconds"] for c in r.extra["checkpoints"]))
    assert all(e.test_score > 0.8 for e in r.epochs)
    assert r.extra["madlib_version"].startswith("MADlib version: 2.1.0")
    left = conn.execute("SELECT count(*) FROM pg_class WHERE relname LIKE 'corgipile_bench_madlib%'")
    assert left.fetchone()[0] == 0


def test_logistic_reads_madlib_2_1_output_with_igd_and_irls(fake_madlib):
    conn = fake_madlib
    w, b = _centroid_coef(conn)
    _fake(conn, "2.1", [b, *w])  # the intercept comes first (the leading 1)
    ds = describe_table(conn, "small")
    igd, irls = madlib.runs(conn, ds, "logistic", "no_shuffle", TrainSettings(epochs=20), None)
    assert (igd.method, irls.method) == ("madlib (no_shuffle)", "madlib irls (no_shuffle)")
    for r in (igd, irls):
        assert r.status == "ok", r.reason
        np.testing.assert_allclose(r.extra["weights"], [*w, b])
        assert [e.epoch for e in r.epochs] == [1, 2, 3, 5, 10, 20]
        assert r.epochs[0].test_score > 0.8
    assert _calls(conn) == [("logregr_train", None, None, k, opt, 0.0)
                            for opt in ("igd", "irls") for k in (1, 2, 3, 5, 10, 20)]


def test_checkpoints_and_version():
    assert madlib.checkpoints(1) == [1]
    assert madlib.checkpoints(7) == [1, 2, 3, 5, 7]
    assert madlib.checkpoints(30) == [1, 2, 3, 5, 10, 20, 30]


def test_version_is_none_without_madlib_and_read_with_it(small):
    assert madlib.version(small) is None
    small.execute("CREATE SCHEMA madlib")
    assert madlib.version(small) is None  # a schema without MADlib in it
    small.execute(_FAKE.replace("CREATE SCHEMA madlib;", ""))
    assert madlib.version(small).startswith("MADlib version: 2.1.0")


@pytest.mark.parametrize("model, shape, words", [
    ("svm", "old mapping name", ["no column dep_var_mapping", "__dep_var_mapping",
                                 "MADlib 2.1"]),
    ("svm", "short coef", ["coef has 2 entries", "5 finite numbers"]),
    ("logistic", "no num_iterations", ["no column num_iterations", "iterations_done"]),
    ("logistic", "failed group", ["NULL coef", "training failed"]),
])
def test_an_unexpected_output_shape_fails_loudly(fake_madlib, model, shape, words):
    conn = fake_madlib
    w, b = _centroid_coef(conn)
    _fake(conn, shape, [*w, b])
    ds = describe_table(conn, "small")
    r = madlib.run(conn, ds, model, "no_shuffle", TrainSettings(epochs=2), None)
    assert r.status == "failed" and r.epochs == []
    for word in words:
        assert word in r.reason, r.reason
    left = conn.execute("SELECT count(*) FROM pg_class WHERE relname LIKE 'corgipile_bench_madlib%'")
    assert left.fetchone()[0] == 0
