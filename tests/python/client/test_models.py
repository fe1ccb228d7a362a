"""Model management: list, get, drop, rename, export/import between
databases with identical predictions, and the connection kinds."""

from __future__ import annotations

import json
import uuid

import numpy as np
import psycopg
import pytest
from psycopg import sql

import corgipile
from client_helpers import make_table


@pytest.fixture
def other_db(conn, dsn):
    """A second database with the extension, for export/import."""
    name = f"corgipile_other_{uuid.uuid4().hex[:8]}"
    conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    info = dict(item.split("=", 1) for item in dsn.split())
    info["dbname"] = name
    other_dsn = " ".join(f"{k}={v}" for k, v in info.items())
    other = psycopg.connect(other_dsn, autocommit=True)
    other.execute("CREATE EXTENSION corgipile")
    yield other
    other.close()
    conn.execute(sql.SQL("DROP DATABASE {} WITH (FORCE)").format(sql.Identifier(name)))


def test_list_get_rename_drop(client, points):
    assert client.list_models() == []
    client.train("points", "svm", model_name="a", max_epoch_num=2, seed=1)
    client.train("points", "logistic", model_name="b", max_epoch_num=3, seed=1)
    infos = client.list_models()
    assert [(i.name, i.model, i.n_features, i.epochs) for i in infos] == [
        ("a", "svm", 4, 2), ("b", "logistic", 4, 3)]
    assert infos[1].score == client.get_model("b").history[-1].score
    renamed = client.rename_model("a", "a2")
    assert renamed.name == "a2" and renamed.epochs == 2
    with pytest.raises(corgipile.ModelNotFound):
        client.get_model("a")
    with pytest.raises(corgipile.ModelExists):
        client.rename_model("a2", "b")
    with pytest.raises(corgipile.ModelNotFound):
        client.rename_model("zzz", "y")
    client.drop_model("a2")
    with pytest.raises(corgipile.ModelNotFound):
        client.drop_model("a2")
    assert [i.name for i in client.list_models()] == ["b"]


def test_only_the_owner_may_rename_or_drop(client, points, conn, dsn):
    client.train("points", "svm", model_name="mine", max_epoch_num=1)
    role = f"stranger_{uuid.uuid4().hex[:6]}"
    conn.execute(sql.SQL("CREATE ROLE {} LOGIN").format(sql.Identifier(role)))
    try:
        info = dict(item.split("=", 1) for item in dsn.split())
        info["user"] = role
        with psycopg.connect(" ".join(f"{k}={v}" for k, v in info.items()),
                             autocommit=True) as c2:
            stranger = corgipile.Client(c2, progress=False)
            # corgipile 0.2.0: models are private to their owner until granted
            assert stranger.list_models() == []
            with pytest.raises(corgipile.ModelNotFound):
                stranger.get_model("mine")
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                stranger.rename_model("mine", "theirs")
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                stranger.drop_model("mine")
            client.connection.execute("SELECT corgipile.grant_model('mine', %s)", (role,))
            assert [i.name for i in stranger.list_models()] == ["mine"]
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                stranger.rename_model("mine", "theirs")
        assert client.get_model("mine").name == "mine"
    finally:
        conn.execute(sql.SQL("DROP OWNED BY {}").format(sql.Identifier(role)))
        conn.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(role)))


@pytest.mark.parametrize("model", ["svm", "logistic"])
def test_export_import_round_trip_gives_identical_predictions(client, points, other_db,
                                                              model):
    trained = client.train("points", model, model_name="exported", max_epoch_num=3, seed=5,
                           learning_rate=0.07)
    doc = client.export_model("exported")
    text = json.dumps(doc)
    assert doc["format"] == "corgipile.model" and doc["version"] == 1

    target = corgipile.Client(other_db, progress=False)
    x, y = points
    make_table(other_db, "points", x[:600], y[:600])  # the same rows over there
    imported = target.import_model(text)
    assert imported.name == "exported"
    assert np.array_equal(imported.weights, trained.weights)  # bit for bit
    assert imported.classes == trained.classes and imported.params == trained.params
    assert imported.history == trained.history
    assert imported.created_at == trained.created_at

    here = client.connection.execute(
        "SELECT id, corgipile.predict('exported', p) FROM points p ORDER BY id").fetchall()
    there = other_db.execute(
        "SELECT id, corgipile.predict('exported', p) FROM points p ORDER BY id").fetchall()
    assert here == there
    probe = np.random.default_rng(0).normal(size=(40, 4))
    assert np.array_equal(client.predict("exported", probe), target.predict("exported", probe))
    here_m, there_m = (c.evaluate("exported", "points") for c in (client, target))
    assert here_m.keys() == there_m.keys() and "accuracy" in here_m
    # a NULL metric (svm's log_loss) is None on both sides
    assert here_m == there_m


