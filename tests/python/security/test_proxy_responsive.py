"""One client cannot stall corgipile proxy for the others (nor a COPY/Sync
exchange hang it), replayed at sizes that take seconds.

- a query text that is slow to analyse (made slow by a test hook) is
  analysed off the event loop: another client's SELECT 1 is answered
  while it runs, and --analysis-timeout ends it with SQLSTATE 54000;
- the answers to a rewritten statement (read message by message) pass on
  as they arrive, nothing held but a header (a 20 MB row);
- --startup-timeout closes connections that never finish their startup,
  and --max-connections refuses one connection too many with 53300;
- a Sync inside COPY IN (the server ignores it) followed by TRAIN BY no
  longer hangs the connection;
- a client that leaves while its statement runs gets it cancelled.

The proxy runs as a subprocess in front of the test cluster, which trusts
local connections (so --unsafe-allow-passwordless; authentication is
test_proxy_auth.py's subject). No test depends on a wall-clock threshold:
they wait on events (a file the analysis hook writes, a NOTICE, an
advisory lock coming free) and compare their order.
"""

from __future__ import annotations

import os
import re
import socket
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

CLIENT = Path(__file__).resolve().parents[3] / "python_client"
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from pgwire import NullTransport, Wire, msg  # noqa: E402

# sitecustomize.py there makes a marked text slow to analyse
SLOW_ANALYSIS = Path(__file__).resolve().parent / "slow_analysis"


