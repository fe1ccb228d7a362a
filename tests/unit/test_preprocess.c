/*
 * Unit tests of the preprocessing core (core/preprocess.c), run without a
 * server: make unittest.  Prints "N passed, N failed".
 *
 * Statistics are checked against a plain two-pass computation in long
 * double; the transform and its inverse on the weights against predictions
 * made in both spaces; dictionaries against insertion in several orders;
 * the holdout against its expected fraction; the divergence rules against
 * hand-made loss sequences.
 */
#include "c.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/pg_prng.h"
#include "core/preprocess.h"

#include "unit_check.h"

/* every allocation is remembered so that main() can free it */
#define MAX_ALLOCATIONS 20000
static void *allocations[MAX_ALLOCATIONS];
static int	n_allocations = 0;
static int	fail_after = -1;	/* >= 0: that many more allocations succeed */

static void *
alloc_zero(Size size)
{
	void	   *p;

	if (fail_after == 0)
		return NULL;
	if (fail_after > 0)
		fail_after--;
	if (n_allocations >= MAX_ALLOCATIONS)
		return NULL;
	p = calloc(1, size);
	if (p != NULL)
		allocations[n_allocations++] = p;
	return p;
}

static void
free_all(void)
{
	for (int i = 0; i < n_allocations; i++)
		free(allocations[i]);
	n_allocations = 0;
}

static bool
close_rel(double a, double b, double tol)
{
	double		scale = Max(fabs(a), fabs(b));

	if (a == b)
		return true;
	return fabs(a - b) <= tol * Max(scale, 1e-300);
}

/* two-pass mean and population variance of column j of a dense matrix */
static void
two_pass(const double *x, int64 n_rows, int32 n_features, int32 j,
		 double *mean, double *var)
{
	long double s = 0;
	long double ss = 0;

	for (int64 i = 0; i < n_rows; i++)
		s += x[i * n_features + j];
	s /= n_rows;
	for (int64 i = 0; i < n_rows; i++)
	{
		long double d = x[i * n_features + j] - s;

		ss += d * d;
	}
	*mean = (double) s;
	*var = (double) (ss / n_rows);
}

static double
uniform(pg_prng_state *rng, double lo, double hi)
{
	return lo + (hi - lo) * pg_prng_double(rng);
}

/* ------------------------------------------------------------------ */

static void
test_dense_stats(void)
{
	enum
	{
		NR = 3001, NF = 4
	};
	double	   *x = malloc(sizeof(double) * NR * NF);
	pg_prng_state rng;
	CpPrepStats all;
	CpPrepStats part[3];
	int64		cut[4] = {0, 0, 1000, NR};	/* part 0 is empty */

	pg_prng_seed(&rng, 42);
	for (int i = 0; i < NR; i++)
	{
		x[i * NF + 0] = uniform(&rng, -1, 1);
		/* a large offset: naive sum-of-squares loses every digit here */
		x[i * NF + 1] = 1e9 + uniform(&rng, 0, 1);
		x[i * NF + 2] = uniform(&rng, 0, 1e6);
		x[i * NF + 3] = (i % 7) - 3.0;
	}
	CHECK(cp_prep_stats_init(&all, NF, alloc_zero), "init");
	for (int i = 0; i < NR; i++)
		cp_prep_stats_add_dense(&all, x + i * NF);
	CHECK(all.n_rows == NR, "n_rows %lld", (long long) all.n_rows);
	for (int j = 0; j < NF; j++)
	{
		double		m,
					v,
					m2,
					v2;

		cp_prep_stats_moments(&all, j, &m, &v);
		two_pass(x, NR, NF, j, &m2, &v2);
		CHECK(close_rel(m, m2, 1e-12), "dense mean[%d] %.17g vs %.17g", j, m, m2);
		/* the variance of column 1 is 1/12 on a mean of 1e9: 1e-7 relative */
		CHECK(close_rel(v, v2, j == 1 ? 1e-6 : 1e-10),
			  "dense var[%d] %.17g vs %.17g", j, v, v2);
	}

	/* merging partial statistics (one of them empty) equals one pass */
	for (int p = 0; p < 3; p++)
	{
		CHECK(cp_prep_stats_init(&part[p], NF, alloc_zero), "init part");
		for (int64 i = cut[p]; i < cut[p + 1]; i++)
			cp_prep_stats_add_dense(&part[p], x + i * NF);
	}
	cp_prep_stats_merge(&part[1], &part[2]);
	cp_prep_stats_merge(&part[0], &part[1]);
	CHECK(part[0].n_rows == NR, "merged n_rows");
	for (int j = 0; j < NF; j++)
	{
		double		m,
					v,
					ma,
					va;

		cp_prep_stats_moments(&part[0], j, &m, &v);
		cp_prep_stats_moments(&all, j, &ma, &va);
		CHECK(close_rel(m, ma, 1e-12), "merged mean[%d] %.17g vs %.17g", j, m, ma);
		CHECK(close_rel(v, va, j == 1 ? 1e-6 : 1e-11),
			  "merged var[%d] %.17g vs %.17g", j, v, va);
	}

	/* reset forgets everything */
	cp_prep_stats_reset(&all);
	{
		double		m,
					v;

		cp_prep_stats_moments(&all, 0, &m, &v);
		CHECK(all.n_rows == 0 && m == 0.0 && v == 0.0, "reset");
	}
	free(x);
}

