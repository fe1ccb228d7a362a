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
 * gradient entry exceeds the caller's gtol (scikit-learn's lbfgs takes
 * 1e-4 on the same mean-scaled objective), when a step no longer changes f
 * (by 64 machine epsilons relative, scipy's ftol), before a pass would
 * exceed max_passes, or when no step along the direction decreases f.  Interrupts are the caller's (polish.h): the
 * same rows and start give the same passes and weights, whatever arrives.
 *
 *-------------------------------------------------------------------------
 */
#include "c.h"

#include <float.h>
#include <math.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

#include "polish.h"

#define CP_POLISH_MEMORY 10
#define CP_POLISH_HALVINGS 50
#define CP_POLISH_ARMIJO 1e-4

/*
 * The squared loss's objective is quadratic: its minimum solves the normal
 * equations (X'X / n + l2 I) w = X'y / n (the bias's row unpenalised), as
 * Ridge's cholesky solver does, in one pass over the rows and a Cholesky
 * factorisation of a (d + 1)^2 matrix, instead of L-BFGS's hundred passes
 * or more.  The pass costs (d + 1)^2 / 2 multiply-adds a row, about
 * (d + 1) / 4 of L-BFGS's passes: up to 512 weights (2 MB of matrix, a
 * pass worth about 130 of L-BFGS's); L-BFGS above.
 */
#define CP_POLISH_NORMAL_MAX 512

static bool
normal_equations(const CpModel *m)
{
	return m->kind == CP_MODEL_LINEAR && m->n_outputs == 1 && m->stride <= CP_POLISH_NORMAL_MAX;
}

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
	Size		lbfgs = (Size) (4 + 2 * CP_POLISH_MEMORY) * sizeof(double) * (Size) m->n_weights +
		sizeof(double) * (Size) m->n_outputs;

	if (normal_equations(m))
		return lbfgs + sizeof(double) * ((Size) m->stride * m->stride + 2 * (Size) m->stride);
	return lbfgs;
}

static double
dot(const double *a, const double *b, int n)
{
	double		s = 0.0;

	for (int i = 0; i < n; i++)
		s += a[i] * b[i];
	return s;
}

/* g += c * x over n doubles (the gradient's share of one dense row) */
static inline void
axpy(double *restrict g, double c, const double *restrict x, int n)
{
	int			j = 0;

#ifdef __SSE2__
	__m128d		cc = _mm_set1_pd(c);

	for (; j + 4 <= n; j += 4)
	{
		_mm_storeu_pd(g + j, _mm_add_pd(_mm_loadu_pd(g + j),
										_mm_mul_pd(cc, _mm_loadu_pd(x + j))));
		_mm_storeu_pd(g + j + 2, _mm_add_pd(_mm_loadu_pd(g + j + 2),
											_mm_mul_pd(cc, _mm_loadu_pd(x + j + 2))));
	}
#endif
	for (; j < n; j++)
		g[j] += c * x[j];
}

/*
 * A row's loss and, in z, d loss / d z of each output, from its margins
 * in z.  One exp per output (softmax) or per row (logistic): the pass's
 * transcendental cost, which is most of it on narrow rows.
 */
static inline double
row_loss(CpModelKind kind, int k, double *z, double y)
{
	if (kind == CP_MODEL_SOFTMAX)
	{
		int			cls = (int) y;
		double		max = z[0];
		double		sum = 0.0;
		double		zy = z[cls];
		double		inv;

		for (int o = 1; o < k; o++)
			max = Max(max, z[o]);
		for (int o = 0; o < k; o++)
		{
			z[o] = exp(z[o] - max);
			sum += z[o];
		}
		inv = 1.0 / sum;
		for (int o = 0; o < k; o++)
			z[o] *= inv;
		z[cls] -= 1.0;			/* d loss / d z_k = p_k - [k == y] */
		return max + log(sum) - zy;
	}
	if (kind == CP_MODEL_LOGISTIC)
	{
		/* loss log(1 + e^t), t = -y z; d/dz = -y sigmoid(t); one exp */
		double		t = -y * z[0];
		double		e = exp(-fabs(t));
		double		sig = t >= 0.0 ? 1.0 / (1.0 + e) : e / (1.0 + e);

		z[0] = -y * sig;
		return Max(t, 0.0) + log1p(e);
	}
	{
		double		r = z[0] - y;	/* linear: squared loss */

		z[0] = r;
		return 0.5 * r * r;
	}
}

