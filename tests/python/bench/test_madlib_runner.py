"""The MADlib runner in `make test`, where MADlib is not installed: skipped
with a reason when absent, a clean failure when a `madlib` schema exists
without MADlib in it, and, against a stub of MADlib 2.1's functions, the
arguments the runner passes and what it reads.

The stub is built from madlib_2_1_0.json, what a real MADlib 2.1.0 did
with the runner's calls (recorded by test_madlib_real.py, which `make
test-madlib` runs against a real build): the same signatures, output
tables with the same columns and types, a coef without an intercept unless
kernel_params says fit_intercept=true, the intercept last, dep_var_mapping
from the data, num_iterations = max_iter at tolerance 0, a zero model
after logistic IGD's first iteration. test_stub_does_what_madlib_did runs
the observation of the real test on the stub: a stub that drifts from the
record fails here, a MADlib that drifts from it fails there."""

from __future__ import annotations

from typing import Any

import numpy as np
import pglast
import pytest
from pglast.visitors import Visitor

from corgipile.bench import madlib
from corgipile.bench.config import TrainSettings
from corgipile.bench.datasets import describe_table
from datagen import linear_task, load_table
from madlib_observe import observe, record


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


# -- the stub, built from the record ----------------------------------------------------

def _column_sql(columns: list[list[str]], exprs: dict[str, str]) -> str:
    """SELECT list of an output table: every recorded column with its
    recorded type; the expressions given for some, NULL for the rest.
    dep_var_mapping keeps the type of the dependent expression, as in
    MADlib."""
    out = []
    for name, typ in columns:
        e = exprs.get(name, "NULL")
        out.append(f"{e} AS {name}" if name == "dep_var_mapping" else f"({e})::{typ} AS {name}")
    return ", ".join(out)


