/*-------------------------------------------------------------------------
 *
 * shuffle_once.c
 *	  shuffle_once: one full two-pass shuffle (two_pass.h), in the first
 *	  epoch; every epoch sees the same order.
 *
 * The first epoch shuffles each pile here, feeds it and writes it to one
 * more temporary file in the compact layout (cheaper to write and to read
 * again than a table); later epochs read that copy sequentially.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"
#include "utils/memutils.h"

#include "core/shuffle.h"
#include "shuffle/two_pass.h"

/* Later epochs: the next buffer's worth of the shuffled copy. */
static bool
read_stream(CpTwoPass *tp, CpBuffer *out)
{
	int64		chunk = Max(1, tp->rows / tp->n_piles_used);

	out->n_features = tp->env->layout->n_features;
	while (out->n_rows < chunk && cp_piles_read_row(tp->stream, out))
	{
		if ((out->n_rows & 1023) == 0)
			CHECK_FOR_INTERRUPTS();
	}
	if (out->n_rows == 0)
	{
		tp->drained = true;
		return false;
	}
	return true;
}

static bool
fill(void *state, CpBuffer *out)
{
	CpTwoPass  *tp = state;
	const CpStrategyEnv *env = tp->env;

	if (tp->drained)
		return false;
	if (tp->stream_done)
		return read_stream(tp, out);

	if (tp->piles.files == NULL)
		cp_two_pass_scatter(tp);
	if (tp->next_pile >= tp->piles.n_piles)
	{
		tp->drained = true;
		cp_piles_close(&tp->piles);
		tp->stream_done = true;
		cp_piles_rewind_file(tp->stream);
		return false;
	}

	if (tp->stream == NULL)
	{
		MemoryContext old = MemoryContextSwitchTo(env->cxt);

		tp->stream = BufFileCreateTemp(false);
		MemoryContextSwitchTo(old);
	}
	cp_buffer_reset(&tp->staging, env->layout->n_features);
	cp_two_pass_load_pile(tp, tp->next_pile++, &tp->staging);
	cp_order_identity(tp->staging.order, tp->staging.n_rows);
	cp_shuffle_uint32(tp->staging.order, tp->staging.n_rows, env->perm_rng);
	for (int64 i = 0; i < tp->staging.n_rows; i++)
	{
		int64		row = tp->staging.order[i];

		cp_buffer_append_row(out, &tp->staging, row);
		cp_piles_write_row(tp->stream, &tp->staging, row);
		if ((i & 1023) == 1023)
			CHECK_FOR_INTERRUPTS();
	}
	return true;
}

static void
rescan(void *state)
{
	CpTwoPass  *tp = state;

	tp->drained = false;
	if (tp->stream_done)
	{
		cp_piles_rewind_file(tp->stream);
		return;
	}
	/* a copy never finished: shuffle again from scratch */
	cp_piles_close(&tp->piles);
	if (tp->stream != NULL)
	{
		BufFileClose(tp->stream);
		tp->stream = NULL;
	}
}

const CpStrategy cp_strategy_shuffle_once = {
	.begin = cp_two_pass_begin,
	.seed = cp_two_pass_seed,
	.fill = fill,
	.rescan = rescan,
	.end = cp_two_pass_end,
	.explain = cp_two_pass_explain,
};
