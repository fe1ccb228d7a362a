/*-------------------------------------------------------------------------
 *
 * grab.c
 *	  Block-level GraB (Lu et al., NeurIPS 2022) and CD-GraB's PairBalance
 *	  (Cooper et al., NeurIPS 2023) over per-block gradient sums.
 *
 * GraB orders examples by herding: it walks the previous epoch's gradients,
 * centred by their mean, keeping a running sum s; each gets the sign that
 * keeps s small (+1 when <s, c> <= 0), and the next epoch visits the +1
 * examples in order, then the -1 ones reversed (Harvey and Samadi's
 * reordering).  Here an "example" is a block of pages: its vector is the sum
 * of its tuples' gradients, and since blocks hold different numbers of
 * tuples it is centred by |b| m, with m the epoch's mean gradient per tuple.
 *
 * Everything is deterministic: the same sums in the same visiting order give
 * bit-identical signs and orders (fixed summation order, no threads, no
 * random choice in the walk; the paper's randomized balance is not used).
 *
 *-------------------------------------------------------------------------
 */
#include "c.h"

#include <math.h>
#include <string.h>

#include "common/int.h"

#include "grab.h"

/* splitmix64's finaliser: a good 64-bit mix, used as a counter-based hash */
static inline uint64
grab_mix64(uint64 z)
{
	z = (z ^ (z >> 30)) * UINT64CONST(0xBF58476D1CE4E5B9);
	z = (z ^ (z >> 27)) * UINT64CONST(0x94D049BB133111EB);
	return z ^ (z >> 31);
}

/* splitmix64 generator: *state advances by the golden-ratio increment */
static inline uint64
grab_next(uint64 *state)
{
	*state += UINT64CONST(0x9E3779B97F4A7C15);
	return grab_mix64(*state);
}

/* Uniform in [0, bound), bound > 0, without modulo bias (rejection). */
static uint64
grab_below(uint64 *state, uint64 bound)
{
	uint64		threshold = (-bound) % bound;

	for (;;)
	{
		uint64		r = grab_next(state);

		if (r >= threshold)
			return r % bound;
	}
}

/*
 * The projection's row and sign bit for input coordinate j, segment t.  The
 * row is j folded into the segment (j mod its width), the sign random: the
 * random signs alone make inner products unbiased (a pair of coordinates
 * shares a row with a product of independent signs), and consecutive
 * coordinates then go to consecutive rows, so that a run of them is added
 * as a sequential pass (grab_proj_add_run) instead of a scatter, which cost
 * a grab epoch of Fashion-MNIST softmax as much again as its SGD steps
 * (docs/grab.md).
 */
static inline int64
grab_proj_entry(const CpGrabAcc *acc, int64 j, int t)
{
	int			s = acc->proj_nnz;
	int32		lo = (int32) (((int64) t * acc->dim) / s);
	int32		hi = (int32) (((int64) (t + 1) * acc->dim) / s);
	uint64		h = grab_mix64(acc->proj_seed ^
							   grab_mix64((uint64) j * CP_GRAB_PROJ_NNZ + (uint64) t));
	int32		row = lo + (int32) ((uint64) j % (uint64) (hi - lo));

	return ((int64) row << 1) | (int64) (h & 1);
}

/*
 * Bytes of an accumulator of n_blocks sums of dim doubles plus the counts,
 * or false when that does not fit in a Size.
 */
bool
cp_grab_acc_bytes(int64 n_blocks, int32 dim, Size *bytes)
{
	uint64		sums;
	uint64		counts;
	uint64		total;

	if (n_blocks < 1 || dim < 1)
		return false;
	if (pg_mul_u64_overflow((uint64) n_blocks, (uint64) dim, &sums) ||
		pg_mul_u64_overflow(sums, sizeof(double), &sums) ||
		pg_mul_u64_overflow((uint64) n_blocks, sizeof(int64), &counts) ||
		pg_add_u64_overflow(sums, counts, &total) ||
		total > (uint64) SIZE_MAX)
		return false;
	*bytes = (Size) total;
	return true;
}

