/*-------------------------------------------------------------------------
 *
 * parallel.c
 *	  train(workers => N): an epoch trained by the leader and N - 1
 *	  parallel workers.
 *
 * Each epoch the SGD operator (the leader) enters parallel mode, creates a
 * ParallelContext as nbtsort.c does, puts the epoch's block order, the
 * weights and a small control block in its dynamic shared memory, launches
 * the workers, trains alongside them, waits for them and destroys the
 * context before the epoch's row is returned: parallel mode never spans
 * two calls of the node, and so never a FETCH of a cursor.  A worker runs
 * the training plan's TupleShuffle subtree (serialized from the leader's
 * plan, as execParallel.c does), with the leader's snapshot, which the
 * parallel infrastructure restores; it opens and reads the table itself
 * and fills and permutes its own buffers.
 *
 * The epoch's groups of blocks (as TupleShuffle cuts them) are the work
 * items, claimed with an atomic fetch-add on a shared cursor.  Two ways to
 * combine what the processes learn (corgipile.parallel_sync):
 *
 * average (default): the items are dealt to n_slots = N slots round-robin,
 *	 item i is slot i % N of round i / N.  Every item of a round starts from
 *	 the same weights (the previous round's result) and trains its own copy
 *	 on its buffer; the process that completes a round replaces the shared
 *	 weights by the copies' average weighted by their rows (MADlib's merge),
 *	 in slot order, and wakes the others.  What an item computes depends only
 *	 on the weights, its group and its permutation stream (seeded from the
 *	 run's seed, the epoch and the group), never on which process ran it: the
 *	 weights are bit-identical for a seed and N, however many workers were
 *	 actually launched and however the claims raced.
 *
 * hogwild: every process trains directly on the shared weights, without
 *	 locks or rounds (Niu et al. 2011).  Not deterministic.
 *
 * Errors and cancellation: a worker's error reaches the leader through the
 * parallel infrastructure's error queue and is raised there; the leader's
 * abort destroys the context, which terminates the workers and releases
 * the segment.  Waits are condition-variable sleeps and training polls
 * InterruptPending, so every process answers interrupts promptly.
 *
 * The double-buffering helper thread is not used in parallel epochs: each
 * process trains on its own core, and nothing here runs off the main
 * thread.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/parallel.h"
#include "access/xact.h"
#include "executor/executor.h"
#include "miscadmin.h"
#include "nodes/plannodes.h"
#include "optimizer/cost.h"
#include "optimizer/paths.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "port/atomics.h"
#include "storage/condition_variable.h"
#include "storage/spin.h"
#include "tcop/dest.h"
#include "utils/guc.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"
#include "utils/wait_event.h"

#include "core/shuffle.h"
#include "corgipile.h"
#include "parallel.h"
#include "shuffle/strategy.h"
#include "tupleshuffle.h"

/* shm_toc keys */
#define CP_KEY_SHARED		UINT64CONST(0xC0A61E0000000001)
#define CP_KEY_ORDER		UINT64CONST(0xC0A61E0000000002)
#define CP_KEY_WEIGHTS		UINT64CONST(0xC0A61E0000000003)
#define CP_KEY_SLOT_STATS	UINT64CONST(0xC0A61E0000000004)
#define CP_KEY_PLAN			UINT64CONST(0xC0A61E0000000005)
#define CP_KEY_CLASSES		UINT64CONST(0xC0A61E0000000006)

/* the stream of the per-group permutation seeds (core/shuffle.c) */
#define CP_PARALLEL_STREAM	UINT64CONST(0x7061726C)

int			cp_parallel_sync = CP_SYNC_AVERAGE;

/* What one process did, for EXPLAIN ANALYZE. */
typedef struct CpParallelProc
{
	int64		buffers;
	int64		tuples;
	pg_atomic_uint64 holding;	/* 1 + the item it trains, or 0 */
} CpParallelProc;