/*
 * f(w) and its gradient into g, in one pass over buf's rows; the mean loss
 * alone (f without the penalty) into *mean_loss.  Dense rows take the
 * vectorised dot product and axpy; sparse rows their entries.
 */
static double
objective(const CpModel *m, const CpBuffer *buf, const double *w, double *g, double *z,
		  double *mean_loss)
{
	int			d = m->n_features;
	int			k = m->n_outputs;
	int64		stride = m->stride;
	double		loss = 0.0;
	double		reg = 0.0;
	double		inv_n = 1.0 / (double) Max(buf->n_rows, 1);

	memset(g, 0, sizeof(double) * m->n_weights);
	for (int64 row = 0; row < buf->n_rows; row++)
	{
		if (buf->sparse)
		{
			int64		lo = buf->offsets[row];
			int64		hi = buf->offsets[row + 1];

			for (int o = 0; o < k; o++)
			{
				const double *wo = w + o * stride;
				double		s = 0.0;

				for (int64 e = lo; e < hi; e++)
					s += wo[buf->indices[e]] * buf->values[e];
				z[o] = s + wo[d];
			}
			loss += row_loss(m->kind, k, z, buf->labels[row]);
			for (int o = 0; o < k; o++)
			{
				double	   *go = g + o * stride;
				double		c = z[o];

				if (c == 0.0)
					continue;
				for (int64 e = lo; e < hi; e++)
					go[buf->indices[e]] += c * buf->values[e];
				go[d] += c;
			}
		}
		else
		{
			const double *x = cp_buffer_dense_row(buf, row);

			for (int o = 0; o < k; o++)
				z[o] = cp_margin_dense(w + o * stride, x, d) + w[o * stride + d];
			loss += row_loss(m->kind, k, z, buf->labels[row]);
			for (int o = 0; o < k; o++)
			{
				double	   *go = g + o * stride;

				if (z[o] == 0.0)
					continue;
				axpy(go, z[o], x, d);
				go[d] += z[o];
			}
		}
	}
	for (int o = 0; o < k; o++)
	{
		const double *wo = w + o * stride;
		double	   *go = g + o * stride;

		for (int j = 0; j <= d; j++)
			go[j] *= inv_n;
		for (int j = 0; j < d; j++)
		{
			go[j] += m->l2 * wo[j];
			reg += wo[j] * wo[j];
		}
	}
	if (mean_loss)
		*mean_loss = loss * inv_n;
	return loss * inv_n + 0.5 * m->l2 * reg;
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
 * g = Aw - b and f(w) = w'Aw / 2 - b'w + yy / 2, with A's off-diagonal
 * entries read from the strict upper half of a (row i < column j) and its
 * diagonal from adiag.
 */
static double
quadratic(const double *a, const double *adiag, const double *b, double yy,
		  const double *w, int D, double *g)
{
	double		f = 0.5 * yy;

	for (int i = 0; i < D; i++)
	{
		double		t = adiag[i] * w[i];

		for (int j = 0; j < D; j++)
			if (j != i)
				t += a[(int64) Min(i, j) * D + Max(i, j)] * w[j];
		g[i] = t - b[i];
		f += w[i] * (0.5 * t - b[i]);
	}
	return f;
}

/*
 * The squared loss's minimum by the normal equations (normal_equations()):
 * A = X~'X~ / n + L, b = X~'y / n with x~ = (x, 1) and L the penalty on the
 * feature weights, then A = C C' (Cholesky, in a's lower triangle) and two
 * triangular solves.  f and its gradient before and after come from A.
 * Returns false, w untouched, when memory could not be had or A is not
 * positive definite to the last pivot (the caller then takes L-BFGS).
 */
static bool
polish_normal(const CpModel *m, const CpBuffer *buf, double *w, CpAllocZero alloc,
			  CpPolishYield yield, void *yield_arg, CpPolishResult *res)
{
	int			d = m->n_features;
	int			D = m->stride;
	double	   *a = alloc(sizeof(double) * (Size) D * D);
	double	   *b = alloc(sizeof(double) * D);
	double	   *x = alloc(sizeof(double) * D);
	double	   *adiag = alloc(sizeof(double) * D);
	double	   *g = alloc(sizeof(double) * D);
	double		yy = 0.0;
	double		inv_n = 1.0 / (double) buf->n_rows;

	if (!a || !b || !x || !adiag || !g)
		return false;
	/* X~'X~ into the upper half (row i, columns >= i), and X~'y */
	for (int64 row = 0; row < buf->n_rows; row++)
	{
		double		y = buf->labels[row];

		/* the pass is as long as a few hundred of L-BFGS's: heard within it */
		if (yield && row % 1024 == 0)
			yield(yield_arg);
		yy += y * y;
		if (buf->sparse)
		{
			int64		lo = buf->offsets[row];
			int64		hi = buf->offsets[row + 1];

			for (int64 e = lo; e < hi; e++)
			{
				int			i = buf->indices[e];
				double		v = buf->values[e];

				for (int64 f = lo; f < hi; f++)
					if (buf->indices[f] >= i)
						a[(int64) i * D + buf->indices[f]] += v * buf->values[f];
				a[(int64) i * D + d] += v;
				b[i] += v * y;
			}
			a[(int64) d * D + d] += 1.0;
			b[d] += y;
		}
		else
		{
			memcpy(x, cp_buffer_dense_row(buf, row), sizeof(double) * d);
			x[d] = 1.0;
			for (int i = 0; i < D; i++)
			{
				if (x[i] != 0.0)
					axpy(a + (int64) i * D + i, x[i], x + i, D - i);
				b[i] += x[i] * y;
			}
		}
	}
	for (int i = 0; i < D; i++)
	{
		for (int j = i; j < D; j++)
			a[(int64) i * D + j] *= inv_n;
		adiag[i] = a[(int64) i * D + i] + (i < d ? m->l2 : 0.0);
		b[i] *= inv_n;
	}
	yy *= inv_n;
	res->passes = 1;
	res->objective_before = quadratic(a, adiag, b, yy, w, D, g);
	if (!isfinite(res->objective_before))
		return false;

	/* A = C C': C's row i, columns < i, in a's lower triangle; its diagonal in x */
	for (int j = 0; j < D; j++)
	{
		double		diag = adiag[j] - dot(a + (int64) j * D, a + (int64) j * D, j);

		if (!(diag > 0.0) || !isfinite(diag))
			return false;
		x[j] = sqrt(diag);
		for (int i = j + 1; i < D; i++)
			a[(int64) i * D + j] = (a[(int64) j * D + i] -
									dot(a + (int64) i * D, a + (int64) j * D, j)) / x[j];
	}
	/* C z = b into g, then C' w = z */
	for (int i = 0; i < D; i++)
		g[i] = (b[i] - dot(a + (int64) i * D, g, i)) / x[i];
	for (int i = D - 1; i >= 0; i--)
	{
		double		t = g[i];

		for (int k = i + 1; k < D; k++)
			t -= a[(int64) k * D + i] * w[k];
		w[i] = t / x[i];
	}
	res->objective_after = quadratic(a, adiag, b, yy, w, D, g);
	res->gradient_max = max_abs(g, D);
	res->iterations = 1;
	res->stop = CP_POLISH_CONVERGED;
	res->converged = true;
	return true;
}

/*
 * Minimise f from w, in place.  Returns false, w untouched, when memory
 * could not be had or f is not finite at w; else true, with w no worse
 * than it came (each step decreases f).
 */
bool
cp_polish(const CpModel *m, const CpBuffer *buf, double *w, int max_passes,
		  double gtol, CpAllocZero alloc, CpPolishYield yield, void *yield_arg,
		  CpPolishResult *res)
{
	int			n = m->n_weights;
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
	if (buf->n_rows == 0)
		return false;
	if (normal_equations(m))
	{
		double	   *w_try = alloc(sizeof(double) * n);

		if (w_try != NULL)
		{
			memcpy(w_try, w, sizeof(double) * n);
			if (polish_normal(m, buf, w_try, alloc, yield, yield_arg, res) &&
				res->objective_after <= res->objective_before)
			{
				memcpy(w, w_try, sizeof(double) * n);
				return true;
			}
			memset(res, 0, sizeof(*res));
			res->stop = CP_POLISH_BUDGET;
		}
	}
	if (!g || !dir || !x_new || !g_new || !s || !y || !z)
		return false;
	f = objective(m, buf, w, g, z, NULL);
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
		if (res->gradient_max <= gtol)
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
			f_new = objective(m, buf, x_new, g_new, z, NULL);
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
		if (f - f_new <= 64 * DBL_EPSILON * Max(Max(fabs(f), fabs(f_new)), 1.0))
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
