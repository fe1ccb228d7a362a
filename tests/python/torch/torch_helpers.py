"""Helpers of the corgipile.torch tests: tables to read, and a launcher
for multi-rank runs (torchrun, gloo on loopback)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def make_table(conn, name: str = "pts", n: int = 5000, d: int = 4) -> None:
    """n rows, ids 1..n in storage order, label id % 3, features [id, ...]."""
    conn.execute(f"CREATE TABLE {name} (id int, label int, features float4[])")
    conn.execute(
        f"INSERT INTO {name} SELECT i, i % 3, "
        f"ARRAY[i::float4] || array_fill(0.5::float4, ARRAY[{d - 1}]) "
        f"FROM generate_series(1, {n}) i")
    conn.execute(f"ANALYZE {name}")


def free_port() -> int:
    """A free TCP port in this engineer's torch.distributed range, else any."""
    lo, hi = (int(x) for x in os.environ.get("CORGIPILE_TORCH_PORTS", "56700-56799").split("-"))
    for port in range(lo, hi + 1):
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
                return port
            except OSError:
                continue
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def torchrun(tmp_path: Path, nproc: int, *args: str, timeout: int = 120) -> list[dict]:
    """Run dist_job.py on nproc ranks with torchrun; each rank's JSON output."""
    out = tmp_path / "out"
    out.mkdir(exist_ok=True)
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", str(nproc),
           "--master_addr", "127.0.0.1", "--master_port", str(free_port()),
           str(HERE / "dist_job.py"), "--out", str(out), *args]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONWARNINGS": "ignore"}
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
    assert r.returncode == 0, f"torchrun failed:\n{r.stdout}\n{r.stderr}"
    return [json.loads((out / f"rank{i}.json").read_text()) for i in range(nproc)]
