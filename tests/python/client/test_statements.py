"""TRAIN BY / PREDICT BY: recognition, translation, errors that point at the
user's text, placeholders, and hostile inputs that must fail safely."""

from __future__ import annotations

import numpy as np
import psycopg
import pytest
from psycopg import errors

import corgipile
from corgipile.statements import (
    Bound,
    Name,
    PlainStatement,
    PredictStatement,
    TrainStatement,
    parse_statement,
)

# -- recognition, without a database ------------------------------------------------

@pytest.mark.parametrize("text", [
    "SELECT 1",
    "SELECT 'x TRAIN BY svm' FROM t",
    'SELECT "train" FROM t ORDER BY "train"',
    "SELECT * FROM t -- TRAIN BY svm",
    "SELECT * FROM t /* PREDICT BY m */",
    "SELECT $$ TRAIN BY svm $$",
    "SELECT (SELECT 1) AS train",
    "SELECT count(*) FROM t GROUP BY train",
    "INSERT INTO t VALUES (1)",
    "SELECT 'unterminated",
])
def test_plain_sql_is_left_alone(text):
    assert parse_statement(text) == PlainStatement(text)


def test_the_papers_statement():
    stmt = parse_statement("SELECT * FROM t TRAIN BY svm WITH learning_rate = 0.1, "
                           "max_epoch_num = 20, block_size = '10MB'")
    assert isinstance(stmt, TrainStatement)
    assert (stmt.schema, stmt.relname, stmt.model) == (None, "t", "svm")
    assert [(p.name, p.value) for p in stmt.params] == [
        ("learning_rate", "0.1"), ("max_epoch_num", 20), ("block_size", "10MB")]
    assert stmt.source_query is None


def test_names_values_and_case_follow_sql_rules():
    stmt = parse_statement(
        'select * from Public."My T" train by \'LR\' with (shuffle = No_Shuffle, '
        'label = "Y", validation = s.h, seed => -5, double_buffer = false, l2 = 1e-4, '
        "model_name = NULL, features = 'a, b');")
    assert isinstance(stmt, TrainStatement)
    assert (stmt.schema, stmt.relname, stmt.model) == ("public", "My T", "LR")
    assert stmt.relation == '"public"."My T"'
    assert {p.name: p.value for p in stmt.params} == {
        "shuffle": Name(("no_shuffle",)), "label": Name(("Y",)),
        "validation": Name(("s", "h")), "seed": -5, "double_buffer": False,
        "l2": "1e-4", "model_name": None, "features": "a, b"}


def test_where_clause_is_kept_verbatim_for_the_temporary_table():
    stmt = parse_statement("SELECT * FROM t AS x WHERE x.a > 'é' AND b IN (1, 2)\n"
                           "TRAIN BY svm")
    assert isinstance(stmt, TrainStatement)
    assert stmt.source_query.as_string(None) == \
        "SELECT * FROM t AS x WHERE x.a > 'é' AND b IN (1, 2)"
    assert stmt.where_text == "x.a > 'é' AND b IN (1, 2)"


def _call(p):
    return f"P({p.model_name}, {p.row})"


def test_predict_by_adds_a_column_after_the_select_list():
    stmt = parse_statement("SELECT a, b -- note\nFROM s.t x WHERE a LIKE 'a%' "
                           "ORDER BY a LIMIT 3 PREDICT BY \"My Model\";")
    assert isinstance(stmt, PredictStatement)
    assert stmt.model_name == "My Model"
    assert stmt.query(_call) == ("SELECT a, b -- note\n, P(My Model, x) AS prediction\n"
                                 "FROM s.t x WHERE a LIKE 'a%' ORDER BY a LIMIT 3 ;")
    assert stmt.params is None


@pytest.mark.parametrize("text, params, expected", [
    ("SELECT a FROM t WHERE a < %s AND b = %s PREDICT BY %s", (1, 2, "m"), [1, 2]),
    ("SELECT a, %s FROM t WHERE a < %s PREDICT BY m", ("x", 1), ["x", 1]),
    ("SELECT * FROM (SELECT a FROM t PREDICT BY %s) s WHERE a > %s", ("m", 3), [3]),
])
def test_predict_by_keeps_positional_placeholders_in_order(text, params, expected):
    stmt = parse_statement(text, params)
    assert isinstance(stmt, PredictStatement)
    assert stmt.params == expected and stmt.model_name == "m"


