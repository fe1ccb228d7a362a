/*-------------------------------------------------------------------------
 *
 * linear_model.c
 *	  SGD for SVM, logistic, linear and softmax regression on dense and
 *	  sparse rows.
 *
 * Per-tuple updates follow Algorithm 1 of the CorgiPile paper; with
 * batch_size > 1 the gradients of consecutive rows are averaged and applied
 * once.  Regularisation is applied with every update: L2 as a shrink by
 * (1 - lr*l2), then L1 as a soft threshold by lr*l1 (truncated gradient).
 * For sparse rows both are applied lazily, only to the weights the row (or
 * mini-batch) touches, as Bismarck and the published CorgiPile code do, so
 * a sparse step costs O(nnz) instead of O(d).  Biases are never
 * regularised.
 *
 * The binary classifiers see labels as -1/+1 and softmax as class numbers
 * 0..K-1; the caller maps the table's own labels onto those.
 *
 *-------------------------------------------------------------------------
 */
#include "c.h"

#include <math.h>
#include <signal.h>
#include <string.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

#include "common/int.h"

#include "grab.h"
#include "linear_model.h"

/* how many rows the training loop runs between looks at the cancel flag */
#define CP_CANCEL_CHECK_ROWS 256
/*
 * Averaged SGD: a snapshot of the weights is added to the average every
 * this many dense rows (a snapshot costs one pass over the weights, a dense
 * step two: about 6% more arithmetic).  Sparse rows touch few weights, so
 * their snapshots are spaced so that they cost about as much
 * (cp_model_train).  Averaging every k-th iterate instead of every one
 * changes the average little: with a constant step the iterates are
 * correlated over about 1 / (lr * curvature) steps, far more than k.
 */
#define CP_AVG_EVERY_DENSE 8
/* dense rows are gathered in chunks of at most this many bytes or rows */
#define CP_GATHER_BYTES (256 * 1024)
#define CP_GATHER_MAX_ROWS 4096

void
cp_cancel_init(CpCancel *c, volatile const sig_atomic_t *signal_flag)
{
	atomic_init(&c->raised, 0);
	c->signal_flag = signal_flag;
}

/* Ask the loop to stop; safe from any thread. */
void
cp_cancel_raise(CpCancel *c)
{
	atomic_store(&c->raised, 1);
}

bool
cp_cancel_requested(CpCancel *c)
{
	if (c == NULL)
		return false;
	if (atomic_load_explicit(&c->raised, memory_order_relaxed))
		return true;
	return c->signal_flag != NULL && *c->signal_flag != 0;
}

/* dense rows gathered per chunk for a model of n_features */
static int
gather_rows_for(int n_features)
{
	/* about 256 kB of gathered rows: well inside L2 */
	return (int) Max(1, Min(CP_GATHER_MAX_ROWS,
							CP_GATHER_BYTES / (sizeof(double) * (Size) Max(n_features, 1))));
}

/*
 * a += b and a * b on sizes, with PostgreSQL's overflow-checked helpers
 * (common/int.h needs only c.h); false when the result does not fit.
 */
static inline bool
size_add(uint64 *a, uint64 b)
{
	return !pg_add_u64_overflow(*a, b, a);
}

static inline bool
size_mul(uint64 a, uint64 b, uint64 *out)
{
	return !pg_mul_u64_overflow(a, b, out);
}

/*
 * The bytes cp_model_init allocates for such a model, and its number of
 * weights.  Returns false when the sizes do not fit: more than
 * CP_MAX_WEIGHTS weights, or a byte count that overflows.  The caller
 * checks this before cp_model_init, which cannot report an error itself.
 */
bool
cp_model_bytes(CpModelKind kind, int n_features, int n_outputs, bool sparse,
			   int batch_size, uint64 *bytes, int64 *n_weights)
{
	uint64		outputs = (kind == CP_MODEL_SOFTMAX) ? (uint64) n_outputs : 1;
	uint64		nw;
	uint64		total = 0;
	uint64		part;

	*bytes = 0;
	*n_weights = 0;
	if (n_features < 0 || n_outputs < 1 || batch_size < 1)
		return false;
	if (!size_mul(outputs, (uint64) n_features + 1, &nw) ||
		nw > (uint64) CP_MAX_WEIGHTS)
		return false;
	*n_weights = (int64) nw;
	/* w, z and g */
	if (!size_mul(nw, sizeof(double), &part) || !size_add(&total, part) ||
		!size_add(&total, 2 * outputs * sizeof(double)))
		return false;
	if (!sparse)
	{
		uint64		rows = (uint64) gather_rows_for(n_features);

		if (!size_mul((uint64) n_features * sizeof(double), rows, &part) ||
			!size_add(&total, part) || !size_add(&total, rows * sizeof(double)))
			return false;
	}
	if (batch_size > 1)
	{
		if (!size_mul(nw, sizeof(double), &part) || !size_add(&total, part))
			return false;
		if (sparse && !size_add(&total, (uint64) Max(n_features, 1) *
								(sizeof(int32) + sizeof(uint8))))
			return false;
	}
	*bytes = total;
	return true;
}

/*
 * Set up a model and allocate its arrays with alloc (which zeroes them).
 * Returns false, allocating nothing, when cp_model_bytes says the sizes do
 * not fit.
 */
