-- Every shuffle strategy on the same operators, and the defining property
-- of each, seen through corgipile.shuffled_scan().
SET corgipile.progress = off;

-- A table of 29 pages: 16 pages per buffer below, blocks of 2 pages.  Its
-- 15 blocks are cut into 2 groups of as equal a size as possible: 7 blocks
-- (the first 14 pages, in storage order), then 8.
CREATE TABLE seq AS
SELECT i AS id, CASE WHEN i <= 1500 THEN 1 ELSE -1 END AS label,
       ARRAY[(CASE WHEN i <= 1500 THEN 1.0 ELSE -1.0 END) + sin(i * 12.9898), cos(i * 78.233)]::float8[] AS features
FROM generate_series(1, 3000) AS i;
SELECT pg_relation_size('seq') / current_setting('block_size')::int AS pages;

CREATE TEMP TABLE orders AS
SELECT s.shuffle, o.pos, o.row_ctid, o.id, (o.row_ctid::text::point)[0]::int AS page
FROM unnest(ARRAY['no_shuffle', 'block_only', 'corgipile', 'sliding_window', 'mrs',
                  'shuffle_once', 'epoch_shuffle']) AS s(shuffle),
     LATERAL corgipile.shuffled_scan('seq', s.shuffle, block_size => '2',
                                     buffer_size => '16', seed => 7)
             WITH ORDINALITY AS o(row_ctid, id, pos);

-- no_shuffle, block_only, corgipile, sliding_window, shuffle_once and
-- epoch_shuffle visit every visible row exactly once per epoch; mrs feeds
-- 2(N - R) + R rows, R being the reservoir: the rows of the first group of
-- blocks (pages 0-13).
SELECT shuffle, count(*) AS fed, count(DISTINCT row_ctid) AS distinct_rows,
       count(DISTINCT row_ctid) = (SELECT count(*) FROM seq) AS all_rows
FROM orders GROUP BY shuffle ORDER BY shuffle;
SELECT count(*) AS mrs_fed,
       2 * (3000 - (SELECT count(*) FROM seq WHERE (ctid::text::point)[0] < 14)) +
       (SELECT count(*) FROM seq WHERE (ctid::text::point)[0] < 14) AS documented
FROM orders WHERE shuffle = 'mrs';

-- no_shuffle reads in storage order.
SELECT bool_and(id = pos) AS storage_order FROM orders WHERE shuffle = 'no_shuffle';

-- block_only keeps page order inside a block: rows of one block come as a
-- run, in ctid order; the blocks themselves come in a random order.
SELECT bool_and(next_ctid > row_ctid) AS in_order_within_blocks,
       count(DISTINCT page / 2) AS blocks
FROM (SELECT row_ctid, page, lead(row_ctid) OVER (ORDER BY pos) AS next_ctid,
             lead(page) OVER (ORDER BY pos) / 2 AS next_block
      FROM orders WHERE shuffle = 'block_only') AS o
WHERE next_block = page / 2;
SELECT count(*) FILTER (WHERE page / 2 <> prev_block) + 1 AS block_runs
FROM (SELECT page, lag(page) OVER (ORDER BY pos) / 2 AS prev_block
      FROM orders WHERE shuffle = 'block_only') AS o;
SELECT array_agg(page / 2 ORDER BY pos) FILTER (WHERE first) <> array_agg(page / 2 ORDER BY page / 2) FILTER (WHERE first)
       AS blocks_not_in_storage_order
FROM (SELECT pos, page, page / 2 IS DISTINCT FROM lag(page / 2) OVER (ORDER BY pos) AS first
      FROM orders WHERE shuffle = 'block_only') AS o;

-- corgipile mixes the rows of the blocks of one buffer: in the first
-- buffer's worth of rows, consecutive rows mostly come from different
-- blocks, and every block of the buffer appears early.
SELECT round(avg((page / 2 <> prev_block)::int), 2) > 0.7 AS mostly_switching_blocks,
       count(DISTINCT page / 2) AS blocks_in_first_buffer