@pytest.mark.parametrize("text, expected", [
    ("SELECT avg((label = prediction)::int) FROM (SELECT id, label FROM t PREDICT BY m) s",
     "SELECT avg((label = prediction)::int) FROM (SELECT id, label , P(m, t) AS prediction\n"
     "FROM t ) s"),
    ("WITH p AS (SELECT id FROM t x WHERE id < 5 PREDICT BY m) SELECT * FROM p",
     "WITH p AS (SELECT id , P(m, x) AS prediction\nFROM t x WHERE id < 5 ) SELECT * FROM p"),
    ("CREATE TABLE p AS SELECT id FROM t PREDICT BY m",
     "CREATE TABLE p AS SELECT id , P(m, t) AS prediction\nFROM t "),
    ("INSERT INTO p (id, prediction) SELECT id FROM t ORDER BY id LIMIT 2 PREDICT BY 'm';",
     "INSERT INTO p (id, prediction) SELECT id , P(m, t) AS prediction\nFROM t ORDER BY id "
     "LIMIT 2 ;"),
    ("EXPLAIN (COSTS OFF) SELECT FROM t PREDICT BY m",
     "EXPLAIN (COSTS OFF) SELECT  P(m, t) AS prediction\nFROM t "),
    ("SELECT (SELECT count(*) FROM u PREDICT BY a), * FROM (SELECT * FROM t PREDICT BY b) q",
     "SELECT (SELECT count(*) , P(a, u) AS prediction\nFROM u ), * FROM (SELECT * , "
     "P(b, t) AS prediction\nFROM t ) q"),
    ("(SELECT id FROM t PREDICT BY m) UNION ALL (SELECT id FROM u PREDICT BY n)",
     "(SELECT id , P(m, t) AS prediction\nFROM t ) UNION ALL (SELECT id , "
     "P(n, u) AS prediction\nFROM u )"),
])
def test_predict_by_anywhere_a_select_may_stand(text, expected):
    stmt = parse_statement(text)
    assert isinstance(stmt, PredictStatement)
    assert stmt.query(_call) == expected
    # what the server will run is checked with its own grammar
    from pglast import parse_sql
    parse_sql(expected)


def test_named_placeholders():
    params = {"n": 5, "lr": 0.5, "m": "svm"}
    stmt = parse_statement("SELECT * FROM t WHERE id < %(n)s TRAIN BY %(m)s "
                           "WITH learning_rate = %(lr)s", params)
    assert isinstance(stmt, TrainStatement)
    assert stmt.model == Bound("svm")
    assert stmt.params[0].value == Bound(0.5)
    assert stmt.source_params == params


