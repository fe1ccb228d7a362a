"""The polish after a default training of a small table (core/polish.c,
nodes/sgd_polish.c): L-BFGS from SGD's model to the minimum of the
objective scikit-learn's exact solvers minimise, so that the model is
theirs. On a small table with nearly collinear columns, where SGD with the
decaying default rate stops short of that minimum, the polished model's
probabilities and predictions match scikit-learn's LogisticRegression and
Ridge; with corgipile.polish off, or where the polish does not apply, the
model is SGD's."""

from __future__ import annotations

import numpy as np
import pytest
from psycopg import sql

from datagen import linear_task

pytest.importorskip("sklearn")
from sklearn.linear_model import LogisticRegression, Ridge
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

N, D = 60, 20


def problem(seed: int):
    """Few rows, many columns, two of them nearly the same: ill-conditioned."""
    x, y = linear_task(N, D, seed=seed, noise=0.8)
    rng = np.random.default_rng(seed + 1)
    x[:, 1] = x[:, 0] + 1e-3 * rng.normal(size=N)
    target = x @ np.linspace(-2.0, 2.0, D) + 0.5 * rng.normal(size=N) + 10.0
    return x, y, target


@pytest.fixture
def tables(conn):
    x, y, target = problem(5)
    conn.execute("CREATE TABLE pol (id int, label int, target float8, features float8[])")
    with conn.cursor().copy("COPY pol FROM STDIN (FORMAT BINARY)") as copy:
        copy.set_types(["int4", "int4", "float8", "float8[]"])
        for i in np.argsort(y, kind="stable"):
            copy.write_row((int(i), int(y[i]), float(target[i]), x[i].tolist()))
    conn.execute("ANALYZE pol")
    conn.execute("SET corgipile.progress = off")
    return conn, x, y, target


def train(conn, name: str, kind: str, label: str, extra: str = "") -> dict:
    conn.execute(sql.SQL("SELECT count(*) FROM corgipile.train('pol', {}, label => {}, "
                         "model_name => {}, seed => 2" + extra + ")").format(
        sql.Literal(kind), sql.Literal(label), sql.Literal(name)))
    return conn.execute("SELECT params FROM corgipile.models WHERE model_name = %s",
                        (name,)).fetchone()[0]


def probabilities(conn, name: str) -> np.ndarray:
    """The positive class's probability, the last of each row's array."""
    rows = conn.execute("SELECT id, corgipile.predict_proba(%s, features) FROM pol ORDER BY id",
                        (name,)).fetchall()
    return np.array([np.atleast_1d(r[1])[-1] for r in rows], dtype=float)


def predictions(conn, name: str) -> np.ndarray:
    rows = conn.execute("SELECT id, corgipile.predict(%s, features) FROM pol ORDER BY id",
                        (name,)).fetchall()
    return np.array([r[1] for r in rows])


def test_logistic_is_scikit_learns(tables):
    """The polish stops where scikit-learn's lbfgs does (no gradient entry
    above 1e-4): its probabilities are within 1e-3 of the exact minimum's,
    as scikit-learn's own default fit is."""
    conn, x, y, _ = tables
    params = train(conn, "pol_lr", "logistic", "label")
    polish = params["polish"]
    assert polish["rows"] == N and polish["converged"], polish
    assert polish["gradient_max"] <= polish["gradient_bound"] == 1e-4, polish
    assert polish["objective"] < polish["objective_sgd"], polish
    sk = make_pipeline(StandardScaler(), LogisticRegression(max_iter=10000, tol=1e-10)).fit(x, y)
    want = sk.predict_proba(x)[:, 1]
    got = probabilities(conn, "pol_lr")
    sk_default = make_pipeline(StandardScaler(), LogisticRegression(max_iter=10000)).fit(x, y)
    assert np.abs(got - want).max() < 1e-3
    assert np.abs(sk_default.predict_proba(x)[:, 1] - want).max() < 1e-3

    # SGD's own model, without the polish, is measurably elsewhere
    conn.execute("SET corgipile.polish = off")
    params = train(conn, "pol_lr_sgd", "logistic", "label")
    assert "polish" not in params
    assert np.abs(probabilities(conn, "pol_lr_sgd") - want).max() > 1e-2


def test_linear_is_ridges(tables):
    conn, x, _, target = tables
    params = train(conn, "pol_ridge", "linear", "target")
    assert params["polish"]["converged"], params["polish"]
    sk = make_pipeline(StandardScaler(), Ridge(alpha=1.0)).fit(x, target)
    want = sk.predict(x)
    got = predictions(conn, "pol_ridge")
    assert np.abs(got - want).max() < 1e-4 * np.abs(want).max()


@pytest.mark.parametrize("kind,extra", [
    ("logistic", ", learning_rate => 0.1"),      # a rate given: plain SGD
    ("logistic", ", validation => '20%'"),       # per-epoch scores describe the model
    ("logistic", ", tolerance => 0.0001"),       # early stopping keeps an epoch's model
    ("logistic", ", average => false"),          # 0.3.0's default arithmetic
    ("svm", ""),                                 # the hinge loss has no gradient
    ("logistic", ", l2 => 0"),                   # no minimum on separable rows
])
def test_where_the_polish_does_not_apply(tables, kind, extra):
    conn = tables[0]
    params = train(conn, "pol_no", kind, "label", extra)
    assert "polish" not in params, (kind, extra)