def stub_sql(rec: dict[str, Any]) -> str:
    """CREATE statements of a `madlib` schema that does what rec records."""
    svm, lr = rec["svm_classification"], rec["logregr_train"]
    # what the record says, in the terms the stub implements
    extra_default = svm["coef_entries"]["kernel_params NULL"] - svm["coef_entries"]["features"]
    extra_fit = svm["coef_entries"]["fit_intercept=true"] - svm["coef_entries"]["features"]
    assert (extra_default, extra_fit) == (0, 1) and svm["intercept"] in ("first", "last"), (
        "the record's coef layout is one the stub does not implement; extend stub_sql")
    with_b = "w || b" if svm["intercept"] == "last" else "b || w"
    assert svm["num_iterations_at_max_iter_2"] == 2
    assert lr["num_iterations_at_max_iter_3"] == {"igd": 3, "irls": 3}
    assert lr["coef_entries"]["array_prepend(1, features)"] == lr["coef_entries"]["features"] + 1
    igd_first_zero = all(c == 0 for c in lr["igd_coef_after_1_iteration"])
    version = rec["version"] + ", git revision: stub of tests/python/bench/madlib_2_1_0.json"

    def overloads(fn: str, body: str) -> str:
        """Every recorded signature: the longest with body, the shorter
        ones passing NULL for the arguments they lack (MADlib's pass its
        defaults), the help ones (fewer than four arguments) refusing."""
        sigs = rec["signatures"][fn]
        full = max(sigs, key=lambda s: s.count(","))
        types = [a.strip().split(" ", 1)[1] for a in full.split(",")]
        out = []
        for s in sigs:
            n = s.count(",") + 1 if s else 0
            if s == full:
                code = body
            elif n >= 4:
                args = [f"${i + 1}" for i in range(n)] + [f"NULL::{t}" for t in types[n:]]
                code = f"BEGIN PERFORM madlib.{fn}({', '.join(args)}); END"
            else:
                code = f"BEGIN RAISE EXCEPTION 'stub: madlib.{fn}({s}) is a help text'; END"
            out.append(f"CREATE FUNCTION madlib.{fn}({s}) RETURNS void LANGUAGE plpgsql "
                       f"AS $f$\n{code}\n$f$;")
        return "\n".join(out)

    # format() arguments: %1$s the table, %2$L the coef, %3$s the iterations
    # (or the failed groups), %4$s the dependent expression, %5$s the source
    svm_model = _column_sql(svm["model_columns"], {
        "coef": "%2$L", "num_iterations": "%3$s", "dep_var_mapping": "mapping.m",
        "num_rows_processed": "0", "num_rows_skipped": "0"})
    svm_summary = _column_sql(svm["summary_columns"], {
        "num_all_groups": "1", "num_failed_groups": "0"})
    lr_model = _column_sql(lr["model_columns"], {"coef": "%2$L", "num_iterations": "%3$s"})
    lr_summary = _column_sql(lr["summary_columns"], {
        "num_all_groups": "1", "num_failed_groups": "%2$s"})
    svm_body = """DECLARE
    f madlib.fake;
    n integer := madlib.stub_features($1, $4);
    fit boolean := coalesce($6, '') ~* 'fit_intercept\\s*=\\s*true';
    iters integer := substring($8 from 'max_iter\\s*=\\s*(\\d+)')::integer;
    w float8[];
    b float8[];
    coef float8[];
BEGIN
    INSERT INTO madlib.calls (fn, args) VALUES ('svm_classification',
        ARRAY[$1, $2, $3, $4, $5, $6, $7, $8, $9::text]);
    SELECT * INTO f FROM madlib.fake;
    w := coalesce(f.w[1:n], array_fill(0::float8, ARRAY[n]));
    b := ARRAY[coalesce(f.b, 0)];
    coef := CASE WHEN fit THEN WITH_B ELSE w END;
    EXECUTE format('CREATE TABLE %1$s AS SELECT SVM_MODEL FROM (SELECT array_agg(d ORDER BY d)
        AS m FROM (SELECT DISTINCT %4$s AS d FROM %5$s) s WHERE d IS NOT NULL) AS mapping',
        $2, coef, iters, $3, $1);
    IF f.shape = 'old mapping name' THEN   -- the name MADlib's documentation gives
        EXECUTE format('ALTER TABLE %s RENAME dep_var_mapping TO __dep_var_mapping', $2);
    END IF;
    EXECUTE format('CREATE TABLE %1$s AS SELECT SVM_SUMMARY', madlib.stub_postfix($2, '_summary'));
END""".replace("WITH_B", with_b).replace("SVM_MODEL", svm_model).replace(
        "SVM_SUMMARY", svm_summary)
    lr_body = """DECLARE
    f madlib.fake;
    n integer := madlib.stub_features($1, $4);
    coef float8[];
BEGIN
    INSERT INTO madlib.calls (fn, args) VALUES ('logregr_train',
        ARRAY[$1, $2, $3, $4, $5, $6::text, $7, $8::text]);
    SELECT * INTO f FROM madlib.fake;
    -- one coefficient per entry of the independent array (the runner's
    -- [1, features...]: the intercept first)
    coef := (ARRAY[coalesce(f.b, 0)] || coalesce(f.w, array_fill(0::float8, ARRAY[n])))[1:n];
    IF IGD_FIRST_ZERO AND $7 = 'igd' AND $6 = 1 THEN
        coef := array_fill(0::float8, ARRAY[n]);   -- IGD's first step is 0
    END IF;
    IF f.shape = 'failed group' THEN coef := NULL; END IF;
    EXECUTE format('CREATE TABLE %1$s AS SELECT LR_MODEL', $2, coef, $6);
    IF f.shape = 'no num_iterations' THEN
        EXECUTE format('ALTER TABLE %s RENAME num_iterations TO iterations_done', $2);
    END IF;
    EXECUTE format('CREATE TABLE %1$s AS SELECT LR_SUMMARY', madlib.stub_postfix($2, '_summary'),
        CASE WHEN f.shape = 'failed group' THEN 1 ELSE 0 END);
END""".replace("IGD_FIRST_ZERO", str(igd_first_zero).lower()).replace(
        "LR_MODEL", lr_model).replace("LR_SUMMARY", lr_summary)
    return f"""
CREATE SCHEMA madlib;
-- what the stub returns: a shape (see test_an_unexpected_output_shape_fails_loudly)
-- and the model's weights and intercept (zeros when no row)
CREATE TABLE madlib.fake (shape text, w float8[], b float8);
-- every call's arguments, in order: what the runner passed
CREATE TABLE madlib.calls (n serial, fn text, args text[]);

CREATE FUNCTION madlib.version() RETURNS text LANGUAGE sql AS $$ SELECT {version!r}::text $$;

CREATE FUNCTION madlib.array_contains_null(a float8[]) RETURNS boolean LANGUAGE sql
AS $$ SELECT a IS NULL OR array_position(a, NULL) IS NOT NULL $$;

-- MADlib's add_postfix: the summary table's name, inside the quotes of a quoted name
CREATE FUNCTION madlib.stub_postfix(name text, postfix text) RETURNS text LANGUAGE sql
AS $$ SELECT CASE WHEN btrim(name) LIKE '"%"' THEN left(btrim(name), -1) || postfix || '"'
                  ELSE btrim(name) || postfix END $$;

-- MADlib's n_features, from the data as its num_features() takes it
CREATE FUNCTION madlib.stub_features(source text, indep text) RETURNS integer LANGUAGE plpgsql
AS $f$ DECLARE n integer; BEGIN
    EXECUTE format('SELECT max(array_upper(%s, 1)) FROM %s', indep, source) INTO n; RETURN n;
END $f$;

{overloads("svm_classification", svm_body)}

{overloads("logregr_train", lr_body)}
"""


