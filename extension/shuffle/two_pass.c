/*-------------------------------------------------------------------------
 *
 * two_pass.c
 *	  The two-pass shuffle of the table's rows that shuffle_once and
 *	  epoch_shuffle share (see two_pass.h).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"
#include "utils/memutils.h"

#include "core/shuffle.h"
#include "shuffle/two_pass.h"

void *
cp_two_pass_begin(const CpStrategyEnv *env)
{
	CpTwoPass  *tp = MemoryContextAllocZero(env->cxt, sizeof(CpTwoPass));

	tp->env = env;
	cp_strategy_init_buffer(env, &tp->staging);
	return tp;
}

void
cp_two_pass_seed(void *state, uint64 seed)
{
	CpTwoPass  *tp = state;

	pg_prng_seed(&tp->rng, cp_derive_seed(seed, 3));
}

/* Pass 1: scatter every row of the table over the piles. */
void
cp_two_pass_scatter(CpTwoPass *tp)
{
	const CpStrategyEnv *env = tp->env;
	const CpSizing *sz = env->sizing;
	double		buffer_pages = (double) sz->blocks_per_buffer * sz->pages_per_block;

	cp_piles_open(&tp->piles, cp_piles_count(sz->n_pages, buffer_pages), env->cxt);
	tp->n_piles_used = tp->piles.n_piles;
	tp->next_pile = 0;
	tp->rows = 0;

	for (;;)
	{
		cp_buffer_reset(&tp->staging, env->layout->n_features);
		if (!env->read_group(env->reader, &tp->staging))
			break;
		for (int64 r = 0; r < tp->staging.n_rows; r++)
		{
			int			k = cp_piles_choose(&tp->piles, &tp->rng);

			cp_piles_write_row(tp->piles.files[k], &tp->staging, r);
			if ((r & 1023) == 1023)
				CHECK_FOR_INTERRUPTS();
		}
		tp->rows += tp->staging.n_rows;
	}
	cp_piles_rewind(&tp->piles);
}

/* Pass 2: append pile k to into. */
void
cp_two_pass_load_pile(CpTwoPass *tp, int k, CpBuffer *into)
{
	BufFile    *f = tp->piles.files[k];
	int64		n = 0;

	into->n_features = tp->env->layout->n_features;
	while (cp_piles_read_row(f, into))
	{
		/* a pile can be large (CP_MAX_PILES): stay cancellable */
		if ((++n & 1023) == 0)
			CHECK_FOR_INTERRUPTS();
	}
	CHECK_FOR_INTERRUPTS();
}

void
cp_two_pass_end(void *state)
{
	CpTwoPass  *tp = state;

	cp_piles_close(&tp->piles);
	if (tp->stream != NULL)
		BufFileClose(tp->stream);
	tp->stream = NULL;
}

void
cp_two_pass_explain(void *state, ExplainState *es)
{
	CpTwoPass  *tp = state;

	if (tp->n_piles_used > 0)
		ExplainPropertyInteger("Piles", NULL, tp->n_piles_used, es);
}
