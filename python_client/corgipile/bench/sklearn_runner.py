"""scikit-learn: SGDClassifier (hinge, log_loss) and SGDRegressor, fed by
exporting the table.

The export (COPY ... TO STDOUT in binary, into numpy arrays) is timed and
counted as the run's setup, as it is part of what this path costs a user.

Learning rate: scikit-learn's own schedules ('invscaling', 'optimal') are
not the engine's exponential decay, so this runner emulates it: one
partial_fit() call per epoch with learning_rate='constant' and
eta0 = learning_rate * decay**epoch.  Within an epoch the update is then the
engine's: w <- (1 - eta*alpha) w - eta*g*x, b <- b - eta*g, with alpha = l2
(penalty None when l2 is 0).  Remaining differences: scikit-learn's hinge
is active at margin*y <= 1 (ours < 1), it keeps w as a scale times a vector,
and (by default, shuffle=True) it visits the rows in a fresh random order
every epoch: an in-memory epoch shuffle, the ideal order no in-database
method gets.  With --sklearn-no-shuffle it visits them in storage order.

The epoch's loss is scikit-learn's "Avg. loss" (verbose output): the mean
of each row's loss before its update, the same quantity as the engine's.
"""

from __future__ import annotations

import contextlib
import io
import re
import time
import warnings
from typing import Any

import numpy as np
import psycopg

from .config import TrainSettings
from .datasets import Dataset, export
from .results import FAILED, Epoch, Run

_AVG_LOSS = re.compile(r"Avg\. loss: ([-+0-9.eE]+|nan|inf)")


def _estimator(model: str, cfg: TrainSettings) -> Any:
    from sklearn.linear_model import SGDClassifier, SGDRegressor

    common: dict[str, Any] = dict(penalty="l2" if cfg.l2 > 0 else None, alpha=cfg.l2 if cfg.l2 > 0 else 0.0001,
                  fit_intercept=True, learning_rate="constant", eta0=cfg.rate(0),
                  shuffle=cfg.sklearn_shuffle, random_state=cfg.seed, verbose=1, average=False)
    if model == "svm":
        return SGDClassifier(loss="hinge", **common)
    if model == "logistic":
        return SGDClassifier(loss="log_loss", **common)
    if model == "linear":
        return SGDRegressor(loss="squared_error", **common)
    return None


def run(conn: psycopg.Connection[Any], ds: Dataset, model: str, cfg: TrainSettings) -> Run:
    order = "epoch_shuffle (in memory)" if cfg.sklearn_shuffle else "no_shuffle"
    method = "sklearn" if cfg.sklearn_shuffle else "sklearn (no_shuffle)"
    try:
        est = _estimator(model, cfg)
    except ImportError as exc:
        return Run.skipped(ds.name, model, method, "sklearn", order,
                           f"scikit-learn is not installed ({exc})")
    if est is None:
        return Run.skipped(ds.name, model, method, "sklearn", order,
                           f"no scikit-learn estimator for model {model!r}")
    r = Run(ds.name, model, method, "sklearn", order,
            setup="export with COPY (binary) into numpy")
    try:
        t0 = time.perf_counter()
        x, y = export(conn, ds)
        r.setup_seconds = time.perf_counter() - t0
        if ds.test_table:
            xt, yt = export(conn, ds, ds.test_table)
        else:
            xt, yt = x, y
    except psycopg.Error as exc:
        r.status, r.reason = FAILED, str(exc).strip()
        return r
    if model != "linear":
        y = np.where(y > 0, 1.0, -1.0)
        yt = np.where(yt > 0, 1.0, -1.0)
    r.extra["rows_exported"] = int(len(y))

    for e in range(cfg.epochs):
        est.set_params(eta0=cfg.rate(e))
        out = io.StringIO()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with contextlib.redirect_stdout(out):
                t0 = time.perf_counter()
                if model == "linear":
                    est.partial_fit(x, y)
                else:
                    est.partial_fit(x, y, classes=np.array([-1.0, 1.0]))
                seconds = time.perf_counter() - t0
        m = _AVG_LOSS.findall(out.getvalue())
        loss = float(m[-1]) if m else None
        if not np.all(np.isfinite(est.coef_)):
            r.status, r.reason = FAILED, f"scikit-learn diverged in epoch {e + 1}"
            return r
        r.epochs.append(Epoch(epoch=e + 1, seconds=seconds, loss=loss,
                              test_score=float(est.score(xt, yt))))
    r.extra["weights"] = [*np.ravel(est.coef_).tolist(), float(np.ravel(est.intercept_)[0])]
    return r
