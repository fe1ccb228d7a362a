/*
 * Unit tests of the plain C core (model math, shuffles, helper thread),
 * run without a server: make unittest.  Prints "N passed, N failed".
 */
#include "c.h"

#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/buffer.h"
#include "core/grab.h"
#include "core/linear_model.h"
#include "core/polish.h"
#include "core/converge.h"
#include "core/shuffle.h"
#include "core/worker.h"

#include "unit_check.h"

/*
 * Every allocation of the tests goes through here and is freed at exit, so
 * that valgrind's leak check (make memcheck) reports only the core's leaks.
 */
static void **tracked = NULL;
static size_t n_tracked = 0;
static size_t max_tracked = 0;

static void *
tracked_calloc(size_t n, size_t size)
{
	void	   *p = calloc(n, size);

	if (p == NULL)
		abort();
	if (n_tracked == max_tracked)
	{
		max_tracked = Max(64, max_tracked * 2);
		tracked = realloc(tracked, sizeof(void *) * max_tracked);
		if (tracked == NULL)
			abort();
	}
	tracked[n_tracked++] = p;
	return p;
}

static void
free_tracked(void)
{
	for (size_t i = 0; i < n_tracked; i++)
		free(tracked[i]);
	free(tracked);
}

static void *
alloc_zero(Size size)
{
	return tracked_calloc(1, size);
}

/* A dense buffer of n rows of d features. */
static CpBuffer
dense_buffer(int64 n, int d)
{
	CpBuffer	b;

	memset(&b, 0, sizeof(b));
	b.n_rows = n;
	b.n_features = d;
	b.labels = tracked_calloc(n, sizeof(double));
	b.values = tracked_calloc(n * d, sizeof(double));
	b.order = tracked_calloc(n, sizeof(uint32));
	cp_order_identity(b.order, n);
	return b;
}

/* The same rows in the sparse layout, every value stored. */
static CpBuffer
to_sparse(const CpBuffer *d)
{
	CpBuffer	s = *d;
	int64		nnz = d->n_rows * d->n_features;

	s.sparse = true;
	s.values = tracked_calloc(nnz, sizeof(double));
	s.indices = tracked_calloc(nnz, sizeof(int32));
	s.offsets = tracked_calloc(d->n_rows + 1, sizeof(int64));
	s.offsets[0] = 0;
	for (int64 i = 0; i < d->n_rows; i++)
	{
		for (int j = 0; j < d->n_features; j++)
		{
			s.values[i * d->n_features + j] = d->values[i * d->n_features + j];
			s.indices[i * d->n_features + j] = j;
		}
		s.offsets[i + 1] = (i + 1) * d->n_features;
	}
	s.nnz = nnz;
	return s;
}

/* Two Gaussian-ish blobs, separable when gap is large. */
static CpBuffer
blobs(int64 n, int d, double gap, uint64 seed)
{
	CpBuffer	b = dense_buffer(n, d);
	pg_prng_state rng;

	pg_prng_seed(&rng, seed);
	for (int64 i = 0; i < n; i++)
	{
		double		y = (i % 2 == 0) ? 1.0 : -1.0;

		b.labels[i] = y;
		for (int j = 0; j < d; j++)
			b.values[i * d + j] = (j == 0 ? y * gap : 0.0) + (pg_prng_double(&rng) - 0.5);
	}
	return b;
}

/*
 * cp_shuffle_uint32 draws its own numbers (core/shuffle.c): the same ones
 * as a Fisher-Yates shuffle through pg_prng_uint64_range, or a seed's
 * weights would change.  Sizes around powers of two exercise the
 * rejection's shift.
 */
static void
test_shuffle_draws(void)
{
	int64		sizes[] = {0, 1, 2, 3, 4, 5, 7, 8, 9, 255, 256, 257, 1000, 65537, 200003};

	for (int s = 0; s < lengthof(sizes); s++)
	{
		int64		n = sizes[s];
		uint32	   *a = malloc(sizeof(uint32) * n);
		uint32	   *b = malloc(sizeof(uint32) * n);
		pg_prng_state r1;
		pg_prng_state r2;
		bool		same = true;

		pg_prng_seed(&r1, 42 + s);
		r2 = r1;
		cp_order_identity(a, n);
		cp_order_identity(b, n);
		cp_shuffle_uint32(a, n, &r1);
		for (int64 i = n - 1; i > 0; i--)
		{
			int64		j = (int64) pg_prng_uint64_range(&r2, 0, (uint64) i);
			uint32		tmp = b[i];

			b[i] = b[j];
			b[j] = tmp;
		}
		for (int64 i = 0; i < n; i++)
			if (a[i] != b[i])
				same = false;
		CHECK(same, "cp_shuffle_uint32 differs from pg_prng_uint64_range's shuffle");
		CHECK(r1.s0 == r2.s0 && r1.s1 == r2.s1,
			  "cp_shuffle_uint32 leaves the generator elsewhere than pg_prng would");
		free(a);
		free(b);
	}
}

static void
test_shuffle(void)
{
	pg_prng_state rng;
	uint32		a[1000];
	int			counts[24];
	bool		seen[1000];
	bool		valid = true;
	int64		trials = 240000;
	double		chi2 = 0.0;

	pg_prng_seed(&rng, 1);
	cp_order_identity(a, 1000);
	cp_shuffle_uint32(a, 1000, &rng);
	memset(seen, 0, sizeof(seen));
	for (int i = 0; i < 1000; i++)
	{
		if (a[i] >= 1000 || seen[a[i]])
			valid = false;
		else
			seen[a[i]] = true;
	}
	CHECK(valid, "Fisher-Yates output is not a permutation");

	/* all 24 orders of 4 items are about equally likely (chi^2, 23 dof) */
	memset(counts, 0, sizeof(counts));
	for (int64 t = 0; t < trials; t++)
	{
		uint32		p[4];
		int			code = 0;
		int			fact[4] = {6, 2, 1, 1};

		cp_order_identity(p, 4);
		cp_shuffle_uint32(p, 4, &rng);
		/* Lehmer code of the permutation */
		for (int i = 0; i < 4; i++)
		{
			int			smaller = 0;

			for (int j = i + 1; j < 4; j++)
				if (p[j] < p[i])
					smaller++;
			code += smaller * fact[i];
		}
		counts[code]++;
	}
	for (int k = 0; k < 24; k++)
	{
		double		e = trials / 24.0;

		chi2 += (counts[k] - e) * (counts[k] - e) / e;
	}
	/* 99.9th percentile of chi^2 with 23 degrees of freedom is 49.7 */
	CHECK(chi2 < 49.7, "shuffle is not uniform: chi2 = %.1f", chi2);

	/* same seed, same order; the two streams of one seed differ */
	{
		uint32		x[100],
					y[100];
		pg_prng_state r1,
					r2;

		pg_prng_seed(&r1, cp_derive_seed(42, 0));
		pg_prng_seed(&r2, cp_derive_seed(42, 0));
		cp_order_identity(x, 100);
		cp_order_identity(y, 100);
		cp_shuffle_uint32(x, 100, &r1);
		cp_shuffle_uint32(y, 100, &r2);
		CHECK(memcmp(x, y, sizeof(x)) == 0, "same seed gave different orders");
		CHECK(cp_derive_seed(42, 0) != cp_derive_seed(42, 1), "streams share a seed");
		CHECK(cp_derive_seed(42, 0) != cp_derive_seed(43, 0), "seeds collide");
	}
}

