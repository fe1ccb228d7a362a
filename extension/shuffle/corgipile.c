/*-------------------------------------------------------------------------
 *
 * corgipile.c
 *	  CorgiPile: blocks in a random order, each buffer (a group of whole
 *	  blocks) shuffled before SGD trains on it.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "shuffle/strategy.h"

const CpStrategy cp_strategy_corgipile = {
	.id = CP_SHUFFLE_CORGIPILE,
	.name = "corgipile",
	.tuple_order = "shuffled buffers",
	.random_blocks = true,
	.borrow_cached_rows = true,
	.permute_buffers = true,
	.begin = cp_strategy_begin_groups,
	.fill = cp_strategy_fill_group,
};
