"""The server fast path (corgipile.block_rows) against the SQL readers, and
a model's encoding fed to PyTorch."""

from __future__ import annotations

import numpy as np
import pytest

TORCH_MISSING = ("corgipile.torch needs PyTorch: pip install 'corgipile[torch]' "
                 "(make test installs torch==2.13.0 from requirements-dev.txt)")
torch = pytest.importorskip("torch", reason=TORCH_MISSING)

from corgipile.errors import CorgipileError  # noqa: E402
from corgipile.torch import CorgiPileDataset  # noqa: E402
from torch_helpers import make_table  # noqa: E402


def read_all(ds):
    xs, ys, ids = [], [], []
    for x, y, i in ds:
        xs.append(x)
        ys.append(y)
        ids.append(i)
    return torch.cat(xs).numpy(), torch.cat(ys).numpy(), torch.cat(ids).numpy()


@pytest.mark.parametrize("ddl", [
    "CREATE TABLE t AS SELECT i AS id, i % 3 AS label, "
    "ARRAY[i, -i, i * 0.25]::float4[] AS features FROM generate_series(1, 3000) i",
    "CREATE TABLE t AS SELECT i AS id, (i * 0.5)::float8 AS label, "
    "ARRAY[sin(i), cos(i)]::float8[] AS features FROM generate_series(1, 3000) i",
    "CREATE TABLE t AS SELECT i::int8 AS id, i % 2 AS label, ARRAY[i, 1]::int4[] AS features "
    "FROM generate_series(1, 3000) i",
])
def test_server_copy_and_select_read_the_same_rows(conn, dsn, ddl):
    conn.execute(ddl)
    # rows the engine skips: NULL label, NULL features, a NULL element
    conn.execute("INSERT INTO t (id, label, features) VALUES (9001, NULL, ARRAY[1, 2, 3]), "
                 "(9002, 1, NULL)")
    conn.execute("INSERT INTO t (id, label, features) SELECT 9003, 1, "
                 "array_fill(NULL::float4, ARRAY[1]) || features[2:] FROM t LIMIT 1")
    got = {}
    for method in ("server", "copy", "select"):
        ds = CorgiPileDataset(dsn, "t", id_column="id", seed=4, method=method, batch_size=100)
        assert ds._method == method
        got[method] = read_all(ds)
        ds.close()
    for method in ("copy", "select"):
        for a, b in zip(got["server"], got[method], strict=True):
            np.testing.assert_array_equal(a, b)
    assert sorted(got["server"][2].tolist()) == list(range(1, 3001))
    auto = CorgiPileDataset(dsn, "t", id_column="id", seed=4)
    assert auto._method == "server"
    auto.close()


def test_columns_table_with_categories_needs_a_model(conn, dsn):
    conn.execute("CREATE TABLE cats AS SELECT i AS id, (i % 2 = 0) AS label, i * 0.5 AS num, "
                 "(ARRAY['red', 'green', 'blue'])[1 + i % 3] AS color, "
                 "CASE WHEN i % 50 = 0 THEN NULL ELSE 'x' || (i % 4) END AS shape "
                 "FROM generate_series(1, 600) i")
    conn.execute("SELECT count(*) FROM corgipile.train('cats', 'logistic', model_name => 'mcats', "
                 "features => 'num, color, shape', seed => 1, max_epoch_num => 2)")
    prep = conn.execute("SELECT preprocess FROM corgipile.models "
                        "WHERE model_name = 'mcats'").fetchone()[0]
    num, color, shape = prep["features"]
    ds = CorgiPileDataset(dsn, "cats", model="mcats", id_column="id", seed=2, batch_size=64)
    assert ds._method == "server" and ds.layout.n_features == 1 + 3 + 4
    x, y, ids = read_all(ds)
    assert sorted(ids.tolist()) == list(range(1, 601))  # NULL categories encode as zeros
    for row, label, i in zip(x, y, ids, strict=True):
        i = int(i)
        assert label == (1 if i % 2 == 0 else 0)
        assert row[0] == pytest.approx((i * 0.5 - num["mean"]) / num["std"], rel=1e-5)
        want = [0.0] * 3
        want[color["categories"].index(["red", "green", "blue"][i % 3])] = 1.0
        assert row[1:4].tolist() == want
        want = [0.0] * 4
        if i % 50:
            want[shape["categories"].index(f"x{i % 4}")] = 1.0
        assert row[4:].tolist() == want
    ds.close()
    with pytest.raises(CorgipileError, match="does not exist"):
        CorgiPileDataset(dsn, "cats", model="nope")


