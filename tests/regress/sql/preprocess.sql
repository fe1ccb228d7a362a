-- Preprocessing inside the engine (docs/preprocessing.md):
-- standardizing, one-hot categories and text labels, stored with the model
-- and applied to raw rows at prediction time.
SET corgipile.progress = off;

-- A churn-like table: an unscaled money column, a small number, a text
-- category, a boolean, a constant, and a Yes/No label.
CREATE TABLE churn AS
SELECT i AS id,
       1000 + 5000 * ((i * 7919) % 97) / 97.0 AS amount,
       ((i * 31) % 50) AS age,
       (ARRAY['Month', 'One year', 'Two year'])[1 + i % 3] AS contract,
       (i % 5 = 0) AS senior,
       5 AS constant,
       CASE WHEN i % 3 = 0 OR (i * 7919) % 97 > 70 THEN 'Yes' ELSE 'No' END AS churned
FROM generate_series(1, 3000) AS i;
ANALYZE churn;

-- The default (standardize => 'auto': on for dense features) trains on the
-- money column as it is; the weights are stored in the scaled space and the
-- transform with them.
SELECT count(*) FROM corgipile.train('churn', 'logistic', model_name => 'ch_auto',
                                     label => 'churned', features => 'amount, age',
                                     seed => 1, max_epoch_num => 5);
