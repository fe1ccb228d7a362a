-- Models as objects (0.2.0): owners by OID, USAGE grants, what each role
-- sees, who may drop, rename and reassign, and validation of damaged rows.
SET corgipile.progress = off;
CREATE ROLE corgipile_alice;
CREATE ROLE corgipile_bob;
CREATE ROLE corgipile_team;
CREATE ROLE corgipile_carol IN ROLE corgipile_team;
GRANT SELECT ON points, points_test TO corgipile_alice, corgipile_bob, corgipile_team;
CREATE TABLE alice_data AS SELECT * FROM points;
ALTER TABLE alice_data OWNER TO corgipile_alice;

-- Alice trains on her own table and on a shared one.
SET ROLE corgipile_alice;
SET corgipile.progress = off;
SELECT count(*) FROM corgipile.train('alice_data', 'svm', model_name => 'alice_private',
                                     max_epoch_num => 1, seed => 1);
SELECT count(*) FROM corgipile.train('points', 'logistic', model_name => 'alice_shared',
                                     max_epoch_num => 1, seed => 1);
SELECT model_name, owner, relation, history IS NOT NULL AS has_history,
       params ? 'n_blocks' AS has_n_blocks
FROM corgipile.models ORDER BY 1;
RESET ROLE;

-- Bob sees none of it and cannot use it.
SET ROLE corgipile_bob;
SET corgipile.progress = off;
SELECT count(*) FROM corgipile.models WHERE model_name LIKE 'alice%';
SELECT corgipile.predict('alice_private', ARRAY[1.0, 0.0]);
SELECT corgipile.predict_class('alice_shared', ARRAY[1.0, 0.0]);
SELECT corgipile.predict_proba('alice_shared', ARRAY[0, 1], ARRAY[1.0, 0.0]);
SELECT * FROM corgipile.evaluate('alice_shared', 'points_test');
SELECT corgipile.grant_model('alice_private', 'corgipile_bob');
SELECT corgipile.drop_model('alice_private');
SELECT corgipile.rename_model('alice_private', 'bobs_now');
SELECT corgipile.reassign_models('corgipile_alice', 'corgipile_bob');
-- Nobody writes the storage directly.
SELECT count(*) FROM corgipile.model_store;
INSERT INTO corgipile.model_store (model_name, model, relation, label, features,
                                   n_features, weights, params, history, owner_id)
VALUES ('forged', 'svm', 'points', 'label', '{features}', 2, '{1,1,1}', '{}', '[]',
        'corgipile_alice'::regrole);
UPDATE corgipile.model_store SET weights = '{0,0,0}';
DELETE FROM corgipile.model_store;
UPDATE corgipile.models SET weights = '{0,0,0}';
DELETE FROM corgipile.models;
-- Names are global: Bob takes a name first; Alice cannot train it, and her
-- predict() with that name is refused instead of using Bob's weights.
SELECT count(*) FROM corgipile.train('points', 'svm', model_name => 'prod_model',
                                     max_epoch_num => 1, seed => 2);
RESET ROLE;
SET ROLE corgipile_alice;
SELECT * FROM corgipile.train('points', 'svm', model_name => 'prod_model');
SELECT corgipile.predict('prod_model', ARRAY[1.0, 0.0]);

-- Grants: USAGE lets Bob predict and evaluate, and see the model; its
-- relation, history, dataset figures and (for a standardized model, as
-- alice_private is) weights only where he may read the table.
SELECT corgipile.grant_model('alice_private', 'corgipile_bob');
SELECT corgipile.grant_model('alice_private', 'corgipile_bob');
SELECT corgipile.grant_model('alice_shared', 'corgipile_bob');
SELECT corgipile.grant_model('alice_shared', 'no_such_role');
SELECT model_name, usage_roles FROM corgipile.models ORDER BY 1;
RESET ROLE;
SET ROLE corgipile_bob;
SELECT model_name, owner, relation, relid IS NOT NULL AS has_relid,
       history IS NOT NULL AS has_history, params ? 'n_blocks' AS has_n_blocks,
       params ->> 'layout' AS layout, array_length(weights, 1) AS n_weights