bool
cp_model_init(CpModel *m, CpModelKind kind, int n_features, int n_outputs,
			  bool sparse, int batch_size, double l2, double l1,
			  CpAllocZero alloc)
{
	uint64		bytes;
	int64		n_weights;

	memset(m, 0, sizeof(*m));
	if (!cp_model_bytes(kind, n_features, n_outputs, sparse, batch_size,
						&bytes, &n_weights))
		return false;
	m->kind = kind;
	m->sparse = sparse;
	m->n_features = n_features;
	m->n_outputs = (kind == CP_MODEL_SOFTMAX) ? n_outputs : 1;
	m->stride = n_features + 1;
	m->n_weights = (int) n_weights;
	m->batch_size = batch_size;
	m->l2 = l2;
	m->l1 = l1;
	m->w = alloc(sizeof(double) * (Size) m->n_weights);
	m->z = alloc(sizeof(double) * (Size) m->n_outputs);
	m->g = alloc(sizeof(double) * (Size) m->n_outputs);
	if (!sparse)
	{
		m->gather_rows = gather_rows_for(n_features);
		m->gather_values = alloc(sizeof(double) * (Size) n_features * (Size) m->gather_rows);
		m->gather_labels = alloc(sizeof(double) * (Size) m->gather_rows);
	}
	if (batch_size > 1)
	{
		m->grad = alloc(sizeof(double) * (Size) m->n_weights);
		if (sparse)
		{
			m->touched = alloc(sizeof(int32) * (Size) Max(n_features, 1));
			m->mark = alloc(sizeof(uint8) * (Size) Max(n_features, 1));
		}
	}
	return true;
}

/*
 * Dot product with four partial sums: it lets the compiler keep four
 * independent chains in flight, and the summation order is still fixed, so
 * results are bit-identical from run to run.  With SSE2 the sums s0, s1 and
 * s2, s3 are the two lanes of two registers: each lane does exactly the
 * scalar code's multiplications and additions in the same order, so the
 * result is the same double, in half the instructions.
 */
double
cp_margin_dense(const double *w, const double *x, int n)
{
	double		s0 = 0.0,
				s1 = 0.0,
				s2 = 0.0,
				s3 = 0.0;
	int			j = 0;

#ifdef __SSE2__
	{
		__m128d		s01 = _mm_setzero_pd();
		__m128d		s23 = _mm_setzero_pd();
		double		lanes[4];

		for (; j + 4 <= n; j += 4)
		{
			s01 = _mm_add_pd(s01, _mm_mul_pd(_mm_loadu_pd(w + j), _mm_loadu_pd(x + j)));
			s23 = _mm_add_pd(s23, _mm_mul_pd(_mm_loadu_pd(w + j + 2), _mm_loadu_pd(x + j + 2)));
		}
		_mm_storeu_pd(lanes, s01);
		_mm_storeu_pd(lanes + 2, s23);
		s0 = lanes[0];
		s1 = lanes[1];
		s2 = lanes[2];
		s3 = lanes[3];
	}
#else
	for (; j + 4 <= n; j += 4)
	{
		s0 += w[j] * x[j];
		s1 += w[j + 1] * x[j + 1];
		s2 += w[j + 2] * x[j + 2];
		s3 += w[j + 3] * x[j + 3];
	}
#endif
	for (; j < n; j++)
		s0 += w[j] * x[j];
	return (s0 + s1) + (s2 + s3);
}

/* One output's margin: w_k . x + b_k. */
static inline double
output_margin(const CpModel *m, const double *wk, const CpBuffer *buf, int64 row)
{
	double		z;

	if (buf->sparse)
	{
		int64		end = buf->offsets[row + 1];

		z = 0.0;
		for (int64 k = buf->offsets[row]; k < end; k++)
			z += wk[buf->indices[k]] * buf->values[k];
	}
	else
		z = cp_margin_dense(wk, cp_buffer_dense_row(buf, row), m->n_features);
	return z + wk[m->n_features];
}

/* Every output's margin, into z[0..n_outputs-1]. */
void
cp_model_outputs(const CpModel *m, const CpBuffer *buf, int64 row, double *z)
{
	for (int k = 0; k < m->n_outputs; k++)
		z[k] = output_margin(m, m->w + (int64) k * m->stride, buf, row);
}

/* log(1 + exp(t)) without overflow for large t or loss of precision. */
static inline double
log1pexp(double t)
{
	if (t > 0)
		return t + log1p(exp(-t));
	return log1p(exp(t));
}

/* 1 / (1 + exp(-t)), without overflow. */
double
cp_sigmoid(double t)
{
	if (t >= 0)
		return 1.0 / (1.0 + exp(-t));
	else
	{
		double		e = exp(t);

		return e / (1.0 + e);
	}
}

/*
 * Turn margins into probabilities in place, subtracting the largest margin
 * first so that exp() cannot overflow; returns log-sum-exp of the margins.
 */
double
cp_softmax(double *z, int k)
{
	double		max = z[0];
	double		sum = 0.0;

	for (int i = 1; i < k; i++)
		max = Max(max, z[i]);
	for (int i = 0; i < k; i++)
	{
		z[i] = exp(z[i] - max);
		sum += z[i];
	}
	for (int i = 0; i < k; i++)
		z[i] /= sum;
	return max + log(sum);
}

double
cp_loss(CpModelKind kind, double margin, double y)
{
	switch (kind)
	{
		case CP_MODEL_SVM:
			return Max(0.0, 1.0 - y * margin);
		case CP_MODEL_LOGISTIC:
			return log1pexp(-y * margin);
		case CP_MODEL_LINEAR:
			return 0.5 * (margin - y) * (margin - y);
		case CP_MODEL_SOFTMAX:
			break;
	}
	return NAN;
}

