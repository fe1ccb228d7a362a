/*-------------------------------------------------------------------------
 *
 * merge.h
 *	  Model averaging for parallel training (docs/parallel.md): the copies
 *	  trained from the same weights in one round, merged into one, weighted
 *	  by the rows each trained on (MADlib's merge).
 *
 * Plain C over caller-prepared arrays, like the rest of core/.
 *
 *-------------------------------------------------------------------------
 */
#ifndef CORGIPILE_MERGE_H
#define CORGIPILE_MERGE_H

#include "c.h"

#include "linear_model.h"

extern void cp_merge_weighted(const double *copies, const CpStats *stats,
							  int n_copies, int n_weights, double *out);
extern void cp_stats_merge(CpStats *into, const CpStats *from);

#endif							/* CORGIPILE_MERGE_H */
