"""A fuzzer of corgipile's SQL surface, shared by tests/python/security/
test_fuzz.py (a fixed seed, a few hundred cases, in ``make test``) and
scripts/fuzz_sql.py (longer runs).

It generates random calls of every function of the extension with random
argument types and values, over random relations (dropped columns, columns
added with defaults, empty, NULL-heavy, TOASTed, partitioned, views,
materialized views, temporary and unlogged tables, domains, composites) and
random model rows that a superuser writes into the model storage.  Cases
run as an unprivileged role, some as a superuser victim.  The role has put
functions and operators in ``public`` that shadow what our internal SQL
might call unqualified (each advances a canary sequence if it ever runs);
a quarter of the cases run with ``search_path = public, pg_catalog``, the
rest with the default path, where only better-matching signatures win.

A case fails (a *finding*) when the server went through crash recovery or
a session lost its connection (a backend crash), when a statement failed with SQLSTATE
XX000 (an internal error: elog(ERROR) or a failed cache lookup, never a
message for a user), or when the canary moved (user code ran inside ours).
Every other error is the expected outcome of hostile input.
"""

from __future__ import annotations

import collections
import dataclasses
import random
import time
import uuid
from collections.abc import Callable, Iterable

import psycopg

# Where model rows live.  0.1.0 keeps them in the table corgipile.models;
# 0.2.0 (h-a) renames the table corgipile.model_store and makes
# corgipile.models a view.  The first candidate that is a table is used.
MODEL_STORE_CANDIDATES = ("corgipile.model_store", "corgipile.models")

# Functions the 0.2.0 model catalog adds; each is fuzzed when it exists.
MODEL_ADMIN_FUNCTIONS = ("drop_model", "rename_model", "grant_model", "revoke_model",
                         "reassign_models", "import_model", "annotate_model", "apply_model_copy",
                         "model_hash")

# A Citus coordinator's copy of a model, as apply_model_copy() reads it,
# built from a row of the models view (tests/regress/sql/model_copy.sql)
COPY_OF_ROW = ("pg_catalog.jsonb_build_object('model', model, 'relation', relation, 'label', label, "
               "'features', pg_catalog.to_jsonb(features), 'feature_indices', feature_indices, "
               "'n_features', n_features, 'weights', pg_catalog.to_jsonb(weights), 'classes', classes, "
               "'params', params, 'history', history, 'created_at', "
               "pg_catalog.to_jsonb(created_at AT TIME ZONE 'UTC'), 'owner', owner, 'usage_roles', "
               "pg_catalog.to_jsonb(usage_roles::pg_catalog.text[]), 'trained_on', NULL, 'preprocess', preprocess)")
# a field of a copy and a hostile value for it
COPY_DAMAGE = (("weights", "'[]'"), ("weights", "'[null]'"), ("weights", "'\"x\"'"),
               ("weights", "pg_catalog.to_jsonb(pg_catalog.array_fill(1.0::pg_catalog.float8, ARRAY[100000]))"),
               ("n_features", "'-1'"), ("n_features", "'2147483648'"), ("model", "'\"x\"'"),
               ("classes", "'[1, [2]]'"), ("params", "'\"x\"'"), ("preprocess", "'{\"features\": 7}'"),
               ("preprocess", "'[{}]'"), ("owner", "'\"postgres\"'"), ("usage_roles", "'[\"postgres\"]'"),
               ("usage_roles", "'[1]'"), ("created_at", "'\"yesterday\"'"), ("history", "'{}'"),
               ("features", "'{\"a\": 1}'"), ("label", "'[]'"), ("relation", "'\"pg_catalog.pg_authid\"'"))

STATEMENT_TIMEOUT = "3s"

# What changes when a backend crashes: the postmaster keeps its start time
# through crash recovery, but recovery discards the statistics and stamps a
# new stats_reset (the conftest's postmaster_unchanged check reads the same).
SERVER_GENERATION = ("SELECT pg_catalog.pg_postmaster_start_time(), a.stats_reset "
                     "FROM pg_catalog.pg_stat_archiver AS a")

FAMILIES = ("train", "predict", "model_rows", "evaluate", "shuffle", "relations", "model_admin",
            "torch_io")


def lit(value: str | None) -> str:
    """A SQL string literal (standard_conforming_strings is on)."""
    if value is None:
        return "NULL"
    return "'" + value.replace("'", "''") + "'"


def ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


@dataclasses.dataclass
class Finding:
    family: str
    case: int
    kind: str  # crash, XX000, canary
    detail: str
    sql: list[str]

    def __str__(self) -> str:
        stmts = "\n    ".join(s if s.endswith(";") else s + ";" for s in self.sql)
        return f"[{self.family} #{self.case}] {self.kind}: {self.detail}\n    {stmts}"


@dataclasses.dataclass
class Case:
    family: str
    number: int
    statements: list[str]
    as_superuser: bool = False  # run as the superuser victim, not the hostile role
    setup: list[str] = dataclasses.field(default_factory=list)  # run as the superuser first
    search_path: str = '"$user", public'


# ---------------------------------------------------------------- values

INT_EDGES = ["0", "1", "-1", "3", "32767", "-32768", "2147483647", "-2147483648",
             "1431655765", "9223372036854775807", "-9223372036854775808"]
FLOAT_EDGES = ["0", "1", "-1", "0.5", "1e-300", "5e-324", "1e308", "-1e308", "'NaN'",
               "'Infinity'", "'-Infinity'", "9007199254740993", "3.4e38"]
TEXT_EDGES = ["", "features", "label", "a, b", "a,,b", " , ", "%s%s%s", "x" * 70, "x" * 5000,
              "é€\u2603", "'; SELECT 1; --", '"quoted"', "NULL", "{1,2}", "svm", "softmax",
              "sparse", "columns", "-1", "1%", "100%", "1e400", "\\x00", "pg_catalog.format"]

ELEM_TYPES = ["float8", "float4", "int2", "int4", "int8", "numeric", "bool", "text",
              "bytea", "fuzz_dom", "fuzz_posdom", "jsonb", "oid", "money", "interval"]


class Values:
    """Random SQL expressions of random types."""

    def __init__(self, rng: random.Random):
        self.r = rng

    def scalar(self, typ: str | None = None) -> str:
        r = self.r
        typ = typ or r.choice(ELEM_TYPES)
        if typ in ("int2", "int4", "int8", "oid"):
            return f"{lit(r.choice(INT_EDGES).strip(chr(39)))}::{typ}"
        if typ in ("float8", "float4", "numeric", "fuzz_dom", "fuzz_posdom", "money"):
            v = r.choice(FLOAT_EDGES + [repr(r.uniform(-10, 10))]).strip("'")
            return f"{lit(v)}::{typ}"
        if typ == "bool":
            return r.choice(["true", "false", "NULL::bool"])
        if typ == "text":
            return f"{lit(r.choice(TEXT_EDGES))}::text"
        if typ == "bytea":
            return r.choice(["'\\x'::bytea", "'\\x0000803f'::bytea", "'\\xdeadbeefdeadbeefdeadbeef'::bytea",
                             "pg_catalog.decode(pg_catalog.repeat('ff', 4000), 'hex')"])
        if typ == "jsonb":
            return r.choice(["'[1,2]'::jsonb", "'{}'::jsonb", "'null'::jsonb", "'\"x\"'::jsonb"])
        if typ == "interval":
            return "'1 day'::interval"
        return "NULL"

    def array(self, typ: str | None = None) -> str:
        r = self.r
        typ = typ or r.choice(ELEM_TYPES)
        shape = r.random()
        if shape < 0.08:
            return f"'{{}}'::{typ}[]"
        if shape < 0.14:
            return f"ARRAY[NULL]::{typ}[]"
        if shape < 0.2 and typ not in ("bytea", "jsonb", "text", "interval", "money"):
            lo = r.choice([-5, 0, 2, 2147483645])
            return f"'[{lo}:{lo + 2}]={{1,2,3}}'::{typ}[]"
        if shape < 0.26 and typ not in ("bytea", "jsonb", "interval", "money"):
            return f"'{{{{1,2}},{{3,4}}}}'::{typ}[]"
        if shape < 0.34 and typ in ("float8", "float4", "int4", "int2", "numeric", "int8"):
            n = r.choice([1, 2, 3, 4, 784, 100000, 1000000])
            return f"pg_catalog.array_fill(1::{typ}, ARRAY[{n}])"
        n = r.choice([1, 2, 3, 3, 3, 4, 5])
        elems = [self.scalar(typ) if r.random() > 0.1 else f"NULL::{typ}" for _ in range(n)]
        return f"ARRAY[{', '.join(elems)}]::{typ}[]"

    def record(self) -> str:
        r = self.r
        choice = r.random()
        if choice < 0.2:
            return "ROW()"
        if choice < 0.35:
            return "ROW(NULL::float8[])"
        if choice < 0.5:
            return f"ROW({self.array('float8')}, 1)::fuzz_comp"
        n = r.randint(1, 5)
        return "ROW(" + ", ".join(self.any() for _ in range(n)) + ")"

    def any(self) -> str:
        r = self.r.random()
        if r < 0.35:
            return self.scalar()
        if r < 0.8:
            return self.array()
        if r < 0.9:
            return self.record()
        return self.r.choice(["NULL", "NULL::float8[]", "'{1,2}'", "'{}'::fuzz_arrdom",
                              "'{1,2,3}'::fuzz_arrdom", "ARRAY[ARRAY[1.0]]"])


