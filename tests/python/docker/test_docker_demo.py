"""scripts/demo.py, the client image's default command: its connection
retry while the database is not there yet (compose implementations that
ignore `service_healthy` start it during the database's first start), run
against a real server started on a data directory made with initdb."""

from __future__ import annotations

import importlib.util
import subprocess
import sys

import psycopg
import pytest

from docker_helpers import OWNER, ROOT, Server, free_port


@pytest.fixture
def demo():
    """scripts/demo.py as a module (it is a script, not a package)."""
    spec = importlib.util.spec_from_file_location("corgipile_demo", ROOT / "scripts" / "demo.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_demo_waits_for_a_server_that_starts_later(pgdata, demo, monkeypatch, capsys):
    # The first attempt finds nothing on the port; the server is started in
    # place of the first pause between attempts, so the order is fixed and
    # nothing depends on timing.
    server = Server(pgdata)
    pauses = []

    def pause(seconds):
        pauses.append(seconds)
        if len(pauses) == 1:
            server.start(listen="127.0.0.1")

    monkeypatch.setattr(demo.time, "sleep", pause)
    dsn = f"host=127.0.0.1 port={server.port} user={OWNER} dbname=postgres"
    try:
        with demo.connect(dsn, wait=60) as conn:
            assert conn.execute("SELECT 1").fetchone() == (1,)
            assert conn.autocommit
    finally:
        server.stop()
    assert len(pauses) == 1 and 0 < pauses[0] <= 2
    assert "Waiting for the database (up to 60 s)" in capsys.readouterr().out


def test_demo_gives_up_after_the_wait_with_a_clear_message(demo, monkeypatch):
    pauses = []
    monkeypatch.setattr(demo.time, "sleep", pauses.append)
    clock = iter(range(0, 1000, 5))  # each look at the clock: 5 s later
    monkeypatch.setattr(demo.time, "monotonic", lambda: next(clock))
    dsn = f"host=127.0.0.1 port={free_port()} user={OWNER} dbname=postgres"
    with pytest.raises(SystemExit) as stop:
        demo.connect(dsn, wait=30)
    message = str(stop.value)
    assert message.startswith("demo: could not connect to the database in 30 s (")
    assert "Is the server running" in message and "--wait" in message
    assert 1 <= len(pauses) <= 6  # bounded: a 30 s wait at 5 s per attempt


def test_demo_does_not_retry_what_waiting_cannot_fix(pgdata, demo, monkeypatch):
    # A database that does not exist is an answer from a running server:
    # no retry, the error as psycopg raised it.
    monkeypatch.setattr(demo.time, "sleep", lambda s: pytest.fail("retried"))
    server = Server(pgdata)
    server.start(listen="127.0.0.1")
    try:
        dsn = f"host=127.0.0.1 port={server.port} user={OWNER} dbname=no_such_database"
        with pytest.raises(psycopg.OperationalError) as err:
            demo.connect(dsn, wait=60)
    finally:
        server.stop()
    assert 'database "no_such_database" does not exist' in str(err.value)


def test_demo_refuses_a_negative_wait():
    proc = subprocess.run([sys.executable, str(ROOT / "scripts" / "demo.py"), "--wait", "-1"],
                          capture_output=True, text=True)
    assert proc.returncode == 2 and "--wait must be 0 or more seconds" in proc.stderr
