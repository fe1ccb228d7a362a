/*-------------------------------------------------------------------------
 *
 * tupleshuffle.h
 *	  The TupleShuffle operator: buffers of whole blocks, deformed into the
 *	  compact layout and shuffled in memory.
 *
 *-------------------------------------------------------------------------
 */
#ifndef CORGIPILE_TUPLESHUFFLE_H
#define CORGIPILE_TUPLESHUFFLE_H

#include "postgres.h"

#include "common/pg_prng.h"
#include "nodes/extensible.h"

#include "blockshuffle.h"
#include "core/buffer.h"
#include "layout.h"
#include "params.h"

typedef struct TupleShuffleState
{
	CustomScanState css;
	CpTrainParams params;
	CpLayout	layout;
	bool		shuffle_tuples;	/* corgipile: permute each buffer */
	pg_prng_state rng;			/* used by whichever thread permutes */

	BlockShuffleState *child;
	uint32		blocks_per_buffer;
	int64		next_limit;		/* first block_seq of the next buffer */
	TupleTableSlot *pending;	/* first tuple of the next buffer */
	bool		has_pending;
	bool		eof;
	MemoryContext row_cxt;		/* reset after every row */

	int64		buffers_filled;
} TupleShuffleState;

extern CustomScanMethods tuple_shuffle_scan_methods;

extern CustomScan *tuple_shuffle_make_plan(List *args, CustomScan *child);
extern void tuple_shuffle_set_seed(TupleShuffleState *ts, uint64 seed);
extern bool tuple_shuffle_fill(TupleShuffleState *ts, CpBuffer *buf);
extern void tuple_shuffle_permute(TupleShuffleState *ts, CpBuffer *buf);

#endif							/* CORGIPILE_TUPLESHUFFLE_H */
