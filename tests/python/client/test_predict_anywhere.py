"""PREDICT BY wherever a SELECT may stand (subqueries, CTEs, CREATE TABLE
AS, INSERT ... SELECT), and TRAIN BY ... WHERE, through Client.execute and
through a running `corgipile proxy`, against the real server:
each result equals the same query written with corgipile.predict()."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator

import psycopg
import pytest

from client_helpers import CLIENT, dsn_with

# (PREDICT BY form, the same with corgipile.predict written out)
FORMS = [
    ("SELECT round(avg((label = prediction)::int), 4) FROM "
     "(SELECT id, label FROM points PREDICT BY m1) s",
     "SELECT round(avg((label = corgipile.predict('m1', points))::int), 4) FROM points"),
    ("WITH p AS (SELECT id, label FROM points x WHERE id < 50 PREDICT BY m1) "
     "SELECT id, prediction FROM p WHERE prediction <> label ORDER BY id",
     "SELECT id, corgipile.predict('m1', x) FROM points x WHERE id < 50 "
     "AND corgipile.predict('m1', x) <> label ORDER BY id"),
    ("SELECT count(*) FILTER (WHERE a.prediction = b.prediction) FROM "
     "(SELECT id FROM points PREDICT BY m1) a JOIN (SELECT id FROM points PREDICT BY m2) b "
     "USING (id)",
     "SELECT count(*) FILTER (WHERE corgipile.predict('m1', p) = corgipile.predict('m2', p)) "
     "FROM points p"),
]


def _setup(conn):
    for name, epochs in (("m1", 3), ("m2", 1)):
        conn.execute("SELECT count(*) FROM corgipile.train('points', 'svm', model_name => %s, "
                     "max_epoch_num => %s, seed => 1)", (name, epochs))


class Proxy:
    def __init__(self, upstream: str) -> None:
        env = dict(os.environ, PYTHONPATH=str(CLIENT))
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "corgipile", "proxy", "--listen", "127.0.0.1:0",
             "--upstream", upstream,
             # the test cluster trusts local connections (see test_proxy.py)
             "--unsafe-allow-passwordless", "--allow-unix-socket-upstream"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            text=True, env=env, cwd=CLIENT)
        assert self.proc.stdout is not None
        m = re.search(r"listening on ([\d.]+):(\d+)", self.proc.stdout.readline())
        if not m:
            self.proc.kill()
            raise RuntimeError(self.proc.stderr.read() if self.proc.stderr else "no proxy")
        self.host, self.port = m.group(1), int(m.group(2))

    def stop(self) -> str:
        self.proc.terminate()
        _, err = self.proc.communicate(timeout=10)
        return err


@pytest.fixture(scope="module")
def proxy() -> Iterator[Proxy]:
    p = Proxy(f"host={os.environ['PGHOST']} port={os.environ['PGPORT']}")
    yield p
    assert p.proc.poll() is None, "the proxy died"
    assert "Traceback" not in p.stop()


@pytest.fixture
def pconn(dsn, proxy) -> Iterator[psycopg.Connection]:
    with psycopg.connect(dsn_with(dsn, host=proxy.host, port=str(proxy.port)),
                         autocommit=True) as c:
        yield c


@pytest.mark.parametrize("form, direct", FORMS)
def test_predict_by_in_subqueries_and_ctes_through_the_client(client, conn, points, form,
                                                              direct):
    _setup(conn)
    result = client.execute(form)
    assert result.kind == "predict"
    assert result.fetchall() == conn.execute(direct).fetchall()


@pytest.mark.parametrize("binary", [False, True], ids=["simple", "extended"])
@pytest.mark.parametrize("form, direct", FORMS)
def test_predict_by_in_subqueries_and_ctes_through_the_proxy(pconn, conn, points, form,
                                                             direct, binary):
    _setup(conn)
    assert pconn.execute(form, binary=binary).fetchall() == conn.execute(direct).fetchall()


def _expected_table(conn):
    return conn.execute("SELECT id, label, corgipile.predict('m1', points) FROM points "
                        "WHERE id % 7 = 0 ORDER BY id").fetchall()


def test_create_table_as_and_insert_select_through_the_client(client, conn, points):
    _setup(conn)
    r = client.execute("CREATE TABLE p AS SELECT id, label FROM points WHERE id % 7 = 0 "
                       "PREDICT BY m1")
    assert r.statusmessage == f"SELECT {len(_expected_table(conn))}"
    assert conn.execute("SELECT * FROM p ORDER BY id").fetchall() == _expected_table(conn)
    assert conn.execute("SELECT format_type(atttypid, -1) FROM pg_attribute WHERE attrelid = "
                        "'p'::regclass AND attname = 'prediction'").fetchone() == (
        "double precision",)
    conn.execute("TRUNCATE p")
    client.execute("INSERT INTO p (id, label, prediction) SELECT id, label FROM points "
                   "WHERE id %% %s = 0 PREDICT BY %s", (7, "m1"))
    assert conn.execute("SELECT * FROM p ORDER BY id").fetchall() == _expected_table(conn)


def test_create_table_as_and_insert_select_through_the_proxy(pconn, conn, points):
    _setup(conn)
    pconn.execute("CREATE TABLE q AS SELECT id, label FROM points WHERE id % 7 = 0 "
                  "PREDICT BY m1")
    assert conn.execute("SELECT * FROM q ORDER BY id").fetchall() == _expected_table(conn)
    conn.execute("TRUNCATE q")
    pconn.execute("INSERT INTO q SELECT id, label FROM points WHERE id % 7 = 0 PREDICT BY m1",
                  binary=True)
    assert conn.execute("SELECT * FROM q ORDER BY id").fetchall() == _expected_table(conn)


def test_train_by_where_through_the_client_and_the_proxy(client, pconn, conn, points):
    """The rows matching WHERE, copied to a temporary table on the caller's
    connection and trained on: the same model as training on a table of
    exactly those rows; the copy is dropped afterwards; the model records
    the table and the condition."""
    conn.execute("CREATE TABLE few AS SELECT * FROM points WHERE id % 3 <> 0 ORDER BY id")
    conn.execute("SELECT count(*) FROM corgipile.train('few', 'svm', model_name => 'ref', "
                 "shuffle => 'no_shuffle', max_epoch_num => 2, seed => 3)")
    ref = conn.execute("SELECT weights FROM corgipile.models WHERE model_name = 'ref'"
                       ).fetchone()[0]
    q = ("SELECT * FROM points WHERE id % 3 <> 0 TRAIN BY svm WITH shuffle = no_shuffle, "
         "max_epoch_num = 2, seed = 3, model_name = '{}'")
    client.execute(q.format("via_client"))
    rows = pconn.execute(q.format("via_proxy")).fetchall()
    assert [r[1] for r in rows] == [1, 2]  # one row per epoch, as for a table
    # the proxy records the source and drops the copy right after the
    # answer, before it reads this connection's next statement
    assert pconn.execute("SELECT 1").fetchone() == (1,)
    for name in ("via_client", "via_proxy"):
        weights, relation, params = conn.execute(
            "SELECT weights, relation, params FROM corgipile.models WHERE model_name = %s",
            (name,)).fetchone()
        assert weights == ref
        assert relation == "public.points" and params["source_filter"] == "id % 3 <> 0"
    # no copy left in the proxy's session
    assert pconn.execute("SELECT count(*) FROM pg_class WHERE relname LIKE 'corgipile_src%' "
                         "AND relpersistence = 't'").fetchone() == (0,)
    # without model_name: a name drawn as the client draws it (table_model_n)
    pconn.execute("SELECT * FROM points WHERE id < 300 TRAIN BY logistic "
                  "WITH max_epoch_num = 1")
    pconn.execute("SELECT 1")
    assert conn.execute("SELECT count(*) FROM corgipile.models WHERE model_name ~ "
                        "'^points_logistic_[0-9]+$' AND relation = 'public.points'"
                        ).fetchone() == (1,)
    # a bad condition: the server's error, and nothing is left behind
    with pytest.raises(psycopg.errors.UndefinedColumn):
        pconn.execute("SELECT * FROM points WHERE nosuch > 1 TRAIN BY svm")
    assert pconn.execute("SELECT 1").fetchone() == (1,)


def test_predict_by_on_a_boolean_label_returns_booleans(client, pconn, conn, points):
    """A model trained on a boolean label predicts the label's type through
    PREDICT BY (the client and the proxy), as predict_class does for text
    labels: `label = prediction` needs no cast, and a table created from it
    has a boolean column."""
    conn.execute("CREATE TABLE flags AS SELECT id, label > 0 AS label, features FROM points")
    conn.execute("SELECT count(*) FROM corgipile.train('flags', 'logistic', model_name => 'mb', "
                 "max_epoch_num => 2, seed => 1)")
    expected = conn.execute(
        "SELECT id, label, corgipile.predict('mb', f) OPERATOR(pg_catalog.=) 1 "
        "FROM flags f ORDER BY id").fetchall()
    assert {r[2] for r in expected} == {False, True}
    q = "SELECT id, label, prediction FROM (SELECT id, label FROM flags PREDICT BY mb) s ORDER BY id"
    assert client.execute(q).fetchall() == expected
    assert pconn.execute(q).fetchall() == expected
    hits = "SELECT count(*) FILTER (WHERE label = prediction) FROM ({}) s".format(
        "SELECT id, label FROM flags PREDICT BY mb")
    n = sum(r[1] == r[2] for r in expected)
    assert client.execute(hits).fetchone() == (n,)
    assert pconn.execute(hits).fetchone() == (n,)
    pconn.execute("CREATE TABLE fp AS SELECT id, label FROM flags PREDICT BY mb")
    assert conn.execute("SELECT format_type(atttypid, -1) FROM pg_attribute WHERE attrelid = "
                        "'fp'::regclass AND attname = 'prediction'").fetchone() == ("boolean",)
