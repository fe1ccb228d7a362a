/* corgipile_bismarck 1.0: a Bismarck-architecture SGD baseline.
 *
 * One call of the aggregate bismarck.sgd() is one epoch of per-tuple SGD
 * over the rows it is fed, in the order the scan delivers them; the model
 * (the weights) is the aggregate's state, and the weights it starts from
 * are passed in so that a driver chains epochs:
 *
 *   SELECT (bismarck.sgd(features, label::float8, 'svm', <weights or NULL>,
 *                        <learning rate of this epoch>, <l2>)).*
 *   FROM shuffled_copy;
 *
 * The aggregate has no combine function and is PARALLEL UNSAFE, so it is
 * never split over parallel workers: rows are visited in scan order.
 */

\echo Use "CREATE EXTENSION corgipile_bismarck" to load this file. \quit

-- One epoch's result: the weights (n_features weights, then the bias), the
-- rows trained on, and the mean loss and the score (accuracy, or R^2 for
-- 'linear') measured on each row just before the model updates on it.
CREATE TYPE bismarck.epoch AS (
    weights float8[],
    tuples bigint,
    loss float8,
    score float8
);

CREATE FUNCTION bismarck.sgd_step(internal, features float8[], label float8, model text,
                                  weights float8[], learning_rate float8, l2 float8)
RETURNS internal
AS 'MODULE_PATHNAME', 'bismarck_sgd_step'
LANGUAGE C CALLED ON NULL INPUT VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION bismarck.sgd_step(internal, features float4[], label float8, model text,
                                  weights float8[], learning_rate float8, l2 float8)
RETURNS internal
AS 'MODULE_PATHNAME', 'bismarck_sgd_step'
LANGUAGE C CALLED ON NULL INPUT VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION bismarck.sgd_final(internal)
RETURNS bismarck.epoch
AS 'MODULE_PATHNAME', 'bismarck_sgd_final'
LANGUAGE C STRICT VOLATILE PARALLEL UNSAFE;

CREATE AGGREGATE bismarck.sgd(features float8[], label float8, model text,
                              weights float8[], learning_rate float8, l2 float8) (
    SFUNC = bismarck.sgd_step,
    STYPE = internal,
    FINALFUNC = bismarck.sgd_final,
    PARALLEL = UNSAFE
);

CREATE AGGREGATE bismarck.sgd(features float4[], label float8, model text,
                              weights float8[], learning_rate float8, l2 float8) (
    SFUNC = bismarck.sgd_step,
    STYPE = internal,
    FINALFUNC = bismarck.sgd_final,
    PARALLEL = UNSAFE
);

-- w.x + b, for scoring a held-out table with a model's weights.
CREATE FUNCTION bismarck.margin(weights float8[], features float8[])
RETURNS float8
AS 'MODULE_PATHNAME', 'bismarck_margin'
LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

CREATE FUNCTION bismarck.margin(weights float8[], features float4[])
RETURNS float8
AS 'MODULE_PATHNAME', 'bismarck_margin'
LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