/*
 * The length of a stored block sum: the gradient's own length when all the
 * sums fit in budget bytes, else a projection, as wide as fits but at most
 * CP_GRAB_MAX_PROJ_DIM.  Returns -1 when not even a CP_GRAB_MIN_PROJ_DIM
 * projection fits (the caller asks for larger blocks or more memory).
 */
int32
cp_grab_choose_dim(int64 n_blocks, int32 n_weights, Size budget)
{
	Size		bytes;
	uint64		per_block;

	if (n_blocks < 1 || n_weights < 1)
		return -1;
	if (cp_grab_acc_bytes(n_blocks, n_weights, &bytes) && bytes <= budget)
		return n_weights;

	/* doubles per block left after its count */
	per_block = (uint64) budget / (uint64) n_blocks;
	if (per_block < sizeof(int64))
		return -1;
	per_block = (per_block - sizeof(int64)) / sizeof(double);
	if (per_block >= (uint64) n_weights)
		per_block = (uint64) n_weights - 1;	/* cannot happen; be safe */
	if (per_block < CP_GRAB_MIN_PROJ_DIM)
		return -1;
	return (int32) Min(per_block, CP_GRAB_MAX_PROJ_DIM);
}

/*
 * Set up an accumulator; the two arrays come from alloc (zeroed).  dim ==
 * n_weights keeps exact sums; a smaller dim projects (see grab.h).  Returns
 * false on bad sizes, overflow or a failed allocation, before allocating
 * anything in the first two cases.
 */
bool
cp_grab_acc_init(CpGrabAcc *acc, int64 n_blocks, int32 n_weights, int32 dim,
				 uint64 proj_seed, CpAllocZero alloc)
{
	Size		bytes;

	memset(acc, 0, sizeof(*acc));
	if (n_weights < 1 || dim < 1 || dim > n_weights)
		return false;
	if (!cp_grab_acc_bytes(n_blocks, dim, &bytes))
		return false;

	acc->n_blocks = n_blocks;
	acc->n_weights = n_weights;
	acc->dim = dim;
	acc->proj_nnz = (dim < n_weights) ? Min(CP_GRAB_PROJ_NNZ, dim) : 0;
	acc->proj_seed = grab_mix64(proj_seed ^ UINT64CONST(0x6772616270726f6a));
	acc->proj_scale = acc->proj_nnz > 0 ? 1.0 / sqrt((double) acc->proj_nnz) : 1.0;
	/* bytes covers both products, so neither can overflow */
	acc->sums = alloc((Size) n_blocks * (Size) dim * sizeof(double));
	acc->counts = alloc((Size) n_blocks * sizeof(int64));
	if (acc->sums == NULL || acc->counts == NULL)
		return false;
	/*
	 * n_weights <= INT32_MAX and proj_nnz <= 4: the product fits a Size;
	 * row < dim (at most CP_GRAB_MAX_PROJ_DIM from cp_grab_choose_dim), and
	 * row << 1 must fit an int32.
	 */
	if (acc->proj_nnz > 0 && dim <= PG_INT32_MAX / 2 &&
		(Size) n_weights * acc->proj_nnz * sizeof(int32) <= CP_GRAB_PROJ_MAP_MAX_BYTES)
	{
		acc->proj_map = alloc((Size) n_weights * acc->proj_nnz * sizeof(int32));
		if (acc->proj_map == NULL)
			return false;
		for (int64 j = 0; j < n_weights; j++)
			for (int t = 0; t < acc->proj_nnz; t++)
				acc->proj_map[j * acc->proj_nnz + t] = (int32) grab_proj_entry(acc, j, t);
		if (acc->proj_nnz == 1 &&
			(Size) n_weights * sizeof(double) <= CP_GRAB_PROJ_MAP_MAX_BYTES)
		{
			acc->proj_sign = alloc((Size) n_weights * sizeof(double));
			if (acc->proj_sign == NULL)
				return false;
			for (int64 j = 0; j < n_weights; j++)
				acc->proj_sign[j] = (double) (2 * (acc->proj_map[j] & 1) - 1);
		}
	}
	return true;
}

