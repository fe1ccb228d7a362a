/*-------------------------------------------------------------------------
 *
 * parallel.c
 *	  train(workers => N): an epoch trained by the leader and N - 1
 *	  parallel workers.
 *
 * Before the first epoch the SGD operator (the leader) enters parallel
 * mode, creates a ParallelContext as nbtsort.c does, puts the block order,
 * the weights and a small control block in its dynamic shared memory and
 * launches the workers, once per training; they wait on a condition
 * variable between epochs.  A parallel training runs all its epochs in the
 * node's first call and leaves parallel mode (cp_parallel_finish) before
 * the model row is written, so parallel mode never spans two calls of the
 * node, and so never a FETCH of a cursor.  A worker runs the training
 * plan's TupleShuffle subtree (serialized from the leader's plan, as
 * execParallel.c does), with the leader's snapshot, which the parallel
 * infrastructure restores; it opens and reads the table itself and fills
 * and permutes its own buffers.
 *
 * The epoch's groups of blocks (as TupleShuffle cuts them) are the work
 * items; item i is slot i % N (N = the processes planned).  Cache affinity:
 * slot s owns, for the whole training, the blocks of its groups in the
 * first epoch's order; each later epoch visits each slot's blocks in the
 * order the epoch's drawn order puts them (a seeded, uniform reshuffle
 * within the slot's set) and deals them back into the slot's own group
 * positions (affine_order).  Slot s is trained by process s % P (P = the
 * processes actually running: the leader and the workers launched), for
 * the whole training.  So each process reads the same blocks every epoch,
 * and its block cache (block_cache.c) holds exactly the blocks it will read
 * again.  Two ways to combine what the processes learn
 * (corgipile.parallel_sync):
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
 *	 actually launched and whichever process trained which slot.
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
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/jsonb.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"
#include "utils/wait_event.h"

#include "io/block_cache.h"
#include "core/grab.h"
#include "core/merge.h"
#include "core/shuffle.h"
#include "io/layout.h"
#include "nodes/parallel.h"
#include "io/prep.h"
#include "nodes/tuple_source.h"
#include "shuffle/grab.h"

/* shm_toc keys */
#define CP_KEY_SHARED		UINT64CONST(0xC0A61E0000000001)
#define CP_KEY_ORDER		UINT64CONST(0xC0A61E0000000002)
#define CP_KEY_WEIGHTS		UINT64CONST(0xC0A61E0000000003)
#define CP_KEY_SLOT_STATS	UINT64CONST(0xC0A61E0000000004)
#define CP_KEY_PLAN			UINT64CONST(0xC0A61E0000000005)
#define CP_KEY_CLASSES		UINT64CONST(0xC0A61E0000000006)
#define CP_KEY_GRAB_SUMS	UINT64CONST(0xC0A61E0000000007)
#define CP_KEY_GRAB_COUNTS	UINT64CONST(0xC0A61E0000000008)
#define CP_KEY_PREP			UINT64CONST(0xC0A61E0000000009)
#define CP_KEY_LABELS		UINT64CONST(0xC0A61E000000000A)

/* the stream of the per-group permutation seeds (core/shuffle.c) */
#define CP_PARALLEL_STREAM	UINT64CONST(0x7061726C)

int			cp_parallel_sync = CP_SYNC_AVERAGE;
int			cp_parallel_grab = CP_GRAB_PAIR_BALANCE;

/* What one process did, for EXPLAIN ANALYZE. */
typedef struct CpParallelProc
{
	int64		buffers;
	int64		tuples;
	int64		cache_reads;	/* blocks its block cache served */
} CpParallelProc;

typedef struct CpParallelShared
{
	/* set by the leader before the launch, read-only afterwards */
	CpParallelSync sync;
	uint64		seed;
	int32		n_slots;
	int64		n_items;		/* groups of blocks an epoch has */
	CpSizing	sizing;
	int32		n_features;
	int32		n_outputs;
	int32		n_weights;
	int32		n_procs;		/* entries of procs: leader, then workers */
	bool		has_grab;		/* shuffle => 'grab': per-block sums */
	CpGrabAcc	grab_acc;		/* its sizes; the arrays are in the toc */

	/* set by the leader after the launch, before the first epoch opens */
	int32		n_running;		/* the leader and the workers launched */

	/* set by the leader when it opens an epoch, before opened */
	double		learning_rate;
	double		l2;				/* l2 => NULL: 0 in epoch 1, then 1/rows */
	int64		first_item;		/* the leader's prefilled group, or -1 */
	uint32		epoch;			/* the open epoch (its permutation seeds) */

	pg_atomic_uint32 opened;	/* epochs opened so far */
	pg_atomic_uint32 finished;	/* the training ends: workers exit */
	pg_atomic_uint32 done_in_round; /* average: items of the round done */
	pg_atomic_uint64 published; /* average: rounds of the epoch merged */
	pg_atomic_uint64 items_done;	/* hogwild: items of the epoch done */
	ConditionVariable cv;		/* a round merged, an epoch opened, done */

	/* average: written by the process that completes a round */
	CpStats		epoch_stats;

	slock_t		mutex;			/* protects what follows */
	CpStats		hogwild_stats;
	bool		seen_minus_one;
	bool		seen_zero;
	bool		seen_one;
	int64		n_skipped;
	int64		n_null_label;	/* ... of which with a NULL label */

	CpParallelProc procs[FLEXIBLE_ARRAY_MEMBER];
} CpParallelShared;

