/*-------------------------------------------------------------------------
 *
 * bismarck.c
 *	  A Bismarck-architecture SGD baseline: per-tuple SGD as a user-defined
 *	  aggregate whose state is the model.
 *
 * Bismarck (Feng et al., SIGMOD 2012) runs one epoch of incremental gradient
 * descent as one invocation of a UDA: the transition function updates the
 * weights with each row in the order the scan delivers them, the final
 * function returns the weights, and a driver loops over epochs, passing the
 * previous epoch's weights in and decaying the step size.  For a random order
 * Bismarck first shuffles the table once into a copy (ORDER BY random()).
 *
 * The arithmetic is deliberately the one of the corgipile engine
 * (extension/core/linear_model.c), operation for operation: the dot product
 * with four partial sums, the same loss derivatives, and the step
 * w <- (1 - lr*l2) w - lr*g*x, b <- b - lr*g.  Fed the same rows in the same
 * order with the same learning rates, it gives bit-identical weights, which
 * is what the tests check against the engine's no_shuffle run over the same
 * shuffled copy.  So the benchmark compares architectures (a UDA over a
 * shuffled copy against in-engine shuffling), not two implementations of
 * the math.
 *
 * This is benchmark code, outside the product's SQL surface.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <math.h>

#include "catalog/pg_type.h"
#include "fmgr.h"
#include "funcapi.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"

PG_MODULE_MAGIC;

typedef enum BismarckModel
{
	BISMARCK_SVM,
	BISMARCK_LOGISTIC,
	BISMARCK_LINEAR
} BismarckModel;

/* The aggregate's state: the model and the epoch's running figures. */
typedef struct BismarckState
{
	BismarckModel kind;
	int			n_features;
	double		learning_rate;
	double		l2;

	int64		n;				/* rows trained on */
	int64		n_skipped;		/* rows with a NULL label or feature */
	double		loss_sum;
	int64		n_correct;		/* classifiers */
	double		sum_y;			/* linear: for R^2 */
	double		sum_y2;
	double		sse;

	double	   *x;				/* scratch row for float4[] features */
	double		w[FLEXIBLE_ARRAY_MEMBER];	/* n_features weights, then bias */
} BismarckState;

PG_FUNCTION_INFO_V1(bismarck_sgd_step);
PG_FUNCTION_INFO_V1(bismarck_sgd_final);
PG_FUNCTION_INFO_V1(bismarck_margin);

static BismarckModel
parse_model(const char *s)
{
	if (pg_strcasecmp(s, "svm") == 0)
		return BISMARCK_SVM;
	if (pg_strcasecmp(s, "logistic") == 0 || pg_strcasecmp(s, "lr") == 0)
		return BISMARCK_LOGISTIC;
	if (pg_strcasecmp(s, "linear") == 0)
		return BISMARCK_LINEAR;
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("bismarck.sgd: unknown model \"%s\"", s),
			 errhint("Valid models are 'svm', 'logistic' and 'linear'.")));
	return BISMARCK_SVM;		/* keep the compiler quiet */
}

/*
 * The array's data.  ARR_DATA_PTR() mixes a signed and an unsigned operand
 * in a conditional, which -Wextra (-Wsign-compare) reports in every caller.
 */
static inline const void *
array_data(ArrayType *a)
{
	if (ARR_HASNULL(a))
		return (const char *) a + a->dataoffset;
	return (const char *) a + ARR_OVERHEAD_NONULLS(ARR_NDIM(a));
}

/*
 * Check a one-dimensional float8[] or float4[] and return its length.
 * Returns -1 when it holds a NULL element.
 */
static int
array_length_checked(ArrayType *a, const char *what)
{
	Oid			elt = ARR_ELEMTYPE(a);

	if (elt != FLOAT8OID && elt != FLOAT4OID)
		ereport(ERROR,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("bismarck: %s must be float8[] or float4[], not %s[]",
						what, format_type_be(elt))));
	if (ARR_NDIM(a) == 0)
		return 0;
	if (ARR_NDIM(a) != 1)
		ereport(ERROR,
				(errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
				 errmsg("bismarck: %s must be a one-dimensional array", what)));
	if (ARR_HASNULL(a) && array_contains_nulls(a))
		return -1;
	return ARR_DIMS(a)[0];
}

/*
 * The row's features as doubles: float8[] in place, float4[] converted into
 * the scratch row (as the engine converts them when it fills a buffer).
 */
static const double *
row_values(ArrayType *a, double *scratch, int n)
{
	if (ARR_ELEMTYPE(a) == FLOAT8OID)
		return (const double *) array_data(a);
	else
	{
		const float4 *f = (const float4 *) array_data(a);

		for (int j = 0; j < n; j++)
			scratch[j] = (double) f[j];
		return scratch;
	}
}

