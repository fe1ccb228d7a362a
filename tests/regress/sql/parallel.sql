-- train(workers => N): the leader and N - 1 parallel workers train each
-- epoch (docs/parallel.md).  Under the default corgipile.parallel_sync
-- (average) the weights depend on the seed and N only, not on how many
-- workers were launched, so every figure below is deterministic.
SET corgipile.progress = off;

-- 20,000 points in about 110 pages: buffers of 16 pages give 7 groups of
-- blocks an epoch to hand out.
CREATE TABLE ppoints WITH (autovacuum_enabled = false) AS
SELECT i AS id,
       CASE WHEN i % 2 = 0 THEN 1 ELSE -1 END AS label,
       ARRAY[(CASE WHEN i % 2 = 0 THEN 1.0 ELSE -1.0 END) + 1.5 * sin(i * 12.9898),
             cos(i * 78.233)]::float8[] AS features,
       ARRAY[0, 1] AS idx,
       i % 3 AS cls
FROM generate_series(1, 20000) AS i;

-- EXPLAIN shows the workers planned: N - 1, the leader trains too.
EXPLAIN (COSTS OFF)
SELECT * FROM corgipile.train('ppoints', 'svm', workers => 3, buffer_size => '16 pages');
-- workers => NULL: from the table's size, as a parallel scan is sized,
-- at most max_parallel_workers_per_gather, whether the block cache is off
-- ...
SET min_parallel_table_scan_size = '64kB';
SET corgipile.block_cache_size = 0;
EXPLAIN (COSTS OFF)
SELECT * FROM corgipile.train('ppoints', 'svm', workers => NULL, buffer_size => '16 pages');
RESET corgipile.block_cache_size;
-- ... or holds the table (each process caches its own share of the blocks)
EXPLAIN (COSTS OFF)
SELECT * FROM corgipile.train('ppoints', 'svm', workers => NULL, buffer_size => '16 pages');
-- ... and with a single epoch
EXPLAIN (COSTS OFF)
SELECT * FROM corgipile.train('ppoints', 'svm', workers => NULL, buffer_size => '16 pages',
                              max_epoch_num => 1);
RESET min_parallel_table_scan_size;
-- ... and a table smaller than min_parallel_table_scan_size gets none
EXPLAIN (COSTS OFF)
SELECT * FROM corgipile.train('ppoints', 'svm', workers => NULL, buffer_size => '16 pages');
-- never more processes than an epoch has buffers to hand out
EXPLAIN (COSTS OFF)
SELECT * FROM corgipile.train('ppoints', 'svm', workers => 9, buffer_size => '50%');

-- Training: one row per epoch as with one process.
SELECT epoch, tuples, round(loss::numeric, 4) AS loss, round(score::numeric, 4) AS score
FROM corgipile.train('ppoints', 'svm', model_name => 'par_a', workers => 2,
                     buffer_size => '16 pages', max_epoch_num => 3, seed => 1);
-- The same seed and N: the same weights, bit for bit.
SELECT count(*) FROM corgipile.train('ppoints', 'svm', model_name => 'par_b', workers => 2,
                                     buffer_size => '16 pages', max_epoch_num => 3, seed => 1);
-- ... and when no worker could be launched: the leader trains every slot
SET max_parallel_workers = 0;
SELECT count(*) FROM corgipile.train('ppoints', 'svm', model_name => 'par_c', workers => 2,
                                     buffer_size => '16 pages', max_epoch_num => 3, seed => 1);
RESET max_parallel_workers;
SELECT a.weights = b.weights AS same_run_same_weights, a.weights = c.weights AS none_launched_same_weights
FROM corgipile.models a, corgipile.models b, corgipile.models c
WHERE a.model_name = 'par_a' AND b.model_name = 'par_b' AND c.model_name = 'par_c';
-- Cache affinity: each process trains the same slots, so the same blocks,
-- every epoch, and its block cache serves them.  Cached or read from the
-- table, the rows are the same, and so are the weights: with workers, and
-- with none launched.
SET corgipile.block_cache_size = 0;
SELECT count(*) FROM corgipile.train('ppoints', 'svm', model_name => 'par_nocache', workers => 2,
                                     buffer_size => '16 pages', max_epoch_num => 3, seed => 1);
