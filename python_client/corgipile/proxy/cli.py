"""``corgipile proxy``: the CLI subcommand (cli.py adds it)."""

from __future__ import annotations

import argparse
import logging
import sys
from typing import Any

from .server import parse_listen, serve
from .upstream import Upstream

__all__ = ["add_subcommand"]

PROXY_HELP = "serve TRAIN BY / PREDICT BY to any PostgreSQL client (a wire-protocol proxy)"


def add_subcommand(sub: Any) -> None:
    """``corgipile proxy``, for cli.py."""
    p = sub.add_parser("proxy", help=PROXY_HELP, description=PROXY_HELP + (
        ". Clients connect to --listen; everything but TRAIN BY / PREDICT BY passes "
        "to --upstream unchanged, and the server authenticates every user."))
    p.add_argument("--listen", default="127.0.0.1:6432", metavar="HOST:PORT",
                   help="where clients connect (default 127.0.0.1:6432; port 0: any)")
    p.add_argument("--upstream", default=None, metavar="CONNINFO",
                   help='the server, e.g. "host=/var/run/postgresql port=5432" or '
                        '"host=db port=5432" (default: PGHOST / PGPORT)')
    p.add_argument("--loop", choices=("auto", "uvloop", "asyncio"), default="auto",
                   help="event loop (default: uvloop when installed)")
    p.add_argument("--workers", type=int, default=1, metavar="N",
                   help="processes accepting connections (default 1)")
    p.set_defaults(func=_cmd_proxy)


def _cmd_proxy(args: argparse.Namespace) -> int:
    logging.basicConfig(level=logging.INFO, format="corgipile proxy: %(message)s")
    try:
        up = Upstream.parse(args.upstream)
        parse_listen(args.listen)
    except ValueError as exc:
        print(f"corgipile proxy: {exc}", file=sys.stderr)
        return 2

    def ready(where: str) -> None:
        print(f"corgipile proxy: listening on {where}, server {up}", flush=True)

    try:
        serve(args.listen, up, on_ready=ready, loop=args.loop, workers=args.workers)
    except KeyboardInterrupt:
        return 0
    return 0