/* d loss / d margin of a single-output model */
double
cp_dloss(CpModelKind kind, double margin, double y)
{
	switch (kind)
	{
		case CP_MODEL_SVM:
			return (y * margin < 1.0) ? -y : 0.0;
		case CP_MODEL_LOGISTIC:
			/* -y * sigmoid(-y z), written so that exp() cannot overflow */
			return -y * cp_sigmoid(-y * margin);
		case CP_MODEL_LINEAR:
			return margin - y;
		case CP_MODEL_SOFTMAX:
			break;
	}
	return NAN;
}

/* The model's answer in its internal encoding (-1/+1 for binary models). */
double
cp_predict_from_margin(CpModelKind kind, double margin)
{
	if (kind == CP_MODEL_LINEAR)
		return margin;
	/* a zero margin goes to the negative class, as scikit-learn does */
	return margin > 0.0 ? 1.0 : -1.0;
}

void
cp_stats_add(CpStats *st, CpModelKind kind, double margin, double y)
{
	st->n++;
	st->loss_sum += cp_loss(kind, margin, y);
	if (kind == CP_MODEL_LINEAR)
	{
		st->sum_y += y;
		st->sum_y2 += y * y;
		st->sse += (margin - y) * (margin - y);
	}
	else if (cp_predict_from_margin(kind, margin) == y)
		st->n_correct++;
}

static int
argmax(const double *z, int k)
{
	int			best = 0;

	for (int i = 1; i < k; i++)
		if (z[i] > z[best])
			best = i;
	return best;
}

/*
 * Add a row's figures given its margins z; for softmax z is turned into
 * probabilities in place.
 */
void
cp_stats_add_outputs(CpStats *st, const CpModel *m, double *z, double y)
{
	if (m->kind != CP_MODEL_SOFTMAX)
	{
		cp_stats_add(st, m->kind, z[0], y);
		return;
	}
	st->n++;
	if (argmax(z, m->n_outputs) == (int) y)
		st->n_correct++;
	{
		/* cross-entropy: log-sum-exp of the margins minus the true margin */
		double		zy = z[(int) y];

		st->loss_sum += cp_softmax(z, m->n_outputs) - zy;
	}
}

double
cp_stats_loss(const CpStats *st)
{
	return st->n > 0 ? st->loss_sum / (double) st->n : NAN;
}

/* Accuracy for classifiers, R^2 for regression. */
double
cp_stats_score(const CpStats *st, CpModelKind kind)
{
	if (st->n == 0)
		return NAN;
	if (kind == CP_MODEL_LINEAR)
	{
		double		mean = st->sum_y / (double) st->n;
		double		sst = st->sum_y2 - (double) st->n * mean * mean;

		if (sst <= 0.0)
			return st->sse == 0.0 ? 1.0 : 0.0;
		return 1.0 - st->sse / sst;
	}
	return (double) st->n_correct / (double) st->n;
}

/* Soft threshold of L1: move w towards 0 by t, stopping at 0. */
static inline double
soft_threshold(double w, double t)
{
	if (w > t)
		return w - t;
	if (w < -t)
		return w + t;
	return 0.0;
}

/*
 * w[j] <- w[j] * shrink - lg * x[j], lg = lr * g: the scalar expression
 * w[j] * shrink - lr * g * x[j] evaluates lr * g first, so this is the same
 * arithmetic.  With SSE2 two weights a step; element-wise, so the results
 * are the same doubles.
 */
static inline void
step_dense_l2(double *w, const double *x, int n, double shrink, double lg)
{
	int			j = 0;

#ifdef __SSE2__
	{
		const __m128d vs = _mm_set1_pd(shrink);
		const __m128d vg = _mm_set1_pd(lg);

		for (; j + 2 <= n; j += 2)
			_mm_storeu_pd(w + j, _mm_sub_pd(_mm_mul_pd(_mm_loadu_pd(w + j), vs),
											_mm_mul_pd(vg, _mm_loadu_pd(x + j))));
	}
#endif
	for (; j < n; j++)
		w[j] = w[j] * shrink - lg * x[j];
}

/* w[j] <- w[j] - lg * x[j], as w[j] -= lr * g * x[j] computes it. */
static inline void
step_dense(double *w, const double *x, int n, double lg)
{
	int			j = 0;

#ifdef __SSE2__
	{
		const __m128d vg = _mm_set1_pd(lg);

		for (; j + 2 <= n; j += 2)
			_mm_storeu_pd(w + j, _mm_sub_pd(_mm_loadu_pd(w + j),
											_mm_mul_pd(vg, _mm_loadu_pd(x + j))));
	}
#endif
	for (; j < n; j++)
		w[j] -= lg * x[j];
}

