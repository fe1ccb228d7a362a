-- corgipile.shuffle_table: a fully shuffled copy, by the two-pass shuffle.
SET work_mem = '64kB';  -- many piles, so the external path is exercised
SELECT corgipile.shuffle_table('points', 'points_shuffled', seed => 4);
-- the same rows, each once
SELECT count(*) = (SELECT count(*) FROM points) AS same_count,
       (SELECT array_agg(id ORDER BY id) FROM points_shuffled) =
       (SELECT array_agg(id ORDER BY id) FROM points) AS same_rows
FROM points_shuffled;
-- in an order unrelated to the original
SELECT abs(corr(pos, id)) < 0.1 AS uncorrelated
FROM (SELECT id, row_number() OVER () AS pos FROM points_shuffled) AS s;
-- the same seed gives the same copy; columns, defaults and constraints come along
SELECT corgipile.shuffle_table('points', 'points_shuffled_again', seed => 4);
SELECT (SELECT array_agg(id) FROM points_shuffled) = (SELECT array_agg(id) FROM points_shuffled_again)
       AS same_seed_same_order;
CREATE TABLE constrained (id int NOT NULL, label int DEFAULT 1 CHECK (label IN (-1, 1)), note text);
INSERT INTO constrained SELECT i, 1, repeat('x', 3000 + i) FROM generate_series(1, 50) AS i;
SELECT corgipile.shuffle_table('constrained', 'myschema_missing.copy');
CREATE SCHEMA shuffled;
SELECT corgipile.shuffle_table('constrained', 'shuffled."Copy"');
\d shuffled."Copy"
SELECT sum(length(note)) = (SELECT sum(length(note)) FROM constrained) AS toasted_values_copied
FROM shuffled."Copy";
-- A table whose physical layout is not a fresh copy's: a dropped column,
-- columns added with a default (stored only in the catalog), out-of-line
-- values, generated and identity columns.  Every value is copied.
CREATE TABLE altered (a int, id int GENERATED ALWAYS AS IDENTITY, label int,
                      features float8[], t text,
                      g int GENERATED ALWAYS AS (label * 2) STORED);
INSERT INTO altered (a, label, features, t)
SELECT i, label, features, CASE WHEN i % 100 = 0 THEN repeat(md5(i::text), 3000) ELSE 'short' END
FROM points, LATERAL (SELECT id AS i) s;
ALTER TABLE altered DROP COLUMN a;
ALTER TABLE altered ADD COLUMN m int DEFAULT 42;
ALTER TABLE altered ADD COLUMN m2 text DEFAULT 'missing';
INSERT INTO altered (label, features, t, m, m2) VALUES (1, '{1,1}', 'late', 7, 'present');
SELECT corgipile.shuffle_table('altered', 'altered_copy', 3);
SELECT count(*) AS differing
FROM ((SELECT * FROM altered EXCEPT ALL SELECT * FROM altered_copy)
      UNION ALL (SELECT * FROM altered_copy EXCEPT ALL SELECT * FROM altered)) d;
SELECT m, m2, count(*) FROM altered_copy GROUP BY m, m2 ORDER BY m;
SELECT count(*), count(DISTINCT id) FROM corgipile.shuffled_scan('altered', 'corgipile', '1', '4', 1);

-- errors
SELECT corgipile.shuffle_table('points', 'points_shuffled');
SELECT corgipile.shuffle_table('points_view_missing', 'x');
CREATE VIEW points_v AS SELECT * FROM points;
SELECT corgipile.shuffle_table('points_v', 'x');
SELECT corgipile.shuffle_table('points', '');
SELECT corgipile.shuffle_table('points', NULL);
SELECT corgipile.shuffle_table(NULL, 'x');
-- a NULL seed is a random one
SELECT corgipile.shuffle_table('points', 'points_random', NULL);