SET max_parallel_workers = 0;
SELECT count(*) FROM corgipile.train('ppoints', 'svm', model_name => 'par_nocache0', workers => 2,
                                     buffer_size => '16 pages', max_epoch_num => 3, seed => 1);
RESET max_parallel_workers;
RESET corgipile.block_cache_size;
SELECT a.weights = d.weights AS cache_off_same_weights,
       a.weights = e.weights AS cache_off_none_launched_same_weights
FROM corgipile.models a, corgipile.models d, corgipile.models e
WHERE a.model_name = 'par_a' AND d.model_name = 'par_nocache' AND e.model_name = 'par_nocache0';
-- as accurate as one process
SELECT count(*) FROM corgipile.train('ppoints', 'svm', model_name => 'par_one', workers => 1,
                                     buffer_size => '16 pages', max_epoch_num => 3, seed => 1);
SELECT round(avg((corgipile.predict('par_a', features) = label)::int), 2) AS accuracy_2,
       round(avg((corgipile.predict('par_one', features) = label)::int), 2) AS accuracy_1
FROM ppoints;

-- Other layouts and models: sparse (dimension inferred by the leader),
-- softmax (classes found by the leader).
SELECT count(*) FROM corgipile.train('ppoints', 'logistic', model_name => 'par_sparse',
                                     feature_indices => 'idx', workers => 2,
                                     buffer_size => '16 pages', max_epoch_num => 2, seed => 2);
SELECT count(*) FROM corgipile.train('ppoints', 'softmax', model_name => 'par_softmax', label => 'cls',
                                     workers => 2, buffer_size => '16 pages', max_epoch_num => 2, seed => 2);
SELECT model_name, n_features, classes, array_length(weights, 1) AS n_weights
FROM corgipile.models WHERE model_name IN ('par_sparse', 'par_softmax') ORDER BY 1;

-- shuffle => 'grab': each worker keeps its blocks; CD-GraB's PairBalance
-- orders them (or one walk per worker: corgipile.parallel_grab)
SELECT epoch, round(loss::numeric, 4) AS loss
FROM corgipile.train('ppoints', 'logistic', model_name => 'par_grab', shuffle => 'grab', workers => 2,
                     buffer_size => '16 pages', max_epoch_num => 3, seed => 4);
SELECT count(*) FROM corgipile.train('ppoints', 'logistic', model_name => 'par_grab2', shuffle => 'grab',
                                     workers => 2, buffer_size => '16 pages', max_epoch_num => 3, seed => 4);
SET corgipile.parallel_grab = independent;
SELECT count(*) FROM corgipile.train('ppoints', 'logistic', model_name => 'par_idgrab', shuffle => 'grab',
                                     workers => 2, buffer_size => '16 pages', max_epoch_num => 3, seed => 4);
RESET corgipile.parallel_grab;
SELECT a.weights = b.weights AS grab_same_weights, a.weights <> c.weights AS independent_differs
FROM corgipile.models a, corgipile.models b, corgipile.models c
WHERE a.model_name = 'par_grab' AND b.model_name = 'par_grab2' AND c.model_name = 'par_idgrab';

-- The workers convert rows as the leader does: its standardizing
-- statistics, one-hot dictionaries and text labels are shipped to them
-- (standardize => 'off' is bit-identical whatever the number of processes;
-- 'auto' is as good with two as with one).
CREATE TABLE ppoints_text AS
SELECT id, CASE WHEN label = 1 THEN 'yes' ELSE 'no' END AS answer,
       1000 * features[1] + 50000 AS amount, features[2] AS ratio,
       CASE WHEN id % 3 = 0 THEN 'red' WHEN id % 3 = 1 THEN 'green' ELSE 'blue' END AS colour
FROM ppoints;
SELECT count(*) FROM corgipile.train('ppoints_text', 'logistic', model_name => 'par_text1',
                                     label => 'answer', features => 'amount, ratio, colour',
                                     buffer_size => '16 pages', max_epoch_num => 3, seed => 1);
SELECT count(*) FROM corgipile.train('ppoints_text', 'logistic', model_name => 'par_text2',
                                     label => 'answer', features => 'amount, ratio, colour',
                                     workers => 2, buffer_size => '16 pages', max_epoch_num => 3,
                                     seed => 1);
