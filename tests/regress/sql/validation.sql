-- validation => 'N%': a deterministic, seed-dependent share of the table's
-- rows, decided per row from (seed, ctid), is held out, never trained on,
-- scored after every epoch and recorded with the model.  standardize is
-- off so that the figures do not depend on preprocessing.
SET corgipile.progress = off;

SELECT epoch, tuples, round(loss::numeric, 4) AS loss, round(score::numeric, 4) AS score,
       round(validation_score::numeric, 4) AS validation_score
FROM corgipile.train('points', 'svm', model_name => 'hold20', max_epoch_num => 3,
                     seed => 7, validation => '20%', standardize => 'off');

-- The model records the split and the held-out figures of the kept weights:
-- the same score as the last epoch's row, and corgipile.evaluate()'s metrics.
SELECT params->>'validation' AS validation, params->'holdout'->>'fraction' AS fraction,
       params->'holdout'->>'seed' AS seed, params->'holdout'->>'rows' AS rows,
       (params->'holdout'->>'rows')::int + (history->-1->>'tuples')::int AS all_rows,
       params->'holdout'->>'epoch' AS epoch,
       round((params->'holdout'->>'score')::numeric, 4) AS score,
       (params->'holdout'->>'score')::float8 = (history->-1->>'validation_score')::float8 AS score_as_history,
       (params->'holdout'->>'loss')::float8 = (history->-1->>'validation_loss')::float8 AS loss_as_history,
       (SELECT pg_catalog.array_agg(k ORDER BY k) FROM jsonb_object_keys(params->'holdout'->'metrics') AS k) AS metrics,
       (params->'holdout'->'metrics'->>'accuracy')::float8 = (params->'holdout'->>'score')::float8 AS accuracy_is_score
FROM corgipile.models WHERE model_name = 'hold20';

-- A role that may use the model but not read the table sees neither the
-- held-out figures nor the validation setting, as for the other figures
-- of the table in params.
CREATE ROLE corgipile_hold_reader;
CREATE TABLE hold_private AS SELECT * FROM points;
SELECT count(*) FROM corgipile.train('hold_private', 'svm', model_name => 'hold_private_model',
                                     max_epoch_num => 1, seed => 7, validation => '20%',
                                     standardize => 'off');
SELECT corgipile.grant_model('hold_private_model', 'corgipile_hold_reader');
SET ROLE corgipile_hold_reader;
SELECT params ? 'holdout' AS sees_holdout, params ? 'validation' AS sees_validation,
       params ? 'seed' AS sees_seed
FROM corgipile.models WHERE model_name = 'hold_private_model';
RESET ROLE;
SELECT corgipile.drop_model('hold_private_model');
DROP TABLE hold_private;
DROP ROLE corgipile_hold_reader;

-- The same seed holds out the same rows, whatever the strategy (those that
-- copy the table too) and the buffering: every run trains on 1602 rows and
-- scores the other 398 (mrs trains on some rows twice an epoch: 2415 rows,
-- against 3037 without a holdout).  Another seed holds out other rows.
SELECT s AS shuffle,
       (SELECT tuples FROM corgipile.train('points', 'svm', shuffle => s, max_epoch_num => 2,
                                           seed => 7, validation => '20%', standardize => 'off',
                                           model_name => 'hold_' || s) WHERE epoch = 2) AS tuples
FROM unnest(ARRAY['corgipile', 'block_only', 'no_shuffle', 'sliding_window', 'mrs',
                  'shuffle_once', 'epoch_shuffle', 'grab']) AS s;
SELECT count(DISTINCT params->'holdout'->>'rows') AS distinct_rows,
       min(params->'holdout'->>'rows') AS held_out
FROM corgipile.models WHERE model_name LIKE 'hold\_%';
SELECT tuples FROM corgipile.train('points', 'svm', model_name => 'hold_single', max_epoch_num => 1,
                                   seed => 7, validation => '20%', double_buffer => false,
                                   standardize => 'off');
SELECT tuples FROM corgipile.train('points', 'svm', model_name => 'hold_seed8', max_epoch_num => 1,
                                   seed => 8, validation => '20%', standardize => 'off');
SELECT params->'holdout'->>'rows' AS seed8_rows FROM corgipile.models WHERE model_name = 'hold_seed8';
SELECT count(*) FROM corgipile.train('points', 'svm', model_name => 'hold20_again', max_epoch_num => 3,
                                     seed => 7, validation => '20%', standardize => 'off');
