"""Listening for ``corgipile proxy``: start() on a running event loop,
serve() until interrupted (uvloop or asyncio, one process or several
accepting on one socket)."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import socket
import sys
from collections.abc import Callable
from typing import Any

from .session import ClientSide, ProxySession
from .upstream import Upstream

__all__ = ["parse_listen", "start", "serve"]

logger = logging.getLogger("corgipile.proxy")


def parse_listen(listen: str) -> tuple[str, int]:
    """HOST:PORT, [IPv6]:PORT or PORT (on 127.0.0.1)."""
    host, sep, port = listen.rpartition(":")
    if not sep:
        host, port = "127.0.0.1", listen
    host = host.strip("[]") or "127.0.0.1"
    if not port.isdigit() or int(port) > 65535:
        raise ValueError(f"--listen takes HOST:PORT, not {listen!r}")
    return host, int(port)


async def start(listen: str = "127.0.0.1:6432", upstream: str | Upstream | None = None,
                *, sock: socket.socket | None = None) -> asyncio.base_events.Server:
    """Start the proxy on the running event loop and return its asyncio
    Server (``server.sockets[0].getsockname()`` for a port chosen by the OS).
    sock: a listening socket to accept on instead of binding listen."""
    up = upstream if isinstance(upstream, Upstream) else Upstream.parse(upstream)
    sessions: set[ProxySession] = set()
    loop = asyncio.get_running_loop()
    if sock is not None:
        return await loop.create_server(lambda: ClientSide(up, sessions), sock=sock)
    host, port = parse_listen(listen)
    return await loop.create_server(lambda: ClientSide(up, sessions), host, port,
                                    reuse_address=True)


def serve(listen: str = "127.0.0.1:6432", upstream: str | Upstream | None = None, *,
          on_ready: Callable[[str], Any] | None = None, loop: str = "auto",
          workers: int = 1) -> None:
    """Run the proxy until interrupted. loop: "uvloop", "asyncio", or "auto"
    (uvloop when it is installed). workers > 1: that many processes accept
    on one listening socket (each connection stays in the process that
    accepted it). on_ready is called with "host:port" once it listens."""
    up = upstream if isinstance(upstream, Upstream) else Upstream.parse(upstream)
    if workers <= 1:
        def ready(server: Any) -> None:
            if on_ready is not None:
                host, port = server.sockets[0].getsockname()[:2]
                on_ready(f"{host}:{port}")

        _run_loop(loop, listen, up, None, ready)
        return
    host, port = parse_listen(listen)
    sock = socket.create_server((host, port), family=socket.AF_INET6 if ":" in host
                                else socket.AF_INET, backlog=512)
    pids = []
    # SIGTERM ends the workers too (through the finally below)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    try:
        for _ in range(workers):
            pid = os.fork()
            if pid == 0:  # pragma: no cover - the child process
                signal.signal(signal.SIGTERM, signal.SIG_DFL)
                code = 0
                try:
                    _run_loop(loop, listen, up, sock, lambda server: None)
                except KeyboardInterrupt:
                    pass
                except BaseException:
                    logger.exception("proxy worker failed")
                    code = 1
                os._exit(code)
            pids.append(pid)
        if on_ready is not None:
            bound = sock.getsockname()
            on_ready(f"{bound[0]}:{bound[1]}")
        os.wait()  # one worker ended: end them all
    finally:
        for pid in pids:
            try:
                os.kill(pid, signal.SIGTERM)
                os.waitpid(pid, 0)
            except (ProcessLookupError, ChildProcessError):
                pass
        sock.close()


def _run_loop(loop: str, listen: str, up: Upstream, sock: socket.socket | None,
              ready: Callable[[Any], Any]) -> None:
    async def main() -> None:
        server = await start(listen, up, sock=sock)
        ready(server)
        async with server:
            await server.serve_forever()

    uvloop: Any = None
    if loop != "asyncio":
        try:
            import uvloop
        except ImportError:  # pragma: no cover - uvloop is optional
            if loop == "uvloop":
                raise
    if uvloop is None:
        asyncio.run(main())
    else:
        with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
            runner.run(main())
