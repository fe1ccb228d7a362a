/*-------------------------------------------------------------------------
 *
 * block_only.c
 *	  block_only: blocks in a random order, rows in page order inside each
 *	  (the ablation of CorgiPile's tuple-level shuffle).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "shuffle/strategy.h"

const CpStrategy cp_strategy_block_only = {
	.id = CP_SHUFFLE_BLOCK_ONLY,
	.name = "block_only",
	.tuple_order = "as read",
	.random_blocks = true,
	.borrow_cached_rows = true,
	.permute_buffers = false,
	.begin = cp_strategy_begin_groups,
	.fill = cp_strategy_fill_group,
};
