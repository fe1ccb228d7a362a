/*-------------------------------------------------------------------------
 *
 * preprocess.c
 *	  Per-feature statistics, the standardizing transform and its inverse
 *	  on the weights, one-hot dictionaries, the per-row holdout decision
 *	  and the divergence rules.  See preprocess.h and docs/preprocessing.md.
 *
 *-------------------------------------------------------------------------
 */
#include "c.h"

#ifdef __SSE2__
#include <emmintrin.h>
#endif

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/int.h"

#include "preprocess.h"

/* ---------------------------------------------------------------------
 * Statistics
 * ---------------------------------------------------------------------
 */

/* Bytes of the per-feature arrays; false when the size overflows. */
bool
cp_prep_stats_bytes(int32 n_features, Size *bytes)
{
	uint64		per_feature = sizeof(int64) + 2 * sizeof(double);
	uint64		total;

	if (n_features < 0)
		return false;
	if (pg_mul_u64_overflow((uint64) n_features, per_feature, &total) ||
		total > (uint64) SIZE_MAX)
		return false;
	*bytes = (Size) total;
	return true;
}

bool
cp_prep_stats_init(CpPrepStats *st, int32 n_features, CpAllocZero alloc)
{
	Size		bytes;
	Size		n;

	memset(st, 0, sizeof(*st));
	if (n_features <= 0 || !cp_prep_stats_bytes(n_features, &bytes))
		return false;
	n = (Size) n_features;
	st->n_features = n_features;
	st->count = alloc(n * sizeof(int64));
	st->mean = alloc(n * sizeof(double));
	st->m2 = alloc(n * sizeof(double));
	if (st->count == NULL || st->mean == NULL || st->m2 == NULL)
		return false;
	return true;
}

void
cp_prep_stats_reset(CpPrepStats *st)
{
	Size		n = (Size) st->n_features;

	st->n_rows = 0;
	memset(st->count, 0, n * sizeof(int64));
	memset(st->mean, 0, n * sizeof(double));
	memset(st->m2, 0, n * sizeof(double));
}

/* Welford's update of feature j with one value. */
static inline void
stats_add_value(CpPrepStats *st, int32 j, double x)
{
	int64		c = ++st->count[j];
	double		delta = x - st->mean[j];

	st->mean[j] += delta / (double) c;
	st->m2[j] += delta * (x - st->mean[j]);
}

/*
 * A dense row.  Values must be finite: the row conversion already refuses
 * NaN and infinity (cp_check_finite), and one of them would poison the
 * feature's moments for good.
 */
void
cp_prep_stats_add_dense(CpPrepStats *st, const double *x)
{
	int32		j = 0;

	st->n_rows++;
#ifdef __SSE2__

	/*
	 * Two features a step: the division of Welford's update is most of its
	 * cost, and a divpd does two.  Each lane does stats_add_value's
	 * operations in the same order (IEEE division, multiplication and
	 * addition are exactly rounded), so the moments are the same doubles
	 * (tests/unit/test_preprocess.c).
	 */
	if (st->n_rows < (INT64CONST(1) << 52))
	{
		/*
		 * A count c below 2^52 (no count exceeds n_rows) converts to a
		 * double exactly as (2^52 + c) - 2^52: the bits of 2^52 OR-ed with
		 * c, minus 2^52.  Integer and double lanes, no scalar round trip.
		 */
		const __m128i one = _mm_set1_epi64x(1);
		const __m128i two52_bits = _mm_set1_epi64x(INT64CONST(0x4330000000000000));
		const __m128d two52 = _mm_set1_pd(4503599627370496.0);

		for (; j + 2 <= st->n_features; j += 2)
		{
			__m128i		cnt = _mm_add_epi64(_mm_loadu_si128((const __m128i *) (st->count + j)), one);
			__m128d		c = _mm_sub_pd(_mm_castsi128_pd(_mm_or_si128(cnt, two52_bits)), two52);
			__m128d		xv = _mm_loadu_pd(x + j);
			__m128d		mean = _mm_loadu_pd(st->mean + j);
			__m128d		delta = _mm_sub_pd(xv, mean);

			_mm_storeu_si128((__m128i *) (st->count + j), cnt);
			mean = _mm_add_pd(mean, _mm_div_pd(delta, c));
			_mm_storeu_pd(st->mean + j, mean);
			_mm_storeu_pd(st->m2 + j,
						  _mm_add_pd(_mm_loadu_pd(st->m2 + j),
									 _mm_mul_pd(delta, _mm_sub_pd(xv, mean))));
		}
	}
#endif
	for (; j < st->n_features; j++)
		stats_add_value(st, j, x[j]);
}

