/*-------------------------------------------------------------------------
 *
 * blockshuffle.c
 *	  BlockShuffle: visit a heap table block by block in a random order.
 *
 * A block is a run of contiguous heap pages (CpSizing.pages_per_block).
 * Each scan, and each rescan (one per epoch), draws a fresh permutation of
 * the blocks.  Pages are read through the buffer manager with heapgetpage(),
 * which prunes, checks visibility against the query snapshot, handles
 * serializable conflicts and uses the bulk-read ring for large tables; we
 * then walk the visible tuples it found.  While a block is read, the pages
 * of the next block are prefetched.
 *
 * The parent (TupleShuffle) reads block_seq to see where one block ends and
 * the next begins, so that a buffer always holds whole blocks.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/heapam.h"
#include "access/relscan.h"
#include "commands/explain.h"
#include "executor/executor.h"
#include "miscadmin.h"
#include "nodes/makefuncs.h"
#include "storage/bufmgr.h"
#include "utils/memutils.h"
#include "utils/rel.h"

#include "blockshuffle.h"
#include "corgipile.h"
#include "core/shuffle.h"

static Node *block_shuffle_create_state(CustomScan *cscan);
static void block_shuffle_begin(CustomScanState *node, EState *estate, int eflags);
static TupleTableSlot *block_shuffle_exec(CustomScanState *node);
static void block_shuffle_end(CustomScanState *node);
static void block_shuffle_rescan(CustomScanState *node);
static void block_shuffle_explain(CustomScanState *node, List *ancestors,
								  ExplainState *es);

CustomScanMethods cp_block_shuffle_scan_methods = {
	.CustomName = "BlockShuffle",
	.CreateCustomScanState = block_shuffle_create_state,
};

static CustomExecMethods block_shuffle_exec_methods = {
	.CustomName = "BlockShuffle",
	.BeginCustomScan = block_shuffle_begin,
	.ExecCustomScan = block_shuffle_exec,
	.EndCustomScan = block_shuffle_end,
	.ReScanCustomScan = block_shuffle_rescan,
	.ExplainCustomScan = block_shuffle_explain,
};

/*
 * A BlockShuffle scan of range table entry scanrelid.  Its scan slot is the
 * table's own row type; the parent deforms it, so there is no projection.
 */
CustomScan *
cp_block_shuffle_make_plan(Const *params, Index scanrelid)
{
	CustomScan *cscan = makeNode(CustomScan);

	cscan->scan.scanrelid = scanrelid;
	cscan->scan.plan.targetlist = NIL;
	cscan->scan.plan.qual = NIL;
	cscan->flags = 0;
	cscan->custom_private = list_make1(params);
	cscan->methods = &cp_block_shuffle_scan_methods;
	return cscan;
}

static Node *
block_shuffle_create_state(CustomScan *cscan)
{
	BlockShuffleState *bs = palloc0(sizeof(BlockShuffleState));

	NodeSetTag(bs, T_CustomScanState);
	bs->css.methods = &block_shuffle_exec_methods;
	cp_params_unpack(linitial_node(Const, cscan->custom_private), &bs->params);
	return (Node *) bs;
}

void
cp_block_shuffle_set_seed(BlockShuffleState *bs, uint64 seed)
{
	pg_prng_seed(&bs->rng, cp_derive_seed(seed, 0));
	bs->need_order = true;
}

/*
 * Let a strategy draw each epoch's block order (GraB: from the previous
 * epoch's gradients).  The generator passed to fn is this node's block
 * order stream.
 */
void
cp_block_shuffle_set_order_source(BlockShuffleState *bs, CpBlockOrderFn fn, void *arg)
{
	bs->order_fn = fn;
	bs->order_arg = arg;
	bs->need_order = true;
}

static void
block_shuffle_begin(CustomScanState *node, EState *estate, int eflags)
{
	BlockShuffleState *bs = (BlockShuffleState *) node;
	Relation	rel = node->ss.ss_currentRelation;
	BlockNumber n_pages;

	/* the parent seeds this node's generator with the run's seed */
	bs->random_order = cp_shuffle_random_blocks(bs->params.shuffle);

	if (eflags & EXEC_FLAG_EXPLAIN_ONLY)
		n_pages = RelationGetNumberOfBlocks(rel);
	else
	{
		CustomScan *cscan = (CustomScan *) node->ss.ps.plan;
		RangeTblEntry *rte = exec_rt_fetch(cscan->scan.scanrelid, estate);

		/*
		 * The plan may have been made by another role: check row-level
		 * security and SELECT for the one executing it, before any page is
		 * read.  The columns are those the plan reads (a whole-row
		 * reference for shuffled_scan).
		 */
		cp_check_access_at_start(rel, rte->selectedCols, "relation");

		/*
		 * No synchronized scans: they would start in the middle of the
		 * table.  The scan's page count is fixed here, after the snapshot,
		 * so every tuple the snapshot can see lies below it.
		 */
		bs->scan = table_beginscan_strat(rel, estate->es_snapshot, 0, NULL,
										 true, false);
		n_pages = ((HeapScanDesc) bs->scan)->rs_nblocks;
	}
	cp_resolve_sizing(&bs->params, n_pages, &bs->sizing);
	bs->order = MemoryContextAllocHuge(CurrentMemoryContext,
									   mul_size(sizeof(uint32), Max(bs->sizing.n_blocks, 1)));
	bs->own_order = bs->order;
	bs->next_block = 0;
	bs->end_block = bs->sizing.n_blocks;
	bs->block_seq = -1;
	bs->tuple.t_tableOid = RelationGetRelid(rel);

	/*
	 * The core gives a custom scan a virtual scan slot; tuples that stay on
	 * their pinned page need a buffer heap tuple slot.
	 */
	bs->slot = table_slot_create(rel, &estate->es_tupleTable);
}