# ---------------------------------------------------------------- relations

@dataclasses.dataclass
class Relation:
    name: str
    array_col: str | None = "features"
    label: str = "label"
    columns: str | None = None  # the columns layout's list
    indices: str | None = None  # the sparse layout's indices column
    all_columns: tuple[str, ...] = ()


# Built by the hostile role at setup.  (name, DDL...) with the layout hints.
POOL_DDL = [
    ("r_dense", Relation("r_dense", all_columns=("id", "features", "label")), [
        "CREATE TABLE r_dense AS SELECT g AS id, ARRAY[(g % 7) / 7.0, (g % 3) / 3.0, "
        "(g % 2) * 2 - 1]::float8[] AS features, (g % 2) * 2 - 1 AS label "
        "FROM pg_catalog.generate_series(1, 600) AS g"]),
    ("r_f4", Relation("r_f4", all_columns=("features", "label")), [
        "CREATE TABLE r_f4 AS SELECT ARRAY[(g % 5)::real, (g % 2)::real]::float4[] AS features, "
        "g % 2 AS label FROM pg_catalog.generate_series(1, 300) AS g"]),
    ("r_int", Relation("r_int", all_columns=("features", "label")), [
        "CREATE TABLE r_int AS SELECT ARRAY[g % 5, g % 2]::int4[] AS features, "
        "(g % 2 = 0) AS label FROM pg_catalog.generate_series(1, 300) AS g"]),
    ("r_num", Relation("r_num", all_columns=("features", "label")), [
        "CREATE TABLE r_num AS SELECT ARRAY[g % 5, 1.5]::numeric[] AS features, "
        "(CASE WHEN g % 2 = 0 THEN 9007199254740993 ELSE 9007199254740992 END)::int8 AS label "
        "FROM pg_catalog.generate_series(1, 200) AS g"]),
    ("r_sparse", Relation("r_sparse", array_col="vals", indices="idx", all_columns=("idx", "vals", "label")), [
        "CREATE TABLE r_sparse AS SELECT ARRAY[g % 5, 5 + g % 3]::int4[] AS idx, ARRAY[1.0, "
        "(g % 2)]::float8[] AS vals, g % 2 AS label FROM pg_catalog.generate_series(1, 400) AS g"]),
    ("r_sparse_bad", Relation("r_sparse_bad", array_col="vals", indices="idx", all_columns=("idx", "vals", "label")), [
        "CREATE TABLE r_sparse_bad (idx int4[], vals float8[], label int)",
        "INSERT INTO r_sparse_bad VALUES ('{-1}', '{1}', 1), ('{2147483647}', '{1}', 0), "
        "('{1,2}', '{1}', 1), (NULL, '{1}', 0), ('{1}', NULL, 1), ('{3,3,3}', '{1,2,3}', 0), "
        "('{1431655765}', '{1}', 1)"]),
    ("r_cols", Relation("r_cols", array_col=None, columns="a, b, c, d",
                        all_columns=("id", "a", "b", "c", "label", "d")), [
        "CREATE TABLE r_cols (id int, junk text, a float8, b int, c real, label int)",
        "INSERT INTO r_cols SELECT g, pg_catalog.repeat('j', g % 40), g % 3, g % 5, "
        "(g % 7) / 7.0, g % 2 FROM pg_catalog.generate_series(1, 400) AS g",
        "ALTER TABLE r_cols DROP COLUMN junk",
        "ALTER TABLE r_cols ADD COLUMN d float8 NOT NULL DEFAULT 0.25"]),
    ("r_added", Relation("r_added", all_columns=("id", "features", "label", "extra", "label2")), [
        "CREATE TABLE r_added (id int, features float8[], label int)",
        "INSERT INTO r_added SELECT g, ARRAY[g % 3, 1]::float8[], g % 2 FROM pg_catalog.generate_series(1, 200) AS g",
        "ALTER TABLE r_added ADD COLUMN extra text DEFAULT 'some default text'",
        "ALTER TABLE r_added ADD COLUMN label2 int DEFAULT 1",
        "ALTER TABLE r_added DROP COLUMN id",
        "ALTER TABLE r_added ADD COLUMN id bigint DEFAULT 7"]),
    ("r_text", Relation("r_text", all_columns=("features", "label")), [
        "CREATE TABLE r_text AS SELECT '{1,2}'::text AS features, 'a'::text AS label "
        "FROM pg_catalog.generate_series(1, 50)"]),
    ("r_bytea", Relation("r_bytea", all_columns=("features", "label")), [
        "CREATE TABLE r_bytea AS SELECT '\\x0000803f0000803f'::bytea AS features, 1 AS label "
        "FROM pg_catalog.generate_series(1, 50)"]),
    ("r_scalar", Relation("r_scalar", all_columns=("features", "label")), [
        "CREATE TABLE r_scalar AS SELECT g::float8 AS features, g % 2 AS label "
        "FROM pg_catalog.generate_series(1, 50) AS g"]),
    ("r_dom", Relation("r_dom", all_columns=("features", "label")), [
        "CREATE TABLE r_dom (features fuzz_arrdom, label int)",
        "INSERT INTO r_dom SELECT ARRAY[g % 3, 1]::float8[], g % 2 FROM pg_catalog.generate_series(1, 100) AS g"]),
    ("r_domel", Relation("r_domel", all_columns=("features", "label")), [
        "CREATE TABLE r_domel (features fuzz_dom[], label int)",
        "INSERT INTO r_domel SELECT ARRAY[g % 3, 1]::fuzz_dom[], g % 2 FROM pg_catalog.generate_series(1, 100) AS g"]),
    ("r_multi", Relation("r_multi", all_columns=("features", "label")), [
        "CREATE TABLE r_multi AS SELECT ARRAY[g % 3, g % 4, 1]::float8[] AS features, "
        "'c' || (g % 3) AS label FROM pg_catalog.generate_series(1, 300) AS g"]),
    ("r_empty", Relation("r_empty", all_columns=("features", "label")), [
        "CREATE TABLE r_empty (features float8[], label int)"]),
    ("r_nulls", Relation("r_nulls", all_columns=("features", "label")), [
        "CREATE TABLE r_nulls AS SELECT CASE WHEN g % 3 = 0 THEN NULL "
        "ELSE ARRAY[g, NULL, 1]::float8[] END AS features, CASE WHEN g % 4 = 0 THEN NULL "
        "ELSE g % 2 END AS label FROM pg_catalog.generate_series(1, 120) AS g"]),
    ("r_ragged", Relation("r_ragged", all_columns=("features", "label")), [
        "CREATE TABLE r_ragged AS SELECT ARRAY(SELECT 1.0::float8 "
        "FROM pg_catalog.generate_series(1, 1 + g % 4)) AS features, g % 2 AS label "
        "FROM pg_catalog.generate_series(1, 80) AS g"]),
    ("r_nan", Relation("r_nan", all_columns=("features", "label")), [
        "CREATE TABLE r_nan AS SELECT ARRAY[CASE g % 3 WHEN 0 THEN 'NaN' WHEN 1 THEN 'Infinity' "
        "ELSE '1e308' END, 1]::float8[] AS features, g % 2 AS label "
        "FROM pg_catalog.generate_series(1, 60) AS g"]),
    ("r_2d", Relation("r_2d", all_columns=("features", "label")), [
        "CREATE TABLE r_2d AS SELECT '{{1,2},{3,4}}'::float8[] AS features, g % 2 AS label "
        "FROM pg_catalog.generate_series(1, 40) AS g"]),
    ("r_toast", Relation("r_toast", all_columns=("features", "label")), [
        "CREATE TABLE r_toast AS SELECT ARRAY(SELECT ((g * i) % 13)::float8 "
        "FROM pg_catalog.generate_series(1, 3000) AS i) AS features, g % 2 AS label "
        "FROM pg_catalog.generate_series(1, 30) AS g"]),
    ("r_comp", Relation("r_comp", array_col="c", all_columns=("c", "label")), [
        "CREATE TABLE r_comp AS SELECT ROW(ARRAY[1.0, 2.0]::float8[], g)::fuzz_comp AS c, "
        "g % 2 AS label FROM pg_catalog.generate_series(1, 40) AS g"]),
    ("r_part", Relation("r_part", all_columns=("id", "features", "label")), [
        "CREATE TABLE r_part (id int, features float8[], label int) PARTITION BY RANGE (id)",
        "CREATE TABLE r_part_1 PARTITION OF r_part FOR VALUES FROM (0) TO (300)",
        "CREATE TABLE r_part_2 PARTITION OF r_part FOR VALUES FROM (300) TO (700)",
        "INSERT INTO r_part SELECT * FROM r_dense"]),
    ("v_dense", Relation("v_dense", all_columns=("id", "features", "label")), [
        "CREATE VIEW v_dense AS SELECT * FROM r_dense WHERE id % 2 = 0"]),
    ("mv_dense", Relation("mv_dense", all_columns=("id", "features", "label")), [
        "CREATE MATERIALIZED VIEW mv_dense AS SELECT * FROM r_dense WHERE id <= 300"]),
    ("r_unlogged", Relation("r_unlogged", all_columns=("id", "features", "label")), [
        "CREATE UNLOGGED TABLE r_unlogged AS SELECT * FROM r_dense WHERE id <= 200"]),
    ("r_dead", Relation("r_dead", all_columns=("id", "features", "label")), [
        "CREATE TABLE r_dead AS SELECT * FROM r_dense",
        "DELETE FROM r_dead WHERE id % 3 <> 0",
        "UPDATE r_dead SET label = -label WHERE id % 2 = 0"]),
]

