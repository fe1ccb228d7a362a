"""Hostile replays against the model catalog and prediction.

Every reproduction of the hardening review that concerns model rows, model privileges and
prediction inputs, with variants: other types, other function names, other
sizes.  The autouse fixture of conftest.py fails any test during which the
postmaster restarted (a backend crashed); the canary counts calls of
functions a hostile role planted.
"""

from __future__ import annotations

import pytest
from psycopg import errors, sql

FUNCTIONS = ["predict", "predict_class", "predict_proba"]


@pytest.fixture
def data(conn):
    """Tables of every layout, readable by all, and one model of each kind."""
    conn.execute("SET corgipile.progress = off")
    conn.execute(
        "CREATE TABLE pts AS SELECT i AS id, CASE WHEN i % 2 = 0 THEN 1 ELSE -1 END AS label, "
        "ARRAY[(i % 2) * 2 - 1 + (i % 5) / 10.0, (i % 3) / 3.0]::float8[] AS features, "
        "ARRAY[0, 1] AS idx, (i % 2)::float8 AS x1, (i % 3)::float8 AS x2 "
        "FROM generate_series(1, 400) AS i")
    conn.execute("CREATE TABLE pts3 AS SELECT id, id % 3 AS label, features FROM pts")
    conn.execute("GRANT SELECT ON pts, pts3 TO PUBLIC")
    for name, args in [
        ("m_array", "'pts', 'logistic'"),
        ("m_sparse", "'pts', 'logistic', features => 'features', feature_indices => 'idx', "
                     "n_features => 2"),
        ("m_columns", "'pts', 'logistic', features => 'x1, x2'"),
        ("m_softmax", "'pts3', 'softmax'"),
    ]:
        conn.execute(f"SELECT count(*) FROM corgipile.train({args}, model_name => '{name}', "
                     "max_epoch_num => 1, seed => 1)")
    return conn


def grant_all(conn, role):
    for m in ("m_array", "m_sparse", "m_columns", "m_softmax"):
        conn.execute("SELECT corgipile.grant_model(%s, %s::regrole)", (m, role))


# -- prediction inputs ------------------------------------------------------

ROW_VALUES = [
    "1", "1::bigint", "1.5::float8", "true", "'abc'::text", "'\\x0102'::bytea",
    "ARRAY['a', 'b']::text[]", "ARRAY[true, false]", "'{\"a\": 1}'::jsonb",
    "point(1, 2)", "ARRAY[1, 2]::int4[]::text", "NULL::int", "repeat('x', 100000)",
    "ARRAY[ARRAY[1.0, 2.0]]::float8[]",
]


@pytest.mark.parametrize("fn", FUNCTIONS)
@pytest.mark.parametrize("value", ROW_VALUES)
def test_row_form_checks_the_feature_column_type(data, roles, fn, value):
    """SELECT corgipile.predict('m', t) FROM (SELECT 1 AS features) t crashed."""
    role = roles.create()
    grant_all(data, role)
    s = roles.connect(role)
    for model in ("m_array", "m_softmax"):
        if value == "NULL::int":
            # NULL features: NULL result, no read of the value at all ...
            # except when the type is wrong, which is checked first
            with pytest.raises(errors.DatatypeMismatch, match='column "features"'):
                s.execute(f"SELECT corgipile.{fn}(%s, t) FROM (SELECT {value} AS features) t",
                          (model,))
            continue
        with pytest.raises((errors.DatatypeMismatch, errors.ArraySubscriptError,
                            errors.WrongObjectType)) as exc:
            s.execute(f"SELECT corgipile.{fn}(%s, t) FROM (SELECT {value} AS features) t",
                      (model,))
        if value.startswith("ARRAY[ARRAY"):
            assert "dimension" in str(exc.value) or "features" in str(exc.value)
        elif fn != "predict_proba" or model == "m_softmax":
            assert isinstance(exc.value, errors.DatatypeMismatch)
            assert 'column "features"' in str(exc.value)


