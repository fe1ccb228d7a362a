/*-------------------------------------------------------------------------
 *
 * sgd_polish.c
 *	  The polish: L-BFGS from SGD's final weights to the minimum of the
 *	  objective, on a small table the block cache holds whole.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <math.h>

#include "miscadmin.h"
#include "portability/instr_time.h"
#include "utils/memutils.h"

#include "core/polish.h"
#include "nodes/sgd.h"
#include "nodes/sgd_state.h"

/*
 * The default schedule, on a table of up to CP_POLISH_MAX_ROWS training
 * rows that the block cache holds whole: L-BFGS from the final weights
 * (SGD's average) to the minimum of the objective SGD descends
 * (core/polish.h), so that the model is the exact solver's.  SGD's
 * decaying rate leaves it short of that minimum where the table is small
 * and ill-conditioned (docs/real-datasets.md).  Not for the hinge loss,
 * l1, l2 = 0 (no minimum on separable rows), a best epoch kept by early
 * stopping, workers (no process holds every row: the parallel path does
 * not call this), a validation (the
 * stored model stays the one its per-epoch scores describe), or weights
 * whose L-BFGS history (24 copies of them) would not fit
 * maintenance_work_mem.
 */
#define CP_POLISH_MAX_ROWS (CP_DEFAULT_MIN_ROW_STEPS / CP_DEFAULT_EPOCHS)

/*
 * The gradient bound: scikit-learn's lbfgs stops when no entry of the
 * gradient of the same (mean-scaled) objective exceeds its tol, 1e-4; so
 * does the polish of the classifiers.  The squared loss is solved as Ridge
 * solves it, by the normal equations (core/polish.c), up to 512 weights;
 * above, L-BFGS stops at 1e-6 in units of the label's root mean square (a
 * price in dollars has a gradient in dollars): on an ill-conditioned table
 * 1e-4 left predictions 3.6e-4 of the label's scale off Ridge's
 * (tests/python/test_polish.py).
 */
#define CP_POLISH_GTOL 1e-4
#define CP_POLISH_GTOL_LINEAR 1e-6

/*
 * Between the polish's passes: serve what is pending.  A cancel or a lost
 * client leaves by an error, so nothing is stored, as in SGD; anything
 * else (a connection check, a reload) returns, and the polish goes on
 * from where it was, so the model does not depend on when they arrive.
 */
static void
polish_yield(void *arg)
{
	CHECK_FOR_INTERRUPTS();
}

static const char *
polish_stop_name(CpPolishStop stop)
{
	switch (stop)
	{
		case CP_POLISH_CONVERGED:
			return "converged";
		case CP_POLISH_BUDGET:
			return "pass budget";
		case CP_POLISH_NO_DESCENT:
			return "no descent";
	}
	return "unknown";
}

/*
 * One-hot rows are held sparse to save memory, but their entries are a
 * fair share of the dimension: the polish's passes then run faster over
 * dense copies (a vectorised dot product instead of an indexed one), when
 * they fit maintenance_work_mem beside the polish's own memory.
 */
static void
polish_rows(const CpModel *m, CpBuffer *rows, MemoryContext cxt)
{
	CpBuffer	dense;
	Size		bytes;

	if (!rows->sparse)
		return;
	bytes = mul_size(mul_size((Size) rows->n_rows, (Size) m->n_features), sizeof(double));
	if (rows->nnz * 4 < (int64) rows->n_rows * m->n_features ||
		add_size(bytes, cp_polish_bytes(m)) > (Size) maintenance_work_mem * 1024)
		return;
	cp_buffer_init(&dense, cxt, false);
	cp_buffer_densify(&dense, rows);
	cp_buffer_free(rows);
	*rows = dense;
}

/*
 * Whether the polish takes this training (sgd_polish.c's header says
 * when); known once the first epoch has counted the rows and filled the
 * block cache.
 */