SELECT a.weights = b.weights AS same_seed_same_weights,
       a.params->'holdout' = b.params->'holdout' AS same_holdout
FROM corgipile.models a, corgipile.models b
WHERE a.model_name = 'hold20' AND b.model_name = 'hold20_again';

-- Without a seed, a random one is drawn and recorded: the split can be repeated.
SELECT count(*) FROM corgipile.train('points', 'svm', model_name => 'hold_noseed', max_epoch_num => 1,
                                     validation => '20%', standardize => 'off');
SELECT params->'holdout'->>'seed' = params->>'seed' AS split_seed_recorded
FROM corgipile.models WHERE model_name = 'hold_noseed';
SELECT count(*) FROM corgipile.train('points', 'svm', model_name => 'hold_reseed', max_epoch_num => 1,
                                     validation => '20%', standardize => 'off',
                                     seed => (SELECT (params->>'seed')::bigint FROM corgipile.models
                                              WHERE model_name = 'hold_noseed'));
SELECT a.params->'holdout' = b.params->'holdout' AS same_split, a.weights = b.weights AS same_weights
FROM corgipile.models a, corgipile.models b
WHERE a.model_name = 'hold_noseed' AND b.model_name = 'hold_reseed';

-- Early stopping watches the held-out loss and keeps the best epoch's weights.
SELECT count(*) FROM corgipile.train('points', 'logistic', model_name => 'hold_early', seed => 3,
                                     validation => '25%', tolerance => 0.5, n_iter_no_change => 2,
                                     standardize => 'off');
SELECT params->>'best_epoch' = params->'holdout'->>'epoch' AS kept_epoch_scored,
       jsonb_array_length(history) AS epochs,
       round((params->'holdout'->>'loss')::numeric, 4)
         = round((history->((params->>'best_epoch')::int - 1)->>'validation_loss')::numeric, 4) AS best_loss
FROM corgipile.models WHERE model_name = 'hold_early';

-- Sparse features and softmax with text classes hold out rows the same way.
SELECT epoch, tuples, round(validation_score::numeric, 4) AS validation_score
FROM corgipile.train('points_sparse', 'svm', features => 'vals', feature_indices => 'idx',
                     model_name => 'hold_sparse', max_epoch_num => 2, seed => 7,
                     validation => '20%', standardize => 'off');
CREATE TABLE hold_classes AS
SELECT id, (ARRAY['setosa', 'versicolor', 'virginica'])[1 + id % 3] AS species,
       ARRAY[(id % 3) + 1.5 * sin(id * 12.9898), cos(id * 78.233)]::float8[] AS features
FROM generate_series(1, 900) AS id;
SELECT epoch, tuples, round(validation_score::numeric, 4) AS validation_score
FROM corgipile.train('hold_classes', 'softmax', label => 'species', model_name => 'hold_softmax',
                     max_epoch_num => 2, seed => 7, validation => '30%', standardize => 'off');
SELECT params->'holdout'->>'rows' AS rows,
       round((params->'holdout'->'metrics'->>'accuracy')::numeric, 4) AS accuracy,
       params->'holdout'->'metrics' ? 'macro_f1' AS has_macro_f1
FROM corgipile.models WHERE model_name = 'hold_softmax';

-- Over maintenance_work_mem the held-out rows are read again for every
-- scoring instead of being kept: the same figures.
CREATE TABLE hold_wide AS
SELECT id, CASE WHEN id % 2 = 0 THEN 1 ELSE -1 END AS label,
       (SELECT array_agg(CASE WHEN id % 2 = 0 THEN 0.2 ELSE -0.2 END + sin(id * j))
        FROM generate_series(1, 128) AS j)::float8[] AS features
FROM generate_series(1, 12000) AS id;
CREATE TABLE hold_figures AS
SELECT 'kept' AS how, epoch, tuples, validation_score
FROM corgipile.train('hold_wide', 'svm', model_name => 'hold_kept', max_epoch_num => 2, buffer_size => '10%', seed => 7,
                     validation => '20%', standardize => 'off');
SET maintenance_work_mem = '1MB';
INSERT INTO hold_figures
SELECT 'reread', epoch, tuples, validation_score
FROM corgipile.train('hold_wide', 'svm', model_name => 'hold_reread', max_epoch_num => 2, buffer_size => '10%', seed => 7,
                     validation => '20%', standardize => 'off');
