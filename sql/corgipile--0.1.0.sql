-- corgipile 0.1.0: in-database SGD with CorgiPile's two-level shuffle.

\echo Use "CREATE EXTENSION corgipile" to load this file. \quit

-- The schema corgipile is created by CREATE EXTENSION (schema in the
-- control file).  Every name below is schema-qualified.

CREATE SEQUENCE corgipile.model_name_seq;

-- One row per trained model.  weights holds the n_features feature
-- weights followed by the bias.  classes maps the model's two classes back
-- to the table's labels: [-1, 1], [0, 1] or [false, true].
CREATE TABLE corgipile.models (
    model_name      text PRIMARY KEY,
    model           text NOT NULL,
    relation        text NOT NULL,
    label           text NOT NULL,
    features        text[] NOT NULL,
    feature_indices text,
    n_features      integer NOT NULL CHECK (n_features > 0),
    weights         float8[] NOT NULL,
    classes         jsonb,
    params          jsonb NOT NULL,
    history         jsonb NOT NULL,
    created_at      timestamptz NOT NULL DEFAULT pg_catalog.now(),
    owner           name NOT NULL DEFAULT CURRENT_USER
);

COMMENT ON TABLE corgipile.models IS 'Models trained by corgipile.train(); weights end with the bias.';

-- Models are dumped with the database.
SELECT pg_catalog.pg_extension_config_dump('corgipile.models', '');
SELECT pg_catalog.pg_extension_config_dump('corgipile.model_name_seq', '');

-- Everyone may train, read and predict; only a model's owner (or a role
-- that bypasses row security) may change or drop it.
ALTER TABLE corgipile.models ENABLE ROW LEVEL SECURITY;
CREATE POLICY models_read ON corgipile.models FOR SELECT USING (true);
CREATE POLICY models_insert ON corgipile.models FOR INSERT
    WITH CHECK (owner = CURRENT_USER);
CREATE POLICY models_update ON corgipile.models FOR UPDATE
    USING (pg_catalog.pg_has_role(owner, 'USAGE'))
    WITH CHECK (pg_catalog.pg_has_role(owner, 'USAGE'));
CREATE POLICY models_delete ON corgipile.models FOR DELETE
    USING (pg_catalog.pg_has_role(owner, 'USAGE'));
GRANT SELECT, INSERT, UPDATE, DELETE ON corgipile.models TO PUBLIC;
GRANT USAGE ON SEQUENCE corgipile.model_name_seq TO PUBLIC;
GRANT USAGE ON SCHEMA corgipile TO PUBLIC;

CREATE FUNCTION corgipile.train_support(internal)
RETURNS internal
AS 'MODULE_PATHNAME', 'corgipile_train_support'
LANGUAGE C STRICT;

CREATE FUNCTION corgipile.train(
    relation        regclass,
    model           text,
    model_name      text DEFAULT NULL,
    label           text DEFAULT 'label',
    features        text DEFAULT 'features',
    feature_indices text DEFAULT NULL,
    n_features      integer DEFAULT NULL,
    shuffle         text DEFAULT 'corgipile',
    learning_rate   float8 DEFAULT 0.1,
    decay           float8 DEFAULT 0.95,
    max_epoch_num   integer DEFAULT 20,
    batch_size      integer DEFAULT 1,
    l2              float8 DEFAULT 0,
    block_size      text DEFAULT NULL,
    buffer_size     text DEFAULT '10%',
    seed            bigint DEFAULT NULL,
    double_buffer   boolean DEFAULT true,
    validation      regclass DEFAULT NULL,
    l1              float8 DEFAULT 0,
    tolerance       float8 DEFAULT NULL,
    n_iter_no_change integer DEFAULT 5)
RETURNS TABLE (
    model_name       text,
    epoch            integer,
    tuples           bigint,
    loss             float8,
    score            float8,
    validation_score float8,
    seconds          float8)
AS 'MODULE_PATHNAME', 'corgipile_train'
-- not STRICT: NULL means "the default" for model_name, n_features,
-- feature_indices, block_size, seed, validation and tolerance; other NULLs
-- are errors.
LANGUAGE C VOLATILE PARALLEL UNSAFE
ROWS 20
SUPPORT corgipile.train_support;

COMMENT ON FUNCTION corgipile.train IS 'Train a model with SGD over a table; one row per epoch. The model is stored in corgipile.models.';

CREATE FUNCTION corgipile.predict(model_name text, features anyarray)
RETURNS float8
AS 'MODULE_PATHNAME', 'corgipile_predict_dense'
LANGUAGE C STABLE STRICT PARALLEL SAFE;

