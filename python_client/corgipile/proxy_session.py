"""One client connection of ``corgipile proxy`` and its server connection:
the asyncio protocols of both sockets and the session state machine between
them (startup, then relaying; a Query / Parse holding TRAIN BY or PREDICT BY
is rewritten, and the server's answers to it are rewritten back). The
whole design is described in proxy.py's docstring and docs/proxy.md."""

from __future__ import annotations

import asyncio
import itertools
import logging
import secrets
import struct
from typing import Any

from . import proxy_wire as wire
from .proxy_catalog import cleanup_queries, lookup_queries, model_names, read_answers, translate
from .proxy_rewrite import QUICK_CHECK, Failure, analyze, map_position
from .proxy_upstream import Upstream

__all__ = ["ClientSide", "ProxySession"]

logger = logging.getLogger("corgipile.proxy")

# Query / Parse messages longer than this are passed on unread (a TRAIN BY
# statement is short; a 100 MB INSERT is streamed, not held in memory)
INSPECT_LIMIT = 1 << 20
# seconds to wait for the server's TCP handshake
CONNECT_TIMEOUT = 30

_INT32 = struct.Struct("!i")
_EXTENDED = frozenset(b"PBDECH")
_ASYNC = frozenset(b"NAS")  # NoticeResponse, NotificationResponse, ParameterStatus
_tokens = itertools.count(1)


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
    def __init__(self, upstream: Upstream, sessions: set[ProxySession]) -> None:
        self.upstream = upstream
        self.sessions = sessions
        self.session: ProxySession | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.session = ProxySession(self.upstream, transport, self.sessions)  # type: ignore[arg-type]

    def data_received(self, data: bytes) -> None:
        try:
            self.session.from_client(data)  # type: ignore[union-attr]
        except Exception as exc:  # noqa: BLE001 - the session logs and closes
            self.session.failed(exc)  # type: ignore[union-attr]

    def eof_received(self) -> bool:
        if self.session is not None:
            self.session.close()
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        if self.session is not None:
            self.session.close()

    def pause_writing(self) -> None:
        if self.session is not None:
            self.session.pause_server()

    def resume_writing(self) -> None:
        if self.session is not None:
            self.session.resume_server()


