"""TRAIN BY and PREDICT BY: recognise them and check them with PostgreSQL's
own grammar (pglast), without touching the database.

``parse_statement(text, params)`` returns one of

- :class:`PlainStatement`: anything else, run unchanged;
- :class:`TrainStatement`: ``SELECT * FROM <table> [WHERE ...] TRAIN BY <model>
  [WITH <name> = <value>, ...]``;
- :class:`PredictStatement`: ``SELECT <columns> FROM <table> [WHERE ...]
  [ORDER BY ...] [LIMIT ...] PREDICT BY <model_name>``.

The words TRAIN BY / PREDICT BY are found with PostgreSQL's scanner, so the
same words inside a string, a quoted identifier, a comment or parentheses
are not taken for them. The part before them must be one plain SELECT,
which pglast parses with the server's grammar: a syntax error there points
at the user's text. Nothing from the statement is ever pasted into SQL
except that checked SELECT itself; every name and value after TRAIN BY /
PREDICT BY is bound as a parameter or quoted with ``psycopg.sql``.

psycopg placeholders (``%s``, ``%(name)s``) work as in ``cursor.execute``
when ``params`` is given: in the SELECT part and as WITH values.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from pglast import ast, parser
from psycopg import sql

from ._sql import ident as _ident
from ._sql import is_node as _is
from ._sql import quote_ident
from .errors import ParameterError, StatementError


class Signature(Protocol):
    """What train_arguments needs of corgipile.train's signature: the
    parameters' SQL types by name, and their checks (params.TrainSignature,
    which imports this module, is the one implementation)."""

    @property
    def types(self) -> dict[str, str]: ...

    def valid_names_text(self) -> str: ...

    def check_name(self, name: str) -> str: ...

    def convert(self, name: str, value: Any) -> Any: ...


__all__ = [
    "PlainStatement",
    "TrainStatement",
    "PredictStatement",
    "Prediction",
    "Statement",
    "WithParam",
    "Name",
    "Bound",
    "ServerParam",
    "parse_statement",
    "train_arguments",
    "is_query",
    "filter_query",
    "quote_ident",
]

Params = Sequence[Any] | Mapping[str, Any] | None


@dataclass(frozen=True)
class Name:
    """A bare (possibly qualified) name given as a WITH value, e.g.
    ``shuffle = no_shuffle`` or ``validation = public.heldout``. Unquoted
    parts are already folded to lower case, as PostgreSQL does."""

    parts: tuple[str, ...]

    def quoted(self) -> str:
        return ".".join(quote_ident(p) for p in self.parts)


@dataclass(frozen=True)
class Bound:
    """A value taken from the caller's ``params`` (a ``%s`` placeholder)."""

    value: Any


@dataclass(frozen=True)
class ServerParam:
    """A ``$n`` parameter reference given as a WITH value: its value comes
    with the statement's Bind message (the extended protocol through
    ``corgipile proxy``), so only the server sees it. Client.execute binds
    values through ``%s`` placeholders instead and refuses these."""

    number: int


@dataclass(frozen=True)
class WithParam:
    name: str
    value: Any  # str | int | float | bool | None | Name | Bound | ServerParam
    position: int  # where the name starts in the statement


@dataclass(frozen=True)
class PlainStatement:
    text: str


@dataclass(frozen=True)
class TrainStatement:
    text: str
    schema: str | None
    relname: str
    relation_position: int
    model: Any  # str | Name | Bound
    model_position: int
    params: tuple[WithParam, ...]
    # set when the SELECT has a WHERE clause: the checked SELECT to
    # materialise, and the caller's params that belong to it
    source_query: sql.Composable | None = None
    source_params: Params = None
    where_text: str | None = None

    @property
    def relation(self) -> str:
        """The table as a quoted, possibly qualified name (regclass input)."""
        if self.schema:
            return f"{quote_ident(self.schema)}.{quote_ident(self.relname)}"
        return quote_ident(self.relname)


