"""A raw PostgreSQL wire-protocol client for the proxy tests, for what no
driver sends: a startup packet with a key twice, a CancelRequest from a
client that closes at once, a Sync inside COPY IN. Messages are (type
byte, body) pairs. And a transport that keeps what is written to it, to
drive a proxy session without sockets."""

from __future__ import annotations

import socket
import struct

__all__ = ["msg", "startup", "cancel_request", "fields", "Wire", "NullTransport"]

PROTOCOL_3 = 196608
CANCEL_REQUEST = 80877102


def msg(kind: bytes, body: bytes) -> bytes:
    return kind + struct.pack("!i", len(body) + 4) + body


def startup(*pairs: tuple[str, str]) -> bytes:
    """A protocol 3 startup packet with the (key, value) pairs in order."""
    body = struct.pack("!i", PROTOCOL_3) + b"".join(
        k.encode() + b"\0" + v.encode() + b"\0" for k, v in pairs) + b"\0"
    return struct.pack("!i", len(body) + 4) + body


def cancel_request(backend_key: bytes) -> bytes:
    """A CancelRequest for the BackendKeyData body backend_key (pid, key)."""
    return struct.pack("!ii", 16, CANCEL_REQUEST) + backend_key


class Wire:
    """One connection; the socket's timeout only keeps a failing test from
    hanging."""

    def __init__(self, port: int, *pairs: tuple[str, str], host: str = "127.0.0.1") -> None:
        self.sock = socket.create_connection((host, port), timeout=120)
        self.buf = b""
        self.sock.sendall(startup(*pairs))

    @classmethod
    def login(cls, port: int, user: str, database: str, host: str = "127.0.0.1") -> Wire:
        """A session past its startup (ReadyForQuery read); its startup
        messages in .startup."""
        w = cls(port, ("user", user), ("database", database), host=host)
        w.startup = w.until(b"Z")
        return w

    @property
    def backend_key(self) -> bytes:
        return next(body for kind, body in self.startup if kind == b"K")

    def read(self) -> tuple[bytes, bytes]:
        while len(self.buf) < 5 or len(self.buf) < 1 + struct.unpack_from("!i", self.buf, 1)[0]:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError(f"closed; unread: {self.buf!r}")
            self.buf += chunk
        n = 1 + struct.unpack_from("!i", self.buf, 1)[0]
        frame, self.buf = self.buf[:n], self.buf[n:]
        return frame[:1], frame[5:]

    def until(self, kind: bytes) -> list[tuple[bytes, bytes]]:
        """Messages up to and including the first of type kind."""
        out = []
        while True:
            k, body = self.read()
            out.append((k, body))
            if k == kind:
                return out

    def close(self) -> None:
        self.sock.close()


def fields(body: bytes) -> dict[str, str]:
    """The fields of an ErrorResponse or NoticeResponse body by code."""
    return {part[:1].decode(): part[1:].decode() for part in body.split(b"\0") if part}


class NullTransport:
    """Stands for an asyncio transport: keeps what is written in .out."""

    def __init__(self) -> None:
        self.out = bytearray()

    def write(self, data: bytes) -> None:
        self.out += data

    def close(self) -> None:
        pass

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass
