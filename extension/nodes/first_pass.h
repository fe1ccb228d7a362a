/*-------------------------------------------------------------------------
 *
 * first_pass.h
 *	  The pass over the table before the first epoch (first_pass.c): what
 *	  the weights' shape and the features' encoding need and the layout
 *	  does not know yet.
 *
 *-------------------------------------------------------------------------
 */
#ifndef CORGIPILE_FIRST_PASS_H
#define CORGIPILE_FIRST_PASS_H

#include "postgres.h"

#include "lib/stringinfo.h"
#include "utils/rel.h"
#include "utils/snapshot.h"

#include "io/layout.h"
#include "params/params.h"

struct CpBlockCache;
extern void cp_prep_first_pass(CpLayout *lo, Relation rel, Snapshot snapshot,
							   const CpTrainParams *p, uint64 seed,
							   MemoryContext cxt, struct CpBlockCache *cache,
							   uint32 pages_per_block, uint32 n_blocks);

/* distributed training: a shard's pass, and the shards' passes merged */
extern const char *cp_prep_dist_unsupported(const CpTrainParams *p);
extern void cp_prep_dist_stats(CpLayout *lo, Relation rel, Snapshot snapshot,
							   const CpTrainParams *p, uint64 seed,
							   MemoryContext cxt, struct CpBlockCache *cache,
							   uint32 pages_per_block, uint32 n_blocks,
							   StringInfo out);
extern void cp_prep_dist_finish(CpLayout *lo, const CpTrainParams *p,
								MemoryContext cxt, List *states,
								StringInfo merged_out,
								struct CpBlockCache *cache);

/* corgipile.stats_sample_size, in pages */
extern int	cp_stats_sample_pages;

#endif							/* CORGIPILE_FIRST_PASS_H */