@pytest.mark.parametrize("fn", FUNCTIONS)
@pytest.mark.parametrize("idx,vals", [
    ("1", "ARRAY[1.0, 2.0]"), ("ARRAY[0, 1]", "'text'::text"),
    ("ARRAY[0.5, 1.5]::float8[]", "ARRAY[1.0, 2.0]"), ("'{0,1}'::text", "ARRAY[1.0, 2.0]"),
    ("ARRAY[0, 1]", "ARRAY['a', 'b']"), ("ARRAY[true]", "ARRAY[1.0]"),
    ("'\\x00'::bytea", "'\\x00'::bytea"),
])
def test_row_form_sparse_checks_both_columns(data, roles, fn, idx, vals):
    role = roles.create()
    grant_all(data, role)
    s = roles.connect(role)
    with pytest.raises(errors.DatatypeMismatch, match="column"):
        s.execute(f"SELECT corgipile.{fn}('m_sparse', t) FROM "
                  f"(SELECT {idx} AS idx, {vals} AS features) t")


@pytest.mark.parametrize("fn", FUNCTIONS)
@pytest.mark.parametrize("value", ["'1'::text", "true", "ARRAY[1.0]", "'\\x01'::bytea",
                                   "now()", "'{}'::jsonb"])
def test_row_form_columns_layout_needs_numbers(data, roles, fn, value):
    role = roles.create()
    grant_all(data, role)
    s = roles.connect(role)
    with pytest.raises(errors.DatatypeMismatch, match='column "x2"'):
        s.execute(f"SELECT corgipile.{fn}('m_columns', t) FROM (SELECT 1.0 AS x1, {value} AS x2) t")


@pytest.mark.parametrize("fn", FUNCTIONS)
@pytest.mark.parametrize("arr", [
    "ARRAY['a', 'b']", "ARRAY[true, false]", "ARRAY['\\x00'::bytea, '\\x01']",
    "ARRAY['{}'::jsonb, '[]']", "ARRAY[now(), now()]", "ARRAY[point(1,2), point(3,4)]",
])
def test_dense_and_sparse_forms_check_element_types(data, roles, fn, arr):
    role = roles.create()
    grant_all(data, role)
    s = roles.connect(role)
    with pytest.raises(errors.DatatypeMismatch, match="array of numbers"):
        s.execute(f"SELECT corgipile.{fn}('m_softmax', {arr})")
    with pytest.raises(errors.DatatypeMismatch, match="array of numbers"):
        s.execute(f"SELECT corgipile.{fn}('m_softmax', ARRAY[0, 1], {arr})")
    # the sparse form's indices are integer[] in its SQL signature
    with pytest.raises(errors.UndefinedFunction):
        s.execute(f"SELECT corgipile.{fn}('m_softmax', {arr}, ARRAY[1.0, 2.0])")


def test_domains_over_float8(data, roles):
    """A domain over float8[] is looked through; an array of a domain over
    float8 is refused cleanly (no internal error)."""
    role = roles.create()
    grant_all(data, role)
    s = roles.connect(role)
    s.execute("CREATE DOMAIN public.vec AS float8[]")
    s.execute("CREATE DOMAIN public.num AS float8 CHECK (VALUE > -1e9)")
    got = s.execute("SELECT corgipile.predict('m_array', t) FROM "
                    "(SELECT ARRAY[1.0, 0.5]::public.vec AS features) t").fetchone()[0]
    want = s.execute("SELECT corgipile.predict('m_array', ARRAY[1.0, 0.5])").fetchone()[0]
    assert got == want
    with pytest.raises(errors.DatatypeMismatch, match="array of numbers"):
        s.execute("SELECT corgipile.predict('m_array', ARRAY[1.0, 0.5]::public.num[])")
    with pytest.raises(errors.DatatypeMismatch, match='column "features"'):
        s.execute("SELECT corgipile.predict('m_array', t) FROM "
                  "(SELECT ARRAY[1.0, 0.5]::public.num[] AS features) t")


# -- damaged rows -------------------------------------------------------------

DAMAGE = {
    "sparse_null_indices": "params = '{\"layout\": \"sparse\"}', feature_indices = NULL",
    "features_empty": "features = '{}'",
    "features_null_elem": "features = '{NULL}'",
    "features_many": "features = '{a,b,c,d,e}'",
    "weights_short": "weights = weights[1:2]",
    "weights_long": "weights = weights || weights",
    "weights_empty": "weights = '{}'",
    "weights_null_elem": "weights[1] = NULL",
    "weights_inf": "weights[1] = 'Infinity'",
    "n_features_huge": "n_features = 1431655765",
    "n_features_max": "n_features = 2147483647",
    "n_features_negative": "n_features = -3",
    "kind_unknown": "model = 'forest'",
    "kind_softmax_two_weights": "model = 'softmax'",
    "classes_three": "classes = '[0, 1, 2]'",
    "classes_one": "classes = '[1]'",
    "classes_nested": "classes = '[[1], [2]]'",
    "classes_string": "classes = '\"ab\"'",
    "layout_unknown": "params = '{\"layout\": \"csv\"}'",
    "columns_mismatch": "params = '{\"layout\": \"columns\"}'",
    "label_empty": "label = ''",
}