/* One per-tuple step of one output: w <- reg(w) - lr * g * x. */
static void
step_output(CpModel *m, double *w, const CpBuffer *buf, int64 row, double g)
{
	double		lr = m->learning_rate;
	double		shrink = 1.0 - lr * m->l2;
	double		t = lr * m->l1;

	if (buf->sparse && m->reg_all && (m->l2 > 0.0 || t > 0.0))
	{
		int64		end = buf->offsets[row + 1];
		int			n = m->n_features;
		double		lg = lr * g;

		/*
		 * The dense step's arithmetic, weight by weight: w * shrink (a
		 * weight the row does not touch gets w * shrink - lg * 0, the same
		 * double), then - lg * x where x is not 0, then the threshold.
		 */
		if (m->l2 > 0.0)
			for (int j = 0; j < n; j++)
				w[j] *= shrink;
		for (int64 k = buf->offsets[row]; k < end; k++)
			w[buf->indices[k]] -= lg * buf->values[k];
		if (t > 0.0)
			for (int j = 0; j < n; j++)
				w[j] = soft_threshold(w[j], t);
	}
	else if (buf->sparse)
	{
		int64		end = buf->offsets[row + 1];

		for (int64 k = buf->offsets[row]; k < end; k++)
		{
			int32		j = buf->indices[k];

			w[j] = w[j] * shrink - lr * g * buf->values[k];
			if (t > 0.0)
				w[j] = soft_threshold(w[j], t);
		}
	}
	else
	{
		const double *x = cp_buffer_dense_row(buf, row);
		int			n = m->n_features;

		if (m->l2 > 0.0)
			step_dense_l2(w, x, n, shrink, lr * g);
		else if (g != 0.0)
			step_dense(w, x, n, lr * g);
		if (t > 0.0)
			for (int j = 0; j < n; j++)
				w[j] = soft_threshold(w[j], t);
	}
	w[m->n_features] -= lr * g;
}

/*
 * |x|^2 of a row (the bias's constant 1 not included), for the implicit
 * squared-loss step.
 */
static double
row_norm2(const CpModel *m, const CpBuffer *buf, int64 row)
{
	if (buf->sparse)
	{
		double		s = 0.0;

		for (int64 k = buf->offsets[row]; k < buf->offsets[row + 1]; k++)
			s += buf->values[k] * buf->values[k];
		return s;
	}
	else
	{
		const double *x = cp_buffer_dense_row(buf, row);

		return cp_margin_dense(x, x, m->n_features);
	}
}

/*
 * Averaging: avg is n_weights zeroed doubles the caller allocated.  The
 * average starts empty and off (m->averaging).
 */
void
cp_model_average_init(CpModel *m, double *avg)
{
	m->avg = avg;
	m->averaging = false;
	m->avg_every = CP_AVG_EVERY_DENSE;
	m->avg_rows = 0;
	m->avg_n = 0;
}

/*
 * Add the current weights to the running mean (Welford's form: no sum
 * grows).  Two weights a step, each computed as the scalar loop would
 * (avg + (w - avg) * inv), so the same doubles; through local pointers,
 * which the compiler must otherwise reload after every store (the
 * arrays could alias m, as far as it knows): a later epoch of averaged
 * SGD spent 98 instructions a row here, for a snapshot every 8 rows.
 */
void
cp_model_average_add(CpModel *m)
{
	double	   *avg = m->avg;
	const double *w = m->w;
	int			n = m->n_weights;
	double		inv;
	int			j = 0;

	m->avg_rows = 0;
	if (avg == NULL)
		return;
	m->avg_n++;
	inv = 1.0 / (double) m->avg_n;
#ifdef __SSE2__
	{
		const __m128d vinv = _mm_set1_pd(inv);

		for (; j + 2 <= n; j += 2)
		{
			__m128d		a = _mm_loadu_pd(avg + j);
			__m128d		d = _mm_mul_pd(_mm_sub_pd(_mm_loadu_pd(w + j), a), vinv);

			_mm_storeu_pd(avg + j, _mm_add_pd(a, d));
		}
	}
#endif
	for (; j < n; j++)
		avg[j] += (w[j] - avg[j]) * inv;
}

/* The weights the model stands for: the average once it has any, else w. */
const double *
cp_model_final_weights(const CpModel *m)
{
	return (m->avg != NULL && m->avg_n > 0) ? m->avg : m->w;
}

/* Add one row's gradients (m->g per output) to the mini-batch accumulator. */
static void
accumulate_row(CpModel *m, const CpBuffer *buf, int64 row)
{
	for (int o = 0; o < m->n_outputs; o++)
	{
		double	   *grad = m->grad + (int64) o * m->stride;
		double		g = m->g[o];

		if (buf->sparse)
		{
			int64		end = buf->offsets[row + 1];

			for (int64 k = buf->offsets[row]; k < end; k++)
			{
				int32		j = buf->indices[k];

				if (!m->mark[j])
				{
					m->mark[j] = 1;
					m->touched[m->n_touched++] = j;
				}
				grad[j] += g * buf->values[k];
			}
		}
		else if (g != 0.0)
		{
			const double *x = cp_buffer_dense_row(buf, row);

			for (int j = 0; j < m->n_features; j++)
				grad[j] += g * x[j];
		}
		grad[m->n_features] += g;
	}
	m->batch_fill++;
}

/*
 * Apply the pending mini-batch, averaged over the rows it holds.  Called when
 * the batch is full and at the end of each epoch.
 */
void
cp_model_flush(CpModel *m)
{
	double		scale;
	double		shrink;
	double		t;

	/* lazily: only the weights the batch touched (not with reg_all) */
	bool		lazy = m->sparse && !m->reg_all;

	if (m->batch_fill == 0)
		return;
	scale = m->learning_rate / (double) m->batch_fill;
	shrink = 1.0 - m->learning_rate * m->l2;
	t = m->learning_rate * m->l1;

	for (int o = 0; o < m->n_outputs; o++)
	{
		double	   *w = m->w + (int64) o * m->stride;
		double	   *grad = m->grad + (int64) o * m->stride;
		int			n = lazy ? m->n_touched : m->n_features;

		for (int i = 0; i < n; i++)
		{
			int32		j = lazy ? m->touched[i] : i;

			w[j] = w[j] * shrink - scale * grad[j];
			if (t > 0.0)
				w[j] = soft_threshold(w[j], t);
			grad[j] = 0.0;
		}
		w[m->n_features] -= scale * grad[m->n_features];
		grad[m->n_features] = 0.0;
	}
	if (m->sparse)
	{
		for (int i = 0; i < m->n_touched; i++)
			m->mark[m->touched[i]] = 0;
		m->n_touched = 0;
	}
	m->batch_fill = 0;
}

