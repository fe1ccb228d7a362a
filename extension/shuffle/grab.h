/*-------------------------------------------------------------------------
 *
 * grab.h
 *	  What the GraB strategy (shuffle/grab.c) exports beyond its table
 *	  entry: its GUCs, and the accessors SGD and parallel training use to
 *	  collect its per-block gradient sums and record its walk with the model
 *	  (docs/grab.md).  state is the strategy's, as TupleShuffle hands it
 *	  over (CpTupleSource.strategy_state).
 *
 *-------------------------------------------------------------------------
 */
#ifndef CORGIPILE_SHUFFLE_GRAB_H
#define CORGIPILE_SHUFFLE_GRAB_H

#include "postgres.h"

#include "commands/explain.h"

extern void cp_grab_define_gucs(void);
extern const char *cp_grab_buffer_choice(void *state);
extern bool cp_grab_last_walk(void *state, const uint32 **visit,
							  const int8 **signs, uint32 *n_blocks);
extern void cp_grab_set_first_order(void *state, const uint32 *order);
extern void cp_grab_set_unit_blocks(void *state, int32 unit_blocks);
extern uint32 cp_grab_n_units(void *state);
extern const uint32 *cp_grab_unit_map(void *state);
extern bool cp_grab_collects(void *state);
extern void cp_grab_plan_epoch(void *state, double rate, double mean_g2);
extern void cp_grab_choices(void *state, int32 *unit_blocks, int64 *epochs,
							int64 *epochs_kept, int64 *epochs_random,
							double *statistic, double *step);

#endif							/* CORGIPILE_SHUFFLE_GRAB_H */
