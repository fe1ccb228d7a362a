"""Hostile inputs to the preprocessing: category columns
built to exhaust memory (many distinct values, very long values, a huge
max_categories) stop with a clean ERROR naming the column, and damaged or
forged preprocess documents handed to import_model are refused, never read.

Every test runs under the autouse check of conftest.py that the postmaster
never restarted (a backend crash restarts them all).
"""

from __future__ import annotations

import json

import pytest
from psycopg import errors


def _quiet(conn) -> None:
    conn.execute("SET corgipile.progress = off")


def test_many_distinct_values_hit_the_cap(roles, conn):
    role = roles.create()
    s = roles.connect(role)
    _quiet(s)
    s.execute("CREATE TABLE ids AS SELECT g % 2 AS label, md5(g::text) AS cat, g::float8 AS x "
              "FROM generate_series(1, 50000) g")
    with pytest.raises(errors.ProgramLimitExceeded,
                       match='column "cat" of relation "ids" has more than 1000 distinct values'):
        s.execute("SELECT * FROM corgipile.train('ids', 'svm', features => 'x, cat')")
    # the largest cap the engine accepts, and beyond it
    with pytest.raises(errors.InvalidParameterValue, match="max_categories must be at most"):
        s.execute("SELECT * FROM corgipile.train('ids', 'svm', features => 'x, cat', "
                  "max_categories => 2147483647)")


def test_dictionaries_are_held_to_work_mem(roles, conn):
    role = roles.create()
    s = roles.connect(role)
    _quiet(s)
    s.execute("SET work_mem = '256kB'")
    s.execute("CREATE TABLE ids AS SELECT g % 2 AS label, md5(g::text) AS cat, g::float8 AS x "
              "FROM generate_series(1, 5000) g")
    # the tables for 5000 categories take ~200 kB of the 256 kB; the distinct
    # values (32 bytes each, charged twice with their JEntry: 68) the rest
    # after ~800 values
    with pytest.raises(errors.ProgramLimitExceeded,
                       match='the categories of column "cat" of relation "ids" take more than '
                             'work_mem'):
        s.execute("SELECT * FROM corgipile.train('ids', 'svm', features => 'x, cat', "
                  "max_categories => 5000)")
    # the tables a large max_categories sizes up front, before any value is read
    with pytest.raises(errors.ProgramLimitExceeded, match="would take more than work_mem"):
        s.execute("SELECT * FROM corgipile.train('ids', 'svm', features => 'x, cat', "
                  "max_categories => 1048576)")
    # many category columns multiply it
    cols = ", ".join(f"'c' AS c{i}" for i in range(200))
    s.execute(f"CREATE TABLE wide AS SELECT g % 2 AS label, g::float8 AS x, {cols} "
              "FROM generate_series(1, 10) g")
    names = ", ".join(["x"] + [f"c{i}" for i in range(200)])
    with pytest.raises(errors.ProgramLimitExceeded, match="would take more than work_mem"):
        s.execute(f"SELECT * FROM corgipile.train('wide', 'svm', features => '{names}')")


def test_very_long_values(roles, conn):
    role = roles.create()
    s = roles.connect(role)
    _quiet(s)
    # ten values of 1 MB each (TOASTed, compressible: repeat of a distinct head)
    s.execute("CREATE TABLE longs AS SELECT g % 2 AS label, g::float8 AS x, "
              "g::text || repeat('x', 1024 * 1024) AS cat FROM generate_series(1, 10) g")
    with pytest.raises(errors.ProgramLimitExceeded, match='"cat".*work_mem'):
        s.execute("SELECT * FROM corgipile.train('longs', 'svm', features => 'x, cat')")
    # a long label value on a binary classifier is just a label
    s.execute("CREATE TABLE longlabel AS SELECT CASE WHEN g % 2 = 0 THEN repeat('a', 100000) "
              "ELSE repeat('b', 100000) END AS label, g::float8 AS x FROM generate_series(1, 50) g")
    s.execute("SELECT count(*) FROM corgipile.train('longlabel', 'svm', features => 'x', "
              "model_name => 'longlabel_m', max_epoch_num => 1)")
    labels = {"a" * 100000, "b" * 100000}
    assert set(s.execute("SELECT classes FROM corgipile.models WHERE model_name = "
                         "'longlabel_m'").fetchone()[0]) == labels
    predicted = s.execute("SELECT DISTINCT corgipile.predict_class('longlabel_m', t) "
                          "FROM longlabel t").fetchall()
    assert predicted and {p[0] for p in predicted} <= labels
    # softmax classes of 1 MB each: held to work_mem like the categories
    s.execute("CREATE TABLE longclasses AS SELECT g::text || repeat('c', 1024 * 1024) AS label, "
              "ARRAY[g::float8] AS features FROM generate_series(1, 10) g")
    with pytest.raises(errors.ProgramLimitExceeded, match='label column "label".*work_mem'):
        s.execute("SELECT * FROM corgipile.train('longclasses', 'softmax')")


