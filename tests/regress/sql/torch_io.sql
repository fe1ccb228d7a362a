-- corgipile.sizing() and corgipile.block_rows(): what corgipile.torch reads.

-- sizing: the engine's own rule for a relation, or for a given page count
CREATE TABLE tio AS
SELECT i AS id, i % 3 AS label, ARRAY[i, 0.5, -1]::float4[] AS features
FROM generate_series(1, 1000) AS i;
SELECT * FROM corgipile.sizing('tio');
SELECT * FROM corgipile.sizing('tio', '2', '4 pages');
-- buffer_size NULL is train()'s default: the whole table when it fits maintenance_work_mem
SELECT * FROM corgipile.sizing('tio', NULL, NULL);
SET maintenance_work_mem = '1MB';
SELECT * FROM corgipile.sizing('tio', NULL, NULL, 1000000);
RESET maintenance_work_mem;
SELECT * FROM corgipile.sizing('tio', NULL, '10%', 1000000);
SELECT * FROM corgipile.sizing('tio', NULL, '1GB', 10000000);
SELECT * FROM corgipile.sizing('tio', '1MB', '2TB', 5);
-- the clamps: a block of at most MaxBlockNumber pages, a buffer of at most 2^32-1 blocks
SELECT pages_per_block, blocks_per_buffer FROM corgipile.sizing('tio', '1000TB', '10%', 10);
SELECT pages_per_block, blocks_per_buffer FROM corgipile.sizing('tio', '1', '100000TB', 10);
-- bad sizes, as train() refuses them
SELECT * FROM corgipile.sizing('tio', '5%');
SELECT * FROM corgipile.sizing('tio', NULL, '0%');
SELECT * FROM corgipile.sizing('tio', NULL, '10%', -1);
SELECT * FROM corgipile.sizing(NULL);

-- block_rows: one row per block; float4 1.0 is 0000803f, float8 1.0 000000000000f03f
SELECT page, n_rows, dim, length(y) AS y_bytes, length(x) AS x_bytes, ids IS NULL AS no_ids
FROM corgipile.block_rows('tio', ARRAY[1, 0, 500]::int8[], 1);
SELECT n_rows, encode(substr(x, 1, 12), 'hex') AS x_row1, encode(substr(y, 1, 16), 'hex') AS y_rows12,
       encode(substr(ids, 1, 8), 'hex') AS id_row1
FROM corgipile.block_rows('tio', ARRAY[0]::int8[], 1, id_column => 'id');
SELECT encode(substr(x, 1, 24), 'hex') AS x_row1_float8
FROM corgipile.block_rows('tio', ARRAY[0]::int8[], 1, dtype => 'float8');
-- the rows the engine skips (NULL label, features or element) are skipped
CREATE TABLE tio_nulls (id int, label int, features float8[]);
INSERT INTO tio_nulls VALUES (1, 1, '{1,2}'), (2, NULL, '{1,2}'), (3, 1, NULL), (4, 1, '{1,NULL}'), (5, 0, '{3,4}');
SELECT n_rows, encode(ids, 'hex') FROM corgipile.block_rows('tio_nulls', ARRAY[0]::int8[], 1, id_column => 'id');
-- only visible rows: deleted ones are gone, in this transaction's snapshot
BEGIN;
DELETE FROM tio WHERE id <= 10;
SELECT sum(n_rows) FROM corgipile.block_rows('tio', ARRAY[0, 1, 2, 3, 4, 5]::int8[], 1);
ROLLBACK;
SELECT sum(n_rows) FROM corgipile.block_rows('tio', ARRAY[0, 1, 2, 3, 4, 5]::int8[], 1);
-- a column list and a stored model's encoding (standardize and one-hot)
CREATE TABLE tio_cats AS
SELECT i AS id, (i % 2 = 0) AS label, i::float8 AS num,
       (ARRAY['red', 'green', 'blue'])[1 + i % 3] AS color
FROM generate_series(1, 300) AS i;
-- a boolean label is sent as 0/1; text classes need a model
SELECT encode(substr(x, 1, 16), 'hex') AS x_row1, encode(substr(y, 1, 16), 'hex') AS labels01
FROM corgipile.block_rows('tio_cats', ARRAY[0]::int8[], 1, features => 'id, num', dtype => 'float8');
SELECT * FROM corgipile.block_rows('tio_cats', ARRAY[0]::int8[], 1, label => 'color', features => 'num');
SET client_min_messages = warning;
SELECT count(*) FROM corgipile.train('tio_cats', 'logistic', model_name => 'tio_m',
    features => 'num, color', seed => 1, max_epoch_num => 1);
RESET client_min_messages;
SELECT dim, encode(substr(x, 5, 12), 'hex') AS onehot_row1, encode(substr(y, 1, 16), 'hex') AS labels01
FROM corgipile.block_rows('tio_cats', ARRAY[0]::int8[], 1, model => 'tio_m');

