"""Hostile replays against the training engine: row-level security
and privileges checked for the role that executes, no user code inside our
internal queries, sizes and types checked before anything is read,
cancellation in every strategy, shuffle_table on tables whose layout differs
from a fresh copy's, and models stored only when training completes.

Every test runs under the autouse check of conftest.py that the postmaster
never restarted (a backend crash restarts them all).
"""

from __future__ import annotations

import threading

import psycopg
import pytest
from psycopg import errors, sql

from corgipile.strategies import ALL as STRATEGIES
from server_probe import TrainingInThread


def models_named(conn, name: str) -> int:
    return conn.execute("SELECT count(*) FROM corgipile.models WHERE model_name = %s",
                        (name,)).fetchone()[0]


def quiet(conn) -> None:
    conn.execute("SET corgipile.progress = off")


def make_points(conn, table: str, rows: int = 400) -> None:
    """Two separable classes, labels -1/+1; label 1 rows have x[0] > 0."""
    conn.execute(sql.SQL(
        "CREATE TABLE {} AS SELECT g AS id, CASE WHEN g %% 2 = 0 THEN 1 ELSE -1 END AS label, "
        "ARRAY[CASE WHEN g %% 2 = 0 THEN 1.0 ELSE -1.0 END + (g %% 7) / 10.0, 1.0]::float8[] "
        "AS features FROM generate_series(1, %s) g").format(sql.Identifier(table)), (rows,))


# ---------------------------------------------------------------------------
# 1. RLS and privileges for the executing role
# ---------------------------------------------------------------------------

@pytest.fixture
def rls_table(conn, roles):
    """points: 400 rows; role `hidden` sees only label = 1 through a policy,
    role `cols` may read only the label column."""
    quiet(conn)
    make_points(conn, "points")
    hidden = roles.create("rls")
    cols = roles.create("cols")
    conn.execute(f'GRANT SELECT ON points TO "{hidden}"')
    conn.execute(f'GRANT SELECT (label) ON points TO "{cols}"')
    conn.execute("ALTER TABLE points ENABLE ROW LEVEL SECURITY")
    conn.execute(f'CREATE POLICY only_ones ON points TO "{hidden}" USING (label = 1)')
    conn.execute(f'CREATE POLICY all_rows ON points TO "{cols}" USING (true)')
    return conn, hidden, cols


@pytest.mark.parametrize("plan_mode", ["auto", "force_generic_plan", "force_custom_plan"])
def test_prepared_as_superuser_executed_under_rls_refuses(rls_table, plan_mode):
    conn, hidden, _ = rls_table
    conn.execute(f"SET plan_cache_mode = {plan_mode}")
    conn.execute("PREPARE tr AS SELECT epoch, tuples FROM corgipile.train("
                 "'points', 'svm', max_epoch_num => 1, seed => 1)")
    # the superuser sees (and trains on) every row, several times so that a
    # generic plan gets cached
    for _ in range(6):
        assert conn.execute("EXECUTE tr").fetchall() == [(1, 400)]
    before = conn.execute("SELECT count(*) FROM corgipile.models").fetchone()[0]
    conn.execute(f'SET ROLE "{hidden}"')
    with pytest.raises(errors.FeatureNotSupported, match="row-level security"):
        conn.execute("EXECUTE tr")
    conn.execute("RESET ROLE")
    assert conn.execute("SELECT count(*) FROM corgipile.models").fetchone()[0] == before


def test_prepared_with_parameters_executed_under_rls_refuses(rls_table):
    """A generic plan with parameters: the call is planned at execution."""
    conn, hidden, _ = rls_table
    conn.execute("SET plan_cache_mode = force_generic_plan")
    conn.execute("PREPARE tr(text) AS SELECT epoch, tuples FROM corgipile.train("
                 "$1::regclass, 'svm', max_epoch_num => 1, seed => 1)")
    assert conn.execute("EXECUTE tr('points')").fetchall() == [(1, 400)]
    conn.execute(f'SET ROLE "{hidden}"')
    with pytest.raises(errors.FeatureNotSupported, match="row-level security"):
        conn.execute("EXECUTE tr('points')")
    conn.execute("RESET ROLE")


@pytest.mark.parametrize("language", ["plpgsql", "sql"])
def test_security_invoker_function_checks_each_caller(rls_table, language):
    conn, hidden, _ = rls_table
    if language == "plpgsql":
        body = ("BEGIN RETURN QUERY SELECT t.tuples FROM corgipile.train('points', 'svm', "
                "max_epoch_num => 1, seed => 1) t; END")
    else:
        body = "SELECT t.tuples FROM corgipile.train('points', 'svm', max_epoch_num => 1, seed => 1) t"
    conn.execute(f"CREATE FUNCTION public.train_points() RETURNS SETOF bigint "
                 f"LANGUAGE {language} SECURITY INVOKER AS $f${body}$f$")
    conn.execute("GRANT EXECUTE ON FUNCTION public.train_points() TO PUBLIC")
    for _ in range(3):
        assert conn.execute("SELECT * FROM public.train_points()").fetchall() == [(400,)]
    conn.execute(f'SET ROLE "{hidden}"')
    with pytest.raises(errors.FeatureNotSupported, match="row-level security"):
        conn.execute("SELECT * FROM public.train_points()")
    conn.execute("RESET ROLE")


