/*-------------------------------------------------------------------------
 *
 * metrics.c
 *	  The metrics of a model on rows: corgipile.evaluate()'s
 *	  (functions/evaluate.c), and training's on its held-out rows
 *	  (nodes/holdout.c, validation => 'N%').
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <math.h>

#include "catalog/pg_operator.h"
#include "catalog/pg_type.h"
#include "miscadmin.h"
#include "utils/float.h"

#include "core/linear_model.h"
#include "model/metrics.h"

static void *
alloc_zero(Size size)
{
	return palloc0(size);
}

/*
 * One sort of a class's scores, ascending as float8's btree orders them
 * (NaN last), in half of work_mem each.
 */
static Tuplesortstate *
begin_scores(void)
{
	return tuplesort_begin_datum(FLOAT8OID, Float8LessOperator, InvalidOid, false,
								 Max(work_mem / 2, 64), NULL, TUPLESORT_NONE);
}

static void
add_score(CpEvalState *ev, double z, bool positive)
{
	Tuplesortstate **sort = positive ? &ev->pos_scores : &ev->neg_scores;

	if (*sort == NULL)
		*sort = begin_scores();
	tuplesort_putdatum(*sort, Float8GetDatum(z), false);
	ev->n_pos += positive;
}

static void
add_rows(const CpBuffer *buf, void *arg)
{
	CpEvalState *ev = (CpEvalState *) arg;
	double	   *z = ev->model.z;

	for (int64 r = 0; r < buf->n_rows; r++)
	{
		double		y = buf->labels[r];

		cp_model_outputs(&ev->model, buf, r, z);
		ev->n++;
		switch (ev->model.kind)
		{
			case CP_MODEL_SVM:
			case CP_MODEL_LOGISTIC:
				{
					bool		pos = (y > 0);
					bool		pred = (z[0] > 0.0);

					if (pred && pos)
						ev->tp++;
					else if (pred)
						ev->fp++;
					else if (pos)
						ev->fn++;
					else
						ev->tn++;
					ev->log_loss_sum += cp_loss(CP_MODEL_LOGISTIC, z[0], y);
					add_score(ev, z[0], pos);
					break;
				}
			case CP_MODEL_SOFTMAX:
				{
					int			k = ev->model.n_outputs;
					int			cls = (int) y;
					int			best = 0;
					double		zy = z[cls];

					for (int i = 1; i < k; i++)
						if (z[i] > z[best])
							best = i;
					ev->log_loss_sum += cp_softmax(z, k) - zy;
					if (best == cls)
					{
						ev->correct++;
						ev->class_tp[cls]++;
					}
					else
					{
						ev->class_fp[best]++;
						ev->class_fn[cls]++;
					}
					break;
				}
			case CP_MODEL_LINEAR:
				ev->sse += (z[0] - y) * (z[0] - y);
				ev->sae += fabs(z[0] - y);
				ev->sum_y += y;
				ev->sum_y2 += y * y;
				break;
		}
	}
}

/* The next score of a sorted class into *z; false at its end. */
static bool
next_score(Tuplesortstate *sort, double *z)
{
	Datum		d;
	bool		isnull;

	if (sort == NULL || !tuplesort_getdatum(sort, true, &d, &isnull, NULL))
		return false;
	*z = DatumGetFloat8(d);
	return true;
}

/*
 * Area under the ROC curve: the Mann-Whitney U over the number of
 * (positive, negative) pairs, a tie counting one half.  Both classes'
 * scores come sorted; one walk over each counts, for every run of equal
 * positive scores, the negatives below it and equal to it.  Scores are
 * compared as float8's btree compares them (the sort's order; NaN equals
 * NaN and is above every number).
 */