/*
 * A sparse row: only the stored entries are added; the row's implicit zeros
 * are accounted for by n_rows.  Indices must be distinct within the row (the
 * engine's sparse layout guarantees it) and below n_features.
 */
void
cp_prep_stats_add_sparse(CpPrepStats *st, const int32 *indices,
						 const double *values, int64 nnz)
{
	st->n_rows++;
	for (int64 k = 0; k < nnz; k++)
		stats_add_value(st, indices[k], values[k]);
}

/*
 * Chan, Golub and LeVeque's combination of two partial results: exact in
 * exact arithmetic, and stable because it adds deviations, not raw sums of
 * squares.  The same formula folds the implicit zeros of sparse rows in.
 */
static void
combine(int64 na, double ma, double m2a, int64 nb, double mb, double m2b,
		int64 *n, double *mean, double *m2)
{
	int64		nt = na + nb;
	double		delta = mb - ma;

	if (nb == 0)
	{
		*n = na;
		*mean = ma;
		*m2 = m2a;
		return;
	}
	if (na == 0)
	{
		*n = nb;
		*mean = mb;
		*m2 = m2b;
		return;
	}
	*n = nt;
	*mean = ma + delta * ((double) nb / (double) nt);
	*m2 = m2a + m2b + delta * delta * ((double) na * (double) nb / (double) nt);
}

void
cp_prep_stats_merge(CpPrepStats *into, const CpPrepStats *from)
{
	Assert(into->n_features == from->n_features);
	for (int32 j = 0; j < into->n_features; j++)
	{
		int64		na = into->count[j];
		int64		nb = from->count[j];

		combine(na, into->mean[j], into->m2[j], nb, from->mean[j], from->m2[j],
				&into->count[j], &into->mean[j], &into->m2[j]);
	}
	into->n_rows += from->n_rows;
}

/*
 * Mean and population variance (divided by n, as scikit-learn's
 * StandardScaler does) of feature j over all rows, implicit zeros included.
 * No rows: mean 0, variance 0.
 */
void
cp_prep_stats_moments(const CpPrepStats *st, int32 j, double *mean,
					  double *var)
{
	cp_prep_stats_moments_filled(st, j, 0.0, mean, var);
}

/*
 * The same, with the values not seen (n_rows - count[j]: a sparse row's
 * implicit zeros, a dense row's NULLs) taken as fill instead of 0: the
 * moments of the column after imputation, which a scikit-learn pipeline
 * of SimpleImputer then StandardScaler scales by.  Imputing the mean of
 * the values seen leaves the mean and the sum of squared deviations as
 * they are and divides it by every row.
 */
void
cp_prep_stats_moments_filled(const CpPrepStats *st, int32 j, double fill,
							 double *mean, double *var)
{
	int64		n;
	double		m;
	double		m2;

	combine(st->count[j], st->mean[j], st->m2[j],
			st->n_rows - st->count[j], fill, 0.0, &n, &m, &m2);
	if (n == 0)
	{
		*mean = 0.0;
		*var = 0.0;
		return;
	}
	*mean = m;
	*var = m2 > 0.0 ? m2 / (double) n : 0.0;
}

/* ---------------------------------------------------------------------
 * Median (missing => 'median')
 * ---------------------------------------------------------------------
 */

static inline void
swap_doubles(double *v, int64 i, int64 j)
{
	double		t = v[i];

	v[i] = v[j];
	v[j] = t;
}

