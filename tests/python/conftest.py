"""Shared fixtures: a real PostgreSQL 15 server with the extension.

``make test`` starts a throwaway cluster and exports PGHOST/PGPORT/PGUSER
and CORGIPILE_TEST_CLUSTER.  Each test gets its own database, copied from a
template in which ``CREATE EXTENSION corgipile`` has run
(pytest-postgresql's noproc factory).
"""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

import psycopg
import pytest
from pytest_postgresql import factories

ROOT = Path(__file__).resolve().parents[2]

# scikit-learn's check_array_api_input runs only with SciPy's array API
# support on, which must be set before SciPy is first imported
os.environ.setdefault("SCIPY_ARRAY_API", "1")

# The Ctrl-C tests send SIGINT to this process and to CLI children.  A
# suite started in the background by a shell without job control (`make
# test &` in a script) inherits SIGINT ignored, and the client rightly
# leaves an ignored SIGINT alone (training.py, _cancel_on_ctrl_c): those
# tests then trained until their watchdogs cancelled them.  Python's
# default handler here (children get the default action at exec) makes the
# suite the same however it was started.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

if "PGHOST" not in os.environ or "PGPORT" not in os.environ:
    raise pytest.UsageError(
        "the tests need a PostgreSQL server with corgipile installed: run `make test`, "
        "or export PGHOST, PGPORT and PGUSER for one"
    )


def _create_extension(host, port, user, dbname, password=None, **_):
    with psycopg.connect(host=host, port=port, user=user, dbname=dbname, password=password) as conn:
        conn.execute("CREATE EXTENSION corgipile")


postgresql_noproc = factories.postgresql_noproc(
    host=os.environ["PGHOST"],
    port=int(os.environ["PGPORT"]),
    user=os.environ.get("PGUSER", "postgres"),
    load=[_create_extension],
)
postgresql = factories.postgresql("postgresql_noproc")


@pytest.fixture
def dsn(postgresql) -> str:
    """Connection string of this test's database, for extra sessions."""
    info = postgresql.info
    return f"host={info.host} port={info.port} user={info.user} dbname={info.dbname}"


@pytest.fixture
def conn(postgresql):
    """An autocommit session on this test's database."""
    postgresql.autocommit = True
    return postgresql


class Cluster:
    """The test cluster itself, for tests that restart the server."""

    def __init__(self, path: str, port: str):
        self.path = path
        self.port = port

    def _run(self, *args: str) -> None:
        subprocess.run([str(ROOT / "scripts" / "pgcluster.sh"), *args], check=True)

    def stop(self, mode: str = "fast") -> None:
        self._run("stop", self.path, mode)

    def start(self) -> None:
        self._run("start", self.path, self.port)


@pytest.fixture
def cluster() -> Cluster:
    path = os.environ.get("CORGIPILE_TEST_CLUSTER")
    if not path:
        pytest.skip("needs the cluster started by `make test` (CORGIPILE_TEST_CLUSTER)")
    return Cluster(path, os.environ["PGPORT"])
