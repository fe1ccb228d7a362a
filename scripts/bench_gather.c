/*
 * CPU seconds per row of a later epoch's training on rows borrowed from the
 * block cache, outside the server: the shapes of scripts/bench_epochs.py's
 * 2M x 28 table (2,560 cached blocks of 780 rows, each block's rows in its
 * own allocation as block_cache.c keeps them; buffers of 256 blocks lent
 * to the model through row_ptrs).  "ordered" trains each buffer in storage
 * order (no_shuffle's later epochs), "shuffled" in a random permutation of
 * each buffer (corgipile's: cp_model_train gathers the rows in chunks).
 * For exploring the gather (prefetch distance, chunk size) on a machine
 * too noisy for the engine benchmark; the figures that go into docs come
 * from scripts/bench_epochs.py.  docs/engine-benchmark.md says how it was
 * used.
 *
 *   PGI=$($PG_CONFIG --includedir-server); PGL=$($PG_CONFIG --pkglibdir)
 *   cc -O2 -I extension -I $PGI -o /tmp/bench_gather scripts/bench_gather.c \
 *      extension/core/linear_model.c extension/core/shuffle.c \
 *      extension/core/grab.c -L $PGL -lpgcommon -lpgport -lm -pthread
 *   /tmp/bench_gather [EPOCHS]
 */
#include "c.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/pg_prng.h"
#include "core/linear_model.h"
#include "core/shuffle.h"
#include "bench_driver.h"

/*
 * The thread's CPU seconds, not the wall clock's: on a machine shared with
 * other work a wall-clock figure counts the time the process waited for a
 * core (8-12 times the CPU time at a load average of 12 on 2 cores).
 */
static double
cpu_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

enum
{
	NB = 2560, RPB = 780, NF = 28, GROUP = 256
};

static int
cmp_double(const void *a, const void *b)
{
	double		x = *(const double *) a,
				y = *(const double *) b;

	return (x > y) - (x < y);
}

int
main(int argc, char **argv)
{
	int			epochs = argc > 1 ? atoi(argv[1]) : 5;
	double	   *values[NB],
			   *labels[NB];
	uint32		block_order[NB];
	CpBuffer	buf;
	CpModel		m;
	CpCancel	cancel;
	pg_prng_state rng;
	double		t_ord[64],
				t_shuf[64];

	if (epochs < 1 || epochs > 64)
		return 1;
	pg_prng_seed(&rng, 42);
	for (int b = 0; b < NB; b++)
	{
		values[b] = malloc(sizeof(double) * RPB * NF);
		labels[b] = malloc(sizeof(double) * RPB);
		for (int r = 0; r < RPB; r++)
		{
			labels[b][r] = (b < NB / 2) ? 1.0 : -1.0;
			for (int j = 0; j < NF; j++)
				values[b][r * NF + j] = pg_prng_double(&rng) * 2 - 1 + 0.3 * labels[b][r];
		}
	}
	memset(&buf, 0, sizeof(buf));
	buf.cap_rows = GROUP * RPB;
	buf.n_features = NF;
	buf.labels = malloc(sizeof(double) * buf.cap_rows);
	buf.order = malloc(sizeof(uint32) * buf.cap_rows);
	buf.row_ptr_store = malloc(sizeof(double *) * buf.cap_rows);
	if (!cp_model_init(&m, CP_MODEL_SVM, NF, 1, false, 1, 1e-4, 0.0, alloc_zero))
		return 1;
	m.learning_rate = 0.01;
	cp_cancel_init(&cancel, NULL);

	for (int e = 0; e < epochs; e++)
	{
		for (int shuffled = 0; shuffled <= 1; shuffled++)
		{
			double		t = 0;

			cp_order_identity(block_order, NB);
			cp_shuffle_uint32(block_order, NB, &rng);
			for (int g = 0; g < NB; g += GROUP)
			{
				double		t0;

				buf.n_rows = 0;
				buf.row_ptrs = buf.row_ptr_store;
				for (int k = g; k < g + GROUP && k < NB; k++)
				{
					uint32		b = shuffled ? block_order[k] : (uint32) k;

					memcpy(buf.labels + buf.n_rows, labels[b], sizeof(double) * RPB);
					for (int r = 0; r < RPB; r++)
						buf.row_ptr_store[buf.n_rows + r] = values[b] + r * NF;
					buf.n_rows += RPB;
				}
				cp_order_identity(buf.order, (uint32) buf.n_rows);
				buf.order_is_identity = !shuffled;
				if (shuffled)
					cp_shuffle_uint32(buf.order, (uint32) buf.n_rows, &rng);
				t0 = cpu_now();
				if (cp_model_train(&m, &buf, 0, &cancel) != buf.n_rows)
					return 1;
				t += cpu_now() - t0;
			}
			(shuffled ? t_shuf : t_ord)[e] = t * 1e9 / ((double) NB * RPB);
		}
	}
	qsort(t_ord, epochs, sizeof(double), cmp_double);
	qsort(t_shuf, epochs, sizeof(double), cmp_double);
	printf("ns/row ordered min %.1f median %.1f, shuffled min %.1f median %.1f, "
		   "ratio of medians %.2f (loss %.6f)\n",
		   t_ord[0], t_ord[epochs / 2], t_shuf[0], t_shuf[epochs / 2],
		   t_shuf[epochs / 2] / t_ord[epochs / 2], m.stats.loss_sum / m.stats.n);
	return 0;
}
