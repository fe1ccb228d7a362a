/*-------------------------------------------------------------------------
 *
 * strategy.h
 *	  The shuffle strategies: one module each, behind one small interface,
 *	  chosen once from one table (docs/engine.md).
 *
 * TupleShuffle (the driver) knows no strategy by name.  It hands the
 * strategy a CpStrategyEnv (the layout, the sizing, a memory context and a
 * reader of whole groups of blocks, in the order BlockShuffle visits them)
 * and asks it for buffers.  A strategy keeps its state private, in what its
 * begin callback returns.
 *
 * What a strategy is (its name, EXPLAIN's "Tuple Order", its flags) is data
 * in the one list of strategies, params/shuffles.h; this struct holds only
 * its code.  Adding a strategy: one line in that list, one file here
 * defining cp_strategy_<name>.
 *
 * This header depends on nothing of the driver's: the strategies read rows
 * only through env->read_group, so no strategy includes tupleshuffle.h.
 *
 *-------------------------------------------------------------------------
 */
#ifndef CORGIPILE_STRATEGY_H
#define CORGIPILE_STRATEGY_H

#include "postgres.h"

#include "commands/explain.h"
#include "common/pg_prng.h"
#include "utils/relcache.h"

#include "core/buffer.h"
#include "io/layout.h"
#include "params/params.h"
#include "params/shuffles.h"

/*
 * Append to dst the rows of the epoch's next group of blocks (at most
 * blocks_per_buffer blocks).  False when the epoch has no rows left.
 */
struct CpGrabAcc;

typedef bool (*CpReadGroupFn) (void *reader, CpBuffer *dst);

/* What the driver gives a strategy. */
typedef struct CpStrategyEnv
{
	const CpLayout *layout;		/* the driver's; n_features may grow after
								 * the first epoch (sparse, inferred) */
	const CpSizing *sizing;
	MemoryContext cxt;			/* for the strategy's state and buffers */
	bool		with_ids;		/* shuffled_scan(): buffers carry row ids */
	pg_prng_state *perm_rng;	/* the permutation stream (shuffle_once
								 * permutes piles with it, on the main
								 * thread) */
	CpReadGroupFn read_group;
	void	   *reader;
	Relation	rel;			/* the table read (its statistics) */
	Size		buffer_budget;	/* bytes each buffer may take (0: no limit;
								 * cp_training_buffer_budget) */
} CpStrategyEnv;

typedef struct CpStrategy
{
	/* Required.  The private state; allocate it in env->cxt. */
	void	   *(*begin) (const CpStrategyEnv *env);
	/* Optional.  Seed the strategy's own generators from the run's seed. */
	void		(*seed) (void *state, uint64 seed);

	/*
	 * Required.  Append the next rows to feed to out (already reset).  False
	 * when the epoch has no rows left; a true return may leave out empty.
	 */
	bool		(*fill) (void *state, CpBuffer *out);
	/* Optional.  Start the next epoch. */
	void		(*rescan) (void *state);
	/* Optional.  Release what memory contexts do not (temporary files). */
	void		(*end) (void *state);
	/* Optional.  EXPLAIN ANALYZE details. */
	void		(*explain) (void *state, ExplainState *es);
	/* Optional.  EXPLAIN details known before the run (its per-run choices). */
	void		(*explain_plan) (void *state, ExplainState *es);

	/*
	 * Optional.  The rows the strategy holds back (window, reservoir) and
	 * the params JSON key that records them in the model row.
	 */
	int64		(*held_rows) (void *state);
	const char *held_rows_key;

	/*
	 * Optional, for GraB and its kin (docs/engine.md): the order of the
	 * epoch's blocks.  NULL: BlockShuffle's own (random_blocks ? a fresh
	 * permutation : sequential).  Called on the main thread before each
	 * epoch's first read; order holds n_blocks entries.
	 */
	void		(*block_order) (void *state, uint32 *order, uint32 n_blocks,
								pg_prng_state *rng);

	/*
	 * Optional: what the SGD operator learnt of the epoch just trained: per
	 * block (indexed by block number) the sum of its rows' gradients and its
	 * row count (core/grab.h).  block_order reads it for the next epoch.
	 * A strategy with this hook gets buffers whose rows carry their block
	 * (CpBuffer.row_blocks).
	 */
	void		(*epoch_feedback) (void *state, const struct CpGrabAcc *acc);

	/*
	 * Optional: whether this run permutes its buffers, when the strategy
	 * decides it per run (GraB: by the rows per block); else
	 * CP_SHUFFLE_PERMUTES of its flags.
	 */
	bool		(*permutes) (void *state);
} CpStrategy;

extern const CpStrategy *cp_strategy_get(CpShuffle id);

/* Shared by the strategies. */
extern void cp_strategy_init_buffer(const CpStrategyEnv *env, CpBuffer *buf);
extern bool cp_strategy_fill_group(void *state, CpBuffer *out);
extern void *cp_strategy_begin_groups(const CpStrategyEnv *env);

/* The table's entries, one file each: cp_strategy_<name>. */
#define CP_STRATEGY_EXTERN(ID, name, tuple_order, flags) \
	extern const CpStrategy cp_strategy_##name;
CP_SHUFFLES(CP_STRATEGY_EXTERN)
#undef CP_STRATEGY_EXTERN

#endif							/* CORGIPILE_STRATEGY_H */