/* Draw this epoch's block order: a fresh permutation, or 0..n-1. */
static void
make_order(BlockShuffleState *bs)
{
	bs->order = bs->own_order;
	bs->end_block = bs->sizing.n_blocks;
	if (bs->order_fn != NULL)
		bs->order_fn(bs->order_arg, bs->order, bs->sizing.n_blocks, &bs->rng);
	else
	{
		cp_order_identity(bs->order, bs->sizing.n_blocks);
		if (bs->random_order)
			cp_shuffle_uint32(bs->order, bs->sizing.n_blocks, &bs->rng);
	}
	bs->need_order = false;
	bs->next_block = 0;
	bs->block_seq = -1;
	bs->page_loaded = false;
	bs->epochs_started++;
}

static void
prefetch_block(BlockShuffleState *bs, int64 pos)
{
#ifdef USE_PREFETCH
	Relation	rel = bs->css.ss.ss_currentRelation;
	BlockNumber first;
	BlockNumber end;

	if (pos >= bs->end_block)
		return;
	first = bs->order[pos] * bs->sizing.pages_per_block;
	end = Min(first + bs->sizing.pages_per_block, bs->sizing.n_pages);
	for (BlockNumber p = first; p < end; p++)
		PrefetchBuffer(rel, MAIN_FORKNUM, p);
#endif
}

/* Move to the next page, starting a new block when needed. */
static bool
advance_page(BlockShuffleState *bs)
{
	if (bs->page_loaded && bs->page + 1 < bs->page_end)
		bs->page++;
	else
	{
		BlockNumber first;

		if (bs->next_block >= bs->end_block)
			return false;
		bs->block_seq = bs->next_block++;
		first = bs->order[bs->block_seq] * bs->sizing.pages_per_block;
		bs->page = first;
		bs->page_end = Min(first + bs->sizing.pages_per_block, bs->sizing.n_pages);
		if (bs->random_order)
			prefetch_block(bs, bs->next_block);
	}
	CHECK_FOR_INTERRUPTS();
	heapgetpage(bs->scan, bs->page);
	bs->page_loaded = true;
	bs->tuple_idx = 0;
	return true;
}

/*
 * Parallel training (parallel.c): draw the epoch's block order now, for
 * the leader to copy into shared memory.
 */
const uint32 *
cp_block_shuffle_draw_order(BlockShuffleState *bs)
{
	make_order(bs);
	return bs->order;
}

/*
 * Parallel training: read the blocks at positions first .. end - 1 of
 * order (the epoch's order in shared memory), then report the end of the
 * scan.  order must outlive the reads; the next make_order() goes back to
 * this node's own array.
 */
void
cp_block_shuffle_read_range(BlockShuffleState *bs, const uint32 *order,
							int64 first, int64 end)
{
	ExecClearTuple(bs->slot);
	bs->order = (uint32 *) order;
	bs->need_order = false;
	bs->next_block = first;
	bs->end_block = Min(end, (int64) bs->sizing.n_blocks);
	bs->block_seq = -1;
	bs->page_loaded = false;
}

static TupleTableSlot *
block_shuffle_exec(CustomScanState *node)
{
	BlockShuffleState *bs = (BlockShuffleState *) node;
	TupleTableSlot *slot = bs->slot;
	HeapScanDesc hscan = (HeapScanDesc) bs->scan;

	if (bs->need_order)
		make_order(bs);

	for (;;)
	{
		if (bs->page_loaded && bs->tuple_idx < hscan->rs_ntuples)
		{
			OffsetNumber off = hscan->rs_vistuples[bs->tuple_idx++];
			Page		page = BufferGetPage(hscan->rs_cbuf);
			ItemId		lpp = PageGetItemId(page, off);

			bs->tuple.t_data = (HeapTupleHeader) PageGetItem(page, lpp);
			bs->tuple.t_len = ItemIdGetLength(lpp);
			ItemPointerSet(&bs->tuple.t_self, bs->page, off);
			return ExecStoreBufferHeapTuple(&bs->tuple, slot, hscan->rs_cbuf);
		}
		if (!advance_page(bs))
			return ExecClearTuple(slot);
	}
}

static void
block_shuffle_rescan(CustomScanState *node)
{
	BlockShuffleState *bs = (BlockShuffleState *) node;

	ExecClearTuple(bs->slot);
	bs->need_order = true;
}

static void
block_shuffle_end(CustomScanState *node)
{
	BlockShuffleState *bs = (BlockShuffleState *) node;

	if (bs->slot != NULL)
		ExecClearTuple(bs->slot);
	if (bs->scan != NULL)
		table_endscan(bs->scan);
	bs->scan = NULL;
}

static void
block_shuffle_explain(CustomScanState *node, List *ancestors, ExplainState *es)
{
	BlockShuffleState *bs = (BlockShuffleState *) node;

	ExplainPropertyText("Block Order", bs->order_fn != NULL ? "set by the strategy" :
						bs->random_order ? "random" : "sequential", es);
	ExplainPropertyInteger("Pages per Block", NULL, bs->sizing.pages_per_block, es);
	ExplainPropertyInteger("Blocks", NULL, bs->sizing.n_blocks, es);
	if (es->analyze)
		ExplainPropertyInteger("Epochs Scanned", NULL, bs->epochs_started, es);
}
