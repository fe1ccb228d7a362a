"""The Python client runs no code a hostile role planted.

A function or operator in public that matches an unqualified call's
argument types better than pg_catalog's wins over it (the issue: a
``public.=(oid, regclass)`` ran 476 times as the victim of
``Client(dsn).predict``). Every query the client sends must name pg_catalog
for its functions, operators and types.

Every call path of the client runs twice as the victim, a role without
privileges beyond its own tables:

1. recorded (sqlcheck.recording): each query text is parsed with pglast and
   every function, operator, type and catalog relation it names without a
   schema is reported with the query;
2. against look-alikes: a hostile role plants, in public, one of each name
   that pass 1 found (every pg_catalog function and operator of that name
   with the same argument types, a domain for each type name, a view for
   each catalog relation), each counting its calls in a sequence (which no
   rollback undoes), and the victim's search_path puts public first, so
   that even an exact match would win over pg_catalog's. The paths run
   again; the canary must not move.

The names come from what the client sent, so a new query with a new
function is covered the day it is written.
"""

from __future__ import annotations

import csv
import importlib.util
from pathlib import Path

import numpy as np
import psycopg

import corgipile
import sqlcheck
from corgipile import cli
from corgipile.estimators import SGDClassifier, SGDRegressor
from corgipile.proxy import rewrite

HAS_TORCH = importlib.util.find_spec("torch") is not None
CLIENT = Path(__file__).resolve().parents[3] / "python_client"


def _data(n: int = 120, d: int = 3, seed: int = 5) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, d))
    y = np.where(x @ np.arange(1, d + 1) > 0, 1, -1)
    return x, y


