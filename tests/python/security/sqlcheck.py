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


# -- look-alikes of the names found ------------------------------------------------

PLANT_FUNCTIONS = """
SELECT p.oid, p.proname, p.prokind, p.proretset,
       pg_catalog.format_type(p.prorettype, NULL),
       ARRAY(SELECT pg_catalog.format_type(t, NULL)
               FROM pg_catalog.unnest(p.proargtypes::pg_catalog.oid[]) AS t),
       p.provariadic OPERATOR(pg_catalog.<>) 0,
       a.aggtranstype::pg_catalog.regtype::pg_catalog.text
  FROM pg_catalog.pg_proc p
  LEFT JOIN pg_catalog.pg_aggregate a ON a.aggfnoid OPERATOR(pg_catalog.=) p.oid
 WHERE p.pronamespace OPERATOR(pg_catalog.=) 'pg_catalog'::pg_catalog.regnamespace
   AND p.proname OPERATOR(pg_catalog.=) ANY (%s::pg_catalog.text[])
   AND p.prokind OPERATOR(pg_catalog.=) ANY ('{f,a}'::pg_catalog.char[])
"""
PLANT_OPERATORS = """
SELECT o.oprname, o.oprkind,
       pg_catalog.format_type(o.oprleft, NULL), pg_catalog.format_type(o.oprright, NULL),
       pg_catalog.format_type(o.oprresult, NULL)
  FROM pg_catalog.pg_operator o
 WHERE o.oprnamespace OPERATOR(pg_catalog.=) 'pg_catalog'::pg_catalog.regnamespace
   AND o.oprname OPERATOR(pg_catalog.=) ANY (%s::pg_catalog.text[])
"""
# argument types a plpgsql look-alike cannot take
_PSEUDO = {"\"any\"", "internal", "cstring", "record", "trigger", "event_trigger",
           "anyenum", "anyrange", "anymultirange", "void", "language_handler",
           "fdw_handler", "index_am_handler", "tsm_handler", "table_am_handler",
           "anycompatiblerange", "anycompatiblemultirange", "pg_ddl_command"}


def plant(hostile: psycopg.Connection, names: set[Ref]) -> dict[str, int]:
    """Look-alikes in public of every function, operator, type and catalog
    relation in names, each calling public.canary_hit(). Returns how many of
    each kind were planted."""
    q = quote
    h = hostile
    h.execute("CREATE SEQUENCE public.canary_hits")
    h.execute("CREATE TABLE public.canary_log (what text)")
    h.execute("GRANT USAGE, UPDATE ON SEQUENCE public.canary_hits TO PUBLIC")
    h.execute("GRANT INSERT ON public.canary_log TO PUBLIC")
    h.execute("""CREATE FUNCTION public.canary_hit(what pg_catalog.text)
        RETURNS pg_catalog.bool LANGUAGE plpgsql AS $$
        BEGIN
          PERFORM pg_catalog.nextval('public.canary_hits'::pg_catalog.regclass);
          INSERT INTO public.canary_log VALUES (what);
          RETURN true;
        END $$""")
    count = {"function": 0, "aggregate": 0, "operator": 0, "type": 0, "relation": 0}

    def attempt(kind: str, *stmts: str) -> None:
        try:
            with h.transaction():
                for stmt in stmts:
                    h.execute(stmt)
            count[kind] += 1
        except psycopg.Error:
            pass  # a signature plpgsql cannot take: nothing planted

    funcs = sorted({r.name for r in names if r.kind == "function"})
    for n, (_oid, name, kind, retset, ret, args, variadic, trans) in enumerate(
            h.execute(PLANT_FUNCTIONS, (funcs,)).fetchall()):
        if variadic or any(a in _PSEUDO for a in args) or ret in _PSEUDO:
            continue
        arglist = ", ".join(args)
        hit = f"PERFORM public.canary_hit({literal(f'function {name}({arglist})')});"
        if kind == "a":
            state = trans or ret
            sfunc = f"public.canary_sfunc_{n}"
            sargs = ", ".join([state, *args])
            attempt("aggregate",
                    f"CREATE FUNCTION {sfunc}({sargs}) RETURNS {state} LANGUAGE plpgsql "
                    f"AS $$ BEGIN {hit} RETURN NULL; END $$",
                    f"CREATE AGGREGATE public.{q(name)}({arglist or '*'}) "
                    f"(sfunc = {sfunc}, stype = {state})")
        elif retset:
            attempt("function",
                    f"CREATE FUNCTION public.{q(name)}({arglist}) RETURNS SETOF {ret} "
                    f"LANGUAGE plpgsql AS $$ BEGIN {hit} RETURN; END $$")
        else:
            attempt("function",
                    f"CREATE FUNCTION public.{q(name)}({arglist}) RETURNS {ret} "
                    f"LANGUAGE plpgsql AS $$ BEGIN {hit} RETURN NULL; END $$")
    ops = sorted({r.name for r in names if r.kind == "operator"})
    for n, (name, _kind, left, right, result) in enumerate(
            h.execute(PLANT_OPERATORS, (ops,)).fetchall()):
        types = [t for t in (left, right) if t != "-"]
        if any(t in _PSEUDO for t in types) or result in _PSEUDO:
            continue
        fn = f"public.canary_op_{n}"
        hit = f"PERFORM public.canary_hit({literal(f'operator {name}({left}, {right})')});"
        sides = (f"LEFTARG = {left}, " if left != "-" else "") + f"RIGHTARG = {right}"
        attempt("operator",
                f"CREATE FUNCTION {fn}({', '.join(types)}) RETURNS {result} LANGUAGE plpgsql "
                f"AS $$ BEGIN {hit} RETURN NULL; END $$",
                f"CREATE OPERATOR public.{name} ({sides}, FUNCTION = {fn})")
    for name in sorted({r.name for r in names if r.kind == "type"}):
        attempt("type", f"CREATE DOMAIN public.{q(name)} AS pg_catalog.{q(name)} CHECK "
                        f"(public.canary_hit({literal('type ' + name)}))")
    for name in sorted({r.name for r in names if r.kind == "relation"}):
        attempt("relation", f"CREATE VIEW public.{q(name)} AS SELECT * FROM pg_catalog.{q(name)} "
                            f"WHERE public.canary_hit({literal('relation ' + name)})")
    return count


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