/* Sift v[i] down the max-heap v[lo, lo + n), indices relative to lo. */
static void
sift_down(double *v, int64 lo, int64 n, int64 i)
{
	for (;;)
	{
		int64		big = i;
		int64		l = 2 * i + 1;

		if (l < n && v[lo + l] > v[lo + big])
			big = l;
		if (l + 1 < n && v[lo + l + 1] > v[lo + big])
			big = l + 1;
		if (big == i)
			return;
		swap_doubles(v, lo + i, lo + big);
		i = big;
	}
}

/*
 * Put the k-th smallest of v[0, n) at v[k], the smaller ones before it
 * and the larger after: quickselect with a median-of-three pivot and a
 * three-way partition (a column of many equal values, such as a lab
 * measure rounded to one decimal, finishes in one pass), and heapselect
 * once budget rounds have passed (cp_prep_median gives 2 log2 n + 2: an
 * adversarial order cannot make it quadratic).  In place, no allocation.
 */
void
cp_prep_select_kth(double *v, int64 n, int64 k, int budget)
{
	int64		lo = 0;
	int64		hi = n - 1;

	while (hi > lo)
	{
		int64		mid = lo + (hi - lo) / 2;
		double		pivot;
		int64		lt = lo;
		int64		gt = hi;
		int64		i = lo;

		if (--budget < 0)
		{
			/* heapselect: a max-heap of v[lo, k], then the rest through it */
			int64		n = k - lo + 1;

			for (int64 j = n / 2 - 1; j >= 0; j--)
				sift_down(v, lo, n, j);
			for (int64 j = k + 1; j <= hi; j++)
				if (v[j] < v[lo])
				{
					swap_doubles(v, lo, j);
					sift_down(v, lo, n, 0);
				}
			swap_doubles(v, lo, k);
			return;
		}
		/* the median of v[lo], v[mid], v[hi] */
		if (v[mid] < v[lo])
			swap_doubles(v, mid, lo);
		if (v[hi] < v[lo])
			swap_doubles(v, hi, lo);
		if (v[hi] < v[mid])
			swap_doubles(v, hi, mid);
		pivot = v[mid];
		/* v[lo, lt) < pivot, v[lt, i) == pivot, v(gt, hi] > pivot */
		while (i <= gt)
		{
			if (v[i] < pivot)
				swap_doubles(v, lt++, i++);
			else if (v[i] > pivot)
				swap_doubles(v, i, gt--);
			else
				i++;
		}
		if (k < lt)
			hi = lt - 1;
		else if (k > gt)
			lo = gt + 1;
		else
			return;
	}
}

/*
 * The median of v[0, n) (n > 0, every value finite), as numpy's median:
 * the middle value of an odd count, the mean of the two middle ones of an
 * even count.  v is reordered.  Linear in n on the average, n log n at
 * worst.
 */
double
cp_prep_median(double *v, int64 n)
{
	int64		k = (n - 1) / 2;
	int			budget = 2;
	double		low;
	double		high;

	for (int64 m = n; m > 1; m >>= 1)
		budget += 2;
	cp_prep_select_kth(v, n, k, budget);
	low = v[k];
	if (n % 2 == 1)
		return low;
	/* the next one up is the least of what select_kth left above k */
	high = v[k + 1];
	for (int64 i = k + 2; i < n; i++)
		if (v[i] < high)
			high = v[i];
	return (low + high) / 2.0;
}

/*
 * A column whose variance is within the rounding error of its computation
 * is constant: a column of n copies of 0.1 gives a variance of about
 * 1e-34, not 0, and dividing by its square root would blow rounding noise
 * up to values of order 1.  The bound is scikit-learn's
 * (_is_constant_feature): n eps var + (n eps mean)^2.
 */
bool
cp_prep_is_constant(double mean, double var, int64 n)
{
	double		ne = (double) n * DBL_EPSILON;

	if (!(var > 0.0))
		return true;
	return var <= ne * var + (ne * mean) * (ne * mean);
}