def test_import_options_and_bad_documents(client, points, other_db):
    client.train("points", "svm", model_name="m", max_epoch_num=1)
    doc = client.export_model("m")
    target = corgipile.Client(other_db, progress=False)
    target.import_model(doc)
    with pytest.raises(corgipile.ModelExists):
        target.import_model(doc)
    renamed = target.import_model(doc, name="m_copy")
    assert renamed.name == "m_copy"
    doc2 = dict(doc, weights=[0.0] * len(doc["weights"]))
    assert np.all(target.import_model(doc2, replace=True).weights == 0)
    for bad, message in [
        ("{not json", "not a JSON"),
        ([], "JSON object"),
        (dict(doc, format="other"), "not a corgipile model"),
        (dict(doc, version=99), "unsupported export version"),
        (dict(doc, weights=[1.0, 2.0]), "do not fit"),
        (dict(doc, weights=[1.0, float("nan"), 0, 0, 0]), "finite numbers"),
        (dict(doc, n_features=0), "positive"),
        ({k: v for k, v in doc.items() if k != "label"}, "'label'"),
        (dict(doc, features="features"), "wrong type"),
    ]:
        with pytest.raises(corgipile.ModelFormatError, match=message):
            target.import_model(bad, name="bad")
    assert {i.name for i in target.list_models()} == {"m", "m_copy"}


def test_model_json_helpers(client, points):
    model = client.train("points", "svm", model_name="j", max_epoch_num=2)
    again = corgipile.Model.from_dict(model.to_json())
    assert np.array_equal(again.weights, model.weights)
    assert again.history == model.history and again.features == model.features


# -- connections ------------------------------------------------------------------

def test_connect_with_a_dsn_and_with_pg_variables(dsn, points, monkeypatch):
    with corgipile.connect(dsn) as c:
        assert c.connection.autocommit
        assert c.execute("SELECT count(*) FROM points").fetchone() == (600,)
    assert c.connection.closed
    info = dict(item.split("=", 1) for item in dsn.split())
    for var, key in (("PGHOST", "host"), ("PGPORT", "port"), ("PGUSER", "user"),
                     ("PGDATABASE", "dbname")):
        monkeypatch.setenv(var, info[key])
    with corgipile.connect() as c:
        assert c.execute("SELECT current_database()").fetchone()[0] == info["dbname"]


def test_wrapping_keeps_the_callers_connection_open(conn):
    client = corgipile.Client(conn)
    client.close()
    assert not conn.closed
    with pytest.raises(corgipile.ConnectionTypeError):
        corgipile.Client(42)


def test_sqlalchemy_engine_and_connection(dsn, points, conn):
    sqlalchemy = pytest.importorskip("sqlalchemy")
    info = dict(item.split("=", 1) for item in dsn.split())
    url = sqlalchemy.engine.URL.create(
        "postgresql+psycopg", username=info["user"], database=info["dbname"],
        query={"host": info["host"], "port": info["port"]})
    engine = sqlalchemy.create_engine(url)
    try:
        with corgipile.Client(engine, progress=False) as client:
            model = client.train("points", "svm", model_name="sa_engine", max_epoch_num=1)
            assert model.name == "sa_engine"
        # committed: visible from another session
        assert conn.execute("SELECT count(*) FROM corgipile.models").fetchone()[0] == 1

        with engine.connect() as sa_conn:
            client = corgipile.Client(sa_conn, progress=False)
            client.execute("SELECT * FROM points TRAIN BY svm WITH model_name = sa_conn, "
                           "max_epoch_num = 1")
            assert conn.execute("SELECT count(*) FROM corgipile.models").fetchone()[0] == 1
            sa_conn.commit()  # the client's work is part of SQLAlchemy's transaction
        assert conn.execute("SELECT count(*) FROM corgipile.models").fetchone()[0] == 2

        with engine.connect() as sa_conn:
            client = corgipile.Client(sa_conn, progress=False)
            client.train("points", "svm", model_name="rolled_back", max_epoch_num=1)
            sa_conn.rollback()
        assert conn.execute("SELECT count(*) FROM corgipile.models WHERE model_name = "
                            "'rolled_back'").fetchone()[0] == 0
    finally:
        engine.dispose()


def test_sqlalchemy_needs_the_psycopg_driver():
    sqlalchemy = pytest.importorskip("sqlalchemy")
    engine = sqlalchemy.create_engine("sqlite://")
    with pytest.raises(corgipile.ConnectionTypeError, match="postgresql\\+psycopg"):
        corgipile.Client(engine)
    engine.dispose()
