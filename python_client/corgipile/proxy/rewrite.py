"""What ``corgipile proxy`` does to a query text that holds TRAIN BY or
PREDICT BY: the statements are found and checked by the client's own
translator (:func:`corgipile.statements.parse_statement`, the one behind
``Client.execute()``), and each becomes the plain SQL the client would run:

- ``SELECT * FROM t TRAIN BY svm WITH a = 1`` becomes
  ``SELECT * FROM corgipile.train('t'::pg_catalog.regclass, 'svm'::pg_catalog.text,
  a => '1'::pg_catalog.int4)``,
  each WITH value checked and converted against ``corgipile.train``'s
  signature in that database, exactly as ``Client.execute()`` does;
- ``SELECT c FROM t ... PREDICT BY m`` becomes the same SELECT with
  ``corgipile.predict('m', t) AS prediction`` (``predict_class`` for a
  model with text classes) added after its columns.

The two pieces of catalog knowledge this needs (the signature, the models'
classes) are read by the proxy on the client's own connection (see
catalog.py); this module only builds the lookup queries and the texts.
Values are written as string literals with a cast, never pasted raw.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from pglast import parser

from .. import metrics
from .._sql import catalog_type, qualified_type
from ..errors import StatementError
from ..params import _SAFE_TYPE, POSITIONAL, TrainSignature
from ..statements import (
    PlainStatement,
    Prediction,
    PredictStatement,
    ServerParam,
    TrainStatement,
    parse_statement,
    quote_ident,
    train_arguments,
)

__all__ = ["Failure", "Plan", "analyze", "render", "map_position", "literal", "SIGNATURE_QUERY",
           "classes_query", "signature_from_rows"]

# SQLSTATEs of the errors the proxy raises itself
SYNTAX_ERROR = "42601"
UNDEFINED_OBJECT = "42704"
FEATURE_NOT_SUPPORTED = "0A000"


@dataclass(frozen=True)
class Failure:
    """A statement the proxy refuses: sent to the client as an ErrorResponse.
    position is a 0-based character offset in the query text, or None."""

    code: str
    message: str
    position: int | None = None
    hint: str | None = None

    def fields(self, text: str) -> list[tuple[str, str]]:
        out = [("S", "ERROR"), ("V", "ERROR"), ("C", self.code), ("M", self.message)]
        if self.hint:
            out.append(("H", self.hint))
        if self.position is not None:
            # the protocol's position is 1-based, in characters
            out.append(("P", str(max(0, min(self.position, len(text))) + 1)))
        return out


@dataclass
class Plan:
    """A query text split into its statements; the TRAIN BY / PREDICT BY ones
    parsed, the others kept as they are."""

    text: str
    pieces: list[tuple[slice, Any]] = field(default_factory=list)
    # TRAIN BY ... WHERE: piece index -> the temporary table its rows are
    # copied into (on the client's connection, before the training)
    sources: dict[int, str] = field(default_factory=dict)

    @property
    def trains(self) -> list[TrainStatement]:
        return [s for _, s in self.pieces if isinstance(s, TrainStatement)]

    @property
    def predicts(self) -> list[PredictStatement]:
        return [s for _, s in self.pieces if isinstance(s, PredictStatement)]


def _failure(exc: StatementError, offset: int, code: str = SYNTAX_ERROR) -> Failure:
    position = None if exc.position is None else offset + exc.position
    return Failure(code, exc.message, position, exc.hint)


def analyze(text: str, single: bool) -> Plan | Failure | None:
    """None when text has no TRAIN BY / PREDICT BY (it goes through as is).
    single: a Parse message's text, which is one statement."""
    # scan positions are bytes; 'x' for every non-ASCII character keeps them
    # character offsets (it scans like any non-ASCII letter)
    ascii_text = "".join(c if ord(c) < 128 else "x" for c in text)
    try:
        slices = [slice(0, len(text))] if single else list(
            parser.split(ascii_text, with_parser=False, only_slices=True))
    except parser.ParseError:
        return None  # unterminated string and the like: the server says so
    plan = Plan(text)
    found = False
    for sl in slices:
        try:
            stmt = parse_statement(text[sl])
        except StatementError as exc:
            return _failure(exc, sl.start)
        if not isinstance(stmt, PlainStatement):
            found = True
        plan.pieces.append((sl, stmt))
    if not found:
        return None
    for sl, stmt in plan.pieces:
        if isinstance(stmt, TrainStatement) and stmt.source_query is not None and single:
            # the rows are copied into a temporary table before, and it is
            # dropped after, the client's query: around a simple Query only
            return Failure(FEATURE_NOT_SUPPORTED,
                           "TRAIN BY with a WHERE clause works through the proxy on the "
                           "simple query protocol only (psql, or a query without "
                           "parameters)", sl.start + stmt.relation_position,
                           "or copy the rows first (CREATE TEMPORARY TABLE t AS SELECT ... "
                           "WHERE ...) and train on that table")
    return plan


