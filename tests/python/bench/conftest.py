"""Fixtures of the benchmark tests: the Bismarck baseline's extension built
and installed once per session, and the bench package importable from the
source tree when the client is not pip-installed."""

from __future__ import annotations

import importlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

import psycopg
import pytest

ROOT = Path(__file__).resolve().parents[3]
CLIENT = ROOT / "python_client"

# The runner's tests against a real MADlib run under `make test-madlib`,
# which builds MADlib and names its installer in CORGIPILE_MADPACK; `make
# test` does not collect them (building MADlib takes minutes).
collect_ignore = [] if os.environ.get("CORGIPILE_MADPACK") else ["test_madlib_real.py"]



def _bench_importable() -> bool:
    try:
        import corgipile.bench  # noqa: F401
    except ImportError:
        return False
    return True


# The client may not be pip-installed yet: then it is imported from
# python_client/ (the engine links into build/, so a corgipile.so left at
# the root by an older build is the only thing that could shadow it).
if not _bench_importable():
    for name in [m for m in sys.modules if m == "corgipile" or m.startswith("corgipile.")]:
        del sys.modules[name]
    sys.path[:] = [p for p in sys.path if os.path.realpath(p or os.curdir) != str(ROOT)]
    sys.path.insert(0, str(CLIENT))
    importlib.invalidate_caches()
    assert _bench_importable(), "cannot import corgipile.bench from " + str(CLIENT)


def _pg_config() -> str:
    if os.environ.get("PG_CONFIG"):
        return os.environ["PG_CONFIG"]
    default = "/usr/lib/postgresql/15/bin/pg_config"
    return default if os.path.exists(default) else (shutil.which("pg_config") or "pg_config")


def _available(dsn_kw: dict) -> bool:
    with psycopg.connect(**dsn_kw, dbname="postgres") as c:
        return c.execute("SELECT count(*) FROM pg_available_extensions "
                         "WHERE name = 'corgipile_bismarck'").fetchone()[0] == 1


@pytest.fixture(scope="session")
def bismarck_installed() -> None:
    """`make -C benchmarks/bismarck install`, so that the tests run the
    aggregate built from this tree.  Without the rights to install, an
    already installed copy is used; with neither, the tests fail."""
    kw = dict(host=os.environ["PGHOST"], port=os.environ["PGPORT"],
              user=os.environ.get("PGUSER", "postgres"))
    proc = subprocess.run(["make", "-s", "-C", str(ROOT / "benchmarks" / "bismarck"),
                           f"PG_CONFIG={_pg_config()}", "install"],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        if not _available(kw):
            pytest.fail("cannot build and install the Bismarck baseline "
                        "(make -C benchmarks/bismarck install):\n" + proc.stdout + proc.stderr)
        print("note: could not reinstall benchmarks/bismarck; testing the installed copy",
              file=sys.stderr)
    assert _available(kw)


@pytest.fixture
def bconn(conn, bismarck_installed):
    """This test's database with the Bismarck aggregate as well."""
    conn.execute("CREATE EXTENSION corgipile_bismarck")
    conn.execute("SET corgipile.progress = off")
    conn.execute("SET max_parallel_workers_per_gather = 0")
    return conn


@pytest.fixture
def client_env() -> dict[str, str]:
    """Environment for running `python -m corgipile.bench` in a subprocess."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(CLIENT), env.get("PYTHONPATH")) if p)
    return env