/* w.x with four partial sums: the engine's cp_margin_dense, verbatim. */
static double
margin_dense(const double *w, const double *x, int n)
{
	double		s0 = 0.0,
				s1 = 0.0,
				s2 = 0.0,
				s3 = 0.0;
	int			j = 0;

	for (; j + 4 <= n; j += 4)
	{
		s0 += w[j] * x[j];
		s1 += w[j + 1] * x[j + 1];
		s2 += w[j + 2] * x[j + 2];
		s3 += w[j + 3] * x[j + 3];
	}
	for (; j < n; j++)
		s0 += w[j] * x[j];
	return (s0 + s1) + (s2 + s3);
}

/* log(1 + exp(t)) without overflow */
static inline double
log1pexp(double t)
{
	if (t > 0)
		return t + log1p(exp(-t));
	return log1p(exp(t));
}

static double
loss_of(BismarckModel kind, double z, double y)
{
	switch (kind)
	{
		case BISMARCK_SVM:
			return Max(0.0, 1.0 - y * z);
		case BISMARCK_LOGISTIC:
			return log1pexp(-y * z);
		case BISMARCK_LINEAR:
			return 0.5 * (z - y) * (z - y);
	}
	return 0.0;
}

/* d loss / d margin */
static double
dloss_of(BismarckModel kind, double z, double y)
{
	switch (kind)
	{
		case BISMARCK_SVM:
			return (y * z < 1.0) ? -y : 0.0;
		case BISMARCK_LOGISTIC:
			{
				double		t = y * z;

				if (t > 0)
				{
					double		e = exp(-t);

					return -y * e / (1.0 + e);
				}
				return -y / (1.0 + exp(t));
			}
		case BISMARCK_LINEAR:
			return z - y;
	}
	return 0.0;
}

static BismarckState *
new_state(FunctionCallInfo fcinfo, MemoryContext aggcxt, int n)
{
	BismarckState *st;
	MemoryContext old;

	if (PG_ARGISNULL(3))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("bismarck.sgd: model must not be NULL")));
	if (PG_ARGISNULL(5) || PG_ARGISNULL(6))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("bismarck.sgd: learning_rate and l2 must not be NULL")));

	old = MemoryContextSwitchTo(aggcxt);
	st = palloc0(offsetof(BismarckState, w) + sizeof(double) * (n + 1));
	st->x = palloc0(sizeof(double) * Max(n, 1));
	MemoryContextSwitchTo(old);

	st->kind = parse_model(text_to_cstring(PG_GETARG_TEXT_PP(3)));
	st->n_features = n;
	st->learning_rate = PG_GETARG_FLOAT8(5);
	st->l2 = PG_GETARG_FLOAT8(6);
	if (!(st->learning_rate > 0.0) || !isfinite(st->learning_rate))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("bismarck.sgd: learning_rate must be a positive finite number, got %g",
						st->learning_rate)));
	if (!(st->l2 >= 0.0) || !isfinite(st->l2))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("bismarck.sgd: l2 must be a non-negative finite number, got %g",
						st->l2)));

	/* the weights to start from: the previous epoch's, or zeros */
	if (!PG_ARGISNULL(4))
	{
		ArrayType  *wa = PG_GETARG_ARRAYTYPE_P(4);
		int			nw = array_length_checked(wa, "weights");

		if (ARR_ELEMTYPE(wa) != FLOAT8OID || nw != n + 1)
			ereport(ERROR,
					(errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
					 errmsg("bismarck.sgd: weights must be a float8[] of %d values without NULLs (%d features, then the bias)",
							n + 1, n)));
		memcpy(st->w, array_data(wa), sizeof(double) * (n + 1));
	}
	return st;
}

/*
 * bismarck.sgd_step(state, features, label, model, weights, learning_rate, l2)
 *
 * Score the row with the current weights (for the epoch's loss and score),
 * then take one SGD step on it.  The model, start weights and rates are read
 * from the first row; they are constants of the call.
 */