/* What a process trains with, leader or worker. */
typedef struct Participant
{
	CpParallelShared *sh;
	const uint32 *order;
	double	   *global;			/* the shared weights */
	double	   *slots;			/* average: n_slots copies */
	CpStats    *slot_stats;		/* average: per slot of the round */
	CpTupleSource *src;
	CpModel    *model;
	CpBuffer   *buf;
	CpParallelProc *me;
	int			index;			/* 0: the leader, 1 + i: worker i */
	ParallelContext *pcxt;		/* the leader's, to watch its workers */
	int64		null_label_reported;	/* the layout's n_null_label when
										 * report_layout last ran */
} Participant;

/* The leader's side, across epochs. */
struct CpParallel
{
	CpTupleSource *src;
	EState	   *estate;
	int			n_procs;		/* planned: leader + workers */
	uint64		seed;
	const char *model_name;
	char	   *plan;			/* the serialized TupleShuffle subtree */
	const uint32 *order;		/* this epoch's block order */
	int64		first_item;		/* the prefilled group */

	/* cache affinity (affine_order), from the first epoch's order */
	int32	   *owner;			/* by block: the slot that owns it */
	int64	   *slot_pos;		/* positions of slot 0's groups, slot 1's... */
	int64	   *slot_start;		/* n_slots + 1 offsets into slot_pos */
	int64	   *slot_next;		/* per slot, while an order is dealt */
	uint32	   *affine;			/* a later epoch's order */
	uint32	   *grab_next;		/* grab: the next epoch's order, or NULL */
	int64		grab_walks;		/* grab: orders computed, for EXPLAIN */
	bool		grab_independent;	/* ... by one walk per slot (ID-GraB) */

	ParallelContext *pcxt;		/* NULL before the first epoch and after
								 * cp_parallel_finish */
	Participant pt;				/* the leader's share of the work */
	CpModel		lm;				/* the leader's model, on pt's arrays */
	uint32	   *shared_order;
	CpGrabAcc	acc;			/* grab: the leader's view of the shared sums */
	int			launched;		/* -1 before the launch */
	int64	   *buffers;		/* per process, over the epochs */
	int64	   *tuples;
	int64	   *cache_reads;
};

static const struct config_enum_entry sync_options[] = {
	{"average", CP_SYNC_AVERAGE, false},
	{"hogwild", CP_SYNC_HOGWILD, false},
	{NULL, 0, false}
};

static const struct config_enum_entry grab_options[] = {
	{"pair_balance", CP_GRAB_PAIR_BALANCE, false},
	{"independent", CP_GRAB_INDEPENDENT, false},
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
	DefineCustomEnumVariable("corgipile.parallel_grab",
							 "How shuffle grab orders the blocks of a parallel training.",
							 "pair_balance: CD-GraB, one PairBalance over every worker's "
							 "blocks.  independent: one GraB walk per worker, for comparison.",
							 &cp_parallel_grab,
							 CP_GRAB_PAIR_BALANCE,
							 grab_options,
							 PGC_USERSET,
							 0,
							 NULL, NULL, NULL);
}

/*
 * The processes a training uses, the leader included.  workers => NULL:
 * as the planner sizes a parallel table scan, one worker once the table
 * reaches min_parallel_table_scan_size and one more each time it triples,
 * at most max_parallel_workers_per_gather.  Never more processes than the
 * epoch has groups of blocks to hand out.
 */
int
cp_parallel_choose(const CpTrainParams *p, Relation rel, const CpSizing *sz,
				   int64 n_groups)
{
	int			n;

	if (p->workers == 1 || !cp_shuffle_has(p->shuffle, CP_SHUFFLE_PARALLEL) ||
		!IsUnderPostmaster)
		return 1;
	/* grab's block sums need the average scheme: NULL chooses one process */
	if (cp_shuffle_has(p->shuffle, CP_SHUFFLE_FEEDBACK) && cp_parallel_sync != CP_SYNC_AVERAGE &&
		p->workers <= 0)
		return 1;
	/* a temporary table's pages are in the leader's local buffers only */
	if (RelationUsesLocalBuffers(rel))
	{
		if (p->workers > 1)
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("corgipile.train: workers > 1 cannot read temporary table \"%s\"",
							RelationGetRelationName(rel)),
					 errhint("Train with workers => 1, or copy the rows into a regular table.")));
		return 1;
	}
	/*
	 * Whether the table fits the block cache does not matter: with cache
	 * affinity each process caches its own share of the blocks, and two
	 * processes serving later epochs from their caches beat one serving all
	 * of them from its cache (docs/parallel.md, Measurements).
	 */
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
cp_parallel_create(CpTupleSource *src, Plan *plan, EState *estate, int n_procs,
				   uint64 seed, const char *model_name)
{
	CpParallel *par = palloc0(sizeof(CpParallel));
	PlannedStmt *pstmt = makeNode(PlannedStmt);

	par->src = src;
	par->estate = estate;
	par->n_procs = n_procs;
	par->seed = seed;
	par->model_name = model_name;
	par->launched = -1;
	par->buffers = palloc0(sizeof(int64) * n_procs);
	par->tuples = palloc0(sizeof(int64) * n_procs);
	par->cache_reads = palloc0(sizeof(int64) * n_procs);

	/* the TupleShuffle subtree, as execParallel.c's ExecSerializePlan */
	pstmt->commandType = CMD_SELECT;
	pstmt->canSetTag = true;
	pstmt->planTree = plan;
	pstmt->rtable = estate->es_range_table;
	pstmt->paramExecTypes = estate->es_plannedstmt->paramExecTypes;
	pstmt->stmt_location = -1;
	pstmt->stmt_len = -1;
	par->plan = nodeToString(pstmt);
	return par;
}

