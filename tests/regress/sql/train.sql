-- The first statement of a fresh session already runs on the operators.
SET corgipile.progress = off;
SELECT model_name, epoch, tuples, round(loss::numeric, 4) AS loss,
       round(score::numeric, 4) AS score, validation_score IS NULL AS no_validation,
       seconds >= 0 AS timed
FROM corgipile.train('points', 'svm', standardize => 'off', model_name => 'svm1', max_epoch_num => 3, seed => 42);

-- The model row is kept, with the bias last.
SELECT model_name, model, relation, label, features, feature_indices, n_features,
       array_length(weights, 1) AS n_weights, classes, owner = current_user AS mine,
       params->>'seed' AS seed, params->>'shuffle' AS shuffle, params->>'layout' AS layout,
       jsonb_array_length(history) AS epochs
FROM corgipile.models WHERE model_name = 'svm1';

-- Same seed: the same weights, bit for bit, with or without double buffering.
SELECT count(*) FROM corgipile.train('points', 'svm', standardize => 'off', model_name => 'svm1_again',
                                     max_epoch_num => 3, seed => 42);
SELECT count(*) FROM corgipile.train('points', 'svm', standardize => 'off', model_name => 'svm1_single',
                                     max_epoch_num => 3, seed => 42, double_buffer => false);
SELECT a.weights = b.weights AS same_seed_same_weights,
       a.weights = c.weights AS single_buffered_same_weights
FROM corgipile.models a, corgipile.models b, corgipile.models c
WHERE a.model_name = 'svm1' AND b.model_name = 'svm1_again' AND c.model_name = 'svm1_single';

-- Another seed gives another order, hence other weights.
SELECT count(*) FROM corgipile.train('points', 'svm', standardize => 'off', model_name => 'svm_seed7',
                                     max_epoch_num => 3, seed => 7);
SELECT a.weights <> b.weights AS other_seed_other_weights
FROM corgipile.models a, corgipile.models b
WHERE a.model_name = 'svm1' AND b.model_name = 'svm_seed7';

-- Logistic regression (alias lr), mini-batches, L2, and validation.
SELECT epoch, round(loss::numeric, 4) AS loss, round(score::numeric, 4) AS score,
       round(validation_score::numeric, 4) AS validation_score
FROM corgipile.train('points', 'lr', standardize => 'off', model_name => 'lr1', max_epoch_num => 4,
                     batch_size => 16, l2 => 0.001, learning_rate => 0.5,
                     validation => 'points_test', seed => 1);
SELECT model, params->>'batch_size' AS batch_size, params->>'validation' AS validation
FROM corgipile.models WHERE model_name = 'lr1';

-- Each strategy visits every row once per epoch.
SELECT shuffle, min(tuples), max(tuples), count(*)
FROM (VALUES ('corgipile'), ('block_only'), ('no_shuffle')) AS s(shuffle),
     LATERAL (SELECT tuples FROM corgipile.train('points', 'svm', standardize => 'off',
              model_name => 'visit_' || s.shuffle, shuffle => s.shuffle,
              max_epoch_num => 2, seed => 3)) AS r
GROUP BY shuffle ORDER BY shuffle;

-- Labels: 0/1 and booleans map onto the same model as -1/+1.
SELECT count(*) FROM corgipile.train('points01', 'svm', standardize => 'off', model_name => 'svm01',
                                     max_epoch_num => 3, seed => 42);
SELECT count(*) FROM corgipile.train('points_bool', 'svm', standardize => 'off', model_name => 'svm_bool',
                                     max_epoch_num => 3, seed => 42);
SELECT model_name, classes FROM corgipile.models
WHERE model_name IN ('svm01', 'svm_bool') ORDER BY 1;
SELECT a.weights = b.weights AS zero_one_same_as_pm1
FROM corgipile.models a, corgipile.models b
WHERE a.model_name = 'svm1' AND b.model_name = 'svm01';

-- Feature columns and the sparse layout train the same model as the array
-- when the rows come in the same order (no_shuffle: their tables have other
-- page layouts, so random block orders would differ).
SELECT count(*) FROM corgipile.train('points', 'svm', standardize => 'off', model_name => 'svm_array_seq',
                                     shuffle => 'no_shuffle', max_epoch_num => 3);
SELECT count(*) FROM corgipile.train('points_cols', 'svm', standardize => 'off', model_name => 'svm_cols',
                                     features => 'x1, x2', shuffle => 'no_shuffle',
                                     max_epoch_num => 3);
SELECT count(*) FROM corgipile.train('points_sparse', 'svm', standardize => 'off', model_name => 'svm_sparse',
                                     features => 'vals', feature_indices => 'idx',
                                     shuffle => 'no_shuffle', max_epoch_num => 3);
SELECT m.model_name, m.features, m.feature_indices, m.n_features, m.params->>'layout' AS layout,
       (SELECT max(abs(x - y)) FROM unnest(m.weights, a.weights) AS u(x, y)) < 1e-9 AS same_as_array
FROM corgipile.models m, corgipile.models a
WHERE m.model_name IN ('svm_cols', 'svm_sparse') AND a.model_name = 'svm_array_seq'
ORDER BY 1;

-- Rows with a NULL label or NULL features are skipped and counted.
CREATE TABLE points_nulls AS SELECT * FROM points;
UPDATE points_nulls SET label = NULL WHERE id % 100 = 0;
UPDATE points_nulls SET features = NULL WHERE id % 100 = 1;
UPDATE points_nulls SET features = ARRAY[NULL, 1]::float8[] WHERE id % 100 = 2;
SELECT epoch, tuples FROM corgipile.train('points_nulls', 'svm', standardize => 'off', model_name => 'svm_nulls',
                                          max_epoch_num => 2, seed => 1);

