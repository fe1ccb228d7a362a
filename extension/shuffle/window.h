/*-------------------------------------------------------------------------
 *
 * window.h
 *	  What sliding_window and mrs share: a fixed number of slots over an
 *	  append-only store of rows, filled by a sequential read.
 *
 *-------------------------------------------------------------------------
 */
#ifndef CORGIPILE_SHUFFLE_WINDOW_H
#define CORGIPILE_SHUFFLE_WINDOW_H

#include "shuffle/strategy.h"

/*
 * The window of sliding_window and the reservoir of mrs: a fixed number of
 * slots, each naming a row of an append-only store.  Replacing a slot
 * appends the new row and leaves the old one dead; the store is compacted
 * when dead rows outnumber live ones, which also works for sparse rows of
 * varying length.
 */
typedef struct CpWindow
{
	const CpStrategyEnv *env;
	CpBuffer	store;
	int64	   *slot_row;		/* slot -> row of store */
	int64		slot_cap;		/* entries allocated in slot_row */
	int64		n_slots;		/* slots in use */
	int64		capacity;		/* slots; 0 until the first blocks set it */
	int64		seen;			/* rows scanned this epoch (mrs) */
	pg_prng_state rng;			/* the strategy's choices: main thread only */
	bool		drained;		/* the epoch's rows have all gone out */
} CpWindow;

/*
 * A row read once the window is full: send rows to out.  row is the new
 * row's place in the store.
 */
typedef void (*CpWindowTakeFn) (CpWindow *w, int64 row, CpBuffer *out);

extern void *cp_window_begin(const CpStrategyEnv *env);
extern void cp_window_seed(void *state, uint64 seed);
extern bool cp_window_fill(CpWindow *w, CpBuffer *out, CpWindowTakeFn take);
extern void cp_window_rescan(void *state);
extern int64 cp_window_held_rows(void *state);

static inline int64
cp_window_uniform(CpWindow *w, int64 n)
{
	return (int64) pg_prng_uint64_range(&w->rng, 0, (uint64) (n - 1));
}

#endif							/* CORGIPILE_SHUFFLE_WINDOW_H */
