/*-------------------------------------------------------------------------
 *
 * tupleshuffle.h
 *	  The TupleShuffle operator: buffers of rows in the compact layout, in
 *	  the order the shuffle strategy feeds them to SGD.  The driver: it
 *	  knows no strategy by name (shuffle/strategy.h).
 *
 *-------------------------------------------------------------------------
 */
#ifndef CORGIPILE_TUPLESHUFFLE_H
#define CORGIPILE_TUPLESHUFFLE_H

#include "postgres.h"

#include "common/pg_prng.h"
#include "nodes/extensible.h"

#include "nodes/block_shuffle.h"
#include "core/buffer.h"
#include "nodes/holdout.h"
#include "io/layout.h"
#include "params/params.h"
#include "shuffle/strategy.h"
#include "nodes/tuple_source.h"

typedef struct TupleShuffleState
{
	CustomScanState css;
	CpTrainParams params;
	bool		scan_mode;		/* shuffled_scan(): emit row ids */
	CpLayout	layout;

	/* the strategy, chosen once from the table (shuffle/strategy.c) */
	const CpStrategy *strategy;
	void	   *strategy_state;
	CpStrategyEnv env;			/* what the strategy reads through */
	pg_prng_state rng;			/* buffer permutations: whichever thread
								 * permutes */

	BlockShuffleState *child;
	uint32		blocks_per_buffer;
	int64		next_group;		/* the group the next read takes */
	TupleDesc	read_desc;		/* the table's, cut at the layout's last
								 * column */
	TupleTableSlot *read_slot;	/* virtual slot rows are deformed into */
	bool		offsets_known;	/* read_desc's attcacheoff have been set */
	bool		offsets_fixed;	/* every column read has one */
	bool		permute;		/* permute each buffer (the strategy's
								 * entry, or its per-run choice) */
	bool		eof;			/* the epoch's blocks have all been read */
	struct CpBlockCache *cache; /* the first epoch's blocks, or NULL */
	bool		borrow_rows;	/* a group all in the cache is lent, not
								 * copied (read_group) */
	CpBuffer	block_rows;		/* one block read from the heap, on its way
								 * into the cache (read_blocks_lent) */
	MemoryContext row_cxt;		/* reset after every row */
	MemoryContext buf_cxt;		/* buffers this node and its strategy own */
	CpHoldout  *holdout;		/* validation => 'N%': rows kept out, or NULL */

	/* scan mode: the buffer being emitted */
	CpBuffer	out;
	int64		out_pos;
	ItemPointerData out_tid;	/* the ctid the scan slot points at */

	int64		buffers_filled;

	/* what SGD and parallel.c read, handed over at the start */
	CpTupleSource source;
} TupleShuffleState;

extern CustomScanMethods cp_tuple_shuffle_scan_methods;

extern CustomScan *cp_tuple_shuffle_make_plan(Const *params, bool scan_mode,
											  CustomScan *child, List *tlist,
											  List *scan_tlist, Index rti);

/*
 * What SGD and parallel.c read and call: the node's CpTupleSource
 * (nodes/tuple_source.h), embedded above.
 */

#endif							/* CORGIPILE_TUPLESHUFFLE_H */
