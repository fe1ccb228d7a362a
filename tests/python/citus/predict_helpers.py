"""Tables and models the predict/evaluate/replication tests share: a table
distributed over 4 shards, its twin as a plain table of the coordinator
(same rows), and models trained on the twin (distributed training is
tests/python/citus/test_train_*'s)."""

from __future__ import annotations

import psycopg

# label, features of row i: deterministic, and not separable (metrics < 1)
_LABELS = {
    "binary": "CASE WHEN ((i * 7919) % 1000) / 1000.0 + (i % 3) * 0.2 + ((i * 31) % 17) / 40.0 > 0.9"
              " THEN 1 ELSE -1 END",
    "softmax": "((i * 7919) % 1000) / 334",
    "linear": "((i * 7919) % 1000) / 100.0 + (i % 3) - ((i * 31) % 17) / 10.0",
}
_FEATURES = "ARRAY[((i * 7919) % 1000) / 1000.0, (i % 3)::float8, ((i * 104729) % 97) / 97.0]"


def make_tables(conn: psycopg.Connection, name: str, labels: str = "binary", rows: int = 4000,
                nulls: bool = False) -> tuple[str, str]:
    """name (distributed by id, 4 shards) and name_local with the same rows;
    nulls: every 50th row has a NULL label and every 70th NULL features."""
    label_type = "float8" if labels == "linear" else "int"
    conn.execute(f"CREATE TABLE {name} (id int, label {label_type}, features float8[])")
    label = _LABELS[labels]
    features = _FEATURES
    if nulls:
        label = f"CASE WHEN i % 50 = 0 THEN NULL ELSE {label} END"
        features = f"CASE WHEN i % 70 = 0 THEN NULL ELSE {features} END"
    conn.execute(f"INSERT INTO {name} SELECT i, {label}, {features} "
                 f"FROM generate_series(1, {rows}) AS i")
    conn.execute(f"CREATE TABLE {name}_local AS SELECT * FROM {name}")
    conn.execute(f"SELECT create_distributed_table('{name}', 'id', shard_count => 4)")
    return name, f"{name}_local"


def train(conn: psycopg.Connection, table: str, kind: str, model: str, **extra: object) -> str:
    args = "".join(f", {k} => {v!r}" if isinstance(v, str) else f", {k} => {v}"
                   for k, v in extra.items())
    conn.execute(f"SELECT count(*) FROM corgipile.train('{table}', '{kind}', '{model}', "
                 f"seed => 7, max_epoch_num => 2{args})")
    return model


def worker_rows(citus, sql: str, params: tuple = ()) -> list[list[tuple]]:
    """The rows of sql on each worker, as the superuser."""
    out = []
    for port in citus.worker_ports:
        with citus.connect(port) as w:
            out.append(w.execute(sql, params).fetchall())
    return out


def hashes(citus, coordinator: psycopg.Connection, model: str) -> list[str | None]:
    """model_hash on the coordinator, then on each worker (None: no such model there)."""
    sql = ("SELECT corgipile.model_hash(model_name) FROM corgipile.models "
           "WHERE model_name = %s")
    row = coordinator.execute(sql, (model,)).fetchone()
    out = [row[0] if row else None]
    for rows in worker_rows(citus, sql, (model,)):
        out.append(rows[0][0] if rows else None)
    return out


def create_role(citus, coordinator: psycopg.Connection, role: str) -> None:
    """A login role on every node (Citus propagates CREATE ROLE)."""
    coordinator.execute(f"DROP ROLE IF EXISTS {role}")
    coordinator.execute(f"CREATE ROLE {role} LOGIN")


def drop_role(coordinator: psycopg.Connection, role: str) -> None:
    coordinator.execute(f"DROP OWNED BY {role}")
    coordinator.execute(f"DROP ROLE {role}")
