"""One client connection of ``corgipile proxy`` and its server connection:
the asyncio protocols of both sockets and the session state machine between
them (startup and the authentication gate of auth.py, then relaying; a
Query / Parse holding TRAIN BY or PREDICT BY is rewritten, and the server's
answers to it are rewritten back). The whole design is described in the
package docstring and docs/proxy.md."""

from __future__ import annotations

import asyncio
import itertools
import logging
import secrets
import struct
from collections import deque
from typing import Any

from . import wire
from .analysis import analyze_text, may_rewrite
from .auth import AUTH_LIMIT, AuthGate, refusal, startup_user
from .catalog import cleanup_queries, lookup_queries, model_names, read_answers, translate
from .config import Settings
from .rewrite import Failure, map_position
from .upstream import Upstream

__all__ = ["ClientSide", "ProxySession"]

logger = logging.getLogger("corgipile.proxy")

# Query / Parse messages longer than this are passed on unread (a TRAIN BY
# statement is short; a 100 MB INSERT is streamed, not held in memory)
INSPECT_LIMIT = 1 << 20
# seconds to wait for the server's TCP handshake
CONNECT_TIMEOUT = 30
# seconds a connection over the cap has to send its startup packet
REFUSAL_TIMEOUT = 5

_INT32 = struct.Struct("!i")
_HEADER = struct.Struct("!Bi")
_MAX_MESSAGE = wire.MAX_MESSAGE
_EXTENDED = frozenset(b"PBDECH")
_ASYNC = frozenset(b"NAS")  # NoticeResponse, NotificationResponse, ParameterStatus
# server messages held whole outside a lookup: ErrorResponse (rewritten),
# ReadyForQuery (counted), CopyInResponse (the server ignores Syncs until
# the client ends the copy)
_WHOLE = frozenset(b"EZG")
_tokens = itertools.count(1)
# cancel requests in flight, whether or not their client is still there (a
# reference keeps each task alive until it ends)
_cancels: set[asyncio.Task[None]] = set()


def _detach(task: asyncio.Task[None]) -> None:
    """Keep a task alive until it ends, whatever becomes of its session."""
    _cancels.add(task)
    task.add_done_callback(_cancels.discard)


class _UntilClosed(asyncio.Protocol):
    def __init__(self) -> None:
        self.closed = asyncio.get_running_loop().create_future()

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.closed.done():
            self.closed.set_result(None)


async def send_cancel(upstream: Upstream, packet: bytes) -> None:
    """Send a CancelRequest packet to the server on a connection of its own
    and wait until the server closes it: then it has read the request."""
    transport = None
    try:
        protocol = _UntilClosed()
        transport = await asyncio.wait_for(upstream.connect(lambda: protocol),
                                           CONNECT_TIMEOUT)
        transport.write(packet)
        await asyncio.wait_for(protocol.closed, CONNECT_TIMEOUT)
    except (OSError, asyncio.TimeoutError) as exc:
        logger.warning("could not send a cancel request to %s: %s", upstream, exc)
    finally:
        if transport is not None:
            transport.close()


class ServerSide(asyncio.Protocol):
    def __init__(self, session: ProxySession) -> None:
        self.session = session

    def data_received(self, data: bytes) -> None:
        try:
            self.session.from_server(data)
        except Exception as exc:  # noqa: BLE001 - the session logs and closes
            self.session.failed(exc)

    def eof_received(self) -> bool:
        self.session.close()
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self.session.close()

    def pause_writing(self) -> None:
        self.session.pause_client("backpressure")

    def resume_writing(self) -> None:
        self.session.resume_client("backpressure")