@dataclass(frozen=True)
class Prediction:
    """One ``PREDICT BY <model>`` of a statement: where its prediction
    column goes and what it removes.

    insert_at: the offset of the FROM of its SELECT, where
    ``[, ]corgipile.predict(<model>, <row>) AS prediction`` goes;
    clause: the ``PREDICT BY <model>`` text, [start, end), removed;
    row: the name of the FROM item whose row is predicted."""

    model_name: str
    model_position: int
    insert_at: int
    comma: bool
    row: str
    clause: tuple[int, int]


@dataclass(frozen=True)
class PredictStatement:
    """A statement holding one or more ``PREDICT BY``: a SELECT, or any
    statement where a SELECT may stand (subqueries, CTEs, ``CREATE TABLE
    AS``, ``INSERT ... SELECT``, ``EXPLAIN``). params: the caller's params
    without the values that named models (``PREDICT BY %s``)."""

    text: str
    predictions: tuple[Prediction, ...]
    params: Params = None

    @property
    def model_name(self) -> str:
        return self.predictions[0].model_name

    @property
    def model_position(self) -> int:
        return self.predictions[0].model_position

    @property
    def model_names(self) -> list[str]:
        return sorted({p.model_name for p in self.predictions})

    def pieces(self, call: Callable[[Prediction], str]) -> list[tuple[str, int, bool]]:
        """The rewritten text as pieces (text, where it comes from in
        self.text, whether it is the caller's own text): each PREDICT BY
        clause removed, each prediction column, ``call(prediction)`` (the
        function call text), added before the FROM of its SELECT."""
        events: list[tuple[int, int, Prediction]] = []
        for p in self.predictions:
            events.append((p.insert_at, 0, p))
            events.append((p.clause[0], 1, p))
        events.sort(key=lambda e: (e[0], e[1]))
        out: list[tuple[str, int, bool]] = []
        at = 0
        for pos, kind, p in events:
            out.append((self.text[at:pos], at, True))
            if kind == 0:
                column = (", " if p.comma else " ") + call(p) + " AS prediction\n"
                out.append((column, p.model_position, False))
                at = pos
            else:
                at = p.clause[1]
        out.append((self.text[at:], at, True))
        return [piece for piece in out if piece[0]]

    def query(self, call: Callable[[Prediction], str]) -> str:
        """The statement to run, with params (placeholders kept; the text
        added is %-escaped when there are params)."""
        if self.params is None:
            return "".join(t for t, _, _ in self.pieces(call))
        return "".join(t if own else t.replace("%", "%%")
                       for t, _, own in self.pieces(call))


Statement = PlainStatement | TrainStatement | PredictStatement


def parse_sql(text: str) -> Any:
    """pglast's parse_sql (its node types are loosely annotated: Any here)."""
    return parser.parse_sql(text)


# -- placeholders ----------------------------------------------------------

_PLACEHOLDER = re.compile(r"%(?:\((?P<name>[^)]+)\)(?P<nfmt>.)|(?P<fmt>.))", re.S)


@dataclass(frozen=True)
class _Placeholder:
    start: int
    end: int  # exclusive
    key: int | str | None  # index, name, or None for a literal %%


def _find_placeholders(text: str) -> list[_Placeholder]:
    found: list[_Placeholder] = []
    index = 0
    for m in _PLACEHOLDER.finditer(text):
        if m.group("name") is not None:
            if m.group("nfmt") not in "sbt":
                raise StatementError(
                    f"unsupported placeholder {m.group(0)!r}: use %s or %(name)s",
                    text, m.start())
            found.append(_Placeholder(m.start(), m.end(), m.group("name")))
        elif m.group("fmt") == "%":
            found.append(_Placeholder(m.start(), m.end(), None))
        elif m.group("fmt") in "sbt":
            found.append(_Placeholder(m.start(), m.end(), index))
            index += 1
        else:
            raise StatementError(
                f"unsupported placeholder {m.group(0)!r}: use %s or %(name)s, and %% "
                "for a literal %", text, m.start())
    kinds = {type(p.key) for p in found if p.key is not None}
    if len(kinds) > 1:
        raise StatementError("use either %s or %(name)s placeholders, not both", text,
                             found[0].start)
    return found