static void
test_sparse_stats(void)
{
	enum
	{
		NR = 2000, NF = 6
	};
	double	   *dense = calloc(NR * NF, sizeof(double));
	pg_prng_state rng;
	CpPrepStats st;
	CpPrepStats a;
	CpPrepStats b;

	pg_prng_seed(&rng, 7);
	CHECK(cp_prep_stats_init(&st, NF, alloc_zero), "init");
	CHECK(cp_prep_stats_init(&a, NF, alloc_zero), "init a");
	CHECK(cp_prep_stats_init(&b, NF, alloc_zero), "init b");
	for (int i = 0; i < NR; i++)
	{
		int32		idx[NF];
		double		val[NF];
		int			nnz = 0;

		for (int j = 0; j < NF - 1; j++)	/* feature NF-1 never appears */
		{
			/* feature j present with probability (j+1)/8, positive only */
			if (pg_prng_double(&rng) < (j + 1) / 8.0)
			{
				idx[nnz] = j;
				val[nnz] = j == 4 ? 5.0 : uniform(&rng, 1, 10) * (j + 1);
				dense[i * NF + j] = val[nnz];
				nnz++;
			}
		}
		cp_prep_stats_add_sparse(&st, idx, val, nnz);
		cp_prep_stats_add_sparse(i < NR / 3 ? &a : &b, idx, val, nnz);
	}
	/* an empty row counts: every feature gets one more zero */
	cp_prep_stats_add_sparse(&st, NULL, NULL, 0);
	cp_prep_stats_add_sparse(&b, NULL, NULL, 0);
	CHECK(st.n_rows == NR + 1, "sparse n_rows");
	cp_prep_stats_merge(&a, &b);
	for (int j = 0; j < NF; j++)
	{
		double		m,
					v,
					m2,
					v2,
					ma,
					va;

		cp_prep_stats_moments(&st, j, &m, &v);
		/* dense has NR rows; the extra empty row is its last zero row */
		{
			double	   *d2 = calloc((NR + 1) * NF, sizeof(double));

			memcpy(d2, dense, sizeof(double) * NR * NF);
			two_pass(d2, NR + 1, NF, j, &m2, &v2);
			free(d2);
		}
		CHECK(close_rel(m, m2, 1e-12), "sparse mean[%d] %.17g vs %.17g", j, m, m2);
		CHECK(close_rel(v, v2, 1e-10), "sparse var[%d] %.17g vs %.17g", j, v, v2);
		cp_prep_stats_moments(&a, j, &ma, &va);
		CHECK(close_rel(m, ma, 1e-12) && close_rel(v, va, 1e-10),
			  "sparse merged[%d]", j);
	}
	{
		double		m,
					v;

		/* never-seen feature: all zeros */
		cp_prep_stats_moments(&st, NF - 1, &m, &v);
		CHECK(m == 0.0 && v == 0.0, "absent feature");
		/* feature 4 holds the constant 5 where present, but zeros elsewhere */
		cp_prep_stats_moments(&st, 4, &m, &v);
		CHECK(v > 1.0 && !cp_prep_is_constant(m, v, st.n_rows),
			  "5-or-0 is not constant (var %g)", v);
	}
	free(dense);
}

/*
 * Dense rows with missing values (a NULL number under missing => ...):
 * complete rows through add_dense, the others through add_sparse of their
 * present values, and the moments after imputation (moments_filled) equal
 * those computed on the imputed column: the mean imputed keeps the mean
 * and divides the squared deviations by every row; a constant fill is
 * folded in like the implicit zeros of sparse rows.
 */
static void
test_filled_stats(void)
{
	enum
	{
		NR = 1500, NF = 4
	};
	double	   *x = calloc(NR * NF, sizeof(double));
	bool	   *miss = calloc(NR * NF, sizeof(bool));
	double	   *imputed = calloc(NR * NF, sizeof(double));
	pg_prng_state rng;
	CpPrepStats st;

	pg_prng_seed(&rng, 11);
	CHECK(cp_prep_stats_init(&st, NF, alloc_zero), "init");
	for (int i = 0; i < NR; i++)
	{
		int32		idx[NF];
		double		val[NF];
		int			nnz = 0;

		for (int j = 0; j < NF; j++)
		{
			x[i * NF + j] = uniform(&rng, -3, 7) * (j + 1) + 100.0 * j;
			/* feature j missing with probability j/5; feature 0 never */
			miss[i * NF + j] = pg_prng_double(&rng) < j / 5.0;
			if (!miss[i * NF + j])
			{
				idx[nnz] = j;
				val[nnz++] = x[i * NF + j];
			}
		}
		if (nnz == NF)
			cp_prep_stats_add_dense(&st, x + i * NF);
		else
			cp_prep_stats_add_sparse(&st, idx, val, nnz);
	}
	CHECK(st.n_rows == NR && st.count[0] == NR && st.count[3] < NR, "filled counts");
	for (int k = 0; k < 2; k++)
	{
		for (int j = 0; j < NF; j++)
		{
			double		fill = k == 0 ? st.mean[j] : 2.5;
			double		m,
						v,
						m2,
						v2;

			for (int i = 0; i < NR; i++)
				imputed[i * NF + j] = miss[i * NF + j] ? fill : x[i * NF + j];
			cp_prep_stats_moments_filled(&st, j, fill, &m, &v);
			two_pass(imputed, NR, NF, j, &m2, &v2);
			CHECK(close_rel(m, m2, 1e-12), "filled mean[%d] %.17g vs %.17g", j, m, m2);
			CHECK(close_rel(v, v2, 1e-10), "filled var[%d] %.17g vs %.17g", j, v, v2);
			if (k == 0)
				CHECK(m == st.mean[j], "the mean imputed keeps the mean exactly");
		}
	}
	{
		CpPrepTransform t;
		double		fill[NF];
		double		stds[NF];

		/* the transform training builds scales each feature as imputed */
		for (int j = 0; j < NF; j++)
			fill[j] = st.mean[j];
		CHECK(cp_prep_transform_init(&t, NF, true, alloc_zero), "filled transform init");
		cp_prep_transform_from_stats(&t, &st, NULL, fill, NULL, stds);
		for (int j = 0; j < NF; j++)
		{
			double		m,
						v;

			cp_prep_stats_moments_filled(&st, j, fill[j], &m, &v);
			CHECK(stds[j] == sqrt(v) && t.scale[j] == 1.0 / sqrt(v),
				  "filled transform[%d]: std %.17g vs %.17g", j, stds[j], sqrt(v));
		}
	}
	{
		double		m,
					v,
					m0,
					v0;

		/* a fill of 0 is what moments has always done */
		cp_prep_stats_moments_filled(&st, 3, 0.0, &m, &v);
		cp_prep_stats_moments(&st, 3, &m0, &v0);
		CHECK(m == m0 && v == v0, "fill 0 is moments");
	}
	free(x);
	free(miss);
	free(imputed);
}

