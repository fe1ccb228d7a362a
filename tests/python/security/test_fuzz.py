"""The SQL fuzz test of corgipile's own surface, with a fixed seed: random
argument types and values for every function, random relations and damaged
model rows (tests/python/security/sqlfuzz.py generates them).  Each family
of cases is one test, so that a family still failing is visible on its own.

A case fails when the server restarts (a backend crashed), when a statement
fails with SQLSTATE XX000 (internal error), or when a function of the
hostile role ran inside ours (the canary).  Ordinary errors are the
expected answer to hostile input.  The failing cases are printed as SQL.

Longer runs: scripts/fuzz_sql.py --seed N --cases M.
"""

from __future__ import annotations

import psycopg
import pytest
from sqlfuzz import Fuzzer, summary

SEED = 20261123

# cases per family: a few hundred in all, well under a minute
CASES = {
    "train": 70,
    "predict": 110,
    "model_rows": 70,
    "evaluate": 35,
    "shuffle": 45,
    "relations": 25,
    "model_admin": 30,
}


@pytest.mark.parametrize("family", list(CASES))
def test_fuzz(family, conn, dsn, roles, canary):
    role = roles.create("fuzz")
    # each family has its own seed, so that one family's cases do not
    # change when another family's generator changes
    fuzzer = Fuzzer(dsn, role, lambda: roles.connect(role), seed=SEED + list(CASES).index(family))
    try:
        fuzzer.setup()
        fuzzer.run(family, CASES[family])
    finally:
        # a crash broke the fixtures' session: give their teardown a live one
        try:
            conn.execute("SELECT 1")
        except psycopg.OperationalError:
            roles.admin = psycopg.connect(dsn, autocommit=True)
        for session in (fuzzer.admin, fuzzer.victim):
            session.close()
    assert fuzzer.cases_run == CASES[family]
    # the cases reached the functions: most are ordinary errors, but some succeed
    assert fuzzer.outcomes.get("ok", 0) > 0, summary(fuzzer)
    assert not fuzzer.findings, summary(fuzzer)
