/*-------------------------------------------------------------------------
 *
 * tupleshuffle.h
 *	  The TupleShuffle operator: buffers of rows in the compact layout, in
 *	  the order the shuffle strategy feeds them to SGD.
 *
 *-------------------------------------------------------------------------
 */
#ifndef CORGIPILE_TUPLESHUFFLE_H
#define CORGIPILE_TUPLESHUFFLE_H

#include "postgres.h"

#include "common/pg_prng.h"
#include "nodes/extensible.h"
#include "storage/buffile.h"

#include "blockshuffle.h"
#include "core/buffer.h"
#include "layout.h"
#include "params.h"

/*
 * The window of sliding_window and the reservoir of mrs: a fixed number of
 * slots, each naming a row of an append-only store.  Replacing a slot
 * appends the new row and leaves the old one dead; the store is compacted
 * when dead rows outnumber live ones, which also works for sparse rows of
 * varying length.
 */
typedef struct CpSlotStore
{
	CpBuffer	store;
	int64	   *slot_row;		/* slot -> row of store */
	int64		slot_cap;		/* entries allocated in slot_row */
	int64		n_slots;		/* slots in use */
	int64		capacity;		/* slots; 0 until the first blocks set it */
	int64		seen;			/* rows scanned this epoch (mrs) */
} CpSlotStore;

/* The piles of the two-pass shuffle (shuffle_once, epoch_shuffle). */
typedef struct CpPiles
{
	int			n_piles;
	BufFile   **files;			/* pass 1 output, one per pile */
	int			next_pile;		/* pass 2: the next pile to load */
	BufFile    *stream;			/* shuffle_once: the whole shuffled copy */
	bool		stream_done;	/* shuffle_once: the copy is complete */
	int64		rows;			/* rows written in pass 1 */
	pg_prng_state rng;			/* pile choices */
} CpPiles;

typedef struct TupleShuffleState
{
	CustomScanState css;
	CpTrainParams params;
	CpShuffle	shuffle;
	bool		scan_mode;		/* shuffled_scan(): emit row ids */
	CpLayout	layout;
	bool		shuffle_tuples; /* permute each buffer (corgipile, and the
								 * piles of epoch_shuffle) */
	pg_prng_state rng;			/* permutations: whichever thread permutes */
	pg_prng_state stream_rng;	/* sliding_window and mrs choices: main
								 * thread only */

	BlockShuffleState *child;
	uint32		blocks_per_buffer;
	int64		n_groups;		/* groups of blocks an epoch is cut into */
	int64		next_group;		/* the group the next read takes */
	TupleTableSlot *pending;	/* first tuple of the next group */
	bool		has_pending;
	bool		eof;			/* the child has no more rows this epoch */
	bool		drained;		/* the strategy has no more rows this epoch */
	MemoryContext row_cxt;		/* reset after every row */
	MemoryContext buf_cxt;		/* buffers this node owns */

	CpSlotStore slots;			/* sliding_window, mrs */
	CpBuffer	staging;		/* rows on their way to a pile */
	CpPiles		piles;			/* shuffle_once, epoch_shuffle */

	/* scan mode: the buffer being emitted */
	CpBuffer	out;
	int64		out_pos;
	ItemPointerData out_tid;	/* the ctid the scan slot points at */

	int64		buffers_filled;
} TupleShuffleState;

extern CustomScanMethods tuple_shuffle_scan_methods;

extern CustomScan *tuple_shuffle_make_plan(List *args, bool scan_mode,
										   CustomScan *child, List *tlist,
										   List *scan_tlist, Index rti);
extern void tuple_shuffle_set_seed(TupleShuffleState *ts, uint64 seed);
extern bool tuple_shuffle_fill(TupleShuffleState *ts, CpBuffer *buf);
extern void tuple_shuffle_permute(TupleShuffleState *ts, CpBuffer *buf);
extern bool tuple_shuffle_read_group(TupleShuffleState *ts, CpBuffer *dst);
extern void tuple_shuffle_init_buffer(TupleShuffleState *ts, CpBuffer *buf,
									  MemoryContext cxt);

/* window.c: sliding_window and mrs */
extern bool window_fill(TupleShuffleState *ts, CpBuffer *out);
extern void window_rescan(TupleShuffleState *ts);

/* piles.c: shuffle_once and epoch_shuffle */
extern bool piles_fill(TupleShuffleState *ts, CpBuffer *out);
extern void piles_rescan(TupleShuffleState *ts);
extern void piles_end(TupleShuffleState *ts);

#endif							/* CORGIPILE_TUPLESHUFFLE_H */
