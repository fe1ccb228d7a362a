/*
 * Unit tests of block-level GraB and CD-GraB's PairBalance (core/grab.c),
 * run without a server: make unittest.  Prints "N passed, N failed".
 *
 * The small cases are worked out by hand in the comments: a walk takes
 * sign +1 when <run, c> <= 0 (run += c), else -1 (run -= c), with
 * c = sum - count * m; the next order is the +1 blocks in visiting order,
 * then the -1 blocks reversed.
 */
#include "c.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/pg_prng.h"
#include "core/grab.h"
#include "core/shuffle.h"

#include "unit_check.h"

/* a seeded random visiting order, drawn as BlockShuffle draws one */
static void
random_order(uint32 *order, uint32 n, uint64 seed)
{
	pg_prng_state rng;

	pg_prng_seed(&rng, seed);
	cp_order_identity(order, n);
	cp_shuffle_uint32(order, n, &rng);
}

/* every allocation is remembered so that main() can free it */
static void *allocations[256];
static int	n_allocations = 0;
static int	n_alloc_calls = 0;

static void *
alloc_zero(Size size)
{
	void	   *p = calloc(1, size);

	n_alloc_calls++;
	if (p != NULL && n_allocations < (int) lengthof(allocations))
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
same_u32(const uint32 *a, const uint32 *b, int64 n)
{
	return memcmp(a, b, sizeof(uint32) * n) == 0;
}

static bool
same_i8(const int8 *a, const int8 *b, int64 n)
{
	return memcmp(a, b, n) == 0;
}

/* true when next[start..start+n) is a permutation of visit[start..start+n) */
static bool
covers(const uint32 *visit, const uint32 *next, int64 n, uint32 max_block)
{
	uint8	   *seen = calloc(max_block + 1, 1);
	bool		ok = true;

	for (int64 i = 0; i < n; i++)
		seen[visit[i]]++;
	for (int64 i = 0; i < n; i++)
	{
		if (next[i] > max_block || seen[next[i]] != 1)
			ok = false;
		else
			seen[next[i]] = 2;
	}
	free(seen);
	return ok;
}

/* An accumulator of n blocks of dim 1 with the given sums and counts. */
static CpGrabAcc
acc_1d(int n, const double *sums, const int64 *counts)
{
	CpGrabAcc	acc;

	CHECK(cp_grab_acc_init(&acc, n, 1, 1, 0, alloc_zero), "init 1-d");
	for (int b = 0; b < n; b++)
	{
		cp_grab_add_dense(&acc, b, 0, &sums[b], 1, 1.0);
		cp_grab_count(&acc, b, counts ? counts[b] : 1);
	}
	return acc;
}

static void
test_reorder(void)
{
	/* +1 blocks in order (10, 13, 15), then -1 blocks reversed (14, 12, 11) */
	uint32		visit[6] = {10, 11, 12, 13, 14, 15};
	int8		signs[6] = {1, -1, -1, 1, -1, 1};
	uint32		want[6] = {10, 13, 15, 14, 12, 11};
	uint32		next[6];

	cp_grab_reorder(visit, signs, 6, next);
	CHECK(same_u32(next, want, 6), "reorder: got %u %u %u %u %u %u",
		  next[0], next[1], next[2], next[3], next[4], next[5]);
}

static void
test_walk_known(void)
{
	/*
	 * dim 2, one tuple each, mean 0: g = (1,0) (1,0) (-1,0) (-1,0).
	 * b0: <0,c> = 0 -> +1, run (1,0); b1: 1 > 0 -> -1, run 0;
	 * b2: 0 -> +1, run (-1,0); b3: <(-1,0),(-1,0)> = 1 -> -1, run 0.
	 * next = 0 2 | 3 1.
	 */
	{
		CpGrabAcc	acc;
		double		g[4][2] = {{1, 0}, {1, 0}, {-1, 0}, {-1, 0}};
		uint32		visit[4] = {0, 1, 2, 3};
		int8		want_signs[4] = {1, -1, 1, -1};
		uint32		want[4] = {0, 2, 3, 1};
		int8		signs[4];
		uint32		next[4];
		double		work[4];

		CHECK(cp_grab_acc_init(&acc, 4, 2, 2, 0, alloc_zero), "init");
		for (int b = 0; b < 4; b++)
		{
			cp_grab_add_dense(&acc, b, 0, g[b], 2, 1.0);
			cp_grab_count(&acc, b, 1);
		}
		cp_grab_walk(&acc, visit, 4, work, signs, next);
		CHECK(same_i8(signs, want_signs, 4), "walk 2-d signs %d %d %d %d",
			  signs[0], signs[1], signs[2], signs[3]);
		CHECK(same_u32(next, want, 4), "walk 2-d order %u %u %u %u",
			  next[0], next[1], next[2], next[3]);
		CHECK(work[2] == 0.0 && work[3] == 0.0, "final running sum is 0");
	}

	/*
	 * dim 1, sums 1 1 1 -1 -1 -1, mean 0.
	 * b0 +1 run 1; b1 -1 run 0; b2 +1 run 1; b3 (c=-1, dot -1) +1 run 0;
	 * b4 (dot 0) +1 run -1; b5 (dot 1) -1 run 0.
	 * next = 0 2 3 4 | 5 1: the -1 blocks come back reversed.
	 */
	{
		double		sums[6] = {1, 1, 1, -1, -1, -1};
		CpGrabAcc	acc = acc_1d(6, sums, NULL);
		uint32		visit[6] = {0, 1, 2, 3, 4, 5};
		int8		want_signs[6] = {1, -1, 1, 1, 1, -1};
		uint32		want[6] = {0, 2, 3, 4, 5, 1};
		int8		signs[6];
		uint32		next[6];
		double		work[2];

		cp_grab_walk(&acc, visit, 6, work, signs, next);
		CHECK(same_i8(signs, want_signs, 6), "walk 1-d signs");
		CHECK(same_u32(next, want, 6), "walk 1-d order %u %u %u %u %u %u",
			  next[0], next[1], next[2], next[3], next[4], next[5]);
	}

	/*
	 * The visiting order is what the signs and the new order refer to:
	 * the same sums visited as 5 4 3 2 1 0 (c = -1 -1 -1 1 1 1):
	 * b5 +1 run -1; b4 -1 run 0; b3 +1 run -1; b2 +1 run 0; b1 +1 run 1;
	 * b0 -1 run 0.  next = 5 3 2 1 | 0 4.
	 */
	{
		double		sums[6] = {1, 1, 1, -1, -1, -1};
		CpGrabAcc	acc = acc_1d(6, sums, NULL);
		uint32		visit[6] = {5, 4, 3, 2, 1, 0};
		uint32		want[6] = {5, 3, 2, 1, 0, 4};
		int8		signs[6];
		uint32		next[6];
		double		work[2];

		cp_grab_walk(&acc, visit, 6, work, signs, next);
		CHECK(same_u32(next, want, 6), "walk reversed visit %u %u %u %u %u %u",
			  next[0], next[1], next[2], next[3], next[4], next[5]);
	}
}

static void
test_unequal_blocks(void)
{
	/*
	 * Blocks of 1, 1 and 4 tuples with sums 3, 2, 1: m = 6 / 6 = 1 per tuple,
	 * so c = 3 - 1, 2 - 1, 1 - 4 = 2, 1, -3.
	 * b0 +1 run 2; b1 (dot 2 > 0) -1 run 1; b2 (dot -3) +1 run -2.
	 * next = 0 2 | 1.  Centring every block by the same 6/3 = 2 instead
	 * would give c = 1, 0, -1 and all +1 (next 0 1 2): the |b| m centring
	 * is what the walk does.
	 */
	double		sums[3] = {3, 2, 1};
	int64		counts[3] = {1, 1, 4};
	CpGrabAcc	acc = acc_1d(3, sums, counts);
	uint32		visit[3] = {0, 1, 2};
	int8		want_signs[3] = {1, -1, 1};
	uint32		want[3] = {0, 2, 1};
	int8		signs[3];
	uint32		next[3];
	double		work[2];

	cp_grab_walk(&acc, visit, 3, work, signs, next);
	CHECK(work[0] == 1.0, "mean per tuple is 1, got %g", work[0]);
	CHECK(same_i8(signs, want_signs, 3), "unequal signs %d %d %d",
		  signs[0], signs[1], signs[2]);
	CHECK(same_u32(next, want, 3), "unequal order %u %u %u", next[0], next[1], next[2]);

	/* an empty block (no tuples, zero sum) is centred to 0 and kept */
	{
		double		s2[3] = {3, 0, 1};
		int64		c2[3] = {1, 0, 1};
		CpGrabAcc	a2 = acc_1d(3, s2, c2);

		/* m = 2: c = 1, 0, -1: +1 run 1; dot 0 +1; dot -1 +1 */
		cp_grab_walk(&a2, visit, 3, work, signs, next);
		CHECK(signs[0] == 1 && signs[1] == 1 && signs[2] == 1 && covers(visit, next, 3, 2),
			  "empty block kept");
	}
}

/* n_blocks random sums of dim d with random counts */
static void
fill_random(CpGrabAcc *acc, uint64 seed)
{
	pg_prng_state rng;
	double	   *g = calloc(acc->n_weights, sizeof(double));

	pg_prng_seed(&rng, seed);
	for (int64 b = 0; b < acc->n_blocks; b++)
	{
		int			rows = 1 + (int) pg_prng_uint64_range(&rng, 0, 40);

		for (int r = 0; r < rows; r++)
		{
			for (int j = 0; j < acc->n_weights; j++)
				g[j] = pg_prng_double(&rng) - 0.3 + (b % 3 == 0 ? 0.5 : 0.0);
			cp_grab_add_dense(acc, b, 0, g, acc->n_weights, 0.7);
			cp_grab_count(acc, b, 1);
		}
	}
	free(g);
}

static void
test_determinism(void)
{
	CpGrabAcc	a,
				b;
	int			n = 300,
				d = 21;
	uint32	   *visit = calloc(n, sizeof(uint32));
	uint32	   *next1 = calloc(n, sizeof(uint32));
	uint32	   *next2 = calloc(n, sizeof(uint32));
	int8	   *s1 = calloc(n, 1);
	int8	   *s2 = calloc(n, 1);
	double	   *w1 = calloc(2 * d, sizeof(double));
	double	   *w2 = calloc(2 * d, sizeof(double));
	int			n_plus = 0;

	CHECK(cp_grab_acc_init(&a, n, d, d, 0, alloc_zero), "init a");
	CHECK(cp_grab_acc_init(&b, n, d, d, 0, alloc_zero), "init b");
	fill_random(&a, 7);
	fill_random(&b, 7);
	CHECK(memcmp(a.sums, b.sums, sizeof(double) * n * d) == 0, "same adds, same sums");
	random_order(visit, n, 99);
	cp_grab_walk(&a, visit, n, w1, s1, next1);
	cp_grab_walk(&b, visit, n, w2, s2, next2);
	CHECK(same_i8(s1, s2, n) && same_u32(next1, next2, n) &&
		  memcmp(w1, w2, sizeof(double) * 2 * d) == 0,
		  "same inputs give bit-identical signs, order and running sum");
	CHECK(covers(visit, next1, n, n - 1), "walk covers every block once");
	for (int i = 0; i < n; i++)
		n_plus += (s1[i] > 0);
	CHECK(n_plus > n / 4 && n_plus < 3 * n / 4, "balanced walk: %d of %d are +1", n_plus, n);

	/*
	 * The point of the walk (Harvey and Samadi): in the new order the
	 * largest prefix sum of the centred vectors (infinity norm) is at most
	 * half the signed walk's plus half the old order's.  Repeating the walk
	 * on the same vectors keeps shrinking it.
	 */
	{
		double	   *mean = w1;
		double	   *pre = calloc(d, sizeof(double));
		double	   *spre = calloc(d, sizeof(double));
		uint32	   *cur = calloc(n, sizeof(uint32));
		double		first_old = 0;
		bool		bound_ok = true;
		double		last_new = 0;

		memcpy(cur, visit, sizeof(uint32) * n);
		for (int round = 0; round < 5; round++)
		{
			double		worst_old = 0,
						worst_signed = 0,
						worst_new = 0;

			cp_grab_walk(&a, cur, n, w2, s2, next2);
			memset(pre, 0, sizeof(double) * d);
			memset(spre, 0, sizeof(double) * d);
			for (int i = 0; i < n; i++)
			{
				for (int j = 0; j < d; j++)
				{
					double		c = a.sums[(int64) cur[i] * d + j] - a.counts[cur[i]] * mean[j];

					pre[j] += c;
					spre[j] += s2[i] * c;
					worst_old = Max(worst_old, fabs(pre[j]));
					worst_signed = Max(worst_signed, fabs(spre[j]));
				}
			}
			memset(pre, 0, sizeof(double) * d);
			for (int i = 0; i < n; i++)
			{
				for (int j = 0; j < d; j++)
				{
					pre[j] += a.sums[(int64) next2[i] * d + j] - a.counts[next2[i]] * mean[j];
					worst_new = Max(worst_new, fabs(pre[j]));
				}
			}
			bound_ok &= worst_new <= 0.5 * worst_signed + 0.5 * worst_old + 1e-9;
			if (round == 0)
				first_old = worst_old;
			last_new = worst_new;
			memcpy(cur, next2, sizeof(uint32) * n);
		}
		CHECK(bound_ok, "Harvey-Samadi bound holds in every round");
		CHECK(last_new < 0.5 * first_old, "herding: max prefix %g after 5 walks, %g before",
			  last_new, first_old);
		free(pre);
		free(spre);
		free(cur);
	}

	/* the online walk with the exact mean as its "stale" mean is the walk */
	{
		double	   *run = calloc(d, sizeof(double));
		int8	   *s3 = calloc(n, 1);

		for (int i = 0; i < n; i++)
			s3[i] = (int8) cp_grab_online_step(run, a.sums + (int64) visit[i] * d,
											   a.counts[visit[i]], w1, d);
		CHECK(same_i8(s1, s3, n), "online steps with the epoch mean equal the walk");
		free(run);
		free(s3);
	}

	/* sparse and dense adds agree (exact sums) */
	{
		CpGrabAcc	c;
		int32		idx[3] = {1, 4, 20};
		double		val[3] = {0.5, -2.0, 3.25};
		double		dense[21] = {0};

		dense[1] = 0.5;
		dense[4] = -2.0;
		dense[20] = 3.25;
		CHECK(cp_grab_acc_init(&c, 2, d, d, 0, alloc_zero), "init c");
		cp_grab_add_sparse(&c, 0, 0, idx, val, 3, 2.0);
		cp_grab_add_dense(&c, 1, 0, dense, d, 2.0);
		CHECK(memcmp(c.sums, c.sums + d, sizeof(double) * d) == 0, "sparse add == dense add");
		/* offset: a softmax class segment, and a bias as a 1-vector */
		cp_grab_acc_reset(&c);
		cp_grab_add_sparse(&c, 1, 10, idx, val, 2, 1.0);
		cp_grab_add_dense(&c, 1, 20, &val[0], 1, -1.0);
		CHECK(c.sums[0] == 0.0 && c.sums[d + 11] == 0.5 && c.sums[d + 14] == -2.0 &&
			  c.sums[d + 20] == -0.5 && c.counts[0] == 0,
			  "offsets place the segment");
	}
	free(visit);
	free(next1);
	free(next2);
	free(s1);
	free(s2);
	free(w1);
	free(w2);
}

static void
test_pair_balance_2(void)
{
	/*
	 * dim 1, one tuple per block, sums 3 1 0 2 | 1 2 -5 -4 (mean 0).
	 * Worker 0 visits 0 1 2 3, worker 1 visits 4 5 6 7.
	 * k=0: w0 d = 3-1 = 2, dot 0 -> +1, r = 2;
	 *      w1 d = 1-2 = -1, dot -2 -> +1, r = 1;
	 * k=1: w0 d = 0-2 = -2, dot -2 -> +1, r = -1;
	 *      w1 d = -5+4 = -1, dot 1 > 0 -> -1, r = 0.
	 * w0: signs + - + -, next 0 2 | 3 1;
	 * w1: signs + - - +, next 4 7 | 6 5 (pair (6,7) flipped: 7 front).
	 */
	double		sums[8] = {3, 1, 0, 2, 1, 2, -5, -4};
	CpGrabAcc	acc = acc_1d(8, sums, NULL);
	uint32		visit[8] = {0, 1, 2, 3, 4, 5, 6, 7};
	int64		starts[3] = {0, 4, 8};
	int8		want_signs[8] = {1, -1, 1, -1, 1, -1, -1, 1};
	uint32		want[8] = {0, 2, 3, 1, 4, 7, 6, 5};
	int8		signs[8];
	uint32		next[8];
	double		work[3];

	cp_grab_pair_balance(&acc, 2, starts, visit, work, signs, next);
	CHECK(same_i8(signs, want_signs, 8), "pair balance 2 signs");
	CHECK(same_u32(next, want, 8), "pair balance 2 order %u %u %u %u | %u %u %u %u",
		  next[0], next[1], next[2], next[3], next[4], next[5], next[6], next[7]);
	CHECK(work[1] == 0.0, "shared running sum ends at 0, got %g", work[1]);

	/*
	 * One running sum for all workers: two workers with one pair each and
	 * d = 1 both.  Shared: w0 +1 (r = 1), w1 dot 1 -> -1.  Independent
	 * walks would give both +1 for their first pair.
	 */
	{
		double		s2[4] = {1, 0, 1, 0};
		CpGrabAcc	a2 = acc_1d(4, s2, NULL);
		uint32		v2[4] = {0, 1, 2, 3};
		int64		st2[3] = {0, 2, 4};
		uint32		want2[4] = {0, 1, 3, 2};

		cp_grab_pair_balance(&a2, 2, st2, v2, work, signs, next);
		CHECK(same_u32(next, want2, 4) && signs[2] == -1 && signs[3] == 1,
			  "workers share the running sum: %u %u %u %u", next[0], next[1], next[2], next[3]);
	}
}

static void
test_pair_balance_4(void)
{
	/*
	 * dim 2, one tuple per block, mean 0.  Pairs' differences:
	 * w0 (0,1): (1,0) - (0,0) = (1,0)     dot 0  -> +1, r = (1,0)
	 * w1 (2,3): (0,1) - (0,0) = (0,1)     dot 0  -> +1, r = (1,1)
	 * w2 (4,5): (1,1) - (0,0) = (1,1)     dot 2  -> -1, r = (0,0)
	 * w3 (6,7): (0,0) - (1,0) = (-1,0)    dot 0  -> +1, r = (-1,0)
	 * w3's third block 8 = (-3,-2) has no partner: the middle slot.
	 * next: w0 0 1, w1 2 3, w2 5 4, w3 6 8 7.
	 */
	double		g[9][2] = {{1, 0}, {0, 0}, {0, 1}, {0, 0}, {1, 1}, {0, 0},
	{0, 0}, {1, 0}, {-3, -2}};
	CpGrabAcc	acc;
	uint32		visit[9] = {0, 1, 2, 3, 4, 5, 6, 7, 8};
	int64		starts[5] = {0, 2, 4, 6, 9};
	int8		want_signs[9] = {1, -1, 1, -1, -1, 1, 1, -1, 1};
	uint32		want[9] = {0, 1, 2, 3, 5, 4, 6, 8, 7};
	int8		signs[9];
	uint32		next[9];
	double		work[6];

	CHECK(cp_grab_acc_init(&acc, 9, 2, 2, 0, alloc_zero), "init");
	for (int b = 0; b < 9; b++)
	{
		cp_grab_add_dense(&acc, b, 0, g[b], 2, 1.0);
		cp_grab_count(&acc, b, 1);
	}
	cp_grab_pair_balance(&acc, 4, starts, visit, work, signs, next);
	CHECK(same_i8(signs, want_signs, 9), "pair balance 4 signs");
	CHECK(same_u32(next, want, 9), "pair balance 4 order %u %u %u %u %u %u %u %u %u",
		  next[0], next[1], next[2], next[3], next[4], next[5], next[6], next[7], next[8]);
	CHECK(work[2] == -1.0 && work[3] == 0.0, "running sum (-1,0)");

	/* the signs alone rebuild each worker's order (what is stored) */
	{
		uint32		again[9];

		for (int w = 0; w < 4; w++)
			cp_grab_reorder(visit + starts[w], signs + starts[w],
							starts[w + 1] - starts[w], again + starts[w]);
		CHECK(same_u32(again, next, 9), "reorder(signs) == pair balance order");
	}
}

static void
test_pair_balance_covering(void)
{
	/* 4 workers with 7, 8, 5 and 10 blocks of a 30-block table */
	int			n = 30,
				d = 5;
	int64		starts[5] = {0, 7, 15, 20, 30};
	uint32		visit[30],
				next[30],
				next2[30];
	int8		signs[30],
				signs2[30];
	double		work[15];
	CpGrabAcc	acc;
	bool		ok = true;

	CHECK(cp_grab_acc_init(&acc, n, d, d, 0, alloc_zero), "init");
	fill_random(&acc, 11);
	random_order(visit, n, 5);
	cp_grab_pair_balance(&acc, 4, starts, visit, work, signs, next);
	for (int w = 0; w < 4; w++)
	{
		int64		nw = starts[w + 1] - starts[w];
		int			plus = 0;

		ok &= covers(visit + starts[w], next + starts[w], nw, n - 1);
		for (int64 i = starts[w]; i < starts[w + 1]; i++)
			plus += signs[i] > 0;
		/* pairs give exactly one +1 each, an odd block one more */
		ok &= plus == (nw + 1) / 2;
	}
	CHECK(ok, "pair balance: each worker's next order is a permutation of its blocks");
	cp_grab_pair_balance(&acc, 4, starts, visit, work, signs2, next2);
	CHECK(same_u32(next, next2, n) && same_i8(signs, signs2, n), "pair balance is deterministic");

	cp_grab_walk_independent(&acc, 4, starts, visit, work, signs2, next2);
	ok = true;
	for (int w = 0; w < 4; w++)
		ok &= covers(visit + starts[w], next2 + starts[w], starts[w + 1] - starts[w], n - 1);
	CHECK(ok, "independent walks keep each worker's blocks");

	/* one worker: independent walk == cp_grab_walk */
	{
		int64		one[2] = {0, 30};

		cp_grab_walk_independent(&acc, 1, one, visit, work, signs2, next2);
		cp_grab_walk(&acc, visit, n, work, signs, next);
		CHECK(same_u32(next, next2, n), "one independent worker is plain GraB");
	}
}

static void
test_projection(void)
{
	int			d = 3000,
				k = 512;
	CpGrabAcc	a,
				b,
				c,
				e,
				p;
	double	   *x = calloc(d, sizeof(double));
	double	   *y = calloc(d, sizeof(double));
	double	   *px = calloc(k, sizeof(double));
	double	   *py = calloc(k, sizeof(double));
	int32	   *idx = calloc(d, sizeof(int32));
	pg_prng_state rng;
	double		xy = 0,
				xx = 0,
				yy = 0,
				pxy = 0,
				pxx = 0,
				pyy = 0;
	int			nnz = 0;

	CHECK(cp_grab_acc_init(&a, 2, d, k, 42, alloc_zero), "init projected");
	CHECK(a.proj_nnz == CP_GRAB_PROJ_NNZ, "projects");
	CHECK(cp_grab_acc_init(&b, 2, d, k, 42, alloc_zero), "init b");
	CHECK(cp_grab_acc_init(&c, 2, d, k, 43, alloc_zero), "init c");

	/* Box-Muller Gaussians; y correlated with x */
	pg_prng_seed(&rng, 3);
	for (int j = 0; j < d; j++)
	{
		double		u1 = pg_prng_double(&rng) + 1e-12;
		double		u2 = pg_prng_double(&rng);
		double		r = sqrt(-2.0 * log(u1));

		x[j] = r * cos(2 * M_PI * u2);
		y[j] = 0.6 * x[j] + 0.8 * r * sin(2 * M_PI * u2);
		xy += x[j] * y[j];
		xx += x[j] * x[j];
		yy += y[j] * y[j];
	}
	/* the projections, as training stores them: x into one block, y another */
	CHECK(cp_grab_acc_init(&p, 2, d, k, 42, alloc_zero), "init p");
	cp_grab_add_dense(&p, 0, 0, x, d, 1.0);
	cp_grab_add_dense(&p, 1, 0, y, d, 1.0);
	memcpy(px, p.sums, sizeof(double) * k);
	memcpy(py, p.sums + k, sizeof(double) * k);
	for (int r = 0; r < k; r++)
	{
		pxy += px[r] * py[r];
		pxx += px[r] * px[r];
		pyy += py[r] * py[r];
	}
	CHECK(fabs(pxx / xx - 1.0) < 0.15 && fabs(pyy / yy - 1.0) < 0.15,
		  "projection keeps norms: %g %g", pxx / xx, pyy / yy);
	CHECK(fabs(pxy - xy) / sqrt(xx * yy) < 0.15,
		  "projection keeps inner products: %g vs %g", pxy / sqrt(xx * yy), xy / sqrt(xx * yy));

	/* an accumulator of the same seed adds the same projection */
	cp_grab_add_dense(&a, 0, 0, x, d, 1.0);
	CHECK(memcmp(a.sums, px, sizeof(double) * k) == 0, "same seed, same projection");

	/* projecting the weights: the sign table gives the add's values exactly */
	{
		double	   *pw = calloc(k, sizeof(double));
		double	   *pw_map = calloc(k, sizeof(double));
		double	   *keep = a.proj_sign;

		CHECK(a.proj_sign != NULL, "a projection of %d weights keeps its signs", d);
		cp_grab_project_weights(&a, 0, x, d, pw);
		a.proj_sign = NULL;
		cp_grab_project_weights(&a, 0, x, d, pw_map);
		a.proj_sign = keep;
		CHECK(memcmp(pw, px, sizeof(double) * k) == 0 &&
			  memcmp(pw_map, px, sizeof(double) * k) == 0,
			  "the weights' projection equals the dense add, with and without signs");
		free(pw);
		free(pw_map);
	}

	/* the same seed gives the same projection, another seed another */
	cp_grab_add_dense(&b, 0, 0, x, d, 1.0);
	cp_grab_add_dense(&c, 0, 0, x, d, 1.0);
	CHECK(memcmp(a.sums, b.sums, sizeof(double) * k) == 0, "projection is deterministic");
	CHECK(memcmp(a.sums, c.sums, sizeof(double) * k) != 0, "another seed, another projection");

	/* the projection's table adds exactly what its hash computes */
	CHECK(a.proj_map != NULL, "a projection of %d weights keeps its table", d);
	CHECK(cp_grab_acc_init(&e, 2, d, k, 42, alloc_zero), "init e");
	e.proj_map = NULL;
	cp_grab_add_dense(&e, 0, 0, x, d, 1.0);
	CHECK(memcmp(a.sums, e.sums, sizeof(double) * k) == 0, "table and hash add the same sums");
	CHECK(cp_grab_acc_init(&e, 1, 5 * 1000 * 1000, 64, 42, alloc_zero), "init wide");
	CHECK(e.proj_nnz > 0 && e.proj_map == NULL,
		  "5M weights project without a table (it would take 20 MB)");

	/* a sparse add of every other coordinate equals the dense add of those */
	memset(y, 0, sizeof(double) * d);
	for (int j = 0; j < d; j += 2)
	{
		idx[nnz] = j;
		y[j] = x[j];
		x[nnz++] = x[j];
	}
	cp_grab_add_sparse(&a, 1, 0, idx, x, nnz, 0.5);
	cp_grab_add_dense(&b, 1, 0, y, d, 0.5);
	{
		double		maxdiff = 0;

		for (int r = 0; r < k; r++)
			maxdiff = Max(maxdiff, fabs(a.sums[k + r] - b.sums[k + r]));
		CHECK(maxdiff == 0.0, "sparse projected add == dense projected add (%g)", maxdiff);
	}
	free(x);
	free(y);
	free(px);
	free(py);
	free(idx);
}

static void
test_sizes(void)
{
	Size		bytes = 0;
	CpGrabAcc	acc;
	int			calls;

	CHECK(cp_grab_acc_bytes(2500, 21, &bytes) && bytes == 2500 * 21 * 8 + 2500 * 8,
		  "acc bytes %zu", bytes);
	CHECK(!cp_grab_acc_bytes(PG_INT64_MAX / 4, 1000, &bytes), "n_blocks * dim * 8 overflows");
	CHECK(!cp_grab_acc_bytes(PG_INT64_MAX / 4, 1, &bytes), "sums + counts overflow");
	CHECK(!cp_grab_acc_bytes(0, 5, &bytes) && !cp_grab_acc_bytes(5, 0, &bytes), "empty refused");

	calls = n_alloc_calls;
	CHECK(!cp_grab_acc_init(&acc, PG_INT64_MAX / 4, 1000, 1000, 0, alloc_zero),
		  "init refuses an overflowing size");
	CHECK(!cp_grab_acc_init(&acc, 10, 5, 6, 0, alloc_zero), "dim > n_weights refused");
	CHECK(n_alloc_calls == calls, "nothing allocated when refused");

	/* the engine's default sizes fit: exact sums */
	CHECK(cp_grab_choose_dim(2500, 21, 64 * 1024 * 1024) == 21, "2500 x 21 exact");
	/*
	 * Fashion-MNIST softmax: 1500 blocks x 7850 weights = 94 MB > 64 MB:
	 * projected, to at most CP_GRAB_MAX_PROJ_DIM; with less room, as wide as
	 * fits
	 */
	CHECK(cp_grab_choose_dim(1500, 7850, 64 * 1024 * 1024) == CP_GRAB_MAX_PROJ_DIM,
		  "projected to %d", cp_grab_choose_dim(1500, 7850, 64 * 1024 * 1024));
	CHECK(cp_grab_choose_dim(30000, 7850, 64 * 1024 * 1024) ==
		  (int32) ((64 * 1024 * 1024 / 30000 - 8) / 8),
		  "30000 blocks: projected to %d", cp_grab_choose_dim(30000, 7850, 64 * 1024 * 1024));
	CHECK(cp_grab_choose_dim(1000000, 7850, 64 * 1024 * 1024) == -1,
		  "too many blocks for the budget");
	CHECK(cp_grab_choose_dim(PG_INT64_MAX, 7850, 64 * 1024 * 1024) == -1,
		  "absurd block count");

	CHECK(cp_grab_serialized_bytes(3, &bytes) && bytes == 12 + 12 + 1, "3 blocks: 25 bytes");
	CHECK(cp_grab_serialized_bytes(PG_UINT32_MAX, &bytes) &&
		  bytes == 12 + 4 * (Size) PG_UINT32_MAX + ((Size) PG_UINT32_MAX + 7) / 8,
		  "largest block count");
}

static void
test_serialize(void)
{
	uint32		visit[3] = {2, 0, 1};
	int8		signs[3] = {1, -1, 1};
	uint8		want[25] = {'C', 'P', 'G', 'B', 1, 0, 0, 0, 3, 0, 0, 0,
		2, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0x05};
	uint8		buf[25],
				bad[25];
	uint32		v2[3];
	int8		s2[3];
	uint8		seen[3];
	uint32		n = 0;

	cp_grab_serialize(visit, signs, 3, buf);
	CHECK(memcmp(buf, want, 25) == 0, "serialised bytes are little-endian and packed");
	CHECK(cp_grab_stored_blocks(buf, 25, &n) == CP_GRAB_LOAD_OK && n == 3, "header");
	CHECK(cp_grab_deserialize(buf, 25, v2, s2, seen) == CP_GRAB_LOAD_OK &&
		  same_u32(v2, visit, 3) && same_i8(s2, signs, 3), "round trip");

	CHECK(cp_grab_stored_blocks(buf, 24, &n) == CP_GRAB_LOAD_TRUNCATED, "short");
	CHECK(cp_grab_stored_blocks(buf, 11, &n) == CP_GRAB_LOAD_TRUNCATED, "no header");
	memcpy(bad, buf, 25);
	bad[0] = 'X';
	CHECK(cp_grab_deserialize(bad, 25, v2, s2, seen) == CP_GRAB_LOAD_BAD_MAGIC, "magic");
	memcpy(bad, buf, 25);
	bad[4] = 2;
	CHECK(cp_grab_deserialize(bad, 25, v2, s2, seen) == CP_GRAB_LOAD_BAD_VERSION, "version");
	memcpy(bad, buf, 25);
	bad[8] = 4;					/* claims 4 blocks: 12 + 16 + 1 bytes */
	CHECK(cp_grab_deserialize(bad, 25, v2, s2, seen) == CP_GRAB_LOAD_TRUNCATED, "count");
	memcpy(bad, buf, 25);
	bad[11] = 0x80;				/* 2^31 blocks: the length cannot match */
	CHECK(cp_grab_deserialize(bad, 25, v2, s2, seen) == CP_GRAB_LOAD_TRUNCATED, "huge count");
	memcpy(bad, buf, 25);
	bad[16] = 2;				/* 2, 2, 1: repeated */
	CHECK(cp_grab_deserialize(bad, 25, v2, s2, seen) == CP_GRAB_LOAD_NOT_PERMUTATION, "repeat");
	memcpy(bad, buf, 25);
	bad[12] = 3;				/* 3 is out of range */
	CHECK(cp_grab_deserialize(bad, 25, v2, s2, seen) == CP_GRAB_LOAD_NOT_PERMUTATION, "range");
	memcpy(bad, buf, 25);
	bad[15] = 0xff;				/* a huge block number */
	CHECK(cp_grab_deserialize(bad, 25, v2, s2, seen) == CP_GRAB_LOAD_NOT_PERMUTATION, "huge");
	memcpy(bad, buf, 25);
	bad[24] = 0x0d;				/* a padding bit set */
	CHECK(cp_grab_deserialize(bad, 25, v2, s2, seen) == CP_GRAB_LOAD_BAD_SIGNS, "padding");

	/* zero blocks: a header alone */
	{
		uint8		empty[12];

		cp_grab_serialize(NULL, NULL, 0, empty);
		CHECK(cp_grab_deserialize(empty, 12, v2, s2, seen) == CP_GRAB_LOAD_OK, "empty");
	}

	/* a 1000-block walk round-trips and its signs rebuild the next order */
	{
		int			nb = 1000;
		CpGrabAcc	acc;
		uint32	   *vis = calloc(nb, sizeof(uint32));
		uint32	   *nx = calloc(nb, sizeof(uint32));
		uint32	   *nx2 = calloc(nb, sizeof(uint32));
		uint32	   *vis2 = calloc(nb, sizeof(uint32));
		int8	   *sg = calloc(nb, 1);
		int8	   *sg2 = calloc(nb, 1);
		uint8	   *sn = calloc(nb, 1);
		Size		len;
		uint8	   *blob;
		double		work[6];

		CHECK(cp_grab_acc_init(&acc, nb, 3, 3, 0, alloc_zero), "init");
		fill_random(&acc, 21);
		random_order(vis, nb, 1);
		cp_grab_walk(&acc, vis, nb, work, sg, nx);
		CHECK(cp_grab_serialized_bytes(nb, &len) && len == 12 + 4000 + 125, "1000 blocks");
		blob = malloc(len);
		cp_grab_serialize(vis, sg, nb, blob);
		CHECK(cp_grab_deserialize(blob, len, vis2, sg2, sn) == CP_GRAB_LOAD_OK, "load");
		cp_grab_reorder(vis2, sg2, nb, nx2);
		CHECK(same_u32(nx, nx2, nb), "stored order and signs give the same next order");
		free(blob);
		free(vis);
		free(vis2);
		free(nx);
		free(nx2);
		free(sg);
		free(sg2);
		free(sn);
	}
}

static void
test_adapt(void)
{
	uint32		order[5] = {2, 4, 0, 3, 1};
	uint32		out[8],
				out2[8];
	uint32		n;

	/* the table shrank to 3 blocks: 4 and 3 vanish, the rest keep their order */
	n = cp_grab_adapt_order(order, 5, 3, 1, out);
	CHECK(n == 2 && out[0] == 2 && out[1] == 0 && out[2] == 1,
		  "shrink: %u adapted, %u %u %u", n, out[0], out[1], out[2]);

	/* unchanged */
	n = cp_grab_adapt_order(order, 5, 5, 1, out);
	CHECK(n == 0 && same_u32(out, order, 5), "same count: unchanged");

	/* grew to 8: the old order first, then 5 6 7 in a seeded order */
	n = cp_grab_adapt_order(order, 5, 8, 1, out);
	CHECK(n == 3 && same_u32(out, order, 5), "grow: %u adapted, old order kept", n);
	{
		uint32		tail[3] = {5, 6, 7};

		CHECK(covers(tail, out + 5, 3, 7), "grow: new blocks appended once each");
	}
	cp_grab_adapt_order(order, 5, 8, 1, out2);
	CHECK(same_u32(out, out2, 8), "adaptation is deterministic");

	/* different seeds shuffle the new tail differently (some of 20 seeds) */
	{
		uint32		big_old[2] = {1, 0};
		uint32		a[40],
					b[40];
		bool		differs = false;

		cp_grab_adapt_order(big_old, 2, 40, 1, a);
		for (uint64 s = 2; s < 22 && !differs; s++)
		{
			cp_grab_adapt_order(big_old, 2, 40, s, b);
			differs = !same_u32(a, b, 40);
		}
		CHECK(differs && a[0] == 1 && a[1] == 0, "seeded tail");
	}

	/* from nothing: a random order */
	n = cp_grab_adapt_order(NULL, 0, 8, 9, out);
	{
		uint32		ident[8] = {0, 1, 2, 3, 4, 5, 6, 7};

		CHECK(n == 8 && covers(ident, out, 8, 7), "from empty");
	}
}

/*
 * Units of two blocks: formed from the first order, walked as units, each
 * block taking its unit's sign, and the next order moves units as wholes.
 */
static void
test_units(void)
{
	uint32		first[6] = {3, 0, 5, 1, 4, 2};
	uint32		unit_of[6];
	double		sums[3] = {1.0, 1.0, -2.0};
	CpGrabAcc	acc = acc_1d(3, sums, NULL);
	uint32		uvisit[6],
				unext[6],
				next[6],
				next2[6];
	int8		usigns[6],
				unit_sign[6],
				signs[6];
	double		work[2];
	uint32		want_next[6] = {3, 0, 4, 2, 1, 5};
	int8		want_signs[6] = {1, 1, -1, -1, 1, 1};
	uint32		scattered[6] = {3, 5, 0, 1, 4, 2};

	cp_grab_form_units(first, 6, 2, unit_of);
	CHECK(unit_of[3] == 0 && unit_of[0] == 0 && unit_of[5] == 1 && unit_of[1] == 1 &&
		  unit_of[4] == 2 && unit_of[2] == 2, "units are runs of the first order");
	/* mean 0: u0 +1 (s = 1), u1 -1 (s = 0), u2 +1 */
	CHECK(cp_grab_walk_units(&acc, first, 6, unit_of, 3, uvisit, unext, usigns,
							 unit_sign, work, signs, next), "units walked");
	CHECK(same_i8(signs, want_signs, 6), "unit signs by block %d %d %d %d %d %d",
		  signs[0], signs[1], signs[2], signs[3], signs[4], signs[5]);
	CHECK(same_u32(next, want_next, 6), "units move whole: %u %u %u %u %u %u",
		  next[0], next[1], next[2], next[3], next[4], next[5]);
	/* the next order keeps every unit contiguous: it walks again */
	CHECK(cp_grab_walk_units(&acc, next, 6, unit_of, 3, uvisit, unext, usigns,
							 unit_sign, work, signs, next2), "walk of the next order");
	CHECK(uvisit[0] == 0 && uvisit[1] == 2 && uvisit[2] == 1, "units in their new order");
	CHECK(covers(next, next2, 6, 5), "the unit walk covers every block once");
	/* a unit split in the order is refused, not walked */
	CHECK(!cp_grab_walk_units(&acc, scattered, 6, unit_of, 3, uvisit, unext, usigns,
							  unit_sign, work, signs, next), "split unit refused");
	/* an odd last unit: 5 blocks in units of 2 */
	cp_grab_form_units(first, 5, 2, unit_of);
	CHECK(unit_of[4] == 2, "the last unit holds the remainder");
}

/*
 * Kept-order sums: the running-snapshot delta adds what cp_grab_add_dense
 * adds for the difference vector, exact and projected, and moves snap on.
 */
static void
test_step_delta(void)
{
	enum
	{
	n = 300};
	double		snap[n],
				w[n],
				diff[n],
				snap0[n];
	CpGrabAcc	a,
				b,
				pa,
				pb;
	pg_prng_state rng;

	pg_prng_seed(&rng, 42);
	for (int i = 0; i < n; i++)
	{
		snap[i] = pg_prng_double(&rng) - 0.5;
		w[i] = (i % 7 == 0) ? 0.0 : pg_prng_double(&rng) - 0.5;
		if (i % 7 == 0)
			snap[i] = 0.0;		/* zero differences are added too */
	}
	memcpy(snap0, snap, sizeof(snap));
	for (int i = 0; i < n; i++)
		diff[i] = (0.99 * snap[i] - w[i]) * 100.0;
	CHECK(cp_grab_acc_init(&a, 2, n, n, 0, alloc_zero), "init exact a");
	CHECK(cp_grab_acc_init(&b, 2, n, n, 0, alloc_zero), "init exact b");
	CHECK(cp_grab_acc_init(&pa, 2, n, 64, 5, alloc_zero), "init projected a");
	CHECK(cp_grab_acc_init(&pb, 2, n, 64, 5, alloc_zero), "init projected b");
	cp_grab_add_step_delta(&a, 1, 0, snap, w, n, 0.99, 100.0);
	cp_grab_add_dense(&b, 1, 0, diff, n, 1.0);
	CHECK(memcmp(a.sums, b.sums, sizeof(double) * 2 * n) == 0, "exact delta == dense add");
	CHECK(memcmp(snap, w, sizeof(w)) == 0, "the snapshot moved on to the weights");
	memcpy(snap, snap0, sizeof(snap));
	cp_grab_add_step_delta(&pa, 0, 0, snap, w, n, 0.99, 100.0);
	cp_grab_add_dense(&pb, 0, 0, diff, n, 1.0);
	CHECK(memcmp(pa.sums, pb.sums, sizeof(double) * 2 * 64) == 0,
		  "projected delta == projected dense add");
}

int
main(void)
{
	test_reorder();
	test_walk_known();
	test_unequal_blocks();
	test_determinism();
	test_pair_balance_2();
	test_pair_balance_4();
	test_pair_balance_covering();
	test_projection();
	test_sizes();
	test_serialize();
	test_adapt();
	test_units();
	test_step_delta();
	free_all();
	printf("%d passed, %d failed\n", n_passed, n_failed);
	return n_failed == 0 ? 0 : 1;
}