def test_polish_stays_within_maintenance_work_mem(tables):
    """Its history is 24 copies of the weights: a model whose copies do not
    fit maintenance_work_mem keeps SGD's weights. 300 classes x 21 weights
    x 24 x 8 bytes is 1.2 MB, above the smallest setting (1 MB)."""
    conn = tables[0]
    conn.execute("CREATE TABLE pol_wide AS SELECT g AS id, g % 300 AS label, "
                 "array(SELECT sin(g * k) FROM generate_series(1, 20) k) AS features "
                 "FROM generate_series(1, 600) g")
    for setting, name, polished in (("1MB", "pol_wide", False), ("64MB", "pol_wide2", True)):
        conn.execute(sql.SQL("SET maintenance_work_mem = {}").format(sql.Literal(setting)))
        conn.execute("SELECT count(*) FROM corgipile.train('pol_wide', 'softmax', "
                     "model_name => %s, seed => 2, max_epoch_num => 2)", (name,))
        params = conn.execute("SELECT params FROM corgipile.models WHERE model_name = %s",
                              (name,)).fetchone()[0]
        assert ("polish" in params) is polished, (setting, params.get("polish"))


def wide_softmax_table(conn, name: str) -> None:
    """800 rows of 200 features in 8 classes, stored by class; the
    features are 15 latent ones mixed, nearly collinear as an image's
    pixels are: a wide softmax whose polish takes about 300 passes."""
    rng = np.random.default_rng(11)
    k, d, n, r = 8, 200, 800, 15
    centres = rng.normal(size=(k, r))
    y = np.sort(rng.integers(0, k, size=n))
    z = centres[y] + rng.normal(size=(n, r))
    x = z @ rng.normal(size=(r, d)) + 0.05 * rng.normal(size=(n, d))
    conn.execute(sql.SQL("CREATE TABLE {} (id int, label int, features float8[])").format(
        sql.Identifier(name)))
    with conn.cursor().copy(sql.SQL("COPY {} FROM STDIN (FORMAT BINARY)").format(
            sql.Identifier(name))) as copy:
        copy.set_types(["int4", "int4", "float8[]"])
        for i in range(n):
            copy.write_row((i, int(y[i]), x[i].tolist()))
    conn.execute(sql.SQL("ANALYZE {}").format(sql.Identifier(name)))


def test_same_seed_same_polish_through_the_client_with_connection_checks(conn, dsn):
    """Interrupts that are not a cancel (here the connection check the
    client sets for every training, every 10 ms) do not end the polish:
    the same seed gives bit-identical weights through the client as through
    SQL without checks, and the polish runs to the same end.  Before, each
    check ended the polish where it was: a few passes, different weights."""
    import corgipile

    wide_softmax_table(conn, "wide")
    conn.execute("SET corgipile.progress = off")
    conn.execute("SELECT count(*) FROM corgipile.train('wide', 'softmax', label => 'label', "
                 "model_name => 'by_sql', seed => 1)")
    reference = conn.execute("SELECT weights, params->'polish' FROM corgipile.models "
                             "WHERE model_name = 'by_sql'").fetchone()
    assert reference[1]["passes"] > 100, reference[1]
    assert reference[1]["converged"] is True, reference[1]
    for run in range(2):
        with corgipile.connect(dsn + " options='-c client_connection_check_interval=10ms'") as c:
            assert c.execute("SHOW client_connection_check_interval").fetchall() == [("10ms",)]
            c.train("wide", "softmax", label="label", model_name=f"by_client{run}", seed=1,
                    progress=False)
        got = conn.execute("SELECT weights, params->'polish' FROM corgipile.models "
                           "WHERE model_name = %s", (f"by_client{run}",)).fetchone()
        assert got[1] == reference[1]
        assert got[0] == reference[0], f"run {run}: weights differ from the SQL training's"


def test_a_polish_cut_short_says_so(conn):
    """A polish that ends at its pass budget stores its best point, and a
    WARNING says the model is not at the minimum, with the gradient."""
    wide_softmax_table(conn, "wide")
    conn.execute("SET corgipile.progress = off")
    conn.execute("SET corgipile.polish_max_passes = 100")
    warnings: list[str] = []
    conn.add_notice_handler(lambda d: warnings.append(f"{d.severity}: {d.message_primary}"))
    conn.execute("SELECT count(*) FROM corgipile.train('wide', 'softmax', label => 'label', "
                 "model_name => 'short', seed => 1, max_epoch_num => 2)")
    polish = conn.execute("SELECT params->'polish' FROM corgipile.models "
                          "WHERE model_name = 'short'").fetchone()[0]
    assert polish["passes"] == 100 and polish["converged"] is False, polish
    assert polish["stop"] == "pass budget", polish
    assert polish["objective"] < polish["objective_sgd"], polish
    assert [w for w in warnings if "is not at the minimum" in w] == [
        f'WARNING: model "short" is not at the minimum of its objective: the polish reached '
        f'its pass budget after 100 passes with a largest gradient entry of '
        f'{polish["gradient_max"]:.3g}'], warnings
