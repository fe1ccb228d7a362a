/*-------------------------------------------------------------------------
 *
 * window.c
 *	  The machinery of the streaming shuffles that CorgiPile is compared
 *	  with (sliding_window.c, mrs.c).
 *
 * Both read the table sequentially and keep buffer_size worth of rows (the
 * rows of the first blocks_per_buffer blocks) in memory: the same budget
 * as CorgiPile's buffer.  At the end of the scan the rows still held go to
 * SGD in random order.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"
#include "utils/memutils.h"

#include "core/shuffle.h"
#include "shuffle/window.h"

void *
cp_window_begin(const CpStrategyEnv *env)
{
	CpWindow   *w = MemoryContextAllocZero(env->cxt, sizeof(CpWindow));

	w->env = env;
	cp_strategy_init_buffer(env, &w->store);
	return w;
}

void
cp_window_seed(void *state, uint64 seed)
{
	CpWindow   *w = state;

	pg_prng_seed(&w->rng, cp_derive_seed(seed, 2));
}

static void
ensure_slots(CpWindow *w, int64 n)
{
	int64		cap;

	if (n <= w->slot_cap)
		return;
	cap = Max(n, Max(1024, 2 * w->slot_cap));
	if (w->slot_row == NULL)
		w->slot_row = MemoryContextAllocHuge(w->env->cxt, mul_size(sizeof(int64), cap));
	else
		w->slot_row = repalloc_huge(w->slot_row, mul_size(sizeof(int64), cap));
	w->slot_cap = cap;
}

/* Drop the dead rows of the store once they outnumber the live ones. */
static void
compact(CpWindow *w)
{
	CpBuffer	fresh;

	if (w->store.n_rows <= 2 * Max(w->n_slots, 1024))
		return;
	cp_strategy_init_buffer(w->env, &fresh);
	cp_buffer_reset(&fresh, w->store.n_features);
	for (int64 j = 0; j < w->n_slots; j++)
	{
		cp_buffer_append_row(&fresh, &w->store, w->slot_row[j]);
		w->slot_row[j] = j;
		if ((j & 4095) == 4095)
			CHECK_FOR_INTERRUPTS();
	}
	cp_buffer_free(&w->store);
	w->store = fresh;
}

/* The scan is over: the rows still held go out in random order. */
static void
drain(CpWindow *w, CpBuffer *out)
{
	for (int64 i = w->n_slots - 1; i > 0; i--)
	{
		int64		j = cp_window_uniform(w, i + 1);
		int64		tmp = w->slot_row[i];

		w->slot_row[i] = w->slot_row[j];
		w->slot_row[j] = tmp;
	}
	for (int64 j = 0; j < w->n_slots; j++)
	{
		cp_buffer_append_row(out, &w->store, w->slot_row[j]);
		if ((j & 4095) == 4095)
			CHECK_FOR_INTERRUPTS();
	}
	w->n_slots = 0;
	w->drained = true;
}

bool
cp_window_fill(CpWindow *w, CpBuffer *out, CpWindowTakeFn take)
{
	const CpStrategyEnv *env = w->env;

	if (w->drained)
		return false;
	for (;;)
	{
		int64		first = w->store.n_rows;

		if (!env->read_group(env->reader, &w->store))
		{
			drain(w, out);
			return true;
		}
		/* the budget: the rows of the first group of blocks */
		if (w->capacity == 0)
			w->capacity = w->store.n_rows - first;
		for (int64 r = first; r < w->store.n_rows; r++)
		{
			w->seen++;
			if (w->n_slots < w->capacity)
			{
				ensure_slots(w, w->n_slots + 1);
				w->slot_row[w->n_slots++] = r;
			}
			else
				take(w, r, out);
			if (((r - first) & 4095) == 4095)
				CHECK_FOR_INTERRUPTS();
		}
		compact(w);
		if (out->n_rows > 0)
			return true;
	}
}

void
cp_window_rescan(void *state)
{
	CpWindow   *w = state;

	w->n_slots = 0;
	w->seen = 0;
	w->drained = false;
	cp_buffer_reset(&w->store, w->env->layout->n_features);
}

int64
cp_window_held_rows(void *state)
{
	return ((CpWindow *) state)->capacity;
}
