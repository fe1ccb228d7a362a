"""What a MADlib does with the calls the bench's runner makes, as data.

observe() runs those calls on a small table and describes the outcome:
the functions' signatures, the output tables' columns and types, how many
coef entries come back with and without fit_intercept, where the intercept
is, dep_var_mapping, the iterations done at tolerance 0, logistic IGD's
first iteration, and what is left behind. madlib_2_1_0.json holds what a
real MADlib 2.1.0 gave; test_madlib_real.py (make test-madlib) checks the
real MADlib against it, and test_madlib_runner.py builds its stub from it
and checks the stub against it, so that neither can drift unseen.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import psycopg

from corgipile.bench.config import TrainSettings
from test_bismarck import reference_sgd

RECORD = Path(__file__).with_name("madlib_2_1_0.json")


def record() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(RECORD.read_text())
    return data


def _columns(conn: psycopg.Connection, table: str) -> list[list[str]]:
    return [list(r) for r in conn.execute(
        "SELECT a.attname::text, pg_catalog.format_type(a.atttypid, a.atttypmod) "
        "FROM pg_catalog.pg_attribute a WHERE a.attrelid = %s::regclass "
        "AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum", (table,)).fetchall()]


def relations(conn: psycopg.Connection) -> set[str]:
    """Tables and views outside the temporary schemas."""
    return {r[0] for r in conn.execute(
        "SELECT n.nspname || '.' || c.relname FROM pg_class c JOIN pg_namespace n "
        "ON n.oid = c.relnamespace WHERE c.relkind IN ('r', 'v') "
        "AND n.nspname NOT LIKE 'pg\\_%' AND n.nspname <> 'information_schema' "
        "AND n.nspname <> 'madlib'").fetchall()}


# the observation table: 40 rows, 3 features, labels -1/+1 alternating
_OBS = """
CREATE TABLE public.obs AS SELECT i AS id, CASE WHEN i % 2 = 0 THEN 1 ELSE -1 END AS label,
    ARRAY[(i % 2) + i / 100.0, 1 - (i % 2) + i / 50.0, i / 10.0]::float8[] AS features
FROM generate_series(1, 40) AS i ORDER BY i
"""
_SVM_PARAMS = "init_stepsize=0.1, decay_factor=0.9, max_iter={k}, tolerance=0, lambda=0"
_POS = "(label OPERATOR(pg_catalog.>) 0)"
_WITH_ONE = "pg_catalog.array_prepend(1::pg_catalog.float8, features)"


def _svm(conn, out: str, kernel_params: str | None, dep: str = _POS, k: int = 2) -> None:
    conn.execute("SELECT madlib.svm_classification('public.obs', %s, %s, 'features', 'linear', "
                 "%s, NULL, %s, false)", (out, dep, kernel_params, _SVM_PARAMS.format(k=k)))


def _logregr(conn, out: str, indep: str, optimizer: str, k: int) -> None:
    conn.execute("SELECT madlib.logregr_train('public.obs', %s, %s, %s, NULL, %s, %s, 0)",
                 (out, _POS, indep, k, optimizer))


def _coef(conn, table: str) -> list[float]:
    return conn.execute(f"SELECT coef FROM {table}").fetchone()[0]


def observe(conn: psycopg.Connection) -> dict[str, Any]:
    """What a real MADlib does with the calls the runner makes, as data."""
    conn.execute(_OBS)
    rows = conn.execute("SELECT label, features FROM public.obs ORDER BY id").fetchall()
    d = len(rows[0][1])
    before = relations(conn)
    sig = {fn: [r[0] for r in conn.execute(
        "SELECT pg_catalog.pg_get_function_identity_arguments(p.oid) FROM pg_proc p "
        "JOIN pg_namespace n ON n.oid = p.pronamespace WHERE n.nspname = 'madlib' "
        "AND p.proname = %s ORDER BY 1", (fn,)).fetchall()]
        for fn in ("svm_classification", "logregr_train", "version")}

    svm: dict[str, Any] = {}
    _svm(conn, "public.s_default", None)
    _svm(conn, "public.s_fit", "fit_intercept=true")
    _svm(conn, "public.s_int", "fit_intercept=true", dep="label")
    svm["model_columns"] = _columns(conn, "public.s_fit")
    svm["summary_columns"] = _columns(conn, "public.s_fit_summary")
    svm["coef_entries"] = {"features": d, "kernel_params NULL": len(_coef(conn, "public.s_default")),
                           "fit_intercept=true": len(_coef(conn, "public.s_fit"))}
    # where the intercept is: the per-row update (the engine's) with b apart
    cfg = TrainSettings(epochs=2, learning_rate=0.1, decay=0.9, l2=0.0)
    ref = np.array(reference_sgd(rows, "svm", cfg)[0])     # w..., b
    got = np.array(_coef(conn, "public.s_fit"))
    svm["intercept"] = ("last" if np.allclose(got, ref, rtol=1e-9, atol=1e-12) else
                        "first" if np.allclose(got, np.roll(ref, 1), rtol=1e-9, atol=1e-12)
                        else f"neither first nor last: {got.tolist()} against {ref.tolist()}")
    svm["dep_var_mapping"] = {
        dep: [str(v).lower() for v in conn.execute(f"SELECT dep_var_mapping FROM {t}").fetchone()[0]]
        + [conn.execute(f"SELECT pg_typeof(dep_var_mapping)::text FROM {t}").fetchone()[0]]
        for dep, t in (("boolean", "public.s_fit"), ("integer", "public.s_int"))}
    svm["num_iterations_at_max_iter_2"] = conn.execute(
        "SELECT num_iterations FROM public.s_fit").fetchone()[0]

    lr: dict[str, Any] = {}
    _logregr(conn, "public.l_one", _WITH_ONE, "igd", 3)
    _logregr(conn, "public.l_plain", "features", "igd", 3)
    _logregr(conn, "public.l_first", _WITH_ONE, "igd", 1)
    _logregr(conn, "public.l_irls", _WITH_ONE, "irls", 3)
    lr["model_columns"] = _columns(conn, "public.l_one")
    lr["summary_columns"] = _columns(conn, "public.l_one_summary")
    lr["coef_entries"] = {"features": len(_coef(conn, "public.l_plain")),
                          "array_prepend(1, features)": len(_coef(conn, "public.l_one"))}
    lr["igd_coef_after_1_iteration"] = _coef(conn, "public.l_first")
    lr["num_iterations_at_max_iter_3"] = {
        o: conn.execute(f"SELECT num_iterations FROM public.l_{t}").fetchone()[0]
        for o, t in (("igd", "one"), ("irls", "irls"))}

    made = {"public." + t for t in ("s_default", "s_fit", "s_int", "l_one", "l_plain", "l_first",
                                    "l_irls")}
    made |= {t + "_summary" for t in made}
    left = sorted(relations(conn) - before - made - {"public.obs"})
    return {"version": conn.execute("SELECT madlib.version()").fetchone()[0].split(",")[0],
            "signatures": sig, "svm_classification": svm, "logregr_train": lr,
            "left_behind": left}