/* Start an epoch: every sum and count back to zero. */
void
cp_grab_acc_reset(CpGrabAcc *acc)
{
	memset(acc->sums, 0, (Size) acc->n_blocks * (Size) acc->dim * sizeof(double));
	memset(acc->counts, 0, (Size) acc->n_blocks * sizeof(int64));
}

/*
 * Add v at input coordinate j into a projected sum.  The table, when there
 * is one, holds exactly what grab_proj_entry computes: the two paths add the
 * same values in the same order (two multiplications and a division per
 * segment and coordinate are most of an add's cost without it, several
 * times the SGD step's own arithmetic for a softmax model).
 */
static inline void
grab_proj_add(const CpGrabAcc *acc, double *sum, int64 j, double v)
{
	int			s = acc->proj_nnz;

	v *= acc->proj_scale;
	for (int t = 0; t < s; t++)
	{
		int64		e = acc->proj_map ? acc->proj_map[j * s + t] :
			grab_proj_entry(acc, j, t);

		/* +v or -v without a branch: the sign is random, so mispredicted */
		sum[e >> 1] += (double) (2 * (e & 1) - 1) * v;
	}
}

/*
 * One segment with the table (the default): coordinates j .. j+len-1 that
 * do not wrap around the fold go to consecutive rows.  Returns the length
 * of the run that starts at coordinate j, at most n.
 */
static inline int32
grab_proj_run(const CpGrabAcc *acc, int64 j, int32 n)
{
	int32		row = (int32) ((uint64) j % (uint64) acc->dim);

	return Min(n, acc->dim - row);
}

/* True when adds may take the sequential runs. */
static inline bool
grab_proj_runs(const CpGrabAcc *acc)
{
	return acc->proj_nnz == 1 && acc->proj_map != NULL;
}

/*
 * dst += scale * P x, P the projection of coordinates offset..offset+n-1
 * (dst: dim values).  Dense x: zeros are added too (a test would cost a
 * mispredicted branch).
 */
static inline void
grab_proj_add_dense(const CpGrabAcc *acc, double *dst, int32 offset,
					const double *x, int32 n, double scale)
{
	if (grab_proj_runs(acc))
	{
		/* the same values grab_proj_add adds, in the same order, as runs */
		for (int32 i = 0; i < n;)
		{
			int64		j = (int64) offset + i;
			int32		len = grab_proj_run(acc, j, n - i);
			double	   *d = dst + (acc->proj_map[j] >> 1);
			const int32 *map = acc->proj_map + j;
			double		pscale = acc->proj_scale;
			const double *xi = x + i;

			for (int32 k = 0; k < len; k++)
				d[k] += (double) (2 * (map[k] & 1) - 1) * ((scale * xi[k]) * pscale);
			i += len;
		}
		return;
	}
	for (int32 i = 0; i < n; i++)
	{
		if (x[i] != 0.0)
			grab_proj_add(acc, dst, (int64) offset + i, scale * x[i]);
	}
}

/*
 * sum[block] += scale * x, with x placed at coordinates offset..offset+n-1
 * of the gradient (a softmax model adds one segment per class, and the bias
 * as a one-element vector).  Hot path: the caller guarantees the ranges.
 */
void
cp_grab_add_dense(CpGrabAcc *acc, int64 block, int32 offset,
				  const double *x, int32 n, double scale)
{
	double	   *sum = acc->sums + block * acc->dim;

	if (acc->proj_nnz == 0)
	{
		double	   *dst = sum + offset;

		for (int32 i = 0; i < n; i++)
			dst[i] += scale * x[i];
		return;
	}
	grab_proj_add_dense(acc, sum, offset, x, n, scale);
}

/*
 * out += P w over coordinates offset..offset+n-1 (out: dim values, the
 * caller zeroes it).  Projected sums only: with train_by_blocks, a block's
 * projected gradient sum is (shrink * P w_start - P w_end) / lr, P being
 * linear, so projecting the weights once a block (a multiply-add per
 * weight) replaces projecting their difference from a snapshot (a
 * snapshot load and store, a multiply-subtract and a multiply-add per
 * weight): on Fashion-MNIST softmax, 7,850 weights and 6.7 rows a block,
 * that add was most of what a grab epoch costs over corgipile's.
 */
