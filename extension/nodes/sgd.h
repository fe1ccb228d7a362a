/*-------------------------------------------------------------------------
 *
 * sgd.h
 *	  The SGD operator: epochs of training over TupleShuffle's buffers, one
 *	  output row per epoch.
 *
 *-------------------------------------------------------------------------
 */
#ifndef CORGIPILE_SGD_H
#define CORGIPILE_SGD_H

#include "postgres.h"

#include "executor/tuptable.h"
#include "nodes/extensible.h"

#include "params/params.h"

/* corgipile.progress: a NOTICE per epoch (the GUC is defined at load) */
extern bool cp_progress_notices;
extern bool cp_polish_enabled;
extern int	cp_polish_max_passes;

extern CustomScanMethods cp_sgd_scan_methods;

extern CustomScan *cp_sgd_make_plan(Const *params, CustomScan *child, List *tlist,
								 List *scan_tlist, List *quals, Index rti);

/* sgd_epoch.c: the epochs max_epoch_num => NULL gives a table of this many rows */
extern int32 cp_sgd_default_epochs(int64 rows);

struct CpEpochResult;
extern TupleTableSlot *cp_sgd_epoch_row(TupleTableSlot *slot, Datum model_name,
										const struct CpEpochResult *res, bool polish);

/* sgd_validate.c: the stopping rule train()'s parameters ask for, if any */
struct CpConvergence;
extern bool cp_sgd_stop_rule_init(const CpTrainParams *p, struct CpConvergence *conv);

#endif							/* CORGIPILE_SGD_H */
