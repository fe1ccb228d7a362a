/*-------------------------------------------------------------------------
 *
 * model_copy.h
 *	  A model row as every node of a cluster reads it (model_copy.c), and
 *	  its copies kept on the workers of a Citus coordinator (model_sync.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef CORGIPILE_MODEL_COPY_H
#define CORGIPILE_MODEL_COPY_H

#include "postgres.h"

extern char *cp_model_copy_doc(const char *model_name, bool for_hash);
extern char *cp_model_copy_hash(const char *doc);

extern void cp_model_sync_init(void);
extern void cp_model_sync_touch(const char *model_name);

#endif							/* CORGIPILE_MODEL_COPY_H */
