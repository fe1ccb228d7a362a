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

#include "access/heapam.h"
#include "common/base64.h"
#include "access/table.h"
#include "access/tableam.h"
#include "commands/explain.h"
#include "executor/executor.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "tcop/utility.h"
#include "portability/instr_time.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"

#include "core/grab.h"
#include "core/polish.h"
#include "core/preprocess.h"
#include "core/shuffle.h"
#include "core/worker.h"
#include "util/relation.h"
#include "util/spi.h"
#include "model/models.h"
#include "nodes/parallel.h"
#include "nodes/sgd.h"
#include "nodes/tuple_source.h"
#include "shuffle/grab.h"

bool		cp_progress_notices = true;
bool		cp_polish_enabled = true;

/* how often (ms) the main thread looks for interrupts while it waits */
#define CP_WAIT_POLL_MS 10
/* rows scored per batch when validating */
#define CP_VALIDATION_BATCH 4096

typedef struct SgdJob
{
	CpTupleSource *src;
	CpBuffer   *buf;
	CpModel    *model;
	CpCancel   *cancel;
	int64		reached;		/* rows trained on */
} SgdJob;

typedef struct SgdState
{
	CustomScanState css;
	CpTrainParams params;
	PlanState  *child;			/* TupleShuffle */
	CpTupleSource *src;			/* what it hands over (nodes/tuple_source.h) */
	const CpLayout *lo;			/* the source's layout, read-only */
	int64		seed;
	char	   *model_name;
	bool		name_claimed;	/* cp_models_claim_name's, until cleanup */
	Datum		model_name_datum;

	MemoryContext train_cxt;	/* buffers and weights */
	MemoryContext val_row_cxt;	/* reset after every validation row */
	MemoryContextCallback cleanup;
	CpWorker	worker;
	CpBuffer	bufs[2];
	CpGrabAcc  *grab;			/* shuffle => 'grab': block sums, or NULL */
	CpStoredModel *warm;		/* warm_start's model, or NULL */
	CpModel		model;
	bool		model_ready;
	double		learning_rate;	/* this epoch's */
	SgdJob		job;

	CpEpochResult *results;		/* one per epoch trained, grown as they run */
	int			results_cap;
	int			n_done;			/* epochs trained */
	bool		finished;		/* no more epochs: the last, or stopped early */
	bool		save_pending;	/* parallel: store the model with the last row */

	/* early stopping: the best epoch so far and its weights */
	int			best_epoch;		/* 0: none yet */
	double		best_loss;
	double	   *best_w;
	char	   *polish_json;	/* what polish_model did, or NULL */
	int			since_best;		/* epochs without enough improvement */
	int			replay_pos;		/* rows returned since the last rescan */

	/* workers => N (parallel.c): processes planned, and the leader's side */
	int			n_procs;
	CpParallel *par;

	/*
	 * The trivial baseline (issue 21): the first epoch's training labels,
	 * counted per class (class k of softmax; -1/+1 at 0/1), and in all
	 * (linear: the mean's R2 is 0 whatever the labels).
	 */
	int64	   *label_counts;
	int			n_label_counts;
	int64		label_n;

	Relation	vrel;			/* validation relation, or NULL */
	CpHoldout  *holdout;		/* validation => 'N%', or NULL */
	CpLayout	vlayout;
	CpBuffer	vbuf;
} SgdState;

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
	if (s->params.model_name != NULL)
		s->model_name = s->params.model_name;
	else
		s->model_name = cp_models_new_name(s->src->rel,
										   s->params.model);
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
	cp_models_claim_name(s->model_name);
	s->name_claimed = true;
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
}

/*
 * shuffle => 'grab': the per-block gradient sums, exact when one
 * n_weights vector per block fits in maintenance_work_mem, else the core's
 * random projection (docs/grab.md).
 */
