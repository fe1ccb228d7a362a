"""Every table the Python client creates has pg_catalog's column types, and
no look-alike type a hostile role planted runs as the user.

A column type written bare (``text``, ``float8``, ``bool``) is looked up
through search_path: with ``public`` before ``pg_catalog`` and a role that
may CREATE in public, ``CREATE DOMAIN public.text AS pg_catalog.text CHECK
(public.spy(VALUE))`` makes every value the victim loads pass through the
hostile role's function, and the victim's new column keeps the domain, so
the hook stays for every later write.

The victim runs every path that creates a table or casts a value (each
loader with every column type it can write, the CLI's load, the estimators
on a DataFrame, on arrays and on a table, the PyTorch dataset, TRAIN BY and
PREDICT BY through the proxy) twice:

1. recorded: every query is parsed and must name each function, operator
   and type with its schema (sqlcheck);
2. against look-alikes: domains named after every type name the client
   could write (pg_catalog's names, the SQL-standard spellings, the
   loaders' aliases), whose CHECK calls the canary, plus the look-alike
   functions and operators of every name pass 1 saw (sqlcheck.plant), with
   public first on the victim's search_path. The canary must not move, and
   an event trigger records the column types of every table created (the
   temporary tables that a rollback removes included): all pg_catalog's.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import psycopg
import pytest
from scipy.sparse import csr_matrix

import corgipile
import sqlcheck
from corgipile import cli
from corgipile.estimators import SGDClassifier, SGDRegressor
from corgipile.loaders import load_csr

HAS_TORCH = importlib.util.find_spec("torch") is not None

# Every name a type could be spelled with: pg_catalog's own (the planted
# domain of each is over that type), and the other spellings with the type
# each stands for (the grammar turns the SQL-standard ones into pg_catalog's
# without a lookup, so their domains must stay unused too).
CATALOG_TYPES = ("text", "varchar", "bpchar", "name", "float8", "float4", "numeric", "int2",
                 "int4", "int8", "bool", "date", "time", "timetz", "timestamp", "timestamptz",
                 "interval", "bytea", "json", "jsonb", "uuid", "oid", "regclass", "tid")
SPELLINGS = {"integer": "int4", "int": "int4", "bigint": "int8", "smallint": "int2",
             "boolean": "bool", "real": "float4", "double precision": "float8",
             "float": "float8", "double": "float8", "decimal": "numeric",
             "character varying": "varchar", "character": "bpchar", "string": "text",
             "str": "text", "timestamp with time zone": "timestamptz",
             "timestamp without time zone": "timestamp"}

N = 90


def _frame() -> object:
    """A DataFrame with a column of every kind the loaders write, missing
    values included."""
    import pandas as pd

    rng = np.random.default_rng(7)
    x = rng.normal(size=N)
    return pd.DataFrame({
        "label": np.where(x > 0, 1, 0),
        "flag": rng.random(N) > 0.5,
        "small": rng.integers(0, 9, size=N),
        "big": rng.integers(0, 9, size=N) + 2**40,
        "x": x + rng.normal(scale=0.5, size=N),
        "kind": pd.array(rng.choice(["a", "b", None], size=N), dtype="object"),
        "maybe": np.where(rng.random(N) > 0.9, np.nan, x),
    })


def drive(dsn: str, tag: str, tmp: Path, proxy_port: int | None = None) -> int:
    """Every path that creates a table or casts, as the role of dsn; returns
    how many tables the paths create at least (committed or not)."""
    frame = _frame()
    csv_path = tmp / f"{tag}.csv"
    frame.assign(flag=frame["flag"].map({True: "true", False: "false"})).to_csv(
        csv_path, index=False, na_rep="NA")
    pq_path = tmp / f"{tag}.parquet"
    frame.to_parquet(pq_path)
    numeric = frame[["label", "small", "x"]]
    x, y = numeric[["small", "x"]].to_numpy(float), numeric["label"].to_numpy()
    t = f"t_{tag}"
    created = 0
    with corgipile.Client(dsn, progress=False) as c:
        # CSV: straight COPY, text staging (order, exclude, float4), array layout
        c.load_csv(f"{t}_csv", csv_path)
        c.load_csv(f"{t}_csv_l", csv_path, order="label", feature_type="float4")
        c.load_csv(f"{t}_csv_a", csv_path, features=["small", "x"], layout="array")
        c.load_csv(f"{t}_csv_t", csv_path, exclude=["maybe"], types={"small": "text"})
        # DataFrames: typed columns (text, booleans, NaN), numbers only, float4
        df = c.load_dataframe(f"{t}_df", frame)
        c.load_dataframe(f"{t}_df4", frame, feature_type="float4")
        c.load_dataframe(f"{t}_dfn", numeric)
        c.load_dataframe(f"{t}_dfa", numeric, layout="array")
        c.load_parquet(f"{t}_pq", pq_path)
        # arrays: every label type, sparse
        c.load_numpy(f"{t}_np", x, y)
        c.load_numpy(f"{t}_npc", x, y.astype(bool), layout="columns", feature_type="float4")
        c.load_numpy(f"{t}_nps", x, np.where(y > 0, "yes", "no"), layout="sparse")
        c.load_numpy(f"{t}_npf", x, x[:, 1])
        c.load_numpy(f"{t}_np8", x, y.astype(np.int64) + 2**40)
        load_csr(c.connection, f"{t}_csr", csr_matrix(x), y)
        svm = tmp / f"{tag}.svm"
        svm.write_text("".join(f"{int(yy)} 1:{xx[0]} 3:{xx[1]}\n" for xx, yy in zip(x, y, strict=True)))
        c.load_libsvm(f"{t}_svm", svm)
        created += 16
        # a model on the typed table, for the estimators, torch and the proxy
        c.train(f"{t}_df", "logistic", model_name=f"m_{tag}", max_epoch_num=2, seed=1,
                **df.train_params())
        c.train(f"SELECT * FROM {t}_df WHERE id OPERATOR(pg_catalog.<) 60", "logistic",
                model_name=f"m_{tag}_q", max_epoch_num=1, seed=1, **df.train_params())
        created += 1
    # the CLI's load
    for argv in (["load", f"{t}_cli", str(csv_path), "--types", "small=text"],
                 ["load", f"{t}_cli_pq", str(pq_path)]):
        assert cli.main(["--dsn", dsn, *argv]) == 0, argv
    created += 2
    # estimators: a DataFrame of every kind (its NaN imputed), arrays, a table
    features = frame.drop(columns=["label"])
    clf = SGDClassifier(dsn, loss="log_loss", max_epoch_num=2, seed=1, missing="mean")
    clf.fit(features, frame["label"])
    clf.predict(features)
    clf.score(features, frame["label"])
    SGDRegressor(dsn, max_epoch_num=2, seed=1, missing="mean").fit(features, frame["x"])
    SGDClassifier(dsn, max_epoch_num=2, seed=1).fit(x, y)
    on_table = SGDClassifier(dsn, loss="log_loss", max_epoch_num=2, seed=1, label="label",
                             features="features")
    on_table.fit(f"{t}_np")
    on_table.predict(f"{t}_np")
    on_table.score(f"{t}_np")
    created += 3
    # the PyTorch dataset, on a table of columns and through a model
    if HAS_TORCH:
        from corgipile.torch import CorgiPileDataset

        for kwargs in ({"features": ["small", "x"]}, {"model": f"m_{tag}"}):
            ds = CorgiPileDataset(dsn, f"{t}_df", id_column="id", seed=3, **kwargs)
            ds.set_epoch(0)
            assert len(list(iter(ds))) > 0
            ds.close()
    # TRAIN BY and PREDICT BY through the proxy (a WHERE copies the rows first)
    if proxy_port is not None:
        pdsn = f"{dsn} host=127.0.0.1 port={proxy_port}"
        with psycopg.connect(pdsn, autocommit=True) as conn:
            conn.execute(f"SELECT * FROM {t}_df TRAIN BY svm WITH model_name = 'm_{tag}_px', "
                         "features = 'small, x', max_epoch_num = 1").fetchall()
            conn.execute(f"SELECT * FROM {t}_df WHERE id OPERATOR(pg_catalog.>) 5 TRAIN BY "
                         f"logistic WITH model_name = 'm_{tag}_pw', features = 'small, kind, "
                         "flag', max_epoch_num = 1").fetchall()
            conn.execute(f"SELECT id FROM {t}_df PREDICT BY m_{tag}").fetchall()
            conn.execute(f"SELECT id FROM {t}_df PREDICT BY m_{tag}", binary=True).fetchall()
        created += 1
    return created


# the column types of every table created from here on, temporary ones
# included (a sequence counts what a rollback would remove)
WATCH = """
CREATE SEQUENCE public.watch_tables;
CREATE SEQUENCE public.watch_foreign_columns;
CREATE TABLE public.watch_columns (relation pg_catalog.text, attname pg_catalog.name,
                                   typ pg_catalog.text);