FROM corgipile.models WHERE model_name LIKE 'alice%' ORDER BY 1;
SELECT corgipile.predict('alice_private', ARRAY[1.0, 0.0]) IS NOT NULL AS can_predict;
SELECT metric FROM corgipile.evaluate('alice_shared', 'points_test') ORDER BY 1;
-- USAGE is not ownership.
SELECT corgipile.drop_model('alice_private');
SELECT corgipile.revoke_model('alice_private', 'corgipile_bob');
RESET ROLE;
SET ROLE corgipile_alice;
SELECT corgipile.revoke_model('alice_private', 'corgipile_bob');
RESET ROLE;
SET ROLE corgipile_bob;
SELECT corgipile.predict('alice_private', ARRAY[1.0, 0.0]);
SELECT count(*) FROM corgipile.models WHERE model_name = 'alice_private';
RESET ROLE;

-- Members of the owner role have the owner's rights.
SET ROLE corgipile_team;
SELECT count(*) FROM corgipile.train('points', 'svm', model_name => 'team_model',
                                     max_epoch_num => 1, seed => 1);
RESET ROLE;
SET ROLE corgipile_carol;
SELECT owner FROM corgipile.models WHERE model_name = 'team_model';
SELECT corgipile.rename_model('team_model', 'team_model_v2');
SELECT corgipile.predict('team_model_v2', ARRAY[1.0, 0.0]) IS NOT NULL AS can_predict;
SELECT corgipile.drop_model('team_model_v2');
RESET ROLE;

-- Names: checked before any training, and by rename.
SELECT * FROM corgipile.train('points', 'svm', model_name => '');
SELECT * FROM corgipile.train('points', 'svm', model_name => repeat('n', 256));
SELECT count(*) FROM corgipile.train('points', 'svm', model_name => repeat('n', 255),
                                     max_epoch_num => 1);
SELECT corgipile.rename_model(repeat('n', 255), repeat('n', 256));
SELECT corgipile.rename_model(repeat('n', 255), 'prod_model');
SELECT corgipile.rename_model(repeat('n', 255), '');
SELECT corgipile.drop_model(repeat('n', 255));

-- Superusers see and manage every model.
SELECT model_name, owner FROM corgipile.models
WHERE model_name LIKE 'alice%' OR model_name = 'prod_model' ORDER BY 1;
SELECT corgipile.reassign_models('corgipile_alice', 'corgipile_carol');
SELECT model_name, owner FROM corgipile.models
WHERE model_name LIKE 'alice%' OR model_name = 'prod_model' ORDER BY 1;
SELECT corgipile.reassign_models('corgipile_carol', 'corgipile_alice');

-- DROP ROLE leaves the models orphaned: a superuser sees them, can
-- reassign them by the old OID, or drop them; a new role with the same
-- name does not inherit them.
CREATE ROLE corgipile_dave;
GRANT SELECT ON points TO corgipile_dave;
SET ROLE corgipile_dave;
SELECT count(*) FROM corgipile.train('points', 'svm', model_name => 'dave_a', max_epoch_num => 1);
SELECT count(*) FROM corgipile.train('points', 'svm', model_name => 'dave_b', max_epoch_num => 1);
RESET ROLE;
SELECT owner_id AS old_dave FROM corgipile.models WHERE model_name = 'dave_a' \gset
REVOKE ALL ON points FROM corgipile_dave;
DROP ROLE corgipile_dave;
SELECT model_name, owner = 'unknown (OID=' || :'old_dave' || ')' AS orphaned
FROM corgipile.models WHERE model_name LIKE 'dave%' ORDER BY 1;
CREATE ROLE corgipile_dave;
GRANT SELECT ON points TO corgipile_dave;
SET ROLE corgipile_dave;
SELECT count(*) FROM corgipile.models WHERE model_name LIKE 'dave%';
SELECT corgipile.predict('dave_a', ARRAY[1.0, 0.0]);
SELECT corgipile.drop_model('dave_a');
SELECT corgipile.reassign_models(:'old_dave', 'corgipile_dave');
RESET ROLE;
SELECT corgipile.drop_model('dave_b');
SELECT corgipile.reassign_models(:'old_dave', 'corgipile_dave');
SET ROLE corgipile_dave;
SELECT model_name, owner FROM corgipile.models WHERE model_name LIKE 'dave%';
SELECT corgipile.drop_model('dave_a');
RESET ROLE;

