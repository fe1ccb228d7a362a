"""What the tests look at in the server's processes: the shared memory a
backend maps, the parallel workers a leader runs, and how far a training
running in another thread has got."""
from __future__ import annotations

import re
import threading
import time
from pathlib import Path

import psycopg
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


class TrainingInThread:
    """A training run on `session` in a thread, watched through its progress
    notices.  Tests that cancel a training wait for `reached(epoch)` instead
    of sleeping: later epochs on cached rows take milliseconds, so a fixed
    sleep can outlast a whole training, and a cancel that reaches the
    backend before it has read the query is dropped."""

    def __init__(self, session, query: str, params=()):
        self.session = session
        self.error: BaseException | None = None
        self.done_at: float | None = None
        self._epochs: list[int] = []
        self._seen = threading.Condition()
        session.execute("SET corgipile.progress = on")
        session.add_notice_handler(self._notice)
        self._thread = threading.Thread(target=self._run, args=(query, params))
        self._thread.start()

    def _notice(self, diag) -> None:
        found = re.search(r" epoch=(\d+)/", diag.message_primary or "")
        if found:
            with self._seen:
                self._epochs.append(int(found.group(1)))
                self._seen.notify_all()

    def _run(self, query: str, params) -> None:
        try:
            self.session.execute(query, params)
        except psycopg.Error as exc:
            self.error = exc
        self.done_at = time.monotonic()
        with self._seen:
            self._seen.notify_all()

    def reached(self, epoch: int, timeout: float = 60) -> None:
        """Wait until the server reports `epoch`; fail if it ends first."""
        with self._seen:
            ok = self._seen.wait_for(
                lambda: (self._epochs and self._epochs[-1] >= epoch) or self.done_at is not None,
                timeout=timeout)
        assert ok, f"no epoch {epoch} reported within {timeout} s"
        assert self.done_at is None, f"training ended before epoch {epoch}: {self.error}"

    def join(self, timeout: float = 30) -> None:
        self._thread.join(timeout=timeout)
        assert not self._thread.is_alive(), f"training still running {timeout} s later"
