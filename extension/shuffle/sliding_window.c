/*-------------------------------------------------------------------------
 *
 * sliding_window.c
 *	  sliding_window: TensorFlow's shuffle buffer.
 *
 * The window starts with the first rows read.  Then every row read evicts
 * a uniformly chosen row of the window, which goes to SGD, and takes its
 * place.  At the end of the scan the rows left in the window go to SGD in
 * random order.  Each row is fed once per epoch.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "shuffle/window.h"

static void
take_row(CpWindow *w, int64 row, CpBuffer *out)
{
	int64		j = cp_window_uniform(w, w->n_slots);

	cp_buffer_append_row(out, &w->store, w->slot_row[j]);
	w->slot_row[j] = row;
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
		ExplainPropertyInteger("Window Rows", NULL, w->capacity, es);
}

const CpStrategy cp_strategy_sliding_window = {
	.begin = cp_window_begin,
	.seed = cp_window_seed,
	.fill = fill,
	.rescan = cp_window_rescan,
	.explain = explain,
	.held_rows = cp_window_held_rows,
	.held_rows_key = "window_rows",
};
