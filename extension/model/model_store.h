/*-------------------------------------------------------------------------
 *
 * model_store.h
 *	  What the model files share about corgipile.model_store: queries run as
 *	  its owner, and the rights of the current role on a model.
 *
 *-------------------------------------------------------------------------
 */
#ifndef CORGIPILE_MODEL_STORE_H
#define CORGIPILE_MODEL_STORE_H

#include "postgres.h"

extern uint64 cp_model_store_query(const char *sql, int nargs, Oid *argtypes,
								   Datum *args, const char *nulls,
								   bool read_only, int expected);
extern void cp_model_no_such(const char *model_name) pg_attribute_noreturn();
extern bool cp_model_may_use(Oid owner, const Oid *usage, int n_usage);
extern bool cp_model_may_see_data(Oid relid, Oid owner);
extern void cp_model_check_owner(const char *model_name, const char *action);

#endif							/* CORGIPILE_MODEL_STORE_H */