/* The GraB unit whose sum a row of this block adds to. */
static inline int64
grab_unit(const CpModel *m, uint32 block)
{
	return m->grab_unit_of ? m->grab_unit_of[block] : block;
}

/*
 * GraB: add the row's loss gradient, at the weights it was computed with,
 * to its block's sum (docs/grab.md: the l2 and l1 terms are left out, the
 * walk's centring removes the l2 term).
 */
static void
add_to_block_sum(CpModel *m, const CpBuffer *buf, int64 row)
{
	static const double one = 1.0;
	int64		block = grab_unit(m, buf->row_blocks[row]);

	for (int k = 0; k < m->n_outputs; k++)
	{
		int32		offset = k * m->stride;
		double		g = m->g[k];

		if (buf->sparse)
		{
			int64		start = buf->offsets[row];

			cp_grab_add_sparse(m->grab, block, offset, buf->indices + start,
							   buf->values + start,
							   (int32) (buf->offsets[row + 1] - start), g);
		}
		else
			cp_grab_add_dense(m->grab, block, offset,
							  cp_buffer_dense_row(buf, row), m->n_features, g);
		cp_grab_add_dense(m->grab, block, offset + m->n_features, &one, 1, g);
	}
	cp_grab_count(m->grab, block, 1);
}

/*
 * Train on one row: score it with the current weights, then update.
 * add_grab: add its gradient to its block's GraB sum (train_by_blocks
 * takes the blocks' sums from the weights instead).
 */
static inline void
train_row_impl(CpModel *m, const CpBuffer *buf, int64 row, bool add_grab)
{
	double		y = buf->labels[row];

	if (m->kind == CP_MODEL_SOFTMAX)
	{
		int			cls = (int) y;

		cp_model_outputs(m, buf, row, m->z);
		cp_stats_add_outputs(&m->stats, m, m->z, y);
		/* z now holds probabilities: d loss / d z_k = p_k - [k == y] */
		for (int k = 0; k < m->n_outputs; k++)
			m->g[k] = m->z[k] - (k == cls ? 1.0 : 0.0);
	}
	else
	{
		double		z = output_margin(m, m->w, buf, row);

		cp_stats_add(&m->stats, m->kind, z, y);
		m->g[0] = cp_dloss(m->kind, z, y);
		if (m->normalized_step)
			m->g[0] /= 1.0 + m->learning_rate * (row_norm2(m, buf, row) + 1.0);
	}

	/* the squared loss derivatives, for GraB's buffer rule */
	if (m->grab_snap != NULL)
	{
		for (int k = 0; k < m->n_outputs; k++)
			m->grab_g2 += m->g[k] * m->g[k];
	}
	if (add_grab)
		add_to_block_sum(m, buf, row);

	if (m->batch_size <= 1)
	{
		for (int k = 0; k < m->n_outputs; k++)
			step_output(m, m->w + (int64) k * m->stride, buf, row, m->g[k]);
	}
	else
	{
		accumulate_row(m, buf, row);
		if (m->batch_fill >= m->batch_size)
			cp_model_flush(m);
	}
	if (m->averaging && ++m->avg_rows >= m->avg_every)
		cp_model_average_add(m);
}

static inline void
train_row(CpModel *m, const CpBuffer *buf, int64 row)
{
	train_row_impl(m, buf, row, m->grab != NULL);
}

/*
 * GraB with the buffer kept in GraB's order: a block's rows are trained one
 * after the other, so its gradient sum can be read off the weights instead
 * of added row by row.  A per-tuple step is w <- s w - lr g x (s = 1 - lr
 * l2; the bias is not shrunk), so k steps give
 *
 *     w_k = s^k w_0 - lr sum_i s^(k-1-i) g_i x_i
 *
 * and (s^k w_0 - w_k) / lr is the block's sum of loss gradients: exact with
 * l2 = 0, else each gradient weighted by s^(k-1-i), within k lr l2 of 1
 * (docs/grab.md).  Per block that is one copy of the weights and one
 * n_weights add (projected or not) instead of one add per row: for a dense
 * model whose blocks hold a few rows or more, several times less than what
 * GraB cost per row, which had doubled the arithmetic of a softmax step.
 * Dense rows, one row a step, no l1 only: a mini-batch step or a soft
 * threshold breaks the formula, and a sparse row touches far fewer weights
 * than a copy of them.
 */
static bool
grab_by_blocks(const CpModel *m, const CpBuffer *buf)
{
	return m->grab != NULL && m->grab_snap != NULL && buf->order_is_identity &&
		!buf->sparse && m->batch_size <= 1 && m->l1 == 0.0 && m->learning_rate > 0.0;
}

/* The projected weights at the current block's start, and the scratch half. */
static inline double *
grab_pw_half(const CpModel *m, bool start)
{
	return m->grab_pw + ((start != m->grab_pw_flip) ? 0 : m->grab->dim);
}

/* out = P w over every output's feature weights (biases apart: not shrunk). */
static void
grab_project_weights(const CpModel *m, double *out)
{
	memset(out, 0, sizeof(double) * (Size) m->grab->dim);
	for (int o = 0; o < m->n_outputs; o++)
		cp_grab_project_weights(m->grab, o * m->stride, m->w + (int64) o * m->stride,
								m->n_features, out);
}

