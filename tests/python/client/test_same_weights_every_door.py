"""Same seed, same weights through every door: a default
training (3 epochs then the polish on a small table; the stopping rule where
the polish does not apply) gives bit-identical weights, the same epochs and
the same polish from SQL, SQL with a connection check every millisecond,
the client (which sets a connection check for every training), the CLI,
the estimators and the proxy's TRAIN BY."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import psycopg
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import corgipile
from client_helpers import dsn_with, make_table
from corgipile.estimators import SGDClassifier
from test_proxy import Proxy

SEED = 7


@pytest.fixture
def doors_table(conn):
    """3,000 rows of 12 features stored by label, two of them nearly equal."""
    rng = np.random.default_rng(31)
    x = rng.normal(size=(3000, 12))
    x[:, 1] = x[:, 0] + 1e-3 * rng.normal(size=3000)
    y = np.where(x @ np.linspace(-1, 1, 12) + rng.normal(size=3000) > 0, 1, -1)
    order = np.argsort(y, kind="stable")
    make_table(conn, "doors", x[order], y[order])
    conn.execute("ANALYZE doors")


def stored(conn, name: str):
    return conn.execute("SELECT weights, jsonb_array_length(history), params->'polish', "
                        "params->'stopping' FROM corgipile.models WHERE model_name = %s",
                        (name,)).fetchone()


@pytest.mark.parametrize("kind,loss", [("logistic", "log_loss"), ("svm", "hinge")])
def test_default_training_same_weights_every_door(conn, dsn, cli_env, tmp_path, doors_table,
                                                  kind, loss):
    conn.execute("SET corgipile.progress = off")
    train = ("SELECT count(*) FROM corgipile.train('doors', %s, model_name => %s, "
             "seed => %s)")
    conn.execute(train, (kind, "by_sql", SEED))
    reference = stored(conn, "by_sql")
    if kind == "logistic":
        assert reference[2]["converged"], reference[2]
        assert reference[1] == 3, "a polished default training trains 3 epochs"
    else:
        assert reference[2] is None and reference[3]["converged"], reference[3]

    names = []
    # SQL with a connection check every millisecond
    with psycopg.connect(dsn + " options='-c client_connection_check_interval=1ms'",
                         autocommit=True) as c:
        c.execute("SET corgipile.progress = off")
        c.execute(train, (kind, "by_sql_checked", SEED))
    names.append("by_sql_checked")
    # the client
    with corgipile.connect(dsn) as c:
        c.train("doors", kind, model_name="by_client", seed=SEED, progress=False)
    names.append("by_client")
    # the CLI
    proc = subprocess.run([sys.executable, "-m", "corgipile", "train", "doors", kind,
                           "--seed", str(SEED), "--name", "by_cli"],
                          cwd=tmp_path, env=cli_env, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr
    names.append("by_cli")
    # the estimator, fitted on the table
    SGDClassifier(dsn, loss=loss, seed=SEED, model_name="by_estimator").fit("doors")
    names.append("by_estimator")
    # the proxy's TRAIN BY
    proxy = Proxy(f"host={conn.info.host} port={conn.info.port}")
    try:
        with psycopg.connect(dsn_with(dsn, host=proxy.host, port=str(proxy.port)),
                             autocommit=True) as c:
            c.execute("SET corgipile.progress = off")
            c.execute(f"SELECT * FROM doors TRAIN BY {kind} WITH seed = {SEED}, "
                      "model_name = 'by_proxy'").fetchall()
    finally:
        err = proxy.stop()
    assert "Traceback" not in err, err
    names.append("by_proxy")

    for name in names:
        got = stored(conn, name)
        assert got[1] == reference[1], f"{name}: {got[1]} epochs, SQL trained {reference[1]}"
        assert got[2] == reference[2] and got[3] == reference[3], name
        assert got[0] == reference[0], f"{name}: weights differ from the SQL training's"
