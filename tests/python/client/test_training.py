"""client.train: the returned Model, live progress (callback and bar),
Ctrl-C and server-side cancellation."""

from __future__ import annotations

import os
import signal
import threading
import time

import numpy as np
import psycopg
import pytest

import corgipile
from client_helpers import backend_state, linear_task, make_table
from corgipile.training import parse_progress


def test_train_returns_the_stored_model(client, points):
    model = client.train("points", "svm", model_name="m", max_epoch_num=4, seed=11,
                         learning_rate=0.05)
    assert isinstance(model, corgipile.Model)
    assert (model.name, model.model, model.n_features) == ("m", "svm", 4)
    assert model.weights.shape == (5,) and model.weights.dtype == np.float64
    assert model.coef.shape == (1, 4) and model.intercept.shape == (1,)
    assert [e.epoch for e in model.history] == [1, 2, 3, 4]
    assert all(e.tuples == 600 for e in model.history)
    assert model.history[-1].score > 0.8
    assert model.classes == [-1, 1]
    # the locally computed decision function agrees with the server's labels
    x, _ = points
    server = client.predict("m", x[:50])
    local = np.where(model.decision_function(x[:50]) >= 0, 1.0, -1.0)
    assert np.array_equal(server, local)


def test_history_as_records_and_dataframe(client, points):
    model = client.train("points", "logistic", max_epoch_num=3, seed=2)
    records = model.history_records()
    assert [r["epoch"] for r in records] == [1, 2, 3]
    assert set(records[0]) == {"epoch", "tuples", "loss", "score", "validation_score",
                               "seconds"}
    pd = pytest.importorskip("pandas")
    frame = model.history_frame()
    assert isinstance(frame, pd.DataFrame)
    assert list(frame["epoch"]) == [1, 2, 3]
    assert frame["loss"].tolist() == [r["loss"] for r in records]


def test_unknown_and_wrong_parameters_are_refused_before_training(client, points, conn):
    with pytest.raises(corgipile.ParameterError) as info:
        client.train("points", "svm", learning_rat=0.1)
    assert "learning_rate" in str(info.value) and "seed" in str(info.value)
    with pytest.raises(corgipile.ParameterError, match="integer"):
        client.train("points", "svm", max_epoch_num=2.5)
    with pytest.raises(corgipile.ParameterError, match="number"):
        client.train("points", "svm", learning_rate=True)
    assert conn.execute("SELECT count(*) FROM corgipile.models").fetchone()[0] == 0


def test_numpy_scalars_and_text_conversions(client, points):
    model = client.train("points", "svm", max_epoch_num=np.int64(2), learning_rate=np.float32(0.5),
                         block_size=1, seed=np.int32(4))
    assert model.params["max_epoch_num"] == 2 and model.epochs == 2
    assert model.params["pages_per_block"] == 1


def test_train_on_a_query_and_with_where(client, points, conn):
    q = client.train("SELECT * FROM points WHERE label = 1 OR id < 100", "svm",
                     max_epoch_num=1, seed=1)
    expected = conn.execute("SELECT count(*) FROM points WHERE label = 1 OR id < 100"
                            ).fetchone()[0]
    assert q.history[0].tuples == expected
    assert q.relation.startswith("(SELECT") and q.name.startswith("query_svm_")
    w = client.train("points", "svm", where="id >= 300", max_epoch_num=1, seed=1)
    assert w.history[0].tuples == 300 and w.params["source_filter"] == "id >= 300"
    for bad in ("true; DROP TABLE points", "true) UNION (SELECT * FROM points",
                "true ORDER BY 1"):
        with pytest.raises(corgipile.StatementError):
            client.train("points", "svm", where=bad)
    assert conn.execute("SELECT count(*) FROM points").fetchone()[0] == 600


def test_replace_swaps_the_model_atomically(client, points):
    client.train("points", "svm", model_name="r", max_epoch_num=1, seed=1)
    with pytest.raises(psycopg.errors.DuplicateObject):
        client.train("points", "svm", model_name="r", max_epoch_num=2)
    again = client.train("points", "svm", model_name="r", max_epoch_num=2, replace=True)
    assert again.epochs == 2
    with pytest.raises(psycopg.errors.InvalidParameterValue):
        client.train("points", "svm", model_name="r", max_epoch_num=0, replace=True)
    assert client.get_model("r").epochs == 2  # the failed replacement kept the old model


