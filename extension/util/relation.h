/*-------------------------------------------------------------------------
 *
 * relation.h
 *	  Which relations corgipile reads, and whether the user may read them
 *	  (relation.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef CORGIPILE_UTIL_RELATION_H
#define CORGIPILE_UTIL_RELATION_H

#include "postgres.h"

#include "nodes/bitmapset.h"
#include "storage/lockdefs.h"
#include "utils/relcache.h"

extern Relation cp_open_relation(Oid relid, LOCKMODE lockmode, const char *param);
extern void cp_check_relation(Relation rel, const char *param);
extern void cp_check_select(Relation rel, Bitmapset *cols);
extern void cp_check_access_at_start(Relation rel, Bitmapset *cols, const char *param);

#endif							/* CORGIPILE_UTIL_RELATION_H */
