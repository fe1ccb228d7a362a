"""Deterministic test data written straight into PostgreSQL with COPY."""

from __future__ import annotations

import numpy as np
import psycopg
from psycopg import sql


def linear_task(n: int, d: int, seed: int, noise: float = 0.3) -> tuple[np.ndarray, np.ndarray]:
    """Features in [-1, 1]^d and labels -1/+1 from a noisy linear rule."""
    rng = np.random.default_rng(seed)
    w = np.random.default_rng(1234).normal(size=d)
    x = rng.uniform(-1.0, 1.0, size=(n, d))
    y = np.where(x @ w + noise * rng.normal(size=n) > 0, 1, -1)
    return x, y


def load_table(conn: psycopg.Connection, name: str, x: np.ndarray, y: np.ndarray,
               order: str = "given", feature_type: str = "float8[]") -> None:
    """Create table name(id, label, features) and COPY the rows in.

    order: "given", or "label" to store the rows clustered by label (the
    worst case for SGD without shuffling).
    """
    idx = np.arange(len(y))
    if order == "label":
        idx = np.argsort(y, kind="stable")
    ident = sql.Identifier(name)
    conn.execute(sql.SQL("CREATE TABLE {} (id int, label int, features {})").format(
        ident, sql.SQL(feature_type)))
    with conn.cursor().copy(sql.SQL("COPY {} (id, label, features) FROM STDIN (FORMAT BINARY)")
                            .format(ident)) as copy:
        copy.set_types(["int4", "int4", feature_type])
        for i in idx:
            copy.write_row((int(i), int(y[i]), x[i].tolist()))
    conn.execute(sql.SQL("ANALYZE {}").format(ident))


def weights(conn: psycopg.Connection, model_name: str) -> list[float]:
    row = conn.execute("SELECT weights FROM corgipile.models WHERE model_name = %s",
                       (model_name,)).fetchone()
    assert row is not None, f"model {model_name} was not stored"
    return row[0]


def accuracy(conn: psycopg.Connection, model_name: str, table: str) -> float:
    return conn.execute(
        sql.SQL("SELECT avg((corgipile.predict(%s, t) = t.label)::int)::float8 FROM {} t")
        .format(sql.Identifier(table)), (model_name,)).fetchone()[0]
