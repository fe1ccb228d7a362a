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
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import psycopg
import pytest

HERE = Path(__file__).resolve().parent
CLIENT = HERE.parents[2] / "python_client"
sys.path.insert(0, str(HERE))
import sqlcheck  # noqa: E402

if str(CLIENT) not in sys.path:
    sys.path.insert(0, str(CLIENT))
import corgipile  # noqa: E402
from corgipile import cli  # noqa: E402
from corgipile.estimators import SGDClassifier, SGDRegressor  # noqa: E402
from corgipile.proxy import rewrite  # noqa: E402

HAS_TORCH = importlib.util.find_spec("torch") is not None


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
            w.writerows([[int(yy), *xx] for xx, yy in zip(x, y)])
        c.load_csv(f"{t}_csv", path)
        svm = tmp / f"{tag}.svm"
        svm.write_text("".join(f"{int(yy)} 1:{xx[0]} 3:{xx[2]}\n" for xx, yy in zip(x, y)))
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


def rendered(conn: psycopg.Connection, t: str, m: str) -> list[str]:  # noqa: D401
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


@pytest.fixture
def victim(roles, conn):
    name = roles.create("victim")
    conn.execute(f'GRANT USAGE ON SCHEMA corgipile TO "{name}"')
    info = conn.info
    return name, f"host={info.host} port={info.port} dbname={info.dbname} user={name}"


PLANT_FUNCTIONS = """
SELECT p.oid, p.proname, p.prokind, p.proretset,
       pg_catalog.format_type(p.prorettype, NULL),
       ARRAY(SELECT pg_catalog.format_type(t, NULL)
               FROM pg_catalog.unnest(p.proargtypes::pg_catalog.oid[]) AS t),
       p.provariadic OPERATOR(pg_catalog.<>) 0,
       a.aggtranstype::pg_catalog.regtype::pg_catalog.text
  FROM pg_catalog.pg_proc p
  LEFT JOIN pg_catalog.pg_aggregate a ON a.aggfnoid OPERATOR(pg_catalog.=) p.oid
 WHERE p.pronamespace OPERATOR(pg_catalog.=) 'pg_catalog'::pg_catalog.regnamespace
   AND p.proname OPERATOR(pg_catalog.=) ANY (%s::pg_catalog.text[])
   AND p.prokind OPERATOR(pg_catalog.=) ANY ('{f,a}'::pg_catalog.char[])
"""
PLANT_OPERATORS = """
SELECT o.oprname, o.oprkind,
       pg_catalog.format_type(o.oprleft, NULL), pg_catalog.format_type(o.oprright, NULL),
       pg_catalog.format_type(o.oprresult, NULL)
  FROM pg_catalog.pg_operator o
 WHERE o.oprnamespace OPERATOR(pg_catalog.=) 'pg_catalog'::pg_catalog.regnamespace
   AND o.oprname OPERATOR(pg_catalog.=) ANY (%s::pg_catalog.text[])
"""
# argument types a plpgsql look-alike cannot take
_PSEUDO = {"\"any\"", "internal", "cstring", "record", "trigger", "event_trigger",
           "anyenum", "anyrange", "anymultirange", "void", "language_handler",
           "fdw_handler", "index_am_handler", "tsm_handler", "table_am_handler",
           "anycompatiblerange", "anycompatiblemultirange", "pg_ddl_command"}