@pytest.mark.parametrize("damage", sorted(DAMAGE))
def test_damaged_rows_are_errors_never_crashes(data, roles, damage):
    """A superuser writes damaged rows straight into the storage; every
    function that loads a model reports them as corrupted data."""
    data.execute(
        "INSERT INTO corgipile.model_store (model_name, model, relation, label, features, "
        " feature_indices, n_features, weights, classes, params, history, owner_id) "
        "SELECT 'bad', model, relation, label, features, feature_indices, n_features, "
        " weights, classes, params, history, owner_id FROM corgipile.model_store "
        "WHERE model_name = 'm_array'")
    if damage == "n_features_negative":
        # a superuser can remove the table's own check first
        data.execute("ALTER TABLE corgipile.model_store DROP CONSTRAINT models_n_features_check")
    data.execute(f"UPDATE corgipile.model_store SET {DAMAGE[damage]} WHERE model_name = 'bad'")
    role = roles.create()
    data.execute("SELECT corgipile.grant_model('bad', %s::regrole)", (role,))
    s = roles.connect(role)
    for query in [
        "SELECT corgipile.predict('bad', ARRAY[1.0, 2.0])",
        "SELECT corgipile.predict_class('bad', ARRAY[1.0, 2.0])",
        "SELECT corgipile.predict_proba('bad', ARRAY[1.0, 2.0])",
        "SELECT corgipile.predict('bad', ARRAY[0, 1], ARRAY[1.0, 2.0])",
        "SELECT corgipile.predict('bad', t) FROM pts t",
        "SELECT corgipile.predict_class('bad', t) FROM pts t",
        "SELECT * FROM corgipile.evaluate('bad', 'pts')",
    ]:
        with pytest.raises(errors.DataCorrupted, match='model "bad" is damaged') as exc:
            s.execute(query)
        assert exc.value.diag.message_detail  # says what is wrong


def test_softmax_large_sparse_dimension_is_refused_by_the_loader(data):
    """3 classes x n_features 1431655765 overflowed an int; the loader
    computes the length with overflow checks."""
    data.execute(
        "INSERT INTO corgipile.model_store (model_name, model, relation, label, features, "
        " feature_indices, n_features, weights, classes, params, history, owner_id) "
        "VALUES ('huge', 'softmax', 't', 'label', '{vals}', 'idx', 1431655765, "
        " '{1,2,3,4,5,6}', '[0, 1, 2]', '{\"layout\": \"sparse\"}', '[]', 10)")
    with pytest.raises(errors.DataCorrupted, match="weights"):
        data.execute("SELECT corgipile.predict('huge', ARRAY[1500000000], ARRAY[1.0])")


# -- privileges -----------------------------------------------------------------

def test_direct_writes_to_the_storage_are_refused(data, roles):
    role = roles.create()
    grant_all(data, role)
    s = roles.connect(role)
    for stmt in [
        "SELECT * FROM corgipile.model_store",
        "INSERT INTO corgipile.model_store (model_name, model, relation, label, features, "
        " n_features, weights, params, history, owner_id) VALUES "
        " ('forged', 'svm', 'pts', 'label', '{features}', 2, '{1,1,1}', '{}', '[]', 10)",
        "UPDATE corgipile.model_store SET weights = '{0,0,0}'",
        "DELETE FROM corgipile.model_store",
        "TRUNCATE corgipile.model_store",
        "UPDATE corgipile.models SET weights = '{0,0,0}'",
        "DELETE FROM corgipile.models",
        "INSERT INTO corgipile.models (model_name, model, label, features, n_features, "
        " weights) VALUES ('forged', 'svm', 'label', '{features}', 2, '{1,1,1}')",
        "ALTER TABLE corgipile.model_store DISABLE ROW LEVEL SECURITY",
        "CREATE TRIGGER t BEFORE INSERT ON corgipile.model_store "
        " FOR EACH ROW EXECUTE FUNCTION suppress_redundant_updates_trigger()",
    ]:
        with pytest.raises((errors.InsufficientPrivilege, errors.ObjectNotInPrerequisiteState,
                            errors.FeatureNotSupported)):
            s.execute(stmt)
    weights = data.execute("SELECT weights FROM corgipile.models "
                           "WHERE model_name = 'm_array'").fetchone()[0]
    assert weights != [0, 0, 0]
    assert data.execute("SELECT count(*) FROM corgipile.models").fetchone()[0] == 4


