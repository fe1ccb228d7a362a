"""The database image's build, checked without a Docker engine: the build
stage's make line is run, as written, on a copy of exactly the files it
COPYs from the build context (as .dockerignore filters it), and what that
`make install` puts under DESTDIR is compared file by file with what the
final stage copies out of the build stage; the labels; the build context."""

from __future__ import annotations

import json
import os
import posixpath
import re
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

from docker_helpers import (
    CLIENT_DOCKERFILE,
    DB_DOCKERFILE,
    DOCKER,
    ENTRYPOINT,
    HEALTHCHECK,
    IMAGE_PG_CONFIG,
    INIT_EXTENSION,
    INIT_PRELOAD,
    PG_MAJOR,
    PRELOAD,
    ROOT,
    Stage,
    build_context,
    control_version,
    dockerignore_patterns,
    git_files,
    ignored,
    labels,
    parse_dockerfile,
)

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
    # loads the library: one BASE_IMAGE argument, by default the official
    # image of this major version (a major-version tag, never latest).
    assert build.image == final.image == "${BASE_IMAGE}"
    assert re.fullmatch(rf"postgres:{PG_MAJOR}(\.\d+)?-bookworm", final.base_image), final.base_image
    assert labels(final)["org.opencontainers.image.base.name"] == final.base_image


def fake_apt(tmp_path: Path, available: list[str], candidate: str) -> tuple[Path, Path]:
    """apt-get and apt-cache stand-ins: `apt-cache madison` lists the
    versions given, in apt's own layout; `apt-cache policy` names the
    candidate; `apt-cache show` exits 0 whatever the version, as apt's does;
    apt-get records its arguments (an install of a version apt does not
    know fails, as apt-get's does)."""
    bindir, record = tmp_path / "bin", tmp_path / "apt-get.calls"
    bindir.mkdir()
    madison = "".join(f" %s | {v} | http://deb.example/debian bookworm/main amd64 Packages\\n"
                      for v in available)
    (bindir / "apt-cache").write_text(
        "#!/bin/sh\n"
        'case "$1" in\n'
        f"madison) printf '{madison}' \"$2\" \"$2\" \"$2\" ;;\n"
        f"policy) printf '%s:\\n  Installed: (none)\\n  Candidate: {candidate}\\n' \"$2\" ;;\n"
        "show) exit 0 ;;\n"
        "esac\n")
    known = " ".join(f"postgresql-server-dev-15={v}" for v in available)
    (bindir / "apt-get").write_text(
        "#!/bin/sh\n"
        f"printf '%s\\n' \"$*\" >> '{record}'\n"
        '[ "$1" = install ] || exit 0\n'
        'for a; do case "$a" in postgresql-server-dev-*)\n'
        f'  case " {known} " in *" $a "*) ;; *) echo "E: Version not found: $a" >&2; exit 100 ;; esac ;;\n'
        "esac; done\n")
    for tool in bindir.iterdir():
        tool.chmod(0o755)
    return bindir, record


@pytest.mark.parametrize("case", ["current", "stale base image", "no headers at all"])
def test_build_stage_installs_the_matching_server_headers(case, tmp_path):
    # The build stage's apt RUN line, run as written by the stage's SHELL
    # with apt stand-ins: the base image's own headers when its apt sources
    # still have them; else the current ones, with a warning (a cached base
    # image older than PGDG's current build); a clear failure without any.
    build, _ = db_stages()
    (shell,) = build.all("SHELL")
    assert json.loads(shell.args) == ["/bin/bash", "-o", "pipefail", "-c"]
    apt = [i.args for i in build.all("RUN") if "apt-get install" in i.args]
    assert len(apt) == 1
    words = shlex.split(apt[0], posix=True)
    assert "build-essential=12.9" in words
    assert "postgresql-server-dev-${PG_MAJOR}=${headers}" in words
    cleanup = "rm -rf /var/lib/apt/lists/*"
    assert apt[0].rstrip().endswith("&& " + cleanup)
    run = apt[0].rstrip()[:-len(cleanup)] + "true"  # not on this machine's apt lists

    available, candidate = {
        "current": (["15.8-1.pgdg120+1", "15.7-1.pgdg120+1"], "15.8-1.pgdg120+1"),
        "stale base image": (["15.9-1.pgdg120+1", "15.10-1.pgdg120+1"], "15.10-1.pgdg120+1"),
        "no headers at all": ([], "(none)")}[case]
    bindir, record = fake_apt(tmp_path, available, candidate)
    env = {"PATH": f"{bindir}{os.pathsep}{os.environ['PATH']}", "PG_MAJOR": "15",
           "PG_VERSION": "15.8-1.pgdg120+1"}
    proc = subprocess.run(json.loads(shell.args) + [run], env=env, capture_output=True, text=True)
    installs = [line for line in record.read_text().splitlines() if line.startswith("install")]
    assert len(installs) == 1, proc.stderr
    if case == "current":
        assert proc.returncode == 0 and proc.stderr == ""
        assert installs[0].split()[-1] == "postgresql-server-dev-15=15.8-1.pgdg120+1"
    elif case == "stale base image":
        assert proc.returncode == 0, proc.stderr
        assert installs[0].split()[-1] == "postgresql-server-dev-15=15.10-1.pgdg120+1"
        assert ("WARNING: postgresql-server-dev-15 15.8-1.pgdg120+1, the base image's server, "
                "is no longer in its apt sources; building against 15.10-1.pgdg120+1") in proc.stderr
        assert "--pull" in proc.stderr
    else:
        assert proc.returncode != 0


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
    # the default version's install script, which make builds from
    # sql/corgipile.sql, and every script of sql/ (0.1.0's and the upgrades)
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
    # One version for the extension, the client and the images: the label
    # comes from a build argument whose default is the extension's version
    # (scripts/docker_smoke.sh passes the same value).
    final = parse_dockerfile(dockerfile)[-1]
    assert final.args()["CORGIPILE_VERSION"] == control_version()
    found = labels(final)
    assert found["org.opencontainers.image.version"] == control_version()
    assert found["org.opencontainers.image.title"].startswith("corgipile-")
    assert found["org.opencontainers.image.description"]
    assert found["org.opencontainers.image.base.name"] == final.base_image


def test_documented_commands_tag_the_version_and_pull():
    # The build commands in docker/README.md and the Dockerfiles' headers:
    # the version's tag, and --pull (a cached base image may be older than
    # its apt sources' server headers).
    for path in (DB_DOCKERFILE, CLIENT_DOCKERFILE, DOCKER / "README.md"):
        text = re.sub(r"\\\n[#\s]*", " ", path.read_text())  # continuation lines joined
        builds = re.findall(r"^[#\s]*(docker build -[^\n]*)", text, re.M)
        assert builds, path
        for command in builds:
            # a local stand-in base image cannot be pulled
            local = "--build-arg BASE_IMAGE=localhost/" in command
            assert ("--pull" in command) != local, f"{path.name}: {command}"
            tag = re.search(r"-t (corgipile-\w+):(\S+)", command)
            assert tag and tag.group(2) == control_version(), f"{path.name}: {command}"


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
                 "scripts/provenance.py",
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
