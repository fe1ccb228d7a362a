/*-------------------------------------------------------------------------
 *
 * strategy.c
 *	  The table of shuffle strategies, and what several of them share.
 *
 * This table is the only place that enumerates the strategies: names,
 * EXPLAIN texts, whether blocks are visited at random, whether buffers are
 * permuted all come from the entries.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "shuffle/strategy.h"

static const CpStrategy *const strategies[CP_NUM_SHUFFLES] = {
	[CP_SHUFFLE_CORGIPILE] = &cp_strategy_corgipile,
	[CP_SHUFFLE_BLOCK_ONLY] = &cp_strategy_block_only,
	[CP_SHUFFLE_NO_SHUFFLE] = &cp_strategy_no_shuffle,
	[CP_SHUFFLE_SLIDING_WINDOW] = &cp_strategy_sliding_window,
	[CP_SHUFFLE_MRS] = &cp_strategy_mrs,
	[CP_SHUFFLE_SHUFFLE_ONCE] = &cp_strategy_shuffle_once,
	[CP_SHUFFLE_EPOCH_SHUFFLE] = &cp_strategy_epoch_shuffle,
	[CP_SHUFFLE_GRAB] = &cp_strategy_grab,
};

const CpStrategy *
cp_strategy_get(CpShuffle id)
{
	if ((int) id < 0 || (int) id >= CP_NUM_SHUFFLES || strategies[id] == NULL)
		elog(ERROR, "corgipile: no shuffle strategy %d", (int) id);
	Assert(strategies[id]->id == id);
	return strategies[id];
}

/* The strategy called name (case-insensitive); false if there is none. */
bool
cp_strategy_lookup(const char *name, CpShuffle *id)
{
	for (int i = 0; i < CP_NUM_SHUFFLES; i++)
	{
		if (pg_strcasecmp(name, strategies[i]->name) == 0)
		{
			*id = (CpShuffle) i;
			return true;
		}
	}
	return false;
}

/* A buffer with the driver's layout (and row ids under shuffled_scan()). */
void
cp_strategy_init_buffer(const CpStrategyEnv *env, CpBuffer *buf)
{
	bool		sparse = cp_layout_sparse_rows(env->layout);

	if (env->with_ids)
		cp_buffer_init_with_ids(buf, env->cxt, sparse);
	else
		cp_buffer_init(buf, env->cxt, sparse);
	if (env->buffer_budget > 0)
		cp_buffer_set_budget(buf, env->buffer_budget, "a training buffer",
							 "Raise work_mem: a training buffer may take the larger of work_mem and "
							 CppAsString2(CP_BUFFER_BUDGET_FACTOR) " times the bytes of the table it holds (buffer_size's share of its heap and TOAST pages).");
}

/*
 * corgipile, block_only and no_shuffle: a buffer is one group of whole
 * blocks; they differ only in their table entries (block order, permute).
 * Their state is the environment itself.
 */
void *
cp_strategy_begin_groups(const CpStrategyEnv *env)
{
	return (void *) env;
}

bool
cp_strategy_fill_group(void *state, CpBuffer *out)
{
	const CpStrategyEnv *env = state;

	return env->read_group(env->reader, out);
}
