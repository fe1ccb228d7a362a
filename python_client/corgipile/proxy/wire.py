"""PostgreSQL v3 wire protocol framing for ``corgipile proxy``.

Only what a pass-through proxy needs: the limits it enforces, the walk
that finds message boundaries in a byte stream without copying it, and the
few messages the proxy writes itself (Query, Parse, the lookup messages,
ErrorResponse). Every other message is forwarded as the bytes it came in.

A message is a type byte and an int32 length that counts itself but not
the type byte; the startup packet, SSLRequest, GSSENCRequest and
CancelRequest come first and have no type byte.
"""

from __future__ import annotations

import struct
from typing import Any

__all__ = [
    "ProtocolError", "walk", "SSL_REQUEST", "GSSENC_REQUEST", "CANCEL_REQUEST",
    "MAX_STARTUP", "MAX_MESSAGE", "error_response", "error_fields", "query", "parse",
    "split_parse", "lookup_batch", "data_row_values", "map_error_position",
]

# request codes of the packets that come before (or instead of) the startup
# packet: PostgreSQL's pqcomm.h
SSL_REQUEST = 80877103
GSSENC_REQUEST = 80877104
CANCEL_REQUEST = 80877102
# the server refuses startup packets longer than this (MAX_STARTUP_PACKET_LENGTH)
MAX_STARTUP = 10000
# no message may be longer than the server's own limit (PQ_LARGE_MESSAGE_LIMIT:
# MaxAllocSize - 1); anything longer is garbage, not a message
MAX_MESSAGE = 0x3FFFFFFF - 1

_INT32 = struct.Struct("!i")


class ProtocolError(Exception):
    """The peer sent something that is not the PostgreSQL protocol: the proxy
    closes that one connection."""


def walk(data: bytes | bytearray, start: int = 0) -> tuple[int, int, int]:
    """The server-to-client walk where no message is kept whole: message
    headers from data[start:], counting ReadyForQuery. Returns (end,
    ready, remaining): it stops at the end of data (remaining: bytes of the
    last message still to come), before a header cut in two, or before a
    CopyInResponse (whose header the caller reads itself)."""
    n = len(data)
    i = start
    ready = 0
    unpack = _INT32.unpack_from
    while i + 5 <= n:
        kind = data[i]
        if kind == 0x5A:
            ready += 1
        elif kind == 0x47:  # CopyInResponse
            return i, ready, 0
        (length,) = unpack(data, i + 1)
        if length < 4 or length > MAX_MESSAGE:
            raise ProtocolError(f"message {data[i:i + 1]!r} with invalid length {length}")
        i += length + 1
    if i > n:
        return n, ready, i - n
    return i, ready, 0


# -- messages the proxy writes ---------------------------------------------------

def _cstr(text: str) -> bytes:
    raw = text.encode()
    if b"\0" in raw:
        raise ValueError("a protocol string cannot contain NUL")
    return raw + b"\0"


def _message(kind: bytes, body: bytes) -> bytes:
    return kind + _INT32.pack(len(body) + 4) + body


def query(text: str) -> bytes:
    """A simple-protocol Query message."""
    return _message(b"Q", _cstr(text))


def parse(name: bytes, text: str, rest: bytes) -> bytes:
    """A Parse message; name (with its NUL) and rest (parameter count and
    types) are the client's bytes, unchanged."""
    return _message(b"P", name + _cstr(text) + rest)


def split_parse(body: bytes) -> tuple[bytes, bytes, bytes]:
    """A Parse body as (name with its NUL, query bytes, rest)."""
    a = body.find(b"\0")
    b = body.find(b"\0", a + 1) if a >= 0 else -1
    if a < 0 or b < 0:
        raise ProtocolError("Parse message without its two strings")
    return body[:a + 1], body[a + 1:b], body[b + 1:]


def lookup_batch(queries: list[str], tag: str) -> bytes:
    """The extended-protocol messages that run each query once in text
    format under a named statement and portal (so the client's unnamed
    statement and portal stay as they were), closing both, then Sync.
    Closing a name that does not exist is not an error, so a statement
    left behind by a failed lookup is closed first."""
    out = bytearray()
    stmt = _cstr(f"corgipile_proxy_{tag}")
    portal = _cstr(f"corgipile_proxy_{tag}")
    for text in queries:
        out += _message(b"C", b"S" + stmt)
        out += _message(b"P", stmt + _cstr(text) + b"\0\0")
        out += _message(b"B", portal + stmt + b"\0\0" + b"\0\0" + b"\0\0")
        out += _message(b"E", portal + b"\0\0\0\0")
        out += _message(b"C", b"P" + portal)
        out += _message(b"C", b"S" + stmt)
    out += _message(b"S", b"")
    return bytes(out)


def error_response(fields: list[tuple[str, str]]) -> bytes:
    """An ErrorResponse with the given (field code, value) pairs."""
    body = bytearray()
    for code, value in fields:
        body += code.encode() + value.replace("\0", " ").encode() + b"\0"
    body += b"\0"
    return _message(b"E", bytes(body))


def error_fields(body: bytes) -> list[tuple[str, str]]:
    """The (code, value) fields of an ErrorResponse or NoticeResponse body."""
    out = []
    i = 0
    while i < len(body) and body[i] != 0:
        end = body.find(b"\0", i + 1)
        if end < 0:
            raise ProtocolError("ErrorResponse field without its NUL")
        out.append((chr(body[i]), body[i + 1:end].decode("utf-8", "replace")))
        i = end + 1
    return out


def map_error_position(frame: bytes, fn: Any) -> bytes:
    """An ErrorResponse with its position field (P) replaced by fn(position);
    the other fields stay the bytes they were."""
    body = frame[5:]
    out = bytearray()
    i = 0
    while i < len(body) and body[i] != 0:
        end = body.find(b"\0", i + 1)
        if end < 0:
            raise ProtocolError("ErrorResponse field without its NUL")
        value = body[i + 1:end]
        if body[i] == 0x50 and value.isdigit():  # P
            value = str(fn(int(value))).encode()
        out += body[i:i + 1] + value + b"\0"
        i = end + 1
    out += b"\0"
    return _message(b"E", bytes(out))


def data_row_values(body: bytes) -> list[str | None]:
    """The columns of a DataRow in text format."""
    (count,) = struct.unpack_from("!h", body, 0)
    i = 2
    out: list[str | None] = []
    for _ in range(count):
        (length,) = _INT32.unpack_from(body, i)
        i += 4
        if length < 0:
            out.append(None)
        else:
            out.append(body[i:i + length].decode("utf-8", "replace"))
            i += length
    return out
