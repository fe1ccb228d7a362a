SET corgipile.progress = off;
-- The plan: SGD over TupleShuffle over BlockShuffle, with their settings.
EXPLAIN (COSTS OFF) SELECT * FROM corgipile.train('points', 'svm');
EXPLAIN (COSTS OFF)
SELECT epoch, loss FROM corgipile.train('points', 'logistic', shuffle => 'no_shuffle',
                                        block_size => '2', buffer_size => '50%',
                                        max_epoch_num => 5, batch_size => 8,
                                        double_buffer => false)
WHERE epoch > 2;
EXPLAIN (COSTS OFF) SELECT * FROM corgipile.train('points', 'svm', shuffle => 'block_only',
                                                  validation => 'points_test');
EXPLAIN (VERBOSE, COSTS OFF) SELECT model_name, epoch FROM corgipile.train('points', 'svm');

-- EXPLAIN ANALYZE runs the training (and stores the model).
EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF)
SELECT * FROM corgipile.train('points', 'svm', model_name => 'explained',
                              max_epoch_num => 2, seed => 1);
SELECT count(*) FROM corgipile.models WHERE model_name = 'explained';

-- EXPLAIN without ANALYZE does no work and stores nothing.
EXPLAIN (COSTS OFF) SELECT * FROM corgipile.train('points', 'svm', model_name => 'not_run');
SELECT count(*) FROM corgipile.models WHERE model_name = 'not_run';

-- Other queries keep their ordinary plans.
EXPLAIN (COSTS OFF) SELECT * FROM points ORDER BY id LIMIT 3;
