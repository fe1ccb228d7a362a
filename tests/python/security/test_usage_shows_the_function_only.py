"""A role granted USAGE on a model, without SELECT on the relation it was
trained on, gets the model's function and nothing more (issue 29 §2).

The owner trains on a table of its own with distinctive figures (a column
whose mean and std are far from 0 and 1, category values no one would
guess, 347 rows, NULLs in the category column).  The grantee then tries
every door corgipile has: the models view (each column, and a leaky
function in a WHERE clause over it), the issue's derivation of a std from
the view's weights and two predictions, model_coefficients, warm_start,
block_rows with the model, the array forms of predict on a model with
category columns, predict's NOTICE, evaluate() on its own rows and on the
owner's, error messages of wrong inputs, and the Python client's model
reader and export.  Everything it is shown, result rows, notices and
errors alike, is collected and searched for the secrets.  What it may
learn is the function: the test also checks that predictions give it, in
original units, exactly (that is what USAGE grants).

Every test runs under the autouse check of conftest.py that no backend
crashed.
"""

from __future__ import annotations

import math
import re

import psycopg
import pytest
from psycopg import errors, sql

import corgipile

CATEGORIES = ["zq_alpha_7731", "zq_beta_8842", "zq_gamma_9953"]
N_ROWS = 347
MODELS = {
    # name: train() arguments after the relation
    "m_arr": "'logistic', features => 'arr'",
    "m_cols": "'logistic', features => 'x, z, color'",
    "m_sparse": "'svm', features => 'vals', feature_indices => 'idx', n_features => 6",
    "m_soft": "'softmax', label => 'grade', features => 'x, color'",
    "m_raw": "'logistic', features => 'arr', standardize => 'off'",
    "m_grab": "'svm', features => 'arr', standardize => 'off', shuffle => 'grab'",
}
# raw features: the weights are the function itself
RAW = {"m_raw", "m_grab", "m_grab_imp"}
# what the view may show a grantee of params (the settings no row decides)
ALLOWED_PARAMS = {
    "shuffle", "learning_rate", "decay", "batch_size", "average", "seed", "double_buffer",
    "layout", "l1", "tolerance", "n_iter_no_change", "n_outputs", "standardize",
    "max_categories", "workers", "block_size", "buffer_size", "parallel_sync",
    "parallel_grab", "grab_granularity",
}


class Shown:
    """Everything a session is shown: rows, notices, errors."""

    def __init__(self, session: psycopg.Connection):
        self.session = session
        self.texts: list[str] = []
        session.add_notice_handler(self._notice)

    def _notice(self, diag) -> None:
        self.texts.extend(t for t in (diag.message_primary, diag.message_detail,
                                      diag.message_hint) if t)

    def rows(self, query, params=None) -> list[tuple]:
        rows = self.session.execute(query, params).fetchall()
        self.texts.append(repr(rows))
        return rows

    def refused(self, query, params=None, error=errors.InsufficientPrivilege) -> str:
        with pytest.raises(error) as e:
            self.session.execute(query, params)
        diag = e.value.diag
        self.texts.extend(t for t in (diag.message_primary, diag.message_detail,
                                      diag.message_hint) if t)
        return diag.message_primary or ""

    def error(self, query, params=None) -> None:
        """Any error: its words are shown to the role too."""
        try:
            self.rows(query, params)
        except psycopg.Error as exc:
            diag = exc.diag
            self.texts.extend(t for t in (diag.message_primary, diag.message_detail,
                                          diag.message_hint) if t)

    def text(self) -> str:
        return "\n".join(self.texts)


def _appears(secret: str, text: str) -> bool:
    """secret as a whole word or number of text, not a run of digits inside
    a longer number."""
    return re.search(rf"(?<![\w.]){re.escape(secret)}(?![\w])", text) is not None


def _digits(v: float) -> list[str]:
    """Ways a figure could be printed: 4 to 7 significant digits."""
    return [f"{v:.{k}g}" for k in range(4, 8)]