def _check_params(text: str, placeholders: list[_Placeholder], params: Params) -> None:
    keys = [p.key for p in placeholders if p.key is not None]
    if not keys:
        return
    if isinstance(keys[0], str):
        if not isinstance(params, Mapping):
            raise StatementError("%(name)s placeholders need params as a mapping", text,
                                 placeholders[0].start)
        for p in placeholders:
            if isinstance(p.key, str) and p.key not in params:
                raise StatementError(f"no value for placeholder %({p.key})s in params",
                                     text, p.start)
    else:
        if isinstance(params, Mapping) or isinstance(params, (str, bytes)):
            raise StatementError("%s placeholders need params as a sequence", text,
                                 placeholders[0].start)
        assert params is not None
        if len(params) != len(keys):
            raise StatementError(
                f"the statement has {len(keys)} placeholders but {len(params)} "
                "parameters were passed", text, None)


def _lookup(params: Params, key: int | str) -> Any:
    assert params is not None
    return params[key]  # type: ignore[index]


# -- scanning --------------------------------------------------------------

def _masked(text: str, placeholders: list[_Placeholder]) -> tuple[str, str]:
    """Two copies of text, each character for character the same length:

    - content: placeholders replaced by ``$1`` (padded with spaces), so
      pglast can parse it and node values keep their real characters;
    - ascii: content with every non-ASCII character replaced by 'x', for
      positions (pglast's error offsets are byte-based, and 'x' scans
      exactly like any non-ASCII letter, inside or outside quotes).
    """
    chars = list(text)
    for p in placeholders:
        width = p.end - p.start
        repl = "% " if p.key is None else ("$1" + " " * (width - 2))
        chars[p.start:p.end] = list(repl[:width].ljust(width))
    content = "".join(chars)
    ascii_text = "".join(c if ord(c) < 128 else "x" for c in content)
    return content, ascii_text


def _scan(ascii_text: str) -> list[Any] | None:
    try:
        return list(parser.scan(ascii_text))
    except parser.ParseError:
        return None


def _is_word(text: str, tok: Any, word: str) -> bool:
    return tok.name == "IDENT" and text[tok.start:tok.end + 1].lower() == word


_OPEN = {"ASCII_40", "ASCII_91"}
_CLOSE = {"ASCII_41", "ASCII_93"}


def _depths(tokens: list[Any]) -> list[int]:
    out = []
    depth = 0
    for tok in tokens:
        if tok.name in _CLOSE:
            depth -= 1
        out.append(depth)
        if tok.name in _OPEN:
            depth += 1
    return out


# -- entry points ----------------------------------------------------------

def parse_statement(text: str, params: Params = None) -> Statement:
    """Classify and check one statement; see the module docstring."""
    placeholders = _find_placeholders(text) if params is not None else []
    content, ascii_text = _masked(text, placeholders)
    tokens = _scan(ascii_text)
    if tokens is None:
        return PlainStatement(text)
    depths = _depths(tokens)
    found: list[tuple[int, str]] = []
    for i in range(len(tokens) - 1):
        if tokens[i + 1].name == "BY":
            for word in ("train", "predict"):
                if _is_word(ascii_text, tokens[i], word):
                    found.append((i, word))
    if not found:
        return PlainStatement(text)
    _check_params(text, placeholders, params)
    trains = [f for f in found if f[1] == "train"]
    if trains and len(found) > 1:
        raise StatementError("only one TRAIN BY or PREDICT BY per statement", text,
                             tokens[found[1][0]].start)
    # statement end: trailing semicolons are fine, others mean a second statement
    end = len(tokens)
    while end > 0 and tokens[end - 1].name == "ASCII_59":
        end -= 1
    for i in range(end):
        if tokens[i].name == "ASCII_59" and depths[i] <= 0:
            raise StatementError("one statement at a time: TRAIN BY and PREDICT BY cannot "
                                 "be combined with other statements", text, tokens[i].start)
    ctx = _Context(text, content, ascii_text, placeholders, params)
    if trains:
        kw_index = trains[0][0]
        if depths[kw_index] != 0:
            raise ctx.error("TRAIN BY trains and returns one row per epoch: it stands alone, "
                            f"not inside another statement: {_SELECT_USAGE}",
                            tokens[kw_index].start)
        kw = tokens[kw_index]
        tail = tokens[kw_index + 2:end]
        by_end = tokens[kw_index + 1].end + 1
        return _train(ctx, kw.start, tail, by_end, tokens[:kw_index], depths[:kw_index])
    return _predict_all(ctx, tokens[:end], depths[:end], [i for i, _ in found])