typedef struct CpParallelShared
{
	/* set by the leader before the launch, read-only afterwards */
	CpParallelSync sync;
	uint64		seed;
	int32		epoch;
	int32		n_slots;
	int64		n_items;		/* the epoch's groups of blocks */
	CpSizing	sizing;
	int32		n_features;
	int32		n_outputs;
	int32		n_weights;
	double		learning_rate;
	int32		n_procs;		/* entries of procs: leader, then workers */

	pg_atomic_uint64 next_item; /* the claim cursor */
	pg_atomic_uint32 done_in_round; /* average: items of the round done */
	pg_atomic_uint64 published; /* average: rounds merged into the weights */
	ConditionVariable cv;		/* broadcast when a round is published */

	/* average: written by the process that completes a round */
	CpStats		epoch_stats;

	slock_t		mutex;			/* protects what follows */
	CpStats		hogwild_stats;
	bool		seen_minus_one;
	bool		seen_zero;
	bool		seen_one;
	int64		n_skipped;

	CpParallelProc procs[FLEXIBLE_ARRAY_MEMBER];
} CpParallelShared;

/* The leader's side, across epochs. */
struct CpParallel
{
	TupleShuffleState *ts;
	EState	   *estate;
	int			n_procs;		/* planned: leader + workers */
	uint64		seed;
	const char *model_name;
	char	   *plan;			/* the serialized TupleShuffle subtree */
	const uint32 *order;		/* this epoch's block order (the node's) */
	int64		first_item;		/* the prefilled group */
	int			launched_min;	/* over the epochs; -1 before the first */
	int			launched_noticed;
	int64	   *buffers;		/* per process, summed over the epochs */
	int64	   *tuples;
};

/* What a process trains with, leader or worker. */
typedef struct Participant
{
	CpParallelShared *sh;
	const uint32 *order;
	double	   *global;			/* the shared weights */
	double	   *slots;			/* average: n_slots copies */
	CpStats    *slot_stats;		/* average: per slot of the round */
	TupleShuffleState *ts;
	CpModel    *model;
	CpBuffer   *buf;
	CpParallelProc *me;
	ParallelContext *pcxt;		/* the leader's, to watch its workers */
} Participant;

static const struct config_enum_entry sync_options[] = {
	{"average", CP_SYNC_AVERAGE, false},
	{"hogwild", CP_SYNC_HOGWILD, false},
	{NULL, 0, false}
};

void
cp_parallel_init(void)
{
	DefineCustomEnumVariable("corgipile.parallel_sync",
							 "How the processes of a parallel training (workers > 1) combine their work.",
							 "average: per round of buffers, the processes train copies "
							 "from the same weights and their average replaces them "
							 "(deterministic).  hogwild: lock-free updates of shared "
							 "weights (not deterministic).",
							 &cp_parallel_sync,
							 CP_SYNC_AVERAGE,
							 sync_options,
							 PGC_USERSET,
							 0,
							 NULL, NULL, NULL);
}

/*
 * The strategies whose buffers are groups of whole blocks, read in an
 * order drawn before the epoch: a group can be read by any process.
 * Strategies that read the whole table in sequence (windows, reservoirs),
 * shuffle it through files or learn an order per block (grab) cannot.
 */
bool
cp_parallel_capable(CpShuffle shuffle)
{
	const CpStrategy *st = cp_strategy_get(shuffle);

	return st->fill == cp_strategy_fill_group && st->epoch_feedback == NULL &&
		st->block_order == NULL;
}

void
cp_parallel_check_workers(const CpTrainParams *p)
{
	if (p->workers <= 1)
		return;
	if (p->workers - 1 > max_worker_processes)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("corgipile.train: workers must be at most %d (max_worker_processes + 1, the leader included), got %d",
						max_worker_processes + 1, p->workers),
				 errhint("Lower workers, or leave it NULL to let the server choose.")));
	if (!cp_parallel_capable(p->shuffle))
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("corgipile.train: shuffle \"%s\" cannot train with workers > 1",
						cp_shuffle_name(p->shuffle)),
				 errhint("Use shuffle corgipile, block_only or no_shuffle, or workers => 1.")));
}

