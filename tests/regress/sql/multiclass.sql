-- Linear and softmax regression, regularisation, evaluation and early
-- stopping.
SET corgipile.progress = off;

CREATE TABLE animals AS
SELECT i AS id, i % 3 AS cls, (ARRAY['cat', 'dog', 'eel'])[i % 3 + 1] AS name,
       ARRAY[(i % 3 = 0)::int + 0.4 * sin(i * 1.7), (i % 3 = 1)::int + 0.4 * cos(i * 2.3)]::float8[] AS features,
       ARRAY[0, 1] AS idx
FROM generate_series(1, 3000) AS i;
CREATE TABLE animals_test AS
SELECT i AS id, i % 3 AS cls, (ARRAY['cat', 'dog', 'eel'])[i % 3 + 1] AS name,
       ARRAY[(i % 3 = 0)::int + 0.4 * sin(i * 0.9), (i % 3 = 1)::int + 0.4 * cos(i * 3.1)]::float8[] AS features
FROM generate_series(1, 600) AS i;

-- softmax with integer classes and with text classes
SELECT epoch, tuples, round(loss::numeric, 4) AS loss, round(score::numeric, 4) AS score,
       round(validation_score::numeric, 4) AS validation_score
FROM corgipile.train('animals', 'softmax', standardize => 'off', model_name => 'sm_int', label => 'cls',
                     max_epoch_num => 3, seed => 1, validation => 'animals_test');
SELECT count(*) FROM corgipile.train('animals', 'softmax', standardize => 'off', model_name => 'sm_text', label => 'name',
                                     max_epoch_num => 3, seed => 1, batch_size => 4);
SELECT model_name, classes, params->>'n_outputs' AS n_outputs, array_length(weights, 1) AS n_weights
FROM corgipile.models WHERE model_name LIKE 'sm_%' ORDER BY 1;
SELECT corgipile.predict('sm_int', ARRAY[1.0, 0.0]) AS int_class,
       corgipile.predict_class('sm_text', ARRAY[1.0, 0.0]) AS text_class,
       corgipile.predict_class('sm_text', ARRAY[0.0, 1.0]) AS text_class_2,
       corgipile.predict_class('sm_int', ARRAY[0.0, 0.0]) AS int_as_text;
SELECT array_length(p, 1) AS n, round((p[1] + p[2] + p[3])::numeric, 10) AS total, p[1] > 0.5 AS first_likely
FROM (SELECT corgipile.predict_proba('sm_int', ARRAY[1.0, 0.0]) AS p) AS s;
SELECT round(avg((corgipile.predict_class('sm_text', t) = t.name)::int), 3) AS text_accuracy,
       round(avg((corgipile.predict('sm_int', t) = t.cls)::int), 3) AS int_accuracy
FROM animals_test t;
SELECT * FROM corgipile.evaluate('sm_int', 'animals_test') ORDER BY metric;

-- sparse softmax gives the dense model on the same rows in the same order
SELECT count(*) FROM corgipile.train('animals', 'softmax', standardize => 'off', model_name => 'sm_dense_seq', label => 'cls',
                                     shuffle => 'no_shuffle', max_epoch_num => 2);
SELECT count(*) FROM corgipile.train('animals', 'softmax', standardize => 'off', model_name => 'sm_sparse_seq', label => 'cls',
                                     features => 'features', feature_indices => 'idx',
                                     shuffle => 'no_shuffle', max_epoch_num => 2);
SELECT (SELECT max(abs(x - y)) FROM unnest(a.weights, b.weights) AS u(x, y)) < 1e-9 AS sparse_equals_dense
FROM corgipile.models a, corgipile.models b
WHERE a.model_name = 'sm_dense_seq' AND b.model_name = 'sm_sparse_seq';

-- linear regression: R^2 as the score, the value as the prediction
CREATE TABLE houses AS
SELECT i AS id, (i % 50) / 10.0 AS rooms, (i % 7) / 7.0 AS age,
       2.5 * ((i % 50) / 10.0) - 1.5 * ((i % 7) / 7.0) + 4 + 0.05 * sin(i) AS price,
       ((i * 7919) % 1000) / 1000.0 - 0.5 AS noise
FROM generate_series(1, 2000) AS i;
SELECT epoch, round(score::numeric, 3) AS r2
FROM corgipile.train('houses', 'linear', standardize => 'off', model_name => 'lin', label => 'price', features => 'rooms, age',
                     learning_rate => 0.02, decay => 1, max_epoch_num => 20, seed => 3)
WHERE epoch IN (1, 20);
SELECT round(weights[1]::numeric, 1) AS rooms, round(weights[2]::numeric, 1) AS age,
       round(weights[3]::numeric, 1) AS bias, classes IS NULL AS no_classes
