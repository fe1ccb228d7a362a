/*
 * What the standalone benchmark drivers of scripts/ (bench_gather.c,
 * bench_preprocess.c) share: an allocator for the core's CpAllocZero and
 * a monotonic clock.  Included after c.h.
 */
#ifndef CORGIPILE_BENCH_DRIVER_H
#define CORGIPILE_BENCH_DRIVER_H

#include <stdlib.h>
#include <time.h>

static void *
alloc_zero(Size size)
{
	return calloc(1, size);		/* leaked on purpose: a one-shot driver */
}

static double
now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

#endif							/* CORGIPILE_BENCH_DRIVER_H */
