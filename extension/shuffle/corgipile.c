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
	.begin = cp_strategy_begin_groups,
	.fill = cp_strategy_fill_group,
};