def test_column_privileges_checked_for_executing_role(rls_table, roles):
    conn, _, cols = rls_table
    # no RLS question here: cols has a policy showing every row
    conn.execute("ALTER TABLE points DISABLE ROW LEVEL SECURITY")
    conn.execute("PREPARE tr AS SELECT tuples FROM corgipile.train("
                 "'points', 'svm', max_epoch_num => 1, seed => 1)")
    assert conn.execute("EXECUTE tr").fetchall() == [(400,)]
    conn.execute(f'SET ROLE "{cols}"')
    with pytest.raises(errors.InsufficientPrivilege, match="points"):
        conn.execute("EXECUTE tr")
    conn.execute("RESET ROLE")
    # with the features column granted too, the same statement trains
    conn.execute(f'GRANT SELECT (features) ON points TO "{cols}"')
    conn.execute(f'SET ROLE "{cols}"')
    assert conn.execute("EXECUTE tr").fetchall() == [(400,)]
    conn.execute("RESET ROLE")


def test_validation_relation_checked_for_executing_role(rls_table):
    conn, hidden, _ = rls_table
    make_points(conn, "val_points", rows=100)
    conn.execute(f'GRANT SELECT ON val_points TO "{hidden}"')
    conn.execute("ALTER TABLE val_points ENABLE ROW LEVEL SECURITY")
    conn.execute(f'CREATE POLICY v ON val_points TO "{hidden}" USING (label = 1)')
    conn.execute("ALTER TABLE points DISABLE ROW LEVEL SECURITY")
    conn.execute("PREPARE tr AS SELECT tuples FROM corgipile.train('points', 'svm', "
                 "max_epoch_num => 1, seed => 1, validation => 'val_points')")
    assert conn.execute("EXECUTE tr").fetchall() == [(400,)]
    conn.execute(f'SET ROLE "{hidden}"')
    with pytest.raises(errors.FeatureNotSupported, match='"val_points".*row-level security'):
        conn.execute("EXECUTE tr")
    conn.execute("RESET ROLE")
    # column privileges on the validation relation, for the executing role
    conn.execute("ALTER TABLE val_points DISABLE ROW LEVEL SECURITY")
    conn.execute(f'REVOKE SELECT ON val_points FROM "{hidden}"')
    conn.execute(f'GRANT SELECT (label) ON val_points TO "{hidden}"')
    conn.execute(f'SET ROLE "{hidden}"')
    with pytest.raises(errors.InsufficientPrivilege, match="val_points"):
        conn.execute("EXECUTE tr")
    conn.execute("RESET ROLE")


def test_shuffled_scan_and_shuffle_table_check_executing_role(rls_table):
    conn, hidden, cols = rls_table
    conn.execute("PREPARE sc AS SELECT count(*) FROM corgipile.shuffled_scan("
                 "'points', 'corgipile', '1', '4', 1)")
    assert conn.execute("EXECUTE sc").fetchone()[0] == 400
    conn.execute(f'SET ROLE "{hidden}"')
    with pytest.raises(errors.FeatureNotSupported, match="row-level security"):
        conn.execute("EXECUTE sc")
    with pytest.raises(errors.FeatureNotSupported, match="row-level security"):
        conn.execute("SELECT corgipile.shuffle_table('points', 'points_copy', 1)")
    conn.execute("RESET ROLE")
    # row ids are a view of the whole table: a role with one column may not
    conn.execute("ALTER TABLE points DISABLE ROW LEVEL SECURITY")
    conn.execute(f'SET ROLE "{cols}"')
    with pytest.raises(errors.InsufficientPrivilege):
        conn.execute("EXECUTE sc")
    conn.execute("RESET ROLE")


# ---------------------------------------------------------------------------
# 2. No user code inside ours
# ---------------------------------------------------------------------------