/*
 * The processes a training uses, the leader included.  workers => NULL:
 * as the planner sizes a parallel table scan, one worker once the table
 * reaches min_parallel_table_scan_size and one more each time it triples,
 * at most max_parallel_workers_per_gather.  Never more processes than the
 * epoch has groups of blocks to hand out.
 */
int
cp_parallel_choose(const CpTrainParams *p, const CpSizing *sz, int64 n_groups)
{
	int			n;

	if (p->workers == 1 || !cp_parallel_capable(p->shuffle) || !IsUnderPostmaster)
		return 1;
	if (p->workers > 1)
		n = p->workers;
	else
	{
		int64		threshold = Max(min_parallel_table_scan_size, 1);
		int			w = 0;

		if ((int64) sz->n_pages >= threshold)
		{
			w = 1;
			while ((int64) sz->n_pages >= threshold * 3 && w < max_parallel_workers_per_gather)
			{
				w++;
				threshold *= 3;
			}
		}
		n = Min(w, max_parallel_workers_per_gather) + 1;
	}
	if (n > Max(n_groups, 1))
	{
		if (p->workers > 1)
			ereport(NOTICE,
					(errmsg("corgipile: training with %lld processes, not %d: an epoch has only %lld buffers of blocks to hand out",
							(long long) Max(n_groups, 1), n, (long long) Max(n_groups, 1)),
					 errhint("Lower buffer_size or block_size for more buffers.")));
		n = (int) Max(n_groups, 1);
	}
	return n;
}

CpParallel *
cp_parallel_create(TupleShuffleState *ts, EState *estate, int n_procs, uint64 seed,
				   const char *model_name)
{
	CpParallel *par = palloc0(sizeof(CpParallel));
	PlannedStmt *pstmt = makeNode(PlannedStmt);

	par->ts = ts;
	par->estate = estate;
	par->n_procs = n_procs;
	par->seed = seed;
	par->model_name = model_name;
	par->launched_min = -1;
	par->launched_noticed = n_procs - 1;
	par->buffers = palloc0(sizeof(int64) * n_procs);
	par->tuples = palloc0(sizeof(int64) * n_procs);

	/* the TupleShuffle subtree, as execParallel.c's ExecSerializePlan */
	pstmt->commandType = CMD_SELECT;
	pstmt->canSetTag = true;
	pstmt->planTree = ts->css.ss.ps.plan;
	pstmt->rtable = estate->es_range_table;
	pstmt->paramExecTypes = estate->es_plannedstmt->paramExecTypes;
	pstmt->stmt_location = -1;
	pstmt->stmt_len = -1;
	par->plan = nodeToString(pstmt);
	return par;
}

/* Fill buf with group g of the epoch's order. */
static void
fill_group(TupleShuffleState *ts, const uint32 *order, int64 g, CpBuffer *buf)
{
	cp_tuple_shuffle_seek_group(ts, order, g);
	cp_tuple_shuffle_fill(ts, buf);
}

/*
 * Before the epoch's segment exists: draw the block order and fill the
 * leader's first buffer, group 0.  The first epoch needs it to know the
 * weights' shape (an array's length is read from the rows), so groups
 * whose rows were all skipped are passed over until one has rows.  False
 * when no group had any.
 */
bool
cp_parallel_prefill(CpParallel *par, CpBuffer *buf)
{
	int64		n_groups = cp_tuple_shuffle_n_groups(par->ts);

	par->order = cp_block_shuffle_draw_order(par->ts->child);
	for (par->first_item = 0; par->first_item < n_groups; par->first_item++)
	{
		fill_group(par->ts, par->order, par->first_item, buf);
		if (buf->n_rows > 0)
			return true;
	}
	return false;
}