FROM corgipile.models WHERE model_name = 'lin';
SELECT round(corgipile.predict('lin', ARRAY[2.0, 0.5])::numeric, 1) AS predicted;
SELECT metric, round(value::numeric, 2) FROM corgipile.evaluate('lin', 'houses') ORDER BY metric;

-- binary metrics
SELECT count(*) FROM corgipile.train('points', 'logistic', standardize => 'off', model_name => 'lr_eval', max_epoch_num => 3, seed => 2);
SELECT metric, round(value::numeric, 4) FROM corgipile.evaluate('lr_eval', 'points_test') ORDER BY metric;
SELECT count(*) FROM corgipile.train('points', 'svm', standardize => 'off', model_name => 'svm_eval', max_epoch_num => 3, seed => 2);
SELECT metric, value IS NULL AS is_null FROM corgipile.evaluate('svm_eval', 'points_test') WHERE metric = 'log_loss';
SELECT (corgipile.predict_proba('lr_eval', ARRAY[3.0, 0.0]))[1] > 0.9 AS confident;

-- L1 pulls the weights towards zero (the unit tests show it zeroing
-- useless ones exactly)
SELECT count(*) FROM corgipile.train('houses', 'linear', standardize => 'off', model_name => 'lin_l1', label => 'price',
                                     features => 'rooms, age, noise', learning_rate => 0.02, l1 => 0.1,
                                     decay => 1, max_epoch_num => 10, seed => 3);
SELECT count(*) FROM corgipile.train('houses', 'linear', standardize => 'off', model_name => 'lin_no_l1', label => 'price',
                                     features => 'rooms, age, noise', learning_rate => 0.02,
                                     decay => 1, max_epoch_num => 10, seed => 3);
SELECT abs(a.weights[1]) < abs(b.weights[1]) AND abs(a.weights[2]) < abs(b.weights[2]) AS shrunk,
       round(b.weights[1]::numeric, 1) AS rooms_without, round(b.weights[2]::numeric, 1) AS age_without
FROM corgipile.models a, corgipile.models b WHERE a.model_name = 'lin_l1' AND b.model_name = 'lin_no_l1';

-- early stopping keeps the best epoch
SELECT count(*) AS epochs_run
FROM corgipile.train('houses', 'linear', standardize => 'off', model_name => 'lin_es', label => 'price', features => 'rooms, age',
                     learning_rate => 0.02, decay => 1, max_epoch_num => 200, seed => 3,
                     tolerance => 0.01, n_iter_no_change => 3);
SELECT (params->>'best_epoch')::int < jsonb_array_length(history) AS best_is_earlier,
       jsonb_array_length(history) < 200 AS stopped_early
FROM corgipile.models WHERE model_name = 'lin_es';
SELECT count(*) FROM corgipile.train('animals', 'softmax', standardize => 'off', model_name => 'sm_es', label => 'cls',
                                     validation => 'animals_test', max_epoch_num => 50,
                                     tolerance => 0.5, n_iter_no_change => 2, seed => 1);
SELECT params->>'best_epoch' AS best_epoch, jsonb_array_length(history) AS epochs
FROM corgipile.models WHERE model_name = 'sm_es';

-- errors
SELECT * FROM corgipile.train('animals', 'softmax', standardize => 'off', label => 'features');
CREATE TABLE one_class AS SELECT 1 AS cls, ARRAY[1.0] AS features FROM generate_series(1, 5);
SELECT * FROM corgipile.train('one_class', 'softmax', standardize => 'off', label => 'cls');
SELECT * FROM corgipile.train('houses', 'svm', standardize => 'off', label => 'price', features => 'rooms', shuffle => 'no_shuffle');
SELECT * FROM corgipile.train('animals', 'svm', standardize => 'off', label => 'name');
SELECT * FROM corgipile.train('animals', 'softmax', standardize => 'off', label => 'cls', validation => 'houses');
SELECT * FROM corgipile.train('houses', 'linear', standardize => 'off', label => 'price', features => 'rooms', tolerance => -1);
SELECT * FROM corgipile.train('houses', 'linear', standardize => 'off', label => 'price', features => 'rooms', l1 => -1);
SELECT * FROM corgipile.train('houses', 'linear', standardize => 'off', label => 'price', features => 'rooms', n_iter_no_change => 0);
SELECT corgipile.predict('sm_text', ARRAY[1.0, 0.0]);
SELECT corgipile.predict_class('lin', ARRAY[1.0, 0.0]);
SELECT corgipile.predict_proba('svm_eval', ARRAY[1.0, 0.0]);
SELECT corgipile.predict_proba('lin', ARRAY[1.0, 0.0]);
SELECT * FROM corgipile.evaluate('no_such_model', 'animals');
SELECT * FROM corgipile.evaluate('lin', 'animals');
CREATE TABLE animals_new AS SELECT cls + 10 AS cls, features FROM animals_test;
SELECT * FROM corgipile.evaluate('sm_int', 'animals_new');
