"""The tables a benchmark trains on: generated ones and tables the user names.

A Dataset knows how to write its label and features as SQL for each
baseline: the engine takes the column names as given; the Bismarck
aggregate and MADlib take a float array; scikit-learn takes numpy arrays
exported with COPY.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import psycopg
from psycopg import sql

from ._db import BackendCpu, Stopwatch, one, value


@dataclass
class Dataset:
    name: str
    table: str                  # the server's own quoting of the relation (regclass::text)
    test_table: str | None      # held-out table; None: score on the training table itself
    label: str
    features: str               # as the engine takes it: one array column, or "a, b, c"
    label_is_bool: bool
    feature_columns: list[str]  # the array column, or the list of numeric columns
    array_element: str | None   # float8, float4, int4, numeric... for an array column
    dims: int
    rows: int
    test_rows: int
    size_bytes: int
    generated: bool = False
    order: str = "as stored"
    info: dict[str, Any] = field(default_factory=dict)

    # --- SQL for the baselines -------------------------------------------
    def rel(self, table: str | None = None) -> sql.SQL:
        """A relation name already quoted by the server (regclass output)."""
        return sql.SQL(table or self.table)

    @property
    def scored_table(self) -> str:
        return self.test_table or self.table

    def features_sql(self, float8: bool = False) -> sql.Composable:
        """The features as float8[] (or float4[], which the aggregate takes
        too, unless float8 is asked for)."""
        if self.array_element is not None:
            col = sql.Identifier(self.feature_columns[0])
            if self.array_element == "float8" or (self.array_element == "float4" and not float8):
                return col
            return sql.SQL("{}::pg_catalog.float8[]").format(col)
        return sql.SQL("ARRAY[{}]::pg_catalog.float8[]").format(
            sql.SQL(", ").join(sql.Identifier(c) for c in self.feature_columns))

    def label_sql(self) -> sql.Composable:
        """The label as float8 (booleans as 0/1)."""
        col = sql.Identifier(self.label)
        if self.label_is_bool:
            return sql.SQL("({}::pg_catalog.int4)::pg_catalog.float8").format(col)
        return sql.SQL("({})::pg_catalog.float8").format(col)

    def positive_sql(self) -> sql.Composable:
        """True for the positive class (label +1, 1 or true)."""
        col = sql.Identifier(self.label)
        if self.label_is_bool:
            return sql.SQL("({})").format(col)
        return sql.SQL("({} OPERATOR(pg_catalog.>) 0)").format(col)

    def not_null_sql(self) -> sql.Composable:
        cols = [self.label, *self.feature_columns]
        return sql.SQL(" AND ").join(sql.SQL("{} IS NOT NULL").format(sql.Identifier(c))
                                     for c in cols)

    def describe(self) -> dict[str, Any]:
        return {
            "name": self.name, "table": self.table, "test_table": self.test_table,
            "scored_on": "held-out table" if self.test_table else "the training table",
            "label": self.label, "features": self.features, "dims": self.dims,
            "rows": self.rows, "test_rows": self.test_rows, "size_bytes": self.size_bytes,
            "generated": self.generated, "order": self.order, **self.info,
        }


def _column_type(conn: psycopg.Connection[Any], oid: int, column: str
                 ) -> tuple[str, str, str | None]:
    """(type name, type category, array element type name or None)."""
    row = conn.execute(
        "SELECT t.typname::pg_catalog.text, t.typcategory::pg_catalog.text, "
        "e.typname::pg_catalog.text "
        "FROM pg_catalog.pg_attribute a JOIN pg_catalog.pg_type t "
        "ON t.oid OPERATOR(pg_catalog.=) a.atttypid "
        "LEFT JOIN pg_catalog.pg_type e ON e.oid OPERATOR(pg_catalog.=) t.typelem "
        "AND t.typcategory OPERATOR(pg_catalog.=) 'A' "
        "WHERE a.attrelid OPERATOR(pg_catalog.=) %s AND a.attname OPERATOR(pg_catalog.=) %s "
        "AND a.attnum OPERATOR(pg_catalog.>) 0 AND NOT a.attisdropped",
        (oid, column)).fetchone()
    if row is None:
        raise ValueError(f"column {column!r} does not exist in relation {oid}")
    return row[0], row[1], row[2]


def _resolve(conn: psycopg.Connection[Any], table: str) -> tuple[int, str]:
    row = one(conn, "SELECT %s::pg_catalog.regclass::pg_catalog.oid::pg_catalog.int8, "
                    "%s::pg_catalog.regclass::pg_catalog.text", (table, table))
    return int(row[0]), str(row[1])


def describe_table(conn: psycopg.Connection[Any], table: str, test_table: str | None = None,
                   label: str = "label", features: str = "features",
                   name: str | None = None) -> Dataset:
    """A user's table (and optional held-out table) as a Dataset."""
    oid, qual = _resolve(conn, table)
    test_qual = None
    if test_table:
        _, test_qual = _resolve(conn, test_table)
    ltype, cat, _ = _column_type(conn, oid, label)
    if cat not in ("N", "B"):
        raise ValueError(f"label column {label!r} of {qual} has type {ltype}; "
                         "a numeric or boolean label is needed")
    cols = [c.strip() for c in features.split(",") if c.strip()]
    if not cols:
        raise ValueError("no feature column given")
    element = None
    if len(cols) == 1:
        typ, fcat, element = _column_type(conn, oid, cols[0])
        if fcat != "A" and fcat != "N":
            raise ValueError(f"feature column {cols[0]!r} of {qual} has type {typ}; "
                             "a numeric array or numeric columns are needed")
    else:
        for c in cols:
            typ, fcat, _ = _column_type(conn, oid, c)
            if fcat != "N":
                raise ValueError(f"feature column {c!r} of {qual} has type {typ}; "
                                 "a list of feature columns must all be numeric")
    rel = sql.SQL(qual)
    if element is not None:
        dims = conn.execute(sql.SQL("SELECT pg_catalog.cardinality({c}) FROM {t} "
                                    "WHERE {c} IS NOT NULL LIMIT 1")
                            .format(c=sql.Identifier(cols[0]), t=rel)).fetchone()
        dims_n = int(dims[0]) if dims else 0
    else:
        dims_n = len(cols)
    rows = value(conn, sql.SQL("SELECT pg_catalog.count(*) FROM {}").format(rel))
    test_rows = rows
    if test_qual:
        test_rows = value(conn, sql.SQL("SELECT pg_catalog.count(*) FROM {}").format(
            sql.SQL(test_qual)))
    size = value(conn, "SELECT pg_catalog.pg_table_size(%s::pg_catalog.regclass)", (qual,))
    return Dataset(name=name or qual, table=qual, test_table=test_qual, label=label,
                   features=features, label_is_bool=(cat == "B"), feature_columns=cols,
                   array_element=element, dims=dims_n, rows=int(rows), test_rows=int(test_rows),
                   size_bytes=int(size))