HOSTILE_OBJECTS = """
CREATE FUNCTION public.unnest(int[]) RETURNS SETOF int LANGUAGE plpgsql AS $f$
BEGIN {mark} RETURN QUERY SELECT pg_catalog.unnest($1); END $f$;
CREATE FUNCTION public.unnest(int8[]) RETURNS SETOF int8 LANGUAGE plpgsql AS $f$
BEGIN {mark} RETURN QUERY SELECT pg_catalog.unnest($1); END $f$;
CREATE FUNCTION public.hostile_max(int, int) RETURNS int LANGUAGE plpgsql AS $f$
BEGIN {mark} RETURN pg_catalog.int4larger($1, $2); END $f$;
CREATE AGGREGATE public.max(int) (sfunc = public.hostile_max, stype = int);
CREATE FUNCTION public.hostile_max8(int8, int8) RETURNS int8 LANGUAGE plpgsql AS $f$
BEGIN {mark} RETURN pg_catalog.int8larger($1, $2); END $f$;
CREATE AGGREGATE public.max(int8) (sfunc = public.hostile_max8, stype = int8);
CREATE FUNCTION public.format(text, text, text, bigint) RETURNS text LANGUAGE plpgsql AS $f$
BEGIN {mark} RETURN pg_catalog.format($1, $2, $3, $4); END $f$;
CREATE FUNCTION public.format(text, text, text) RETURNS text LANGUAGE plpgsql AS $f$
BEGIN {mark} RETURN pg_catalog.format($1, $2, $3); END $f$;
CREATE FUNCTION public.text(int) RETURNS text LANGUAGE plpgsql AS $f$
BEGIN {mark} RETURN $1::pg_catalog.text; END $f$;
CREATE FUNCTION public.int8(int) RETURNS int8 LANGUAGE plpgsql AS $f$
BEGIN {mark} RETURN $1::pg_catalog.int8; END $f$;
CREATE FUNCTION public.hostile_texteq(text, text) RETURNS bool LANGUAGE plpgsql AS $f$
BEGIN {mark} RETURN $1 OPERATOR(pg_catalog.=) $2; END $f$;
CREATE OPERATOR public.= (LEFTARG = text, RIGHTARG = text, PROCEDURE = public.hostile_texteq);
CREATE FUNCTION public.hostile_inteq(int, int) RETURNS bool LANGUAGE plpgsql AS $f$
BEGIN {mark} RETURN $1 OPERATOR(pg_catalog.=) $2; END $f$;
CREATE OPERATOR public.= (LEFTARG = int, RIGHTARG = int, PROCEDURE = public.hostile_inteq);
CREATE FUNCTION public.hostile_isnn(text) RETURNS bool LANGUAGE plpgsql AS $f$
BEGIN {mark} RETURN $1 IS NOT NULL; END $f$;
CREATE FUNCTION public.quote_ident(text) RETURNS text LANGUAGE plpgsql AS $f$
BEGIN {mark} RETURN pg_catalog.quote_ident($1); END $f$;
CREATE FUNCTION public.array_length(int[], int) RETURNS int LANGUAGE plpgsql AS $f$
BEGIN {mark} RETURN pg_catalog.array_length($1, $2); END $f$;
"""


@pytest.fixture
def hostile_schema(conn, roles, canary):
    """A role with CREATE on public fills it with look-alikes of pg_catalog's
    functions and operators, each leaving a mark on the canary, and owns the
    tables a superuser then trains on with public first in search_path."""
    attacker = roles.create("attacker")
    evil = roles.connect(attacker)
    evil.execute(HOSTILE_OBJECTS.format(mark=canary.MARK))
    evil.execute("CREATE TABLE public.sparse_t (label text, idx int[], val float8[], "
                 "ilabel int, idx8 int8[])")
    evil.execute("INSERT INTO public.sparse_t SELECT (ARRAY['a','b','c'])[g % 3 + 1], "
                 "ARRAY[g % 5, 5 + g % 3], ARRAY[1.0, 0.5], g % 3, ARRAY[g % 5, 7]::int8[] "
                 "FROM generate_series(1, 300) g")
    evil.execute("CREATE TABLE public.dense_t (label int, features float8[], note text)")
    evil.execute("INSERT INTO public.dense_t SELECT CASE WHEN g % 2 = 0 THEN 1 ELSE -1 END, "
                 "ARRAY[g % 2, 1], 'n' FROM generate_series(1, 200) g")
    # models already in the catalog, so that a comparison in a query of it
    # has rows to run on
    quiet(conn)
    for name in ("existing_1", "existing_2"):
        conn.execute("SELECT * FROM corgipile.train('public.dense_t', 'svm', max_epoch_num => 1, "
                     "model_name => %s)", (name,))
    # the sanity check that the look-alikes do fire when resolved by path
    probe = roles.connect(attacker)
    probe.execute("SET search_path = public, pg_catalog")
    probe.execute("SELECT max(i) FROM unnest(ARRAY[1, 2]) i")
    assert canary.calls() > 0, "the hostile functions do not run even when called directly"
    before = canary.calls()
    # (on a table of the attacker's: corgipile.models is a security-barrier
    # view that shows the attacker no rows to compare)
    probe.execute("SELECT 1 FROM public.dense_t WHERE note = 'x'")
    assert canary.calls() > before, "the hostile text = does not run even when called directly"
    marks = canary.calls()
    conn.execute("SET search_path = public, pg_catalog")
    quiet(conn)
    return conn, marks


