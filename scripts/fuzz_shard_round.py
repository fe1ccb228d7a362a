#!/usr/bin/env python3
"""Fuzz a distributed training's worker entry points as a hostile role
would call them: corgipile.shard_open() with train()'s arguments, some
replaced by bad values, then corgipile.shard_round() with damaged inputs
(wrong counts, non-finite numbers, truncations, and the shard's own first
pass statistics sent back with flipped bytes, cut or padded as the merged
statistics).  Every call must end in a result or a clean error: never a
lost connection, an XX000 or a server restart.  One node is enough: the
entry points work on any table.

    .venv/bin/python scripts/fuzz_shard_round.py --dsn "dbname=fz" --cases 3000 --seed 11
"""

from __future__ import annotations

import argparse
import random
import re
import struct

import psycopg

ROLE = "corgipile_fuzz_shard"
FORMAT = 2  # extension/nodes/shard_round.h, CP_ROUND_FORMAT
BAD_ARGS = ["", "-1", "0", "abc", "1e308", "'; x", None, "2147483648"]


def _train_defaults(conn: psycopg.Connection) -> list[str | None]:
    nargs = conn.execute(
        "SELECT pronargs FROM pg_proc WHERE oid = 'corgipile.train'::regproc").fetchone()[0]
    vals: list[str | None] = []
    for i in range(1, nargs + 1):
        d = conn.execute("SELECT pg_get_function_arg_default('corgipile.train'::regproc, %s)",
                         (i,)).fetchone()[0]
        m = re.match(r"'(.*)'::", d or "")
        vals.append(None if d is None or d.startswith("NULL") else m.group(1) if m else d)
    return vals


def _round_input(rnd: random.Random, stats: bytes) -> bytes:
    good = rnd.random() < 0.8
    nw = rnd.choice([2, 3]) if good else rnd.choice([0, 1, 4, 5, 7, 100])
    body = bytearray(struct.pack(
        "!BiidI", FORMAT, 0 if good else rnd.choice([1, 5, -1]), 1 if good else rnd.choice([2, 0, 1001]),
        1e-4 if good else rnd.choice([0.0, -1.0, float("nan")]), nw))
    for _ in range(nw):
        body += struct.pack("!d", rnd.choice([0.0, 1.0, -1e300, float("inf"), float("nan")]))
    # the table's rows and the averaged weights to score on the sample
    body += struct.pack("!q", rnd.choice([3000, 3000, 1, 0, -1, 2**63 - 1]))
    n_score = rnd.choice([0, nw, nw, 1, 50])
    body += struct.pack("!i", n_score)
    for _ in range(n_score):
        body += struct.pack("!d", rnd.choice([0.5, -2.0, float("nan"), 1e308]))
    merged = bytearray(stats)
    for _ in range(rnd.randrange(0, 6)):
        if merged and rnd.random() < 0.7:
            merged[rnd.randrange(len(merged))] = rnd.randrange(256)
        elif merged:
            merged = merged[: rnd.randrange(len(merged))]
    if rnd.random() < 0.2:
        merged += bytes(rnd.randrange(256) for _ in range(rnd.randrange(1, 40)))
    body += struct.pack("!i", len(merged)) + merged
    if rnd.random() < 0.1:
        body = body[: rnd.randrange(len(body))]
    return bytes(body)


def run(dsn: str, cases: int, seed: int) -> dict[str, int | bool]:
    """Counts of the outcomes; 'lost' and 'xx000' must be 0, 'restarted' False."""
    su = psycopg.connect(dsn, autocommit=True)
    su.execute("DROP TABLE IF EXISTS fz_shard")
    su.execute("CREATE TABLE fz_shard AS SELECT (g % 2) AS label, "
               "ARRAY[g % 7, (g % 13) / 13.0]::float8[] AS features FROM generate_series(1, 3000) g")
    su.execute(f"DROP ROLE IF EXISTS {ROLE}")
    su.execute(f"CREATE ROLE {ROLE} LOGIN")
    su.execute(f"GRANT SELECT ON fz_shard TO {ROLE}")
    schema = su.execute("SELECT current_schema()").fetchone()[0]
    vals = _train_defaults(su)
    vals[0], vals[1] = f"{schema}.fz_shard", "logistic"
    state = "SELECT pg_postmaster_start_time(), (SELECT stats_reset FROM pg_stat_archiver)"
    before = su.execute(state).fetchone()
    rnd = random.Random(seed)
    out: dict[str, int | bool] = {"cases": cases, "ok": 0, "errors": 0, "lost": 0, "xx000": 0}
    try:
        for _ in range(cases):
            v = list(vals)
            if rnd.random() < 0.1:
                v[2 + rnd.randrange(len(v) - 2)] = rnd.choice(BAD_ARGS)
            with psycopg.connect(dsn, user=ROLE, autocommit=True) as c:
                try:
                    c.execute("BEGIN")
                    stats = c.execute("SELECT corgipile.shard_open(%s::text[])", (v,)).fetchone()[0]
                    body = _round_input(rnd, stats)
                    for _ in range(rnd.choice([1, 1, 2, 3])):
                        c.execute("SELECT length(corgipile.shard_round(%s))", (body,))
                    out["ok"] += 1
                except psycopg.Error as e:
                    if e.sqlstate is None or c.broken:
                        out["lost"] += 1
                    elif e.sqlstate == "XX000":
                        out["xx000"] += 1
                    else:
                        out["errors"] += 1
        out["restarted"] = su.execute(state).fetchone() != before
    finally:
        su.execute("DROP TABLE fz_shard")
        su.execute(f"DROP ROLE {ROLE}")
        su.close()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dsn", default="")
    ap.add_argument("--cases", type=int, default=3000)
    ap.add_argument("--seed", type=int, default=11)
    args = ap.parse_args()
    print(run(args.dsn, args.cases, args.seed))


if __name__ == "__main__":
    main()
