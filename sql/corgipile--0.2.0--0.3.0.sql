-- corgipile 0.2.0 -> 0.3.0: preprocessing kept with the model, a held-out
-- fraction of the table, parallel workers.
--
-- What changes:
--   * corgipile.model_store gains preprocess jsonb: the per-feature
--     statistics and category dictionaries learnt by train() and applied by
--     every predict/evaluate call (NULL: the model reads raw features, as
--     every model before 0.3.0 does).  The corgipile.models view shows it.
--   * corgipile.train: validation becomes text (a relation name as before,
--     or a percentage of the training table held out per row, '20%');
--     new parameters standardize, max_categories and workers, appended so
--     that positional calls of 0.2.0 keep their meaning; learning_rate's
--     default is NULL: 0.01 for linear (squared loss), 0.1 for the others.

\echo Use "ALTER EXTENSION corgipile UPDATE TO '0.3.0'" to load this file. \quit

ALTER TABLE corgipile.model_store ADD COLUMN preprocess jsonb;
COMMENT ON COLUMN corgipile.model_store.preprocess IS 'Feature statistics and category dictionaries applied before the weights, or NULL for raw features.';

CREATE OR REPLACE VIEW corgipile.models WITH (security_barrier) AS
SELECT s.model_name,
       s.model,
       CASE WHEN COALESCE(pg_catalog.has_table_privilege(s.relid, 'SELECT'),
                     pg_catalog.pg_has_role(s.owner_id, 'USAGE'))
            THEN s.relation END AS relation,
       s.label,
       s.features,
       s.feature_indices,
       s.n_features,
       s.weights,
       s.classes,
       CASE WHEN COALESCE(pg_catalog.has_table_privilege(s.relid, 'SELECT'),
                     pg_catalog.pg_has_role(s.owner_id, 'USAGE'))
            THEN s.params
            -- the figures of params that describe the training relation
            ELSE s.params OPERATOR(pg_catalog.-)
                 '{n_blocks,pages_per_block,blocks_per_buffer,window_rows,reservoir_rows,validation,holdout}'::text[]
       END AS params,
       CASE WHEN COALESCE(pg_catalog.has_table_privilege(s.relid, 'SELECT'),
                     pg_catalog.pg_has_role(s.owner_id, 'USAGE'))
            THEN s.history END AS history,
       s.created_at,
       pg_catalog.pg_get_userbyid(s.owner_id) AS owner,
       s.owner_id,
       CASE WHEN COALESCE(pg_catalog.has_table_privilege(s.relid, 'SELECT'),
                     pg_catalog.pg_has_role(s.owner_id, 'USAGE'))
            THEN s.relid END AS relid,
       s.usage_roles::pg_catalog.regrole[] AS usage_roles,
       -- statistics and category values of the training relation's rows
       CASE WHEN COALESCE(pg_catalog.has_table_privilege(s.relid, 'SELECT'),
                     pg_catalog.pg_has_role(s.owner_id, 'USAGE'))
            THEN s.preprocess END AS preprocess
  FROM corgipile.model_store AS s
 WHERE pg_catalog.pg_has_role(s.owner_id, 'USAGE')
    OR EXISTS (SELECT 1 FROM pg_catalog.unnest(s.usage_roles) AS g(role)
                WHERE pg_catalog.pg_has_role(g.role, 'USAGE'));

COMMENT ON VIEW corgipile.models IS 'The models the current role owns or was granted USAGE on (superusers: all); relation, history, preprocessing and dataset figures only where the role may read the training relation.';
GRANT SELECT ON corgipile.models TO PUBLIC;

DROP FUNCTION corgipile.train(regclass, text, text, text, text, text, integer, text,
                              float8, float8, integer, integer, float8, text, text,
                              bigint, boolean, regclass, float8, float8, integer, text);

CREATE FUNCTION corgipile.train(
    relation        regclass,
    model           text,
    model_name      text DEFAULT NULL,
    label           text DEFAULT 'label',
    features        text DEFAULT 'features',
    feature_indices text DEFAULT NULL,
    n_features      integer DEFAULT NULL,
    shuffle         text DEFAULT 'corgipile',
    learning_rate   float8 DEFAULT NULL,
    decay           float8 DEFAULT 0.95,
    max_epoch_num   integer DEFAULT 20,
    batch_size      integer DEFAULT 1,
    l2              float8 DEFAULT 0,
    block_size      text DEFAULT NULL,
    buffer_size     text DEFAULT '10%',
    seed            bigint DEFAULT NULL,
    double_buffer   boolean DEFAULT true,
    validation      text DEFAULT NULL,
    l1              float8 DEFAULT 0,
    tolerance       float8 DEFAULT NULL,
    n_iter_no_change integer DEFAULT 5,
    warm_start      text DEFAULT NULL,
    standardize     text DEFAULT 'auto',
    max_categories  integer DEFAULT 1000,
    workers         integer DEFAULT 1)
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
-- feature_indices, block_size, seed, validation, tolerance and warm_start;
-- other NULLs are errors.
LANGUAGE C VOLATILE PARALLEL UNSAFE
ROWS 20
SUPPORT corgipile.train_support;

COMMENT ON FUNCTION corgipile.train IS 'Train a model with SGD over a table; one row per epoch. The model is stored in corgipile.models. validation: a table, or a percentage of this one held out (''20%''). standardize: auto, on, scale_only or off. warm_start: start from a stored model''s weights (and, for shuffle => ''grab'', its block order). workers: processes that train, the leader included.';

-- import_model takes the preprocess column too (an exported standardized
-- or one-hot model predicts wrongly without it); validated like the rest
-- of the row.  A new argument changes the signature: drop and create.
DROP FUNCTION corgipile.import_model(text, text, text, text, text[], text, integer,
                                     float8[], jsonb, jsonb, jsonb, timestamptz);
CREATE FUNCTION corgipile.import_model(
    model_name      text,
    model           text,
    relation        text,
    label           text,
    features        text[],
    feature_indices text,
    n_features      integer,
    weights         float8[],
    classes         jsonb,
    params          jsonb,
    history         jsonb,
    created_at      timestamptz DEFAULT NULL,
    preprocess      jsonb DEFAULT NULL)
RETURNS void
AS 'MODULE_PATHNAME', 'corgipile_import_model'
-- not STRICT: feature_indices, classes, created_at and preprocess may be NULL
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION corgipile.import_model IS 'Store a model exported from another database; the row is validated as predict() would load it and is owned by the caller.';

-- A model's weights in the original units of its features (standardized
-- models store them in the scaled space): USAGE on the model, and the
-- right to read its training relation, as for the models view's
-- preprocess column.
CREATE FUNCTION corgipile.model_coefficients(model_name text)
RETURNS TABLE (output integer, feature text, weight float8)
AS 'MODULE_PATHNAME', 'corgipile_model_coefficients'
LANGUAGE C STRICT STABLE PARALLEL SAFE;

COMMENT ON FUNCTION corgipile.model_coefficients IS 'The model''s weights in the original units of its features, one row per weight (feature NULL: the intercept); output numbers softmax''s classes from 1.';