@pytest.fixture
def setup(conn, roles):
    owner, grantee = roles.create("owner"), roles.create("grantee")
    o = roles.connect(owner)
    o.execute("SET corgipile.progress = off")
    cats = ", ".join(f"'{c}'" for c in CATEGORIES)
    o.execute(
        "CREATE TABLE secret_rows AS SELECT g AS id, (g % 3 = 0) AS label, "
        "  (ARRAY['lo', 'mid', 'hi'])[1 + g % 3] AS grade, "
        "  1234.5678 + (g * 37 % 101) * 1.13 AS x, (g * 11 % 13) - 40.25 AS z, "
        "  CASE WHEN g % 11 = 0 THEN NULL "
        f"      ELSE (ARRAY[{cats}])[1 + (g * 7) % 3] END AS color, "
        "  ARRAY[1234.5678 + (g * 37 % 101) * 1.13, (g * 11 % 13) - 40.25]::float8[] AS arr, "
        "  ARRAY[g % 6, (g + 3) % 6] AS idx, "
        "  ARRAY[(g % 5) + 70.5, (g % 7) * 3.25]::float8[] AS vals "
        f"FROM generate_series(1, {N_ROWS}) AS g")
    for name, args in MODELS.items():
        o.execute(f"SELECT count(*) FROM corgipile.train('secret_rows', {args}, "
                  f"model_name => '{name}', max_epoch_num => 2, seed => 3)")
        o.execute("SELECT corgipile.grant_model(%s, %s::regrole)", (name, grantee))
    # a warm start needs the model's own training relation, or none: an
    # imported copy (the owner's rights decide what it shows)
    o.execute("SELECT corgipile.import_model('m_grab_imp', model, '(imported)', label, features, "
              "feature_indices, n_features, weights, classes, params, history, created_at, "
              "preprocess) FROM corgipile.models WHERE model_name = 'm_grab'")
    o.execute("SELECT corgipile.grant_model('m_grab_imp', %s::regrole)", (grantee,))
    g = roles.connect(grantee)
    g.execute("SET corgipile.progress = off")
    g.execute("CREATE TABLE probe_rows (id int, label boolean, grade text, x float8, "
              "z float8, color text, arr float8[], idx int[], vals float8[])")
    g.execute("INSERT INTO probe_rows VALUES "
              "(1, true, 'lo', 1250, -35, %s, '{1250, -35}', '{0, 1}', '{71, 3}'), "
              "(2, false, 'hi', 1300, -30, NULL, '{1300, -30}', '{2, 5}', '{72, 6}'), "
              "(3, true, 'mid', 1280, -38, 'zq_delta_0000', '{1280, -38}', '{1, 4}', '{73, 9}')",
              (CATEGORIES[0],))
    return o, g, grantee


def _secrets(o) -> list[str]:
    """What the owner sees and the grantee must not: every category value,
    the means and stds, the row count as text, the stored weights of the
    preprocessed models."""
    out = list(CATEGORIES)
    for _name, prep, weights in o.execute(
            "SELECT model_name, preprocess, weights FROM corgipile.models").fetchall():
        for f in (prep or {}).get("features", []):
            for key in ("mean", "std"):
                v = f.get(key)
                for x in (v if isinstance(v, list) else [v] if v is not None else []):
                    if x not in (0, 1):
                        out += _digits(x)
        if prep is not None:
            out += [f"{w:.8g}" for w in weights if abs(w) > 1e-6]
    return out


