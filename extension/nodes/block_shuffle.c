/*-------------------------------------------------------------------------
 *
 * block_shuffle.c
 *	  BlockShuffle: visit a heap table block by block in a random order.
 *
 * A block is a run of contiguous heap pages (CpSizing.pages_per_block).
 * Each scan, and each rescan (one per epoch), draws a fresh permutation of
 * the blocks.  Pages are read through the buffer manager as a sequential
 * scan reads them (io/heap_page.h: heapgetpage prunes, checks visibility
 * against the query snapshot, handles serializable conflicts and uses the
 * bulk-read ring for large tables); we then walk the visible tuples it
 * found.  While a block is read, the pages
 * of the next block are prefetched.
 *
 * The parent (TupleShuffle) reads block_seq to see where one block ends and
 * the next begins, so that a buffer always holds whole blocks.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "commands/explain.h"
#include "executor/executor.h"
#include "miscadmin.h"
#include "nodes/makefuncs.h"
#include "storage/bufmgr.h"
#include "utils/memutils.h"
#include "utils/rel.h"

#include "nodes/block_shuffle.h"
#include "util/relation.h"
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
	bs->random_order = cp_shuffle_has(bs->params.shuffle, CP_SHUFFLE_RANDOM_BLOCKS);

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
		bs->scan = cp_heap_begin(rel, estate->es_snapshot, &n_pages);
	}
	cp_resolve_sizing(&bs->params, n_pages, &bs->sizing);

	/*
	 * Blocks visited at random defeat the kernel's read-ahead, so the next
	 * block's pages are asked for while the current one is converted
	 * (util/prefetch.c); a sequential order leaves it to the kernel.
	 */
	cp_prefetch_init(&bs->prefetch, rel);
	if (!bs->random_order)
		bs->prefetch.enabled = false;
	bs->order = MemoryContextAllocHuge(CurrentMemoryContext,
									   mul_size(sizeof(uint32), Max(bs->sizing.n_blocks, 1)));
	bs->own_order = bs->order;
	bs->next_block = 0;
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

/*
 * Start the epoch's next block, if it is below limit (a position in the
 * epoch's order): its pages are then read by cp_block_shuffle_next_tuple.
 * False when the epoch's blocks up to limit have all been started.  The
 * block's number is *block.  Nothing is read here, so a caller that has
 * the block's rows already (a cache) just moves on to the next one.
 */
bool
cp_block_shuffle_next_block(BlockShuffleState *bs, int64 limit, uint32 *block)
{
	BlockNumber first;

	if (bs->need_order)
		make_order(bs);
	if (bs->next_block >= Min(limit, (int64) bs->sizing.n_blocks))
		return false;
	bs->block_seq = bs->next_block++;
	*block = bs->order[bs->block_seq];
	first = *block * bs->sizing.pages_per_block;
	bs->page = first;
	bs->page_end = Min(first + bs->sizing.pages_per_block, bs->sizing.n_pages);
	bs->page_loaded = false;
	return true;
}

/*
 * The blocks cp_block_shuffle_next_block will start before limit:
 * order[*from .. *to).  Draws the epoch's order if it is due, as the next
 * cp_block_shuffle_next_block would have done: no other draw comes in
 * between, so the order is the same.
 */
const uint32 *
cp_block_shuffle_upcoming(BlockShuffleState *bs, int64 limit, int64 *from, int64 *to)
{
	if (bs->need_order)
		make_order(bs);
	*from = bs->next_block;
	*to = Max(*from, Min(limit, (int64) bs->sizing.n_blocks));
	return bs->order;
}

/* Whether every block of the epoch has been started. */
bool
cp_block_shuffle_epoch_done(BlockShuffleState *bs)
{
	return !bs->need_order && bs->next_block >= bs->sizing.n_blocks;
}

/*
 * Ask the OS for the pages of the block at position pos of the order
 * (reading blocks at random, read-ahead cannot guess them).  The caller
 * prefetches the block it will read after the current one.
 */
