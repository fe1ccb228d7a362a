-- Every bad input gets an ERROR that names the problem, before any work
-- where possible, and the server stays up.
SET corgipile.progress = off;
\set VERBOSITY default

-- parameters
SELECT * FROM corgipile.train('points', 'forest');
SELECT * FROM corgipile.train('points', NULL);
SELECT * FROM corgipile.train(NULL, 'svm');
SELECT * FROM corgipile.train('points', 'svm', shuffle => 'random');
SELECT * FROM corgipile.train('points', 'svm', learning_rate => 0);
SELECT * FROM corgipile.train('points', 'svm', learning_rate => -0.1);
SELECT * FROM corgipile.train('points', 'svm', learning_rate => 'NaN');
SELECT * FROM corgipile.train('points', 'svm', learning_rate => 'Infinity');
SELECT * FROM corgipile.train('points', 'svm', decay => 1.5);
SELECT * FROM corgipile.train('points', 'svm', max_epoch_num => 0);
SELECT * FROM corgipile.train('points', 'svm', batch_size => -1);
SELECT * FROM corgipile.train('points', 'svm', l2 => -1);
SELECT * FROM corgipile.train('points', 'svm', n_features => 0);
SELECT * FROM corgipile.train('points', 'svm', block_size => '0');
SELECT * FROM corgipile.train('points', 'svm', block_size => 'big');
SELECT * FROM corgipile.train('points', 'svm', block_size => '10%');
SELECT * FROM corgipile.train('points', 'svm', buffer_size => '150%');
SELECT * FROM corgipile.train('points', 'svm', buffer_size => '0%');
SELECT * FROM corgipile.train('points', 'svm', buffer_size => '-5MB');
SELECT * FROM corgipile.train('points', 'svm', buffer_size => '1.5');
SELECT * FROM corgipile.train('points', 'svm', double_buffer => NULL);
SELECT * FROM corgipile.train('points', 'svm', model_name => '');
SELECT * FROM corgipile.train('points', 'svm', learning_rat => 0.1);

-- relations
SELECT * FROM corgipile.train('no_such_table', 'svm');
CREATE VIEW points_view AS SELECT * FROM points;
SELECT * FROM corgipile.train('points_view', 'svm');
CREATE TABLE parted (label int, features float8[]) PARTITION BY RANGE (label);
SELECT * FROM corgipile.train('parted', 'svm');
CREATE SEQUENCE a_sequence;
SELECT * FROM corgipile.train('a_sequence', 'svm');
SELECT * FROM corgipile.train('points', 'svm', validation => 'points_view');

-- columns and types
SELECT * FROM corgipile.train('points', 'svm', label => 'missing');
SELECT * FROM corgipile.train('points', 'svm', features => 'missing');
SELECT * FROM corgipile.train('points', 'svm', features => 'x1,,x2');
SELECT * FROM corgipile.train('points', 'svm', label => 'id, label');
CREATE TABLE typed AS SELECT 'yes'::text AS label, ARRAY['a']::text[] AS features,
                             'a'::text AS word, 1 AS num, ARRAY[1.5]::float8[] AS arr;
SELECT * FROM corgipile.train('typed', 'svm');
SELECT * FROM corgipile.train('typed', 'svm', label => 'num');
SELECT * FROM corgipile.train('typed', 'svm', label => 'num', features => 'num, word');
SELECT * FROM corgipile.train('typed', 'svm', label => 'num', features => 'num, arr');
SELECT * FROM corgipile.train('typed', 'svm', label => 'num', features => 'arr',
                              feature_indices => 'word');
SELECT * FROM corgipile.train('points', 'svm', n_features => 3, features => 'id');

