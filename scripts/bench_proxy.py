#!/usr/bin/env python3
"""pgbench select-only through `corgipile proxy` against pgbouncer, same run.

Runs against the server given by PGHOST (a Unix socket directory), PGPORT
and PGUSER, which must also listen on 127.0.0.1. pgbouncer logs in to it
without a password (over the Unix socket; over 127.0.0.1 too with
--tcp-upstream), and so does pgbench directly over TCP unless PGPASSFILE
holds the password: scripts/pgcluster.sh's clusters trust both, and after
`pgcluster.sh password` (the demo cluster) the Unix socket only, with
PGPASSFILE set by `pgcluster.sh env`. pgbench's tables go into the
database --dbname (created if missing).

The contenders, each in front of the same server:

- direct: pgbench straight to the server over TCP (the ceiling);
- corgipile proxy: `corgipile proxy` as users run it (one process, the
  default event loop), Unix-socket upstream (and TCP with --tcp-upstream);
- pgbouncer: Debian's pgbouncer (`apt-get install pgbouncer`) in session
  mode, Unix-socket upstream (and TCP with --tcp-upstream), started here
  as the postgres user with a configuration of its own.

Each round runs, for each pgbench protocol (--modes: simple, prepared),
every contender alone, in an order rotated from round to round so that
no contender always runs first or last; then the proxy and pgbouncer at
the same time, one pgbench each (same clients and threads), so that both
meet the same load from the rest of the machine. The machine this runs on
is shared: every TPS figure moves with what else runs, so the ratio that
matters is taken within a round (proxy TPS / pgbouncer TPS, alone a few
seconds apart, and side by side at the same time) and reported as the
median of the rounds with its range. The CPU time each proxy process used
per transaction (user + system, from /proc) depends much less on the load
and is reported beside it.

    source /work/pg/NAME.env   # or: eval "$(scripts/pgcluster.sh env DIR PORT)"
    .venv/bin/python scripts/bench_proxy.py --rounds 5 --pgbouncer-port 6433
"""

from __future__ import annotations

import argparse
import datetime
import math
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PG_BIN = Path(os.environ.get("PG_BIN", "/usr/lib/postgresql/15/bin"))
PGBOUNCER = shutil.which("pgbouncer") or "/usr/sbin/pgbouncer"


def run(cmd: list[str], env: dict[str, str]) -> str:
    r = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed:\n{r.stdout}\n{r.stderr}")
    return r.stdout


def start_proxy(upstream: str, loop: str = "auto", workers: int = 1
                ) -> tuple[subprocess.Popen[str], int, int]:
    """The proxy as users start it; (process, port, pid whose CPU counts)."""
    env = dict(os.environ, PYTHONPATH=str(ROOT / "python_client"))
    proc = subprocess.Popen([sys.executable, "-P", "-m", "corgipile", "proxy", "--listen",
                             "127.0.0.1:0", "--upstream", upstream, "--loop", loop,
                             # the benchmark cluster trusts local connections
                             "--unsafe-allow-passwordless", "--allow-unix-socket-upstream",
                             "--workers", str(workers)],
                            stdout=subprocess.PIPE, text=True, env=env)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    m = re.search(r"listening on [\d.]+:(\d+)", line)
    if not m:
        proc.kill()
        sys.exit(f"the proxy did not start: {line!r}")
    return proc, int(m.group(1)), proc.pid


def start_pgbouncer(workdir: Path, port: int, host: str, server_port: int, user: str
                    ) -> tuple[subprocess.Popen[str], int]:
    """pgbouncer in session mode as the postgres OS user (it refuses to run
    as root); (process, pid of pgbouncer itself)."""
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / "users.txt").write_text(f'"{user}" ""\n')
    pidfile = workdir / "pgbouncer.pid"
    ini = workdir / "pgbouncer.ini"
    ini.write_text(f"""[databases]
* = host={host} port={server_port}
[pgbouncer]
listen_addr = 127.0.0.1
listen_port = {port}
unix_socket_dir =
auth_type = trust
auth_file = {workdir / 'users.txt'}
pool_mode = session
max_client_conn = 200
default_pool_size = 20
server_login_retry = 1
logfile = {workdir / 'pgbouncer.log'}
pidfile = {pidfile}
ignore_startup_parameters = extra_float_digits
""")
    cmd = [PGBOUNCER, str(ini)]
    if os.geteuid() == 0:
        shutil.chown(workdir, "postgres")
        for f in workdir.iterdir():
            shutil.chown(f, "postgres")
        cmd = ["runuser", "-u", "postgres", "--", *cmd]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            cwd="/")
    # ready once its pid file names a live process and its port answers
    for _ in range(600):
        if proc.poll() is not None:
            sys.exit(f"pgbouncer did not start:\n{proc.stdout.read() if proc.stdout else ''}")
        try:
            pid = int(pidfile.read_text().strip())
            import socket

            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return proc, pid
        except (FileNotFoundError, ValueError, OSError):
            time.sleep(0.05)
    proc.kill()
    sys.exit("pgbouncer did not start listening")