-- import_model: validated as predict() loads it, owned by the caller.
SET ROLE corgipile_bob;
SELECT corgipile.import_model('imported', 'svm', 'elsewhere.t', 'label', '{features}', NULL,
                              2, '{1, 0, 0}', '[-1, 1]', '{"layout": "array"}', '[]');
SELECT model_name, owner, relation, relid FROM corgipile.models WHERE model_name = 'imported';
SELECT corgipile.predict('imported', ARRAY[2.0, 0.0]), corgipile.predict('imported', ARRAY[-2.0, 0.0]);
SELECT corgipile.import_model('imported_bad', 'svm', 't', 'label', '{}', NULL,
                              2, '{1, 0, 0}', '[-1, 1]', '{}', '[]');
SELECT corgipile.import_model('imported_bad', 'svm', 't', 'label', '{features}', NULL,
                              2, '{1, 0}', '[-1, 1]', '{}', '[]');
SELECT corgipile.import_model('imported', 'svm', 't', 'label', '{features}', NULL,
                              2, '{1, 0, 0}', '[-1, 1]', '{}', '[]');
SELECT corgipile.import_model('imported_bad', 'svm', 't', NULL, '{features}', NULL,
                              2, '{1, 0, 0}', '[-1, 1]', '{}', '[]');
SELECT count(*) FROM corgipile.models WHERE model_name = 'imported_bad';
-- annotate_model: the owner records the source; params' own keys stay.
SELECT corgipile.annotate_model('imported', 'elsewhere.t WHERE id < 10',
                                '{"source_filter": "id < 10"}');
SELECT relation, params FROM corgipile.models WHERE model_name = 'imported';
SELECT corgipile.annotate_model('imported', NULL, '{"layout": "sparse"}');
SELECT corgipile.annotate_model('imported', NULL, '[1]');
SELECT corgipile.annotate_model('imported', '', NULL);
RESET ROLE;
SET ROLE corgipile_alice;
SELECT corgipile.annotate_model('imported', 'mine now', NULL);
RESET ROLE;
SET ROLE corgipile_bob;
SELECT corgipile.drop_model('imported');
RESET ROLE;

-- Damaged rows, written directly to the storage by a superuser, are
-- errors when loaded, never wrong reads.
SELECT count(*) FROM corgipile.train('points', 'softmax', model_name => 'good_sm',
                                     max_epoch_num => 1, seed => 1);
INSERT INTO corgipile.model_store (model_name, model, relation, label, features,
    feature_indices, n_features, weights, classes, params, history, owner_id)
SELECT 'bad_' || v, model, relation, label, features, feature_indices, n_features,
       weights, classes, params, history, owner_id
FROM corgipile.model_store,
     unnest(ARRAY['kind', 'sparse_no_indices', 'indices_not_sparse', 'layout',
                  'features_empty', 'features_null', 'features_two', 'weights_short',
                  'weights_null', 'weights_nan', 'weights_2d', 'n_features_huge',
                  'classes_count', 'classes_null', 'classes_object', 'classes_mixed',
                  'classes_missing', 'label_empty']) AS v