def score_query(ds: Dataset, model: str, margin: sql.Composable) -> sql.Composed:
    """Accuracy (R^2 for 'linear') of a margin expression on the scored table."""
    if model == "linear":
        y = ds.label_sql()
        return sql.SQL(
            # 1 - ss_res / ss_tot, NULL when ss_tot is 0 (nullif's = cannot be qualified)
            "SELECT CASE WHEN b.tot OPERATOR(pg_catalog.=) 0 THEN NULL ELSE 1 "
            "OPERATOR(pg_catalog.-) (b.res OPERATOR(pg_catalog./) b.tot) END FROM ("
            "SELECT pg_catalog.sum(pg_catalog.power({m} OPERATOR(pg_catalog.-) {y}, 2)) AS res, "
            "pg_catalog.sum(pg_catalog.power({y} OPERATOR(pg_catalog.-) a.mean, 2)) AS tot "
            "FROM {t}, (SELECT pg_catalog.avg({y}) AS mean FROM {t} WHERE {nn}) AS a "
            "WHERE {nn}) AS b").format(
            m=margin, y=y, t=ds.rel(ds.scored_table), nn=ds.not_null_sql())
    return sql.SQL(
        "SELECT pg_catalog.avg((({m} OPERATOR(pg_catalog.>) 0) OPERATOR(pg_catalog.=) {pos})"
        "::pg_catalog.int4)::pg_catalog.float8 FROM {t} WHERE {nn}").format(
        m=margin, pos=ds.positive_sql(), t=ds.rel(ds.scored_table), nn=ds.not_null_sql())


# --- generated data ------------------------------------------------------

ORDERS = ("clustered", "feature", "random")