/* d loss / d margin against central finite differences. */
static void
test_gradients(void)
{
	CpModelKind kinds[] = {CP_MODEL_SVM, CP_MODEL_LOGISTIC, CP_MODEL_LINEAR};
	double		margins[] = {-3.0, -0.7, 0.2, 0.45, 2.5};
	double		ys[] = {-1.0, 1.0};
	double		h = 1e-6;

	for (int k = 0; k < 3; k++)
		for (int m = 0; m < 5; m++)
			for (int i = 0; i < 2; i++)
			{
				double		z = margins[m];
				double		y = ys[i];
				double		fd = (cp_loss(kinds[k], z + h, y) - cp_loss(kinds[k], z - h, y)) / (2 * h);
				double		an = cp_dloss(kinds[k], z, y);

				CHECK(fabs(fd - an) < 1e-6, "kind %d margin %g y %g: analytic %g, numeric %g",
					  kinds[k], z, y, an, fd);
			}

	/* the weight gradient through a whole row: perturb each weight */
	{
		CpBuffer	b = blobs(1, 5, 1.0, 9);
		CpModel		m;
		double		z;

		cp_model_init(&m, CP_MODEL_LOGISTIC, 5, 1, false, 1, 0.0, 0.0, alloc_zero);
		for (int j = 0; j < 6; j++)
			m.w[j] = 0.1 * (j + 1);
		for (int j = 0; j < 6; j++)
		{
			double		x = (j < 5) ? b.values[j] : 1.0;
			double		an;
			double		saved = m.w[j];
			double		up,
						down;

			cp_model_outputs(&m, &b, 0, &z);
			an = cp_dloss(m.kind, z, b.labels[0]) * x;
			m.w[j] = saved + h;
			cp_model_outputs(&m, &b, 0, &z);
			up = cp_loss(m.kind, z, b.labels[0]);
			m.w[j] = saved - h;
			cp_model_outputs(&m, &b, 0, &z);
			down = cp_loss(m.kind, z, b.labels[0]);
			m.w[j] = saved;
			CHECK(fabs((up - down) / (2 * h) - an) < 1e-6, "weight %d gradient off", j);
		}
	}
}

static void
test_numerics(void)
{
	/* huge margins: no overflow, no NaN */
	CHECK(isfinite(cp_loss(CP_MODEL_LOGISTIC, -1e6, 1.0)), "log loss overflowed");
	CHECK(fabs(cp_loss(CP_MODEL_LOGISTIC, -1e6, 1.0) - 1e6) < 1e-6, "log loss of -1e6 wrong");
	CHECK(cp_loss(CP_MODEL_LOGISTIC, 1e6, 1.0) == 0.0, "log loss of 1e6 not 0");
	CHECK(isfinite(cp_dloss(CP_MODEL_LOGISTIC, -1e6, 1.0)), "log gradient overflowed");
	CHECK(fabs(cp_dloss(CP_MODEL_LOGISTIC, -1e6, 1.0) + 1.0) < 1e-12, "saturated gradient not -y");
	CHECK(cp_dloss(CP_MODEL_LOGISTIC, 1e6, 1.0) == 0.0 || fabs(cp_dloss(CP_MODEL_LOGISTIC, 1e6, 1.0)) < 1e-300,
		  "gradient of a confident right answer not 0");
	CHECK(cp_predict_from_margin(CP_MODEL_SVM, 0.0) == -1.0, "zero margin should be negative");
}

static void
test_training(void)
{
	CpBuffer	b = blobs(2000, 4, 2.0, 3);
	CpModel		m;

	cp_model_init(&m, CP_MODEL_SVM, 4, 1, false, 1, 0.0, 0.0, alloc_zero);
	m.learning_rate = 0.1;
	for (int e = 0; e < 3; e++)
	{
		memset(&m.stats, 0, sizeof(m.stats));
		cp_model_train(&m, &b, 0, NULL);
	}
	CHECK(cp_stats_score(&m.stats, m.kind) > 0.99, "svm on separable blobs: accuracy %.3f",
		  cp_stats_score(&m.stats, m.kind));
	CHECK(m.stats.n == 2000, "one epoch saw %lld rows", (long long) m.stats.n);

	/* a full batch is one gradient step on the mean gradient */
	{
		CpBuffer	s = blobs(8, 3, 1.0, 5);
		CpModel		mb;
		double		expect[4] = {0, 0, 0, 0};

		cp_model_init(&mb, CP_MODEL_LINEAR, 3, 1, false, 8, 0.0, 0.0, alloc_zero);
		mb.learning_rate = 0.5;
		for (int i = 0; i < 8; i++)
		{
			double		g = cp_dloss(CP_MODEL_LINEAR, 0.0, s.labels[i]);

			for (int j = 0; j < 3; j++)
				expect[j] -= 0.5 * g * s.values[i * 3 + j] / 8;
			expect[3] -= 0.5 * g / 8;
		}
		cp_model_train(&mb, &s, 0, NULL);
		for (int j = 0; j < 4; j++)
			CHECK(fabs(mb.w[j] - expect[j]) < 1e-12, "mini-batch weight %d: %g vs %g",
				  j, mb.w[j], expect[j]);
	}

	/* linear regression recovers y = 2 x0 - x1 + 0.5 */
	{
		CpBuffer	r = blobs(4000, 2, 0.0, 11);
		CpModel		lm;

		for (int i = 0; i < 4000; i++)
			r.labels[i] = 2 * r.values[i * 2] - r.values[i * 2 + 1] + 0.5;
		cp_model_init(&lm, CP_MODEL_LINEAR, 2, 1, false, 1, 0.0, 0.0, alloc_zero);
		lm.learning_rate = 0.05;
		for (int e = 0; e < 20; e++)
			cp_model_train(&lm, &r, 0, NULL);
		CHECK(fabs(lm.w[0] - 2) < 1e-3 && fabs(lm.w[1] + 1) < 1e-3 && fabs(lm.w[2] - 0.5) < 1e-3,
			  "linear weights %g %g %g", lm.w[0], lm.w[1], lm.w[2]);
	}
}