# -- catalog lookups -------------------------------------------------------------

# corgipile.train's arguments, one row each: name, mode (NULL: all IN), type
SIGNATURE_QUERY = """SELECT u.name, u.mode, pg_catalog.format_type(u.t, NULL)
  FROM pg_catalog.pg_proc p
  JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) p.pronamespace,
       LATERAL ROWS FROM (pg_catalog.unnest(p.proargnames),
           pg_catalog.unnest(p.proargmodes),
           pg_catalog.unnest(coalesce(p.proallargtypes, p.proargtypes::pg_catalog.oid[])))
           WITH ORDINALITY AS u(name, mode, t, i)
 WHERE n.nspname OPERATOR(pg_catalog.=) 'corgipile'
   AND p.proname OPERATOR(pg_catalog.=) 'train'
 ORDER BY p.oid, u.i"""


def classes_query(names: list[str]) -> str:
    """The stored models among names, with their classes as JSON text."""
    array = ", ".join(literal(n) for n in names)
    return ("SELECT m.model_name, m.classes::pg_catalog.text FROM corgipile.models m "
            f"WHERE m.model_name OPERATOR(pg_catalog.=) ANY (ARRAY[{array}]::pg_catalog.text[])")


def signature_from_rows(rows: list[list[str | None]]) -> TrainSignature | None:
    """What TrainSignature.load reads, from SIGNATURE_QUERY's rows (None
    when corgipile.train is not installed)."""
    if not rows:
        return None
    types: dict[str, str] = {}
    for name, mode, typ in rows:
        if name and (mode is None or mode in ("i", "b", "v")) and name not in POSITIONAL:
            types.setdefault(name, catalog_type(str(typ)))
    return TrainSignature(types)


# -- the rewritten text ------------------------------------------------------------

def literal(value: Any) -> str:
    """A string literal that means value whatever standard_conforming_strings
    says (E'' syntax: quotes and backslashes doubled)."""
    if value is None:
        return "NULL"
    text = str(value)
    return "E'" + text.replace("\\", "\\\\").replace("'", "''") + "'"


def _train_sql(stmt: TrainStatement, sig: TrainSignature, offset: int,
               source: tuple[str, str | None] | None = None) -> str | Failure:
    """Client._execute_train's checks (statements.train_arguments) and
    SignatureCall.call, with literals. source: for TRAIN BY ... WHERE, the
    temporary table holding the matching rows and the model name to give
    when the statement gives none."""
    try:
        model, params = train_arguments(stmt, sig)
    except StatementError as exc:
        return _failure(exc, offset)
    relation = stmt.relation
    if source is not None:
        relation = f"pg_temp.{quote_ident(source[0])}"
        if params.get("model_name") is None and source[1] is not None:
            params["model_name"] = source[1]
    args = [f"{literal(relation)}::pg_catalog.regclass",
            f"{literal(model)}::pg_catalog.text"]
    for name, value in params.items():
        typ = sig.types[name]
        if not _SAFE_TYPE.match(typ):  # pragma: no cover - the catalog's own names
            return Failure(FEATURE_NOT_SUPPORTED, f"unexpected type {typ!r} of {name}")
        # a $n stays a parameter reference: its value comes with the
        # client's Bind and the server converts it to the argument's type
        text = f"${value.number}" if isinstance(value, ServerParam) else literal(value)
        args.append(f"{quote_ident(name)} => {text}::{qualified_type(typ)}")
    return "SELECT * FROM corgipile.train(" + ", ".join(args) + ")"


