/*-------------------------------------------------------------------------
 *
 * blockshuffle.h
 *	  The BlockShuffle operator: a heap scan in a random order of blocks of
 *	  contiguous pages.
 *
 *-------------------------------------------------------------------------
 */
#ifndef CORGIPILE_BLOCKSHUFFLE_H
#define CORGIPILE_BLOCKSHUFFLE_H

#include "postgres.h"

#include "access/htup.h"
#include "access/tableam.h"
#include "common/pg_prng.h"
#include "nodes/extensible.h"
#include "storage/bufpage.h"

#include "io/heap_page.h"
#include "params/params.h"
#include "util/prefetch.h"

/* Writes the next epoch's visiting order of n_blocks blocks into order. */
typedef void (*CpBlockOrderFn) (void *arg, uint32 *order, uint32 n_blocks,
								pg_prng_state *rng);

typedef struct BlockShuffleState
{
	CustomScanState css;
	CpTrainParams params;
	CpSizing	sizing;
	bool		random_order;	/* else sequential (no_shuffle) */
	CpPrefetcher prefetch;		/* asks for the next block's pages */
	pg_prng_state rng;

	/*
	 * A strategy's own block order (GraB), or NULL: random_order decides.
	 */
	CpBlockOrderFn order_fn;
	void	   *order_arg;

	TableScanDesc scan;			/* NULL under EXPLAIN without ANALYZE */
	uint32	   *order;			/* block ids in visiting order */
	uint32	   *own_order;		/* this node's array; order points into
								 * shared memory during a parallel epoch */
	bool		need_order;		/* draw a fresh order before reading */
	int64		next_block;		/* position in order[] of the next block */
	int64		block_seq;		/* position of the block being read */
	BlockNumber page;			/* page being read */
	BlockNumber page_end;		/* first page after the current block */
	bool		page_loaded;
	CpHeapPage	hp;				/* the page read, once page_loaded */
	int			tuple_idx;		/* next of hp's visible tuples */
	HeapTupleData tuple;		/* the tuple the slot points at */
	TupleTableSlot *slot;		/* buffer heap tuple slot (ExecProcNode) */
	int64		epochs_started;
} BlockShuffleState;

extern CustomScanMethods cp_block_shuffle_scan_methods;

extern CustomScan *cp_block_shuffle_make_plan(Const *params, Index scanrelid);
extern void cp_block_shuffle_set_seed(BlockShuffleState *bs, uint64 seed);
extern void cp_block_shuffle_set_order_source(BlockShuffleState *bs,
											  CpBlockOrderFn fn, void *arg);

/* TupleShuffle's read path: a block at a time, a tuple at a time */
extern bool cp_block_shuffle_next_block(BlockShuffleState *bs, int64 limit,
										uint32 *block);
extern const CpHeapPage *cp_block_shuffle_next_page(BlockShuffleState *bs);
extern bool cp_block_shuffle_next_tuple(BlockShuffleState *bs, HeapTuple tup);
extern const uint32 *cp_block_shuffle_upcoming(BlockShuffleState *bs, int64 limit,
											   int64 *from, int64 *to);
extern bool cp_block_shuffle_epoch_done(BlockShuffleState *bs);
extern void cp_block_shuffle_prefetch(BlockShuffleState *bs, int64 pos);

/* Parallel training (parallel.c): the epoch's order, then ranges of it. */
extern const uint32 *cp_block_shuffle_draw_order(BlockShuffleState *bs);
extern void cp_block_shuffle_read_range(BlockShuffleState *bs, const uint32 *order,
										int64 first);

#endif							/* CORGIPILE_BLOCKSHUFFLE_H */
