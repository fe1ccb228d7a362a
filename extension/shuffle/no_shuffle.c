/*-------------------------------------------------------------------------
 *
 * no_shuffle.c
 *	  no_shuffle: the table in page order, as a sequential scan reads it.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "shuffle/strategy.h"

const CpStrategy cp_strategy_no_shuffle = {
	.begin = cp_strategy_begin_groups,
	.fill = cp_strategy_fill_group,
};