@pytest.mark.parametrize("call", [
    # sparse dimension inferred (max, unnest), text classes (DISTINCT ::text)
    "SELECT * FROM corgipile.train('public.sparse_t', 'softmax', features => 'val', "
    "feature_indices => 'idx', max_epoch_num => 1, seed => 1, model_name => 'h1')",
    "SELECT * FROM corgipile.train('public.sparse_t', 'softmax', label => 'ilabel', "
    "features => 'val', feature_indices => 'idx8', max_epoch_num => 1, seed => 1, "
    "model_name => 'h2')",
    # the fallback (SELECT list): our SPI cursor
    "SELECT corgipile.train('public.sparse_t', 'softmax', features => 'val', "
    "feature_indices => 'idx', max_epoch_num => 2, seed => 1, model_name => 'h3')",
    "SELECT corgipile.train('public.dense_t', 'svm', max_epoch_num => 1, "
    "model_name => 'h4', validation => 'public.dense_t')",
    "SELECT * FROM corgipile.shuffled_scan('public.dense_t', 'epoch_shuffle', '1', '2', 1)",
    # a generated model name
    "SELECT * FROM corgipile.train('public.dense_t', 'logistic', max_epoch_num => 1)",
    # arguments known at execution only: the call node's cursor
    "SELECT * FROM corgipile.train('public.sparse_t', 'softmax', features => 'val', "
    "feature_indices => 'idx', max_epoch_num => 1, seed => (SELECT 1), model_name => 'h5')",
    "SELECT corgipile.shuffle_table('public.dense_t', 'dense_copy', 1)",
    "SELECT corgipile.shuffle_table('public.sparse_t', 'public.sparse_copy', 1)",
])
def test_no_user_code_runs_inside_ours(hostile_schema, canary, call):
    conn, marks = hostile_schema
    conn.execute(call).fetchall()
    assert canary.calls() == marks, f"a hostile function ran inside: {call}"


def test_shuffle_table_creates_in_the_callers_schema(hostile_schema):
    conn, _ = hostile_schema
    conn.execute("SET search_path = public")
    conn.execute("SELECT corgipile.shuffle_table('dense_t', 'dense_copy2', 3)")
    assert conn.execute("SELECT count(*) FROM public.dense_copy2").fetchone()[0] == 200


# ---------------------------------------------------------------------------
# 3. Sizes and types checked before anything is read
# ---------------------------------------------------------------------------

@pytest.fixture
def sparse3(conn):
    quiet(conn)
    conn.execute("CREATE TABLE sp (label int, idx int[], val float8[])")
    conn.execute("INSERT INTO sp SELECT g % 3, ARRAY[g % 5], ARRAY[1.0] "
                 "FROM generate_series(1, 300) g")
    return conn


@pytest.mark.parametrize("model,n_features,batch", [
    ("softmax", 1431655765, 1),        # the 3 x 1431655765 (wrapped to 16 bytes)
    ("softmax", 1431655765, 8),
    ("softmax", 715827882, 1),         # 3 x 715827883 = 2147483649 weights
    ("softmax", 200_000_000, 1),       # fits an int, not an array value
    ("svm", 2147483647, 1),            # n_features + 1 overflows
    ("logistic", 134217728, 4),        # 1 GB of weights, just over
    ("linear", 2147483646, 1),
])
def test_model_too_large_is_refused_before_training(sparse3, model, n_features, batch):
    conn = sparse3
    label = "label" if model == "softmax" else "CASE WHEN label = 1 THEN 1 ELSE -1 END"
    if model != "softmax":
        conn.execute(f"CREATE TABLE sp2 AS SELECT {label} AS label, idx, val FROM sp")
        table = "sp2"
    else:
        table = "sp"
    with pytest.raises(errors.ProgramLimitExceeded, match=rf"{n_features} features x \d+") as exc:
        conn.execute("SELECT * FROM corgipile.train(%s, %s, features => 'val', "
                     "feature_indices => 'idx', n_features => %s, batch_size => %s, "
                     "model_name => 'big')", (table, model, n_features, batch))
    assert "bytes" in exc.value.diag.message_detail
    assert models_named(conn, "big") == 0


@pytest.mark.parametrize("index", [1431655764, 715827882, 2147483646])
def test_model_too_large_from_inferred_dimension(sparse3, index):
    conn = sparse3
    conn.execute("INSERT INTO sp VALUES (1, ARRAY[%s], ARRAY[1.0])", (index,))
    with pytest.raises(errors.ProgramLimitExceeded, match=rf"{index + 1} features x 3 classes"):
        conn.execute("SELECT * FROM corgipile.train('sp', 'softmax', features => 'val', "
                     "feature_indices => 'idx', model_name => 'big')")
    # the same through the fallback, and with EXPLAIN ANALYZE
    with pytest.raises(errors.ProgramLimitExceeded):
        conn.execute("SELECT corgipile.train('sp', 'softmax', features => 'val', "
                     "feature_indices => 'idx', model_name => 'big')")
    assert models_named(conn, "big") == 0