def test_a_model_that_imputes_feeds_every_row(conn, dsn):
    """A NULL number is imputed as the model was trained (missing => ...),
    its missing indicator set; the same rows with a NULL are skipped
    without the model (raw numbers, as training skips them by default)."""
    conn.execute("CREATE TABLE holes AS SELECT i AS id, (i % 2 = 0) AS label, "
                 "CASE WHEN i % 5 = 0 THEN NULL ELSE i * 0.25 END AS a, "
                 "(i % 7)::float8 AS b FROM generate_series(1, 600) i")
    conn.execute("SELECT count(*) FROM corgipile.train('holes', 'logistic', model_name => 'mh', "
                 "features => 'a, b', seed => 1, max_epoch_num => 2, missing => 'median', "
                 "missing_indicator => true)")
    prep = conn.execute("SELECT preprocess FROM corgipile.models "
                        "WHERE model_name = 'mh'").fetchone()[0]
    a, b = prep["features"]
    assert a["fill"] == float(np.median([i * 0.25 for i in range(1, 601) if i % 5]))
    ds = CorgiPileDataset(dsn, "holes", model="mh", id_column="id", seed=2, batch_size=64)
    assert ds._method == "server" and ds.layout.n_features == 3
    x, y, ids = read_all(ds)
    ds.close()
    assert sorted(ids.tolist()) == list(range(1, 601))
    for row, i in zip(x, ids, strict=True):
        i = int(i)
        raw = a["fill"] if i % 5 == 0 else i * 0.25
        assert row[0] == pytest.approx((raw - a["mean"]) / a["std"], rel=1e-5)
        assert row[1] == pytest.approx(((i % 7) - b["mean"]) / b["std"], rel=1e-5, abs=1e-6)
        assert row[2] == (1.0 if i % 5 == 0 else 0.0)
    raw = CorgiPileDataset(dsn, "holes", features=["a", "b"], id_column="id", seed=2,
                           batch_size=64)
    assert sorted(read_all(raw)[2].tolist()) == [i for i in range(1, 601) if i % 5]
    raw.close()


def test_rls_and_privileges_are_enforced(conn, dsn):
    make_table(conn, "sec", 500)
    role = f"cp_torch_br_{conn.info.backend_pid}"
    conn.execute(f"CREATE ROLE {role} LOGIN")
    try:
        conn.execute(f"GRANT SELECT (id, label) ON sec TO {role}")
        with pytest.raises(CorgipileError, match="permission denied"):
            CorgiPileDataset(dsn + f" user={role}", "sec", method="server")
        conn.execute(f"GRANT SELECT ON sec TO {role}")
        conn.execute("ALTER TABLE sec ENABLE ROW LEVEL SECURITY")
        conn.execute(f"CREATE POLICY p ON sec TO {role} USING (id < 100)")
        ds = CorgiPileDataset(dsn + f" user={role}", "sec", method="server", seed=1)
        with pytest.raises(CorgipileError, match="row-level security"):
            list(ds)
        ds.close()
    finally:
        conn.execute("DROP POLICY IF EXISTS p ON sec")
        conn.execute(f"REVOKE ALL ON sec FROM {role}")
        conn.execute(f"DROP ROLE {role}")