@dataclass
class _Context:
    text: str
    content: str
    ascii: str
    placeholders: list[_Placeholder]
    params: Params

    def error(self, message: str, position: int | None, hint: str | None = None
              ) -> StatementError:
        return StatementError(message, self.text, position, hint)

    def parse(self, start: int, end: int, prefix: str = "") -> Any:
        """Parse content[start:end] (after prefix) with PostgreSQL's grammar;
        a syntax error points into the user's text."""
        try:
            return parse_sql(prefix + self.content[start:end])
        except parser.ParseError as exc:
            position = None
            try:
                parse_sql(prefix + self.ascii[start:end])
            except parser.ParseError as ascii_exc:
                if len(ascii_exc.args) > 1 and isinstance(ascii_exc.args[1], int):
                    position = start + max(0, ascii_exc.args[1] - len(prefix))
            if position is None:  # "at end of input"
                position = start + len(self.content[start:end].rstrip())
            raise self.error(str(exc.args[0]), position) from None

    def placeholder_at(self, position: int) -> _Placeholder:
        for p in self.placeholders:
            if p.start == position:
                return p
        raise self.error("unexpected parameter reference", position)

    def placeholders_before(self, position: int) -> int:
        return sum(1 for p in self.placeholders
                   if p.start < position and isinstance(p.key, int))


_SELECT_USAGE = "SELECT * FROM <table> [WHERE ...] TRAIN BY <model> [WITH <name> = <value>, ...]"
_PREDICT_USAGE = "SELECT <columns> FROM <table> [WHERE ...] PREDICT BY <model_name>"


def _select(ctx: _Context, start: int, end: int, usage: str, word: str) -> Any:
    head = ctx.content[start:end]
    if not head.strip():
        raise ctx.error(f"{word} needs a SELECT before it: {usage}", start)
    stmts = ctx.parse(start, end)
    if len(stmts) != 1:
        raise ctx.error(f"{word} follows a single SELECT: {usage}", None)
    stmt = stmts[0].stmt
    position = start + (stmts[0].stmt_location or 0)
    if not isinstance(stmt, ast.SelectStmt):
        raise ctx.error(f"{word} follows a SELECT statement: {usage}",
                        _first_token(ctx.ascii, position))
    if getattr(stmt.op, "name", "SETOP_NONE") != "SETOP_NONE":
        raise ctx.error(f"{word} takes one SELECT, not a UNION, INTERSECT or EXCEPT", None)
    if stmt.valuesLists:
        raise ctx.error(f"{word} needs SELECT ... FROM <table>, not VALUES: {usage}",
                        _first_token(ctx.ascii, position))
    if stmt.intoClause is not None:
        raise ctx.error(f"{word} cannot be combined with SELECT INTO", None)
    return stmt


def _first_token(ascii_text: str, position: int) -> int:
    while position < len(ascii_text) and ascii_text[position].isspace():
        position += 1
    return position


def _single_table(ctx: _Context, stmt: Any, word: str, usage: str, fallback: int,
                  offset: int = 0) -> Any:
    if not stmt.fromClause:
        raise ctx.error(f"{word} needs a table: {usage}", fallback)
    if len(stmt.fromClause) != 1 or not isinstance(stmt.fromClause[0], ast.RangeVar):
        node = stmt.fromClause[1] if len(stmt.fromClause) > 1 else stmt.fromClause[0]
        location = getattr(node, "location", None)
        raise ctx.error(f"{word} reads one table (no joins, subqueries or functions in "
                        f"FROM): {usage}",
                        offset + location if location is not None else fallback)
    rv = stmt.fromClause[0]
    if rv.catalogname:
        raise ctx.error("cross-database references are not supported",
                        offset + rv.location if rv.location is not None else fallback)
    return rv


