/*-------------------------------------------------------------------------
 *
 * sgd_epoch.c
 *	  One epoch of the SGD operator: its driver, its figures, the checks and
 *	  the progress NOTICE.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <math.h>

#include "executor/executor.h"
#include "portability/instr_time.h"

#include "core/grab.h"
#include "core/worker.h"
#include "nodes/sgd.h"
#include "nodes/sgd_state.h"
#include "shuffle/grab.h"

void
cp_sgd_no_rows_error(SgdState *s)
{
	ereport(ERROR,
			(errcode(ERRCODE_NO_DATA),
			 errmsg("relation \"%s\" has no rows with a non-NULL label and features to train on",
					s->lo->relname),
			 s->holdout != NULL ?
			 errdetail("%lld rows were held out for validation => '%g%%'.",
					   (long long) s->holdout->n_seen,
					   s->params.validation_fraction * 100.0) : 0));
}

/*
 * Whether an epoch sends its progress NOTICE: every epoch of a training
 * whose epochs were given; with the default schedule, which may run many
 * short epochs of a small table, the first ten, then every tenth up to
 * 100, every hundredth up to 1000, ..., and the last: a few lines, fixed
 * by the epoch numbers alone.
 */
static bool
epoch_notice(SgdState *s, int epoch)
{
	int			step = 1;

	if (!s->params.epochs_auto || s->finished || epoch <= 10)
		return true;
	while (step * 10 <= epoch / 10)
		step *= 10;
	return epoch % (step * 10) == 0;
}

/*
 * The epochs max_epoch_num => NULL allows a table of this many training
 * rows: as many as make CP_DEFAULT_MIN_ROW_STEPS row steps, at least
 * CP_DEFAULT_EPOCHS, at most CP_DEFAULT_MAX_EPOCHS.  The first epoch knows
 * the rows; EXPLAIN estimates them (cp_sgd_explain_epochs).
 */
int32
cp_sgd_default_epochs(int64 rows)
{
	if (rows <= 0)
		return CP_DEFAULT_EPOCHS;
	return (int32) Max((int64) CP_DEFAULT_EPOCHS,
					   Min((int64) CP_DEFAULT_MAX_EPOCHS,
						   (CP_DEFAULT_MIN_ROW_STEPS + rows - 1) / rows));
}

