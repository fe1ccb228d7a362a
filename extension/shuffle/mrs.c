/*-------------------------------------------------------------------------
 *
 * mrs.c
 *	  mrs: Bismarck's multiplexed reservoir sampling, our exact variant.
 *
 * The reservoir starts with the first R rows read.  The i-th row read
 * after that (i counting all rows read this epoch) enters the reservoir
 * with probability R/i, evicting a uniformly chosen row; whichever row does
 * not stay (the evicted one, or the new one) goes to SGD at once, as
 * Bismarck's I/O worker does.  Bismarck's memory worker trains on the
 * reservoir concurrently; we multiplex it deterministically, one step for
 * one step: after each row the I/O side feeds, one row drawn uniformly from
 * the reservoir is fed too (it stays in the reservoir).  At the end of the
 * scan the reservoir goes to SGD in random order.  An epoch over N rows
 * therefore feeds 2(N - R) + R updates (N when N <= R).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "shuffle/window.h"

static void
take_row(CpWindow *w, int64 row, CpBuffer *out)
{
	/* reservoir sampling, then one step of the memory worker */
	if (pg_prng_double(&w->rng) * (double) w->seen < (double) w->capacity)
	{
		int64		j = cp_window_uniform(w, w->n_slots);

		cp_buffer_append_row(out, &w->store, w->slot_row[j]);
		w->slot_row[j] = row;
	}
	else
		cp_buffer_append_row(out, &w->store, row);
	cp_buffer_append_row(out, &w->store, w->slot_row[cp_window_uniform(w, w->n_slots)]);
}

static bool
fill(void *state, CpBuffer *out)
{
	return cp_window_fill(state, out, take_row);
}

static void
explain(void *state, ExplainState *es)
{
	CpWindow   *w = state;

	if (w->capacity > 0)
		ExplainPropertyInteger("Reservoir Rows", NULL, w->capacity, es);
}

const CpStrategy cp_strategy_mrs = {
	.begin = cp_window_begin,
	.seed = cp_window_seed,
	.fill = fill,
	.rescan = cp_window_rescan,
	.explain = explain,
	.held_rows = cp_window_held_rows,
	.held_rows_key = "reservoir_rows",
};