/* The same rows dense and sparse give the same model (no L2: with L2 the
 * sparse layout shrinks only touched weights, by design). */
static void
test_sparse_equals_dense(void)
{
	for (int batch = 1; batch <= 4; batch += 3)
	{
		CpBuffer	d = blobs(500, 6, 1.0, 17);
		CpBuffer	s = to_sparse(&d);
		CpModel		md,
					ms;
		double		maxdiff = 0.0;

		cp_model_init(&md, CP_MODEL_LOGISTIC, 6, 1, false, batch, 0.0, 0.0, alloc_zero);
		cp_model_init(&ms, CP_MODEL_LOGISTIC, 6, 1, true, batch, 0.0, 0.0, alloc_zero);
		md.learning_rate = ms.learning_rate = 0.2;
		cp_model_train(&md, &d, 0, NULL);
		cp_model_train(&ms, &s, 0, NULL);
		cp_model_flush(&md);
		cp_model_flush(&ms);
		for (int j = 0; j < 7; j++)
			maxdiff = Max(maxdiff, fabs(md.w[j] - ms.w[j]));
		CHECK(maxdiff < 1e-12, "batch %d: sparse and dense differ by %g", batch, maxdiff);
	}
}

/*
 * One-hot rows held sparse (reg_all): l2 and l1 on every weight at every
 * step, as on the dense rows of the same values, with only the margin's
 * summation order (and, for l2 alone, the O(nnz) scaled step's rounding)
 * apart.  A large lr * l2 makes the scaled step fold its scale mid-buffer;
 * a cancel and resume gives exactly the uninterrupted weights.  The last
 * two cases are the default schedule's linear step from epoch 2: l2, the
 * implicit squared-loss step and averaged iterates (the scaled step had
 * neither of the last two: plain steps, and no average).
 */
static void
test_reg_all_equals_dense(void)
{
	const double l2s[] = {0.01, 0.0, 0.01, 1.0, 0.01, 1.0};
	const double l1s[] = {0.0, 0.002, 0.001, 0.0, 0.0, 0.0};
	const double lrs[] = {0.1, 0.1, 0.1, 0.9, 0.1, 0.9};
	const CpModelKind kinds[] = {CP_MODEL_LOGISTIC, CP_MODEL_LOGISTIC, CP_MODEL_LOGISTIC,
	CP_MODEL_LOGISTIC, CP_MODEL_LINEAR, CP_MODEL_LINEAR};

	for (int c = 0; c < lengthof(l2s); c++)
	{
		bool		schedule = (kinds[c] == CP_MODEL_LINEAR);
		int			d = 12;
		CpBuffer	dn = blobs(3000, d, 1.0, 31 + c);
		CpBuffer	sp;
		CpModel		md,
					ms,
					mr;
		double		maxdiff = 0.0;
		double		maxw = 0.0;
		int64		nnz = 0;
		int64		pos = 0;
		int			stops = 0;
		volatile sig_atomic_t flag = 1;
		CpCancel	cancel;
		pg_prng_state rng;

		/* one-hot like: each row keeps feature 0 and one indicator of the rest */
		for (int64 i = 0; i < dn.n_rows; i++)
			for (int j = 1; j < d; j++)
				dn.values[i * d + j] = (j == 1 + (int) (i * 7 % (d - 1))) ? 1.0 : 0.0;
		sp = dn;
		sp.sparse = true;
		sp.values = tracked_calloc(2 * dn.n_rows, sizeof(double));
		sp.indices = tracked_calloc(2 * dn.n_rows, sizeof(int32));
		sp.offsets = tracked_calloc(dn.n_rows + 1, sizeof(int64));
		for (int64 i = 0; i < dn.n_rows; i++)
		{
			for (int j = 0; j < d; j++)
				if (dn.values[i * d + j] != 0.0 || j == 0)
				{
					sp.values[nnz] = dn.values[i * d + j];
					sp.indices[nnz++] = j;
				}
			sp.offsets[i + 1] = nnz;
		}
		sp.nnz = nnz;
		pg_prng_seed(&rng, 9);
		cp_shuffle_uint32(dn.order, dn.n_rows, &rng);
		sp.order = dn.order;
		cp_model_init(&md, kinds[c], d, 1, false, 1, l2s[c], l1s[c], alloc_zero);
		cp_model_init(&ms, kinds[c], d, 1, true, 1, l2s[c], l1s[c], alloc_zero);
		cp_model_init(&mr, kinds[c], d, 1, true, 1, l2s[c], l1s[c], alloc_zero);
		ms.reg_all = mr.reg_all = true;
		md.learning_rate = ms.learning_rate = mr.learning_rate = lrs[c];
		if (schedule)
		{
			CpModel    *each[] = {&md, &ms, &mr};

			for (int k = 0; k < lengthof(each); k++)
			{
				each[k]->normalized_step = true;
				cp_model_average_init(each[k], alloc_zero(sizeof(double) * (d + 1)));
				each[k]->averaging = true;
			}
		}
		for (int epoch = 0; epoch < 2; epoch++)
		{
			cp_model_train(&ms, &sp, 0, NULL);
			/* snapshots at the same rows: sparse rows space them by nnz */
			md.avg_every = ms.avg_every;
			cp_model_train(&md, &dn, 0, NULL);
		}
		if (schedule)
			CHECK(md.avg_n > 100 && ms.avg_n == md.avg_n,
				  "case %d: " INT64_FORMAT " snapshots of the sparse rows' weights, " INT64_FORMAT " of the dense",
				  c, ms.avg_n, md.avg_n);
		for (int j = 0; j <= d; j++)
		{
			maxdiff = Max(maxdiff, fabs(cp_model_final_weights(&md)[j] -
										cp_model_final_weights(&ms)[j]));
			maxw = Max(maxw, fabs(cp_model_final_weights(&md)[j]));
		}
		CHECK(maxw > 1e-3 && maxdiff <= 1e-12 * Max(maxw, 1.0),
			  "case %d: one-hot sparse rows differ from dense by %g (weights up to %g)",
			  c, maxdiff, maxw);
		CHECK(ms.l2_scale == 0.0, "case %d: the scale was left unfolded", c);
		/* stopped at every check and resumed: the same doubles */
		cp_cancel_init(&cancel, &flag);
		for (int epoch = 0; epoch < 2; epoch++)
		{
			pos = 0;
			while ((pos = cp_model_train(&mr, &sp, pos, &cancel)) < sp.n_rows)
				stops++;
		}
		CHECK(stops >= 10, "case %d: the flag did not stop training", c);
		CHECK(memcmp(cp_model_final_weights(&ms), cp_model_final_weights(&mr),
					 sizeof(double) * (d + 1)) == 0,
			  "case %d: resumed training differs", c);
	}
}

