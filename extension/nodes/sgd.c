/*-------------------------------------------------------------------------
 *
 * sgd.c
 *	  SGD: the top operator of a training plan.
 *
 * Each call of the node runs one epoch and returns its figures as a row
 * (and as a NOTICE, which reaches the client at once while rows may wait in
 * the send buffer).  An epoch pulls buffers from TupleShuffle until the
 * table is exhausted; the next epoch rescans the subtree, which draws a new
 * block order.  After the last epoch the model is written to
 * corgipile.models in the same transaction.
 *
 * This file holds the plan node and the executor's callbacks; the rest of
 * the operator is split by job, over the state of nodes/sgd_state.h:
 * sgd_epoch.c (one epoch), sgd_train.c (the weights and the three training
 * drivers: one buffer, double buffering, workers), sgd_validate.c
 * (validation and early stopping), sgd_checks.c (divergence and the
 * trivial baseline), sgd_warm.c (warm_start), sgd_grab.c (GraB's state),
 * sgd_polish.c (the polish) and sgd_save.c (the model row).
 *
 * Double buffering: while the helper thread permutes and trains on one
 * buffer, the main thread fills the other.  The helper only runs the plain
 * C core on memory prepared here.  The main thread waits for it in a loop
 * that checks for interrupts, and the helper is stopped and joined on every
 * way out: normal end, PG_CATCH, and the reset callback of the memory
 * context that holds the buffers (which runs before that memory is freed,
 * whatever aborts the query).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <math.h>

#include "access/table.h"
#include "common/pg_prng.h"
#include "commands/explain.h"
#include "executor/executor.h"
#include "miscadmin.h"
#include "tcop/utility.h"
#include "utils/builtins.h"
#include "utils/memutils.h"
#include "utils/rel.h"

#include "util/relation.h"
#include "util/spi.h"
#include "model/models.h"
#include "nodes/parallel.h"
#include "nodes/sgd.h"
#include "nodes/sgd_state.h"
#include "nodes/tuple_source.h"

bool		cp_progress_notices = true;
bool		cp_polish_enabled = true;
int			cp_polish_max_passes = 1000;

static Node *sgd_create_state(CustomScan *cscan);
static void sgd_begin(CustomScanState *node, EState *estate, int eflags);
static TupleTableSlot *sgd_exec(CustomScanState *node);
static void sgd_end(CustomScanState *node);
static void sgd_rescan(CustomScanState *node);
static void sgd_explain(CustomScanState *node, List *ancestors, ExplainState *es);

CustomScanMethods cp_sgd_scan_methods = {
	.CustomName = "SGD",
	.CreateCustomScanState = sgd_create_state,
};

static CustomExecMethods sgd_exec_methods = {
	.CustomName = "SGD",
	.BeginCustomScan = sgd_begin,
	.ExecCustomScan = sgd_exec,
	.EndCustomScan = sgd_end,
	.ReScanCustomScan = sgd_rescan,
	.ExplainCustomScan = sgd_explain,
};

/*
 * The SGD plan node stands in for the function scan of corgipile.train():
 * it has no scan relation of its own and emits the function's columns, so
 * its scan tuple is described by scan_tlist (Vars of the function's range
 * table entry rti).
 */
CustomScan *
cp_sgd_make_plan(Const *params, CustomScan *child, List *tlist, List *scan_tlist,
			  List *quals, Index rti)
{
	CustomScan *cscan = makeNode(CustomScan);

	cscan->scan.scanrelid = 0;
	cscan->scan.plan.targetlist = tlist;
	cscan->scan.plan.qual = quals;
	cscan->custom_scan_tlist = scan_tlist;
	cscan->custom_relids = bms_make_singleton(rti);
	cscan->custom_plans = list_make1(child);
	cscan->custom_private = list_make1(params);
	cscan->methods = &cp_sgd_scan_methods;
	return cscan;
}