/*
 * Add to block's sum the gradients of the `rows` rows trained since the
 * weights were last copied to grab_snap, and move grab_snap on to the
 * current weights in the same pass (a running snapshot: one pass over the
 * weights per block, where a copy, a difference and an add took three).
 * Projected sums (grab_pw) take the feature weights' part from their
 * projection instead (cp_grab_project_weights): the same sum but for
 * rounding, for about half the work.
 */
static void
grab_block_done(CpModel *m, int64 block, int64 rows)
{
	double		inv_lr = 1.0 / m->learning_rate;
	double		sk = pow(1.0 - m->learning_rate * m->l2, (double) rows);
	bool		projected = m->grab_pw != NULL;

	if (projected)
	{
		double	   *end = grab_pw_half(m, false);

		grab_project_weights(m, end);
		cp_grab_add_projected_delta(m->grab, block, grab_pw_half(m, true), end, sk, inv_lr);
		m->grab_pw_flip = !m->grab_pw_flip;
	}
	for (int o = 0; o < m->n_outputs; o++)
	{
		int32		at = o * m->stride;

		if (!projected)
			cp_grab_add_step_delta(m->grab, block, at, m->grab_snap + at, m->w + at,
								   m->n_features, sk, inv_lr);
		/* the bias is not shrunk */
		cp_grab_add_step_delta(m->grab, block, at + m->n_features,
							   m->grab_snap + at + m->n_features,
							   m->w + at + m->n_features, 1, 1.0, inv_lr);
	}
	cp_grab_count(m->grab, block, rows);
}

static int64
train_by_blocks(CpModel *m, const CpBuffer *buf, int64 start, CpCancel *cancel)
{
	int64		i = start;

	/* the snapshot runs on from here (grab_block_done) */
	memcpy(m->grab_snap, m->w, sizeof(double) * (Size) m->n_weights);
	if (m->grab_pw != NULL)
		grab_project_weights(m, grab_pw_half(m, true));
	/* a unit's blocks are consecutive in the order: one sum per run */
	while (i < buf->n_rows)
	{
		int64		block = grab_unit(m, buf->row_blocks[buf->order[i]]);
		int64		first = i;

		for (; i < buf->n_rows && grab_unit(m, buf->row_blocks[buf->order[i]]) == block; i++)
		{
			if (i > start && ((i - start) % CP_CANCEL_CHECK_ROWS) == 0 &&
				cp_cancel_requested(cancel))
			{
				/* the part trained so far; the rest is another part's sum */
				grab_block_done(m, block, i - first);
				return i;
			}
			train_row_impl(m, buf, buf->order[i], false);
		}
		grab_block_done(m, block, i - first);
	}
	return buf->n_rows;
}

/*
 * train_gathered prefetches the row it will copy CP_GATHER_PREFETCH_ROWS
 * positions ahead, and that row's pointer and label twice as far ahead (the
 * row's address is read from its pointer), into L2 (prefetcht1): measured
 * on the 2M x 28 benchmark's later corgipile epochs (rows borrowed from the
 * block cache, each a random DRAM access), 13-17% less CPU an epoch;
 * scripts/bench_gather.c showed the copy alone go from about 50 to 43 ns a
 * row.  A prefetch into L1 (prefetcht0) gained nothing at distances 4-32:
 * the out-of-order core already keeps L1's few miss buffers busy with the
 * copies' own loads, and the L2 prefetch is not limited by them.
 * docs/engine-benchmark.md has the figures, and what did not help.
 */
#define CP_GATHER_PREFETCH_ROWS 32
#define CP_PREFETCH_LINE 64

/*
 * Always inlined: GCC takes a function that only prefetches for one
 * without side effects and drops the calls to it.
 */
static pg_attribute_always_inline void
prefetch_l2(const void *p)
{
#if defined(__GNUC__)
	__builtin_prefetch(p, 0, 2);
#endif
}

/*
 * Every cache line of the row at position pos, and the pointer and label of
 * the row CP_GATHER_PREFETCH_ROWS positions further on.
 */
static pg_attribute_always_inline void
prefetch_gather(const CpBuffer *buf, int64 pos, Size row_bytes, bool grab)
{
	int64		ahead = pos + CP_GATHER_PREFETCH_ROWS;

	if (ahead < buf->n_rows)
	{
		uint32		r = buf->order[ahead];

		if (buf->row_ptrs != NULL)
			prefetch_l2(&buf->row_ptrs[r]);
		prefetch_l2(&buf->labels[r]);
		if (grab)
			prefetch_l2(&buf->row_blocks[r]);
	}
	if (pos < buf->n_rows)
	{
		const char *p = (const char *) cp_buffer_dense_row(buf, buf->order[pos]);

		for (Size o = 0; o < row_bytes; o += CP_PREFETCH_LINE)
			prefetch_l2(p + o);
		/* the row's last line, when it does not start on a line */
		if (row_bytes > 0)
			prefetch_l2(p + row_bytes - 1);
	}
}

/*
 * Sparse rows visited in shuffled order: prefetch_gather's two stages for
 * a sparse buffer, which is trained where it lies (no gather).  The row's
 * offsets and label CP_GATHER_PREFETCH_ROWS positions ahead of pos, and at
 * pos the row's indices and values (their first lines: one-hot rows are
 * short).  Without it a default training with text columns on a
 * 204k-row buffer (AER::Fertility) spent three quarters of its SGD time
 * waiting for the margin's first load of each row.
 */
