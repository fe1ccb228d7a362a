"""Private SQL helpers shared by the client's modules (client, estimators,
CLI, loaders, torch, proxy), kept in one place instead of being imported by
name from each other.

Every query the client sends names pg_catalog for each function, operator
and type it uses (``OPERATOR(pg_catalog.=)``, ``pg_catalog.unnest``,
``::pg_catalog.regclass``): in a database where another role can create
objects in a schema on the user's search_path (public), a look-alike that
matches the argument types better than pg_catalog's would otherwise run as
the user (tests/python/security/test_client_search_path.py plants them).
"""

from __future__ import annotations

import re
from typing import Any

import psycopg
from pglast import parser
from psycopg import sql

__all__ = ["EQ", "ident", "is_node", "quote_ident", "catalog_type", "qualified_type", "qualify_names", "relation_sql",
           "QUALIFIED_NAME"]

# the equality operator of pg_catalog, for text, name, oid, ... alike
EQ = "OPERATOR(pg_catalog.=)"

# a relation's quoted qualified name, from regclass input text
QUALIFIED_NAME = ("SELECT pg_catalog.format('%%I.%%I', n.nspname, c.relname) "
                  "FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n "
                  f"ON n.oid {EQ} c.relnamespace WHERE c.oid {EQ} %s::pg_catalog.regclass")


def is_node(node: Any, cls: type) -> bool:
    """isinstance without mypy narrowing to pglast's loose Optional fields."""
    return isinstance(node, cls)


def quote_ident(name: str) -> str:
    """Quote an identifier the way PostgreSQL's quote_ident() always may."""
    return '"' + name.replace('"', '""') + '"'


def ident(raw: str) -> str:
    """The name an identifier as written in SQL stands for (quotes removed,
    an unquoted name folded to lower case, U&"..." decoded)."""
    if raw.startswith('"') and raw.endswith('"') and len(raw) >= 2:
        return raw[1:-1].replace('""', '"')
    if raw[:2].upper() == 'U&':
        parsed = select_targets(raw)[0].val
        return str(parsed.fields[0].sval)
    return raw.lower()


def select_targets(exprs: str) -> tuple[Any, ...]:
    """The target list (ResTarget nodes) of ``SELECT exprs``, parsed."""
    from pglast import ast

    stmt = parser.parse_sql(f"SELECT {exprs}")[0].stmt
    assert isinstance(stmt, ast.SelectStmt) and stmt.targetList is not None
    return stmt.targetList


# format_type()'s SQL-standard spellings, which the grammar reads as
# pg_catalog's types without a lookup, by their pg_catalog names: the client
# writes every type one way, pg_catalog.<name>
_STANDARD_TYPES = {
    "integer": "int4", "int": "int4", "smallint": "int2", "bigint": "int8", "real": "float4",
    "double precision": "float8", "float": "float8", "numeric": "numeric",
    "decimal": "numeric", "boolean": "bool", "character varying": "varchar",
    "varchar": "varchar", "character": "bpchar", "char": "bpchar", "bit": "bit",
    "bit varying": "varbit", "timestamp without time zone": "timestamp",
    "timestamp with time zone": "timestamptz", "timestamp": "timestamp",
    "time without time zone": "time", "time with time zone": "timetz", "time": "time",
    "interval": "interval",
}
_SIMPLE = re.compile(r"[a-z_][a-z0-9_]*|\"char\"")


def catalog_type(typ: str) -> str:
    """format_type()'s name of a pg_catalog type without the schema it adds
    when a type of another schema on search_path has the same name
    ("pg_catalog.text" -> "text"): the client compares these names, and
    qualified_type() writes them back qualified."""
    return typ[len("pg_catalog."):] if typ.startswith("pg_catalog.") else typ


def qualified_type(typ: str) -> str:
    """A pg_catalog type, as format_type() or the loaders name it, spelled
    so that it cannot resolve to a type of another schema: "text" ->
    "pg_catalog.text", "double precision" -> "pg_catalog.float8",
    "regclass[]" -> "pg_catalog.regclass[]"."""
    array = typ.endswith("[]")
    base = typ[:-2] if array else typ
    base = _STANDARD_TYPES.get(base, base)
    if not _SIMPLE.fullmatch(base):
        raise ValueError(f"not the name of a pg_catalog type: {typ!r}")
    return f"pg_catalog.{base}{'[]' if array else ''}"


def qualify_names(node: Any) -> Any:
    """A pglast expression of the server's own writing (pg_get_expr, which
    leaves pg_catalog's names bare) with its bare type and function names
    put in pg_catalog; node is changed in place and returned."""
    from pglast import ast
    from pglast.visitors import Visitor

    class _Qualify(Visitor):
        def visit_TypeName(self, ancestors: Any, n: Any) -> None:
            if len(n.names) == 1:
                n.names = (ast.String(sval="pg_catalog"), *n.names)

        def visit_FuncCall(self, ancestors: Any, n: Any) -> None:
            if len(n.funcname) == 1:
                n.funcname = (ast.String(sval="pg_catalog"), *n.funcname)

    _Qualify()(node)
    return node


def relation_sql(conn: psycopg.Connection[Any], relation: str | None) -> sql.Composable:
    """A table given as regclass input text, as a quoted qualified name."""
    row = conn.execute(
        "SELECT n.nspname, c.relname FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n "
        f"ON n.oid {EQ} c.relnamespace WHERE c.oid {EQ} %s::pg_catalog.regclass",
        (relation,)).fetchone()
    assert row is not None
    return sql.Identifier(row[0], row[1])