@pytest.mark.parametrize("text, position, message", [
    ("SELECT * FORM t TRAIN BY svm", 9, 'syntax error at or near "FORM"'),
    ("SELECT 'é' AS x FORM t TRAIN BY svm", 16, "syntax error"),
    ("SELECT a FROM t TRAIN BY svm", 7, "whole rows"),
    ("SELECT * FROM t, u TRAIN BY svm", 17, "one table"),
    ("SELECT * FROM t TRAIN BY", 24, "needs <model>"),
    ("TRAIN BY svm", 0, "needs a SELECT"),
    ("SELECT * FROM t TRAIN BY svm WITH", 33, "at least one"),
    ("SELECT * FROM t TRAIN BY svm WITH a = 1, a = 2", 41, "given twice"),
    ("SELECT * FROM t TRAIN BY svm WITH a 1", 36, "expected = after a"),
    ("SELECT * FROM t TRAIN BY svm WITH a = (SELECT 1)", 38, "must be a constant"),
    ("SELECT * FROM t TRAIN BY svm WITH a = now()", 38, "must be a constant"),
    ("SELECT * FROM t TRAIN BY svm WITH a = 1 + 1", 38, "must be a constant"),
    ("SELECT * FROM t TRAIN BY svm WITH a = 1 b", 38, "not a single value"),
    ("SELECT * FROM t TRAIN BY svm extra", 29, "expected WITH"),
    ("SELECT * FROM t ORDER BY 1 TRAIN BY svm", None, "ORDER BY is not supported"),
    ("SELECT * FROM t; DROP TABLE t TRAIN BY svm", 15, "one statement at a time"),
    ("SELECT * FROM t TRAIN BY svm; DROP TABLE t", 28, "one statement at a time"),
    ("SELECT * FROM t TRAIN BY svm PREDICT BY m", 29, "only one"),
    ("SELECT * FROM (SELECT * FROM t TRAIN BY svm) s", 31, "stands alone"),
    ("SELECT * FROM (SELECT a FROM t PREDICT BY m x) s", 44, "after the model name"),
    ("SELECT a FROM t UNION SELECT a FROM u PREDICT BY m", 16, "not to a UNION"),
    ("SELECT * FROM (SELECT a FROM t, u PREDICT BY m) s", 32, "one table"),
    ("CREATE TABLE p AS SELECT a FROM t PREDICT BY m WITH NO DATA", 47,
     "after the model name"),
    ("INSERT INTO p VALUES (1) PREDICT BY m", 0, "follows a SELECT"),
    ("SELECT * FROM (SELECT a FROM t PREDICT BY m) s WHERE", 52, "syntax error"),
    ("SELECT a FROM t PREDICT BY m extra", 29, "after the model name"),
    ("SELECT a PREDICT BY m", 9, "needs a table"),
    ("SELECT a FROM t GROUP BY a PREDICT BY m", None, "GROUP BY"),
    ("VALUES (1) TRAIN BY svm", 0, "not VALUES"),
    ("DELETE FROM t TRAIN BY svm", 0, "SELECT statement"),
])
def test_errors_point_at_the_statement(text, position, message):
    with pytest.raises(corgipile.StatementError) as info:
        parse_statement(text)
    assert message in info.value.message
    assert info.value.position == position
    if position is not None:
        lines = str(info.value).splitlines()
        caret = lines.index(next(line for line in lines if line.strip() == "^"))
        assert lines[caret].index("^") - 2 == position - text.rfind("\n", 0, position) - 1


def test_caret_lands_under_the_error_on_a_later_line():
    text = "SELECT *\n  FROM t\n  WHERE a >\nTRAIN BY svm"
    with pytest.raises(corgipile.StatementError) as info:
        parse_statement(text)
    assert "end of input" in info.value.message
    assert info.value.position == text.index(">") + 1
    lines = str(info.value).splitlines()
    assert lines[1:3] == ["    WHERE a >", "             ^"]


@pytest.mark.parametrize("params", [(1,), {"x": 1}])
def test_placeholder_mismatches_are_refused(params):
    text = "SELECT * FROM t WHERE a < %s AND b < %(x)s TRAIN BY svm"
    with pytest.raises(corgipile.StatementError, match="not both"):
        parse_statement(text, params)
    with pytest.raises(corgipile.StatementError, match="2 parameters"):
        parse_statement("SELECT * FROM t WHERE a < %s TRAIN BY svm", (1, 2))
    with pytest.raises(corgipile.StatementError, match="no value"):
        parse_statement("SELECT * FROM t WHERE a < %(y)s TRAIN BY svm", {"x": 1})


# -- against the server -----------------------------------------------------------------

def test_train_by_runs_corgipile_train_and_returns_the_epochs(client, points):
    result = client.execute("SELECT * FROM points TRAIN BY svm WITH max_epoch_num = 3, "
                            "seed = 7, model_name = 'p1'")
    assert result.kind == "train" and result.model_name == "p1"
    assert result.columns == ["model_name", "epoch", "tuples", "loss", "score",
                              "validation_score", "seconds"]
    rows = list(result)
    assert [r[1] for r in rows] == [1, 2, 3] and all(r[2] == 600 for r in rows)
    model = client.get_model("p1")
    assert model.params["seed"] in ("7", 7) and model.params["max_epoch_num"] == 3
    assert model.relation == "public.points"
    # the same call in SQL gives bit-identical weights
    client.execute("SELECT * FROM corgipile.train('points', 'svm', model_name => 'p2', "
                   "max_epoch_num => 3, seed => 7)")
    assert np.array_equal(model.weights, client.get_model("p2").weights)


