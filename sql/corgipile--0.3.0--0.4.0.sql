-- corgipile 0.3.0 -> 0.4.0
--
-- What changes (each section below names its part):
--   * Grantees: a role dropped since it was granted USAGE on a model no
--     longer shows in corgipile.models.usage_roles, and the stored lists
--     are swept of such roles now (grant_model and revoke_model sweep
--     them on every change from now on).
--   * preprocess and classes are stored uncompressed (STORAGE EXTERNAL):
--     writing a model with long category values costs no compression
--     buffer.
--   * What a grantee sees: a role that may not read a model's training
--     relation sees its function only (corgipile.may_see_model_data, the
--     C rule predict and model_coefficients apply): no weights or
--     n_features of a preprocessed model, and only the params no row
--     decides.
--   * corgipile.sizing() and corgipile.block_rows(): block sizing and packed
--     block rows for corgipile.torch (issues 20 and 23).
--   * Defaults that converge: train() takes average (NULL: averaged SGD
--     when learning_rate is left to its default), and buffer_size
--     defaults to NULL (the whole table when its heap fits
--     maintenance_work_mem, else 10%), max_epoch_num to NULL (20, or up
--     to 1000 on a smaller table: at least 1,000,000 row steps), and l2 to NULL
--     (scikit-learn's C = 1 per row, 1/rows, with the default schedule;
--     else 0).
--   * Imputation stored with the model: train() takes missing ('skip',
--     the default, 'mean', 'median', 'zero') and missing_indicator.

\echo Use "ALTER EXTENSION corgipile UPDATE TO '0.4.0'" to load this file. \quit

-- Grantees ---------------------------------------------------------------
-- DROP ROLE cannot see model rows (they are not objects PostgreSQL tracks
-- dependencies of), so a dropped grantee's OID stayed in usage_roles.
UPDATE corgipile.model_store AS s
   SET usage_roles = ARRAY(SELECT g.r
                             FROM pg_catalog.unnest(s.usage_roles) WITH ORDINALITY AS g(r, n)
                            WHERE EXISTS (SELECT 1 FROM pg_catalog.pg_roles AS a
                                           WHERE a.oid OPERATOR(pg_catalog.=) g.r)
                            ORDER BY g.n)
 WHERE NOT (s.usage_roles OPERATOR(pg_catalog.<@)
            ARRAY(SELECT a.oid FROM pg_catalog.pg_roles AS a));

-- What a model shows a role that may not read its training rows (a USAGE
-- grantee without SELECT on the training relation; the owner of a model
-- without one): the model's function and nothing of its preprocessing.
-- The rule is C's (cp_model_may_see_data), the one predict, evaluate,
-- model_coefficients, warm_start and block_rows apply.  The view calls it
-- in each column it guards rather than once in a lateral subquery: a join
-- would make the view not automatically updatable, and superusers delete
-- model rows through it.
CREATE FUNCTION corgipile.may_see_model_data(relid oid, owner_id oid)
RETURNS boolean
AS 'MODULE_PATHNAME', 'corgipile_may_see_model_data'
LANGUAGE C STABLE PARALLEL SAFE;

COMMENT ON FUNCTION corgipile.may_see_model_data IS 'Whether the current role may see what a model holds of its training rows (relation, history, preprocessing, the weights of a preprocessed model, the params that describe the rows): SELECT on the training relation while it exists, else the rights of the model''s owner.  The rule of corgipile.models.';