static void
init_grab(SgdState *s)
{
	const CpSizing *sz = s->src->sizing;
	void	   *state = s->src->strategy_state;
	Size		budget = (Size) maintenance_work_mem * 1024;
	uint32		n_units;
	int32		dim;

	/* parallel.c keeps a sum per block, in shared memory */
	if (s->par != NULL)
		cp_grab_set_unit_blocks(state, 1);
	n_units = cp_grab_n_units(state);
	dim = cp_grab_choose_dim(Max(n_units, 1), s->model.n_weights, budget);

	if (dim < 0)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("shuffle \"grab\" needs more memory than maintenance_work_mem (%d kB) for the gradient sums of %u blocks",
						maintenance_work_mem, sz->n_blocks),
				 errhint("Raise maintenance_work_mem, block_size or corgipile.grab_unit_blocks.")));
	s->grab = palloc0(sizeof(CpGrabAcc));
	if (!cp_grab_acc_init(s->grab, Max(n_units, 1), s->model.n_weights, dim,
						  cp_derive_seed((uint64) s->seed, 7), palloc0))
		elog(ERROR, "corgipile: GraB sizes do not fit");	/* checked above */
	s->model.grab = s->grab;
	/* units of several blocks: sums are kept per unit */
	s->model.grab_unit_of = cp_grab_unit_map(state);
	s->model.grab_snap = palloc(mul_size(sizeof(double), s->model.n_weights));
	/* projected sums: from the projected weights (core/grab.c) */
	if (s->grab->proj_nnz > 0)
		s->model.grab_pw = palloc(mul_size(sizeof(double) * 2, dim));
	/* shuffled dense buffers are gathered before training (core), blocks too */
	if (s->model.gather_rows > 0)
		s->model.gather_blocks = palloc0(mul_size(sizeof(uint32), s->model.gather_rows));
}

/*
 * warm_start, before the first epoch: load the model (cp_models_load checks
 * that the caller may use it) and refuse one of another kind or layout.
 * Its dimension is checked, and its weights copied, once this training's
 * weights exist (warm_weights).
 */
static void warm_grab_order(SgdState *s);

/* What is wrong with a stored GraB order, for the error's detail. */
static const char *
grab_load_problem(CpGrabLoadStatus st)
{
	switch (st)
	{
		case CP_GRAB_LOAD_OK:
			break;
		case CP_GRAB_LOAD_TRUNCATED:
			return "Its length does not match its header (or it is not base64).";
		case CP_GRAB_LOAD_BAD_MAGIC:
			return "It does not start with the header of a stored GraB order.";
		case CP_GRAB_LOAD_BAD_VERSION:
			return "It was written by a newer format version.";
		case CP_GRAB_LOAD_NOT_PERMUTATION:
			return "Its order is not a permutation of its blocks.";
		case CP_GRAB_LOAD_BAD_SIGNS:
			return "Unused sign bits are set.";
	}
	return "It is damaged.";
}

static void
warm_load(SgdState *s)
{
	const char *name = s->params.warm_start;
	MemoryContext old = MemoryContextSwitchTo(s->train_cxt);

	s->warm = cp_models_load(name);
	MemoryContextSwitchTo(old);
	if (s->warm->kind != s->params.model)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("warm start model \"%s\" is a %s model; this training is %s",
						name, cp_model_kind_name(s->warm->kind),
						cp_model_kind_name(s->params.model)),
				 errhint("Train without warm_start, or name a %s model.",
						 cp_model_kind_name(s->params.model))));
	if (s->warm->mode != s->lo->mode)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("warm start model \"%s\" has the %s feature layout; this training's is %s",
						name, cp_layout_mode_name(s->warm->mode),
						cp_layout_mode_name(s->lo->mode)),
				 errhint("Train without warm_start.")));
	if (OidIsValid(s->warm->relid) && s->warm->relid != s->params.relid)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("warm start model \"%s\" was trained on another relation than \"%s\"",
						name, s->lo->relname),
				 errhint("Train without warm_start.")));
	if (strcmp(s->warm->label, s->params.label) != 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("warm start model \"%s\" was trained on label column \"%s\"; this training's is \"%s\"",
						name, s->warm->label, s->params.label),
				 errhint("Train without warm_start.")));
	if (s->src->wants_feedback)
		warm_grab_order(s);
}