@pytest.fixture
def stub(small):
    """A `madlib` schema whose functions do what madlib_2_1_0.json says a
    real MADlib 2.1.0 did, with the weights the test chooses. The runner's
    SQL runs on the real server, against real tables."""
    small.execute(stub_sql(record()))
    return small


def test_stub_does_what_madlib_did(stub):
    """The observation of test_madlib_real.py, run on the stub, gives the
    record: everything but where the intercept is, which the stub cannot
    find out (it has no arithmetic); it puts it where the record says."""
    got, want = observe(stub), record()
    assert got["svm_classification"].pop("intercept").startswith("neither")
    want["svm_classification"].pop("intercept")
    assert got == want


def _centroid(conn):
    """A usable linear classifier of the small table (difference of the
    class means), so that the score the runner computes means something."""
    rows = conn.execute("SELECT label, features FROM small").fetchall()
    y = np.array([r[0] for r in rows])
    x = np.array([r[1] for r in rows])
    pos, neg = x[y > 0].mean(axis=0), x[y <= 0].mean(axis=0)
    w = pos - neg
    return w, -float(w @ (pos + neg) / 2)


def _fake(conn, shape, w, b):
    conn.execute("DELETE FROM madlib.fake")
    conn.execute("INSERT INTO madlib.fake VALUES (%s, %s, %s)", (shape, list(w), b))


def _calls(conn):
    return conn.execute("SELECT fn, args FROM madlib.calls ORDER BY n").fetchall()


def _accuracy(conn, w, b):
    rows = conn.execute("SELECT label, features FROM small").fetchall()
    return float(np.mean([(np.dot(w, f) + b > 0) == (lab > 0) for lab, f in rows]))


