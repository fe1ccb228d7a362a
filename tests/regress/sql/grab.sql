-- shuffle => 'grab': blocks in GraB's gradient-balanced order (docs/grab.md).
SET corgipile.progress = off;

-- 4,000 rows stored clustered by label, 3 float8 features: ~95 rows a page,
-- so one-page blocks hold at most 100 rows and the buffer keeps GraB's order.
CREATE TABLE grab_clu AS
SELECT i AS id, CASE WHEN i <= 2000 THEN 1 ELSE -1 END AS label,
       ARRAY[(CASE WHEN i <= 2000 THEN 0.3 ELSE -0.3 END) + sin(i * 12.9898),
             cos(i * 78.233), sin(i * 3.1)]::float8[] AS features,
       ARRAY[0, 1, 2] AS idx
FROM generate_series(1, 4000) AS i;
ANALYZE grab_clu;

-- The plan shows the strategy and the buffer choice.
EXPLAIN (COSTS OFF) SELECT * FROM corgipile.train('grab_clu', 'logistic', shuffle => 'grab');

-- Blocks of 2 pages hold more than 100 rows: the buffer is shuffled.
EXPLAIN (COSTS OFF) SELECT * FROM corgipile.train('grab_clu', 'logistic', shuffle => 'grab',
                                                  block_size => '2');

-- A table never analysed (reltuples = -1) gets the shuffled buffer.
CREATE TABLE grab_fresh WITH (autovacuum_enabled = false) AS SELECT * FROM grab_clu;
EXPLAIN (COSTS OFF) SELECT * FROM corgipile.train('grab_fresh', 'svm', shuffle => 'grab');

-- shuffled_scan() with grab (no SGD, so no feedback: random block order)
-- still visits every row exactly once.
SELECT count(*) AS fed, count(DISTINCT o.row_ctid) AS distinct_rows
FROM corgipile.shuffled_scan('grab_clu', 'grab', seed => 3) AS o(row_ctid, id);

-- Training stores the run's choices and the last epoch's order and signs.
SELECT count(*) FROM corgipile.train('grab_clu', 'logistic', model_name => 'grab_m',
                                     shuffle => 'grab', seed => 3, max_epoch_num => 4);
SELECT params->>'shuffle' AS shuffle, params->>'grab_granularity' AS granularity,
       params->>'grab_buffer_shuffle' AS buffer_shuffle,
       params->>'grab_pages_per_block' AS pages_per_block,
       params->>'grab_n_blocks' AS n_blocks, params->>'grab_n_pages' AS n_pages,
       params->>'grab_dim' AS dim, params->>'grab_projected' AS projected,
       -- 12-byte header, 4 bytes a block, one bit a block
       length(decode(params->>'grab_state', 'base64')) =
         12 + 4 * (params->>'grab_n_blocks')::int + ((params->>'grab_n_blocks')::int + 7) / 8
         AS state_length,
       substr(decode(params->>'grab_state', 'base64'), 1, 4) AS magic
FROM corgipile.models WHERE model_name = 'grab_m';

-- The step rule from epoch 2: when rate x mean g^2 x block-mean |x|^2 is
-- above 0.2, the epoch is corgipile's (random block order, shuffled buffer).
-- Features ten times larger: at rate 0.5 only the first epoch keeps the
-- order (grab_epochs_kept 1) and the later ones are random, at 0.001 all
-- four keep GraB's order.
CREATE TABLE grab_big AS
SELECT i AS id, CASE WHEN i <= 2000 THEN 1 ELSE -1 END AS label,
       ARRAY[(CASE WHEN i <= 2000 THEN 3 ELSE -3 END) + 10 * sin(i * 12.9898),
             10 * cos(i * 78.233), 10 * sin(i * 3.1)]::float8[] AS features
FROM generate_series(1, 4000) AS i;
ANALYZE grab_big;
SELECT count(*) FROM corgipile.train('grab_big', 'logistic', model_name => 'grab_hi',
                                     shuffle => 'grab', seed => 3, max_epoch_num => 4,
                                     learning_rate => 0.5, standardize => 'off');
SELECT count(*) FROM corgipile.train('grab_big', 'logistic', model_name => 'grab_lo',
                                     shuffle => 'grab', seed => 3, max_epoch_num => 4,
                                     learning_rate => 0.001, standardize => 'off');
SELECT model_name, params->>'grab_epochs_kept' AS epochs_kept,
       params->>'grab_epochs_random' AS epochs_random,
       params->>'grab_buffer_shuffle' AS last_shuffled,
       round((params->>'grab_block_mean_sq')::numeric, 2) AS block_mean_sq,
       (params->>'grab_step')::float8 > 0.2 AS step_over
FROM corgipile.models WHERE model_name IN ('grab_hi', 'grab_lo') ORDER BY model_name;
-- corgipile.grab_buffer overrides the rule, and says so in the plan.
SET corgipile.grab_buffer = kept;
SELECT count(*) FROM corgipile.train('grab_big', 'logistic', model_name => 'grab_forced',
                                     shuffle => 'grab', seed => 3, max_epoch_num => 4,
                                     learning_rate => 0.5, standardize => 'off');
