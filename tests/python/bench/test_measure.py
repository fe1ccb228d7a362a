"""What the bench measures besides seconds: the server backend's CPU, and
one epoch's cost from runs whose entries span several epochs (MADlib's
checkpoints)."""

from __future__ import annotations

import pytest

from corgipile.bench._db import BackendCpu, Stopwatch
from corgipile.bench.results import Epoch, Run


def test_backend_cpu_counts_the_backends_work_not_ours(conn):
    cpu = BackendCpu(conn)
    assert cpu.available and cpu.pid == conn.info.backend_pid
    with Stopwatch(cpu) as busy:
        conn.execute("SELECT pg_catalog.count(*) FROM pg_catalog.generate_series(1, 3000000)")
    with Stopwatch(cpu) as idle:
        sum(i * i for i in range(1_000_000))   # the client's work, not the server's
    assert busy.cpu_seconds is not None and busy.cpu_seconds > 0.05
    # one process: never more CPU than wall (the reads bracket the query)
    assert busy.cpu_seconds <= busy.seconds
    assert idle.cpu_seconds is not None and idle.cpu_seconds < 0.01 < idle.seconds
    # all threads (from /proc/<pid>/stat, in clock ticks) counts the same work
    with Stopwatch(cpu, all_threads=True) as ticks:
        conn.execute("SELECT pg_catalog.count(*) FROM pg_catalog.generate_series(1, 3000000)")
    assert ticks.cpu_seconds == pytest.approx(busy.cpu_seconds, abs=0.1 + 0.5 * busy.cpu_seconds)


def _run(entries: list[tuple[int, float]]) -> Run:
    r = Run("d", "svm", "m", "madlib", "no_shuffle")
    previous = 0.0
    for k, t in entries:
        r.epochs.append(Epoch(epoch=k, seconds=t - previous))
        previous = t
    return r


def test_one_epoch_of_a_checkpoint_run_is_the_slope():
    # each call from scratch: 0.5 s of its own, then 0.2 s per iteration
    r = _run([(k, 0.5 + 0.2 * k) for k in (1, 2, 3, 5, 10, 20)])
    assert r.per_epoch([e.seconds for e in r.epochs]) == pytest.approx(0.2)
    # one entry per epoch: the median epoch
    r = _run([(1, 1.0), (2, 1.5), (3, 3.0)])
    assert r.per_epoch([e.seconds for e in r.epochs]) == 1.0
    # a single checkpoint: its time over its epochs
    r = _run([(4, 2.0)])
    assert r.per_epoch([e.seconds for e in r.epochs]) == 0.5
