"""Fixtures of the client tests: the corgipile package importable from the
source tree, a Client on the per-test database, and small generated tables.

`python -m pytest` run from the repository root puts the root first on
sys.path, where PGXS leaves the engine's corgipile.so, which Python would
import as module "corgipile"; the client must come from python_client/.
"""

from __future__ import annotations

import importlib
import os
import sys
from pathlib import Path

import numpy as np
import psycopg
import pytest
from psycopg import sql

ROOT = Path(__file__).resolve().parents[3]
CLIENT = ROOT / "python_client"


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


def linear_task(n: int, d: int, seed: int, noise: float = 0.2) -> tuple[np.ndarray, np.ndarray]:
    """Features in [-1, 1]^d, labels -1/+1 from a noisy linear rule."""
    rng = np.random.default_rng(seed)
    w = np.random.default_rng(99).normal(size=d)
    x = rng.uniform(-1.0, 1.0, size=(n, d))
    y = np.where(x @ w + noise * rng.normal(size=n) > 0, 1, -1)
    return x, y


def make_table(conn: psycopg.Connection, name: str, x: np.ndarray, y: np.ndarray) -> None:
    """name(id int, label int, features float8[]) with plain INSERTs (not the
    client's loaders, so that the loaders' tests compare against it)."""
    conn.execute(sql.SQL("CREATE TABLE {} (id int, label int, features float8[])").format(
        sql.Identifier(name)))
    with conn.cursor() as cur:
        cur.executemany(sql.SQL("INSERT INTO {} VALUES (%s, %s, %s)").format(
            sql.Identifier(name)),
            [(i, int(y[i]), x[i].tolist()) for i in range(len(y))])


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