void
cp_grab_project_weights(const CpGrabAcc *acc, int32 offset, const double *w,
						int32 n, double *out)
{
	Assert(acc->proj_nnz > 0);
	if (acc->proj_sign != NULL)
	{
		/* grab_proj_add_dense's runs, the same products: +-1 * (w * pscale) */
		double		pscale = acc->proj_scale;

		for (int32 i = 0; i < n;)
		{
			int64		j = (int64) offset + i;
			int32		len = grab_proj_run(acc, j, n - i);
			double	   *d = out + (acc->proj_map[j] >> 1);
			const double *sign = acc->proj_sign + j;
			const double *wi = w + i;

			for (int32 k = 0; k < len; k++)
				d[k] += sign[k] * (wi[k] * pscale);
			i += len;
		}
		return;
	}
	grab_proj_add_dense(acc, out, offset, w, n, 1.0);
}

/*
 * sum[block] += (shrink * prev - cur) * inv_lr over the dim projected
 * values: the block's gradient sum from the projected weights at its start
 * (prev) and end (cur), as cp_grab_project_weights computes them.
 */
void
cp_grab_add_projected_delta(CpGrabAcc *acc, int64 block, const double *prev,
							const double *cur, double shrink, double inv_lr)
{
	double	   *sum = acc->sums + block * acc->dim;

	for (int32 k = 0; k < acc->dim; k++)
		sum[k] += (shrink * prev[k] - cur[k]) * inv_lr;
}

/*
 * GraB with the buffer kept in order (linear_model.c's train_by_blocks): add
 * to block's sum the loss gradients read off a run of per-tuple steps,
 * (shrink * snap[i] - w[i]) * inv_lr at coordinates offset..offset+n-1, and
 * move the snapshot on (snap[i] = w[i]) in the same pass, so that the next
 * run starts from these weights without a copy.  Every coordinate is added,
 * zeros too: a dense difference is rarely zero, and the test cost more than
 * the add (a mispredicted branch per coordinate); a zero adds nothing but
 * the sign of a zero sum, which the walk does not see.
 */
void
cp_grab_add_step_delta(CpGrabAcc *acc, int64 block, int32 offset,
					   double *snap, const double *w, int32 n,
					   double shrink, double inv_lr)
{
	double	   *sum = acc->sums + block * acc->dim;

	if (acc->proj_nnz == 0)
	{
		double	   *dst = sum + offset;

		for (int32 i = 0; i < n; i++)
		{
			dst[i] += (shrink * snap[i] - w[i]) * inv_lr;
			snap[i] = w[i];
		}
		return;
	}
	if (grab_proj_runs(acc))
	{
		/* locals, so that no store into the sums can change them */
		double		scale = acc->proj_scale;

		for (int32 i = 0; i < n;)
		{
			int64		j = (int64) offset + i;
			int32		len = grab_proj_run(acc, j, n - i);
			double	   *dst = sum + (acc->proj_map[j] >> 1);
			const int32 *map = acc->proj_map + j;
			double	   *sn = snap + i;
			const double *wi = w + i;

			for (int32 k = 0; k < len; k++)
			{
				double		d = (shrink * sn[k] - wi[k]) * inv_lr;

				sn[k] = wi[k];
				dst[k] += (double) (2 * (map[k] & 1) - 1) * (d * scale);
			}
			i += len;
		}
		return;
	}
	for (int32 i = 0; i < n; i++)
	{
		double		d = (shrink * snap[i] - w[i]) * inv_lr;

		snap[i] = w[i];
		grab_proj_add(acc, sum, (int64) offset + i, d);
	}
}

/* The same for a sparse vector: values[k] at coordinate offset+indices[k]. */
void
cp_grab_add_sparse(CpGrabAcc *acc, int64 block, int32 offset,
				   const int32 *indices, const double *values, int32 nnz,
				   double scale)
{
	double	   *sum = acc->sums + block * acc->dim;

	if (acc->proj_nnz == 0)
	{
		double	   *dst = sum + offset;

		for (int32 k = 0; k < nnz; k++)
			dst[indices[k]] += scale * values[k];
		return;
	}
	for (int32 k = 0; k < nnz; k++)
	{
		if (values[k] != 0.0)
			grab_proj_add(acc, sum, (int64) offset + indices[k], scale * values[k]);
	}
}

