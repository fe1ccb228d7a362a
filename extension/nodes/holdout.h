/*-------------------------------------------------------------------------
 *
 * holdout.h
 *	  validation => 'N%': the rows of the training table held out for
 *	  validation, decided per row by core/preprocess.c's cp_prep_holdout
 *	  from the run's seed and the row's ctid.
 *
 * TupleShuffle asks cp_holdout_take() about every row it reads (one place,
 * its read_group), so held-out rows never reach a training buffer, whatever
 * the strategy: the strategies that copy the table read it through the
 * same function.  During the first epoch the held-out rows are also kept,
 * converted, in a buffer of at most maintenance_work_mem; SGD scores them
 * after every epoch (cp_holdout_score).  A holdout larger than that budget
 * is not kept: it is read again from the table for each scoring.  So is
 * it with parallel workers (workers > 1), where each process reads only
 * the blocks it claims: every process skips the held-out rows of its
 * blocks, and the leader scores them all by reading the table.
 *
 * Anything else that must not see the held-out rows (preprocessing's
 * statistics pass) asks cp_holdout_is_held_out() with the same seed.
 *
 *-------------------------------------------------------------------------
 */
#ifndef CORGIPILE_HOLDOUT_H
#define CORGIPILE_HOLDOUT_H

#include "postgres.h"

#include "executor/tuptable.h"
#include "storage/itemptr.h"
#include "utils/rel.h"
#include "utils/snapshot.h"

#include "core/buffer.h"
#include "core/linear_model.h"
#include "io/layout.h"

typedef struct CpHoldout
{
	uint64		seed;			/* the run's seed (recorded with the model) */
	double		fraction;		/* (0, 1) */
	bool		complete;		/* the first epoch has been read */
	bool		reread;			/* over budget: score by reading the table */
	Size		budget;			/* bytes the kept rows may take */
	int64		n_seen;			/* held-out rows met in the first epoch */
	CpBuffer	rows;			/* the held-out rows, once complete */
} CpHoldout;

extern void cp_holdout_init(CpHoldout *h, double fraction, bool sparse,
							MemoryContext cxt);
extern bool cp_holdout_is_held_out(const CpHoldout *h, ItemPointer tid);
extern bool cp_holdout_take(CpHoldout *h, ItemPointer tid, bool *keep);
extern void cp_holdout_keep(CpHoldout *h, CpLayout *lo, TupleTableSlot *slot);
extern void cp_holdout_epoch_done(CpHoldout *h);
struct CpBlockCache;
extern void cp_holdout_keep_cached(CpHoldout *h, const struct CpBlockCache *cache,
								   uint32 block);
extern char *cp_holdout_report(CpHoldout *h, const CpLayout *lo, Relation rel,
							   Snapshot snapshot, CpBuffer *batch,
							   MemoryContext row_cxt, const CpModel *model,
							   double *w, int epoch, char **summary);
extern void cp_holdout_score(CpHoldout *h, const CpLayout *lo, Relation rel,
							 Snapshot snapshot, CpBuffer *batch, int64 batch_rows,
							 MemoryContext row_cxt, CpBatchFn fn, void *arg);

#endif							/* CORGIPILE_HOLDOUT_H */