@pytest.mark.parametrize("elem,values", [
    ("float8", "ARRAY[g / 100.0, 1]"),
    ("float4", "ARRAY[g / 100.0, 1]"),
    ("numeric", "ARRAY[g / 100.0, 1]"),
    ("int4", "ARRAY[g % 5, 1]"),
    ("int8", "ARRAY[g % 5, 1]"),
])
def test_arrays_of_domains_train(conn, elem, values):
    quiet(conn)
    conn.execute(f"CREATE DOMAIN dnum AS {elem}")
    conn.execute("CREATE DOMAIN didx AS int")
    conn.execute("CREATE DOMAIN didx8 AS int8")
    conn.execute("CREATE DOMAIN didxarr AS int[]")
    conn.execute("CREATE DOMAIN dlabel AS int")
    conn.execute(f"CREATE TABLE d AS SELECT (CASE WHEN g % 2 = 0 THEN 1 ELSE -1 END)::dlabel AS label, "
                 f"({values})::dnum[] AS features, ARRAY[0, 1]::didx[] AS idx, "
                 f"ARRAY[0, 1]::didx8[] AS idx8, ARRAY[0, 1]::didxarr AS idxd "
                 f"FROM generate_series(1, 200) g")
    dense = conn.execute("SELECT tuples FROM corgipile.train('d', 'svm', max_epoch_num => 1, "
                         "seed => 1, model_name => 'dd')").fetchall()
    assert dense == [(200,)]
    for i, idx in enumerate(["idx", "idx8", "idxd"]):
        rows = conn.execute("SELECT tuples FROM corgipile.train('d', 'logistic', "
                            "features => 'features', feature_indices => %s, max_epoch_num => 1, "
                            "seed => 1, model_name => %s)", (idx, f"ds{i}")).fetchall()
        assert rows == [(200,)]
    # the same weights as without domains
    conn.execute(f"CREATE TABLE plain AS SELECT label::int AS label, features::{elem}[] AS features, "
                 "idx::int[] AS idx, idx8::int8[] AS idx8, idxd::int[] AS idxd FROM d")
    conn.execute("SELECT * FROM corgipile.train('plain', 'svm', max_epoch_num => 1, seed => 1, "
                 "model_name => 'dp')")
    same = conn.execute("SELECT a.weights = b.weights FROM corgipile.models a, corgipile.models b "
                        "WHERE a.model_name = 'dd' AND b.model_name = 'dp'").fetchone()[0]
    assert same


@pytest.mark.parametrize("base", [2 ** 53, 2 ** 62, -(2 ** 62)])
def test_bigint_labels_above_2_53_stay_distinct(conn, base):
    quiet(conn)
    conn.execute("CREATE TABLE b AS SELECT (%s::int8 + g %% 3) AS label, "
                 "ARRAY[(g %% 3 = 0)::int, (g %% 3 = 1)::int, 1]::float8[] AS features "
                 "FROM generate_series(1, 600) g", (base,))
    rows = conn.execute("SELECT score FROM corgipile.train('b', 'softmax', max_epoch_num => 20, "
                        "seed => 1, model_name => 'big_labels')").fetchall()
    classes = conn.execute("SELECT classes FROM corgipile.models WHERE model_name = 'big_labels'"
                           ).fetchone()[0]
    assert sorted(int(c) for c in classes) == [base, base + 1, base + 2]
    assert rows[-1][0] > 0.95
    # each row's own label is predicted: labels that collided as doubles
    # would all be learnt (and scored) as one class
    right = conn.execute("SELECT avg((corgipile.predict_class('big_labels', features)::int8 "
                         "= label)::int) FROM b").fetchone()[0]
    assert right > 0.95, f"only {right:.2f} of the labels predicted: classes collided"


@pytest.mark.parametrize("features,indices,name", [
    ("label", None, "label"),
    ("x1, label", None, "label"),
    ("x1, x2, label", None, "label"),
    ("arr", "label_arr", "label_arr"),
])
def test_label_among_features_is_refused(conn, features, indices, name):
    conn.execute("CREATE TABLE l (label int, x1 float8, x2 float8, arr float8[], label_arr int[])")
    conn.execute("INSERT INTO l VALUES (1, 1, 2, '{1}', '{0}'), (-1, 0, 1, '{0}', '{0}')")
    label = "label_arr" if indices else "label"
    if indices:
        # an integer array cannot be a label: the type error comes first
        with pytest.raises(errors.DatatypeMismatch):
            conn.execute("SELECT * FROM corgipile.train('l', 'svm', label => %s, features => %s, "
                         "feature_indices => %s)", (label, features, indices))
        return
    with pytest.raises(errors.InvalidParameterValue, match=f'"{name}" .*is the label'):
        conn.execute("SELECT * FROM corgipile.train('l', 'svm', label => %s, features => %s)",
                     (label, features))
    with pytest.raises(errors.InvalidParameterValue, match="is the label"):
        conn.execute("SELECT corgipile.train('l', 'svm', label => %s, features => %s)",
                     (label, features))