SELECT params->>'grab_epochs_kept' AS epochs_kept FROM corgipile.models
WHERE model_name = 'grab_forced';
EXPLAIN (COSTS OFF) SELECT * FROM corgipile.train('grab_big', 'logistic', shuffle => 'grab');
RESET corgipile.grab_buffer;

-- GraB's unit: a block, or with corgipile.grab_unit_blocks = k, k
-- consecutive blocks of the first order.
SET corgipile.grab_unit_blocks = 3;
EXPLAIN (COSTS OFF) SELECT * FROM corgipile.train('grab_clu', 'logistic', shuffle => 'grab');
SELECT count(*) FROM corgipile.train('grab_clu', 'logistic', model_name => 'grab_units',
                                     shuffle => 'grab', seed => 3, max_epoch_num => 4);
RESET corgipile.grab_unit_blocks;
SELECT params->>'grab_granularity' AS granularity, params->>'grab_unit_blocks' AS unit_blocks,
       params->>'grab_n_blocks' AS n_blocks,
       length(decode(params->>'grab_state', 'base64')) =
         12 + 4 * (params->>'grab_n_blocks')::int + ((params->>'grab_n_blocks')::int + 7) / 8
         AS state_length
FROM corgipile.models WHERE model_name = 'grab_units';
-- a warm start from it uses its stored block order
SELECT count(*) FROM corgipile.train('grab_clu', 'logistic', model_name => 'grab_units2',
                                     shuffle => 'grab', seed => 3, max_epoch_num => 2,
                                     warm_start => 'grab_units');
SELECT corgipile.drop_model(m) FROM unnest(ARRAY['grab_hi', 'grab_lo', 'grab_forced',
                                                 'grab_units', 'grab_units2']) AS m;
DROP TABLE grab_big;

-- Other strategies store no GraB keys.
SELECT count(*) FROM corgipile.train('grab_clu', 'logistic', model_name => 'grab_c',
                                     seed => 3, max_epoch_num => 1);
SELECT count(*) AS grab_keys FROM corgipile.models, jsonb_object_keys(params) AS k
WHERE model_name = 'grab_c' AND k LIKE 'grab%';

-- Same seed, same weights; every model, dense and sparse, per-tuple and
-- mini-batch, single and double buffering.
CREATE TEMP TABLE runs AS
SELECT m, bs, db, sp, k,
       format('grab_%s_%s_%s_%s_%s', m, bs, db, sp, k) AS name
FROM unnest(ARRAY['svm', 'logistic', 'linear', 'softmax']) AS m,
     unnest(ARRAY[1, 8]) AS bs, unnest(ARRAY[true, false]) AS db,
     unnest(ARRAY[false, true]) AS sp, generate_series(1, 2) AS k;
SELECT count(*) FROM runs,
  LATERAL corgipile.train('grab_clu', runs.m, model_name => runs.name, shuffle => 'grab',
                          seed => 11, max_epoch_num => 3, batch_size => runs.bs,
                          double_buffer => runs.db,
                          feature_indices => CASE WHEN runs.sp THEN 'idx' END,
                          n_features => CASE WHEN runs.sp THEN 3 END);
SELECT r.m, r.bs, r.sp, count(DISTINCT mo.weights::text) AS distinct_weights,
       bool_and(mo.params ? 'grab_state') AS stored
FROM runs AS r JOIN corgipile.models AS mo ON mo.model_name = r.name
GROUP BY r.m, r.bs, r.sp ORDER BY r.m, r.bs, r.sp;

-- The gradient sums must fit maintenance_work_mem: 58 blocks of 5,001
-- weights (2.3 MB) are projected to what fits in 1 MB ...
SET maintenance_work_mem = '1MB';
SELECT count(*) FROM corgipile.train('grab_clu', 'svm', model_name => 'grab_proj',
                                     shuffle => 'grab', seed => 1, max_epoch_num => 2,
                                     feature_indices => 'idx', n_features => 5000);
SELECT (params->>'grab_dim')::int < 5001 AS smaller, params->>'grab_projected' AS projected
FROM corgipile.models WHERE model_name = 'grab_proj';
-- ... and 1,001 weights in each of ~3,000 one-page blocks do not fit even
-- a 64-wide projection: a clear error.
CREATE TABLE grab_many (id int, label int, features float8[], idx int[]) WITH (fillfactor = 10);
INSERT INTO grab_many
SELECT i, (i % 2) * 2 - 1, ARRAY[i % 7, 1.0]::float8[], ARRAY[0, 1]
FROM generate_series(1, 40000) AS i;
SELECT pg_relation_size('grab_many') / current_setting('block_size')::int > 2048 AS many_pages;
SELECT count(*) FROM corgipile.train('grab_many', 'svm', shuffle => 'grab', max_epoch_num => 1,
                                     block_size => '1', feature_indices => 'idx',
                                     n_features => 1000);
RESET maintenance_work_mem;

