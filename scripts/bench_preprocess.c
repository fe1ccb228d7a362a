/*
 * Cost of the preprocessing core per value: statistics (Welford), the
 * dense transform, the sparse scale and the holdout hash.  Not part of
 * make unittest; figures go into docs/preprocessing.md.
 *
 *   PGI=$($PG_CONFIG --includedir-server); PGL=$($PG_CONFIG --pkglibdir)
 *   cc -O2 -I extension -I $PGI -o /tmp/bench_preprocess \
 *      scripts/bench_preprocess.c extension/core/preprocess.c \
 *      -L $PGL -lpgcommon -lpgport -lm && /tmp/bench_preprocess
 */
#include "c.h"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "core/preprocess.h"
#include "bench_driver.h"

int
main(void)
{
	enum
	{
		NR = 200000, NF = 28
	};
	double	   *x = malloc(sizeof(double) * NR * NF);
	int32	   *idx = malloc(sizeof(int32) * NR * NF);
	CpPrepStats st;
	CpPrepTransform t;
	CpPrepTransform ts;
	double		t0,
				sink = 0;
	int64		held = 0;

	for (int64 i = 0; i < (int64) NR * NF; i++)
	{
		x[i] = (double) ((i * 2654435761u) % 1000) * 0.37 + (double) (i % NF);
		idx[i] = (int32) (i % NF);
	}
	cp_prep_stats_init(&st, NF, alloc_zero);
	t0 = now();
	for (int i = 0; i < NR; i++)
		cp_prep_stats_add_dense(&st, x + (int64) i * NF);
	printf("stats dense:   %.2f ns/value\n", (now() - t0) * 1e9 / ((double) NR * NF));

	cp_prep_transform_init(&t, NF, true, alloc_zero);
	cp_prep_transform_from_stats(&t, &st, NULL, NULL, NULL, NULL);
	t0 = now();
	for (int i = 0; i < NR; i++)
		cp_prep_apply_dense(&t, x + (int64) i * NF);
	printf("apply dense:   %.2f ns/value\n", (now() - t0) * 1e9 / ((double) NR * NF));

	/* the same on rows already in cache, as right after a row's conversion */
	t0 = now();
	for (int rep = 0; rep < 200; rep++)
		for (int i = 0; i < 1000; i++)
			cp_prep_apply_dense(&t, x + (int64) i * NF);
	printf("apply dense, in cache: %.2f ns/value\n", (now() - t0) * 1e9 / (200000.0 * NF));

	cp_prep_transform_init(&ts, NF, false, alloc_zero);
	cp_prep_transform_from_stats(&ts, &st, NULL, NULL, NULL, NULL);
	t0 = now();
	cp_prep_apply_sparse(&ts, idx, x, (int64) NR * NF);
	printf("apply sparse:  %.2f ns/value\n", (now() - t0) * 1e9 / ((double) NR * NF));

	t0 = now();
	for (int i = 0; i < NR * 10; i++)
		held += cp_prep_holdout(42, (uint32) (i / 100), (uint16) (i % 100 + 1), 0.2);
	printf("holdout:       %.2f ns/row (%.4f held out)\n",
		   (now() - t0) * 1e9 / (NR * 10.0), held / (NR * 10.0));
	for (int64 i = 0; i < (int64) NR * NF; i += 4096)
		sink += x[i];
	return sink == 12345.678;
}