def plant(hostile: psycopg.Connection, names: set[sqlcheck.Ref]) -> dict[str, int]:
    """Look-alikes in public of every function, operator, type and catalog
    relation in names, each calling public.canary_hit(). Returns how many of
    each kind were planted."""
    q = sqlcheck.quote
    h = hostile
    h.execute("CREATE SEQUENCE public.canary_hits")
    h.execute("CREATE TABLE public.canary_log (what text)")
    h.execute("GRANT USAGE, UPDATE ON SEQUENCE public.canary_hits TO PUBLIC")
    h.execute("GRANT INSERT ON public.canary_log TO PUBLIC")
    h.execute("""CREATE FUNCTION public.canary_hit(what pg_catalog.text)
        RETURNS pg_catalog.bool LANGUAGE plpgsql AS $$
        BEGIN
          PERFORM pg_catalog.nextval('public.canary_hits'::pg_catalog.regclass);
          INSERT INTO public.canary_log VALUES (what);
          RETURN true;
        END $$""")
    count = {"function": 0, "aggregate": 0, "operator": 0, "type": 0, "relation": 0}

    def attempt(kind: str, *stmts: str) -> None:
        try:
            with h.transaction():
                for stmt in stmts:
                    h.execute(stmt)
            count[kind] += 1
        except psycopg.Error:
            pass  # a signature plpgsql cannot take: nothing planted

    funcs = sorted({r.name for r in names if r.kind == "function"})
    for n, (oid, name, kind, retset, ret, args, variadic, trans) in enumerate(
            h.execute(PLANT_FUNCTIONS, (funcs,)).fetchall()):
        if variadic or any(a in _PSEUDO for a in args) or ret in _PSEUDO:
            continue
        arglist = ", ".join(args)
        hit = f"PERFORM public.canary_hit({sqlcheck.literal(f'function {name}({arglist})')});"
        if kind == "a":
            state = trans or ret
            sfunc = f"public.canary_sfunc_{n}"
            sargs = ", ".join([state, *args])
            attempt("aggregate",
                    f"CREATE FUNCTION {sfunc}({sargs}) RETURNS {state} LANGUAGE plpgsql "
                    f"AS $$ BEGIN {hit} RETURN NULL; END $$",
                    f"CREATE AGGREGATE public.{q(name)}({arglist or '*'}) "
                    f"(sfunc = {sfunc}, stype = {state})")
        elif retset:
            attempt("function",
                    f"CREATE FUNCTION public.{q(name)}({arglist}) RETURNS SETOF {ret} "
                    f"LANGUAGE plpgsql AS $$ BEGIN {hit} RETURN; END $$")
        else:
            attempt("function",
                    f"CREATE FUNCTION public.{q(name)}({arglist}) RETURNS {ret} "
                    f"LANGUAGE plpgsql AS $$ BEGIN {hit} RETURN NULL; END $$")
    ops = sorted({r.name for r in names if r.kind == "operator"})
    for n, (name, kind, left, right, result) in enumerate(
            h.execute(PLANT_OPERATORS, (ops,)).fetchall()):
        types = [t for t in (left, right) if t != "-"]
        if any(t in _PSEUDO for t in types) or result in _PSEUDO:
            continue
        fn = f"public.canary_op_{n}"
        hit = f"PERFORM public.canary_hit({sqlcheck.literal(f'operator {name}({left}, {right})')});"
        sides = (f"LEFTARG = {left}, " if left != "-" else "") + f"RIGHTARG = {right}"
        attempt("operator",
                f"CREATE FUNCTION {fn}({', '.join(types)}) RETURNS {result} LANGUAGE plpgsql "
                f"AS $$ BEGIN {hit} RETURN NULL; END $$",
                f"CREATE OPERATOR public.{name} ({sides}, FUNCTION = {fn})")
    for name in sorted({r.name for r in names if r.kind == "type"}):
        attempt("type", f"CREATE DOMAIN public.{q(name)} AS pg_catalog.{q(name)} CHECK "
                        f"(public.canary_hit({sqlcheck.literal('type ' + name)}))")
    for name in sorted({r.name for r in names if r.kind == "relation"}):
        attempt("relation", f"CREATE VIEW public.{q(name)} AS SELECT * FROM pg_catalog.{q(name)} "
                            f"WHERE public.canary_hit({sqlcheck.literal('relation ' + name)})")
    return count


@pytest.fixture
def trusting_proxy(conn):
    """corgipile proxy in front of the test cluster (which trusts local
    connections: the protocol, not authentication, is under test here)."""
    env = dict(os.environ, PYTHONPATH=str(CLIENT))
    proc = subprocess.Popen(
        [sys.executable, "-P", "-m", "corgipile", "proxy", "--listen", "127.0.0.1:0",
         "--upstream", f"host={os.environ['PGHOST']} port={os.environ['PGPORT']}",
         "--unsafe-allow-passwordless", "--allow-unix-socket-upstream"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    line = proc.stdout.readline()  # type: ignore[union-attr]
    assert "listening on" in line, line
    yield int(line.split(",")[0].rsplit(":", 1)[1])
    proc.terminate()
    _, err = proc.communicate(timeout=20)
    assert "Traceback" not in err, err


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
    planted = plant(hostile, names)
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