def class_shift(dims: int, bayes_accuracy: float) -> float:
    """Per-feature class mean offset giving that accuracy to the best linear
    classifier: features are U(-1, 1) + label * shift, so sum(x) has mean
    +-shift*d and variance d/3, and the error is Phi(-shift * sqrt(3 d))."""
    z = statistics.NormalDist().inv_cdf(bayes_accuracy)
    return z / math.sqrt(3.0 * dims)


def _generate(conn: psycopg.Connection[Any], table: str, rows: int, dims: int, shift: float,
              order: str, seed: float) -> None:
    order_by = {"clustered": "label, id", "feature": "features[1], id",
                "random": "pg_catalog.random()"}[order]
    conn.execute(sql.SQL("DROP TABLE IF EXISTS {}").format(sql.Identifier(table)))
    conn.execute("SELECT pg_catalog.setseed(%s)", (seed,))
    # half the rows -1, half +1; each feature U(-1, 1) shifted by label * shift
    conn.execute(sql.SQL(
        "CREATE TABLE {t} AS SELECT id, label, features FROM ("
        " SELECT i AS id, l AS label,"
        # OPERATOR() has one precedence for all: the parentheses give the usual one
        "  (SELECT pg_catalog.array_agg(((pg_catalog.random() OPERATOR(pg_catalog.*) 2)"
        "    OPERATOR(pg_catalog.-) 1) OPERATOR(pg_catalog.+) (l OPERATOR(pg_catalog.*) {shift})"
        "    ORDER BY j)"
        "   FROM pg_catalog.generate_series(1, {d}) AS j)::pg_catalog.float8[] AS features"
        " FROM (SELECT i, CASE WHEN (i OPERATOR(pg_catalog.%) 2) OPERATOR(pg_catalog.=) 0"
        "       THEN 1 ELSE -1 END AS l"
        "       FROM pg_catalog.generate_series(1, {n}) AS i) AS s) AS g"
        " ORDER BY " + order_by).format(
            t=sql.Identifier(table), shift=sql.Literal(shift), d=sql.Literal(dims),
            n=sql.Literal(rows)))
    conn.execute(sql.SQL("VACUUM ANALYZE {}").format(sql.Identifier(table)))


def synthetic(conn: psycopg.Connection[Any], rows: int, dims: int, test_rows: int,
              order: str = "clustered", bayes_accuracy: float = 0.95, seed: int = 1,
              log: Callable[[str], None] | None = None) -> Dataset:
    """A binary table stored in the given order (clustered by label: all -1
    rows, then all +1 rows, the paper's worst case), and a held-out table.

    The tables are kept and reused by later runs with the same parameters
    (recorded in a table comment)."""
    if order not in ORDERS:
        raise ValueError(f"order must be one of {', '.join(ORDERS)}")
    shift = class_shift(dims, bayes_accuracy)
    base = f"corgipile_bench_{rows}x{dims}_{order}"
    spec = f"corgipile bench synthetic rows={rows} dims={dims} order={order} shift={shift!r} seed={seed}"
    test_spec = f"corgipile bench synthetic rows={test_rows} dims={dims} shift={shift!r} seed={seed} test"
    # setseed() takes [-1, 1]: the training table on the positive side, the test table on the negative
    s_train = (seed % 1000 + 1) / 1001.0
    for table, n, o, s, want in ((base, rows, order, s_train, spec),
                                 (base + "_test", test_rows, "random", -s_train, test_spec)):
        have = value(conn, "SELECT pg_catalog.obj_description(pg_catalog.to_regclass(%s), "
                           "'pg_class')", (table,))
        if have != want:
            if log:
                log(f"generating {table}: {n:,} rows x {dims} features ({o})")
            _generate(conn, table, n, dims, shift, o, s)
            conn.execute(sql.SQL("COMMENT ON TABLE {} IS {}").format(
                sql.Identifier(table), sql.Literal(want)))
    ds = describe_table(conn, base, base + "_test",
                        name=f"synthetic-{rows}x{dims}-{order}")
    ds.generated = True
    ds.order = order
    ds.info = {"bayes_accuracy": bayes_accuracy, "class_shift": shift}
    return ds


# --- measurements ----------------------------------------------------------

