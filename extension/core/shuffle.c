/*-------------------------------------------------------------------------
 *
 * shuffle.c
 *	  Fisher-Yates shuffles and seed derivation.
 *
 *-------------------------------------------------------------------------
 */
#include "c.h"

#include "shuffle.h"

void
cp_order_identity(uint32 *order, int64 n)
{
	for (int64 i = 0; i < n; i++)
		order[i] = (uint32) i;
}

/*
 * Uniform in-place Fisher-Yates shuffle.  pg_prng_uint64_range() is
 * unbiased, so every permutation is equally likely.
 */
void
cp_shuffle_uint32(uint32 *a, int64 n, pg_prng_state *rng)
{
	for (int64 i = n - 1; i > 0; i--)
	{
		int64		j = (int64) pg_prng_uint64_range(rng, 0, (uint64) i);
		uint32		tmp = a[i];

		a[i] = a[j];
		a[j] = tmp;
	}
}

/*
 * Derive an independent seed for one stream (block order, tuple order) from
 * the user's seed, so that the streams do not replay each other.  This is
 * the splitmix64 finaliser applied to the seed offset by the stream number.
 */
uint64
cp_derive_seed(uint64 seed, uint64 stream)
{
	uint64		z = seed + (stream + 1) * UINT64CONST(0x9E3779B97F4A7C15);

	z = (z ^ (z >> 30)) * UINT64CONST(0xBF58476D1CE4E5B9);
	z = (z ^ (z >> 27)) * UINT64CONST(0x94D049BB133111EB);
	return z ^ (z >> 31);
}
