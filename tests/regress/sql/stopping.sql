-- When a default training stops: a table the polish takes trains
-- 3 epochs and is polished, its last row (epoch NULL) the stored model's
-- figures; otherwise the stopping rule ends it once the averaged model's
-- objective on a seeded sample of the rows settles.  An explicit
-- max_epoch_num trains exactly that many epochs.
CREATE TABLE stop_pts AS
SELECT i AS id, CASE WHEN (i * 7919 % 1000) < 500 THEN 1 ELSE -1 END AS label,
       ARRAY[((i * 7919 % 1000) - 500) / 500.0 + sin(i), cos(3 * i)]::float8[] AS features
FROM generate_series(1, 2000) AS i ORDER BY label, id;
ANALYZE stop_pts;
SET corgipile.progress = off;

-- what the epochs will be, before training
EXPLAIN (COSTS OFF) SELECT * FROM corgipile.train('stop_pts', 'logistic', seed => 1);
EXPLAIN (COSTS OFF) SELECT * FROM corgipile.train('stop_pts', 'svm', seed => 1);

-- a smooth loss on a small table: 3 epochs, then the polish and its row
SELECT epoch, tuples, round(loss::numeric, 4) AS loss, round(score::numeric, 4) AS score
FROM corgipile.train('stop_pts', 'logistic', model_name => 'stop_lr', seed => 1);
SELECT params->>'max_epoch_num' AS max_epoch_num, params->'polish'->>'stop' AS stop,
       (params->'polish'->>'gradient_max')::float8 <= 1e-4 AS under_bound,
       params->>'n_iter_no_change' AS n_iter_no_change
FROM corgipile.models WHERE model_name = 'stop_lr';

-- the hinge loss is not polished: the rule stops it, and params says why
SELECT count(*) FROM corgipile.train('stop_pts', 'svm', model_name => 'stop_svm', seed => 1);
SELECT params->'stopping'->>'rule' AS rule, params->'stopping'->>'figure' AS figure,
       params->'stopping'->>'rows' AS sample_rows, params->'stopping'->>'converged' AS converged,
       abs((params->'stopping'->>'last_change')::float8) < 0.005 AS settled
FROM corgipile.models WHERE model_name = 'stop_svm';
-- the same seed, the same epochs and weights
SELECT count(*) FROM corgipile.train('stop_pts', 'svm', model_name => 'stop_svm2', seed => 1);
SELECT a.weights = b.weights AS same_weights,
       jsonb_array_length(a.history) = jsonb_array_length(b.history) AS same_epochs
FROM corgipile.models a, corgipile.models b
WHERE a.model_name = 'stop_svm' AND b.model_name = 'stop_svm2';

-- an explicit max_epoch_num: exactly that many epochs (and the polish's row)
SELECT count(*) FILTER (WHERE epoch IS NOT NULL) AS epochs, count(*) FILTER (WHERE epoch IS NULL) AS polish
FROM corgipile.train('stop_pts', 'logistic', model_name => 'stop_lr7', seed => 1, max_epoch_num => 7);

-- an explicit tolerance: n_iter_no_change NULL is scikit-learn's 5
SELECT count(*) > 0 AS trained FROM corgipile.train('stop_pts', 'svm', model_name => 'stop_tol',
                                                    seed => 1, tolerance => 1e-3);
SELECT params->>'n_iter_no_change' AS n_iter_no_change, params->>'tolerance' AS tolerance
FROM corgipile.models WHERE model_name = 'stop_tol';

-- a polish budget too small: the model is stored, with a WARNING naming the
-- setting; a budget below 2 passes is refused
SET corgipile.polish_max_passes = 2;
SELECT count(*) FROM corgipile.train('stop_pts', 'logistic', model_name => 'stop_short', seed => 1);
SELECT params->'polish'->>'stop' AS stop, params->'polish'->>'passes' AS passes
FROM corgipile.models WHERE model_name = 'stop_short';
RESET corgipile.polish_max_passes;
SET corgipile.polish_max_passes = 1;

SELECT corgipile.drop_model(model_name) FROM corgipile.models
WHERE model_name LIKE 'stop%' ORDER BY model_name;
DROP TABLE stop_pts;