/* ---------------------------------------------------------------------
 * Transform
 * ---------------------------------------------------------------------
 */

/* Allocates the transform; every column starts as the identity. */
bool
cp_prep_transform_init(CpPrepTransform *t, int32 n_features, bool centred,
					   CpAllocZero alloc)
{
	uint64		bytes;

	memset(t, 0, sizeof(*t));
	if (n_features <= 0 ||
		pg_mul_u64_overflow((uint64) n_features, sizeof(double), &bytes) ||
		bytes > (uint64) SIZE_MAX)
		return false;
	t->n_features = n_features;
	t->centred = centred;
	t->scale = alloc((Size) bytes);
	t->offset = alloc((Size) bytes);
	if (t->scale == NULL || t->offset == NULL)
		return false;
	for (int32 j = 0; j < n_features; j++)
		t->scale[j] = 1.0;
	return true;
}

/*
 * Column j from its stored mean and standard deviation: what prediction
 * does with the model's stored figures, and training with the learnt ones,
 * so both compute the same bits.  std == 0 (constant) keeps scale 1.
 */
void
cp_prep_transform_set(CpPrepTransform *t, int32 j, double mean, double std)
{
	double		scale = (std > 0.0 && isfinite(std)) ? 1.0 / std : 1.0;

	t->scale[j] = scale;
	t->offset[j] = t->centred ? -mean * scale : 0.0;
}

/*
 * Builds the transform from learnt statistics.  Feature j is statistics
 * column stats_col[j], or, when stats_col is NULL, column j; stats_col[j]
 * < 0 leaves feature j as the identity: one-hot and missing indicators are
 * not scaled, as in a scikit-learn pipeline of StandardScaler on numbers
 * and OneHotEncoder on categories, and have no statistics.  fill[j] (fill
 * may be NULL: 0) is what the rows the statistics did not see hold in
 * feature j: a sparse row's implicit zeros, or the value a NULL is imputed
 * with, so that the feature is scaled as imputed
 * (cp_prep_stats_moments_filled).  means[] and stds[] (either may be
 * NULL) receive what the model must store: std 0 for a constant or
 * skipped column, mean 0 for a skipped one (and for every column when not
 * centred it is still the true mean, for information).  Returns the
 * number of constant columns.
 */
int32
cp_prep_transform_from_stats(CpPrepTransform *t, const CpPrepStats *st,
							 const int32 *stats_col, const double *fill,
							 double *means, double *stds)
{
	int32		n_constant = 0;

	Assert(stats_col != NULL || t->n_features <= st->n_features);
	for (int32 j = 0; j < t->n_features; j++)
	{
		int32		s = stats_col != NULL ? stats_col[j] : j;
		double		mean;
		double		var;
		double		std;

		Assert(s < st->n_features);
		if (s < 0)
		{
			mean = 0.0;
			std = 0.0;
			t->scale[j] = 1.0;
			t->offset[j] = 0.0;
		}
		else
		{
			cp_prep_stats_moments_filled(st, s, fill != NULL ? fill[j] : 0.0, &mean, &var);
			if (cp_prep_is_constant(mean, var, st->n_rows))
			{
				std = 0.0;
				n_constant++;
			}
			else
				std = sqrt(var);
			cp_prep_transform_set(t, j, mean, std);
		}
		if (means != NULL)
			means[j] = mean;
		if (stds != NULL)
			stds[j] = std;
	}
	return n_constant;
}

/*
 * A dense row in place: one multiplication, then one addition, per value
 * (never a fused multiply-add, so every caller gets the same doubles as
 * datum_convert.c's copy that transforms), two values a step.
 */
void
cp_prep_apply_dense(const CpPrepTransform *t, double *x)
{
	const double *scale = t->scale;
	const double *offset = t->offset;
	int32		j = 0;

#ifdef __SSE2__
	for (; j + 2 <= t->n_features; j += 2)
		_mm_storeu_pd(x + j, _mm_add_pd(_mm_mul_pd(_mm_loadu_pd(x + j),
												   _mm_loadu_pd(scale + j)),
										_mm_loadu_pd(offset + j)));
#endif
	for (; j < t->n_features; j++)
		x[j] = x[j] * scale[j] + offset[j];
}