static int
cmp_double(const void *a, const void *b)
{
	double		x = *(const double *) a;
	double		y = *(const double *) b;

	return (x > y) - (x < y);
}

/* numpy's median by sorting: the reference */
static double
sorted_median(const double *v, int64 n)
{
	double	   *s = malloc(sizeof(double) * n);
	double		m;

	memcpy(s, v, sizeof(double) * n);
	qsort(s, n, sizeof(double), cmp_double);
	m = n % 2 ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2.0;
	free(s);
	return m;
}

/*
 * The median (missing => 'median') against sorting, on random values,
 * many ties, sorted, reversed and organ-pipe orders, n of 1 and 2; and
 * the k-th smallest through the heapselect fallback (budget 0) and the
 * quickselect alone, every k of a small array.
 */
static void
test_median(void)
{
	enum
	{
		NMAX = 3001
	};
	double	   *v = malloc(sizeof(double) * NMAX);
	double	   *w = malloc(sizeof(double) * NMAX);
	pg_prng_state rng;

	pg_prng_seed(&rng, 21);
	for (int pattern = 0; pattern < 6; pattern++)
	{
		for (int64 n = 1; n <= NMAX; n += (n < 12 ? 1 : 997))
		{
			double		m;

			for (int64 i = 0; i < n; i++)
			{
				switch (pattern)
				{
					case 0:
						v[i] = uniform(&rng, -5, 5);
						break;
					case 1:		/* ties: a measure rounded to one decimal */
						v[i] = floor(uniform(&rng, 0, 3) * 10) / 10;
						break;
					case 2:
						v[i] = (double) i;
						break;
					case 3:
						v[i] = (double) (n - i);
						break;
					case 4:		/* organ pipe */
						v[i] = (double) (i < n / 2 ? i : n - i);
						break;
					default:	/* all equal */
						v[i] = 1.5;
						break;
				}
			}
			memcpy(w, v, sizeof(double) * n);
			m = cp_prep_median(w, n);
			CHECK(m == sorted_median(v, n), "median pattern %d n %lld: %.17g vs %.17g",
				  pattern, (long long) n, m, sorted_median(v, n));
		}
	}
	for (int budget = 0; budget <= 40; budget += 40)
	{
		int64		n = 37;
		double		s[37];

		for (int64 i = 0; i < n; i++)
			v[i] = floor(uniform(&rng, 0, 12));
		memcpy(s, v, sizeof(double) * n);
		qsort(s, n, sizeof(double), cmp_double);
		for (int64 k = 0; k < n; k++)
		{
			bool		ok = true;

			memcpy(w, v, sizeof(double) * n);
			cp_prep_select_kth(w, n, k, budget);
			for (int64 i = 0; i < n; i++)
				if ((i < k && w[i] > w[k]) || (i > k && w[i] < w[k]))
					ok = false;
			CHECK(ok && w[k] == s[k], "select %lld of %lld (budget %d): %g vs %g",
				  (long long) k, (long long) n, budget, w[k], s[k]);
		}
	}
	free(v);
	free(w);
}