/*
 * Harvey and Samadi's reordering (CD-GraB's Algorithm 1): the +1 entries of
 * visit in order, then the -1 entries reversed.  Filling the -1 entries from
 * the end is that reversal.
 */
void
cp_grab_reorder(const uint32 *visit, const int8 *signs, int64 n, uint32 *next)
{
	int64		left = 0;
	int64		right = n - 1;

	for (int64 i = 0; i < n; i++)
	{
		if (signs[i] > 0)
			next[left++] = visit[i];
		else
			next[right--] = visit[i];
	}
}

/*
 * The mean gradient per tuple over the visited blocks (zero when they hold
 * no tuple).  Summed in visiting order, so it is deterministic.
 */
void
cp_grab_mean(const CpGrabAcc *acc, const uint32 *visit, int64 n, double *mean)
{
	int32		dim = acc->dim;
	int64		tuples = 0;

	memset(mean, 0, sizeof(double) * dim);
	for (int64 i = 0; i < n; i++)
	{
		const double *g = acc->sums + (int64) visit[i] * dim;

		tuples += acc->counts[visit[i]];
		for (int32 k = 0; k < dim; k++)
			mean[k] += g[k];
	}
	if (tuples == 0)
		return;
	for (int32 k = 0; k < dim; k++)
		mean[k] /= (double) tuples;
}

/* <run, c> with c = sum - count * mean, computed the same way everywhere */
static inline double
grab_dot_centred(const double *run, const double *sum, double count,
				 const double *mean, int32 dim)
{
	double		dot = 0.0;

	if (mean == NULL)
	{
		for (int32 k = 0; k < dim; k++)
			dot += run[k] * sum[k];
		return dot;
	}
	for (int32 k = 0; k < dim; k++)
		dot += run[k] * (sum[k] - count * mean[k]);
	return dot;
}

/* run += sign * (sum - count * mean) */
static inline void
grab_run_add(double *run, int sign, const double *sum, double count,
			 const double *mean, int32 dim)
{
	if (mean == NULL)
	{
		for (int32 k = 0; k < dim; k++)
			run[k] += sign * sum[k];
		return;
	}
	for (int32 k = 0; k < dim; k++)
		run[k] += sign * (sum[k] - count * mean[k]);
}

/*
 * One step of the balancing walk: centre sum by count * mean (NULL for
 * none), take the sign and update run.  The walk below takes its steps
 * here; so can a caller that keeps no per-block sums beyond the current
 * ones, with the previous epoch's mean per tuple (the sign-only GraB of
 * scripts/grab_simulation.py).  The caller records the sign and reorders
 * with cp_grab_reorder at the end.
 */
int
cp_grab_online_step(double *run, const double *sum, int64 count,
					const double *mean, int32 dim)
{
	int			sign;

	sign = grab_dot_centred(run, sum, (double) count, mean, dim) <= 0.0 ? 1 : -1;
	grab_run_add(run, sign, sum, (double) count, mean, dim);
	return sign;
}

/*
 * The balancing walk with a given centre: signs[i] for the block visit[i],
 * next = the reordering.  run is dim doubles of scratch (the final running
 * sum is left there).
 */
void
cp_grab_walk_with_mean(const CpGrabAcc *acc, const uint32 *visit, int64 n,
					   const double *mean, double *run, int8 *signs,
					   uint32 *next)
{
	int32		dim = acc->dim;

	memset(run, 0, sizeof(double) * dim);
	for (int64 i = 0; i < n; i++)
	{
		const double *g = acc->sums + (int64) visit[i] * dim;

		signs[i] = (int8) cp_grab_online_step(run, g, acc->counts[visit[i]],
											  mean, dim);
	}
	cp_grab_reorder(visit, signs, n, next);
}