def test_parse_progress_notice():
    p = parse_progress("corgipile: model=my model epoch=3/20 tuples=1000 loss=0.198100 "
                       "score=0.945300 validation_score=null seconds=0.004")
    assert p == corgipile.EpochProgress("my model", 3, 20, 1000, 0.1981, 0.9453, None, 0.004)
    assert parse_progress('corgipile: skipped 3 rows of "t" with a NULL label') is None
    assert parse_progress("corgipile: model=m epoch=1/2 tuples=5 loss=1 score=0.5 "
                          "validation_score=0.25 seconds=1").validation_score == 0.25


def test_progress_callback_sees_every_epoch_live(client, points, conn):
    conn.execute("SET corgipile.progress = off")  # a callback turns it on for the training
    seen = []
    stamps = []

    def callback(p):
        seen.append(p)
        stamps.append(time.monotonic())

    model = client.train("points", "svm", model_name="cb", max_epoch_num=5, seed=3,
                         callback=callback)
    assert [p.epoch for p in seen] == [1, 2, 3, 4, 5]
    assert all(p.max_epoch == 5 and p.model_name == "cb" and p.tuples == 600 for p in seen)
    assert [round(p.loss, 5) for p in seen] == [round(e.loss, 5) for e in model.history]
    assert conn.execute("SHOW corgipile.progress").fetchone()[0] == "off"


def test_callback_error_cancels_the_training(client, points, conn):
    def callback(p):
        if p.epoch == 2:
            raise ValueError("stop here")

    with pytest.raises(ValueError, match="stop here"):
        client.train("points", "svm", model_name="cut", max_epoch_num=50, callback=callback)
    assert conn.execute("SELECT count(*) FROM corgipile.models").fetchone()[0] == 0
    assert conn.execute("SELECT 1").fetchone() == (1,)  # the session is usable


def test_progress_bar_on_request(client, points, capsys):
    client.train("points", "svm", model_name="bar", max_epoch_num=3, progress=True)
    err = capsys.readouterr().err
    assert "bar" in err and "3/3" in err and "loss=" in err and "score=" in err
    client.train("points", "svm", model_name="nobar", max_epoch_num=3, progress=False)
    assert "nobar" not in capsys.readouterr().err


def test_skipped_rows_notice_is_reported(client, conn, caplog):
    x, y = linear_task(50, 2, seed=1)
    make_table(conn, "holes", x, y)
    conn.execute("UPDATE holes SET label = NULL WHERE id < 5")
    with caplog.at_level("WARNING", logger="corgipile"):
        client.train("holes", "svm", max_epoch_num=1)
    assert any("skipped 5 rows" in r.getMessage() for r in caplog.records)


@pytest.fixture
def slow(conn):
    """A table whose training takes minutes unless cancelled."""
    x, y = linear_task(4000, 8, seed=5)
    make_table(conn, "slow", x, y)
    return "slow"


def _no_training_running(dsn):
    with psycopg.connect(dsn, autocommit=True) as other:
        for _ in range(50):
            n = other.execute("SELECT count(*) FROM pg_stat_activity WHERE state = 'active' "
                              "AND query LIKE '%corgipile.train%' AND pid <> pg_backend_pid()"
                              ).fetchone()[0]
            if n == 0:
                return True
            time.sleep(0.1)
    return False


def test_ctrl_c_cancels_the_query_on_the_server(client, slow, conn, dsn):
    # Ctrl-C once the server is training (its second epoch reported): a
    # cancel request that reaches a backend still reading the query is
    # dropped by PostgreSQL, so a timer fired at a fixed time made this test
    # hang on a loaded machine, training for ever.
    epochs = []
    timers = []

    def callback(progress):
        epochs.append(progress)
        if len(epochs) == 2:
            timers.append(threading.Timer(0.2, lambda: os.kill(os.getpid(), signal.SIGINT)))
            timers[-1].start()

    # a watchdog turns a lost cancel into a failure instead of a hang
    pid = conn.info.backend_pid
    stuck = []
    watchdog = threading.Timer(60.0, lambda: _cancel_backend(dsn, pid, stuck))
    watchdog.start()
    try:
        with pytest.raises(KeyboardInterrupt) as info:
            client.train(slow, "svm", model_name="never", max_epoch_num=1_000_000,
                         callback=callback)
    except corgipile.TrainingCancelled:
        pytest.fail(f"the watchdog cancelled the training after {len(epochs)} epochs: {stuck}")
    finally:
        watchdog.cancel()
        for timer in timers:
            timer.cancel()
    assert isinstance(info.value, corgipile.TrainingInterrupted)
    assert len(epochs) > 1  # it was really training
    assert _no_training_running(dsn)
    assert conn.execute("SELECT count(*) FROM corgipile.models").fetchone()[0] == 0
    assert conn.execute("SELECT 1").fetchone() == (1,)