static pg_attribute_always_inline void
prefetch_sparse(const CpBuffer *buf, int64 pos)
{
	int64		ahead = pos + CP_GATHER_PREFETCH_ROWS;

	if (ahead < buf->n_rows)
	{
		uint32		r = buf->order[ahead];

		prefetch_l2(&buf->offsets[r]);
		prefetch_l2(&buf->labels[r]);
	}
	if (pos < buf->n_rows)
	{
		int64		k = buf->offsets[buf->order[pos]];

		prefetch_l2(&buf->indices[k]);
		prefetch_l2(&buf->values[k]);
	}
}

/*
 * Dense rows visited in shuffled order are each a cache miss, and the
 * training loop's long dependency chains keep the CPU from overlapping
 * them: measured here, training in a random order of a 45 MB buffer took
 * five times as long per row as in storage order.  So the rows of a chunk
 * are first gathered, in visiting order, into a small contiguous scratch
 * area (independent loads, which the CPU does overlap, helped by the
 * prefetch above), then trained on in sequence.  The arithmetic and its
 * order are unchanged.
 */
static int64
train_gathered(CpModel *m, const CpBuffer *buf, int64 start,
			   CpCancel *cancel)
{
	int			d = m->n_features;
	Size		row_bytes = sizeof(double) * (Size) d;
	bool		grab = (m->grab != NULL);
	CpBuffer	chunk;

	memset(&chunk, 0, sizeof(chunk));
	chunk.n_features = d;
	chunk.values = m->gather_values;
	chunk.labels = m->gather_labels;
	if (grab)
		chunk.row_blocks = m->gather_blocks;

	/* the first rows, which the copy loop's prefetch does not cover */
	for (int64 k = 0; k < CP_GATHER_PREFETCH_ROWS; k++)
		prefetch_gather(buf, start + k, row_bytes, grab);
	for (int64 i = start; i < buf->n_rows;)
	{
		int64		n = Min((int64) m->gather_rows, buf->n_rows - i);

		if (i > start && cp_cancel_requested(cancel))
			return i;
		/* beyond the chunk too: the next chunk's first rows */
		for (int64 k = 0; k < n; k++)
		{
			int64		row = buf->order[i + k];

			prefetch_gather(buf, i + k + CP_GATHER_PREFETCH_ROWS, row_bytes, grab);
			memcpy(chunk.values + k * d, cp_buffer_dense_row(buf, row), row_bytes);
			chunk.labels[k] = buf->labels[row];
			if (grab)
				chunk.row_blocks[k] = buf->row_blocks[row];
		}
		for (int64 k = 0; k < n; k++)
			train_row(m, &chunk, k);
		i += n;
	}
	return buf->n_rows;
}

/*
 * l2 on sparse rows whose weights must all shrink at every step (reg_all:
 * one-hot columns), in O(nnz) a step instead of O(n_features): the feature
 * weights are kept as w = scale * v, so the shrink of every weight is one
 * multiplication of scale, and a step adds - lr g x / scale to v where x is
 * not 0.  That is the dense step w <- w * shrink - lr g x but for rounding.
 * The weights are folded back (v *= scale) when the buffer is done, so
 * that between buffers m->w holds the weights as always, before each
 * averaging snapshot, and whenever
 * scale gets so small that v could lose range (all at row positions that
 * do not depend on timing: a call stopped by a cancel keeps the scale in
 * m->l2_scale for the call that resumes it).  Biases are not shrunk (as ever).  Not
 * with l1 (a soft threshold of every weight is not a scaling), mini-
 * batches or GraB (their own paths).  Everything else of a row's step is
 * train_row_impl's: the implicit squared-loss step (normalized_step) and
 * the averaging snapshots (the scale folded into v first), which this path had lacked, so
 * that a default linear training with one-hot columns took plain steps
 * from epoch 2 on (and diverged where lr |x|^2 > 2) and no default
 * training with one-hot columns averaged its iterates.
 */
#define CP_SCALE_FOLD_BELOW 1e-100

static bool
scaled_l2(const CpModel *m, const CpBuffer *buf)
{
	double		shrink = 1.0 - m->learning_rate * m->l2;

	return buf->sparse && m->reg_all && m->l2 > 0.0 && m->l1 == 0.0 &&
		m->batch_size <= 1 && m->grab == NULL && shrink > 0.0 && shrink < 1.0;
}

static void
fold_scale(CpModel *m, double scale)
{
	for (int o = 0; o < m->n_outputs; o++)
	{
		double	   *w = m->w + (int64) o * m->stride;

		for (int j = 0; j < m->n_features; j++)
			w[j] *= scale;
	}
}