CREATE FUNCTION public.watch_created() RETURNS event_trigger LANGUAGE plpgsql
SECURITY DEFINER SET search_path = pg_catalog AS $$
DECLARE
  r record;
  a record;
BEGIN
  FOR r IN SELECT d.objid, d.object_identity FROM pg_catalog.pg_event_trigger_ddl_commands() d
            WHERE d.object_type OPERATOR(pg_catalog.=) 'table' LOOP
    PERFORM pg_catalog.nextval('public.watch_tables');
    FOR a IN SELECT att.attname, n.nspname, ty.typname
               FROM pg_catalog.pg_attribute att
               JOIN pg_catalog.pg_type ty ON ty.oid OPERATOR(pg_catalog.=) att.atttypid
               JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) ty.typnamespace
              WHERE att.attrelid OPERATOR(pg_catalog.=) r.objid AND att.attnum OPERATOR(pg_catalog.>) 0
                AND NOT att.attisdropped LOOP
      IF a.nspname OPERATOR(pg_catalog.<>) 'pg_catalog' THEN
        PERFORM pg_catalog.nextval('public.watch_foreign_columns');
      END IF;
      INSERT INTO public.watch_columns VALUES (r.object_identity, a.attname,
                                               a.nspname OPERATOR(pg_catalog.||) '.' OPERATOR(pg_catalog.||) a.typname);
    END LOOP;
  END LOOP;
