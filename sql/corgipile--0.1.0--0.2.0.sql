-- corgipile 0.1.0 -> 0.2.0: models become objects with owners and privileges.
--
-- There is no corgipile--0.2.0.sql: CREATE EXTENSION corgipile installs
-- 0.1.0 and applies this script, so a fresh install and an upgraded one are
-- built by the same statements.
--
-- What changes:
--   * The rows move to corgipile.model_store (the 0.1.0 table, renamed),
--     which no role but the extension's owner may read or write.  Our C
--     functions write it after checking the caller's rights.
--   * Owners are role OIDs (owner_id); 0.1.0's owner names are resolved
--     here, and names that no longer resolve leave the model orphaned
--     (owner_id 0), visible to superusers, who can drop or reassign it.
--   * A model carries the OID of the relation it was trained on (relid)
--     and the roles granted USAGE on it (usage_roles).
--   * corgipile.models is a security-barrier view: a role sees the models
--     it owns (or whose owner role it has the privileges of) or was granted
--     USAGE on, superusers all; relation, history and the dataset figures
--     in params only when it may SELECT that relation.

\echo Use "ALTER EXTENSION corgipile UPDATE TO '0.2.0'" to load this file. \quit

-- The 0.1.0 policies read the owner name column, which goes away.
DROP POLICY models_read ON corgipile.models;
DROP POLICY models_insert ON corgipile.models;
DROP POLICY models_update ON corgipile.models;
DROP POLICY models_delete ON corgipile.models;
ALTER TABLE corgipile.models DISABLE ROW LEVEL SECURITY;
REVOKE ALL ON corgipile.models FROM PUBLIC;

ALTER TABLE corgipile.models RENAME TO model_store;
ALTER INDEX corgipile.models_pkey RENAME TO model_store_pkey;

ALTER TABLE corgipile.model_store
    ADD COLUMN owner_id oid,
    ADD COLUMN relid oid,
    ADD COLUMN usage_roles oid[] NOT NULL DEFAULT '{}';

UPDATE corgipile.model_store AS s
   SET owner_id = COALESCE(
        (SELECT r.oid FROM pg_catalog.pg_roles AS r
          WHERE r.rolname OPERATOR(pg_catalog.=) s.owner), 0);

-- The relation was stored as a qualified, quoted name; resolve it where it
-- still names a table.  A name that does not parse (an imported model's
-- "(arrays)") leaves relid NULL.
DO $$
DECLARE
    r record;
    id oid;
BEGIN
    FOR r IN SELECT s.model_name, s.relation FROM corgipile.model_store AS s LOOP
        BEGIN
            id := pg_catalog.to_regclass(r.relation);
        EXCEPTION WHEN OTHERS THEN
            id := NULL;
        END;
        UPDATE corgipile.model_store AS s SET relid = id
         WHERE s.model_name OPERATOR(pg_catalog.=) r.model_name;
    END LOOP;
END
$$;

ALTER TABLE corgipile.model_store
    DROP COLUMN owner,
    ALTER COLUMN owner_id SET NOT NULL;

-- Names are at most 255 bytes.  NOT VALID: a 0.1.0 row with a longer name
-- stays usable; new rows are checked.
ALTER TABLE corgipile.model_store
    ADD CONSTRAINT model_store_model_name_check
    CHECK (pg_catalog.octet_length(model_name) OPERATOR(pg_catalog.<=) 255
           AND model_name OPERATOR(pg_catalog.<>) '') NOT VALID;

COMMENT ON TABLE corgipile.model_store IS 'Storage of corgipile models; read them through the view corgipile.models, write them with corgipile''s functions.';
COMMENT ON COLUMN corgipile.model_store.owner_id IS 'OID of the owning role; 0 when the owner was dropped (orphaned).';
COMMENT ON COLUMN corgipile.model_store.relid IS 'OID of the relation the model was trained on, or NULL.';
COMMENT ON COLUMN corgipile.model_store.usage_roles IS 'Roles granted USAGE (predict, evaluate) with corgipile.grant_model().';

-- "Readable" below: the role may SELECT the training relation, or, when
-- that relation is gone or unknown (relid NULL), it has the owner's
-- privileges.  The expression is repeated rather than joined in, so that
-- the view stays a single-table view: a superuser may still DELETE through
-- it as in 0.1.0, and other roles get "permission denied".
CREATE VIEW corgipile.models WITH (security_barrier) AS
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
                 '{n_blocks,pages_per_block,blocks_per_buffer,window_rows,reservoir_rows,validation}'::text[]
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
       s.usage_roles::pg_catalog.regrole[] AS usage_roles
  FROM corgipile.model_store AS s
 WHERE pg_catalog.pg_has_role(s.owner_id, 'USAGE')
    OR EXISTS (SELECT 1 FROM pg_catalog.unnest(s.usage_roles) AS g(role)
                WHERE pg_catalog.pg_has_role(g.role, 'USAGE'));

COMMENT ON VIEW corgipile.models IS 'The models the current role owns or was granted USAGE on (superusers: all); relation, history and dataset figures only where the role may read the training relation.';
GRANT SELECT ON corgipile.models TO PUBLIC;

