"""Running corgipile.train from Python: live progress and cancellation.

The server sends one NOTICE per epoch as soon as the epoch ends (result
rows may wait in its send buffer), of the form::

    corgipile: model=<name> epoch=<e>/<max> tuples=<n> loss=<f> score=<f>
               validation_score=<f or null> seconds=<f>

A psycopg notice handler turns each into an :class:`EpochProgress`, which
drives a tqdm bar and the caller's callback. Ctrl-C during training makes
the client cancel the query on the server; it then raises
:class:`~corgipile.errors.TrainingInterrupted` (a KeyboardInterrupt) with
the connection usable and nothing stored.  PostgreSQL drops a cancel that
arrives before the backend has read the query, so the cancel is sent again
with every epoch the server still reports; a second Ctrl-C raises at once
(psycopg then cancels, and closes the connection after 5 s if the query
goes on; the backend, which polls its client's socket during a training,
``client_connection_check_interval``, stops and stores nothing).
"""

from __future__ import annotations

import logging
import re
import signal
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg import errors as pgerrors
from psycopg import sql
from psycopg.pq import TransactionStatus
from psycopg.types.json import Jsonb

from .errors import TrainingCancelled, TrainingInterrupted
from .params import TrainSignature

__all__ = ["EpochProgress", "ProgressCallback", "parse_progress", "ProgressReporter",
           "run_training", "Source"]

logger = logging.getLogger("corgipile")

# after a Ctrl-C, a progress notice repeats the cancel at most this often (s)
RECANCEL_INTERVAL = 0.25


@dataclass(frozen=True)
class EpochProgress:
    """What the server reported at the end of one epoch."""

    model_name: str
    epoch: int
    max_epoch: int
    tuples: int
    loss: float
    score: float
    validation_score: float | None
    seconds: float


ProgressCallback = Callable[[EpochProgress], Any]

_PROGRESS = re.compile(
    r"^corgipile: model=(?P<model>.*) epoch=(?P<epoch>\d+)/(?P<max>\d+) "
    r"tuples=(?P<tuples>\d+) loss=(?P<loss>\S+) score=(?P<score>\S+) "
    r"validation_score=(?P<val>\S+) seconds=(?P<seconds>\S+)$", re.S)


def parse_progress(message: str) -> EpochProgress | None:
    """The EpochProgress in a progress NOTICE, or None for other messages."""
    m = _PROGRESS.match(message.strip())
    if not m:
        return None

    def num(s: str) -> float:
        return float("nan") if s in ("null", "NaN", "nan") else float(s)

    val = m.group("val")
    return EpochProgress(
        model_name=m.group("model"), epoch=int(m.group("epoch")),
        max_epoch=int(m.group("max")), tuples=int(m.group("tuples")),
        loss=num(m.group("loss")), score=num(m.group("score")),
        validation_score=None if val == "null" else num(val),
        seconds=num(m.group("seconds")))