class ClientSide(asyncio.Protocol):
    def __init__(self, upstream: Upstream, sessions: set[ProxySession],
                 settings: Settings | None = None) -> None:
        self.upstream = upstream
        self.sessions = sessions
        self.settings = settings or Settings()
        self.session: ProxySession | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        refusal = None
        if len(self.sessions) >= self.settings.max_connections:
            # as the server answers one connection too many: after the
            # startup packet (an SSLRequest before it is answered 'N', so
            # that libpq shows the message)
            refusal = wire.error_response([
                ("S", "FATAL"), ("V", "FATAL"), ("C", "53300"),
                ("M", "sorry, too many clients already"),
                ("D", f"corgipile proxy: {len(self.sessions)} connections are open, the "
                      f"most it accepts (--max-connections "
                      f"{self.settings.max_connections})")])
        self.session = ProxySession(self.upstream, transport, self.sessions,  # type: ignore[arg-type]
                                    self.settings, refusal)

    def data_received(self, data: bytes) -> None:
        s = self.session
        if s is None:
            return
        try:
            if s.state == "running" and s.task is None:  # from_client's common case
                s.pump_client(data)
            else:
                s.from_client(data)
        except Exception as exc:  # noqa: BLE001 - the session logs and closes
            s.failed(exc)

    def eof_received(self) -> bool:
        if self.session is not None:
            self.session.client_gone()
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        if self.session is not None:
            self.session.client_gone()

    def pause_writing(self) -> None:
        if self.session is not None:
            self.session.pause_server()

    def resume_writing(self) -> None:
        if self.session is not None:
            self.session.resume_server()


