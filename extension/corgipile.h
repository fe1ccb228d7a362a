/*-------------------------------------------------------------------------
 *
 * corgipile.h
 *	  Settings shared across the extension.
 *
 *-------------------------------------------------------------------------
 */
#ifndef CORGIPILE_H
#define CORGIPILE_H

#include "postgres.h"

#include "nodes/extensible.h"
#include "nodes/pathnodes.h"
#include "storage/lockdefs.h"
#include "utils/relcache.h"

#include "util/spi.h"

/* corgipile.progress: a NOTICE per epoch */
extern bool cp_progress_notices;

extern void cp_planner_init(void);

/* train.c: a FROM-clause call with arguments known only at execution */
extern CustomScanMethods cp_call_scan_methods;
extern CustomScan *cp_call_make_plan(List *args, bool shuffled_scan, List *tlist,
									 List *scan_tlist, List *quals, Index rti);
extern Relation cp_open_relation(Oid relid, LOCKMODE lockmode, const char *param);
extern void cp_check_relation(Relation rel, const char *param);
extern void cp_check_select(Relation rel, Bitmapset *cols);
extern void cp_check_access_at_start(Relation rel, Bitmapset *cols, const char *param);

/* piles of the two-pass shuffles: at most this many temporary files */
#define CP_MAX_PILES 1024

#endif							/* CORGIPILE_H */
