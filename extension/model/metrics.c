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
					cp_sum_add(&ev->log_loss_sum, cp_loss(CP_MODEL_LOGISTIC, z[0], y));
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
					cp_sum_add(&ev->log_loss_sum, cp_softmax(z, k) - zy);
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
				cp_sum_add(&ev->sse, (z[0] - y) * (z[0] - y));
				cp_sum_add(&ev->sae, fabs(z[0] - y));
				cp_sum_add(&ev->sum_y, y);
				cp_sum_add(&ev->sum_y2, y * y);
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
 * The distinct scores of the rows added, ascending as float8's btree
 * orders them (NaN equals NaN and is above every number), each with its
 * positive and negative rows: one walk over both classes' sorted scores.
 * Memory stays within the sorts' work_mem; the rows of a distinct score
 * are counted, not kept.
 */
void
cp_eval_scores(CpEvalState *ev, CpScoreFn fn, void *arg)
{
	double		p = 0.0;
	double		q = 0.0;
	bool		have_p;
	bool		have_q;

	if (ev->pos_scores != NULL)
		tuplesort_performsort(ev->pos_scores);
	if (ev->neg_scores != NULL)
		tuplesort_performsort(ev->neg_scores);
	have_p = next_score(ev->pos_scores, &p);
	have_q = next_score(ev->neg_scores, &q);
	while (have_p || have_q)
	{
		double		s = !have_q || (have_p && float8_cmp_internal(p, q) <= 0) ? p : q;
		int64		pos = 0;
		int64		neg = 0;

		while (have_p && float8_cmp_internal(p, s) == 0)
		{
			pos++;
			have_p = next_score(ev->pos_scores, &p);
		}
		while (have_q && float8_cmp_internal(q, s) == 0)
		{
			neg++;
			have_q = next_score(ev->neg_scores, &q);
		}
		fn(arg, s, pos, neg);
		CHECK_FOR_INTERRUPTS();
	}
}

static void
auc_score(void *arg, double score, int64 positives, int64 negatives)
{
	cp_auc_step((CpAucWalk *) arg, positives, negatives);
}

/*
 * Area under the ROC curve: the Mann-Whitney U over the number of
 * (positive, negative) pairs, a tie counting one half, walked over the
 * distinct scores (cp_auc_step).  A coordinator's merge of per-shard score
 * counts walks the same steps in the same order, so it gets the same
 * figure to the bit.
 */
static double
auc(CpEvalState *ev)
{
	int64		n_neg = ev->n - ev->n_pos;
	CpAucWalk	walk = {0.0, 0};

	if (ev->auc_given)
		return ev->auc;
	if (ev->n_pos == 0 || n_neg == 0)
		return NAN;
	cp_eval_scores(ev, auc_score, &walk);
	return walk.u / ((double) ev->n_pos * (double) n_neg);
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
					cp_sum_value(&ev->log_loss_sum) / ev->n : NAN);
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
				fn(arg, "log_loss", cp_sum_value(&ev->log_loss_sum) / ev->n);
				break;
			}
		case CP_MODEL_LINEAR:
			{
				double		sse = cp_sum_value(&ev->sse);
				double		mean = cp_sum_value(&ev->sum_y) / ev->n;
				double		sst = cp_sum_value(&ev->sum_y2) - ev->n * mean * mean;

				fn(arg, "rmse", sqrt(sse / ev->n));
				fn(arg, "mae", cp_sum_value(&ev->sae) / ev->n);
				fn(arg, "r2", sst > 0 ? 1.0 - sse / sst : NAN);
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

/*
 * The counts and sums of a state, as text that cp_eval_state_merge reads
 * back on another node: integers, and doubles with 17 significant digits
 * (they read back to the same bits).  The scores for auc travel apart
 * (cp_eval_scores).
 */
static void
out_sum(StringInfo out, const CpSum *s)
{
	appendStringInfo(out, " %.17g %.17g", s->hi, s->lo);
}

void
cp_eval_state_out(const CpEvalState *ev, StringInfo out)
{
	appendStringInfo(out, "%d " INT64_FORMAT " " INT64_FORMAT " " INT64_FORMAT " "
					 INT64_FORMAT " " INT64_FORMAT " " INT64_FORMAT " " INT64_FORMAT,
					 ev->model.kind == CP_MODEL_SOFTMAX ? ev->model.n_outputs : 0,
					 ev->n, ev->tp, ev->fp, ev->tn, ev->fn, ev->n_pos, ev->correct);
	out_sum(out, &ev->log_loss_sum);
	out_sum(out, &ev->sse);
	out_sum(out, &ev->sae);
	out_sum(out, &ev->sum_y);
	out_sum(out, &ev->sum_y2);
	if (ev->model.kind == CP_MODEL_SOFTMAX)
		for (int k = 0; k < ev->model.n_outputs; k++)
			appendStringInfo(out, " " INT64_FORMAT " " INT64_FORMAT " " INT64_FORMAT,
							 ev->class_tp[k], ev->class_fp[k], ev->class_fn[k]);
}

typedef struct CpStateReader
{
	const char *p;
	const char *from;
} CpStateReader;

static pg_attribute_noreturn() void
bad_state(CpStateReader *r)
{
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_TEXT_REPRESENTATION),
			 errmsg("the evaluation state from %s cannot be read", r->from),
			 errhint("Every node must run the same corgipile version.")));
}

static int64
read_int(CpStateReader *r)
{
	char	   *end;
	long long	v;

	errno = 0;
	v = strtoll(r->p, &end, 10);
	if (end == r->p || errno != 0 || v < 0)
		bad_state(r);
	r->p = end;
	return (int64) v;
}

static double
read_double(CpStateReader *r)
{
	char	   *end;
	double		v = strtod(r->p, &end);

	if (end == r->p)
		bad_state(r);
	r->p = end;
	return v;
}

static void
read_sum(CpStateReader *r, CpSum *s)
{
	double		hi = read_double(r);
	double		lo = read_double(r);

	/* both parts, the larger first: the order one scan would add them in */
	cp_sum_add(s, hi);
	cp_sum_add(s, lo);
}

/*
 * Add a state written by cp_eval_state_out (on another node: from names it
 * in errors) to ev, which has the same model.  Every count adds exactly.
 */
void
cp_eval_state_merge(CpEvalState *ev, const char *text, const char *from)
{
	CpStateReader r = {text, from};
	int64		k = read_int(&r);

	if (k != (ev->model.kind == CP_MODEL_SOFTMAX ? ev->model.n_outputs : 0))
		bad_state(&r);
	ev->n += read_int(&r);
	ev->tp += read_int(&r);
	ev->fp += read_int(&r);
	ev->tn += read_int(&r);
	ev->fn += read_int(&r);
	ev->n_pos += read_int(&r);
	ev->correct += read_int(&r);
	read_sum(&r, &ev->log_loss_sum);
	read_sum(&r, &ev->sse);
	read_sum(&r, &ev->sae);
	read_sum(&r, &ev->sum_y);
	read_sum(&r, &ev->sum_y2);
	for (int i = 0; i < k; i++)
	{
		ev->class_tp[i] += read_int(&r);
		ev->class_fp[i] += read_int(&r);
		ev->class_fn[i] += read_int(&r);
	}
	while (*r.p == ' ')
		r.p++;
	if (*r.p != '\0')
		bad_state(&r);
}
