-- Upgrading a database that holds 0.1.0 models to the current version (0.2.0,
-- then 0.3.0 and 0.4.0), in a database of
-- its own.
\set regress_db :DBNAME
CREATE DATABASE corgipile_upgrade;
\c corgipile_upgrade
SET client_min_messages = warning;
CREATE ROLE corgipile_old_owner;
CREATE ROLE corgipile_old_other;
CREATE EXTENSION corgipile VERSION '0.1.0';
SELECT extversion FROM pg_extension WHERE extname = 'corgipile';
CREATE TABLE upgrade_pts AS
SELECT i AS id, CASE WHEN i % 2 = 0 THEN 1 ELSE -1 END AS label,
       ARRAY[CASE WHEN i % 2 = 0 THEN 1.0 ELSE -1.0 END, (i % 7) / 7.0]::float8[] AS features
FROM generate_series(1, 200) AS i;
GRANT SELECT ON upgrade_pts TO corgipile_old_owner;

-- This library needs the current catalog (0.3.0) and says so.
SELECT * FROM corgipile.train('upgrade_pts', 'svm', model_name => 'too_early');

-- Rows as 0.1.0's train() stored them, each role inserting its own (0.1.0
-- let any role insert; its policy made the owner CURRENT_USER).
SET ROLE corgipile_old_owner;
INSERT INTO corgipile.models (model_name, model, relation, label, features,
                              feature_indices, n_features, weights, classes, params, history)
VALUES ('old_svm', 'svm', 'public.upgrade_pts', 'label', '{features}', NULL, 2,
        '{1.5, 0.25, -0.1}', '[-1, 1]',
        '{"shuffle": "corgipile", "layout": "array", "n_blocks": 1, "n_outputs": 1}',
        '[{"epoch": 1, "tuples": 200, "loss": 0.5, "score": 0.9}]'),
       ('old_arrays', 'linear', '(arrays)', 'label', '{features}', NULL, 2,
        '{2, 0, 1}', NULL, '{"layout": "array"}', '[]');
RESET ROLE;
-- A model of a role dropped since: its owner name no longer resolves.
INSERT INTO corgipile.models (model_name, model, relation, label, features, n_features,
                              weights, classes, params, history, owner)
VALUES ('old_orphan', 'svm', 'public.upgrade_pts', 'label', '{features}', 2,
        '{1, 0, 0}', '[-1, 1]', '{"layout": "array"}', '[]', 'corgipile_gone_role');
SELECT model_name, owner FROM corgipile.models ORDER BY 1;

ALTER EXTENSION corgipile UPDATE;
SELECT extversion FROM pg_extension WHERE extname = 'corgipile';

-- The models are in the new catalog, their owners carried over as OIDs.
SELECT model_name, owner, owner_id = 'corgipile_old_owner'::regrole AS owner_by_oid,
       relid = 'upgrade_pts'::regclass AS relid_resolved, relation
FROM corgipile.models ORDER BY 1;
SELECT model_name, owner_id FROM corgipile.model_store WHERE owner_id = 0;

-- The owner predicts with the old model; other roles do not see it.
SET ROLE corgipile_old_owner;
SELECT model_name FROM corgipile.models ORDER BY 1;
SELECT id, corgipile.predict('old_svm', features) AS prediction,
       corgipile.predict('old_arrays', features) AS value
FROM upgrade_pts WHERE id <= 4 ORDER BY id;
SELECT corgipile.predict('old_svm', t) FROM upgrade_pts t WHERE id = 2;
RESET ROLE;
SET ROLE corgipile_old_other;
SELECT count(*) FROM corgipile.models;
SELECT corgipile.predict('old_svm', ARRAY[1.0, 0.0]);
RESET ROLE;

-- 0.2.0's rules apply to the old rows: the table is closed, the orphan is
-- a superuser's to reassign.
SET ROLE corgipile_old_owner;
INSERT INTO corgipile.model_store (model_name, model, relation, label, features, n_features,
                                   weights, params, history, owner_id)
VALUES ('x', 'svm', 't', 'label', '{f}', 1, '{1,1}', '{}', '[]', 10);
RESET ROLE;
SELECT corgipile.reassign_models('0', 'corgipile_old_owner');
SELECT model_name, owner FROM corgipile.models ORDER BY 1;

-- Training works once updated, and a fresh install equals the upgraded one.
SET corgipile.progress = off;
SELECT count(*) FROM corgipile.train('upgrade_pts', 'svm', model_name => 'new_svm',
                                     max_epoch_num => 1, seed => 1);
-- 0.4.0's parameters: average, and buffer_size NULL (the default)
SELECT count(*) FROM corgipile.train('upgrade_pts', 'svm', model_name => 'new_avg',
                                     max_epoch_num => 2, seed => 1, average => true,
                                     buffer_size => NULL);
SELECT params->'average' AS average, params->>'buffer_choice' LIKE 'whole table%' AS whole
FROM corgipile.models WHERE model_name = 'new_avg';
CREATE SCHEMA upgraded_columns;
CREATE TABLE upgraded_columns.cols AS
SELECT c.relname, a.attname, pg_catalog.format_type(a.atttypid, a.atttypmod) AS type, a.attnotnull
FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid
WHERE c.relnamespace = 'corgipile'::regnamespace AND a.attnum > 0 AND NOT a.attisdropped;
DROP EXTENSION corgipile;
CREATE EXTENSION corgipile;
SELECT c.relname, a.attname, pg_catalog.format_type(a.atttypid, a.atttypmod) AS type, a.attnotnull
FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid
WHERE c.relnamespace = 'corgipile'::regnamespace AND a.attnum > 0 AND NOT a.attisdropped
EXCEPT SELECT * FROM upgraded_columns.cols;
SELECT count(*) AS fresh_columns FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid
WHERE c.relnamespace = 'corgipile'::regnamespace AND a.attnum > 0 AND NOT a.attisdropped;
SELECT count(*) AS upgraded_columns FROM upgraded_columns.cols;

\c :regress_db
DROP DATABASE corgipile_upgrade;
DROP ROLE corgipile_old_owner, corgipile_old_other;
