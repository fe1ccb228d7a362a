/*-------------------------------------------------------------------------
 *
 * tuple_source.h
 *	  The contract between TupleShuffle and the operator that trains on its
 *	  buffers (SGD, and each process of a parallel run).
 *
 * TupleShuffle hands its reader one CpTupleSource when it starts
 * (cp_tuple_shuffle_source), as nodeHash.h serves HashJoin: what the reader
 * may read is in the struct, what it may ask for is the calls below.  The
 * reader sees nothing else of TupleShuffleState, and knows no strategy
 * (the strategy's private state is passed on as an opaque pointer, for the
 * strategy's own exported accessors).
 *
 *-------------------------------------------------------------------------
 */
#ifndef CORGIPILE_TUPLE_SOURCE_H
#define CORGIPILE_TUPLE_SOURCE_H

#include "postgres.h"

#include "lib/stringinfo.h"
#include "nodes/execnodes.h"
#include "utils/relcache.h"

#include "core/buffer.h"
#include "io/layout.h"
#include "nodes/holdout.h"
#include "params/params.h"

struct CpBlockCache;
struct CpGrabAcc;

typedef struct CpTupleSource
{
	/*
	 * What the reader reads.  TupleShuffle owns all of it, for as long as
	 * the node lives; the fields do not change after the start, except
	 * where said.
	 */
	Relation	rel;			/* the table read */
	const CpTrainParams *params;	/* train()'s arguments, as TupleShuffle
									 * got them */

	/*
	 * The layout rows are converted with.  Read-only for the reader, except
	 * that a parallel worker completes it with the leader's shape
	 * (parallel.c) before its first fill; the leader's is completed by
	 * cp_tuple_source_find_shape.
	 */
	CpLayout   *layout;
	const CpSizing *sizing;		/* how the table is cut into blocks and
								 * buffers (cp_tuple_source_impose_sizing
								 * changes it) */
	int64		n_groups;		/* groups of blocks an epoch is cut into
								 * (idem) */
	CpHoldout  *holdout;		/* validation => 'N%': rows kept out, or
								 * NULL */
	struct CpBlockCache *cache; /* the first epoch's blocks, or NULL */
	void	   *strategy_state; /* the strategy's, for its own accessors */
	bool		wants_feedback; /* sum gradients per block for the strategy
								 * (cp_tuple_source_epoch_feedback) */
} CpTupleSource;

/* The source of a TupleShuffle node, once ExecInitNode has started it. */
extern CpTupleSource *cp_tuple_shuffle_source(PlanState *ps);

/* What the reader drives, a buffer at a time. */
extern void cp_tuple_source_set_seed(CpTupleSource *src, uint64 seed);
extern void cp_tuple_source_init_buffer(CpTupleSource *src, CpBuffer *buf,
										MemoryContext cxt);
extern bool cp_tuple_source_fill(CpTupleSource *src, CpBuffer *buf);
extern void cp_tuple_source_permute(CpTupleSource *src, CpBuffer *buf);
extern int64 cp_tuple_source_held_rows(CpTupleSource *src, const char **key);
extern void cp_tuple_source_find_shape(CpTupleSource *src, uint64 seed);
extern bool cp_tuple_source_cached_whole(CpTupleSource *src);
extern bool cp_tuple_source_cached_rows(CpTupleSource *src, CpBuffer *dst);
extern void cp_tuple_source_epoch_feedback(CpTupleSource *src,
										   const struct CpGrabAcc *acc);

/* Distributed training (first_pass.c, shard_round.c) */
extern void cp_tuple_source_dist_stats(CpTupleSource *src, uint64 seed,
									   StringInfo out);
extern void cp_tuple_source_dist_shape(CpTupleSource *src, StringInfo merged);

/* Parallel training (parallel.c): groups of a shared order, in any order. */
extern const uint32 *cp_tuple_source_draw_order(CpTupleSource *src);
extern void cp_tuple_source_impose_sizing(CpTupleSource *src, const CpSizing *sz);
extern void cp_tuple_source_seek_group(CpTupleSource *src, const uint32 *order,
									   int64 group);
extern void cp_tuple_source_seed_permutation(CpTupleSource *src, uint64 seed);

#endif							/* CORGIPILE_TUPLE_SOURCE_H */
