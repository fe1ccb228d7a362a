/*-------------------------------------------------------------------------
 *
 * merge.c
 *	  Model averaging for parallel training.
 *
 * The sums run in copy order, always the same order for the same inputs,
 * so the merged weights are bit-identical whichever process trained which
 * copy and whenever it finished.
 *
 *-------------------------------------------------------------------------
 */
#include "c.h"

#include "merge.h"

/*
 * out[j] = sum_c n_c * copies[c][j] / sum_c n_c, over the copies that
 * trained on rows (n_c = stats[c].n > 0).  copies holds n_copies arrays of
 * n_weights, one after the other.  With no rows at all, out is left as it
 * is (the round's starting weights).  out may not overlap copies.
 */
void
cp_merge_weighted(const double *copies, const CpStats *stats, int n_copies,
				  int n_weights, double *out)
{
	int64		n_total = 0;

	for (int c = 0; c < n_copies; c++)
		n_total += stats[c].n;
	if (n_total <= 0)
		return;
	for (int j = 0; j < n_weights; j++)
	{
		double		acc = 0.0;

		for (int c = 0; c < n_copies; c++)
			if (stats[c].n > 0)
				acc += (double) stats[c].n * copies[(Size) c * n_weights + j];
		out[j] = acc / (double) n_total;
	}
}

/* Add one copy's epoch figures to the epoch's. */
void
cp_stats_merge(CpStats *into, const CpStats *from)
{
	into->n += from->n;
	into->loss_sum += from->loss_sum;
	into->n_correct += from->n_correct;
	into->sum_y += from->sum_y;
	into->sum_y2 += from->sum_y2;
	into->sse += from->sse;
}
