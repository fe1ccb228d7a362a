/*-------------------------------------------------------------------------
 *
 * polish.c
 *	  L-BFGS on the regularized objective of a training, over rows in
 *	  memory (polish.h says when and why).
 *
 * The objective is the one the SGD steps descend (linear_model.c):
 *
 *     f(w) = (1/n) sum_i loss(w . x_i + b, y_i) + l2/2 |w|^2
 *
 * with the biases b outside the penalty; for softmax a weight vector and
 * a bias per class.  One pass over the rows gives f and its gradient.
 * L-BFGS keeps the last CP_POLISH_MEMORY steps and gradient changes, and
 * each step's length is found by halving from 1 until f decreases enough
 * (Armijo); a step that is not a descent direction, or a curvature pair
 * that is not positive, restarts from the gradient.  It stops when no
 * gradient entry exceeds CP_POLISH_GRADIENT (scikit-learn's lbfgs stops
 * at 1e-4 on the same mean-scaled objective), when a step no longer
 * changes f, before a pass would exceed max_passes, or when no step along
 * the direction decreases f.  Interrupts are the caller's (polish.h): the
 * same rows and start give the same passes and weights, whatever arrives.
 *
 *-------------------------------------------------------------------------
 */
#include "c.h"

#include <math.h>

#include "polish.h"

#define CP_POLISH_MEMORY 10
#define CP_POLISH_GRADIENT 1e-7
#define CP_POLISH_HALVINGS 50
#define CP_POLISH_ARMIJO 1e-4

/* Smooth losses only: the hinge has no gradient at the margin. */
bool
cp_polish_applies(const CpModel *m)
{
	return m->kind != CP_MODEL_SVM && m->l1 == 0.0;
}

/*
 * The memory cp_polish takes: the gradient, the direction, a candidate
 * and its gradient, and CP_POLISH_MEMORY steps and gradient changes, of
 * n_weights doubles each (the caller weighs it against its budget).
 */
Size
cp_polish_bytes(const CpModel *m)
{
	return (Size) (4 + 2 * CP_POLISH_MEMORY) * sizeof(double) * (Size) m->n_weights +
		sizeof(double) * (Size) m->n_outputs;
}

static double
dot(const double *a, const double *b, int n)
{
	double		s = 0.0;

	for (int i = 0; i < n; i++)
		s += a[i] * b[i];
	return s;
}

/*
 * f(w) and its gradient into g, in one pass over buf's rows.  mw is a
 * copy of the model whose w is pointed at the weights to evaluate.
 */
static double
objective(CpModel *mw, const CpBuffer *buf, const double *w, double *g, double *z)
{
	int			nw = mw->n_weights;
	int			d = mw->n_features;
	double		loss = 0.0;
	double		reg = 0.0;
	double		inv_n = 1.0 / (double) Max(buf->n_rows, 1);

	mw->w = (double *) w;
	memset(g, 0, sizeof(double) * nw);
	for (int64 row = 0; row < buf->n_rows; row++)
	{
		double		y = buf->labels[row];

		cp_model_outputs(mw, buf, row, z);
		if (mw->kind == CP_MODEL_SOFTMAX)
		{
			int			cls = (int) y;

			loss += -z[cls];
			loss += cp_softmax(z, mw->n_outputs);
			z[cls] -= 1.0;		/* d loss / d z_k = p_k - [k == y] */
		}
		else
		{
			loss += cp_loss(mw->kind, z[0], y);
			z[0] = cp_dloss(mw->kind, z[0], y);
		}
		for (int o = 0; o < mw->n_outputs; o++)
		{
			double	   *go = g + (int64) o * mw->stride;

			if (z[o] == 0.0)
				continue;
			if (buf->sparse)
			{
				for (int64 k = buf->offsets[row]; k < buf->offsets[row + 1]; k++)
					go[buf->indices[k]] += z[o] * buf->values[k];
			}
			else
			{
				const double *x = cp_buffer_dense_row(buf, row);

				for (int j = 0; j < d; j++)
					go[j] += z[o] * x[j];
			}
			go[d] += z[o];
		}
	}
	for (int o = 0; o < mw->n_outputs; o++)
	{
		const double *wo = w + (int64) o * mw->stride;
		double	   *go = g + (int64) o * mw->stride;

		for (int j = 0; j <= d; j++)
			go[j] *= inv_n;
		for (int j = 0; j < d; j++)
		{
			go[j] += mw->l2 * wo[j];
			reg += wo[j] * wo[j];
		}
	}
	return loss * inv_n + 0.5 * mw->l2 * reg;
}

static double
max_abs(const double *v, int n)
{
	double		m = 0.0;

	for (int i = 0; i < n; i++)
		m = Max(m, fabs(v[i]));
	return m;
}

/*
 * Minimise f from w, in place.  Returns false, w untouched, when memory
 * could not be had or f is not finite at w; else true, with w no worse
 * than it came (each step decreases f).
 */