def _export(conn, name):
    row = conn.execute(
        "SELECT model, relation, label, features, feature_indices, n_features, weights, classes, "
        "params, history, preprocess FROM corgipile.models WHERE model_name = %s",
        (name,)).fetchone()
    return list(row)


FORGED = [
    ("not an object", '"hello"', "It is not a JSON object"),
    ("version", '{"version": 2}', "Its version is not 1"),
    ("categories out of order",
     None, "not in byte order"),
    ("duplicate category", None, "repeats an earlier one"),
    ("huge n_model_features", None, "n_model_features"),
    ("std not a number", None, "is not a number"),
    ("too many positions", None, "positions"),
]


@pytest.mark.parametrize("case,doc,message", FORGED, ids=[c[0] for c in FORGED])
def test_import_model_validates_preprocess(roles, conn, case, doc, message):
    role = roles.create()
    s = roles.connect(role)
    _quiet(s)
    s.execute("CREATE TABLE t AS SELECT g % 2 AS label, g::float8 AS x, "
              "(ARRAY['a', 'b', 'c'])[1 + g % 3] AS cat FROM generate_series(1, 300) g")
    s.execute("SELECT count(*) FROM corgipile.train('t', 'svm', features => 'x, cat', "
              "model_name => 'orig', max_epoch_num => 1)")
    row = _export(s, "orig")
    prep = row[-1]
    assert prep["features"][1]["categories"] == ["a", "b", "c"]
    if doc is None:
        prep = json.loads(json.dumps(prep))
        if case == "categories out of order":
            prep["features"][1]["categories"] = ["c", "a", "b"]
        elif case == "duplicate category":
            prep["features"][1]["categories"] = ["a", "a", "c"]
        elif case == "huge n_model_features":
            prep["n_model_features"] = 2 ** 40
        elif case == "std not a number":
            prep["features"][0]["std"] = "big"
        elif case == "too many positions":
            prep["features"][1]["categories"] = ["a", "b", "c", "d", "e"]
        doc = json.dumps(prep)
    args = row[:-1]
    with pytest.raises(errors.DataCorrupted, match=message):
        s.execute("SELECT corgipile.import_model('forged', %s, %s, %s, %s, %s, %s, %s, %s, %s, "
                  "%s, NULL, %s::jsonb)",
                  [args[0], args[1], args[2], args[3], args[4], args[5], args[6],
                   json.dumps(args[7]), json.dumps(args[8]), json.dumps(args[9]), doc])
    assert s.execute("SELECT count(*) FROM corgipile.models WHERE model_name = 'forged'"
                     ).fetchone()[0] == 0
    # the genuine document imports and predicts as the original
    s.execute("SELECT corgipile.import_model('copy', %s, %s, %s, %s, %s, %s, %s, %s, %s, "
              "%s, NULL, %s::jsonb)",
              [args[0], args[1], args[2], args[3], args[4], args[5], args[6],
               json.dumps(args[7]), json.dumps(args[8]), json.dumps(args[9]),
               json.dumps(row[-1])])
    assert s.execute("SELECT bool_and(corgipile.predict('orig', t) = corgipile.predict('copy', t)) "
                     "FROM t").fetchone()[0]