class Proxy:
    def __init__(self, *args: str, slow_analysis: bool = False,
                 env: dict[str, str] | None = None) -> None:
        path = [str(SLOW_ANALYSIS)] if slow_analysis else []
        env = dict(os.environ, **(env or {}),
                   PYTHONPATH=os.pathsep.join([*path, str(CLIENT)]))
        self.proc = subprocess.Popen(
            [sys.executable, "-P", "-m", "corgipile", "proxy", "--listen", "127.0.0.1:0",
             "--upstream", f"host={os.environ['PGHOST']} port={os.environ['PGPORT']}",
             "--unsafe-allow-passwordless", "--allow-unix-socket-upstream", *args],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        line = self.proc.stdout.readline()  # type: ignore[union-attr]
        m = re.search(r"listening on ([\d.]+):(\d+)", line)
        if not m:
            self.proc.kill()
            raise RuntimeError(f"the proxy did not start: {line!r}")
        self.port = int(m.group(2))

    def dsn(self, dsn: str) -> str:
        return f"{dsn} host=127.0.0.1 port={self.port}"

    def stop(self) -> str:
        assert self.proc.poll() is None, "the proxy died"
        self.proc.terminate()
        _, err = self.proc.communicate(timeout=30)
        assert "Traceback" not in err, err
        return err


@pytest.fixture
def start_proxy() -> Iterator:
    started: list[Proxy] = []

    def start(*args: str, slow_analysis: bool = False,
              env: dict[str, str] | None = None) -> Proxy:
        p = Proxy(*args, slow_analysis=slow_analysis, env=env)
        started.append(p)
        return p

    yield start
    for p in started:
        p.stop()


@pytest.fixture
def model(conn) -> str:
    conn.execute("CREATE TABLE pts (label int, features float8[])")
    conn.execute("INSERT INTO pts SELECT CASE WHEN i % 2 = 0 THEN 1 ELSE -1 END, "
                 "ARRAY[i % 7, i % 5]::float8[] FROM generate_series(1, 200) i")
    conn.execute("SELECT count(*) FROM corgipile.train('pts', 'svm', model_name => 'm', "
                 "max_epoch_num => 1)")
    return "m"


# -- analysis off the event loop -----------------------------------------------------------------

def test_slow_analysis_does_not_stall_other_clients(dsn, conn, model, start_proxy, tmp_path):
    """A query text too long to analyse on the event loop whose analysis
    takes 60 s (a test hook: slow_analysis/sitecustomize.py): another
    client's SELECT 1 is answered while it is analysed, and the analysis
    timeout refuses it with 54000; the proxy serves on."""
    started = tmp_path / "analysis-started"
    proxy = start_proxy("--analysis-timeout", "3", slow_analysis=True,
                        env={"CORGIPILE_TEST_ANALYSIS_STARTED": str(started)})
    text = "/* test: analysis takes 60 s */\n" + "SELECT * FROM pts TRAIN BY svm;\n" * 500
    assert len(text.encode()) > 4096  # analysed by the pool, not on the loop
    answered: list[str] = []  # which client got its answer first
    errors: dict[str, Exception] = {}

    def slow() -> None:
        try:
            with psycopg.connect(proxy.dsn(dsn), autocommit=True) as c:
                c.execute(text)
        except Exception as e:  # noqa: BLE001 - looked at below
            errors["slow"] = e
        answered.append("slow")

    with psycopg.connect(proxy.dsn(dsn), autocommit=True) as other:
        t = threading.Thread(target=slow)
        t.start()
        # the hook writes the file when the analysis of the slow text starts
        while not started.exists():
            assert t.is_alive(), errors
            time.sleep(0.01)
        assert other.execute("SELECT 1").fetchone() == (1,)
        answered.append("other")
        t.join()
    # with the event loop blocked by the analysis, the slow client's error
    # would have come first (the SELECT 1 waiting behind it)
    assert answered == ["other", "slow"], (answered, errors)
    err = errors.get("slow")
    assert isinstance(err, psycopg.Error) and err.sqlstate == "54000", err
    assert "took longer than 3 s" in str(err)
    # the next TRAIN BY on a fresh pool works
    with psycopg.connect(proxy.dsn(dsn), autocommit=True) as c:
        rows = c.execute("SELECT * FROM pts TRAIN BY svm WITH max_epoch_num = 1, "
                         "model_name = 'after'").fetchall()
        assert len(rows) == 1


def test_long_text_analysed_in_a_worker(dsn, conn, model, start_proxy):
    """A PREDICT BY longer than the inline limit (a long IN list) is
    rewritten all the same, by the worker process."""
    proxy = start_proxy()
    ids = ", ".join(str(i) for i in range(-1500, 1500))
    with psycopg.connect(proxy.dsn(dsn), autocommit=True) as c:
        rows = c.execute(f"SELECT label FROM pts WHERE label IN ({ids}) PREDICT BY m").fetchall()
    assert len(rows) == 200 and {r[1] for r in rows} <= {-1.0, 1.0}


# -- linear relaying -------------------------------------------------------------------------

def test_rewritten_answers_stream_through():
    """The server's answers to a rewritten statement (read message by
    message, for the error positions) pass on as they arrive: of a 20 MB
    row, everything but at most a message header is forwarded after each
    64 kB read, and nothing is held whole but ErrorResponse, ReadyForQuery
    and CopyInResponse. The proxy held every message whole before and
    copied what it held on each read (a 50 MB row took 31 s instead of 1)."""
    import asyncio

    from corgipile.proxy.session import ProxySession
    from corgipile.proxy.upstream import Upstream

    n = 20_000_000
    stream = (msg(b"T", b"\0\x01payload\0" + b"\0" * 18)
              + msg(b"D", struct.pack("!hi", 1, n) + b"x" * n)
              + msg(b"C", b"SELECT 1\0") + msg(b"Z", b"I"))

    async def main() -> None:
        client, server = NullTransport(), NullTransport()
        s = ProxySession(Upstream("127.0.0.1", 1), client, set())  # type: ignore[arg-type]
        s.state, s.ready, s.server = "running", True, server  # type: ignore[assignment]
        s.syncs_sent = 1
        s.remaps.append((1, [(0, 10, 0, True)]))  # a rewritten statement in flight
        fed = 0
        for k in range(0, len(stream), 65536):
            chunk = stream[k:k + 65536]
            s.from_server(chunk)
            fed += len(chunk)
            assert len(s.shold) < 64, len(s.shold)
            assert len(client.out) == fed - len(s.shold)
        assert bytes(client.out) == stream
        assert s.remaps == [] and s.syncs_done == 1
        s.close()

    asyncio.run(main())


# -- startup timeout and connection cap --------------------------------------------------------

def test_startup_timeout_and_connection_cap(dsn, conn, start_proxy):
    """Sockets that send 4 bytes and wait (the issue's lock-out): the sixth
    client gets 53300 "too many clients"; once the idle ones time out,
    clients connect again."""
    proxy = start_proxy("--max-connections", "5", "--startup-timeout", "3")
    idle = [socket.create_connection(("127.0.0.1", proxy.port)) for _ in range(5)]
    for s in idle:
        # an SSLRequest, answered "N" by the session the proxy made for
        # this connection when it accepted it: then it counts
        s.sendall(struct.pack("!ii", 8, 80877103))
        assert s.recv(1) == b"N"
        s.sendall(b"\0\0\0\x08")
    with pytest.raises(psycopg.OperationalError) as info:
        psycopg.connect(proxy.dsn(dsn), connect_timeout=10)
    assert "too many clients" in str(info.value) and "--max-connections 5" in str(info.value)
    # the idle ones are closed with a FATAL error once the startup timeout passes
    for s in idle:
        s.settimeout(60)
        data = b""
        while chunk := s.recv(4096):
            data += chunk
        assert data[:1] == b"E" and b"did not finish within 3 s" in data, data
        s.close()
    with psycopg.connect(proxy.dsn(dsn), autocommit=True) as c:
        assert c.execute("SELECT 1").fetchone() == (1,)


# -- COPY IN with a Sync inside ------------------------------------------------------------------

def test_sync_inside_copy_in_then_train_by(dsn, conn, start_proxy):
    """libpq's extended-protocol COPY: Parse/Bind/Execute/Sync, CopyData,
    CopyDone, Sync. The server ignores the first Sync (it arrives in copy-in
    mode): the proxy must not wait for its ReadyForQuery before the TRAIN BY
    that follows (it hung before)."""
    proxy = start_proxy()
    conn.execute("CREATE TABLE pts (label int, features float8[])")
    info = conn.info
    w = Wire.login(proxy.port, info.user, info.dbname)
    w.sock.sendall(msg(b"P", b"\0COPY pts FROM STDIN\0\0\0") + msg(b"B", b"\0\0" + b"\0\0" * 3)
                   + msg(b"E", b"\0\0\0\0\0") + msg(b"S", b""))
    w.until(b"G")  # CopyInResponse
    rows = "".join(f"{1 if i % 2 else -1}\t{{{i % 7},{i % 3}}}\n" for i in range(100))
    w.sock.sendall(msg(b"d", rows.encode()) + msg(b"c", b"") + msg(b"S", b""))
    answer = w.until(b"Z")
    assert any(k == b"C" and body.startswith(b"COPY 100") for k, body in answer), answer
    w.sock.sendall(msg(b"Q", b"SELECT * FROM pts TRAIN BY svm WITH max_epoch_num = 1\0"))
    answer = w.until(b"Z")
    kinds = [k for k, _ in answer]
    assert b"E" not in kinds, answer
    assert any(k == b"C" and body.startswith(b"SELECT 1") for k, body in answer), answer
    # and a CopyFail in the middle of the copy, then TRAIN BY
    w.sock.sendall(msg(b"P", b"\0COPY pts FROM STDIN\0\0\0") + msg(b"B", b"\0\0" + b"\0\0" * 3)
                   + msg(b"E", b"\0\0\0\0\0") + msg(b"S", b""))
    w.until(b"G")
    w.sock.sendall(msg(b"d", b"1\t{1,2}\n") + msg(b"f", b"stop\0") + msg(b"S", b""))
    answer = w.until(b"Z")
    assert any(k == b"E" for k, _ in answer)
    w.sock.sendall(msg(b"Q", b"SELECT * FROM pts TRAIN BY svm WITH max_epoch_num = 1\0"))
    answer = w.until(b"Z")
    assert any(k == b"C" and body.startswith(b"SELECT 1") for k, body in answer), answer
    w.sock.close()


# -- a client that leaves mid-statement -----------------------------------------------------------

def test_client_leaving_cancels_its_statement(dsn, conn, start_proxy):
    """The client's socket closes while pg_sleep(600) runs: the proxy sends
    the server a CancelRequest, so the backend ends now rather than in ten
    minutes."""
    proxy = start_proxy()
    info = conn.info
    w = Wire.login(proxy.port, info.user, info.dbname)
    lock = 4242_4242  # held by the statement's session until its backend exits
    w.sock.sendall(msg(b"Q", f"DO $$BEGIN PERFORM pg_advisory_lock({lock}); "
                            "RAISE NOTICE 'sleeping'; PERFORM pg_sleep(600); END$$\0".encode()))
    w.until(b"N")  # the statement runs
    w.sock.close()
    # the lock comes free when the cancelled backend has gone (the proxy
    # closed its connection); lock_timeout only ends a failing test
    # before pg_sleep would
    conn.execute("SET lock_timeout = '300s'")
    conn.execute("SELECT pg_advisory_lock(%s)", (lock,))
    conn.execute("SELECT pg_advisory_unlock(%s)", (lock,))