SELECT n_features, classes, preprocess->'standardize' AS standardize,
       jsonb_path_query_array(preprocess, '$.features[*].name') AS names,
       jsonb_path_query_array(preprocess, '$.features[*].kind') AS kinds,
       round((preprocess#>>'{features,1,mean}')::numeric, 4) AS age_mean,
       round((preprocess#>>'{features,1,std}')::numeric, 4) AS age_std,
       preprocess->'n_model_features' AS n_model_features
FROM corgipile.models WHERE model_name = 'ch_auto';
-- the default schedule on a small cached table ends with the polish
-- (params.polish); corgipile.polish = off keeps SGD's model; a bad value is
-- refused by name
SELECT params->'polish'->>'rows' AS polished_rows,
       (params->'polish'->>'converged')::boolean AS converged,
       (params->'polish'->>'objective')::float8 <= (params->'polish'->>'objective_sgd')::float8
         AS not_worse
FROM corgipile.models WHERE model_name = 'ch_auto';
SET corgipile.polish = off;
SELECT count(*) FROM corgipile.train('churn', 'logistic', model_name => 'ch_sgd',
                                     label => 'churned', features => 'amount, age',
                                     seed => 1, max_epoch_num => 5);
SELECT params ? 'polish' AS polished FROM corgipile.models WHERE model_name = 'ch_sgd';
RESET corgipile.polish;
SET corgipile.polish = 'sometimes';
-- SGD on raw numbers (a rate given: no polish, which would find the
-- objective's minimum on any scale): a worse model, and no preprocess
SELECT count(*) FROM corgipile.train('churn', 'logistic', model_name => 'ch_off',
                                     label => 'churned', features => 'amount, age',
                                     seed => 1, max_epoch_num => 5, standardize => 'off',
                                     learning_rate => 0.1);
SELECT preprocess IS NULL AS raw FROM corgipile.models WHERE model_name = 'ch_off';
SELECT a.value > o.value AS standardized_is_better
FROM corgipile.evaluate('ch_auto', 'churn') AS a, corgipile.evaluate('ch_off', 'churn') AS o
WHERE a.metric = 'accuracy' AND o.metric = 'accuracy';
-- raw rows go in at prediction time: predict on a row equals the scaled
-- dot product computed by hand from the stored figures
SELECT abs((corgipile.predict_proba('ch_auto', c))[1] -
           1 / (1 + exp(-(m.weights[1] * (c.amount - (m.preprocess#>>'{features,0,mean}')::float8)
                              / (m.preprocess#>>'{features,0,std}')::float8
                          + m.weights[2] * (c.age - (m.preprocess#>>'{features,1,mean}')::float8)
                              / (m.preprocess#>>'{features,1,std}')::float8
                          + m.weights[3])))) < 1e-12 AS same
FROM churn AS c, corgipile.models AS m
WHERE m.model_name = 'ch_auto' AND c.id IN (1, 2, 3);

-- Text and boolean columns are one-hot encoded, in byte order; the constant
-- column gets std 0 and no division by zero.
SELECT count(*) FROM corgipile.train('churn', 'logistic', model_name => 'ch_cat',
                                     label => 'churned',
                                     features => 'amount, contract, senior, constant',
                                     seed => 1, max_epoch_num => 5);
SELECT n_features, preprocess->'features'->1 AS contract, preprocess->'features'->2 AS senior,
       preprocess->'features'->3 AS constant, preprocess->'constant_features' AS n_constant
FROM corgipile.models WHERE model_name = 'ch_cat';
SELECT metric, round(value::numeric, 3) AS value FROM corgipile.evaluate('ch_cat', 'churn')
WHERE metric IN ('accuracy', 'unseen_values');
-- predict_class returns the label's own values
SELECT c.churned, corgipile.predict_class('ch_cat', c) AS predicted, count(*)
FROM churn AS c GROUP BY 1, 2 ORDER BY 1, 2;
-- an unseen value and a NULL category are all zeros, with one NOTICE per query
SELECT corgipile.predict_class('ch_cat', r) IS NOT NULL AS predicted
FROM (VALUES (2000.0, 'Weekly'::text, NULL::boolean, 5), (2000.0, NULL, true, 5))
     AS r(amount, contract, senior, constant);
-- the row needs text or boolean where the model has categories
SELECT corgipile.predict_class('ch_cat', r)
FROM (VALUES (2000.0, 1, true, 5)) AS r(amount, contract, senior, constant);
-- evaluate counts unseen values
CREATE TABLE churn_new AS SELECT * FROM churn WHERE id <= 100;
UPDATE churn_new SET contract = 'Weekly' WHERE id <= 10;
UPDATE churn_new SET senior = NULL WHERE id BETWEEN 11 AND 15;
SELECT metric, value FROM corgipile.evaluate('ch_cat', 'churn_new') WHERE metric = 'unseen_values';
-- a relation whose column has another kind than the model's
CREATE TABLE churn_num AS SELECT id, amount, 1 AS contract, senior, constant, churned FROM churn;
SELECT * FROM corgipile.evaluate('ch_cat', 'churn_num');

-- The codes do not depend on the block order: another seed, the same
-- dictionaries
SELECT count(*) FROM corgipile.train('churn', 'svm', model_name => 'ch_seed2',
                                     label => 'churned', features => 'amount, contract, senior',
                                     seed => 2, max_epoch_num => 1, block_size => '1');
SELECT count(*) FROM corgipile.train('churn', 'svm', model_name => 'ch_seed3',
                                     label => 'churned', features => 'amount, contract, senior',
                                     seed => 3, max_epoch_num => 1, block_size => '1');
SELECT a.preprocess = b.preprocess AS same_preprocess, a.classes
FROM corgipile.models a, corgipile.models b
WHERE a.model_name = 'ch_seed2' AND b.model_name = 'ch_seed3';

-- Binary text labels: svm too, and a third value is an error
SELECT c.churned, corgipile.predict_class('ch_seed2', c) IS NOT NULL AS predicted, count(*)
FROM churn AS c GROUP BY 1, 2 ORDER BY 1, 2;
SELECT corgipile.predict('ch_seed2', c) FROM churn AS c LIMIT 1;
CREATE TABLE churn3 AS SELECT * FROM churn;
UPDATE churn3 SET churned = 'Maybe' WHERE id = 7;
SELECT * FROM corgipile.train('churn3', 'svm', label => 'churned', features => 'amount');
CREATE TABLE churn1 AS SELECT id, amount, 'Yes'::text AS churned FROM churn;
SELECT * FROM corgipile.train('churn1', 'logistic', label => 'churned', features => 'amount');
-- a linear model's label is still a number
SELECT * FROM corgipile.train('churn', 'linear', label => 'churned', features => 'amount');

-- max_categories: the cap names the column and the count
SELECT * FROM corgipile.train('churn', 'logistic', label => 'churned',
                              features => 'amount, contract', max_categories => 2);
CREATE TABLE many AS SELECT i % 2 AS label, 'v' || i AS cat, i::float8 AS x
FROM generate_series(1, 1500) AS i;
SELECT * FROM corgipile.train('many', 'svm', features => 'x, cat');
SELECT count(*) FROM corgipile.train('many', 'svm', model_name => 'many_ok', features => 'x, cat',
                                     max_categories => 1500, max_epoch_num => 1, seed => 1);
SELECT n_features FROM corgipile.models WHERE model_name = 'many_ok';
-- a column of NULLs has nothing to learn
CREATE TABLE nullcat AS SELECT i % 2 AS label, NULL::text AS cat, i::float8 AS x
FROM generate_series(1, 100) AS i;
SELECT * FROM corgipile.train('nullcat', 'svm', features => 'x, cat');

-- Sparse features: auto is scale_only (zeros stay zeros); on is refused
CREATE TABLE sp AS
SELECT CASE WHEN i % 2 = 0 THEN 1 ELSE -1 END AS label,
       ARRAY[0, 1 + i % 3]::int[] AS idx,
       ARRAY[100.0 * (i % 7), (i % 2) * 3.0]::float8[] AS vals
FROM generate_series(1, 600) AS i;
SELECT count(*) FROM corgipile.train('sp', 'svm', model_name => 'sp_auto', features => 'vals',
                                     feature_indices => 'idx', seed => 1, max_epoch_num => 2);
SELECT n_features, preprocess->>'standardize' AS standardize,
       preprocess#>'{features,0,kind}' AS kind,
       jsonb_array_length(preprocess#>'{features,0,std}') AS n_std
FROM corgipile.models WHERE model_name = 'sp_auto';
SELECT corgipile.predict('sp_auto', ARRAY[0, 2], ARRAY[300.0, 3.0]) IS NOT NULL AS predicted;
SELECT * FROM corgipile.train('sp', 'svm', features => 'vals', feature_indices => 'idx',
                              standardize => 'on');

-- An array column: the transform per element, applied to predict's array
CREATE TABLE arr AS
SELECT CASE WHEN i % 2 = 0 THEN 1 ELSE -1 END AS label,
       ARRAY[1000.0 * (i % 2) + i % 13, 7.0]::float8[] AS features
FROM generate_series(1, 500) AS i;
SELECT count(*) FROM corgipile.train('arr', 'svm', model_name => 'arr_auto', seed => 1,
                                     max_epoch_num => 3);
SELECT preprocess#>'{features,0,std,1}' AS constant_std, preprocess->'constant_features' AS n_constant
FROM corgipile.models WHERE model_name = 'arr_auto';
SELECT corgipile.predict('arr_auto', ARRAY[1005.0, 7.0]) AS high,
       corgipile.predict('arr_auto', ARRAY[5.0, 7.0]) AS low;

-- Warm start keeps the stored transform and dictionaries
SELECT count(*) FROM corgipile.train('churn', 'logistic', model_name => 'ch_warm',
                                     label => 'churned',
                                     features => 'amount, contract, senior, constant',
                                     seed => 1, max_epoch_num => 1, warm_start => 'ch_cat');
SELECT a.preprocess = b.preprocess AS same_preprocess
FROM corgipile.models a, corgipile.models b
WHERE a.model_name = 'ch_cat' AND b.model_name = 'ch_warm';

-- A validation relation is encoded as the training rows are
SELECT count(*) FROM corgipile.train('churn', 'logistic', model_name => 'ch_val',
                                     label => 'churned', features => 'amount, contract',
                                     seed => 1, max_epoch_num => 2, validation => 'churn_new');
SELECT jsonb_path_query_array(history, '$[*].validation_score') IS NOT NULL AS scored
FROM corgipile.models WHERE model_name = 'ch_val';

-- A damaged preprocess column is an error naming it, never a misread
CREATE TABLE saved AS SELECT * FROM corgipile.model_store WHERE model_name = 'ch_cat';
UPDATE corgipile.model_store SET preprocess = jsonb_set(preprocess, '{features,1,categories}',
                                                        '["Two year", "Month", "One year"]')
WHERE model_name = 'ch_cat';
SELECT corgipile.predict_class('ch_cat', c) FROM churn AS c LIMIT 1;
UPDATE corgipile.model_store SET preprocess = jsonb_set(s.preprocess, '{features,0,std}', '-1')
FROM saved AS s WHERE model_store.model_name = 'ch_cat';
SELECT corgipile.predict_class('ch_cat', c) FROM churn AS c LIMIT 1;
UPDATE corgipile.model_store SET preprocess = jsonb_set(s.preprocess, '{n_model_features}', '3')
FROM saved AS s WHERE model_store.model_name = 'ch_cat';
SELECT corgipile.predict_class('ch_cat', c) FROM churn AS c LIMIT 1;
UPDATE corgipile.model_store SET preprocess = '[1, 2]' WHERE model_name = 'ch_cat';
SELECT corgipile.predict_class('ch_cat', c) FROM churn AS c LIMIT 1;
UPDATE corgipile.model_store SET preprocess = jsonb_set(s.preprocess, '{features,0,name}', '"other"')
FROM saved AS s WHERE model_store.model_name = 'ch_cat';
SELECT corgipile.predict_class('ch_cat', c) FROM churn AS c LIMIT 1;
UPDATE corgipile.model_store SET preprocess = s.preprocess
FROM saved AS s WHERE model_store.model_name = 'ch_cat';
SELECT corgipile.predict_class('ch_cat', c) FROM churn AS c WHERE id = 3;

-- Original-unit weights for SQL users: w / std, b - sum(w * mean / std)
SELECT c.output, c.feature,
       abs(c.weight - CASE c.feature
             WHEN 'amount' THEN m.weights[1] / (m.preprocess#>>'{features,0,std}')::float8
             WHEN 'age' THEN m.weights[2] / (m.preprocess#>>'{features,1,std}')::float8
             ELSE m.weights[3]
                  - m.weights[1] * (m.preprocess#>>'{features,0,mean}')::float8
                    / (m.preprocess#>>'{features,0,std}')::float8
                  - m.weights[2] * (m.preprocess#>>'{features,1,mean}')::float8
                    / (m.preprocess#>>'{features,1,std}')::float8 END) < 1e-9 AS consistent
FROM corgipile.model_coefficients('ch_auto') AS c, corgipile.models AS m
WHERE m.model_name = 'ch_auto' ORDER BY c.feature NULLS LAST;
-- categories are named column=value; raw models give their weights as stored
SELECT output, feature FROM corgipile.model_coefficients('ch_cat');
SELECT bool_and(c.weight = m.weights[c.ord]) AS as_stored
FROM corgipile.model_coefficients('ch_off') WITH ORDINALITY AS c(output, feature, weight, ord),
     corgipile.models AS m WHERE m.model_name = 'ch_off';
-- a role with USAGE on the model but no right to read its table may
-- predict with it, not see the statistics the original units reveal
CREATE ROLE prep_reader;
SELECT corgipile.grant_model('ch_auto', 'prep_reader');
SET ROLE prep_reader;
SELECT corgipile.predict_class('ch_auto', r) AS predicted
FROM (VALUES (1000.0, 20)) AS r(amount, age);
SELECT preprocess IS NULL AS hidden, params->>'standardize' AS standardize
FROM corgipile.models WHERE model_name = 'ch_auto';
SELECT * FROM corgipile.model_coefficients('ch_auto');
RESET ROLE;

-- only categories: nothing to scale; scale_only on dense features keeps
-- the means out of the transform
SELECT count(*) FROM corgipile.train('churn', 'svm', model_name => 'ch_only_cat',
                                     label => 'churned', features => 'contract, senior',
                                     seed => 1, max_epoch_num => 1);
SELECT n_features, preprocess->>'standardize' AS standardize, params->>'standardize' AS params
FROM corgipile.models WHERE model_name = 'ch_only_cat';
-- category names are the table's values: hidden without a transform too
SELECT corgipile.grant_model('ch_only_cat', 'prep_reader');
SET ROLE prep_reader;
SELECT * FROM corgipile.model_coefficients('ch_only_cat');
RESET ROLE;
SELECT count(*) FROM corgipile.train('churn', 'svm', model_name => 'ch_scale',
                                     label => 'churned', features => 'amount, age',
                                     seed => 1, max_epoch_num => 1, standardize => 'scale_only');
SELECT preprocess->>'standardize' AS standardize,
       abs(c.weight - m.weights[3]) < 1e-12 AS intercept_unchanged
FROM corgipile.models AS m, corgipile.model_coefficients('ch_scale') AS c
WHERE m.model_name = 'ch_scale' AND c.feature IS NULL;
SELECT * FROM corgipile.train('churn', 'svm', label => 'churned', features => 'amount',
                              standardize => 'sometimes');

SELECT corgipile.drop_model(model_name) FROM corgipile.models
WHERE model_name IN ('ch_only_cat', 'ch_scale', 'ch_auto', 'ch_off', 'ch_cat', 'ch_seed2', 'ch_seed3', 'many_ok',
                     'sp_auto', 'arr_auto', 'ch_warm', 'ch_val') ORDER BY model_name;
DROP TABLE churn, churn_new, churn_num, churn3, churn1, many, nullcat, sp, arr, saved;
DROP ROLE prep_reader;
