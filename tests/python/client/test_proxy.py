"""corgipile proxy: real clients (psql, psycopg, pgbench) through the proxy
to the real test server; TRAIN BY / PREDICT BY on both protocols, the
proxy's own errors, cancel, hostile bytes and many connections at once.

The proxy runs as a subprocess (`python -m corgipile proxy`), as users run
it; every test checks at the end that it is still running."""

from __future__ import annotations

import json
import os
import re
import select
import shutil
import socket
import struct
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from psycopg import errors as pgerrors
from psycopg.pq import TransactionStatus

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from client_helpers import CLIENT, ROOT, dsn_with
from corgipile.errors import StatementError
from corgipile.statements import parse_statement
from pgwire import NullTransport, Wire, cancel_request, fields, msg

PG_BIN = Path("/usr/lib/postgresql/15/bin")
PSQL = PG_BIN / "psql"
PGBENCH = PG_BIN / "pgbench"


# The test cluster trusts every local connection (scripts/pgcluster.sh), which
# the proxy refuses by default; these tests are about the protocol, so they
# opt in. tests/python/security/test_proxy_auth.py runs it as shipped against
# Debian's pg_hba.conf.
TRUSTING = ["--unsafe-allow-passwordless", "--allow-unix-socket-upstream"]


class Proxy:
    def __init__(self, upstream: str, *extra: str, flags: list[str] = TRUSTING) -> None:
        env = dict(os.environ, PYTHONPATH=str(CLIENT))
        self.proc = subprocess.Popen(
            [sys.executable, "-P", "-m", "corgipile", "proxy", "--listen", "127.0.0.1:0",
             "--upstream", upstream, *flags, *extra],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        m = re.search(r"listening on ([\d.]+):(\d+)", line)
        if not m:
            self.proc.kill()
            raise RuntimeError(f"the proxy did not start: {line!r} "
                               f"{self.proc.stderr.read() if self.proc.stderr else ''}")
        self.host, self.port = m.group(1), int(m.group(2))

    def alive(self) -> bool:
        return self.proc.poll() is None

    def stop(self) -> str:
        self.proc.terminate()
        try:
            _, err = self.proc.communicate(timeout=10)
        except subprocess.TimeoutExpired:  # pragma: no cover
            self.proc.kill()
            _, err = self.proc.communicate()
        return err


@pytest.fixture(scope="module")
def proxy() -> Iterator[Proxy]:
    p = Proxy(f"host={os.environ['PGHOST']} port={os.environ['PGPORT']}")
    yield p
    err = p.stop()
    assert "Traceback" not in err, err


@pytest.fixture(autouse=True)
def _proxy_survives(request: pytest.FixtureRequest) -> Iterator[None]:
    yield
    if "proxy" in request.fixturenames:
        assert request.getfixturevalue("proxy").alive(), "the proxy process died"


@pytest.fixture
def pdsn(dsn: str, proxy: Proxy) -> str:
    """This test's database, through the proxy."""
    return dsn_with(dsn, host=proxy.host, port=str(proxy.port))


@pytest.fixture
def pconn(pdsn: str) -> Iterator[psycopg.Connection]:
    with psycopg.connect(pdsn, autocommit=True) as c:
        yield c


@pytest.fixture
def model(conn, points) -> str:
    """Model m1 trained directly on points (the proxy is not involved)."""
    conn.execute("SELECT count(*) FROM corgipile.train('points', 'svm', model_name => 'm1', "
                 "max_epoch_num => 3, label => 'label', features => 'features')")
    return "m1"


def env_for(pdsn: str) -> dict[str, str]:
    info = dict(item.split("=", 1) for item in pdsn.split())
    return dict(os.environ, PGHOST=info["host"], PGPORT=info["port"], PGUSER=info["user"],
                PGDATABASE=info["dbname"], PGOPTIONS="", PSQLRC="/dev/null")


def psql(pdsn: str, *args: str, script: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(PSQL), "-X", *args], input=script, capture_output=True,
                          text=True, env=env_for(pdsn), timeout=120)


def run(c: psycopg.Connection, query: str, simple: bool) -> psycopg.Cursor:
    """The query on the simple protocol (a Query message) or the extended one
    (Parse/Bind/Execute: psycopg sends a query without parameters as a simple
    Query unless asked for binary results)."""
    return c.execute(query) if simple else c.execute(query, binary=True)


# -- psql ------------------------------------------------------------------------------

def test_psql_train_and_predict(pdsn, conn, points):
    r = psql(pdsn, "-v", "ON_ERROR_STOP=1", script="""
SELECT count(*) AS n FROM points;
SELECT * FROM points TRAIN BY svm WITH max_epoch_num = 3, model_name = 'p1';
SELECT id, label FROM points WHERE id < 3 ORDER BY id PREDICT BY p1;
""")
    assert r.returncode == 0, r.stderr
    # every epoch's NOTICE, and the per-epoch rows
    for e in (1, 2, 3):
        assert f"corgipile: model=p1 epoch={e}/3" in r.stderr
    assert re.search(r"model_name \| epoch \| tuples", r.stdout)
    assert "(3 rows)" in r.stdout
    assert re.search(r"id \| label \| prediction", r.stdout)
    expected = conn.execute("SELECT id, label, corgipile.predict('p1', points) FROM points "
                            "WHERE id < 3 ORDER BY id").fetchall()
    for row in expected:
        assert re.search(rf"^\s*{row[0]} \|\s+{row[1]} \|\s+{row[2]:g}\s*$", r.stdout, re.M), \
            (row, r.stdout)
    assert conn.execute("SELECT count(*) FROM corgipile.models WHERE model_name = 'p1'"
                        ).fetchone()[0] == 1


