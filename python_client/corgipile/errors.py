"""Exceptions raised by the client.

Errors the server raises (bad parameter values, missing tables, ...) reach
you as ``psycopg`` exceptions with the server's message and SQLSTATE; the
classes here are for what the client itself detects, plus a few server
errors given a more specific type (a missing model, a cancelled training).
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "CorgipileError",
    "LoadError",
    "StatementError",
    "ParameterError",
    "ModelNotFound",
    "ModelExists",
    "ModelFormatError",
    "TrainingCancelled",
    "TrainingInterrupted",
    "ConnectionTypeError",
]


class CorgipileError(Exception):
    """Base class of the client's own errors."""


class StatementError(CorgipileError, ValueError):
    """A TRAIN BY / PREDICT BY statement the client cannot translate.

    ``position`` is the 0-based character offset in ``statement`` that the
    error points at (or None); ``str()`` shows the statement with a caret
    under that position, like psql does.
    """

    def __init__(self, message: str, statement: str | None = None,
                 position: int | None = None, hint: str | None = None) -> None:
        self.message = message
        self.statement = statement
        self.position = position
        self.hint = hint
        super().__init__(self._render())

    def _render(self) -> str:
        text = self.message
        if self.statement is not None and self.position is not None:
            line, col = _line_at(self.statement, self.position)
            text += f"\n  {line}\n  {' ' * col}^"
        if self.hint:
            text += f"\nHINT: {self.hint}"
        return text


def _line_at(statement: str, position: int) -> tuple[str, int]:
    """The source line holding position, and the column within it."""
    position = max(0, min(position, len(statement)))
    start = statement.rfind("\n", 0, position) + 1
    end = statement.find("\n", position)
    if end < 0:
        end = len(statement)
    line = statement[start:end]
    # tabs would misplace the caret
    col = len(statement[start:position].expandtabs(1))
    return line.expandtabs(1), col


class ParameterError(CorgipileError, TypeError):
    """An unknown, duplicated or ill-typed training parameter."""


class ModelNotFound(CorgipileError, LookupError):
    """No model of that name in corgipile.models."""


class ModelExists(CorgipileError):
    """A model of that name exists already."""


class ModelFormatError(CorgipileError, ValueError):
    """An exported model document that cannot be imported."""


class LoadError(CorgipileError, ValueError):
    """Input a loader cannot store as given: ``message`` names the problem
    and the column, ``column`` is that column (or None), and ``fix`` holds
    the loader options that solve it (``{"types": {"PID": "text"}}``), or
    ``advice`` says what to change in the data.

    ``str()`` gives the fix as Python keyword arguments; the ``corgipile``
    command shows the same fix as its own options (``--types PID=text``).
    """

    def __init__(self, message: str, *, column: str | None = None,
                 fix: dict[str, Any] | None = None, advice: str | None = None) -> None:
        self.message = message
        self.column = column
        self.fix = dict(fix or {})
        self.advice = advice
        super().__init__(message + (f" ({self.hint()})" if self.hint() else ""))

    def hint(self, options: str | None = None) -> str | None:
        """The fix, as ``pass <options>`` (options: how the door spells
        them; default: Python keyword arguments), and the advice."""
        if options is None and self.fix:
            # None: a value of the caller's choosing
            options = ", ".join(f"{k}={'...' if v is None else repr(v)}"
                                for k, v in self.fix.items())
        parts = []
        if options:
            parts.append(f"pass {options}")
        if self.advice:
            parts.append(self.advice)
        return "; ".join(parts) or None


class TrainingCancelled(CorgipileError):
    """The server cancelled the training (statement_timeout, another
    session's pg_cancel_backend, ...). Nothing was stored."""


class TrainingInterrupted(KeyboardInterrupt):
    """Ctrl-C during training: the query was cancelled on the server and
    nothing was stored. A KeyboardInterrupt, so it ends a script as usual."""


class ConnectionTypeError(CorgipileError, TypeError):
    """The object given to Client() is not a connection the client can use."""