def drive(dsn: str, tag: str, tmp: Path, proxy_port: int | None = None) -> None:
    """Every call path of the client, as the role of dsn; names carry tag.
    The user's own SQL fragments (where=, queries) name pg_catalog too, so
    that whatever is found unqualified is the client's."""
    x, y = _data()
    t, m = f"pts_{tag}", f"m_{tag}"
    with corgipile.Client(dsn, progress=False) as c:
        # loaders
        c.load_numpy(t, x, y)
        c.load_numpy(f"{t}_cols", x, y, layout="columns")
        import pandas as pd
        frame = pd.DataFrame(x, columns=["a", "b", "c"]).assign(label=y)
        loaded = c.load_dataframe(f"{t}_df", frame)
        path = tmp / f"{tag}.csv"
        with open(path, "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["label", "a", "b", "c"])
            w.writerows([[int(yy), *xx] for xx, yy in zip(x, y, strict=True)])
        c.load_csv(f"{t}_csv", path)
        svm = tmp / f"{tag}.svm"
        svm.write_text("".join(f"{int(yy)} 1:{xx[0]} 3:{xx[2]}\n" for xx, yy in zip(x, y, strict=True)))
        c.load_libsvm(f"{t}_svm", svm)
        # training, prediction, evaluation
        c.train(t, "svm", model_name=m, max_epoch_num=2, seed=1)
        c.train(t, "logistic", model_name=f"{m}_w", max_epoch_num=2, seed=1, where="id OPERATOR(pg_catalog.>) 10")
        c.train(f"SELECT * FROM {t} WHERE id OPERATOR(pg_catalog.<) 100", "svm", model_name=f"{m}_q", max_epoch_num=1)
        c.train(f"{t}_df", "logistic", model_name=f"{m}_df", max_epoch_num=1, seed=1,
                **loaded.train_params())
        c.predict(m, t)
        c.predict(m, t, where="id OPERATOR(pg_catalog.<) 50")
        c.predict(m, x[:5])
        c.evaluate(m, t)
        c.evaluate(f"{m}_w", t, where="id OPERATOR(pg_catalog.<) 60")
        c.execute(f"SELECT * FROM {t} TRAIN BY svm WITH model_name = '{m}_x', max_epoch_num = 1")
        c.execute(f"SELECT id FROM {t} WHERE id OPERATOR(pg_catalog.<) 5 PREDICT BY {m}").fetchall()
        # models
        c.list_models()
        c.get_model(m)
        doc = c.export_model(m)
        c.import_model(doc, name=f"{m}_imp")
        c.rename_model(f"{m}_imp", f"{m}_imp2")
        c.drop_model(f"{m}_imp2")
    # estimators
    clf = SGDClassifier(dsn, loss="log_loss", max_epoch_num=2, seed=1, model_name=f"{m}_est")
    clf.fit(x, y)
    clf.predict(x[:7])
    clf.predict_proba(x[:7])
    clf.score(x, y)
    clf.fit(t)
    clf.predict(t)
    clf.score(t)
    SGDClassifier.from_model(f"{m}_est", dsn).predict(x[:3])
    reg = SGDRegressor(dsn, max_epoch_num=2, seed=1, model_name=f"{m}_reg")
    reg.fit(x, x[:, 0])
    reg.score(x, x[:, 0])
    # the CLI, in this process
    exported = tmp / f"{tag}.json"
    for argv in (["train", t, "svm", "--name", f"{m}_cli", "--epochs", "1", "--no-progress"],
                 ["predict", f"{m}_cli", t, "--limit", "3"],
                 ["predict", f"{m}_cli", "--vector", "0.1,0.2,0.3"],
                 ["evaluate", f"{m}_cli", t],
                 ["models", "list"], ["models", "show", f"{m}_cli"],
                 ["models", "export", f"{m}_cli", "-o", str(exported)],
                 ["models", "import", str(exported), "--name", f"{m}_cli2"],
                 ["models", "rename", f"{m}_cli2", f"{m}_cli3"],
                 ["models", "drop", f"{m}_cli3"],
                 ["load", f"{t}_cli", str(tmp / f"{tag}.csv")],
                 ["sql", f"SELECT * FROM {t} LIMIT 2 PREDICT BY {m}"]):
        assert cli.main(["--dsn", dsn, *argv]) == 0, argv
    # the PyTorch dataset
    if HAS_TORCH:
        from corgipile.torch import CorgiPileDataset
        ds = CorgiPileDataset(dsn, t, id_column="id", seed=3)
        ds.set_epoch(0)
        assert len(list(iter(ds))) == len(x)
        ds.close()
    # the proxy's catalog lookups and rewritten statements, run as the victim
    with psycopg.connect(dsn, autocommit=True) as conn:
        for q in proxy_queries(t, m):
            conn.execute(q).fetchall()
    if proxy_port is not None:
        pdsn = f"{dsn} host=127.0.0.1 port={proxy_port}"
        with psycopg.connect(pdsn, autocommit=True) as conn:
            conn.execute(f"SELECT * FROM {t} TRAIN BY svm WITH model_name = '{m}_px', "
                         "max_epoch_num = 1").fetchall()
            conn.execute(f"SELECT id FROM {t} PREDICT BY {m}").fetchall()
            conn.execute(f"SELECT id FROM {t} PREDICT BY {m}", binary=True).fetchall()


def proxy_queries(t: str, m: str) -> list[str]:
    """The two catalog lookups of corgipile proxy."""
    return [rewrite.SIGNATURE_QUERY, rewrite.classes_query([m])]


def rendered(conn: psycopg.Connection, t: str, m: str) -> list[str]:
    """The proxy's rewrite of a TRAIN BY and a PREDICT BY, as it would send them."""
    out = []
    for text in (f"SELECT * FROM {t} TRAIN BY svm WITH max_epoch_num = 2, l2 = 0.1",
                 f"SELECT id, label FROM {t} WHERE id OPERATOR(pg_catalog.<) 3 PREDICT BY {m}"):
        plan = rewrite.analyze(text, single=False)
        assert isinstance(plan, rewrite.Plan)
        sig = rewrite.signature_from_rows(
            [list(r) for r in conn.execute(rewrite.SIGNATURE_QUERY).fetchall()])
        rows = [list(r) for r in conn.execute(rewrite.classes_query([m])).fetchall()]
        new = rewrite.render(plan, sig, rows)
        assert not isinstance(new, rewrite.Failure), new
        out.append(new[0])
    return out


def test_client_runs_no_planted_code(roles, conn, victim, trusting_proxy, tmp_path):
    """Pass 1: what the client sends, parsed: no unqualified name. Pass 2:
    look-alikes of every name pass 1 found, planted by a hostile role, with
    the victim's search_path putting public first; the canary never moves."""
    name, dsn = victim
    with sqlcheck.recording() as rec:
        drive(dsn, "p1", tmp_path)
        with psycopg.connect(dsn, autocommit=True) as vc:
            for q in rendered(vc, "pts_p1", "m_p1"):
                rec.queries.append(q)
                vc.execute(q).fetchall()
    assert len(rec.queries) > 50, "the drive ran too few queries to mean anything"
    offenders = rec.offenders()
    report = "\n\n".join(f"{', '.join(bad)}\n  in: {q[:300]}" for q, bad in offenders.items())
    assert not offenders, f"{len(offenders)} queries name objects without pg_catalog:\n{report}"

    names = rec.names()
    hostile = roles.connect(roles.create("hostile"))
    planted = sqlcheck.plant(hostile, names)
    # the issue's own: =(oid, regclass), the better match for c.oid = %s::regclass
    hostile.execute("CREATE FUNCTION public.eq_oid_regclass(pg_catalog.oid, pg_catalog.regclass) "
                    "RETURNS pg_catalog.bool LANGUAGE plpgsql AS $$ BEGIN "
                    "PERFORM public.canary_hit('operator =(oid, regclass)'); RETURN false; END $$")
    hostile.execute("CREATE OPERATOR public.= (LEFTARG = pg_catalog.oid, RIGHTARG = "
                    "pg_catalog.regclass, FUNCTION = public.eq_oid_regclass)")
    assert planted["function"] > 10 and planted["operator"] > 20 and planted["type"] > 5, planted
    assert planted["aggregate"] >= 2, planted
    print("planted:", planted)
    conn.execute(f'ALTER ROLE "{name}" SET search_path = public, pg_catalog')
    try:
        # the look-alikes work: an unqualified call as the victim hits them
        with psycopg.connect(dsn, autocommit=True) as vc:
            vc.execute("SELECT pg_catalog.count(*) FROM pg_catalog.pg_class c "
                       "WHERE c.oid = 'pg_class'::pg_catalog.regclass").fetchone()
            assert hostile.execute("SELECT pg_catalog.count(*) FROM public.canary_log"
                                   ).fetchone()[0] > 0, "the planted = did not run"
            hostile.execute("TRUNCATE public.canary_log")
            hostile.execute("SELECT pg_catalog.setval('public.canary_hits', 1, false)")
        drive(dsn, "p2", tmp_path, proxy_port=trusting_proxy)
    finally:
        conn.execute(f'ALTER ROLE "{name}" RESET search_path')
    hits = hostile.execute("SELECT pg_catalog.nextval('public.canary_hits')").fetchone()[0]
    log = [r[0] for r in hostile.execute("SELECT what FROM public.canary_log").fetchall()]
    assert hits == 1 and not log, f"planted code ran {hits - 1} times as the victim: {log[:20]}"


def test_source_queries_name_pg_catalog():
    """Every string literal in the client's source that is a whole SQL
    statement (the paths the drive above cannot reach, such as the
    benchmark's), parsed: no unqualified name."""
    found = sqlcheck.source_queries(CLIENT / "corgipile")
    assert len(found) > 30, "the scan found too few queries to mean anything"
    bad = [f"{Path(f).relative_to(CLIENT)}:{line}: {', '.join(sorted({str(r) for r in refs}))}"
           for f, line, text in found if (refs := sqlcheck.unqualified(text))]
    assert not bad, "queries naming objects without pg_catalog:\n" + "\n".join(bad)
