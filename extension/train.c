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
#include "lib/stringinfo.h"
#include "utils/tuplestore.h"

#include "params.h"

PG_FUNCTION_INFO_V1(corgipile_train);
PG_FUNCTION_INFO_V1(corgipile_shuffled_scan);
PG_FUNCTION_INFO_V1(corgipile_train_support);

/* set while a fallback's own query runs, to catch a loop */
static bool replanning = false;

static const Oid train_argtypes[CP_NUM_ARGS] = {
	REGCLASSOID, TEXTOID, TEXTOID, TEXTOID, TEXTOID, TEXTOID, INT4OID, TEXTOID,
	FLOAT8OID, FLOAT8OID, INT4OID, INT4OID, FLOAT8OID, TEXTOID, TEXTOID,
	INT8OID, BOOLOID, REGCLASSOID, FLOAT8OID, FLOAT8OID, INT4OID
};

static const Oid scan_argtypes[5] = {
	REGCLASSOID, TEXTOID, TEXTOID, TEXTOID, INT8OID
};

/*
 * Run "SELECT * FROM corgipile.<function>($1, ...)" with this call's
 * argument values bound, which the planner turns into the operators, and
 * return its rows.
 */
static Datum
replan(FunctionCallInfo fcinfo, const char *function, int nargs, const Oid *types)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	Datum		values[CP_NUM_ARGS];
	char		nulls[CP_NUM_ARGS];
	StringInfoData sql;
	int			ret;

	if (replanning)
		ereport(ERROR,
				(errcode(ERRCODE_INTERNAL_ERROR),
				 errmsg("corgipile.%s could not be planned with the corgipile operators",
						function),
				 errhint("Check that the corgipile library is not disabled by another planner hook.")));

	InitMaterializedSRF(fcinfo, 0);
	initStringInfo(&sql);
	appendStringInfo(&sql, "SELECT * FROM corgipile.%s(", function);
	Assert(nargs <= CP_NUM_ARGS);
	for (int i = 0; i < nargs; i++)
	{
		values[i] = PG_GETARG_DATUM(i);
		nulls[i] = PG_ARGISNULL(i) ? 'n' : ' ';
		appendStringInfo(&sql, "%s$%d", i > 0 ? ", " : "", i + 1);
	}
	appendStringInfoChar(&sql, ')');

	SPI_connect();
	replanning = true;
	PG_TRY();
	{
		ret = SPI_execute_with_args(sql.data, nargs, (Oid *) types, values, nulls,
									false, 0);
	}
	PG_FINALLY();
	{
		replanning = false;
	}
	PG_END_TRY();
	if (ret != SPI_OK_SELECT)
		elog(ERROR, "corgipile.%s: SPI_execute_with_args returned %d", function, ret);

	for (uint64 i = 0; i < SPI_processed; i++)
		tuplestore_puttuple(rsinfo->setResult, SPI_tuptable->vals[i]);
	SPI_finish();
	return (Datum) 0;
}

Datum
corgipile_train(PG_FUNCTION_ARGS)
{
	return replan(fcinfo, "train", CP_NUM_ARGS, train_argtypes);
}

Datum
corgipile_shuffled_scan(PG_FUNCTION_ARGS)
{
	return replan(fcinfo, "shuffled_scan", lengthof(scan_argtypes), scan_argtypes);
}

/*
 * Planner support for train() and shuffled_scan(): train()'s row estimate
 * is the number of epochs.  Being called at all is what loads this library,
 * and with it the planner hook, before the planner builds the call's paths.
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
