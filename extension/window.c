/*-------------------------------------------------------------------------
 *
 * window.c
 *	  The streaming shuffles that CorgiPile is compared with:
 *	  sliding_window (TensorFlow's shuffle buffer) and mrs (Bismarck's
 *	  multiplexed reservoir sampling).
 *
 * Both read the table sequentially and keep buffer_size worth of rows (the
 * rows of the first blocks_per_buffer blocks) in memory: the same budget
 * as CorgiPile's buffer.
 *
 * sliding_window: the window starts with the first rows read.  Then every
 * row read evicts a uniformly chosen row of the window, which goes to SGD,
 * and takes its place.  At the end of the scan the rows left in the window
 * go to SGD in random order.  Each row is fed once per epoch.
 *
 * mrs, our exact variant: the reservoir starts with the first R rows read.
 * The i-th row read after that (i counting all rows read this epoch) enters
 * the reservoir with probability R/i, evicting a uniformly chosen row;
 * whichever row does not stay (the evicted one, or the new one) goes to SGD
 * at once, as Bismarck's I/O worker does.  Bismarck's memory worker trains
 * on the reservoir concurrently; we multiplex it deterministically, one
 * step for one step: after each row the I/O side feeds, one row drawn
 * uniformly from the reservoir is fed too (it stays in the reservoir).  At
 * the end of the scan the reservoir goes to SGD in random order.  An epoch
 * over N rows therefore feeds 2(N - R) + R updates (N when N <= R).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"
#include "utils/memutils.h"

#include "tupleshuffle.h"

static void
ensure_slots(TupleShuffleState *ts, int64 n)
{
	CpSlotStore *ss = &ts->slots;
	int64		cap;

	if (n <= ss->slot_cap)
		return;
	cap = Max(n, Max(1024, 2 * ss->slot_cap));
	if (ss->slot_row == NULL)
		ss->slot_row = MemoryContextAllocHuge(ts->buf_cxt, mul_size(sizeof(int64), cap));
	else
		ss->slot_row = repalloc_huge(ss->slot_row, mul_size(sizeof(int64), cap));
	ss->slot_cap = cap;
}

/* Drop the dead rows of the store once they outnumber the live ones. */
static void
compact(TupleShuffleState *ts)
{
	CpSlotStore *ss = &ts->slots;
	CpBuffer	fresh;

	if (ss->store.n_rows <= 2 * Max(ss->n_slots, 1024))
		return;
	tuple_shuffle_init_buffer(ts, &fresh, ts->buf_cxt);
	cp_buffer_reset(&fresh, ss->store.n_features);
	for (int64 j = 0; j < ss->n_slots; j++)
	{
		cp_buffer_append_row(&fresh, &ss->store, ss->slot_row[j]);
		ss->slot_row[j] = j;
		if ((j & 4095) == 4095)
			CHECK_FOR_INTERRUPTS();
	}
	cp_buffer_free(&ss->store);
	ss->store = fresh;
}

static inline int64
uniform(TupleShuffleState *ts, int64 n)
{
	return (int64) pg_prng_uint64_range(&ts->stream_rng, 0, (uint64) (n - 1));
}

/* The scan is over: the rows still held go out in random order. */
static void
drain(TupleShuffleState *ts, CpBuffer *out)
{
	CpSlotStore *ss = &ts->slots;

	for (int64 i = ss->n_slots - 1; i > 0; i--)
	{
		int64		j = uniform(ts, i + 1);
		int64		tmp = ss->slot_row[i];

		ss->slot_row[i] = ss->slot_row[j];
		ss->slot_row[j] = tmp;
	}
	for (int64 j = 0; j < ss->n_slots; j++)
	{
		cp_buffer_append_row(out, &ss->store, ss->slot_row[j]);
		if ((j & 4095) == 4095)
			CHECK_FOR_INTERRUPTS();
	}
	ss->n_slots = 0;
	ts->drained = true;
}

/* One row read: decide what goes to SGD. */
static void
take_row(TupleShuffleState *ts, int64 row, CpBuffer *out)
{
	CpSlotStore *ss = &ts->slots;

	ss->seen++;
	if (ss->n_slots < ss->capacity)
	{
		ensure_slots(ts, ss->n_slots + 1);
		ss->slot_row[ss->n_slots++] = row;
		return;
	}
	if (ts->shuffle == CP_SHUFFLE_SLIDING_WINDOW)
	{
		int64		j = uniform(ts, ss->n_slots);

		cp_buffer_append_row(out, &ss->store, ss->slot_row[j]);
		ss->slot_row[j] = row;
		return;
	}

	/* mrs: reservoir sampling, then one step of the memory worker */
	if (pg_prng_double(&ts->stream_rng) * (double) ss->seen < (double) ss->capacity)
	{
		int64		j = uniform(ts, ss->n_slots);

		cp_buffer_append_row(out, &ss->store, ss->slot_row[j]);
		ss->slot_row[j] = row;
	}
	else
		cp_buffer_append_row(out, &ss->store, row);
	cp_buffer_append_row(out, &ss->store, ss->slot_row[uniform(ts, ss->n_slots)]);
}

bool
window_fill(TupleShuffleState *ts, CpBuffer *out)
{
	CpSlotStore *ss = &ts->slots;

	if (ts->drained)
		return false;
	for (;;)
	{
		int64		first = ss->store.n_rows;

		if (!tuple_shuffle_read_group(ts, &ss->store))
		{
			drain(ts, out);
			return true;
		}
		/* the budget: the rows of the first group of blocks */
		if (ss->capacity == 0)
			ss->capacity = ss->store.n_rows - first;
		for (int64 r = first; r < ss->store.n_rows; r++)
		{
			take_row(ts, r, out);
			if (((r - first) & 4095) == 4095)
				CHECK_FOR_INTERRUPTS();
		}
		compact(ts);
		if (out->n_rows > 0)
			return true;
	}
}

void
window_rescan(TupleShuffleState *ts)
{
	CpSlotStore *ss = &ts->slots;

	ss->n_slots = 0;
	ss->seen = 0;
	cp_buffer_reset(&ss->store, ts->layout.n_features);
}