FROM (SELECT pos, page, lag(page) OVER (ORDER BY pos) / 2 AS prev_block
      FROM orders WHERE shuffle = 'corgipile') AS o
WHERE pos <= (SELECT count(*) FROM seq WHERE (ctid::text::point)[0] < 14) / 2 AND pos > 1;

-- sliding_window output is locally ordered: with a window of 2 pages
-- (212 rows), rows leave the window near where they entered it.
SELECT round(avg(abs(pos - id)) / 3000, 2) AS mean_displacement,
       round(corr(pos, id)::numeric, 2) AS correlation,
       -- a row is fed no earlier than a window's worth of rows before it is read
       max(id - pos) <= (SELECT count(*) FROM seq WHERE (ctid::text::point)[0] < 2) AS never_early
FROM corgipile.shuffled_scan('seq', 'sliding_window', buffer_size => '2', seed => 7)
     WITH ORDINALITY AS o(row_ctid, id, pos);

-- shuffle_once and epoch_shuffle are full shuffles: no correlation with
-- storage order.
SELECT shuffle, abs(corr(pos, id)) < 0.1 AS uncorrelated
FROM orders WHERE shuffle IN ('shuffle_once', 'epoch_shuffle') GROUP BY shuffle ORDER BY shuffle;

-- The same seed gives the same order; another seed another one.
SELECT (SELECT array_agg(id) FROM corgipile.shuffled_scan('seq', 'corgipile', seed => 1)) =
       (SELECT array_agg(id) FROM corgipile.shuffled_scan('seq', 'corgipile', seed => 1)) AS same_seed_same_order,
       (SELECT array_agg(id) FROM corgipile.shuffled_scan('seq', 'corgipile', seed => 1)) <>
       (SELECT array_agg(id) FROM corgipile.shuffled_scan('seq', 'corgipile', seed => 2)) AS other_seed_other_order;

-- Without an id column, id is NULL.
CREATE TABLE no_id AS SELECT label, features FROM seq LIMIT 10;
SELECT count(*), count(id) FROM corgipile.shuffled_scan('no_id', 'no_shuffle');
EXPLAIN (COSTS OFF) SELECT * FROM corgipile.shuffled_scan('seq', 'sliding_window');

-- Training with every strategy: rows fed per epoch, and convergence on
-- this label-clustered table.
SELECT s.shuffle, min(r.tuples) AS tuples_per_epoch, count(*) AS epochs
FROM unnest(ARRAY['no_shuffle', 'block_only', 'corgipile', 'sliding_window', 'mrs',
                  'shuffle_once', 'epoch_shuffle']) AS s(shuffle),
     LATERAL corgipile.train('seq', 'svm', model_name => 'seq_' || s.shuffle, shuffle => s.shuffle,
                             block_size => '2', buffer_size => '16', max_epoch_num => 3, seed => 5) AS r
GROUP BY s.shuffle ORDER BY s.shuffle;
SELECT model_name, params->>'reservoir_rows' AS reservoir_rows, params->>'window_rows' AS window_rows
FROM corgipile.models WHERE model_name IN ('seq_mrs', 'seq_sliding_window') ORDER BY 1;
EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF)
SELECT * FROM corgipile.train('seq', 'svm', model_name => 'seq_explained', shuffle => 'epoch_shuffle',
                              buffer_size => '16', max_epoch_num => 2, seed => 5);

-- shuffle_once reads the table once, into its shuffled copy, and then
-- trains every epoch on that copy; epoch_shuffle reads it every epoch.
EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF)
SELECT * FROM corgipile.train('seq', 'svm', model_name => 'seq_once', shuffle => 'shuffle_once',
                              buffer_size => '16', max_epoch_num => 3, seed => 5);

-- Errors.
SELECT * FROM corgipile.shuffled_scan('seq', 'random');
SELECT * FROM corgipile.shuffled_scan('seq', 'corgipile', buffer_size => '200%');
CREATE VIEW seq_view AS SELECT * FROM seq;
SELECT * FROM corgipile.shuffled_scan('seq_view');