/* The weights must have this training's shape: features and classes. */
static void
warm_weights(SgdState *s)
{
	const char *name = s->params.warm_start;
	CpStoredModel *w = s->warm;

	if (w->n_features != s->model.n_features)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("warm start model \"%s\" has %d features; the features of \"%s\" have %d",
						name, w->n_features, s->lo->relname, s->model.n_features),
				 errhint("Train without warm_start.")));
	if (w->n_outputs != s->model.n_outputs)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("warm start model \"%s\" has %d classes; the labels of \"%s\" have %d",
						name, w->n_outputs, s->lo->relname, s->model.n_outputs),
				 errhint("Train without warm_start.")));
	if (s->lo->classes != NULL && w->class_names != NULL)
	{
		for (int k = 0; k < s->lo->classes->n_classes; k++)
			if (strcmp(s->lo->classes->names[k], w->class_names[k]) != 0)
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						 errmsg("warm start model \"%s\" has other classes than the labels of \"%s\" (class %d is \"%s\", not \"%s\")",
								name, s->lo->relname, k + 1, w->class_names[k],
								s->lo->classes->names[k]),
						 errhint("Train without warm_start.")));
	}
	memcpy(s->model.w, w->weights, sizeof(double) * s->model.n_weights);
}

/*
 * grab with warm_start: the first epoch follows the stored model's next
 * order (the reordering of its last epoch's order and signs), adapted when
 * the table's block count changed.  A model trained with another strategy
 * has no stored order: the first epoch is random, as without warm_start.
 */
static void
warm_grab_order(SgdState *s)
{
	const char *name = s->params.warm_start;
	const CpSizing *sz = s->src->sizing;
	const char *state_b64 = s->warm->grab_state;
	int64		stored_ppb = s->warm->grab_pages_per_block;
	uint8	   *raw;
	int			raw_len;
	uint32		old_n;
	uint32	   *visit;
	int8	   *signs;
	uint8	   *seen;
	uint32	   *order;
	CpGrabLoadStatus st;

	if (state_b64 == NULL)
		return;

	if (stored_ppb != (int64) sz->pages_per_block)
	{
		ereport(NOTICE,
				(errmsg("stored block order of model \"%s\" not used: it orders blocks of %lld pages, this training reads blocks of %u",
						name, (long long) stored_ppb, sz->pages_per_block),
				 errdetail("The weights are used; the first epoch visits the blocks in a random order.")));
		return;
	}

	raw = palloc(pg_b64_dec_len(strlen(state_b64)));
	raw_len = pg_b64_decode(state_b64, strlen(state_b64), (char *) raw,
							pg_b64_dec_len(strlen(state_b64)));
	st = raw_len < 0 ? CP_GRAB_LOAD_TRUNCATED :
		cp_grab_stored_blocks(raw, raw_len, &old_n);
	if (st == CP_GRAB_LOAD_OK)
	{
		visit = palloc(mul_size(sizeof(uint32), Max(old_n, 1)));
		signs = palloc(Max(old_n, 1));
		seen = palloc0(Max(old_n, 1));
		st = cp_grab_deserialize(raw, raw_len, visit, signs, seen);
	}
	if (st != CP_GRAB_LOAD_OK)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_CORRUPTED),
				 errmsg("stored GraB order of model \"%s\" is damaged", name),
				 errdetail("%s", grab_load_problem(st)),
				 errhint("Train it again without warm_start.")));

	order = palloc(mul_size(sizeof(uint32), Max(old_n, 1)));
	cp_grab_reorder(visit, signs, old_n, order);
	if (old_n != sz->n_blocks)
	{
		uint32	   *adapted = palloc(mul_size(sizeof(uint32), Max(sz->n_blocks, 1)));
		uint32		changed = cp_grab_adapt_order(order, old_n, sz->n_blocks,
												  cp_derive_seed((uint64) s->seed, 8),
												  adapted);

		ereport(NOTICE,
				(errmsg("stored block order of model \"%s\" adapted: table \"%s\" has %u blocks of %u pages, the model ordered %u; %u blocks %s",
						name, s->lo->relname, sz->n_blocks, sz->pages_per_block, old_n,
						changed, sz->n_blocks > old_n ? "appended in random order" : "dropped")));
		order = adapted;
	}
	cp_grab_set_first_order(s->src->strategy_state, order);
}

