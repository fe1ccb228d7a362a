/*-------------------------------------------------------------------------
 *
 * sgd_validate.c
 *	  Scoring the validation rows after an epoch, and early stopping.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <math.h>

#include "utils/memutils.h"

#include "nodes/sgd.h"
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
 * The default rule's sample (CP_SAMPLE_ROWS, sgd_state.h): the first rows
 * epoch 1 trains on, in the order the seed gives them (a random order of
 * random blocks), at most CP_SAMPLE_ROWS of them and CP_SAMPLE_BYTES of
 * row data.  Scoring the averaged model on them after each epoch costs a
 * small share of an epoch on the tables the rule is for (above 50,000
 * rows), and the figures depend on the seed only, never on timing.
 */
#define CP_SAMPLE_BYTES (16 * 1024 * 1024)

/*
 * The stopping rule of these parameters: the default one (relative) or an
 * explicit tolerance; false when the epochs run to max_epoch_num.  Also a
 * distributed coordinator's, fed a figure per round (dist_train.c).
 */
bool
cp_sgd_stop_rule_init(const CpTrainParams *p, CpConvergence *conv)
{
	if (p->converge_auto)
		cp_convergence_init(conv, 0.0, CP_DEFAULT_RTOL, p->n_iter_no_change);
	else if (p->early_stopping)
		cp_convergence_init(conv, p->tolerance, 0.0, p->n_iter_no_change);
	else
		return false;
	return true;
}

/*
 * Set up the stopping rule for this training: the default rule (tolerance
 * and max_epoch_num NULL), or an explicit tolerance's.
 */
void
cp_sgd_stop_init(SgdState *s)
{
	s->stop_rule = cp_sgd_stop_rule_init(&s->params, &s->conv);
	/* the objective of an averaged model needs rows to score it on */
	s->sample_wanted = s->stop_rule && s->params.average &&
		s->vrel == NULL && s->holdout == NULL && s->par == NULL;
	/* a shard keeps one for its coordinator's rule (shard_round.c) */
	if (s->round != NULL)
		s->sample_wanted = s->params.average && s->par == NULL;
	if (s->sample_wanted)
		cp_buffer_init(&s->sample, s->train_cxt, cp_layout_sparse_rows(s->lo));
}

/* Epoch 1, the main thread: keep a buffer's first rows, as trained. */
void
cp_sgd_note_sample(SgdState *s, const CpBuffer *buf)
{
	if (!s->sample_wanted || s->n_done > 0)
		return;
	for (int64 i = 0; i < buf->n_rows && s->sample.n_rows < CP_SAMPLE_ROWS &&
		 cp_buffer_used_bytes(&s->sample) < CP_SAMPLE_BYTES; i++)
		cp_buffer_append_row(&s->sample, buf,
							 buf->order_is_identity ? i : buf->order[i]);
}

/*
 * The loss figures of weights w on the sample's first rows (at most
 * max_rows of them): a shard scores its share of a distributed
 * training's sample so.
 */
CpStats
cp_sgd_sample_stats(SgdState *s, const double *w, int64 max_rows)
{
	CpModel		scored = s->model;
	CpBuffer	first = s->sample;
	CpStats		st;

	memset(&st, 0, sizeof(st));
	scored.w = (double *) w;
	first.n_rows = Min(first.n_rows, Max(max_rows, 0));
	cp_model_evaluate(&scored, &first, &st);
	return st;
}

/* The training objective (mean loss and penalties) of weights w on the sample. */
static double
sample_objective(SgdState *s, const double *w)
{
	CpModel		scored = s->model;
	CpStats		st = cp_sgd_sample_stats(s, w, s->sample.n_rows);

	s->sample_stats = st;
	return cp_stats_loss(&st) + cp_model_penalty(&scored, w, s->params.l2, s->params.l1);
}

/*
 * After an epoch: feed the rule the stored model's objective and stop when
 * it says so.  The figure is the validation loss when there are
 * validation rows; else, for an averaged model, its objective on the
 * sample; else (plain SGD, whose last iterate is the model) the epoch's
 * training loss, as scikit-learn's SGD takes it.  An explicit tolerance
 * keeps the best epoch's weights (and says so); the default rule the last
 * ones, as scikit-learn's tol does.
 */
