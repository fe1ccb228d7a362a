"""train(workers => N) against a real server: equal weights for a seed and N,
accuracy against one process, EXPLAIN ANALYZE, cancel and a failing worker
in the middle of a parallel epoch (no model, no leaked shared memory), and
background workers exhausted (docs/parallel.md)."""

from __future__ import annotations

import base64
import re
import threading
import time

import psycopg
import pytest
from psycopg import errors

from datagen import accuracy, linear_task, load_table, weights
from server_probe import dsm_mappings, workers_of

ROWS = 60_000


@pytest.fixture
def data(conn):
    """A training table stored clustered by label, and a held-out table."""
    x, y = linear_task(ROWS + 10_000, 10, seed=21)
    load_table(conn, "ptrain", x[:ROWS], y[:ROWS], order="label")
    load_table(conn, "pheld", x[ROWS:], y[ROWS:])
    conn.execute("SET corgipile.progress = off")
    return conn


def train(conn, name, **params):
    # a 10% buffer (0.4.0's default takes this table whole: one buffer, one
    # process)
    params.setdefault("buffer_size", "10%")
    args = "".join(f", {k} => %({k})s" for k in params)
    return conn.execute(f"SELECT * FROM corgipile.train('ptrain', 'logistic', model_name => %(n)s{args})",
                        {"n": name, **params}).fetchall()