/*
 * A sparse row's stored values in place.  Only a scale-only transform may
 * be applied to sparse rows: centring would turn every implicit zero into
 * -mean/std and the row would no longer be sparse.
 */
void
cp_prep_apply_sparse(const CpPrepTransform *t, const int32 *indices,
					 double *values, int64 nnz)
{
	const double *scale = t->scale;

	Assert(!t->centred);
	for (int64 k = 0; k < nnz; k++)
		values[k] *= scale[indices[k]];
}

/*
 * Weights learnt on x' = x s + o back to the units of x, for each output:
 *   w . x' + b = (w s) . x + (b + w . o),
 * so w_orig = w s (= w / std) and b_orig = b + w . o (= b - sum w mean/std).
 * The layout is CpModel's: n_outputs blocks of n_features weights and a
 * bias.  w_orig may be w_scaled (in place).
 */
void
cp_prep_weights_to_original(const CpPrepTransform *t, const double *w_scaled,
							double *w_orig, int32 n_outputs)
{
	int32		nf = t->n_features;
	int64		stride = (int64) nf + 1;

	for (int32 k = 0; k < n_outputs; k++)
	{
		const double *ws = w_scaled + k * stride;
		double	   *wo = w_orig + k * stride;
		double		bias = ws[nf];

		for (int32 j = 0; j < nf; j++)
		{
			double		w = ws[j];

			bias += w * t->offset[j];
			wo[j] = w * t->scale[j];
		}
		wo[nf] = bias;
	}
}

/* ---------------------------------------------------------------------
 * One-hot dictionaries
 * ---------------------------------------------------------------------
 */

/* splitmix64's finaliser (as in grab.c): a good 64-bit mix */
static inline uint64
prep_mix64(uint64 z)
{
	z = (z ^ (z >> 30)) * UINT64CONST(0xBF58476D1CE4E5B9);
	z = (z ^ (z >> 27)) * UINT64CONST(0x94D049BB133111EB);
	return z ^ (z >> 31);
}

/* FNV-1a over the bytes, then mixed so that the low bits index well */
static uint64
prep_hash(const char *str, int32 len)
{
	uint64		h = UINT64CONST(0xcbf29ce484222325);

	for (int32 i = 0; i < len; i++)
	{
		h ^= (uint8) str[i];
		h *= UINT64CONST(0x100000001b3);
	}
	return prep_mix64(h ^ (uint64) len);
}

bool
cp_prep_dict_init(CpPrepDict *d, int32 max_categories, CpAllocZero alloc)
{
	uint32		slots = 4;

	memset(d, 0, sizeof(*d));
	if (max_categories <= 0 || max_categories > CP_PREP_MAX_CATEGORIES)
		return false;
	/* at most half full: short probe sequences */
	while (slots < 2 * (uint32) max_categories)
		slots <<= 1;
	d->max_categories = max_categories;
	d->mask = slots - 1;
	d->alloc = alloc;
	d->slots = alloc(sizeof(int32) * (Size) slots);
	d->entries = alloc(sizeof(CpPrepDictEntry) * (Size) max_categories);
	d->by_code = alloc(sizeof(int32) * (Size) max_categories);
	return d->slots != NULL && d->entries != NULL && d->by_code != NULL;
}

/* Slot of str (linear probing): its entry, or the empty slot it would take. */
static uint32
dict_find(const CpPrepDict *d, const char *str, int32 len, uint64 h)
{
	uint32		i = (uint32) h & d->mask;

	for (;;)
	{
		int32		e = d->slots[i];

		if (e == 0)
			return i;
		else
		{
			const CpPrepDictEntry *ent = &d->entries[e - 1];

			if (ent->hash == h && ent->len == len &&
				memcmp(ent->str, str, (size_t) len) == 0)
				return i;
		}
		i = (i + 1) & d->mask;
	}
}

