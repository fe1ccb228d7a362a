-- The database scripts/sqlsmith.sh lets sqlsmith loose on: the extension,
-- a few tables of every feature layout, trained models, and views and
-- wrappers that put corgipile's functions where sqlsmith's random queries
-- reach them.  Run as a superuser; the psql variable fuzzer names the
-- unprivileged role that owns the objects and that sqlsmith runs as.
\set ON_ERROR_STOP on

CREATE EXTENSION corgipile;
GRANT CREATE, USAGE ON SCHEMA public TO :"fuzzer";
SET ROLE :"fuzzer";

-- dense, binary labels in {-1, 1}
CREATE TABLE public.t_dense AS
SELECT g AS id,
       ARRAY[(g % 7)::float8 / 7, (g % 11)::float8 / 11, (g % 2) * 2 - 1 + (g % 5)::float8 / 10] AS features,
       (g % 2) * 2 - 1 AS label
  FROM pg_catalog.generate_series(1, 2000) AS g;

-- sparse: indices and values
CREATE TABLE public.t_sparse AS
SELECT g AS id,
       ARRAY[g % 5, 5 + g % 3]::int4[] AS idx,
       ARRAY[1.0, (g % 2)::float8]::float8[] AS vals,
       (g % 2) AS label
  FROM pg_catalog.generate_series(1, 1000) AS g;

-- columns, boolean labels, a dropped column and one added with a default
CREATE TABLE public.t_cols (id int, junk text, a float8, b real, c int, label boolean);
INSERT INTO public.t_cols
SELECT g, pg_catalog.repeat('x', g % 50), g % 3, (g % 5)::real / 5, g % 2, g % 2 = 0
  FROM pg_catalog.generate_series(1, 1000) AS g;
ALTER TABLE public.t_cols DROP COLUMN junk;
ALTER TABLE public.t_cols ADD COLUMN d float8 NOT NULL DEFAULT 0.5;

-- multiclass, text labels, float4 features
CREATE TABLE public.t_multi AS
SELECT g AS id,
       ARRAY[(g % 3)::real, (g % 4)::real, 1]::float4[] AS features,
       ('class_' || (g % 3)) AS label
  FROM pg_catalog.generate_series(1, 900) AS g;

-- regression target
CREATE TABLE public.t_reg AS
SELECT g AS id, ARRAY[(g % 10)::float8, (g % 3)::float8] AS features,
       (g % 10) * 2.0 + (g % 3) AS label
  FROM pg_catalog.generate_series(1, 500) AS g;

-- odd relations: empty, NULL-heavy, TOASTed arrays, partitioned, views,
-- a materialized view, an unlogged table
CREATE TABLE public.t_empty (id int, features float8[], label int);
CREATE TABLE public.t_nulls AS
SELECT g AS id,
       CASE WHEN g % 3 = 0 THEN NULL ELSE ARRAY[g, NULL, 1]::float8[] END AS features,
       CASE WHEN g % 4 = 0 THEN NULL ELSE (g % 2) END AS label
  FROM pg_catalog.generate_series(1, 300) AS g;
CREATE TABLE public.t_toast AS
SELECT g AS id,
       ARRAY(SELECT ((g * i) % 13)::float8 FROM pg_catalog.generate_series(1, 3000) AS i) AS features,
       (g % 2) AS label
  FROM pg_catalog.generate_series(1, 40) AS g;
CREATE TABLE public.t_part (id int, features float8[], label int) PARTITION BY RANGE (id);
CREATE TABLE public.t_part_1 PARTITION OF public.t_part FOR VALUES FROM (0) TO (500);
CREATE TABLE public.t_part_2 PARTITION OF public.t_part FOR VALUES FROM (500) TO (1000);
INSERT INTO public.t_part SELECT id, features, label FROM public.t_dense WHERE id < 1000;
CREATE MATERIALIZED VIEW public.mv_dense AS SELECT * FROM public.t_dense WHERE id <= 500;
CREATE UNLOGGED TABLE public.t_unlogged AS SELECT * FROM public.t_dense WHERE id <= 300;

-- trained models, one per kind and layout
SELECT pg_catalog.count(*) FROM corgipile.train('public.t_dense', 'svm', model_name => 'm_svm', max_epoch_num => 3, seed => 1);
SELECT pg_catalog.count(*) FROM corgipile.train('public.t_dense', 'logistic', model_name => 'm_lr', max_epoch_num => 3, seed => 1);
SELECT pg_catalog.count(*) FROM corgipile.train('public.t_sparse', 'logistic', model_name => 'm_sparse',
    features => 'vals', feature_indices => 'idx', max_epoch_num => 2, seed => 1);
SELECT pg_catalog.count(*) FROM corgipile.train('public.t_cols', 'svm', model_name => 'm_cols',
    features => 'a, b, c, d', max_epoch_num => 2, seed => 1);
