"""A fresh install and an upgraded one have the same catalog.

CREATE EXTENSION corgipile runs one script, sql/corgipile--<version>.sql,
which the Makefile copies from sql/corgipile.sql; a database of an earlier
version reaches the same version through the upgrade scripts
(sql/corgipile--A--B.sql).  The two are written apart, so a change made to
one and not the other would go unnoticed: this test installs the extension
both ways, in two new databases, and compares what they hold, object by
object, naming each object that differs and how.

Compared: the extension's member objects, its configuration tables
(pg_extension_config_dump); functions with their result, arguments and
defaults, language, symbol, volatility, parallel label, strictness,
security, support function, settings, cost, rows, ACL and comment;
relations (tables, views, sequences, indexes) with kind, options, row
security, ACL, comment, a view's definition, a sequence's parameters;
columns in order with type, NOT NULL, default, identity, generation,
collation, ACL and comment; constraints with their definition (NOT VALID
included); indexes, policies, triggers and rules; types; the schema's ACL;
the initial privileges pg_dump compares against (pg_init_privs).  An ACL
that is NULL (the default) is compared as the default it stands for.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from psycopg import sql


def _acl(column: str, kind: str, owner: str) -> str:
    """SQL for an ACL as its items' text, sorted; NULL (the default) as the
    default it stands for."""
    return ("(SELECT pg_catalog.array_agg(a::text ORDER BY a::text) "
            f"FROM pg_catalog.unnest(COALESCE({column}, "
            f"pg_catalog.acldefault({kind}, {owner}))) AS a)")


# a sequence's default ACL is of kind 's', any other relation's 'r'
_RELATION_ACL_KIND = "CASE c.relkind WHEN 'S' THEN 's' ELSE 'r' END::\"char\""

# (key, fields) rows: key names the object as the failure message shows it
CATALOG_QUERIES: dict[str, str] = {
    "extension": """
        SELECT 'extension corgipile',
               pg_catalog.jsonb_build_object(
                 'version', e.extversion,
                 'relocatable', e.extrelocatable,
                 'schema', e.extnamespace::pg_catalog.regnamespace::text,
                 'config tables', (SELECT pg_catalog.array_agg(c::pg_catalog.regclass::text ORDER BY 1)
                                     FROM pg_catalog.unnest(e.extconfig) AS c),
                 'config conditions', (SELECT pg_catalog.array_agg(c ORDER BY 1)
                                         FROM pg_catalog.unnest(e.extcondition) AS c))
          FROM pg_catalog.pg_extension AS e WHERE e.extname = 'corgipile'""",
    "members": """
        SELECT 'member ' || pg_catalog.pg_describe_object(d.classid, d.objid, d.objsubid),
               pg_catalog.jsonb_build_object(
                 'initial privileges',
                 (SELECT pg_catalog.array_agg(a::text ORDER BY a::text)
                    FROM pg_catalog.pg_init_privs AS i, pg_catalog.unnest(i.initprivs) AS a
                   WHERE i.classoid = d.classid AND i.objoid = d.objid AND i.objsubid = 0))
          FROM pg_catalog.pg_depend AS d
          JOIN pg_catalog.pg_extension AS e ON e.oid = d.refobjid
         WHERE d.refclassid = 'pg_catalog.pg_extension'::pg_catalog.regclass
           AND e.extname = 'corgipile' AND d.deptype = 'e'""",
    "schema": f"""
        SELECT 'schema ' || n.nspname,
               pg_catalog.jsonb_build_object(
                 'owner', n.nspowner::pg_catalog.regrole::text,
                 'acl', {_acl("n.nspacl", "'n'", "n.nspowner")},
                 'comment', pg_catalog.obj_description(n.oid, 'pg_namespace'))
          FROM pg_catalog.pg_namespace AS n WHERE n.nspname = 'corgipile'""",
    "functions": f"""
        SELECT 'function ' || p.oid::pg_catalog.regprocedure::text,
               pg_catalog.jsonb_build_object(
                 'kind', p.prokind,
                 'result', pg_catalog.pg_get_function_result(p.oid),
                 'arguments', pg_catalog.pg_get_function_arguments(p.oid),
                 'language', l.lanname,
                 'symbol', p.prosrc,
                 'library', p.probin,
                 'volatility', p.provolatile,
                 'parallel', p.proparallel,
                 'strict', p.proisstrict,
                 'security definer', p.prosecdef,
                 'leakproof', p.proleakproof,
                 'returns set', p.proretset,
                 'cost', p.procost,
                 'rows', p.prorows,
                 'support', p.prosupport::text,
                 'settings', p.proconfig,
                 'owner', p.proowner::pg_catalog.regrole::text,
                 'acl', {_acl("p.proacl", "'f'", "p.proowner")},
                 'comment', pg_catalog.obj_description(p.oid, 'pg_proc'))
          FROM pg_catalog.pg_proc AS p
          JOIN pg_catalog.pg_language AS l ON l.oid = p.prolang
         WHERE p.pronamespace = 'corgipile'::pg_catalog.regnamespace""",
    "relations": f"""
        SELECT 'relation ' || c.oid::pg_catalog.regclass::text,
               pg_catalog.jsonb_build_object(
                 'kind', c.relkind,
                 'persistence', c.relpersistence,
                 'options', c.reloptions,
                 'row security', c.relrowsecurity,
                 'forced row security', c.relforcerowsecurity,
                 'owner', c.relowner::pg_catalog.regrole::text,
                 'acl', {_acl("c.relacl", _RELATION_ACL_KIND, "c.relowner")},
                 'comment', pg_catalog.obj_description(c.oid, 'pg_class'),
                 'view definition', CASE WHEN c.relkind IN ('v', 'm')
                                         THEN pg_catalog.pg_get_viewdef(c.oid) END,
                 'index definition', CASE WHEN c.relkind = 'i'
                                          THEN pg_catalog.pg_get_indexdef(c.oid) END,
                 'sequence', (SELECT pg_catalog.to_jsonb(s) OPERATOR(pg_catalog.-) 'seqrelid'
                                FROM pg_catalog.pg_sequence AS s WHERE s.seqrelid = c.oid))
          FROM pg_catalog.pg_class AS c
         WHERE c.relnamespace = 'corgipile'::pg_catalog.regnamespace""",
    "columns": """
        SELECT 'column ' || c.oid::pg_catalog.regclass::text || '.' || pg_catalog.quote_ident(a.attname),
               pg_catalog.jsonb_build_object(
                 'position', pg_catalog.row_number() OVER (PARTITION BY c.oid ORDER BY a.attnum),
                 'type', pg_catalog.format_type(a.atttypid, a.atttypmod),
                 'not null', a.attnotnull,
                 'default', pg_catalog.pg_get_expr(ad.adbin, ad.adrelid),
                 'identity', a.attidentity,
                 'generated', a.attgenerated,
                 'collation', a.attcollation::pg_catalog.regcollation::text,
                 'acl', a.attacl::text[],
                 'comment', pg_catalog.col_description(c.oid, a.attnum))
          FROM pg_catalog.pg_class AS c
          JOIN pg_catalog.pg_attribute AS a ON a.attrelid = c.oid
          LEFT JOIN pg_catalog.pg_attrdef AS ad ON ad.adrelid = c.oid AND ad.adnum = a.attnum
         WHERE c.relnamespace = 'corgipile'::pg_catalog.regnamespace
           AND c.relkind IN ('r', 'v', 'm', 'p', 'f')
           AND a.attnum > 0 AND NOT a.attisdropped""",
    "constraints": """
        SELECT 'constraint ' || pg_catalog.quote_ident(k.conname) || ' on '
                 || COALESCE(k.conrelid::pg_catalog.regclass::text, k.contypid::pg_catalog.regtype::text),
               pg_catalog.jsonb_build_object(
                 'type', k.contype,
                 'definition', pg_catalog.pg_get_constraintdef(k.oid),
                 'deferrable', k.condeferrable,
                 'deferred', k.condeferred,
                 'comment', pg_catalog.obj_description(k.oid, 'pg_constraint'))
          FROM pg_catalog.pg_constraint AS k
         WHERE k.connamespace = 'corgipile'::pg_catalog.regnamespace""",
    "policies": """
        SELECT 'policy ' || pg_catalog.quote_ident(po.polname) || ' on ' || po.polrelid::pg_catalog.regclass::text,
               pg_catalog.jsonb_build_object(
                 'command', po.polcmd,
                 'permissive', po.polpermissive,
                 'roles', po.polroles::pg_catalog.regrole[]::text[],
                 'using', pg_catalog.pg_get_expr(po.polqual, po.polrelid),
                 'with check', pg_catalog.pg_get_expr(po.polwithcheck, po.polrelid))
          FROM pg_catalog.pg_policy AS po
          JOIN pg_catalog.pg_class AS c ON c.oid = po.polrelid
         WHERE c.relnamespace = 'corgipile'::pg_catalog.regnamespace""",
    "triggers": """
        SELECT 'trigger ' || pg_catalog.quote_ident(t.tgname) || ' on ' || t.tgrelid::pg_catalog.regclass::text,
               pg_catalog.jsonb_build_object('definition', pg_catalog.pg_get_triggerdef(t.oid),
                                             'enabled', t.tgenabled)
          FROM pg_catalog.pg_trigger AS t
          JOIN pg_catalog.pg_class AS c ON c.oid = t.tgrelid
         WHERE c.relnamespace = 'corgipile'::pg_catalog.regnamespace AND NOT t.tgisinternal""",
    "rules": """
        SELECT 'rule ' || pg_catalog.quote_ident(r.rulename) || ' on ' || r.ev_class::pg_catalog.regclass::text,
               pg_catalog.jsonb_build_object('definition', pg_catalog.pg_get_ruledef(r.oid))
          FROM pg_catalog.pg_rewrite AS r
          JOIN pg_catalog.pg_class AS c ON c.oid = r.ev_class
         WHERE c.relnamespace = 'corgipile'::pg_catalog.regnamespace""",
    "types": f"""
        SELECT 'type ' || t.oid::pg_catalog.regtype::text,
               pg_catalog.jsonb_build_object(
                 'kind', t.typtype,
                 'relation', NULLIF(t.typrelid, 0)::pg_catalog.regclass::text,
                 'element', NULLIF(t.typelem, 0)::pg_catalog.regtype::text,
                 'owner', t.typowner::pg_catalog.regrole::text,
                 'acl', {_acl("t.typacl", "'T'", "t.typowner")},
                 'comment', pg_catalog.obj_description(t.oid, 'pg_type'))
          FROM pg_catalog.pg_type AS t
         WHERE t.typnamespace = 'corgipile'::pg_catalog.regnamespace""",
}


def catalog(conn: psycopg.Connection[Any]) -> dict[str, dict[str, Any]]:
    """Every object of the extension, by the name a failure message shows."""
    objects: dict[str, dict[str, Any]] = {}
    for query in CATALOG_QUERIES.values():
        for key, fields in conn.execute(query):
            assert key not in objects, f"two objects named {key}"
            objects[key] = fields
    return objects


def differences(fresh: dict[str, dict[str, Any]],
                upgraded: dict[str, dict[str, Any]]) -> list[str]:
    """What differs, one line per object and field."""
    lines = []
    for key in sorted(fresh.keys() | upgraded.keys()):
        if key not in upgraded:
            lines.append(f"{key}: only in a fresh install (sql/corgipile.sql)")
        elif key not in fresh:
            lines.append(f"{key}: only in an upgraded install (the upgrade scripts)")
        else:
            for field in sorted(fresh[key].keys() | upgraded[key].keys()):
                a, b = fresh[key].get(field), upgraded[key].get(field)
                if a != b:
                    lines.append(f"{key}: {field} is {a!r} in a fresh install, "
                                 f"{b!r} in an upgraded one")
    return lines


def _connect(dbname: str) -> psycopg.Connection[Any]:
    return psycopg.connect(host=os.environ["PGHOST"], port=os.environ["PGPORT"],
                           user=os.environ.get("PGUSER", "postgres"), dbname=dbname,
                           autocommit=True)


@pytest.fixture(scope="module")
def installs() -> Iterator[tuple[psycopg.Connection[Any], psycopg.Connection[Any]]]:
    """Two new databases: corgipile installed fresh, and 0.1.0 upgraded."""
    names = [f"corgipile_install_{os.getpid()}_fresh", f"corgipile_install_{os.getpid()}_upgraded"]
    opened = []
    with _connect("postgres") as admin:
        try:
            for name in names:
                admin.execute(sql.SQL("CREATE DATABASE {} TEMPLATE template0")
                              .format(sql.Identifier(name)))
                opened.append(_connect(name))
            fresh, upgraded = opened
            fresh.execute("CREATE EXTENSION corgipile")
            upgraded.execute("CREATE EXTENSION corgipile VERSION '0.1.0'")
            upgraded.execute("ALTER EXTENSION corgipile UPDATE")
            yield fresh, upgraded
        finally:
            for c in opened:
                c.close()
            for name in names:
                admin.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)")
                              .format(sql.Identifier(name)))


def test_fresh_and_upgraded_installs_have_the_same_catalog(installs):
    fresh, upgraded = installs
    version = fresh.execute(
        "SELECT extversion FROM pg_catalog.pg_extension WHERE extname = 'corgipile'").fetchone()
    default = fresh.execute(
        "SELECT default_version FROM pg_catalog.pg_available_extensions "
        "WHERE name = 'corgipile'").fetchone()
    assert version == default
    a, b = catalog(fresh), catalog(upgraded)
    # the comparison covers what the extension is made of
    assert any(k.startswith("function corgipile.train(") for k in a)
    assert "relation corgipile.models" in a and "column corgipile.model_store.preprocess" in a
    diff = differences(a, b)
    assert diff == [], (
        "a fresh install (sql/corgipile.sql) and 0.1.0 upgraded to the current version "
        "differ; make the same change in both:\n  " + "\n  ".join(diff))


def test_a_difference_is_named(installs):
    # The comparison can fail, and says which object differs and how: change
    # one function's parallel label, drop a column's comment and add a
    # function on one side only (in transactions rolled back after).
    fresh, upgraded = installs
    with fresh.transaction(force_rollback=True), upgraded.transaction(force_rollback=True):
        fresh.execute("ALTER FUNCTION corgipile.evaluate(text, regclass) PARALLEL UNSAFE")
        fresh.execute("COMMENT ON COLUMN corgipile.model_store.relid IS NULL")
        upgraded.execute("CREATE FUNCTION corgipile.extra() RETURNS int LANGUAGE sql AS 'SELECT 1'")
        diff = differences(catalog(fresh), catalog(upgraded))
    assert diff == [
        "column corgipile.model_store.relid: comment is None in a fresh install, "
        "'OID of the relation the model was trained on, or NULL.' in an upgraded one",
        "function corgipile.evaluate(text,regclass): parallel is 'u' in a fresh install, "
        "'r' in an upgraded one",
        "function corgipile.extra(): only in an upgraded install (the upgrade scripts)",
    ]
    assert differences(catalog(fresh), catalog(upgraded)) == []