Datum
bismarck_sgd_step(PG_FUNCTION_ARGS)
{
	MemoryContext aggcxt;
	BismarckState *st = PG_ARGISNULL(0) ? NULL : (BismarckState *) PG_GETARG_POINTER(0);
	ArrayType  *xa;
	const double *x;
	double		y,
				z,
				g,
				lr,
				shrink;
	double	   *w;
	int			n;

	if (!AggCheckCallContext(fcinfo, &aggcxt))
		elog(ERROR, "bismarck_sgd_step called in a non-aggregate context");

	if (PG_ARGISNULL(1) || PG_ARGISNULL(2))
	{
		if (st != NULL)
			st->n_skipped++;
		PG_RETURN_POINTER(st);
	}
	xa = PG_GETARG_ARRAYTYPE_P(1);
	n = array_length_checked(xa, "features");
	if (n < 0)
	{
		/* a NULL feature: skipped, as the engine skips such rows */
		if (st != NULL)
			st->n_skipped++;
		PG_RETURN_POINTER(st);
	}
	if (st == NULL)
		st = new_state(fcinfo, aggcxt, n);
	else if (n != st->n_features)
		ereport(ERROR,
				(errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
				 errmsg("bismarck.sgd: a row has %d features, the first row had %d",
						n, st->n_features)));

	y = PG_GETARG_FLOAT8(2);
	if (st->kind != BISMARCK_LINEAR)
		y = (y > 0.0) ? 1.0 : -1.0; /* 0/1 and -1/+1 alike */

	x = row_values(xa, st->x, n);
	w = st->w;
	z = margin_dense(w, x, n) + w[n];

	/* the row's figures, from the prediction before the update */
	st->n++;
	st->loss_sum += loss_of(st->kind, z, y);
	if (st->kind == BISMARCK_LINEAR)
	{
		st->sum_y += y;
		st->sum_y2 += y * y;
		st->sse += (z - y) * (z - y);
	}
	else if ((z > 0.0 ? 1.0 : -1.0) == y)
		st->n_correct++;

	/* one step: w <- (1 - lr*l2) w - lr*g*x; b <- b - lr*g */
	g = dloss_of(st->kind, z, y);
	lr = st->learning_rate;
	shrink = 1.0 - lr * st->l2;
	if (st->l2 > 0.0)
		for (int j = 0; j < n; j++)
			w[j] = w[j] * shrink - lr * g * x[j];
	else if (g != 0.0)
		for (int j = 0; j < n; j++)
			w[j] -= lr * g * x[j];
	w[n] -= lr * g;

	PG_RETURN_POINTER(st);
}

/* bismarck.sgd_final(state) -> bismarck.epoch */
Datum
bismarck_sgd_final(PG_FUNCTION_ARGS)
{
	BismarckState *st = (BismarckState *) PG_GETARG_POINTER(0);
	TupleDesc	tupdesc;
	Datum	   *elems;
	Datum		values[4];
	bool		nulls[4] = {false, false, false, false};
	double		score;

	if (get_call_result_type(fcinfo, NULL, &tupdesc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "bismarck_sgd_final: return type must be a row type");
	tupdesc = BlessTupleDesc(tupdesc);

	elems = palloc(sizeof(Datum) * (st->n_features + 1));
	for (int j = 0; j <= st->n_features; j++)
		elems[j] = Float8GetDatum(st->w[j]);
	values[0] = PointerGetDatum(construct_array(elems, st->n_features + 1, FLOAT8OID,
												sizeof(float8), FLOAT8PASSBYVAL,
												TYPALIGN_DOUBLE));
	values[1] = Int64GetDatum(st->n);
	if (st->n == 0)
	{
		nulls[2] = nulls[3] = true;
		values[2] = values[3] = (Datum) 0;
	}
	else
	{
		values[2] = Float8GetDatum(st->loss_sum / (double) st->n);
		if (st->kind == BISMARCK_LINEAR)
		{
			double		mean = st->sum_y / (double) st->n;
			double		sst = st->sum_y2 - (double) st->n * mean * mean;

			score = sst > 0.0 ? 1.0 - st->sse / sst : (st->sse == 0.0 ? 1.0 : 0.0);
		}
		else
			score = (double) st->n_correct / (double) st->n;
		values[3] = Float8GetDatum(score);
	}
	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(tupdesc, values, nulls)));
}

/* bismarck.margin(weights, features) -> w.x + b */
Datum
bismarck_margin(PG_FUNCTION_ARGS)
{
	ArrayType  *wa = PG_GETARG_ARRAYTYPE_P(0);
	ArrayType  *xa = PG_GETARG_ARRAYTYPE_P(1);
	int			nw = array_length_checked(wa, "weights");
	int			n = array_length_checked(xa, "features");
	const double *x;
	double	   *scratch;

	if (n < 0)
		PG_RETURN_NULL();
	if (ARR_ELEMTYPE(wa) != FLOAT8OID || nw != n + 1)
		ereport(ERROR,
				(errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
				 errmsg("bismarck.margin: weights must be a float8[] of %d values without NULLs",
						n + 1)));
	scratch = palloc(sizeof(double) * Max(n, 1));
	x = row_values(xa, scratch, n);
	PG_RETURN_FLOAT8(margin_dense((const double *) array_data(wa), x, n) +
					 ((const double *) array_data(wa))[n]);
}