def cpu_seconds(pid: int | None) -> float:
    """User + system CPU time of a process and its children (the workers)."""
    if pid is None:
        return 0.0
    ticks = os.sysconf("SC_CLK_TCK")
    total = 0.0
    children = Path(f"/proc/{pid}/task/{pid}/children")
    pids = [pid] + ([int(c) for c in children.read_text().split()] if children.exists() else [])
    for p in pids:
        fields = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()
        total += (int(fields[11]) + int(fields[12])) / ticks
    return total


@dataclass
class Contender:
    name: str
    port: int
    pid: int | None
    tps: dict[str, list[float]] = field(default_factory=dict)
    cpu: dict[str, list[float]] = field(default_factory=dict)
    # runs at the same time as its pair (the proxy and pgbouncer in front
    # of the same upstream)
    paired_tps: dict[str, list[float]] = field(default_factory=dict)
    paired_cpu: dict[str, list[float]] = field(default_factory=dict)


def pgbench(contenders: list[Contender], mode: str, args: argparse.Namespace,
            env: dict[str, str]) -> list[tuple[float, float]]:
    """pgbench through each contender at the same time: for each, TPS and
    the proxy's CPU microseconds per transaction (0 without its pid)."""
    before = [cpu_seconds(c.pid) for c in contenders]
    procs = [subprocess.Popen(
        [str(PG_BIN / "pgbench"), "-h", "127.0.0.1", "-p", str(c.port), "-n", "-S", "-M", mode,
         "-c", str(args.clients), "-j", str(args.threads), "-T", str(args.seconds),
         args.dbname], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for c in contenders]
    outs = []
    for c, p in zip(contenders, procs, strict=False):
        try:
            outs.append(p.communicate(timeout=args.seconds + 120))
        except subprocess.TimeoutExpired:
            # once seen with pgbouncer on a loaded machine: pgbench waiting
            # for answers that never came; the run counts as failed
            p.kill()
            out, err = p.communicate()
            outs.append((out, err + f"\npgbench through {c.name} did not end: killed"))
    used = [cpu_seconds(c.pid) - b for c, b in zip(contenders, before, strict=False)]
    results = []
    for c, p, (out, err), u in zip(contenders, procs, outs, used, strict=False):
        m = re.search(r"tps = ([\d.]+) \(without initial connection time\)", out)
        n = re.search(r"number of transactions actually processed: (\d+)", out)
        if p.returncode != 0 or not (m and n):
            print(f"pgbench through {c.name} failed (the run is left out):\n{out}\n{err}",
                  file=sys.stderr, flush=True)
            results.append((math.nan, math.nan))
            continue
        results.append((float(m.group(1)), 1e6 * u / max(1, int(n.group(1)))))
    return results


def spread(values: list[float]) -> str:
    values = [v for v in values if not math.isnan(v)]
    if not values:
        return "no run"
    return f"{statistics.median(values):.2f} ({min(values):.2f}-{max(values):.2f})"


def median(values: list[float]) -> float:
    values = [v for v in values if not math.isnan(v)]
    return statistics.median(values) if values else math.nan


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--clients", type=int, default=4)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--seconds", type=int, default=8)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--scale", type=int, default=1)
    p.add_argument("--modes", default="simple,prepared",
                   help="pgbench protocols (-M), comma-separated (default %(default)s)")
    p.add_argument("--dbname", default="corgipile_bench_proxy")
    p.add_argument("--pgbouncer-port", type=int, default=6433,
                   help="where pgbouncer listens (default %(default)s; 0: no pgbouncer)")
    p.add_argument("--tcp-upstream", action="store_true",
                   help="also run the proxy and pgbouncer with a TCP upstream")
    p.add_argument("--no-direct", action="store_true", help="leave out direct connections")
    p.add_argument("--reference", action="append", default=[], metavar="NAME=PORT[/PID]",
                   help="also measure another proxy already listening on 127.0.0.1:PORT; "
                        "with PID, its CPU time too")
    args = p.parse_args()
    modes = args.modes.split(",")
    sock, port = os.environ["PGHOST"], int(os.environ["PGPORT"])
    user = os.environ.get("PGUSER") or "postgres"
    env = dict(os.environ)
    exists = run([str(PG_BIN / "psql"), "-X", "-At", "-d", "postgres", "-c",
                  f"SELECT 1 FROM pg_database WHERE datname = '{args.dbname}'"], env)
    if not exists.strip():
        run([str(PG_BIN / "createdb"), args.dbname], env)
    run([str(PG_BIN / "pgbench"), "-i", "-q", "-s", str(args.scale), args.dbname], env)

    upstreams = [("Unix-socket upstream", sock)]
    if args.tcp_upstream:
        upstreams.append(("TCP upstream", "127.0.0.1"))
    procs: list[subprocess.Popen[str]] = []
    contenders: list[Contender] = []
    if not args.no_direct:
        contenders.append(Contender("direct (TCP)", port, None))
    tmp = Path(tempfile.mkdtemp(prefix="bench-proxy-"))
    os.chmod(tmp, 0o755)
    try:
        for k, (label, host) in enumerate(upstreams):
            proc, pport, pid = start_proxy(f"host={host} port={port}")
            procs.append(proc)
            contenders.append(Contender(f"corgipile proxy, {label}", pport, pid))
            if args.pgbouncer_port:
                bproc, bpid = start_pgbouncer(tmp / f"pgbouncer{k}", args.pgbouncer_port + k,
                                              host, port, user)
                procs.append(bproc)
                contenders.append(Contender(f"pgbouncer (session), {label}",
                                            args.pgbouncer_port + k, bpid))
        for ref in args.reference:
            name, _, where = ref.rpartition("=")
            rport, _, rpid = where.partition("/")
            contenders.append(Contender(name, int(rport), int(rpid) if rpid else None))
        for c in contenders:
            for d in (c.tps, c.cpu, c.paired_tps, c.paired_cpu):
                d.update({m: [] for m in modes})
        pairs = [(proxy, bouncer) for proxy in contenders for bouncer in contenders
                 if proxy.name.startswith("corgipile proxy, ")
                 and bouncer.name == "pgbouncer (session), " + proxy.name.split(", ", 1)[1]]
        load = os.getloadavg()
        start = datetime.datetime.now(datetime.timezone.utc)
        for r in range(args.rounds):
            order = contenders[r % len(contenders):] + contenders[:r % len(contenders)]
            for mode in modes:
                for c in order:
                    [(t, us)] = pgbench([c], mode, args, env)
                    c.tps[mode].append(t)
                    c.cpu[mode].append(us)
                for pair in pairs:
                    for c, (t, us) in zip(pair, pgbench(list(pair), mode, args, env), strict=False):
                        c.paired_tps[mode].append(t)
                        c.paired_cpu[mode].append(us)
            print(f"round {r + 1}: " + "; ".join(
                f"{c.name} " + "/".join(f"{c.tps[m][-1]:.0f}" for m in modes)
                for c in contenders) + "".join(
                "; at the same time, proxy-pgbouncer " + "/".join(
                    f"{a.paired_tps[m][-1]:.0f}-{b.paired_tps[m][-1]:.0f}" for m in modes)
                for a, b in pairs), file=sys.stderr, flush=True)
        load_after = os.getloadavg()
    finally:
        for proc in procs:
            proc.terminate()
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
        shutil.rmtree(tmp, ignore_errors=True)

    commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
                            capture_output=True, text=True).stdout.strip()
    print(f"{start:%Y-%m-%d %H:%M} UTC, commit {commit}; pgbench -n -S -c {args.clients} "
          f"-j {args.threads} -T {args.seconds}, scale {args.scale}, {args.rounds} rounds; "
          f"{platform.node()}, {os.cpu_count()} CPUs, {platform.platform()}, Python "
          f"{platform.python_version()}; load average (1 min) {load[0]:.1f} before, "
          f"{load_after[0]:.1f} after")
    for mode in modes:
        print(f"\n-M {mode}:\n")
        print("| path | TPS median | runs | CPU µs / transaction (median, range) |")
        print("|---|---:|---|---:|")
        for c in contenders:
            runs = ", ".join(f"{v:.0f}" for v in c.tps[mode])
            cpu = [v for v in c.cpu[mode] if not math.isnan(v)]
            us = (f"{statistics.median(cpu):.1f} ({min(cpu):.1f}-{max(cpu):.1f})"
                  if c.pid and cpu else "")
            print(f"| {c.name} | {median(c.tps[mode]):.0f} | {runs} | {us} |")
        for proxy, bouncer in pairs:
            label = proxy.name.split(", ", 1)[1]
            ratios = [a / b for a, b in zip(proxy.tps[mode], bouncer.tps[mode], strict=False)]
            cpu = [a / b for a, b in zip(proxy.cpu[mode], bouncer.cpu[mode], strict=False) if b]
            print(f"\nproxy / pgbouncer, {label}, -M {mode}, one after the other: TPS ratio "
                  f"per round {', '.join(f'{x:.2f}' for x in ratios)}; median (range) "
                  f"{spread(ratios)}; CPU per transaction ratio {spread(cpu)}")
            ratios = [a / b for a, b in zip(proxy.paired_tps[mode], bouncer.paired_tps[mode], strict=False)]
            cpu = [a / b for a, b in zip(proxy.paired_cpu[mode], bouncer.paired_cpu[mode], strict=False) if b]
            pairs = zip(proxy.paired_tps[mode], bouncer.paired_tps[mode], strict=False)
            print(f"\nproxy / pgbouncer, {label}, -M {mode}, at the same time: TPS "
                  f"{', '.join(f'{a:.0f}/{b:.0f}' for a, b in pairs)}; "
                  f"ratio per round {', '.join(f'{x:.2f}' for x in ratios)}; median (range) "
                  f"{spread(ratios)}; CPU per transaction ratio {spread(cpu)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