def _predict_sql(stmt: PredictStatement, classes: dict[str, Any], offset: int
                 ) -> list[tuple[str, int, bool]] | Failure:
    """Client.execute's PREDICT BY: the client's statement, unchanged but
    for each PREDICT BY clause, which becomes a prediction column
    (``corgipile.predict(<model>, <row>) AS prediction``) of its SELECT;
    as pieces (text, where it comes from in the client's text, whether it
    is the client's text)."""
    for p in stmt.predictions:
        if p.model_name not in classes:
            return Failure(UNDEFINED_OBJECT, f'model "{p.model_name}" does not exist',
                           offset + p.model_position,
                           "list the models with SELECT model_name FROM corgipile.models")

    def call(p: Prediction) -> str:
        fn = metrics.predict_function(classes[p.model_name])
        cast = metrics.predict_cast(classes[p.model_name])
        return (f"corgipile.{fn}({literal(p.model_name)}, {quote_ident(p.row)})"
                + (f"::{cast}" if cast else ""))

    return [(text, offset + origin, own) for text, origin, own in stmt.pieces(call)]


Segment = tuple[int, int, int, bool]  # new start, length, old start, verbatim


def render(plan: Plan, sig: TrainSignature | None, classes_rows: list[list[str | None]],
           names: dict[int, str | None] | None = None) -> tuple[str, list[Segment]] | Failure:
    """The query text to send instead of plan.text, and where each part of
    it comes from (see map_position). names: for each TRAIN BY ... WHERE
    (plan.sources), the model name to give it when it names none."""
    # text rows of classes_query; its model_name is never NULL
    classes = {r[0]: (json.loads(r[1]) if r[1] is not None else None) for r in classes_rows
               if r[0] is not None}
    pieces: list[tuple[str, int, bool]] = []
    last = 0
    for index, (sl, stmt) in enumerate(plan.pieces):
        if isinstance(stmt, PlainStatement):
            continue
        new: Any
        if isinstance(stmt, TrainStatement):
            if sig is None:
                return Failure(UNDEFINED_OBJECT,
                               "corgipile.train() is not installed in this database",
                               sl.start, "run CREATE EXTENSION corgipile")
            source = None
            if index in plan.sources:
                source = (plan.sources[index], (names or {}).get(index))
            new = _train_sql(stmt, sig, sl.start, source)
            if not isinstance(new, Failure):
                lead = len(stmt.text) - len(stmt.text.lstrip())
                new = [(new, sl.start + lead, False)]
        else:
            new = _predict_sql(stmt, classes, sl.start)
        if isinstance(new, Failure):
            return new
        pieces.append((plan.text[last:sl.start], last, True))
        pieces.extend(new)
        last = sl.stop
    pieces.append((plan.text[last:], last, True))
    segments: list[Segment] = []
    at = 0
    for text, old, verbatim in pieces:
        segments.append((at, len(text), old, verbatim))
        at += len(text)
    return "".join(p[0] for p in pieces), segments


def map_position(segments: list[Segment], position: int) -> int:
    """A server error's position (1-based) in the rewritten text, as a
    position in the client's text: the same character in the client's own
    parts, the statement's key word in what the proxy wrote."""
    for start, length, old, verbatim in segments:
        if start <= position - 1 < start + length:
            return (old + position - 1 - start if verbatim else old) + 1
    return position