@pytest.mark.parametrize("alter,error", [
    ("ALTER TABLE t ALTER features TYPE text[] USING features::text[]", errors.DatatypeMismatch),
    # (a text label is a binary classifier's two classes since 0.3.0)
    ("ALTER TABLE t ALTER label TYPE text[] USING ARRAY[label::text]", errors.DatatypeMismatch),
    ("ALTER TABLE t DROP COLUMN features", errors.UndefinedColumn),
    ("ALTER TABLE t ALTER features TYPE int8[] USING features::int8[]", None),
    ("ALTER TABLE t ADD COLUMN extra int DEFAULT 7", None),
])
def test_alter_table_between_prepare_and_execute(conn, alter, error):
    quiet(conn)
    make_points(conn, "t", rows=200)
    conn.execute("PREPARE tr AS SELECT tuples FROM corgipile.train('t', 'svm', "
                 "max_epoch_num => 1, seed => 1)")
    assert conn.execute("EXECUTE tr").fetchall() == [(200,)]
    conn.execute(alter)
    if error is None:
        assert conn.execute("EXECUTE tr").fetchall() == [(200,)]
    else:
        with pytest.raises(error):
            conn.execute("EXECUTE tr")


# ---------------------------------------------------------------------------
# 4. Bounded resources: pile count, cancel in every strategy
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("shuffle", ["shuffle_once", "epoch_shuffle"])
def test_pile_count_is_capped(conn, shuffle):
    quiet(conn)
    # about 2,100 heap pages: a one-page buffer would make 2,600 piles
    conn.execute("CREATE TABLE wide AS SELECT CASE WHEN g % 2 = 0 THEN 1 ELSE -1 END AS label, "
                 "ARRAY[g % 2, 1]::float8[] AS features, repeat('x', 200) AS pad "
                 "FROM generate_series(1, 70000) g")
    pages = conn.execute("SELECT relpages FROM pg_class WHERE relname = 'wide'").fetchone()[0]
    if pages == 0:
        conn.execute("VACUUM wide")
        pages = conn.execute("SELECT relpages FROM pg_class WHERE relname = 'wide'").fetchone()[0]
    assert pages > 1300
    plan = conn.execute("EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, FORMAT JSON) "
                        "SELECT * FROM corgipile.train('wide', 'svm', shuffle => %s, "
                        "block_size => '1', buffer_size => '1', max_epoch_num => 2, seed => 1, "
                        "model_name => 'piles')", (shuffle,)).fetchone()[0]

    def find(node):
        if "Piles" in node:
            return node["Piles"]
        for child in node.get("Plans", []):
            got = find(child)
            if got is not None:
                return got
        return None

    piles = find(plan[0]["Plan"])
    assert piles == 1024, f"{piles} piles for {pages} pages"


@pytest.fixture
def long_table(conn):
    """A table a training cannot finish on before it is cancelled: the
    epoch budget is a million, and later epochs on cached rows take a few
    milliseconds, so the test never relies on how long an epoch takes."""
    conn.execute("CREATE TABLE long_t AS SELECT CASE WHEN g % 2 = 0 THEN 1 ELSE -1 END AS label, "
                 "ARRAY[g % 2, (g % 13) / 13.0, (g % 7) / 7.0, 1, 0, 0, 0, 0, 0, 0]::float8[] "
                 "AS features FROM generate_series(1, 150000) g")
    return conn


@pytest.mark.parametrize("shuffle,buffer,double_buffer", [
    (s, "64", False) for s in STRATEGIES] + [
    # a one-page buffer: the most piles (the cap), the most buffers
    ("shuffle_once", "1", False), ("epoch_shuffle", "1", False), ("corgipile", "1", False),
    # the helper thread trains: it is stopped and joined
    ("corgipile", "64", True), ("epoch_shuffle", "64", True), ("grab", "64", True),
    ("corgipile", "1", True), ("epoch_shuffle", "1", True)])
def test_cancel_every_strategy(long_table, dsn, shuffle, buffer, double_buffer):
    """A cancel mid-training ends it with QueryCanceled, the session lives
    on and no model is stored.  How fast it answers is a benchmark's
    figure, not a test's (docs/security.md)."""
    session = psycopg.connect(dsn, autocommit=True)
    pid = session.info.backend_pid
    # the cancel lands mid-training, after the first pass: later epochs run
    # from cached rows
    training = TrainingInThread(
        session, "SELECT * FROM corgipile.train('long_t', 'svm', shuffle => %s, "
        "model_name => 'cancelled', max_epoch_num => 1000000, "
        "buffer_size => %s, double_buffer => %s)", (shuffle, buffer, double_buffer))
    training.reached(2)
    with psycopg.connect(dsn, autocommit=True) as other:
        assert other.execute("SELECT pg_cancel_backend(%s)", (pid,)).fetchone()[0]
    training.join()
    assert isinstance(training.error, errors.QueryCanceled), training.error
    assert session.execute("SELECT pg_backend_pid()").fetchone()[0] == pid
    session.close()
    assert models_named(long_table, "cancelled") == 0


def _written_bytes(pid: int) -> int:
    with open(f"/proc/{pid}/io") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("wchar:"))


