"""The README's `corgipile proxy` example, run as printed against a cluster
set up the way the README says (`make demo`: scripts/with_demo_cluster.sh
starts it with scripts/pgcluster.sh, gives it a password and SCRAM for TCP,
and scripts/demo.py creates the extension), and its output compared line by
line with the README's, timings aside; and docs/proxy.md's transcript, as
alice in her database mydb, the same way.

What the test changes in the printed commands: `.demo` and
`$(scripts/demo_port.sh)` name the test's own cluster (not this checkout's
demo cluster, which may be in use), the proxy listens on a port the OS
chooses instead of 6432 (printed by the proxy, then given to psql), and the
statements of the psql session are sent one by one with psql's -c (each
prints its NOTICEs and its result as the interactive session does).
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from doc_examples import PSQL, normalized, section_blocks

ROOT = Path(__file__).resolve().parents[3]
README = ROOT / "README.md"
PROXY_DOC = ROOT / "docs" / "proxy.md"
PGCLUSTER = ROOT / "scripts" / "pgcluster.sh"
HEADING = "TRAIN BY / PREDICT BY from psql and any other client: `corgipile proxy`"


PROMPT = re.compile(r"^(\w+)([=-])[#>] ")


def session(text: str) -> list[tuple[str, str, list[str]]]:
    """A transcript as (kind, text, output lines): kind "$" for a shell
    command, "sql" for a statement of the psql session (its prompt any
    database's, `=#`/`=>` opening a statement, `-#`/`->` going on)."""
    steps: list[tuple[str, str, list[str]]] = []
    for line in text.splitlines():
        m = PROMPT.match(line)
        if line.startswith("$ "):
            steps.append(("$", line[2:], []))
        elif m and m.group(2) == "=":
            steps.append(("sql", line[m.end():], []))
        elif m:
            kind, sql, out = steps[-1]
            steps[-1] = (kind, sql + "\n" + line[m.end():], out)
        else:
            steps[-1][2].append(line)
    return steps


def readme_example() -> list[tuple[str, str, list[str]]]:
    """The README's example block as session() steps."""
    return session(section_blocks(README, HEADING)[0].text)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def demo_cluster() -> Iterator[tuple[Path, int, dict[str, str]]]:
    """A cluster started as with_demo_cluster.sh starts .demo, with the
    extension as demo.py creates it; (directory, port, environment)."""
    script = (ROOT / "scripts" / "with_demo_cluster.sh").read_text()
    # the steps this fixture repeats are the ones make demo runs
    assert 'scripts/pgcluster.sh start .demo "$port"' in script
    assert "scripts/pgcluster.sh password .demo" in script
    env = dict(os.environ)
    env.setdefault("PG_CONFIG", "/usr/lib/postgresql/15/bin/pg_config")
    for key in ("PGHOST", "PGPORT", "PGUSER", "PGDATABASE", "PGPASSWORD", "PGPASSFILE"):
        env.pop(key, None)
    directory = Path(tempfile.mkdtemp(prefix="cp-readme-", dir="/tmp"))
    os.chmod(directory, 0o755)
    try:
        # a port free a moment ago may be taken by the time the server binds
        # it (pgcluster.sh says so): another one then
        for _attempt in range(5):
            port = _free_port()
            r = subprocess.run([str(PGCLUSTER), "start", str(directory), str(port)],
                               env=env, capture_output=True, text=True, timeout=300)
            if r.returncode == 0 or "is taken" not in r.stderr:
                break
        assert r.returncode == 0, r.stderr
        r = subprocess.run([str(PGCLUSTER), "password", str(directory)], env=env,
                           capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, r.stderr
        local = subprocess.run(
            ["bash", "-c", f'eval "$({PGCLUSTER} env {directory} {port})" && '
             f"{PSQL} -X -q -v ON_ERROR_STOP=1 -c 'CREATE EXTENSION corgipile'"],
            env=env, capture_output=True, text=True, timeout=120)
        assert local.returncode == 0, local.stderr
        yield directory, port, env
    finally:
        subprocess.run([str(PGCLUSTER), "stop", str(directory), "immediate"], env=env,
                       capture_output=True, timeout=120)
        shutil.rmtree(directory, ignore_errors=True)


def test_readme_proxy_example_runs_as_printed(demo_cluster):
    directory, port, base_env = demo_cluster
    steps = readme_example()
    shell = [text for kind, text, _ in steps if kind == "$"]
    assert len(shell) == 3, shell
    env_cmd, proxy_cmd, psql_cmd = shell
    assert "--listen 127.0.0.1:6432" in proxy_cmd and proxy_cmd.endswith(" &")
    assert psql_cmd == "psql -h 127.0.0.1 -p 6432"

    # the first command, with the test's cluster for .demo's
    env_cmd = env_cmd.replace(".demo", str(directory)).replace(
        "$(scripts/demo_port.sh)", str(port))
    out = subprocess.run(["bash", "-c", f"{env_cmd} && env -0"], cwd=ROOT, env=base_env,
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    env = dict(item.split("=", 1) for item in out.stdout.split("\0") if "=" in item)
    assert env["PGPASSFILE"] == str(directory / "pgpass")
    env["PSQLRC"] = "/dev/null"  # the reader's own psqlrc is not the README's

    # the cluster asks TCP clients for the password: without it, refused
    no_password = subprocess.run([str(PSQL), "-X", "-w", "-h", "127.0.0.1", "-c", "SELECT 1"],
                                 env={**env, "PGPASSFILE": "/dev/null"}, capture_output=True,
                                 text=True, timeout=60)
    assert no_password.returncode != 0
    assert "password" in no_password.stderr, no_password.stderr

    with running_proxy(proxy_cmd[:-2], env) as listen:
        psql = psql_cmd.replace("-p 6432", f"-p {listen}").split()
        assert psql[0] == "psql"
        run_session(steps, [str(PSQL), *psql[1:]], env, "README.md")


@contextlib.contextmanager
def running_proxy(command: str, env: dict[str, str]) -> Iterator[int]:
    """The proxy command run on a port the OS chooses instead of 6432;
    yields that port. Fails if the proxy wrote a traceback or refused a
    session."""
    proxy = subprocess.Popen(["bash", "-c", "exec " + command.replace("127.0.0.1:6432",
                                                                      "127.0.0.1:0")],
                             cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True)
    try:
        assert proxy.stdout is not None
        line = proxy.stdout.readline()
        m = re.search(r"listening on 127\.0\.0\.1:(\d+)", line)
        assert m, line + (proxy.stderr.read() if proxy.stderr else "")
        yield int(m.group(1))
    finally:
        proxy.terminate()
        _, err = proxy.communicate(timeout=30)
    assert "Traceback" not in err and "refused" not in err, err


def run_session(steps, psql: list[str], env: dict[str, str], doc: str) -> None:
    """Each statement of the transcript with psql -c, its NOTICEs, result or
    ERROR compared with the printed ones."""
    for kind, sql, expected in steps:
        if kind != "sql":
            continue
        r = subprocess.run([*psql, "-X", "-c", sql], env=env, capture_output=True, text=True,
                           timeout=300)
        failing = any(line.startswith("ERROR:") for line in expected)
        assert (r.returncode != 0) == failing, (sql, r.stderr)
        got = r.stderr.splitlines() + r.stdout.splitlines()
        assert normalized(got) == normalized(expected), (
            f"{doc}'s output of\n{sql}\nno longer holds; today it prints:\n"
            + r.stderr + r.stdout)


def test_proxy_doc_transcript_runs_as_printed(demo_cluster):
    """docs/proxy.md's session: the proxy started as its first command
    shows (the test cluster's port for 5432), psql as its second (alice's
    password given), each statement as printed."""
    directory, port, base_env = demo_cluster
    commands = section_blocks(PROXY_DOC, PROXY_DOC.read_text().splitlines()[0][2:], "sh")[0]
    proxy_cmd, psql_cmd = [line.split("  #")[0].strip()
                           for line in commands.text.splitlines() if line.strip()]
    assert proxy_cmd.startswith("corgipile proxy --listen 127.0.0.1:6432")
    assert psql_cmd == "psql -h 127.0.0.1 -p 6432 -U alice mydb"
    env = {**base_env, "PSQLRC": "/dev/null", "PGPASSWORD": "alice's password"}
    admin = ["bash", "-c", f'eval "$({PGCLUSTER} env {directory} {port})" && '
             f'{PSQL} -X -q -v ON_ERROR_STOP=1 -f -']
    setup = subprocess.run(admin, env=base_env, capture_output=True, text=True, timeout=120,
                           input="CREATE ROLE alice LOGIN PASSWORD 'alice''s password';\n"
                                 "CREATE DATABASE mydb OWNER alice;\n"
                                 "\\c mydb\nCREATE EXTENSION corgipile;\n")
    assert setup.returncode == 0, setup.stderr
    (transcript,) = [b for b in section_blocks(PROXY_DOC, commands.heading)
                     if b.text.startswith("mydb=> ")]
    proxy = proxy_cmd.replace("corgipile proxy", f"{sys.executable} -m corgipile proxy", 1)
    proxy = proxy.replace("port=5432", f"port={port}")
    with running_proxy(proxy, {**env, "PYTHONPATH": str(ROOT / "python_client")}) as listen:
        psql = psql_cmd.replace("-p 6432", f"-p {listen}").split()
        run_session(session(transcript.text), [str(PSQL), *psql[1:]], env, "docs/proxy.md")
