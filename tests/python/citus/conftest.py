"""Fixtures of the Citus suite: a coordinator and two workers of a real
Citus 13.2.2 (scripts/citus_cluster.sh), started once for the session.

``make test`` exports CORGIPILE_CITUS_CLUSTER, the directory of a cluster it
started; without it the session starts one of its own in a temporary
directory and stops it at the end (the Citus build in build/citus is reused).
The suite is skipped, saying why, only when Citus can neither be found nor
built (no vendored sources and no CORGIPILE_CITUS_PG_CONFIG).

Creating a database on a Citus cluster means creating it, and the
extensions, on every node, so the tests share the database ``postgres``:
each test gets a schema of its own (``schema`` fixture, dropped with
CASCADE on every node afterwards) and its models are dropped after it.
"""

from __future__ import annotations

import itertools
import os
import shlex
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import psycopg
import pytest

ROOT = Path(__file__).resolve().parents[3]
SCRIPT = ROOT / "scripts" / "citus_cluster.sh"
_schemas = itertools.count()


@dataclass
class CitusCluster:
    """A running coordinator and its workers, as citus_cluster.sh wrote them."""

    dir: Path
    pg_config: str
    coordinator_port: int
    worker_ports: list[int]
    worker_dirs: list[Path]
    user: str

    @classmethod
    def read(cls, path: Path) -> CitusCluster:
        env = {}
        for line in (path / "env").read_text().splitlines():
            key, _, value = line.partition("=")
            env[key] = shlex.split(value)[0] if value else ""
        return cls(
            dir=path,
            pg_config=env["PG_CONFIG"],
            coordinator_port=int(env["COORDINATOR_PORT"]),
            worker_ports=[int(p) for p in env["WORKER_PORTS"].split()],
            worker_dirs=[Path(d) for d in env["WORKER_DIRS"].split()],
            user=env["PGUSER"],
        )

    def dsn(self, port: int | None = None, user: str | None = None) -> str:
        """Over TCP, as Citus' own connections between the nodes go."""
        return (f"host=127.0.0.1 port={port or self.coordinator_port} "
                f"user={user or self.user} dbname=postgres")

    def connect(self, port: int | None = None, user: str | None = None) -> psycopg.Connection:
        return psycopg.connect(self.dsn(port, user), autocommit=True)

    def _pgcluster(self, *args: str) -> None:
        subprocess.run([str(ROOT / "scripts" / "pgcluster.sh"), *args], check=True,
                       env={**os.environ, "PG_CONFIG": self.pg_config})

    def stop_worker(self, i: int, mode: str = "immediate") -> None:
        self._pgcluster("stop", str(self.worker_dirs[i]), mode)

    def start_worker(self, i: int) -> None:
        self._pgcluster("start", str(self.worker_dirs[i]), str(self.worker_ports[i]))


@pytest.fixture(scope="session")
def citus() -> Iterator[CitusCluster]:
    given = os.environ.get("CORGIPILE_CITUS_CLUSTER")
    if given:
        yield CitusCluster.read(Path(given))
        return
    available = subprocess.run([str(SCRIPT), "available"], capture_output=True, text=True)
    if available.returncode != 0:
        pytest.skip(available.stdout.strip())
    # under /tmp: the servers' sockets must fit 107 bytes, and postgres must reach it
    path = Path(tempfile.mkdtemp(prefix="corgipile-citus."))
    path.chmod(0o755)  # the servers run as postgres
    subprocess.run([str(SCRIPT), "start", str(path)], check=True)
    try:
        yield CitusCluster.read(path)
    finally:
        subprocess.run([str(SCRIPT), "stop", str(path), "immediate"], check=False)
        subprocess.run(["rm", "-rf", str(path)], check=False)


@pytest.fixture
def coordinator(citus: CitusCluster) -> Iterator[psycopg.Connection]:
    """An autocommit session on the coordinator as the superuser."""
    with citus.connect() as conn:
        yield conn


@pytest.fixture
def schema(citus: CitusCluster, coordinator: psycopg.Connection) -> Iterator[str]:
    """A schema of this test's own, first on the coordinator's search_path;
    dropped (Citus drops it on the workers too) with the test's models."""
    name = f"citus_t{os.getpid()}_{next(_schemas)}"
    coordinator.execute(f"CREATE SCHEMA {name}")
    coordinator.execute(f"SET search_path = {name}, public")
    try:
        yield name
    finally:
        with citus.connect() as c:
            c.execute("SELECT corgipile.drop_model(model_name) FROM corgipile.models")
            c.execute(f"DROP SCHEMA {name} CASCADE")
