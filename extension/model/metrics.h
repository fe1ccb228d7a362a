/*-------------------------------------------------------------------------
 *
 * metrics.h
 *	  The metrics of a model on rows (metrics.c): corgipile.evaluate()'s,
 *	  and training's on its held-out rows (validation => 'N%').
 *
 *-------------------------------------------------------------------------
 */
#ifndef CORGIPILE_METRICS_H
#define CORGIPILE_METRICS_H

#include "postgres.h"

#include "core/linear_model.h"
#include "io/layout.h"
#include "model/models.h"
#include "lib/stringinfo.h"
#include "utils/tuplesort.h"

/*
 * A sum of doubles kept to about 106 bits (hi + lo, Knuth's TwoSum): the
 * rounded total then hardly depends on the order of the terms, so
 * per-shard sums merged on a coordinator give what one scan of the same
 * rows gives (docs/distributed.md, "evaluate on a distributed table").
 */
typedef struct CpSum
{
	double		hi;
	double		lo;
} CpSum;

static inline void
cp_sum_add(CpSum *s, double x)
{
	double		t = s->hi + x;
	double		bp = t - s->hi;

	s->lo += (s->hi - (t - bp)) + (x - bp);
	s->hi = t;
}

static inline double
cp_sum_value(const CpSum *s)
{
	return s->hi + s->lo;
}

typedef struct CpEvalState
{
	const CpStoredModel *stored;
	CpModel		model;
	int64		n;
	/* binary */
	int64		tp,
				fp,
				tn,
				fn;
	CpSum		log_loss_sum;

	/*
	 * For auc: the scores of the positive and of the negative rows, each
	 * sorted by PostgreSQL's tuplesort (in work_mem, then on disk), so that
	 * memory does not grow with the rows evaluated.
	 */
	Tuplesortstate *pos_scores;
	Tuplesortstate *neg_scores;
	int64		n_pos;

	/*
	 * A merged state (cp_eval_state_merge) has no sorts: its auc, taken by
	 * the merge of the parts' score counts (cp_auc_step), is given here.
	 */
	bool		auc_given;
	double		auc;
	/* softmax: per class */
	int64	   *class_tp;
	int64	   *class_fp;
	int64	   *class_fn;
	int64		correct;
	/* linear */
	CpSum		sse,
				sae,
				sum_y,
				sum_y2;
} CpEvalState;

typedef void (*CpMetricFn) (void *arg, const char *metric, double value);

/* a distinct score, ascending, with its positive and negative rows */
typedef void (*CpScoreFn) (void *arg, double score, int64 positives, int64 negatives);

/*
 * The area under the ROC curve as a walk over the distinct scores in
 * ascending order: the Mann-Whitney U, a tie counting one half.
 */
typedef struct CpAucWalk
{
	double		u;
	int64		neg_below;
} CpAucWalk;

static inline void
cp_auc_step(CpAucWalk *w, int64 positives, int64 negatives)
{
	w->u += (double) positives * ((double) w->neg_below + 0.5 * (double) negatives);
	w->neg_below += negatives;
}

extern void cp_eval_init(CpEvalState *ev, const CpModel *like, double *w);
extern void cp_eval_add_rows(const CpBuffer *buf, void *arg);
extern void cp_eval_metrics(CpEvalState *ev, CpMetricFn fn, void *arg);
extern void cp_eval_end(CpEvalState *ev);
extern void cp_eval_scores(CpEvalState *ev, CpScoreFn fn, void *arg);
extern void cp_eval_state_out(const CpEvalState *ev, StringInfo out);
extern void cp_eval_state_merge(CpEvalState *ev, const char *text, const char *from);

#endif							/* CORGIPILE_METRICS_H */