static Node *
sgd_create_state(CustomScan *cscan)
{
	SgdState   *s = palloc0(sizeof(SgdState));

	NodeSetTag(s, T_CustomScanState);
	s->css.methods = &sgd_exec_methods;
	cp_params_unpack(linitial_node(Const, cscan->custom_private), &s->params);
	/* a shard of a distributed training (shard_round.c) */
	cp_sgd_round_begin(s);
	return (Node *) s;
}

/* Runs before the buffers are freed, however the query ends. */
static void
sgd_cleanup(void *arg)
{
	SgdState   *s = (SgdState *) arg;

	cp_worker_stop(&s->worker);
	if (s->name_claimed)
		cp_models_release_name(s->model_name);
}

static void
sgd_begin(CustomScanState *node, EState *estate, int eflags)
{
	SgdState   *s = (SgdState *) node;
	CustomScan *cscan = (CustomScan *) node->ss.ps.plan;
	bool		sparse;
	int			nest;

	s->child = ExecInitNode(linitial(cscan->custom_plans), estate, eflags);
	node->custom_ps = list_make1(s->child);
	s->src = cp_tuple_shuffle_source(s->child);
	s->lo = s->src->layout;

	/* one seed per training; a random one is recorded with the model */
	s->seed = s->params.has_seed ? s->params.seed :
		pg_prng_int64p(&pg_global_prng_state);
	cp_tuple_source_set_seed(s->src, (uint64) s->seed);
	s->n_procs = cp_parallel_choose(&s->params, s->src->rel, s->src->sizing,
									s->src->n_groups);

	if (eflags & EXEC_FLAG_EXPLAIN_ONLY)
		return;

	/* the model is written at the end: refuse now rather than after training */
	PreventCommandIfReadOnly("corgipile.train()");
	PreventCommandIfParallelMode("corgipile.train()");

	/*
	 * The model catalog's queries run under a pinned search_path, so that no
	 * function or operator of the caller's path runs inside them.
	 */
	nest = cp_pin_search_path();
	if (s->round != NULL)
		s->model_name = "(a shard of a distributed training)";	/* stores none */
	else if (s->params.model_name != NULL)
		s->model_name = s->params.model_name;
	else
		s->model_name = cp_models_new_name(s->src->rel,
										   s->params.model);
	if (s->round == NULL)
		cp_models_check_absent(s->model_name);
	cp_restore_search_path(nest);
	if (s->params.n_features > 0)
		cp_check_model_size(s->params.model, s->params.n_features, 2,
							cp_layout_sparse_rows(s->lo),
							s->params.batch_size, s->lo->relname);
	s->model_name_datum = CStringGetTextDatum(s->model_name);

	s->train_cxt = AllocSetContextCreate(estate->es_query_cxt,
										 "corgipile training",
										 ALLOCSET_DEFAULT_SIZES);
	s->cleanup.func = sgd_cleanup;
	s->cleanup.arg = s;
	MemoryContextRegisterResetCallback(s->train_cxt, &s->cleanup);
	if (s->round == NULL)
	{
		cp_models_claim_name(s->model_name);
		s->name_claimed = true;
	}
	s->val_row_cxt = AllocSetContextCreate(s->train_cxt,
										   "corgipile validation row",
										   ALLOCSET_DEFAULT_SIZES);

	sparse = (cp_layout_sparse_rows(s->lo));
	cp_tuple_source_init_buffer(s->src, &s->bufs[0], s->train_cxt);
	cp_tuple_source_init_buffer(s->src, &s->bufs[1], s->train_cxt);
	/*
	 * max_epoch_num may be any int, and training may stop early: the
	 * history grows with the epochs actually run.
	 */
	s->results_cap = Min(s->params.max_epoch_num, 64);
	s->results = MemoryContextAllocZero(s->train_cxt,
										mul_size(sizeof(CpEpochResult), s->results_cap));
	s->learning_rate = s->params.learning_rate;
	if (s->n_procs > 1)
	{
		MemoryContext old = MemoryContextSwitchTo(s->train_cxt);

		s->par = cp_parallel_create(s->src, s->child->plan, estate, s->n_procs, (uint64) s->seed,
									s->model_name);
		MemoryContextSwitchTo(old);
	}

	if (OidIsValid(s->params.validation_relid))
	{
		s->vrel = table_open(s->params.validation_relid, AccessShareLock);
		cp_layout_resolve(&s->vlayout, RelationGetDescr(s->vrel),
						  RelationGetRelationName(s->vrel), &s->params);
		/* as BlockShuffle does for the training relation */
		cp_check_access_at_start(s->vrel, cp_layout_columns(&s->vlayout),
								 "validation relation");
		if (s->vlayout.mode != s->lo->mode)
			ereport(ERROR,
					(errcode(ERRCODE_DATATYPE_MISMATCH),
					 errmsg("validation relation \"%s\" lays out its features differently from \"%s\"",
							RelationGetRelationName(s->vrel),
							s->lo->relname)));
		cp_layout_check_label_kind(&s->vlayout,
								   cp_is_text_label_type(s->lo->label_type),
								   s->model_name);
		cp_buffer_init(&s->vbuf, s->train_cxt, sparse);
	}
	s->holdout = s->src->holdout;
	if (s->holdout != NULL)
		cp_buffer_init(&s->vbuf, s->train_cxt, sparse);
	cp_sgd_stop_init(s);
}

