"""What the client sends, and which of its names a hostile role could
shadow: every query text the Python client runs is recorded (psycopg's
cursor methods, wrapped; the queries still go to the real server) and
parsed with pglast, PostgreSQL's own parser, to list each function,
operator, type and catalog relation it names, and whether it names it with
its schema.

Used by test_client_search_path.py: the names found decide what the hostile
role plants (so the list of look-alikes never goes stale), and every
unqualified one is reported with the query it came from.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import psycopg
from pglast import ast, enums, parse_sql

# SQL-standard type names the grammar itself turns into pg_catalog's
# (int, double precision, ...): pglast reports them qualified already
_PLACEHOLDER = re.compile(r"%(?:\([^)]*\))?[sbt]")


@dataclass(frozen=True)
class Ref:
    kind: str  # function, operator, type, relation
    name: str  # the name without its schema
    schema: str | None  # as written; None: found through search_path

    def __str__(self) -> str:
        return f"{self.kind} {self.schema + '.' if self.schema else ''}{self.name}"


# implicit uses of = that no spelling can qualify: IS DISTINCT FROM, IN
# (list), NULLIF, CASE x WHEN, JOIN USING: reported as unqualified "="
_IMPLICIT_EQ = {enums.A_Expr_Kind.AEXPR_DISTINCT, enums.A_Expr_Kind.AEXPR_NOT_DISTINCT,
                enums.A_Expr_Kind.AEXPR_NULLIF, enums.A_Expr_Kind.AEXPR_IN}


def _names(seq: Any) -> tuple[str, ...]:
    return tuple(getattr(s, "sval", "") for s in seq or ())


def _split(names: tuple[str, ...]) -> tuple[str | None, str]:
    return (names[-2] if len(names) >= 2 else None), names[-1]


def _walk(node: Any, out: list[Ref]) -> None:
    if isinstance(node, (tuple, list)):
        for item in node:
            _walk(item, out)
        return
    if not isinstance(node, ast.Node):
        return
    if isinstance(node, ast.FuncCall):
        schema, name = _split(_names(node.funcname))
        out.append(Ref("function", name, schema))
    elif isinstance(node, ast.A_Expr):
        schema, name = _split(_names(node.name))
        if node.kind in _IMPLICIT_EQ:
            out.append(Ref("operator", name, None))
        else:
            out.append(Ref("operator", name, schema))
    elif isinstance(node, ast.SubLink) and node.operName:
        schema, name = _split(_names(node.operName))
        out.append(Ref("operator", name, schema))
    elif isinstance(node, ast.CaseExpr) and node.arg is not None:
        out.append(Ref("operator", "=", None))
    elif isinstance(node, ast.JoinExpr) and node.usingClause:
        out.append(Ref("operator", "=", None))
    elif isinstance(node, ast.TypeName):
        schema, name = _split(_names(node.names))
        out.append(Ref("type", name, schema))
    elif isinstance(node, ast.RangeVar):
        if node.relname.startswith("pg_") or node.relname in ("tables", "columns"):
            out.append(Ref("relation", node.relname, node.schemaname))
    for slot in node.__slots__:
        _walk(getattr(node, slot, None), out)


def refs(text: str) -> list[Ref]:
    """The names a query text uses (placeholders of psycopg's become $n)."""
    counter = iter(range(1, 10_000))
    sql = _PLACEHOLDER.sub(lambda m: f"${next(counter)}", text).replace("%%", "%")
    out: list[Ref] = []
    _walk(parse_sql(sql), out)
    return out


def quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def unqualified(text: str) -> list[Ref]:
    return [r for r in refs(text) if r.schema is None]


class Recorder:
    """Query texts as sent, in order."""

    def __init__(self) -> None:
        self.queries: list[str] = []

    def add(self, cur: Any, query: Any) -> None:
        if isinstance(query, psycopg.sql.Composable):
            query = query.as_string(cur)
        elif isinstance(query, bytes):
            query = query.decode()
        self.queries.append(str(query))

    def offenders(self) -> dict[str, list[str]]:
        """Each query with an unqualified name, and those names."""
        out: dict[str, list[str]] = {}
        for q in self.queries:
            bad = sorted({str(r) for r in unqualified(q)})
            if bad:
                out[q] = bad
        return out

    def names(self) -> set[Ref]:
        return {r for q in self.queries for r in refs(q)}


@contextmanager
def recording() -> Iterator[Recorder]:
    """Record every query the psycopg cursors run until the block ends."""
    rec = Recorder()
    patched = []

    def wrap(cls: Any, method: str) -> None:
        orig = getattr(cls, method)

        def wrapper(self: Any, query: Any, *args: Any, **kwargs: Any) -> Any:
            rec.add(self, query)
            return orig(self, query, *args, **kwargs)

        setattr(cls, method, wrapper)
        patched.append((cls, method, orig))

    for cls, method in ((psycopg.Cursor, "execute"), (psycopg.Cursor, "executemany"),
                        (psycopg.Cursor, "stream"), (psycopg.Cursor, "copy"),
                        (psycopg.ServerCursor, "execute")):
        wrap(cls, method)
    try:
        yield rec
    finally:
        for cls, method, orig in reversed(patched):
            setattr(cls, method, orig)


# -- the source, read statically -------------------------------------------------------

_SQL_START = re.compile(r"^\s*(SELECT|WITH|INSERT|UPDATE|DELETE|CREATE|ALTER|DROP|COPY|"
                        r"ANALYZE|TRUNCATE|GRANT|REVOKE)\b", re.I)
_FORMAT_FIELD = re.compile(r"\{[a-z_0-9]*\}")


def source_queries(root: Any) -> list[tuple[str, int, str]]:
    """(file, line, text) of each string literal in the Python files under
    root that reads as a whole SQL statement, with psycopg.sql's {} fields
    and f-string values replaced by a name; those pglast cannot parse (a
    fragment, a template of another kind) are left out."""
    import ast as pyast
    from pathlib import Path

    out = []
    for path in sorted(Path(root).rglob("*.py")):
        tree = pyast.parse(path.read_text(), str(path))
        for node in pyast.walk(tree):
            if isinstance(node, pyast.Constant) and isinstance(node.value, str):
                text = node.value
            elif isinstance(node, pyast.JoinedStr):
                text = "".join(v.value if isinstance(v, pyast.Constant) else "x"
                               for v in node.values)
            else:
                continue
            if not _SQL_START.match(text):
                continue
            candidate = _FORMAT_FIELD.sub("x.x", text)
            try:
                refs(candidate)
            except Exception:  # noqa: BLE001 - not a whole statement
                continue
            out.append((str(path), node.lineno, candidate))
    return out
