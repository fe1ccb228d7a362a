-- corgipile 0.3.0 -> 0.4.0
--
-- What changes (each section below names its part):
--   * Grantees: a role dropped since it was granted USAGE on a model no
--     longer shows in corgipile.models.usage_roles, and the stored lists
--     are swept of such roles now (grant_model and revoke_model sweep
--     them on every change from now on).

\echo Use "ALTER EXTENSION corgipile UPDATE TO '0.4.0'" to load this file. \quit

-- Grantees ---------------------------------------------------------------
-- DROP ROLE cannot see model rows (they are not objects PostgreSQL tracks
-- dependencies of), so a dropped grantee's OID stayed in usage_roles.
UPDATE corgipile.model_store AS s
   SET usage_roles = ARRAY(SELECT g.r
                             FROM pg_catalog.unnest(s.usage_roles) WITH ORDINALITY AS g(r, n)
                            WHERE EXISTS (SELECT 1 FROM pg_catalog.pg_roles AS a
                                           WHERE a.oid OPERATOR(pg_catalog.=) g.r)
                            ORDER BY g.n)
 WHERE NOT (s.usage_roles OPERATOR(pg_catalog.<@)
            ARRAY(SELECT a.oid FROM pg_catalog.pg_roles AS a));

CREATE OR REPLACE VIEW corgipile.models WITH (security_barrier) AS
SELECT s.model_name,
       s.model,
       CASE WHEN COALESCE(pg_catalog.has_table_privilege(s.relid, 'SELECT'),
                     pg_catalog.pg_has_role(s.owner_id, 'USAGE'))
            THEN s.relation END AS relation,
       s.label,
       s.features,
       s.feature_indices,
       s.n_features,
       s.weights,
       s.classes,
       CASE WHEN COALESCE(pg_catalog.has_table_privilege(s.relid, 'SELECT'),
                     pg_catalog.pg_has_role(s.owner_id, 'USAGE'))
            THEN s.params
            -- the figures of params that describe the training relation
            ELSE s.params OPERATOR(pg_catalog.-)
                 '{n_blocks,pages_per_block,blocks_per_buffer,window_rows,reservoir_rows,validation,holdout}'::text[]
       END AS params,
       CASE WHEN COALESCE(pg_catalog.has_table_privilege(s.relid, 'SELECT'),
                     pg_catalog.pg_has_role(s.owner_id, 'USAGE'))
            THEN s.history END AS history,
       s.created_at,
       pg_catalog.pg_get_userbyid(s.owner_id) AS owner,
       s.owner_id,
       CASE WHEN COALESCE(pg_catalog.has_table_privilege(s.relid, 'SELECT'),
                     pg_catalog.pg_has_role(s.owner_id, 'USAGE'))
            THEN s.relid END AS relid,
       -- roles dropped since they were granted leave their OIDs behind
       ARRAY(SELECT g.r::pg_catalog.regrole
               FROM pg_catalog.unnest(s.usage_roles) WITH ORDINALITY AS g(r, n)
              WHERE EXISTS (SELECT 1 FROM pg_catalog.pg_roles AS a
                             WHERE a.oid OPERATOR(pg_catalog.=) g.r)
              ORDER BY g.n) AS usage_roles,
       -- statistics and category values of the training relation's rows
       CASE WHEN COALESCE(pg_catalog.has_table_privilege(s.relid, 'SELECT'),
                     pg_catalog.pg_has_role(s.owner_id, 'USAGE'))
            THEN s.preprocess END AS preprocess
  FROM corgipile.model_store AS s
 WHERE pg_catalog.pg_has_role(s.owner_id, 'USAGE')
    OR EXISTS (SELECT 1 FROM pg_catalog.unnest(s.usage_roles) AS g(role)
                WHERE pg_catalog.pg_has_role(g.role, 'USAGE'));

COMMENT ON VIEW corgipile.models IS 'The models the current role owns or was granted USAGE on (superusers: all); relation, history, preprocessing and dataset figures only where the role may read the training relation.';
GRANT SELECT ON corgipile.models TO PUBLIC;