bool
cp_sgd_polish_applies(SgdState *s)
{
	CpModel    *m = &s->model;

	/* workers never come here: their leader stores the model (sgd_next) */
	return cp_polish_enabled && s->model_ready && s->params.default_rate &&
		s->params.average && s->best_epoch == 0 && s->vrel == NULL &&
		s->holdout == NULL && s->par == NULL && m->l2 > 0.0 &&
		cp_polish_applies(m) &&
		cp_polish_bytes(m) <= (Size) maintenance_work_mem * 1024 &&
		s->n_done >= 1 && s->results[0].tuples <= CP_POLISH_MAX_ROWS &&
		cp_tuple_source_cached_whole(s->src);
}

/*
 * What EXPLAIN says of the epochs a training with max_epoch_num NULL will
 * run, before it runs: the row count is the planner's estimate (pg_class),
 * and only the first epoch knows it for sure.
 */
char *
cp_sgd_explain_epochs(SgdState *s)
{
	double		est = s->src->rel->rd_rel->reltuples;
	char	   *cap = est >= 0 ?
		psprintf("at most %d (about %.0f rows)", cp_sgd_default_epochs((int64) est), est) :
		psprintf("at most %d, or up to %d below %d rows (the table has not been analyzed)",
				 CP_DEFAULT_EPOCHS, CP_DEFAULT_MAX_EPOCHS,
				 CP_DEFAULT_MIN_ROW_STEPS / CP_DEFAULT_EPOCHS);
	char	   *until = psprintf("until converged (the averaged model's objective improving by less than %g%% in %d epoch%s), %s",
								 CP_DEFAULT_RTOL * 100.0, s->params.n_iter_no_change,
								 s->params.n_iter_no_change == 1 ? "" : "s", cap);
	bool		smooth = s->params.model != CP_MODEL_SVM && s->params.l1 == 0.0;

	if (s->params.early_stopping)
		return psprintf("%s; stops by tolerance", cap);
	if (!s->params.converge_auto)
		return est >= 0 ?
			psprintf("%d (about %.0f rows)", cp_sgd_default_epochs((int64) est), est) :
			psprintf("%d; below %d rows, enough for %d row steps (at most %d)",
					 CP_DEFAULT_EPOCHS, CP_DEFAULT_MIN_ROW_STEPS / CP_DEFAULT_EPOCHS,
					 CP_DEFAULT_MIN_ROW_STEPS, CP_DEFAULT_MAX_EPOCHS);
	if (!(cp_polish_enabled && smooth && s->params.default_rate && s->params.average &&
		  (s->params.l2_auto || s->params.l2 > 0.0) && s->n_procs == 1 &&
		  !OidIsValid(s->params.validation_relid) && s->params.validation_fraction == 0.0))
		return until;
	if (est < 0)
		return psprintf("%d, then the polish, if the table has at most %d rows (it has not been analyzed); else %s",
						CP_DEFAULT_POLISH_EPOCHS, CP_POLISH_MAX_ROWS, until);
	if (est <= CP_POLISH_MAX_ROWS)
		return psprintf("%d, then the polish (about %.0f rows: at most %d are polished)",
						CP_DEFAULT_POLISH_EPOCHS, est, CP_POLISH_MAX_ROWS);
	return psprintf("%s; more rows than the polish's %d", until, CP_POLISH_MAX_ROWS);
}

/* The squared loss's gradient bound scales with the label (CP_POLISH_GTOL). */
static double
polish_gtol(const CpModel *m, const CpBuffer *rows)
{
	double		sum2 = 0.0;

	if (m->kind != CP_MODEL_LINEAR || rows->n_rows == 0)
		return CP_POLISH_GTOL;
	for (int64 i = 0; i < rows->n_rows; i++)
		sum2 += rows->labels[i] * rows->labels[i];
	return CP_POLISH_GTOL_LINEAR * Max(1.0, sqrt(sum2 / (double) rows->n_rows));
}