/* Fill buf with group g of the epoch's order. */
static void
fill_group(CpTupleSource *src, const uint32 *order, int64 g, CpBuffer *buf)
{
	cp_tuple_source_seek_group(src, order, g);
	cp_tuple_source_fill(src, buf);
}

/*
 * Cache affinity: the epoch's order, given the order drawn as one process
 * draws it.  The first epoch's order is the drawn one, and fixes for the
 * whole training which slot owns each block: slot s, the blocks of its
 * groups (s, s + N, ...).  A later epoch's order keeps every block in its
 * owner's group positions: slot s's blocks, in the order the drawn order
 * visits them, are dealt into the positions of slot s's groups in
 * sequence.  A random order restricted to a subset is a random order of
 * the subset, so corgipile's and block_only's blocks are reshuffled within
 * each slot's set, from the run's seed (deterministic); an order that keeps
 * every slot's blocks in place already (no_shuffle's; grab's, which
 * grab_next_order deals back into the slots' positions) is left as it is.
 * Groups are cut by position only, so slot s's groups hold the same number
 * of blocks every epoch.
 */
static const uint32 *
affine_order(CpParallel *par, const uint32 *drawn)
{
	int64		n_blocks = par->src->sizing->n_blocks;
	int64		n_groups = par->src->n_groups;
	int			n_slots = par->n_procs;

	if (par->owner == NULL)
	{
		MemoryContext cxt = GetMemoryChunkContext(par);
		int64		pos = 0;

		par->owner = MemoryContextAllocHuge(cxt, sizeof(int32) * Max(n_blocks, 1));
		par->slot_pos = MemoryContextAllocHuge(cxt, sizeof(int64) * Max(n_blocks, 1));
		par->affine = MemoryContextAllocHuge(cxt, sizeof(uint32) * Max(n_blocks, 1));
		par->slot_start = MemoryContextAlloc(cxt, sizeof(int64) * (n_slots + 1));
		par->slot_next = MemoryContextAlloc(cxt, sizeof(int64) * n_slots);
		memset(par->owner, 0xFF, sizeof(int32) * Max(n_blocks, 1));	/* -1 */
		for (int s = 0; s < n_slots; s++)
		{
			par->slot_start[s] = pos;
			for (int64 g = s; g < n_groups; g += n_slots)
				for (int64 b = (g * n_blocks) / n_groups; b < ((g + 1) * n_blocks) / n_groups; b++)
				{
					if (drawn[b] >= n_blocks)
						elog(ERROR, "corgipile: block %u of an epoch's order is past the table's %lld blocks",
							 drawn[b], (long long) n_blocks);
					par->owner[drawn[b]] = s;
					par->slot_pos[pos++] = b;
				}
		}
		par->slot_start[n_slots] = pos;
		Assert(pos == n_blocks);
		return drawn;
	}
	memcpy(par->slot_next, par->slot_start, sizeof(int64) * n_slots);
	for (int64 k = 0; k < n_blocks; k++)
	{
		int32		s = drawn[k] < n_blocks ? par->owner[drawn[k]] : -1;

		if (s < 0 || par->slot_next[s] >= par->slot_start[s + 1])
			elog(ERROR, "corgipile: an epoch's block order is not a permutation of the table's blocks");
		par->affine[par->slot_pos[par->slot_next[s]++]] = drawn[k];
	}
	return par->affine;
}

/*
 * Before each epoch: draw the block order.  With need_rows (the weights do
 * not have their shape yet: an array's length is read from the rows), also
 * fill the leader's first buffer before the epoch opens, passing over
 * groups whose rows were all skipped until one has rows; false when none
 * had any.  Otherwise the leader trains its slots like the workers do.
 */
