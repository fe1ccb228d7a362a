/*-------------------------------------------------------------------------
 *
 * model_view.c
 *	  corgipile.may_see_model_data(relid, owner_id): for the models view,
 *	  whether the current role may see what a model holds of its training
 *	  rows.  The view calls the C rule (cp_model_may_see_data) that
 *	  predict, model_coefficients, warm_start and block_rows apply, so
 *	  there is one.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "fmgr.h"

#include "model/model_store.h"

PG_FUNCTION_INFO_V1(corgipile_may_see_model_data);

/*
 * corgipile.may_see_model_data(relid oid, owner_id oid) RETURNS boolean
 * Not STRICT: a model without a training relation has a NULL relid, and
 * its owner's rights decide.
 */
Datum
corgipile_may_see_model_data(PG_FUNCTION_ARGS)
{
	Oid			relid = PG_ARGISNULL(0) ? InvalidOid : PG_GETARG_OID(0);
	Oid			owner = PG_ARGISNULL(1) ? InvalidOid : PG_GETARG_OID(1);

	PG_RETURN_BOOL(cp_model_may_see_data(relid, owner));
}
