/*-------------------------------------------------------------------------
 *
 * tupleshuffle.c
 *	  TupleShuffle: fill a buffer with the rows of whole blocks, then shuffle
 *	  them with a fresh Fisher-Yates permutation.
 *
 * The parent SGD operator drives this node a buffer at a time rather than a
 * tuple at a time: tuple_shuffle_fill() runs on the main thread and pulls
 * tuples from BlockShuffle, deforming each once into plain arrays;
 * tuple_shuffle_permute() is plain C and runs on whichever thread trains on
 * the buffer, which is what lets loading overlap training.  The permutation
 * generator is consumed in buffer order either way, so a seed gives the same
 * tuple order with or without double buffering.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "commands/explain.h"
#include "executor/executor.h"
#include "executor/instrument.h"
#include "executor/tuptable.h"
#include "utils/memutils.h"
#include "utils/rel.h"

#include "core/shuffle.h"
#include "tupleshuffle.h"

static Node *tuple_shuffle_create_state(CustomScan *cscan);
static void tuple_shuffle_begin(CustomScanState *node, EState *estate, int eflags);
static TupleTableSlot *tuple_shuffle_exec(CustomScanState *node);
static void tuple_shuffle_end(CustomScanState *node);
static void tuple_shuffle_rescan(CustomScanState *node);
static void tuple_shuffle_explain(CustomScanState *node, List *ancestors,
								  ExplainState *es);

CustomScanMethods tuple_shuffle_scan_methods = {
	.CustomName = "TupleShuffle",
	.CreateCustomScanState = tuple_shuffle_create_state,
};

static CustomExecMethods tuple_shuffle_exec_methods = {
	.CustomName = "TupleShuffle",
	.BeginCustomScan = tuple_shuffle_begin,
	.ExecCustomScan = tuple_shuffle_exec,
	.EndCustomScan = tuple_shuffle_end,
	.ReScanCustomScan = tuple_shuffle_rescan,
	.ExplainCustomScan = tuple_shuffle_explain,
};

CustomScan *
tuple_shuffle_make_plan(List *args, CustomScan *child)
{
	CustomScan *cscan = makeNode(CustomScan);

	cscan->scan.scanrelid = 0;
	cscan->scan.plan.targetlist = NIL;
	cscan->custom_scan_tlist = NIL;
	cscan->custom_plans = list_make1(child);
	cscan->custom_private = args;
	cscan->methods = &tuple_shuffle_scan_methods;
	return cscan;
}

static Node *
tuple_shuffle_create_state(CustomScan *cscan)
{
	TupleShuffleState *ts = palloc0(sizeof(TupleShuffleState));

	NodeSetTag(ts, T_CustomScanState);
	ts->css.methods = &tuple_shuffle_exec_methods;
	cp_params_from_consts(cscan->custom_private, &ts->params);
	return (Node *) ts;
}

/* Seed this node's tuple permutations and its child's block order. */
void
tuple_shuffle_set_seed(TupleShuffleState *ts, uint64 seed)
{
	pg_prng_seed(&ts->rng, cp_derive_seed(seed, 1));
	block_shuffle_set_seed(ts->child, seed);
}

static void
tuple_shuffle_begin(CustomScanState *node, EState *estate, int eflags)
{
	TupleShuffleState *ts = (TupleShuffleState *) node;
	CustomScan *cscan = (CustomScan *) node->ss.ps.plan;
	Plan	   *child_plan = linitial(cscan->custom_plans);
	Relation	rel;

	ts->child = (BlockShuffleState *) ExecInitNode(child_plan, estate, eflags);
	node->custom_ps = list_make1(ts->child);

	rel = ts->child->css.ss.ss_currentRelation;
	cp_layout_resolve(&ts->layout, RelationGetDescr(rel),
					  RelationGetRelationName(rel), &ts->params);
	ts->shuffle_tuples = (ts->params.shuffle == CP_SHUFFLE_CORGIPILE);
	ts->blocks_per_buffer = ts->child->sizing.blocks_per_buffer;
	if (ts->params.has_seed)
		pg_prng_seed(&ts->rng, cp_derive_seed((uint64) ts->params.seed, 1));
	else
		pg_prng_seed(&ts->rng, pg_prng_uint64(&pg_global_prng_state));

	ts->pending = MakeSingleTupleTableSlot(RelationGetDescr(rel), &TTSOpsHeapTuple);
	ts->row_cxt = AllocSetContextCreate(CurrentMemoryContext,
										"corgipile row",
										ALLOCSET_DEFAULT_SIZES);
}

