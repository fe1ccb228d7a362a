-- NULL numbers: skipped by default, with a NOTICE that says why
-- and which parameter keeps the rows; imputed with missing => 'mean',
-- 'median' or 'zero' (scikit-learn's SimpleImputer), the statistic stored
-- with the model and applied by predict*() and evaluate(); a 0/1 feature
-- per column that had NULLs with missing_indicator.  evaluate() reports
-- the rows it scored and skipped.
SET corgipile.progress = off;

-- A survival-study-like table: a NULL in a number column (a) for one row
-- in 7, a text column with NULLs, a NULL label for one row in 50.
CREATE TABLE surv AS
SELECT i AS id,
       CASE WHEN i % 50 = 0 THEN NULL ELSE (i * 7919 % 97 > 40 OR i % 9 = 0)::int END AS label,
       CASE WHEN i % 7 = 0 THEN NULL ELSE 0.5 + (i * 31 % 23) / 4.0 END AS a,
       (i * 7919 % 97)::float8 * 10 AS b,
       CASE WHEN i % 11 = 0 THEN NULL ELSE (ARRAY['F', 'M'])[1 + i % 2] END AS sex
FROM generate_series(1, 700) AS i;
ANALYZE surv;
CREATE TABLE surv_test AS SELECT * FROM surv WHERE id <= 140;

-- The default skips the rows; the NOTICE says how many for each reason
-- and names the parameter that keeps them.
SELECT count(*) FROM corgipile.train('surv', 'logistic', model_name => 's_skip',
                                     features => 'a, b, sex', seed => 1, max_epoch_num => 3);
SELECT params->>'missing' AS missing, preprocess ? 'missing' AS imputes
FROM corgipile.models WHERE model_name = 's_skip';
-- evaluate() says what it scored and what it left out (and why)
SELECT metric, round(value::numeric, 4) AS value FROM corgipile.evaluate('s_skip', 'surv_test')
WHERE metric IN ('rows', 'skipped_null_label', 'skipped_null_features');
-- a NULL number gives no prediction
SELECT corgipile.predict('s_skip', r) IS NULL AS no_prediction
FROM (VALUES (NULL::float8, 10.0::float8, 'F'::text)) AS r(a, b, sex);

-- missing => 'mean': every labelled row trains; the mean of the values is
-- stored as the fill and the column is standardized as imputed (a
-- SimpleImputer, then a StandardScaler: the same mean, the squared
-- deviations divided by every row)
SELECT count(*) FROM corgipile.train('surv', 'logistic', model_name => 's_mean',
                                     features => 'a, b, sex', seed => 1, max_epoch_num => 3,
                                     missing => 'mean');
SELECT m.n_features, m.params->>'missing' AS missing, m.preprocess->>'missing' AS stored,
       m.preprocess#>'{features,0,nulls}' AS a_nulls, m.preprocess#>'{features,1}' ? 'nulls' AS b_nulls,
       (m.preprocess->>'rows')::int AS rows,
       abs((m.preprocess#>>'{features,0,fill}')::float8 - s.mean) < 1e-12 AS fill_is_mean,
       abs((m.preprocess#>>'{features,0,mean}')::float8 - s.mean) < 1e-12 AS mean_kept,
       abs((m.preprocess#>>'{features,0,std}')::float8 - s.std) < 1e-12 AS std_imputed
FROM corgipile.models AS m,
     (SELECT avg(a) AS mean,
             sqrt(sum((a - (SELECT avg(a) FROM surv WHERE label IS NOT NULL)) ^ 2) / count(*)) AS std
      FROM surv WHERE label IS NOT NULL) AS s
WHERE m.model_name = 's_mean';
SELECT epoch, tuples FROM jsonb_to_recordset((SELECT history FROM corgipile.models
                                              WHERE model_name = 's_mean'))
       AS h(epoch int, tuples bigint) WHERE epoch = 1;
-- predict imputes as training did: a NULL is the stored fill
SELECT corgipile.predict_proba('s_mean', r) = corgipile.predict_proba('s_mean', f) AS same,
       corgipile.predict_proba('s_mean', r) IS NOT NULL AS predicted
FROM (VALUES (NULL::float8, 10.0::float8, 'F'::text)) AS r(a, b, sex),
     (SELECT (preprocess#>>'{features,0,fill}')::float8 AS a, 10.0::float8 AS b, 'F'::text AS sex
      FROM corgipile.models WHERE model_name = 's_mean') AS f;
-- evaluate() scores the rows with a NULL number now; a NULL label is
-- still left out (a NOTICE says so, without the hint)
SELECT metric, round(value::numeric, 4) AS value FROM corgipile.evaluate('s_mean', 'surv_test')
WHERE metric IN ('rows', 'skipped_null_label', 'skipped_null_features');

-- missing => 'median': the median of the values (numpy's: the mean of the
-- two middle ones of an even count), from a sort in work_mem
SELECT count(*) FROM corgipile.train('surv', 'linear', model_name => 's_median', label => 'b',
                                     features => 'a', seed => 1, max_epoch_num => 2,
                                     missing => 'median');
SELECT (m.preprocess#>>'{features,0,fill}')::float8 = s.median AS fill_is_median,
       s.median
FROM corgipile.models AS m,
     (SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY a) AS median FROM surv) AS s
WHERE m.model_name = 's_median';
-- an odd count: the middle value
CREATE TABLE odd AS SELECT i AS id, i::float8 AS label,
       CASE WHEN i % 4 = 0 THEN NULL ELSE (i * i % 17)::float8 END AS x
FROM generate_series(1, 14) AS i;
SELECT count(*) FROM odd WHERE x IS NOT NULL;
SELECT count(*) FROM corgipile.train('odd', 'linear', model_name => 'odd_median', features => 'x',
                                     seed => 1, max_epoch_num => 1, missing => 'median');
SELECT (m.preprocess#>>'{features,0,fill}')::float8 AS fill,
       (SELECT percentile_disc(0.5) WITHIN GROUP (ORDER BY x) FROM odd) AS middle_value
FROM corgipile.models AS m WHERE m.model_name = 'odd_median';
-- values beyond maintenance_work_mem go to a sort per feature that
-- spills to disk: the same medians; too many features for it is refused
SET maintenance_work_mem = '1MB';
CREATE TABLE wide AS SELECT i AS id, (i % 2)::int AS label,
       CASE WHEN i % 5 = 0 THEN NULL ELSE sin(i) * 100 END AS x1,
       CASE WHEN i % 3 = 0 THEN NULL ELSE cos(i * 1.7) END AS x2,
       ARRAY(SELECT i * k % 11 FROM generate_series(1, 20) AS k)::float8[] AS features
FROM generate_series(1, 100000) AS i;
SELECT count(*) FROM corgipile.train('wide', 'svm', model_name => 'wide_median',
                                     features => 'x1, x2', seed => 1, max_epoch_num => 1,
                                     missing => 'median');
SELECT (m.preprocess#>>'{features,0,fill}')::float8 = s.m1 AS x1_median,
       (m.preprocess#>>'{features,1,fill}')::float8 = s.m2 AS x2_median
FROM corgipile.models AS m,
     (SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY x1) AS m1,
             percentile_cont(0.5) WITHIN GROUP (ORDER BY x2) AS m2 FROM wide) AS s
WHERE m.model_name = 'wide_median';
SELECT * FROM corgipile.train('wide', 'svm', missing => 'median');
RESET maintenance_work_mem;

-- missing => 'zero', without standardizing: the fill is 0 and nothing is
-- scaled; predict of a NULL is predict of 0
SELECT count(*) FROM corgipile.train('surv', 'svm', model_name => 's_zero',
                                     features => 'a, b', seed => 1, max_epoch_num => 2,
                                     missing => 'zero', standardize => 'off', learning_rate => 0.001);
SELECT preprocess->'standardize' AS standardize, preprocess#>'{features,0}' AS a,
       params->>'missing' AS missing
FROM corgipile.models WHERE model_name = 's_zero';
SELECT corgipile.predict('s_zero', r) = corgipile.predict('s_zero', ARRAY[0, 10.0]) AS as_zero
FROM (VALUES (NULL::float8, 10.0::float8)) AS r(a, b);

-- missing_indicator: a 0/1 feature per number column that had NULLs in
-- training (a, not b), after every column's positions, not scaled
SELECT count(*) FROM corgipile.train('surv', 'logistic', model_name => 's_ind',
                                     features => 'a, b, sex', seed => 1, max_epoch_num => 3,
                                     missing => 'mean', missing_indicator => true);
SELECT n_features, preprocess->'missing_indicator' AS missing_indicator,
       preprocess->'n_model_features' AS n_model_features,
       params->'missing_indicator' AS param
FROM corgipile.models WHERE model_name = 's_ind';
SELECT output, feature FROM corgipile.model_coefficients('s_ind');
-- the indicator's weight applies to a NULL a, and only to it: the margin of
-- a NULL row minus that of the same row with a = fill is the weight
SELECT abs(ln(p1 / (1 - p1)) - ln(p0 / (1 - p0)) - m.weights[5]) < 1e-9 AS indicator_weight
FROM (SELECT (corgipile.predict_proba('s_ind', r))[1] AS p1
      FROM (VALUES (NULL::float8, 10.0::float8, 'F'::text)) AS r(a, b, sex)) AS x,
     (SELECT (corgipile.predict_proba('s_ind', f))[1] AS p0
      FROM (SELECT (preprocess#>>'{features,0,fill}')::float8 AS a, 10.0::float8 AS b,
                   'F'::text AS sex FROM corgipile.models WHERE model_name = 's_ind') AS f) AS y,
     corgipile.models AS m WHERE m.model_name = 's_ind';
-- without category columns the rows are dense: the same indicator
SELECT count(*) FROM corgipile.train('surv', 'linear', model_name => 's_ind_dense', label => 'b',
                                     features => 'a', seed => 1, max_epoch_num => 2,
                                     missing => 'zero', missing_indicator => true);
SELECT n_features, (preprocess#>'{features,0}') - 'mean'::text - 'std'::text AS a
FROM corgipile.models WHERE model_name = 's_ind_dense';
SELECT output, feature FROM corgipile.model_coefficients('s_ind_dense');
SELECT metric FROM corgipile.evaluate('s_ind_dense', 'surv') WHERE metric LIKE '%rows%' OR metric LIKE 'skipped%';
-- the dense form takes the model's vector: a NULL at a number's position
-- is imputed, a NULL at the indicator's position is no prediction
SELECT corgipile.predict('s_ind_dense', ARRAY[NULL, 1]::float8[]) =
       corgipile.predict('s_ind_dense', ARRAY[0, 1]::float8[]) AS imputed,
       corgipile.predict('s_ind_dense', ARRAY[2, NULL]::float8[]) IS NULL AS no_prediction;

-- features arrays: a NULL element is imputed per element with the same
-- statistics; a NULL array is still skipped
CREATE TABLE arr AS
SELECT i AS id, (i % 3 = 0) AS label,
       ARRAY[CASE WHEN i % 6 = 1 THEN NULL ELSE i % 10 END,
             CASE WHEN i % 8 = 2 THEN NULL ELSE (i * 13) % 7 END]::float8[] AS features
FROM generate_series(1, 400) AS i;
INSERT INTO arr VALUES (401, true, NULL);
SELECT count(*) FROM corgipile.train('arr', 'logistic', model_name => 'arr_mean', seed => 1,
                                     max_epoch_num => 2, missing => 'mean');
SELECT abs((m.preprocess#>>'{features,0,fill,0}')::float8 - s.m1) < 1e-12 AS fill1,
       abs((m.preprocess#>>'{features,0,fill,1}')::float8 - s.m2) < 1e-12 AS fill2,
       (m.history->0->>'tuples')::int AS tuples
FROM corgipile.models AS m,
     (SELECT avg(features[1]) AS m1, avg(features[2]) AS m2 FROM arr) AS s
WHERE m.model_name = 'arr_mean';
SELECT corgipile.predict_proba('arr_mean', ARRAY[NULL, 3]::float8[]) =
       corgipile.predict_proba('arr_mean', ARRAY[(m.preprocess#>>'{features,0,fill,0}')::float8, 3])
       AS imputed
FROM corgipile.models AS m WHERE m.model_name = 'arr_mean';
SELECT metric, value FROM corgipile.evaluate('arr_mean', 'arr')
WHERE metric IN ('rows', 'skipped_null_features');

-- a warm start keeps the imputation of the model it starts from
SELECT count(*) FROM corgipile.train('surv', 'logistic', model_name => 's_warm',
                                     features => 'a, b, sex', seed => 2, max_epoch_num => 1,
                                     warm_start => 's_mean');
SELECT a.preprocess = b.preprocess AS same_preprocess, a.params->>'missing' AS missing
FROM corgipile.models AS a, corgipile.models AS b
WHERE a.model_name = 's_warm' AND b.model_name = 's_mean';
-- validation => 'N%': held-out rows are imputed as training rows are
SELECT count(*) FROM corgipile.train('surv', 'logistic', model_name => 's_hold',
                                     features => 'a, b', seed => 3, max_epoch_num => 2,
                                     missing => 'mean', validation => '25%');
SELECT (params#>>'{holdout,rows}')::int + (history->0->>'tuples')::int AS all_labelled
FROM corgipile.models WHERE model_name = 's_hold';

-- Refused with a message that says what to do
SELECT * FROM corgipile.train('surv', 'svm', features => 'a, b', missing => 'average');
SELECT * FROM corgipile.train('surv', 'svm', features => 'a, b', missing_indicator => true);
SELECT * FROM corgipile.train('surv', 'svm', features => 'a, b', missing => NULL);
SELECT * FROM corgipile.train('arr', 'svm', missing => 'mean', missing_indicator => true);
CREATE TABLE sp AS SELECT 1 AS label, ARRAY[0]::int[] AS idx, ARRAY[1.0]::float8[] AS vals;
SELECT * FROM corgipile.train('sp', 'svm', features => 'vals', feature_indices => 'idx',
                              missing => 'mean');
CREATE TABLE allnull AS SELECT i % 2 AS label, NULL::float8 AS x, i::float8 AS y
FROM generate_series(1, 50) AS i;
SELECT * FROM corgipile.train('allnull', 'svm', features => 'x, y', missing => 'median');
-- 'zero' needs no statistic: an all-NULL column is a constant 0
SELECT count(*) FROM corgipile.train('allnull', 'svm', features => 'x, y', missing => 'zero',
                                     model_name => 'allnull_zero', max_epoch_num => 1, seed => 1);
SELECT preprocess#>'{features,0}' AS x FROM corgipile.models WHERE model_name = 'allnull_zero';
-- no row to evaluate at all: the error says why
CREATE TABLE nolabel AS SELECT NULL::int AS label, a, b, sex FROM surv LIMIT 3;
SELECT * FROM corgipile.evaluate('s_skip', 'nolabel');
CREATE TABLE nonum AS SELECT label, NULL::float8 AS a, b, sex FROM surv LIMIT 3;
SELECT * FROM corgipile.evaluate('s_skip', 'nonum');

-- A damaged imputation is an error naming it, never a misread
CREATE TABLE saved AS SELECT * FROM corgipile.model_store WHERE model_name = 's_ind';
UPDATE corgipile.model_store SET preprocess = jsonb_set(preprocess, '{features,0,fill}', '"x"')
WHERE model_name = 's_ind';
SELECT corgipile.predict('s_ind', s) FROM surv AS s LIMIT 1;
UPDATE corgipile.model_store SET preprocess = jsonb_set(s.preprocess, '{missing}', '"mode"')
FROM saved AS s WHERE model_store.model_name = 's_ind';
SELECT corgipile.predict('s_ind', s) FROM surv AS s LIMIT 1;
UPDATE corgipile.model_store SET preprocess = s.preprocess #- '{features,0,nulls}'
FROM saved AS s WHERE model_store.model_name = 's_ind';
SELECT corgipile.predict('s_ind', s) FROM surv AS s LIMIT 1;
UPDATE corgipile.model_store SET preprocess = s.preprocess #- '{features,1,fill}'
FROM saved AS s WHERE model_store.model_name = 's_ind';
SELECT corgipile.predict('s_ind', s) FROM surv AS s LIMIT 1;
UPDATE corgipile.model_store SET preprocess = jsonb_set(s.preprocess, '{missing_indicator}', '1')
FROM saved AS s WHERE model_store.model_name = 's_ind';
SELECT corgipile.predict('s_ind', s) FROM surv AS s LIMIT 1;
UPDATE corgipile.model_store SET preprocess = s.preprocess
FROM saved AS s WHERE model_store.model_name = 's_ind';
SELECT corgipile.predict('s_ind', s) IS NOT NULL AS predicted FROM surv AS s WHERE id = 7;
-- a model stored before 0.4.0 has no "missing": it skips, as it did
UPDATE corgipile.model_store SET preprocess = preprocess - 'missing'
WHERE model_name = 's_mean';
SELECT corgipile.predict('s_mean', r) IS NULL AS no_prediction
FROM (VALUES (NULL::float8, 10.0::float8, 'F'::text)) AS r(a, b, sex);