def test_a_grantee_gets_the_function_and_nothing_more(setup):
    o, g, grantee = setup
    shown = Shown(g)

    # the view: no relation, history, preprocessing; no weights or
    # n_features of a preprocessed model; of params, the settings only
    rows = shown.rows("SELECT model_name, relation, relid, history, preprocess, n_features, "
                      "weights, params FROM corgipile.models ORDER BY 1")
    assert [r[0] for r in rows] == sorted([*MODELS, "m_grab_imp"])
    for name, relation, relid, history, prep, n_features, weights, params in rows:
        assert (relation, relid, history, prep) == (None, None, None, None), name
        assert set(params) <= ALLOWED_PARAMS, (name, set(params) - ALLOWED_PARAMS)
        if name in RAW:
            assert weights == o.execute("SELECT weights FROM corgipile.models "
                                        "WHERE model_name = %s", (name,)).fetchone()[0]
            assert n_features == 2
        else:
            assert (n_features, weights) == (None, None), name
    shown.rows("SELECT * FROM corgipile.models")

    # the issue's derivation: weights[1] / slope is feature 1's std
    std = shown.rows(
        "WITH p AS (SELECT (corgipile.predict_proba('m_arr', ARRAY[0, 0]::float8[]))[1] p0, "
        "                  (corgipile.predict_proba('m_arr', ARRAY[1, 0]::float8[]))[1] p1), "
        "     w AS (SELECT weights FROM corgipile.models WHERE model_name = 'm_arr') "
        "SELECT weights[1] / (ln(p1/(1-p1)) - ln(p0/(1-p0))) FROM p, w")[0][0]
    assert std is None

    # a leaky function over the view sees only what the view shows
    g.execute("CREATE FUNCTION public.leak(m corgipile.models) RETURNS boolean "
              "LANGUAGE plpgsql COST 0.0001 AS $$BEGIN RAISE NOTICE 'leak %', m; "
              "RETURN true; END$$")
    shown.rows("SELECT model_name FROM corgipile.models AS m WHERE public.leak(m)")
    shown.rows("SELECT count(*) FROM corgipile.models AS m "
               "WHERE public.leak(m) AND weights IS NOT NULL")

    # the preprocessing by other means
    for name in ("m_arr", "m_cols", "m_sparse", "m_soft"):
        shown.refused("SELECT * FROM corgipile.model_coefficients(%s)", (name,))
        shown.refused("SELECT count(*) FROM corgipile.block_rows('probe_rows', "
                      "ARRAY[0]::int8[], 1, model => %s)", (name,))
    shown.refused("SELECT count(*) FROM corgipile.train('probe_rows', 'logistic', "
                  "features => 'x, z, color', warm_start => 'm_cols', max_epoch_num => 1)")
    shown.refused("SELECT count(*) FROM corgipile.train('probe_rows', 'logistic', "
                  "features => 'arr', warm_start => 'm_arr', max_epoch_num => 1)")
    # a GraB model's stored block order comes from the owner's rows (their
    # gradients' signs, the table's block count): a warm start takes the
    # weights only
    shown.rows("SELECT count(*) FROM corgipile.train('probe_rows', 'svm', features => 'arr', "
               "shuffle => 'grab', standardize => 'off', warm_start => 'm_grab_imp', "
               "max_epoch_num => 1, seed => 1)")
    assert any('stored block order of model "m_grab_imp" not used: it is a figure of the rows' in t
               for t in shown.texts), shown.texts[-3:]
    assert not any("blocks of" in t or "the model ordered" in t for t in shown.texts)
    # the owner's rows
    shown.refused("SELECT * FROM corgipile.evaluate('m_cols', 'secret_rows')")
    shown.refused("SELECT count(*) FROM corgipile.train('secret_rows', 'svm', "
                  "features => 'arr', max_epoch_num => 1)")
    shown.refused("SELECT count(*) FROM corgipile.shuffled_scan('secret_rows')")

    # an array in the one-hot space of a model with category columns (its
    # size counts the categories, its unit vectors give each one's weight)
    for fn in ("predict", "predict_class", "predict_proba"):
        msg = shown.refused(f"SELECT corgipile.{fn}('m_cols', ARRAY[1, 0, 1, 0, 0]::float8[])")
        assert "preprocessing" in msg
        shown.refused(f"SELECT corgipile.{fn}('m_cols', ARRAY[2], ARRAY[1.0])")
        shown.refused(f"SELECT corgipile.{fn}('m_soft', ARRAY[1, 0, 1, 0]::float8[])")

    # wrong inputs: their messages name the function's inputs, no more
    for query in [
        "SELECT corgipile.predict('m_arr', ARRAY[1, 2, 3]::float8[])",
        "SELECT corgipile.predict('m_sparse', ARRAY[99], ARRAY[1.0])",
        "SELECT corgipile.predict('m_cols', ROW(1.0, 2.0))",
        "SELECT corgipile.predict('m_cols', t) FROM (SELECT 'a'::text AS x, 1.0 AS z, "
        "  'b'::text AS color) AS t",
        "SELECT corgipile.predict('m_cols', t) FROM (SELECT 1.0 AS x, 1.0 AS z, "
        "  1 AS color) AS t",
        "SELECT corgipile.predict('m_soft', ARRAY[1.0]::float8[])",
        "SELECT * FROM corgipile.evaluate('m_soft', 'probe_rows')",
        "SELECT * FROM corgipile.evaluate('m_arr', 'probe_rows')",
        "SELECT corgipile.predict('m_cols', t) FROM (SELECT 'NaN'::float8 AS x, 1.0 AS z, "
        "  'b'::text AS color) AS t",
    ]:
        shown.error(query)

    # predictions, as USAGE grants; an unseen value and a NULL are both
    # reported, whether or not the training rows had NULLs (they had)
    rows = shown.rows("SELECT id, corgipile.predict_proba('m_cols', p) FROM probe_rows p "
                      "ORDER BY id")
    assert all(r[1] is not None for r in rows)
    assert any("not trained on (or NULL)" in t for t in shown.texts)
    metrics = dict(shown.rows("SELECT * FROM corgipile.evaluate('m_cols', 'probe_rows')"))
    assert metrics["unseen_values"] == 2
    # the owner, who may read the rows, is told the NULL was a learnt level
    g.execute(sql.SQL("GRANT SELECT ON probe_rows TO {}").format(
        sql.Identifier(o.info.user)))
    assert dict(o.execute("SELECT * FROM corgipile.evaluate('m_cols', 'probe_rows')"
                          ).fetchall())["unseen_values"] == 1
    shown.rows("SELECT * FROM corgipile.evaluate('m_soft', 'probe_rows')")
    shown.rows("SELECT corgipile.predict_class('m_soft', p) FROM probe_rows p")
    shown.rows("SELECT corgipile.predict('m_sparse', idx, vals) FROM probe_rows")

    # the Python client reads the view: no weights, and no export of them
    client = corgipile.Client(g)
    model = client.get_model("m_arr")
    assert model.weights is None and model.preprocess is None
    with pytest.raises(corgipile.errors.ModelFormatError, match="hidden"):
        _ = model.coef
    with pytest.raises(corgipile.errors.ModelFormatError, match="hidden"):
        client.export_model("m_arr")
    shown.texts.append(repr(model.to_dict()))

    # nothing shown holds a secret
    text = shown.text()
    leaked = [s for s in _secrets(o) + [str(N_ROWS)] if _appears(s, text)]
    assert not leaked, f"shown to the grantee: {leaked}"
    assert not re.search(r"\b5 features\b|\b4 features\b", text), "the one-hot size"

    # what USAGE does grant: the function, to the last bit predictions give
    coef = {f: w for _, f, w in o.execute(
        "SELECT * FROM corgipile.model_coefficients('m_arr')").fetchall()}
    p0, p1 = (g.execute("SELECT (corgipile.predict_proba('m_arr', %s::float8[]))[1]",
                        (v,)).fetchone()[0] for v in ([0, 0], [1, 0]))
    slope = math.log(p1 / (1 - p1)) - math.log(p0 / (1 - p0))
    assert slope == pytest.approx(coef["arr[1]"], rel=1e-6)


