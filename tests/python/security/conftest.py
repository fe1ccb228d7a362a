"""Fixtures of the hostile-input suite: roles that attack, a canary that
tells whether any of their code ran, and a check after every test that the
postmaster never restarted (a backend crash restarts every backend).

Roles are cluster-wide while each test has its own database, so role names
carry a per-test suffix and are dropped afterwards.
"""

from __future__ import annotations

import itertools
import os
import re
import subprocess
import sys
import uuid
from pathlib import Path

import psycopg
import pytest

_counter = itertools.count()
CLIENT = Path(__file__).resolve().parents[3] / "python_client"
# the tests of this folder import its helpers (sqlcheck) and the client
# from the source tree
sys.path.insert(0, str(Path(__file__).resolve().parent))
if str(CLIENT) not in sys.path:
    sys.path.insert(0, str(CLIENT))


def postmaster_start(conn) -> object:
    """What changes when a backend crashes.  pg_postmaster_start_time() alone
    does not: after a crash the postmaster reinitialises and runs crash
    recovery in the same process, keeping its start time.  Crash recovery
    discards the cumulative statistics, which stamps a new stats_reset on
    pg_stat_archiver (nothing else resets it but pg_stat_reset_shared)."""
    return conn.execute(
        "SELECT pg_catalog.pg_postmaster_start_time(), a.stats_reset FROM pg_catalog.pg_stat_archiver AS a"
    ).fetchone()


# What the postmaster logs when a child dies of a signal (the OOM killer's
# SIGKILL included) or exits with a code it treats as a crash (above 1:
# exit code 1 is a parallel worker's ERROR, logged too), then resets every
# session (postmaster.c's LogChildExit and HandleChildCrash).
_CRASH_LINES = re.compile(
    r"(server process|background worker|parallel worker).*(was terminated by signal|"
    r"exited with exit code ([2-9]|\d\d+)|was terminated by exception)"
    r"|terminating any other active server processes"
)


def server_log() -> Path | None:
    """The test cluster's log file (make test's cluster), if known."""
    cluster = os.environ.get("CORGIPILE_TEST_CLUSTER")
    path = Path(cluster, "server.log") if cluster else None
    return path if path is not None and path.exists() else None


def crash_lines(log: Path, offset: int) -> list[str]:
    """Lines of the server log after offset that say a backend crashed."""
    with log.open("rb") as f:
        f.seek(offset)
        text = f.read().decode("utf-8", "replace")
    return [line for line in text.splitlines() if _CRASH_LINES.search(line)]


@pytest.fixture(autouse=True)
def postmaster_unchanged(conn):
    """Fails the test if a backend crashed while it ran: read from the
    server log (a crashed backend's exit, the postmaster's reset of every
    session), and from the statistics reset that crash recovery stamps."""
    log = server_log()
    offset = log.stat().st_size if log is not None else 0
    before = postmaster_start(conn)
    yield
    with psycopg.connect(conn.info.dsn, autocommit=True) as check:
        after = postmaster_start(check)
    if log is not None:
        crashed = crash_lines(log, offset)
        assert not crashed, "a backend crashed during the test:\n" + "\n".join(crashed)
    assert after == before, "the postmaster restarted during the test: a backend crashed"


class Roles:
    """Creates login roles on the test cluster and sessions as them."""

    def __init__(self, conn):
        self.admin = conn
        self.suffix = uuid.uuid4().hex[:8]
        self.created: list[str] = []
        self.sessions: list[psycopg.Connection] = []

    def create(self, prefix: str = "hostile", superuser: bool = False) -> str:
        name = f"{prefix}_{self.suffix}_{next(_counter)}"
        attrs = "LOGIN SUPERUSER" if superuser else "LOGIN"
        self.admin.execute(f'CREATE ROLE "{name}" {attrs}')
        self.admin.execute(f'GRANT CREATE, USAGE ON SCHEMA public TO "{name}"')
        self.created.append(name)
        return name

    def connect(self, role: str, **kwargs) -> psycopg.Connection:
        """A new autocommit session logged in as role on the test database."""
        info = self.admin.info
        session = psycopg.connect(
            host=info.host, port=info.port, dbname=info.dbname, user=role,
            autocommit=True, **kwargs,
        )
        self.sessions.append(session)
        return session

    def drop_all(self) -> None:
        for s in self.sessions:
            s.close()
        for name in reversed(self.created):
            self.admin.execute(f'DROP OWNED BY "{name}" CASCADE')
            self.admin.execute(f'DROP ROLE IF EXISTS "{name}"')


@pytest.fixture
def roles(conn):
    r = Roles(conn)
    yield r
    r.drop_all()


class Canary:
    """A sequence that hostile functions advance with nextval(): sequences
    are not transactional, so a call that ran inside a statement that then
    failed still leaves its mark."""

    def __init__(self, conn):
        self.conn = conn
        conn.execute("CREATE SEQUENCE public.canary_seq")
        conn.execute("GRANT USAGE, SELECT, UPDATE ON SEQUENCE public.canary_seq TO PUBLIC")

    # SQL a hostile function body runs to leave its mark
    MARK = "PERFORM pg_catalog.nextval('public.canary_seq');"

    def calls(self) -> int:
        row = self.conn.execute("SELECT last_value, is_called FROM public.canary_seq").fetchone()
        return row[0] if row[1] else 0


@pytest.fixture
def canary(conn) -> Canary:
    return Canary(conn)


def unique(prefix: str) -> str:
    return f"{prefix}_{os.getpid()}_{next(_counter)}"


@pytest.fixture
def victim(roles, conn):
    """A role with no privileges beyond its own tables and corgipile's
    schema, and its connection string."""
    name = roles.create("victim")
    conn.execute(f'GRANT USAGE ON SCHEMA corgipile TO "{name}"')
    info = conn.info
    return name, f"host={info.host} port={info.port} dbname={info.dbname} user={name}"


@pytest.fixture
def trusting_proxy(conn):
    """corgipile proxy in front of the test cluster (which trusts local
    connections: the protocol, not authentication, is under test here)."""
    env = dict(os.environ, PYTHONPATH=str(CLIENT))
    proc = subprocess.Popen(
        [sys.executable, "-P", "-m", "corgipile", "proxy", "--listen", "127.0.0.1:0",
         "--upstream", f"host={os.environ['PGHOST']} port={os.environ['PGPORT']}",
         "--unsafe-allow-passwordless", "--allow-unix-socket-upstream"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    line = proc.stdout.readline()  # type: ignore[union-attr]
    assert "listening on" in line, line
    yield int(line.split(",")[0].rsplit(":", 1)[1])
    proc.terminate()
    _, err = proc.communicate(timeout=20)
    assert "Traceback" not in err, err