def test_squatting_a_name_gives_permission_denied(data, roles, canary):
    """Names are global: a squatter takes 'prod_model' first.  The victim's
    training is refused before it starts, and the victim's predict() is
    refused rather than silently using the squatter's weights."""
    squatter, victim = roles.create("squatter"), roles.create("victim")
    sq, vi = roles.connect(squatter), roles.connect(victim)
    sq.execute("SET corgipile.progress = off")
    vi.execute("SET corgipile.progress = off")
    sq.execute("SELECT count(*) FROM corgipile.train('pts', 'svm', model_name => 'prod_model', "
               "max_epoch_num => 1)")
    with pytest.raises(errors.DuplicateObject, match="already exists"):
        vi.execute("SELECT count(*) FROM corgipile.train('pts', 'svm', "
                   "model_name => 'prod_model', max_epoch_num => 1)")
    for fn in FUNCTIONS:
        with pytest.raises(errors.InsufficientPrivilege, match='permission denied for model'):
            vi.execute(f"SELECT corgipile.{fn}('prod_model', ARRAY[1.0, 2.0])")
        with pytest.raises(errors.InsufficientPrivilege, match='permission denied for model'):
            vi.execute(f"SELECT corgipile.{fn}('prod_model', t) FROM pts t")
    with pytest.raises(errors.InsufficientPrivilege):
        vi.execute("SELECT * FROM corgipile.evaluate('prod_model', 'pts')")
    assert vi.execute("SELECT count(*) FROM corgipile.models").fetchone()[0] == 0
    assert canary.calls() == 0


def test_cross_role_visibility(data, roles):
    """The model only with USAGE; relation, history, dataset figures and a
    standardized model's weights only with SELECT on the relation
    (test_usage_shows_the_function_only.py tries every door)."""
    owner, reader = roles.create("owner"), roles.create("reader")
    data.execute(sql.SQL("CREATE TABLE private_pts AS SELECT * FROM pts"))
    data.execute(sql.SQL("ALTER TABLE private_pts OWNER TO {}").format(sql.Identifier(owner)))
    o, r = roles.connect(owner), roles.connect(reader)
    o.execute("SET corgipile.progress = off")
    o.execute("SELECT count(*) FROM corgipile.train('private_pts', 'svm', "
              "model_name => 'priv', max_epoch_num => 1)")
    assert r.execute("SELECT count(*) FROM corgipile.models WHERE model_name = 'priv'"
                     ).fetchone()[0] == 0
    o.execute("SELECT corgipile.grant_model('priv', %s::regrole)", (reader,))
    row = r.execute("SELECT relation, relid, history, params ? 'n_blocks', "
                    "weights IS NOT NULL FROM corgipile.models WHERE model_name = 'priv'"
                    ).fetchone()
    assert row == (None, None, None, False, False)
    o.execute(sql.SQL("GRANT SELECT ON private_pts TO {}").format(sql.Identifier(reader)))
    row = r.execute("SELECT relation, history IS NOT NULL, params ? 'n_blocks', "
                    "weights IS NOT NULL FROM corgipile.models WHERE model_name = 'priv'"
                    ).fetchone()
    assert row == ("public.private_pts", True, True, True)
    o.execute("SELECT corgipile.revoke_model('priv', %s::regrole)", (reader,))
    assert r.execute("SELECT count(*) FROM corgipile.models").fetchone()[0] == 0
    with pytest.raises(errors.InsufficientPrivilege):
        r.execute("SELECT corgipile.predict('priv', ARRAY[1.0, 2.0])")