class ProxySession:
    """One client connection and its server connection."""

    def __init__(self, upstream: Upstream, client: asyncio.Transport,
                 sessions: set[ProxySession], settings: Settings | None = None,
                 refusal: bytes | None = None) -> None:
        self.upstream = upstream
        self.client = client
        self.settings = settings or Settings()
        self.server: asyncio.Transport | None = None
        self.sessions = sessions
        # over the connection cap: the error to answer the startup packet
        # with; such a connection is not counted, and lives a few seconds
        self.refusal = refusal
        if refusal is None:
            sessions.add(self)
        self.loop = asyncio.get_running_loop()
        # startup, connecting, auth (relaying the authentication exchange
        # through the gate), running, closed; or cancel (a CancelRequest
        # being forwarded)
        self.state = "startup"
        self.gate = AuthGate()
        self.user = ""
        self.backend_key: bytes | None = None  # BackendKeyData's pid and key
        self.timer: asyncio.TimerHandle | None = self.loop.call_later(
            self.settings.startup_timeout if refusal is None
            else min(self.settings.startup_timeout, REFUSAL_TIMEOUT), self.startup_expired)
        self.cbuf = bytearray()  # client bytes not yet passed on
        self.cremaining = 0  # bytes of a client message still to pass on unread
        self.sremaining = 0  # bytes of a server message still to pass on unread
        self.shold = bytearray()  # the start of a server message held whole
        self.client_pauses: set[str] = set()
        self.server_paused = False
        self.task: asyncio.Task[None] | None = None
        # protocol position: ReadyForQuery answers each Query, Sync and
        # FunctionCall; the first one ends the startup
        self.ready = False
        self.syncs_sent = 0
        self.syncs_done = 0
        self.unsynced = False  # extended-protocol messages sent since the last Sync
        # the client's Query/Sync/FunctionCall ("Q", "S", "F") and CopyDone /
        # CopyFail ("c") messages the server has not answered yet, in order:
        # which Syncs the server ignores in copy-in mode (see copy_started)
        self.events: deque[str] = deque()
        self.copy_in = False  # the server is in copy-in mode until the client's "c"
        self.idle_waiter: asyncio.Future[None] | None = None
        self.intercept: asyncio.Future[list[tuple[int, bytes]]] | None = None
        self.intercepted: list[tuple[int, bytes]] = []
        # planted errors: (token, number of the ReadyForQuery that ends its
        # batch, the ErrorResponse to send instead of the server's)
        self.planted: list[tuple[bytes, int, bytes]] = []
        # rewritten statements in flight: (number of the ReadyForQuery that
        # ends the batch, where the parts of the text sent come from)
        self.remaps: list[tuple[int, Any]] = []

    # -- plumbing ------------------------------------------------------------

    def failed(self, exc: Exception) -> None:
        """Malformed input, or a bug here: it costs one connection, never the
        proxy."""
        if isinstance(exc, wire.ProtocolError):
            logger.info("closing a connection: %s", exc)
        else:
            logger.error("closing a connection after an internal error", exc_info=exc)
        self.close()

    def close(self) -> None:
        if self.state == "closed":
            return
        self.state = "closed"
        self.sessions.discard(self)
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        for fut in (self.idle_waiter, self.intercept):
            if fut is not None and not fut.done():
                fut.set_exception(ConnectionResetError("connection closed"))
        if self.task is not None and not self.task.done() \
                and self.task is not asyncio.current_task():
            self.task.cancel()
        self.client.close()
        if self.server is not None:
            self.server.close()

    def client_gone(self) -> None:
        """The client closed its connection. A statement still running for
        it is cancelled, as the server would only notice when it next writes
        (a training can run for minutes without a row)."""
        if self.state == "running" and self.backend_key is not None \
                and (self.syncs_done < self.syncs_sent or self.intercept is not None):
            packet = _INT32.pack(16) + _INT32.pack(wire.CANCEL_REQUEST) + self.backend_key
            _detach(self.loop.create_task(send_cancel(self.upstream, packet)))
        self.close()

    def startup_expired(self) -> None:
        self.timer = None
        if self.ready or self.state == "closed" or self.state == "cancel":
            return
        logger.info("closing a connection whose startup took over %g s",
                    self.settings.startup_timeout)
        self.client.write(wire.error_response([
            ("S", "FATAL"), ("V", "FATAL"), ("C", "08P01"),
            ("M", f"corgipile proxy: the connection's startup and authentication did not "
                  f"finish within {self.settings.startup_timeout:g} s")]))
        self.close()

    def pause_client(self, reason: str) -> None:
        if not self.client_pauses and self.state != "closed":
            self.client.pause_reading()
        self.client_pauses.add(reason)

    def resume_client(self, reason: str) -> None:
        self.client_pauses.discard(reason)
        if not self.client_pauses and self.state != "closed":
            self.client.resume_reading()

    def pause_server(self) -> None:
        if self.server is not None and not self.server_paused:
            self.server_paused = True
            self.server.pause_reading()

    def resume_server(self) -> None:
        if self.server is not None and self.server_paused and self.state != "closed":
            self.server_paused = False
            self.server.resume_reading()

    def spawn(self, coro: Any) -> None:
        self.task = self.loop.create_task(coro)
        self.task.add_done_callback(self._task_done)

    def _task_done(self, task: asyncio.Task[None]) -> None:
        if task.cancelled():
            return
        exc = task.exception()
        if exc is None:
            return
        if isinstance(exc, wire.ProtocolError):
            logger.info("closing a connection: %s", exc)
        elif not isinstance(exc, ConnectionError):
            logger.error("closing a connection after an internal error", exc_info=exc)
        self.close()

    # -- startup -------------------------------------------------------------------

    def from_client(self, data: bytes) -> None:
        if self.state == "running" and self.task is None:
            self.pump_client(data)
        elif self.state != "closed" and self.state != "cancel":  # the server reads no more
            self.cbuf += data
            if self.state == "startup":
                self.startup()
            elif self.state == "auth":
                self.auth_client()

    def startup(self) -> None:
        """SSLRequest / GSSENCRequest (answered 'N'), CancelRequest (passed
        to the server on a connection of its own), then the startup packet,
        which opens the server connection."""
        buf = self.cbuf
        while len(buf) >= 4:
            (length,) = _INT32.unpack_from(buf, 0)
            if length < 8 or length > wire.MAX_STARTUP:
                raise wire.ProtocolError(f"startup packet of invalid length {length}")
            if len(buf) < length:
                return
            packet = bytes(buf[:length])
            del buf[:length]
            (code,) = _INT32.unpack_from(packet, 4)
            if code in (wire.SSL_REQUEST, wire.GSSENC_REQUEST):
                if length != 8:
                    raise wire.ProtocolError("SSLRequest / GSSENCRequest of invalid length")
                self.client.write(b"N")  # no TLS, no GSSAPI encryption: go on in clear
                continue
            if code == wire.CANCEL_REQUEST:
                if length != 16:
                    raise wire.ProtocolError("CancelRequest of invalid length")
                # not the session's task: it goes on when the client closes
                # right after sending it (libpq waits for the server's EOF,
                # other clients do not)
                self.state = "cancel"
                _detach(self.loop.create_task(self.forward_cancel(packet)))
                return
            if self.refusal is not None:
                self.client.write(self.refusal)
                self.close()
                return
            # a startup packet (any version: the server judges it)
            self.user = startup_user(packet)
            self.state = "connecting"
            self.pause_client("startup")
            self.spawn(self.connect(packet))
            return

    async def forward_cancel(self, packet: bytes) -> None:
        """A client's CancelRequest to the server; the client's connection
        closes once the server has closed its own, as the server answers."""
        await send_cancel(self.upstream, packet)
        self.close()

    async def connect(self, packet: bytes) -> None:
        try:
            self.server = await asyncio.wait_for(
                self.upstream.connect(lambda: ServerSide(self)), CONNECT_TIMEOUT)
        except (OSError, asyncio.TimeoutError) as exc:
            reason = getattr(exc, "strerror", None) or str(exc) or "timeout"
            self.client.write(wire.error_response([
                ("S", "FATAL"), ("V", "FATAL"), ("C", "08006"),
                ("M", f"corgipile proxy: could not connect to the server at "
                      f"{self.upstream}: {reason}")]))
            self.close()
            return
        if self.state == "closed":
            self.server.close()
            return
        self.server.write(packet)
        self.state = "auth"
        self.task = None
        self.resume_client("startup")
        self.auth_client()

    # -- authentication (see auth.py) -----------------------------------------------

    def auth_client(self) -> None:
        """Client messages while the server authenticates: answers to its
        requests pass, anything else waits for the end of the startup."""
        buf = self.cbuf
        while len(buf) >= 5:
            kind, length = _HEADER.unpack_from(buf, 0)
            if length < 4 or length > AUTH_LIMIT:
                raise wire.ProtocolError(f"message {kind!r} of invalid length {length} "
                                         "during authentication")
            if len(buf) < length + 1:
                break
            if kind == 0x58:  # Terminate
                self.close()
                return
            if not self.gate.client_may_send(kind):
                break
            assert self.server is not None
            self.server.write(bytes(buf[:length + 1]))
            del buf[:length + 1]
        if len(buf) > AUTH_LIMIT:
            raise wire.ProtocolError("more than 1 MiB sent before the end of authentication")

    def auth_server(self, kind: int, frame: bytes) -> bool:
        """A server message before the first ReadyForQuery; False when the
        session was refused."""
        if kind == 0x52:  # Authentication
            if len(frame) < 9:
                raise wire.ProtocolError("Authentication message without its code")
            (code,) = _INT32.unpack_from(frame, 5)
            if code == 0:  # AuthenticationOk
                if not self.gate.challenged and not self.settings.unsafe_allow_passwordless:
                    self.refuse()
                    return False
            else:
                self.gate.server_request(code)
                self.client.write(frame)
                self.auth_client()  # an answer the client sent ahead may pass now
                return True
        elif kind == 0x4B and len(frame) == 13:  # BackendKeyData
            self.backend_key = frame[5:]
        elif kind == 0x5A:  # ReadyForQuery: the session is open
            self.client.write(frame)
            self.state = "running"
            self.count_ready(1)
            if self.timer is not None:
                self.timer.cancel()
                self.timer = None
            return True
        self.client.write(frame)
        return True

    def after_startup(self) -> None:
        """What the client sent during the startup goes on now."""
        if self.state == "running" and self.task is None:
            self.pump_client(b"")

    def refuse(self) -> None:
        """The server admitted the proxy's identity, not the client's."""
        logger.warning('refused a session for user "%s": the server at %s admitted it '
                       "without asking for a password (its pg_hba.conf trusts the proxy; "
                       "see --unsafe-allow-passwordless)", self.user, self.upstream)
        self.client.write(refusal(self.user, str(self.upstream)))
        assert self.server is not None
        self.server.write(b"X\0\0\0\x04")  # Terminate: nothing else reaches the server
        self.cbuf = bytearray()
        self.close()

    # -- client to server ---------------------------------------------------------------

    def count_client(self, kind: int) -> None:
        """A client message (its type byte) on its way to the server: what
        the server will answer with a ReadyForQuery, in order."""
        if kind in _EXTENDED:  # Parse, Bind, Describe, Execute, Close, Flush
            self.unsynced = True
        elif kind == 0x53:  # Sync
            self.unsynced = False
            if not self.copy_in:  # else the server ignores it
                self.syncs_sent += 1
                self.events.append("S")
        elif kind == 0x51 or kind == 0x46:  # Query, FunctionCall
            self.syncs_sent += 1
            self.events.append("Q" if kind == 0x51 else "F")
        elif kind == 0x63 or kind == 0x66:  # CopyDone, CopyFail
            if self.copy_in:
                self.copy_in = False
            else:
                self.events.append("c")

    def copy_started(self) -> None:
        """The server sent CopyInResponse. Until it reads the client's
        CopyDone or CopyFail it ignores Sync messages (protocol docs,
        "COPY Operations"); libpq sends one after Execute and one after
        CopyDone. The Syncs the client sent since the statement that started
        the copy, before its CopyDone, get no ReadyForQuery: uncount them,
        and any that come until the CopyDone."""
        events = self.events
        i = 1 if events and events[0] == "Q" else 0  # the COPY's own Query
        while i < len(events):
            e = events[i]
            if e == "c":  # the copy's end, already sent
                del events[i]
                return
            if e != "S":
                return  # not the protocol (a Query in copy-in mode): the server fails the copy
            del events[i]
            self.syncs_sent -= 1
        self.copy_in = True

    def pump_client(self, data: bytes) -> None:
        """Pass client bytes on, as the chunks they came in, up to the next
        Query / Parse that may need a rewrite (handled by a task; the rest
        waits in cbuf). Only message headers are read, and the text of a
        Query / Parse up to INSPECT_LIMIT bytes, which is held until it is
        whole and given to may_rewrite (a byte search)."""
        if self.cbuf:
            self.cbuf += data
            buf: bytes | bytearray = self.cbuf
            self.cbuf = bytearray()
        else:
            buf = data
        server = self.server
        assert server is not None
        n = len(buf)
        i = self.cremaining
        if i:
            if i >= n:  # all of it belongs to a message being passed on
                self.cremaining = i - n
                server.write(buf)
                return
            self.cremaining = 0
        unpack = _INT32.unpack_from
        count = self.count_client
        stop = False
        total = 0
        while n - i >= 5:
            kind = buf[i]
            (length,) = unpack(buf, i + 1)
            if length < 4 or length > _MAX_MESSAGE:
                raise wire.ProtocolError(f"message {chr(kind)!r} with invalid length {length}")
            total = length + 1
            if (kind == 0x51 or kind == 0x50) and length <= INSPECT_LIMIT:  # Query, Parse
                if n - i < total:
                    break  # held until it is whole
                if may_rewrite(buf, i + 5, i + total):
                    stop = True
                    break
            count(kind)
            if n - i < total:  # passed on in pieces
                self.cremaining = total - (n - i)
                i = n
                break
            i += total
        if i == n:
            if n:
                server.write(buf)
            return
        if i:
            server.write(buf[:i])
        if stop:
            frame = bytes(buf[i:i + total])
            self.cbuf = bytearray(buf[i + total:])
            self.pause_client("rewrite")
            self.spawn(self.rewrite(frame))
            return
        # a header cut in two, or a message read whole: keep the buffer
        # (no copy per read)
        self.cbuf = buf if i == 0 and isinstance(buf, bytearray) else bytearray(buf[i:])

    async def rewrite(self, frame: bytes) -> None:
        kind, body = frame[:1], frame[5:]
        if kind == b"Q":
            if not body.endswith(b"\0"):
                raise wire.ProtocolError("Query message without its NUL")
            name, raw, rest = b"", body[:-1], b""
        else:
            name, raw, rest = wire.split_parse(body)
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            text = ""  # not UTF-8: passed on, the server judges it
        try:
            plan = await analyze_text(text, kind == b"P", self.settings.analysis_timeout) \
                if text else None
        except Exception:  # a translator bug: the server judges the text
            logger.exception("could not analyse a statement; passed on unchanged")
            plan = None
        if plan is None:
            self.send_client_message(kind, frame)
        elif isinstance(plan, Failure):
            self.plant(kind, name, rest, plan.fields(text))
        elif not self.ready or self.unsynced:
            self.plant(kind, name, rest, Failure(
                "0A000", "corgipile proxy: TRAIN BY and PREDICT BY must begin a new "
                "extended-protocol batch", None, "send Sync first (leave pipeline mode)"
            ).fields(text))
        else:
            await self.wait_idle()
            results, error, ready = await self.lookup(lookup_queries(plan))
            if error is not None:
                if kind == b"Q":  # the answer to the client's query
                    self.client.write(wire.error_response(error) + ready)
                else:
                    self.plant(kind, name, rest, error)
            else:
                new = translate(plan, results)
                if isinstance(new, Failure):
                    self.plant(kind, name, rest, new.fields(text))
                else:
                    sql, segments = new
                    message = wire.query(sql) if kind == b"Q" else wire.parse(name, sql, rest)
                    # server errors in it get positions in the client's text
                    self.remaps.append((self.syncs_sent + 1, segments))
                    self.send_client_message(kind, message)
                    if plan.sources:
                        # TRAIN BY ... WHERE (a simple Query): once it is
                        # answered, record the models' source and drop the
                        # copies; the answers stay here
                        await self.wait_idle()
                        await self.lookup(cleanup_queries(plan, model_names(plan, results)))
        self.task = None
        self.resume_client("rewrite")
        self.pump_client(b"")

    def send_client_message(self, kind: bytes, message: bytes) -> None:
        self.count_client(kind[0])
        assert self.server is not None
        self.server.write(message)

    def plant(self, kind: bytes, name: bytes, rest: bytes,
              fields: list[tuple[str, str]]) -> None:
        """Send a statement that fails on the server with a syntax error
        naming a token, and remember to answer with fields instead."""
        # random: no query of the client's can name it
        token = f"corgipile_proxy_error_{secrets.token_hex(8)}"
        if kind == b"Q":
            message = wire.query(token)
            deadline = self.syncs_sent + 1
        else:
            message = wire.parse(name, token, rest)
            deadline = self.syncs_sent + 1  # the client's coming Sync
        self.planted.append((token.encode(), deadline, wire.error_response(fields)))
        self.send_client_message(kind, message)

    async def wait_idle(self) -> None:
        while self.syncs_done < self.syncs_sent:
            self.idle_waiter = self.loop.create_future()
            await self.idle_waiter
            self.idle_waiter = None

    async def lookup(self, queries: list[str]
                     ) -> tuple[list[list[list[str | None]]], list[tuple[str, str]] | None, bytes]:
        """Run queries on the idle server connection; their answers never
        reach the client (see catalog.read_answers)."""
        self.intercepted = []
        self.intercept = self.loop.create_future()
        assert self.server is not None
        self.server.write(wire.lookup_batch(queries, str(next(_tokens))))
        return read_answers(await self.intercept)

    # -- server to client ------------------------------------------------------------

    def count_ready(self, n: int) -> None:
        if not self.ready:
            self.ready = True
            n -= 1
        self.syncs_done += n
        events = self.events
        for _ in range(n):  # the answered Query / Sync, and stray CopyDones before it
            while events and events.popleft() == "c":
                pass
        if self.idle_waiter is not None and self.syncs_done >= self.syncs_sent \
                and not self.idle_waiter.done():
            self.idle_waiter.set_result(None)

    def from_server(self, data: bytes) -> None:
        """Server bytes to the client in one pass with an offset: messages
        are passed on in the pieces they arrive in, unread, except those
        held whole (_WHOLE, everything during the startup or a lookup)."""
        if self.shold:
            self.shold += data
            buf: bytes | bytearray = self.shold
            self.shold = bytearray()
        else:
            buf = data
            # the common case in one step: a chunk that ends inside or at
            # the end of a message, nothing to rewrite
            i = self.sremaining
            n = len(buf)
            if i >= n:
                self.sremaining = i - n
                self.client.write(buf)
                return
            if self.state == "running" and self.intercept is None and not self.planted \
                    and not self.remaps and not self.copy_in:
                end, ready, remaining = wire.walk(buf, i)
                if end == n:
                    self.sremaining = remaining
                    self.client.write(buf)
                    if ready:
                        self.count_ready(ready)
                    return
        n = len(buf)
        i = 0
        write = self.client.write
        while i < n and self.state != "closed":
            if self.sremaining:
                step = min(self.sremaining, n - i)
                write(buf[i:i + step] if step < n or i else buf)
                i += step
                self.sremaining -= step
                continue
            if self.state == "running" and self.intercept is None and not self.planted \
                    and not self.remaps and not self.copy_in:
                # nothing to rewrite: walk the headers, count ReadyForQuery
                end, ready, self.sremaining = wire.walk(buf, i)
                if end > i:
                    write(buf if i == 0 and end == n else buf[i:end])
                    i = end
                if ready:
                    self.count_ready(ready)
                if i == n or self.sremaining:
                    continue
                # stopped before a header cut in two, or a CopyInResponse
            if n - i < 5:
                break
            kind, length = _HEADER.unpack_from(buf, i)
            if length < 4 or length > wire.MAX_MESSAGE:
                raise wire.ProtocolError(f"server message of invalid length {length}")
            total = length + 1
            whole = self.state != "running" or kind in _WHOLE \
                or (self.intercept is not None and kind not in _ASYNC)
            if not whole:
                step = min(total, n - i)
                write(buf[i:i + step])
                i += step
                self.sremaining = total - step
                continue
            if self.state != "running" and length > AUTH_LIMIT:
                raise wire.ProtocolError(f"startup message of invalid length {length}")
            if n - i < total:
                break
            frame = bytes(buf[i:i + total])
            i += total
            if self.state != "running":
                if not self.auth_server(kind, frame):
                    return
                if self.state == "running":
                    self.loop.call_soon(self.after_startup)
                continue
            self.server_message(kind, frame)
        if i < n and self.state != "closed":
            # the start of a message held whole: kept, not copied, when it
            # is all there is
            self.shold = buf if i == 0 and isinstance(buf, bytearray) else bytearray(buf[i:])

    def server_message(self, kind: int, frame: bytes) -> None:
        """A whole server message while rewriting, during a lookup, or one of _WHOLE."""
        if self.intercept is not None and kind not in _ASYNC:
            self.intercepted.append((kind, frame))
            if kind == 0x5A:
                fut, self.intercept = self.intercept, None
                if not fut.done():
                    fut.set_result(self.intercepted)
            return
        if kind == 0x45:  # ErrorResponse
            self.copy_in = False  # an error ends copy-in mode
            frame = self.replace_error(frame)
        elif kind == 0x5A:  # ReadyForQuery
            self.count_ready(1)
            self.planted = [p for p in self.planted if p[1] > self.syncs_done]
            self.remaps = [r for r in self.remaps if r[0] > self.syncs_done]
        elif kind == 0x47:  # CopyInResponse
            self.copy_started()
        self.client.write(frame)

    def replace_error(self, frame: bytes) -> bytes:
        """A planted error's replacement; or the error with its position
        moved into the client's text, for an error in a rewritten statement."""
        for j, (token, _, replacement) in enumerate(self.planted):
            if token in frame:
                del self.planted[j]
                return replacement
        live = [r for r in self.remaps if r[0] > self.syncs_done]
        if not live:
            return frame
        segments = live[0][1]
        return wire.map_error_position(frame, lambda p: map_position(segments, p))
