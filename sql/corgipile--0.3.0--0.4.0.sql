-- corgipile 0.3.0 -> 0.4.0
--
-- What changes (each section below names its part):
--   * Defaults that converge: train() takes average (NULL: averaged SGD
--     when learning_rate is left to its default), and buffer_size
--     defaults to NULL (the whole table when its heap fits
--     maintenance_work_mem, else 10%).

\echo Use "ALTER EXTENSION corgipile UPDATE TO '0.4.0'" to load this file. \quit

-- Defaults that converge (issue 21) -------------------------------------
-- A new parameter, average, and buffer_size's default NULL: the signature
-- changes, so the function is dropped and created (as 0.3.0 did).
DROP FUNCTION corgipile.train(regclass, text, text, text, text, text, integer, text,
                              float8, float8, integer, integer, float8, text, text,
                              bigint, boolean, text, float8, float8, integer, text,
                              text, integer, integer);

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
    buffer_size     text DEFAULT NULL,
    seed            bigint DEFAULT NULL,
    double_buffer   boolean DEFAULT true,
    validation      text DEFAULT NULL,
    l1              float8 DEFAULT 0,
    tolerance       float8 DEFAULT NULL,
    n_iter_no_change integer DEFAULT 5,
    warm_start      text DEFAULT NULL,
    standardize     text DEFAULT 'auto',
    max_categories  integer DEFAULT 1000,
    workers         integer DEFAULT 1,
    average         boolean DEFAULT NULL)
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
-- feature_indices, learning_rate, block_size, buffer_size, seed,
-- validation, tolerance, warm_start and average; other NULLs are errors.
LANGUAGE C VOLATILE PARALLEL UNSAFE
ROWS 20
SUPPORT corgipile.train_support;

COMMENT ON FUNCTION corgipile.train IS 'Train a model with SGD over a table; one row per epoch. The model is stored in corgipile.models. learning_rate NULL: the default schedule (rate 0.1, iterates averaged from epoch 2, implicit steps for linear). average: averaged SGD on or off (NULL: on with the default rate). buffer_size NULL: the whole table when its heap fits maintenance_work_mem, else 10%. validation: a table, or a percentage of this one held out (''20%''). standardize: auto, on, scale_only or off. warm_start: start from a stored model''s weights (and, for shuffle => ''grab'', its block order). workers: processes that train, the leader included.';