bool
cp_polish(const CpModel *m, const CpBuffer *buf, double *w, int max_passes,
		  CpAllocZero alloc, CpPolishYield yield, void *yield_arg,
		  CpPolishResult *res)
{
	int			n = m->n_weights;
	CpModel		mw = *m;
	double	   *g = alloc(sizeof(double) * n);
	double	   *dir = alloc(sizeof(double) * n);
	double	   *x_new = alloc(sizeof(double) * n);
	double	   *g_new = alloc(sizeof(double) * n);
	double	   *s = alloc(sizeof(double) * n * CP_POLISH_MEMORY);
	double	   *y = alloc(sizeof(double) * n * CP_POLISH_MEMORY);
	double	   *z = alloc(sizeof(double) * m->n_outputs);
	double		rho[CP_POLISH_MEMORY];
	double		alpha[CP_POLISH_MEMORY];
	int			stored = 0;		/* pairs held */
	int			newest = -1;	/* index of the newest pair */
	double		f;

	memset(res, 0, sizeof(*res));
	res->stop = CP_POLISH_BUDGET;
	if (!g || !dir || !x_new || !g_new || !s || !y || !z || buf->n_rows == 0)
		return false;
	f = objective(&mw, buf, w, g, z);
	res->passes = 1;
	res->objective_before = f;
	res->objective_after = f;
	if (!isfinite(f))
		return false;

	while (res->passes < max_passes)
	{
		double		gd;
		double		t = 1.0;
		double		f_new = f;
		bool		accepted = false;
		double		sy;

		res->gradient_max = max_abs(g, n);
		if (res->gradient_max <= CP_POLISH_GRADIENT)
		{
			res->stop = CP_POLISH_CONVERGED;
			break;
		}

		/* dir = -H g, H from the stored pairs (two-loop recursion) */
		memcpy(dir, g, sizeof(double) * n);
		for (int k = 0; k < stored; k++)
		{
			int			i = (newest - k + CP_POLISH_MEMORY) % CP_POLISH_MEMORY;

			alpha[i] = rho[i] * dot(s + (int64) i * n, dir, n);
			for (int j = 0; j < n; j++)
				dir[j] -= alpha[i] * y[(int64) i * n + j];
		}
		if (stored > 0)
		{
			const double *yn = y + (int64) newest * n;
			double		gamma = dot(s + (int64) newest * n, yn, n) / dot(yn, yn, n);

			for (int j = 0; j < n; j++)
				dir[j] *= gamma;
		}
		else
		{
			/* the first step: a unit step of the largest gradient entry */
			double		scale = 1.0 / Max(res->gradient_max, 1.0);

			for (int j = 0; j < n; j++)
				dir[j] *= scale;
		}
		for (int k = stored - 1; k >= 0; k--)
		{
			int			i = (newest - k + CP_POLISH_MEMORY) % CP_POLISH_MEMORY;
			double		beta = rho[i] * dot(y + (int64) i * n, dir, n);

			for (int j = 0; j < n; j++)
				dir[j] += s[(int64) i * n + j] * (alpha[i] - beta);
		}
		for (int j = 0; j < n; j++)
			dir[j] = -dir[j];
		gd = dot(g, dir, n);
		if (!(gd < 0.0))
		{
			/* not a descent direction: forget the pairs, follow -g */
			stored = 0;
			for (int j = 0; j < n; j++)
				dir[j] = -g[j] / Max(res->gradient_max, 1.0);
			gd = dot(g, dir, n);
		}

		for (int h = 0; h < CP_POLISH_HALVINGS && res->passes < max_passes; h++)
		{
			/* a pass can be long: the caller is heard between passes */
			if (yield)
				yield(yield_arg);
			for (int j = 0; j < n; j++)
				x_new[j] = w[j] + t * dir[j];
			f_new = objective(&mw, buf, x_new, g_new, z);
			res->passes++;
			if (isfinite(f_new) && f_new <= f + CP_POLISH_ARMIJO * t * gd)
			{
				accepted = true;
				break;
			}
			t *= 0.5;
		}
		if (!accepted)
		{
			if (res->passes < max_passes)
				res->stop = CP_POLISH_NO_DESCENT;
			break;
		}
		res->iterations++;

		/* the new curvature pair, kept if it is positive */
		newest = (newest + 1) % CP_POLISH_MEMORY;
		for (int j = 0; j < n; j++)
		{
			s[(int64) newest * n + j] = x_new[j] - w[j];
			y[(int64) newest * n + j] = g_new[j] - g[j];
		}
		sy = dot(s + (int64) newest * n, y + (int64) newest * n, n);
		if (sy > 0.0)
		{
			rho[newest] = 1.0 / sy;
			stored = Min(stored + 1, CP_POLISH_MEMORY);
		}
		else
		{
			stored = 0;
			newest = -1;
		}
		memcpy(w, x_new, sizeof(double) * n);
		memcpy(g, g_new, sizeof(double) * n);
		if (f - f_new <= 1e-15 * Max(fabs(f), 1.0))
		{
			/* f no longer moves: as close as doubles tell */
			f = f_new;
			res->gradient_max = max_abs(g, n);
			res->stop = CP_POLISH_CONVERGED;
			break;
		}
		f = f_new;
	}
	res->objective_after = f;
	res->converged = res->stop == CP_POLISH_CONVERGED;
	if (!res->converged)
		res->gradient_max = max_abs(g, n);
	return true;
}
