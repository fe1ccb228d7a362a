"""The authentication gate of ``corgipile proxy``: the proxy never lets a
client reach the server with fewer credentials than it would need directly.

The server authenticates every client; the proxy relays the exchange and
holds no credential. But the server sees the proxy's connection, not the
client's: its address (``host`` lines of pg_hba.conf) and, on a Unix socket,
its OS user (``peer``). A ``trust``, ``peer`` or ``ident`` line that matches
the proxy would admit every client of the proxy with the proxy's identity
(run as ``postgres``: superuser, no password). So the proxy watches the
exchange:

- the server's ``Authentication*`` requests that need the client's own
  credential (cleartext or MD5 password, SASL/SCRAM, GSSAPI, SSPI) open
  the way for one answer (``p`` message) from the client each;
- ``AuthenticationOk`` after such a request: the client proved who it is,
  the session goes on;
- ``AuthenticationOk`` with no request before it: the server admitted the
  proxy's identity (trust, peer, ident, or a PAM stack that asked nothing).
  The session is refused: the client gets a FATAL error that says so, the
  server connection is closed, and nothing of the client's reaches the
  server. Only ``Settings.unsafe_allow_passwordless`` lets such sessions in.

Until the server's AuthenticationOk, the client's bytes reach the server only
as answers to the server's requests: a client that sends a query right after
its startup packet (hoping the server reads it once it admitted the proxy)
has it held, and dropped with the refused session.
"""

from __future__ import annotations

import struct

from . import wire

__all__ = ["AuthGate", "startup_user", "refusal", "AUTH_LIMIT"]

_INT32 = struct.Struct("!i")

# Authentication request codes (PostgreSQL's pqcomm.h)
AUTH_OK = 0
# requests that the client answers with its own credential (a 'p' message)
_CHALLENGES = {
    3: "password",  # AuthenticationCleartextPassword
    5: "md5",  # AuthenticationMD5Password
    7: "gss",  # AuthenticationGSS
    8: "gss",  # AuthenticationGSSContinue
    9: "sspi",  # AuthenticationSSPI
    10: "sasl",  # AuthenticationSASL
    11: "sasl",  # AuthenticationSASLContinue
}
SASL_FINAL = 12  # the server's last SCRAM message: no answer expected

# no authentication message is near this long (GSS tokens are at most
# PG_MAX_AUTH_TOKEN_LENGTH = 65535 bytes)
AUTH_LIMIT = 1 << 20


class AuthGate:
    """What the server asked, and what the client may send, until the
    server's first AuthenticationOk."""

    __slots__ = ("challenged", "answers", "method")

    def __init__(self) -> None:
        self.challenged = False  # the server asked for the client's credential
        self.answers = 0  # 'p' messages the client may send now
        self.method: str | None = None

    def server_request(self, code: int) -> None:
        """An Authentication message other than AuthenticationOk."""
        method = _CHALLENGES.get(code)
        if method is not None:
            self.challenged = True
            self.method = method
            self.answers += 1
        elif code != SASL_FINAL:
            # KerberosV4/V5, SCMCredential: gone from PostgreSQL for decades
            raise wire.ProtocolError(f"the server asked for authentication method {code}, "
                                     "which the proxy does not relay")

    def client_may_send(self, kind: int) -> bool:
        """A client message during authentication: only answers to requests."""
        if kind == 0x70 and self.answers > 0:  # 'p'
            self.answers -= 1
            return True
        return False


# PostgreSQL's NAMEDATALEN: the server cuts longer user names to one less
NAMEDATALEN = 64


def startup_user(packet: bytes) -> str:
    """The user name the server takes from a startup packet (empty if
    none): as the server reads it (ProcessStartupPacket), the pairs up to
    the first empty key, the last "user" of them, cut to NAMEDATALEN - 1
    bytes. A refusal and its log line name the role the server admitted."""
    parts = packet[8:].split(b"\0")
    user = b""
    for key, value in zip(parts[::2], parts[1::2], strict=False):
        if not key:
            break
        if key == b"user":
            user = value
    return user[:NAMEDATALEN - 1].decode("utf-8", "replace")


def refusal(user: str, upstream: str) -> bytes:
    """The FATAL error a client gets when the server admitted it without
    asking for a credential."""
    return wire.error_response([
        ("S", "FATAL"), ("V", "FATAL"), ("C", "28000"),
        ("M", f'corgipile proxy: the server at {upstream} admitted user "{user}" without '
              "asking for a password: the session is refused"),
        ("D", "The server's pg_hba.conf trusts the proxy's connection (a trust, peer or "
              "ident line), so every client of the proxy would log in with the proxy's own "
              "identity. The proxy only admits sessions for which the client itself "
              "answered the server's password, SCRAM or GSSAPI request."),
        ("H", "Make the pg_hba.conf line that matches the proxy's connection ask for a "
              "password (scram-sha-256), or start the proxy with "
              "--unsafe-allow-passwordless if every client that can reach the proxy may "
              "log in as any role without one."),
    ])