bool
cp_parallel_prefill(CpParallel *par, CpBuffer *buf, bool need_rows)
{
	int64		n_groups = par->src->n_groups;

	par->order = affine_order(par, cp_tuple_source_draw_order(par->src));
	par->first_item = -1;
	if (!need_rows)
		return true;
	for (par->first_item = 0; par->first_item < n_groups; par->first_item++)
	{
		fill_group(par->src, par->order, par->first_item, buf);
		if (buf->n_rows > 0)
			return true;
	}
	return false;
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

/* a binary model's two text labels, NUL-separated, in code order */
static char *
pack_labels(const CpPrepDict *d, Size *len)
{
	StringInfoData b;

	initStringInfo(&b);
	appendBinaryStringInfo(&b, (const char *) &d->n_entries, sizeof(int32));
	for (int32 k = 0; k < d->n_entries; k++)
	{
		int32		n;
		const char *v = cp_prep_dict_value(d, k, &n);

		appendBinaryStringInfo(&b, v, n);
		appendStringInfoChar(&b, '\0');
	}
	*len = b.len;
	return b.data;
}

static CpPrepDict *
unpack_labels(const char *p)
{
	int32		n;
	char	  **names;

	memcpy(&n, p, sizeof(int32));
	p += sizeof(int32);
	names = palloc(sizeof(char *) * Max(n, 1));
	for (int32 k = 0; k < n; k++)
	{
		names[k] = pstrdup(p);
		p += strlen(p) + 1;
	}
	return cp_label_dict_from_names(names, n, "(parallel training)");
}

/*
 * The preprocessing the leader's first pass learnt, as the model row
 * stores it: a flat jsonb the workers read in place (its float8s as the
 * numerics of their shortest exact text, so the workers read back the same
 * doubles and train bit-identically whatever was launched).
 */
static char *
pack_prep(const CpLayout *lo, Size *len)
{
	Jsonb	   *jb = cp_prep_to_jsonb(lo->prep, lo->feature_names, lo->mode);

	*len = VARSIZE(jb);
	return (char *) jb;
}

static void
unpack_prep(CpLayout *lo, const char *packed, int32 n_features)
{
	cp_layout_use_prep(lo, cp_prep_from_jsonb((Jsonb *) packed, "(parallel training)",
											  n_features, lo->feature_names, lo->mode),
					   "(parallel training)");
}

/*
 * The leader, while it waits: every worker launched trains its slots in
 * every epoch and exits only once the training is over, so a worker that is
 * gone (or never started) before that would leave the epoch open for ever.
 * A worker's error or FATAL normally reaches the leader first (raised by
 * CHECK_FOR_INTERRUPTS in the sleep); its message is read here once more
 * before this catches one that died without a word.
 */
static void
check_workers_alive(Participant *pt)
{
	ParallelContext *pcxt = pt->pcxt;

	for (int i = 0; i < pcxt->nworkers_launched; i++)
	{
		pid_t		pid;

		if (pcxt->worker[i].bgwhandle != NULL &&
			GetBackgroundWorkerPid(pcxt->worker[i].bgwhandle, &pid) == BGWH_STOPPED)
		{
			HandleParallelMessages();
			ereport(ERROR,
					(errcode(ERRCODE_ADMIN_SHUTDOWN),
					 errmsg("corgipile: parallel worker %d exited before the training ended", i)));
		}
	}
}

/*
 * Sleep until done(sh, arg).  Interrupts are served by the sleep; the
 * leader also watches its workers.
 */
typedef bool (*DoneFn) (CpParallelShared *sh, uint64 arg);

static void
wait_until(Participant *pt, DoneFn done, uint64 arg)
{
	CpParallelShared *sh = pt->sh;

	if (!done(sh, arg))
	{
		ConditionVariablePrepareToSleep(&sh->cv);
		while (!done(sh, arg))
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

static bool
round_published(CpParallelShared *sh, uint64 round)
{
	return pg_atomic_read_u64(&sh->published) >= round;
}

static bool
epoch_opened_or_finished(CpParallelShared *sh, uint64 epochs)
{
	return pg_atomic_read_u32(&sh->opened) >= epochs ||
		pg_atomic_read_u32(&sh->finished) != 0;
}

static bool
epoch_complete(CpParallelShared *sh, uint64 unused)
{
	if (sh->sync == CP_SYNC_AVERAGE)
		return pg_atomic_read_u64(&sh->published) ==
			(uint64) ((sh->n_items + sh->n_slots - 1) / sh->n_slots);
	return pg_atomic_read_u64(&sh->items_done) == (uint64) sh->n_items;
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

	cp_merge_weighted(pt->slots, pt->slot_stats, in_round, sh->n_weights, pt->global);
	for (int s = 0; s < in_round; s++)
		cp_stats_merge(&sh->epoch_stats, &pt->slot_stats[s]);
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

/*
 * What the buffer's rows taught this process's layout (label convention,
 * skipped rows), added to the epoch's before the item counts as done, so
 * the leader sees all of it once the epoch is complete.
 */
static void
report_layout(Participant *pt, int64 *skipped)
{
	CpParallelShared *sh = pt->sh;
	const CpLayout *lo = pt->src->layout;

	SpinLockAcquire(&sh->mutex);
	sh->seen_minus_one |= lo->seen_minus_one;
	sh->seen_zero |= lo->seen_zero;
	sh->seen_one |= lo->seen_one;
	sh->n_skipped += lo->n_skipped - *skipped;
	sh->n_null_label += lo->n_null_label - pt->null_label_reported;
	SpinLockRelease(&sh->mutex);
	*skipped = lo->n_skipped;
	pt->null_label_reported = lo->n_null_label;
}

/* Permute the buffer with the group's own stream, train, flush the batch. */
static void
train_buffer(Participant *pt, uint32 epoch, uint64 item)
{
	CpParallelShared *sh = pt->sh;
	CpBuffer   *buf = pt->buf;
	CpCancel	cancel;
	int64		pos = 0;

	cp_tuple_source_seed_permutation(pt->src,
									 cp_derive_seed(cp_derive_seed(sh->seed, CP_PARALLEL_STREAM + epoch),
													item));
	cp_tuple_source_permute(pt->src, buf);
	/* stop at a row boundary for interrupts, then go on from that row */
	cp_cancel_init(&cancel, &InterruptPending);
	while ((pos = cp_model_train(pt->model, buf, pos, &cancel)) < buf->n_rows)
		CHECK_FOR_INTERRUPTS();
	cp_model_flush(pt->model);
}

static void
train_item(Participant *pt, uint32 epoch, uint64 item, int64 *skipped)
{
	CpParallelShared *sh = pt->sh;
	CpModel    *m = pt->model;

	memset(&m->stats, 0, sizeof(CpStats));
	if (sh->sync == CP_SYNC_AVERAGE)
	{
		int			slot = (int) (item % sh->n_slots);

		wait_until(pt, round_published, item / sh->n_slots);
		memcpy(m->w, pt->global, sizeof(double) * (Size) sh->n_weights);
		if (pt->buf->n_rows > 0)
			train_buffer(pt, epoch, item);
		memcpy(pt->slots + (Size) slot * sh->n_weights, m->w,
			   sizeof(double) * (Size) sh->n_weights);
		pt->slot_stats[slot] = m->stats;
		report_layout(pt, skipped);
		pt->me->buffers++;
		pt->me->tuples += pt->buf->n_rows;
		pt->me->cache_reads = pt->src->cache != NULL ? pt->src->cache->hits : 0;
		finish_item(pt, item);
	}
	else
	{
		if (pt->buf->n_rows > 0)
			train_buffer(pt, epoch, item);
		report_layout(pt, skipped);
		SpinLockAcquire(&sh->mutex);
		cp_stats_merge(&sh->hogwild_stats, &m->stats);
		SpinLockRelease(&sh->mutex);
		pt->me->buffers++;
		pt->me->tuples += pt->buf->n_rows;
		pt->me->cache_reads = pt->src->cache != NULL ? pt->src->cache->hits : 0;
		if (pg_atomic_add_fetch_u64(&sh->items_done, 1) == (uint64) sh->n_items)
			ConditionVariableBroadcast(&sh->cv);
	}
}

/*
 * Train this process's items of the open epoch, in item order: those of
 * the slots s with s % n_running == index, the same slots every epoch (so
 * the same blocks: cache affinity).  Items before the leader's prefilled
 * one had no rows (the leader closes them) and the prefilled one is the
 * leader's.  Under average, a process holding several slots trains its
 * items of a round before any of the next, so the rounds always complete.
 */
static void
train_own_items(Participant *pt, uint32 epoch, int64 *skipped)
{
	CpParallelShared *sh = pt->sh;

	pt->model->learning_rate = sh->learning_rate;
	pt->model->l2 = sh->l2;
	for (int64 item = Max(sh->first_item + 1, 0); item < sh->n_items; item++)
	{
		if ((item % sh->n_slots) % sh->n_running != pt->index)
			continue;
		fill_group(pt->src, pt->order, item, pt->buf);
		train_item(pt, epoch, (uint64) item, skipped);
	}
}

/*
 * Before the first parallel epoch: the segment (sized for this model and
 * table), the leader's share, the launch.
 */
static void
setup(CpParallel *par, CpModel *model)
{
	CpTupleSource *src = par->src;
	const CpSizing *sz = src->sizing;
	int64		n_items = src->n_groups;
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
	const CpLayout *lo = src->layout;
	char	   *classes = NULL;
	Size		classes_len = 0;
	char	   *prep = NULL;
	Size		prep_len = 0;
	char	   *labels = NULL;
	Size		labels_len = 0;
	Size		grab_sums_len = 0;
	Size		grab_counts_len = 0;
	ParallelContext *pcxt;
	CpParallelShared *sh;
	Participant *pt = &par->pt;
	char	   *space;

	/*
	 * What the leader's first pass found that the workers' layouts do not
	 * know: the dimension, softmax's classes, a binary model's text labels
	 * and the preprocessing.  Whatever else the first pass adds to the
	 * layout must be shipped here too.
	 */
	if (lo->classes != NULL)
		classes = pack_classes(lo->classes, &classes_len);
	if (lo->label_dict != NULL)
		labels = pack_labels(lo->label_dict, &labels_len);
	if (lo->prep != NULL)
		prep = pack_prep(lo, &prep_len);
	if (model->grab != NULL)
	{
		/* the block sums: each block is trained by one item, so one writer */
		if (sync != CP_SYNC_AVERAGE)
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("corgipile: shuffle \"grab\" with workers > 1 needs corgipile.parallel_sync = average"),
					 errhint("SET corgipile.parallel_sync = average, or train with another shuffle.")));
		grab_sums_len = mul_size(mul_size(sizeof(double), model->grab->dim),
								 Max(model->grab->n_blocks, 1));
		grab_counts_len = mul_size(sizeof(int64), Max(model->grab->n_blocks, 1));
	}

	EnterParallelMode();
	pcxt = CreateParallelContext("corgipile", "cp_parallel_worker_main",
								 par->n_procs - 1);
	par->pcxt = pcxt;
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
	if (labels != NULL)
	{
		shm_toc_estimate_chunk(&pcxt->estimator, labels_len);
		shm_toc_estimate_keys(&pcxt->estimator, 1);
	}
	if (prep != NULL)
	{
		shm_toc_estimate_chunk(&pcxt->estimator, prep_len);
		shm_toc_estimate_keys(&pcxt->estimator, 1);
	}
	if (model->grab != NULL)
	{
		shm_toc_estimate_chunk(&pcxt->estimator, grab_sums_len);
		shm_toc_estimate_chunk(&pcxt->estimator, grab_counts_len);
		shm_toc_estimate_keys(&pcxt->estimator, 2);
	}
	/* the workers read with the query's snapshot */
	PushActiveSnapshot(par->estate->es_snapshot);
	InitializeParallelDSM(pcxt);
	PopActiveSnapshot();

	sh = shm_toc_allocate(pcxt->toc, shared_len);
	memset(sh, 0, shared_len);
	sh->sync = sync;
	sh->seed = par->seed;
	sh->n_slots = n_slots;
	sh->n_items = n_items;
	sh->sizing = *sz;
	sh->n_features = model->n_features;
	sh->n_outputs = model->n_outputs;
	sh->n_weights = nw;
	sh->n_procs = par->n_procs;
	sh->n_running = 1;			/* until the launch */
	sh->first_item = -1;
	pg_atomic_init_u32(&sh->opened, 0);
	pg_atomic_init_u32(&sh->finished, 0);
	pg_atomic_init_u32(&sh->done_in_round, 0);
	pg_atomic_init_u64(&sh->published, 0);
	pg_atomic_init_u64(&sh->items_done, 0);
	ConditionVariableInit(&sh->cv);
	SpinLockInit(&sh->mutex);
	shm_toc_insert(pcxt->toc, CP_KEY_SHARED, sh);

	par->shared_order = shm_toc_allocate(pcxt->toc, order_len);
	shm_toc_insert(pcxt->toc, CP_KEY_ORDER, par->shared_order);
	pt->order = par->shared_order;

	pt->global = shm_toc_allocate(pcxt->toc, weights_len);
	pt->slots = sync == CP_SYNC_AVERAGE ? pt->global + nw : NULL;
	shm_toc_insert(pcxt->toc, CP_KEY_WEIGHTS, pt->global);

	pt->slot_stats = shm_toc_allocate(pcxt->toc, slot_stats_len);
	memset(pt->slot_stats, 0, slot_stats_len);
	shm_toc_insert(pcxt->toc, CP_KEY_SLOT_STATS, pt->slot_stats);

	space = shm_toc_allocate(pcxt->toc, plan_len);
	memcpy(space, par->plan, plan_len);
	shm_toc_insert(pcxt->toc, CP_KEY_PLAN, space);
	if (classes != NULL)
	{
		space = shm_toc_allocate(pcxt->toc, classes_len);
		memcpy(space, classes, classes_len);
		shm_toc_insert(pcxt->toc, CP_KEY_CLASSES, space);
	}
	if (labels != NULL)
	{
		space = shm_toc_allocate(pcxt->toc, labels_len);
		memcpy(space, labels, labels_len);
		shm_toc_insert(pcxt->toc, CP_KEY_LABELS, space);
	}
	if (prep != NULL)
	{
		space = shm_toc_allocate(pcxt->toc, prep_len);
		memcpy(space, prep, prep_len);
		shm_toc_insert(pcxt->toc, CP_KEY_PREP, space);
		pfree(prep);
	}

	/* the leader trains a copy of the model's struct on the shared arrays */
	par->lm = *model;
	if (sync == CP_SYNC_HOGWILD)
		par->lm.w = pt->global;
	if (model->grab != NULL)
	{
		sh->has_grab = true;
		sh->grab_acc = *model->grab;
		par->acc = *model->grab;
		par->acc.sums = shm_toc_allocate(pcxt->toc, grab_sums_len);
		par->acc.counts = shm_toc_allocate(pcxt->toc, grab_counts_len);
		shm_toc_insert(pcxt->toc, CP_KEY_GRAB_SUMS, par->acc.sums);
		shm_toc_insert(pcxt->toc, CP_KEY_GRAB_COUNTS, par->acc.counts);
		par->lm.grab = &par->acc;
	}
	pt->sh = sh;
	pt->src = src;
	pt->model = &par->lm;
	pt->me = &sh->procs[0];
	pt->index = 0;
	pt->pcxt = pcxt;
}

static void
launch(CpParallel *par)
{
	ParallelContext *pcxt = par->pcxt;

	LaunchParallelWorkers(pcxt);
	par->launched = pcxt->nworkers_launched;
	/* read by the workers once the first epoch opens (a barrier between) */
	par->pt.sh->n_running = 1 + par->launched;
	if (par->launched < par->n_procs - 1)
		ereport(NOTICE,
				(errmsg("corgipile: %d of %d parallel workers launched for model \"%s\"",
						par->launched, par->n_procs - 1, par->model_name),
				 errdetail("No more background workers were available (max_worker_processes, max_parallel_workers).  The processes that run train all %d slots: the weights do not change.",
						   par->n_procs)));
}

/*
 * shuffle => 'grab' (CD-GraB, docs/grab.md): slot s owns the blocks of its
 * groups (s, s + N, ...) in the first epoch's order, for good.  Its visiting
 * order is those groups' blocks in sequence; PairBalance over all slots (or
 * one GraB walk per slot, corgipile.parallel_grab = independent) reorders
 * each slot's blocks, and the next epoch's order deals them back into the
 * slot's own group positions.  The strategy hands it out as the next order.
 */
static void
grab_next_order(CpParallel *par)
{
	CpTupleSource *src = par->src;
	int			n_slots = par->n_procs;
	int64		n_groups = src->n_groups;
	int64		n_blocks = src->sizing->n_blocks;
	int64	   *starts = palloc(sizeof(int64) * (n_slots + 1));
	uint32	   *visit = palloc(mul_size(sizeof(uint32), Max(n_blocks, 1)));
	uint32	   *next = palloc(mul_size(sizeof(uint32), Max(n_blocks, 1)));
	uint32	   *order;
	int8	   *signs = palloc(Max(n_blocks, 1));
	double	   *work = palloc(mul_size(sizeof(double), mul_size(3, par->acc.dim)));
	int64		pos = 0;

	for (int s = 0; s < n_slots; s++)
	{
		starts[s] = pos;
		for (int64 g = s; g < n_groups; g += n_slots)
			for (int64 b = (g * n_blocks) / n_groups; b < ((g + 1) * n_blocks) / n_groups; b++)
				visit[pos++] = par->order[b];
	}
	starts[n_slots] = pos;
	par->grab_independent = (cp_parallel_grab == CP_GRAB_INDEPENDENT);
	if (par->grab_independent)
		cp_grab_walk_independent(&par->acc, n_slots, starts, visit, work, signs, next);
	else
		cp_grab_pair_balance(&par->acc, n_slots, starts, visit, work, signs, next);
	/* kept for the model row too: a warm start continues from it */
	if (par->grab_next == NULL)
		par->grab_next = MemoryContextAllocHuge(GetMemoryChunkContext(par),
												sizeof(uint32) * Max(n_blocks, 1));
	order = par->grab_next;
	pos = 0;
	for (int s = 0; s < n_slots; s++)
		for (int64 g = s; g < n_groups; g += n_slots)
			for (int64 b = (g * n_blocks) / n_groups; b < ((g + 1) * n_blocks) / n_groups; b++)
				order[b] = next[pos++];
	cp_grab_set_first_order(src->strategy_state, order);
	par->grab_walks++;
	pfree(starts);
	pfree(visit);
	pfree(next);
	pfree(signs);
	pfree(work);
}

/*
 * One parallel epoch.  The leader's first buffer holds group
 * par->first_item (cp_parallel_prefill); model has its shape, its weights
 * and this epoch's learning rate.  On return model->w holds the epoch's
 * weights and model->stats its figures, as a single process leaves them.
 * The workers are launched before the first epoch and wait between epochs;
 * cp_parallel_finish ends them.
 */
void
cp_parallel_run_epoch(CpParallel *par, CpModel *model, CpBuffer *buf, int epoch)
{
	CpTupleSource *src = par->src;
	const CpSizing *sz = src->sizing;
	Participant *pt = &par->pt;
	CpParallelShared *sh;
	CpLayout   *lo = src->layout;
	bool		first = (par->pcxt == NULL);
	int64		start_skipped = lo->n_skipped;	/* the prefill's included */
	int64		start_null_label = lo->n_null_label;
	int64		skipped = start_skipped;

	if (first)
	{
		setup(par, model);
		/* the workers wait for the first epoch; their slots need the count */
		launch(par);
	}
	sh = pt->sh;
	pt->buf = buf;

	/* open the epoch: its settings, then opened (a barrier between) */
	memcpy(par->shared_order, par->order, sizeof(uint32) * sz->n_blocks);
	memcpy(pt->global, model->w, sizeof(double) * (Size) sh->n_weights);
	sh->learning_rate = model->learning_rate;
	sh->l2 = model->l2;
	sh->first_item = par->first_item < sh->n_items ? par->first_item : -1;
	sh->epoch = (uint32) epoch;
	par->lm.learning_rate = model->learning_rate;
	par->lm.l2 = model->l2;
	memset(&sh->epoch_stats, 0, sizeof(CpStats));
	memset(&sh->hogwild_stats, 0, sizeof(CpStats));
	sh->seen_minus_one = sh->seen_zero = sh->seen_one = false;
	sh->n_skipped = 0;
	sh->n_null_label = 0;
	pt->null_label_reported = start_null_label;
	pg_atomic_write_u32(&sh->done_in_round, 0);
	pg_atomic_write_u64(&sh->published, 0);
	pg_atomic_write_u64(&sh->items_done, 0);
	if (sh->has_grab)
		cp_grab_acc_reset(&par->acc);

	/* groups the first epoch passed over while looking for rows: empty */
	for (int64 i = 0; i < par->first_item && i < sh->n_items; i++)
	{
		if (sh->sync == CP_SYNC_AVERAGE)
			finish_item(pt, (uint64) i);
		else
			pg_atomic_add_fetch_u64(&sh->items_done, 1);
	}

	pg_write_barrier();
	pg_atomic_add_fetch_u32(&sh->opened, 1);
	ConditionVariableBroadcast(&sh->cv);

	if (sh->first_item >= 0)
	{
		par->lm.learning_rate = sh->learning_rate;
		par->lm.l2 = sh->l2;
		train_item(pt, (uint32) epoch, (uint64) sh->first_item, &skipped);
	}
	train_own_items(pt, (uint32) epoch, &skipped);
	wait_until(pt, epoch_complete, 0);

	memcpy(model->w, pt->global, sizeof(double) * (Size) sh->n_weights);
	model->stats = sh->sync == CP_SYNC_AVERAGE ? sh->epoch_stats : sh->hogwild_stats;
	model->batch_fill = 0;
	if (sh->has_grab)
		grab_next_order(par);

	/*
	 * The workers' rows count in the label convention and the skipped rows
	 * (the leader's own were counted in its layout as it read them).
	 */
	SpinLockAcquire(&sh->mutex);
	lo->seen_minus_one |= sh->seen_minus_one;
	lo->seen_zero |= sh->seen_zero;
	lo->seen_one |= sh->seen_one;
	lo->n_skipped = start_skipped + sh->n_skipped;
	lo->n_null_label = start_null_label + sh->n_null_label;
	SpinLockRelease(&sh->mutex);
	if (lo->seen_zero && lo->seen_minus_one)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_EXCEPTION),
				 errmsg("labels of relation \"%s\" mix 0 and -1", lo->relname),
				 errdetail("A binary %s model takes labels -1/+1 or 0/1, not both.",
						   cp_model_kind_name(lo->model))));
}

