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
#include "utils/tuplesort.h"

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
	double		log_loss_sum;

	/*
	 * For auc: the scores of the positive and of the negative rows, each
	 * sorted by PostgreSQL's tuplesort (in work_mem, then on disk), so that
	 * memory does not grow with the rows evaluated.
	 */
	Tuplesortstate *pos_scores;
	Tuplesortstate *neg_scores;
	int64		n_pos;
	/* softmax: per class */
	int64	   *class_tp;
	int64	   *class_fp;
	int64	   *class_fn;
	int64		correct;
	/* linear */
	double		sse,
				sae,
				sum_y,
				sum_y2;
} CpEvalState;

typedef void (*CpMetricFn) (void *arg, const char *metric, double value);

extern void cp_eval_init(CpEvalState *ev, const CpModel *like, double *w);
extern void cp_eval_add_rows(const CpBuffer *buf, void *arg);
extern void cp_eval_metrics(CpEvalState *ev, CpMetricFn fn, void *arg);
extern void cp_eval_end(CpEvalState *ev);

#endif							/* CORGIPILE_METRICS_H */
