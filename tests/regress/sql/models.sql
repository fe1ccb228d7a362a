-- The model catalog: ownership, dropping, and who may train on what.
SET corgipile.progress = off;
SELECT count(*) FROM corgipile.train('points', 'svm', model_name => 'm1', max_epoch_num => 1, seed => 1);
SELECT corgipile.drop_model('m1');
SELECT count(*) FROM corgipile.models WHERE model_name = 'm1';
SELECT corgipile.drop_model('m1');

-- A role that may read one table but not another.
CREATE ROLE corgipile_analyst;
CREATE TABLE secret AS SELECT * FROM points;
CREATE TABLE shared_cols AS SELECT * FROM points;
REVOKE ALL ON secret, shared_cols FROM PUBLIC;
GRANT SELECT (label, features) ON shared_cols TO corgipile_analyst;
GRANT SELECT ON points TO corgipile_analyst;
SELECT count(*) FROM corgipile.train('points', 'svm', model_name => 'admins_model', max_epoch_num => 1);

SET ROLE corgipile_analyst;
SET corgipile.progress = off;
SELECT * FROM corgipile.train('secret', 'svm');
SELECT count(*) FROM corgipile.train('shared_cols', 'svm', model_name => 'cols_ok', max_epoch_num => 1);
SELECT * FROM corgipile.train('shared_cols', 'svm', label => 'id');
SELECT count(*) FROM corgipile.train('points', 'svm', model_name => 'analysts_model', max_epoch_num => 1);
SELECT model_name, owner FROM corgipile.models
WHERE model_name IN ('admins_model', 'analysts_model') ORDER BY 1;
-- 0.2.0: models are private to their owner until granted (model_privileges
-- tests grants); changed only by their owner
SELECT corgipile.predict('admins_model', ARRAY[1.0, 0.0]) IS NOT NULL AS can_predict;
SELECT corgipile.drop_model('admins_model');
UPDATE corgipile.models SET weights = '{0,0,0}' WHERE model_name = 'admins_model';
SELECT corgipile.drop_model('analysts_model');
-- nor forge someone else's
INSERT INTO corgipile.models (model_name, model, relation, label, features, n_features,
                              weights, params, history, owner)
VALUES ('forged', 'svm', 'points', 'label', '{features}', 2, '{1,1,1}', '{}', '[]', 'postgres');
RESET ROLE;
SELECT weights <> '{0,0,0}' AS unchanged FROM corgipile.models WHERE model_name = 'admins_model';

-- Tables with row-level security are refused rather than read around.
CREATE TABLE guarded AS SELECT * FROM points;
ALTER TABLE guarded ENABLE ROW LEVEL SECURITY;
CREATE POLICY only_positive ON guarded USING (label > 0);
GRANT SELECT ON guarded TO corgipile_analyst;
SET ROLE corgipile_analyst;
SELECT * FROM corgipile.train('guarded', 'svm');
RESET ROLE;

-- Temporary tables and materialized views work.
CREATE TEMP TABLE temp_points AS SELECT * FROM points;
SELECT count(*) FROM corgipile.train('temp_points', 'svm', model_name => 'from_temp', max_epoch_num => 1);
CREATE MATERIALIZED VIEW mv_points AS SELECT * FROM points;
SELECT count(*) FROM corgipile.train('mv_points', 'svm', model_name => 'from_mv', max_epoch_num => 1);
CREATE MATERIALIZED VIEW mv_empty AS SELECT * FROM points WITH NO DATA;
SELECT * FROM corgipile.train('mv_empty', 'svm');

-- Training inside a SQL function.
CREATE FUNCTION train_twice() RETURNS bigint LANGUAGE sql AS $$
  SELECT count(*) FROM corgipile.train('points', 'svm', model_name => 'in_function', max_epoch_num => 2, seed => 1)
$$;
SELECT train_twice();

-- A read-only transaction is refused before any work.
BEGIN READ ONLY;
SELECT * FROM corgipile.train('points', 'svm', model_name => 'read_only');
ROLLBACK;

-- A rescan (here of a lateral subquery, once per outer row) replays the
-- epochs instead of training and storing the model again.
EXPLAIN (COSTS OFF)
SELECT g, s.epoch FROM generate_series(1, 2) AS g,
     LATERAL (SELECT * FROM corgipile.train('points', 'svm', model_name => 'rescanned',
                                            max_epoch_num => 2, seed => 1) AS r
              WHERE r.epoch >= g OFFSET 0) AS s;
SELECT g, s.epoch FROM generate_series(1, 2) AS g,
     LATERAL (SELECT * FROM corgipile.train('points', 'svm', model_name => 'rescanned',
                                            max_epoch_num => 2, seed => 1) AS r
              WHERE r.epoch >= g OFFSET 0) AS s;
SELECT count(*) FROM corgipile.models WHERE model_name = 'rescanned';

-- Stopping early (LIMIT, a cursor closed early) stores no model.
SELECT epoch FROM corgipile.train('points', 'svm', model_name => 'cut_short', max_epoch_num => 5) LIMIT 1;
SELECT count(*) FROM corgipile.models WHERE model_name = 'cut_short';

DROP OWNED BY corgipile_analyst;
DROP ROLE corgipile_analyst;
