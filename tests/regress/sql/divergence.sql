-- Divergence: a loss that is not finite, or that grew
-- more than 1000 times over the best earlier epoch (and above the first),
-- stops training with an ERROR naming the epoch; nothing is stored.  A run
-- that ends above twice its first epoch's loss is stored with a WARNING.
-- standardize => 'off' keeps the unscaled money amounts as they are.
SET corgipile.progress = off;
CREATE TABLE money AS
SELECT i AS id, 1000 + (i * 37 % 5000)::float8 AS amount, (i * 13 % 97)::float8 AS age,
       (3 * (1000 + (i * 37 % 5000)) + 20 * (i * 13 % 97) + 50 * sin(i))::float8 AS price
FROM generate_series(1, 2000) AS i;

-- 0.3.0's default rate for linear (0.01, explicit steps) on raw amounts:
-- infinite within the first epoch
SELECT * FROM corgipile.train('money', 'linear', label => 'price', features => 'amount, age',
                              model_name => 'money_inf', seed => 1, standardize => 'off',
                              learning_rate => 0.01);

-- the default schedule on the same raw amounts: its implicit steps cannot
-- overshoot, and the averaged model fits; the polish's row (epoch NULL)
-- scores the stored model
SELECT epoch, round(score::numeric, 2) AS r2
FROM corgipile.train('money', 'linear', label => 'price', features => 'amount, age',
                     model_name => 'money_default', seed => 1, standardize => 'off')
WHERE epoch = 1 OR epoch IS NULL;
SELECT round(value::numeric, 3) AS r2_of_the_stored_model
FROM corgipile.evaluate('money_default', 'money') WHERE metric = 'r2';

-- a rate a little too high, one step per epoch: the loss grows about 2.5
-- times per epoch and passes 1000 times the first epoch's in the fourth
SELECT * FROM corgipile.train('money', 'linear', label => 'price', features => 'amount, age',
                              model_name => 'money_grown', seed => 1, standardize => 'off',
                              learning_rate => 3e-7, batch_size => 2000, decay => 1);

-- slower growth, over three epochs: stored, with a WARNING
SELECT epoch, round(loss::numeric, -3) AS loss
FROM corgipile.train('money', 'linear', label => 'price', features => 'amount, age',
                     model_name => 'money_worse', seed => 1, standardize => 'off',
                     learning_rate => 1.7e-7, batch_size => 2000, decay => 1,
                     max_epoch_num => 3);

-- a small enough rate converges: no warning
SELECT epoch, round(score::numeric, 3) AS r2
FROM corgipile.train('money', 'linear', label => 'price', features => 'amount, age',
                     model_name => 'money_ok', seed => 1, standardize => 'off',
                     learning_rate => 1e-8, max_epoch_num => 3);

-- the diverged trainings stored nothing
SELECT model_name FROM corgipile.models WHERE model_name LIKE 'money%' ORDER BY 1;

-- A loss that falls to zero and rises again, still below the first
-- epoch's, is not divergence: separable points, hinge loss, a little l2.
-- Later epochs have more than 1000 times the best earlier loss (0), and the
-- run goes on to its last epoch and is stored.
CREATE TABLE separable AS
SELECT i AS id, CASE WHEN i % 2 = 0 THEN 1 ELSE -1 END AS label,
       ARRAY[CASE WHEN i % 2 = 0 THEN 1.0 ELSE -1.0 END * (0.3 + abs(sin(i * 12.9898))),
             cos(i * 78.233)]::float8[] AS features
FROM generate_series(1, 1000) AS i;
SELECT count(*) AS epochs FROM corgipile.train('separable', 'svm', model_name => 'separable_ok',
                                               seed => 1, max_epoch_num => 15, decay => 1,
                                               l2 => 0.0001, standardize => 'off');
WITH h AS (
    SELECT (e->>'epoch')::int AS epoch, (e->>'loss')::float8 AS loss
    FROM corgipile.models, jsonb_array_elements(history) AS e
    WHERE model_name = 'separable_ok')
SELECT min(h.loss) = 0 AS reached_zero,
       bool_or(h.loss > 1000 * (SELECT min(b.loss) FROM h b WHERE b.epoch < h.epoch)
               AND h.loss < (SELECT f.loss FROM h f WHERE f.epoch = 1)) AS rose_below_first
FROM h;

-- A model well below the trivial one says so: 70% of the rows
-- are negative and stored first, so the last rows no_shuffle trains on are
-- all positive and a large rate leaves a model that calls most rows
-- positive.  Its held-out accuracy is below the majority class's share.
CREATE TABLE skewed AS
SELECT i AS id, CASE WHEN i <= 1400 THEN -1 ELSE 1 END AS label,
       ARRAY[CASE WHEN i <= 1400 THEN -0.3 ELSE 0.3 END + sin(i * 12.9898),
             cos(i * 78.233)]::float8[] AS features
FROM generate_series(1, 2000) AS i;
SELECT count(*) FROM corgipile.train('skewed', 'logistic', model_name => 'skewed_seq',
                                     shuffle => 'no_shuffle', learning_rate => 0.5,
                                     max_epoch_num => 2, seed => 1, validation => '20%',
                                     standardize => 'off');
-- the defaults on the same table: no warning, and the baseline is recorded
SELECT count(*) FROM corgipile.train('skewed', 'logistic', model_name => 'skewed_default',
                                     seed => 1, validation => '20%');
SELECT model_name, params->>'baseline' AS baseline,
       round((params->>'baseline_score')::numeric, 4) AS baseline_score,
       round((history->-1->>'validation_score')::numeric, 4) AS held_out,
       params->>'average' AS average, params->>'buffer_choice' AS buffer_choice
FROM corgipile.models WHERE model_name LIKE 'skewed%' ORDER BY 1;
