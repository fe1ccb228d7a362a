/*-------------------------------------------------------------------------
 *
 * shuffle.c
 *	  Fisher-Yates shuffles and seed derivation.
 *
 *-------------------------------------------------------------------------
 */
#include "c.h"

#include "port/pg_bitutils.h"

#include "shuffle.h"

void
cp_order_identity(uint32 *order, int64 n)
{
	for (int64 i = 0; i < n; i++)
		order[i] = (uint32) i;
}

static inline uint64
rotate_left(uint64 x, int bits)
{
	return (x << bits) | (x >> (64 - bits));
}

/*
 * Uniform in-place Fisher-Yates shuffle, drawing as pg_prng_uint64_range()
 * does (unbiased: every permutation is equally likely).
 *
 * The draws are computed here rather than through a call into the server
 * for each element: the permutation of a buffer of 200,000 rows is that
 * many draws, and the calls (with the loop around them) cost more than the
 * arithmetic.  They must be exactly those of pg_prng_uint64_range(state,
 * 0, i), since a seed's tuple order, and so its weights, depend on every
 * draw: the generator is PostgreSQL's, xoroshiro128** 1.0 (Blackman and
 * Vigna), and a value above i is rejected after the same shift.
 *
 * Written without a branch on the rejection: a draw above i is rejected
 * about a quarter of the time, at random, so a loop that draws until it
 * accepts mispredicts its exit that often.  Here each pass of the loop
 * makes one draw; a rejected one swaps a[i] with itself and leaves i where
 * it is, an accepted one swaps a[i] with a[j] and moves on: the same
 * draws, the same swaps and the same final state of the generator as a
 * loop of pg_prng_uint64_range (tests/unit/test_core.c compares them), in
 * about 25% less time on a buffer of 200,000 rows (5.6 to 4.2 ns an
 * element; docs/engine-benchmark.md).
 */
void
cp_shuffle_uint32(uint32 *a, int64 n, pg_prng_state *rng)
{
	uint64		s0 = rng->s0;
	uint64		s1 = rng->s1;
	int64		i = n - 1;

	while (i > 0)
	{
		uint64		sx = s1 ^ s0;
		uint64		val = rotate_left(s0 * 5, 7) * 9;
		bool		accept;
		int64		j;
		uint32		tmp;

		s0 = rotate_left(s0, 24) ^ sx ^ (sx << 16);
		s1 = rotate_left(sx, 37);
		val >>= 63 - pg_leftmost_one_pos64((uint64) i);
		accept = (val <= (uint64) i);
		j = accept ? (int64) val : i;
		tmp = a[i];
		a[i] = a[j];
		a[j] = tmp;
		i -= accept;
	}
	rng->s0 = s0;
	rng->s1 = s1;
}

uint64
cp_derive_seed(uint64 seed, uint64 stream)
{
	uint64		z = seed + (stream + 1) * UINT64CONST(0x9E3779B97F4A7C15);

	z = (z ^ (z >> 30)) * UINT64CONST(0xBF58476D1CE4E5B9);
	z = (z ^ (z >> 27)) * UINT64CONST(0x94D049BB133111EB);
	return z ^ (z >> 31);
}