static void
stats_add(CpStats *to, const CpStats *from)
{
	to->n += from->n;
	to->loss_sum += from->loss_sum;
	to->n_correct += from->n_correct;
	to->sum_y += from->sum_y;
	to->sum_y2 += from->sum_y2;
	to->sse += from->sse;
}

/*
 * The leader, while it waits: a worker that is gone while it still held an
 * item would leave its round open for ever.  A worker's error or FATAL
 * normally reaches the leader first (and is raised by CHECK_FOR_INTERRUPTS
 * in the sleep); this catches one that died without a word.
 */
static void
check_workers_alive(Participant *pt)
{
	ParallelContext *pcxt = pt->pcxt;

	for (int i = 0; i < pcxt->nworkers_launched; i++)
	{
		pid_t		pid;

		if (pg_atomic_read_u64(&pt->sh->procs[1 + i].holding) == 0)
			continue;
		if (pcxt->worker[i].bgwhandle != NULL &&
			GetBackgroundWorkerPid(pcxt->worker[i].bgwhandle, &pid) == BGWH_STOPPED &&
			pg_atomic_read_u64(&pt->sh->procs[1 + i].holding) != 0)
			ereport(ERROR,
					(errcode(ERRCODE_ADMIN_SHUTDOWN),
					 errmsg("corgipile: parallel worker %d exited in the middle of a buffer", i)));
	}
}

/* average: wait until the shared weights hold the result of round - 1. */
static void
wait_for_round(Participant *pt, uint64 round)
{
	CpParallelShared *sh = pt->sh;

	if (pg_atomic_read_u64(&sh->published) < round)
	{
		ConditionVariablePrepareToSleep(&sh->cv);
		while (pg_atomic_read_u64(&sh->published) < round)
		{
			if (pt->pcxt == NULL)
				ConditionVariableSleep(&sh->cv, PG_WAIT_EXTENSION);
			else if (ConditionVariableTimedSleep(&sh->cv, 100, PG_WAIT_EXTENSION))
				check_workers_alive(pt);
		}
		ConditionVariableCancelSleep();
	}
	pg_read_barrier();
}

/*
 * average: merge the round's copies into the shared weights, weighted by
 * the rows each trained on, always in slot order (the same sums in the
 * same order: the same bits), then publish the round.
 */
static void
merge_round(Participant *pt, uint64 round, int in_round)
{
	CpParallelShared *sh = pt->sh;
	int			nw = sh->n_weights;
	int64		n_total = 0;

	for (int s = 0; s < in_round; s++)
		n_total += pt->slot_stats[s].n;
	if (n_total > 0)
	{
		for (int j = 0; j < nw; j++)
		{
			double		acc = 0.0;

			for (int s = 0; s < in_round; s++)
				if (pt->slot_stats[s].n > 0)
					acc += (double) pt->slot_stats[s].n * pt->slots[(Size) s * nw + j];
			pt->global[j] = acc / (double) n_total;
		}
	}
	for (int s = 0; s < in_round; s++)
		stats_add(&sh->epoch_stats, &pt->slot_stats[s]);
	pg_atomic_write_u32(&sh->done_in_round, 0);
	pg_write_barrier();
	pg_atomic_write_u64(&sh->published, round + 1);
	ConditionVariableBroadcast(&sh->cv);
}

/* average: item done (its slot written); the last of its round merges. */
static void
finish_item(Participant *pt, uint64 item)
{
	CpParallelShared *sh = pt->sh;
	uint64		round = item / sh->n_slots;
	int			in_round = (int) Min((int64) sh->n_slots,
									 sh->n_items - (int64) (round * sh->n_slots));

	if (pg_atomic_add_fetch_u32(&sh->done_in_round, 1) == (uint32) in_round)
		merge_round(pt, round, in_round);
}