def test_train_by_with_where_trains_on_the_matching_rows_only(client, points, conn):
    result = client.execute("SELECT * FROM points WHERE id < %s TRAIN BY logistic "
                            "WITH max_epoch_num = %s, seed = 1", (250, 2))
    # two epochs, and the polish's row (epoch NULL) over the same rows
    assert [(r[1], r[2]) for r in result] == [(1, 250), (2, 250), (None, 250)]
    model = client.get_model(result.model_name)
    assert model.relation == "public.points"
    assert model.params["source_filter"] == "id < %s"
    assert result.model_name.startswith("points_logistic_")
    # no temporary table is left behind
    assert conn.execute("SELECT count(*) FROM pg_class WHERE relname LIKE 'corgipile_src_%'"
                        ).fetchone()[0] == 0


def test_train_by_validation_and_names(client, points, conn):
    conn.execute('CREATE TABLE "Mixed Case" AS SELECT id, label AS "Y", features FROM points')
    conn.execute('CREATE TABLE "Held Out" AS SELECT id, label AS "Y", features FROM heldout')
    result = client.execute('SELECT * FROM "Mixed Case" TRAIN BY svm WITH label = "Y", '
                            'validation = "Held Out", max_epoch_num = 2, shuffle = no_shuffle')
    rows = result.fetchall()
    assert all(r[5] is not None and 0.5 < r[5] <= 1 for r in rows)
    assert client.get_model(result.model_name).label == "Y"


def test_unknown_and_ill_typed_parameters(client, points):
    with pytest.raises(corgipile.StatementError) as info:
        client.execute("SELECT * FROM points TRAIN BY svm WITH learning_rat = 0.1")
    assert info.value.position == 39
    assert "learning_rate" in str(info.value) and "max_epoch_num" in str(info.value)
    with pytest.raises(corgipile.StatementError, match="takes an integer") as info:
        client.execute("SELECT * FROM points TRAIN BY svm WITH max_epoch_num = true")
    with pytest.raises(psycopg.errors.InvalidTextRepresentation):
        client.execute("SELECT * FROM points TRAIN BY svm WITH max_epoch_num = 2.5")
    with pytest.raises(corgipile.StatementError, match="not a named parameter"):
        client.execute("SELECT * FROM points TRAIN BY svm WITH relation = other")


def test_server_errors_come_through(client, points):
    with pytest.raises(errors.InvalidParameterValue, match="bogus"):
        client.execute("SELECT * FROM points TRAIN BY bogus")
    with pytest.raises(errors.UndefinedTable):
        client.execute("SELECT * FROM nowhere TRAIN BY svm")
    with pytest.raises(corgipile.StatementError, match="does not exist") as info:
        client.execute("SELECT * FROM nowhere WHERE id > 1 TRAIN BY svm")
    assert info.value.position == 14


def test_predict_by_adds_the_prediction_column(client, points, conn):
    client.execute("SELECT * FROM points TRAIN BY svm WITH model_name = m, seed = 1")
    result = client.execute("SELECT id, label FROM points WHERE id < 5 ORDER BY id "
                            "PREDICT BY m")
    assert result.kind == "predict"
    assert result.columns == ["id", "label", "prediction"]
    rows = result.fetchall()
    assert [r[0] for r in rows] == [0, 1, 2, 3, 4]
    direct = conn.execute("SELECT id, corgipile.predict('m', p) FROM points p WHERE id < 5 "
                          "ORDER BY id").fetchall()
    assert [(r[0], r[2]) for r in rows] == direct
    star = client.execute("SELECT * FROM points p LIMIT 2 PREDICT BY 'm'")
    assert star.columns == ["id", "label", "features", "prediction"]
    assert len(star.fetchall()) == 2


def test_predict_by_a_missing_model_points_at_it(client, points):
    with pytest.raises(corgipile.StatementError, match='model "nope" does not exist') as info:
        client.execute("SELECT id FROM points PREDICT BY nope")
    assert info.value.position == 33


