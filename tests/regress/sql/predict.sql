-- Prediction from stored models, in the training table's label convention.
SET corgipile.progress = off;
SELECT count(*) FROM corgipile.train('points', 'svm', standardize => 'off', model_name => 'p_svm',
                                     max_epoch_num => 5, seed => 11);
SELECT count(*) FROM corgipile.train('points01', 'logistic', standardize => 'off', model_name => 'p_lr01',
                                     max_epoch_num => 5, seed => 11);
SELECT count(*) FROM corgipile.train('points_bool', 'svm', standardize => 'off', model_name => 'p_bool',
                                     max_epoch_num => 5, seed => 11);
SELECT count(*) FROM corgipile.train('points_cols', 'svm', standardize => 'off', model_name => 'p_cols',
                                     features => 'x1,x2', max_epoch_num => 5, seed => 11);
SELECT count(*) FROM corgipile.train('points_sparse', 'svm', standardize => 'off', model_name => 'p_sparse',
                                     features => 'vals', feature_indices => 'idx',
                                     max_epoch_num => 5, seed => 11);

-- The three forms agree with each other and with the weights.
SELECT corgipile.predict('p_svm', ARRAY[2.0, 0.0]) AS pos,
       corgipile.predict('p_svm', ARRAY[-2.0, 0.0]) AS neg,
       corgipile.predict('p_svm', ARRAY[2, 0]) AS int_array,
       corgipile.predict('p_svm', ARRAY[2.0, 0.0]::float4[]) AS float4_array,
       corgipile.predict('p_svm', ARRAY[2.0, 0.0]::numeric[]) AS numeric_array;
SELECT count(*) AS rows,
       count(*) FILTER (WHERE corgipile.predict('p_svm', t) = corgipile.predict('p_svm', t.features)) AS row_equals_array,
       count(*) FILTER (WHERE corgipile.predict('p_svm', t.features) =
                              CASE WHEN m.weights[1] * t.features[1] + m.weights[2] * t.features[2] + m.weights[3] > 0
                                   THEN 1 ELSE -1 END) AS matches_weights
FROM points_test t, corgipile.models m WHERE m.model_name = 'p_svm';

-- Held-out accuracy, and the label conventions: -1/+1, 0/1, booleans as 0/1.
SELECT round(avg((corgipile.predict('p_svm', t) = t.label)::int), 3) AS svm_accuracy
FROM points_test t;
-- a row of any type works, as long as it has the model's columns
SELECT round(avg((corgipile.predict('p_cols', t) = t.label)::int), 3) AS cols_accuracy
FROM (SELECT label, features[1] AS x1, features[2]::numeric AS x2 FROM points_test) AS t;
SELECT round(avg((corgipile.predict('p_lr01', t.features) = (t.label + 1) / 2)::int), 3) AS accuracy_01,
       array_agg(DISTINCT corgipile.predict('p_lr01', t.features)) AS lr01_values,
       array_agg(DISTINCT corgipile.predict('p_bool', t.features)) AS bool_values
FROM points_test t;

-- Sparse forms.
SELECT corgipile.predict('p_sparse', ARRAY[0, 1], ARRAY[2.0, 0.0]) AS sparse_pos,
       corgipile.predict('p_sparse', ARRAY[0], ARRAY[-2.0]) AS sparse_neg,
       corgipile.predict('p_sparse', '{}'::int[], '{}'::float8[]) AS sparse_empty;
SELECT count(*) FILTER (WHERE corgipile.predict('p_sparse', s) = corgipile.predict('p_sparse', s.idx, s.vals)) AS sparse_row_agrees
FROM points_sparse s;

-- NULLs give NULL.
SELECT corgipile.predict('p_svm', NULL::float8[]) IS NULL AS null_features,
       corgipile.predict(NULL, ARRAY[1.0, 2.0]) IS NULL AS null_model,
       corgipile.predict('p_svm', ARRAY[1.0, NULL]) IS NULL AS null_element;
SELECT corgipile.predict('p_cols', ROW(1, 1, NULL::float8, 2.0)::points_cols) IS NULL AS null_column;

-- Errors.
SELECT corgipile.predict('no_such_model', ARRAY[1.0, 2.0]);
SELECT corgipile.predict('p_svm', ARRAY[1.0, 2.0, 3.0]);
SELECT corgipile.predict('p_svm', ARRAY['a', 'b']);
SELECT corgipile.predict('p_svm', ARRAY['NaN', 1]::float8[]);
-- the hint names what the values were read for
CREATE TABLE points_nan (label int, features float8[]);
INSERT INTO points_nan VALUES (1, '{1,1}'), (-1, '{Infinity,0}');
SELECT * FROM corgipile.evaluate('p_svm', 'points_nan');
SELECT corgipile.predict('p_svm', ARRAY[[1.0, 2.0]]);
SELECT corgipile.predict('p_sparse', ARRAY[0, 2], ARRAY[1.0, 1.0]);
SELECT corgipile.predict('p_sparse', ARRAY[0, 1], ARRAY[1.0]);
SELECT corgipile.predict('p_cols', t) FROM points t LIMIT 1;
SELECT corgipile.predict('p_svm', ROW(1, 2)) ;

-- One query may use several models; each call site keeps its own.
SELECT count(*) FILTER (WHERE corgipile.predict('p_svm', features) = corgipile.predict('p_cols', t)) AS agree,
       count(*) AS rows
FROM points_cols t JOIN points USING (id);

-- Inputs are checked before they are read (0.2.0): the row form checks each
-- column's type against what the model needs, the array forms the element
-- type.
SELECT corgipile.predict('p_svm', t) FROM (SELECT 1 AS features) t;
SELECT corgipile.predict_class('p_svm', t) FROM (SELECT 'abc'::text AS features) t;
SELECT corgipile.predict_proba('p_lr01', t) FROM (SELECT '\x01'::bytea AS features) t;
SELECT corgipile.predict('p_svm', t) FROM (SELECT ARRAY[true, false] AS features) t;
SELECT corgipile.predict('p_svm', ARRAY[true, false]);
CREATE DOMAIN float8_vec AS float8[];
SELECT corgipile.predict('p_svm', t) = corgipile.predict('p_svm', ARRAY[1.0, 0.5]) AS same
FROM (SELECT ARRAY[1.0, 0.5]::float8_vec AS features) t;
DROP DOMAIN float8_vec;
