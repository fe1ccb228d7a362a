/*-------------------------------------------------------------------------
 *
 * train.c
 *	  The SQL functions behind corgipile.train(): its planner support
 *	  function and its fallback implementation.
 *
 * Normally the planner never calls corgipile.train() itself: the hook in
 * planner.c replaces the call by the operators.  That needs constant
 * arguments.  When they are not constant at plan time (a generic plan of a
 * prepared statement, a call in a SELECT list, arguments from a column),
 * the function runs and plans the same call again through SPI with its
 * argument values bound as constants, which reaches the operators, and
 * returns the rows that produced.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "funcapi.h"
#include "nodes/supportnodes.h"
#include "utils/tuplestore.h"

#include "params.h"

PG_FUNCTION_INFO_V1(corgipile_train);
PG_FUNCTION_INFO_V1(corgipile_train_support);

/* set while the fallback's own query runs, to catch a loop */
static bool replanning = false;

static const Oid train_argtypes[CP_NUM_ARGS] = {
	REGCLASSOID, TEXTOID, TEXTOID, TEXTOID, TEXTOID, TEXTOID, INT4OID, TEXTOID,
	FLOAT8OID, FLOAT8OID, INT4OID, INT4OID, FLOAT8OID, TEXTOID, TEXTOID,
	INT8OID, BOOLOID, REGCLASSOID
};

Datum
corgipile_train(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	Datum		values[CP_NUM_ARGS];
	char		nulls[CP_NUM_ARGS];
	int			ret;

	if (replanning)
		ereport(ERROR,
				(errcode(ERRCODE_INTERNAL_ERROR),
				 errmsg("corgipile.train could not be planned with the corgipile operators"),
				 errhint("Check that the corgipile library is not disabled by another planner hook.")));

	InitMaterializedSRF(fcinfo, 0);
	for (int i = 0; i < CP_NUM_ARGS; i++)
	{
		values[i] = PG_GETARG_DATUM(i);
		nulls[i] = PG_ARGISNULL(i) ? 'n' : ' ';
	}

	SPI_connect();
	replanning = true;
	PG_TRY();
	{
		ret = SPI_execute_with_args("SELECT * FROM corgipile.train($1, $2, $3, $4, $5, $6, "
									"$7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18)",
									CP_NUM_ARGS, (Oid *) train_argtypes, values, nulls,
									false, 0);
	}
	PG_FINALLY();
	{
		replanning = false;
	}
	PG_END_TRY();
	if (ret != SPI_OK_SELECT)
		elog(ERROR, "corgipile.train: SPI_execute_with_args returned %d", ret);

	for (uint64 i = 0; i < SPI_processed; i++)
		tuplestore_puttuple(rsinfo->setResult, SPI_tuptable->vals[i]);
	SPI_finish();
	return (Datum) 0;
}

/*
 * Planner support: the row estimate is the number of epochs.  Being called
 * at all is what loads this library, and with it the planner hook, before
 * the planner builds the call's paths.
 */
Datum
corgipile_train_support(PG_FUNCTION_ARGS)
{
	Node	   *rawreq = (Node *) PG_GETARG_POINTER(0);

	if (IsA(rawreq, SupportRequestRows))
	{
		SupportRequestRows *req = (SupportRequestRows *) rawreq;

		if (req->node && IsA(req->node, FuncExpr))
		{
			List	   *args = ((FuncExpr *) req->node)->args;

			if (list_length(args) == CP_NUM_ARGS)
			{
				Node	   *arg = list_nth(args, CP_ARG_MAX_EPOCH_NUM);

				if (IsA(arg, Const) && !((Const *) arg)->constisnull)
				{
					req->rows = Max(1, DatumGetInt32(((Const *) arg)->constvalue));
					PG_RETURN_POINTER(req);
				}
			}
		}
	}
	PG_RETURN_POINTER(NULL);
}