def test_ctrl_c_whose_cancel_is_lost_is_sent_again(client, slow, conn, dsn, monkeypatch):
    """PostgreSQL drops a cancel request that reaches the backend before it
    has read the query.  Simulated here by dropping the first cancel the
    client sends: the next epoch's progress notice sends it again, and the
    training stops, with nothing stored and the connection usable."""
    sent = []
    real_cancel = conn.cancel_safe

    def lossy_cancel(*args, **kwargs):
        sent.append(time.monotonic())
        if len(sent) > 1:
            real_cancel(*args, **kwargs)

    monkeypatch.setattr(conn, "cancel_safe", lossy_cancel)
    conn.execute("SET corgipile.progress = off")  # the client turns it on for the training
    pid = conn.info.backend_pid

    def interrupt_once_training():
        with psycopg.connect(dsn, autocommit=True) as watch:
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                if watch.execute("SELECT count(*) FROM pg_stat_activity WHERE pid = %s AND "
                                 "state = 'active' AND query LIKE '%%corgipile.train%%'",
                                 (pid,)).fetchone()[0]:
                    break
                time.sleep(0.05)
        os.kill(os.getpid(), signal.SIGINT)

    interrupter = threading.Thread(target=interrupt_once_training)
    stuck = []
    watchdog = threading.Timer(60.0, lambda: _cancel_backend(dsn, pid, stuck))
    interrupter.start()
    watchdog.start()
    try:
        with pytest.raises(corgipile.TrainingInterrupted):
            client.train(slow, "svm", model_name="never", max_epoch_num=1_000_000)
    except corgipile.TrainingCancelled:
        pytest.fail(f"the watchdog cancelled the training ({len(sent)} cancels sent): {stuck}")
    finally:
        watchdog.cancel()
        interrupter.join()
    assert len(sent) >= 2, "the lost cancel was not sent again"
    assert not conn.closed and conn.execute("SELECT 1").fetchone() == (1,)
    assert conn.execute("SELECT count(*) FROM corgipile.models").fetchone()[0] == 0
    # the handler is Python's again
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


@pytest.mark.parametrize("dba, during", [("0", "1s"), ("7s", "7s")])
def test_connection_check_during_training(slow, dsn, dba, during):
    """The training's transaction polls the client's socket once a second,
    unless a period is set already; the setting ends with the transaction."""
    with psycopg.connect(dsn) as session:  # the training joins this transaction
        session.execute(f"SET client_connection_check_interval = '{dba}'")
        session.commit()
        corgipile.Client(session, progress=False).train(slow, "svm", max_epoch_num=1)
        assert session.execute("SHOW client_connection_check_interval").fetchone()[0] == during
        session.rollback()
        assert session.execute("SHOW client_connection_check_interval").fetchone()[0] == dba


def _cancel_backend(dsn, pid, log=None):
    if log is not None:
        log.append(backend_state(dsn, pid))
    with psycopg.connect(dsn, autocommit=True) as other:
        other.execute("SELECT pg_cancel_backend(%s)", (pid,))


def test_cancel_from_another_session_raises_training_cancelled(client, slow, conn, dsn):
    pid = conn.info.backend_pid

    def cancel():
        with psycopg.connect(dsn, autocommit=True) as other:
            other.execute("SELECT pg_cancel_backend(%s)", (pid,))

    started = []

    def callback(p):
        if not started:
            started.append(p)
            threading.Thread(target=cancel).start()

    with pytest.raises(corgipile.TrainingCancelled, match="cancel"):
        client.train(slow, "svm", max_epoch_num=1_000_000, callback=callback)
    assert conn.execute("SELECT count(*) FROM corgipile.models").fetchone()[0] == 0


def test_training_inside_the_callers_transaction(conn, points, dsn):
    """On a connection in manual-commit mode the model is part of the
    caller's transaction: invisible elsewhere until commit, gone on rollback."""
    manual = psycopg.connect(dsn)
    try:
        client = corgipile.Client(manual, progress=False)
        client.train("points", "svm", model_name="tx", max_epoch_num=1)
        assert conn.execute("SELECT count(*) FROM corgipile.models").fetchone()[0] == 0
        manual.rollback()
        assert client.list_models() == []
        manual.rollback()
        client.train("points", "svm", model_name="tx", max_epoch_num=1)
        manual.commit()
        assert conn.execute("SELECT model_name FROM corgipile.models").fetchall() == [("tx",)]
    finally:
        manual.close()
