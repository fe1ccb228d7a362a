"""The settings of one ``corgipile proxy`` (the CLI's flags, start()'s and
serve()'s keyword arguments), handed to every session."""

from __future__ import annotations

import resource
from dataclasses import dataclass

__all__ = ["Settings", "fd_connection_limit"]


@dataclass(frozen=True)
class Settings:
    # Admit sessions that the server lets in without asking the client for
    # any credential (trust, peer, ident): every client of the proxy then
    # logs in with the proxy's own identity. Off unless the operator says so.
    unsafe_allow_passwordless: bool = False
    # Seconds from accept until the server's first ReadyForQuery (startup
    # and authentication), as the server's authentication_timeout.
    startup_timeout: float = 60.0
    # Client connections at once (per process); one more gets SQLSTATE 53300.
    max_connections: int = 500
    # Seconds a TRAIN BY / PREDICT BY text may take to analyse.
    analysis_timeout: float = 10.0


def fd_connection_limit() -> int:
    """How many sessions this process can hold with its file descriptor
    limit: two sockets each, and some left for the listening socket, the
    analysis workers and a cancel connection."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return 1 << 20
    return max(1, (soft - 64) // 2)
