-- A model's copy as every node of a Citus cluster reads it (model_copy.c):
-- model_hash() and apply_model_copy() on a server without Citus, where
-- nothing is copied anywhere.
SELECT corgipile.import_model('mc_a', 'linear', 'elsewhere.t', 'y', ARRAY['a','b'], NULL, 2,
       ARRAY[0.30000000000000004, 1e-300, -2.5]::float8[], NULL, '{"layout": "columns"}', '[]',
       '2024-05-01 12:00:00+00');

-- the hash depends on the content only: the session's settings do not move it
SELECT corgipile.model_hash('mc_a') AS h \gset
SET extra_float_digits = 0;
SET TimeZone = 'Asia/Tokyo';
SELECT corgipile.model_hash('mc_a') = :'h' AS same_hash;
RESET extra_float_digits;
RESET TimeZone;

-- a copy written back under another name: the same model, to the bit
SELECT corgipile.apply_model_copy('mc_b', jsonb_build_object(
         'model', model, 'relation', relation, 'label', label, 'features', to_jsonb(features),
         'feature_indices', feature_indices, 'n_features', n_features, 'weights', to_jsonb(weights),
         'classes', classes, 'params', params, 'history', history,
         'created_at', to_jsonb(created_at AT TIME ZONE 'UTC'), 'owner', owner,
         'usage_roles', to_jsonb(usage_roles::text[]), 'trained_on', NULL, 'preprocess', preprocess))
  FROM corgipile.models WHERE model_name = 'mc_a';
SELECT corgipile.model_hash('mc_b') = :'h' AS same_hash,
       (SELECT weights FROM corgipile.models WHERE model_name = 'mc_b') =
       (SELECT weights FROM corgipile.models WHERE model_name = 'mc_a') AS same_weights;

-- a NULL copy drops the model
SELECT corgipile.apply_model_copy('mc_b', NULL);
SELECT count(*) FROM corgipile.models WHERE model_name = 'mc_b';

-- bad copies are errors that name the problem
SELECT corgipile.apply_model_copy('mc_c', '[]');
SELECT corgipile.apply_model_copy('mc_c', '{"owner": 5, "usage_roles": []}');
SELECT corgipile.apply_model_copy('mc_c', '{"owner": "no_such_role_mc", "usage_roles": []}');
SELECT corgipile.apply_model_copy('mc_c', '{"usage_roles": "x"}');
SELECT corgipile.model_hash('mc_nosuch');

-- the cluster functions need a Citus coordinator
SELECT * FROM corgipile.check_model_copies();
SELECT * FROM corgipile.recover_model_copies();
SELECT corgipile.copy_models();

-- a role may not replace or drop another's model through a copy
CREATE ROLE mc_role;
SET ROLE mc_role;
SELECT corgipile.apply_model_copy('mc_a', NULL);
RESET ROLE;
DROP ROLE mc_role;
SELECT corgipile.drop_model('mc_a');
