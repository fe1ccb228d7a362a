"""The C list of corgipile.train()'s parameters (extension/params/train_args.h)
and the SQL signature the server holds cannot drift apart.

The C table drives the argument parser, the error messages, the fallback
re-plan's argument types and shuffled_scan()'s argument list; the SQL
script declares the function.  Names, order, types and defaults must match.
"""

from __future__ import annotations

import re
from pathlib import Path

HEADER = Path(__file__).resolve().parents[2] / "extension" / "params" / "train_args.h"

# the C type OIDs train_args.h uses, as format_type() spells them
SQL_TYPES = {
    "REGCLASSOID": "regclass",
    "TEXTOID": "text",
    "INT4OID": "integer",
    "INT8OID": "bigint",
    "FLOAT8OID": "double precision",
    "BOOLOID": "boolean",
}

ENTRY = re.compile(r"X\((\w+), (\w+), (\w+), (true|false), (.+), (NULL|\"(?:[^\"\\]|\\.)*\")\)")


def c_table() -> list[tuple[str, str, str | None]]:
    rows = []
    for line in HEADER.read_text().splitlines():
        m = ENTRY.search(line)
        if m:
            default = None if m.group(6) == "NULL" else m.group(6)[1:-1]
            rows.append((m.group(2), SQL_TYPES[m.group(3)], default))
    return rows


def test_the_header_is_parsed():
    rows = c_table()
    assert len(rows) >= 21, rows
    assert rows[0] == ("relation", "regclass", None)


def test_c_table_matches_pg_proc(conn):
    row = conn.execute(
        "SELECT pg_get_function_arguments(p.oid), p.pronargs FROM pg_proc p "
        "JOIN pg_namespace n ON n.oid = p.pronamespace "
        "WHERE n.nspname = 'corgipile' AND p.proname = 'train'").fetchall()
    assert len(row) == 1, "corgipile.train should have exactly one signature"
    text, nargs = row[0]
    server = []
    for arg in text.split(", "):
        m = re.fullmatch(r"(\w+) (.+?)(?: DEFAULT (.+))?", arg)
        assert m, arg
        server.append((m.group(1), m.group(2), m.group(3)))
    assert nargs == len(server)
    assert c_table() == server