def wait_for(predicate, timeout: float = 30.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def free_worker_slots(conn) -> int:
    """Background worker slots a new parallel query could still get: the
    lesser of max_parallel_workers less the parallel workers running and
    max_worker_processes less every background worker running (the
    logical replication launcher is one)."""
    return conn.execute(
        "SELECT least(current_setting('max_parallel_workers')::int - count(*) FILTER "
        "(WHERE backend_type = 'parallel worker'), current_setting('max_worker_processes')::int "
        "- count(*) FILTER (WHERE backend_type IN ('parallel worker', 'background worker', "
        "'logical replication launcher', 'logical replication worker'))) FROM pg_stat_activity"
    ).fetchone()[0]


def test_same_seed_and_n_give_the_same_weights(data):
    train(data, "p1", workers=3, seed=5, max_epoch_num=3)
    train(data, "p2", workers=3, seed=5, max_epoch_num=3)
    assert weights(data, "p1") == weights(data, "p2")
    # another N is another training
    train(data, "p3", workers=2, seed=5, max_epoch_num=3)
    assert weights(data, "p3") != weights(data, "p1")


@pytest.mark.parametrize("workers", [2, 3])
def test_block_cache_on_or_off_gives_the_same_weights(data, workers):
    """Cache affinity keeps the block cache on in parallel trainings: cached
    or read from the table, a process's rows are the same, so the weights
    are too, whether or not the workers could be launched."""
    train(data, "cached", workers=workers, seed=6, max_epoch_num=3)
    data.execute("SET corgipile.block_cache_size = 0")
    train(data, "uncached", workers=workers, seed=6, max_epoch_num=3)
    data.execute("SET max_parallel_workers = 0")
    train(data, "uncached_alone", workers=workers, seed=6, max_epoch_num=3)
    data.execute("RESET corgipile.block_cache_size")
    train(data, "cached_alone", workers=workers, seed=6, max_epoch_num=3)
    data.execute("RESET max_parallel_workers")
    w = weights(data, "cached")
    assert weights(data, "uncached") == w
    assert weights(data, "uncached_alone") == w
    assert weights(data, "cached_alone") == w


@pytest.mark.parametrize("shuffle", ["block_only", "no_shuffle", "grab"])
def test_every_parallel_strategy_keeps_its_weights_with_or_without_cache(data, shuffle):
    """Cache affinity for each strategy that trains in parallel: the cached
    run with its workers and the uncached run with none launched give the
    same weights."""
    train(data, "s_cached", workers=2, seed=8, max_epoch_num=3, shuffle=shuffle)
    data.execute("SET corgipile.block_cache_size = 0")
    data.execute("SET max_parallel_workers = 0")
    train(data, "s_alone", workers=2, seed=8, max_epoch_num=3, shuffle=shuffle)
    data.execute("RESET max_parallel_workers")
    data.execute("RESET corgipile.block_cache_size")
    assert weights(data, "s_cached") == weights(data, "s_alone")


def per_process(plan: str) -> list[tuple[str, int, int, int]]:
    return [(who, int(b), int(t), int(c)) for who, b, t, c in re.findall(
        r"(Leader|Worker \d+): buffers=(\d+) tuples=(\d+) blocks_from_cache=(\d+)", plan)]


@pytest.mark.parametrize("sync", ["average", "hogwild"])
def test_every_later_epoch_reads_each_process_own_cache(data, sync):
    """Cache affinity: each process trains the same slots, so the same blocks,
    every epoch.  Every block of every epoch after the first then comes from
    the block cache of the process that read it in the first (claims that
    hand a group to whichever process is free would miss about half)."""
    data.execute(f"SET corgipile.parallel_sync = {sync}")
    plan = "\n".join(r[0] for r in data.execute(
        "EXPLAIN (ANALYZE, VERBOSE, COSTS OFF, TIMING OFF, SUMMARY OFF) SELECT * FROM "
        "corgipile.train('ptrain', 'logistic', model_name => 'affine', workers => 3, "
        "max_epoch_num => 3, buffer_size => '5%')"))
    data.execute("RESET corgipile.parallel_sync")
    blocks = int(re.search(r"^\s*Blocks: (\d+)", plan, re.M).group(1))
    launched = int(re.search(r"Workers Launched: (\d+)", plan).group(1))
    procs = per_process(plan)
    assert [p[0] for p in procs] == ["Leader", "Worker 0", "Worker 1"]
    assert sum(p[3] for p in procs) == 2 * blocks, plan
    # each running process trained and cached its own share
    for who, buffers, _tuples, cached in procs[:1 + launched]:
        assert buffers > 0 and cached > 0, (who, plan)


def test_hogwild_trains_too(data):
    data.execute("SET corgipile.parallel_sync = hogwild")
    rows = train(data, "hog", workers=2, seed=5, max_epoch_num=5)
    data.execute("RESET corgipile.parallel_sync")
    assert [r[2] for r in rows] == [ROWS] * 5
    assert accuracy(data, "hog", "pheld") > 0.9


def test_two_processes_are_as_accurate_as_one(data):
    """On a table clustered by label, held-out accuracy at N = 2 stays within
    a point of one process (docs/parallel.md measures the gap on more seeds)."""
    train(data, "one", workers=1, seed=3, max_epoch_num=10)
    train(data, "two", workers=2, seed=3, max_epoch_num=10)
    one = accuracy(data, "one", "pheld")
    two = accuracy(data, "two", "pheld")
    assert one > 0.9
    assert abs(one - two) < 0.01, (one, two)


def test_explain_analyze_shows_launched_and_per_process_figures(data):
    plan = "\n".join(r[0] for r in data.execute(
        "EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) SELECT * FROM "
        "corgipile.train('ptrain', 'svm', model_name => 'explained', workers => 2, max_epoch_num => 2, "
        "buffer_size => '10%')"))
    assert "Workers Planned: 1" in plan
    launched = int(re.search(r"Workers Launched: (\d+)", plan).group(1))
    assert launched in (0, 1)
    per_process = re.findall(r"(Leader|Worker 0): buffers=(\d+) tuples=(\d+)", plan)
    assert [p[0] for p in per_process] == ["Leader", "Worker 0"]
    # every row of both epochs was trained by exactly one process
    assert sum(int(p[2]) for p in per_process) == 2 * ROWS


def run_in_thread(session, query: str, params=()) -> tuple[threading.Thread, dict]:
    outcome: dict = {}

    def run():
        try:
            session.execute(query, params)
            outcome["error"] = None
        except psycopg.Error as exc:
            outcome["error"] = exc
        outcome["done"] = time.monotonic()

    thread = threading.Thread(target=run)
    thread.start()
    return thread, outcome


@pytest.mark.parametrize("how", ["cancel_leader", "terminate_worker"])
def test_stopping_a_parallel_epoch_leaves_nothing(data, dsn, how):
    session = psycopg.connect(dsn, autocommit=True)
    session.execute("SET corgipile.progress = off")
    pid = session.info.backend_pid
    started = data.execute("SELECT pg_postmaster_start_time()").fetchone()[0]
    # the first parallel context of a session creates the session's own
    # segment (typmod registry), kept until the session ends: count after it
    session.execute("SELECT count(*) FROM corgipile.train('ptrain', 'svm', model_name => 'warm', "
                    "workers => 2, max_epoch_num => 1, buffer_size => '10%')")
    mapped = dsm_mappings(pid)

    thread, outcome = run_in_thread(
        session, "SELECT * FROM corgipile.train('ptrain', 'svm', model_name => 'stopped', "
        "workers => 3, max_epoch_num => 1000000, buffer_size => '10%%')")
    # in the middle of a parallel epoch: its workers are running
    wait_for(lambda: len(workers_of(data, pid)) > 0 or not thread.is_alive(),
             what="the parallel workers")
    assert thread.is_alive(), f"the training ended before its workers were seen: {outcome}"
    sent = time.monotonic()
    if how == "cancel_leader":
        session.cancel_safe()
    else:
        # a worker may be between two epochs (done, about to exit), where
        # terminating it stops nothing: terminate the current ones until the
        # leader reports it
        while thread.is_alive() and time.monotonic() - sent < 30:
            for victim in workers_of(data, pid):
                data.execute("SELECT pg_terminate_backend(%s)", (victim,))
            thread.join(timeout=0.3)
    thread.join(timeout=60)
    assert not thread.is_alive()
    error = outcome["error"]
    if how == "cancel_leader":
        assert isinstance(error, errors.QueryCanceled)
    else:
        # the worker's FATAL reaches the leader as an ERROR; the leader lives on
        assert isinstance(error, errors.AdminShutdown), repr(error)
    assert outcome["done"] - sent < 30.0

    # the leader's session is healthy, its workers are gone, its shared
    # memory is released, nothing was stored, the server did not restart
    assert session.execute("SELECT pg_backend_pid()").fetchone()[0] == pid
    wait_for(lambda: not workers_of(data, pid), what="the workers to exit")
    assert dsm_mappings(pid) == mapped
    session.close()
    assert data.execute("SELECT count(*) FROM corgipile.models WHERE model_name = 'stopped'"
                        ).fetchone()[0] == 0
    assert data.execute("SELECT count(*) FROM corgipile.models WHERE model_name = 'warm'"
                        ).fetchone()[0] == 1
    assert data.execute("SELECT pg_postmaster_start_time()").fetchone()[0] == started


def test_no_worker_available_still_trains_with_a_notice(data):
    notices: list[str] = []
    data.add_notice_handler(lambda d: notices.append(d.message_primary))
    train(data, "full", workers=2, seed=9, max_epoch_num=2)
    data.execute("SET max_parallel_workers = 0")
    train(data, "starved", workers=2, seed=9, max_epoch_num=2)
    data.execute("RESET max_parallel_workers")
    assert any("0 of 1 parallel workers launched" in n for n in notices), notices
    assert weights(data, "starved") == weights(data, "full")


def test_background_workers_held_by_another_query(data, dsn):
    """Every background worker busy in another session's parallel query:
    the training gets none, says so, and gives the same weights."""
    train(data, "reference", workers=2, seed=4, max_epoch_num=1)
    n = min(int(data.execute("SHOW max_worker_processes").fetchone()[0]),
            int(data.execute("SHOW max_parallel_workers").fetchone()[0]))
    hog = psycopg.connect(dsn, autocommit=True)
    hog.execute("CREATE FUNCTION slow_true() RETURNS boolean LANGUAGE sql PARALLEL SAFE "
                "AS 'SELECT pg_sleep(0.02) IS NOT NULL'")
    hog.execute("CREATE TABLE hold AS SELECT g FROM generate_series(1, 20000) g")
    hog.execute(f"ALTER TABLE hold SET (parallel_workers = {n})")
    for setting in ("parallel_setup_cost = 0", "parallel_tuple_cost = 0",
                    f"max_parallel_workers_per_gather = {n}", "min_parallel_table_scan_size = 0"):
        hog.execute(f"SET {setting}")
    hog_pid = hog.info.backend_pid
    thread, _ = run_in_thread(hog, "SELECT count(*) FROM hold WHERE slow_true()")
    try:
        # it asked for more workers than are free (max_worker_processes also
        # counts the logical replication launcher): it holds all it got
        wait_for(lambda: len(workers_of(data, hog_pid)) > 0 and free_worker_slots(data) == 0,
                 what="the other query's workers to take every free slot")
        notices: list[str] = []
        data.add_notice_handler(lambda d: notices.append(d.message_primary))
        train(data, "squeezed", workers=2, seed=4, max_epoch_num=1)
        assert any("0 of 1 parallel workers launched" in m for m in notices), notices
        assert weights(data, "squeezed") == weights(data, "reference")
    finally:
        hog.cancel_safe()
        thread.join(timeout=60)
        hog.close()


def stored_grab_order(conn, name: str) -> tuple[list[int], list[int]]:
    """The model row's GraB state (core/grab.c's format): the visit order and
    the signs, one bit each."""
    raw = base64.b64decode(conn.execute(
        "SELECT params->>'grab_state' FROM corgipile.models WHERE model_name = %s",
        (name,)).fetchone()[0])
    assert raw[:4] == b"CPGB"
    n = int.from_bytes(raw[8:12], "little")
    body = raw[12:12 + 4 * n]
    visit = [int.from_bytes(body[4 * i:4 * i + 4], "little") for i in range(n)]
    bits = raw[12 + 4 * n:]
    signs = [1 if bits[i // 8] >> (i % 8) & 1 else -1 for i in range(n)]
    return visit, signs


def test_warm_start_from_a_parallel_grab_model_continues_its_order(data):
    """A grab training at N > 1 stores the order its next epoch would have
    visited (PairBalance's, dealt into the slots' positions); a warm start
    begins with it: deterministic, and not the random order it would start
    from without the stored state."""
    for name in ("pg_a", "pg_b"):
        train(data, name, workers=2, shuffle="grab", seed=2, max_epoch_num=2)
    assert weights(data, "pg_a") == weights(data, "pg_b")
    visit, signs = stored_grab_order(data, "pg_a")
    assert sorted(visit) == list(range(len(visit))) and len(visit) > 2
    assert set(signs) == {1}  # the order itself: a warm start's reorder keeps it
    # the same model without its stored order
    data.execute("UPDATE corgipile.model_store SET params = params - 'grab_state' "
                 "WHERE model_name = 'pg_b'")
    for name, start in (("pg_w1", "pg_a"), ("pg_w2", "pg_a"), ("pg_w3", "pg_b")):
        train(data, name, workers=2, shuffle="grab", seed=3, max_epoch_num=1, warm_start=start)
    assert weights(data, "pg_w1") == weights(data, "pg_w2")
    assert weights(data, "pg_w1") != weights(data, "pg_w3")
    # and the warm-started model stores its own next order
    assert sorted(stored_grab_order(data, "pg_w1")[0]) == list(range(len(visit)))


@pytest.mark.parametrize("how, shown", [("pair_balance", "GraB PairBalance Walks"),
                                        ("independent", "GraB Independent Walks")])
def test_explain_analyze_counts_the_parallel_grab_walks(data, how, shown):
    """At N > 1 the leader orders the blocks after every epoch (PairBalance,
    or one walk per slot), not the strategy: EXPLAIN ANALYZE says how many."""
    data.execute(f"SET corgipile.parallel_grab = {how}")
    plan = "\n".join(r[0] for r in data.execute(
        "EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) SELECT * FROM "
        "corgipile.train('ptrain', 'logistic', model_name => 'walked', shuffle => 'grab', "
        "workers => 2, max_epoch_num => 3, buffer_size => '10%')"))
    data.execute("RESET corgipile.parallel_grab")
    assert f"{shown}: 3" in plan, plan