SELECT pg_catalog.count(*) FROM corgipile.train('public.t_multi', 'softmax', model_name => 'm_soft', max_epoch_num => 2, seed => 1);
SELECT pg_catalog.count(*) FROM corgipile.train('public.t_reg', 'linear', model_name => 'm_reg',
    learning_rate => 0.001, max_epoch_num => 2, seed => 1);

-- A table of model names and feature vectors: sqlsmith joins and
-- subselects it into the arguments of the functions below.
CREATE TABLE public.model_inputs (model_name text, features float8[], idx int4[], f4 float4[], i4 int4[], rel regclass);
INSERT INTO public.model_inputs VALUES
    ('m_svm', '{0.1,0.2,0.3}', NULL, '{1,2,3}', '{1,2,3}', 'public.t_dense'),
    ('m_lr', '{1,2}', '{0,1}', '{1,2}', '{1}', 'public.t_dense'),
    ('m_sparse', '{1,0}', '{0,7}', '{1,0}', '{0,7}', 'public.t_sparse'),
    ('m_cols', '{1,2,3,4}', '{0,1,2,3}', '{1,2,3,4}', '{1,2,3,4}', 'public.t_cols'),
    ('m_soft', '{1,2,1}', '{0,1,2}', '{1,2,1}', '{1,2,1}', 'public.t_multi'),
    ('m_reg', '{5,1}', NULL, '{5,1}', '{5,1}', 'public.t_reg'),
    ('no_such_model', '{}', '{}', '{}', '{}', 'public.t_empty'),
    (NULL, NULL, NULL, NULL, NULL, NULL);

-- Views whose WHERE clause calls our functions (so they run whatever
-- columns a query keeps), over every layout.
CREATE VIEW public.v_predict AS
SELECT t.id, t.features, t.label,
       corgipile.predict('m_svm', t.features) AS score,
       corgipile.predict_class('m_lr', t.features) AS class,
       corgipile.predict_proba('m_lr', t.features) AS proba
  FROM public.t_dense AS t
 WHERE corgipile.predict('m_svm', t.features) IS NOT NULL;
CREATE VIEW public.v_predict_sparse AS
SELECT t.id, t.idx, t.vals,
       corgipile.predict('m_sparse', t.idx, t.vals) AS score,
       corgipile.predict_proba('m_sparse', t.idx, t.vals) AS proba
  FROM public.t_sparse AS t
 WHERE corgipile.predict_class('m_sparse', t.idx, t.vals) IS NOT NULL;
CREATE VIEW public.v_predict_row AS
SELECT t.*, corgipile.predict('m_cols', t) AS score, corgipile.predict_class('m_cols', t) AS class
  FROM public.t_cols AS t
 WHERE corgipile.predict_class('m_cols', t) IS NOT NULL;
CREATE VIEW public.v_predict_row_proba AS
SELECT s.*, corgipile.predict_proba('m_lr', s) AS proba
  FROM (SELECT t.id, t.features FROM public.t_dense AS t) AS s
 WHERE corgipile.predict('m_lr', s) IS NOT NULL;
CREATE VIEW public.v_predict_soft AS
SELECT t.id, t.label, corgipile.predict_class('m_soft', t.features) AS class,
       corgipile.predict_proba('m_soft', t.features) AS proba
  FROM public.t_multi AS t
 WHERE corgipile.predict('m_soft', t.features) IS NOT NULL;
CREATE VIEW public.v_predict_inputs AS
SELECT i.*, corgipile.predict(i.model_name, i.features) AS p_dense,
       corgipile.predict_class(i.model_name, i.f4) AS c_f4,
       corgipile.predict_proba(i.model_name, i.idx, i.features) AS p_sparse
  FROM public.model_inputs AS i
 WHERE corgipile.predict(i.model_name, i.i4) IS NOT NULL OR i.rel IS NOT NULL;
CREATE VIEW public.v_evaluate AS
SELECT m.model_name, e.metric, e.value
  FROM (VALUES ('m_svm', 'public.t_dense'::regclass), ('m_sparse', 'public.t_sparse'),
               ('m_cols', 'public.t_cols'), ('m_soft', 'public.t_multi'),
               ('m_reg', 'public.t_reg'), ('m_svm', 'public.t_nulls')) AS m(model_name, rel),
       LATERAL corgipile.evaluate(m.model_name, m.rel) AS e;
CREATE VIEW public.v_shuffled AS
SELECT s.ctid, s.id FROM corgipile.shuffled_scan('public.t_cols', seed => 1, block_size => '1') AS s;
CREATE VIEW public.v_train AS
SELECT r.* FROM corgipile.train('public.t_unlogged', 'svm', max_epoch_num => 1, seed => 1,
                                buffer_size => '1') AS r;
CREATE VIEW public.models_view AS SELECT * FROM corgipile.models;

-- Wrappers with concrete argument types, which sqlsmith's function picker
-- fills with random values of those types.
CREATE FUNCTION public.cp_predict(m text, f float8[]) RETURNS float8
    LANGUAGE sql STABLE AS 'SELECT corgipile.predict(m, f)';
