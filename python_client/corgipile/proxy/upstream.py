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
        or URI; missing parts come from PGHOST / PGPORT, then libpq's defaults."""
        from psycopg.conninfo import conninfo_to_dict

        params = conninfo_to_dict(conninfo or "")
        host = str(params.get("host") or os.environ.get("PGHOST") or "/var/run/postgresql")
        port = str(params.get("port") or os.environ.get("PGPORT") or "5432")
        if "," in host or "," in port:
            raise ValueError("the upstream is one server: give a single host and port")
        return cls(host, int(port))

    @property
    def unix_path(self) -> str | None:
        if self.host.startswith("/") or self.host.startswith("@"):
            return os.path.join(self.host, f".s.PGSQL.{self.port}")
        return None

    async def connect(self, factory: Callable[[], asyncio.Protocol]
                      ) -> asyncio.Transport:
        loop = asyncio.get_running_loop()
        path = self.unix_path
        if path is not None:
            transport, _ = await loop.create_unix_connection(factory, path)
        else:
            transport, _ = await loop.create_connection(factory, self.host, self.port)
        return transport  # type: ignore[return-value]

    def __str__(self) -> str:
        return self.unix_path or f"{self.host}:{self.port}"