/*
 * Learns one value.  FULL means a new value arrived when max_categories
 * were known already: the caller raises an ERROR naming the column and
 * saying it has more than max_categories distinct values (n_refused counts
 * the refusals, should the caller rather go on and report how many).
 * The cap bounds the count, not the size: the caller also checks
 * total_bytes against its memory budget (values can be long strings).
 */
CpPrepDictStatus
cp_prep_dict_add(CpPrepDict *d, const char *str, int32 len)
{
	uint64		h = prep_hash(str, len);
	uint32		slot;
	CpPrepDictEntry *ent;
	char	   *copy;

	Assert(!d->finished && len >= 0);
	slot = dict_find(d, str, len, h);
	if (d->slots[slot] != 0)
		return CP_PREP_DICT_FOUND;
	if (d->n_entries >= d->max_categories)
	{
		d->n_refused++;
		return CP_PREP_DICT_FULL;
	}
	copy = d->alloc((Size) len + 1);
	if (copy == NULL)
		return CP_PREP_DICT_NO_MEMORY;
	memcpy(copy, str, (size_t) len);
	ent = &d->entries[d->n_entries];
	ent->str = copy;
	ent->len = len;
	ent->hash = h;
	ent->code = CP_PREP_NO_CODE;
	d->n_entries++;
	d->total_bytes += (uint64) len;
	d->slots[slot] = d->n_entries;
	return CP_PREP_DICT_ADDED;
}

/* Whether the value is learnt already (before or after finish). */
bool
cp_prep_dict_contains(const CpPrepDict *d, const char *str, int32 len)
{
	return d->slots[dict_find(d, str, len, prep_hash(str, len))] != 0;
}

/* bytewise order, a proper prefix first: independent of locale */
static int
dict_cmp(const void *a, const void *b, void *arg)
{
	const CpPrepDictEntry *entries = arg;
	const CpPrepDictEntry *x = &entries[*(const int32 *) a];
	const CpPrepDictEntry *y = &entries[*(const int32 *) b];
	int			c = memcmp(x->str, y->str, (size_t) Min(x->len, y->len));

	if (c != 0)
		return c;
	return (x->len > y->len) - (x->len < y->len);
}

/*
 * Assigns the codes: 0..n_entries-1 in sorted order, so that the same set
 * of values gives the same codes whatever order the rows came in.
 */
void
cp_prep_dict_finish(CpPrepDict *d)
{
	for (int32 i = 0; i < d->n_entries; i++)
		d->by_code[i] = i;
	qsort_arg(d->by_code, (size_t) d->n_entries, sizeof(int32), dict_cmp,
			  d->entries);
	for (int32 c = 0; c < d->n_entries; c++)
		d->entries[d->by_code[c]].code = c;
	d->finished = true;
}

/* The code of a value, or CP_PREP_NO_CODE when it was never learnt. */
int32
cp_prep_dict_code(const CpPrepDict *d, const char *str, int32 len)
{
	uint64		h = prep_hash(str, len);
	uint32		slot = dict_find(d, str, len, h);
	int32		e = d->slots[slot];

	Assert(d->finished);
	return e == 0 ? CP_PREP_NO_CODE : d->entries[e - 1].code;
}

/* The value of a code (what the model stores), NULL when out of range. */
const char *
cp_prep_dict_value(const CpPrepDict *d, int32 code, int32 *len)
{
	const CpPrepDictEntry *ent;

	Assert(d->finished);
	if (code < 0 || code >= d->n_entries)
		return NULL;
	ent = &d->entries[d->by_code[code]];
	*len = ent->len;
	return ent->str;
}

/*
 * Make the value of code the caller's copy str (the same bytes, living as
 * long as the dictionary), and hand back the dictionary's own copy for the
 * caller to free: a value stored elsewhere need not be held twice.
 */