class ProxySession:
    """One client connection and its server connection."""

    def __init__(self, upstream: Upstream, client: asyncio.Transport,
                 sessions: set[ProxySession]) -> None:
        self.upstream = upstream
        self.client = client
        self.server: asyncio.Transport | None = None
        self.sessions = sessions
        sessions.add(self)
        self.loop = asyncio.get_running_loop()
        self.state = "startup"  # then connecting, running, closed
        self.cbuf = bytearray()  # client bytes not yet passed on
        self.cscan = wire.FrameScanner(b"QP", INSPECT_LIMIT, QUICK_CHECK)
        self.sscan = wire.FrameScanner()
        self.sbuf = bytearray()  # server bytes held while answers are rewritten
        self.shead = b""  # the start of a server message header
        self.client_pauses: set[str] = set()
        self.server_paused = False
        self.task: asyncio.Task[None] | None = None
        # protocol position: ReadyForQuery answers each Query, Sync and
        # FunctionCall; the first one ends the startup
        self.ready = False
        self.syncs_sent = 0
        self.syncs_done = 0
        self.unsynced = False  # extended-protocol messages sent since the last Sync
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
        for fut in (self.idle_waiter, self.intercept):
            if fut is not None and not fut.done():
                fut.set_exception(ConnectionResetError("connection closed"))
        if self.task is not None and not self.task.done() \
                and self.task is not asyncio.current_task():
            self.task.cancel()
        self.client.close()
        if self.server is not None:
            self.server.close()

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
        elif self.state != "closed":
            self.cbuf += data
            if self.state == "startup":
                self.startup()

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
                self.state = "connecting"
                self.spawn(self.forward_cancel(packet))
                return
            # a startup packet (any version: the server judges it)
            self.state = "connecting"
            self.pause_client("startup")
            self.spawn(self.connect(packet))
            return

    async def forward_cancel(self, packet: bytes) -> None:
        """The server answers a CancelRequest by closing the connection."""
        try:
            transport = await self.upstream.connect(asyncio.Protocol)
            transport.write(packet)
            transport.close()
        except OSError as exc:
            logger.warning("could not forward a cancel request to %s: %s", self.upstream, exc)
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
        self.state = "running"
        self.task = None
        self.resume_client("startup")
        self.pump_client(b"")

    # -- client to server ---------------------------------------------------------------

    def count_client(self, kinds: bytes) -> None:
        for k in kinds:
            if k == 0x51 or k == 0x46:  # Query, FunctionCall
                self.syncs_sent += 1
            elif k == 0x53:  # Sync
                self.syncs_sent += 1
                self.unsynced = False
            elif k in _EXTENDED:
                self.unsynced = True

    def pump_client(self, data: bytes) -> None:
        """Pass client bytes on up to the next Query / Parse that needs a
        rewrite (handled by a task; the rest waits in cbuf)."""
        if self.cbuf:
            self.cbuf += data
            buf: bytes | bytearray = self.cbuf
            self.cbuf = bytearray()
        else:
            buf = data
        end, kinds = self.cscan.scan(buf)
        if kinds:
            self.count_client(kinds)
        assert self.server is not None
        if end == len(buf):
            if end:
                self.server.write(buf)
            return
        if end:
            self.server.write(buf[:end])
        rest = len(buf) - end
        if rest >= 5:
            (length,) = _INT32.unpack_from(buf, end + 1)
            if rest > length:  # complete, so it stopped for a rewrite
                frame = bytes(buf[end:end + length + 1])
                self.cbuf = bytearray(buf[end + length + 1:])
                self.pause_client("rewrite")
                self.spawn(self.rewrite(frame))
                return
        self.cbuf = bytearray(buf[end:])

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
            plan = analyze(text, single=(kind == b"P")) if text else None
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
        self.count_client(kind)
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
        reach the client (see proxy_catalog.read_answers)."""
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
        if self.idle_waiter is not None and self.syncs_done >= self.syncs_sent \
                and not self.idle_waiter.done():
            self.idle_waiter.set_result(None)

    def from_server(self, data: bytes) -> None:
        if self.shead:  # a message header cut in two by the last read
            data, self.shead = self.shead + data, b""
        if self.intercept is None and not self.planted and not self.remaps \
                and not self.sbuf:
            end, n = self.sscan.count(data, 0x5A)  # ReadyForQuery
            if n:
                self.count_ready(n)
            if end < len(data):
                self.shead = data[end:]
                data = data[:end]
            if data:
                self.client.write(data)
            return
        # whole messages: the end of the current one passes on first
        start = 0
        if self.sscan.remaining:
            start = min(self.sscan.remaining, len(data))
            self.sscan.remaining -= start
            self.client.write(data[:start])
        self.sbuf += data[start:]
        self.server_messages()

    def server_messages(self) -> None:
        buf = self.sbuf
        out = bytearray()
        i = 0
        while len(buf) - i >= 5:
            kind = buf[i]
            (length,) = _INT32.unpack_from(buf, i + 1)
            if length < 4 or length > wire.MAX_MESSAGE:
                raise wire.ProtocolError(f"server message of invalid length {length}")
            if len(buf) - i < length + 1:
                break
            frame = bytes(buf[i:i + length + 1])
            i += length + 1
            if self.intercept is not None and kind not in _ASYNC:
                self.intercepted.append((kind, frame))
                if kind == 0x5A:
                    fut, self.intercept = self.intercept, None
                    if not fut.done():
                        fut.set_result(self.intercepted)
                continue
            if kind == 0x45:  # ErrorResponse
                frame = self.replace_error(frame)
            elif kind == 0x5A:  # ReadyForQuery
                self.count_ready(1)
                self.planted = [p for p in self.planted if p[1] > self.syncs_done]
                self.remaps = [r for r in self.remaps if r[0] > self.syncs_done]
            out += frame
            if self.intercept is None and not self.planted and not self.remaps:
                break  # back to passing bytes on unread
        if out:
            self.client.write(out)
        rest = bytes(buf[i:])
        self.sbuf = bytearray()
        if self.intercept is None and not self.planted and not self.remaps:
            if rest:
                self.from_server(rest)
        else:
            self.sbuf += rest

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