static TupleTableSlot *
sgd_next(ScanState *node)
{
	SgdState   *s = (SgdState *) node;
	TupleTableSlot *slot = node->ss_ScanTupleSlot;
	CpEpochResult *res;

	ExecClearTuple(slot);
	/* a shard's first pass, for its coordinator: a row of no epoch */
	if (cp_sgd_round_stats(s))
	{
		memset(slot->tts_isnull, true, sizeof(bool) * 7);
		slot->tts_values[0] = s->model_name_datum;
		slot->tts_isnull[0] = false;
		return ExecStoreVirtualTuple(slot);
	}
	if (s->replay_pos == s->n_done && !s->finished)
	{
		cp_sgd_run_epoch(s);
		/* workers => N: every epoch now, the workers kept across them */
		while (s->par != NULL && !s->finished)
			cp_sgd_run_epoch(s);
		if (s->finished)
		{
			if (s->par != NULL)
			{
				/*
				 * Every epoch is trained already: store the model when the
				 * caller takes the last epoch's row, as one process does, so
				 * that a LIMIT that stops earlier stores nothing.
				 */
				cp_parallel_finish(s->par);
				s->save_pending = true;
			}
			else
			{
				cp_sgd_polish_model(s);
				cp_sgd_warn_unconverged(s);
				cp_sgd_warn_if_worse(s);
				cp_sgd_warn_if_trivial(s);
				cp_sgd_save_model(s);
			}
		}
	}
	/* the polish's row comes last: the stored model's figures (sgd_polish.c) */
	if (s->replay_pos < s->n_done)
		res = &s->results[s->replay_pos++];
	else if (s->replay_pos == s->n_done && s->has_polish_row)
	{
		res = &s->polish_row;
		s->replay_pos++;
	}
	else
		return slot;
	if (s->save_pending && s->replay_pos == s->n_done)
	{
		s->save_pending = false;
		cp_sgd_warn_unconverged(s);
		cp_sgd_warn_if_worse(s);
		cp_sgd_warn_if_trivial(s);
		cp_sgd_save_model(s);
	}

	return cp_sgd_epoch_row(slot, s->model_name_datum, res, res == &s->polish_row);
}