/* Permute the buffer with the group's own stream, train, flush the batch. */
static void
train_buffer(Participant *pt, uint64 item)
{
	CpParallelShared *sh = pt->sh;
	CpBuffer   *buf = pt->buf;
	CpCancel	cancel;
	int64		pos = 0;

	cp_tuple_shuffle_seed_permutation(pt->ts,
									  cp_derive_seed(cp_derive_seed(sh->seed, CP_PARALLEL_STREAM + sh->epoch),
													 item));
	cp_tuple_shuffle_permute(pt->ts, buf);
	/* stop at a row boundary for interrupts, then go on from that row */
	cp_cancel_init(&cancel, &InterruptPending);
	while ((pos = cp_model_train(pt->model, buf, pos, &cancel)) < buf->n_rows)
		CHECK_FOR_INTERRUPTS();
	cp_model_flush(pt->model);
}

static void
train_item(Participant *pt, uint64 item)
{
	CpParallelShared *sh = pt->sh;

	pg_atomic_write_u64(&pt->me->holding, item + 1);

	if (sh->sync == CP_SYNC_AVERAGE)
	{
		int			slot = (int) (item % sh->n_slots);
		CpModel    *m = pt->model;

		wait_for_round(pt, item / sh->n_slots);
		memcpy(m->w, pt->global, sizeof(double) * (Size) sh->n_weights);
		memset(&m->stats, 0, sizeof(CpStats));
		if (pt->buf->n_rows > 0)
			train_buffer(pt, item);
		memcpy(pt->slots + (Size) slot * sh->n_weights, m->w,
			   sizeof(double) * (Size) sh->n_weights);
		pt->slot_stats[slot] = m->stats;
		finish_item(pt, item);
	}
	else if (pt->buf->n_rows > 0)
		train_buffer(pt, item);
	pt->me->buffers++;
	pt->me->tuples += pt->buf->n_rows;
	pg_atomic_write_u64(&pt->me->holding, 0);
}

/* Claim groups until the epoch has none left; first is already filled. */
static void
participate(Participant *pt, int64 first)
{
	CpParallelShared *sh = pt->sh;

	if (first >= 0)
		train_item(pt, (uint64) first);
	for (;;)
	{
		uint64		item = pg_atomic_fetch_add_u64(&sh->next_item, 1);

		if (item >= (uint64) sh->n_items)
			break;
		fill_group(pt->ts, pt->order, (int64) item, pt->buf);
		train_item(pt, item);
	}
	if (sh->sync == CP_SYNC_HOGWILD)
	{
		SpinLockAcquire(&sh->mutex);
		stats_add(&sh->hogwild_stats, &pt->model->stats);
		SpinLockRelease(&sh->mutex);
	}
}

/* What a worker's rows taught its layout, for the leader's. */
static void
report_layout(CpParallelShared *sh, const CpLayout *lo)
{
	SpinLockAcquire(&sh->mutex);
	sh->seen_minus_one |= lo->seen_minus_one;
	sh->seen_zero |= lo->seen_zero;
	sh->seen_one |= lo->seen_one;
	sh->n_skipped += lo->n_skipped;
	SpinLockRelease(&sh->mutex);
}

/* softmax: the class names, NUL-separated, after the type and the count */
static char *
pack_classes(const CpClassMap *cm, Size *len)
{
	StringInfoData b;

	initStringInfo(&b);
	appendBinaryStringInfo(&b, (const char *) &cm->type, sizeof(Oid));
	appendBinaryStringInfo(&b, (const char *) &cm->n_classes, sizeof(int));
	for (int k = 0; k < cm->n_classes; k++)
		appendBinaryStringInfo(&b, cm->names[k], strlen(cm->names[k]) + 1);
	*len = b.len;
	return b.data;
}

