"""Small helpers over psycopg shared by the runners."""

from __future__ import annotations

from typing import Any

import psycopg
from psycopg import sql

Query = str | sql.SQL | sql.Composed


def one(conn: psycopg.Connection[Any], query: Query, params: Any = None) -> tuple[Any, ...]:
    """The single row a query returns (an error if it returns none)."""
    row: tuple[Any, ...] | None = conn.execute(query, params).fetchone()
    if row is None:
        raise psycopg.DataError(f"no row from: {query!r}")
    return row


def value(conn: psycopg.Connection[Any], query: Query, params: Any = None) -> Any:
    """The first column of the single row a query returns."""
    return one(conn, query, params)[0]