-- A generated name when model_name is NULL.
SELECT model_name ~ '^points_logistic_[0-9]+$' AS generated
FROM corgipile.train('points', 'logistic', standardize => 'off', max_epoch_num => 1, seed => 1);

-- A rolled-back training leaves no model.
BEGIN;
SELECT count(*) FROM corgipile.train('points', 'svm', standardize => 'off', model_name => 'rolled_back',
                                     max_epoch_num => 1);
ROLLBACK;
SELECT count(*) AS rolled_back_models FROM corgipile.models WHERE model_name = 'rolled_back';

-- Called in a SELECT list, or with arguments that are not constants at
-- plan time, train() runs the same operators through its fallback.
SELECT (corgipile.train('points', 'svm', standardize => 'off', model_name => 'svm_tlist',
                        max_epoch_num => 3, seed => 42)).epoch;
PREPARE tr(regclass, text) AS
SELECT epoch, tuples FROM corgipile.train($1, 'svm', model_name => $2, max_epoch_num => 2, seed => 42);
SET plan_cache_mode = force_generic_plan;
EXECUTE tr('points', 'svm_prepared');
RESET plan_cache_mode;
SELECT a.weights = b.weights AS fallback_same_weights
FROM corgipile.models a, corgipile.models b
WHERE a.model_name = 'svm1' AND b.model_name = 'svm_tlist';

-- A WHERE clause on the output filters the epochs.
SELECT epoch FROM corgipile.train('points', 'svm', standardize => 'off', model_name => 'svm_where',
                                  max_epoch_num => 4, seed => 1)
WHERE epoch % 2 = 0;

-- Explicit block and buffer sizes: 16kB is 2 pages, 64kB a buffer of 4 blocks.
SELECT count(*) FROM corgipile.train('points', 'svm', standardize => 'off', model_name => 'sized',
                                     block_size => '16kB', buffer_size => '64kB',
                                     max_epoch_num => 1);
SELECT params->>'pages_per_block' AS pages_per_block,
       params->>'blocks_per_buffer' AS blocks_per_buffer, params->>'n_blocks' AS n_blocks,
       pg_relation_size('points') / current_setting('block_size')::int AS table_pages
FROM corgipile.models WHERE model_name = 'sized';

-- Arrays of domains over number types, and domains over index arrays, are
-- read as their base types: the same weights as without the domains.
CREATE DOMAIN real_dom AS float8;
CREATE DOMAIN idx_dom AS int[];
CREATE TABLE points_dom AS
SELECT id, label, features::real_dom[] AS features, ARRAY[0, 1]::idx_dom AS idx FROM points;
SELECT count(*) FROM corgipile.train('points_dom', 'svm', standardize => 'off', model_name => 'svm_dom',
                                     max_epoch_num => 2, seed => 1);
SELECT count(*) FROM corgipile.train('points_dom', 'svm', standardize => 'off', model_name => 'svm_dom_sparse',
                                     features => 'features', feature_indices => 'idx',
                                     max_epoch_num => 2, seed => 1);
CREATE TABLE points_nodom AS
SELECT id, label, features::float8[] AS features, ARRAY[0, 1]::int[] AS idx FROM points;
SELECT count(*) FROM corgipile.train('points_nodom', 'svm', standardize => 'off', model_name => 'svm_nodom',
                                     max_epoch_num => 2, seed => 1);
SELECT a.weights = b.weights AS domains_same_weights
FROM corgipile.models a, corgipile.models b
WHERE a.model_name = 'svm_dom' AND b.model_name = 'svm_nodom';

-- bigint class labels above 2^53 stay distinct classes
CREATE TABLE big_classes AS
SELECT 9007199254740992 + i % 3 AS label,
       ARRAY[(i % 3 = 0)::int, (i % 3 = 1)::int, 1]::float8[] AS features
FROM generate_series(1, 300) AS i;
SELECT max(epoch) AS epochs, round(max(score)::numeric, 2) AS best_score
FROM corgipile.train('big_classes', 'softmax', standardize => 'off', model_name => 'big_classes',
                     max_epoch_num => 10, seed => 1);
SELECT classes FROM corgipile.models WHERE model_name = 'big_classes';

-- train() in a SELECT list stopped by a LIMIT stores no model (the README's
-- promise); run to the end, it does
SELECT (corgipile.train('points', 'svm', standardize => 'off', model_name => 'svm_limited', max_epoch_num => 3)).epoch
LIMIT 1;
SELECT count(*) AS limited_models FROM corgipile.models WHERE model_name = 'svm_limited';
SELECT (corgipile.train('points', 'svm', standardize => 'off', model_name => 'svm_unlimited', max_epoch_num => 3)).epoch;
SELECT count(*) AS unlimited_models FROM corgipile.models WHERE model_name = 'svm_unlimited';

-- Arguments known only at execution (a generic plan's parameters): the call
-- is planned then, and returns an epoch per row, so a LIMIT stops it too.
SET plan_cache_mode = force_generic_plan;
PREPARE tr_lim(text) AS
SELECT epoch FROM corgipile.train('points', 'svm', standardize => 'off', model_name => $1, max_epoch_num => 3) LIMIT 1;
EXPLAIN (COSTS OFF) EXECUTE tr_lim('svm_generic_limited');
EXECUTE tr_lim('svm_generic_limited');
SELECT count(*) AS generic_limited_models FROM corgipile.models
WHERE model_name = 'svm_generic_limited';
RESET plan_cache_mode;