RESET maintenance_work_mem;
SELECT k.epoch, k.tuples = r.tuples AS same_tuples,
       k.validation_score = r.validation_score AS same_validation_score
FROM hold_figures k JOIN hold_figures r USING (epoch)
WHERE k.how = 'kept' AND r.how = 'reread' ORDER BY epoch;
-- (the loss is summed in another row order: equal to 12 digits)
SELECT a.params->'holdout'->'rows' = b.params->'holdout'->'rows' AS same_rows,
       a.params->'holdout'->'metrics' = b.params->'holdout'->'metrics' AS same_metrics,
       round((a.params->'holdout'->>'loss')::numeric, 12)
         = round((b.params->'holdout'->>'loss')::numeric, 12) AS same_loss
FROM corgipile.models a, corgipile.models b
WHERE a.model_name = 'hold_kept' AND b.model_name = 'hold_reread';

-- The same with the default standardize: the kept rows are converted (and
-- transformed) once, the re-read ones at each scoring, to the same figures.
CREATE TABLE hold_figures_std AS
SELECT 'kept' AS how, epoch, tuples, validation_score
FROM corgipile.train('hold_wide', 'svm', model_name => 'hold_kept_std', max_epoch_num => 2, buffer_size => '10%',
                     seed => 7, validation => '20%');
SET maintenance_work_mem = '1MB';
INSERT INTO hold_figures_std
SELECT 'reread', epoch, tuples, validation_score
FROM corgipile.train('hold_wide', 'svm', model_name => 'hold_reread_std', max_epoch_num => 2, buffer_size => '10%',
                     seed => 7, validation => '20%');
RESET maintenance_work_mem;
SELECT k.epoch, k.tuples = r.tuples AS same_tuples,
       k.validation_score = r.validation_score AS same_validation_score
FROM hold_figures_std k JOIN hold_figures_std r USING (epoch)
WHERE k.how = 'kept' AND r.how = 'reread' ORDER BY epoch;

-- A table name keeps working, resolved with the caller's search_path.
SELECT epoch, round(validation_score::numeric, 4) AS validation_score
FROM corgipile.train('points', 'svm', model_name => 'hold_table', max_epoch_num => 1, seed => 7,
                     validation => 'points_test', standardize => 'off');
SELECT params->>'validation' AS validation, params ? 'holdout' AS has_holdout
FROM corgipile.models WHERE model_name = 'hold_table';

-- The same through the fallback (a call in the select list) and a parameter.
SELECT (corgipile.train('points', 'svm', model_name => 'hold_fallback', validation => '20%',
                        seed => 7, max_epoch_num => 1, standardize => 'off')).tuples;
PREPARE hold_param(text) AS
SELECT tuples FROM corgipile.train('points', 'svm', validation => $1, seed => 7,
                                   max_epoch_num => 1, standardize => 'off');
EXECUTE hold_param('20%');
EXECUTE hold_param('points_test');
DEALLOCATE hold_param;

-- EXPLAIN says so; EXPLAIN ANALYZE counts the held-out rows.
EXPLAIN (COSTS OFF)
SELECT * FROM corgipile.train('points', 'svm', validation => '20%', seed => 7);
EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF)
SELECT * FROM corgipile.train('points', 'svm', validation => '20%', seed => 7, max_epoch_num => 2,
                              model_name => 'hold_explain', standardize => 'off');

-- Nothing left to train on
CREATE TABLE hold_tiny AS SELECT 1 AS label, ARRAY[1.0, 2.0]::float8[] AS features;
SELECT * FROM corgipile.train('hold_tiny', 'svm', validation => '99.9%', seed => 1);
-- ... or nothing held out
SELECT * FROM corgipile.train('hold_tiny', 'svm', validation => '0.1%', seed => 1);

