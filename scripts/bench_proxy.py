#!/usr/bin/env python3
"""pgbench select-only through `corgipile proxy` against direct connections.

Runs against the server given by PGHOST (a Unix socket directory), PGPORT
and PGUSER, which must also listen on 127.0.0.1 (scripts/pgcluster.sh
does). pgbench's tables go into the database --dbname (created if missing).
Each round runs, one after another: direct over TCP, through the proxy
(proxy to server over the Unix socket), through the proxy with a TCP
upstream. The medians over the rounds, and the ratios to direct TCP, are
printed as a Markdown table, with the CPU time each proxy process used per
transaction (user + system, from /proc): unlike TPS on a shared machine,
that figure does not depend on what else runs.

    PG_CONFIG=... scripts/with_demo_cluster.sh ...   # or any cluster
    .venv/bin/python scripts/bench_proxy.py --clients 4 --seconds 8 --rounds 3
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import re
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PG_BIN = Path(os.environ.get("PG_BIN", "/usr/lib/postgresql/15/bin"))


def run(cmd: list[str], env: dict[str, str]) -> str:
    r = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed:\n{r.stdout}\n{r.stderr}")
    return r.stdout


def start_proxy(upstream: str, loop: str = "auto", workers: int = 1
                ) -> tuple[subprocess.Popen[str], int]:
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
    return proc, int(m.group(1))


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


def tps(host: str, port: int, args: argparse.Namespace, env: dict[str, str],
        pid: int | None = None) -> tuple[float, float]:
    """TPS, and the proxy's CPU microseconds per transaction (0 without pid)."""
    before = cpu_seconds(pid)
    out = run([str(PG_BIN / "pgbench"), "-h", host, "-p", str(port), "-n", "-S",
               "-c", str(args.clients), "-j", str(args.threads), "-T", str(args.seconds),
               args.dbname], env)
    used = cpu_seconds(pid) - before
    m = re.search(r"tps = ([\d.]+) \(without initial connection time\)", out)
    n = re.search(r"number of transactions actually processed: (\d+)", out)
    assert m and n, out
    return float(m.group(1)), 1e6 * used / max(1, int(n.group(1)))


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--clients", type=int, default=4)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--seconds", type=int, default=8)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--scale", type=int, default=1)
    p.add_argument("--dbname", default="corgipile_bench_proxy")
    p.add_argument("--reference", action="append", default=[], metavar="NAME=PORT",
                   help="also measure another proxy already listening on 127.0.0.1:PORT "
                        "(e.g. pgbouncer in session mode); NAME=PORT/PID also reports "
                        "its CPU time")
    args = p.parse_args()
    sock, port = os.environ["PGHOST"], int(os.environ["PGPORT"])
    env = dict(os.environ)
    exists = run([str(PG_BIN / "psql"), "-X", "-At", "-d", "postgres", "-c",
                  f"SELECT 1 FROM pg_database WHERE datname = '{args.dbname}'"], env)
    if not exists.strip():
        run([str(PG_BIN / "createdb"), args.dbname], env)
    run([str(PG_BIN / "pgbench"), "-i", "-q", "-s", str(args.scale), args.dbname], env)

    load = os.getloadavg()
    procs = []
    paths: dict[str, tuple[int, int | None]] = {"direct (TCP)": (port, None)}
    for name, upstream, loop, workers in (
            ("corgipile proxy, Unix-socket upstream", f"host={sock} port={port}", "auto", 1),
            ("corgipile proxy, TCP upstream", f"host=127.0.0.1 port={port}", "auto", 1),
            ("corgipile proxy, Unix-socket upstream, asyncio loop",
             f"host={sock} port={port}", "asyncio", 1),
            ("corgipile proxy, Unix-socket upstream, --workers 2",
             f"host={sock} port={port}", "auto", 2)):
        proc, pport = start_proxy(upstream, loop, workers)
        procs.append(proc)
        paths[name] = (pport, proc.pid)
    for ref in args.reference:
        name, _, where = ref.rpartition("=")
        rport, _, rpid = where.partition("/")
        paths[name] = (int(rport), int(rpid) if rpid else None)
    results: dict[str, list[float]] = {name: [] for name in paths}
    cpu: dict[str, list[float]] = {name: [] for name in paths}
    try:
        for r in range(args.rounds):
            for name, (pport, pid) in paths.items():
                t, c = tps("127.0.0.1", pport, args, env, pid)
                results[name].append(t)
                cpu[name].append(c)
            print(f"round {r + 1}: " + ", ".join(f"{k} {v[-1]:.0f}" for k, v in results.items()),
                  file=sys.stderr)
    finally:
        for proc in procs:
            proc.terminate()
            proc.wait(timeout=30)
    base = statistics.median(results["direct (TCP)"])
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    print(f"pgbench -n -S -c {args.clients} -j {args.threads} -T {args.seconds}, scale "
          f"{args.scale}, median of {args.rounds} rounds; {now}; {platform.node()}, "
          f"{os.cpu_count()} CPUs, {platform.platform()}, Python {platform.python_version()}; "
          f"load average before {load[0]:.1f}, after {os.getloadavg()[0]:.1f}")
    print()
    print("| path | TPS (median) | runs | ratio to direct | proxy CPU µs / transaction |")
    print("|---|---:|---|---:|---:|")
    for name, values in results.items():
        med = statistics.median(values)
        runs = ", ".join(f"{v:.0f}" for v in values)
        us = f"{statistics.median(cpu[name]):.1f}" if paths[name][1] else ""
        print(f"| {name} | {med:.0f} | {runs} | {med / base:.2f} | {us} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