static CpClassMap *
unpack_classes(const char *p)
{
	Oid			type;
	int			n;
	char	  **names;

	memcpy(&type, p, sizeof(Oid));
	p += sizeof(Oid);
	memcpy(&n, p, sizeof(int));
	p += sizeof(int);
	names = palloc(sizeof(char *) * Max(n, 1));
	for (int k = 0; k < n; k++)
	{
		names[k] = pstrdup(p);
		p += strlen(p) + 1;
	}
	return cp_class_map_from_names(type, names, n);
}

/*
 * One parallel epoch.  The leader's first buffer holds group
 * par->first_item (cp_parallel_prefill); model has its shape, its weights
 * and this epoch's learning rate.  On return model->w holds the epoch's
 * weights and model->stats its figures, as a single process leaves them.
 */
void
cp_parallel_run_epoch(CpParallel *par, CpModel *model, CpBuffer *buf, int epoch)
{
	TupleShuffleState *ts = par->ts;
	const CpSizing *sz = cp_tuple_shuffle_sizing(ts);
	int64		n_items = cp_tuple_shuffle_n_groups(ts);
	int			n_slots = par->n_procs;
	CpParallelSync sync = (CpParallelSync) cp_parallel_sync;
	int			nw = model->n_weights;
	Size		shared_len = add_size(offsetof(CpParallelShared, procs),
									  mul_size(sizeof(CpParallelProc), par->n_procs));
	Size		order_len = mul_size(sizeof(uint32), Max(sz->n_blocks, 1));
	Size		weights_len = mul_size(mul_size(sizeof(double), nw),
									   sync == CP_SYNC_AVERAGE ? n_slots + 1 : 1);
	Size		slot_stats_len = mul_size(sizeof(CpStats), n_slots);
	Size		plan_len = strlen(par->plan) + 1;
	char	   *classes = NULL;
	Size		classes_len = 0;
	ParallelContext *pcxt;
	CpParallelShared *sh;
	Participant pt;
	CpModel		lm;
	char	   *space;
	int			launched;
	CpLayout   *lo = &ts->layout;

	/*
	 * What the leader's first pass found that the workers' layouts do not
	 * know: the dimension and softmax's classes.  Whatever else the first
	 * pass adds to the layout must be shipped here too.
	 */
	if (lo->classes != NULL)
		classes = pack_classes(lo->classes, &classes_len);

	EnterParallelMode();
	pcxt = CreateParallelContext("corgipile", "cp_parallel_worker_main",
								 par->n_procs - 1);
	shm_toc_estimate_chunk(&pcxt->estimator, shared_len);
	shm_toc_estimate_chunk(&pcxt->estimator, order_len);
	shm_toc_estimate_chunk(&pcxt->estimator, weights_len);
	shm_toc_estimate_chunk(&pcxt->estimator, slot_stats_len);
	shm_toc_estimate_chunk(&pcxt->estimator, plan_len);
	shm_toc_estimate_keys(&pcxt->estimator, 5);
	if (classes != NULL)
	{
		shm_toc_estimate_chunk(&pcxt->estimator, classes_len);
		shm_toc_estimate_keys(&pcxt->estimator, 1);
	}
	/* the workers read with the query's snapshot */
	PushActiveSnapshot(par->estate->es_snapshot);
	InitializeParallelDSM(pcxt);
	PopActiveSnapshot();

	sh = shm_toc_allocate(pcxt->toc, shared_len);
	memset(sh, 0, shared_len);
	sh->sync = sync;
	sh->seed = par->seed;
	sh->epoch = epoch;
	sh->n_slots = n_slots;
	sh->n_items = n_items;
	sh->sizing = *sz;
	sh->n_features = model->n_features;
	sh->n_outputs = model->n_outputs;
	sh->n_weights = nw;
	sh->learning_rate = model->learning_rate;
	sh->n_procs = par->n_procs;
	pg_atomic_init_u64(&sh->next_item, (uint64) par->first_item + 1);
	pg_atomic_init_u32(&sh->done_in_round, 0);
	pg_atomic_init_u64(&sh->published, 0);
	ConditionVariableInit(&sh->cv);
	SpinLockInit(&sh->mutex);
	for (int i = 0; i < par->n_procs; i++)
		pg_atomic_init_u64(&sh->procs[i].holding, 0);
	shm_toc_insert(pcxt->toc, CP_KEY_SHARED, sh);

	space = shm_toc_allocate(pcxt->toc, order_len);
	memcpy(space, par->order, sizeof(uint32) * sz->n_blocks);
	shm_toc_insert(pcxt->toc, CP_KEY_ORDER, space);
	pt.order = (const uint32 *) space;

	pt.global = shm_toc_allocate(pcxt->toc, weights_len);
	memcpy(pt.global, model->w, sizeof(double) * (Size) nw);
	pt.slots = sync == CP_SYNC_AVERAGE ? pt.global + nw : NULL;
	shm_toc_insert(pcxt->toc, CP_KEY_WEIGHTS, pt.global);

	pt.slot_stats = shm_toc_allocate(pcxt->toc, slot_stats_len);
	memset(pt.slot_stats, 0, slot_stats_len);
	shm_toc_insert(pcxt->toc, CP_KEY_SLOT_STATS, pt.slot_stats);

	space = shm_toc_allocate(pcxt->toc, plan_len);
	memcpy(space, par->plan, plan_len);
	shm_toc_insert(pcxt->toc, CP_KEY_PLAN, space);
	if (classes != NULL)
	{
		space = shm_toc_allocate(pcxt->toc, classes_len);
		memcpy(space, classes, classes_len);
		shm_toc_insert(pcxt->toc, CP_KEY_CLASSES, space);
	}

	/* the leader trains a copy of the model's struct on the shared arrays */
	lm = *model;
	if (sync == CP_SYNC_HOGWILD)
		lm.w = pt.global;
	memset(&lm.stats, 0, sizeof(CpStats));
	pt.sh = sh;
	pt.ts = ts;
	pt.model = &lm;
	pt.buf = buf;
	pt.me = &sh->procs[0];
	pt.pcxt = pcxt;

	/* groups the first epoch passed over while looking for rows: empty */
	if (sync == CP_SYNC_AVERAGE)
		for (int64 i = 0; i < par->first_item; i++)
			finish_item(&pt, (uint64) i);

	LaunchParallelWorkers(pcxt);
	launched = pcxt->nworkers_launched;
	if (launched < par->n_procs - 1 && launched != par->launched_noticed)
	{
		ereport(NOTICE,
				(errmsg("corgipile: %d of %d parallel workers launched for model \"%s\"",
						launched, par->n_procs - 1, par->model_name),
				 errdetail("No more background workers were available (max_worker_processes, max_parallel_workers).  The processes that run train all %d slots: the weights do not change.",
						   n_slots)));
		par->launched_noticed = launched;
	}
	if (par->launched_min < 0 || launched < par->launched_min)
		par->launched_min = launched;

	participate(&pt, par->first_item < n_items ? par->first_item : -1);
	WaitForParallelWorkersToFinish(pcxt);

	if (sync == CP_SYNC_AVERAGE &&
		pg_atomic_read_u64(&sh->published) != (uint64) ((n_items + n_slots - 1) / n_slots))
		elog(ERROR, "corgipile: a parallel epoch ended with rounds left unmerged");

	memcpy(model->w, pt.global, sizeof(double) * (Size) nw);
	model->stats = sync == CP_SYNC_AVERAGE ? sh->epoch_stats : sh->hogwild_stats;
	model->batch_fill = 0;

	/* the workers' rows count in the label convention and the skipped rows */
	lo->seen_minus_one |= sh->seen_minus_one;
	lo->seen_zero |= sh->seen_zero;
	lo->seen_one |= sh->seen_one;
	lo->n_skipped += sh->n_skipped;
	if (lo->seen_zero && lo->seen_minus_one)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_EXCEPTION),
				 errmsg("labels of relation \"%s\" mix 0 and -1", lo->relname),
				 errdetail("A binary %s model takes labels -1/+1 or 0/1, not both.",
						   cp_model_kind_name(lo->model))));

	for (int i = 0; i < par->n_procs; i++)
	{
		par->buffers[i] += sh->procs[i].buffers;
		par->tuples[i] += sh->procs[i].tuples;
	}

	DestroyParallelContext(pcxt);
	ExitParallelMode();
}