-- clear errors
CREATE TABLE tio_nan (label int, features float8[]);
INSERT INTO tio_nan VALUES (1, '{1,NaN}');
SELECT n_rows FROM corgipile.block_rows('tio_nan', ARRAY[0]::int8[], 1);
SELECT * FROM corgipile.block_rows('tio_cats', ARRAY[0]::int8[], 1, features => 'num, color');
SELECT * FROM corgipile.block_rows('tio_cats', ARRAY[0]::int8[], 1, model => 'tio_m', features => 'num');
SELECT * FROM corgipile.block_rows('tio', NULL, 1);
SELECT * FROM corgipile.block_rows('tio', ARRAY[0]::int8[], 1, dtype => NULL);
SELECT * FROM corgipile.block_rows('tio', ARRAY[0]::int8[], 0);
SELECT * FROM corgipile.block_rows('tio', ARRAY[-1]::int8[], 1);
SELECT * FROM corgipile.block_rows('tio', ARRAY[NULL]::int8[], 1);
SELECT * FROM corgipile.block_rows('tio', ARRAY[0]::int8[], 1, dtype => 'int8');
SELECT * FROM corgipile.block_rows('tio', ARRAY[0]::int8[], 1, id_column => 'nope');
SELECT * FROM corgipile.block_rows('tio', ARRAY[0]::int8[], 1, id_column => 'features');
SELECT * FROM corgipile.block_rows('tio', ARRAY[0]::int8[], 1, features => 'nope');
SELECT * FROM corgipile.block_rows('tio', ARRAY[0]::int8[], 1, model => 'nope');
SELECT * FROM corgipile.block_rows('pg_class', ARRAY[0]::int8[], 1);
CREATE VIEW tio_v AS SELECT * FROM tio;
SELECT * FROM corgipile.block_rows('tio_v', ARRAY[0]::int8[], 1);
-- privileges and row-level security
CREATE ROLE tio_reader;
GRANT SELECT (id, label) ON tio TO tio_reader;
SET ROLE tio_reader;
SELECT * FROM corgipile.block_rows('tio', ARRAY[0]::int8[], 1);
RESET ROLE;
GRANT SELECT ON tio TO tio_reader;
ALTER TABLE tio ENABLE ROW LEVEL SECURITY;
CREATE POLICY tio_p ON tio TO tio_reader USING (id < 10);
SET ROLE tio_reader;
SELECT * FROM corgipile.block_rows('tio', ARRAY[0]::int8[], 1);
RESET ROLE;
DROP POLICY tio_p ON tio;
ALTER TABLE tio DISABLE ROW LEVEL SECURITY;
REVOKE ALL ON tio FROM tio_reader;
-- sizing() checks no privilege, as pg_relation_size() does: its answer is
-- a function of the main fork's page count (which that function, and
-- pg_class.relpages, give any role) and of the caller's own arguments
SET ROLE tio_reader;
SELECT s.n_pages = pg_relation_size('tio') / current_setting('block_size')::int8 AS as_pg_relation_size,
       s.pages_per_block, s.blocks_per_buffer
FROM corgipile.sizing('tio') AS s;
SELECT count(*) FROM tio;
RESET ROLE;
DROP ROLE tio_reader;
-- a grantee of a model who may not read its training relation does not get
-- rows encoded with it (they would reveal its means, stds and categories)
CREATE ROLE tio_grantee;
CREATE TABLE tio_cats_copy AS SELECT * FROM tio_cats;
GRANT SELECT ON tio_cats_copy TO tio_grantee;
SELECT corgipile.grant_model('tio_m', 'tio_grantee');
SET ROLE tio_grantee;
SELECT n_rows FROM corgipile.block_rows('tio_cats_copy', ARRAY[0]::int8[], 1, model => 'tio_m');
RESET ROLE;
GRANT SELECT ON tio_cats TO tio_grantee;
SET ROLE tio_grantee;
SELECT n_rows FROM corgipile.block_rows('tio_cats_copy', ARRAY[0]::int8[], 1, model => 'tio_m');
RESET ROLE;
SELECT corgipile.revoke_model('tio_m', 'tio_grantee');
REVOKE ALL ON tio_cats, tio_cats_copy FROM tio_grantee;
DROP TABLE tio_cats_copy;
DROP ROLE tio_grantee;
-- stopping early (LIMIT) ends the scan cleanly
SELECT n_rows FROM corgipile.block_rows('tio', ARRAY[0, 1, 2]::int8[], 1) LIMIT 1;
DROP VIEW tio_v;
DROP TABLE tio, tio_nulls, tio_cats;
SELECT corgipile.drop_model('tio_m');