/*
 * Block GraB at the end of an epoch: centre by this epoch's own mean (all
 * the sums are at hand, so no stale mean is needed) and walk.  work is
 * 2 * dim doubles.
 */
void
cp_grab_walk(const CpGrabAcc *acc, const uint32 *visit, int64 n,
			 double *work, int8 *signs, uint32 *next)
{
	double	   *mean = work;
	double	   *run = work + acc->dim;

	cp_grab_mean(acc, visit, n, mean);
	cp_grab_walk_with_mean(acc, visit, n, mean, run, signs, next);
}

/*
 * GraB units of several blocks: unit_of[first[i]] = i / unit_blocks, the
 * first epoch's order cut into runs of unit_blocks blocks.
 */
void
cp_grab_form_units(const uint32 *first, int64 n, int32 unit_blocks, uint32 *unit_of)
{
	for (int64 i = 0; i < n; i++)
		unit_of[first[i]] = (uint32) (i / unit_blocks);
}

/*
 * The walk over units (acc holds one sum per unit, n_units of them) for an
 * epoch that visited the blocks in visit (n_blocks), each unit's blocks one
 * after the other.  Every block takes its unit's sign (signs, in visiting
 * order), and next is cp_grab_reorder of the blocks by those signs, so that
 * a unit moves as a whole (a -1 unit reversed inside too) and stays
 * contiguous.  Scratch: uvisit, unext (n_units), usigns, unit_sign
 * (n_units), work (2 * dim).  False, with nothing walked, when a unit's
 * blocks were not consecutive in visit or a unit was not visited.
 */
bool
cp_grab_walk_units(const CpGrabAcc *acc, const uint32 *visit, int64 n_blocks,
				   const uint32 *unit_of, int64 n_units, uint32 *uvisit,
				   uint32 *unext, int8 *usigns, int8 *unit_sign,
				   double *work, int8 *signs, uint32 *next)
{
	int64		nu = 0;

	for (int64 i = 0; i < n_blocks; i++)
	{
		uint32		u = unit_of[visit[i]];

		if (nu > 0 && uvisit[nu - 1] == u)
			continue;
		if (nu >= n_units || u >= n_units)
			return false;
		uvisit[nu++] = u;
	}
	if (nu != n_units)
		return false;
	cp_grab_walk(acc, uvisit, nu, work, usigns, unext);
	for (int64 p = 0; p < nu; p++)
		unit_sign[uvisit[p]] = usigns[p];
	for (int64 i = 0; i < n_blocks; i++)
		signs[i] = unit_sign[unit_of[visit[i]]];
	cp_grab_reorder(visit, signs, n_blocks, next);
	return true;
}

/*
 * CD-GraB's PairBalance over n_workers workers.  Worker w visited the blocks
 * visit[starts[w] .. starts[w+1]-1] in that order.  In step k every worker
 * that has a k-th pair (its blocks 2k and 2k+1) contributes, worker 0 first,
 * the difference of the pair's centred sums; one running sum r shared by all
 * workers gives the sign: +1 (r += d) when <r, d> <= 0, else -1 (r -= d).
 * With +1 the pair's first block goes to the worker's front and the second
 * to its back, with -1 the other way round, which is Algorithm 1 applied to
 * signs (s, -s) and is how next is built.  A worker's odd last block has no
 * partner and takes the one slot left in the middle (sign +1).
 *
 * Each worker keeps its own blocks: next[starts[w] ..] is worker w's next
 * order.  The centring by (|a| - |b|) m with this epoch's mean only matters
 * when the pair's blocks hold different numbers of tuples (the paper's
 * examples are all of size one, where it vanishes).  work is 3 * dim.
 */