/*
 * Fill buf with the rows of the next blocks_per_buffer blocks.  Returns
 * false when the epoch has no rows left.  A buffer may come back empty if
 * all of its rows were skipped for NULLs.
 */
bool
tuple_shuffle_fill(TupleShuffleState *ts, CpBuffer *buf)
{
	PlanState  *child = &ts->child->css.ss.ps;
	int64		limit;
	MemoryContext old;

	cp_buffer_reset(buf, ts->layout.n_features);
	if (ts->eof && !ts->has_pending)
		return false;

	/* the parent calls us directly, so keep EXPLAIN ANALYZE's counts here */
	if (ts->css.ss.ps.instrument)
		InstrStartNode(ts->css.ss.ps.instrument);

	limit = ts->next_limit + ts->blocks_per_buffer;
	ts->next_limit = limit;

	old = MemoryContextSwitchTo(ts->row_cxt);
	if (ts->has_pending)
	{
		cp_layout_append(&ts->layout, ts->pending, buf);
		ExecClearTuple(ts->pending);
		ts->has_pending = false;
		MemoryContextReset(ts->row_cxt);
	}
	while (!ts->eof)
	{
		TupleTableSlot *slot = ExecProcNode(child);

		if (TupIsNull(slot))
		{
			ts->eof = true;
			break;
		}
		if (ts->child->block_seq >= limit)
		{
			/* first row of the next buffer: keep it for then */
			ExecCopySlot(ts->pending, slot);
			ts->has_pending = true;
			break;
		}
		cp_layout_append(&ts->layout, slot, buf);
		MemoryContextReset(ts->row_cxt);
	}
	MemoryContextSwitchTo(old);
	ts->buffers_filled++;
	if (ts->css.ss.ps.instrument)
		InstrStopNode(ts->css.ss.ps.instrument, (double) buf->n_rows);
	return true;
}

/*
 * Set the buffer's visiting order.  Plain C on memory the main thread
 * prepared: the helper thread may run this.
 */
void
tuple_shuffle_permute(TupleShuffleState *ts, CpBuffer *buf)
{
	cp_order_identity(buf->order, buf->n_rows);
	buf->order_is_identity = !ts->shuffle_tuples;
	if (ts->shuffle_tuples)
		cp_shuffle_uint32(buf->order, buf->n_rows, &ts->rng);
}

/*
 * TupleShuffle hands whole buffers to its parent; it has no tuple-at-a-time
 * output of its own.
 */
static TupleTableSlot *
tuple_shuffle_exec(CustomScanState *node)
{
	ereport(ERROR,
			(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
			 errmsg("TupleShuffle can only run below an SGD operator")));
	return NULL;
}

static void
tuple_shuffle_rescan(CustomScanState *node)
{
	TupleShuffleState *ts = (TupleShuffleState *) node;

	ts->eof = false;
	ts->has_pending = false;
	ts->next_limit = 0;
	ExecClearTuple(ts->pending);
	ExecReScan(&ts->child->css.ss.ps);
}

static void
tuple_shuffle_end(CustomScanState *node)
{
	TupleShuffleState *ts = (TupleShuffleState *) node;

	if (ts->pending != NULL)
		ExecDropSingleTupleTableSlot(ts->pending);
	ts->pending = NULL;
	ExecEndNode(&ts->child->css.ss.ps);
}

static void
tuple_shuffle_explain(CustomScanState *node, List *ancestors, ExplainState *es)
{
	TupleShuffleState *ts = (TupleShuffleState *) node;

	ExplainPropertyText("Tuple Order", ts->shuffle_tuples ? "shuffled" : "as read", es);
	ExplainPropertyInteger("Blocks per Buffer", NULL, ts->blocks_per_buffer, es);
	ExplainPropertyText("Features", cp_layout_mode_name(ts->layout.mode), es);
	if (es->analyze)
		ExplainPropertyInteger("Buffers Filled", NULL, ts->buffers_filled, es);
}