def test_drop_role_then_a_new_role_of_the_same_name(data, roles):
    name = roles.create("reborn")
    s = roles.connect(name)
    s.execute("SET corgipile.progress = off")
    s.execute("SELECT count(*) FROM corgipile.train('pts', 'svm', model_name => 'legacy', "
              "max_epoch_num => 1)")
    old_oid = data.execute("SELECT owner_id FROM corgipile.models WHERE model_name = 'legacy'"
                           ).fetchone()[0]
    s.close()
    data.execute(sql.SQL("DROP OWNED BY {}").format(sql.Identifier(name)))
    data.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(name)))
    # a superuser still sees the orphan
    owner = data.execute("SELECT owner FROM corgipile.models WHERE model_name = 'legacy'"
                         ).fetchone()[0]
    assert owner == f"unknown (OID={old_oid})"
    data.execute(sql.SQL("CREATE ROLE {} LOGIN").format(sql.Identifier(name)))
    data.execute(sql.SQL("GRANT USAGE ON SCHEMA public TO {}").format(sql.Identifier(name)))
    s2 = roles.connect(name)
    assert s2.execute("SELECT count(*) FROM corgipile.models").fetchone()[0] == 0
    with pytest.raises(errors.InsufficientPrivilege):
        s2.execute("SELECT corgipile.predict('legacy', ARRAY[1.0, 2.0])")
    with pytest.raises(errors.InsufficientPrivilege):
        s2.execute("SELECT corgipile.drop_model('legacy')")
    with pytest.raises(errors.InsufficientPrivilege):
        s2.execute("SELECT corgipile.reassign_models(%s::oid, %s::regrole)", (old_oid, name))
    assert data.execute("SELECT corgipile.reassign_models(%s::oid, %s::regrole)",
                        (old_oid, name)).fetchone()[0] == 1
    assert s2.execute("SELECT count(*) FROM corgipile.models").fetchone()[0] == 1
    s2.execute("SELECT corgipile.drop_model('legacy')")


def test_usage_is_checked_at_execution_not_at_plan_time(data, roles):
    """A prepared statement planned by the owner and executed after SET ROLE,
    and a plpgsql function whose expression state persists within a
    transaction, are both checked for the role that executes."""
    owner, other = roles.create("owner"), roles.create("other")
    data.execute(sql.SQL("GRANT {} TO {}").format(sql.Identifier(other), sql.Identifier(owner)))
    o = roles.connect(owner)
    o.execute("SET corgipile.progress = off")
    o.execute("SELECT count(*) FROM corgipile.train('pts', 'svm', model_name => 'mine', "
              "max_epoch_num => 1)")
    o.execute("PREPARE p AS SELECT corgipile.predict('mine', ARRAY[1.0, 2.0])")
    o.execute("EXECUTE p")
    o.execute(sql.SQL("SET ROLE {}").format(sql.Identifier(other)))
    with pytest.raises(errors.InsufficientPrivilege):
        o.execute("EXECUTE p")
    o.execute("RESET ROLE")
    o.execute("CREATE FUNCTION public.use_it() RETURNS float8 LANGUAGE plpgsql AS "
              "$$ BEGIN RETURN corgipile.predict('mine', ARRAY[1.0, 2.0]); END $$")
    o.execute("GRANT EXECUTE ON FUNCTION public.use_it() TO PUBLIC")
    with o.transaction():
        o.execute("SELECT public.use_it()")
        o.execute(sql.SQL("SET LOCAL ROLE {}").format(sql.Identifier(other)))
        with pytest.raises(errors.InsufficientPrivilege):
            with o.transaction():
                o.execute("SELECT public.use_it()")