CREATE FUNCTION public.cp_predict_int(m text, f int4[]) RETURNS text
    LANGUAGE sql STABLE AS 'SELECT corgipile.predict_class(m, f)';
CREATE FUNCTION public.cp_predict_sparse(m text, i int4[], f float4[]) RETURNS float8[]
    LANGUAGE sql STABLE AS 'SELECT corgipile.predict_proba(m, i, f)';
CREATE FUNCTION public.cp_predict_numeric(m text, f numeric[]) RETURNS float8
    LANGUAGE sql STABLE AS 'SELECT corgipile.predict(m, f)';
CREATE FUNCTION public.cp_evaluate(m text, r regclass) RETURNS float8
    LANGUAGE sql STABLE AS 'SELECT pg_catalog.sum(e.value) FROM corgipile.evaluate(m, r) AS e';
CREATE FUNCTION public.cp_train(r regclass, kind text, lr float8, epochs int4, shuffle text,
                                 block text, buffer text, seed int8) RETURNS float8
    LANGUAGE sql VOLATILE AS
$$SELECT pg_catalog.min(t.loss) FROM corgipile.train(r, kind, learning_rate => lr,
    max_epoch_num => epochs, shuffle => shuffle, block_size => block, buffer_size => buffer,
    seed => seed) AS t$$;
CREATE FUNCTION public.cp_shuffle_table(r regclass, dst text, seed int8) RETURNS int8
    LANGUAGE sql VOLATILE AS 'SELECT corgipile.shuffle_table(r, dst, seed)';
CREATE FUNCTION public.cp_shuffled_scan(r regclass, shuffle text, seed int8) RETURNS int8
    LANGUAGE sql VOLATILE AS 'SELECT pg_catalog.count(*) FROM corgipile.shuffled_scan(r, shuffle, seed => seed)';
CREATE FUNCTION public.cp_drop_model(m text) RETURNS void
    LANGUAGE sql VOLATILE AS 'SELECT corgipile.drop_model(m)';
-- what corgipile.torch reads: the engine's sizing and whole blocks of rows
CREATE FUNCTION public.cp_sizing(r regclass, block text, buffer text, pages int8) RETURNS int8
    LANGUAGE sql STABLE AS
$$SELECT s.n_blocks OPERATOR(pg_catalog.*) s.blocks_per_buffer
    FROM corgipile.sizing(r, block, buffer, pages) AS s$$;
CREATE FUNCTION public.cp_block_rows(r regclass, first_pages int8[], ppb int4, model text,
                                      dtype text) RETURNS int8
    LANGUAGE sql STABLE AS
$$SELECT pg_catalog.sum(b.n_rows::int8 OPERATOR(pg_catalog.+) pg_catalog.length(b.x))
    FROM corgipile.block_rows(r, first_pages, ppb, model => model, dtype => dtype) AS b$$;
CREATE VIEW public.v_block_rows AS
SELECT b.* FROM corgipile.block_rows('public.t_dense', ARRAY[0, 1, 2]::int8[], 1) AS b;

-- the rule of corgipile.models, with random relation and role OIDs
CREATE FUNCTION public.cp_may_see(r oid, o oid) RETURNS boolean
    LANGUAGE sql STABLE AS 'SELECT corgipile.may_see_model_data(r, o)';

RESET ROLE;
-- A model of another role, with a category column, granted to the fuzzer,
-- who may not read its training table: the models view shows it the
-- function only, and predict takes only its row form.
CREATE TABLE public.t_private AS
SELECT g AS id, (g % 3 = 0) AS label, (g % 17)::float8 / 3 AS x,
       CASE WHEN g % 9 = 0 THEN NULL ELSE (ARRAY['p', 'q', 'r'])[1 + g % 3] END AS color
  FROM pg_catalog.generate_series(1, 400) AS g;
SELECT pg_catalog.count(*) FROM corgipile.train('public.t_private', 'logistic', model_name => 'm_granted',
    features => 'x, color', max_epoch_num => 2, seed => 1);
SELECT corgipile.grant_model('m_granted', :'fuzzer');
CREATE TABLE public.t_granted_rows AS SELECT id, label, x, color FROM public.t_private WHERE id <= 100;
UPDATE public.t_granted_rows SET color = 's' WHERE id % 10 = 1;
ALTER TABLE public.t_granted_rows OWNER TO :"fuzzer";
SET ROLE :"fuzzer";
INSERT INTO public.model_inputs VALUES
    ('m_granted', '{1,0,1,0}', '{0,2}', '{1,0,1,0}', '{1,0}', 'public.t_granted_rows');
CREATE VIEW public.v_predict_granted AS
SELECT t.id, t.x, t.color
  FROM public.t_granted_rows AS t
 WHERE corgipile.predict_proba('m_granted', t) IS NOT NULL
   AND corgipile.predict_class('m_granted', t) IS NOT NULL;
RESET ROLE;
ANALYZE;