class ProgressReporter:
    """Notice handler that feeds a tqdm bar and a callback.

    An exception raised by the callback (or a Ctrl-C while it runs) is kept,
    the server query is cancelled, and :func:`run_training` re-raises it."""

    def __init__(self, conn: psycopg.Connection[Any], bar: bool,
                 callback: ProgressCallback | None = None, desc: str | None = None) -> None:
        self.conn = conn
        self.bar_enabled = bar
        self.callback = callback
        self.desc = desc
        self.bar: Any = None
        self.epochs: list[EpochProgress] = []
        self.messages: list[str] = []
        self.error: BaseException | None = None
        self.interrupted = False  # Ctrl-C seen (_cancel_on_ctrl_c)
        self.cancelled_at = -1.0

    def cancel(self) -> None:
        self.cancelled_at = time.monotonic()
        try:
            self.conn.cancel_safe()
        except Exception:  # pragma: no cover - best effort
            logger.exception("could not cancel the training query")

    def __call__(self, diag: psycopg.errors.Diagnostic) -> None:
        message = diag.message_primary or ""
        if self.interrupted:
            # still training after a Ctrl-C: its cancel was lost (notices
            # already on their way do not each send one)
            if time.monotonic() - self.cancelled_at > RECANCEL_INTERVAL:
                self.cancel()
            return
        try:
            progress = parse_progress(message)
            if progress is None:
                if message.startswith("corgipile:"):
                    self.messages.append(message)
                    self._write(message)
                return
            self.epochs.append(progress)
            if self.bar_enabled:
                self._update_bar(progress)
            if self.callback is not None and self.error is None:
                self.callback(progress)
        except BaseException as exc:  # noqa: BLE001 - re-raised by run_training
            if self.error is None:
                self.error = exc
                self.cancel()

    def _write(self, message: str) -> None:
        if self.bar is not None:
            self.bar.write(message, file=sys.stderr)
        else:
            logger.warning("%s", message)

    def _update_bar(self, p: EpochProgress) -> None:
        if self.bar is None:
            from tqdm import tqdm

            self.bar = tqdm(total=p.max_epoch, desc=self.desc or p.model_name,
                            unit="epoch", file=sys.stderr, dynamic_ncols=True, leave=True)
        postfix = {"loss": f"{p.loss:.4g}", "score": f"{p.score:.4f}"}
        if p.validation_score is not None:
            postfix["val"] = f"{p.validation_score:.4f}"
        self.bar.set_postfix(postfix, refresh=False)
        self.bar.update(max(0, p.epoch - self.bar.n))

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None


@dataclass(frozen=True)
class Source:
    """What to train on: a table, or a query materialised first.

    relation: regclass input text of the table (when query is None);
    query: a checked SELECT, copied into a temporary table;
    label: what corgipile.models.relation will say for a query source;
    base: the name stem for a generated model name.
    """

    relation: str | None = None
    query: sql.Composable | None = None
    query_params: Sequence[Any] | Mapping[str, Any] | None = None
    label: str | None = None
    base: str = "query"
    filter_text: str | None = None


@contextmanager
def transaction(conn: psycopg.Connection[Any]) -> Iterator[None]:
    """An atomic block. On an autocommit connection it commits at the end;
    on a connection in manual-commit mode it joins the caller's transaction
    (as a savepoint), and the caller commits."""
    if not conn.autocommit and conn.info.transaction_status == TransactionStatus.IDLE:
        conn.execute("SELECT 1")  # open the caller's transaction first
    with conn.transaction():
        yield


@contextmanager
def _cancel_on_ctrl_c(reporter: ProgressReporter) -> Iterator[None]:
    """While training, a first Ctrl-C cancels the query instead of raising.

    Raised from the signal, a KeyboardInterrupt can land in psycopg's
    dispatch of a progress notice, which runs inside libpq's callback and
    drops it: the training then went on to its last epoch.  So the handler
    only sends the cancel and marks the run; run_training raises
    TrainingInterrupted once the query ends, and every progress notice the
    server still sends repeats the cancel (one that reaches the backend
    before it has read the query is dropped).  A second Ctrl-C raises
    KeyboardInterrupt as usual.  Only in the main thread, and only over
    Python's default handler."""
    if (threading.current_thread() is not threading.main_thread()
            or signal.getsignal(signal.SIGINT) is not signal.default_int_handler):
        yield
        return

    def on_ctrl_c(signum: int, frame: Any) -> None:
        if reporter.interrupted:
            raise KeyboardInterrupt
        reporter.interrupted = True
        reporter.cancel()

    signal.signal(signal.SIGINT, on_ctrl_c)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def _raise_if_interrupted(reporter: ProgressReporter) -> None:
    """Between statements: a Ctrl-C whose cancel found no query running."""
    if reporter.interrupted:
        raise KeyboardInterrupt