/*
 * After the last epoch (before the model row is written: parallel mode
 * forbids writes): let the workers go, wait for them, keep their figures,
 * release the segment.  Errors skip this: the transaction's abort destroys
 * the context, which terminates the workers.
 */
void
cp_parallel_finish(CpParallel *par)
{
	CpParallelShared *sh = par->pt.sh;

	if (par->pcxt == NULL)
		return;
	pg_atomic_write_u32(&sh->finished, 1);
	ConditionVariableBroadcast(&sh->cv);
	WaitForParallelWorkersToFinish(par->pcxt);
	for (int i = 0; i < par->n_procs; i++)
	{
		par->buffers[i] = sh->procs[i].buffers;
		par->tuples[i] = sh->procs[i].tuples;
		par->cache_reads[i] = sh->procs[i].cache_reads;
	}
	DestroyParallelContext(par->pcxt);
	par->pcxt = NULL;
	ExitParallelMode();
}

/*
 * shuffle => 'grab': the order the epoch after the last one would visit
 * (PairBalance's, or the independent walks', dealt into the slots' group
 * positions), for the model row; false before the first epoch's end.
 */
bool
cp_parallel_grab_next_order(CpParallel *par, const uint32 **order, uint32 *n_blocks)
{
	if (par->grab_next == NULL)
		return false;
	*order = par->grab_next;
	*n_blocks = par->src->sizing->n_blocks;
	return true;
}