-- For a role that may not see the rows: no relation, history or
-- preprocess; no weights or n_features of a preprocessed model (they are
-- in its scaled, one-hot space: with two predictions they give each
-- feature's std, and n_features counts the categories); of params only
-- the training's settings that no row decides (l2 and max_epoch_num are
-- left out: their defaults follow the row count).
CREATE OR REPLACE VIEW corgipile.models WITH (security_barrier) AS
SELECT s.model_name,
       s.model,
       CASE WHEN corgipile.may_see_model_data(s.relid, s.owner_id) THEN s.relation END AS relation,
       s.label,
       s.features,
       s.feature_indices,
       CASE WHEN s.preprocess IS NULL OR corgipile.may_see_model_data(s.relid, s.owner_id)
            THEN s.n_features END AS n_features,
       CASE WHEN s.preprocess IS NULL OR corgipile.may_see_model_data(s.relid, s.owner_id)
            THEN s.weights END AS weights,
       s.classes,
       CASE WHEN corgipile.may_see_model_data(s.relid, s.owner_id) THEN s.params
            ELSE COALESCE((SELECT pg_catalog.jsonb_object_agg(p.key, p.value)
                             FROM pg_catalog.jsonb_each(s.params) AS p(key, value)
                            WHERE p.key OPERATOR(pg_catalog.=) ANY
                                  ('{shuffle,learning_rate,decay,batch_size,average,seed,double_buffer,layout,l1,tolerance,n_iter_no_change,n_outputs,standardize,max_categories,workers,block_size,buffer_size,parallel_sync,parallel_grab,grab_granularity}'::pg_catalog.text[])),
                          '{}'::pg_catalog.jsonb)
       END AS params,
       CASE WHEN corgipile.may_see_model_data(s.relid, s.owner_id) THEN s.history END AS history,
       s.created_at,
       pg_catalog.pg_get_userbyid(s.owner_id) AS owner,
       s.owner_id,
       CASE WHEN corgipile.may_see_model_data(s.relid, s.owner_id) THEN s.relid END AS relid,
       -- roles dropped since they were granted leave their OIDs behind
       ARRAY(SELECT g.r::pg_catalog.regrole
               FROM pg_catalog.unnest(s.usage_roles) WITH ORDINALITY AS g(r, n)
              WHERE EXISTS (SELECT 1 FROM pg_catalog.pg_roles AS a
                             WHERE a.oid OPERATOR(pg_catalog.=) g.r)
              ORDER BY g.n) AS usage_roles,
       -- statistics and category values of the training relation's rows
       CASE WHEN corgipile.may_see_model_data(s.relid, s.owner_id) THEN s.preprocess END AS preprocess
  FROM corgipile.model_store AS s
 WHERE pg_catalog.pg_has_role(s.owner_id, 'USAGE')
    OR EXISTS (SELECT 1 FROM pg_catalog.unnest(s.usage_roles) AS g(role)
                WHERE pg_catalog.pg_has_role(g.role, 'USAGE'));

COMMENT ON VIEW corgipile.models IS 'The models the current role owns or was granted USAGE on (superusers: all).  Where the role may not read the training relation (corgipile.may_see_model_data), the model''s function only: no relation, history or preprocess, no weights or n_features of a preprocessed model, and of params only the settings no row decides.';
GRANT SELECT ON corgipile.models TO PUBLIC;

