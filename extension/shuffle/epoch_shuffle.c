/*-------------------------------------------------------------------------
 *
 * epoch_shuffle.c
 *	  epoch_shuffle: a full two-pass shuffle of the table before every
 *	  epoch (two_pass.h).
 *
 * Pass 2 is lazy: each pile is a buffer, and the training side permutes it
 * (CP_SHUFFLE_PERMUTES) as it trains on it.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "shuffle/two_pass.h"

static bool
fill(void *state, CpBuffer *out)
{
	CpTwoPass  *tp = state;

	if (tp->drained)
		return false;
	if (tp->piles.files == NULL)
		cp_two_pass_scatter(tp);
	if (tp->next_pile >= tp->piles.n_piles)
	{
		tp->drained = true;
		cp_piles_close(&tp->piles);
		return false;
	}
	cp_two_pass_load_pile(tp, tp->next_pile++, out);
	return true;
}

/* shuffle again from scratch */
static void
rescan(void *state)
{
	CpTwoPass  *tp = state;

	tp->drained = false;
	cp_piles_close(&tp->piles);
}

const CpStrategy cp_strategy_epoch_shuffle = {
	.begin = cp_two_pass_begin,
	.seed = cp_two_pass_seed,
	.fill = fill,
	.rescan = rescan,
	.end = cp_two_pass_end,
	.explain = cp_two_pass_explain,
};