def _top_level(tokens: list[Any], depths: list[int], name: str) -> Any:
    for tok, depth in zip(tokens, depths, strict=True):
        if tok.name == name and depth == 0:
            return tok
    return None


def _train(ctx: _Context, kw_start: int, tail: list[Any], by_end: int,
           head_tokens: list[Any], head_depths: list[int]) -> TrainStatement:
    stmt = _select(ctx, 0, kw_start, _SELECT_USAGE, "TRAIN BY")
    from_tok = _top_level(head_tokens, head_depths, "FROM")
    from_pos = from_tok.start if from_tok is not None else kw_start
    clauses = [
        ("withClause", "a WITH query"), ("distinctClause", "DISTINCT"),
        ("groupClause", "GROUP BY"), ("havingClause", "HAVING"),
        ("windowClause", "WINDOW"), ("sortClause", "ORDER BY"),
        ("limitCount", "LIMIT"), ("limitOffset", "OFFSET"), ("lockingClause", "FOR UPDATE"),
    ]
    for attr, label in clauses:
        if getattr(stmt, attr, None):
            raise ctx.error(
                f"TRAIN BY trains on a table or its rows matching a WHERE clause; {label} "
                f"is not supported: {_SELECT_USAGE}", None,
                "to train on any query, use client.train(\"<query>\", model, ...)")
    targets: Any = stmt.targetList or ()
    first: Any = targets[0].val if targets else None
    star = (len(targets) == 1 and targets[0].name is None
            and _is(first, ast.ColumnRef) and len(first.fields) == 1
            and _is(first.fields[0], ast.A_Star))
    if not star:
        position = targets[0].location if targets else None
        raise ctx.error("TRAIN BY trains on whole rows: write SELECT * FROM <table>",
                        position, "choose the label and feature columns with "
                        "WITH label = ..., features = ...")
    rv = _single_table(ctx, stmt, "TRAIN BY", _SELECT_USAGE, from_pos)
    model, model_pos, rest = _model_value(ctx, tail, by_end, "TRAIN BY", "<model>")
    params = _with_params(ctx, rest, model_pos)
    source_query: sql.Composable | None = None
    source_params: Params = None
    where_text: str | None = None
    if stmt.whereClause is not None:
        # train on the matching rows: the checked SELECT itself, unchanged
        head = ctx.text[:kw_start].rstrip()
        if ctx.params is None:
            source_params = None
        elif isinstance(ctx.params, Mapping):
            source_params = ctx.params
        else:
            source_params = list(ctx.params)[:ctx.placeholders_before(kw_start)]
        source_query = sql.SQL(head)
        where_tok = _top_level(head_tokens, head_depths, "WHERE")
        if where_tok is not None:
            where_text = ctx.text[where_tok.end + 1:kw_start].strip()
    return TrainStatement(
        text=ctx.text, schema=rv.schemaname, relname=rv.relname,
        relation_position=rv.location, model=model, model_position=model_pos,
        params=tuple(params), source_query=source_query, source_params=source_params,
        where_text=where_text)


def _model_value(ctx: _Context, tail: list[Any], by_end: int, word: str, what: str
                 ) -> tuple[Any, int, list[Any]]:
    if not tail:
        raise ctx.error(f"{word} needs {what} after it", by_end)
    tok = tail[0]
    value = _value(ctx, [tok], f"{what} after {word}")
    if isinstance(value, Name):
        if len(value.parts) != 1:
            raise ctx.error(f"{what} after {word} is one name or a quoted string", tok.start)
        value = value.parts[0]
    elif isinstance(value, Bound):
        pass
    elif not isinstance(value, str):
        raise ctx.error(f"{what} after {word} is a name or a quoted string", tok.start)
    return value, tok.start, tail[1:]


