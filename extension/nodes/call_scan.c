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
#include "commands/explain.h"
#include "executor/executor.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "funcapi.h"
#include "nodes/extensible.h"
#include "nodes/makefuncs.h"
#include "nodes/supportnodes.h"
#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "utils/guc.h"
#include "utils/portal.h"
#include "utils/tuplestore.h"

#include "nodes/call_scan.h"
#include "util/spi.h"

#include "params/params.h"

PG_FUNCTION_INFO_V1(corgipile_train);
PG_FUNCTION_INFO_V1(corgipile_shuffled_scan);
PG_FUNCTION_INFO_V1(corgipile_train_support);

/* set while a fallback's own query is planned or runs, to catch a loop */
static bool replanning = false;

/* generated from the one list of train()'s parameters (train_args.h) */
#define CP_ARG_TYPE(id, name, type, isnull, datum, sqldefault) type,
static const Oid train_argtypes[CP_NUM_ARGS] = {
	CP_TRAIN_ARGS(CP_ARG_TYPE)
};
#undef CP_ARG_TYPE

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
 * Open a cursor on "SELECT * FROM corgipile.<function>($1, ...)" with the
 * argument values bound as constants (a custom plan), which the planner
 * turns into the operators.  Returns the cursor's name, in the caller's
 * memory.
 */
static char *
open_cursor(const char *function, int nargs, const Oid *types,
			Datum *values, const bool *isnull)
{
	char		nulls[CP_NUM_ARGS];
	StringInfoData sql;
	SPIPlanPtr	plan;
	Portal		portal;
	char	   *name;
	int			nest;
	MemoryContext caller = CurrentMemoryContext;

	if (replanning)
		loop_error(function);
	initStringInfo(&sql);
	appendStringInfo(&sql, "SELECT * FROM corgipile.%s(", function);
	Assert(nargs <= CP_NUM_ARGS);
	for (int i = 0; i < nargs; i++)
	{
		nulls[i] = isnull[i] ? 'n' : ' ';
		appendStringInfo(&sql, "%s$%d", i > 0 ? ", " : "", i + 1);
	}
	appendStringInfoChar(&sql, ')');

	/* a validation relation's name means what it means to the caller */
	if (strcmp(function, "train") == 0 && !isnull[CP_ARG_VALIDATION])
		values[CP_ARG_VALIDATION] = cp_qualify_validation(values[CP_ARG_VALIDATION]);

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
 * The cursor's next row, copied into the caller's memory, or NULL (and the
 * cursor closed) at its end.  Each row is one epoch trained.
 */
static HeapTuple
fetch_row(const char *function, const char *name)
{
	Portal		portal;
	HeapTuple	tuple;
	int			nest;

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
		tuple = NULL;
	}
	else
		tuple = SPI_copytuple(SPI_tuptable->vals[0]);	/* caller's memory */
	SPI_finish();
	cp_restore_search_path(nest);
	return tuple;
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
	HeapTuple	tuple;

	if (SRF_IS_FIRSTCALL())
	{
		MemoryContext old;
		TupleDesc	desc;
		Datum		values[CP_NUM_ARGS];
		bool		nulls[CP_NUM_ARGS];
		char	   *name;

		funcctx = SRF_FIRSTCALL_INIT();
		old = MemoryContextSwitchTo(funcctx->multi_call_memory_ctx);
		if (get_call_result_type(fcinfo, NULL, &desc) != TYPEFUNC_COMPOSITE)
			elog(ERROR, "corgipile.%s must return a composite type", function);
		funcctx->tuple_desc = BlessTupleDesc(desc);
		for (int i = 0; i < nargs; i++)
		{
			values[i] = PG_GETARG_DATUM(i);
			nulls[i] = PG_ARGISNULL(i);
		}
		name = open_cursor(function, nargs, types, values, nulls);
		funcctx->user_fctx = name;
		MemoryContextSwitchTo(old);
		if (rsinfo != NULL && IsA(rsinfo, ReturnSetInfo))
			RegisterExprContextCallback(rsinfo->econtext, close_cursor,
										CStringGetDatum(name));
	}
	funcctx = SRF_PERCALL_SETUP();
	tuple = fetch_row(function, (char *) funcctx->user_fctx);
	if (tuple == NULL)
	{
		/*
		 * The cursor is closed, and SRF_RETURN_DONE frees its name with the
		 * call's memory: the callback that would close it goes first, or it
		 * would read the freed name at the caller's shutdown.
		 */
		if (rsinfo != NULL && IsA(rsinfo, ReturnSetInfo))
			UnregisterExprContextCallback(rsinfo->econtext, close_cursor,
										  PointerGetDatum(funcctx->user_fctx));
		SRF_RETURN_DONE(funcctx);
	}
	SRF_RETURN_NEXT(funcctx, heap_copy_tuple_as_datum(tuple, funcctx->tuple_desc));
}

