"""Analysing a query text for ``corgipile proxy`` without stalling the event
loop that relays every other client's bytes.

rewrite.analyze (PostgreSQL's scanner through pglast, then the translator
per statement) costs time with the length and shape of the text: about
0.25 ms per TRAIN BY statement, and pglast's scanner holds the GIL, so a
thread would not help. Three bounds:

- may_rewrite, a byte search over the raw message, lets through to
  analysis only a text that has ``train`` or ``predict`` as a word (not
  ``predictor``, not ``trained``); anything else is relayed unread;
- a text up to INLINE_LIMIT bytes is analysed on the loop (a few
  milliseconds at most);
- a longer one (up to the session's INSPECT_LIMIT) goes to a pool of
  WORKERS processes, with Settings.analysis_timeout seconds: past that the
  pool's processes are killed (an analysis cannot be interrupted inside
  pglast's C code) and the client gets an error. Other analyses that were
  running in the killed pool are retried once on a new one.
"""

from __future__ import annotations

import asyncio
import logging
import multiprocessing
import re
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool

from .rewrite import Failure, Plan, analyze

__all__ = ["may_rewrite", "INLINE_LIMIT", "WORKERS", "analyze_text", "shutdown"]

logger = logging.getLogger("corgipile.proxy")

# train or predict as a word of its own, in a lower-cased text: SQL
# identifier characters are letters, digits, _, $ and every non-ASCII byte.
# Quoted ("train"), in a comment or a string it still matches: the check
# only has to be cheap and never miss (the translator decides).
_WORD = re.compile(rb"(?<![a-z0-9_$\x80-\xff])(?:train|predict)(?![a-z0-9_$\x80-\xff])")


def may_rewrite(data: bytes | bytearray, start: int, end: int) -> bool:
    """Whether data[start:end], the text of a Query or Parse message, has
    train or predict as a word in any case. Every statement a client sends
    passes through here: a lower-cased copy and two substring searches
    (C loops over the bytes) settle almost all of them, and only a text
    that has one of the two as a substring meets the regular expression
    (a case-insensitive one with look-arounds costs several times that on
    every text, and far more on long ones)."""
    if len(data) - (end - start) <= 64:
        # the message is (nearly) all of the buffer: lower-case the buffer
        # as it is rather than copy the text out first
        low, a, b = data.lower(), start, end
    else:
        low, a, b = data[start:end].lower(), 0, end - start
    if low.find(b"train", a, b) < 0 and low.find(b"predict", a, b) < 0:
        return False
    return _WORD.search(low[a:b]) is not None


INLINE_LIMIT = 4096
WORKERS = 2
# SQLSTATE program_limit_exceeded
LIMIT_EXCEEDED = "54000"

_pool: ProcessPoolExecutor | None = None


def _get_pool() -> ProcessPoolExecutor:
    global _pool
    if _pool is None:
        # spawn: a fork of a process with an event loop and its threads can
        # inherit a lock held mid-operation
        _pool = ProcessPoolExecutor(max_workers=WORKERS,
                                    mp_context=multiprocessing.get_context("spawn"))
    return _pool


def _kill(pool: ProcessPoolExecutor) -> None:
    global _pool
    if _pool is pool:
        _pool = None
    # ProcessPoolExecutor has no way to stop a running call but to end its
    # process; _processes is where it keeps them (stable since Python 3.2)
    for proc in list(getattr(pool, "_processes", {}).values()):
        proc.kill()
    pool.shutdown(wait=False, cancel_futures=True)


def shutdown() -> None:
    """End the pool's processes (the proxy stops), and wait until the pool's
    management thread has seen them go.  An interpreter exit while that
    thread is still closing its wake-up pipe races with concurrent.futures'
    own exit hook, which then writes to the closed pipe (a traceback at
    every other stop)."""
    pool = _pool
    if pool is None:
        return
    manager = getattr(pool, "_executor_manager_thread", None)
    _kill(pool)
    if manager is not None:
        manager.join(timeout=5)


async def analyze_text(text: str, single: bool, timeout: float) -> Plan | Failure | None:
    """rewrite.analyze(text, single), within the bounds above."""
    if len(text) <= INLINE_LIMIT:
        return analyze(text, single)
    loop = asyncio.get_running_loop()
    for attempt in (1, 2):
        pool = _get_pool()
        try:
            return await asyncio.wait_for(
                loop.run_in_executor(pool, analyze, text, single), timeout)
        except asyncio.TimeoutError:
            logger.warning("analysing a %d-character query text took over %g s: refused",
                           len(text), timeout)
            _kill(pool)
            return Failure(LIMIT_EXCEEDED,
                           f"corgipile proxy: analysing this query text took longer than "
                           f"{timeout:g} s", None,
                           "send TRAIN BY and PREDICT BY statements in query texts of their own")
        except BrokenProcessPool:
            if attempt == 2:
                raise
            if _pool is pool:
                _kill(pool)
    raise AssertionError("unreachable")  # pragma: no cover
