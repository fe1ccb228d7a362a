-- The Bismarck baseline's aggregate: one call is one epoch of per-tuple SGD.
CREATE EXTENSION corgipile_bismarck;

-- Two rows worked by hand (svm, learning rate 0.5, start at zero):
--   row ([1,0], +1): margin 0, hinge active, g = -1: w = [0.5, 0], b = 0.5
--   row ([0,1], -1): margin 0.5, hinge active, g = +1: w = [0.5, -0.5], b = 0
-- losses 1 and 1.5 (mean 1.25), both predictions wrong before their update.
CREATE TABLE hand (id int, label int, features float8[]);
INSERT INTO hand VALUES (1, 1, '{1,0}'), (2, -1, '{0,1}');
SELECT (e).* FROM (SELECT bismarck.sgd(features, label, 'svm', NULL, 0.5, 0) AS e
                   FROM (SELECT * FROM hand ORDER BY id) s) r;
-- the next epoch starts from the weights passed in
SELECT (e).* FROM (SELECT bismarck.sgd(features, label, 'svm', '{0.5,-0.5,0}', 0.25, 0) AS e
                   FROM (SELECT * FROM hand ORDER BY id) s) r;
-- float4[] features, 0/1 labels, L2
SELECT (e).weights FROM (SELECT bismarck.sgd(features::float4[], (label > 0)::int, 'svm', NULL, 0.5, 0.1) AS e
                         FROM (SELECT * FROM hand ORDER BY id) s) r;
-- rows with a NULL label or a NULL feature are skipped
INSERT INTO hand VALUES (3, NULL, '{1,1}'), (4, 1, NULL), (5, 1, '{1,NULL}');
SELECT (e).tuples FROM (SELECT bismarck.sgd(features, label, 'logistic', NULL, 0.5, 0) AS e FROM hand) r;
-- no rows: NULL
SELECT bismarck.sgd(features, label, 'svm', NULL, 0.5, 0) IS NULL AS empty FROM hand WHERE false;
-- scoring
SELECT bismarck.margin('{0.5,-0.5,0.25}', '{2,1}'::float8[]), bismarck.margin('{1,1,1}', '{1,2}'::float4[]);
-- errors
SELECT bismarck.sgd(features, label, 'forest', NULL, 0.5, 0) FROM hand;
SELECT bismarck.sgd(features, label, NULL, NULL, 0.5, 0) FROM hand;
SELECT bismarck.sgd(features, label, 'svm', NULL, 0, 0) FROM hand;
SELECT bismarck.sgd(features, label, 'svm', '{1,2}', 0.5, 0) FROM hand;
SELECT bismarck.sgd(features, label, 'svm', NULL, 0.5, 0) FROM (VALUES ('{1,2}'::float8[], 1), ('{1}', 1)) v(features, label);