static void
test_constant_columns(void)
{
	enum
	{
		NR = 1000, NF = 4
	};
	CpPrepStats st;
	CpPrepTransform t;
	double		means[NF];
	double		stds[NF];
	int32		n_const;

	CHECK(cp_prep_stats_init(&st, NF, alloc_zero), "init");
	for (int i = 0; i < NR; i++)
	{
		double		row[NF] = {0.1, 0.0, 1.0 + (i % 2) * 1e-6, -7.25};

		cp_prep_stats_add_dense(&st, row);
	}
	CHECK(cp_prep_is_constant(0.1, 1e-34, NR), "rounding-level variance is constant");
	CHECK(!cp_prep_is_constant(1.0, 1e-16, NR), "a real 1e-8 spread is not constant");
	CHECK(cp_prep_is_constant(5.0, 0.0, NR), "zero variance is constant");

	CHECK(cp_prep_transform_init(&t, NF, true, alloc_zero), "transform init");
	n_const = cp_prep_transform_from_stats(&t, &st, NULL, NULL, means, stds);
	CHECK(n_const == 3, "3 constant columns, got %d", n_const);
	CHECK(stds[0] == 0.0 && stds[1] == 0.0 && stds[3] == 0.0 && stds[2] > 0.0,
		  "stds %g %g %g %g", stds[0], stds[1], stds[2], stds[3]);
	CHECK(t.scale[0] == 1.0 && t.scale[1] == 1.0 && t.scale[3] == 1.0,
		  "constant columns keep scale 1");
	{
		double		row[NF] = {0.1, 0.0, 1.0, -7.25};

		cp_prep_apply_dense(&t, row);
		CHECK(row[0] == 0.0 && row[1] == 0.0 && row[3] == 0.0,
			  "constant columns map to 0: %g %g %g", row[0], row[1], row[3]);
		CHECK(isfinite(row[2]) && fabs(fabs(row[2]) - 1.0) < 1e-6,
			  "two-valued column to +-1: %.17g", row[2]);
	}
	/* scale-only keeps a constant column as it is */
	{
		CpPrepTransform ts;
		double		row[NF] = {0.1, 0.0, 1.0, -7.25};

		CHECK(cp_prep_transform_init(&ts, NF, false, alloc_zero), "init");
		cp_prep_transform_from_stats(&ts, &st, NULL, NULL, NULL, NULL);
		cp_prep_apply_dense(&ts, row);
		CHECK(row[0] == 0.1 && row[1] == 0.0 && row[3] == -7.25,
			  "scale-only leaves constants");
	}
	/* variance overflowing to infinity must not give NaN or inf */
	{
		CpPrepStats big;
		CpPrepTransform tb;
		double		stds[1];
		double		row[1] = {1e200};

		CHECK(cp_prep_stats_init(&big, 1, alloc_zero), "init");
		for (int i = 0; i < 10; i++)
		{
			double		r[1] = {(i % 2) ? 1e200 : -1e200};

			cp_prep_stats_add_dense(&big, r);
		}
		CHECK(cp_prep_transform_init(&tb, 1, true, alloc_zero), "init");
		cp_prep_transform_from_stats(&tb, &big, NULL, NULL, NULL, stds);
		cp_prep_apply_dense(&tb, row);
		CHECK(isfinite(tb.scale[0]) && isfinite(tb.offset[0]) && isfinite(row[0]),
			  "overflowing variance: scale %g offset %g x %g",
			  tb.scale[0], tb.offset[0], row[0]);
	}
	/* no rows at all: every column constant, transform the identity */
	{
		CpPrepStats empty;
		CpPrepTransform te;

		CHECK(cp_prep_stats_init(&empty, NF, alloc_zero), "init");
		CHECK(cp_prep_transform_init(&te, NF, true, alloc_zero), "init");
		CHECK(cp_prep_transform_from_stats(&te, &empty, NULL, NULL, NULL, NULL) == NF,
			  "empty stats");
		CHECK(te.scale[2] == 1.0 && te.offset[2] == 0.0, "empty is identity");
	}
}

/* a transform learnt from random data of very different scales */
static void
random_transform(CpPrepTransform *t, int32 nf, bool centred, pg_prng_state *rng)
{
	CpPrepStats st;

	CHECK(cp_prep_stats_init(&st, nf, alloc_zero), "init");
	for (int i = 0; i < 500; i++)
	{
		double		row[16];

		for (int j = 0; j < nf; j++)
			row[j] = j == 3 ? 42.0 : uniform(rng, -1, 1) * pow(10, j % 7 - 2) + j * 100.0;
		cp_prep_stats_add_dense(&st, row);
	}
	CHECK(cp_prep_transform_init(t, nf, centred, alloc_zero), "init");
	cp_prep_transform_from_stats(t, &st, NULL, NULL, NULL, NULL);
}

