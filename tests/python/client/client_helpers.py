"""Helpers of the client tests (a module of its own: `conftest` is an
ambiguous module name when several test directories have one)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import psycopg
from psycopg import sql

# the one generator of the suites' data (tests/python/datagen.py), for the
# client tests' imports
from datagen import linear_task  # noqa: F401

if TYPE_CHECKING:
    import pandas

ROOT = Path(__file__).resolve().parents[3]
CLIENT = ROOT / "python_client"


def make_table(conn: psycopg.Connection, name: str, x: np.ndarray, y: np.ndarray) -> None:
    """name(id int, label int, features float8[]) with plain INSERTs (not the
    client's loaders, so that the loaders' tests compare against it)."""
    conn.execute(sql.SQL("CREATE TABLE {} (id int, label int, features float8[])").format(
        sql.Identifier(name)))
    with conn.cursor() as cur:
        cur.executemany(sql.SQL("INSERT INTO {} VALUES (%s, %s, %s)").format(
            sql.Identifier(name)),
            [(i, int(y[i]), x[i].tolist()) for i in range(len(y))])


def dsn_with(dsn: str, **changes: str) -> str:
    """The conninfo string dsn with some keys changed."""
    info = dict(item.split("=", 1) for item in dsn.split())
    info.update(changes)
    return " ".join(f"{k}={v}" for k, v in info.items())


def backend_state(dsn: str, pid: int) -> str:
    """What a training backend is doing, for a test that gives up on it:
    its pg_stat_activity row and each of its threads' state, wait channel
    and CPU ticks (the server runs on this machine)."""
    with psycopg.connect(dsn, autocommit=True) as other:
        row = other.execute("SELECT state, wait_event_type, wait_event, now() - query_start "
                            "FROM pg_stat_activity WHERE pid = %s", (pid,)).fetchone()
    threads = []
    try:
        for tid in sorted(os.listdir(f"/proc/{pid}/task")):
            with open(f"/proc/{pid}/task/{tid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            try:
                with open(f"/proc/{pid}/task/{tid}/wchan") as f:
                    wchan = f.read()
            except OSError:
                wchan = "?"
            ticks = int(fields[11]) + int(fields[12])
            threads.append(f"{tid}: {fields[0]} wchan={wchan} ticks={ticks}")
    except OSError as e:
        threads.append(f"/proc unreadable: {e}")
    return f"activity {row}; threads {threads}"


def sklearn_frame_score(train: pandas.DataFrame, y_train: np.ndarray,
                        test: pandas.DataFrame, y_test: np.ndarray) -> float:
    """scikit-learn's exact logistic regression (C=1) on the encoding the
    server gives a mixed frame: text, category and boolean-as-text columns
    one-hot (a missing value a category of its own), numbers standardized;
    the reference a default corgipile training should reach."""
    from sklearn.compose import make_column_transformer
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import OneHotEncoder, StandardScaler

    def encode(frame):
        out = frame.copy()
        for c in text:
            out[c] = out[c].astype(object).where(out[c].notna(), "(null)").astype(str)
        return out.astype(dict.fromkeys(numbers, float))

    text = [c for c in train.columns
            if train[c].dtype == object or str(train[c].dtype) == "category"]
    numbers = [c for c in train.columns if c not in text]
    model = make_pipeline(
        make_column_transformer((OneHotEncoder(handle_unknown="ignore"), text),
                                (StandardScaler(), numbers)),
        LogisticRegression(C=1.0, max_iter=2000))
    model.fit(encode(train), y_train)
    return float(model.score(encode(test), y_test))


def majority_rate(y: np.ndarray) -> float:
    """The accuracy of always predicting the most frequent label."""
    _, counts = np.unique(y, return_counts=True)
    return float(counts.max() / counts.sum())