WHERE model_name = 'good_sm';
UPDATE corgipile.model_store SET model = 'tree' WHERE model_name = 'bad_kind';
UPDATE corgipile.model_store SET params = '{"layout": "sparse"}' WHERE model_name = 'bad_sparse_no_indices';
UPDATE corgipile.model_store SET feature_indices = 'idx' WHERE model_name = 'bad_indices_not_sparse';
UPDATE corgipile.model_store SET params = '{"layout": "rows"}' WHERE model_name = 'bad_layout';
UPDATE corgipile.model_store SET features = '{}' WHERE model_name = 'bad_features_empty';
UPDATE corgipile.model_store SET features = '{NULL}' WHERE model_name = 'bad_features_null';
UPDATE corgipile.model_store SET features = '{a,b}' WHERE model_name = 'bad_features_two';
UPDATE corgipile.model_store SET weights = weights[1:5] WHERE model_name = 'bad_weights_short';
UPDATE corgipile.model_store SET weights[2] = NULL WHERE model_name = 'bad_weights_null';
UPDATE corgipile.model_store SET weights[2] = 'NaN' WHERE model_name = 'bad_weights_nan';
UPDATE corgipile.model_store SET weights = '{{1,2,3},{4,5,6}}' WHERE model_name = 'bad_weights_2d';
UPDATE corgipile.model_store SET n_features = 1431655765 WHERE model_name = 'bad_n_features_huge';
UPDATE corgipile.model_store SET classes = '[1, -1, 7]' WHERE model_name = 'bad_classes_count';
UPDATE corgipile.model_store SET classes = '[null, 1]' WHERE model_name = 'bad_classes_null';
UPDATE corgipile.model_store SET classes = '{"a": 1}' WHERE model_name = 'bad_classes_object';
UPDATE corgipile.model_store SET classes = '["a", 1]' WHERE model_name = 'bad_classes_mixed';
UPDATE corgipile.model_store SET classes = NULL WHERE model_name = 'bad_classes_missing';
UPDATE corgipile.model_store SET label = '' WHERE model_name = 'bad_label_empty';
SELECT corgipile.predict_class('good_sm', ARRAY[1.0, 0.0]);
DO $$
DECLARE
    m text;
    detail text;
BEGIN
    FOR m IN SELECT model_name FROM corgipile.models WHERE model_name LIKE 'bad\_%' ORDER BY 1 LOOP
        BEGIN
            PERFORM corgipile.predict_class(m, ARRAY[1.0, 0.0]);
            RAISE NOTICE '%: loaded', m;
        EXCEPTION WHEN data_corrupted THEN
            GET STACKED DIAGNOSTICS detail = PG_EXCEPTION_DETAIL;
            RAISE NOTICE '% (%) %', SQLERRM, SQLSTATE, detail;
        END;
    END LOOP;
END
$$;
SELECT corgipile.predict('bad_sparse_no_indices', t) FROM points t LIMIT 1;
SELECT * FROM corgipile.evaluate('bad_features_empty', 'points');
SELECT count(corgipile.drop_model(model_name)) FROM corgipile.models WHERE model_name LIKE 'bad\_%';

-- warm_start and model_coefficients follow the models view's rule for a
-- model's preprocessing: SELECT on its training relation or, without one
-- (imported rows), the owner's rights.  A grantee of an imported model may
-- predict with it but not copy its statistics and category values into a
-- model of its own, nor read them as original-unit weights.
CREATE TABLE cats_data AS
SELECT i AS id, i % 2 AS label, (ARRAY['red', 'green', 'blue'])[1 + i % 3] AS color,
       i * 1.5 AS x
FROM generate_series(1, 60) AS i;
CREATE TABLE cats_other AS SELECT id, label, color, x + 1 AS x FROM cats_data;
GRANT SELECT ON cats_data TO corgipile_alice;
GRANT SELECT ON cats_other TO corgipile_bob;
SET ROLE corgipile_alice;
SET client_min_messages = warning;
SELECT count(*) FROM corgipile.train('cats_data', 'logistic', features => 'color, x',
                                     model_name => 'cats_src', max_epoch_num => 1, seed => 1);
RESET client_min_messages;
SELECT corgipile.import_model('cats_imp', model, '(imported)', label, features, feature_indices,
                              n_features, weights, classes, params, history, created_at, preprocess)
FROM corgipile.models WHERE model_name = 'cats_src';
SELECT corgipile.grant_model('cats_imp', 'corgipile_bob');
SELECT count(*) FROM corgipile.model_coefficients('cats_imp');
RESET ROLE;
SET ROLE corgipile_bob;
SELECT preprocess IS NULL AS preprocess_hidden FROM corgipile.models WHERE model_name = 'cats_imp';
SELECT count(*) FROM corgipile.train('cats_other', 'logistic', features => 'color, x',
                                     model_name => 'bob_warm', warm_start => 'cats_imp',
                                     max_epoch_num => 1, seed => 1);
