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
	int64		n_groups;		/* groups of blocks an epoch is cut into */
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
} TupleShuffleState;

extern CustomScanMethods cp_tuple_shuffle_scan_methods;

extern CustomScan *cp_tuple_shuffle_make_plan(Const *params, bool scan_mode,
											  CustomScan *child, List *tlist,
											  List *scan_tlist, Index rti);

/* What the SGD operator drives, a buffer at a time. */
extern void cp_tuple_shuffle_set_seed(TupleShuffleState *ts, uint64 seed);
extern void cp_tuple_shuffle_init_buffer(TupleShuffleState *ts, CpBuffer *buf,
										 MemoryContext cxt);
extern bool cp_tuple_shuffle_fill(TupleShuffleState *ts, CpBuffer *buf);
extern void cp_tuple_shuffle_permute(TupleShuffleState *ts, CpBuffer *buf);
extern int64 cp_tuple_shuffle_held_rows(TupleShuffleState *ts, const char **key);
extern Relation cp_tuple_shuffle_relation(TupleShuffleState *ts);
extern const CpSizing *cp_tuple_shuffle_sizing(TupleShuffleState *ts);
extern const CpLayout *cp_tuple_shuffle_layout(TupleShuffleState *ts);
extern void cp_tuple_shuffle_find_shape(TupleShuffleState *ts, uint64 seed);
extern void cp_tuple_shuffle_reset_cache(TupleShuffleState *ts);
extern bool cp_tuple_shuffle_wants_feedback(TupleShuffleState *ts);
extern void *cp_tuple_shuffle_strategy_state(TupleShuffleState *ts);
extern CpHoldout *cp_tuple_shuffle_holdout(TupleShuffleState *ts);
extern void cp_tuple_shuffle_epoch_feedback(TupleShuffleState *ts,
											const struct CpGrabAcc *acc);

/* Parallel training (parallel.c): groups of a shared order, in any order. */
extern int64 cp_tuple_shuffle_n_groups(TupleShuffleState *ts);
extern void cp_tuple_shuffle_impose_sizing(TupleShuffleState *ts, const CpSizing *sz);
extern void cp_tuple_shuffle_seek_group(TupleShuffleState *ts, const uint32 *order,
										int64 group);
extern void cp_tuple_shuffle_seed_permutation(TupleShuffleState *ts, uint64 seed);

#endif							/* CORGIPILE_TUPLESHUFFLE_H */