def scan_query(ds: Dataset) -> sql.Composed:
    """A plain sequential scan that reads the same columns as training:
    every label, and every feature array detoasted."""
    if ds.array_element is not None:
        feats = sql.SQL("pg_catalog.sum(pg_catalog.cardinality({}))").format(
            sql.Identifier(ds.feature_columns[0]))
    else:
        feats = sql.SQL(" OPERATOR(pg_catalog.+) ").join(
            sql.SQL("pg_catalog.sum({})").format(sql.Identifier(c)) for c in ds.feature_columns)
    return sql.SQL("SELECT pg_catalog.count(*), pg_catalog.sum({lab}), {feats} FROM {t} "
                   "WHERE {nn}").format(
        lab=ds.label_sql(), feats=feats, t=ds.rel(), nn=ds.not_null_sql())


def time_scan(conn: psycopg.Connection[Any], ds: Dataset, repeat: int, warm: bool = True,
              cpu: BackendCpu | None = None) -> tuple[list[float], list[float | None]]:
    """Wall and backend CPU seconds of `repeat` scans (after one that warms
    the caches); CPU None where it cannot be read."""
    q = scan_query(ds)
    if warm:
        conn.execute(q).fetchall()
    times: list[float] = []
    cpus: list[float | None] = []
    for _ in range(max(1, repeat)):
        with Stopwatch(cpu) as watch:
            conn.execute(q).fetchall()
        times.append(watch.seconds)
        cpus.append(watch.cpu_seconds)
    return times, cpus


class ScanClock:
    """Plain scans taken between the runs of a dataset: each run is compared
    with the scans just before and just after it, so that a load that comes
    and goes on a shared machine weighs on both sides of the ratio.  Each
    scan's backend CPU seconds are kept beside its wall seconds."""

    def __init__(self, conn: psycopg.Connection[Any], ds: Dataset, repeat: int):
        self.conn, self.ds = conn, ds
        self.cpu = BackendCpu(conn)
        self.before, self.cpu_before = time_scan(conn, ds, repeat, cpu=self.cpu)
        self.between: list[float] = []
        self.cpu_between: list[float | None] = []
        self.after: list[float] = []
        self.cpu_after: list[float | None] = []
        self.last = statistics.median(self.before)
        self.last_cpu = _median_or_none(self.cpu_before)
        self.around_cpu: list[float] | None = None

    def around(self) -> list[float]:
        """[the scan before the run just made, a scan now]; around_cpu is
        the same pair in CPU seconds (None where unknown)."""
        (now,), (now_cpu,) = time_scan(self.conn, self.ds, 1, warm=False, cpu=self.cpu)
        pair = [self.last, now]
        self.around_cpu = (None if self.last_cpu is None or now_cpu is None
                           else [self.last_cpu, now_cpu])
        self.between.append(now)
        self.cpu_between.append(now_cpu)
        self.last, self.last_cpu = now, now_cpu
        return pair

    def finish(self, repeat: int) -> None:
        self.after, self.cpu_after = time_scan(self.conn, self.ds, repeat, warm=False,
                                               cpu=self.cpu)

    @property
    def all(self) -> list[float]:
        return self.before + self.between + self.after

    @property
    def all_cpu(self) -> list[float | None]:
        return self.cpu_before + self.cpu_between + self.cpu_after


def _median_or_none(values: list[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return statistics.median(known) if known and len(known) == len(values) else None


def export(conn: psycopg.Connection[Any], ds: Dataset, table: str | None = None
           ) -> tuple[np.ndarray, np.ndarray]:
    """The table's labels and features as numpy arrays, in storage order,
    through COPY ... TO STDOUT in binary."""
    q = sql.SQL("COPY (SELECT {lab}, {feat} FROM {t} WHERE {nn}) TO STDOUT (FORMAT BINARY)").format(
        lab=ds.label_sql(), feat=ds.features_sql(float8=True), t=ds.rel(table),
        nn=ds.not_null_sql())
    labels: list[float] = []
    rows: list[list[float]] = []
    with conn.cursor() as cur, cur.copy(q) as copy:
        copy.set_types(["float8", "float8[]"])
        for lab, feats in copy.rows():
            if feats is None or any(v is None for v in feats):
                continue
            labels.append(lab)
            rows.append(feats)
    x = np.asarray(rows, dtype=np.float64).reshape(len(rows), ds.dims)
    return x, np.asarray(labels, dtype=np.float64)