void
cp_parallel_explain(CpParallel *par, ExplainState *es)
{
	ExplainPropertyInteger("Workers Launched", NULL, Max(par->launched_min, 0), es);
	for (int i = 0; i < par->n_procs; i++)
	{
		char	   *label = i == 0 ? pstrdup("Leader") : psprintf("Worker %d", i - 1);

		ExplainPropertyText(label,
							psprintf("buffers=%lld tuples=%lld",
									 (long long) par->buffers[i],
									 (long long) par->tuples[i]), es);
	}
}

/*
 * A parallel worker: run the training plan's TupleShuffle subtree with the
 * leader's snapshot, cut the table as the leader did, and train on the
 * groups it claims.
 */
void
cp_parallel_worker_main(dsm_segment *seg, shm_toc *toc)
{
	CpParallelShared *sh = shm_toc_lookup(toc, CP_KEY_SHARED, false);
	char	   *plan = shm_toc_lookup(toc, CP_KEY_PLAN, false);
	char	   *classes = shm_toc_lookup(toc, CP_KEY_CLASSES, true);
	PlannedStmt *pstmt = (PlannedStmt *) stringToNode(plan);
	QueryDesc  *qd;
	TupleShuffleState *ts;
	Participant pt;
	CpModel		model;
	CpBuffer	buf;

	pgstat_report_activity(STATE_RUNNING, "corgipile parallel training");
	qd = CreateQueryDesc(pstmt, "corgipile parallel training", GetActiveSnapshot(),
						 InvalidSnapshot, None_Receiver, NULL, NULL, 0);
	ExecutorStart(qd, 0);
	ts = (TupleShuffleState *) qd->planstate;

	cp_tuple_shuffle_impose_sizing(ts, &sh->sizing);
	ts->layout.n_features = sh->n_features;
	if (classes != NULL)
		ts->layout.classes = unpack_classes(classes);
	cp_tuple_shuffle_init_buffer(ts, &buf, CurrentMemoryContext);
	if (!cp_model_init(&model, ts->params.model, sh->n_features, sh->n_outputs,
					   ts->layout.mode == CP_FEATURES_SPARSE, ts->params.batch_size,
					   ts->params.l2, ts->params.l1, palloc0))
		elog(ERROR, "corgipile: model sizes do not fit");	/* the leader's did */
	model.learning_rate = sh->learning_rate;

	pt.sh = sh;
	pt.order = shm_toc_lookup(toc, CP_KEY_ORDER, false);
	pt.global = shm_toc_lookup(toc, CP_KEY_WEIGHTS, false);
	pt.slots = sh->sync == CP_SYNC_AVERAGE ? pt.global + sh->n_weights : NULL;
	pt.slot_stats = shm_toc_lookup(toc, CP_KEY_SLOT_STATS, false);
	pt.ts = ts;
	pt.model = &model;
	pt.buf = &buf;
	pt.me = &sh->procs[1 + ParallelWorkerNumber];
	pt.pcxt = NULL;
	if (sh->sync == CP_SYNC_HOGWILD)
		model.w = pt.global;

	participate(&pt, -1);
	report_layout(sh, &ts->layout);

	ExecutorFinish(qd);
	ExecutorEnd(qd);
	FreeQueryDesc(qd);
}