-- data
CREATE TABLE ragged AS SELECT * FROM points;
UPDATE ragged SET features = ARRAY[1, 2, 3] WHERE id = 1500;
SELECT * FROM corgipile.train('ragged', 'svm', shuffle => 'no_shuffle');
SELECT * FROM corgipile.train('points', 'svm', n_features => 3, shuffle => 'no_shuffle');
CREATE TABLE two_d AS SELECT 1 AS label, ARRAY[[1.0, 2.0], [3.0, 4.0]]::float8[] AS features;
SELECT * FROM corgipile.train('two_d', 'svm');
CREATE TABLE empty_arrays AS SELECT 1 AS label, '{}'::float8[] AS features;
SELECT * FROM corgipile.train('empty_arrays', 'svm');
CREATE TABLE nans AS SELECT * FROM points;
UPDATE nans SET features = ARRAY['NaN', 1]::float8[] WHERE id = 7;
SELECT * FROM corgipile.train('nans', 'svm', shuffle => 'no_shuffle');
UPDATE nans SET features = ARRAY['-Infinity', 1]::float8[] WHERE id = 7;
SELECT * FROM corgipile.train('nans', 'svm', shuffle => 'no_shuffle', double_buffer => false);
CREATE TABLE bad_labels AS SELECT * FROM points;
UPDATE bad_labels SET label = 2 WHERE id = 3;
SELECT * FROM corgipile.train('bad_labels', 'svm', shuffle => 'no_shuffle');
UPDATE bad_labels SET label = 0 WHERE id = 3;
SELECT * FROM corgipile.train('bad_labels', 'logistic', shuffle => 'no_shuffle');
CREATE TABLE sparse_bad AS SELECT 1 AS label, ARRAY[0, 5] AS idx, ARRAY[1.0, 2.0]::float8[] AS vals;
SELECT * FROM corgipile.train('sparse_bad', 'svm', features => 'vals', feature_indices => 'idx',
                              n_features => 3);
UPDATE sparse_bad SET idx = ARRAY[-1, 0];
SELECT * FROM corgipile.train('sparse_bad', 'svm', features => 'vals', feature_indices => 'idx');
UPDATE sparse_bad SET idx = ARRAY[0];
SELECT * FROM corgipile.train('sparse_bad', 'svm', features => 'vals', feature_indices => 'idx');
CREATE TABLE all_null AS SELECT NULL::int AS label, features FROM points;
SELECT * FROM corgipile.train('all_null', 'svm');
CREATE TABLE no_rows (label int, features float8[]);
SELECT * FROM corgipile.train('no_rows', 'svm');
CREATE TABLE huge AS SELECT label, ARRAY[features[1] * 1e300, features[2]] AS features FROM points;
SELECT * FROM corgipile.train('huge', 'svm', model_name => 'diverges', learning_rate => 10);

-- a model too large to allocate, refused before any page is read: given,
-- or inferred from the largest feature index (it wrapped an int before)
SELECT * FROM corgipile.train('sparse_bad', 'svm', features => 'vals', feature_indices => 'idx',
                              n_features => 2147483647);
CREATE TABLE sparse_classes AS
SELECT i % 3 AS label, ARRAY[i % 5] AS idx, ARRAY[1.0]::float8[] AS vals
FROM generate_series(1, 30) AS i;
SELECT * FROM corgipile.train('sparse_classes', 'softmax', features => 'vals',
                              feature_indices => 'idx', n_features => 1431655765);
INSERT INTO sparse_classes VALUES (1, ARRAY[1431655764], ARRAY[1.0]);
SELECT * FROM corgipile.train('sparse_classes', 'softmax', features => 'vals',
                              feature_indices => 'idx');
-- the label is not a feature
SELECT * FROM corgipile.train('points_cols', 'svm', features => 'x1, label');
SELECT * FROM corgipile.train('points', 'svm', label => 'features', features => 'features');
CREATE TABLE label_idx AS SELECT 1 AS label, ARRAY[0] AS idx, ARRAY[1.0]::float8[] AS vals;
SELECT * FROM corgipile.train('label_idx', 'svm', features => 'label', feature_indices => 'idx');

-- an existing model name
SELECT count(*) FROM corgipile.train('points', 'svm', model_name => 'taken', max_epoch_num => 1);
SELECT * FROM corgipile.train('points', 'svm', model_name => 'taken');

-- the Citus nodes, asked of a server without Citus
SELECT * FROM corgipile.cluster_nodes();

-- after all of that, the server is fine
SELECT epoch, tuples FROM corgipile.train('points', 'svm', model_name => 'still_fine',
                                          max_epoch_num => 1, seed => 1);