void
cp_parallel_explain(CpParallel *par, ExplainState *es)
{
	ExplainPropertyInteger("Workers Launched", NULL, Max(par->launched, 0), es);
	if (par->grab_walks > 0)
		ExplainPropertyInteger(par->grab_independent ?
							   "GraB Independent Walks" : "GraB PairBalance Walks",
							   NULL, par->grab_walks, es);
	for (int i = 0; i < par->n_procs; i++)
	{
		char	   *label = i == 0 ? pstrdup("Leader") : psprintf("Worker %d", i - 1);

		ExplainPropertyText(label,
							psprintf("buffers=%lld tuples=%lld blocks_from_cache=%lld",
									 (long long) par->buffers[i],
									 (long long) par->tuples[i],
									 (long long) par->cache_reads[i]), es);
	}
}

/*
 * A parallel worker: run the training plan's TupleShuffle subtree with the
 * leader's snapshot, cut the table as the leader did, and train the
 * groups of its slots, epoch after epoch, until the leader says the training
 * is over.
 */
void
cp_parallel_worker_main(dsm_segment *seg, shm_toc *toc)
{
	CpParallelShared *sh = shm_toc_lookup(toc, CP_KEY_SHARED, false);
	char	   *plan = shm_toc_lookup(toc, CP_KEY_PLAN, false);
	char	   *classes = shm_toc_lookup(toc, CP_KEY_CLASSES, true);
	char	   *labels = shm_toc_lookup(toc, CP_KEY_LABELS, true);
	char	   *prep = shm_toc_lookup(toc, CP_KEY_PREP, true);
	PlannedStmt *pstmt = (PlannedStmt *) stringToNode(plan);
	QueryDesc  *qd;
	CpTupleSource *src;
	Participant pt;
	CpModel		model;
	CpBuffer	buf;
	CpGrabAcc	grab;
	int64		skipped = 0;

	pgstat_report_activity(STATE_RUNNING, "corgipile parallel training");
	qd = CreateQueryDesc(pstmt, "corgipile parallel training", GetActiveSnapshot(),
						 InvalidSnapshot, None_Receiver, NULL, NULL, 0);
	ExecutorStart(qd, 0);
	src = cp_tuple_shuffle_source(qd->planstate);
	/* validation => 'N%': the same rows held out as in the leader */
	if (src->holdout != NULL)
		src->holdout->seed = sh->seed;

	cp_tuple_source_impose_sizing(src, &sh->sizing);
	src->layout->n_features = sh->n_features;
	if (classes != NULL)
		src->layout->classes = unpack_classes(classes);
	if (labels != NULL)
		src->layout->label_dict = unpack_labels(labels);
	if (prep != NULL)
		unpack_prep(src->layout, prep, sh->n_features);
	cp_tuple_source_init_buffer(src, &buf, CurrentMemoryContext);
	if (!cp_model_init(&model, src->params->model, sh->n_features, sh->n_outputs,
					   cp_layout_sparse_rows(src->layout), src->params->batch_size,
					   src->params->l2, src->params->l1, palloc0))
		elog(ERROR, "corgipile: model sizes do not fit");	/* the leader's did */
	model.reg_all = src->layout->has_onehot;	/* as the leader's (sgd_train.c) */

	pt.sh = sh;
	pt.order = shm_toc_lookup(toc, CP_KEY_ORDER, false);
	pt.global = shm_toc_lookup(toc, CP_KEY_WEIGHTS, false);
	pt.slots = sh->sync == CP_SYNC_AVERAGE ? pt.global + sh->n_weights : NULL;
	pt.slot_stats = shm_toc_lookup(toc, CP_KEY_SLOT_STATS, false);
	pt.src = src;
	pt.model = &model;
	pt.buf = &buf;
	pt.me = &sh->procs[1 + ParallelWorkerNumber];
	pt.index = 1 + ParallelWorkerNumber;
	pt.pcxt = NULL;
	pt.null_label_reported = 0;
	if (sh->sync == CP_SYNC_HOGWILD)
		model.w = pt.global;
	if (sh->has_grab)
	{
		grab = sh->grab_acc;
		grab.sums = shm_toc_lookup(toc, CP_KEY_GRAB_SUMS, false);
		grab.counts = shm_toc_lookup(toc, CP_KEY_GRAB_COUNTS, false);
		model.grab = &grab;
		if (model.gather_rows > 0)
			model.gather_blocks = palloc0(mul_size(sizeof(uint32), model.gather_rows));
	}

	/* epoch after epoch: wait for it to open (or the end), train our slots */
	for (uint64 done = 0;; done++)
	{
		wait_until(&pt, epoch_opened_or_finished, done + 1);
		if (pg_atomic_read_u32(&sh->finished) != 0)
			break;
		train_own_items(&pt, sh->epoch, &skipped);
	}

	ExecutorFinish(qd);
	ExecutorEnd(qd);
	FreeQueryDesc(qd);
}