-- Category values and class labels are stored uncompressed, out of line:
-- compressing a value is one more copy of it in the backend that writes
-- the model (pglz's output buffer), and one more in each that reads it.
-- The first pass charges what writing costs (docs/security.md, "Resource
-- bounds"); small values (most) stay in the row as before.
ALTER TABLE corgipile.model_store ALTER COLUMN preprocess SET STORAGE EXTERNAL,
                                  ALTER COLUMN classes SET STORAGE EXTERNAL;

-- ---------------------------------------------------------------------------
-- Sizing and block rows for corgipile.torch (issue 23; issue 20 item 4)
--
-- corgipile.sizing(): how train() cuts a relation into blocks and buffers,
-- computed by the engine's own cp_resolve_sizing, so clients ask instead of
-- restating the rules.  corgipile.block_rows(): the rows of whole blocks,
-- converted as training converts them (optionally with a stored model's
-- label encoding and preprocessing), as packed little-endian floats.
-- ---------------------------------------------------------------------------

CREATE FUNCTION corgipile.sizing(
    relation regclass,
    block_size text DEFAULT NULL,
    buffer_size text DEFAULT NULL,
    pages bigint DEFAULT NULL,
    OUT n_pages bigint,
    OUT page_size integer,
    OUT pages_per_block bigint,
    OUT n_blocks bigint,
    OUT blocks_per_buffer bigint)
AS 'MODULE_PATHNAME', 'corgipile_sizing'
LANGUAGE C STABLE PARALLEL SAFE;

COMMENT ON FUNCTION corgipile.sizing IS 'How corgipile.train() would cut the relation (or pages heap pages, when given) into blocks and buffers for these block_size and buffer_size (NULL: train()''s defaults, a buffer of the whole table when its heap fits maintenance_work_mem, else 10%).';

CREATE FUNCTION corgipile.block_rows(
    relation regclass,
    first_pages bigint[],
    pages_per_block integer,
    label text DEFAULT NULL,
    features text DEFAULT NULL,
    feature_indices text DEFAULT NULL,
    model text DEFAULT NULL,
    id_column text DEFAULT NULL,
    n_features integer DEFAULT NULL,
    dtype text DEFAULT 'float4',
    OUT page bigint,
    OUT n_rows integer,
    OUT dim integer,
    OUT y bytea,
    OUT x bytea,
    OUT ids bytea)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'corgipile_block_rows'
LANGUAGE C VOLATILE PARALLEL UNSAFE ROWS 16;

COMMENT ON FUNCTION corgipile.block_rows IS 'The visible rows of the blocks of pages_per_block pages starting at first_pages, one output row per block (or per chunk of a large one): n_rows, dim, y (float8 labels), x (n_rows x dim float4 or float8 features, little-endian), ids (int8, with id_column). label defaults to ''label'', features to ''features''; with model the model''s columns, label encoding and preprocessing apply.';

-- Defaults that converge (issue 21) -------------------------------------
-- A new parameter, average, and the defaults NULL of buffer_size,
-- max_epoch_num and l2: the signature
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
    max_epoch_num   integer DEFAULT NULL,
    batch_size      integer DEFAULT 1,
    l2              float8 DEFAULT NULL,
    block_size      text DEFAULT NULL,
    buffer_size     text DEFAULT NULL,
    seed            bigint DEFAULT NULL,
    double_buffer   boolean DEFAULT true,
    validation      text DEFAULT NULL,
    l1              float8 DEFAULT 0,
    tolerance       float8 DEFAULT NULL,
    n_iter_no_change integer DEFAULT NULL,
    warm_start      text DEFAULT NULL,
    standardize     text DEFAULT 'auto',
    max_categories  integer DEFAULT 1000,
    workers         integer DEFAULT 1,
    average         boolean DEFAULT NULL,
    missing         text DEFAULT 'skip',
    missing_indicator boolean DEFAULT false)
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
-- feature_indices, learning_rate, max_epoch_num, l2, block_size, buffer_size, seed,
-- validation, tolerance, n_iter_no_change, warm_start and average; other NULLs
-- are errors.
LANGUAGE C VOLATILE PARALLEL UNSAFE
ROWS 20
SUPPORT corgipile.train_support;

COMMENT ON FUNCTION corgipile.train IS 'Train a model with SGD over a table; one row per epoch. The model is stored in corgipile.models. learning_rate NULL: the default schedule (rate 0.1, iterates averaged from epoch 2, implicit steps for linear). average: averaged SGD on or off (NULL: on with the default rate). buffer_size NULL: the whole table when its heap fits maintenance_work_mem, else 10%. max_epoch_num and tolerance NULL: until the averaged model converges (its objective on a seeded sample of the rows improves by less than 0.5%), at most 20 epochs (up to 1000 below 50,000 rows); on a table the polish takes, 3 epochs and then L-BFGS to the minimum. l2 NULL: 1/rows with the default schedule (scikit-learn''s C = 1), else 0. validation: a table, or a percentage of this one held out (''20%''). standardize: auto, on, scale_only or off. missing: what a NULL number becomes: skip (the row is left out), mean, median or zero (imputed, as scikit-learn''s SimpleImputer; the statistic is stored with the model and applied by predict and evaluate); missing_indicator: add a 0/1 feature per column that had NULLs. warm_start: start from a stored model''s weights (and, for shuffle => ''grab'', its block order). workers: processes that train, the leader included.';

-- ---------------------------------------------------------------------------
-- Citus: the nodes a distributed training and a model's copies reach
-- ---------------------------------------------------------------------------

CREATE FUNCTION corgipile.cluster_nodes(
    OUT node_name text,
    OUT node_port integer,
    OUT group_id integer,
    OUT corgipile_version text)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'corgipile_cluster_nodes'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION corgipile.cluster_nodes IS 'On a Citus coordinator: each active primary worker node, connected to as the current role, with its corgipile version. An error names a node that cannot be reached, refuses the role, or lacks corgipile at this node''s version.';

-- ---------------------------------------------------------------------------
-- Citus: a shard's training on its worker, driven by the coordinator
-- (docs/distributed.md); called by corgipile.train() on a distributed table
-- ---------------------------------------------------------------------------

CREATE FUNCTION corgipile.shard_open(args text[])
RETURNS bytea
AS 'MODULE_PATHNAME', 'corgipile_shard_open'
LANGUAGE C STRICT VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION corgipile.shard_open IS 'Internal (a distributed training''s coordinator calls it on each shard''s worker): opens the training of a shard in this transaction, from train()''s arguments as text, and returns its first pass''s statistics.';

CREATE FUNCTION corgipile.shard_round(input bytea)
RETURNS bytea
AS 'MODULE_PATHNAME', 'corgipile_shard_round'
LANGUAGE C STRICT VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION corgipile.shard_round IS 'Internal (a distributed training''s coordinator calls it on each shard''s worker): trains one round of the shard training corgipile.shard_open() opened, from the weights sent, and returns its weights and figures.';

-- ---------------------------------------------------------------------------
-- Citus: models on every node, predict and evaluate where the rows are
--
-- A model changed on a Citus coordinator is copied to every worker in the
-- coordinator's transaction (two-phase commit), each node keeping its own
-- corgipile.model_store; a copy names roles and the training relation by
-- name, since OIDs differ between nodes.  evaluate() on a distributed
-- table scores each shard on its node (evaluate_partial) and merges the
-- parts' metrics on the coordinator.  docs/distributed.md says how.
-- ---------------------------------------------------------------------------

CREATE FUNCTION corgipile.model_hash(model_name text)
RETURNS text
AS 'MODULE_PATHNAME', 'corgipile_model_hash'
LANGUAGE C STABLE STRICT PARALLEL SAFE;

COMMENT ON FUNCTION corgipile.model_hash(text) IS 'The SHA-256 of the model''s row as every node reads it (roles and the training relation by name, floats exactly): two nodes hold the same model when the hashes are equal.';

CREATE FUNCTION corgipile.apply_model_copy(model_name text, copy jsonb)
RETURNS void
AS 'MODULE_PATHNAME', 'corgipile_apply_model_copy'
-- not STRICT: a NULL copy drops the model
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION corgipile.apply_model_copy(text, jsonb) IS 'Make this node''s row of a model what a Citus coordinator''s copy says (NULL: drop it); the role must be allowed to manage the model it replaces and the one it writes. The coordinator calls it on its workers.';

CREATE FUNCTION corgipile.check_model_copies(
    OUT model_name text,
    OUT node_name text,
    OUT node_port integer,
    OUT coordinator_hash text,
    OUT node_hash text)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'corgipile_check_model_copies'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION corgipile.check_model_copies() IS 'On a Citus coordinator: each model the current role sees whose copy on a worker differs (node_hash NULL: missing there; coordinator_hash NULL: only there). No rows: every node holds the same models.';

CREATE FUNCTION corgipile.recover_model_copies(
    OUT node_name text,
    OUT node_port integer,
    OUT gid text,
    OUT action text)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'corgipile_recover_model_copies'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION corgipile.recover_model_copies() IS 'On a Citus coordinator: finish the prepared transactions of model copies left on the workers by a failure between the coordinator''s commit and theirs (committed where the coordinator committed, else rolled back).';

CREATE FUNCTION corgipile.copy_models(model_name text DEFAULT NULL)
RETURNS bigint
AS 'MODULE_PATHNAME', 'corgipile_copy_models'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION corgipile.copy_models(text) IS 'On a Citus coordinator: write the current role''s models (a superuser: every model; model_name: that one) to every worker again when the transaction commits, as a change to them would: for a worker added after they were stored, or one check_model_copies() names. Returns how many models are copied.';

CREATE FUNCTION corgipile.evaluate_partial(model_name text, relation regclass, model_hash text)
RETURNS TABLE (score float8, positives bigint, negatives bigint, state text)
AS 'MODULE_PATHNAME', 'corgipile_evaluate_partial'
LANGUAGE C STABLE STRICT PARALLEL RESTRICTED;

COMMENT ON FUNCTION corgipile.evaluate_partial(text, regclass, text) IS 'What evaluate() on a Citus table needs of one shard, run on its node: a row with the metrics'' counts and sums (state), then each distinct score with its positive and negative rows (binary models). model_hash must be this node''s copy''s.';