def test_svm_runner_passes_fit_intercept_and_reads_the_intercept_last(stub):
    conn = stub
    w, b = _centroid(conn)
    _fake(conn, "real", w, b)
    ds = describe_table(conn, "small")
    cfg = TrainSettings(epochs=4, learning_rate=0.05, decay=0.9)
    (r,) = madlib.runs(conn, ds, "svm", "no_shuffle", cfg, None)
    assert r.status == "ok", r.reason
    np.testing.assert_allclose(r.extra["weights"], [*w, b])
    # one untimed call, then one call from scratch per checkpoint, each with
    # an intercept and the table names qualified
    out = conn.execute("SELECT current_schema()").fetchone()[0]
    calls = _calls(conn)
    assert [c[0] for c in calls] == ["svm_classification"] * 5
    for (_, args), k in zip(calls, (1, 1, 2, 3, 4), strict=True):
        assert args[0] == '"public"."small"'
        assert args[1].startswith(f'"{out}"."corgipile_bench_madlib_')
        assert args[2] == '("label" OPERATOR(pg_catalog.>) 0)' and args[3] == '"features"'
        assert args[4:] == ["linear", "fit_intercept=true", None,
                            f"init_stepsize=0.05, decay_factor=0.9, max_iter={k}, tolerance=0, "
                            "lambda=0.0", "false"]
    assert [e.epoch for e in r.epochs] == [1, 2, 3, 4]
    assert [c["iterations"] for c in r.extra["checkpoints"]] == [1, 2, 3, 4]
    cum = r.cumulative_seconds()
    assert cum == sorted(cum)
    assert cum[-1] == pytest.approx(max(c["seconds"] for c in r.extra["checkpoints"]))
    # the score is the accuracy of the weights the stub returned
    assert r.epochs[-1].test_score == pytest.approx(_accuracy(conn, w, b))
    assert r.epochs[-1].test_score > 0.8
    assert r.extra["madlib_version"].startswith("MADlib version: 2.1.0")
    left = conn.execute("SELECT count(*) FROM pg_class WHERE relname LIKE 'corgipile_bench_madlib%'")
    assert left.fetchone()[0] == 0


def test_svm_without_fit_intercept_fails_as_madlib_makes_it(stub, monkeypatch):
    """MADlib's documentation says fit_intercept defaults to true; its code
    (and the record) says false: without the kernel_params the coef has one
    entry less, and the run fails saying so rather than misreading it."""
    conn = stub
    _fake(conn, "real", *_centroid(conn))
    monkeypatch.setattr(madlib, "SVM_KERNEL_PARAMS", None)
    (r,) = madlib.runs(conn, describe_table(conn, "small"), "svm", "no_shuffle",
                       TrainSettings(epochs=2), None)
    assert r.status == "failed" and r.epochs == []
    assert "coef has 4 entries (not 5 finite numbers" in r.reason, r.reason


def test_logistic_runner_prepends_the_one_and_reads_the_intercept_first(stub):
    conn = stub
    w, b = _centroid(conn)
    _fake(conn, "real", w, b)
    ds = describe_table(conn, "small")
    igd, irls = madlib.runs(conn, ds, "logistic", "no_shuffle", TrainSettings(epochs=20), None)
    assert (igd.method, irls.method) == ("madlib (no_shuffle)", "madlib irls (no_shuffle)")
    for r in (igd, irls):
        assert r.status == "ok", r.reason
        np.testing.assert_allclose(r.extra["weights"], [*w, b])
        assert [e.epoch for e in r.epochs] == [1, 2, 3, 5, 10, 20]
    # IGD's first iteration: a zero model, every row called negative
    negatives = conn.execute("SELECT avg((label <= 0)::int)::float8 FROM small").fetchone()[0]
    assert igd.epochs[0].test_score == pytest.approx(negatives)
    assert irls.epochs[0].test_score == pytest.approx(_accuracy(conn, w, b))
    calls = _calls(conn)
    assert [(c[1][5], c[1][6], c[1][7]) for c in calls] == [
        (str(k), opt, "0") for opt in ("igd", "irls") for k in (1, 1, 2, 3, 5, 10, 20)]
    assert {c[1][3] for c in calls} == {
        'pg_catalog.array_prepend(1::pg_catalog.float8, "features")'}


