"""The entrypoint wrapper, handing over to a stand-in for the official
docker-entrypoint.sh that records how it was called, and the health check
against a server on the socket only and on TCP."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from docker_helpers import (
    ENTRYPOINT,
    HEALTHCHECK,
    OWNER,
    Server,
    effective,
    preload,
)

# ---------------------------------------------------------------------------
# The entrypoint wrapper, handing over to a stand-in for the official
# docker-entrypoint.sh that records how it was called.

@pytest.fixture
def fake_official_entrypoint(tmp_path):
    bindir = tmp_path / "bin"
    bindir.mkdir()
    record = tmp_path / "called"
    script = bindir / "docker-entrypoint.sh"
    script.write_text("#!/bin/sh\n"
                      f"printf '%s\\n' \"$@\" > '{record}'\n"
                      "[ -f \"$PGDATA/corgipile.conf\" ] && cat \"$PGDATA/corgipile.conf\"\n"
                      "exit 0\n")
    script.chmod(0o755)
    return bindir, record


def wrapper(bindir: Path, data: Path, value: str, *args: str) -> subprocess.CompletedProcess:
    return preload(data, value, *args, script=ENTRYPOINT,
                   PATH=f"{bindir}{os.pathsep}{os.environ['PATH']}")


def test_entrypoint_applies_the_switch_to_an_existing_cluster(pgconf, fake_official_entrypoint):
    bindir, record = fake_official_entrypoint
    proc = wrapper(bindir, pgconf, "on", "postgres", "-c", "work_mem=64MB")
    assert proc.returncode == 0, proc.stderr
    assert record.read_text().splitlines() == ["postgres", "-c", "work_mem=64MB"]
    assert "shared_preload_libraries = 'corgipile'" in proc.stdout  # written before the hand-over
    assert effective(pgconf) == "corgipile"

    # flipped off on a later start
    assert wrapper(bindir, pgconf, "off", "-c", "work_mem=64MB").returncode == 0
    assert record.read_text().splitlines() == ["-c", "work_mem=64MB"]
    assert effective(pgconf) == ""


def test_entrypoint_first_start_leaves_it_to_the_init_script(tmp_path, fake_official_entrypoint):
    bindir, record = fake_official_entrypoint
    empty = tmp_path / "pgdata"
    empty.mkdir()
    proc = wrapper(bindir, empty, "on", "postgres")
    assert proc.returncode == 0, proc.stderr
    assert record.read_text().splitlines() == ["postgres"]
    assert list(empty.iterdir()) == []


def test_entrypoint_stops_on_a_bad_value(tmp_path, fake_official_entrypoint):
    bindir, record = fake_official_entrypoint
    proc = wrapper(bindir, tmp_path, "sure", "postgres")
    assert proc.returncode != 0
    assert "CORGIPILE_PRELOAD must be on or off" in proc.stderr
    assert not record.exists()


def test_entrypoint_leaves_other_commands_alone(tmp_path, fake_official_entrypoint):
    bindir, record = fake_official_entrypoint
    proc = wrapper(bindir, tmp_path, "sure", "psql", "-h", "db")
    assert proc.returncode == 0, proc.stderr
    assert record.read_text().splitlines() == ["psql", "-h", "db"]


def test_entrypoint_warns_about_command_line_overrides(pgconf, fake_official_entrypoint):
    bindir, _ = fake_official_entrypoint
    proc = wrapper(bindir, pgconf, "on", "postgres", "-c", "shared_preload_libraries=auto_explain")
    assert proc.returncode == 0
    assert "overrides CORGIPILE_PRELOAD" in proc.stderr
    assert "overrides" not in wrapper(bindir, pgconf, "on", "postgres").stderr


# ---------------------------------------------------------------------------
# The health check

def test_healthcheck_waits_for_tcp_not_the_init_socket(pgdata):
    server = Server(pgdata)
    env = {**os.environ, "PGPORT": str(server.port), "POSTGRES_USER": OWNER, "POSTGRES_DB": "postgres"}
    check = [str(HEALTHCHECK)]
    assert subprocess.run(check, env=env).returncode != 0  # nothing running

    # what the official entrypoint runs during first-start init: socket only
    server.start(listen="")
    try:
        with server.connect() as c:
            assert c.execute("SELECT 1").fetchone() == (1,)
        assert subprocess.run(check, env=env).returncode != 0
    finally:
        server.stop()

    server.start(listen="127.0.0.1")
    try:
        assert subprocess.run(check, env=env).returncode == 0
    finally:
        server.stop()