def run_training(conn: psycopg.Connection[Any], signature: TrainSignature, source: Source,
                 model: str, params: dict[str, Any], *, replace: bool = False,
                 bar: bool = False, callback: ProgressCallback | None = None,
                 ) -> tuple[psycopg.Cursor[Any], str | None]:
    """Train; returns the cursor over the per-epoch rows (already fetched
    client-side) and the model name (None only if the server named it and
    returned no row)."""
    values = {name: signature.convert(name, value) for name, value in params.items()}
    reporter = ProgressReporter(conn, bar, callback)
    conn.add_notice_handler(reporter)
    interrupted: KeyboardInterrupt | None = None
    try:
        with _cancel_on_ctrl_c(reporter), transaction(conn):
            # Progress notices drive the bar and the callback, and repeat a
            # lost cancel.  After a second Ctrl-C psycopg closes the
            # connection if its cancel is lost too; a backend notices a
            # closed connection only when it next writes: have it poll the
            # socket during this transaction, unless the DBA set a period.
            conn.execute("SELECT pg_catalog.set_config('corgipile.progress', 'on', true), "
                         "pg_catalog.set_config('client_connection_check_interval', CASE "
                         "WHEN pg_catalog.current_setting('client_connection_check_interval') "
                         "OPERATOR(pg_catalog.=) '0' THEN '1s' ELSE pg_catalog.current_setting("
                         "'client_connection_check_interval') END, true)")
            relation = source.relation
            temp = None
            if source.query is not None:
                temp = f"corgipile_src_{uuid.uuid4().hex[:12]}"
                # keep the source's row order: no parallel or synchronized scans
                conn.execute("SELECT pg_catalog.set_config('max_parallel_workers_per_gather',"
                              " '0', true), pg_catalog.set_config('synchronize_seqscans',"
                              " 'off', true)")
                conn.execute(sql.SQL("CREATE TEMPORARY TABLE {} AS\n").format(
                    sql.Identifier(temp)) + source.query, source.query_params)
                relation = f"pg_temp.{temp}"
                if values.get("model_name") is None:
                    values["model_name"] = conn.execute(
                        "SELECT pg_catalog.format('%%s_%%s_%%s', %s::pg_catalog.text, "
                        "%s::pg_catalog.text, pg_catalog.nextval('corgipile.model_name_seq'))",
                        (source.base, model.lower())).fetchone()[0]  # type: ignore[index]
            name = values.get("model_name")
            if replace and name is not None:
                conn.execute("SELECT corgipile.drop_model(m.model_name) FROM corgipile.models m"
                             " WHERE m.model_name OPERATOR(pg_catalog.=) %s", (name,))
            assert relation is not None
            query, args = signature.call(relation, model, values)
            cur = conn.cursor()
            _raise_if_interrupted(reporter)
            cur.execute(query, args)
            if reporter.error is not None:  # the callback failed on the last epoch
                raise reporter.error
            # interrupted, but trained to the end before the cancel: store nothing
            _raise_if_interrupted(reporter)
            rows = cur.fetchall()
            cur.scroll(0, "absolute")
            if name is None and rows:
                name = rows[0][0]
            if temp is not None and name is not None:
                extra: dict[str, Any] = {}
                if source.filter_text is not None:
                    extra["source_filter"] = source.filter_text
                else:
                    extra["source_query"] = source.label
                conn.execute("SELECT corgipile.annotate_model(%s, %s, %s)",
                             (name, source.label, Jsonb(extra)))
                conn.execute(sql.SQL("DROP TABLE {}").format(sql.Identifier(temp)))
        return cur, name
    except KeyboardInterrupt as exc:
        interrupted = exc
    except pgerrors.QueryCanceled as exc:
        if reporter.error is None and not reporter.interrupted:
            raise TrainingCancelled(f"training cancelled on the server: "
                                    f"{exc.diag.message_primary or exc}") from exc
    finally:
        conn.remove_notice_handler(reporter)
        reporter.close()
        _settle(conn)
    err = reporter.error if reporter.error is not None else interrupted
    if err is None and reporter.interrupted:
        err = KeyboardInterrupt()
    if isinstance(err, KeyboardInterrupt):
        raise TrainingInterrupted("training interrupted: the query was cancelled on the "
                                  "server and no model was stored") from None
    assert err is not None
    raise err


def _settle(conn: psycopg.Connection[Any]) -> None:
    """After an interrupt, leave the connection idle (or in the caller's
    failed transaction), never stuck mid-query."""
    if conn.closed:
        return
    status = conn.info.transaction_status
    if status == TransactionStatus.ACTIVE:  # pragma: no cover - psycopg cancels itself
        try:
            conn.cancel_safe()
        except Exception:
            logger.exception("could not cancel the query")