/* Allocate the weights once the dimension is known (first non-empty buffer). */
static void
ensure_model(SgdState *s)
{
	MemoryContext old;
	int			n_outputs;
	bool		sparse;

	if (s->model_ready)
		return;
	n_outputs = s->lo->classes ? s->lo->classes->n_classes : 1;
	sparse = cp_layout_sparse_rows(s->lo);
	cp_check_model_size(s->params.model, s->lo->n_features, n_outputs,
						sparse, s->params.batch_size, s->lo->relname);
	old = MemoryContextSwitchTo(s->train_cxt);
	if (!cp_model_init(&s->model, s->params.model, s->lo->n_features,
					   n_outputs, sparse, s->params.batch_size, s->params.l2,
					   s->params.l1, palloc0))
		elog(ERROR, "corgipile: model sizes do not fit");	/* checked above */
	/* one-hot rows are sparse to save memory, regularised as dense ones */
	s->model.reg_all = s->lo->has_onehot;
	if (s->params.early_stopping)
		s->best_w = palloc(mul_size(sizeof(double), s->model.n_weights));
	if (s->params.average)
		cp_model_average_init(&s->model,
							  palloc0(mul_size(sizeof(double), s->model.n_weights)));
	/* the default schedule: squared loss steps implicitly (core) */
	s->model.normalized_step = s->params.default_rate && s->params.average &&
		s->params.model == CP_MODEL_LINEAR;
	if (s->src->wants_feedback)
		init_grab(s);
	MemoryContextSwitchTo(old);
	if (s->warm != NULL)
		warm_weights(s);
	s->model.learning_rate = s->learning_rate;
	s->model_ready = true;
}

/* The job a buffer gets: permute it, then train on it in that order. */
static void
sgd_job_run(void *arg)
{
	SgdJob	   *job = (SgdJob *) arg;

	cp_tuple_source_permute(job->src, job->buf);
	job->reached = cp_model_train(job->model, job->buf, 0, job->cancel);
}

/*
 * Count the labels of a buffer the first epoch trains on, on the main
 * thread, before the buffer is handed to the helper (which only permutes
 * its order).
 */
static void
note_labels(SgdState *s, const CpBuffer *buf)
{
	if (s->n_done > 0 || buf->n_rows == 0)
		return;
	if (s->label_counts == NULL && s->params.model != CP_MODEL_LINEAR)
	{
		s->n_label_counts = s->params.model == CP_MODEL_SOFTMAX && s->lo->classes ?
			s->lo->classes->n_classes : 2;
		s->label_counts = MemoryContextAllocZero(s->train_cxt,
												 sizeof(int64) * s->n_label_counts);
	}
	for (int64 i = 0; s->label_counts != NULL && i < buf->n_rows; i++)
	{
		double		y = buf->labels[i];
		int			k = s->params.model == CP_MODEL_SOFTMAX ? (int) y : (y > 0.0);

		if (k >= 0 && k < s->n_label_counts)
			s->label_counts[k]++;
	}
	s->label_n += buf->n_rows;
}

/*
 * The trivial model's score on the training rows: the majority class's
 * share, or R^2 = 0 for predicting the mean.  False when the labels were
 * not counted (a parallel training).
 */
static bool
baseline(SgdState *s, const char **kind, double *score)
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

static void
warn_if_trivial(SgdState *s)
{
	const CpEpochResult *last = &s->results[s->n_done - 1];
	const char *kind;
	double		base;
	double		score;
	double		margin;
	bool		held;

	if (!baseline(s, &kind, &base))
		return;
	held = last->has_validation && !isnan(last->validation_score);
	score = held ? last->validation_score : last->score;
	margin = CP_BASELINE_MARGIN;
	if (s->params.model != CP_MODEL_LINEAR)
	{
		int64		n = held ? last->validation_n : last->tuples;

		margin = Max(margin, CP_BASELINE_SIGMAS *
					 sqrt(base * (1.0 - base) / (double) Max(n, 1)));
	}
	if (isnan(score) || score >= base - margin)
		return;
	ereport(WARNING,
			(errmsg("model \"%s\" scores %.4f %s, below the %.4f of always predicting the %s",
					s->model_name, score,
					held ? "on the validation rows" : "on its training rows in the last epoch",
					base, kind),
			 errdetail("The trivial model's figure is taken from the %lld training rows%s.",
					   (long long) s->label_n,
					   s->params.model == CP_MODEL_LINEAR ? " (R2 0 by definition)" : ""),
			 held ? errhint("Check that the features carry information on the label; a full shuffle (shuffle => 'shuffle_once') tells a shuffling problem from a modelling one.") :
			 errhint("Score it on rows it did not train on (validation => '20%%'), and check that the features carry information on the label.")));
}