def test_cancel_shuffle_table_mid_copy(conn, dsn):
    """A cancel that reaches shuffle_table while it copies ends it, and the
    copy is gone.  The cancel is sent once the backend has written 8 MB of
    the copy (its /proc io counters: an event, not a guess at how long a
    copy takes); a copy done before that is tried again on a table twice
    as large."""
    conn.execute("CREATE TABLE long_src AS SELECT g AS id, repeat('x', 100) AS pad, "
                 "ARRAY[g, 1]::float8[] AS features FROM generate_series(1, 600000) g")
    for _attempt in range(4):
        session = psycopg.connect(dsn, autocommit=True)
        pid = session.info.backend_pid
        start = _written_bytes(pid)
        outcome: dict = {}
        done = threading.Event()

        def run(session, outcome, done):
            try:
                session.execute("SELECT corgipile.shuffle_table('long_src', 'long_dst', 1)")
                outcome["error"] = None
            except psycopg.Error as exc:
                outcome["error"] = exc
            done.set()

        worker = threading.Thread(target=run, args=(session, outcome, done))
        worker.start()
        while not done.is_set() and _written_bytes(pid) - start < 8 << 20:
            done.wait(0.005)
        with psycopg.connect(dsn, autocommit=True) as other:
            other.execute("SELECT pg_cancel_backend(%s)", (pid,))
        worker.join()
        session.close()
        if outcome["error"] is None:
            # done before the cancel: try again on a table twice as large
            conn.execute("DROP TABLE long_dst")
            conn.execute("INSERT INTO long_src SELECT * FROM long_src")
            continue
        assert isinstance(outcome["error"], errors.QueryCanceled), outcome["error"]
        assert conn.execute("SELECT to_regclass('long_dst')").fetchone()[0] is None
        return
    pytest.fail("shuffle_table finished before every cancel, even on 4.8M rows")


# ---------------------------------------------------------------------------
# 5. shuffle_table and shuffled_scan on tables whose layout is not a copy's
# ---------------------------------------------------------------------------

@pytest.fixture
def altered(conn):
    """Dropped columns, columns added with a default (attmissingval, of a
    fixed and a variable-length type), out-of-line TOAST values, generated
    and identity columns."""
    conn.execute("CREATE TABLE src (a int, id int GENERATED ALWAYS AS IDENTITY, label int, "
                 "features float8[], t text, b text, g int GENERATED ALWAYS AS (label * 2) STORED)")
    conn.execute("INSERT INTO src (a, label, features, t, b) SELECT g, "
                 "CASE WHEN g % 2 = 0 THEN 1 ELSE -1 END, ARRAY[g % 2, 1], "
                 "CASE WHEN g % 10 = 0 THEN repeat(md5(g::text), 4000) ELSE 'short' END, 'bb' "
                 "FROM generate_series(1, 600) g")
    conn.execute("ALTER TABLE src DROP COLUMN a")
    conn.execute("ALTER TABLE src DROP COLUMN b")
    conn.execute("ALTER TABLE src ADD COLUMN m int DEFAULT 42")
    conn.execute("ALTER TABLE src ADD COLUMN m2 text DEFAULT 'missing'")
    conn.execute("ALTER TABLE src ADD COLUMN m3 float8[] DEFAULT '{1.5,2.5}'")
    conn.execute("INSERT INTO src (label, features, t, m, m2, m3) "
                 "VALUES (1, '{1,1}', 'late', 7, 'present', '{0}')")
    quiet(conn)
    return conn


def test_shuffle_table_copies_values_faithfully(altered):
    conn = altered
    assert conn.execute("SELECT corgipile.shuffle_table('src', 'dst', 5)").fetchone()[0] == 601
    diff = conn.execute("SELECT count(*) FROM ((SELECT * FROM src EXCEPT ALL SELECT * FROM dst) "
                        "UNION ALL (SELECT * FROM dst EXCEPT ALL SELECT * FROM src)) d").fetchone()[0]
    assert diff == 0
    assert conn.execute("SELECT count(*) FROM dst WHERE m = 42 AND m2 = 'missing' "
                        "AND m3 = '{1.5,2.5}'").fetchone()[0] == 600
    # every read of the copy works (this crashed), and it trains
    assert conn.execute("SELECT sum(length(t)) FROM dst").fetchone()[0] == \
        conn.execute("SELECT sum(length(t)) FROM src").fetchone()[0]
    assert conn.execute("SELECT tuples FROM corgipile.train('dst', 'svm', max_epoch_num => 1, "
                        "seed => 1, model_name => 'from_copy')").fetchall() == [(601,)]
    # the copy is itself shuffled again faithfully
    conn.execute("SELECT corgipile.shuffle_table('dst', 'dst2', 6)")
    assert conn.execute("SELECT count(*) FROM (SELECT * FROM src EXCEPT ALL SELECT * FROM dst2) d"
                        ).fetchone()[0] == 0


@pytest.mark.parametrize("shuffle", ["corgipile", "sliding_window", "shuffle_once"])
def test_shuffled_scan_on_table_with_dropped_columns(altered, shuffle):
    conn = altered
    rows = conn.execute("SELECT id FROM corgipile.shuffled_scan('src', %s, '1', '4', 1)",
                        (shuffle,)).fetchall()
    assert sorted(r[0] for r in rows) == list(range(1, 602))
    # id itself dropped: the scan still runs, with NULL ids
    conn.execute("ALTER TABLE src DROP COLUMN id")
    assert conn.execute("SELECT count(*), count(id) FROM corgipile.shuffled_scan("
                        "'src', %s, '1', '4', 1)", (shuffle,)).fetchone() == (601, 0)