def _with_params(ctx: _Context, rest: list[Any], model_pos: int) -> list[WithParam]:
    if not rest:
        return []
    if rest[0].name != "WITH":
        raise ctx.error("expected WITH <name> = <value>, ... after the model", rest[0].start)
    items = rest[1:]
    if len(items) >= 2 and items[0].name == "ASCII_40" and items[-1].name == "ASCII_41" \
            and all(d >= 1 for d in _depths(items)[1:-1]):
        items = items[1:-1]
    if not items:
        raise ctx.error("WITH needs at least one <name> = <value>", rest[0].end + 1)
    groups: list[list[Any]] = [[]]
    for tok, depth in zip(items, _depths(items), strict=True):
        if tok.name == "ASCII_44" and depth == 0:
            groups.append([])
        else:
            groups[-1].append(tok)
    out: list[WithParam] = []
    seen: dict[str, int] = {}
    for i, group in enumerate(groups):
        if not group:
            at = items[-1].end + 1 if i == len(groups) - 1 else rest[0].start
            raise ctx.error("empty item in the WITH list", at)
        name_tok = group[0]
        if name_tok.name != "IDENT" and name_tok.kind == "NO_KEYWORD":
            raise ctx.error("expected a parameter name", name_tok.start)
        name = _ident(ctx.content[name_tok.start:name_tok.end + 1])
        if len(group) < 2 or group[1].name not in ("ASCII_61", "EQUALS_GREATER"):
            at = group[1].start if len(group) > 1 else name_tok.end + 1
            raise ctx.error(f"expected = after {name}", at)
        if len(group) < 3:
            raise ctx.error(f"expected a value after {name} =", group[1].end + 1)
        if name in seen:
            raise ctx.error(f"parameter {name} given twice", name_tok.start)
        seen[name] = name_tok.start
        value = _value(ctx, group[2:], f"the value of {name}")
        out.append(WithParam(name, value, name_tok.start))
    return out


_VALUE_HELP = ("a value is a number, a quoted string, true/false, null, a name, "
               "or a %s placeholder")


def _value(ctx: _Context, toks: list[Any], what: str) -> Any:
    start, end = toks[0].start, toks[-1].end + 1
    for tok in toks:
        if tok.name == "ASCII_59":
            raise ctx.error("unexpected ;", tok.start)
    prefix = "SELECT "
    stmts = ctx.parse(start, end, prefix)
    if len(stmts) != 1 or not isinstance(stmts[0].stmt, ast.SelectStmt):
        raise ctx.error(f"{what} is not a single value; {_VALUE_HELP}", start)
    sel = stmts[0].stmt
    if (sel.fromClause or sel.whereClause or not sel.targetList
            or len(sel.targetList) != 1 or sel.targetList[0].name is not None):
        raise ctx.error(f"{what} is not a single value; {_VALUE_HELP}", start)
    node: Any = sel.targetList[0].val
    if isinstance(node, ast.A_Const):
        if node.isnull:
            return None
        val: Any = node.val
        if _is(val, ast.Integer):
            return int(val.ival)
        if _is(val, ast.Float):
            return str(val.fval)  # keep the digits; the server parses them
        if _is(val, ast.Boolean):
            return bool(val.boolval)
        if _is(val, ast.String):
            return str(val.sval)
    elif _is(node, ast.ColumnRef):
        if all(isinstance(f, ast.String) for f in node.fields):
            return Name(tuple(f.sval for f in node.fields))
    elif isinstance(node, ast.ParamRef) and len(toks) == 1:
        if any(p.start == start for p in ctx.placeholders):
            p = ctx.placeholder_at(start)
            if p.key is None:
                raise ctx.error("unexpected %%", start)
            return Bound(_lookup(ctx.params, p.key))
        assert node.number is not None  # the parser numbers every $n
        return ServerParam(node.number)
    raise ctx.error(f"{what} must be a constant; {_VALUE_HELP}", start)


_SETOPS = {"UNION", "INTERSECT", "EXCEPT"}


