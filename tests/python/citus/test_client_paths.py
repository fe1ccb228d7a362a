"""The client's ways in on a distributed table: PREDICT BY through the proxy
(it adds corgipile.predict(model, row) to the SELECT, which Citus runs on
the workers like any pushed-down call), TRAIN BY through the proxy and an
estimator fitted on the table's name (both call corgipile.train(), which
trains shard by shard)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from predict_helpers import make_tables, train

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def proxy(citus) -> Iterator[str]:
    """A proxy in front of the coordinator; its dsn."""
    proc = subprocess.Popen(
        [sys.executable, "-P", "-m", "corgipile", "proxy", "--listen", "127.0.0.1:0",
         "--upstream", f"host=127.0.0.1 port={citus.coordinator_port}",
         "--unsafe-allow-passwordless"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env=dict(os.environ, PYTHONPATH=str(ROOT / "python_client")))
    assert proc.stdout is not None
    line = proc.stdout.readline()
    m = re.search(r"listening on ([\d.]+):(\d+)", line)
    if not m:
        proc.kill()
        raise RuntimeError(f"the proxy did not start: {line!r} {proc.stderr.read() if proc.stderr else ''}")
    try:
        yield f"host={m.group(1)} port={m.group(2)} user={citus.user} dbname=postgres"
    finally:
        proc.terminate()
        _, err = proc.communicate(timeout=10)
        assert "Traceback" not in err, err


def test_predict_by_on_a_distributed_table(citus, coordinator, schema, proxy):
    dist, local = make_tables(coordinator, "pb", rows=2000)
    train(coordinator, local, "logistic", "pbm")
    with psycopg.connect(proxy, autocommit=True) as through:
        through.execute(f"SET search_path = {schema}")
        rows = through.execute(f"SELECT id FROM {dist} WHERE id <= 500 ORDER BY id PREDICT BY pbm"
                               ).fetchall()
        # the proxy's statement, planned by Citus: the call is in the workers' query
        plan = through.execute(f"EXPLAIN (VERBOSE, COSTS OFF) SELECT id, "
                               f"corgipile.predict('pbm', {dist}) FROM {dist}").fetchall()
    expected = coordinator.execute(
        f"SELECT id, corgipile.predict('pbm', t) FROM {local} AS t WHERE id <= 500 ORDER BY id"
    ).fetchall()
    assert rows == expected and len(rows) == 500
    assert any("Query:" in r[0] and "corgipile.predict('pbm'::text" in r[0] for r in plan)


def test_train_by_on_a_distributed_table_is_the_sql_training(citus, coordinator, schema, proxy):
    """TRAIN BY through the proxy calls corgipile.train() on the table, which
    trains shard by shard (no rows gathered): the same seed gives the
    weights the SQL call gives."""
    dist, _ = make_tables(coordinator, "tb", rows=2000)
    with psycopg.connect(proxy, autocommit=True) as through:
        through.execute(f"SET search_path = {schema}")
        epochs = through.execute(
            f"SELECT * FROM {dist} TRAIN BY logistic WITH model_name = 'tb_proxy', seed = 3, "
            f"max_epoch_num = 3").fetchall()
    assert len(epochs) == 3
    coordinator.execute(f"SELECT count(*) FROM corgipile.train('{dist}', 'logistic', 'tb_sql', "
                        "seed => 3, max_epoch_num => 3)")
    weights = dict(coordinator.execute(
        "SELECT model_name, weights FROM corgipile.models WHERE model_name IN ('tb_proxy', 'tb_sql')"
    ).fetchall())
    assert weights["tb_proxy"] == weights["tb_sql"]


def test_an_estimator_fits_a_distributed_table(citus, coordinator, schema):
    from corgipile.estimators import SGDClassifier

    dist, local = make_tables(coordinator, "est", rows=2000)
    clf = SGDClassifier(citus.dsn(), loss="log_loss", seed=3,
                        model_name="est_m").fit(f"{schema}.{dist}")
    assert clf.n_features_in_ == 3
    # the stored model is the distributed training's, and scores the rows
    accuracy = coordinator.execute(
        f"SELECT avg((corgipile.predict_class('est_m', t.features)::int = t.label)::int)::float8 "
        f"FROM {local} AS t").fetchone()[0]
    assert clf.score(f"{schema}.{local}") == pytest.approx(accuracy)
