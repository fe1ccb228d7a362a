"""Fixtures of the client tests: the corgipile package importable from the
source tree, a Client on the per-test database, and small generated tables.

The client comes from python_client/ when it is not pip-installed (the
engine links into build/; a corgipile.so left at the root by an older
build would otherwise be imported as module "corgipile").
"""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from client_helpers import CLIENT, ROOT, linear_task, make_table


def _client_importable() -> bool:
    try:
        import corgipile
    except ImportError:
        return False
    return hasattr(corgipile, "connect")


if not _client_importable():
    for name in [m for m in sys.modules if m == "corgipile" or m.startswith("corgipile.")]:
        del sys.modules[name]
    sys.path[:] = [p for p in sys.path if os.path.realpath(p or os.curdir) != str(ROOT)]
    sys.path.insert(0, str(CLIENT))
    importlib.invalidate_caches()
    assert _client_importable(), "cannot import the corgipile client from " + str(CLIENT)

import corgipile  # noqa: E402


@pytest.fixture
def client(conn):
    """A Client on this test's database, without progress bars."""
    return corgipile.Client(conn, progress=False)


@pytest.fixture
def points(conn):
    """Table points: 600 rows, 4 features, labels -1/+1; and heldout: 200 rows."""
    x, y = linear_task(800, 4, seed=3)
    make_table(conn, "points", x[:600], y[:600])
    make_table(conn, "heldout", x[600:], y[600:])
    return x, y


@pytest.fixture
def cli_env(dsn) -> dict[str, str]:
    """Environment for running the CLI in a subprocess against this test's
    database (through the PG* variables, as a user would)."""
    env = dict(os.environ)
    info = dict(item.split("=", 1) for item in dsn.split())
    env.update(PGHOST=info["host"], PGPORT=info["port"], PGUSER=info["user"],
               PGDATABASE=info["dbname"], PYTHONPATH=os.pathsep.join(
                   p for p in (str(CLIENT), env.get("PYTHONPATH")) if p),
               COLUMNS="200")
    return env


@pytest.fixture
def cli(cli_env, tmp_path):
    """run(*args) -> CompletedProcess of `python -m corgipile ARGS`."""

    def run(*args, check=True, stdin=None, env=None):
        proc = subprocess.run([sys.executable, "-m", "corgipile", *map(str, args)],
                              cwd=tmp_path, env=env or cli_env, capture_output=True,
                              text=True, input=stdin, timeout=120)
        if check and proc.returncode != 0:
            raise AssertionError(f"corgipile {' '.join(map(str, args))} exited "
                                 f"{proc.returncode}:\n{proc.stdout}\n{proc.stderr}")
        return proc

    return run