const char *
cp_prep_dict_share(CpPrepDict *d, int32 code, const char *str)
{
	CpPrepDictEntry *ent;
	const char *old;

	Assert(d->finished && code >= 0 && code < d->n_entries);
	ent = &d->entries[d->by_code[code]];
	Assert(memcmp(ent->str, str, (size_t) ent->len) == 0);
	old = ent->str;
	ent->str = str;
	return old;
}

/* ---------------------------------------------------------------------
 * Holdout
 * ---------------------------------------------------------------------
 */

/*
 * '20%', '2.5%': a number strictly between 0 and 100 followed by '%'.
 * Only digits and one '.' are accepted before the '%' (no sign, spaces,
 * exponents, "inf" or hexadecimal that strtod would take).
 */
bool
cp_prep_parse_percent(const char *s, double *fraction)
{
	size_t		len = strlen(s);
	int			n_digits = 0;
	int			n_dots = 0;
	char	   *end;
	double		p;

	if (len < 2 || len > 32 || s[len - 1] != '%')
		return false;
	for (size_t i = 0; i + 1 < len; i++)
	{
		if (s[i] >= '0' && s[i] <= '9')
			n_digits++;
		else if (s[i] == '.')
			n_dots++;
		else
			return false;
	}
	if (n_digits == 0 || n_dots > 1)
		return false;
	p = strtod(s, &end);
	if (end != s + len - 1 || !(p > 0.0 && p < 100.0))
		return false;
	*fraction = p / 100.0;
	return true;
}

/*
 * A uniform number in [0, 1) from (seed, ctid).  The seed is mixed on its
 * own first so that neighbouring seeds give unrelated splits.
 */
double
cp_prep_holdout_u(uint64 seed, uint32 block, uint16 offset)
{
	uint64		tid = ((uint64) block << 16) | offset;
	uint64		h = prep_mix64(prep_mix64(seed ^ UINT64CONST(0x686f6c646f7574)) ^
							   prep_mix64(tid));

	return (double) (h >> 11) * (1.0 / 9007199254740992.0);
}

bool
cp_prep_holdout(uint64 seed, uint32 block, uint16 offset, double fraction)
{
	return cp_prep_holdout_u(seed, block, offset) < fraction;
}

/* ---------------------------------------------------------------------
 * Divergence
 * ---------------------------------------------------------------------
 */

/*
 * losses[0..n-1]: the training loss of epochs 1..n.  Stops when the last
 * loss is not finite, or when it is more than factor times the best earlier
 * epoch's and also above the first epoch's.  The second condition keeps a
 * run that reached a near-zero loss (separable data under hinge loss) from
 * being stopped by an ordinary fluctuation that is still below where
 * training started.  *best_epoch (may be NULL) receives the 1-based epoch
 * of the lowest finite loss, which is the one to keep.
 */
CpPrepDivergence
cp_prep_divergence(const double *losses, int32 n, double factor,
				   int32 *best_epoch)
{
	double		last;
	double		best = 0.0;
	int32		best_i = -1;

	if (n <= 0)
	{
		if (best_epoch != NULL)
			*best_epoch = 0;
		return CP_PREP_CONTINUE;
	}
	for (int32 i = 0; i < n - 1; i++)
	{
		if (isfinite(losses[i]) && (best_i < 0 || losses[i] < best))
		{
			best = losses[i];
			best_i = i;
		}
	}
	last = losses[n - 1];
	if (isfinite(last) && (best_i < 0 || last < best))
	{
		if (best_epoch != NULL)
			*best_epoch = n;
	}
	else if (best_epoch != NULL)
		*best_epoch = best_i + 1;

	if (!isfinite(last))
		return CP_PREP_STOP_NOT_FINITE;
	if (best_i >= 0 && last > factor * best && last > losses[0])
		return CP_PREP_STOP_GROWN;
	return CP_PREP_CONTINUE;
}

/* At the end: WARN_ABOVE_FIRST when the last loss is above the first. */
CpPrepDivergence
cp_prep_divergence_final(const double *losses, int32 n)
{
	if (n >= 2 && losses[n - 1] > losses[0])
		return CP_PREP_WARN_ABOVE_FIRST;
	return CP_PREP_CONTINUE;
}
