"""The engine's own strategies: corgipile.train() with each shuffle.

Each strategy is trained twice with the same seed, which the engine makes
bit-for-bit reproducible:
  1. without a validation table, for the per-epoch seconds, loss and score
     (the engine's `seconds` would otherwise include scoring the held-out
     table after each epoch);
  2. with `validation =>` the held-out table, for the held-out score after
     each epoch.
The two runs' losses must agree; a mismatch is recorded in the run's notes.
"""

from __future__ import annotations

import os
from typing import Any

import psycopg
from psycopg import errors, sql

from ._db import BackendCpu, Stopwatch
from .config import TrainSettings
from .datasets import Dataset
from .results import FAILED, Epoch, Run

_counter = 0


def _model_name(tag: str) -> str:
    global _counter
    _counter += 1
    return f"corgipile_bench_{os.getpid()}_{_counter}_{tag}"


def _train(conn: psycopg.Connection[Any], ds: Dataset, model: str, shuffle: str,
           cfg: TrainSettings, name: str, validation: str | None) -> list[tuple[Any, ...]]:
    params: dict[str, object] = {
        "model_name": name, "label": ds.label, "features": ds.features, "shuffle": shuffle,
        "learning_rate": cfg.learning_rate, "decay": cfg.decay, "max_epoch_num": cfg.epochs,
        "l2": cfg.l2, "buffer_size": cfg.buffer_size, "seed": cfg.seed,
        "double_buffer": cfg.double_buffer,
        # raw features, as every baseline of the benchmark reads them
        "standardize": "off",
    }
    if cfg.block_size is not None:
        params["block_size"] = cfg.block_size
    if validation is not None:
        params["validation"] = validation
    args = sql.SQL(", ").join(
        sql.SQL("{} => {}").format(sql.Identifier(k), sql.Placeholder(k)) for k in params)
    q = sql.SQL("SELECT epoch, tuples, loss, score, validation_score, seconds "
                "FROM corgipile.train({rel}::pg_catalog.regclass, {model}, {args})").format(
        rel=sql.Placeholder("relation"), model=sql.Placeholder("model"), args=args)
    try:
        return conn.execute(q, {"relation": ds.table, "model": model, **params}).fetchall()
    finally:
        conn.execute("SELECT corgipile.drop_model(m.model_name) FROM corgipile.models AS m"
                     " WHERE m.model_name OPERATOR(pg_catalog.=) %s", (name,))


def run_strategy(conn: psycopg.Connection[Any], ds: Dataset, model: str, shuffle: str,
                 cfg: TrainSettings) -> Run:
    run = Run(ds.name, model, shuffle, "engine", shuffle)
    try:
        with Stopwatch(BackendCpu(conn), all_threads=True) as watch:
            timing = _train(conn, ds, model, shuffle, cfg, _model_name("t"), None)
        wall = watch.seconds
        scoring = _train(conn, ds, model, shuffle, cfg, _model_name("s"), ds.scored_table)
    except errors.InvalidParameterValue as e:
        msg = str(e).strip()
        if "unknown shuffle" in msg:
            return Run.skipped(ds.name, model, shuffle, "engine", shuffle,
                               f"the engine has no shuffle {shuffle!r} ({msg})")
        if "unknown model" in msg:
            return Run.skipped(ds.name, model, shuffle, "engine", shuffle,
                               f"the engine has no model {model!r} ({msg})")
        run.status, run.reason = FAILED, msg
        return run
    except psycopg.Error as e:
        run.status, run.reason = FAILED, str(e).strip()
        return run

    for t, s in zip(timing, scoring, strict=False):
        run.epochs.append(Epoch(epoch=t[0], seconds=t[5], loss=t[2], train_score=t[3],
                                test_score=s[4]))
    # the engine does any shuffling inside its epochs (shuffle_once: the first);
    # what the call spends outside them (planning, storing the model) is recorded apart
    run.extra["call_seconds"] = wall
    # the whole call's backend CPU, helper threads included (the engine
    # reports wall seconds per epoch only)
    run.extra["call_cpu_seconds"] = watch.cpu_seconds
    run.extra["outside_epochs_seconds"] = max(0.0, wall - sum(t[5] for t in timing))
    mismatch = [t[0] for t, s in zip(timing, scoring, strict=False) if t[2] != s[2] or t[3] != s[3]]
    if mismatch or len(timing) != len(scoring):
        run.notes.append("the timing and scoring runs (same seed) differ in loss or score at "
                         f"epochs {mismatch}: the engine was not reproducible here")
    return run