def test_psql_epochs_arrive_as_they_end(pdsn, conn):
    """Each epoch's NOTICE reaches psql while the training still runs."""
    conn.execute("CREATE TABLE big AS SELECT i AS id, (i % 2) * 2 - 1 AS label, "
                 "ARRAY[(i % 2)::float8, random()] AS features "
                 "FROM generate_series(1, 300000) i")
    proc = subprocess.Popen([str(PSQL), "-X", "-c", "SELECT * FROM big TRAIN BY svm WITH "
                             "max_epoch_num = 40, model_name = 'slow'"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env_for(pdsn))
    assert proc.stderr is not None
    first = proc.stderr.readline()
    running = proc.poll() is None  # 39 epochs to go
    out, err = proc.communicate(timeout=300)
    assert "epoch=1/40" in first, first + err
    assert running, "the first epoch was shown only when the training had ended"
    assert proc.returncode == 0, err
    assert "(40 rows)" in out


def test_psql_on_error_stop_and_position(pdsn, points):
    r = psql(pdsn, "-v", "ON_ERROR_STOP=1", script="""
SELECT 1 AS first;
SELECT * FROM points TRAIN BY svm WITH learning_rate = ;
SELECT 2 AS never;
""")
    assert r.returncode == 3, (r.stdout, r.stderr)
    assert "first" in r.stdout and "never" not in r.stdout
    assert "ERROR:" in r.stderr
    # psql draws the caret from the position the proxy sent
    assert re.search(r"LINE 1: SELECT \* FROM points TRAIN BY svm WITH learning_rate = ;\n"
                     r"\s+\^", r.stderr), r.stderr
    lines = r.stderr.splitlines()
    i = next(k for k, line in enumerate(lines) if line.startswith("LINE 1:"))
    caret = lines[i + 1].index("^") - len("LINE 1: ")
    # where the client's translator (Client.execute) points
    with pytest.raises(StatementError) as e:
        parse_statement("SELECT * FROM points TRAIN BY svm WITH learning_rate = ;")
    assert caret == e.value.position


def test_psql_several_statements_in_one_query(pdsn, model):
    r = psql(pdsn, "-c", "SELECT 'a' AS x; SELECT id FROM points WHERE id = 0 PREDICT BY m1; "
                         "SELECT 'b' AS y")
    assert r.returncode == 0, r.stderr
    assert re.search(r"\bx\b.*\ba\b", r.stdout, re.S)
    assert re.search(r"id \| prediction", r.stdout)
    assert re.search(r"\by\b.*\bb\b", r.stdout, re.S)


def test_psql_refused_statement_runs_no_part_of_the_query(pdsn, conn, model):
    r = psql(pdsn, "-c", "INSERT INTO points VALUES (999, 1, '{0,0,0,0}'); "
                         "SELECT id FROM points PREDICT BY nosuch")
    assert r.returncode == 1
    assert 'model "nosuch" does not exist' in r.stderr
    # like a syntax error anywhere in a query string: nothing ran
    assert conn.execute("SELECT count(*) FROM points WHERE id = 999").fetchone()[0] == 0


# -- psycopg -------------------------------------------------------------------------------

def test_simple_protocol_train_and_predict(pdsn, conn, points):
    with psycopg.connect(pdsn, autocommit=True, cursor_factory=psycopg.ClientCursor) as pc:
        rows = pc.execute("SELECT * FROM points TRAIN BY svm WITH max_epoch_num = 2, "
                          "model_name = 's1', learning_rate = 0.05").fetchall()
        assert [r[1] for r in rows] == [1, 2] and rows[0][0] == "s1"
        cur = pc.execute("SELECT id, label FROM points WHERE id < %s ORDER BY id "
                         "PREDICT BY s1", (5,))
        assert [c.name for c in cur.description] == ["id", "label", "prediction"]
        got = cur.fetchall()
    want = conn.execute("SELECT id, label, corgipile.predict('s1', points) FROM points "
                        "WHERE id < 5 ORDER BY id").fetchall()
    assert got == want
    params = conn.execute("SELECT params FROM corgipile.models WHERE model_name = 's1'"
                          ).fetchone()[0]
    assert float(params["learning_rate"]) == 0.05


def test_extended_protocol_train_and_predict(pconn, conn, points):
    rows = pconn.execute("SELECT * FROM points TRAIN BY logistic WITH max_epoch_num = 2, "
                         "model_name = 'e1'", binary=True).fetchall()
    # the two epochs, and the polish's row (epoch NULL) of a default rate
    assert [r[1] for r in rows] == [1, 2, None]
    # a parameter in the SELECT part: the Parse message keeps its $1
    cur = pconn.execute("SELECT id FROM points WHERE id BETWEEN %s AND %s ORDER BY id "
                        "PREDICT BY e1", (3, 6))
    got = cur.fetchall()
    want = conn.execute("SELECT id, corgipile.predict('e1', points) FROM points "
                        "WHERE id BETWEEN 3 AND 6 ORDER BY id").fetchall()
    assert got == want and len(got) == 4


def test_prepared_statements(pconn, model):
    q = "SELECT id FROM points WHERE id = %s PREDICT BY m1"
    for i in range(7):  # prepared (named Parse) from the 5th execution on
        row = pconn.execute(q, (i,), prepare=True).fetchone()
        assert row is not None and row[0] == i
    assert pconn.execute("SELECT count(*) FROM pg_prepared_statements").fetchone()[0] >= 1
    for i in range(3):
        assert pconn.execute("SELECT %s::int + 1", (i,), prepare=True).fetchone()[0] == i + 1


TRAIN_PARAMS = ("SELECT * FROM points TRAIN BY svm WITH max_epoch_num = {}, "
                "learning_rate = {}, model_name = {}")


def _stored(conn, name: str) -> tuple[str, str] | None:
    row = conn.execute("SELECT params->>'max_epoch_num', params->>'learning_rate' "
                       "FROM corgipile.models WHERE model_name = %s", (name,)).fetchone()
    return None if row is None else (row[0], row[1])


def test_with_values_as_parameters_psycopg(pconn, conn, points):
    """WITH values as $n (psycopg's %s on the extended protocol: Parse with
    $1.., Bind with the values): the rewrite keeps the references, so the
    values bind as the client sent them, prepared (named) or not; a value
    of the wrong type gets the server's own error."""
    q = TRAIN_PARAMS.format("%s", "%s", "%s")
    rows = pconn.execute(q, (2, 0.05, "pp1")).fetchall()
    assert [r[:2] for r in rows] == [("pp1", 1), ("pp1", 2)]
    assert _stored(conn, "pp1") == ("2", "0.05")
    for i, (epochs, rate) in enumerate([(1, 0.02), (3, 0.5)]):
        rows = pconn.execute(q, (epochs, rate, f"pp{i + 2}"), prepare=True).fetchall()
        assert len(rows) == epochs
        assert _stored(conn, f"pp{i + 2}") == (str(epochs), str(rate))
    with pytest.raises(pgerrors.InvalidTextRepresentation, match='"many"'):
        pconn.execute(q, ("many", 0.05, "never"))
    assert _stored(conn, "never") is None
    # the model after TRAIN BY is the statement's, not a parameter
    with pytest.raises(pgerrors.SyntaxError, match="name or a quoted string"):
        pconn.execute("SELECT * FROM points TRAIN BY %s", ("svm",))
    assert pconn.execute("SELECT 1").fetchone() == (1,)


def test_with_values_as_parameters_asyncpg(pdsn, conn, points):
    """asyncpg sends every statement as Parse/Describe, then Bind with
    values encoded for the types the server described: through the proxy
    those are corgipile.train's argument types."""
    asyncpg = pytest.importorskip("asyncpg", reason="asyncpg is in requirements-dev.txt")
    import asyncio

    info = dict(item.split("=", 1) for item in pdsn.split())

    async def main() -> list[list[tuple[str, int]]]:
        c = await asyncpg.connect(host=info["host"], port=int(info["port"]), user=info["user"],
                                  database=info["dbname"])
        try:
            q = TRAIN_PARAMS.format("$1", "$2", "$3")
            out = [[(r["model_name"], r["epoch"]) for r in await c.fetch(q, 2, 0.05, "ap1")]]
            stmt = await c.prepare(q)
            out.append([(r["model_name"], r["epoch"]) for r in await stmt.fetch(1, 0.02, "ap2")])
            with pytest.raises(asyncpg.exceptions.DataError):
                await c.fetch(q, "many", 0.05, "never")  # asyncpg checks the int itself
            return out
        finally:
            await c.close()

    assert asyncio.run(main()) == [[("ap1", 1), ("ap1", 2)], [("ap2", 1)]]
    assert _stored(conn, "ap1") == ("2", "0.05")
    assert _stored(conn, "ap2") == ("1", "0.02")


def test_with_values_as_parameters_node_postgres(pdsn, conn, points):
    """node-postgres (tests/node/train_params.mjs) sends values as text
    with parameter types left to the server, unnamed and named."""
    node = shutil.which("node")
    script = ROOT / "tests" / "node" / "train_params.mjs"
    if node is None or not (ROOT / "tests" / "node" / "node_modules" / "pg").is_dir():
        pytest.skip("needs node and tests/node's packages (scripts/install_deps.sh: npm ci)")
    r = subprocess.run([node, str(script), "points"], env=env_for(pdsn), capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["train"] == [["node_unnamed", 1], ["node_unnamed", 2]]
    assert out["prepared"] == [["node_named", 1], ["node_named", 2], ["node_named", 3]]
    assert out["error"]["code"] == "22P02", out["error"]
    assert _stored(conn, "node_unnamed") == ("2", "0.05")
    assert _stored(conn, "node_named") == ("3", "0.02")
    want = conn.execute("SELECT id, corgipile.predict('node_unnamed', points) FROM points "
                        "WHERE id < 5 ORDER BY id").fetchall()
    assert [tuple(p) for p in out["predict"]] == [(i, float(v)) for i, v in want]


def test_server_side_cursor(pconn):
    with pconn.transaction():
        with pconn.cursor(name="big") as cur:
            cur.itersize = 100
            cur.execute("SELECT i FROM generate_series(1, 5000) i")
            assert sum(r[0] for r in cur) == 5000 * 5001 // 2


def test_copy_both_ways(pconn, conn):
    conn.execute("CREATE TABLE c (i int, t text)")
    n = 30000
    with pconn.cursor() as cur:
        with cur.copy("COPY c FROM STDIN") as cp:
            for i in range(n):
                cp.write_row((i, f"row {i} " + "x" * (i % 50)))
        out = bytearray()
        with cur.copy("COPY c TO STDOUT") as cp:
            for chunk in cp:
                out += chunk
    assert conn.execute("SELECT count(*), sum(i) FROM c").fetchone() == (n, n * (n - 1) // 2)
    lines = bytes(out).decode().splitlines()
    assert len(lines) == n and lines[7] == "7\trow 7 " + "x" * 7


def test_notices_and_parameter_status_pass_through(pconn):
    notices = []
    pconn.add_notice_handler(lambda d: notices.append(d.message_primary))
    pconn.execute("DO $$ BEGIN RAISE NOTICE 'hello %', 42; END $$")
    assert notices == ["hello 42"]
    pconn.execute("SET application_name = 'via-proxy'")
    assert pconn.info.parameter_status("application_name") == "via-proxy"


def test_ssl_request_is_refused_like_a_server_without_tls(pdsn):
    with psycopg.connect(pdsn, sslmode="prefer") as c:  # SSLRequest, then in clear
        assert c.execute("SELECT 1").fetchone() == (1,)
    with pytest.raises(psycopg.OperationalError, match="does not support SSL"):
        psycopg.connect(pdsn, sslmode="require")


# -- errors -----------------------------------------------------------------------------------

TRAIN_ERR = "SELECT * FROM points TRAIN BY svm WITH learning_rate = 0.1, bogus = 2"


@pytest.mark.parametrize("simple", [True, False], ids=["simple", "extended"])
def test_translator_error_is_42601_with_position(pdsn, points, simple):
    factory = psycopg.ClientCursor if simple else psycopg.Cursor
    with psycopg.connect(pdsn, autocommit=True, cursor_factory=factory) as pc:
        with pytest.raises(pgerrors.SyntaxError) as e:
            run(pc, TRAIN_ERR, simple)
        diag = e.value.diag
        assert diag.sqlstate == "42601"
        assert diag.severity == "ERROR"
        assert "bogus" in diag.message_primary
        assert int(diag.statement_position) == TRAIN_ERR.index("bogus") + 1
        assert "learning_rate" in (diag.message_hint or "")
        # a translator error from the scanner, too
        with pytest.raises(pgerrors.SyntaxError) as e:
            run(pc, "SELECT * FROM points TRAIN BY", simple)
        assert int(e.value.diag.statement_position) == len("SELECT * FROM points TRAIN BY") + 1
        assert pc.info.transaction_status == TransactionStatus.IDLE
        assert run(pc, "SELECT 41 + 1", simple).fetchone() == (42,)


@pytest.mark.parametrize("simple", [True, False], ids=["simple", "extended"])
def test_error_inside_a_transaction_block(pdsn, conn, points, simple):
    factory = psycopg.ClientCursor if simple else psycopg.Cursor
    with psycopg.connect(pdsn, cursor_factory=factory) as pc:  # not autocommit
        pc.execute("CREATE TABLE keep (i int)")
        pc.execute("INSERT INTO keep VALUES (1)")
        with pytest.raises(pgerrors.SyntaxError):
            run(pc, TRAIN_ERR, simple)
        # the server's own state: the block is aborted, as after any error
        assert pc.info.transaction_status == TransactionStatus.INERROR
        with pytest.raises(pgerrors.InFailedSqlTransaction):
            run(pc, "SELECT 1", simple)
        pc.rollback()
        assert run(pc, "SELECT 1", simple).fetchone() == (1,)
        pc.commit()
    assert conn.execute("SELECT to_regclass('keep')").fetchone() == (None,)


@pytest.mark.parametrize("simple", [True, False], ids=["simple", "extended"])
def test_lookup_in_failed_transaction_gives_the_server_error(pdsn, model, simple):
    with psycopg.connect(pdsn) as pc:
        with pytest.raises(pgerrors.DivisionByZero):
            run(pc, "SELECT 1 / 0", simple)
        with pytest.raises(pgerrors.InFailedSqlTransaction):
            run(pc, "SELECT id FROM points PREDICT BY m1", simple)
        pc.rollback()
        assert len(run(pc, "SELECT id FROM points PREDICT BY m1", simple).fetchall()) == 600


def test_missing_model_and_where_clause(pconn, model):
    q = "SELECT id FROM points PREDICT BY nosuch"
    with pytest.raises(pgerrors.UndefinedObject) as e:
        pconn.execute(q)
    assert int(e.value.diag.statement_position) == q.index("nosuch") + 1
    # TRAIN BY ... WHERE: on the simple protocol only (the copy of the rows
    # is made before, and dropped after, the client's query; see
    # test_predict_anywhere.py); a Parse message is refused
    with pytest.raises(pgerrors.FeatureNotSupported) as e:
        pconn.execute("SELECT * FROM points WHERE id > 3 TRAIN BY svm", binary=True)
    assert "WHERE" in e.value.diag.message_primary
    assert pconn.execute("SELECT count(*) FROM points").fetchone() == (600,)


def test_server_errors_of_rewritten_statements_pass_through(pconn, points):
    with pytest.raises(pgerrors.InvalidTextRepresentation):
        pconn.execute("SELECT * FROM points TRAIN BY svm WITH max_epoch_num = 'many'")
    with pytest.raises(pgerrors.UndefinedTable):
        pconn.execute("SELECT * FROM nothere TRAIN BY svm")
    assert pconn.execute("SELECT 1").fetchone() == (1,)


def test_pipeline_mode(pconn, model):
    """A TRAIN BY / PREDICT BY that begins a batch works in a pipeline (the
    proxy waits for the earlier batches' answers); one in the middle of an
    unsynced batch is refused (0A000), which aborts that batch as any error
    does, and the connection goes on."""
    with pconn.pipeline() as p:
        c0 = pconn.execute("SELECT 0")
        p.sync()
        c1 = pconn.execute("SELECT id FROM points WHERE id = 1 PREDICT BY m1")
        c2 = pconn.execute("SELECT %s::int", (2,))
        p.sync()
        assert c0.fetchone() == (0,)
        assert c1.fetchone()[0] == 1
        assert c2.fetchone() == (2,)
    with pytest.raises(pgerrors.FeatureNotSupported, match="new extended-protocol batch"):
        with pconn.pipeline():
            pconn.execute("SELECT 1")
            pconn.execute("SELECT id FROM points WHERE id = 1 PREDICT BY m1")
    assert pconn.execute("SELECT 2").fetchone() == (2,)


# -- cancel ------------------------------------------------------------------------------------

@pytest.mark.parametrize("how", ["cancel", "cancel_safe"])
def test_cancel_stops_a_training(pdsn, conn, how):
    conn.execute("CREATE TABLE big AS SELECT i AS id, (i % 2) * 2 - 1 AS label, "
                 "ARRAY[(i % 2)::float8, random()] AS features "
                 "FROM generate_series(1, 100000) i")
    with psycopg.connect(pdsn, autocommit=True) as pc:
        epochs = []
        first_epoch = threading.Event()

        def on_notice(d: psycopg.errors.Diagnostic) -> None:
            epochs.append(d.message_primary)
            first_epoch.set()

        pc.add_notice_handler(on_notice)
        # cancel once the first epoch's NOTICE is in: the training runs
        canceller = threading.Thread(target=lambda: first_epoch.wait() and getattr(pc, how)())
        canceller.start()
        try:
            with pytest.raises(pgerrors.QueryCanceled):
                pc.execute("SELECT * FROM big TRAIN BY svm WITH max_epoch_num = 100000, "
                           "model_name = 'never'")
        finally:
            first_epoch.set()  # a failed execute: the thread ends all the same
            canceller.join()
        assert epochs, "no epoch ran before the cancel"
        assert pc.execute("SELECT 1").fetchone() == (1,)
    assert conn.execute("SELECT count(*) FROM corgipile.models WHERE model_name = 'never'"
                        ).fetchone() == (0,)


def test_psql_ctrl_c_stops_a_training(pdsn, conn):
    """psql sends a CancelRequest on SIGINT; through the proxy it reaches the
    server, which stops the training."""
    import signal

    conn.execute("CREATE TABLE big AS SELECT i AS id, (i % 2) * 2 - 1 AS label, "
                 "ARRAY[(i % 2)::float8, random()] AS features "
                 "FROM generate_series(1, 100000) i")
    proc = subprocess.Popen([str(PSQL), "-X", "-c", "SELECT * FROM big TRAIN BY svm WITH "
                             "max_epoch_num = 100000, model_name = 'never'"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env_for(pdsn))
    assert proc.stderr is not None
    first = proc.stderr.readline()  # an epoch has ended: the training runs
    assert "epoch=1/100000" in first, first
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert "canceling statement due to user request" in err
    assert proc.returncode == 1
    assert conn.execute("SELECT count(*) FROM corgipile.models WHERE model_name = 'never'"
                        ).fetchone() == (0,)


def test_cancel_from_a_client_that_closes_right_after_sending_it(proxy, pdsn):
    """A CancelRequest whose client closes its socket at once, without
    waiting for the proxy to close it (libpq waits, other clients do not):
    the proxy still forwards it, and the statement it names is cancelled."""
    info = dict(item.split("=", 1) for item in pdsn.split())
    w = Wire.login(proxy.port, info["user"], info["dbname"], host=proxy.host)
    w.sock.sendall(msg(b"Q", b"DO $$BEGIN RAISE NOTICE 'sleeping'; "
                             b"PERFORM pg_sleep(600); END$$\0"))
    w.until(b"N")  # the statement runs
    c = socket.create_connection((proxy.host, proxy.port))
    c.sendall(cancel_request(w.backend_key))
    c.close()
    answer = w.until(b"Z")  # (w's socket timeout ends the test if it never comes)
    errors = [fields(body) for kind, body in answer if kind == b"E"]
    assert errors and errors[0]["C"] == "57014", answer  # query_canceled
    assert "canceling statement due to user request" in errors[0]["M"]
    w.close()


def test_startup_packet_with_user_twice_names_the_user_the_server_uses(proxy, pdsn):
    """The server takes the last "user" of a startup packet: the session it
    admits (session_authorization), the proxy's refusal and its log all
    name that one, not the first."""
    info = dict(item.split("=", 1) for item in pdsn.split())
    pairs = (("user", "someone_else"), ("database", info["dbname"]), ("user", info["user"]))
    # through a proxy that lets the session in: whom the server admitted
    w = Wire(proxy.port, *pairs, host=proxy.host)
    status = {body.split(b"\0")[0]: body.split(b"\0")[1] for kind, body in w.until(b"Z")
              if kind == b"S"}
    assert status[b"session_authorization"] == info["user"].encode()
    w.close()
    # the test cluster trusts local connections: the proxy as shipped refuses
    strict = Proxy(f"host={os.environ['PGHOST']} port={os.environ['PGPORT']}",
                   flags=["--allow-unix-socket-upstream"])
    try:
        w = Wire(strict.port, *pairs, host=strict.host)
        kind, body = w.read()
        assert kind == b"E"
        error = fields(body)
        assert error["C"] == "28000"
        assert f'admitted user "{info["user"]}" without asking' in error["M"], error
        assert "someone_else" not in error["M"]
        w.close()
    finally:
        log = strict.stop()
    assert f'refused a session for user "{info["user"]}"' in log, log
    assert "someone_else" not in log


# -- hostile input -------------------------------------------------------------------------------

def _raw(proxy: Proxy) -> socket.socket:
    # the timeout only ends a failing test (a connection never closed)
    return socket.create_connection((proxy.host, proxy.port), timeout=120)


def _closed(s: socket.socket) -> bool:
    """Whether the proxy closes s (it is read until it does)."""
    try:
        while True:
            data = s.recv(65536)
            if not data:
                return True
    except (ConnectionResetError, BrokenPipeError):
        return True
    except TimeoutError:
        return False


def _login(proxy: Proxy, dsn: str) -> socket.socket:
    """A raw session through the proxy, past its ReadyForQuery."""
    info = dict(item.split("=", 1) for item in dsn.split())
    return Wire.login(proxy.port, info["user"], info["dbname"], host=proxy.host).sock


@pytest.mark.parametrize("payload", [
    b"\x00\x00\x00\x02garbage",                      # startup length below 8
    b"\x7f\xff\xff\xff" + b"\x00" * 12,               # huge startup length
    b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03",  # a TLS ClientHello
], ids=["short", "huge", "tls"])
def test_garbage_before_startup_closes_only_that_connection(proxy, pconn, payload):
    s = _raw(proxy)
    s.sendall(payload)
    assert _closed(s)
    s.close()
    assert pconn.execute("SELECT 1").fetchone() == (1,)


@pytest.mark.parametrize("frame", [
    b"Q\x7f\xff\xff\xff",              # huge length
    b"Q\x00\x00\x00\x02",              # length below 4
    b"Q\xff\xff\xff\xf0SELECT 1\0",     # negative length
    b"X\x00\x00\x00\x00",              # any type: the length is checked for all
], ids=["huge", "short", "negative", "zero"])
def test_bad_frames_close_only_that_connection(proxy, pdsn, pconn, frame):
    s = _login(proxy, pdsn)
    s.sendall(frame)
    assert _closed(s)
    s.close()
    assert pconn.execute("SELECT 1").fetchone() == (1,)


def test_malformed_parse_with_train_by_closes_the_connection(proxy, pdsn, pconn):
    s = _login(proxy, pdsn)
    body = b"SELECT * FROM t TRAIN BY svm"  # no NULs: not a Parse body
    s.sendall(b"P" + struct.pack("!i", len(body) + 4) + body)
    assert _closed(s)
    s.close()
    assert pconn.execute("SELECT 1").fetchone() == (1,)


def test_random_bytes_after_startup(proxy, pdsn, pconn):
    import random

    rng = random.Random(7)
    for _ in range(20):
        s = _login(proxy, pdsn)
        s.sendall(bytes(rng.randrange(256) for _ in range(rng.randrange(1, 300))))
        s.close()
    assert pconn.execute("SELECT 1").fetchone() == (1,)


def test_upstream_down(dsn):
    p = Proxy("host=127.0.0.1 port=1")
    try:
        with pytest.raises(psycopg.OperationalError, match="could not connect to the server"):
            psycopg.connect(dsn_with(dsn, host=p.host, port=str(p.port)), connect_timeout=10)
        assert p.alive()
    finally:
        p.stop()


# -- load -----------------------------------------------------------------------------------------

def test_twenty_clients_at_once(pdsn, model):
    errors: list[BaseException] = []
    barrier = threading.Barrier(20)

    def work(k: int) -> None:
        try:
            with psycopg.connect(pdsn, autocommit=True) as c:
                barrier.wait(timeout=60)
                for i in range(10):
                    assert c.execute("SELECT %s::int * 2", (k,)).fetchone() == (2 * k,)
                    row = c.execute("SELECT id FROM points WHERE id = %s PREDICT BY m1",
                                    ((k * 10 + i) % 600,)).fetchone()
                    assert row[0] == (k * 10 + i) % 600
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(20)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not errors, errors


def test_pgbench_through_the_proxy(pdsn, dsn):
    direct = env_for(dsn)
    subprocess.run([str(PGBENCH), "-i", "-s", "1", "-q"], env=direct, check=True,
                   capture_output=True, timeout=120)
    for mode in ("simple", "extended", "prepared"):
        r = subprocess.run([str(PGBENCH), "-n", "-S", "-M", mode, "-c", "4", "-j", "2",
                            "-t", "250"], env=env_for(pdsn), capture_output=True, text=True,
                           timeout=300)
        assert r.returncode == 0, r.stderr
        assert re.search(r"number of transactions actually processed: 1000/1000\b",
                         r.stdout), r.stdout
        assert re.search(r"number of failed transactions: 0\b", r.stdout), r.stdout


def test_workers_share_one_port_and_end_together(dsn, points):
    upstream = f"host={os.environ['PGHOST']} port={os.environ['PGPORT']}"
    env = dict(os.environ, PYTHONPATH=str(CLIENT))
    proc = subprocess.Popen(
        [sys.executable, "-P", "-m", "corgipile", "proxy", "--listen", "127.0.0.1:0",
         "--upstream", upstream, "--workers", "3", *TRUSTING],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    pidfds = []
    try:
        assert proc.stdout is not None
        port = re.search(r"listening on [\d.]+:(\d+)", proc.stdout.readline()).group(1)
        children = subprocess.run(["pgrep", "-P", str(proc.pid)], capture_output=True,
                                  text=True).stdout.split()
        assert len(children) == 3
        # a pidfd becomes readable when its process ends (and names that
        # process even if its pid is reused)
        pidfds = [os.pidfd_open(int(pid)) for pid in children]
        for _ in range(12):
            with psycopg.connect(dsn_with(dsn, host="127.0.0.1", port=port)) as c:
                assert c.execute("SELECT count(*) FROM points").fetchone() == (600,)
    finally:
        proc.terminate()
        proc.communicate(timeout=30)  # and close its pipes
    # SIGTERM to the parent ends every worker
    try:
        for fd in pidfds:
            select.select([fd], [], [])
    finally:
        for fd in pidfds:
            os.close(fd)


# -- framing -------------------------------------------------------------------------------------

@pytest.mark.parametrize("size", [1, 2, 3, 4, 5, 7, 4096, 1 << 20])
def test_relay_across_any_chunking(size):
    """The pass-through path of both directions (ProxySession.pump_client,
    from_server) with the streams cut into reads of every size, a header
    split in two included: every byte is passed on, in order; each Query
    and Sync the server answers is counted, and each ReadyForQuery; a Query
    whose text holds TRAIN BY stops the client side in front of it, and
    words that only contain train / predict do not."""
    import asyncio

    from corgipile.proxy.session import ProxySession
    from corgipile.proxy.upstream import Upstream

    big = b"SELECT '" + b"x" * 70000 + b"'\0"  # held whole to be searched
    passed = [msg(b"Q", b"SELECT 1\0"), msg(b"Q", b"SELECT predictor, trained FROM t\0"),
              msg(b"P", b"\0SELECT $1 -- Train_BY\0\0\0"), msg(b"B", b"\0\0" + b"\0" * 6),
              msg(b"E", b"\0\0\0\0\0"), msg(b"S", b""), msg(b"Q", big),
              msg(b"d", b"y" * 70000)]
    stop = msg(b"Q", b"select * FROM t train\n by svm\0")
    client_stream = b"".join(passed) + stop + msg(b"Q", b"SELECT 2\0")
    server_stream = b"".join([msg(b"T", b"x" * 30), msg(b"D", b"Z" * 70000),
                              msg(b"C", b"SELECT 1\0"), msg(b"Z", b"I"), msg(b"N", b"Z" * 3),
                              msg(b"Z", b"I"), msg(b"Z", b"I"), msg(b"Z", b"I")])

    async def main() -> None:
        client, server = NullTransport(), NullTransport()
        s = ProxySession(Upstream("127.0.0.1", 1), client, set())  # type: ignore[arg-type]
        s.state, s.ready, s.server = "running", True, server  # type: ignore[assignment]
        held: list[bytes] = []
        s.rewrite = lambda frame: frame  # type: ignore[method-assign, assignment]
        s.spawn = held.append  # type: ignore[method-assign, assignment]
        for k in range(0, len(client_stream), size):
            if not held:
                s.from_client(client_stream[k:k + size])
            else:
                s.cbuf += client_stream[k:k + size]  # what arrives during a rewrite
        assert bytes(server.out) == b"".join(passed)
        assert held == [stop]
        assert bytes(s.cbuf) == msg(b"Q", b"SELECT 2\0")
        assert s.syncs_sent == 4  # three Queries and a Sync
        for k in range(0, len(server_stream), size):
            s.from_server(server_stream[k:k + size])
        assert bytes(client.out) == server_stream
        assert s.syncs_done == 4 and not s.shold and s.sremaining == 0
        s.close()

    asyncio.run(main())


def test_quick_check_never_misses_a_word():
    """may_rewrite lets through every text with train / predict as a word,
    in any case, next to any character that ends a word, and nothing else
    of these."""
    from corgipile.proxy.analysis import may_rewrite

    for word in (b"train", b"TRAIN", b"Train", b"pReDiCt", b"PREDICT"):
        for before, after in ((b" ", b" "), (b"(", b")"), (b"\n", b"\t"), (b'"', b'"'),
                              (b"*/", b"/*"), (b"'", b";"), (b"-", b"-")):
            text = b"SELECT * FROM t" + before + word + after + b"BY x"
            assert may_rewrite(text, 0, len(text)), text
            text = word + after + b"BY x"  # at the very start and end
            assert may_rewrite(text, 0, len(text)), text
    for text in (b"SELECT trained, predictor, retrain, _train, train_, $train, train1, "
                 b"pr\xc3\xa9dict, train\xc3\xa9, predicts FROM t", b"SELECT 1"):
        assert not may_rewrite(text, 0, len(text)), text
    assert may_rewrite(b"train", 0, 5)
    # only the given range is read, within a buffer of about its size or
    # a much larger one
    text = b"train SELECT 1 predict"
    assert not may_rewrite(text, 5, len(text) - 7)
    pad = b"predict " * 20
    assert not may_rewrite(pad + b"SELECT 1" + pad, len(pad), len(pad) + 8)
    assert may_rewrite(pad + b"SELECT train" + pad, len(pad), len(pad) + 12)
    assert not may_rewrite(pad + b"SELECT trains" + pad, len(pad), len(pad) + 13)


def test_database_without_the_extension(pconn, conn):
    conn.execute("CREATE TABLE t (label int, features float8[])")
    conn.execute("DROP EXTENSION corgipile")
    with pytest.raises(pgerrors.UndefinedObject, match="not installed"):
        pconn.execute("SELECT * FROM t TRAIN BY svm")
    # the lookup's own error, without a position into the lookup's text
    with pytest.raises(pgerrors.UndefinedTable) as e:
        pconn.execute("SELECT label FROM t PREDICT BY m")
    assert "corgipile.models" in e.value.diag.message_primary
    assert e.value.diag.statement_position is None
    assert pconn.execute("SELECT 1").fetchone() == (1,)


@pytest.mark.parametrize("simple", [True, False], ids=["simple", "extended"])
def test_server_error_positions_point_into_the_clients_text(pdsn, model, simple):
    factory = psycopg.ClientCursor if simple else psycopg.Cursor
    with psycopg.connect(pdsn, autocommit=True, cursor_factory=factory) as pc:
        for q, word in [
                ("SELECT id FROM points WHERE nosuch > 1 PREDICT BY m1", "nosuch"),
                ("SELECT nosuch FROM points PREDICT BY m1", "nosuch"),
                ("SELECT 1; SELECT id FROM points WHERE id = 'x' PREDICT BY m1", "'x'"),
                ("SELECT * FROM points TRAIN BY svm WITH label = 'nosuch'", None)]:
            if not simple and q.startswith("SELECT 1;"):
                continue  # one statement per Parse message
            with pytest.raises(psycopg.Error) as e:
                run(pc, q, simple)
            position = e.value.diag.statement_position
            if word is None:  # a runtime error of corgipile.train: no position
                assert position is None or 1 <= int(position) <= len(q)
            else:
                assert int(position) == q.index(word) + 1, (q, e.value)
        assert run(pc, "SELECT 1", simple).fetchone() == (1,)


@pytest.mark.parametrize("query, direct", [
    ("SELECT id FROM points WHERE id % 100 = 0 ORDER BY id PREDICT BY m1",
     "SELECT id, corgipile.predict('m1', points) FROM points WHERE id % 100 = 0 ORDER BY id"),
    ("SELECT * FROM points AS p WHERE p.id < 3 ORDER BY p.id PREDICT BY 'm1'",
     "SELECT *, corgipile.predict('m1', p) FROM points AS p WHERE p.id < 3 ORDER BY p.id"),
    ("SELECT id, 'a%%b' AS t -- PREDICT BY nothing\nFROM points WHERE id = 4 PREDICT BY m1",
     "SELECT id, 'a%%b', corgipile.predict('m1', points) FROM points WHERE id = 4"),
])
def test_predict_by_keeps_the_select(pconn, conn, model, query, direct):
    cur = pconn.execute(query)
    assert cur.description[-1].name == "prediction"
    assert cur.fetchall() == conn.execute(direct).fetchall()