static void
test_transform_and_weights(void)
{
	enum
	{
		NF = 12, NO = 3, STRIDE = NF + 1
	};
	pg_prng_state rng;
	CpPrepTransform t;
	double		ws[NO * STRIDE];
	double		wo[NO * STRIDE];
	double		inplace[NO * STRIDE];
	double		worst = 0.0;

	pg_prng_seed(&rng, 2024);
	for (int centred = 0; centred <= 1; centred++)
	{
		random_transform(&t, NF, centred, &rng);
		for (int k = 0; k < NO * STRIDE; k++)
			ws[k] = uniform(&rng, -3, 3);
		cp_prep_weights_to_original(&t, ws, wo, NO);
		memcpy(inplace, ws, sizeof(ws));
		cp_prep_weights_to_original(&t, inplace, inplace, NO);
		CHECK(memcmp(inplace, wo, sizeof(wo)) == 0, "in place == out of place");

		/* predictions equal in both spaces, for every output */
		for (int r = 0; r < 1000; r++)
		{
			double		x[NF];
			double		xs[NF];

			for (int j = 0; j < NF; j++)
				x[j] = uniform(&rng, -1, 1) * pow(10, j % 7 - 2) + j * 100.0;
			memcpy(xs, x, sizeof(x));
			cp_prep_apply_dense(&t, xs);
			for (int k = 0; k < NO; k++)
			{
				double		zs = ws[k * STRIDE + NF];
				double		zo = wo[k * STRIDE + NF];
				double		mag = fabs(zs) + fabs(zo);

				for (int j = 0; j < NF; j++)
				{
					zs += ws[k * STRIDE + j] * xs[j];
					zo += wo[k * STRIDE + j] * x[j];
					mag += fabs(ws[k * STRIDE + j] * xs[j]) + fabs(wo[k * STRIDE + j] * x[j]);
				}
				/* relative to the size of the terms: the sums cancel */
				worst = Max(worst, fabs(zs - zo) / mag);
			}
		}
	}
	CHECK(worst < 1e-12, "prediction in both spaces differs by %.3g relative", worst);

	/*
	 * Skipped (one-hot) columns are the identity, stored means/stds 0, and
	 * have no statistics: training's map from features to statistics
	 * columns (first_pass.c), here feature 1 an indicator between two
	 * numeric columns.
	 */
	{
		CpPrepStats st;
		CpPrepTransform tk;
		int32		stats_col[3] = {0, -1, 1};
		double		means[3] = {-1, -1, -1};
		double		stds[3] = {-1, -1, -1};
		double		row[3] = {1, 1, 1};

		CHECK(cp_prep_stats_init(&st, 2, alloc_zero), "init");
		for (int i = 0; i < 10; i++)
		{
			double		r[2] = {i, 2 * i};

			cp_prep_stats_add_dense(&st, r);
		}
		CHECK(cp_prep_transform_init(&tk, 3, true, alloc_zero), "init");
		CHECK(cp_prep_transform_from_stats(&tk, &st, stats_col, NULL, means, stds) == 0,
			  "no constant column");
		CHECK(close_rel(means[2], 9.0, 1e-15) && close_rel(stds[2], 2 * sqrt(8.25), 1e-15),
			  "feature 2 from statistics column 1: %.17g %.17g", means[2], stds[2]);
		CHECK(means[1] == 0.0 && stds[1] == 0.0 && tk.scale[1] == 1.0 &&
			  tk.offset[1] == 0.0, "skip is identity");
		CHECK(close_rel(means[0], 4.5, 1e-15) && close_rel(stds[0], sqrt(8.25), 1e-15),
			  "mean/std of 0..9: %.17g %.17g", means[0], stds[0]);
		cp_prep_apply_dense(&tk, row);
		CHECK(row[1] == 1.0, "indicator unchanged");
		CHECK(close_rel(row[0], (1 - 4.5) / sqrt(8.25), 1e-15), "standardized %.17g", row[0]);

		/* prediction's path (set from stored figures) gives the same bits */
		{
			CpPrepTransform tp;
			bool		same = true;

			CHECK(cp_prep_transform_init(&tp, 3, true, alloc_zero), "init");
			for (int j = 0; j < 3; j++)
				if (stats_col[j] >= 0)
					cp_prep_transform_set(&tp, j, means[j], stds[j]);
			for (int j = 0; j < 3; j++)
				same = same && tp.scale[j] == tk.scale[j] && tp.offset[j] == tk.offset[j];
			CHECK(same, "transform from stored means/stds is bit-identical");
		}
	}

	/* sparse rows: scale-only, zeros stay implicit, indices untouched */
	{
		CpPrepStats st;
		CpPrepTransform ts;
		int32		idx[2] = {0, 2};
		double		val[2] = {4.0, -2.0};
		double		stds[3];

		CHECK(cp_prep_stats_init(&st, 3, alloc_zero), "init");
		for (int i = 0; i < 4; i++)
		{
			int32		ii[2] = {0, 2};
			double		vv[2] = {i == 0 ? 4.0 : 0.0, i == 1 ? -2.0 : 0.0};

			/* explicit zeros must count like implicit ones */
			cp_prep_stats_add_sparse(&st, ii, vv, i < 2 ? 2 : 0);
		}
		CHECK(cp_prep_transform_init(&ts, 3, false, alloc_zero), "init");
		cp_prep_transform_from_stats(&ts, &st, NULL, NULL, NULL, stds);
		/* column 0: {4,0,0,0}: mean 1, var 3 */
		CHECK(close_rel(stds[0], sqrt(3.0), 1e-15), "sparse std %.17g", stds[0]);
		CHECK(ts.offset[0] == 0.0 && ts.offset[2] == 0.0, "no centring");
		cp_prep_apply_sparse(&ts, idx, val, 2);
		CHECK(close_rel(val[0], 4.0 / sqrt(3.0), 1e-15) &&
			  close_rel(val[1], -2.0 / sqrt(0.75), 1e-15) &&
			  idx[0] == 0 && idx[1] == 2, "sparse apply %.17g %.17g", val[0], val[1]);
	}
}

/* ------------------------------------------------------------------ */

static const char *const words[] = {
	"No", "Yes", "yes", "", "a", "ab", "abc", "b", "\xc3\xa9t\xc3\xa9", "Z", "zz", "a\x01"
};

static void
shuffle_idx(int *idx, int n, pg_prng_state *rng)
{
	for (int i = n - 1; i > 0; i--)
	{
		int			j = (int) pg_prng_uint64_range(rng, 0, i);
		int			tmp = idx[i];

		idx[i] = idx[j];
		idx[j] = tmp;
	}
}