void
cp_sgd_stop_check(SgdState *s, const CpEpochResult *res)
{
	const double *w = cp_model_final_weights(&s->model);
	double		objective;
	bool		stop;

	/*
	 * An averaged model is the average from epoch 2 on: epoch 1's figure
	 * is of an iterate, another kind of model, and is not compared.
	 */
	if (!s->stop_rule || s->polish_planned || (s->params.average && res->epoch == 1))
		return;
	if (res->has_validation)
		objective = res->validation_loss;
	else if (s->sample_wanted && s->sample.n_rows > 0)
		objective = sample_objective(s, w);
	else
		objective = res->loss;
	stop = cp_convergence_update(&s->conv, objective);
	elog(DEBUG1, "corgipile: model %s epoch %d: stopping rule's objective %.9g (change %.3g)",
		 s->model_name, res->epoch, objective, s->conv.last_change);
	if (s->params.early_stopping && s->conv.best_epoch == s->conv.epochs)
	{
		if (s->best_w == NULL)
			s->best_w = MemoryContextAlloc(s->train_cxt,
										   mul_size(sizeof(double), s->model.n_weights));
		memcpy(s->best_w, w, sizeof(double) * (Size) s->model.n_weights);
		s->best_epoch = res->epoch;
	}
	if (!stop)
		return;
	s->finished = true;
	s->converged = true;
	if (s->params.early_stopping)
		ereport(NOTICE,
				(errmsg("corgipile: stopped after epoch %d: the %s did not improve by %g for %d epochs; keeping the model of epoch %d",
						res->epoch, res->has_validation ? "validation loss" :
						s->sample_wanted ? "objective on the sampled rows" : "training loss",
						s->params.tolerance, s->params.n_iter_no_change,
						s->best_epoch)));
	else if (cp_progress_notices)
		ereport(NOTICE,
				(errmsg("corgipile: converged after epoch %d: the %s improved by less than %g%% for %d epoch%s",
						res->epoch, res->has_validation ? "validation loss" :
						s->sample_wanted ? "averaged model's objective on the sampled rows" :
						"training loss",
						CP_DEFAULT_RTOL * 100.0, s->params.n_iter_no_change,
						s->params.n_iter_no_change == 1 ? "" : "s"),
				 s->sample_wanted ?
				 errdetail("The objective (mean loss plus penalty) is taken on " INT64_FORMAT " training rows fixed by the seed; it went from %.6g to %.6g.",
						   s->sample.n_rows, s->conv.previous, s->conv.last) : 0));
}

/* What the stopping rule saw, for the model's params (NULL: no rule ran). */
char *
cp_sgd_stopping_json(SgdState *s)
{
	if (!s->stop_rule || s->polish_planned || s->conv.epochs == 0)
		return NULL;
	return psprintf("{\"rule\": \"%s\", \"figure\": \"%s\", \"rows\": " INT64_FORMAT
					", \"epochs_compared\": %d, \"objective\": %.17g, \"last_change\": %.6g"
					", \"converged\": %s}",
					s->params.early_stopping ? "tolerance" : "default",
					s->results[s->n_done - 1].has_validation ? "validation loss" :
					s->sample_wanted ? "averaged model's objective on the sample" :
					"training loss",
					s->sample_wanted ? s->sample.n_rows : (int64) 0,
					s->conv.epochs, s->conv.last,
					isnan(s->conv.last_change) ? 0.0 : s->conv.last_change,
					s->converged ? "true" : "false");
}

/*
 * The default rule ran out of epochs before the objective settled: say so,
 * as scikit-learn's ConvergenceWarning does.
 */
void
cp_sgd_warn_unconverged(SgdState *s)
{
	if (!s->params.converge_auto || s->polish_planned || s->converged || s->conv.epochs < 2)
		return;
	ereport(WARNING,
			(errmsg("model \"%s\" did not converge in %d epochs: its objective still improved by %.3g%% in the last one",
					s->model_name, s->n_done, s->conv.last_change * 100.0),
			 errdetail("Training stops by default once an epoch improves the objective by less than %g%%; max_epoch_num caps it at %d epochs.",
					   CP_DEFAULT_RTOL * 100.0, s->params.max_epoch_num),
			 errhint("Give max_epoch_num to train exactly that many epochs, or tolerance to stop by an absolute improvement.")));
}
