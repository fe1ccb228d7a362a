/*
 * Instructions per row of the SGD step (cp_model_train), counted by
 * callgrind, which is repeatable on a machine shared with other work.
 * scripts/callgrind_epoch.sh builds and runs it; docs/engine-benchmark.md
 * has the figures.
 *
 * A buffer of NR rows x NF float8 features (the engine benchmark's shape),
 * trained on as an svm, once in storage order (no_shuffle, block_only) and
 * once in a shuffled order (corgipile: the rows are gathered into a small
 * scratch area before training).  Only cp_model_train is counted
 * (callgrind --toggle-collect=cp_model_train).
 *
 *   PGI=$($PG_CONFIG --includedir-server); PGL=$($PG_CONFIG --pkglibdir)
 *   cc -O2 -I extension -I $PGI -o /tmp/callgrind_sgd scripts/callgrind_sgd.c \
 *      extension/core/linear_model.c extension/core/shuffle.c \
 *      extension/core/grab.c -L $PGL -lpgcommon -lpgport -lm
 *   valgrind --tool=callgrind --toggle-collect=cp_model_train /tmp/callgrind_sgd ordered
 */
#include "c.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/pg_prng.h"
#include "core/linear_model.h"
#include "core/shuffle.h"

static void *
alloc_zero(Size size)
{
	return calloc(1, size);		/* leaked on purpose: a one-shot driver */
}

int
main(int argc, char **argv)
{
	enum
	{
		NR = 100000, NF = 28
	};
	bool		shuffled = (argc > 1 && strcmp(argv[1], "shuffled") == 0);
	CpBuffer	buf;
	CpModel		m;
	CpCancel	cancel;
	pg_prng_state rng;

	memset(&buf, 0, sizeof(buf));
	buf.n_rows = buf.cap_rows = NR;
	buf.n_features = NF;
	buf.labels = malloc(sizeof(double) * NR);
	buf.values = malloc(sizeof(double) * NR * NF);
	buf.order = malloc(sizeof(uint32) * NR);
	pg_prng_seed(&rng, 42);
	for (int64 i = 0; i < NR; i++)
	{
		buf.labels[i] = (i < NR / 2) ? 1.0 : -1.0;
		for (int j = 0; j < NF; j++)
			buf.values[i * NF + j] = pg_prng_double(&rng) * 2 - 1 + 0.3 * buf.labels[i];
	}
	cp_order_identity(buf.order, NR);
	buf.order_is_identity = !shuffled;
	if (shuffled)
		cp_shuffle_uint32(buf.order, NR, &rng);

	if (!cp_model_init(&m, CP_MODEL_SVM, NF, 1, false, 1, 1e-4, 0.0, alloc_zero))
		return 1;
	m.learning_rate = 0.01;
	cp_cancel_init(&cancel, NULL);
	if (cp_model_train(&m, &buf, 0, &cancel) != NR)
		return 1;
	printf("%s: %d rows x %d features, loss %.6f\n", shuffled ? "shuffled" : "ordered",
		   (int) NR, (int) NF, m.stats.loss_sum / m.stats.n);
	return 0;
}
