/*
 * Per-tuple logistic SGD for scripts/grab_simulation.py, linked with
 * extension/core/grab.c into a small shared library that the script loads
 * with ctypes: the simulation orders blocks with the very code the engine
 * will run, and the inner loop is C (a Python loop over 100k tuples x 10
 * epochs x dozens of runs would take hours on this machine).
 *
 * The step is the engine's (core/linear_model.c, l2 = 0): margin = w.x + b,
 * g = -y / (1 + exp(y margin)), w -= lr g x, b -= lr g; the gradient added
 * to the block's sum is g x (and g for the bias) at the weights it was
 * computed with, before the step.
 */
#include "c.h"

#include <math.h>
#include <stdlib.h>

#include "core/grab.h"

extern CpGrabAcc *sim_new(int64 n_blocks, int32 n_weights, int32 dim, uint64 seed);
extern void sim_free(CpGrabAcc *acc);
extern void sim_reset(CpGrabAcc *acc);
extern void sim_add(CpGrabAcc *acc, int64 block, const double *x, int32 n,
					int64 count);
extern void sim_train(CpGrabAcc *acc, double *w, int32 d, const double *X,
					  const double *y, const int64 *rows, int64 n, double lr,
					  const int64 *row_block);
extern void sim_walk(CpGrabAcc *acc, const uint32 *visit, int64 n, int8 *signs,
					 uint32 *next);
extern void sim_mean(CpGrabAcc *acc, const uint32 *visit, int64 n, double *mean);
extern void sim_online(CpGrabAcc *acc, double *run, const double *stale_mean,
					   const uint32 *blocks, int64 n, int8 *signs);
extern void sim_pair_balance(CpGrabAcc *acc, int32 n_workers, const int64 *starts,
							 const uint32 *visit, int8 *signs, uint32 *next,
							 int independent);
extern void sim_train_parallel(CpGrabAcc *acc, double *w, int32 d, const double *X,
							   const double *y, int32 n_workers,
							   const int64 *rows, const int64 *starts,
							   double lr, const int64 *row_block);

static void *
sim_alloc(Size size)
{
	return calloc(1, size);
}

CpGrabAcc *
sim_new(int64 n_blocks, int32 n_weights, int32 dim, uint64 seed)
{
	CpGrabAcc  *acc = calloc(1, sizeof(CpGrabAcc));

	if (acc == NULL || !cp_grab_acc_init(acc, n_blocks, n_weights, dim, seed, sim_alloc))
	{
		free(acc);
		return NULL;
	}
	return acc;
}

void
sim_free(CpGrabAcc *acc)
{
	free(acc->sums);
	free(acc->counts);
	free(acc->proj_map);
	free(acc);
}

void
sim_reset(CpGrabAcc *acc)
{
	cp_grab_acc_reset(acc);
}

/* sum[block] += x, count[block] += count: for the script's self-check */
void
sim_add(CpGrabAcc *acc, int64 block, const double *x, int32 n, int64 count)
{
	cp_grab_add_dense(acc, block, 0, x, n, 1.0);
	cp_grab_count(acc, block, count);
}

static inline double
logistic_dloss(const double *w, int32 d, const double *x, double y)
{
	double		m = w[d];

	for (int32 j = 0; j < d; j++)
		m += w[j] * x[j];
	/* d/dm log(1 + exp(-y m)), written to avoid overflow */
	if (y * m > 0)
	{
		double		e = exp(-y * m);

		return -y * e / (1.0 + e);
	}
	return -y / (1.0 + exp(y * m));
}

/* One pass over rows[0..n) in that order; acc may be NULL. */
void
sim_train(CpGrabAcc *acc, double *w, int32 d, const double *X, const double *y,
		  const int64 *rows, int64 n, double lr, const int64 *row_block)
{
	static const double one = 1.0;

	for (int64 i = 0; i < n; i++)
	{
		int64		r = rows[i];
		const double *x = X + r * d;
		double		g = logistic_dloss(w, d, x, y[r]);

		if (acc != NULL)
		{
			int64		b = row_block[r];

			cp_grab_add_dense(acc, b, 0, x, d, g);
			cp_grab_add_dense(acc, b, d, &one, 1, g);
			cp_grab_count(acc, b, 1);
		}
		for (int32 j = 0; j < d; j++)
			w[j] -= lr * g * x[j];
		w[d] -= lr * g;
	}
}

/*
 * Data-parallel SGD as in CD-GraB's equation (7): in step j every worker
 * takes the j-th row of its own sequence (rows[starts[k] + j]) and the
 * model moves by the average of their gradients.  A worker whose sequence
 * is shorter sits the last steps out.
 */
void
sim_train_parallel(CpGrabAcc *acc, double *w, int32 d, const double *X,
				   const double *y, int32 n_workers, const int64 *rows,
				   const int64 *starts, double lr, const int64 *row_block)
{
	static const double one = 1.0;
	int64		longest = 0;
	double	   *step = calloc(d + 1, sizeof(double));

	for (int32 k = 0; k < n_workers; k++)
		longest = Max(longest, starts[k + 1] - starts[k]);
	for (int64 j = 0; j < longest; j++)
	{
		int			active = 0;

		for (int32 i = 0; i <= d; i++)
			step[i] = 0.0;
		for (int32 k = 0; k < n_workers; k++)
		{
			int64		r;
			const double *x;
			double		g;

			if (starts[k] + j >= starts[k + 1])
				continue;
			r = rows[starts[k] + j];
			x = X + r * d;
			g = logistic_dloss(w, d, x, y[r]);
			if (acc != NULL)
			{
				cp_grab_add_dense(acc, row_block[r], 0, x, d, g);
				cp_grab_add_dense(acc, row_block[r], d, &one, 1, g);
				cp_grab_count(acc, row_block[r], 1);
			}
			for (int32 i = 0; i < d; i++)
				step[i] += g * x[i];
			step[d] += g;
			active++;
		}
		for (int32 i = 0; i <= d; i++)
			w[i] -= lr * step[i] / active;
	}
	free(step);
}

void
sim_walk(CpGrabAcc *acc, const uint32 *visit, int64 n, int8 *signs, uint32 *next)
{
	double	   *work = calloc(2 * acc->dim, sizeof(double));

	cp_grab_walk(acc, visit, n, work, signs, next);
	free(work);
}

void
sim_mean(CpGrabAcc *acc, const uint32 *visit, int64 n, double *mean)
{
	cp_grab_mean(acc, visit, n, mean);
}

/* Sign-only GraB: the online steps for one buffer's blocks, in order. */
void
sim_online(CpGrabAcc *acc, double *run, const double *stale_mean,
		   const uint32 *blocks, int64 n, int8 *signs)
{
	for (int64 i = 0; i < n; i++)
		signs[i] = (int8) cp_grab_online_step(run, acc->sums + (int64) blocks[i] * acc->dim,
											  acc->counts[blocks[i]], stale_mean,
											  acc->dim);
}

void
sim_pair_balance(CpGrabAcc *acc, int32 n_workers, const int64 *starts,
				 const uint32 *visit, int8 *signs, uint32 *next, int independent)
{
	double	   *work = calloc(3 * acc->dim, sizeof(double));

	if (independent)
		cp_grab_walk_independent(acc, n_workers, starts, visit, work, signs, next);
	else
		cp_grab_pair_balance(acc, n_workers, starts, visit, work, signs, next);
	free(work);
}
