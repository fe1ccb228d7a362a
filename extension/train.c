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
 * returns that cursor's rows one per call.
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
#include "utils/guc.h"
#include "utils/portal.h"

#include "corgipile.h"

#include "params.h"

PG_FUNCTION_INFO_V1(corgipile_train);
PG_FUNCTION_INFO_V1(corgipile_shuffled_scan);
PG_FUNCTION_INFO_V1(corgipile_train_support);

/* set while a fallback's own query is planned or runs, to catch a loop */
static bool replanning = false;

static const Oid train_argtypes[CP_NUM_ARGS] = {
	REGCLASSOID, TEXTOID, TEXTOID, TEXTOID, TEXTOID, TEXTOID, INT4OID, TEXTOID,
	FLOAT8OID, FLOAT8OID, INT4OID, INT4OID, FLOAT8OID, TEXTOID, TEXTOID,
	INT8OID, BOOLOID, REGCLASSOID, FLOAT8OID, FLOAT8OID, INT4OID
};

static const Oid scan_argtypes[5] = {
	REGCLASSOID, TEXTOID, TEXTOID, TEXTOID, INT8OID
};

static void
loop_error(const char *function)
{
	ereport(ERROR,
			(errcode(ERRCODE_INTERNAL_ERROR),
			 errmsg("corgipile.%s could not be planned with the corgipile operators",
					function),
			 errhint("Check that the corgipile library is not disabled by another planner hook.")));
}

/* The caller stopped early (LIMIT): drop the cursor, which trains no more. */
static void
close_cursor(Datum arg)
{
	Portal		portal = GetPortalByName(DatumGetCString(arg));

	if (PortalIsValid(portal))
		SPI_cursor_close(portal);
}

/*
 * Open a cursor on "SELECT * FROM corgipile.<function>($1, ...)" with this
 * call's argument values bound as constants (a custom plan), which the
 * planner turns into the operators.  Returns the cursor's name.
 */
static char *
open_cursor(FunctionCallInfo fcinfo, const char *function, int nargs,
			const Oid *types)
{
	Datum		values[CP_NUM_ARGS];
	char		nulls[CP_NUM_ARGS];
	StringInfoData sql;
	SPIPlanPtr	plan;
	Portal		portal;
	char	   *name;
	int			nest;
	MemoryContext caller = CurrentMemoryContext;

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

	nest = cp_pin_search_path();
	/* the arguments must reach the planner as constants, whatever the setting */
	(void) set_config_option("plan_cache_mode", "force_custom_plan",
							 PGC_USERSET, PGC_S_SESSION, GUC_ACTION_SAVE,
							 true, 0, false);
	SPI_connect();
	replanning = true;
	PG_TRY();
	{
		plan = SPI_prepare_cursor(sql.data, nargs, (Oid *) types,
								  CURSOR_OPT_CUSTOM_PLAN | CURSOR_OPT_NO_SCROLL);
		if (plan == NULL)
			elog(ERROR, "corgipile.%s: SPI_prepare_cursor failed: %s", function,
				 SPI_result_code_string(SPI_result));
		portal = SPI_cursor_open(NULL, plan, values, nulls, false);
	}
	PG_FINALLY();
	{
		replanning = false;
	}
	PG_END_TRY();
	name = MemoryContextStrdup(caller, portal->name);
	SPI_finish();
	cp_restore_search_path(nest);
	return name;
}

/*
 * The fallback of train() and shuffled_scan(): a set-returning function
 * that returns, one per call, the rows of a cursor on the same call with
 * constant arguments.  One row per call, rather than the whole result at
 * once, keeps the README's promise: a caller that stops early (a LIMIT in
 * the SELECT list's query, a cursor closed) stops the training before its
 * last epoch, and no model is stored.
 */
static Datum
replan(FunctionCallInfo fcinfo, const char *function, int nargs, const Oid *types)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	FuncCallContext *funcctx;
	char	   *name;
	Portal		portal;
	Datum		result;
	int			nest;

	if (SRF_IS_FIRSTCALL())
	{
		MemoryContext old;
		TupleDesc	desc;

		if (replanning)
			loop_error(function);
		funcctx = SRF_FIRSTCALL_INIT();
		old = MemoryContextSwitchTo(funcctx->multi_call_memory_ctx);
		if (get_call_result_type(fcinfo, NULL, &desc) != TYPEFUNC_COMPOSITE)
			elog(ERROR, "corgipile.%s must return a composite type", function);
		funcctx->tuple_desc = BlessTupleDesc(desc);
		name = open_cursor(fcinfo, function, nargs, types);
		funcctx->user_fctx = name;
		MemoryContextSwitchTo(old);
		if (rsinfo != NULL && IsA(rsinfo, ReturnSetInfo))
			RegisterExprContextCallback(rsinfo->econtext, close_cursor,
										CStringGetDatum(name));
	}
	funcctx = SRF_PERCALL_SETUP();
	name = (char *) funcctx->user_fctx;

	nest = cp_pin_search_path();
	SPI_connect();
	portal = SPI_cursor_find(name);
	if (portal == NULL)
		elog(ERROR, "corgipile.%s: cursor \"%s\" is gone", function, name);
	replanning = true;
	PG_TRY();
	{
		SPI_cursor_fetch(portal, true, 1);
	}
	PG_FINALLY();
	{
		replanning = false;
	}
	PG_END_TRY();
	if (SPI_processed == 0)
	{
		SPI_cursor_close(portal);
		SPI_finish();
		cp_restore_search_path(nest);
		SRF_RETURN_DONE(funcctx);
	}
	/* copied into the caller's memory, which outlives SPI_finish */
	result = PointerGetDatum(SPI_returntuple(SPI_tuptable->vals[0],
											 funcctx->tuple_desc));
	SPI_finish();
	cp_restore_search_path(nest);
	SRF_RETURN_NEXT(funcctx, result);
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
