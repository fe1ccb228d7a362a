/*-------------------------------------------------------------------------
 *
 * sgd_checks.c
 *	  What SGD says of the losses and scores it reached: divergence (an
 *	  ERROR), a loss that ended above the first epoch's and a score below
 *	  the trivial model's (WARNINGs).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <math.h>

#include "core/preprocess.h"
#include "nodes/sgd_state.h"

/*
 * Divergence (docs/preprocessing.md): after each epoch,
 * the training losses of epochs 1..n go to the core's rule.  A loss that is
 * not finite, weights that are not, or a loss more than
 * CP_PREP_DIVERGENCE_FACTOR times the best earlier epoch's and above the
 * first epoch's stop the training with an ERROR, so no diverged model is
 * ever stored.
 */
static int
divergence_hint(SgdState *s)
{
	if (s->params.standardize == CP_STANDARDIZE_OFF)
		return errhint("Lower learning_rate, or train with standardize => 'auto' (the default) so that features are scaled.");
	return errhint("Lower learning_rate.");
}

static double *
epoch_losses(SgdState *s, int n)
{
	double	   *losses = palloc(mul_size(sizeof(double), Max(n, 1)));

	for (int i = 0; i < n; i++)
		losses[i] = s->results[i].loss;
	return losses;
}

void
cp_sgd_check_divergence(SgdState *s, int epoch)
{
	double	   *losses = epoch_losses(s, epoch);
	int32		best = 0;
	CpPrepDivergence verdict;

	verdict = cp_prep_divergence(losses, epoch, CP_PREP_DIVERGENCE_FACTOR, &best);
	if (verdict == CP_PREP_STOP_NOT_FINITE || !cp_model_is_finite(&s->model))
		ereport(ERROR,
				(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
				 errmsg("training of model \"%s\" diverged in epoch %d: the loss is no longer a finite number",
						s->model_name, epoch),
				 divergence_hint(s)));
	if (verdict == CP_PREP_STOP_GROWN)
		ereport(ERROR,
				(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
				 errmsg("training of model \"%s\" diverged in epoch %d: its loss %g is more than %g times the loss %g of epoch %d",
						s->model_name, epoch, losses[epoch - 1],
						CP_PREP_DIVERGENCE_FACTOR, losses[best - 1], best),
				 best != 1 ? errdetail("The first epoch's loss was %g.", losses[0]) : 0,
				 divergence_hint(s)));
	pfree(losses);
}

/*
 * At the end: a model whose loss ends clearly above the first epoch's is
 * stored, with a WARNING.  "Clearly": more than CP_WARN_ABOVE_FIRST_FACTOR
 * times it.  The epoch loss of a converged run fluctuates around its floor,
 * up to 1.6 times the first epoch's loss in the pg_regress suite's good
 * models, and a warning on each would teach users to ignore it; no_shuffle
 * on a label-clustered table, which really does train worse than it starts,
 * ends above twice it (docs/preprocessing.md has the figures).
 */
#define CP_WARN_ABOVE_FIRST_FACTOR 2.0

void
cp_sgd_warn_if_worse(SgdState *s)
{
	double	   *losses = epoch_losses(s, s->n_done);

	if (cp_prep_divergence_final(losses, s->n_done) == CP_PREP_WARN_ABOVE_FIRST &&
		losses[s->n_done - 1] > CP_WARN_ABOVE_FIRST_FACTOR * losses[0])
		ereport(WARNING,
				(errmsg("training of model \"%s\" ended with a loss of %g, more than twice the first epoch's %g",
						s->model_name, losses[s->n_done - 1], losses[0]),
				 errdetail("The model is stored; the weights kept are those of epoch %d.",
						   s->best_epoch > 0 ? s->best_epoch : s->n_done),
				 divergence_hint(s)));
	pfree(losses);
}

/*
 * The trivial model's score on the training rows: the majority class's
 * share, or R^2 = 0 for predicting the mean.  False when the labels were
 * not counted (a parallel training).
 */
bool
cp_sgd_baseline(SgdState *s, const char **kind, double *score)
{
	int64		best = 0;

	if (s->label_n == 0)
		return false;
	if (s->params.model == CP_MODEL_LINEAR)
	{
		*kind = "mean";
		*score = 0.0;
		return true;
	}
	for (int k = 0; k < s->n_label_counts; k++)
		best = Max(best, s->label_counts[k]);
	*kind = "majority class";
	*score = (double) best / (double) s->label_n;
	return true;
}

/*
 * "Well below" the trivial model: a point of accuracy, or 0.01 of R^2,
 * under it, and for accuracy also three standard errors of the share of
 * right answers on the rows scored (a model at chance level on 1500 rows of
 * a 50/50 label lands within 4 points of 0.5 by chance alone).  A model
 * that only matches the trivial one is not flagged: on a table whose
 * features say little about the label that is the right answer.
 */
#define CP_BASELINE_MARGIN 0.01
#define CP_BASELINE_SIGMAS 3.0

void
cp_sgd_warn_if_trivial(SgdState *s)
{
	const CpEpochResult *last = &s->results[s->n_done - 1];
	const char *kind;
	double		base;
	double		score;
	double		margin;
	bool		held;
	int64		n;
	const char *what;

	if (!cp_sgd_baseline(s, &kind, &base))
		return;
	/*
	 * The stored model's own figures where there are any: on the validation
	 * rows, else on the rows the polish took, else on the stopping rule's
	 * sample; else the last epoch's progressive figure (plain SGD, whose
	 * last iterate is the model).
	 */
	held = last->has_validation && !isnan(last->validation_score);
	if (held)
	{
		score = last->validation_score;
		n = last->validation_n;
		what = "on the validation rows";
	}
	else if (s->has_polish_row)
	{
		score = s->polish_row.score;
		n = s->polish_row.tuples;
		what = "on its training rows";
	}
	else if (s->sample_stats.n > 0)
	{
		score = cp_stats_score(&s->sample_stats, s->params.model);
		n = s->sample_stats.n;
		what = "on a sample of its training rows";
	}
	else
	{
		score = last->score;
		n = last->tuples;
		what = "on its training rows in the last epoch";
	}
	margin = CP_BASELINE_MARGIN;
	if (s->params.model != CP_MODEL_LINEAR)
		margin = Max(margin, CP_BASELINE_SIGMAS *
					 sqrt(base * (1.0 - base) / (double) Max(n, 1)));
	if (isnan(score) || score >= base - margin)
		return;
	ereport(WARNING,
			(errmsg("model \"%s\" scores %.4f %s, below the %.4f of always predicting the %s",
					s->model_name, score, what, base, kind),
			 errdetail("The trivial model's figure is taken from the %lld training rows%s.",
					   (long long) s->label_n,
					   s->params.model == CP_MODEL_LINEAR ? " (R2 0 by definition)" : ""),
			 held ? errhint("Check that the features carry information on the label; a full shuffle (shuffle => 'shuffle_once') tells a shuffling problem from a modelling one.") :
			 errhint("Score it on rows it did not train on (validation => '20%%'), and check that the features carry information on the label.")));
}