Datum
corgipile_train(PG_FUNCTION_ARGS)
{
	/* an older catalog's signature: reading CP_NUM_ARGS would overrun */
	if (PG_NARGS() != CP_NUM_ARGS)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("the corgipile extension in this database is older than its library"),
				 errdetail("corgipile.train takes %d arguments; this library's takes %d.",
						   PG_NARGS(), CP_NUM_ARGS),
				 errhint("Run ALTER EXTENSION corgipile UPDATE.")));
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

/*
 * A FROM-clause call whose arguments are not constants at plan time (a
 * generic plan of a prepared statement, a parameter of a plpgsql function,
 * a scalar subquery) would be a function scan, which runs a set-returning
 * function to its end before returning its first row: all epochs, and the
 * model stored, even under a LIMIT 1.  The planner gives such a call this
 * node instead.  At its first row it evaluates the arguments, opens the
 * same cursor as the fallback, and from then on returns one row (one
 * epoch) per call, so a caller that stops early stops the training, and
 * ending the node before the cursor is exhausted closes it: no model.
 *
 * A rescan replays the rows already returned, then goes on fetching, as
 * SGD itself does; when a parameter of the arguments changed, it starts a
 * new call instead.
 */
typedef struct CpCallState
{
	CustomScanState css;
	const char *function;
	int			nargs;
	const Oid  *types;
	List	   *arg_states;		/* ExprState per argument */
	char	   *cursor;			/* NULL until the first row, and after the end */
	bool		done;			/* the cursor is exhausted */
	Tuplestorestate *seen;		/* rows returned so far, for a rescan */
	bool		replaying;
	TupleTableSlot *store_slot;
} CpCallState;

static Node *cp_call_create_state(CustomScan *cscan);
static void cp_call_begin(CustomScanState *node, EState *estate, int eflags);
static TupleTableSlot *cp_call_exec(CustomScanState *node);
static void cp_call_end(CustomScanState *node);
static void cp_call_rescan(CustomScanState *node);
static void cp_call_explain(CustomScanState *node, List *ancestors, ExplainState *es);

CustomScanMethods cp_call_scan_methods = {
	.CustomName = "corgipile call",
	.CreateCustomScanState = cp_call_create_state,
};

static CustomExecMethods cp_call_exec_methods = {
	.CustomName = "corgipile call",
	.BeginCustomScan = cp_call_begin,
	.ExecCustomScan = cp_call_exec,
	.EndCustomScan = cp_call_end,
	.ReScanCustomScan = cp_call_rescan,
	.ExplainCustomScan = cp_call_explain,
};

/*
 * The plan of such a call: args are the call's argument expressions, rti
 * the function's range table entry (whose columns scan_tlist names), and
 * shuffled_scan tells which function it is.
 */
CustomScan *
cp_call_make_plan(List *args, bool shuffled_scan, List *tlist, List *scan_tlist,
				  List *quals, Index rti)
{
	CustomScan *cscan = makeNode(CustomScan);

	cscan->scan.scanrelid = 0;
	cscan->scan.plan.targetlist = tlist;
	cscan->scan.plan.qual = quals;
	cscan->custom_scan_tlist = scan_tlist;
	cscan->custom_relids = bms_make_singleton(rti);
	cscan->custom_exprs = args;
	cscan->custom_private = list_make1(makeInteger(shuffled_scan ? 1 : 0));
	cscan->methods = &cp_call_scan_methods;
	return cscan;
}

static Node *
cp_call_create_state(CustomScan *cscan)
{
	CpCallState *cs = palloc0(sizeof(CpCallState));
	bool		shuffled_scan = intVal(linitial(cscan->custom_private)) != 0;

	NodeSetTag(cs, T_CustomScanState);
	cs->css.methods = &cp_call_exec_methods;
	cs->function = shuffled_scan ? "shuffled_scan" : "train";
	cs->nargs = shuffled_scan ? lengthof(scan_argtypes) : CP_NUM_ARGS;
	cs->types = shuffled_scan ? scan_argtypes : train_argtypes;
	return (Node *) cs;
}