-- warm_start: the weights of a stored model (any strategy) ...
SELECT count(*) FROM corgipile.train('grab_clu', 'logistic', model_name => 'grab_warm',
                                     shuffle => 'corgipile', seed => 3, max_epoch_num => 1,
                                     learning_rate => 1e-12, warm_start => 'grab_m');
SELECT max(abs(a.w - b.w)) < 1e-6 AS starts_from_the_weights
FROM unnest((SELECT weights FROM corgipile.models WHERE model_name = 'grab_m')) WITH ORDINALITY AS a(w, i)
JOIN unnest((SELECT weights FROM corgipile.models WHERE model_name = 'grab_warm')) WITH ORDINALITY AS b(w, i)
  USING (i);
-- ... and for grab, its stored block order (same table: no NOTICE).
SELECT count(*) FROM corgipile.train('grab_clu', 'logistic', shuffle => 'grab', seed => 3,
                                     max_epoch_num => 1, warm_start => 'grab_m');
-- Refused: another kind, another layout, another relation, another label
-- column, another dimension, no such model.
SELECT count(*) FROM corgipile.train('grab_clu', 'svm', shuffle => 'grab', warm_start => 'grab_m');
SELECT count(*) FROM corgipile.train('grab_clu', 'logistic', shuffle => 'grab', warm_start => 'grab_m',
                                     feature_indices => 'idx', n_features => 3);
CREATE TABLE grab_narrow AS SELECT id, label, features[1:2] AS features FROM grab_clu;
SELECT count(*) FROM corgipile.train('grab_narrow', 'logistic', warm_start => 'grab_m');
SELECT count(*) FROM corgipile.train('grab_clu', 'logistic', warm_start => 'grab_m', label => 'id');
SELECT count(*) FROM corgipile.train('grab_clu', 'logistic', model_name => 'grab_sp', max_epoch_num => 1,
                                     feature_indices => 'idx', n_features => 3);
SELECT count(*) FROM corgipile.train('grab_clu', 'logistic', warm_start => 'grab_sp',
                                     feature_indices => 'idx', n_features => 5);
SELECT count(*) FROM corgipile.train('grab_clu', 'logistic', warm_start => 'no_such_model');
-- Another block size: the weights are used, the order is not.
SELECT count(*) FROM corgipile.train('grab_clu', 'logistic', shuffle => 'grab', seed => 3,
                                     max_epoch_num => 1, block_size => '2', warm_start => 'grab_m');
-- A role without USAGE on the model may not start from it; with USAGE it
-- gets the weights and the stored order (read as the storage's owner).
CREATE ROLE corgipile_grab_user;
GRANT SELECT ON grab_clu TO corgipile_grab_user;
SET ROLE corgipile_grab_user;
SELECT count(*) FROM corgipile.train('grab_clu', 'logistic', shuffle => 'grab',
                                     max_epoch_num => 1, warm_start => 'grab_m');
RESET ROLE;
SELECT corgipile.grant_model('grab_m', 'corgipile_grab_user');
SET ROLE corgipile_grab_user;
SELECT count(*) FROM corgipile.train('grab_clu', 'logistic', shuffle => 'grab', seed => 3,
                                     model_name => 'grab_user_m', max_epoch_num => 1,
                                     warm_start => 'grab_m');
RESET ROLE;
SELECT corgipile.drop_model('grab_user_m');
DROP OWNED BY corgipile_grab_user;
DROP ROLE corgipile_grab_user;
-- The table grew: the stored order is adapted, and a NOTICE says how.
INSERT INTO grab_clu SELECT * FROM grab_clu WHERE id <= 1000;
SELECT count(*) FROM corgipile.train('grab_clu', 'logistic', shuffle => 'grab', seed => 3,
                                     max_epoch_num => 1, warm_start => 'grab_m');

-- A damaged stored order is an error, never silently a random order: a
-- truncated state, and text that is not base64.
UPDATE corgipile.model_store SET params = jsonb_set(params, '{grab_state}', '"Q1BHQg=="')
WHERE model_name = 'grab_m';
SELECT count(*) FROM corgipile.train('grab_clu', 'logistic', shuffle => 'grab',
                                     max_epoch_num => 1, warm_start => 'grab_m');
UPDATE corgipile.model_store SET params = jsonb_set(params, '{grab_state}', '"#not base64#"')
WHERE model_name = 'grab_m';
SELECT count(*) FROM corgipile.train('grab_clu', 'logistic', shuffle => 'grab',
                                     max_epoch_num => 1, warm_start => 'grab_m');
-- Block 0 twice: not a permutation.
UPDATE corgipile.model_store
SET params = jsonb_set(params, '{grab_state}',
                       to_jsonb(encode('\x435047420100000002000000000000000000000001'::bytea, 'base64')))
WHERE model_name = 'grab_m';
SELECT count(*) FROM corgipile.train('grab_clu', 'logistic', shuffle => 'grab',
                                     max_epoch_num => 1, warm_start => 'grab_m');
-- Other strategies use only the weights: the damaged order does not matter.
SELECT count(*) FROM corgipile.train('grab_clu', 'logistic', max_epoch_num => 1,
                                     warm_start => 'grab_m');
