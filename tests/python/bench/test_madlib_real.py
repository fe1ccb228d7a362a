"""The MADlib runner against a real MADlib (opt-in: `make test-madlib`,
which builds MADlib 2.1.0 into a relocated PostgreSQL and exports
CORGIPILE_MADPACK; without it this module is not collected).

What is checked:
- the real MADlib behaves as madlib_2_1_0.json records it (signatures,
  output tables and their column types, coef without an intercept unless
  fit_intercept=true, the intercept's place, dep_var_mapping, iterations at
  tolerance 0, logistic IGD's first iteration, nothing left behind): the
  stub of test_madlib_runner.py is built from that file, so neither can
  drift from the real thing without a test failing;
- the runner's SVM weights equal a per-row reference of MADlib's update
  (which is the engine's) on the table as stored, and its held-out accuracy
  equals MADlib's own svm_predict;
- logistic IGD and IRLS: IRLS reaches scikit-learn's unpenalised maximum
  likelihood, IGD learns nothing in its first iteration;
- `python -m corgipile.bench` end to end, with the CPU seconds recorded.

Regenerate the record after a deliberate MADlib upgrade with
CORGIPILE_MADLIB_RECORD=1 make test-madlib, and read the diff.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

import numpy as np
import psycopg
import pytest
from pytest_postgresql import factories

from corgipile.bench import madlib
from corgipile.bench.config import TrainSettings
from corgipile.bench.datasets import describe_table
from datagen import linear_task, load_table
from madlib_observe import RECORD, observe, record, relations
from test_bismarck import reference_sgd

MADPACK = os.environ.get("CORGIPILE_MADPACK", "")


def _install(host: str, port: int, user: str, dbname: str, password: str | None = None,
             **_: Any) -> None:
    """The template database: corgipile, and MADlib through its own
    installer, madpack, over TCP as madpack needs."""
    with psycopg.connect(host=host, port=port, user=user, dbname=dbname) as c:
        c.execute("CREATE EXTENSION corgipile")
    tcp = os.environ.get("CORGIPILE_MADPACK_HOST", "127.0.0.1")
    proc = subprocess.run([MADPACK, "-p", "postgres", "-c", f"{user}@{tcp}:{port}/{dbname}",
                           "install"], capture_output=True, text=True)
    assert proc.returncode == 0 and "installed successfully" in proc.stdout + proc.stderr, (
        f"madpack install into {dbname} failed:\n{proc.stdout}{proc.stderr}")


madlib_noproc = factories.postgresql_noproc(
    host=os.environ["PGHOST"], port=int(os.environ["PGPORT"]),
    user=os.environ.get("PGUSER", "postgres"), dbname="corgipile_madlib", load=[_install])
madlib_db = factories.postgresql("madlib_noproc")


@pytest.fixture
def mconn(madlib_db):
    madlib_db.autocommit = True
    return madlib_db


def test_real_madlib_behaves_as_recorded(mconn):
    got = observe(mconn)
    if os.environ.get("CORGIPILE_MADLIB_RECORD"):
        RECORD.write_text(json.dumps(got, indent=1) + "\n")
    assert got == record(), (
        "the real MADlib differs from tests/python/bench/madlib_2_1_0.json (the stub's "
        "source); rerun with CORGIPILE_MADLIB_RECORD=1 and read the diff")


@pytest.fixture
def clustered(mconn):
    x, y = linear_task(600, 4, seed=3)
    load_table(mconn, "train", x[:500], y[:500], order="label")
    load_table(mconn, "held_out", x[500:], y[500:])
    return mconn, describe_table(mconn, "train", "held_out")


def test_svm_runner_weights_and_accuracy_are_madlibs(clustered):
    conn, ds = clustered
    cfg = TrainSettings(epochs=3, learning_rate=0.05, decay=0.9)
    (r,) = madlib.runs(conn, ds, "svm", "no_shuffle", cfg, None)
    assert r.status == "ok", r.reason
    rows = conn.execute("SELECT label, features FROM train ORDER BY ctid").fetchall()
    w_ref, _ = reference_sgd(rows, "svm", cfg)
    np.testing.assert_allclose(r.extra["weights"], w_ref, rtol=1e-9, atol=1e-12)
    # MADlib's own prediction of the held-out table gives the runner's score
    conn.execute("SELECT madlib.svm_classification('public.train', 'public.m', %s, %s, 'linear', "
                 "'fit_intercept=true', NULL, %s, false)",
                 (madlib._text(conn, ds.positive_sql()), madlib.independent(conn, ds, "svm"),
                  madlib.svm_params(cfg, 3, None)))
    conn.execute("SELECT madlib.svm_predict('public.m', 'public.held_out', 'id', 'public.p')")
    theirs = conn.execute("SELECT avg((p.prediction = (h.label > 0))::int)::float8 FROM p "
                          "JOIN held_out h USING (id)").fetchone()[0]
    assert r.epochs[-1].test_score == pytest.approx(theirs, abs=1e-12)
    assert [c["iterations"] for c in r.extra["checkpoints"]] == [1, 2, 3]
    assert all(c["cpu_seconds"] > 0 for c in r.extra["checkpoints"])
    assert r.extra["madlib_version"].startswith("MADlib version: 2.1.0")
    assert not [t for t in relations(conn) if "corgipile_bench_madlib" in t]


def test_logistic_runner_irls_is_the_mle_and_igd_starts_at_zero(clustered):
    from sklearn.linear_model import LogisticRegression

    conn, ds = clustered
    igd, irls = madlib.runs(conn, ds, "logistic", "no_shuffle", TrainSettings(epochs=10), None)
    assert igd.status == "ok" and irls.status == "ok", (igd.reason, irls.reason)
    rows = conn.execute("SELECT label, features FROM train").fetchall()
    x = np.array([f for _, f in rows])
    y = np.array([lab for lab, _ in rows])
    mle = LogisticRegression(C=np.inf, tol=1e-12, max_iter=10_000).fit(x, y)
    np.testing.assert_allclose(irls.extra["weights"], [*mle.coef_[0], mle.intercept_[0]],
                               rtol=1e-4, atol=1e-6)
    # IGD's first iteration has step 0: a zero model, every row called negative
    negatives = conn.execute("SELECT avg((label <= 0)::int)::float8 FROM held_out").fetchone()[0]
    assert igd.epochs[0].test_score == pytest.approx(negatives)
    assert igd.epochs[-1].test_score > negatives + 0.1


def test_bench_end_to_end(mconn, tmp_path, client_env):
    info = mconn.info
    dsn = f"host={info.host} port={info.port} user={info.user} dbname={info.dbname}"
    out = tmp_path / "out"
    proc = subprocess.run(
        [sys.executable, "-m", "corgipile.bench", "--dsn", dsn, "--rows", "4000", "--dims", "6",
         "--epochs", "3", "--scan-repeat", "2", "--strategies", "corgipile",
         "--baselines", "madlib", "--no-plots", "--output", str(out)],
        capture_output=True, text=True, env=client_env, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    doc = json.loads((out / "results.json").read_text())
    assert doc["meta"]["server"]["madlib_version"].startswith("MADlib version: 2.1.0")
    mad = [r for r in doc["runs"] if r["system"] == "madlib"]
    assert sorted(r["method"] for r in mad) == sorted(
        ["madlib (shuffle_once)", "madlib (no_shuffle)"] * 2
        + ["madlib irls (shuffle_once)", "madlib irls (no_shuffle)"])
    for r in mad:
        assert r["status"] == "ok", r
        assert [e["epoch"] for e in r["epochs"]] == [1, 2, 3]
        s = r["summary"]
        assert s["epoch_cpu_seconds"] > 0 and s["scan_cpu_seconds"] > 0
        assert s["epoch_cpu_ratio_to_scan_cpu"] == pytest.approx(
            s["epoch_cpu_seconds"] / s["scan_cpu_seconds"])
    once = {(r["model"], r["method"]): r["summary"]["final_test_score"] for r in mad}
    # the clustered table as stored is worse for MADlib's SVM than the shuffled copy
    assert once[("svm", "madlib (shuffle_once)")] > once[("svm", "madlib (no_shuffle)")] + 0.05