def test_plain_sql_passes_through_with_params(client, points):
    result = client.execute("SELECT count(*) AS n FROM points WHERE label = %s", (1,))
    assert result.kind == "sql" and result.columns == ["n"]
    assert result.fetchone()[0] > 0
    status = client.execute("CREATE TABLE scratch (a int)")
    assert status.columns == [] and status.statusmessage == "CREATE TABLE"


# -- hostile inputs: nothing but the intended statement may run ----------------------------

def _tables(conn):
    return {r[0] for r in conn.execute(
        "SELECT relname FROM pg_class WHERE relnamespace = 'public'::regnamespace "
        "AND relkind = 'r'").fetchall()}


@pytest.mark.parametrize("text, params, expected", [
    # the model name is bound, never pasted
    ("SELECT * FROM points TRAIN BY 'svm''); DROP TABLE points; --'", None,
     errors.InvalidParameterValue),
    ("SELECT * FROM points TRAIN BY %s", ("svm'); DROP TABLE points; --",),
     errors.InvalidParameterValue),
    # parameter values too
    ("SELECT * FROM points TRAIN BY svm WITH label = 'label; DROP TABLE points'", None,
     psycopg.Error),
    ("SELECT * FROM points TRAIN BY svm WITH model_name = 'x''); DROP TABLE points; --',"
     " max_epoch_num = 1", None, None),
    ("SELECT * FROM points TRAIN BY svm WITH block_size = %s",
     ("1'); DROP TABLE points; --",), errors.InvalidParameterValue),
    # a quoted relation name is one name
    ('SELECT * FROM "points; DROP TABLE points" TRAIN BY svm', None, errors.UndefinedTable),
    # a second statement is refused before anything runs
    ("SELECT * FROM points; DROP TABLE points; SELECT * FROM points TRAIN BY svm", None,
     corgipile.StatementError),
    ("SELECT * FROM points TRAIN BY svm WITH seed = 1); DROP TABLE points; --", None,
     corgipile.StatementError),
    ("SELECT * FROM points WHERE true); DROP TABLE points; (SELECT 1 TRAIN BY svm", None,
     corgipile.StatementError),
    ("SELECT * FROM points TRAIN BY svm WITH seed = (DELETE FROM points RETURNING 1)", None,
     corgipile.StatementError),
    ("SELECT * FROM points TRAIN BY svm WITH seed = $1", None, corgipile.StatementError),
    ("SELECT id FROM points PREDICT BY 'm''); DROP TABLE points; --'", None,
     corgipile.StatementError),
    ("SELECT id FROM points PREDICT BY %s", ("m'); DROP TABLE points; --",),
     corgipile.StatementError),
    ("SELECT id FROM points PREDICT BY m; DROP TABLE points", None,
     corgipile.StatementError),
])
def test_injection_attempts_fail_safely(client, points, conn, text, params, expected):
    before = _tables(conn)
    rows = conn.execute("SELECT count(*) FROM points").fetchone()[0]
    if expected is None:
        client.execute(text, params)  # stored under the odd name, harmlessly
        assert conn.execute("SELECT count(*) FROM corgipile.models WHERE model_name = %s",
                            ("x'); DROP TABLE points; --",)).fetchone()[0] == 1
    else:
        with pytest.raises(expected):
            client.execute(text, params)
    assert _tables(conn) == before
    assert conn.execute("SELECT count(*) FROM points").fetchone()[0] == rows


def test_percent_signs_survive_predict_by_without_params(client, points, conn):
    conn.execute("CREATE TABLE names AS SELECT id, label, features, "
                 "CASE WHEN id % 2 = 0 THEN '50%' ELSE 'x' END AS tag FROM points")
    client.execute("SELECT * FROM points TRAIN BY svm WITH model_name = m2, max_epoch_num = 1")
    rows = client.execute("SELECT id, tag FROM names WHERE tag LIKE '%\\%%' ESCAPE '\\' "
                          "AND id % 2 = 0 PREDICT BY m2").fetchall()
    assert len(rows) == 300 and all(r[1] == "50%" for r in rows)