static void
cp_call_begin(CustomScanState *node, EState *estate, int eflags)
{
	CpCallState *cs = (CpCallState *) node;
	CustomScan *cscan = (CustomScan *) node->ss.ps.plan;

	if (list_length(cscan->custom_exprs) != cs->nargs)
		elog(ERROR, "corgipile.%s: expected %d arguments", cs->function, cs->nargs);
	cs->arg_states = ExecInitExprList(cscan->custom_exprs, &node->ss.ps);
	cs->seen = tuplestore_begin_heap(false, false, work_mem);
	cs->store_slot = MakeSingleTupleTableSlot(node->ss.ss_ScanTupleSlot->tts_tupleDescriptor,
											  &TTSOpsMinimalTuple);
}

static void
close_call_cursor(CpCallState *cs)
{
	if (cs->cursor != NULL)
		close_cursor(CStringGetDatum(cs->cursor));
	cs->cursor = NULL;
}

static TupleTableSlot *
cp_call_next(ScanState *node)
{
	CpCallState *cs = (CpCallState *) node;
	TupleTableSlot *slot = node->ss_ScanTupleSlot;
	ExprContext *econtext = node->ps.ps_ExprContext;
	HeapTuple	tuple;
	MemoryContext old;

	if (cs->replaying)
	{
		if (tuplestore_gettupleslot(cs->seen, true, false, cs->store_slot))
		{
			ExecCopySlot(slot, cs->store_slot);
			return slot;
		}
		cs->replaying = false;
	}
	if (cs->done)
		return ExecClearTuple(slot);
	if (cs->cursor == NULL)
	{
		Datum		values[CP_NUM_ARGS];
		bool		nulls[CP_NUM_ARGS];
		ListCell   *lc;

		/* the arguments, evaluated once per call */
		ResetExprContext(econtext);
		old = MemoryContextSwitchTo(econtext->ecxt_per_tuple_memory);
		foreach(lc, cs->arg_states)
		{
			int			i = foreach_current_index(lc);

			values[i] = ExecEvalExpr((ExprState *) lfirst(lc), econtext, &nulls[i]);
		}
		MemoryContextSwitchTo(econtext->ecxt_per_query_memory);
		cs->cursor = open_cursor(cs->function, cs->nargs, cs->types, values, nulls);
		MemoryContextSwitchTo(old);
	}

	old = MemoryContextSwitchTo(econtext->ecxt_per_tuple_memory);
	tuple = fetch_row(cs->function, cs->cursor);
	MemoryContextSwitchTo(old);
	if (tuple == NULL)
	{
		/* fetch_row closed the cursor */
		pfree(cs->cursor);
		cs->cursor = NULL;
		cs->done = true;
		return ExecClearTuple(slot);
	}
	ExecForceStoreHeapTuple(tuple, slot, true);
	tuplestore_puttupleslot(cs->seen, slot);
	return slot;
}

static bool
cp_call_recheck(ScanState *node, TupleTableSlot *slot)
{
	return true;
}

static TupleTableSlot *
cp_call_exec(CustomScanState *node)
{
	return ExecScan(&node->ss, cp_call_next, cp_call_recheck);
}

static void
cp_call_rescan(CustomScanState *node)
{
	CpCallState *cs = (CpCallState *) node;

	if (node->ss.ps.chgParam != NULL)
	{
		/* new argument values: a new call */
		close_call_cursor(cs);
		cs->done = false;
		cs->replaying = false;
		tuplestore_clear(cs->seen);
		return;
	}
	tuplestore_rescan(cs->seen);
	cs->replaying = true;
}

/* Ended before the cursor's end (LIMIT): close it, which stores no model. */
static void
cp_call_end(CustomScanState *node)
{
	CpCallState *cs = (CpCallState *) node;

	close_call_cursor(cs);
	if (cs->seen != NULL)
		tuplestore_end(cs->seen);
	if (cs->store_slot != NULL)
		ExecDropSingleTupleTableSlot(cs->store_slot);
}

static void
cp_call_explain(CustomScanState *node, List *ancestors, ExplainState *es)
{
	CpCallState *cs = (CpCallState *) node;

	ExplainPropertyText("Function", psprintf("corgipile.%s", cs->function), es);
	ExplainPropertyText("Planned", "at execution, with the arguments' values", es);
}