# Built by the superuser: one the hostile role may not read, one with
# row-level security that hides most rows from it.
ADMIN_POOL_DDL = [
    ("r_secret", Relation("r_secret", all_columns=("features", "label")), [
        "CREATE TABLE public.r_secret AS SELECT ARRAY[1, 2]::float8[] AS features, 1 AS label "
        "FROM pg_catalog.generate_series(1, 50)"]),
    ("r_rls", Relation("r_rls", all_columns=("id", "features", "label")), [
        "CREATE TABLE public.r_rls AS SELECT * FROM public.r_dense",
        "ALTER TABLE public.r_rls ENABLE ROW LEVEL SECURITY",
        "CREATE POLICY only_ones ON public.r_rls USING (label OPERATOR(pg_catalog.=) 1)",
        "GRANT SELECT ON public.r_rls TO {role}"]),
]

# Models the hostile role trains at setup: (name, relation, train arguments).
POOL_MODELS = [
    ("m_svm", "r_dense", "'svm'"),
    ("m_lr", "r_dense", "'logistic'"),
    ("m_sparse", "r_sparse", "'logistic', features => 'vals', feature_indices => 'idx'"),
    ("m_cols", "r_cols", "'svm', features => 'a, b, c, d'"),
    ("m_soft", "r_multi", "'softmax'"),
    ("m_lin", "r_num", "'linear', learning_rate => 0.001"),
    ("m_int", "r_int", "'svm'"),
]

# Functions in public, created by the hostile role, that shadow what an
# unqualified call in our SQL would resolve to under search_path public
# first.  Each body advances the canary.
def hostile_ddl(mark: str) -> list[str]:
    body = f"LANGUAGE plpgsql AS $$BEGIN {mark} RETURN NULL; END$$"
    srf = f"LANGUAGE plpgsql AS $$BEGIN {mark} RETURN; END$$"
    return [
        f"CREATE FUNCTION public.format(text, text, text, bigint) RETURNS text {body}",
        f"CREATE FUNCTION public.format(text, text, text, integer) RETURNS text {body}",
        f"CREATE FUNCTION public.format(text, text) RETURNS text {body}",
        f"CREATE FUNCTION public.format(text, text, text) RETURNS text {body}",
        f"CREATE FUNCTION public.unnest(int[]) RETURNS SETOF int {srf}",
        f"CREATE FUNCTION public.unnest(float8[]) RETURNS SETOF float8 {srf}",
        f"CREATE FUNCTION public.unnest(anyarray) RETURNS SETOF anyelement {srf}",
        f"CREATE FUNCTION public.jsonb_array_elements_text(jsonb) RETURNS SETOF text {srf}",
        f"CREATE FUNCTION public.jsonb_typeof(jsonb) RETURNS text {body}",
        f"CREATE FUNCTION public.now() RETURNS timestamptz {body}",
        f"CREATE FUNCTION public.length(text) RETURNS int {body}",
        f"CREATE FUNCTION public.octet_length(text) RETURNS int {body}",
        f"CREATE FUNCTION public.array_length(anyarray, int) RETURNS int {body}",
        f"CREATE FUNCTION public.coalesce(text, text) RETURNS text {body}",
        f"CREATE FUNCTION public.quote_ident(text) RETURNS text {body}",
        f"CREATE FUNCTION public.has_table_privilege(oid, text) RETURNS bool {body}",
        f"CREATE FUNCTION public.pg_has_role(oid, text) RETURNS bool {body}",
        f"CREATE FUNCTION public.pg_has_role(name, text) RETURNS bool {body}",
        f"CREATE FUNCTION public.hostile_eq(text, text) RETURNS bool {body}",
        "CREATE OPERATOR public.= (LEFTARG = text, RIGHTARG = text, FUNCTION = public.hostile_eq)",
        f"CREATE FUNCTION public.hostile_eq_name(name, name) RETURNS bool {body}",
        "CREATE OPERATOR public.= (LEFTARG = name, RIGHTARG = name, FUNCTION = public.hostile_eq_name)",
        f"CREATE FUNCTION public.hostile_eq_oid(oid, oid) RETURNS bool {body}",
        "CREATE OPERATOR public.= (LEFTARG = oid, RIGHTARG = oid, FUNCTION = public.hostile_eq_oid)",
        f"CREATE FUNCTION public.hostile_arrow(jsonb, text) RETURNS text {body}",
        "CREATE OPERATOR public.->> (LEFTARG = jsonb, RIGHTARG = text, FUNCTION = public.hostile_arrow)",
        f"CREATE FUNCTION public.hostile_arrow_i(jsonb, int) RETURNS jsonb {body}",
        "CREATE OPERATOR public.-> (LEFTARG = jsonb, RIGHTARG = int, FUNCTION = public.hostile_arrow_i)",
        f"CREATE FUNCTION public.hostile_max_sfunc(bigint, bigint) RETURNS bigint {body}",
        "CREATE AGGREGATE public.max(bigint) (SFUNC = public.hostile_max_sfunc, STYPE = bigint)",
        f"CREATE FUNCTION public.hostile_count_sfunc(bigint) RETURNS bigint {body}",
        "CREATE AGGREGATE public.count(*) (SFUNC = public.hostile_count_sfunc, STYPE = bigint)",
    ]


# ---------------------------------------------------------------- the fuzzer

