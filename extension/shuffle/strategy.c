/*-------------------------------------------------------------------------
 *
 * strategy.c
 *	  The table of shuffle strategies, and what several of them share.
 *
 * The table is generated from the one list of strategies
 * (params/shuffles.h), which holds their names, EXPLAIN texts and flags;
 * each module here holds only its code.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "shuffle/strategy.h"

#define CP_STRATEGY_ENTRY(ID, name, tuple_order, flags) \
	[CP_SHUFFLE_##ID] = &cp_strategy_##name,
static const CpStrategy *const strategies[CP_NUM_SHUFFLES] = {
	CP_SHUFFLES(CP_STRATEGY_ENTRY)
};
#undef CP_STRATEGY_ENTRY

/*
 * The module's hooks must agree with the flags the list gives it
 * (params/shuffles.h): the flags are what the parser, BlockShuffle,
 * TupleShuffle and parallel training go by without looking at the code.
 */
static void
check_entry(CpShuffle id, const CpStrategy *st)
{
	const char *problem = NULL;
	bool		groups = (st->fill == cp_strategy_fill_group);

	if (cp_shuffle_has(id, CP_SHUFFLE_FEEDBACK) != (st->epoch_feedback != NULL))
		problem = "CP_SHUFFLE_FEEDBACK and the epoch_feedback hook";
	else if (cp_shuffle_has(id, CP_SHUFFLE_BORROWS_ROWS) && !groups)
		problem = "CP_SHUFFLE_BORROWS_ROWS and a fill other than one group";
	else if (cp_shuffle_has(id, CP_SHUFFLE_PARALLEL) &&
			 !(groups && st->block_order == NULL) &&
			 !cp_shuffle_has(id, CP_SHUFFLE_FEEDBACK))
		problem = "CP_SHUFFLE_PARALLEL and a fill other than one group of a drawn order";
	else if (cp_shuffle_has(id, CP_SHUFFLE_COPIES_TABLE) != (st->end != NULL))
		problem = "CP_SHUFFLE_COPIES_TABLE and the end hook (its temporary files)";
	if (problem != NULL)
		elog(ERROR, "corgipile: shuffle strategy \"%s\" disagrees with its flags: %s",
			 cp_shuffle_name(id), problem);
}

const CpStrategy *
cp_strategy_get(CpShuffle id)
{
	if ((int) id < 0 || (int) id >= CP_NUM_SHUFFLES || strategies[id] == NULL)
		elog(ERROR, "corgipile: no shuffle strategy %d", (int) id);
	check_entry(id, strategies[id]);
	return strategies[id];
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
