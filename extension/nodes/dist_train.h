/*-------------------------------------------------------------------------
 *
 * dist_train.h
 *	  corgipile.train() on a Citus distributed table: the coordinator's
 *	  plan node (dist_train.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef CORGIPILE_DIST_TRAIN_H
#define CORGIPILE_DIST_TRAIN_H

#include "postgres.h"

#include "nodes/extensible.h"
#include "nodes/pg_list.h"
#include "nodes/primnodes.h"

#include "params/params.h"

extern int	cp_dist_local_epochs;
extern CustomScanMethods cp_dist_scan_methods;

extern void cp_dist_train_init(void);
extern void cp_dist_check_params(const CpTrainParams *p, const char *relname);
extern List *cp_dist_args_text(List *args);
extern CustomScan *cp_dist_make_plan(Const *params, List *args_text, List *tlist,
									 List *scan_tlist, List *quals, Index rti);

#endif							/* CORGIPILE_DIST_TRAIN_H */
