"""``corgipile proxy``: TRAIN BY and PREDICT BY for every PostgreSQL client.

A pass-through proxy on asyncio that speaks PostgreSQL's v3 wire protocol.
It relays the startup and authentication exchange unchanged (the server
authenticates; the proxy holds no passwords), answers SSLRequest and
GSSENCRequest with 'N' as a server without TLS does, forwards
CancelRequest packets to the server, and passes every message through as
the bytes it came in, reading only the message headers, except Query and
Parse messages whose text holds TRAIN BY or PREDICT BY: those are
rewritten by :mod:`corgipile.proxy.rewrite` with the client's translator.

How a rewrite happens (see docs/proxy.md):

- the proxy waits until the server has answered everything the client
  sent before (every Sync and Query has its ReadyForQuery), then reads the
  catalog facts the translation needs (corgipile.train's signature, the
  models' classes) on the client's own connection, with a named statement
  and portal and a Sync of its own, whose answers the client never sees;
- it sends the rewritten message in place of the client's, and until that
  batch's ReadyForQuery it reads the server's answers message by message,
  to move the position of a server error back into the client's text;
- a statement the proxy refuses is replaced by a statement that fails on
  the server with a syntax error, whose ErrorResponse the proxy then
  rewrites with its own SQLSTATE, message and position. The server thus
  does the error recovery itself (ignoring the rest of an extended-protocol
  batch until Sync, aborting an open transaction block), and the
  ReadyForQuery status the client sees is the server's own.

Malformed input (a bad length, garbage) closes that one connection.

The code: session.py (one connection: the state machine above),
catalog.py (the lookups on the client's connection), rewrite.py
(the translation), wire.py (message framing), upstream.py (the
server's address), server.py (listening: start, serve) and
cli.py (the subcommand). This package re-exports the public names.
"""

from __future__ import annotations

from .cli import add_subcommand
from .config import Settings
from .server import serve, start
from .upstream import Upstream

__all__ = ["Upstream", "Settings", "start", "serve", "add_subcommand"]