def test_hostile_search_path_objects_never_run_inside_ours(data, roles, canary):
    """A role with CREATE on public plants functions and operators that match
    our internal queries more exactly than pg_catalog's; a superuser whose
    search_path puts public first then uses every model function."""
    hostile = roles.create("planter")
    h = roles.connect(hostile)
    body = f"BEGIN {canary.MARK} RETURN NULL; END"
    for sig, ret in [
        ("format(text, text, text, bigint)", "text"),
        ("format(text, text, text, text)", "text"),
        ("\"left\"(text, integer)", "text"),
        ("nextval(regclass)", "bigint"),
        ("nextval(text)", "bigint"),
        ("jsonb_typeof(jsonb)", "text"),
        ("jsonb_array_elements_text(jsonb)", "text"),
        ("array_append(oid[], oid)", "oid[]"),
        ("array_remove(oid[], oid)", "oid[]"),
        ("now()", "timestamptz"),
        ("pg_has_role(oid, text)", "boolean"),
        ("has_table_privilege(oid, text)", "boolean"),
    ]:
        h.execute(f"CREATE FUNCTION public.{sig} RETURNS {ret} LANGUAGE plpgsql AS $${body}$$")
    h.execute(f"CREATE FUNCTION public.eq(text, text) RETURNS boolean LANGUAGE plpgsql AS "
              f"$$BEGIN {canary.MARK} RETURN true; END$$")
    h.execute("CREATE OPERATOR public.= (LEFTARG = text, RIGHTARG = text, FUNCTION = public.eq)")
    h.execute(f"CREATE FUNCTION public.eqo(oid, oid) RETURNS boolean LANGUAGE plpgsql AS "
              f"$$BEGIN {canary.MARK} RETURN true; END$$")
    h.execute("CREATE OPERATOR public.= (LEFTARG = oid, RIGHTARG = oid, FUNCTION = public.eqo)")

    su = data
    su.execute("SET search_path = public, pg_catalog")
    su.execute("SET corgipile.progress = off")
    su.execute("SELECT count(*) FROM corgipile.train('pts', 'svm', max_epoch_num => 1)")
    su.execute("SELECT count(*) FROM corgipile.train('pts', 'svm', model_name => 'sp', "
               "max_epoch_num => 1)")
    su.execute("SELECT corgipile.predict('sp', ARRAY[1.0, 2.0])")
    su.execute("SELECT corgipile.predict_class('m_softmax', t) FROM pts3 t")
    su.execute("SELECT * FROM corgipile.evaluate('sp', 'pts')")
    su.execute("SELECT corgipile.grant_model('sp', %s::regrole)", (hostile,))
    su.execute("SELECT corgipile.revoke_model('sp', %s::regrole)", (hostile,))
    su.execute("SELECT corgipile.rename_model('sp', 'sp2')")
    su.execute("SELECT corgipile.import_model('imp', 'svm', 't', 'label', '{features}', NULL, "
               "2, '{1,0,0}', '[-1, 1]', '{}', '[]')")
    su.execute("SELECT corgipile.reassign_models(%s::regrole, %s::regrole)", (hostile, hostile))
    su.execute("SELECT count(*) FROM corgipile.models")
    su.execute("SELECT corgipile.drop_model('sp2')")
    su.execute("SELECT corgipile.drop_model('imp')")
    su.execute("RESET search_path")
    assert canary.calls() == 0
    # the planted functions do work when called directly: the canary is live
    h.execute("SELECT public.now()")
    assert canary.calls() == 1


def test_model_names_are_checked_before_training(data, roles):
    role = roles.create()
    s = roles.connect(role)
    s.execute("SET corgipile.progress = off")
    for name, err in [("", errors.InvalidParameterValue), ("x" * 256, errors.NameTooLong),
                      ("é" * 128, errors.NameTooLong), ("m_array", errors.DuplicateObject)]:
        with pytest.raises(err):
            s.execute("SELECT count(*) FROM corgipile.train('pts', 'svm', model_name => %s)",
                      (name,))
        with pytest.raises(err):
            s.execute("SELECT corgipile.import_model(%s, 'svm', 't', 'label', '{features}', "
                      "NULL, 2, '{1,0,0}', '[-1, 1]', '{}', '[]')", (name,))
    # a generated name stays within the limit whatever the table's name
    long_table = "t" * 63
    data.execute(sql.SQL("CREATE TABLE {} AS SELECT * FROM pts").format(
        sql.Identifier(long_table)))
    data.execute(sql.SQL("GRANT SELECT ON {} TO PUBLIC").format(sql.Identifier(long_table)))
    name = s.execute("SELECT model_name FROM corgipile.train(%s, 'softmax', max_epoch_num => 1)",
                     (long_table,)).fetchone()[0]
    assert len(name.encode()) <= 255 and name.startswith("ttt")


# -- memory ---------------------------------------------------------------------

def _vm_hwm_kb(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


@pytest.mark.parametrize("n_models", [3, 6])
def test_per_row_model_switching_has_bounded_memory(data, n_models):
    """Predicting with a model name that changes per row rebuilt and kept
    every model (about 100 kB per row before 0.2.0: 2 GB for 20k rows);
    the per-call-site cache keeps a few and frees the rest."""
    for k in range(n_models):
        data.execute("SELECT count(*) FROM corgipile.train('pts', 'svm', model_name => %s, "
                     "max_epoch_num => 1)", (f"sw{k}",))
    pid = data.execute("SELECT pg_backend_pid()").fetchone()[0]
    before = _vm_hwm_kb(pid)
    if before is None:
        pytest.skip("the server's /proc is not readable from here")
    n = data.execute("SELECT count(corgipile.predict('sw' || (g %% %s), ARRAY[0.5, 0.25])) "
                     "FROM generate_series(1, 20000) g", (n_models,)).fetchone()[0]
    after = _vm_hwm_kb(pid)
    assert n == 20000
    assert after - before < 100_000, f"peak memory grew by {after - before} kB"
