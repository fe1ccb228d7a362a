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

/* corgipile.progress: a NOTICE per epoch */
extern bool cp_progress_notices;

extern void cp_planner_init(void);
extern void cp_check_relation(Relation rel, const char *param);
extern void cp_check_select(Relation rel, Bitmapset *cols);

#endif							/* CORGIPILE_H */
