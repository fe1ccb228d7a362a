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

/*
 * The next draw of a pg_prng_state, computed here rather than through a
 * call into the server for each element: the permutation of a buffer of
 * 200,000 rows is that many draws, and the calls (with the loop around
 * them) cost more than the arithmetic.  It must give exactly what
 * pg_prng_uint64_range(state, 0, range) gives, since a seed's tuple order,
 * and so its weights, depend on every draw: the generator is PostgreSQL's,
 * xoroshiro128** 1.0 (Blackman and Vigna), and a value above range is
 * rejected after the same shift.  tests/unit/test_core.c compares the two.
 */
static inline uint64
rotate_left(uint64 x, int bits)
{
	return (x << bits) | (x >> (64 - bits));
}

static inline uint64
draw_below_or_at(pg_prng_state *state, uint64 range, int shift)
{
	uint64		val;

	do
	{
		uint64		s0 = state->s0;
		uint64		sx = state->s1 ^ s0;

		val = rotate_left(s0 * 5, 7) * 9;
		state->s0 = rotate_left(s0, 24) ^ sx ^ (sx << 16);
		state->s1 = rotate_left(sx, 37);
		val >>= shift;
	} while (val > range);
	return val;
}

/*
 * Uniform in-place Fisher-Yates shuffle, drawing as pg_prng_uint64_range()
 * does (unbiased: every permutation is equally likely).
 */
void
cp_shuffle_uint32(uint32 *a, int64 n, pg_prng_state *rng)
{
	for (int64 i = n - 1; i > 0; i--)
	{
		int64		j = (int64) draw_below_or_at(rng, (uint64) i,
												 63 - pg_leftmost_one_pos64((uint64) i));
		uint32		tmp = a[i];

		a[i] = a[j];
		a[j] = tmp;
	}
}

uint64
cp_derive_seed(uint64 seed, uint64 stream)
{
	uint64		z = seed + (stream + 1) * UINT64CONST(0x9E3779B97F4A7C15);

	z = (z ^ (z >> 30)) * UINT64CONST(0xBF58476D1CE4E5B9);
	z = (z ^ (z >> 27)) * UINT64CONST(0x94D049BB133111EB);
	return z ^ (z >> 31);
}
