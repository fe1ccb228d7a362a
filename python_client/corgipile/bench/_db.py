"""Small helpers over psycopg shared by the runners."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql

Query = str | sql.SQL | sql.Composed


def one(conn: psycopg.Connection[Any], query: Query, params: Any = None) -> tuple[Any, ...]:
    """The single row a query returns (an error if it returns none)."""
    row: tuple[Any, ...] | None = conn.execute(query, params).fetchone()
    if row is None:
        raise psycopg.DataError(f"no row from: {query!r}")
    return row


def value(conn: psycopg.Connection[Any], query: Query, params: Any = None) -> Any:
    """The first column of the single row a query returns."""
    return one(conn, query, params)[0]


_LOCAL_HOSTS = ("localhost", "127.0.0.1", "::1")


class BackendCpu:
    """CPU seconds the session's server backend has used so far, read from
    /proc when the server runs on this machine (None otherwise).

    On a machine other jobs share, wall seconds count the time a query
    waited for a core; the backend's CPU seconds count only the work it did.
    /proc/<pid>/schedstat gives them in nanoseconds; where the kernel has no
    schedstat, /proc/<pid>/stat gives them in clock ticks (1/100 s).
    schedstat counts the backend's own thread: pass all_threads for a
    backend that starts helper threads (the engine's double buffering),
    whose CPU only /proc/<pid>/stat sums, exited threads included."""

    def __init__(self, conn: psycopg.Connection[Any]):
        self.pid = conn.info.backend_pid
        host = conn.info.host or ""
        self.path: Path | None = None
        if host.startswith("/") or host in _LOCAL_HOSTS:
            path = Path(f"/proc/{self.pid}")
            try:
                # a backend's title is "postgres: user db ..." (not another process
                # that has the pid in a container or on another host)
                title = (path / "cmdline").read_bytes().split(b"\0")[0]
            except OSError:
                title = b""
            if title.startswith(b"postgres:"):
                self.path = path

    @property
    def available(self) -> bool:
        return self.path is not None

    def read(self, all_threads: bool = False) -> float | None:
        if self.path is None:
            return None
        if not all_threads:
            try:
                return int((self.path / "schedstat").read_text().split()[0]) / 1e9
            except (OSError, ValueError, IndexError):
                pass
        try:
            # fields after the command (which may hold spaces): utime and stime
            # are the 12th and 13th of them
            fields = (self.path / "stat").read_text().rsplit(")", 1)[1].split()
            return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        except (OSError, ValueError, IndexError):
            return None


class Stopwatch:
    """Wall and backend CPU seconds of what runs inside ``with``."""

    def __init__(self, cpu: BackendCpu | None, all_threads: bool = False):
        self.cpu = cpu
        self.all_threads = all_threads
        self.seconds = 0.0
        self.cpu_seconds: float | None = None

    def __enter__(self) -> Stopwatch:
        self._c0 = self.cpu.read(self.all_threads) if self.cpu else None
        self._t0 = time.perf_counter()
        return self

    def __exit__(self, *exc: object) -> None:
        self.seconds = time.perf_counter() - self._t0
        c1 = self.cpu.read(self.all_threads) if self.cpu else None
        self.cpu_seconds = None if self._c0 is None or c1 is None else c1 - self._c0