void
cp_grab_pair_balance(const CpGrabAcc *acc, int32 n_workers,
					 const int64 *starts, const uint32 *visit,
					 double *work, int8 *signs, uint32 *next)
{
	int32		dim = acc->dim;
	double	   *mean = work;
	double	   *run = work + dim;
	double	   *diff = work + 2 * dim;
	int64		max_pairs = 0;

	cp_grab_mean(acc, visit + starts[0], starts[n_workers] - starts[0], mean);
	memset(run, 0, sizeof(double) * dim);
	for (int32 w = 0; w < n_workers; w++)
	{
		int64		n_w = starts[w + 1] - starts[w];

		max_pairs = Max(max_pairs, n_w / 2);
		if (n_w % 2 == 1)
			signs[starts[w + 1] - 1] = 1;
	}

	for (int64 k = 0; k < max_pairs; k++)
	{
		for (int32 w = 0; w < n_workers; w++)
		{
			int64		pos = starts[w] + 2 * k;
			const double *ga;
			const double *gb;
			double		ca;
			double		cb;
			int			sign;

			if (pos + 1 >= starts[w + 1])
				continue;
			ga = acc->sums + (int64) visit[pos] * dim;
			gb = acc->sums + (int64) visit[pos + 1] * dim;
			ca = (double) acc->counts[visit[pos]];
			cb = (double) acc->counts[visit[pos + 1]];
			for (int32 j = 0; j < dim; j++)
				diff[j] = (ga[j] - ca * mean[j]) - (gb[j] - cb * mean[j]);
			sign = grab_dot_centred(run, diff, 0.0, NULL, dim) <= 0.0 ? 1 : -1;
			grab_run_add(run, sign, diff, 0.0, NULL, dim);
			signs[pos] = (int8) sign;
			signs[pos + 1] = (int8) -sign;
		}
	}

	for (int32 w = 0; w < n_workers; w++)
		cp_grab_reorder(visit + starts[w], signs + starts[w],
						starts[w + 1] - starts[w], next + starts[w]);
}

/*
 * For comparison with PairBalance: each worker runs its own GraB walk over
 * its own blocks, centred by its own mean, with its own running sum (the
 * paper's ID-GraB).  Same layout as cp_grab_pair_balance; work is 2 * dim.
 */
void
cp_grab_walk_independent(const CpGrabAcc *acc, int32 n_workers,
						 const int64 *starts, const uint32 *visit,
						 double *work, int8 *signs, uint32 *next)
{
	for (int32 w = 0; w < n_workers; w++)
		cp_grab_walk(acc, visit + starts[w], starts[w + 1] - starts[w],
					 work, signs + starts[w], next + starts[w]);
}

/*
 * Stored form of an epoch's order and signs, for the model row: a 12-byte
 * header ("CPGB", format version, three zero bytes, n_blocks as 32-bit
 * little-endian), n_blocks 32-bit little-endian block numbers in visiting
 * order, then one bit per block (bit i % 8 of byte i / 8 set for +1).  The
 * next epoch's order is cp_grab_reorder of the two.  Little-endian
 * explicitly, so a dump restored on another machine reads the same.
 */
bool
cp_grab_serialized_bytes(uint32 n_blocks, Size *bytes)
{
	uint64		body;
	uint64		total;

	if (pg_mul_u64_overflow((uint64) n_blocks, sizeof(uint32), &body) ||
		pg_add_u64_overflow(body, ((uint64) n_blocks + 7) / 8, &total) ||
		pg_add_u64_overflow(total, CP_GRAB_HEADER_BYTES, &total) ||
		total > (uint64) SIZE_MAX)
		return false;
	*bytes = (Size) total;
	return true;
}

static inline void
grab_put_u32(uint8 *p, uint32 v)
{
	p[0] = (uint8) v;
	p[1] = (uint8) (v >> 8);
	p[2] = (uint8) (v >> 16);
	p[3] = (uint8) (v >> 24);
}

static inline uint32
grab_get_u32(const uint8 *p)
{
	return (uint32) p[0] | ((uint32) p[1] << 8) |
		((uint32) p[2] << 16) | ((uint32) p[3] << 24);
}