SELECT count(*) FROM corgipile.model_coefficients('cats_imp');
SELECT count(corgipile.predict('cats_imp', c)) FROM cats_other AS c;
RESET ROLE;
-- The owner who may no longer read the training relation: hidden by the
-- view, refused by model_coefficients alike.
REVOKE SELECT ON cats_data FROM corgipile_alice;
SET ROLE corgipile_alice;
SELECT preprocess IS NULL AS preprocess_hidden FROM corgipile.models WHERE model_name = 'cats_src';
SELECT count(*) FROM corgipile.model_coefficients('cats_src');
RESET ROLE;
SELECT corgipile.drop_model(model_name) FROM corgipile.models
WHERE model_name IN ('cats_src', 'cats_imp');
DROP TABLE cats_data, cats_other;

-- A grantee without SELECT on the training relation gets the model's
-- function and nothing more: predictions, but no weights in the model's
-- scaled space, no statistics, no figures of the rows.  (Before, the view
-- showed it the standardized weights, and two predict_proba calls turned
-- them into each feature's std: the first query below.)
CREATE TABLE std_arr AS
SELECT i AS id, (i % 3 = 0) AS label,
       ARRAY[(i * 37 % 101) / 7.0, (i * 11 % 13) + 100.0]::float8[] AS features
FROM generate_series(1, 300) AS i;
CREATE TABLE std_cols AS
SELECT i AS id, (i % 3 = 0) AS label, (i * 37 % 101) / 7.0 AS x,
       CASE WHEN i % 10 = 0 THEN NULL ELSE (ARRAY['red', 'green', 'blue'])[1 + i % 3] END AS color
FROM generate_series(1, 300) AS i;
CREATE TABLE bob_rows (id int, label boolean, x float8, color text);
INSERT INTO bob_rows VALUES (1, true, 1.0, 'red'), (2, false, 2.0, NULL), (3, true, 3.0, 'mauve');
ALTER TABLE std_arr OWNER TO corgipile_alice;
ALTER TABLE std_cols OWNER TO corgipile_alice;
ALTER TABLE bob_rows OWNER TO corgipile_bob;
GRANT SELECT ON bob_rows TO corgipile_alice;
SET ROLE corgipile_alice;
SET client_min_messages = warning;
SELECT count(*) FROM corgipile.train('std_arr', 'logistic', model_name => 'std_arr_m',
                                     max_epoch_num => 2, seed => 1);
SELECT count(*) FROM corgipile.train('std_cols', 'logistic', model_name => 'std_cols_m',
                                     features => 'x, color', max_epoch_num => 2, seed => 1);
RESET client_min_messages;
SELECT corgipile.grant_model('std_arr_m', 'corgipile_bob'), corgipile.grant_model('std_cols_m', 'corgipile_bob');
-- the owner, who may read the table, sees every part
SELECT model_name, relation IS NOT NULL AS relation, n_features, cardinality(weights) AS n_weights,
       history IS NOT NULL AS history, preprocess IS NOT NULL AS preprocess,
       params ? 'l2' AS l2, params ? 'polish' AS polish
FROM corgipile.models WHERE model_name LIKE 'std\_%' ORDER BY 1;
SELECT metric, value FROM corgipile.evaluate('std_cols_m', 'std_cols') WHERE metric = 'unseen_values';
RESET ROLE;
SET ROLE corgipile_bob;
-- the issue's derivation of feature 1's std: nothing to derive it from
WITH p AS (SELECT (corgipile.predict_proba('std_arr_m', ARRAY[0, 0]::float8[]))[1] AS p0,
                  (corgipile.predict_proba('std_arr_m', ARRAY[1, 0]::float8[]))[1] AS p1),
     w AS (SELECT weights FROM corgipile.models WHERE model_name = 'std_arr_m')
SELECT weights[1] / (ln(p1 / (1 - p1)) - ln(p0 / (1 - p0))) AS std_1 FROM p, w;
SELECT model_name, relation, relid, n_features, weights, history, preprocess,
       features, classes, model
FROM corgipile.models WHERE model_name LIKE 'std\_%' ORDER BY 1;
-- of params, the training's settings that no row decides
SELECT model_name, array(SELECT jsonb_object_keys(params) ORDER BY 1) AS params
FROM corgipile.models WHERE model_name LIKE 'std\_%' ORDER BY 1;
-- predictions, as USAGE grants
SELECT round((corgipile.predict_proba('std_arr_m', ARRAY[3.0, 105.0]))[1]::numeric, 6) AS p;
SELECT id, corgipile.predict_class('std_cols_m', b) IS NOT NULL AS predicted
FROM bob_rows AS b ORDER BY id;
-- an array in the one-hot space would show its size and each category's weight
SELECT corgipile.predict('std_cols_m', ARRAY[1.0, 0, 1, 0]);
SELECT corgipile.predict('std_cols_m', ARRAY[0, 2], ARRAY[1.0, 1.0]);
-- an unseen value and a NULL both count: whether the training rows had
-- NULLs in color (they had) is not the function's
SELECT metric, value FROM corgipile.evaluate('std_cols_m', 'bob_rows') WHERE metric = 'unseen_values';
-- the statistics, as original-unit weights, a warm start, or encoded rows
SELECT count(*) FROM corgipile.model_coefficients('std_arr_m');
SELECT count(*) FROM corgipile.train('bob_rows', 'logistic', features => 'x, color',
                                     warm_start => 'std_cols_m', max_epoch_num => 1);
SELECT count(*) FROM corgipile.block_rows('bob_rows', ARRAY[0]::int8[], 1, model => 'std_cols_m');
RESET ROLE;
-- SELECT on the training relation shows the rest
GRANT SELECT ON std_arr TO corgipile_bob;
SET ROLE corgipile_bob;
SELECT model_name, n_features, cardinality(weights) AS n_weights, preprocess IS NOT NULL AS preprocess
FROM corgipile.models WHERE model_name LIKE 'std\_%' ORDER BY 1;
SELECT count(*) FROM corgipile.model_coefficients('std_arr_m');
RESET ROLE;
-- as the owner sees it: NULLs in color were seen in training, only the
-- unseen value counts
SET ROLE corgipile_alice;
SELECT metric, value FROM corgipile.evaluate('std_cols_m', 'bob_rows') WHERE metric = 'unseen_values';
RESET ROLE;
SELECT corgipile.drop_model('std_arr_m'), corgipile.drop_model('std_cols_m');
DROP TABLE std_arr, std_cols, bob_rows;

-- A grantee dropped since: gone from usage_roles in the view at once, and
-- from the stored list at the next grant or revoke.
CREATE ROLE corgipile_gone;
SET client_min_messages = warning;
SELECT count(*) FROM corgipile.train('points', 'svm', model_name => 'granted_gone', max_epoch_num => 1, seed => 1);
RESET client_min_messages;
SELECT corgipile.grant_model('granted_gone', 'corgipile_gone'), corgipile.grant_model('granted_gone', 'corgipile_bob');
DROP ROLE corgipile_gone;
SELECT usage_roles FROM corgipile.models WHERE model_name = 'granted_gone';
SELECT pg_catalog.cardinality(usage_roles) FROM corgipile.model_store WHERE model_name = 'granted_gone';
SELECT corgipile.revoke_model('granted_gone', 'corgipile_bob');
SELECT pg_catalog.cardinality(usage_roles) FROM corgipile.model_store WHERE model_name = 'granted_gone';
SELECT corgipile.drop_model('granted_gone');

-- Two trainings of one statement with one new model name: the second is
-- refused at its start, not after both have trained; the name is free again
-- for the next statement.
SELECT count(*) FROM (
    SELECT * FROM corgipile.train('points', 'svm', model_name => 'twice', max_epoch_num => 1, seed => 1)
    UNION ALL
    SELECT * FROM corgipile.train('points', 'svm', model_name => 'twice', max_epoch_num => 1, seed => 2)) AS s;
SET client_min_messages = warning;
SELECT count(*) FROM corgipile.train('points', 'svm', model_name => 'twice', max_epoch_num => 1, seed => 1);
RESET client_min_messages;
SELECT corgipile.drop_model('twice');

SELECT corgipile.drop_model(model_name) FROM corgipile.models
WHERE model_name IN ('alice_private', 'alice_shared', 'prod_model', 'good_sm');
DROP TABLE alice_data;
REVOKE ALL ON points, points_test FROM corgipile_alice, corgipile_bob, corgipile_team, corgipile_dave;
DROP ROLE corgipile_alice, corgipile_bob, corgipile_carol, corgipile_team, corgipile_dave;
