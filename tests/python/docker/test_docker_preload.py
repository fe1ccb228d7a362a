"""The CORGIPILE_PRELOAD switch on data directories made with initdb, read
back with `postgres -C` and by a server started on the result."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from docker_helpers import (
    DOCKER,
    INIT_PRELOAD,
    Server,
    effective,
    preload,
)


def include_lines(data: Path) -> list[str]:
    return [line for line in (data / "postgresql.conf").read_text().splitlines()
            if "corgipile.conf" in line and not line.lstrip().startswith("#")]


@pytest.mark.parametrize("value", ["on", "ON", "true", "yes", "1"])
def test_preload_on(pgconf, value):
    proc = preload(pgconf, value, str(pgconf))
    assert proc.returncode == 0, proc.stderr
    assert effective(pgconf) == "corgipile"
    assert len(include_lines(pgconf)) == 1


@pytest.mark.parametrize("value", [None, "", "off", "Off", "false", "no", "0"])
def test_preload_off(pgconf, value):
    # the default: a data directory where it was never on is left untouched
    before = (pgconf / "postgresql.conf").read_bytes()
    proc = preload(pgconf, value, str(pgconf))
    assert proc.returncode == 0, proc.stderr
    assert effective(pgconf) == ""
    assert (pgconf / "postgresql.conf").read_bytes() == before
    assert not (pgconf / "corgipile.conf").exists()

    # and after it was on, off takes it out again
    assert preload(pgconf, "on", str(pgconf)).returncode == 0
    assert effective(pgconf) == "corgipile"
    assert preload(pgconf, value, str(pgconf)).returncode == 0
    assert effective(pgconf) == ""
    assert len(include_lines(pgconf)) == 1


def test_preload_switches_both_ways_and_stays_idempotent(pgconf):
    for value, expected in [("on", "corgipile"), ("on", "corgipile"), ("off", ""),
                            ("off", ""), ("on", "corgipile")]:
        assert preload(pgconf, value, str(pgconf)).returncode == 0
        assert effective(pgconf) == expected, value
    assert len(include_lines(pgconf)) == 1
    # the files stay readable by the server: same owner and mode as postgresql.conf
    conf = (pgconf / "postgresql.conf").stat()
    managed = (pgconf / "corgipile.conf").stat()
    assert (managed.st_uid, managed.st_mode) == (conf.st_uid, conf.st_mode)
    assert not list(pgconf.glob(".corgipile-preload.*"))


def test_preload_keeps_the_libraries_postgresql_conf_lists(pgconf):
    with open(pgconf / "postgresql.conf", "a") as f:
        f.write("shared_preload_libraries = 'pg_stat_statements'\t# (change requires restart)\n")
    assert preload(pgconf, "on", str(pgconf)).returncode == 0
    assert effective(pgconf) == "pg_stat_statements,corgipile"
    assert preload(pgconf, "off", str(pgconf)).returncode == 0
    assert effective(pgconf) == "pg_stat_statements"

    # A setting added after the include would override it: the include is
    # moved back to the end, and the new list merged.
    assert preload(pgconf, "on", str(pgconf)).returncode == 0
    with open(pgconf / "postgresql.conf", "a") as f:
        f.write("Shared_Preload_Libraries 'auto_explain, pg_stat_statements'\n")
    assert effective(pgconf) == "auto_explain, pg_stat_statements"
    assert preload(pgconf, "on", str(pgconf)).returncode == 0
    assert effective(pgconf) == "auto_explain, pg_stat_statements,corgipile"
    assert len(include_lines(pgconf)) == 1

    # already listed by the user: left as it is
    with open(pgconf / "postgresql.conf", "a") as f:
        f.write("shared_preload_libraries = 'corgipile, auto_explain'\n")
    assert preload(pgconf, "on", str(pgconf)).returncode == 0
    assert effective(pgconf) == "corgipile, auto_explain"


def test_preload_rejects_a_bad_value_and_changes_nothing(pgconf):
    before = (pgconf / "postgresql.conf").read_bytes()
    proc = preload(pgconf, "maybe", str(pgconf))
    assert proc.returncode == 2
    assert "CORGIPILE_PRELOAD must be on or off" in proc.stderr
    assert (pgconf / "postgresql.conf").read_bytes() == before
    assert not (pgconf / "corgipile.conf").exists()
    assert preload(None, "maybe", "--check").returncode == 2
    assert preload(None, "on", "--check").returncode == 0


def test_preload_needs_a_data_directory_only_to_switch_on(tmp_path):
    proc = preload(tmp_path, "on", str(tmp_path))
    assert proc.returncode != 0
    assert "postgresql.conf not found" in proc.stderr
    # off (the default) never fails the container's start
    assert preload(tmp_path, "off", str(tmp_path)).returncode == 0
    assert list(tmp_path.iterdir()) == []


def test_preload_warns_when_alter_system_overrides_it(pgconf):
    (pgconf / "postgresql.auto.conf").write_text("shared_preload_libraries = 'auto_explain'\n")
    proc = preload(pgconf, "on", str(pgconf))
    assert proc.returncode == 0
    assert "overrides CORGIPILE_PRELOAD=on" in proc.stderr
    assert effective(pgconf) == "auto_explain"  # what the warning is about
    quiet = preload(pgconf, "off", str(pgconf))
    assert "warning" not in quiet.stderr


def test_preload_init_script_applies_it_after_initdb(pgconf):
    # As the entrypoint runs it: PGDATA set, the helper on PATH.
    proc = preload(pgconf, "on", script=INIT_PRELOAD,
                   PATH=f"{DOCKER}{os.pathsep}{os.environ['PATH']}")
    assert proc.returncode == 0, proc.stderr
    assert effective(pgconf) == "corgipile"


@pytest.mark.parametrize("value", ["on", "off"])
def test_server_started_on_the_switched_config_preloads_corgipile(pgdata, value):
    # The corgipile library is installed here (make test installs it); with
    # the switch on, the postmaster loads it at start, so a fresh session
    # knows its GUC (corgipile.progress) before calling anything of it.
    assert preload(pgdata, value, str(pgdata)).returncode == 0
    server = Server(pgdata)
    server.start(listen="")
    try:
        with server.connect() as c:
            spl = c.execute("SHOW shared_preload_libraries").fetchone()[0]
            gucs = c.execute("SELECT count(*) FROM pg_settings WHERE name = 'corgipile.progress'").fetchone()[0]
    finally:
        server.stop()
    assert (spl, gucs) == (("corgipile", 1) if value == "on" else ("", 0))
