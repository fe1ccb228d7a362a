"""``corgipile proxy``: the CLI subcommand (cli.py adds it)."""

from __future__ import annotations

import argparse
import logging
import sys
from typing import Any

from .config import Settings
from .server import parse_listen, prepare, serve

__all__ = ["add_subcommand"]

PROXY_HELP = "serve TRAIN BY / PREDICT BY to any PostgreSQL client (a wire-protocol proxy)"


def add_subcommand(sub: Any) -> None:
    """``corgipile proxy``, for cli.py."""
    p = sub.add_parser("proxy", help=PROXY_HELP, description=PROXY_HELP + (
        ". Clients connect to --listen; everything but TRAIN BY / PREDICT BY passes "
        "to --upstream unchanged, and the server authenticates every user: a session the "
        "server admits without asking the client for a password is refused."))
    p.add_argument("--listen", default="127.0.0.1:6432", metavar="HOST:PORT",
                   help="where clients connect (default 127.0.0.1:6432; port 0: any)")
    p.add_argument("--upstream", default=None, metavar="CONNINFO",
                   help='the server by TCP, e.g. "host=db port=5432" (default: PGHOST / '
                        'PGPORT, then localhost:5432)')
    p.add_argument("--allow-unix-socket-upstream", action="store_true",
                   help='accept a Unix-socket --upstream ("host=/var/run/postgresql"); the '
                        "server sees the proxy's OS user there, so its pg_hba.conf local "
                        "lines must ask for a password (peer sessions are refused)")
    p.add_argument("--unsafe-allow-passwordless", action="store_true",
                   help="UNSAFE: admit sessions the server lets in without asking the client "
                        "for a password (trust, peer, ident): every client of the proxy then "
                        "logs in with the proxy's own identity")
    p.add_argument("--max-connections", type=int, default=Settings.max_connections,
                   metavar="N", help="client connections at once per process; more get "
                   "SQLSTATE 53300 (default %(default)s, lowered to what ulimit -n allows)")
    p.add_argument("--startup-timeout", type=float, default=Settings.startup_timeout,
                   metavar="SECONDS", help="time a client has from connecting to the end of "
                   "authentication (default %(default)s, as authentication_timeout)")
    p.add_argument("--analysis-timeout", type=float, default=Settings.analysis_timeout,
                   metavar="SECONDS", help="time the analysis of one query text with "
                   "TRAIN BY / PREDICT BY may take (default %(default)s)")
    p.add_argument("--loop", choices=("auto", "uvloop", "asyncio"), default="auto",
                   help="event loop (default: uvloop when installed)")
    p.add_argument("--workers", type=int, default=1, metavar="N",
                   help="processes accepting connections (default 1)")
    p.set_defaults(func=_cmd_proxy)


def _cmd_proxy(args: argparse.Namespace) -> int:
    logging.basicConfig(level=logging.INFO, format="corgipile proxy: %(message)s")
    settings = Settings(unsafe_allow_passwordless=args.unsafe_allow_passwordless,
                        startup_timeout=args.startup_timeout,
                        max_connections=args.max_connections,
                        analysis_timeout=args.analysis_timeout)
    try:
        up, settings = prepare(args.upstream, settings, args.allow_unix_socket_upstream)
        parse_listen(args.listen)
    except ValueError as exc:
        print(f"corgipile proxy: {exc}", file=sys.stderr)
        return 2

    def ready(where: str) -> None:
        print(f"corgipile proxy: listening on {where}, server {up}", flush=True)

    try:
        if settings.unsafe_allow_passwordless:
            logging.getLogger("corgipile.proxy").warning(
                "--unsafe-allow-passwordless: sessions the server admits without a password "
                "are let in; every client that reaches %s logs in with this process's "
                "identity wherever pg_hba.conf trusts it", args.listen)
        serve(args.listen, up, on_ready=ready, loop=args.loop, workers=args.workers,
              settings=settings, allow_unix_socket_upstream=args.allow_unix_socket_upstream)
    except KeyboardInterrupt:
        return 0
    return 0