END $$;
CREATE EVENT TRIGGER watch_created ON ddl_command_end
  WHEN TAG IN ('CREATE TABLE', 'CREATE TABLE AS', 'SELECT INTO')
  EXECUTE FUNCTION public.watch_created();
"""

# every column of every table the role owns, with its type's schema
OWNED_COLUMNS = """
SELECT c.relname, a.attname, n.nspname, pg_catalog.format_type(a.atttypid, NULL)
  FROM pg_catalog.pg_class c
  JOIN pg_catalog.pg_attribute a ON a.attrelid OPERATOR(pg_catalog.=) c.oid
  JOIN pg_catalog.pg_type ty ON ty.oid OPERATOR(pg_catalog.=) a.atttypid
  JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) ty.typnamespace
 WHERE c.relowner OPERATOR(pg_catalog.=) %s::pg_catalog.regrole
   AND c.relkind OPERATOR(pg_catalog.=) 'r' AND a.attnum OPERATOR(pg_catalog.>) 0
   AND NOT a.attisdropped
"""


def plant_types(hostile: psycopg.Connection) -> int:
    """A domain in public named after every type name, whose CHECK calls
    the canary; returns how many were planted (sqlcheck.plant may have
    planted some already)."""
    q = sqlcheck.quote
    planted = 0
    for name, base in [(t, t) for t in CATALOG_TYPES] + list(SPELLINGS.items()):
        hit = sqlcheck.literal(f"type {name}")
        try:
            with hostile.transaction():
                hostile.execute(f"CREATE DOMAIN public.{q(name)} AS pg_catalog.{q(base)} "
                                f"CHECK (public.canary_hit({hit}))")
            planted += 1
        except psycopg.errors.DuplicateObject:
            pass
        exists = hostile.execute("SELECT pg_catalog.to_regtype(%s)",
                                 (f"public.{q(name)}",)).fetchone()[0]
        assert exists is not None, name
    return planted


def test_created_tables_use_catalog_types(roles, conn, victim, trusting_proxy, tmp_path):
    pytest.importorskip("pyarrow")
    name, dsn = victim
    with sqlcheck.recording() as rec:
        drive(dsn, "p1", tmp_path)
    offenders = rec.offenders()
    report = "\n\n".join(f"{', '.join(bad)}\n  in: {q[:300]}" for q, bad in offenders.items())
    assert not offenders, f"{len(offenders)} queries name objects without pg_catalog:\n{report}"

    hostile = roles.connect(roles.create("hostile"))
    planted = sqlcheck.plant(hostile, rec.names())
    assert planted["function"] > 10 and planted["operator"] > 20, planted
    plant_types(hostile)
    conn.execute(WATCH)
    conn.execute(f'ALTER ROLE "{name}" SET search_path = public, pg_catalog')
    try:
        # the look-alikes work: a bare type name as the victim hits them
        with psycopg.connect(dsn, autocommit=True) as vc:
            for probe in ("SELECT 'x'::text", "SELECT 1::float8", "SELECT true::bool",
                          "SELECT '2020-01-01'::date"):
                vc.execute(probe).fetchone()
        seen = hostile.execute("SELECT pg_catalog.count(*) FROM public.canary_log").fetchone()[0]
        assert seen == 4, f"the planted domains did not run ({seen} of 4)"
        hostile.execute("TRUNCATE public.canary_log")
        hostile.execute("SELECT pg_catalog.setval('public.canary_hits', 1, false)")
        expected = drive(dsn, "p2", tmp_path, proxy_port=trusting_proxy)
    finally:
        conn.execute(f'ALTER ROLE "{name}" RESET search_path')
        conn.execute("DROP EVENT TRIGGER watch_created")
    hits = hostile.execute("SELECT pg_catalog.nextval('public.canary_hits')").fetchone()[0]
    log = [r[0] for r in hostile.execute("SELECT what FROM public.canary_log").fetchall()]
    assert hits == 1 and not log, f"planted code ran {hits - 1} times as the victim: {log[:20]}"

    tables = conn.execute("SELECT pg_catalog.nextval('public.watch_tables')").fetchone()[0] - 1
    foreign = conn.execute(
        "SELECT pg_catalog.nextval('public.watch_foreign_columns')").fetchone()[0] - 1
    watched = conn.execute("SELECT relation, attname, typ FROM public.watch_columns WHERE typ "
                           "NOT LIKE 'pg\\_catalog.%'").fetchall()
    assert tables >= expected, f"the event trigger saw {tables} tables created, expected " \
                               f"{expected} at least"
    assert foreign == 0, f"{foreign} created columns have a type outside pg_catalog: {watched}"
    owned = conn.execute(OWNED_COLUMNS, (name,)).fetchall()
    print(f"planted {planted}; {tables} tables created; {len(owned)} columns kept")
    assert len({r[0] for r in owned}) >= 20, owned
    bad = [r for r in owned if r[2] != "pg_catalog"]
    assert not bad, f"columns of the victim's tables with a type outside pg_catalog: {bad}"