class Fuzzer:
    """Runs generated cases on one database; collects findings."""

    def __init__(self, admin_dsn: str, role: str, role_connect: Callable[[], psycopg.Connection],
                 seed: int, log: Callable[[str], None] | None = None):
        self.admin_dsn = admin_dsn
        self.role = role
        self.role_connect = role_connect
        self.seed = seed
        self.rng = random.Random(seed)
        self.values = Values(self.rng)
        self.log = log or (lambda s: None)
        self.findings: list[Finding] = []
        self.outcomes: dict[str, int] = {}
        self.messages: dict[str, int] = {}
        # the statements each session ran before, for crash reports: a
        # failed statement may leave state that the next one trips on
        self.history: dict[int, collections.deque] = {}
        self.cases_run = 0
        self.admin = self._admin_session()
        self.victim = self._victim_session()
        self.session = self._role_session()
        self.start_time = self._postmaster_start()
        self.relations: list[Relation] = []
        self.models: list[str] = []
        self.model_kinds: dict[str, str] = {}
        self.store: str | None = None
        self.admin_functions: list[str] = []

    # -- sessions

    def _admin_session(self) -> psycopg.Connection:
        return psycopg.connect(self.admin_dsn, autocommit=True)

    def _victim_session(self) -> psycopg.Connection:
        s = psycopg.connect(self.admin_dsn, autocommit=True)
        s.execute(f"SET statement_timeout = '{STATEMENT_TIMEOUT}'")
        return s

    def _role_session(self) -> psycopg.Connection:
        s = self.role_connect()
        s.execute(f"SET statement_timeout = '{STATEMENT_TIMEOUT}'")
        return s

    def _postmaster_start(self):
        return self.admin.execute(SERVER_GENERATION).fetchone()

    def canary(self) -> int:
        row = self.admin.execute("SELECT last_value, is_called FROM public.canary_seq").fetchone()
        return row[0] if row[1] else 0

    # -- setup

    def setup(self) -> None:
        """Types, relations, hostile functions and models.  The canary
        sequence (public.canary_seq) must exist (the canary fixture)."""
        a = self.admin
        role = ident(self.role)
        for stmt in [
            "CREATE DOMAIN public.fuzz_dom AS float8",
            "CREATE DOMAIN public.fuzz_posdom AS float8 CHECK (VALUE > 0)",
            "CREATE DOMAIN public.fuzz_arrdom AS float8[]",
            "CREATE TYPE public.fuzz_comp AS (f float8[], n int)",
            f"GRANT USAGE ON DOMAIN public.fuzz_dom, public.fuzz_posdom, public.fuzz_arrdom TO {role}",
            f"GRANT USAGE ON TYPE public.fuzz_comp TO {role}",
        ]:
            a.execute(stmt)
        s = self.session
        for _name, rel, ddl in POOL_DDL:
            for stmt in ddl:
                s.execute(stmt)
            self.relations.append(rel)
        s.execute("CREATE TEMP TABLE r_temp AS SELECT * FROM r_dense WHERE id <= 100")
        self.relations.append(Relation("r_temp", all_columns=("id", "features", "label")))
        for _name, rel, ddl in ADMIN_POOL_DDL:
            for stmt in ddl:
                a.execute(stmt.format(role=role))
            self.relations.append(rel)
        s.execute("ANALYZE")
        for name, rel, args in POOL_MODELS:
            try:
                s.execute(f"SELECT pg_catalog.count(*) FROM corgipile.train({lit(rel)}, {args}, "
                          f"model_name => {lit(name)}, max_epoch_num => 2, seed => 1)")
                self.models.append(name)
                self.model_kinds[name] = args.split(",")[0].strip("'")
            except psycopg.Error as e:  # the model is missing from the pool, no more
                self.log(f"setup: model {name} not trained: {e}")
        # the hostile functions, last: setup's own statements are not victims
        for stmt in hostile_ddl("PERFORM pg_catalog.nextval('public.canary_seq');"):
            s.execute(stmt)
        for candidate in MODEL_STORE_CANDIDATES:
            kind = a.execute("SELECT c.relkind FROM pg_catalog.pg_class AS c "
                             "WHERE c.oid OPERATOR(pg_catalog.=) pg_catalog.to_regclass(%s)",
                             (candidate,)).fetchone()
            if kind and kind[0] == "r":
                self.store = candidate
                break
        self.admin_functions = [r[0] for r in a.execute(
            "SELECT DISTINCT p.proname FROM pg_catalog.pg_proc AS p "
            "WHERE p.pronamespace OPERATOR(pg_catalog.=) 'corgipile'::regnamespace "
            "AND p.proname OPERATOR(pg_catalog.=) ANY (%s) ORDER BY 1",
            (list(MODEL_ADMIN_FUNCTIONS),))]
        self.start_time = self._postmaster_start()
        self.base_canary = self.canary()

    # -- running

    def _reconnect_all(self) -> None:
        """New sessions after a crash, once the server has recovered."""
        self.history.clear()
        for attr, make in (("admin", self._admin_session), ("victim", self._victim_session),
                           ("session", self._role_session)):
            try:
                getattr(self, attr).close()
            except Exception:  # noqa: BLE001 - the old session may be dead already
                pass
            for attempt in range(120):
                try:
                    setattr(self, attr, make())
                    break
                except psycopg.OperationalError:
                    if attempt == 119:
                        raise
                    time.sleep(0.5)

    def run_case(self, case: Case) -> list[Finding]:
        found: list[Finding] = []
        sqls = case.setup + case.statements
        self.cases_run += 1
        lost = None
        for stmt in case.setup:
            try:
                self.admin.execute(stmt)
            except psycopg.OperationalError as e:
                lost = f"superuser setup lost its connection: {e}"
                break
            except psycopg.Error as e:
                if e.sqlstate == "XX000":
                    found.append(Finding(case.family, case.number, "XX000", str(e).strip(), sqls))
        session = self.victim if case.as_superuser else self.session
        if lost is None:
            # the default path, where only functions that match better than
            # pg_catalog's get called; or public first, where any
            # unqualified name or operator in our SQL would be the role's
            try:
                session.execute(f"SET search_path = {case.search_path}")
            except psycopg.OperationalError as e:
                lost = f"lost the connection: {str(e).strip()}"
        if lost is None:
            history = self.history.setdefault(id(session), collections.deque(maxlen=6))
            for stmt in case.statements:
                before = list(history)
                history.append(stmt)
                try:
                    session.execute(stmt)
                    self.outcomes["ok"] = self.outcomes.get("ok", 0) + 1
                except psycopg.OperationalError as e:
                    if e.sqlstate is None or session.closed or session.broken:
                        lost = f"lost the connection: {str(e).strip().splitlines()[0]}"
                        if len(before) > len(case.statements):
                            lost += ("; the same session ran before: "
                                     + " ;; ".join(before[:len(before) - case.statements.index(stmt)]))
                        break
                    self._count(e)
                except psycopg.Error as e:
                    self._count(e)
                    if e.sqlstate == "XX000":
                        found.append(Finding(case.family, case.number, "XX000",
                                             str(e).strip().splitlines()[0], sqls))
        # the server: a crash shows as a new generation (or a lost session,
        # also when the crash came from elsewhere, e.g. autovacuum reading
        # what the case wrote)
        now, calls, dropped = self._server_state()
        if dropped:
            lost = lost or "the superuser session lost its connection"
        if now != self.start_time or lost:
            detail = lost or "the server went through crash recovery"
            if now != self.start_time:
                detail += " (the server restarted: crash recovery)"
            found.append(Finding(case.family, case.number, "crash", detail, sqls))
            # the sessions that saw the crash may not all have noticed it yet
            time.sleep(0.5)
            self._reconnect_all()
            now, calls, _ = self._server_state()
            self.start_time = now
            # crash recovery may lose the canary's last increments
            self.base_canary = min(self.base_canary, calls)
        if calls > self.base_canary:
            found.append(Finding(case.family, case.number, "canary",
                                 f"a function of the hostile role ran {calls - self.base_canary} time(s) "
                                 f"as {'the superuser' if case.as_superuser else 'the role'}", sqls))
            self.base_canary = calls
        self.findings.extend(found)
        for f in found:
            self.log(str(f))
        return found

    def _server_state(self):
        """The server's generation and the canary, reconnecting (and saying
        so) while the server recovers from a crash."""
        dropped = False
        for attempt in range(120):
            try:
                return self._postmaster_start(), self.canary(), dropped
            except psycopg.OperationalError:
                if attempt == 119:
                    raise
                dropped = True
                time.sleep(0.5)
                self._reconnect_all()

    def _count(self, e: psycopg.Error) -> None:
        key = e.sqlstate or "none"
        self.outcomes[key] = self.outcomes.get(key, 0) + 1
        msg = f"{key} {str(e).strip().splitlines()[0][:90] if str(e).strip() else ''}"
        self.messages[msg] = self.messages.get(msg, 0) + 1

    def run(self, family: str, n: int) -> list[Finding]:
        gen = getattr(self, f"gen_{family}")
        found = []
        for i in range(n):
            case = gen(i)
            if self.rng.random() < 0.25:
                case.search_path = "public, pg_catalog"
            found.extend(self.run_case(case))
        return found

    # -- generators: each returns one Case

    def _rel(self) -> Relation:
        return self.rng.choice(self.relations)

    def _model_name(self) -> str:
        r = self.rng.random()
        if r < 0.7 and self.models:
            return lit(self.rng.choice(self.models))
        return self.rng.choice(["'no_such_model'", "''", "NULL::text", lit("x" * 200),
                                lit("m_svm' OR '1"), "'%s'", "'M_SVM'", "' m_svm'",
                                "pg_catalog.repeat('m', 10000)"])

    def _relname(self) -> str:
        r = self.rng.random()
        if r < 0.85:
            return lit(self._rel().name)
        return self.rng.choice(["'no_such_table'", "'pg_catalog.pg_class'", "'corgipile.models'",
                                "'corgipile.model_store'", "'pg_catalog.pg_authid'",
                                "1::oid::regclass", "0::oid::regclass", "'public.canary_seq'",
                                "'r_part_1'", "'information_schema.tables'"])

    def _as_superuser(self) -> bool:
        return self.rng.random() < 0.2

    TRAIN_PARAMS = {
        "learning_rate": FLOAT_EDGES + ["0.1", "0.01", "NULL::float8", "'abc'"],
        "decay": ["0.95", "1", "0", "2", "-1", "'NaN'", "NULL::float8"],
        "max_epoch_num": ["1", "2", "3", "0", "-1", "NULL::int", "2147483647", "1.5"],
        "batch_size": ["1", "4", "32", "1000", "0", "-5", "2147483647", "NULL::int"],
        "l2": ["0", "0.01", "-1", "'NaN'", "'Infinity'", "NULL::float8"],
        "l1": ["0", "0.001", "-1", "'NaN'", "1e308", "NULL::float8"],
        "block_size": ["NULL", "'1'", "'0'", "'-1'", "'1%'", "'100%'", "'101%'", "'1kB'", "'1TB'",
                       "'junk'", "''", "'8192 b'", "'NaN'", "'1e400'", "'2147483648'", "'0.0001%'",
                       "'9223372036854775807 pages'"],
        "buffer_size": ["'10%'", "'1'", "'0'", "'100%'", "'1kB'", "'1MB'", "'1TB'", "'junk'", "''",
                        "'-3'", "'NaN%'", "NULL", "'1 pages'", "'0.001%'"],
        "seed": ["NULL", "0", "1", "-1", "9223372036854775807", "-9223372036854775808"],
        "double_buffer": ["true", "false", "NULL::bool"],
        "tolerance": ["NULL", "0", "0.001", "-1", "'NaN'", "'Infinity'"],
        "n_iter_no_change": ["1", "5", "0", "-1", "NULL::int", "2147483647"],
        "n_features": ["NULL", "0", "-1", "1", "3", "10", "1431655765", "2147483647", "1073741824"],
        "shuffle": ["'corgipile'", "'block_only'", "'no_shuffle'", "'sliding_window'", "'mrs'",
                    "'shuffle_once'", "'epoch_shuffle'", "'junk'", "''", "NULL::text", "'CORGIPILE'"],
        "missing": ["'skip'", "'mean'", "'median'", "'zero'", "'MEDIAN'", "'mode'", "''",
                    "NULL::text"],
        "missing_indicator": ["true", "false", "NULL::bool"],
    }

    def _train_call(self) -> str:
        r = self.rng
        rel = self._rel() if r.random() < 0.9 else None
        relname = lit(rel.name) if rel else self._relname()
        model = r.choice(["'svm'", "'logistic'", "'lr'", "'linear'", "'softmax'", "'SVM'", "''",
                          "'junk'", "NULL::text"] + ["'svm'", "'logistic'", "'softmax'"] * 2)
        args = [relname, model]
        cols = list(rel.all_columns) if rel else ["features", "label"]
        # the layout
        if rel and rel.indices and r.random() < 0.8:
            args.append(f"features => {lit(rel.array_col)}")
            args.append(f"feature_indices => {lit(rel.indices)}")
        elif rel and rel.columns and r.random() < 0.8:
            args.append(f"features => {lit(rel.columns)}")
        elif r.random() < 0.5:
            feats = r.choice([
                r.choice(cols), ", ".join(r.sample(cols, min(len(cols), r.randint(1, 3)))),
                "", " , ", "features, features", "nope", "label", "x" * 100, "a, b, c, d, label",
                "ctid", "xmin", "tableoid"])
            args.append(f"features => {lit(feats)}")
            if r.random() < 0.3:
                args.append(f"feature_indices => {lit(r.choice(cols + ['nope', 'ctid', '']))}")
        if r.random() < 0.3:
            args.append(f"label => {lit(r.choice(cols + ['nope', '', 'ctid', 'xmin']))}")
        if r.random() < 0.4:
            args.append(f"model_name => {r.choice(self._train_model_names())}")
        params = list(self.TRAIN_PARAMS)
        for p in r.sample(params, r.randint(0, 6)):
            args.append(f"{p} => {r.choice(self.TRAIN_PARAMS[p])}")
        if not any(a.startswith("max_epoch_num") for a in args):
            args.append(f"max_epoch_num => {r.choice(['1', '2'])}")
        if r.random() < 0.15:
            args.append(f"validation => {self._relname()}")
        return f"corgipile.train({', '.join(args)})"

    def _train_model_names(self) -> list[str]:
        fresh = lit(f"fz_{uuid.UUID(int=self.rng.getrandbits(128)).hex[:10]}")
        return [fresh, fresh, fresh, "NULL::text", "''", lit("x" * 64), lit("x" * 63), lit("x" * 255),
                lit("x" * 256), lit("é" * 128),
                lit(self.rng.choice(self.models or ["m_svm"])), "'with \"quotes\" and ''s'",
                "'%s_%s_%s'", lit("é" * 40)]

    def gen_train(self, i: int) -> Case:
        r = self.rng
        call = self._train_call()
        form = r.random()
        if form < 0.45:
            stmts = [f"SELECT * FROM {call}"]
        elif form < 0.6:
            stmts = [f"SELECT pg_catalog.count(*) FROM {call} AS r"]
        elif form < 0.7:
            stmts = [f"SELECT ({call}).loss LIMIT 1"]
        elif form < 0.8:
            stmts = [f"EXPLAIN (COSTS OFF) SELECT * FROM {call}"]
        elif form < 0.88:
            stmts = [f"SELECT * FROM {call} LIMIT 1"]
        elif form < 0.92:
            stmts = [f"PREPARE fz_p AS SELECT * FROM {call}", "EXECUTE fz_p", "EXECUTE fz_p",
                     "DEALLOCATE fz_p"]
        elif form < 0.96:
            # the function's row as a whole, and as the source of DML
            stmts = [r.choice([f"SELECT r FROM {call} AS r", f"SELECT r::text FROM {call} AS r LIMIT 1",
                               f"SELECT pg_catalog.count(*) FROM {call} AS r WHERE r IS NOT NULL",
                               "BEGIN", ])]
            if stmts[0] == "BEGIN":
                stmts += [r.choice([
                    f"DELETE FROM r_unlogged AS t USING {call} AS r WHERE t.id OPERATOR(pg_catalog.=) r.epoch",
                    f"UPDATE r_unlogged AS t SET label = t.label FROM {call} AS r "
                    f"WHERE t.id OPERATOR(pg_catalog.=) r.epoch",
                    f"MERGE INTO r_unlogged AS t USING {call} AS r ON t.id OPERATOR(pg_catalog.=) r.epoch "
                    "WHEN MATCHED THEN DELETE"]), "ROLLBACK"]
        else:
            stmts = ["BEGIN", f"SELECT * FROM {call}", "ROLLBACK"]
        return Case("train", i, stmts, as_superuser=self._as_superuser())

    def _feature_arg(self) -> str:
        r = self.rng.random()
        if r < 0.55:
            return self.values.array(self.rng.choice(["float8", "float4", "int4", "numeric", "int8",
                                                      "int2", "fuzz_dom", "bool", "text"]))
        if r < 0.75:
            return self.values.any()
        if r < 0.85:
            return self.values.record()
        return self.rng.choice(["'{1,2,3}'", "NULL", "'{1,2,3}'::fuzz_arrdom", "ARRAY[]::float8[]",
                                "'{NaN,Infinity,-Infinity}'::float8[]"])

    def gen_predict(self, i: int) -> Case:
        r = self.rng
        fn = r.choice(["predict", "predict_class", "predict_proba"])
        model = self._model_name()
        form = r.random()
        if form < 0.35:
            expr = f"corgipile.{fn}({model}, {self._feature_arg()})"
            stmts = [f"SELECT {expr}"]
        elif form < 0.55:
            idx = r.choice([self.values.array("int4"), "'{0,1,2}'::int4[]", "'{-1}'::int4[]",
                            "'{2147483647}'::int4[]", "'{1431655765}'::int4[]", "'{}'::int4[]",
                            "'{0,0,0}'::int4[]", "ARRAY[NULL]::int4[]", "'{{0,1}}'::int4[]",
                            self.values.array("int8"), self.values.array("int2")])
            stmts = [f"SELECT corgipile.{fn}({model}, {idx}, {self._feature_arg()})"]
        elif form < 0.8:
            rel = self._rel()
            what = r.choice(["t", "t", "ROW(t.*)", "(t.*)::text", f"t.{ident(r.choice(rel.all_columns))}"])
            stmts = [f"SELECT corgipile.{fn}({model}, {what}) FROM {ident(rel.name)} AS t "
                     f"LIMIT {r.choice([1, 5, 100])}"]
        elif form < 0.9:
            # the model changes from row to row: the per-query cache
            names = ", ".join(lit(m) for m in (self.models or ["m_svm"])) + ", 'no_such_model'"
            stmts = [f"SELECT pg_catalog.count(corgipile.{fn}((ARRAY[{names}])[1 + g % {len(self.models) + 1}], "
                     f"{self._feature_arg()})) FROM pg_catalog.generate_series(1, {r.choice([10, 2000])}) AS g"]
        else:
            # a subquery with odd columns as the row
            cols = ", ".join(f"{self.values.any()} AS {ident(c)}" for c in
                             r.sample(["features", "label", "a", "b", "c", "d", "vals", "idx", "x"], r.randint(0, 4)))
            stmts = [f"SELECT corgipile.{fn}({model}, s) FROM (SELECT {cols or '1 AS one'}) AS s"]
        return Case("predict", i, stmts, as_superuser=self._as_superuser())

    # -- damaged model rows

    MUTATIONS = {
        "model": ["'svm'", "'softmax'", "'logistic'", "'linear'", "'junk'", "''", "'SOFTMAX'"],
        "n_features": ["1", "2", "3", "4", "1431655765", "2147483647", "1073741824", "536870912"],
        "weights": ["'{}'", "'{NaN}'", "'{1}'", "'{1,2}'", "'{1,2,3,4}'", "'{NULL,1,2,3}'",
                    "'{{1,2},{3,4}}'", "'[5:8]={1,2,3,4}'", "'{Infinity,-Infinity,NaN,0}'",
                    "pg_catalog.array_fill(0.5::float8, ARRAY[300000])", "'{1,2,3,4,5,6,7,8,9,10,11,12}'"],
        "classes": ["NULL", "'null'", "'[]'", "'[1]'", "'[-1,1]'", "'[0,1]'", "'[false,true]'",
                    "'[\"a\",\"b\",\"c\"]'", "'{\"a\":1}'", "'\"x\"'", "'[[1],[2]]'", "'[null,null]'",
                    "'[1e308,-1e308]'", "'[\"c0\",\"c1\",\"c2\",\"c3\",\"c4\"]'", "'[1,2,3]'",
                    "'[9007199254740993, 9007199254740992]'", "'[{}, []]'", "'[\"\", \"\"]'"],
        "params": ["'{}'", "'{\"layout\":\"sparse\"}'", "'{\"layout\":\"columns\"}'", "'{\"layout\":\"array\"}'",
                   "'{\"layout\":5}'", "'{\"layout\":null}'", "'[]'", "'null'", "'\"sparse\"'",
                   "'{\"layout\":\"sparse\",\"n_features\":-1}'", "'{\"layout\":{\"x\":1}}'"],
        "features": ["'{}'", "'{features}'", "'{a,b,c,d}'", "'{nope}'", "'{NULL}'", "'{\"a,b\"}'",
                     "'{vals}'", "'{label}'", "'{a,a,a,a}'", "'{features,features,features}'",
                     "'{ctid}'", "'{\"\"}'", "ARRAY(SELECT 'c' || g FROM pg_catalog.generate_series(1, 2000) AS g)"],
        "feature_indices": ["NULL", "'idx'", "'nope'", "''", "'vals'", "'features'", "'label'"],
        "label": ["'label'", "''", "'nope'", "'features'"],
        "relation": ["'r_dense'", "''", "'nope'", "'pg_catalog.pg_authid'"],
        "history": ["'[]'", "'null'", "'{}'"],
    }

    def gen_model_rows(self, i: int) -> Case:
        r = self.rng
        if not self.store or not self.models:
            return Case("model_rows", i, ["SELECT 1"])
        src = r.choice(self.models)
        name = f"bad_{i}_{r.getrandbits(32):08x}"
        cols = r.sample(list(self.MUTATIONS), r.randint(1, 4))
        sets = ", ".join(f"{c} = {r.choice(self.MUTATIONS[c])}" for c in cols)
        setup = [
            f"DELETE FROM {self.store} WHERE model_name OPERATOR(pg_catalog.=) {lit(name)}",
            # a copy of a sound row under the new name, whatever the storage's columns
            f"INSERT INTO {self.store} SELECT (pg_catalog.jsonb_populate_record(NULL::{self.store}, "
            f"pg_catalog.to_jsonb(s) OPERATOR(pg_catalog.||) "
            f"pg_catalog.jsonb_build_object('model_name', {lit(name)}))).* "
            f"FROM {self.store} AS s WHERE s.model_name OPERATOR(pg_catalog.=) {lit(src)}",
            # a check constraint may refuse the mutation: the row then stays sound
            f"UPDATE {self.store} SET {sets} WHERE model_name OPERATOR(pg_catalog.=) {lit(name)}",
        ]
        # the row: predict in every form, evaluate, train-free uses
        model = lit(name)
        stmts = []
        if "import_model" in self.admin_functions and r.random() < 0.35:
            # the role itself stores the damaged row, through the function
            # that validates it
            setup = []
            args = []
            for col in ("model_name", "model", "relation", "label", "features", "feature_indices",
                        "n_features", "weights", "classes", "params", "history"):
                if col == "model_name":
                    args.append(model)
                elif col in cols:
                    args.append(r.choice(self.MUTATIONS[col] + ["NULL"]))
                else:
                    args.append(f"m.{col}")
            stmts.append(f"SELECT corgipile.import_model({', '.join(args)}) FROM corgipile.models AS m "
                         f"WHERE m.model_name OPERATOR(pg_catalog.=) {lit(src)}")
        for _ in range(r.randint(1, 3)):
            fn = r.choice(["predict", "predict_class", "predict_proba"])
            form = r.random()
            if form < 0.4:
                stmts.append(f"SELECT corgipile.{fn}({model}, {self._feature_arg()})")
            elif form < 0.6:
                stmts.append(f"SELECT corgipile.{fn}({model}, "
                             f"{r.choice(['ARRAY[0,1,2]', 'ARRAY[5,7]', 'ARRAY[1431655764]', 'ARRAY[-1]'])}::int4[], "
                             f"{r.choice(['ARRAY[1,2,3]', 'ARRAY[1,1]', 'ARRAY[1]'])}::float8[])")
            elif form < 0.85:
                rel = self._rel()
                stmts.append(f"SELECT corgipile.{fn}({model}, t) FROM {ident(rel.name)} AS t LIMIT 3")
            else:
                stmts.append(f"SELECT * FROM corgipile.evaluate({model}, {self._relname()})")
        if r.random() < 0.2:
            stmts.append(f"SELECT corgipile.drop_model({model})")
        return Case("model_rows", i, stmts, as_superuser=self._as_superuser(), setup=setup)

    def gen_evaluate(self, i: int) -> Case:
        r = self.rng
        model = self._model_name()
        rel = self._relname()
        form = r.random()
        if form < 0.7:
            stmts = [f"SELECT * FROM corgipile.evaluate({model}, {rel})"]
        elif form < 0.85:
            stmts = [f"SELECT e.* FROM (VALUES ({model}), ({self._model_name()})) AS m(n), "
                     f"LATERAL corgipile.evaluate(m.n, {rel}) AS e"]
        else:
            stmts = [f"SELECT corgipile.evaluate({model}, {rel}) LIMIT 1"]
        return Case("evaluate", i, stmts, as_superuser=self._as_superuser())

    def gen_shuffle(self, i: int) -> Case:
        r = self.rng
        if r.random() < 0.5:
            src = self._relname()
            dst_name = f"fz_copy_{i}_{r.getrandbits(24):06x}"
            dst = r.choice([lit(dst_name)] * 5 + [
                "'r_dense'", "''", "NULL::text", lit("public." + dst_name), lit("pg_catalog." + dst_name),
                lit("corgipile." + dst_name), lit('"' + dst_name + '"'), lit(dst_name + '"; DROP TABLE r_dense; --'),
                lit("x" * 100), lit("no_schema." + dst_name), lit("pg_temp." + dst_name)])
            seed = r.choice(["NULL", "1", "-1", "9223372036854775807"])
            stmts = [f"SELECT corgipile.shuffle_table({src}, {dst}, {seed})"]
            # read the copy back, every column: a wrongly formed tuple shows here
            for target in (dst_name, "public." + dst_name, "pg_temp." + dst_name):
                stmts.append(f"SELECT pg_catalog.count(*), pg_catalog.sum(pg_catalog.length(t::text)) "
                             f"FROM {'.'.join(ident(p) for p in target.split('.'))} AS t")
            stmts.append(f"DROP TABLE IF EXISTS {ident(dst_name)}")
        else:
            args = [self._relname()]
            if r.random() < 0.7:
                args.append(r.choice(self.TRAIN_PARAMS["shuffle"]))
            if r.random() < 0.5:
                args.append(f"block_size => {r.choice(self.TRAIN_PARAMS['block_size'])}")
            if r.random() < 0.5:
                args.append(f"buffer_size => {r.choice(self.TRAIN_PARAMS['buffer_size'])}")
            if r.random() < 0.7:
                args.append(f"seed => {r.choice(self.TRAIN_PARAMS['seed'])}")
            call = f"corgipile.shuffled_scan({', '.join(args)})"
            stmts = [r.choice([f"SELECT pg_catalog.count(*), pg_catalog.count(s.id) FROM {call} AS s",
                               f"SELECT * FROM {call} LIMIT 5",
                               f"SELECT DISTINCT s.id FROM {call} AS s",
                               f"SELECT s FROM {call} AS s LIMIT 3",
                               f"SELECT pg_catalog.count(*) FROM r_unlogged AS t WHERE t.id OPERATOR(pg_catalog.=) ANY "
                               f"(SELECT s.id FROM {call} AS s)",
                               f"SELECT t.* FROM {call} AS s JOIN r_cols AS t "
                               f"ON t.ctid OPERATOR(pg_catalog.=) s.ctid LIMIT 5"])]
        return Case("shuffle", i, stmts, as_superuser=self._as_superuser())

    # corgipile.block_rows() and corgipile.sizing(), what corgipile.torch reads
    FIRST_PAGES = ["ARRAY[0]::int8[]", "ARRAY[0, 1, 2]::int8[]", "ARRAY[0, 0, 0]::int8[]",
                   "ARRAY[]::int8[]", "NULL::int8[]", "ARRAY[NULL]::int8[]", "ARRAY[-1]::int8[]",
                   "ARRAY[4294967295]::int8[]", "ARRAY[4294967296]::int8[]",
                   "ARRAY[9223372036854775807]::int8[]", "ARRAY[1, NULL, 2]::int8[]",
                   "ARRAY[[0, 1], [2, 3]]::int8[]", "'[5:5]={0}'::int8[]",
                   "ARRAY(SELECT g FROM pg_catalog.generate_series(0, 3000) AS g)::int8[]",
                   "ARRAY(SELECT 0 FROM pg_catalog.generate_series(1, 2000))::int8[]"]
    PAGES_PER_BLOCK = ["1", "2", "4", "0", "-1", "NULL::int", "2147483647", "131072", "1048576"]

    def gen_torch_io(self, i: int) -> Case:
        r = self.rng
        rel = self._rel() if r.random() < 0.85 else None
        relname = lit(rel.name) if rel else self._relname()
        if r.random() < 0.3:
            args = [relname]
            for name, values in (
                    ("block_size", self.TRAIN_PARAMS["block_size"]),
                    ("buffer_size", self.TRAIN_PARAMS["buffer_size"] + ["NULL::text"]),
                    ("pages", ["NULL::int8", "0", "1", "-1", "1000000", "4294967295",
                               "4294967296", "9223372036854775807"])):
                if r.random() < 0.6:
                    args.append(f"{name} => {r.choice(values)}")
            return Case("torch_io", i, [f"SELECT * FROM corgipile.sizing({', '.join(args)})"],
                        as_superuser=self._as_superuser())
        # mostly blocks that exist, so that most calls read rows
        pages = r.choice(self.FIRST_PAGES[:3] * 4 + self.FIRST_PAGES)
        ppb = r.choice(self.PAGES_PER_BLOCK[:3] * 3 + self.PAGES_PER_BLOCK)
        args = [relname, pages, ppb]
        cols = list(rel.all_columns) if rel else ["features", "label"]
        if rel and rel.indices and r.random() < 0.7:
            args.append(f"features => {lit(rel.array_col)}")
            args.append(f"feature_indices => {lit(rel.indices)}")
            if r.random() < 0.7:
                args.append(f"n_features => {r.choice(self.TRAIN_PARAMS['n_features'])}")
        elif rel and rel.columns and r.random() < 0.7:
            args.append(f"features => {lit(rel.columns)}")
        elif r.random() < 0.4:
            odd = ['', 'nope', 'ctid', 'features, features', 'x' * 100]
            args.append(f"features => {lit(r.choice(cols + odd))}")
        if r.random() < 0.3:
            args.append(f"label => {lit(r.choice(cols + ['nope', '', 'ctid', 'xmin']))}")
        if r.random() < 0.35:
            args.append(f"model => {self._model_name()}")
        if r.random() < 0.35:
            args.append(f"id_column => {lit(r.choice(cols + ['nope', '', 'ctid', 'tableoid']))}")
        if r.random() < 0.4:
            dtypes = ["NULL::text"] + [lit(t) for t in ("float4", "float8", "FLOAT8", "int4", "")]
            args.append(f"dtype => {r.choice(dtypes)}")
        call = f"corgipile.block_rows({', '.join(args)})"
        stmts = [r.choice([
            f"SELECT b.page, b.n_rows, b.dim, pg_catalog.length(b.y), pg_catalog.length(b.x), "
            f"pg_catalog.length(b.ids) FROM {call} AS b",
            f"SELECT pg_catalog.sum(b.n_rows), pg_catalog.sum(pg_catalog.length(b.x)) FROM {call} AS b",
            f"SELECT b FROM {call} AS b LIMIT 2",
            f"SELECT pg_catalog.count(*) FROM pg_catalog.generate_series(1, 3) AS g, LATERAL {call} AS b"])]
        return Case("torch_io", i, stmts, as_superuser=self._as_superuser())

    COLUMN_TYPES = ["float8[]", "float4[]", "int4[]", "int8[]", "numeric[]", "int2[]", "fuzz_dom[]",
                    "fuzz_arrdom", "text", "bytea", "float8", "int4", "bool", "jsonb", "text[]", "bool[]"]
    LABEL_TYPES = ["int4", "int8", "bool", "text", "float8", "numeric", "int2", "float4[]", "jsonb"]

    def gen_relations(self, i: int) -> Case:
        """A fresh random table, then a few of our functions on it."""
        r = self.rng
        name = f"fz_rel_{i}_{r.getrandbits(24):06x}"
        kind = r.choice(["TABLE", "TABLE", "TABLE", "UNLOGGED TABLE", "TEMP TABLE"])
        ftype = r.choice(self.COLUMN_TYPES)
        ltype = r.choice(self.LABEL_TYPES)
        extra = [(f"x{k}", r.choice(["float8", "int4", "real", "text", "numeric", "bool"]))
                 for k in range(r.randint(0, 3))]
        cols = [("junk", "text"), ("features", ftype), ("label", ltype)] + extra
        r.shuffle(cols)
        stmts = [f"CREATE {kind} {ident(name)} ({', '.join(f'{ident(c)} {t}' for c, t in cols)})"]
        n = r.choice([0, 1, 5, 100, 400])
        null_rate = r.choice([0.0, 0.1, 0.5, 1.0])

        def value(t: str, g: str) -> str:
            base = {
                "float8[]": f"ARRAY[{g} % 3, 1, {g} % 2]::float8[]",
                "float4[]": f"ARRAY[{g} % 3, 1]::float4[]",
                "int4[]": f"ARRAY[{g} % 3, 1]::int4[]",
                "int8[]": f"ARRAY[{g} % 3, 9007199254740993]::int8[]",
                "numeric[]": f"ARRAY[{g} % 3, 1e300]::numeric[]",
                "int2[]": f"ARRAY[{g} % 3]::int2[]",
                "fuzz_dom[]": f"ARRAY[{g} % 3, 2]::fuzz_dom[]",
                "fuzz_arrdom": f"ARRAY[{g} % 3, 2]::float8[]",
                "text": f"({g} % 3)::text",
                "bytea": "'\\x0000803f'::bytea",
                "float8": f"{g}::float8",
                "int4": f"{g} % 2",
                "int8": f"({g} % 2) + 9007199254740992",
                "int2": f"({g} % 2)::int2",
                "bool": f"{g} % 2 = 0",
                "jsonb": f"pg_catalog.to_jsonb({g})",
                "text[]": "'{a,b}'::text[]",
                "bool[]": "'{t,f}'::bool[]",
                "numeric": f"{g} % 2",
                "real": f"{g} % 2",
            }[t]
            if t == "float8[]" and r.random() < 0.15:
                base = f"ARRAY(SELECT 1.0::float8 FROM pg_catalog.generate_series(1, 2500 + {g} % 2))"
            if null_rate:
                return f"CASE WHEN pg_catalog.random() < {null_rate} THEN NULL ELSE {base} END"
            return base

        if n:
            exprs = []
            for c, t in cols:
                exprs.append("pg_catalog.repeat('j', 30)" if c == "junk" else value(t, "g"))
            stmts.append(f"INSERT INTO {ident(name)} SELECT {', '.join(exprs)} "
                         f"FROM pg_catalog.generate_series(1, {n}) AS g")
        # change the physical layout after the rows were written
        if r.random() < 0.7:
            stmts.append(f"ALTER TABLE {ident(name)} DROP COLUMN junk")
        if r.random() < 0.5:
            stmts.append(f"ALTER TABLE {ident(name)} ADD COLUMN added float8 DEFAULT "
                         f"{r.choice(['1.5', 'NULL', 'pg_catalog.random()'])}")
        if r.random() < 0.3:
            stmts.append(f"ALTER TABLE {ident(name)} ADD COLUMN added_arr float8[] NOT NULL DEFAULT '{{1,2,3}}'")
        if r.random() < 0.3 and n:
            stmts.append(f"DELETE FROM {ident(name)} WHERE pg_catalog.random() < 0.5")
        if r.random() < 0.2 and "TEMP" not in kind:
            stmts.append(f"ALTER TABLE {ident(name)} ALTER COLUMN features SET STORAGE EXTERNAL")
        names = ["features", "label"] + [c for c, _ in extra]
        numeric_extra = [c for c, t in extra if t in ("float8", "int4", "real", "numeric")]
        for _ in range(r.randint(2, 5)):
            op = r.random()
            if op < 0.35:
                feats = r.choice(["features", ", ".join(numeric_extra) or "features",
                                  ", ".join(numeric_extra + ["added"]) or "added", "junk", "label"])
                model = r.choice(["svm", "logistic", "linear", "softmax"])
                mname = f"fz_m_{i}_{r.getrandbits(16):04x}"
                stmts.append(f"SELECT pg_catalog.count(*) FROM corgipile.train({lit(name)}, {lit(model)}, "
                             f"features => {lit(feats)}, model_name => {lit(mname)}, max_epoch_num => 2, "
                             f"shuffle => {r.choice(self.TRAIN_PARAMS['shuffle'][:7])}, "
                             f"block_size => {r.choice(['NULL', chr(39) + '1' + chr(39)])}, seed => 1)")
                stmts.append(f"SELECT corgipile."
                             f"{r.choice(['predict', 'predict_class', 'predict_proba'])}({lit(mname)}, t) "
                             f"FROM {ident(name)} AS t LIMIT 20")
                stmts.append(f"SELECT * FROM corgipile.evaluate({lit(mname)}, {lit(name)})")
            elif op < 0.55:
                dst = f"{name}_copy"
                stmts.append(f"SELECT corgipile.shuffle_table({lit(name)}, {lit(dst)}, 1)")
                stmts.append(f"SELECT pg_catalog.count(*), "
                             f"pg_catalog.sum(pg_catalog.length(t::text)) FROM {ident(dst)} AS t")
                stmts.append(f"DROP TABLE IF EXISTS {ident(dst)}")
            elif op < 0.7:
                stmts.append(f"SELECT pg_catalog.count(*), pg_catalog.count(s.id) "
                             f"FROM corgipile.shuffled_scan({lit(name)}, "
                             f"{r.choice(self.TRAIN_PARAMS['shuffle'][:7])}, seed => 1) AS s")
            else:
                model = lit(r.choice(self.models or ["m_svm"]))
                fn = r.choice(["predict", "predict_class", "predict_proba"])
                stmts.append(r.choice([
                    f"SELECT corgipile.{fn}({model}, t) FROM {ident(name)} AS t LIMIT 20",
                    f"SELECT corgipile.{fn}({model}, t.{ident(r.choice(names))}) FROM {ident(name)} AS t LIMIT 20",
                    f"SELECT * FROM corgipile.evaluate({model}, {lit(name)})"]))
        stmts.append(f"DROP TABLE IF EXISTS {ident(name)}")
        return Case("relations", i, stmts, as_superuser=self._as_superuser())

    def gen_model_admin(self, i: int) -> Case:
        r = self.rng
        fns = [f for f in self.admin_functions if f != "import_model"] or ["drop_model"]
        fn = r.choice(fns)
        model = self._model_name()
        role = r.choice([lit(self.role), "'postgres'", "'public'", "'no_such_role'", "''", "'0'", "'1'",
                         "'pg_read_all_data'", "NULL::text", lit("x" * 100)])
        new = r.choice(["'renamed_model'", "''", lit("x" * 100), model, "NULL::text", "'m_svm'"])
        if fn == "drop_model":
            # keep the pool: drop only models that do not exist or copies
            names = [chr(39) + "no_such_model" + chr(39), chr(39) + chr(39), "NULL::text", lit("x" * 300)]
            stmts = [f"SELECT corgipile.drop_model({r.choice(names)})"]
        elif fn == "rename_model":
            stmts = [f"SELECT corgipile.rename_model({model}, {new})"]
            if model.strip("'") in self.models:
                stmts.append(f"SELECT corgipile.rename_model({new}, {model})")
        elif fn in ("grant_model", "revoke_model"):
            stmts = [f"SELECT corgipile.{fn}({model}, {role})"]
        elif fn == "annotate_model":
            notes = r.choice(["NULL", "'{}'", "'{\"layout\":\"sparse\"}'", "'{\"n_features\":-1}'",
                              "'[1,2]'", "'null'", "'\"x\"'", "pg_catalog.jsonb_build_object('k', "
                                                              "pg_catalog.repeat('x', 100000))"])
            rel = r.choice(["NULL", "'r_dense'", "''", lit("x" * 1000), "'(arrays)'", "'pg_catalog.pg_authid'"])
            stmts = [f"SELECT corgipile.annotate_model({model}, {rel}, {notes}::jsonb)",
                     f"SELECT corgipile.predict({model}, ARRAY[1, 2, 3]::float8[])"]
        elif fn == "model_hash":
            stmts = [f"SELECT corgipile.model_hash({model})"]
        elif fn == "apply_model_copy":
            # a copy of a model the role sees, one field damaged, written under
            # a new name, then used
            field, value = r.choice(COPY_DAMAGE)
            stmts = [f"SELECT corgipile.apply_model_copy('fz_copy', pg_catalog.jsonb_set({COPY_OF_ROW}, "
                     f"'{{{field}}}', {value}::pg_catalog.jsonb)) FROM corgipile.models "
                     f"WHERE model_name OPERATOR(pg_catalog.=) {model}",
                     "SELECT corgipile.predict('fz_copy', ARRAY[1, 2, 3]::pg_catalog.float8[])",
                     "SELECT corgipile.apply_model_copy('fz_copy', NULL)"]
        else:
            stmts = [f"SELECT corgipile.reassign_models({role}, {role})"]
        stmts.append("SELECT pg_catalog.count(*) FROM corgipile.models")
        return Case("model_admin", i, stmts, as_superuser=self._as_superuser())


def summary(fuzzer: Fuzzer) -> str:
    lines = [f"{fuzzer.cases_run} cases, {len(fuzzer.findings)} findings; outcomes by SQLSTATE: "
             + ", ".join(f"{k} {v}" for k, v in sorted(fuzzer.outcomes.items(), key=lambda kv: -kv[1]))]
    lines += [str(f) for f in fuzzer.findings]
    return "\n".join(lines)


def iter_families(spec: Iterable[str]) -> list[str]:
    out = []
    for s in spec:
        if s not in FAMILIES:
            raise ValueError(f"unknown family {s}; known: {', '.join(FAMILIES)}")
        out.append(s)
    return out