/* Stopping at a cancel point and resuming gives the same weights, on the
 * dense (gathered) and the sparse training paths. */
static void
test_resume(void)
{
	for (int sparse = 0; sparse <= 1; sparse++)
	{
		CpBuffer	d = blobs(20000, 5, 1.0, 23);
		CpBuffer	b = sparse ? to_sparse(&d) : d;
		CpModel		a,
					r;
		volatile sig_atomic_t flag = 1;
		CpCancel	cancel;
		int64		pos = 0;
		int			stops = 0;
		pg_prng_state rng;

		pg_prng_seed(&rng, 5);
		cp_shuffle_uint32(b.order, b.n_rows, &rng);
		cp_model_init(&a, CP_MODEL_SVM, 5, 1, sparse, 1, 0.01, 0.0, alloc_zero);
		cp_model_init(&r, CP_MODEL_SVM, 5, 1, sparse, 1, 0.01, 0.0, alloc_zero);
		a.learning_rate = r.learning_rate = 0.1;
		cp_cancel_init(&cancel, &flag);
		cp_model_train(&a, &b, 0, NULL);
		while ((pos = cp_model_train(&r, &b, pos, &cancel)) < b.n_rows)
			stops++;
		CHECK(stops >= 3, "sparse=%d: a raised flag did not stop training (stops %d)", sparse, stops);
		CHECK(memcmp(a.w, r.w, sizeof(double) * 6) == 0, "sparse=%d: resumed training differs", sparse);
		CHECK(a.stats.n == r.stats.n, "sparse=%d: resumed training counted %lld rows",
			  sparse, (long long) r.stats.n);
	}
}

/* Training a shuffled order by gathering rows (dense) gives exactly what
 * the row-by-row path (sparse, same values) gives. */
static void
test_gather_matches_direct(void)
{
	CpBuffer	d = blobs(10000, 7, 1.0, 31);
	CpBuffer	s;
	CpModel		md,
				ms;
	pg_prng_state rng;
	double		maxdiff = 0.0;

	pg_prng_seed(&rng, 8);
	cp_shuffle_uint32(d.order, d.n_rows, &rng);
	s = to_sparse(&d);
	cp_model_init(&md, CP_MODEL_SVM, 7, 1, false, 1, 0.0, 0.0, alloc_zero);
	cp_model_init(&ms, CP_MODEL_SVM, 7, 1, true, 1, 0.0, 0.0, alloc_zero);
	md.learning_rate = ms.learning_rate = 0.05;
	CHECK(md.gather_rows > 0 && md.gather_rows < d.n_rows, "dense model does not gather in chunks");
	cp_model_train(&md, &d, 0, NULL);
	cp_model_train(&ms, &s, 0, NULL);
	for (int j = 0; j < 8; j++)
		maxdiff = Max(maxdiff, fabs(md.w[j] - ms.w[j]));
	CHECK(maxdiff < 1e-12, "gathered and direct training differ by %g", maxdiff);
	CHECK(md.stats.n_correct == ms.stats.n_correct, "accuracy differs: %lld vs %lld",
		  (long long) md.stats.n_correct, (long long) ms.stats.n_correct);
}

typedef struct SleepJob
{
	CpCancel   *cancel;
	int			ms;
	bool		signals_blocked;
	int			runs;
} SleepJob;

static void
sleep_job(void *arg)
{
	SleepJob   *j = (SleepJob *) arg;
	sigset_t	mask;

	pthread_sigmask(SIG_SETMASK, NULL, &mask);
	j->signals_blocked = sigismember(&mask, SIGINT) && sigismember(&mask, SIGTERM) &&
		sigismember(&mask, SIGUSR1);
	for (int i = 0; i < j->ms && !cp_cancel_requested(j->cancel); i++)
		usleep(1000);
	j->runs++;
}

