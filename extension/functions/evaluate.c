/*-------------------------------------------------------------------------
 *
 * evaluate.c
 *	  corgipile.evaluate(model_name, relation): a stored model's metrics on
 *	  a table.
 *
 * Binary models: accuracy, precision, recall and f1 of the positive class
 * (the label +1, 1 or true), auc, and log_loss (logistic only; NULL for
 * svm, which has no probabilities).  Softmax: accuracy, macro_f1 (the mean
 * F1 over the classes that occur in the labels or the predictions) and
 * log_loss.  Linear: rmse, mae and r2.  Rows with a NULL label or NULL
 * features are skipped, as in training.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <math.h>

#include "access/relation.h"
#include "access/tableam.h"
#include "executor/tuptable.h"
#include "fmgr.h"
#include "funcapi.h"
#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"

#include "core/linear_model.h"
#include "corgipile.h"
#include "functions/evaluate.h"
#include "io/layout.h"
#include "model/models.h"
#include "io/prep.h"

PG_FUNCTION_INFO_V1(corgipile_evaluate);

#define CP_EVAL_BATCH 4096

static void *
alloc_zero(Size size)
{
	return palloc0(size);
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
					if (ev->n > ev->cap)
					{
						ev->cap = Max(1024, ev->cap * 2);
						ev->scores = ev->scores ? repalloc_huge(ev->scores, sizeof(double) * ev->cap) :
							MemoryContextAllocHuge(CurrentMemoryContext, sizeof(double) * ev->cap);
						ev->positive = ev->positive ? repalloc_huge(ev->positive, sizeof(bool) * ev->cap) :
							MemoryContextAllocHuge(CurrentMemoryContext, sizeof(bool) * ev->cap);
					}
					ev->scores[ev->n - 1] = z[0];
					ev->positive[ev->n - 1] = pos;
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

static int
cmp_score_index(const void *a, const void *b, void *arg)
{
	const double *scores = (const double *) arg;
	double		x = scores[*(const int64 *) a];
	double		y = scores[*(const int64 *) b];

	return (x > y) - (x < y);
}

/* Area under the ROC curve: the Mann-Whitney U with average ranks for ties. */
static double
auc(const CpEvalState *ev)
{
	int64	   *idx;
	int64		n_pos = 0;
	double		rank_sum = 0.0;

	for (int64 i = 0; i < ev->n; i++)
		n_pos += ev->positive[i];
	if (n_pos == 0 || n_pos == ev->n)
		return NAN;
	idx = MemoryContextAllocHuge(CurrentMemoryContext, sizeof(int64) * ev->n);
	for (int64 i = 0; i < ev->n; i++)
		idx[i] = i;
	qsort_arg(idx, ev->n, sizeof(int64), cmp_score_index, ev->scores);
	for (int64 i = 0; i < ev->n;)
	{
		int64		j = i;
		double		avg_rank;

		while (j + 1 < ev->n && ev->scores[idx[j + 1]] == ev->scores[idx[i]])
			j++;
		avg_rank = (i + j) / 2.0 + 1.0;
		for (int64 k = i; k <= j; k++)
			if (ev->positive[idx[k]])
				rank_sum += avg_rank;
		i = j + 1;
	}
	return (rank_sum - (double) n_pos * (n_pos + 1) / 2.0) /
		((double) n_pos * (double) (ev->n - n_pos));
}

static double
ratio(double num, double den)
{
	return den > 0 ? num / den : NAN;
}

static void
put(void *arg, const char *metric, double value)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) arg;
	Datum		values[2];
	bool		nulls[2] = {false, isnan(value)};

	values[0] = CStringGetTextDatum(metric);
	values[1] = Float8GetDatum(value);
	tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
}

/*
 * A layout for the relation from the columns the model was trained on,
 * with the model's label encoding and preprocessing (also block_rows.c).
 */