SELECT m.model_name, m.n_features, m.classes,
       round(avg((corgipile.predict_class(m.model_name, t) = t.answer)::int), 2) AS accuracy
FROM corgipile.models AS m, ppoints_text AS t
WHERE m.model_name IN ('par_text1', 'par_text2')
GROUP BY 1, 2, 3 ORDER BY 1;
SELECT (a.preprocess->'features') = (b.preprocess->'features') AS same_preprocessing
FROM corgipile.models a, corgipile.models b
WHERE a.model_name = 'par_text1' AND b.model_name = 'par_text2';

-- what changes a parallel training's weights is kept with the model
SELECT model_name, params->>'workers' AS workers, params->>'parallel_sync' AS sync,
       params->>'parallel_grab' AS grab_order
FROM corgipile.models WHERE model_name IN ('par_a', 'par_grab', 'par_text1') ORDER BY 1;

-- validation => 'N%': every process holds out the leader's rows
SELECT count(*) FROM corgipile.train('ppoints', 'svm', model_name => 'par_hold1',
                                     validation => '20%', buffer_size => '16 pages',
                                     max_epoch_num => 2, seed => 7);
SELECT count(*) FROM corgipile.train('ppoints', 'svm', model_name => 'par_hold2', workers => 2,
                                     validation => '20%', buffer_size => '16 pages',
                                     max_epoch_num => 2, seed => 7);
SELECT model_name, history->-1->>'tuples' AS trained, params->'holdout'->>'rows' AS held_out
FROM corgipile.models WHERE model_name IN ('par_hold1', 'par_hold2') ORDER BY 1;

-- a LIMIT that stops before the last epoch's row stores nothing, as with
-- one process (the epochs ran, their rows were not all taken)
SELECT epoch FROM corgipile.train('ppoints', 'svm', model_name => 'par_cut', workers => 2, buffer_size => '10%',
                                  max_epoch_num => 3) LIMIT 2;
SELECT count(*) AS stored FROM corgipile.models WHERE model_name = 'par_cut';
SELECT count(*) FROM corgipile.train('ppoints', 'svm', model_name => 'par_cut', workers => 2, buffer_size => '10%',
                                     max_epoch_num => 3);
SELECT count(*) AS stored FROM corgipile.models WHERE model_name = 'par_cut';

-- Errors
SELECT * FROM corgipile.train('ppoints', 'svm', workers => 0);
SELECT * FROM corgipile.train('ppoints', 'svm', workers => -1);
SELECT * FROM corgipile.train('ppoints', 'svm', workers => 100000);
SELECT * FROM corgipile.train('ppoints', 'svm', workers => 2, shuffle => 'sliding_window');
-- grab's block sums need the deterministic scheme
SET corgipile.parallel_sync = hogwild;
SELECT * FROM corgipile.train('ppoints', 'svm', workers => 2, buffer_size => '10%', shuffle => 'grab');
RESET corgipile.parallel_sync;
CREATE TEMP TABLE ppoints_temp AS SELECT * FROM ppoints LIMIT 100;
SELECT * FROM corgipile.train('ppoints_temp', 'svm', workers => 2);
-- workers => NULL on a temporary table: the leader alone
SELECT count(*) FROM corgipile.train('ppoints_temp', 'svm', model_name => 'par_temp', workers => NULL,
                                     max_epoch_num => 1);
-- an error in the data stops the training, whichever process read the row
-- (terse: a worker's error carries a "parallel worker" context line)
\set VERBOSITY terse
CREATE TABLE ppoints_bad AS SELECT id, CASE WHEN id = 15000 THEN 7 ELSE label END AS label, features
FROM ppoints;
SELECT * FROM corgipile.train('ppoints_bad', 'svm', model_name => 'par_bad', workers => 2,
                              buffer_size => '16 pages', seed => 1);
\set VERBOSITY default
SELECT count(*) FROM corgipile.models WHERE model_name = 'par_bad';

DROP TABLE ppoints, ppoints_bad, ppoints_temp, ppoints_text;
SELECT count(corgipile.drop_model(model_name)) FROM corgipile.models WHERE model_name LIKE 'par\_%';