static void
test_dictionary(void)
{
	const int	nw = lengthof(words);
	int32		ref_codes[lengthof(words)];
	bool		same_everywhere = true;
	bool		sorted = true;
	pg_prng_state rng;

	pg_prng_seed(&rng, 99);
	for (int trial = 0; trial < 20; trial++)
	{
		CpPrepDict d;
		int			order[lengthof(words)];

		for (int i = 0; i < nw; i++)
			order[i] = i;
		if (trial > 0)
			shuffle_idx(order, nw, &rng);
		CHECK(cp_prep_dict_init(&d, 100, alloc_zero), "dict init");
		CHECK(!cp_prep_dict_contains(&d, words[order[0]], (int32) strlen(words[order[0]])),
			  "an empty dictionary contains nothing");
		/* each value several times, in a random order */
		for (int rep = 0; rep < 3; rep++)
			for (int i = 0; i < nw; i++)
			{
				const char *w = words[order[(i + rep) % nw]];
				CpPrepDictStatus s = cp_prep_dict_add(&d, w, (int32) strlen(w));

				if (s != CP_PREP_DICT_ADDED && s != CP_PREP_DICT_FOUND)
					same_everywhere = false;
			}
		/* what the first pass asks before it charges a value's bytes */
		CHECK(cp_prep_dict_contains(&d, "No", 2) && !cp_prep_dict_contains(&d, "Ye", 2) &&
			  !cp_prep_dict_contains(&d, "Yess", 4), "contains before finish");
		cp_prep_dict_finish(&d);
		CHECK(cp_prep_dict_contains(&d, "Yes", 3) && !cp_prep_dict_contains(&d, "maybe", 5),
			  "contains after finish");
		CHECK(d.n_entries == nw, "entries %d", d.n_entries);
		for (int i = 0; i < nw; i++)
		{
			int32		c = cp_prep_dict_code(&d, words[i], (int32) strlen(words[i]));

			if (trial == 0)
				ref_codes[i] = c;
			else if (c != ref_codes[i])
				same_everywhere = false;
		}
		if (trial == 0)
		{
			/* codes follow bytewise order, prefix first */
			for (int c = 1; c < nw; c++)
			{
				int32		la,
							lb;
				const char *a = cp_prep_dict_value(&d, c - 1, &la);
				const char *b = cp_prep_dict_value(&d, c, &lb);
				int			cmp = memcmp(a, b, Min(la, lb));

				if (cmp > 0 || (cmp == 0 && la >= lb))
					sorted = false;
			}
			{
				int32		len;
				const char *v0 = cp_prep_dict_value(&d, 0, &len);

				CHECK(len == 0 && v0 != NULL, "empty string sorts first");
				CHECK(cp_prep_dict_value(&d, nw, &len) == NULL &&
					  cp_prep_dict_value(&d, -1, &len) == NULL, "out of range code");
			}
			{
				/* a value shared with another copy of its bytes stays itself */
				static const char other[] = "No";
				int32		len;
				const char *mine = cp_prep_dict_share(&d, 1, other);

				CHECK(strcmp(mine, "No") == 0 && mine != other, "the old copy handed back");
				CHECK(cp_prep_dict_value(&d, 1, &len) == other && len == 2 &&
					  cp_prep_dict_code(&d, "No", 2) == 1, "the shared copy in use");
			}
			CHECK(cp_prep_dict_code(&d, "No", 2) == 1 &&
				  cp_prep_dict_code(&d, "Yes", 3) == 2, "No=1 Yes=2 (after \"\")");
			/* unseen values, including a prefix and a longer string */
			CHECK(cp_prep_dict_code(&d, "maybe", 5) == CP_PREP_NO_CODE &&
				  cp_prep_dict_code(&d, "Ye", 2) == CP_PREP_NO_CODE &&
				  cp_prep_dict_code(&d, "Yess", 4) == CP_PREP_NO_CODE,
				  "unseen -> no code");
			/* lengths are explicit: an embedded NUL is a different value */
			CHECK(cp_prep_dict_code(&d, "a\0", 2) == CP_PREP_NO_CODE, "embedded NUL");
		}
	}
	CHECK(same_everywhere, "codes independent of insertion order");
	CHECK(sorted, "codes in bytewise order");

	/* the cap */
	{
		CpPrepDict d;

		CHECK(cp_prep_dict_init(&d, 3, alloc_zero), "init");
		CHECK(cp_prep_dict_add(&d, "a", 1) == CP_PREP_DICT_ADDED, "a");
		CHECK(cp_prep_dict_add(&d, "b", 1) == CP_PREP_DICT_ADDED, "b");
		CHECK(cp_prep_dict_add(&d, "c", 1) == CP_PREP_DICT_ADDED, "c");
		CHECK(cp_prep_dict_add(&d, "d", 1) == CP_PREP_DICT_FULL, "d refused");
		CHECK(cp_prep_dict_add(&d, "a", 1) == CP_PREP_DICT_FOUND, "a still found");
		CHECK(cp_prep_dict_add(&d, "e", 1) == CP_PREP_DICT_FULL, "e refused");
		CHECK(d.n_entries == 3 && d.n_refused == 2, "n_refused %lld",
			  (long long) d.n_refused);
		CHECK(d.total_bytes == 3, "total_bytes %llu",
			  (unsigned long long) d.total_bytes);
	}
	{
		CpPrepDict d;

		CHECK(!cp_prep_dict_init(&d, 0, alloc_zero), "cap 0 refused");
		CHECK(!cp_prep_dict_init(&d, CP_PREP_MAX_CATEGORIES + 1, alloc_zero),
			  "cap too large refused");
	}

	/* many values: the table stays correct under collisions */
	{
		CpPrepDict d;
		char		buf[32];
		bool		ok = true;
		bool		distinct = true;
		uint8	   *seen = calloc(5000, 1);

		CHECK(cp_prep_dict_init(&d, 5000, alloc_zero), "init");
		for (int i = 4999; i >= 0; i--)
		{
			int			len = snprintf(buf, sizeof(buf), "v%d", i * 7919 % 5000);

			ok = ok && cp_prep_dict_add(&d, buf, len) == CP_PREP_DICT_ADDED;
		}
		cp_prep_dict_finish(&d);
		for (int i = 0; i < 5000; i++)
		{
			int			len = snprintf(buf, sizeof(buf), "v%d", i);
			int32		c = cp_prep_dict_code(&d, buf, len);

			if (c < 0 || c >= 5000 || seen[c])
				distinct = false;
			else
				seen[c] = 1;
		}
		CHECK(ok && distinct, "5000 values, 5000 distinct codes");
		free(seen);
	}

	/* the allocator running out is reported, not a crash */
	{
		CpPrepDict d;

		CHECK(cp_prep_dict_init(&d, 4, alloc_zero), "init");
		fail_after = 0;
		CHECK(cp_prep_dict_add(&d, "x", 1) == CP_PREP_DICT_NO_MEMORY, "no memory");
		fail_after = -1;
		CHECK(d.n_entries == 0 && cp_prep_dict_add(&d, "x", 1) == CP_PREP_DICT_ADDED,
			  "usable after a failed allocation");
		fail_after = 1;
		CHECK(!cp_prep_dict_init(&d, 4, alloc_zero), "init reports failure");
		fail_after = -1;
	}
}