void
cp_model_layout(const CpStoredModel *m, Relation rel, CpLayout *lo)
{
	CpTrainParams p;
	StringInfoData features;
	ListCell   *lc;

	memset(&p, 0, sizeof(p));
	p.model = m->kind;
	p.label = (char *) quote_identifier(m->label);
	initStringInfo(&features);
	foreach(lc, m->features)
		appendStringInfo(&features, "%s%s", foreach_current_index(lc) > 0 ? ", " : "",
						 quote_identifier(lfirst(lc)));
	p.features = features.data;
	p.feature_indices = m->feature_indices ? (char *) quote_identifier(m->feature_indices) : NULL;
	p.n_features = m->n_features;
	cp_layout_resolve(lo, RelationGetDescr(rel), RelationGetRelationName(rel), &p);
	if (lo->mode != m->mode)
		ereport(ERROR,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("relation \"%s\" lays out the features of model \"%s\" differently",
						RelationGetRelationName(rel), m->model_name)));
	cp_layout_check_label_kind(lo, m->classes_are_text, m->model_name);
	if (m->kind == CP_MODEL_SOFTMAX)
		lo->classes = cp_class_map_from_names(lo->label_type, m->class_names, m->n_classes);
	else if (lo->label_is_text)
	{
		if (m->label_dict == NULL)
			ereport(ERROR,
					(errcode(ERRCODE_DATATYPE_MISMATCH),
					 errmsg("label column \"%s\" of relation \"%s\" is text, but model \"%s\" has no text classes",
							lo->label_name, RelationGetRelationName(rel), m->model_name)));
		lo->label_dict = m->label_dict;
	}
	/* raw rows in: the model's encoding and transform */
	cp_layout_use_prep(lo, m->prep, m->model_name);
}

Datum
corgipile_evaluate(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	CpEvalState ev;
	CpLayout	lo;
	CpBuffer	buf;
	Relation	rel;
	MemoryContext row_cxt;

	InitMaterializedSRF(fcinfo, 0);
	memset(&ev, 0, sizeof(ev));
	ev.stored = cp_models_load(text_to_cstring(PG_GETARG_TEXT_PP(0)));

	rel = cp_open_relation(PG_GETARG_OID(1), AccessShareLock, "relation");
	cp_check_relation(rel, "relation");
	cp_model_layout(ev.stored, rel, &lo);
	cp_check_select(rel, cp_layout_columns(&lo));

	cp_check_model_size(ev.stored->kind, ev.stored->n_features,
						ev.stored->n_outputs, cp_layout_sparse_rows(&lo), 1,
						ev.stored->model_name);
	if (!cp_model_init(&ev.model, ev.stored->kind, ev.stored->n_features,
					   ev.stored->n_outputs, cp_layout_sparse_rows(&lo), 1,
					   0.0, 0.0, alloc_zero))
		elog(ERROR, "corgipile: could not size model \"%s\"", ev.stored->model_name);
	ev.model.w = ev.stored->weights;
	if (ev.model.kind == CP_MODEL_SOFTMAX)
	{
		ev.class_tp = palloc0(sizeof(int64) * ev.model.n_outputs);
		ev.class_fp = palloc0(sizeof(int64) * ev.model.n_outputs);
		ev.class_fn = palloc0(sizeof(int64) * ev.model.n_outputs);
	}

	cp_buffer_init(&buf, CurrentMemoryContext, cp_layout_sparse_rows(&lo));
	/* batches of at most half of work_mem (cp_layout_scan) */
	cp_buffer_set_budget(&buf, mul_size((Size) work_mem, 1024), "a batch of evaluate()",
						 "Raise work_mem: a batch of rows evaluate() scores takes at most work_mem.");
	row_cxt = AllocSetContextCreate(CurrentMemoryContext, "corgipile evaluate row",
									ALLOCSET_DEFAULT_SIZES);
	cp_layout_scan(&lo, rel, GetActiveSnapshot(), &buf, CP_EVAL_BATCH, row_cxt,
				   add_rows, &ev);
	relation_close(rel, NoLock);

	if (ev.n == 0)
		ereport(ERROR,
				(errcode(ERRCODE_NO_DATA),
				 errmsg("relation \"%s\" has no rows with a non-NULL label and features to evaluate",
						lo.relname)));

	cp_eval_metrics(&ev, put, rsinfo);
	/* category values the model had not seen (or NULL), encoded as zeros */
	if (cp_prep_has_onehot(ev.stored->prep))
		put(rsinfo, "unseen_values", (double) lo.n_unseen);
	return (Datum) 0;
}

/*
 * The metrics of the rows added so far, each handed to fn: the rows of
 * corgipile.evaluate(), and training's held-out rows (validation => 'N%').
 */
void
cp_eval_metrics(const CpEvalState *ev, CpMetricFn fn, void *arg)
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