void
cp_sgd_run_epoch(SgdState *s)
{
	CpEpochResult *res;
	instr_time	start;
	instr_time	elapsed;

	if (s->n_done >= s->results_cap)
	{
		int			cap = (int) Min((int64) s->results_cap * 2,
									(int64) s->params.max_epoch_num);

		s->results = repalloc_huge(s->results, mul_size(sizeof(CpEpochResult), cap));
		memset(s->results + s->results_cap, 0,
			   sizeof(CpEpochResult) * (cap - s->results_cap));
		s->results_cap = cap;
	}
	res = &s->results[s->n_done];

	INSTR_TIME_SET_CURRENT(start);

	if (s->n_done > 0)
		ExecReScan(s->child);
	else
	{
		/* what the weights' shape needs, found before the first epoch */
		if (s->round != NULL)
			cp_sgd_round_shape(s);
		else
			cp_tuple_source_find_shape(s->src, (uint64) s->seed);
		if (s->params.warm_start != NULL)
			cp_sgd_warm_load(s);
		if (s->params.model == CP_MODEL_SOFTMAX)
			s->vlayout.classes = s->lo->classes;
		/* preprocessing: validation rows are encoded as training rows are */
		if (s->vrel != NULL)
			cp_layout_share_encoding(&s->vlayout, s->lo, s->model_name);
		/* the dimension may have been inferred: refuse a model too big now */
		if (s->lo->n_features > 0)
			cp_check_model_size(s->params.model, s->lo->n_features,
								s->lo->classes ? s->lo->classes->n_classes : 1,
								cp_layout_sparse_rows(s->lo),
								s->params.batch_size, s->lo->relname);
	}

	s->learning_rate = s->params.learning_rate * pow(s->params.decay, s->n_done);
	if (s->model_ready)
	{
		s->model.learning_rate = s->learning_rate;
		memset(&s->model.stats, 0, sizeof(CpStats));
	}

	/*
	 * Averaged SGD averages the iterates from the second epoch on, as
	 * Bottou's ASGD starts averaging after one epoch: the first epoch's
	 * iterates are still far from the optimum.  Workers train on their own
	 * copies: there the average is of the weights at the end of each epoch.
	 */
	s->model.averaging = s->params.average && s->n_done >= 1 && s->par == NULL;
	if (s->round != NULL)
		cp_sgd_round_epoch_begin(s);
	/* GraB: an epoch in a random block order trains as corgipile does */
	if (s->grab != NULL && s->par == NULL)
		s->model.grab = cp_grab_collects(s->src->strategy_state) ?
			s->grab : NULL;

	if (s->par != NULL)
		cp_sgd_train_parallel(s);
	else if (s->params.double_buffer)
	{
		PG_TRY();
		{
			cp_sgd_train_double_buffered(s);
		}
		PG_CATCH();
		{
			cp_worker_stop(&s->worker);
			PG_RE_THROW();
		}
		PG_END_TRY();
	}
	else
		cp_sgd_train_single_buffered(s);

	/* a shard may have no rows: the coordinator counts every shard's */
	if (!s->model_ready && s->round == NULL)
		cp_sgd_no_rows_error(s);
	if (s->model_ready)
		cp_model_flush(&s->model);
	if (s->params.average && s->n_done >= 1 && s->par != NULL)
		cp_model_average_add(&s->model);
	if (s->model.stats.n == 0 && s->round == NULL)
		cp_sgd_no_rows_error(s);

	/*
	 * GraB: the epoch's block sums give the next epoch's block order (a
	 * parallel training's sums are in shared memory: parallel.c orders it)
	 */
	if (s->grab != NULL && s->par == NULL)
	{
		/* the next epoch's buffer choice, at the next epoch's rate */
		cp_grab_plan_epoch(s->src->strategy_state,
						   s->learning_rate * s->params.decay,
						   s->model.grab_g2 / (double) Max(s->model.stats.n, 1));
		s->model.grab_g2 = 0.0;
		cp_tuple_source_epoch_feedback(s->src, s->grab);
		cp_grab_acc_reset(s->grab);
	}

	res->epoch = s->n_done + 1;
	res->tuples = s->model.stats.n;
	res->loss = cp_stats_loss(&s->model.stats);
	res->score = cp_stats_score(&s->model.stats, s->model.kind);
	/* a shard's coordinator checks the merged loss (dist_train.c) */
	if (s->round == NULL)
		cp_sgd_check_divergence(s, res->epoch);
	if (s->holdout != NULL)
		cp_holdout_epoch_done(s->holdout);
	if (s->vrel != NULL || s->holdout != NULL)
	{
		CpStats		vst = cp_sgd_validate(s);

		/* a share too small for the table: nothing to score, nothing to stop on */
		if (s->holdout != NULL && vst.n == 0)
			ereport(ERROR,
					(errcode(ERRCODE_NO_DATA),
					 errmsg("validation => '%g%%' held out no rows of \"%s\" with a non-NULL label and features",
							s->params.validation_fraction * 100.0, s->lo->relname),
					 errhint("Give a larger percentage, or the name of a validation table.")));
		res->has_validation = true;
		res->validation_score = cp_stats_score(&vst, s->model.kind);
		res->validation_loss = cp_stats_loss(&vst);
		res->validation_n = vst.n;
	}
	INSTR_TIME_SET_CURRENT(elapsed);
	INSTR_TIME_SUBTRACT(elapsed, start);
	res->seconds = INSTR_TIME_GET_DOUBLE(elapsed);
	s->n_done++;

	/*
	 * l2 => NULL with the default schedule: scikit-learn's C = 1 per row,
	 * 1/rows, from epoch 2 on (params.h).  Parallel workers take it with
	 * each epoch's learning rate (parallel.c).
	 */
	if (s->params.l2_auto && s->n_done == 1 && res->tuples > 0)
	{
		s->params.l2 = 1.0 / (double) res->tuples;
		s->model.l2 = s->params.l2;
	}

	/*
	 * max_epoch_num => NULL: once the first epoch has counted the rows, at
	 * most as many epochs as make CP_DEFAULT_MIN_ROW_STEPS row steps, at
	 * least CP_DEFAULT_EPOCHS and at most CP_DEFAULT_MAX_EPOCHS; the
	 * stopping rule ends it sooner.  A table the polish takes trains
	 * CP_DEFAULT_POLISH_EPOCHS, then is polished (params.h).
	 */
	if (s->params.epochs_auto && s->n_done == 1 && res->tuples > 0)
	{
		s->params.max_epoch_num = cp_sgd_default_epochs(res->tuples);
		if (s->params.converge_auto && cp_sgd_polish_applies(s))
		{
			s->polish_planned = true;
			s->params.max_epoch_num = CP_DEFAULT_POLISH_EPOCHS;
		}
	}
	cp_sgd_stop_check(s, res);
	if (s->n_done >= s->params.max_epoch_num)
		s->finished = true;
	if (s->round != NULL)
	{
		/* the coordinator reports for the whole table */
		cp_sgd_round_epoch_end(s);
		return;
	}

	if (s->n_done == 1 && s->lo->n_skipped > 0)
		ereport(NOTICE,
				(errmsg("corgipile: skipped %lld rows of \"%s\" with a NULL label or NULL features",
						(long long) s->lo->n_skipped, s->lo->relname),
				 errdetail("%lld with a NULL label, %lld with a NULL feature.",
						   (long long) s->lo->n_null_label,
						   (long long) (s->lo->n_skipped - s->lo->n_null_label)),
				 s->lo->n_skipped > s->lo->n_null_label &&
				 s->lo->mode != CP_FEATURES_SPARSE &&
				 (s->lo->prep == NULL || s->lo->prep->fill == NULL) ?
				 errhint("Train with missing => 'mean' (or 'median', 'zero') to impute NULL numbers and keep these rows.") : 0));
	if (cp_progress_notices && epoch_notice(s, res->epoch))
	{
		char		vbuf[64];

		if (res->has_validation)
			snprintf(vbuf, sizeof(vbuf), "%.6f", res->validation_score);
		else
			strlcpy(vbuf, "null", sizeof(vbuf));
		/*
		 * The first epoch's notice says what the figures measure (the
		 * message itself is the fixed form the client parses).
		 */
		ereport(NOTICE,
				(errmsg("corgipile: model=%s epoch=%d/%d tuples=%lld loss=%.6f score=%.6f validation_score=%s seconds=%.3f",
						s->model_name, res->epoch, s->params.max_epoch_num,
						(long long) res->tuples, res->loss, res->score, vbuf,
						res->seconds),
				 res->epoch == 1 ?
				 errdetail("loss and score (%s) are taken on the training rows, each predicted before its own update; validation_score is %s%s.",
						   s->params.model == CP_MODEL_LINEAR ? "R2" : "accuracy",
						   res->has_validation ? "the model's score on rows it does not train on" :
						   "null: no validation rows (validation => '20%' holds some out)",
						   s->polish_planned ?
						   "; the stored model is the average of the iterates from epoch 2, polished after the last epoch: its own loss and score come in the last row, whose epoch is NULL" :
						   s->params.average ?
						   "; the stored model is the average of the iterates from epoch 2, scored by validation_score, not by score" : "") : 0));
	}
}
