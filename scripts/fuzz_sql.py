#!/usr/bin/env python3
"""Longer runs of the SQL fuzzer of tests/python/security/test_fuzz.py.

    PGHOST=... PGPORT=... PGUSER=<superuser> scripts/fuzz_sql.py --seed N --cases M
        [--families train,predict,...]

Creates a fresh database (dropped afterwards unless --keep) with the
extension, an unprivileged role and the canary sequence, runs M cases
spread over the families, and prints every finding (a crash, an XX000
error, a hostile function that ran) with its SQL.  Exits 1 if there was any.
Use a throwaway cluster: a finding may crash the server.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import uuid
from pathlib import Path

import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "python" / "security"))
from sqlfuzz import FAMILIES, Fuzzer, iter_families, summary


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--cases", type=int, default=2000)
    ap.add_argument("--families", default=",".join(FAMILIES))
    ap.add_argument("--keep", action="store_true", help="keep the database and role")
    ap.add_argument("--quiet", action="store_true", help="print only findings and the summary")
    args = ap.parse_args()
    families = iter_families(args.families.split(","))

    base = psycopg.conninfo.make_conninfo("", dbname=os.environ.get("PGDATABASE", "postgres"))
    tag = uuid.uuid4().hex[:8]
    db, role = f"fuzz_{tag}", f"fuzz_{tag}"
    with psycopg.connect(base, autocommit=True) as c:
        c.execute(f'CREATE DATABASE "{db}"')
        c.execute(f'CREATE ROLE "{role}" LOGIN')
    dsn = psycopg.conninfo.make_conninfo(base, dbname=db)
    try:
        with psycopg.connect(dsn, autocommit=True) as c:
            c.execute("CREATE EXTENSION corgipile")
            c.execute(f'GRANT CREATE, USAGE ON SCHEMA public TO "{role}"')
            c.execute("CREATE SEQUENCE public.canary_seq")
            c.execute("GRANT USAGE, SELECT, UPDATE ON SEQUENCE public.canary_seq TO PUBLIC")
        sessions = []

        def connect_role():
            s = psycopg.connect(psycopg.conninfo.make_conninfo(dsn, user=role), autocommit=True)
            sessions.append(s)
            return s

        fuzzer = Fuzzer(dsn, role, connect_role, seed=args.seed,
                        log=(lambda s: print(s, flush=True)))
        fuzzer.setup()
        t0 = time.monotonic()
        per = [args.cases // len(families) + (1 if i < args.cases % len(families) else 0)
               for i in range(len(families))]
        for family, n in zip(families, per, strict=False):
            t = time.monotonic()
            before = len(fuzzer.findings)
            fuzzer.run(family, n)
            if not args.quiet:
                print(f"{family}: {n} cases, {len(fuzzer.findings) - before} findings, "
                      f"{time.monotonic() - t:.1f} s", flush=True)
        print(f"seed {args.seed}, {time.monotonic() - t0:.1f} s")
        print(summary(fuzzer).splitlines()[0])
        if not args.quiet:
            print("most frequent errors:")
            for msg, n in sorted(fuzzer.messages.items(), key=lambda kv: -kv[1])[:25]:
                print(f"  {n:6d}  {msg}")
        for s in sessions + [fuzzer.admin, fuzzer.victim]:
            s.close()
        return 1 if fuzzer.findings else 0
    finally:
        if not args.keep:
            with psycopg.connect(base, autocommit=True) as c:
                c.execute(f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)')
                c.execute(f'DROP ROLE IF EXISTS "{role}"')


if __name__ == "__main__":
    sys.exit(main())
