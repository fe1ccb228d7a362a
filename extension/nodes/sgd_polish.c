/*-------------------------------------------------------------------------
 *
 * sgd_polish.c
 *	  The polish: L-BFGS from SGD's final weights to the minimum of the
 *	  objective, on a small table the block cache holds whole.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"
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
 * Passes over the rows the polish may take: as many as the epochs SGD
 * trained, at least 100 (a few hundredths of a second on the small
 * tables), at most 1000.  Measured on the 37 tables of docs/real-datasets.md: most
 * reach the gradient bound well within it; the others stop close to it.
 */
#define CP_POLISH_MIN_PASSES 100
#define CP_POLISH_MAX_PASSES 1000

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

void
cp_sgd_polish_model(SgdState *s)
{
	CpModel    *m = &s->model;
	CpBuffer	rows;
	CpPolishResult res;
	MemoryContext old;
	int			passes = Min(Max(s->n_done, CP_POLISH_MIN_PASSES), CP_POLISH_MAX_PASSES);

	/* workers never come here: their leader stores the model (sgd_next) */
	if (!cp_polish_enabled || !s->model_ready || !s->params.default_rate || !s->params.average ||
		s->best_epoch > 0 || s->vrel != NULL || s->holdout != NULL ||
		m->l2 <= 0.0 || !cp_polish_applies(m) ||
		cp_polish_bytes(m) > (Size) maintenance_work_mem * 1024 ||
		s->n_done < 1 || s->results[0].tuples > CP_POLISH_MAX_ROWS)
		return;
	old = MemoryContextSwitchTo(s->train_cxt);
	cp_buffer_init(&rows, s->train_cxt, m->sparse);
	if (cp_tuple_source_cached_rows(s->src, &rows) && rows.n_rows > 0 &&
		cp_polish(m, &rows, (double *) cp_model_final_weights(m), passes,
				  palloc0, polish_yield, NULL, &res))
	{
		s->polish_json = psprintf("{\"rows\": " INT64_FORMAT ", \"iterations\": %d, "
								  "\"passes\": %d, \"objective_sgd\": %.17g, "
								  "\"objective\": %.17g, \"gradient_max\": %.3g, "
								  "\"converged\": %s, \"stop\": \"%s\"}",
								  rows.n_rows, res.iterations, res.passes,
								  res.objective_before, res.objective_after,
								  res.gradient_max, res.converged ? "true" : "false",
								  polish_stop_name(res.stop));
		if (!res.converged)
			ereport(WARNING,
					(errmsg("model \"%s\" is not at the minimum of its objective: the polish %s after %d passes with a largest gradient entry of %.3g",
							s->model_name,
							res.stop == CP_POLISH_BUDGET ? "reached its pass budget" :
							"found no step that decreased the objective",
							res.passes, res.gradient_max),
					 errdetail("The polish stops at a gradient of 1e-7; the objective went from %.10g (SGD) to %.10g. The model stored is the best point reached.",
							   res.objective_before, res.objective_after),
					 res.stop == CP_POLISH_BUDGET ?
					 errhint("The polish may take as many passes as the epochs trained, from %d to %d: train with a larger max_epoch_num, or standardize features of very different scales.",
							 CP_POLISH_MIN_PASSES, CP_POLISH_MAX_PASSES) :
					 errhint("Features of very different scales or nearly equal columns make the objective hard to minimise: standardize them, or drop one of each near-duplicate pair.")));
	}
	MemoryContextSwitchTo(old);
}
