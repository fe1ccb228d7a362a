"""The proxy never lets anyone reach the server with fewer credentials than
directly.

A cluster of its own, with Debian's default pg_hba.conf:

    local all postgres peer
    local all all      peer
    host  all all 127.0.0.1/32 scram-sha-256
    host  all all ::1/128      scram-sha-256

The proxy runs with the OS identity ``postgres`` (proxy_as_user.py), as the
issue's reproduction ran it; the clients run as ``nobody``
(``runuser -u nobody -- psql -w``). Before the fix, the Unix-socket upstream
let nobody in as the superuser postgres with no password.

Needs root (runuser, the switch to postgres); skipped otherwise.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
CLIENT = HERE.parents[2] / "python_client"

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root (runuser, setuid)")

DEBIAN_HBA = """\
local   all             postgres                                peer
local   all             all                                     peer
host    all             all             127.0.0.1/32            scram-sha-256
host    all             all             ::1/128                 scram-sha-256
"""
SUPERUSER_PW = "pg-secret-7"
ALICE_PW = "alice-secret-3"


def _bindir() -> Path:
    pg_config = os.environ.get("PG_CONFIG")
    if pg_config:
        out = subprocess.run([pg_config, "--bindir"], capture_output=True, text=True)
        if out.returncode == 0:
            return Path(out.stdout.strip())
    return Path("/usr/lib/postgresql/15/bin")


BIN = _bindir()
PSQL = Path("/usr/lib/postgresql/15/bin/psql")
RUNUSER = shutil.which("runuser") or "/usr/sbin/runuser"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class HbaCluster:
    """A throwaway cluster run by postgres, its pg_hba.conf rewritable."""

    def __init__(self) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="cp-hba-", dir="/tmp"))
        self.data = self.dir / "data"
        self.sock = self.dir / "sock"
        self.sock.mkdir()
        shutil.chown(self.dir, "postgres")
        shutil.chown(self.sock, "postgres")
        self.as_postgres([str(BIN / "initdb"), "-D", str(self.data), "-U", "postgres",
                          "--auth=trust", "--encoding=UTF8", "--locale=C.UTF-8"])
        with open(self.data / "postgresql.conf", "a") as f:
            f.write(f"listen_addresses = '127.0.0.1'\n"
                    f"unix_socket_directories = '{self.sock}'\nmax_connections = 20\n"
                    "shared_buffers = 16MB\npassword_encryption = 'scram-sha-256'\n")
        # a port free a moment ago may be taken by the time the server
        # binds it: the server says so in its log, and another one is tried
        for _ in range(5):
            self.port = _free_port()
            out = subprocess.run([RUNUSER, "-u", "postgres", "--", str(BIN / "pg_ctl"), "-D",
                                  str(self.data), "-l", str(self.dir / "server.log"), "-o",
                                  f"-p {self.port}", "-w", "-t", "60", "start"],
                                 capture_output=True, text=True, cwd="/", timeout=120)
            if out.returncode == 0 or "Address already in use" not in \
                    (self.dir / "server.log").read_text():
                break
        assert out.returncode == 0, out.stderr + (self.dir / "server.log").read_text()
        self.sql(f"CREATE ROLE alice LOGIN PASSWORD '{ALICE_PW}'; "
                 f"ALTER ROLE postgres PASSWORD '{SUPERUSER_PW}'; "
                 "CREATE TABLE canary (note text); GRANT ALL ON canary TO PUBLIC")
        self.set_hba(DEBIAN_HBA)

    def as_postgres(self, cmd: list[str]) -> str:
        out = subprocess.run([RUNUSER, "-u", "postgres", "--", *cmd], capture_output=True,
                             text=True, cwd="/", timeout=120)
        assert out.returncode == 0, out.stderr
        return out.stdout

    def sql(self, text: str) -> str:
        """As the postgres OS user over the Unix socket (peer or trust)."""
        return self.as_postgres([str(PSQL), "-X", "-At", "-h", str(self.sock), "-p",
                                 str(self.port), "-U", "postgres", "-d", "postgres",
                                 "-v", "ON_ERROR_STOP=1", "-c", text])

    def set_hba(self, text: str) -> None:
        (self.data / "pg_hba.conf").write_text(text)
        shutil.chown(self.data / "pg_hba.conf", "postgres")
        loaded = self.sql("SELECT pg_catalog.pg_conf_load_time()")
        self.sql("SELECT pg_catalog.pg_reload_conf()")
        # the postmaster reloads when it handles the SIGHUP; a backend it
        # starts after that reports the new load time and has the new file
        while self.sql("SELECT pg_catalog.pg_conf_load_time()") == loaded:
            pass
        rules = self.sql("SELECT count(*) FROM pg_catalog.pg_hba_file_rules "
                         "WHERE error IS NULL")
        assert int(rules) == len([ln for ln in text.splitlines() if ln.strip()])

    def stop(self) -> None:
        subprocess.run([RUNUSER, "-u", "postgres", "--", str(BIN / "pg_ctl"), "-D",
                        str(self.data), "-m", "immediate", "-w", "stop"],
                       capture_output=True, cwd="/", timeout=60)
        shutil.rmtree(self.dir, ignore_errors=True)


@pytest.fixture(scope="module")
def cluster() -> Iterator[HbaCluster]:
    c = HbaCluster()
    try:
        yield c
    finally:
        c.stop()


@pytest.fixture
def hba(cluster: HbaCluster) -> Iterator[HbaCluster]:
    """The cluster, its pg_hba.conf back to Debian's after the test."""
    yield cluster
    cluster.set_hba(DEBIAN_HBA)
    cluster.sql("TRUNCATE canary")


