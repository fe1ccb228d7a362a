"""The one list of shuffle strategies (extension/params/shuffles.h) and what
the server accepts cannot drift apart.

The C list generates the CpShuffle enum, the names train() parses, its error
hints, EXPLAIN's "Tuple Order" and the flags the parser and the executor go
by (may run in parallel, ...).  Here each name of the list is accepted by
train() and EXPLAINs with the list's tuple order, an unknown name is refused
with exactly the list's names, and workers > 1 is accepted for exactly the
strategies flagged CP_SHUFFLE_PARALLEL.  The Python client's list
(corgipile.strategies) is the same list, in the same order.
"""

from __future__ import annotations

import re
from pathlib import Path

import psycopg
import pytest

from corgipile import strategies

HEADER = Path(__file__).resolve().parents[2] / "extension" / "params" / "shuffles.h"

ENTRY = re.compile(r'X\((\w+), (\w+), "([^"]*)",\s*\\?\s*((?:CP_SHUFFLE_\w+|0)(?:\s*\|\s*\\?\s*CP_SHUFFLE_\w+)*)\)')


def c_list() -> list[tuple[str, str, set[str]]]:
    """(name, tuple order, flags) per entry of CP_SHUFFLES, in order."""
    text = HEADER.read_text()
    body = text[text.index("#define CP_SHUFFLES(X)"):text.index("typedef enum CpShuffle")]
    rows = []
    for m in ENTRY.finditer(body):
        flags = {f.strip() for f in re.split(r"[|\\\s]+", m.group(4)) if f.strip() not in ("", "0")}
        rows.append((m.group(2), m.group(3), flags))
    return rows


def test_the_header_is_parsed():
    rows = c_list()
    assert len(rows) >= 8, rows
    assert rows[0][0] == "corgipile"
    assert all(f.startswith("CP_SHUFFLE_") for _, _, flags in rows for f in flags)
    # each entry is one line of the macro: none was skipped by the pattern
    body = HEADER.read_text().split("#define CP_SHUFFLES(X)")[1].split("typedef enum")[0]
    assert body.count("\tX(") == len(rows)


def test_python_list_is_the_c_list():
    assert strategies.ALL == tuple(name for name, _, _ in c_list())
    assert strategies.PARALLEL == tuple(
        name for name, _, flags in c_list() if "CP_SHUFFLE_PARALLEL" in flags)


@pytest.fixture
def points(conn):
    conn.execute(
        "CREATE TABLE pts AS SELECT i AS id, CASE WHEN i % 2 = 0 THEN 1 ELSE -1 END AS label, "
        "ARRAY[i::float8, 1.0]::float8[] AS features FROM generate_series(1, 200) AS i")
    return "pts"


def test_each_name_is_accepted_with_its_tuple_order(conn, points):
    for name, tuple_order, _ in c_list():
        plan = "\n".join(r[0] for r in conn.execute(
            "EXPLAIN (COSTS OFF) SELECT * FROM corgipile.train(%s, 'svm', shuffle => %s)",
            (points, name)))
        assert f"Tuple Order: {tuple_order}" in plan, (name, plan)
        # the SQL name is case-insensitive, as before
        conn.execute("EXPLAIN (COSTS OFF) SELECT * FROM corgipile.train(%s, 'svm', shuffle => %s)",
                     (points, name.upper()))


def test_unknown_name_lists_the_c_list(conn, points):
    with pytest.raises(psycopg.errors.InvalidParameterValue) as e:
        conn.execute("SELECT * FROM corgipile.train(%s, 'svm', shuffle => 'nope')", (points,))
    names = [name for name, _, _ in c_list()]
    expected = ", ".join(f"'{n}'" for n in names[:-1]) + f" and '{names[-1]}'"
    assert e.value.diag.message_hint == f"Valid shuffles are {expected}."


def test_workers_follow_the_parallel_flag(conn, points):
    parallel = [name for name, _, flags in c_list() if "CP_SHUFFLE_PARALLEL" in flags]
    assert parallel and len(parallel) < len(c_list())
    for name, _, flags in c_list():
        sql = "EXPLAIN (COSTS OFF) SELECT * FROM corgipile.train(%s, 'svm', shuffle => %s, workers => 2)"
        if "CP_SHUFFLE_PARALLEL" in flags:
            conn.execute(sql, (points, name))
        else:
            with pytest.raises(psycopg.errors.FeatureNotSupported) as e:
                conn.execute(sql, (points, name))
            assert e.value.diag.message_hint == (
                "Use shuffle " + ", ".join(parallel[:-1]) + f" or {parallel[-1]}, or workers => 1.")