/* out holds cp_grab_serialized_bytes(n_blocks) bytes */
void
cp_grab_serialize(const uint32 *visit, const int8 *signs, uint32 n_blocks,
				  uint8 *out)
{
	uint8	   *bits = out + CP_GRAB_HEADER_BYTES + (Size) n_blocks * 4;

	memcpy(out, "CPGB", 4);
	out[4] = CP_GRAB_FORMAT_VERSION;
	out[5] = out[6] = out[7] = 0;
	grab_put_u32(out + 8, n_blocks);
	for (uint32 i = 0; i < n_blocks; i++)
		grab_put_u32(out + CP_GRAB_HEADER_BYTES + (Size) i * 4, visit[i]);
	memset(bits, 0, ((Size) n_blocks + 7) / 8);
	for (uint32 i = 0; i < n_blocks; i++)
	{
		if (signs[i] > 0)
			bits[i / 8] |= (uint8) (1 << (i % 8));
	}
}

/*
 * Check a stored order's header and length and report its block count, so
 * the caller can size the arrays for cp_grab_deserialize.  A model row is
 * untrusted data: nothing is read beyond len.
 */
CpGrabLoadStatus
cp_grab_stored_blocks(const uint8 *in, Size len, uint32 *n_blocks)
{
	Size		expected;
	uint32		n;

	if (len < CP_GRAB_HEADER_BYTES)
		return CP_GRAB_LOAD_TRUNCATED;
	if (memcmp(in, "CPGB", 4) != 0)
		return CP_GRAB_LOAD_BAD_MAGIC;
	if (in[4] != CP_GRAB_FORMAT_VERSION || in[5] != 0 || in[6] != 0 || in[7] != 0)
		return CP_GRAB_LOAD_BAD_VERSION;
	n = grab_get_u32(in + 8);
	if (!cp_grab_serialized_bytes(n, &expected) || len != expected)
		return CP_GRAB_LOAD_TRUNCATED;
	*n_blocks = n;
	return CP_GRAB_LOAD_OK;
}

/*
 * Read a stored order back: visit and signs get n_blocks entries (from
 * cp_grab_stored_blocks), seen is n_blocks bytes of scratch.  The order must
 * be a permutation of 0..n_blocks-1 and the padding bits zero.
 */
CpGrabLoadStatus
cp_grab_deserialize(const uint8 *in, Size len, uint32 *visit, int8 *signs,
					uint8 *seen)
{
	uint32		n = 0;
	CpGrabLoadStatus st;
	const uint8 *bits;

	st = cp_grab_stored_blocks(in, len, &n);
	if (st != CP_GRAB_LOAD_OK)
		return st;
	bits = in + CP_GRAB_HEADER_BYTES + (Size) n * 4;
	memset(seen, 0, n);
	for (uint32 i = 0; i < n; i++)
	{
		uint32		b = grab_get_u32(in + CP_GRAB_HEADER_BYTES + (Size) i * 4);

		if (b >= n || seen[b])
			return CP_GRAB_LOAD_NOT_PERMUTATION;
		seen[b] = 1;
		visit[i] = b;
		signs[i] = (bits[i / 8] >> (i % 8)) & 1 ? 1 : -1;
	}
	if (n % 8 != 0 && (bits[n / 8] >> (n % 8)) != 0)
		return CP_GRAB_LOAD_BAD_SIGNS;
	return CP_GRAB_LOAD_OK;
}

/*
 * Carry an order over old_n blocks to a table that now has new_n: blocks
 * that vanished (>= new_n) are dropped, those that appeared (old_n ..
 * new_n-1) are appended in a seeded random order (GraB knows nothing about
 * them yet; the next epoch's walk places them).  out holds new_n entries.
 * Returns the number of blocks dropped or added, for the caller's NOTICE.
 */
uint32
cp_grab_adapt_order(const uint32 *order, uint32 old_n, uint32 new_n,
					uint64 seed, uint32 *out)
{
	uint32		kept = 0;
	uint64		state = seed;

	for (uint32 i = 0; i < old_n; i++)
	{
		if (order[i] < new_n)
			out[kept++] = order[i];
	}
	for (uint32 b = old_n; b < new_n; b++)
	{
		/* inside-out Fisher-Yates over the appended tail */
		uint32		pos = kept + (b - old_n);
		uint32		j = kept + (uint32) grab_below(&state, (uint64) (b - old_n) + 1);

		if (j != pos)
			out[pos] = out[j];
		out[j] = b;
	}
	return (old_n - kept) + (new_n > old_n ? new_n - old_n : 0);
}
