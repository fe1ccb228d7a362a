/*-------------------------------------------------------------------------
 *
 * sgd_state.h
 *	  The SGD operator's state, shared by the files it is split into
 *	  (sgd.c and sgd_*.c); private to them.
 *
 *-------------------------------------------------------------------------
 */
#ifndef CORGIPILE_SGD_STATE_H
#define CORGIPILE_SGD_STATE_H

#include "postgres.h"

#include "nodes/execnodes.h"
#include "utils/rel.h"

#include "core/buffer.h"
#include "core/converge.h"
#include "core/grab.h"
#include "core/linear_model.h"
#include "core/worker.h"
#include "io/layout.h"
#include "model/models.h"
#include "nodes/holdout.h"
#include "nodes/parallel.h"
#include "nodes/tuple_source.h"
#include "params/params.h"

/*
 * The rows the default stopping rule scores the averaged model on: one
 * node's sample, and the union of a distributed training's shards' samples
 * (each the share of its shard's rows).
 */
#define CP_SAMPLE_ROWS 10000

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

	/*
	 * The stopping rule (sgd_validate.c, core/converge.h): on when
	 * stop_rule, fed one objective per epoch.  An explicit tolerance keeps
	 * the best epoch's weights (best_epoch, best_w); the default rule keeps
	 * the last epoch's.
	 */
	bool		stop_rule;
	CpConvergence conv;
	bool		converged;		/* the rule stopped the training */
	int			best_epoch;		/* 0: none kept */
	double	   *best_w;

	/*
	 * The rows the default rule scores the averaged model on: the first
	 * ones epoch 1 trains on, in its (seeded) order, up to a budget.
	 */
	bool		sample_wanted;
	CpBuffer	sample;			/* at most CP_SAMPLE_ROWS rows */
	CpStats		sample_stats;	/* the stored model's on it, last checked */

	/*
	 * The default schedule on a table the polish takes: decided after
	 * epoch 1 (sgd_polish.c); then a few epochs and the polish, whose
	 * figures are the last row returned.
	 */
	bool		polish_planned;
	char	   *polish_json;	/* what cp_sgd_polish_model did, or NULL */
	bool		has_polish_row;
	CpEpochResult polish_row;
	int			replay_pos;		/* rows returned since the last rescan */

	/* workers => N (parallel.c): processes planned, and the leader's side */
	int			n_procs;
	CpParallel *par;

	/*
	 * The trivial baseline: the first epoch's training labels,
	 * counted per class (class k of softmax; -1/+1 at 0/1), and in all
	 * (linear: the mean's R2 is 0 whatever the labels).
	 */
	int64	   *label_counts;
	int			n_label_counts;
	int64		label_n;

	/* a shard's training driven by a coordinator (shard_round.c), or NULL */
	struct CpShardRound *round;

	Relation	vrel;			/* validation relation, or NULL */
	CpHoldout  *holdout;		/* validation => 'N%', or NULL */
	CpLayout	vlayout;
	CpBuffer	vbuf;
} SgdState;

/* sgd_epoch.c */
extern void cp_sgd_run_epoch(SgdState *s);
extern void cp_sgd_no_rows_error(SgdState *s);

/* sgd_train.c */
extern void cp_sgd_ensure_model(SgdState *s);
extern void cp_sgd_train_single_buffered(SgdState *s);
extern void cp_sgd_train_double_buffered(SgdState *s);
extern void cp_sgd_train_parallel(SgdState *s);

/* sgd_validate.c */
extern CpStats cp_sgd_validate(SgdState *s);
extern void cp_sgd_stop_init(SgdState *s);
extern void cp_sgd_note_sample(SgdState *s, const CpBuffer *buf);
extern CpStats cp_sgd_sample_stats(SgdState *s, const double *w, int64 max_rows);
extern void cp_sgd_stop_check(SgdState *s, const CpEpochResult *res);
extern void cp_sgd_warn_unconverged(SgdState *s);
extern char *cp_sgd_stopping_json(SgdState *s);

/* sgd_checks.c */
extern void cp_sgd_check_divergence(SgdState *s, int epoch);
extern void cp_sgd_warn_if_worse(SgdState *s);
extern bool cp_sgd_baseline(SgdState *s, const char **kind, double *score);
extern void cp_sgd_warn_if_trivial(SgdState *s);

/* sgd_warm.c */
extern void cp_sgd_warm_load(SgdState *s);
extern void cp_sgd_warm_weights(SgdState *s);

/* sgd_grab.c */
extern void cp_sgd_init_grab(SgdState *s);
extern void cp_sgd_record_grab(SgdState *s, CpTrainRecord *rec);

/* sgd_polish.c */
extern bool cp_sgd_polish_applies(SgdState *s);
extern char *cp_sgd_explain_epochs(SgdState *s);
extern void cp_sgd_polish_model(SgdState *s);

/* shard_round.c */
extern void cp_sgd_round_begin(SgdState *s);
extern bool cp_sgd_round_stats(SgdState *s);
extern void cp_sgd_round_shape(SgdState *s);
extern void cp_sgd_round_weights(SgdState *s);
extern void cp_sgd_round_epoch_begin(SgdState *s);
extern void cp_sgd_round_epoch_end(SgdState *s);

/* sgd_save.c */
extern void cp_sgd_save_model(SgdState *s);

#endif							/* CORGIPILE_SGD_STATE_H */