def test_lambda_is_l2_times_the_rows(stub):
    """MADlib shrinks by 1 - stepsize * lambda / n per row: the runner passes
    lambda = l2 * n, n the rows without a NULL feature."""
    conn = stub
    _fake(conn, "real", *_centroid(conn))
    conn.execute("UPDATE small SET features = NULL WHERE id < 10")
    (r,) = madlib.runs(conn, describe_table(conn, "small"), "svm", "no_shuffle",
                       TrainSettings(epochs=1, l2=0.01), None)
    assert r.status == "ok", r.reason
    assert r.extra["params"].endswith(f"lambda={0.01 * 290!r}")


class _Names(Visitor):
    """Every function, type and operator name in a parse tree."""

    def __init__(self) -> None:
        self.names: list[tuple[str, ...]] = []

    def visit_FuncCall(self, ancestors, node):
        self.names.append(tuple(n.sval for n in node.funcname))

    def visit_TypeName(self, ancestors, node):
        self.names.append(tuple(n.sval for n in node.names))

    def visit_A_Expr(self, ancestors, node):
        self.names.append(tuple(n.sval for n in node.name))


def test_every_name_the_runner_writes_is_qualified(stub):
    """MADlib splices the runner's arguments into SQL it runs with the
    session's search path: every function, type and operator in them is
    pg_catalog's, every table schema-qualified."""
    conn = stub
    conn.execute("ALTER TABLE small ALTER features TYPE float4[]")   # a cast to write
    _fake(conn, "real", *_centroid(conn))
    ds = describe_table(conn, "small")
    for model in ("svm", "logistic"):
        for r in madlib.runs(conn, ds, model, "no_shuffle", TrainSettings(epochs=1), None):
            assert r.status == "ok", r.reason
    calls = _calls(conn)
    assert {c[0] for c in calls} == {"svm_classification", "logregr_train"}
    for _, args in calls:
        for table in args[:2]:
            (stmt,) = pglast.parse_sql(f"SELECT * FROM {table}")
            assert stmt.stmt.fromClause[0].schemaname, table
        for expr in args[2:4]:
            (stmt,) = pglast.parse_sql(f"SELECT {expr}")
            v = _Names()
            v(stmt)
            assert v.names, expr
            assert all(len(n) == 2 and n[0] == "pg_catalog" for n in v.names), (expr, v.names)


def test_checkpoints():
    assert madlib.checkpoints(1) == [1]
    assert madlib.checkpoints(7) == [1, 2, 3, 5, 7]
    assert madlib.checkpoints(30) == [1, 2, 3, 5, 10, 20, 30]


def test_version_is_none_without_madlib_and_read_with_it(small):
    assert madlib.version(small) is None
    small.execute("CREATE SCHEMA madlib")
    assert madlib.version(small) is None  # a schema without MADlib in it
    small.execute(stub_sql(record()).replace("CREATE SCHEMA madlib;", ""))
    assert madlib.version(small).startswith(record()["version"] + ",")


@pytest.mark.parametrize("model, shape, words", [
    ("svm", "old mapping name", ["no column dep_var_mapping", "__dep_var_mapping",
                                 "MADlib 2.1"]),
    ("logistic", "no num_iterations", ["no column num_iterations", "iterations_done"]),
    ("logistic", "failed group", ["NULL coef", "training failed"]),
])
def test_an_unexpected_output_shape_fails_loudly(stub, model, shape, words):
    conn = stub
    _fake(conn, shape, *_centroid(conn))
    ds = describe_table(conn, "small")
    r = madlib.run(conn, ds, model, "no_shuffle", TrainSettings(epochs=2), None)
    assert r.status == "failed" and r.epochs == []
    for word in words:
        assert word in r.reason, r.reason
    left = conn.execute("SELECT count(*) FROM pg_class WHERE relname LIKE 'corgipile_bench_madlib%'")
    assert left.fetchone()[0] == 0