def test_a_grantee_given_select_sees_everything(setup):
    """The rule is SELECT on the training relation, checked for the role
    that executes: granting it shows the rest at once, revoking hides it."""
    o, g, grantee = setup
    o.execute(sql.SQL("GRANT SELECT ON secret_rows TO {}").format(sql.Identifier(grantee)))
    row = g.execute("SELECT relation, n_features, cardinality(weights), preprocess IS NOT NULL "
                    "FROM corgipile.models WHERE model_name = 'm_cols'").fetchone()
    assert row == ("public.secret_rows", 5, 6, True)
    assert len(g.execute("SELECT * FROM corgipile.model_coefficients('m_cols')").fetchall()) == 6
    o.execute(sql.SQL("REVOKE SELECT ON secret_rows FROM {}").format(sql.Identifier(grantee)))
    assert g.execute("SELECT weights FROM corgipile.models WHERE model_name = 'm_cols'"
                     ).fetchone()[0] is None
    # a definer function of the grantee's runs as the grantee: no more
    g.execute("CREATE FUNCTION public.peek() RETURNS float8[] LANGUAGE sql SECURITY DEFINER "
              "AS $$SELECT weights FROM corgipile.models WHERE model_name = 'm_cols'$$")
    g.execute(sql.SQL("GRANT EXECUTE ON FUNCTION public.peek() TO {}").format(
        sql.Identifier(o.info.user)))
    assert o.execute("SELECT public.peek()").fetchone()[0] is None