static void
train_single_buffered(SgdState *s)
{
	CpBuffer   *buf = &s->bufs[0];
	CpCancel	cancel;

	/* the main thread trains: the signal handlers' own flag stops it */
	cp_cancel_init(&cancel, &InterruptPending);
	while (cp_tuple_source_fill(s->src, buf))
	{
		int64		pos = 0;

		if (buf->n_rows == 0)
			continue;
		note_labels(s, buf);
		ensure_model(s);
		cp_tuple_source_permute(s->src, buf);

		/*
		 * Stop at a row boundary whenever an interrupt is pending, serve it,
		 * and carry on from the same row: the result does not depend on
		 * when interrupts arrive.
		 */
		while ((pos = cp_model_train(&s->model, buf, pos, &cancel)) < buf->n_rows)
			CHECK_FOR_INTERRUPTS();
	}
}

static void
wait_for_job(SgdState *s)
{
	while (!cp_worker_wait(&s->worker, CP_WAIT_POLL_MS))
		CHECK_FOR_INTERRUPTS();
	if (s->job.reached != s->job.buf->n_rows)
		elog(ERROR, "corgipile: training of a buffer was cut short");
}

static void
train_double_buffered(SgdState *s)
{
	CpBuffer   *cur = &s->bufs[0];
	CpBuffer   *next = &s->bufs[1];
	bool		have;

	if (!s->worker.started)
	{
		int			rc = cp_worker_start(&s->worker);

		if (rc != 0)
			ereport(ERROR,
					(errcode(ERRCODE_INSUFFICIENT_RESOURCES),
					 errmsg("corgipile: could not start the double-buffering thread: %s",
							strerror(rc)),
					 errhint("Train with double_buffer => false.")));
	}

	have = cp_tuple_source_fill(s->src, cur);
	if (have)
		note_labels(s, cur);
	while (have)
	{
		bool		submitted = false;
		bool		have_next;
		CpBuffer   *tmp;

		if (cur->n_rows > 0)
		{
			ensure_model(s);
			s->job.src = s->src;
			s->job.buf = cur;
			s->job.model = &s->model;
			s->job.cancel = &s->worker.cancel;
			s->job.reached = 0;
			cp_worker_submit(&s->worker, sgd_job_run, &s->job);
			submitted = true;
		}
		/* load the next buffer while the helper trains on this one */
		have_next = cp_tuple_source_fill(s->src, next);
		if (submitted)
			wait_for_job(s);
		if (have_next)
			note_labels(s, next);
		tmp = cur;
		cur = next;
		next = tmp;
		have = have_next;
	}
}

/*
 * workers => N: the epoch is trained by the leader and the workers
 * (parallel.c).  Before the first epoch the leader reads its first buffer
 * alone, so that the weights have their shape.
 */
static void
train_parallel(SgdState *s)
{
	if (!cp_parallel_prefill(s->par, &s->bufs[0], !s->model_ready) && !s->model_ready)
		return;					/* no rows at all: run_epoch says so */
	ensure_model(s);
	cp_parallel_run_epoch(s->par, &s->model, &s->bufs[0], s->n_done);
}

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
static CpStats
validate(SgdState *s)
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

static void
no_rows_error(SgdState *s)
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
 * Early stopping, as scikit-learn's SGD does it: an epoch improves when its
 * loss (the validation loss when there is a validation relation) is below
 * the best so far minus tolerance.  After n_iter_no_change epochs without
 * improvement training stops, and the best epoch's weights are kept.
 */
static void
track_best(SgdState *s, const CpEpochResult *res)
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

