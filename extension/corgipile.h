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

#include "nodes/pathnodes.h"
#include "utils/relcache.h"

/* corgipile.progress: a NOTICE per epoch */
extern bool cp_progress_notices;

extern void cp_planner_init(void);
extern void cp_check_relation(Relation rel, const char *param);
extern void cp_check_select(Relation rel, Bitmapset *cols);
extern void cp_check_access_at_start(Relation rel, Bitmapset *cols, const char *param);
extern int	cp_pin_search_path(void);
extern void cp_restore_search_path(int nest);

/* piles of the two-pass shuffles: at most this many temporary files */
#define CP_MAX_PILES 1024

#endif							/* CORGIPILE_H */