CREATE FUNCTION corgipile.predict(model_name text, feature_indices integer[], features anyarray)
RETURNS float8
AS 'MODULE_PATHNAME', 'corgipile_predict_sparse'
LANGUAGE C STABLE STRICT PARALLEL SAFE;

CREATE FUNCTION corgipile.predict(model_name text, "row" record)
RETURNS float8
AS 'MODULE_PATHNAME', 'corgipile_predict_row'
LANGUAGE C STABLE STRICT PARALLEL SAFE;

CREATE FUNCTION corgipile.predict_class(model_name text, features anyarray)
RETURNS text
AS 'MODULE_PATHNAME', 'corgipile_predict_class_dense'
LANGUAGE C STABLE STRICT PARALLEL SAFE;

CREATE FUNCTION corgipile.predict_class(model_name text, feature_indices integer[], features anyarray)
RETURNS text
AS 'MODULE_PATHNAME', 'corgipile_predict_class_sparse'
LANGUAGE C STABLE STRICT PARALLEL SAFE;

CREATE FUNCTION corgipile.predict_class(model_name text, "row" record)
RETURNS text
AS 'MODULE_PATHNAME', 'corgipile_predict_class_row'
LANGUAGE C STABLE STRICT PARALLEL SAFE;

CREATE FUNCTION corgipile.predict_proba(model_name text, features anyarray)
RETURNS float8[]
AS 'MODULE_PATHNAME', 'corgipile_predict_proba_dense'
LANGUAGE C STABLE STRICT PARALLEL SAFE;

CREATE FUNCTION corgipile.predict_proba(model_name text, feature_indices integer[], features anyarray)
RETURNS float8[]
AS 'MODULE_PATHNAME', 'corgipile_predict_proba_sparse'
LANGUAGE C STABLE STRICT PARALLEL SAFE;

CREATE FUNCTION corgipile.predict_proba(model_name text, "row" record)
RETURNS float8[]
AS 'MODULE_PATHNAME', 'corgipile_predict_proba_row'
LANGUAGE C STABLE STRICT PARALLEL SAFE;

CREATE FUNCTION corgipile.drop_model(model_name text)
RETURNS void
LANGUAGE plpgsql STRICT VOLATILE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    model_owner name;
BEGIN
    SELECT m.owner INTO model_owner FROM corgipile.models AS m
     WHERE m.model_name = drop_model.model_name;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'model "%" does not exist', drop_model.model_name
            USING ERRCODE = 'undefined_object';
    END IF;
    IF NOT pg_has_role(model_owner, 'USAGE') THEN
        RAISE EXCEPTION 'must be owner of model "%"', drop_model.model_name
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    DELETE FROM corgipile.models AS m WHERE m.model_name = drop_model.model_name;
END
$$;

CREATE FUNCTION corgipile.shuffled_scan(
    relation    regclass,
    shuffle     text DEFAULT 'corgipile',
    block_size  text DEFAULT NULL,
    buffer_size text DEFAULT '10%',
    seed        bigint DEFAULT NULL)
RETURNS TABLE (ctid tid, id bigint)
AS 'MODULE_PATHNAME', 'corgipile_shuffled_scan'
LANGUAGE C VOLATILE PARALLEL UNSAFE
SUPPORT corgipile.train_support;

COMMENT ON FUNCTION corgipile.shuffled_scan IS 'The row ids of a table in the order one epoch of a shuffle strategy feeds them to SGD (id is NULL unless the table has an integer column id).';

CREATE FUNCTION corgipile.evaluate(model_name text, relation regclass)
RETURNS TABLE (metric text, value float8)
AS 'MODULE_PATHNAME', 'corgipile_evaluate'
LANGUAGE C STABLE STRICT PARALLEL RESTRICTED;

COMMENT ON FUNCTION corgipile.evaluate IS 'Metrics of a stored model on a table: accuracy, precision, recall, f1, auc, log_loss (binary); accuracy, macro_f1, log_loss (softmax); rmse, mae, r2 (linear).';

CREATE FUNCTION corgipile.shuffle_table(src regclass, dst text, seed bigint DEFAULT NULL)
RETURNS bigint
AS 'MODULE_PATHNAME', 'corgipile_shuffle_table'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION corgipile.shuffle_table IS 'Write a fully shuffled copy of src as a new table dst (two-pass external shuffle within work_mem); returns the rows written.';
