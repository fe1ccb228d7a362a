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
	.begin = cp_strategy_begin_groups,
	.fill = cp_strategy_fill_group,
};
