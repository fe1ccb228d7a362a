"""Listening for ``corgipile proxy``: start() on a running event loop,
serve() until interrupted (uvloop or asyncio, one process or several
accepting on one socket)."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import os
import signal
import socket
import sys
from collections.abc import Callable
from typing import Any

from . import analysis
from .config import Settings, fd_connection_limit
from .session import ClientSide, ProxySession
from .upstream import Upstream

__all__ = ["parse_listen", "prepare", "start", "serve"]

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


def prepare(upstream: str | Upstream | None, settings: Settings | None,
            allow_unix_socket_upstream: bool) -> tuple[Upstream, Settings]:
    """The upstream, checked (Upstream.check), and the settings with the
    connection cap held to what the file descriptor limit allows."""
    up = upstream if isinstance(upstream, Upstream) else Upstream.parse(upstream)
    up.check(allow_unix_socket_upstream)
    settings = settings or Settings()
    cap = fd_connection_limit()
    if settings.max_connections > cap:
        logger.warning("--max-connections %d lowered to %d: the file descriptor limit "
                       "(ulimit -n) allows no more", settings.max_connections, cap)
        settings = dataclasses.replace(settings, max_connections=cap)
    if settings.max_connections < 1 or settings.startup_timeout <= 0 \
            or settings.analysis_timeout <= 0:
        raise ValueError("--max-connections, --startup-timeout and --analysis-timeout "
                         "must be positive")
    return up, settings


async def start(listen: str = "127.0.0.1:6432", upstream: str | Upstream | None = None,
                *, sock: socket.socket | None = None, settings: Settings | None = None,
                allow_unix_socket_upstream: bool = False) -> asyncio.base_events.Server:
    """Start the proxy on the running event loop and return its asyncio
    Server (``server.sockets[0].getsockname()`` for a port chosen by the OS).
    sock: a listening socket to accept on instead of binding listen.
    A Unix-socket upstream is refused unless allow_unix_socket_upstream
    (see Upstream.check); sessions the server admits without asking for a
    password are refused unless settings.unsafe_allow_passwordless (auth.py)."""
    up, settings = prepare(upstream, settings, allow_unix_socket_upstream)
    sessions: set[ProxySession] = set()
    loop = asyncio.get_running_loop()

    def factory() -> ClientSide:
        return ClientSide(up, sessions, settings)

    if sock is not None:
        return await loop.create_server(factory, sock=sock)
    host, port = parse_listen(listen)
    return await loop.create_server(factory, host, port, reuse_address=True)


def serve(listen: str = "127.0.0.1:6432", upstream: str | Upstream | None = None, *,
          on_ready: Callable[[str], Any] | None = None, loop: str = "auto",
          workers: int = 1, settings: Settings | None = None,
          allow_unix_socket_upstream: bool = False) -> None:
    """Run the proxy until interrupted. loop: "uvloop", "asyncio", or "auto"
    (uvloop when it is installed). workers > 1: that many processes accept
    on one listening socket (each connection stays in the process that
    accepted it). on_ready is called with "host:port" once it listens.
    settings and allow_unix_socket_upstream: as start()."""
    up, settings = prepare(upstream, settings, allow_unix_socket_upstream)
    if workers <= 1:
        def ready(server: Any) -> None:
            if on_ready is not None:
                host, port = server.sockets[0].getsockname()[:2]
                on_ready(f"{host}:{port}")

        _run_loop(loop, listen, up, settings, None, ready)
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
                    _run_loop(loop, listen, up, settings, sock, lambda server: None)
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


def _run_loop(loop: str, listen: str, up: Upstream, settings: Settings,
              sock: socket.socket | None, ready: Callable[[Any], Any]) -> None:
    async def main() -> None:
        server = await start(listen, up, sock=sock, settings=settings,
                             allow_unix_socket_upstream=True)  # checked by serve()
        # SIGTERM ends serve_forever, so that the analysis workers end too
        task = asyncio.current_task()
        assert task is not None
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, task.cancel)
        ready(server)
        try:
            async with server:
                await server.serve_forever()
        except asyncio.CancelledError:
            pass
        finally:
            analysis.shutdown()

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
        uvloop.run(main())  # asyncio.Runner with uvloop's loop, on Python 3.10 too