/* ------------------------------------------------------------------ */

static void
test_holdout(void)
{
	const int	n_blocks = 1000;
	const int	per_block = 100;	/* 100k rows */
	int64		held = 0;
	int64		held_other_seed = 0;
	int64		both = 0;
	bool		mixed_blocks = true;
	bool		same_reverse = true;
	int			all_or_none = 0;
	double		sum_u = 0;
	uint8	   *first = malloc((Size) n_blocks * per_block);

	for (int b = 0; b < n_blocks; b++)
	{
		int			in_block = 0;

		for (int o = 1; o <= per_block; o++)
		{
			bool		h = cp_prep_holdout(12345, (uint32) b, (uint16) o, 0.2);
			bool		h2 = cp_prep_holdout(12346, (uint32) b, (uint16) o, 0.2);

			first[b * per_block + o - 1] = h;
			held += h;
			in_block += h;
			held_other_seed += h2;
			both += h && h2;
			sum_u += cp_prep_holdout_u(12345, (uint32) b, (uint16) o);
		}
		if (in_block == 0 || in_block == per_block)
			all_or_none++;
	}
	/* sd of the fraction over 1e5 rows: sqrt(.2 * .8 / 1e5) = 0.00126 */
	CHECK(fabs(held / 1e5 - 0.2) < 0.005, "held out %.4f", held / 1e5);
	CHECK(fabs(held_other_seed / 1e5 - 0.2) < 0.005, "other seed %.4f",
		  held_other_seed / 1e5);
	/* independent seeds: overlap about 0.2 * 0.2 */
	CHECK(fabs(both / 1e5 - 0.04) < 0.004, "overlap %.4f", both / 1e5);
	CHECK(fabs(sum_u / 1e5 - 0.5) < 0.005, "mean of u %.4f", sum_u / 1e5);
	/* decided per row: no block of 100 rows goes all one way */
	mixed_blocks = all_or_none == 0;
	CHECK(mixed_blocks, "%d blocks all held out or all kept", all_or_none);

	/* any reading order gives the same decisions */
	for (int b = n_blocks - 1; b >= 0; b--)
		for (int o = per_block; o >= 1; o--)
			if (cp_prep_holdout(12345, (uint32) b, (uint16) o, 0.2) !=
				(bool) first[b * per_block + o - 1])
				same_reverse = false;
	CHECK(same_reverse, "decisions independent of order");

	/* edges */
	CHECK(!cp_prep_holdout(1, 0, 1, 0.0), "0 holds nothing out");
	CHECK(cp_prep_holdout(1, 0, 1, 1.0), "1 holds everything out");
	CHECK(cp_prep_holdout_u(0, 0, 0) >= 0.0 && cp_prep_holdout_u(0, 0, 0) < 1.0,
		  "u in [0,1)");
	CHECK(cp_prep_holdout_u(1, 4294967295u, 65535) < 1.0, "max ctid");
	free(first);
}

static void
test_parse_percent(void)
{
	double		f = -1;
	const char *bad[] = {"0%", "100%", "20", "-5%", " 20%", "20 %", "1e1%",
	"inf%", "nan%", "%", "1.2.3%", ".%", "0x10%", "+5%", "20%%", "", "150%"};

	CHECK(cp_prep_parse_percent("20%", &f) && f == 0.2, "20%% -> %g", f);
	CHECK(cp_prep_parse_percent("2.5%", &f) && f == 0.025, "2.5%% -> %g", f);
	CHECK(cp_prep_parse_percent("99.9%", &f) && close_rel(f, 0.999, 1e-15), "99.9%%");
	CHECK(cp_prep_parse_percent(".5%", &f) && f == 0.005, ".5%%");
	for (int i = 0; i < (int) lengthof(bad); i++)
		CHECK(!cp_prep_parse_percent(bad[i], &f), "'%s' accepted", bad[i]);
}

/* ------------------------------------------------------------------ */