class ProxyAsPostgres:
    """corgipile proxy with the OS identity postgres."""

    def __init__(self, *args: str) -> None:
        env = dict(os.environ, PYTHONPATH=str(CLIENT))
        for key in ("PGHOST", "PGPORT", "PGUSER", "PGDATABASE", "PGPASSWORD"):
            env.pop(key, None)
        self.proc = subprocess.Popen(
            [sys.executable, "-P", str(HERE / "proxy_as_user.py"), "postgres",
             "--listen", "127.0.0.1:0", *args],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        m = re.search(r"listening on ([\d.]+):(\d+)", line)
        if not m:
            self.proc.kill()
            _, err = self.proc.communicate()
            raise RuntimeError(f"the proxy did not start: {line!r} {err}")
        self.port = int(m.group(2))
        uid = os.stat(f"/proc/{self.proc.pid}").st_uid
        assert uid == int(subprocess.run(["id", "-u", "postgres"], capture_output=True,
                                         text=True).stdout), "the proxy is not running as postgres"

    def stop(self) -> str:
        self.proc.terminate()
        try:
            _, err = self.proc.communicate(timeout=20)
        except subprocess.TimeoutExpired:  # pragma: no cover
            self.proc.kill()
            _, err = self.proc.communicate()
        assert "Traceback" not in err, err
        return err


@pytest.fixture
def start_proxy() -> Iterator:
    started: list[ProxyAsPostgres] = []

    def start(*args: str) -> ProxyAsPostgres:
        p = ProxyAsPostgres(*args)
        started.append(p)
        return p

    yield start
    for p in started:
        p.stop()


def nobody_psql(port: int, user: str, sql: str, password: str | None = None
                ) -> subprocess.CompletedProcess[str]:
    """psql as the OS user nobody, never prompting (-w)."""
    env = {"PATH": "/usr/bin:/bin", "PGCONNECT_TIMEOUT": "20"}
    if password is not None:
        env["PGPASSWORD"] = password
    return subprocess.run(
        [RUNUSER, "-u", "nobody", "--", "env", *[f"{k}={v}" for k, v in env.items()],
         str(PSQL), "-X", "-At", "-w", "-h", "127.0.0.1", "-p", str(port), "-U", user,
         "-d", "postgres", "-c", sql],
        capture_output=True, text=True, cwd="/", timeout=60, env={"PATH": "/usr/sbin:/usr/bin:/sbin:/bin"})


READ_FILE = "select pg_read_file('PG_VERSION')"


def assert_refused(out: subprocess.CompletedProcess[str]) -> None:
    assert out.returncode != 0, out.stdout
    assert "15" not in out.stdout
    assert "admitted user" in out.stderr and "without asking for a password" in out.stderr, \
        out.stderr
    assert "--unsafe-allow-passwordless" in out.stderr  # the hint


# -- the issue's reproduction ------------------------------------------------------------------

def test_issue_reproduction_unix_socket_upstream_refused_at_start(hba):
    """`corgipile proxy --listen 127.0.0.1:PORT` run as postgres with the server
    on the Unix socket (PGHOST, as the issue ran it): the proxy does not start."""
    env = dict(os.environ, PYTHONPATH=str(CLIENT), PGHOST=str(hba.sock),
               PGPORT=str(hba.port))
    out = subprocess.run([sys.executable, "-P", str(HERE / "proxy_as_user.py"), "postgres",
                          "--listen", "127.0.0.1:0"], capture_output=True, text=True,
                         env=env, timeout=60)
    assert out.returncode == 2, out
    assert "is a Unix socket" in out.stderr and "--allow-unix-socket-upstream" in out.stderr


def test_issue_reproduction_peer_session_refused(hba, start_proxy):
    """With the socket allowed explicitly, peer would admit the proxy's own
    OS user postgres: the session is refused, FATAL, and nobody reads no file."""
    proxy = start_proxy("--upstream", f"host={hba.sock} port={hba.port}",
                        "--allow-unix-socket-upstream")
    assert_refused(nobody_psql(proxy.port, "postgres", READ_FILE))
    # another role: peer fails on the server (OS user postgres is not alice)
    out = nobody_psql(proxy.port, "alice", "select 1")
    assert out.returncode != 0 and "Peer authentication failed" in out.stderr, out.stderr
    # a password does not help: peer never asks for it, the gate refuses
    assert_refused(nobody_psql(proxy.port, "postgres", READ_FILE, SUPERUSER_PW))
    err = proxy.stop()
    assert "refused a session" in err


# -- TCP upstream (the default) ----------------------------------------------------------------

def test_scram_needs_the_clients_password(hba, start_proxy):
    proxy = start_proxy("--upstream", f"host=127.0.0.1 port={hba.port}")
    out = nobody_psql(proxy.port, "postgres", READ_FILE)
    assert out.returncode != 0 and "no password supplied" in out.stderr, out.stderr
    out = nobody_psql(proxy.port, "postgres", READ_FILE, "wrong")
    assert out.returncode != 0 and "password authentication failed" in out.stderr, out.stderr
    out = nobody_psql(proxy.port, "postgres", READ_FILE, SUPERUSER_PW)
    assert out.returncode == 0 and out.stdout.strip() == "15", out.stderr
    out = nobody_psql(proxy.port, "alice", "select current_user", ALICE_PW)
    assert out.returncode == 0 and out.stdout.strip() == "alice", out.stderr


@pytest.mark.parametrize("method", ["md5", "password"])
def test_other_password_methods_relayed(hba, start_proxy, method):
    hba.set_hba(DEBIAN_HBA.replace("scram-sha-256", method))
    proxy = start_proxy("--upstream", f"host=127.0.0.1 port={hba.port}")
    out = nobody_psql(proxy.port, "alice", "select current_user")
    assert out.returncode != 0 and "no password supplied" in out.stderr, out.stderr
    out = nobody_psql(proxy.port, "alice", "select current_user", ALICE_PW)
    assert out.returncode == 0 and out.stdout.strip() == "alice", out.stderr


def test_trust_for_loopback_refused(hba, start_proxy):
    """host all all 127.0.0.1/32 trust: direct, anyone on the host is any
    role; through the proxy the session is refused all the same (the proxy
    cannot tell a trusting server from a careless one), password or not."""
    hba.set_hba(DEBIAN_HBA.replace("127.0.0.1/32            scram-sha-256",
                                   "127.0.0.1/32            trust"))
    proxy = start_proxy("--upstream", f"host=127.0.0.1 port={hba.port}")
    assert_refused(nobody_psql(proxy.port, "postgres", READ_FILE))
    assert_refused(nobody_psql(proxy.port, "alice", "select 1", ALICE_PW))


def test_unsafe_flag_admits_trust(hba, start_proxy):
    """The operator's explicit opt-in, loudly named and logged."""
    hba.set_hba(DEBIAN_HBA.replace("127.0.0.1/32            scram-sha-256",
                                   "127.0.0.1/32            trust"))
    proxy = start_proxy("--upstream", f"host=127.0.0.1 port={hba.port}",
                        "--unsafe-allow-passwordless")
    out = nobody_psql(proxy.port, "alice", "select current_user")
    assert out.returncode == 0 and out.stdout.strip() == "alice", out.stderr
    assert "--unsafe-allow-passwordless" in proxy.stop()


# -- nothing of the client's reaches the server before it authenticated -------------------------

def _startup(user: str) -> bytes:
    body = struct.pack("!i", 196608) + b"".join(
        k.encode() + b"\0" + v.encode() + b"\0"
        for k, v in (("user", user), ("database", "postgres"))) + b"\0"
    return struct.pack("!i", len(body) + 4) + body


def _query(sql: str) -> bytes:
    body = sql.encode() + b"\0"
    return b"Q" + struct.pack("!i", len(body) + 4) + body


def _read_all(sock: socket.socket) -> bytes:
    sock.settimeout(30)
    out = b""
    while True:
        try:
            chunk = sock.recv(65536)
        except (ConnectionResetError, TimeoutError):
            break
        if not chunk:
            break
        out += chunk
    return out


def test_query_sent_ahead_never_runs_on_trust(hba, start_proxy):
    """A client that sends its query right behind the startup packet, hoping
    the server reads it once it admitted the proxy: refused, not run."""
    hba.set_hba(DEBIAN_HBA.replace("127.0.0.1/32            scram-sha-256",
                                   "127.0.0.1/32            trust"))
    proxy = start_proxy("--upstream", f"host=127.0.0.1 port={hba.port}")
    with socket.create_connection(("127.0.0.1", proxy.port)) as s:
        s.sendall(_startup("postgres") + _query("INSERT INTO canary VALUES ('ran')"))
        answer = _read_all(s)
    assert answer[:1] == b"E" and b"28000" in answer and b"without asking" in answer
    assert b"R" not in answer[:1]  # not even AuthenticationOk reached the client
    assert hba.sql("SELECT count(*) FROM canary") == "0\n"


def test_query_sent_ahead_is_not_a_password(hba, start_proxy):
    """Under SCRAM, bytes that do not answer the server's request are held,
    and the startup timeout closes the connection: the server never reads
    them (it would take a Query where it expects a SASL response)."""
    proxy = start_proxy("--upstream", f"host=127.0.0.1 port={hba.port}",
                        "--startup-timeout", "2")
    with socket.create_connection(("127.0.0.1", proxy.port)) as s:
        s.sendall(_startup("alice") + _query("INSERT INTO canary VALUES ('ran')"))
        answer = _read_all(s)
    # AuthenticationSASL (code 10), then the proxy's timeout error
    assert answer[:1] == b"R" and struct.unpack_from("!i", answer, 5)[0] == 10
    assert b"did not finish within 2 s" in answer
    assert hba.sql("SELECT count(*) FROM canary") == "0\n"
    log = (hba.dir / "server.log").read_text()
    assert "invalid frontend message type" not in log