void
cp_sgd_polish_model(SgdState *s)
{
	CpModel    *m = &s->model;
	CpBuffer	rows;
	CpPolishResult res;
	MemoryContext old;
	instr_time	start;
	instr_time	elapsed;
	double	   *w;
	bool		polished;

	if (!cp_sgd_polish_applies(s))
		return;
	INSTR_TIME_SET_CURRENT(start);
	old = MemoryContextSwitchTo(s->train_cxt);
	cp_buffer_init(&rows, s->train_cxt, m->sparse);
	w = (double *) cp_model_final_weights(m);
	polished = cp_tuple_source_cached_rows(s->src, &rows) && rows.n_rows > 0;
	if (polished)
	{
		polish_rows(m, &rows, s->train_cxt);
		polished = cp_polish(m, &rows, w, cp_polish_max_passes, polish_gtol(m, &rows),
							 palloc0, polish_yield, NULL, &res);
	}
	if (polished)
	{
		CpModel		scored = *m;
		CpStats		st;

		/*
		 * The last row returned: the stored model's figures on the rows it
		 * was polished on (loss and score as the epochs' rows name them, but
		 * of the model itself, not of iterates on their way).
		 */
		memset(&st, 0, sizeof(st));
		scored.w = w;
		cp_model_evaluate(&scored, &rows, &st);
		INSTR_TIME_SET_CURRENT(elapsed);
		INSTR_TIME_SUBTRACT(elapsed, start);
		memset(&s->polish_row, 0, sizeof(s->polish_row));
		s->polish_row.epoch = 0;
		s->polish_row.tuples = rows.n_rows;
		s->polish_row.loss = cp_stats_loss(&st);
		s->polish_row.score = cp_stats_score(&st, m->kind);
		s->polish_row.seconds = INSTR_TIME_GET_DOUBLE(elapsed);
		s->has_polish_row = true;
		/*
		 * params.polish: what it did, and the row's figures for later readers
		 * (not its seconds: a seed's model is the same every time)
		 */
		s->polish_json = psprintf("{\"rows\": " INT64_FORMAT ", \"iterations\": %d, "
								  "\"passes\": %d, \"objective_sgd\": %.17g, "
								  "\"objective\": %.17g, \"gradient_max\": %.3g, "
								  "\"gradient_bound\": %.3g, "
								  "\"converged\": %s, \"stop\": \"%s\", "
								  "\"loss\": %.17g, \"score\": %s}",
								  rows.n_rows, res.iterations, res.passes,
								  res.objective_before, res.objective_after,
								  res.gradient_max, polish_gtol(m, &rows),
								  res.converged ? "true" : "false",
								  polish_stop_name(res.stop), s->polish_row.loss,
								  isnan(s->polish_row.score) ? "null" :
								  psprintf("%.17g", s->polish_row.score));
		if (cp_progress_notices)
			ereport(NOTICE,
					(errmsg("corgipile: model=%s polish passes=%d tuples=" INT64_FORMAT " loss=%.6f score=%.6f seconds=%.3f",
							s->model_name, res.passes, rows.n_rows,
							s->polish_row.loss, s->polish_row.score,
							s->polish_row.seconds),
					 errdetail("L-BFGS from the averaged model to the minimum of the objective (%s after %d passes); the last row returned, with a NULL epoch, has the stored model's loss and score on its training rows.",
							   polish_stop_name(res.stop), res.passes)));
		if (!res.converged)
			ereport(WARNING,
					(errmsg("model \"%s\" is not at the minimum of its objective: the polish %s after %d passes with a largest gradient entry of %.3g",
							s->model_name,
							res.stop == CP_POLISH_BUDGET ? "reached its pass budget" :
							"found no step that decreased the objective",
							res.passes, res.gradient_max),
					 errdetail("The polish stops at a gradient of %.3g; the objective went from %.10g (SGD) to %.10g. The model stored is the best point reached.",
							   polish_gtol(m, &rows), res.objective_before, res.objective_after),
					 res.stop == CP_POLISH_BUDGET ?
					 errhint("SET corgipile.polish_max_passes above %d and train again; features of very different scales or nearly equal columns make the minimum slow to reach: standardize them, or drop one of each near-duplicate pair.",
							 cp_polish_max_passes) :
					 errhint("Features of very different scales or nearly equal columns make the objective hard to minimise: standardize them, or drop one of each near-duplicate pair.")));
	}
	else
		ereport(WARNING,
				(errmsg("model \"%s\" was not polished: its objective is not finite at SGD's weights, or its rows were not all in memory",
						s->model_name),
				 errhint("Train with max_epoch_num given to keep SGD's model, or SET corgipile.polish = off.")));
	MemoryContextSwitchTo(old);
}