static double
now_seconds(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void
test_worker(void)
{
	CpWorker	w;
	SleepJob	job;
	double		t0;
	int			polls = 0;

	CHECK(cp_worker_start(&w) == 0, "worker did not start");
	memset(&job, 0, sizeof(job));
	job.cancel = &w.cancel;
	job.ms = 50;
	for (int i = 0; i < 3; i++)
	{
		cp_worker_submit(&w, sleep_job, &job);
		while (!cp_worker_wait(&w, 5))
			polls++;
	}
	CHECK(job.runs == 3, "worker ran %d of 3 jobs", job.runs);
	CHECK(polls > 3, "wait did not time out while the job ran");
	CHECK(job.signals_blocked, "signals are not blocked in the helper thread");

	/* stopping cuts a long job short */
	job.ms = 60000;
	cp_worker_submit(&w, sleep_job, &job);
	usleep(20000);
	t0 = now_seconds();
	cp_worker_stop(&w);
	CHECK(now_seconds() - t0 < 1.0, "stop took %.2f s", now_seconds() - t0);
	CHECK(!w.started, "worker still marked started");
	cp_worker_stop(&w);			/* a second stop must not hang or crash */
}

/* Softmax: the gradient of the cross-entropy against finite differences of
 * the loss in every weight of every class, and numerical safety. */
static void
test_softmax(void)
{
	CpBuffer	b = blobs(1, 3, 1.0, 41);
	CpModel		m;
	CpStats		st;
	double		h = 1e-6;
	int			k = 4;

	b.labels[0] = 2.0;
	cp_model_init(&m, CP_MODEL_SOFTMAX, 3, k, false, 1, 0.0, 0.0, alloc_zero);
	for (int j = 0; j < m.n_weights; j++)
		m.w[j] = 0.05 * ((j * 7) % 11) - 0.2;
	for (int j = 0; j < m.n_weights; j++)
	{
		int			cls = j / m.stride;
		int			f = j % m.stride;
		double		x = (f < 3) ? b.values[f] : 1.0;
		double		saved = m.w[j];
		double		up,
					down,
					an;

		cp_model_outputs(&m, &b, 0, m.z);
		cp_softmax(m.z, k);
		an = (m.z[cls] - (cls == 2 ? 1.0 : 0.0)) * x;
		memset(&st, 0, sizeof(st));
		m.w[j] = saved + h;
		cp_model_evaluate(&m, &b, &st);
		up = st.loss_sum;
		memset(&st, 0, sizeof(st));
		m.w[j] = saved - h;
		cp_model_evaluate(&m, &b, &st);
		down = st.loss_sum;
		m.w[j] = saved;
		CHECK(fabs((up - down) / (2 * h) - an) < 1e-6,
			  "softmax weight %d: analytic %g, numeric %g", j, an, (up - down) / (2 * h));
	}

	/* huge margins: probabilities stay finite and sum to 1 */
	{
		double		z[3] = {1e6, -1e6, 999990.0};
		double		lse = cp_softmax(z, 3);

		CHECK(isfinite(lse) && fabs(z[0] + z[1] + z[2] - 1.0) < 1e-12 && z[0] > 0.99,
			  "softmax of huge margins: %g %g %g", z[0], z[1], z[2]);
	}

	/* it learns three separable classes */
	{
		CpBuffer	t = dense_buffer(3000, 2);
		CpModel		sm;
		pg_prng_state rng;

		pg_prng_seed(&rng, 2);
		for (int64 i = 0; i < 3000; i++)
		{
			int			c = i % 3;

			t.labels[i] = c;
			t.values[i * 2] = (c == 0 ? 3 : 0) + pg_prng_double(&rng) - 0.5;
			t.values[i * 2 + 1] = (c == 1 ? 3 : 0) + pg_prng_double(&rng) - 0.5;
		}
		cp_model_init(&sm, CP_MODEL_SOFTMAX, 2, 3, false, 1, 0.0, 0.0, alloc_zero);
		sm.learning_rate = 0.1;
		for (int e = 0; e < 3; e++)
		{
			memset(&sm.stats, 0, sizeof(sm.stats));
			cp_model_train(&sm, &t, 0, NULL);
		}
		CHECK(cp_stats_score(&sm.stats, sm.kind) > 0.99, "softmax accuracy %.3f",
			  cp_stats_score(&sm.stats, sm.kind));
	}
}

/* L1 drives the weights of useless features to exactly zero. */
static void
test_l1(void)
{
	CpBuffer	b = blobs(4000, 6, 2.0, 43);
	CpModel		plain,
				lasso;
	int			zeros_plain = 0,
				zeros_lasso = 0;

	cp_model_init(&plain, CP_MODEL_LOGISTIC, 6, 1, false, 1, 0.0, 0.0, alloc_zero);
	cp_model_init(&lasso, CP_MODEL_LOGISTIC, 6, 1, false, 1, 0.0, 0.01, alloc_zero);
	plain.learning_rate = lasso.learning_rate = 0.05;
	for (int e = 0; e < 3; e++)
	{
		cp_model_train(&plain, &b, 0, NULL);
		cp_model_train(&lasso, &b, 0, NULL);
	}
	for (int j = 1; j < 6; j++)
	{
		zeros_plain += (plain.w[j] == 0.0);
		zeros_lasso += (lasso.w[j] == 0.0);
	}
	CHECK(zeros_lasso >= 4 && zeros_plain == 0,
		  "l1 zeroed %d of 5 noise weights (without l1: %d)", zeros_lasso, zeros_plain);
	CHECK(lasso.w[0] > 0.5, "l1 killed the useful weight too: %g", lasso.w[0]);
}

static void *
alloc_refuse(Size size)
{
	n_failed++;
	printf("FAIL: cp_model_init allocated %zu bytes for a model that does not fit\n", (size_t) size);
	return NULL;
}

/* Model sizes: 3 classes x 1431655765 features overflow an int (the
 * weights' size computed in int would be 16 bytes): refused. */
static void
test_model_sizes(void)
{
	uint64		bytes;
	int64		nw;
	CpModel		m;

	CHECK(cp_model_bytes(CP_MODEL_SOFTMAX, 10, 3, false, 1, &bytes, &nw) && nw == 33,
		  "3 x (10 + 1) weights: got %lld", (long long) nw);
	CHECK(bytes >= 33 * sizeof(double), "too few bytes: %llu", (unsigned long long) bytes);
	CHECK(!cp_model_bytes(CP_MODEL_SOFTMAX, 1431655765, 3, true, 1, &bytes, &nw),
		  "3 x 1431655765 features accepted (%lld weights)", (long long) nw);
	CHECK(!cp_model_bytes(CP_MODEL_SOFTMAX, PG_INT32_MAX, 2, true, 4, &bytes, &nw),
		  "2 x INT_MAX features accepted");
	CHECK(!cp_model_bytes(CP_MODEL_SVM, PG_INT32_MAX, 1, true, 1, &bytes, &nw),
		  "INT_MAX + 1 weights accepted");
	CHECK(cp_model_bytes(CP_MODEL_SVM, PG_INT32_MAX - 1, 1, true, 1, &bytes, &nw) &&
		  nw == PG_INT32_MAX && bytes > (uint64) PG_INT32_MAX * sizeof(double),
		  "INT_MAX weights: %lld weights, %llu bytes", (long long) nw,
		  (unsigned long long) bytes);
	/* the number of outputs only counts for softmax */
	CHECK(cp_model_bytes(CP_MODEL_LOGISTIC, 1000, 1431655765, true, 1, &bytes, &nw) && nw == 1001,
		  "binary model sized by n_outputs: %lld", (long long) nw);
	CHECK(!cp_model_bytes(CP_MODEL_SVM, -1, 1, false, 1, &bytes, &nw), "negative n_features accepted");
	CHECK(!cp_model_init(&m, CP_MODEL_SOFTMAX, 1431655765, 3, true, 1, 0, 0, alloc_refuse),
		  "cp_model_init accepted 3 x 1431655765 features");
	CHECK(m.w == NULL && m.n_weights == 0, "a refused model has weights");
}

typedef struct SpinJob
{
	CpCancel   *cancel;
	atomic_int	saw_cancel;
} SpinJob;

static void
spin_job(void *arg)
{
	SpinJob    *j = (SpinJob *) arg;

	while (!cp_cancel_requested(j->cancel))
		;
	atomic_store(&j->saw_cancel, 1);
}

/* The helper's cancel flag is an atomic raised from the main thread: a job
 * spinning on it (no sleep, no lock) sees it, and so does a signal flag. */
static void
test_cancel(void)
{
	CpWorker	w;
	SpinJob		job;
	CpCancel	c;
	volatile sig_atomic_t sig = 0;
	double		t0;

	cp_cancel_init(&c, NULL);
	CHECK(!cp_cancel_requested(&c), "a fresh cancel is raised");
	CHECK(!cp_cancel_requested(NULL), "no cancel is raised");
	cp_cancel_raise(&c);
	CHECK(cp_cancel_requested(&c), "cp_cancel_raise did not raise");
	cp_cancel_init(&c, &sig);
	CHECK(!cp_cancel_requested(&c), "a signal flag of 0 raised");
	sig = 1;
	CHECK(cp_cancel_requested(&c), "a raised signal flag was not seen");

	CHECK(cp_worker_start(&w) == 0, "worker did not start");
	job.cancel = &w.cancel;
	atomic_init(&job.saw_cancel, 0);
	cp_worker_submit(&w, spin_job, &job);
	usleep(20000);
	t0 = now_seconds();
	cp_worker_stop(&w);
	CHECK(now_seconds() - t0 < 1.0, "stopping a spinning job took %.2f s", now_seconds() - t0);
	CHECK(atomic_load(&job.saw_cancel) == 1, "the job did not see the cancel");
}

/*
 * GraB with the buffer kept in block order takes each block's gradient sum
 * from the weights (train_by_blocks): the weights are exactly those of the
 * row-by-row path, the counts too, and the sums agree to rounding with l2 =
 * 0 and within k lr l2 (the shrink's weighting) with l2 > 0.  Also across a
 * cancel in the middle of a block, for softmax and projected sums (from the
 * projected weights, as the engine takes them, and from the snapshot), and
 * with GraB units of three blocks (one sum per unit).
 */
static void
test_grab_block_sums(void)
{
	for (int variant = 0; variant < 9; variant++)
	{
		bool		softmax = (variant == 1 || variant == 4 || variant == 6);
		double		l2 = (variant == 2 || variant == 6) ? 1e-3 : 0.0;
		bool		cancel_mid = (variant == 3 || variant == 6);
		bool		projected = (variant == 4 || variant >= 6);
		/* the engine's way for projected sums; 8: the snapshot's */
		bool		projected_weights = projected && variant != 8;
		int			d = 5,
					k = softmax ? 3 : 1,
					rows_per_block = 7;
		int64		n = 3000,
					n_blocks = (n + rows_per_block - 1) / rows_per_block,
					n_sums = (variant == 5) ? (n_blocks + 2) / 3 : n_blocks;
		uint32	   *unit_of = NULL;
		CpBuffer	b = blobs(n, d, 1.0, 61);
		CpModel		a,
					r;
		CpGrabAcc	ga,
					gr;
		int32		dim;
		double		maxsum = 0.0,
					maxdiff = 0.0,
					tol;
		volatile sig_atomic_t flag = 1;
		CpCancel	cancel;
		int64		pos = 0;
		int			stops = 0;
		bool		counts_equal = true;

		b.row_blocks = tracked_calloc(n, sizeof(uint32));
		b.with_blocks = true;
		for (int64 i = 0; i < n; i++)
		{
			b.row_blocks[i] = (uint32) (i / rows_per_block);
			if (softmax)
				b.labels[i] = (double) (i % 3);
		}
		cp_model_init(&a, softmax ? CP_MODEL_SOFTMAX : CP_MODEL_LOGISTIC, d, k, false, 1,
					  l2, 0.0, alloc_zero);
		cp_model_init(&r, softmax ? CP_MODEL_SOFTMAX : CP_MODEL_LOGISTIC, d, k, false, 1,
					  l2, 0.0, alloc_zero);
		a.learning_rate = r.learning_rate = 0.05;
		dim = projected ? a.n_weights - 4 : a.n_weights;
		CHECK(cp_grab_acc_init(&ga, n_sums, a.n_weights, dim, 9, alloc_zero) &&
			  cp_grab_acc_init(&gr, n_sums, r.n_weights, dim, 9, alloc_zero), "grab init");
		a.grab = &ga;
		r.grab = &gr;
		if (variant == 5)
		{
			unit_of = tracked_calloc(n_blocks, sizeof(uint32));
			for (int64 i = 0; i < n_blocks; i++)
				unit_of[i] = (uint32) (i / 3);
			a.grab_unit_of = r.grab_unit_of = unit_of;
		}
		r.grab_snap = tracked_calloc(r.n_weights, sizeof(double));
		if (projected_weights)
			r.grab_pw = tracked_calloc(2 * dim, sizeof(double));

		/* a: row by row (an explicit order); r: by blocks */
		b.order_is_identity = false;
		cp_model_train(&a, &b, 0, NULL);
		b.order_is_identity = true;
		if (cancel_mid)
		{
			cp_cancel_init(&cancel, &flag);
			while ((pos = cp_model_train(&r, &b, pos, &cancel)) < b.n_rows)
				stops++;
			CHECK(stops >= 3, "a raised flag stopped training by blocks %d times", stops);
		}
		else
			cp_model_train(&r, &b, 0, NULL);

		CHECK(memcmp(a.w, r.w, sizeof(double) * a.n_weights) == 0,
			  "variant %d: training by blocks changed the weights", variant);
		for (int64 i = 0; i < n_sums; i++)
			counts_equal &= (ga.counts[i] == gr.counts[i]);
		CHECK(counts_equal, "variant %d: block counts differ", variant);
		if (variant == 5)
			CHECK(gr.counts[0] == 3 * rows_per_block, "a unit counts its three blocks' rows");
		for (int64 i = 0; i < n_sums * dim; i++)
		{
			maxsum = Max(maxsum, fabs(ga.sums[i]));
			maxdiff = Max(maxdiff, fabs(ga.sums[i] - gr.sums[i]));
		}
		tol = (l2 > 0.0) ? 2.0 * rows_per_block * 0.05 * l2 : 1e-9;
		CHECK(maxsum > 0.1 && maxdiff <= tol * maxsum,
			  "variant %d: block sums from the weights differ by %g of %g", variant,
			  maxdiff, maxsum);
	}
}

/*
 * Averaged SGD: the average is the running mean of the snapshots (exact,
 * on a hand-checked sequence), lands closer to the least-squares optimum
 * than the last iterate of noisy constant-step SGD, is the same whether the
 * rows come dense or sparse (snapshot spacing apart), and the implicit
 * squared-loss step stays finite on a row of norm 1e4 where the explicit
 * step explodes.
 */
static void
test_averaging(void)
{
	/* the running mean of three snapshots */
	{
		CpModel		m;

		cp_model_init(&m, CP_MODEL_LINEAR, 1, 1, false, 1, 0.0, 0.0, alloc_zero);
		cp_model_average_init(&m, alloc_zero(sizeof(double) * 2));
		CHECK(cp_model_final_weights(&m) == m.w, "no snapshot yet: the weights themselves");
		m.w[0] = 1.0;
		cp_model_average_add(&m);
		m.w[0] = 2.0;
		cp_model_average_add(&m);
		m.w[0] = 6.0;
		cp_model_average_add(&m);
		CHECK(fabs(cp_model_final_weights(&m)[0] - 3.0) < 1e-15 && m.avg_n == 3,
			  "mean of 1, 2, 6: %g after %lld", m.avg[0], (long long) m.avg_n);
	}

	/* y = 2 x0 - x1 + 0.5 + noise: the average beats the last iterate */
	{
		CpBuffer	r = blobs(4000, 2, 0.0, 11);
		CpModel		plain,
					avg;
		pg_prng_state rng;
		double		err_plain = 0.0,
					err_avg = 0.0;
		const double truth[3] = {2.0, -1.0, 0.5};

		pg_prng_seed(&rng, 3);
		for (int i = 0; i < 4000; i++)
			r.labels[i] = 2 * r.values[i * 2] - r.values[i * 2 + 1] + 0.5 +
				(pg_prng_double(&rng) - 0.5) * 2.0;
		cp_model_init(&plain, CP_MODEL_LINEAR, 2, 1, false, 1, 0.0, 0.0, alloc_zero);
		cp_model_init(&avg, CP_MODEL_LINEAR, 2, 1, false, 1, 0.0, 0.0, alloc_zero);
		cp_model_average_init(&avg, alloc_zero(sizeof(double) * 3));
		plain.learning_rate = avg.learning_rate = 0.1;
		for (int e = 0; e < 5; e++)
		{
			cp_shuffle_uint32(r.order, r.n_rows, &rng);
			r.order_is_identity = false;
			avg.averaging = (e > 0);
			cp_model_train(&plain, &r, 0, NULL);
			cp_model_train(&avg, &r, 0, NULL);
		}
		CHECK(memcmp(plain.w, avg.w, sizeof(double) * 3) == 0,
			  "averaging changed the iterates themselves");
		for (int j = 0; j < 3; j++)
		{
			err_plain += pow(plain.w[j] - truth[j], 2);
			err_avg += pow(cp_model_final_weights(&avg)[j] - truth[j], 2);
		}
		CHECK(avg.avg_n == 4 * 4000 / 8, "snapshots: %lld", (long long) avg.avg_n);
		CHECK(err_avg < 0.25 * err_plain && err_avg < 1e-3,
			  "average %g from the optimum, last iterate %g", sqrt(err_avg), sqrt(err_plain));
	}

	/* the implicit squared-loss step on a huge row */
	{
		CpBuffer	b = blobs(4, 2, 0.0, 7);
		CpModel		e,
					n;

		b.values[0] = 1e4;
		b.labels[0] = 5.0;
		cp_model_init(&e, CP_MODEL_LINEAR, 2, 1, false, 1, 0.0, 0.0, alloc_zero);
		cp_model_init(&n, CP_MODEL_LINEAR, 2, 1, false, 1, 0.0, 0.0, alloc_zero);
		e.learning_rate = n.learning_rate = 0.01;
		n.normalized_step = true;
		for (int k = 0; k < 3; k++)
		{
			cp_model_train(&e, &b, 0, NULL);
			cp_model_train(&n, &b, 0, NULL);
		}
		CHECK(fabs(e.w[0]) > 1e6, "the explicit step should overshoot (w0 %g)", e.w[0]);
		CHECK(fabs(n.w[0]) < 1e-2 && cp_model_is_finite(&n),
			  "the implicit step should stay small (w0 %g)", n.w[0]);
	}
}

/*
 * cp_polish: ridge regression against the closed form (normal equations,
 * solved here by Gaussian elimination), and logistic and softmax models to
 * a vanishing gradient from zero weights, the same weights from the rows
 * held sparse; the objective never rises.
 */
static double
polish_ridge_exact(const CpBuffer *b, double l2, double *w)
{
	int			d = b->n_features;
	int			k = d + 1;
	double		a[8][9];

	/* (X'X / n + l2 I') w = X'y / n, I' without the bias */
	memset(a, 0, sizeof(a));
	for (int64 i = 0; i < b->n_rows; i++)
	{
		double		x[8];

		for (int j = 0; j < d; j++)
			x[j] = b->values[i * d + j];
		x[d] = 1.0;
		for (int r = 0; r < k; r++)
		{
			for (int c = 0; c < k; c++)
				a[r][c] += x[r] * x[c] / (double) b->n_rows;
			a[r][k] += x[r] * b->labels[i] / (double) b->n_rows;
		}
	}
	for (int j = 0; j < d; j++)
		a[j][j] += l2;
	for (int c = 0; c < k; c++)
		for (int r = c + 1; r < k; r++)
		{
			double		f = a[r][c] / a[c][c];

			for (int cc = c; cc <= k; cc++)
				a[r][cc] -= f * a[c][cc];
		}
	for (int r = k - 1; r >= 0; r--)
	{
		double		v = a[r][k];

		for (int c = r + 1; c < k; c++)
			v -= a[r][c] * w[c];
		w[r] = v / a[r][r];
	}
	return 0.0;
}

static void
count_yield(void *arg)
{
	(*(int *) arg)++;
}

static void
test_polish(void)
{
	const CpModelKind kinds[] = {CP_MODEL_LINEAR, CP_MODEL_LOGISTIC, CP_MODEL_SOFTMAX};

	for (int c = 0; c < lengthof(kinds); c++)
	{
		int			d = 5;
		int			outputs = kinds[c] == CP_MODEL_SOFTMAX ? 3 : 1;
		CpBuffer	dn = blobs(400, d, 0.7, 77 + c);
		CpBuffer	sp;
		CpModel		m;
		CpPolishResult res;
		CpPolishResult res_sp;
		double	   *w;
		double	   *w_sp;
		double		maxdiff = 0.0;
		int64		nnz = 0;

		for (int64 i = 0; i < dn.n_rows; i++)
		{
			if (kinds[c] == CP_MODEL_SOFTMAX)
				dn.labels[i] = (double) (i % 3);
			else if (kinds[c] == CP_MODEL_LINEAR)
				dn.labels[i] = 3.0 * dn.values[i * d] - dn.values[i * d + 1] + 0.5 +
					0.1 * dn.values[i * d + 4];
			/* a few zeros, so that the sparse rows are shorter */
			dn.values[i * d + 3] = (i % 4 == 0) ? 0.0 : dn.values[i * d + 3];
		}
		/* nearly collinear columns 1 and 2: a slow problem for SGD */
		for (int64 i = 0; i < dn.n_rows; i++)
			dn.values[i * d + 2] = dn.values[i * d + 1] + 1e-3 * dn.values[i * d + 4];
		sp = dn;
		sp.sparse = true;
		sp.values = tracked_calloc(dn.n_rows * d, sizeof(double));
		sp.indices = tracked_calloc(dn.n_rows * d, sizeof(int32));
		sp.offsets = tracked_calloc(dn.n_rows + 1, sizeof(int64));
		for (int64 i = 0; i < dn.n_rows; i++)
		{
			for (int j = 0; j < d; j++)
				if (dn.values[i * d + j] != 0.0)
				{
					sp.values[nnz] = dn.values[i * d + j];
					sp.indices[nnz++] = j;
				}
			sp.offsets[i + 1] = nnz;
		}
		sp.nnz = nnz;

		cp_model_init(&m, kinds[c], d, outputs, false, 1, 1.0 / 400.0, 0.0, alloc_zero);
		CHECK(cp_polish_applies(&m), "case %d: a smooth loss is polished", c);
		w = alloc_zero(sizeof(double) * m.n_weights);
		w_sp = alloc_zero(sizeof(double) * m.n_weights);
		CHECK(cp_polish(&m, &dn, w, 2000, 1e-7, alloc_zero, NULL, NULL, &res),
			  "case %d: polish ran", c);
		CHECK(res.converged && res.gradient_max <= 1e-7,
			  "case %d: gradient %g after %d steps (converged %d)",
			  c, res.gradient_max, res.iterations, (int) res.converged);
		CHECK(res.objective_after < res.objective_before,
			  "case %d: objective %g -> %g", c, res.objective_before, res.objective_after);
		m.sparse = true;
		CHECK(cp_polish(&m, &sp, w_sp, 2000, 1e-7, alloc_zero, NULL, NULL, &res_sp) && res_sp.converged,
			  "case %d: sparse rows polished", c);
		for (int j = 0; j < m.n_weights; j++)
			maxdiff = Max(maxdiff, fabs(w[j] - w_sp[j]));
		CHECK(maxdiff < 1e-6, "case %d: sparse and dense optima differ by %g", c, maxdiff);
		if (kinds[c] == CP_MODEL_LINEAR)
		{
			/* the squared loss: the normal equations, one pass, heard within it */
			double	   *w_ne = alloc_zero(sizeof(double) * m.n_weights);
			int			heard = 0;

			m.sparse = false;
			CHECK(cp_polish(&m, &dn, w_ne, 5, 1e-7, alloc_zero, count_yield, &heard, &res) &&
				  res.converged && res.passes == 1 && res.iterations == 1 && heard >= 1,
				  "linear: one pass of the normal equations (passes %d, heard %d)",
				  res.passes, heard);
			m.sparse = true;
		}
		else
		{
			/* a budget cut: the caller heard before every pass after the first */
			double	   *w_cut = alloc_zero(sizeof(double) * m.n_weights);
			int			heard = 0;

			m.sparse = false;
			CHECK(cp_polish(&m, &dn, w_cut, 5, 1e-7, alloc_zero, count_yield, &heard, &res),
				  "case %d: polish ran with a budget of 5", c);
			CHECK(res.stop == CP_POLISH_BUDGET && !res.converged && res.passes == 5 &&
				  heard == res.passes - 1,
				  "case %d: a budget of 5: stop %d, passes %d, caller heard %d times",
				  c, (int) res.stop, res.passes, heard);
			m.sparse = true;
		}
		if (kinds[c] == CP_MODEL_LINEAR)
		{
			double		exact[6];

			polish_ridge_exact(&dn, m.l2, exact);
			maxdiff = 0.0;
			for (int j = 0; j <= d; j++)
				maxdiff = Max(maxdiff, fabs(w[j] - exact[j]));
			CHECK(maxdiff < 1e-6, "ridge: polished weights differ from the closed form by %g",
				  maxdiff);
		}
	}
	{
		CpModel		svm;

		cp_model_init(&svm, CP_MODEL_SVM, 3, 1, false, 1, 0.0, 0.0, alloc_zero);
		CHECK(!cp_polish_applies(&svm), "the hinge loss is not polished");
	}
}

/*
 * The stopping rule: a relative tolerance stops at the first epoch that
 * improves by less than rtol (patience 1); patience counts epochs in a row;
 * an absolute tolerance is in the figures' units; the best is kept; a
 * non-finite figure never improves.
 */
static void
test_convergence(void)
{
	CpConvergence c;
	const double fig[] = {1.0, 0.9, 0.895, 0.8949};
	const double slow[] = {10.0, 9.0, 8.999, 8.0, 7.9999, 7.99989, 7.99988};
	int			stop_at = 0;

	cp_convergence_init(&c, 0.0, 5e-3, 1);
	for (int i = 0; i < 4 && !stop_at; i++)
		if (cp_convergence_update(&c, fig[i]))
			stop_at = i + 1;
	CHECK(stop_at == 4, "rtol 0.5%%, patience 1: 0.56%% goes on, 0.011%% stops at the fourth figure, got %d",
		  stop_at);
	CHECK(c.best_epoch == 4 && c.best == 0.8949, "the best figure is kept (epoch %d)", c.best_epoch);
	CHECK(fabs(c.last_change - (0.895 - 0.8949) / 0.895) < 1e-15 && c.previous == 0.895,
		  "the last relative change and the figure before it are kept");

	/* patience 2: a good epoch resets the count */
	stop_at = 0;
	cp_convergence_init(&c, 0.0, 1e-3, 2);
	for (int i = 0; i < 7 && !stop_at; i++)
		if (cp_convergence_update(&c, slow[i]))
			stop_at = i + 1;
	CHECK(stop_at == 6, "patience 2 stops after two flat epochs in a row, at the sixth figure, got %d",
		  stop_at);

	/* an absolute tolerance: 0.5 in the figures' own units */
	cp_convergence_init(&c, 0.5, 0.0, 1);
	CHECK(!cp_convergence_update(&c, 100.0) && !cp_convergence_update(&c, 99.0) &&
		  cp_convergence_update(&c, 98.6), "atol 0.5: 1.0 improves, 0.4 does not");

	/* NaN never improves, and is not the best */
	cp_convergence_init(&c, 0.0, 1e-3, 1);
	CHECK(!cp_convergence_update(&c, 1.0) && cp_convergence_update(&c, NAN) && c.best == 1.0,
		  "a non-finite figure stops a patience-1 rule and leaves the best alone");
}

int
main(void)
{
	test_convergence();
	test_model_sizes();
	test_cancel();
	test_shuffle();
	test_shuffle_draws();
	test_gradients();
	test_numerics();
	test_training();
	test_sparse_equals_dense();
	test_reg_all_equals_dense();
	test_polish();
	test_resume();
	test_gather_matches_direct();
	test_grab_block_sums();
	test_softmax();
	test_l1();
	test_averaging();
	test_worker();
	printf("%d passed, %d failed\n", n_passed, n_failed);
	free_tracked();
	return n_failed == 0 ? 0 : 1;
}