void
cp_block_shuffle_prefetch(BlockShuffleState *bs, int64 pos)
{
	BlockNumber first;

	if (!bs->prefetch.enabled || pos >= bs->sizing.n_blocks)
		return;
	first = bs->order[pos] * bs->sizing.pages_per_block;
	cp_prefetch_range(&bs->prefetch,
					  first, Min(first + bs->sizing.pages_per_block, bs->sizing.n_pages));
}

/*
 * Read the current block's next page (its first, after
 * cp_block_shuffle_next_block) with cp_heap_read_page(), which pins it and
 * lists its visible tuples; false at the block's end.
 */
static bool
load_next_page(BlockShuffleState *bs)
{
	if (bs->page_loaded)
	{
		if (bs->page + 1 >= bs->page_end)
			return false;
		bs->page++;
	}
	else if (bs->page >= bs->page_end)
		return false;			/* an empty block: past the table's last page */
	cp_heap_read_page(bs->scan, bs->page, &bs->hp);
	bs->page_loaded = true;
	return true;
}

/*
 * The next visible tuple of the current block, or false at its end.  tup
 * points into the scan's current page, which stays pinned until the next
 * call: no slot and no pin per tuple.  The pages are read as a sequential
 * scan reads them (io/heap_page.h: pruning, visibility against the scan's
 * snapshot, serializable reads).
 */
bool
cp_block_shuffle_next_tuple(BlockShuffleState *bs, HeapTuple tup)
{
	while (!bs->page_loaded || bs->tuple_idx >= bs->hp.n)
	{
		if (!load_next_page(bs))
			return false;
		bs->tuple_idx = 0;
	}
	cp_heap_page_tuple(&bs->hp, bs->tuple_idx++, tup);
	return true;
}

/*
 * The next page of the current block, read as cp_block_shuffle_next_tuple
 * reads it (cp_heap_read_page), with its visible tuples all at once, valid
 * until the next call; NULL at the block's end.  For a caller that walks a
 * page's tuples itself (TupleShuffle, with cp_heap_page_tuple): no call
 * per tuple.  The tuples handed over are consumed:
 * cp_block_shuffle_next_tuple moves on to the next page.
 */
const CpHeapPage *
cp_block_shuffle_next_page(BlockShuffleState *bs)
{
	if (!load_next_page(bs))
		return NULL;
	bs->tuple_idx = bs->hp.n;
	return &bs->hp;
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
 * Parallel training: the next cp_block_shuffle_next_block starts at
 * position first of order (the epoch's order in shared memory); the
 * caller's limit ends the range.  order must outlive the reads; the next
 * make_order() goes back to this node's own array.
 */
void
cp_block_shuffle_read_range(BlockShuffleState *bs, const uint32 *order, int64 first)
{
	bs->order = (uint32 *) order;
	bs->need_order = false;
	bs->next_block = first;
	bs->block_seq = -1;
	bs->page_loaded = false;
}

/* The executor's interface, for completeness: TupleShuffle reads above. */
static TupleTableSlot *
block_shuffle_exec(CustomScanState *node)
{
	BlockShuffleState *bs = (BlockShuffleState *) node;
	uint32		block;

	for (;;)
	{
		if (bs->block_seq >= 0 && !bs->need_order &&
			cp_block_shuffle_next_tuple(bs, &bs->tuple))
			return ExecStoreBufferHeapTuple(&bs->tuple, bs->slot, bs->hp.buffer);
		if (!cp_block_shuffle_next_block(bs, PG_INT64_MAX, &block))
			return ExecClearTuple(bs->slot);
		cp_block_shuffle_prefetch(bs, bs->next_block);
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
	{
		cp_prefetch_end(&bs->prefetch);
		table_endscan(bs->scan);
	}
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
	{
		ExplainPropertyInteger("Epochs Scanned", NULL, bs->epochs_started, es);
		if (bs->random_order)
			ExplainPropertyInteger("Prefetched Blocks", NULL, bs->prefetch.runs, es);
	}
}