-- Percentages strictly between 0% and 100%, digits and one point only.
SELECT * FROM corgipile.train('points', 'svm', validation => '0%');
SELECT * FROM corgipile.train('points', 'svm', validation => '100%');
SELECT * FROM corgipile.train('points', 'svm', validation => 'abc%');
SELECT * FROM corgipile.train('points', 'svm', validation => '-5%');
SELECT * FROM corgipile.train('points', 'svm', validation => '20 %');
SELECT * FROM corgipile.train('points', 'svm', validation => '%');
SELECT * FROM corgipile.train('points', 'svm', validation => '50.5.5%');
SELECT * FROM corgipile.train('points', 'svm', validation => 'no_such_table');
-- a quoted table name may hold a % sign
CREATE TABLE "hold 10% sample" AS SELECT * FROM points_test;
SELECT epoch, round(validation_score::numeric, 4) AS validation_score
FROM corgipile.train('points', 'svm', model_name => 'hold_pct_name', max_epoch_num => 1, seed => 7,
                     validation => '"hold 10% sample"', standardize => 'off');
SELECT (corgipile.train('points', 'svm', model_name => 'hold_pct_name2', max_epoch_num => 1,
                        seed => 7, validation => '"hold 10% sample"',
                        standardize => 'off')).validation_score IS NOT NULL AS fallback_scored;

-- The label is not a feature: refused at plan time, whatever its type.
EXPLAIN (COSTS OFF)
SELECT * FROM corgipile.train('points_cols', 'svm', features => 'x1, label, x2');
EXPLAIN (COSTS OFF)
SELECT * FROM corgipile.train('hold_classes', 'softmax', label => 'species',
                              features => 'id, species');
EXPLAIN (COSTS OFF)
SELECT * FROM corgipile.train('points_sparse', 'svm', features => 'vals', feature_indices => 'label');

SELECT count(*) FROM corgipile.models WHERE model_name LIKE 'hold%';

-- A validation table or an evaluated relation whose labels are not of the
-- kind of the model's classes (text against numbers, either way) is
-- refused before any row is read: it used to crash the server (softmax
-- with text classes against integer labels) or to score silently.
CREATE TABLE hold_kind_text AS
SELECT i AS id, (ARRAY['a', 'b', 'c'])[1 + i % 3] AS lab,
       ARRAY[i % 3, (i * 7) % 5]::float8[] AS f FROM generate_series(1, 90) AS i;
CREATE TABLE hold_kind_num AS
SELECT id, 1 + id % 3 AS lab, f FROM hold_kind_text;
CREATE TABLE hold_kind_bin AS
SELECT id, id % 2 AS lab, f FROM hold_kind_text;
CREATE TABLE hold_kind_bintext AS
SELECT id, (ARRAY['x', 'y'])[1 + id % 2] AS lab, f FROM hold_kind_text;
SELECT count(*) FROM corgipile.train('hold_kind_text', 'softmax', label => 'lab', features => 'f',
                                     validation => 'hold_kind_num', model_name => 'hold_kind_1', max_epoch_num => 1, seed => 1);
SELECT count(*) FROM corgipile.train('hold_kind_num', 'softmax', label => 'lab', features => 'f',
                                     validation => 'hold_kind_text', model_name => 'hold_kind_2', max_epoch_num => 1, seed => 1);
SELECT count(*) FROM corgipile.train('hold_kind_bin', 'svm', label => 'lab', features => 'f',
                                     validation => 'hold_kind_bintext', model_name => 'hold_kind_3', max_epoch_num => 1, seed => 1);
SELECT count(*) FROM corgipile.train('hold_kind_bintext', 'logistic', label => 'lab', features => 'f',
                                     validation => 'hold_kind_bin', model_name => 'hold_kind_4', max_epoch_num => 1, seed => 1);
SET client_min_messages = warning;
SELECT count(*) FROM corgipile.train('hold_kind_text', 'softmax', label => 'lab', features => 'f',
                                     model_name => 'hold_kind_soft', max_epoch_num => 1, seed => 1);
SELECT count(*) FROM corgipile.train('hold_kind_bintext', 'logistic', label => 'lab', features => 'f',
                                     model_name => 'hold_kind_log', max_epoch_num => 1, seed => 1);
RESET client_min_messages;
SELECT metric FROM corgipile.evaluate('hold_kind_soft', 'hold_kind_num');
SELECT metric FROM corgipile.evaluate('hold_kind_log', 'hold_kind_bin');
-- the training table itself is scored
SELECT metric FROM corgipile.evaluate('hold_kind_soft', 'hold_kind_text') WHERE metric = 'accuracy';
SELECT corgipile.drop_model('hold_kind_soft'), corgipile.drop_model('hold_kind_log');
