"""Fixtures of the Docker deployment tests: docker_helpers importable, and
data directories made with initdb for the preload switch, the entrypoint
wrapper and the health check."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from docker_helpers import BINDIR, IS_ROOT, OWNER, as_owner, owned_tempdir


@pytest.fixture(scope="module")
def initdb_template():
    """One initdb for the module; each test gets a copy of it."""
    base = owned_tempdir()
    try:
        subprocess.run(as_owner([str(BINDIR / "initdb"), "-D", str(base / "data"), "-U", OWNER,
                                 "--auth=trust", "--no-sync", "--encoding=UTF8",
                                 "--locale=C.UTF-8"]),
                       check=True, capture_output=True)
        yield base / "data"
    finally:
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture
def pgdata(initdb_template):
    """A fresh data directory, as initdb made it, owned by the server's user."""
    base = owned_tempdir()
    data = base / "data"
    try:
        subprocess.run(["cp", "-a", str(initdb_template), str(data)], check=True)
        yield data
    finally:
        if (data / "postmaster.pid").exists():
            subprocess.run(as_owner([str(BINDIR / "pg_ctl"), "-D", str(data),
                                     "-m", "immediate", "-w", "stop"]), capture_output=True)
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture
def pgconf(initdb_template):
    """The configuration files of a fresh data directory and its PG_VERSION,
    all that the preload switch and `postgres -C` read (a full copy is
    slow on this file system; tests that start a server use pgdata)."""
    base = owned_tempdir()
    data = base / "data"
    try:
        data.mkdir(mode=0o700)
        for name in ("postgresql.conf", "postgresql.auto.conf", "PG_VERSION"):
            shutil.copy2(initdb_template / name, data / name)
        if IS_ROOT:
            for path in [data, *data.iterdir()]:
                shutil.chown(path, OWNER, OWNER)
        yield data
    finally:
        shutil.rmtree(base, ignore_errors=True)
