"""Where ``corgipile proxy`` forwards to: one PostgreSQL server, by TCP host
and port or by Unix socket directory, as a libpq connection string names it."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["Upstream"]


@dataclass(frozen=True)
class Upstream:
    """Where the server is: a TCP host and port, or a Unix socket directory."""

    host: str
    port: int

    @classmethod
    def parse(cls, conninfo: str | None) -> Upstream:
        """From a libpq connection string ("host=/var/run/postgresql port=5432")
        or URI; missing parts come from PGHOST / PGPORT, then localhost:5432
        (TCP: unlike libpq, not the Unix socket, see check())."""
        from psycopg.conninfo import conninfo_to_dict

        params = conninfo_to_dict(conninfo or "")
        host = str(params.get("host") or os.environ.get("PGHOST") or "localhost")
        port = str(params.get("port") or os.environ.get("PGPORT") or "5432")
        if "," in host or "," in port:
            raise ValueError("the upstream is one server: give a single host and port")
        return cls(host, int(port))

    @property
    def unix_path(self) -> str | None:
        if self.host.startswith("/") or self.host.startswith("@"):
            return os.path.join(self.host, f".s.PGSQL.{self.port}")
        return None

    def check(self, allow_unix_socket: bool) -> None:
        """A Unix-socket upstream only when the operator asks for it: there
        the server sees the proxy's OS user, and pg_hba.conf's "local" lines
        (Debian's default: peer for everyone) are written for the users of
        this host, not for whoever reaches the proxy's port. The
        authentication gate (auth.py) refuses sessions those lines would
        admit without a password in any case; refusing the socket up front
        says so at start rather than at each client's login."""
        if self.unix_path is not None and not allow_unix_socket:
            raise ValueError(
                f"the upstream {self.unix_path} is a Unix socket, where the server sees the "
                "proxy's OS user (peer authentication would admit every client as that "
                "user): give a TCP address (--upstream \"host=127.0.0.1 port=5432\"), or "
                "--allow-unix-socket-upstream if its pg_hba.conf \"local\" lines ask for "
                "a password")

    async def connect(self, factory: Callable[[], asyncio.Protocol]
                      ) -> asyncio.Transport:
        loop = asyncio.get_running_loop()
        path = self.unix_path
        if path is not None:
            transport, _ = await loop.create_unix_connection(factory, path)
        else:
            transport, _ = await loop.create_connection(factory, self.host, self.port)
        return transport

    def __str__(self) -> str:
        return self.unix_path or f"{self.host}:{self.port}"