def _predict_one(ctx: _Context, tokens: list[Any], depths: list[int], k: int
                 ) -> tuple[Prediction, int | None]:
    """The PREDICT BY at token k: its SELECT is the one it ends, at its
    depth (a whole statement's, or a parenthesised one's). Returns the
    prediction and the index of the placeholder that named the model (a
    positional parameter to drop), if any."""
    kw, depth = tokens[k], depths[k]
    by_end = tokens[k + 1].end + 1
    tail = list(_until_close(tokens[k + 2:], depths[k + 2:], depth))
    model, model_pos, rest = _model_value(ctx, tail, by_end, "PREDICT BY", "<model_name>")
    if rest:
        raise ctx.error("unexpected text after the model name", rest[0].start,
                        "PREDICT BY <model_name> ends its SELECT (or the parenthesised "
                        "SELECT it is in)")
    if tail[0].name in _OPEN:
        raise ctx.error("PREDICT BY needs <model_name> after it", tail[0].start)
    dropped = None
    if isinstance(model, Bound):
        key = ctx.placeholder_at(model_pos).key
        dropped = key if isinstance(key, int) else None
        model = model.value
    if not isinstance(model, str):
        raise ctx.error("the model name must be a string", model_pos)
    model_end = tail[0].end + 1
    # the span of the SELECT: from the ( that opens this depth, or the start
    start = 0
    if depth > 0:
        start = next(j for j in range(k - 1, -1, -1)
                     if tokens[j].name in _OPEN and depths[j] == depth - 1) + 1
    same = [j for j in range(start, k) if depths[j] == depth]
    for j in same:
        if tokens[j].name in _SETOPS:
            raise ctx.error(f"PREDICT BY adds a column to one SELECT, not to a "
                            f"{tokens[j].name}: put the SELECT in parentheses, "
                            "(SELECT ... PREDICT BY m)", tokens[j].start)
    selects = [j for j in same if tokens[j].name == "SELECT"]
    if not selects:
        at = tokens[same[0]].start if same else kw.start
        raise ctx.error(f"PREDICT BY follows a SELECT statement: {_PREDICT_USAGE}", at)
    sel = selects[-1]
    froms = [j for j in same if j > sel and tokens[j].name == "FROM"]
    if not froms:
        raise ctx.error(f"PREDICT BY needs a table: {_PREDICT_USAGE}", kw.start)
    from_tok = tokens[froms[0]]
    stmt = _select(ctx, tokens[sel].start, kw.start, _PREDICT_USAGE, "PREDICT BY")
    for attr, label in (("groupClause", "GROUP BY"), ("havingClause", "HAVING"),
                        ("windowClause", "WINDOW"), ("lockingClause", "FOR UPDATE")):
        if getattr(stmt, attr, None):
            raise ctx.error(f"PREDICT BY predicts one value per row; {label} is not "
                            f"supported: {_PREDICT_USAGE}", None)
    rv = _single_table(ctx, stmt, "PREDICT BY", _PREDICT_USAGE, from_tok.start,
                       offset=tokens[sel].start)
    row = rv.alias.aliasname if rv.alias is not None else rv.relname
    return Prediction(model_name=model, model_position=model_pos, insert_at=from_tok.start,
                      comma=bool(stmt.targetList), row=row,
                      clause=(kw.start, model_end)), dropped


def _until_close(tokens: list[Any], depths: list[int], depth: int) -> Any:
    """The tokens up to the ) that closes depth (or the end)."""
    for tok, d in zip(tokens, depths, strict=True):
        if d < depth:
            return
        yield tok


def _predict_all(ctx: _Context, tokens: list[Any], depths: list[int], found: list[int]
                 ) -> PredictStatement:
    predictions = []
    dropped: set[int] = set()
    for k in found:
        p, key = _predict_one(ctx, tokens, depths, k)
        predictions.append(p)
        if key is not None:
            dropped.add(key)
    # the whole statement, PREDICT BY clauses blanked, by PostgreSQL's grammar
    blank, blank_ascii = list(ctx.content), list(ctx.ascii)
    for p in predictions:
        blank[p.clause[0]:p.clause[1]] = " " * (p.clause[1] - p.clause[0])
        blank_ascii[p.clause[0]:p.clause[1]] = " " * (p.clause[1] - p.clause[0])
    _Context(ctx.text, "".join(blank), "".join(blank_ascii), ctx.placeholders,
             ctx.params).parse(0, len(ctx.content))
    params: Params
    if ctx.params is None or isinstance(ctx.params, Mapping):
        params = ctx.params
    else:
        params = [v for i, v in enumerate(ctx.params) if i not in dropped]
    return PredictStatement(text=ctx.text, predictions=tuple(predictions), params=params)