static int64
train_scaled_l2(CpModel *m, const CpBuffer *buf, int64 start, CpCancel *cancel)
{
	double		lr = m->learning_rate;
	double		shrink = 1.0 - lr * m->l2;

	/* a resumed call carries on with the scale where the last one stopped */
	double		scale = m->l2_scale > 0.0 ? m->l2_scale : 1.0;

	for (int64 k = 0; k < CP_GATHER_PREFETCH_ROWS / 2; k++)
		prefetch_sparse(buf, start + k);
	for (int64 i = start; i < buf->n_rows; i++)
	{
		int64		row = buf->order[i];
		int64		begin = buf->offsets[row];
		int64		end = buf->offsets[row + 1];
		double		y = buf->labels[row];

		prefetch_sparse(buf, i + CP_GATHER_PREFETCH_ROWS / 2);

		if (i > start && ((i - start) % CP_CANCEL_CHECK_ROWS) == 0 &&
			cp_cancel_requested(cancel))
		{
			/* not folded: the resumed call gives what one call would */
			m->l2_scale = scale;
			return i;
		}
		/* every output's margin with the weights before the step */
		for (int o = 0; o < m->n_outputs; o++)
		{
			const double *v = m->w + (int64) o * m->stride;
			double		z = 0.0;

			for (int64 k = begin; k < end; k++)
				z += v[buf->indices[k]] * buf->values[k];
			m->z[o] = scale * z + v[m->n_features];
		}
		if (m->kind == CP_MODEL_SOFTMAX)
		{
			int			cls = (int) y;

			cp_stats_add_outputs(&m->stats, m, m->z, y);
			for (int o = 0; o < m->n_outputs; o++)
				m->g[o] = m->z[o] - (o == cls ? 1.0 : 0.0);
		}
		else
		{
			cp_stats_add(&m->stats, m->kind, m->z[0], y);
			m->g[0] = cp_dloss(m->kind, m->z[0], y);
			/* the implicit squared-loss step, as train_row_impl takes it */
			if (m->normalized_step)
				m->g[0] /= 1.0 + lr * (row_norm2(m, buf, row) + 1.0);
		}
		/* w <- w * shrink - lr g x, as scale and v */
		scale *= shrink;
		for (int o = 0; o < m->n_outputs; o++)
		{
			double	   *v = m->w + (int64) o * m->stride;
			double		lg = lr * m->g[o];
			double		step = lg / scale;

			if (lg != 0.0)
				for (int64 k = begin; k < end; k++)
					v[buf->indices[k]] -= step * buf->values[k];
			v[m->n_features] -= lg;
		}
		if (scale < CP_SCALE_FOLD_BELOW)
		{
			fold_scale(m, scale);
			scale = 1.0;
		}
		if (m->averaging && ++m->avg_rows >= m->avg_every)
		{
			/* the snapshot is of w: fold first (at a row position, as ever) */
			fold_scale(m, scale);
			scale = 1.0;
			cp_model_average_add(m);
		}
	}
	fold_scale(m, scale);
	m->l2_scale = 0.0;
	return buf->n_rows;
}

/*
 * Train on the rows of the buffer in buf->order, from position start on.
 * Loss and accuracy are taken from each row's prediction before its update,
 * like the progressive figures of scikit-learn's SGD.
 *
 * Every few hundred rows (but never before the first), a raised cancel
 * makes it stop and return the position reached; a later call with that
 * position carries on exactly where it stopped.  Returns buf->n_rows when
 * the buffer is done.
 */
int64
cp_model_train(CpModel *m, const CpBuffer *buf, int64 start,
			   CpCancel *cancel)
{
	/*
	 * Sparse rows: a snapshot every so many rows that the snapshots cost
	 * about an eighth of the steps (a step touches nnz + 1 weights per
	 * output, a snapshot all of them).
	 */
	if (m->averaging && buf->sparse && buf->n_rows > 0)
	{
		double		nnz = (double) (buf->offsets[buf->n_rows] - buf->offsets[0]) /
			(double) buf->n_rows;
		double		every = ceil(8.0 * (double) m->n_weights /
								 ((double) m->n_outputs * (nnz + 1.0)));

		m->avg_every = (int) Max((double) CP_AVG_EVERY_DENSE,
								 Min(every, (double) PG_INT32_MAX / 2));
	}
	if (grab_by_blocks(m, buf))
		return train_by_blocks(m, buf, start, cancel);
	if (scaled_l2(m, buf))
		return train_scaled_l2(m, buf, start, cancel);
	/* GraB's rows carry their block: gathered only with room for it */
	if (!buf->sparse && !buf->order_is_identity && m->gather_rows > 0 &&
		(m->grab == NULL || m->gather_blocks != NULL))
		return train_gathered(m, buf, start, cancel);

	for (int64 i = start; i < buf->n_rows; i++)
	{
		if (i > start && ((i - start) % CP_CANCEL_CHECK_ROWS) == 0 &&
			cp_cancel_requested(cancel))
			return i;
		if (buf->sparse && !buf->order_is_identity)
			prefetch_sparse(buf, i + CP_GATHER_PREFETCH_ROWS / 2);
		train_row(m, buf, buf->order[i]);
	}
	return buf->n_rows;
}

/* True when every weight is a finite number. */
bool
cp_model_is_finite(const CpModel *m)
{
	for (int j = 0; j < m->n_weights; j++)
		if (!isfinite(m->w[j]))
			return false;
	return true;
}

/*
 * The penalty part of the training objective of weights w (the model's
 * shape): 0.5 * l2 * |w|^2 + l1 * |w|_1 over the feature weights, the
 * intercepts unpenalised.  The stopping rule's objective adds it to the
 * mean loss, on one node and on a distributed coordinator alike.
 */
double
cp_model_penalty(const CpModel *m, const double *w, double l2, double l1)
{
	double		penalty = 0.0;

	for (int o = 0; o < m->n_outputs; o++)
		for (int j = 0; j < m->n_features; j++)
		{
			double		wj = w[(int64) o * m->stride + j];

			penalty += 0.5 * l2 * wj * wj + l1 * fabs(wj);
		}
	return penalty;
}

/* Score the buffer's rows with the current weights, without training. */
void
cp_model_evaluate(const CpModel *m, const CpBuffer *buf, CpStats *st)
{
	for (int64 row = 0; row < buf->n_rows; row++)
	{
		cp_model_outputs(m, buf, row, m->z);
		cp_stats_add_outputs(st, m, m->z, buf->labels[row]);
	}
}
