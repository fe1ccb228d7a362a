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
 * Adding a strategy: one file here defining a CpStrategy, one line in the
 * table (strategy.c), one value in CpShuffle (params.h).
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
	CpShuffle	id;
	const char *name;			/* train(shuffle => ...) */
	const char *tuple_order;	/* EXPLAIN's "Tuple Order" */
	bool		random_blocks;	/* BlockShuffle visits blocks in a random
								 * order (else sequentially) */
	bool		permute_buffers;	/* the training side permutes each buffer */
	bool		reads_table_once;	/* read_group only in the first epoch: the
									 * block cache would go unused */
	bool		borrow_cached_rows; /* each fill is one read_group, trained
									 * before the next fill, on rows that may
									 * be borrowed from the block cache
									 * instead of copied */

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
	 * permute_buffers.
	 */
	bool		(*permutes) (void *state);
} CpStrategy;

extern const CpStrategy *cp_strategy_get(CpShuffle id);
extern bool cp_strategy_lookup(const char *name, CpShuffle *id);

/* Shared by the strategies. */
extern void cp_strategy_init_buffer(const CpStrategyEnv *env, CpBuffer *buf);
extern bool cp_strategy_fill_group(void *state, CpBuffer *out);
extern void *cp_strategy_begin_groups(const CpStrategyEnv *env);

/* The table's entries, one file each. */
extern const CpStrategy cp_strategy_corgipile;
extern const CpStrategy cp_strategy_block_only;
extern const CpStrategy cp_strategy_no_shuffle;
extern const CpStrategy cp_strategy_sliding_window;
extern const CpStrategy cp_strategy_mrs;
extern const CpStrategy cp_strategy_shuffle_once;
extern const CpStrategy cp_strategy_epoch_shuffle;
extern const CpStrategy cp_strategy_grab;

/* grab's per-run choices and stored state (shuffle/grab.c) */
extern void cp_grab_define_gucs(void);
extern const char *cp_grab_buffer_choice(void *state);
extern bool cp_grab_last_walk(void *state, const uint32 **visit,
							  const int8 **signs, uint32 *n_blocks);
extern void cp_grab_set_first_order(void *state, const uint32 *order);
extern void cp_grab_set_unit_blocks(void *state, int32 unit_blocks);
extern uint32 cp_grab_n_units(void *state);
extern const uint32 *cp_grab_unit_map(void *state);
extern bool cp_grab_collects(void *state);
extern void cp_grab_plan_epoch(void *state, double rate, double mean_g2);
extern void cp_grab_explain_plan(void *state, ExplainState *es);
extern void cp_grab_choices(void *state, int32 *unit_blocks, int64 *epochs,
							int64 *epochs_kept, int64 *epochs_random,
							double *statistic, double *step);

#endif							/* CORGIPILE_STRATEGY_H */