/*
 * Divergence (issue 13 section 2, docs/preprocessing.md): after each epoch,
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

static void
check_divergence(SgdState *s, int epoch)
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
 * times it.  The epoch loss of a converged run fluctuates around its floor:
 * in the pg_regress suite (2026-11-23), 82 trainings ended above their first
 * epoch's loss, by 1.03 to 1.6 times (median 1.22), all of them good
 * models; a warning on each would teach users to ignore it.  Only no_shuffle
 * on a label-clustered table, which really does train worse than it starts,
 * ended above twice its first loss (2.5-2.7 times).
 */
#define CP_WARN_ABOVE_FIRST_FACTOR 2.0

static void
warn_if_worse(SgdState *s)
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

static void
run_epoch(SgdState *s)
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
		cp_tuple_source_find_shape(s->src, (uint64) s->seed);
		if (s->params.warm_start != NULL)
			warm_load(s);
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
	/* GraB: an epoch in a random block order trains as corgipile does */
	if (s->grab != NULL && s->par == NULL)
		s->model.grab = cp_grab_collects(s->src->strategy_state) ?
			s->grab : NULL;

	if (s->par != NULL)
		train_parallel(s);
	else if (s->params.double_buffer)
	{
		PG_TRY();
		{
			train_double_buffered(s);
		}
		PG_CATCH();
		{
			cp_worker_stop(&s->worker);
			PG_RE_THROW();
		}
		PG_END_TRY();
	}
	else
		train_single_buffered(s);

	if (!s->model_ready)
		no_rows_error(s);
	cp_model_flush(&s->model);
	if (s->params.average && s->n_done >= 1 && s->par != NULL)
		cp_model_average_add(&s->model);
	if (s->model.stats.n == 0)
		no_rows_error(s);

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
	check_divergence(s, res->epoch);
	if (s->holdout != NULL)
		cp_holdout_epoch_done(s->holdout);
	if (s->vrel != NULL || s->holdout != NULL)
	{
		CpStats		vst = validate(s);

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
	if (s->params.early_stopping)
		track_best(s, res);
	INSTR_TIME_SET_CURRENT(elapsed);
	INSTR_TIME_SUBTRACT(elapsed, start);
	res->seconds = INSTR_TIME_GET_DOUBLE(elapsed);
	s->n_done++;

	/*
	 * max_epoch_num => NULL: once the first epoch has counted the rows, as
	 * many epochs as make CP_DEFAULT_MIN_ROW_STEPS row steps, at least
	 * CP_DEFAULT_EPOCHS and at most CP_DEFAULT_MAX_EPOCHS.
	 */
	if (s->params.epochs_auto && s->n_done == 1 && res->tuples > 0)
		s->params.max_epoch_num = (int32)
			Max((int64) CP_DEFAULT_EPOCHS,
				Min((int64) CP_DEFAULT_MAX_EPOCHS,
					(CP_DEFAULT_MIN_ROW_STEPS + res->tuples - 1) / res->tuples));

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
	if (s->n_done >= s->params.max_epoch_num)
		s->finished = true;

	if (s->n_done == 1 && s->lo->n_skipped > 0)
		ereport(NOTICE,
				(errmsg("corgipile: skipped %lld rows of \"%s\" with a NULL label or NULL features",
						(long long) s->lo->n_skipped, s->lo->relname)));
	if (cp_progress_notices)
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
						   s->params.average ?
						   "; the stored model is the average of the iterates from epoch 2, scored by validation_score, not by score" : "") : 0));
	}
}

/*
 * The ordering state a warm start needs (docs/grab.md): the last walked
 * epoch's order and signs, serialised by the core and stored base64 in the
 * model's params, with the run's choices.
 */