# -- TRAIN BY's arguments --------------------------------------------------

def train_arguments(stmt: TrainStatement, sig: Signature) -> tuple[str, dict[str, Any]]:
    """The model name and the WITH values converted to corgipile.train's
    argument types, checked against its signature sig; the one check behind
    Client.execute() and the proxy. Raises StatementError pointing into
    stmt.text at the offending name. A ServerParam value stays as it is:
    the server converts what is bound to it, as for any parameter."""
    params: dict[str, Any] = {}
    for p in stmt.params:
        if p.name not in sig.types:
            try:
                sig.check_name(p.name)
            except ParameterError as exc:
                # the list of names goes in the hint, not the message
                raise StatementError(str(exc).split(";")[0], stmt.text, p.position,
                                     f"valid parameters are: {sig.valid_names_text()}"
                                     ) from None
        if isinstance(p.value, ServerParam):
            params[p.name] = p.value
            continue
        try:
            params[p.name] = sig.convert(p.name, p.value)
        except ParameterError as exc:
            raise StatementError(str(exc), stmt.text, p.position) from None
    model = stmt.model.value if isinstance(stmt.model, Bound) else stmt.model
    if not isinstance(model, str):
        raise StatementError("the model must be a string", stmt.text, stmt.model_position)
    return model, params


# -- helpers for client.train(source, where=...) ---------------------------

def is_query(text: str) -> bool:
    """True when text is a single SELECT (or VALUES/TABLE) statement rather
    than a table name: ``'points'`` and ``'public."My T"'`` are names,
    ``'SELECT * FROM points WHERE ...'`` is a query."""
    try:
        stmts = parse_sql(text)
    except parser.ParseError:
        return False
    return len(stmts) == 1 and isinstance(stmts[0].stmt, ast.SelectStmt)


def check_query(text: str) -> None:
    """Raise StatementError unless text is exactly one SELECT statement."""
    try:
        stmts = parse_sql(text)
    except parser.ParseError as exc:
        position = None
        ascii_text = "".join(c if ord(c) < 128 else "x" for c in text)
        try:
            parse_sql(ascii_text)
        except parser.ParseError as e2:
            position = e2.args[1] if len(e2.args) > 1 else None
        raise StatementError(str(exc.args[0]), text, position) from None
    if len(stmts) != 1 or not isinstance(stmts[0].stmt, ast.SelectStmt):
        raise StatementError("expected a single SELECT query", text, None)
    if stmts[0].stmt.intoClause is not None:
        raise StatementError("SELECT INTO is not a query to train on", text, None)


def filter_query(relation: sql.Composable, where: str) -> sql.Composed:
    """``SELECT * FROM relation WHERE (where)``, with where checked to be
    exactly one boolean expression (no second statement, no UNION, ...)."""
    probe = f'SELECT * FROM "t" WHERE ({where}\n)'
    try:
        stmts = parse_sql(probe)
    except parser.ParseError as exc:
        position = None
        ascii_probe = "".join(c if ord(c) < 128 else "x" for c in probe)
        try:
            parse_sql(ascii_probe)
        except parser.ParseError as e2:
            if len(e2.args) > 1 and isinstance(e2.args[1], int):
                position = max(0, e2.args[1] - len('SELECT * FROM "t" WHERE ('))
        raise StatementError(f"in the WHERE condition: {exc.args[0]}", where,
                             position) from None
    stmt = stmts[0].stmt if len(stmts) == 1 else None
    ok = (isinstance(stmt, ast.SelectStmt) and stmt.whereClause is not None
          and len(stmt.fromClause or ()) == 1 and len(stmt.targetList or ()) == 1
          and not any(getattr(stmt, a, None) for a in (
              "withClause", "distinctClause", "groupClause", "havingClause", "windowClause",
              "sortClause", "limitCount", "limitOffset", "lockingClause", "valuesLists",
              "intoClause", "larg", "rarg")))
    if not ok:
        raise StatementError("the WHERE condition must be one boolean expression", where, None)
    return sql.SQL("SELECT * FROM {} WHERE ({}\n)").format(relation, sql.SQL(where))
