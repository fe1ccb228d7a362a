"""Hostile replays of label and model-data attacks.

- Item 6: a validation table, or evaluate()'s relation, whose labels are of
  another kind than the model's classes.  Softmax with text classes against
  integer validation labels crashed the backend; every pair of kinds, every
  classifier, both entry points must end in a clear error instead.
- Item 4: warm_start copied the preprocessing of a model the caller may use
  but not read into a model of the caller's own.
- Item 7: two trainings of one statement with one new model name.

The autouse fixture of conftest.py fails a test during which the server log
shows a crashed backend.
"""

from __future__ import annotations

import pytest
from psycopg import errors

# (label SQL over i, kind): text, integer, bigint, boolean labels
LABELS = {
    "text3": "(ARRAY['a', 'b', 'c'])[1 + i % 3]",
    "varchar2": "((ARRAY['x', 'y'])[1 + i % 2])::varchar",
    "int3": "i % 3",
    "int2": "i % 2",
    "bigint2": "(i % 2)::int8 * 5000000000 / 5000000000",
    "bool": "i % 2 = 0",
}
TEXT = {"text3", "varchar2"}
# the values each label takes (a boolean is 0/1 as a label)
VALUES = {"text3": {"a", "b", "c"}, "varchar2": {"x", "y"}, "int3": {0, 1, 2},
          "int2": {0, 1}, "bigint2": {0, 1}, "bool": {0, 1}}


def _check(session, query: str, model: str, trained: str, scored: str) -> None:
    """The one outcome each pair must have: labels of the other kind are
    refused by type, labels outside the model's classes by value, and
    labels among them are scored."""
    if (trained in TEXT) != (scored in TEXT):
        with pytest.raises(errors.DatatypeMismatch, match="but the classes of model"):
            session.execute(query)
    elif not VALUES[scored] <= VALUES[trained]:
        message = ("is not a valid" if model != "softmax" and trained not in TEXT
                   else "is not one of the")
        with pytest.raises(errors.DataException, match=message):
            session.execute(query)
    else:
        assert session.execute(query).fetchone()[0] > 0


@pytest.fixture
def tables(conn, roles):
    """One table per label kind, readable by a hostile role."""
    role = roles.create()
    for name, label in LABELS.items():
        conn.execute(
            f"CREATE TABLE lab_{name} AS SELECT i AS id, {label} AS lab, "
            "ARRAY[i % 3, (i * 7) % 5]::float8[] AS f FROM generate_series(1, 60) AS i")
        conn.execute(f'GRANT SELECT ON lab_{name} TO "{role}"')
    return roles.connect(role)


def _classes(name):
    return 3 if name.endswith("3") else 2


@pytest.mark.parametrize("train_name", sorted(LABELS))
@pytest.mark.parametrize("valid_name", sorted(LABELS))
def test_validation_label_kind_is_checked(tables, train_name, valid_name):
    session = tables
    session.execute("SET corgipile.progress = off")
    models = ["softmax"] if _classes(train_name) == 3 else ["softmax", "svm", "logistic"]
    for model in models:
        query = (f"SELECT count(*) FROM corgipile.train('lab_{train_name}', '{model}', "
                 f"label => 'lab', features => 'f', validation => 'lab_{valid_name}', "
                 f"model_name => 'v_{model}_{train_name}_{valid_name}', max_epoch_num => 1, seed => 1)")
        _check(session, query, model, train_name, valid_name)


@pytest.mark.parametrize("train_name", ["text3", "varchar2", "int3", "int2", "bool"])
def test_evaluate_label_kind_is_checked(tables, train_name):
    session = tables
    session.execute("SET corgipile.progress = off")
    models = ["softmax"] if _classes(train_name) == 3 else ["softmax", "logistic"]
    for model in models:
        name = f"e_{model}_{train_name}"
        session.execute(f"SELECT count(*) FROM corgipile.train('lab_{train_name}', '{model}', "
                        f"label => 'lab', features => 'f', model_name => '{name}', "
                        "max_epoch_num => 1, seed => 1)")
        for other in LABELS:
            query = f"SELECT count(*) FROM corgipile.evaluate('{name}', 'lab_{other}')"
            _check(session, query, model, train_name, other)


def test_warm_start_does_not_copy_hidden_preprocessing(conn, roles):
    """The issue's reproduction: alice imports a model (no training
    relation), grants it to mallory, who trains her own model from it."""
    conn.execute("SET corgipile.progress = off")
    alice, mallory = roles.create("alice"), roles.create("mallory")
    a, m = roles.connect(alice), roles.connect(mallory)
    a.execute("SET corgipile.progress = off")
    m.execute("SET corgipile.progress = off")
    a.execute("CREATE TABLE secret AS SELECT i AS id, i % 2 AS label, "
              "(ARRAY['ssn-1', 'ssn-2', 'ssn-3'])[1 + i % 3] AS who, i * 1000.0 AS pay "
              "FROM generate_series(1, 80) AS i")
    a.execute("SELECT count(*) FROM corgipile.train('secret', 'logistic', features => 'who, pay', "
              "model_name => 'src', max_epoch_num => 1, seed => 1)")
    a.execute("SELECT corgipile.import_model('imp', model, '(imported)', label, features, "
              "feature_indices, n_features, weights, classes, params, history, created_at, "
              "preprocess) FROM corgipile.models WHERE model_name = 'src'")
    a.execute(f"SELECT corgipile.grant_model('imp', '{mallory}')")
    m.execute("CREATE TABLE mine AS SELECT i AS id, i % 2 AS label, "
              "(ARRAY['a', 'b', 'c'])[1 + i % 3] AS who, i * 1.0 AS pay FROM generate_series(1, 30) AS i")
    assert m.execute("SELECT preprocess FROM corgipile.models WHERE model_name = 'imp'").fetchone() == (None,)
    # predicting with it is what USAGE is for
    assert m.execute("SELECT count(corgipile.predict('imp', t)) FROM mine AS t").fetchone() == (30,)
    with pytest.raises(errors.InsufficientPrivilege, match="preprocessing of model"):
        m.execute("SELECT count(*) FROM corgipile.train('mine', 'logistic', features => 'who, pay', "
                  "model_name => 'copy', warm_start => 'imp', max_epoch_num => 1, seed => 1)")
    with pytest.raises(errors.InsufficientPrivilege, match="preprocessing of model"):
        m.execute("SELECT * FROM corgipile.model_coefficients('imp')")
    # nothing of alice's rows reached a model mallory can read
    rows = m.execute("SELECT pg_catalog.count(*) FROM corgipile.models "
                     "WHERE preprocess::text LIKE '%ssn-%' OR model_name = 'copy'").fetchone()
    assert rows == (0,)


def test_one_name_twice_in_one_statement(conn):
    conn.execute("SET corgipile.progress = off")
    conn.execute("CREATE TABLE pts AS SELECT i AS id, i % 2 AS label, "
                 "ARRAY[i % 2, i % 3]::float8[] AS features FROM generate_series(1, 50) AS i")
    with pytest.raises(errors.DuplicateObject, match="already being trained"):
        conn.execute("SELECT count(*) FROM (SELECT * FROM corgipile.train('pts', 'svm', model_name => 'x') "
                     "UNION ALL SELECT * FROM corgipile.train('pts', 'svm', model_name => 'x')) AS s")
    # the claim ended with the statement, error or not
    conn.execute("SELECT count(*) FROM corgipile.train('pts', 'svm', model_name => 'x', max_epoch_num => 1)")
    assert conn.execute("SELECT count(*) FROM corgipile.models WHERE model_name = 'x'").fetchone() == (1,)