static void
test_divergence(void)
{
	int32		best = -1;
	const double F = CP_PREP_DIVERGENCE_FACTOR;

	/* the case: 3.9e6 growing to 1.5e19 within 10 epochs */
	{
		double		l[] = {3.9e6, 2.1e6, 4.0e7, 9.0e9, 1.5e19};
		int			stop = 0;

		for (int n = 1; n <= 5 && stop == 0; n++)
			if (cp_prep_divergence(l, n, F, &best) != CP_PREP_CONTINUE)
				stop = n;
		/* 9e9 > 1000 * 2.1e6 and above 3.9e6: epoch 4 */
		CHECK(stop == 4, "stopped at epoch %d", stop);
		CHECK(best == 2, "best epoch %d", best);
		CHECK(cp_prep_divergence(l, 4, F, NULL) == CP_PREP_STOP_GROWN, "grown");
	}
	/* not finite */
	{
		double		l[] = {0.7, 0.5, NAN};
		double		l2[] = {0.7, INFINITY};
		double		l3[] = {NAN};

		CHECK(cp_prep_divergence(l, 2, F, &best) == CP_PREP_CONTINUE && best == 2,
			  "finite so far");
		CHECK(cp_prep_divergence(l, 3, F, &best) == CP_PREP_STOP_NOT_FINITE && best == 2,
			  "NaN stops, best stays epoch 2 (%d)", best);
		CHECK(cp_prep_divergence(l2, 2, F, &best) == CP_PREP_STOP_NOT_FINITE && best == 1,
			  "inf stops");
		CHECK(cp_prep_divergence(l3, 1, F, &best) == CP_PREP_STOP_NOT_FINITE && best == 0,
			  "NaN in epoch 1: no best epoch (%d)", best);
	}
	/* converging with noise: never stopped */
	{
		double		l[] = {0.69, 0.40, 0.35, 0.37, 0.34, 0.36, 0.34};
		bool		cont = true;

		for (int n = 1; n <= 7; n++)
			cont = cont && cp_prep_divergence(l, n, F, NULL) == CP_PREP_CONTINUE;
		CHECK(cont, "noisy convergence continues");
		CHECK(cp_prep_divergence_final(l, 7) == CP_PREP_CONTINUE, "no warning");
	}
	/* near-zero best, a big relative jump still below epoch 1: continue */
	{
		double		l[] = {0.3, 1e-6, 1e-5, 0.01};

		CHECK(cp_prep_divergence(l, 4, F, &best) == CP_PREP_CONTINUE && best == 2,
			  "separable data fluctuation continues");
	}
	/* grown by 999x: continue; by 1001x and above epoch 1: stop */
	{
		double		a[] = {1.0, 0.001, 0.999};
		double		b[] = {1.0, 0.001, 1.001};

		CHECK(cp_prep_divergence(a, 3, F, NULL) == CP_PREP_CONTINUE, "999x");
		CHECK(cp_prep_divergence(b, 3, F, NULL) == CP_PREP_STOP_GROWN, "1001x");
	}
	/* slowly rising, never 1000x: the end warns */
	{
		double		l[] = {1.0, 1.2, 1.5, 2.0};

		CHECK(cp_prep_divergence(l, 4, F, NULL) == CP_PREP_CONTINUE, "slow rise");
		CHECK(cp_prep_divergence_final(l, 4) == CP_PREP_WARN_ABOVE_FIRST, "warns");
		CHECK(cp_prep_divergence_final(l, 1) == CP_PREP_CONTINUE, "one epoch: nothing");
		CHECK(cp_prep_divergence(l, 0, F, &best) == CP_PREP_CONTINUE && best == 0,
			  "no epochs");
	}
}

static void
test_sizes(void)
{
	Size		bytes = 0;
	CpPrepStats st;
	CpPrepTransform t;

	CHECK(cp_prep_stats_bytes(10, &bytes) && bytes == 10 * 24, "bytes %zu", bytes);
	CHECK(!cp_prep_stats_bytes(-1, &bytes), "negative");
	CHECK(!cp_prep_stats_init(&st, 0, alloc_zero), "0 features");
	CHECK(!cp_prep_transform_init(&t, -3, true, alloc_zero), "negative features");
	fail_after = 2;
	CHECK(!cp_prep_stats_init(&st, 5, alloc_zero), "allocator failure");
	fail_after = 1;
	CHECK(!cp_prep_transform_init(&t, 5, true, alloc_zero), "allocator failure");
	fail_after = -1;
}

/*
 * The dense update runs two features a step (SSE2); it must give exactly
 * the moments of the one-value update, which the sparse update (a row
 * whose indices are every feature) still uses.
 */
static void
test_dense_matches_scalar(void)
{
	int32		sizes[] = {1, 2, 3, 5, 8, 28};

	for (int s = 0; s < lengthof(sizes); s++)
	{
		int32		nf = sizes[s];
		CpPrepStats fast;
		CpPrepStats viasparse;
		pg_prng_state rng;
		double		row[28];
		int32		idx[28];
		bool		same = true;

		pg_prng_seed(&rng, 7 + s);
		CHECK(cp_prep_stats_init(&fast, nf, alloc_zero) &&
			  cp_prep_stats_init(&viasparse, nf, alloc_zero), "init");
		for (int32 j = 0; j < nf; j++)
			idx[j] = j;
		for (int i = 0; i < 5000; i++)
		{
			for (int32 j = 0; j < nf; j++)
				row[j] = (pg_prng_double(&rng) - 0.3) * (1.0 + j) * 1e3 + j;
			cp_prep_stats_add_dense(&fast, row);
			cp_prep_stats_add_sparse(&viasparse, idx, row, nf);
		}
		for (int32 j = 0; j < nf; j++)
			if (fast.count[j] != viasparse.count[j] ||
				fast.mean[j] != viasparse.mean[j] || fast.m2[j] != viasparse.m2[j])
				same = false;
		CHECK(same && fast.n_rows == viasparse.n_rows,
			  "dense statistics of %d features differ from the one-value update", nf);
	}
}

int
main(void)
{
	test_dense_stats();
	test_sparse_stats();
	test_filled_stats();
	test_median();
	test_dense_matches_scalar();
	test_constant_columns();
	test_transform_and_weights();
	test_dictionary();
	test_holdout();
	test_parse_percent();
	test_divergence();
	test_sizes();
	free_all();
	printf("%d passed, %d failed\n", n_passed, n_failed);
	return n_failed == 0 ? 0 : 1;
}
