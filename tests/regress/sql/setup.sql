-- Fixtures shared by the other regression tests.  Data are deterministic
-- (no random()), so every figure below is reproducible.
CREATE EXTENSION corgipile;

-- 2000 points, stored clustered by label: the first half positive.  Never
-- analysed (autovacuum off for it): EXPLAIN's epoch line depends on
-- whether a table has been, and autovacuum's timing must not decide it.
CREATE TABLE points WITH (autovacuum_enabled = false) AS
SELECT i AS id,
       CASE WHEN i <= 1000 THEN 1 ELSE -1 END AS label,
       ARRAY[(CASE WHEN i <= 1000 THEN 1.0 ELSE -1.0 END) + 1.5 * sin(i * 12.9898),
             cos(i * 78.233)]::float8[] AS features
FROM generate_series(1, 2000) AS i;

-- The same data with 0/1 labels, boolean labels, float4 features, and
-- one numeric column per feature.
CREATE TABLE points01 AS
SELECT id, (label + 1) / 2 AS label, features FROM points;
CREATE TABLE points_bool AS
SELECT id, label > 0 AS label, features::float4[] AS features FROM points;
CREATE TABLE points_cols AS
SELECT id, label, features[1] AS x1, features[2]::numeric AS x2 FROM points;

-- A sparse layout of the same data: index arrays and value arrays.
CREATE TABLE points_sparse AS
SELECT id, label, ARRAY[0, 1] AS idx, features AS vals FROM points;

-- Held-out points for validation and prediction.
CREATE TABLE points_test AS
SELECT i AS id,
       CASE WHEN i % 2 = 0 THEN 1 ELSE -1 END AS label,
       ARRAY[(CASE WHEN i % 2 = 0 THEN 1.0 ELSE -1.0 END) + 1.5 * sin(i * 3.7),
             cos(i * 5.1)]::float8[] AS features
FROM generate_series(1, 400) AS i;
