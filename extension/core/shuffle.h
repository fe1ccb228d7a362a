/*-------------------------------------------------------------------------
 *
 * shuffle.h
 *	  Permutations for BlockShuffle and TupleShuffle.
 *
 * Plain C over plain arrays, safe for the helper thread: the generator
 * state is passed in and owned by the caller.
 *
 *-------------------------------------------------------------------------
 */
#ifndef CORGIPILE_SHUFFLE_H
#define CORGIPILE_SHUFFLE_H

#include "c.h"
#include "common/pg_prng.h"

extern void cp_order_identity(uint32 *order, int64 n);
extern void cp_shuffle_uint32(uint32 *a, int64 n, pg_prng_state *rng);
extern uint64 cp_derive_seed(uint64 seed, uint64 stream);

#endif							/* CORGIPILE_SHUFFLE_H */
