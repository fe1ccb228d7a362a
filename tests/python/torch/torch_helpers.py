"""Helpers of the corgipile.torch tests: tables to read, and a launcher
for multi-rank runs (torchrun, gloo on loopback)."""

from __future__ import annotations

import json
import os
import signal
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


def make_uneven_table(conn, name: str = "uneven", n: int = 6000) -> None:
    """make_table's rows with holes: rows deleted in a pattern that leaves
    the pages (and so the blocks) holding very different numbers of rows,
    some none.  Vacuumed so the pages keep their places."""
    make_table(conn, name, n)
    conn.execute(f"DELETE FROM {name} WHERE (id / 250) % 4 = 1 OR ((id / 250) % 4 = 2 AND id % 3 > 0)")
    conn.execute(f"VACUUM {name}")


def torchrun(tmp_path: Path, nproc: int, *args: str, timeout: int = 120,
             job: str = "dist_job.py") -> list[dict]:
    """Run a job (dist_job.py) on nproc ranks with torchrun; each rank's
    JSON output.  A run that outlives timeout is killed with all its ranks
    (its own process group) and fails the test instead of hanging it."""
    out = tmp_path / "out"
    out.mkdir(exist_ok=True)
    # --standalone: the rendezvous store listens on a port the kernel hands
    # out (port 0), so runs side by side never race for one
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node",
           str(nproc), str(HERE / job), "--out", str(out), *args]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONWARNINGS": "ignore"}
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                         start_new_session=True)
    try:
        stdout, stderr = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired as e:
        os.killpg(p.pid, signal.SIGKILL)
        stdout, stderr = p.communicate()
        raise AssertionError(f"torchrun {job} did not finish in {timeout} s (a hang):\n"
                             f"{stdout[-3000:]}\n{stderr[-3000:]}") from e
    assert p.returncode == 0, f"torchrun failed:\n{stdout}\n{stderr}"
    return [json.loads((out / f"rank{i}.json").read_text()) for i in range(nproc)]
