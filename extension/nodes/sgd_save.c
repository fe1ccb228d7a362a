/*-------------------------------------------------------------------------
 *
 * sgd_save.c
 *	  The model row: what a training stores in corgipile.models.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "util/spi.h"
#include "model/models.h"
#include "nodes/sgd.h"
#include "nodes/sgd_state.h"

void
cp_sgd_save_model(SgdState *s)
{
	CpTrainRecord rec;
	int			nest;

	memset(&rec, 0, sizeof(rec));
	rec.model_name = s->model_name;
	rec.params = &s->params;
	rec.layout = s->lo;
	rec.sizing = s->src->sizing;
	rec.rel = s->src->rel;
	rec.validation_name = s->vrel ? RelationGetRelationName(s->vrel) : NULL;
	rec.polish_json = s->polish_json;
	rec.stopping_json = cp_sgd_stopping_json(s);
	if (s->holdout != NULL)
	{
		char	   *summary;

		rec.validation_name = psprintf("%g%%", s->params.validation_fraction * 100.0);
		rec.holdout_json = cp_holdout_report(s->holdout, s->lo,
											 s->src->rel,
											 s->css.ss.ps.state->es_snapshot,
											 &s->vbuf, s->val_row_cxt, &s->model,
											 s->best_epoch > 0 ? s->best_w :
											 (double *) cp_model_final_weights(&s->model),
											 s->best_epoch > 0 ? s->best_epoch : s->n_done,
											 &summary);
		if (cp_progress_notices)
			ereport(NOTICE,
					(errmsg("corgipile: model=%s %s", s->model_name, summary)));
	}
	rec.workers = s->n_procs;
	if (s->n_procs > 1)
	{
		/* the settings that change a parallel training's weights */
		rec.parallel_sync = cp_parallel_sync == CP_SYNC_AVERAGE ? "average" : "hogwild";
		if (s->src->wants_feedback)
			rec.parallel_grab = cp_parallel_grab == CP_GRAB_PAIR_BALANCE ?
				"pair_balance" : "independent";
	}
	rec.seed = s->seed;
	rec.model = &s->model;
	rec.results = s->results;
	rec.n_results = s->n_done;
	rec.weights = s->best_epoch > 0 ? s->best_w : cp_model_final_weights(&s->model);
	if (s->src->wants_feedback)
		cp_sgd_record_grab(s, &rec);
	rec.best_epoch = s->best_epoch > 0 ? s->best_epoch : s->n_done;
	if (!cp_sgd_baseline(s, &rec.baseline_kind, &rec.baseline_score))
		rec.baseline_kind = NULL;
	rec.held_rows = cp_tuple_source_held_rows(s->src, &rec.held_rows_key);
	/* as in sgd_begin: the catalog's queries under a pinned search_path */
	nest = cp_pin_search_path();
	cp_models_insert(&rec);
	cp_restore_search_path(nest);
}