static double
auc(CpEvalState *ev)
{
	int64		n_neg = ev->n - ev->n_pos;
	double		u = 0.0;
	int64		neg_below = 0;
	double		p;
	double		q = 0.0;
	bool		have_p;
	bool		have_q;

	if (ev->n_pos == 0 || n_neg == 0)
		return NAN;
	tuplesort_performsort(ev->pos_scores);
	tuplesort_performsort(ev->neg_scores);
	have_p = next_score(ev->pos_scores, &p);
	have_q = next_score(ev->neg_scores, &q);
	while (have_p)
	{
		double		s = p;
		int64		run = 0;
		int64		neg_equal = 0;

		while (have_p && float8_cmp_internal(p, s) == 0)
		{
			run++;
			have_p = next_score(ev->pos_scores, &p);
		}
		while (have_q && float8_cmp_internal(q, s) < 0)
		{
			neg_below++;
			have_q = next_score(ev->neg_scores, &q);
		}
		while (have_q && float8_cmp_internal(q, s) == 0)
		{
			neg_equal++;
			have_q = next_score(ev->neg_scores, &q);
		}
		u += (double) run * ((double) neg_below + 0.5 * (double) neg_equal);
		neg_below += neg_equal;
		CHECK_FOR_INTERRUPTS();
	}
	return u / ((double) ev->n_pos * (double) n_neg);
}

/* Free the sorts (and their temporary files); the state is done. */
void
cp_eval_end(CpEvalState *ev)
{
	if (ev->pos_scores != NULL)
		tuplesort_end(ev->pos_scores);
	if (ev->neg_scores != NULL)
		tuplesort_end(ev->neg_scores);
	ev->pos_scores = NULL;
	ev->neg_scores = NULL;
}

static double
ratio(double num, double den)
{
	return den > 0 ? num / den : NAN;
}

/*
 * The metrics of the rows added so far, each handed to fn: the rows of
 * corgipile.evaluate(), and training's held-out rows (validation => 'N%').
 */
void
cp_eval_metrics(CpEvalState *ev, CpMetricFn fn, void *arg)
{
	switch (ev->model.kind)
	{
		case CP_MODEL_SVM:
		case CP_MODEL_LOGISTIC:
			{
				double		precision = ratio(ev->tp, ev->tp + ev->fp);
				double		recall = ratio(ev->tp, ev->tp + ev->fn);

				fn(arg, "accuracy", (double) (ev->tp + ev->tn) / ev->n);
				fn(arg, "precision", precision);
				fn(arg, "recall", recall);
				fn(arg, "f1", ratio(2 * precision * recall, precision + recall));
				fn(arg, "auc", auc(ev));
				fn(arg, "log_loss", ev->model.kind == CP_MODEL_LOGISTIC ?
					ev->log_loss_sum / ev->n : NAN);
				break;
			}
		case CP_MODEL_SOFTMAX:
			{
				double		f1_sum = 0.0;
				int			present = 0;

				for (int k = 0; k < ev->model.n_outputs; k++)
				{
					int64		tp = ev->class_tp[k];

					if (tp + ev->class_fp[k] + ev->class_fn[k] == 0)
						continue;
					present++;
					f1_sum += 2.0 * tp / (2.0 * tp + ev->class_fp[k] + ev->class_fn[k]);
				}
				fn(arg, "accuracy", (double) ev->correct / ev->n);
				fn(arg, "macro_f1", f1_sum / Max(present, 1));
				fn(arg, "log_loss", ev->log_loss_sum / ev->n);
				break;
			}
		case CP_MODEL_LINEAR:
			{
				double		mean = ev->sum_y / ev->n;
				double		sst = ev->sum_y2 - ev->n * mean * mean;

				fn(arg, "rmse", sqrt(ev->sse / ev->n));
				fn(arg, "mae", ev->sae / ev->n);
				fn(arg, "r2", sst > 0 ? 1.0 - ev->sse / sst : NAN);
				break;
			}
	}
}

/*
 * An accumulator for a model being trained (weights w, the shape of like);
 * cp_eval_add_rows adds each buffer of rows.
 */
void
cp_eval_init(CpEvalState *ev, const CpModel *like, double *w)
{
	memset(ev, 0, sizeof(*ev));
	if (!cp_model_init(&ev->model, like->kind, like->n_features, like->n_outputs,
					   like->sparse, 1, 0.0, 0.0, alloc_zero))
		elog(ERROR, "corgipile: could not size the evaluated model");
	ev->model.w = w;
	if (ev->model.kind == CP_MODEL_SOFTMAX)
	{
		ev->class_tp = palloc0(sizeof(int64) * ev->model.n_outputs);
		ev->class_fp = palloc0(sizeof(int64) * ev->model.n_outputs);
		ev->class_fn = palloc0(sizeof(int64) * ev->model.n_outputs);
	}
}

void
cp_eval_add_rows(const CpBuffer *buf, void *arg)
{
	add_rows(buf, arg);
}
