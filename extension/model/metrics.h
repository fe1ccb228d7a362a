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
	double	   *scores;			/* for auc */
	bool	   *positive;
	int64		cap;
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
extern void cp_eval_metrics(const CpEvalState *ev, CpMetricFn fn, void *arg);

#endif							/* CORGIPILE_METRICS_H */