static void
record_grab(SgdState *s, CpTrainRecord *rec)
{
	void	   *state = s->src->strategy_state;
	const uint32 *visit;
	const int8 *signs;
	uint32		n_blocks;
	Size		bytes;

	rec->grab = true;
	rec->grab_buffer_shuffle = strcmp(cp_grab_buffer_choice(state), "shuffled") == 0;
	cp_grab_choices(state, &rec->grab_unit_blocks, &rec->grab_epochs,
					&rec->grab_epochs_kept, &rec->grab_epochs_random,
					&rec->grab_statistic, &rec->grab_step);
	rec->grab_dim = s->grab ? s->grab->dim : 0;
	rec->grab_n_weights = s->model.n_weights;

	/*
	 * workers => N: parallel.c walked the blocks (PairBalance over the
	 * slots), not the strategy.  The next order is stored as a visit with
	 * every sign +1, which a warm start's reorder keeps as it is.
	 */
	if (s->par != NULL && cp_parallel_grab_next_order(s->par, &visit, &n_blocks))
	{
		int8	   *ones = palloc(Max(n_blocks, 1));

		memset(ones, 1, Max(n_blocks, 1));
		signs = ones;
	}
	else if (!cp_grab_last_walk(state, &visit, &signs, &n_blocks))
		return;
	if (cp_grab_serialized_bytes(n_blocks, &bytes) && bytes < MaxAllocSize / 2)
	{
		uint8	   *raw = palloc(bytes);
		int			len = pg_b64_enc_len((int) bytes);
		char	   *b64 = palloc(len + 1);
		int			n;

		cp_grab_serialize(visit, signs, n_blocks, raw);
		n = pg_b64_encode((const char *) raw, (int) bytes, b64, len);
		if (n < 0)
			elog(ERROR, "corgipile: could not encode the GraB state");
		b64[n] = '\0';
		rec->grab_state = b64;
	}
}

static void
save_model(SgdState *s)
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
		record_grab(s, &rec);
	rec.best_epoch = s->best_epoch > 0 ? s->best_epoch : s->n_done;
	if (!baseline(s, &rec.baseline_kind, &rec.baseline_score))
		rec.baseline_kind = NULL;
	rec.held_rows = cp_tuple_source_held_rows(s->src, &rec.held_rows_key);
	/* as in sgd_begin: the catalog's queries under a pinned search_path */
	nest = cp_pin_search_path();
	cp_models_insert(&rec);
	cp_restore_search_path(nest);
}

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

static void
polish_model(SgdState *s)
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

static TupleTableSlot *
sgd_next(ScanState *node)
{
	SgdState   *s = (SgdState *) node;
	TupleTableSlot *slot = node->ss_ScanTupleSlot;
	CpEpochResult *res;

	ExecClearTuple(slot);
	if (s->replay_pos >= s->n_done)
	{
		if (s->finished)
			return slot;
		run_epoch(s);
		/* workers => N: every epoch now, the workers kept across them */
		while (s->par != NULL && !s->finished)
			run_epoch(s);
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
				polish_model(s);
				warn_if_worse(s);
				warn_if_trivial(s);
				save_model(s);
			}
		}
	}
	res = &s->results[s->replay_pos++];
	if (s->save_pending && s->replay_pos == s->n_done)
	{
		s->save_pending = false;
		warn_if_worse(s);
		warn_if_trivial(s);
		save_model(s);
	}

	slot->tts_values[0] = s->model_name_datum;
	slot->tts_values[1] = Int32GetDatum(res->epoch);
	slot->tts_values[2] = Int64GetDatum(res->tuples);
	slot->tts_values[3] = Float8GetDatum(res->loss);
	slot->tts_values[4] = Float8GetDatum(res->score);
	slot->tts_values[5] = Float8GetDatum(res->validation_score);
	slot->tts_values[6] = Float8GetDatum(res->seconds);
	memset(slot->tts_isnull, 0, sizeof(bool) * 7);
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
		ExplainPropertyText("Epochs",
							psprintf("%d; below %d rows, enough for %d row steps (at most %d)",
									 CP_DEFAULT_EPOCHS,
									 CP_DEFAULT_MIN_ROW_STEPS / CP_DEFAULT_EPOCHS,
									 CP_DEFAULT_MIN_ROW_STEPS, CP_DEFAULT_MAX_EPOCHS), es);
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
	if (es->analyze)
		ExplainPropertyInteger("Epochs Trained", NULL, s->n_done, es);
	if (es->analyze && s->holdout != NULL && s->holdout->complete)
	{
		ExplainPropertyInteger("Held-out Rows", NULL, s->holdout->n_seen, es);
		ExplainPropertyText("Held-out Rows Kept",
							s->holdout->reread ? "no: re-read for each scoring" : "yes", es);
	}
	if (es->analyze && s->par != NULL)
		cp_parallel_explain(s->par, es);
}
