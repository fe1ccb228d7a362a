/*-------------------------------------------------------------------------
 *
 * sgd_validate.c
 *	  Scoring the validation rows after an epoch, and early stopping.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "nodes/sgd_state.h"

/* rows scored per batch when validating */
#define CP_VALIDATION_BATCH 4096

typedef struct ValidationPass
{
	const CpModel *model;
	CpStats		stats;
} ValidationPass;

static void
validate_batch(const CpBuffer *buf, void *arg)
{
	ValidationPass *v = (ValidationPass *) arg;

	cp_model_evaluate(v->model, buf, &v->stats);
}

/* Score the validation relation, or the held-out rows, with the current weights. */
CpStats
cp_sgd_validate(SgdState *s)
{
	ValidationPass v;
	CpModel		scored;

	memset(&v, 0, sizeof(v));
	/* the weights the model stands for: the average, with averaging */
	scored = s->model;
	scored.w = (double *) cp_model_final_weights(&s->model);
	v.model = &scored;
	if (s->holdout != NULL)
	{
		cp_holdout_score(s->holdout, s->lo, s->src->rel,
						 s->css.ss.ps.state->es_snapshot, &s->vbuf,
						 CP_VALIDATION_BATCH, s->val_row_cxt, validate_batch, &v);
		return v.stats;
	}
	s->vlayout.n_features = s->model.n_features;
	cp_layout_scan(&s->vlayout, s->vrel, s->css.ss.ps.state->es_snapshot, &s->vbuf,
				   CP_VALIDATION_BATCH, s->val_row_cxt, validate_batch, &v);
	return v.stats;
}

/*
 * Early stopping, as scikit-learn's SGD does it: an epoch improves when its
 * loss (the validation loss when there is a validation relation) is below
 * the best so far minus tolerance.  After n_iter_no_change epochs without
 * improvement training stops, and the best epoch's weights are kept.
 */
void
cp_sgd_track_best(SgdState *s, const CpEpochResult *res)
{
	double		loss = res->has_validation ? res->validation_loss : res->loss;

	if (s->best_epoch == 0 || loss < s->best_loss - s->params.tolerance)
		s->since_best = 0;
	else
		s->since_best++;
	if (s->best_epoch == 0 || loss < s->best_loss)
	{
		s->best_epoch = res->epoch;
		s->best_loss = loss;
		memcpy(s->best_w, cp_model_final_weights(&s->model),
			   sizeof(double) * (Size) s->model.n_weights);
	}
	if (s->since_best >= s->params.n_iter_no_change)
	{
		s->finished = true;
		ereport(NOTICE,
				(errmsg("corgipile: stopped after epoch %d: the %s loss did not improve by %g for %d epochs; keeping the model of epoch %d",
						res->epoch, res->has_validation ? "validation" : "training",
						s->params.tolerance, s->params.n_iter_no_change,
						s->best_epoch)));
	}
}