-- The functions that write the storage.  Each checks the caller's rights
-- (GetUserId()) and then writes as the storage's owner.

CREATE OR REPLACE FUNCTION corgipile.drop_model(model_name text)
RETURNS void
AS 'MODULE_PATHNAME', 'corgipile_drop_model'
LANGUAGE C STRICT VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION corgipile.drop_model(text) IS 'Drop a model; its owner (or a member of the owner role) or a superuser.';

CREATE FUNCTION corgipile.rename_model(model_name text, new_name text)
RETURNS void
AS 'MODULE_PATHNAME', 'corgipile_rename_model'
LANGUAGE C STRICT VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION corgipile.rename_model(text, text) IS 'Rename a model; its owner or a superuser.';

CREATE FUNCTION corgipile.grant_model(model_name text, role regrole)
RETURNS void
AS 'MODULE_PATHNAME', 'corgipile_grant_model'
LANGUAGE C STRICT VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION corgipile.grant_model(text, regrole) IS 'Grant USAGE on a model (predict, evaluate, see it in corgipile.models) to a role; its owner or a superuser.';

CREATE FUNCTION corgipile.revoke_model(model_name text, role regrole)
RETURNS void
AS 'MODULE_PATHNAME', 'corgipile_revoke_model'
LANGUAGE C STRICT VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION corgipile.revoke_model(text, regrole) IS 'Revoke USAGE on a model from a role; its owner or a superuser.';

-- regrole accepts a number, so an orphaned owner (a dropped role) is
-- named by its OID: reassign_models('16384', 'alice').
CREATE FUNCTION corgipile.reassign_models(old_role regrole, new_role regrole)
RETURNS bigint
AS 'MODULE_PATHNAME', 'corgipile_reassign_models'
LANGUAGE C STRICT VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION corgipile.reassign_models(regrole, regrole) IS 'Give every model of old_role (which may be the OID of a dropped role) to new_role; superusers, or old_role itself; returns the models moved.';

CREATE FUNCTION corgipile.import_model(
    model_name      text,
    model           text,
    relation        text,
    label           text,
    features        text[],
    feature_indices text,
    n_features      integer,
    weights         float8[],
    classes         jsonb,
    params          jsonb,
    history         jsonb,
    created_at      timestamptz DEFAULT NULL)
RETURNS void
AS 'MODULE_PATHNAME', 'corgipile_import_model'
-- not STRICT: feature_indices, classes and created_at may be NULL
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION corgipile.import_model IS 'Store a model exported from another database; the row is validated as predict() would load it and is owned by the caller.';

CREATE FUNCTION corgipile.annotate_model(model_name text, relation text, notes jsonb DEFAULT NULL)
RETURNS void
AS 'MODULE_PATHNAME', 'corgipile_annotate_model'
-- not STRICT: a NULL relation or notes leaves that part alone
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION corgipile.annotate_model IS 'Record where a model''s training rows came from (relation text shown, new params keys); its owner or a superuser.';

-- train() gains warm_start (a model to start from: its weights, and for
-- shuffle => 'grab' its stored block order).  A new parameter changes the
-- signature, so the function is dropped and created again.
DROP FUNCTION corgipile.train(regclass, text, text, text, text, text, integer, text,
                              float8, float8, integer, integer, float8, text, text,
                              bigint, boolean, regclass, float8, float8, integer);

CREATE FUNCTION corgipile.train(
    relation        regclass,
    model           text,
    model_name      text DEFAULT NULL,
    label           text DEFAULT 'label',
    features        text DEFAULT 'features',
    feature_indices text DEFAULT NULL,
    n_features      integer DEFAULT NULL,
    shuffle         text DEFAULT 'corgipile',
    learning_rate   float8 DEFAULT 0.1,
    decay           float8 DEFAULT 0.95,
    max_epoch_num   integer DEFAULT 20,
    batch_size      integer DEFAULT 1,
    l2              float8 DEFAULT 0,
    block_size      text DEFAULT NULL,
    buffer_size     text DEFAULT '10%',
    seed            bigint DEFAULT NULL,
    double_buffer   boolean DEFAULT true,
    validation      regclass DEFAULT NULL,
    l1              float8 DEFAULT 0,
    tolerance       float8 DEFAULT NULL,
    n_iter_no_change integer DEFAULT 5,
    warm_start      text DEFAULT NULL)
RETURNS TABLE (
    model_name       text,
    epoch            integer,
    tuples           bigint,
    loss             float8,
    score            float8,
    validation_score float8,
    seconds          float8)
AS 'MODULE_PATHNAME', 'corgipile_train'
-- not STRICT: NULL means "the default" for model_name, n_features,
-- feature_indices, block_size, seed, validation, tolerance and warm_start;
-- other NULLs are errors.
LANGUAGE C VOLATILE PARALLEL UNSAFE
ROWS 20
SUPPORT corgipile.train_support;

COMMENT ON FUNCTION corgipile.train IS 'Train a model with SGD over a table; one row per epoch. The model is stored in corgipile.models. warm_start: start from a stored model''s weights (and, for shuffle => ''grab'', its block order).';
