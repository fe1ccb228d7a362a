"""`corgipile load`'s file options, each read back from the table it made:
--delimiter, --no-header, --types, and LIBSVM's --zero-based and
--n-features; and Result.to_dataframe."""

from __future__ import annotations

import json

import pytest

import corgipile


def _columns(conn, table):
    return conn.execute(
        "SELECT attname, pg_catalog.format_type(atttypid, atttypmod) FROM pg_catalog.pg_attribute "
        "WHERE attrelid = %s::pg_catalog.regclass AND attnum > 0 AND NOT attisdropped "
        "ORDER BY attnum", (table,)).fetchall()


def test_csv_delimiter_and_types(cli, conn, tmp_path):
    path = tmp_path / "semi.csv"
    path.write_text("label;a;b\n1;0.5;x\n-1;1.5;y\n1;2.5;x\n")
    out = json.loads(cli("load", "semi", path, "--delimiter", ";", "--json").stdout)
    assert (out["rows"], out["layout"], out["features"]) == (3, "columns", '"a", "b"')
    assert _columns(conn, "semi")[-3:] == [("label", "integer"), ("a", "double precision"),
                                            ("b", "text")]
    assert conn.execute("SELECT label, a, b FROM semi ORDER BY a").fetchall() == [
        (1, 0.5, "x"), (-1, 1.5, "y"), (1, 2.5, "x")]
    # read with the default delimiter, the header is one column
    wrong = cli("load", "semi_comma", path, check=False)
    assert wrong.returncode != 0 and "label" in wrong.stderr
    cli("load", "semi_text", path, "--delimiter", ";", "--types", "a=text")
    assert dict(_columns(conn, "semi_text"))["a"] == "text"
    bad = cli("load", "semi_bad", path, "--delimiter", ";", "--types", "a", check=False)
    assert bad.returncode == 1 and "--types takes COL=TYPE" in bad.stderr


def test_csv_without_a_header(cli, conn, tmp_path):
    path = tmp_path / "bare.csv"
    path.write_text("1,0.5,2\n-1,1.5,3\n")
    out = json.loads(cli("load", "bare", path, "--no-header", "--json").stdout)
    assert (out["rows"], out["n_features"], out["label"]) == (2, 2, "label")
    assert conn.execute("SELECT label, features FROM bare ORDER BY id").fetchall() == [
        (1, [0.5, 2.0]), (-1, [1.5, 3.0])]


@pytest.mark.parametrize("zero_based,indices,n_features", [
    ("yes", [[1, 3], [2]], 10), ("no", [[0, 2], [1]], None), ("auto", [[0, 2], [1]], None)])
def test_libsvm_indices_and_dimension(cli, conn, tmp_path, zero_based, indices, n_features):
    path = tmp_path / "points.svm"
    path.write_text("1 1:0.5 3:1.0\n-1 2:1.5\n")
    args = ["load", "sp", path, "--zero-based", zero_based]
    if n_features is not None:
        args += ["--n-features", n_features]
    out = json.loads(cli(*args, "--json").stdout)
    # stored 0-based; the dimension given, or one past the largest index
    assert out["train_params"]["n_features"] == (n_features or 3)
    assert conn.execute("SELECT label, feature_indices, features FROM sp ORDER BY id"
                        ).fetchall() == [(1, indices[0], [0.5, 1.0]), (-1, indices[1], [1.5])]
    # what load printed trains as printed
    corgipile.Client(conn, progress=False).train("sp", "svm", max_epoch_num=1,
                                                 **out["train_params"])


def test_result_to_dataframe(client):
    pd = pytest.importorskip("pandas")
    frame = client.execute("SELECT g AS n, g * 0.5 AS half, 'r' || g AS name "
                           "FROM pg_catalog.generate_series(1, 3) AS g").to_dataframe()
    pd.testing.assert_frame_equal(frame, pd.DataFrame(
        {"n": [1, 2, 3], "half": [0.5, 1.0, 1.5], "name": ["r1", "r2", "r3"]}),
        check_dtype=False)
    assert client.execute("SELECT 1 AS one WHERE false").to_dataframe().columns.tolist() == ["one"]


def test_train_shows_the_polished_models_own_score(cli, conn, tmp_path):
    """A default training of a small table is polished: `corgipile train`
    shows the polish's row and gives the stored model's training score (the
    accuracy evaluate() finds on the same rows), not the last epoch's."""
    conn.execute("CREATE TABLE small AS SELECT g AS id, (g % 2) AS label, "
                 "ARRAY[(g % 2) + (g % 7) / 3.0, (g % 5) / 5.0]::float8[] AS features "
                 "FROM pg_catalog.generate_series(1, 400) AS g")
    out = cli("train", "small", "logistic", "--name", "pol", "--seed", "1").stdout
    polish = conn.execute("SELECT params->'polish' FROM corgipile.models "
                          "WHERE model_name = 'pol'").fetchone()[0]
    accuracy = dict(conn.execute("SELECT metric, value FROM corgipile.evaluate('pol', 'small')"
                                 ).fetchall())["accuracy"]
    assert polish["score"] == pytest.approx(accuracy, abs=1e-12)
    table = [line.split("|") for line in out.splitlines() if "|" in line]
    assert [c.strip() for c in table[-1][:2]] == ["polish", "400"]
    assert out.splitlines()[-1].endswith(f"training score {accuracy:.4f} (polished)")
