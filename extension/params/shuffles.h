/*-------------------------------------------------------------------------
 *
 * shuffles.h
 *	  The one list of shuffle strategies: train(shuffle => ...)'s names,
 *	  in CpShuffle's order, with what each one is (its flags).
 *
 * Everything that enumerates the strategies comes from CP_SHUFFLES: the
 * CpShuffle enum and CP_NUM_SHUFFLES, the names train() accepts and its
 * error hint, EXPLAIN's "Tuple Order", the flags table (params/shuffles.c),
 * and the table of strategy modules (shuffle/strategy.c, which also checks
 * that each module's hooks agree with its flags).  tests/python/
 * test_shuffles.py holds the list against what the server accepts.
 *
 * The list lives in params/ because the argument parser needs the names and
 * "may run in parallel" at parse time, and params/ includes nothing of the
 * layers above it; the strategies' code (shuffle/) includes this header.
 *
 * Adding a strategy: one line here, one file in shuffle/ defining
 * cp_strategy_<name>.
 *
 *-------------------------------------------------------------------------
 */
#ifndef CORGIPILE_SHUFFLES_H
#define CORGIPILE_SHUFFLES_H

#include "postgres.h"

/* What a strategy is, as data (CpShuffleInfo.flags). */
#define CP_SHUFFLE_RANDOM_BLOCKS	0x01	/* BlockShuffle visits blocks in a
											 * random order (else
											 * sequentially) */
#define CP_SHUFFLE_PERMUTES			0x02	/* the training side permutes each
											 * buffer (unless the module's
											 * permutes hook decides per run) */
#define CP_SHUFFLE_READS_ONCE		0x04	/* reads the table in the first
											 * epoch only: the block cache
											 * would go unused */
#define CP_SHUFFLE_COPIES_TABLE		0x08	/* copies the rows into temporary
											 * files (piles) before training */
#define CP_SHUFFLE_BORROWS_ROWS		0x10	/* each fill is one group of
											 * blocks, trained before the next
											 * fill: rows may be borrowed from
											 * the block cache, not copied */
#define CP_SHUFFLE_PARALLEL			0x20	/* may run with workers > 1: a
											 * buffer is a group of whole
											 * blocks of an order drawn before
											 * the epoch */
#define CP_SHUFFLE_FEEDBACK			0x40	/* orders the blocks from SGD's
											 * per-block gradient sums (the
											 * module's epoch_feedback hook,
											 * shuffle/grab.h's accessors) */

/*
 * X(ID, name, tuple_order, flags): ID names CP_SHUFFLE_<ID>, name is both
 * the SQL name and the module's symbol (cp_strategy_<name>), tuple_order is
 * EXPLAIN's "Tuple Order".
 *
 * grab copies rows rather than borrowing them: GraB's kept order trains a
 * block's rows where they lie, and borrowed ones come cold from memory,
 * while a copy made on the main thread overlaps the helper thread's
 * training and leaves the rows in the shared cache.  Fashion-MNIST
 * logistic (785 features), later epochs: borrowed 1.32 x corgipile's wall
 * time, copied 1.01 (CPU 1.26 against 1.41); softmax 1.10 and 1.09
 * (docs/grab.md).
 */
#define CP_SHUFFLES(X) \
	X(CORGIPILE, corgipile, "shuffled buffers", \
	  CP_SHUFFLE_RANDOM_BLOCKS | CP_SHUFFLE_PERMUTES | CP_SHUFFLE_BORROWS_ROWS | \
	  CP_SHUFFLE_PARALLEL) \
	X(BLOCK_ONLY, block_only, "as read", \
	  CP_SHUFFLE_RANDOM_BLOCKS | CP_SHUFFLE_BORROWS_ROWS | CP_SHUFFLE_PARALLEL) \
	X(NO_SHUFFLE, no_shuffle, "as read", \
	  CP_SHUFFLE_BORROWS_ROWS | CP_SHUFFLE_PARALLEL) \
	X(SLIDING_WINDOW, sliding_window, "sliding window", 0) \
	X(MRS, mrs, "multiplexed reservoir sampling", 0) \
	X(SHUFFLE_ONCE, shuffle_once, "two-pass shuffle once", \
	  CP_SHUFFLE_READS_ONCE | CP_SHUFFLE_COPIES_TABLE) \
	X(EPOCH_SHUFFLE, epoch_shuffle, "two-pass shuffle every epoch", \
	  CP_SHUFFLE_PERMUTES | CP_SHUFFLE_COPIES_TABLE) \
	X(GRAB, grab, "gradient-balanced blocks", \
	  CP_SHUFFLE_RANDOM_BLOCKS | CP_SHUFFLE_PERMUTES | CP_SHUFFLE_PARALLEL | \
	  CP_SHUFFLE_FEEDBACK)

#define CP_SHUFFLE_ENUM(ID, name, tuple_order, flags) CP_SHUFFLE_##ID,
typedef enum CpShuffle
{
	CP_SHUFFLES(CP_SHUFFLE_ENUM)
	CP_NUM_SHUFFLES
} CpShuffle;
#undef CP_SHUFFLE_ENUM

typedef struct CpShuffleInfo
{
	const char *name;			/* train(shuffle => ...) */
	const char *tuple_order;	/* EXPLAIN's "Tuple Order" */
	uint32		flags;			/* CP_SHUFFLE_* above */
} CpShuffleInfo;

extern const CpShuffleInfo cp_shuffles[CP_NUM_SHUFFLES];

extern bool cp_shuffle_lookup(const char *name, CpShuffle *id);
extern const char *cp_shuffle_name(CpShuffle shuffle);
extern bool cp_shuffle_has(CpShuffle shuffle, uint32 flag);
extern char *cp_shuffle_names(uint32 flag, bool quoted, const char *last_sep);

#endif							/* CORGIPILE_SHUFFLES_H */