/* train()'s row of an epoch (of the polish: no epoch number). */
TupleTableSlot *
cp_sgd_epoch_row(TupleTableSlot *slot, Datum model_name, const CpEpochResult *res,
				 bool polish)
{
	slot->tts_values[0] = model_name;
	slot->tts_values[1] = Int32GetDatum(res->epoch);
	slot->tts_values[2] = Int64GetDatum(res->tuples);
	slot->tts_values[3] = Float8GetDatum(res->loss);
	slot->tts_values[4] = Float8GetDatum(res->score);
	slot->tts_values[5] = Float8GetDatum(res->validation_score);
	slot->tts_values[6] = Float8GetDatum(res->seconds);
	memset(slot->tts_isnull, 0, sizeof(bool) * 7);
	slot->tts_isnull[1] = polish;
	slot->tts_isnull[4] = isnan(res->score);
	slot->tts_isnull[5] = !res->has_validation || isnan(res->validation_score);
	return ExecStoreVirtualTuple(slot);
}

static bool
sgd_recheck(ScanState *node, TupleTableSlot *slot)
{
	return true;
}

static TupleTableSlot *
sgd_exec(CustomScanState *node)
{
	return ExecScan(&node->ss, sgd_next, sgd_recheck);
}

/* A rescan replays the epochs already trained, then goes on training. */
static void
sgd_rescan(CustomScanState *node)
{
	SgdState   *s = (SgdState *) node;

	s->replay_pos = 0;
}

static void
sgd_end(CustomScanState *node)
{
	SgdState   *s = (SgdState *) node;

	cp_worker_stop(&s->worker);
	if (s->vrel != NULL)
		table_close(s->vrel, NoLock);
	ExecEndNode(s->child);
}

static void
sgd_explain(CustomScanState *node, List *ancestors, ExplainState *es)
{
	SgdState   *s = (SgdState *) node;

	ExplainPropertyText("Model", cp_model_kind_name(s->params.model), es);
	ExplainPropertyText("Shuffle", cp_shuffle_name(s->params.shuffle), es);
	if (s->params.epochs_auto && !(es->analyze && s->n_done > 0))
		ExplainPropertyText("Epochs", cp_sgd_explain_epochs(s), es);
	else
		ExplainPropertyInteger("Epochs", NULL, s->params.max_epoch_num, es);
	ExplainPropertyFloat("Learning Rate", NULL, s->params.learning_rate, 4, es);
	if (s->params.l2_auto)
		ExplainPropertyText("L2", "1 / the rows trained on, from epoch 2", es);
	ExplainPropertyText("Averaging",
						!s->params.average ? "off" :
						s->params.max_epoch_num < 2 ? "on (from epoch 2: none in one epoch)" :
						"on (the iterates from epoch 2)", es);
	ExplainPropertyInteger("Batch Size", NULL, s->params.batch_size, es);
	/* parallel epochs train on each process's main thread (parallel.c) */
	ExplainPropertyText("Double Buffering",
						s->params.double_buffer && s->n_procs == 1 ? "on" : "off", es);
	if (s->n_procs > 1)
		ExplainPropertyInteger("Workers Planned", NULL, s->n_procs - 1, es);
	if (s->params.validation_fraction > 0.0)
		ExplainPropertyText("Validation",
							psprintf("%g%% of the rows held out", s->params.validation_fraction * 100.0),
							es);
	if (s->params.early_stopping)
		ExplainPropertyText("Stopping",
							psprintf("the loss improving by less than %g for %d epochs",
									 s->params.tolerance, s->params.n_iter_no_change), es);
	if (es->analyze)
		ExplainPropertyInteger("Epochs Trained", NULL, s->n_done, es);
	if (es->analyze && s->converged)
		ExplainPropertyText("Stopped", "converged", es);
	if (es->analyze && s->has_polish_row)
		ExplainPropertyText("Polished", s->polish_json, es);
	if (es->analyze && s->holdout != NULL && s->holdout->complete)
	{
		ExplainPropertyInteger("Held-out Rows", NULL, s->holdout->n_seen, es);
		ExplainPropertyText("Held-out Rows Kept",
							s->holdout->reread ? "no: re-read for each scoring" : "yes", es);
	}
	if (es->analyze && s->par != NULL)
		cp_parallel_explain(s->par, es);
}
