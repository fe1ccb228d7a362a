"""The init script that creates the extension on the first start, run the
way the official entrypoint runs it (executed, and sourced), against a
database of the test server."""

from __future__ import annotations

import os
import subprocess
import uuid

import psycopg
import pytest

from docker_helpers import (
    INIT_EXTENSION,
    OWNER,
    control_version,
)

# ---------------------------------------------------------------------------
# The init script that creates the extension, against the test server

@pytest.fixture
def bare_database(conn):
    """A database of the test server without the extension, dropped after."""
    name = f"docker_init_{uuid.uuid4().hex[:12]}"
    conn.execute(f'CREATE DATABASE "{name}"')
    try:
        yield name
    finally:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def entrypoint_env(**extra: str) -> dict[str, str]:
    """The environment the official entrypoint gives init scripts: its
    POSTGRES_* variables, libpq's connection from the process environment
    (here the test server's PGHOST/PGPORT), and no PGDATABASE or PGUSER
    to lean on."""
    env = {k: v for k, v in os.environ.items() if k not in ("PGDATABASE", "PGUSER")}
    env["POSTGRES_USER"] = os.environ.get("PGUSER", OWNER)
    env.update(extra)
    return env


def extension_oid(dbname: str):
    info = dict(host=os.environ["PGHOST"], port=os.environ["PGPORT"],
                user=os.environ.get("PGUSER", OWNER), dbname=dbname)
    with psycopg.connect(**info) as c:
        row = c.execute("SELECT oid, extversion FROM pg_extension WHERE extname = 'corgipile'").fetchone()
        if row:
            assert row[1] == control_version()
            assert c.execute("SELECT to_regclass('corgipile.models')").fetchone()[0] is not None
        return row[0] if row else None


@pytest.mark.parametrize("how", ["executed", "sourced"])
def test_init_script_creates_the_extension_and_is_harmless_twice(bare_database, how):
    # The entrypoint executes init scripts that are executable (ours are)
    # and sources the others into its own `set -Eeo pipefail` shell.
    cmd = ([str(INIT_EXTENSION)] if how == "executed"
           else ["bash", "-c", 'set -Eeo pipefail; . "$1"; echo done', "init", str(INIT_EXTENSION)])
    env = entrypoint_env(POSTGRES_DB=bare_database)
    assert extension_oid(bare_database) is None

    first = subprocess.run(cmd, env=env, capture_output=True, text=True)
    assert first.returncode == 0, first.stderr
    oid = extension_oid(bare_database)
    assert oid is not None

    second = subprocess.run(cmd, env=env, capture_output=True, text=True)
    assert second.returncode == 0, second.stderr
    assert extension_oid(bare_database) == oid  # untouched, not dropped and made again
    assert "ERROR" not in second.stderr


def test_init_script_fails_when_it_cannot_create_the_extension(bare_database):
    # A failure must stop the container's initialisation, not pass silently.
    env = entrypoint_env(POSTGRES_DB=bare_database + "_missing")
    proc = subprocess.run([str(INIT_EXTENSION)], env=env, capture_output=True, text=True)
    assert proc.returncode != 0
    assert bare_database + "_missing" in proc.stderr

    sourced = subprocess.run(["bash", "-c", 'set -Eeo pipefail; . "$1"; echo reached', "init",
                              str(INIT_EXTENSION)], env=env, capture_output=True, text=True)
    assert sourced.returncode != 0 and "reached" not in sourced.stdout