# ---------------------------------------------------------------------------
# 6. Models are stored only when training completes; names checked first
# ---------------------------------------------------------------------------

def test_select_list_train_with_limit_stores_nothing(conn):
    quiet(conn)
    make_points(conn, "t", rows=200)
    rows = conn.execute("SELECT corgipile.train('t', 'svm', model_name => 'limited', "
                        "max_epoch_num => 3) LIMIT 1").fetchall()
    assert len(rows) == 1
    assert models_named(conn, "limited") == 0
    rows = conn.execute("SELECT corgipile.train('t', 'svm', model_name => 'whole', "
                        "max_epoch_num => 3)").fetchall()
    assert len(rows) == 3
    assert models_named(conn, "whole") == 1
    # arguments known only at execution: a generic plan, a scalar subquery
    conn.execute("SET plan_cache_mode = force_generic_plan")
    conn.execute("PREPARE g(text) AS SELECT epoch FROM corgipile.train('t', 'svm', "
                 "model_name => $1, max_epoch_num => 3) LIMIT 1")
    assert conn.execute("EXECUTE g('generic_limited')").fetchall() == [(1,)]
    assert models_named(conn, "generic_limited") == 0
    conn.execute("PREPARE g3(text) AS SELECT epoch FROM corgipile.train('t', 'svm', "
                 "model_name => $1, max_epoch_num => 3)")
    assert conn.execute("EXECUTE g3('generic_whole')").fetchall() == [(1,), (2,), (3,)]
    assert models_named(conn, "generic_whole") == 1
    conn.execute("RESET plan_cache_mode")
    assert conn.execute("SELECT epoch FROM corgipile.train('t', 'svm', model_name => "
                        "(SELECT 'sub_limited'), max_epoch_num => 3) LIMIT 1").fetchall() == [(1,)]
    assert models_named(conn, "sub_limited") == 0
    # a rescan replays the epochs: trained once, stored once
    rows = conn.execute("SELECT g, t.epoch FROM generate_series(1, 2) g, corgipile.train('t', 'svm', "
                        "model_name => (SELECT 'rescanned'), max_epoch_num => 2) t "
                        "ORDER BY 1, 2").fetchall()
    assert rows == [(1, 1), (1, 2), (2, 1), (2, 2)]
    assert models_named(conn, "rescanned") == 1
    # a cursor closed early stores nothing either
    conn.execute("BEGIN")
    conn.execute("DECLARE c CURSOR FOR SELECT corgipile.train('t', 'svm', model_name => 'cur', "
                 "max_epoch_num => 3)")
    conn.execute("FETCH 2 FROM c")
    conn.execute("CLOSE c")
    conn.execute("COMMIT")
    assert models_named(conn, "cur") == 0


@pytest.mark.parametrize("form", ["from", "select_list", "prepared_generic"])
def test_duplicate_model_name_fails_before_any_row_is_read(conn, form):
    quiet(conn)
    make_points(conn, "t", rows=200)
    conn.execute("SELECT * FROM corgipile.train('t', 'svm', model_name => 'taken', max_epoch_num => 1)")
    # a row that fails as soon as it is read: the name must be refused first
    conn.execute("INSERT INTO t VALUES (0, 5, '{1,1}')")
    call = "corgipile.train('t', 'svm', model_name => 'taken', max_epoch_num => 1)"
    with pytest.raises(errors.DuplicateObject, match="already exists"):
        if form == "from":
            conn.execute(f"SELECT * FROM {call}")
        elif form == "select_list":
            conn.execute(f"SELECT {call} LIMIT 1")
        else:
            conn.execute("SET plan_cache_mode = force_generic_plan")
            conn.execute("PREPARE p(text) AS SELECT * FROM corgipile.train('t', 'svm', "
                         "model_name => $1, max_epoch_num => 1)")
            conn.execute("EXECUTE p('taken')")
    with pytest.raises(errors.DataException, match="not a valid svm label"):
        conn.execute("SELECT * FROM corgipile.train('t', 'svm', model_name => 'fresh', max_epoch_num => 1)")


def test_block_cache_size_is_set_by_superusers_only(conn, roles):
    """The block cache is memory a training holds for its whole run: a role
    cannot raise it for its own sessions (only the DBA can)."""
    role = roles.create()
    session = roles.connect(role)
    # a value set before the library is loaded is dropped when it loads
    session.execute("SET corgipile.block_cache_size = '100GB'")
    with pytest.raises(errors.UndefinedObject):  # any call into the library loads it
        session.execute("SELECT corgipile.drop_model('no such model')")
    assert session.execute("SHOW corgipile.block_cache_size").fetchone()[0] == "512MB"
    with pytest.raises(errors.InsufficientPrivilege, match="corgipile.block_cache_size"):
        session.execute("SET corgipile.block_cache_size = '100GB'")
    assert session.execute("SHOW corgipile.block_cache_size").fetchone()[0] == "512MB"
