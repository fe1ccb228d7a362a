"""What the tests look at in the server's processes: the shared memory a
backend maps and the parallel workers a leader runs."""
from __future__ import annotations

from pathlib import Path

import pytest


def dsm_mappings(pid: int) -> int:
    """Dynamic shared memory segments mapped into a backend (POSIX shm)."""
    try:
        maps = Path(f"/proc/{pid}/maps").read_text()
    except (FileNotFoundError, PermissionError):
        pytest.skip("the server's processes are not readable from here")
    return sum(1 for line in maps.splitlines() if "/dev/shm/PostgreSQL." in line)


def workers_of(conn, pid: int) -> list[int]:
    """The parallel workers of leader pid, as pg_stat_activity lists them."""
    return [r[0] for r in conn.execute(
        "SELECT pid FROM pg_stat_activity WHERE leader_pid = %s AND pid <> %s", (pid, pid))]
