"""The SQL fuzz test of corgipile's own surface, with a fixed seed: random
argument types and values for every function, random relations and damaged
model rows (tests/python/security/sqlfuzz.py generates them).  Each family
of cases is one test, so that a family still failing is visible on its own.

A case fails when the server crashes, when a statement fails with SQLSTATE
XX000 (internal error), or when a function of the hostile role ran inside
ours (the canary).  Ordinary errors are the expected answer to hostile
input.  The failing cases are printed as SQL.

Every finding has a replay in FINDINGS.  One known and not fixed yet has
its reason there: the family tests let it pass, and its replay is marked
xfail(strict=True), so it starts to fail (XPASS) once the bug is fixed;
then its reason goes, and its replay must stay free of findings.

Longer runs: scripts/fuzz_sql.py --seed N --cases M.
"""

from __future__ import annotations

import re

import psycopg
import pytest

from sqlfuzz import Case, Finding, Fuzzer, summary

SEED = 20261123

# cases per family: about 900 in all, about a minute
CASES = {
    "train": 150,
    "predict": 200,
    "model_rows": 120,
    "evaluate": 80,
    "shuffle": 100,
    "relations": 40,
    "model_admin": 60,
    "torch_io": 150,
}

# Findings of the fuzzer and sqlsmith: (id, kind, message pattern,
# reproduction, what was wrong, and for one not fixed yet why: None once
# fixed).  A fixed one's replay must stay free of findings; an open one's
# replay is xfail(strict=True) and the family tests let it pass.
FINDINGS: list[tuple[str, str, str, str, str, str | None]] = [
    ("evaluate_missing_relation", "XX000", r"could not open relation with OID",
     "SELECT * FROM corgipile.evaluate('m_svm', 0::oid::regclass)",
     "evaluate() opens a regclass that names no relation without checking it: XX000", None),
    ("shuffle_table_missing_relation", "XX000", r"could not open relation with OID",
     "SELECT corgipile.shuffle_table(1::oid::regclass, 'fz_copy', 1)",
     "shuffle_table() opens a regclass that names no relation without checking it: XX000", None),
    ("shuffled_scan_missing_relation", "XX000", r"could not open relation with OID",
     "SELECT pg_catalog.count(*) FROM corgipile.shuffled_scan(0::oid::regclass)",
     "shuffled_scan() opens a regclass that names no relation without checking it: XX000", None),
    ("train_missing_relation", "XX000", r"could not open relation with OID",
     "SELECT * FROM corgipile.train(1::oid::regclass, 'svm')",
     "train() opens a regclass that names no relation without checking it: XX000", None),
    ("train_whole_row", "XX000", r"variable not found in subplan target list",
     "SELECT r FROM corgipile.train('r_dense', 'svm', max_epoch_num => 1) AS r",
     "a whole-row reference to train()'s row (SELECT r FROM train(...) r, or train() as the "
     "source of UPDATE/DELETE/MERGE) is missing from the CustomScan's target list: XX000", None),
    ("shuffled_scan_whole_row", "XX000", r"variable not found in subplan target list",
     "SELECT s FROM corgipile.shuffled_scan('r_dense') AS s LIMIT 1",
     "a whole-row reference to shuffled_scan()'s row is missing from the CustomScan's target list: XX000", None),
    ("train_whole_row_in_where", "XX000", r"variable not found in subplan target list",
     "SELECT pg_catalog.count(*) FROM corgipile.train('r_sparse', 'logistic', features => 'vals', "
     "feature_indices => 'idx', max_epoch_num => 1) AS r WHERE r IS NOT NULL",
     "a whole-row reference to train()'s row in a condition evaluated at the scan (WHERE r IS "
     "NOT NULL) was not seen by the planner hook, which looked only at the scan's output: XX000 "
     "(SQL fuzzer, seed 13)", None),
    ("shuffled_scan_whole_row_in_where", "XX000", r"variable not found in subplan target list",
     "SELECT pg_catalog.count(*) FROM corgipile.shuffled_scan('r_dense') AS s "
     "WHERE s IS NOT NULL AND s::text <> ''",
     "the same for shuffled_scan()'s row in its WHERE clause: XX000", None),
    ("train_huge_max_epoch_num", "XX000", r"invalid memory alloc request size",
     "SELECT pg_catalog.count(*) FROM corgipile.train('r_dense', 'svm', max_epoch_num => 2147483647)",
     "train() allocates its per-epoch history for max_epoch_num epochs up front: "
     "invalid memory alloc request size (XX000) instead of an ordinary error", None),
]


def known(finding: Finding) -> bool:
    return any(finding.kind == kind and re.search(pattern, finding.detail)
               for _, kind, pattern, _, _, open_reason in FINDINGS if open_reason)


def make_fuzzer(conn, dsn, roles, seed: int) -> Fuzzer:
    role = roles.create("fuzz")
    fuzzer = Fuzzer(dsn, role, lambda: roles.connect(role), seed=seed)
    fuzzer.setup()
    return fuzzer


def close(fuzzer: Fuzzer, conn, dsn, roles) -> None:
    # a crash broke the fixtures' session: give their teardown a live one
    try:
        conn.execute("SELECT 1")
    except psycopg.OperationalError:
        roles.admin = psycopg.connect(dsn, autocommit=True)
    for session in (fuzzer.admin, fuzzer.victim):
        session.close()


@pytest.mark.parametrize("family", list(CASES))
def test_fuzz(family, conn, dsn, roles, canary):
    # each family has its own seed, so that one family's cases do not
    # change when another family's generator changes
    fuzzer = make_fuzzer(conn, dsn, roles, SEED + list(CASES).index(family))
    try:
        fuzzer.run(family, CASES[family])
    finally:
        close(fuzzer, conn, dsn, roles)
    assert fuzzer.cases_run == CASES[family]
    # the cases reached the functions: most are ordinary errors, but some succeed
    assert fuzzer.outcomes.get("ok", 0) > 0, summary(fuzzer)
    new = [f for f in fuzzer.findings if not known(f)]
    assert not new, summary(fuzzer)


def replay(case: str, conn, dsn, roles) -> None:
    """Run one reproduction as the fuzzer's role; fail on any finding."""
    fuzzer = make_fuzzer(conn, dsn, roles, SEED)
    try:
        found = fuzzer.run_case(Case("replay", 0, [case]))
    finally:
        close(fuzzer, conn, dsn, roles)
    assert not found, "\n".join(str(f) for f in found)


@pytest.mark.parametrize("case", [
    pytest.param(sql, id=name, marks=[pytest.mark.xfail(strict=True, reason=open_reason)]
                 if open_reason else [])
    for name, _, _, sql, _, open_reason in FINDINGS])
def test_finding_replay(case, conn, dsn, roles, canary):
    replay(case, conn, dsn, roles)
