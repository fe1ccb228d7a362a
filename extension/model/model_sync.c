/*-------------------------------------------------------------------------
 *
 * model_sync.c
 *	  The copies of a Citus coordinator's models on its workers, changed in
 *	  the coordinator's transaction, with two-phase commit.
 *
 * predict() in a query over a distributed table runs on the workers (Citus
 * pushes the call down with the shard query), so each worker must hold the
 * model.  Each node keeps its own corgipile.model_store: a replicated
 * catalog table failed in the prototype of issue 30 (nested distributed
 * execution, OIDs that differ between nodes, distributed deadlocks).
 *
 * Every function that changes a model on the coordinator (train,
 * import_model, rename_model, grant_model, revoke_model, drop_model,
 * annotate_model, reassign_models) names the models it changed here
 * (cp_model_sync_touch).  When the coordinator's transaction commits, at
 * its pre-commit, each named model's final row (or its absence) is written
 * on every worker (model_copy.c's copy, by corgipile.apply_model_copy) in a
 * transaction of its own there, which is then prepared (PREPARE
 * TRANSACTION).  After the coordinator commits, every worker commits its
 * prepared transaction; when the coordinator aborts (an error, a cancel, a
 * worker that cannot be reached or refuses), every worker rolls back.  So
 * a worker never holds a model the coordinator does not, or the other way
 * round, but for one window: between the coordinator's commit and a
 * worker's COMMIT PREPARED (a worker or the network failing just then), the
 * worker keeps the prepared transaction (its old copy stays visible there)
 * until corgipile.recover_model_copies() decides it from the coordinator's
 * commit log: committed there, committed on the worker; else rolled back.
 *
 * The workers' transactions run as the role that changed the model (a
 * SECURITY DEFINER function's owner, if it did), which on each worker must
 * be allowed what it did on the coordinator (apply_model_copy checks it).
 * A server without Citus, or a Citus worker, replicates nothing.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/transam.h"
#include "access/xact.h"
#include "access/xlog.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "nodes/value.h"
#include "utils/builtins.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"

#include "cluster/citus_meta.h"
#include "cluster/node_conn.h"
#include "model/model_copy.h"
#include "util/spi.h"

PG_FUNCTION_INFO_V1(corgipile_recover_model_copies);
PG_FUNCTION_INFO_V1(corgipile_check_model_copies);
PG_FUNCTION_INFO_V1(corgipile_copy_models);

/* a model changed in this transaction, and the role that changed it */
typedef struct CpTouched
{
	char	   *model_name;
	Oid			userid;
} CpTouched;

/* a worker's transaction prepared (or being prepared) for this one */
typedef struct CpPrepared
{
	CpNodeConn *conn;
	char	   *gid;
} CpPrepared;

/* both in TopTransactionContext, forgotten at the transaction's end */
static List *touched = NIL;
static List *prepared = NIL;

/* the prefix of our prepared transactions' names from this coordinator */
static char *
gid_prefix(void)
{
	return psprintf("corgipile_model_" UINT64_FORMAT "_", GetSystemIdentifier());
}

/* Is this node a Citus coordinator (group 0)?  Workers copy nothing. */
static bool
is_coordinator(void)
{
	int			nest = cp_pin_search_path();
	bool		result;

	SPI_connect();
	if (SPI_execute("SELECT groupid FROM pg_catalog.pg_dist_local_group", true, 1) != SPI_OK_SELECT)
		elog(ERROR, "corgipile: reading pg_dist_local_group failed");
	result = SPI_processed > 0 &&
		strcmp(SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1), "0") == 0;
	SPI_finish();
	cp_restore_search_path(nest);
	return result;
}

void
cp_model_sync_touch(const char *model_name)
{
	MemoryContext old;
	CpTouched  *t;

	/* a worker's changes (the coordinator's copies among them) stay there */
	if (!cp_citus_present() || !is_coordinator())
		return;
	old = MemoryContextSwitchTo(TopTransactionContext);
	t = palloc(sizeof(CpTouched));
	t->model_name = pstrdup(model_name);
	t->userid = GetUserId();
	touched = lappend(touched, t);
	MemoryContextSwitchTo(old);
}

/* a connection to each worker as role, with corgipile at our version */
static List *
connect_workers(List *workers, Oid role)
{
	Oid			save_user;
	int			save_sec;
	List	   *conns = NIL;
	ListCell   *lc;

	GetUserIdAndSecContext(&save_user, &save_sec);
	SetUserIdAndSecContext(role, save_sec | SECURITY_LOCAL_USERID_CHANGE);
	foreach(lc, workers)
	{
		CpNode	   *node = (CpNode *) lfirst(lc);

		conns = lappend(conns, cp_node_connect(node->node_name, node->node_port));
	}
	SetUserIdAndSecContext(save_user, save_sec);
	foreach(lc, conns)
		cp_node_check_extension((CpNodeConn *) lfirst(lc));
	return conns;
}

/* send one command to every connection and wait for all */
static void
send_all(List *conns, const char *sql, int nparams, const char *const *values)
{
	ListCell   *lc;

	foreach(lc, conns)
		cp_node_send((CpNodeConn *) lfirst(lc), sql, nparams, values);
	cp_node_wait(conns);
}

/*
 * Write every touched model's final state on every worker and prepare the
 * workers' transactions.  An error here aborts the coordinator's
 * transaction, and the abort rolls the workers back.
 */
static void
sync_pre_commit(void)
{
	FullTransactionId fxid = GetTopFullTransactionIdIfAny();
	List	   *workers;
	List	   *roles = NIL;
	ListCell   *lc;
	int			n_prepared = 0;

	/* no transaction id: nothing was written, so nothing changed */
	if (touched == NIL || !FullTransactionIdIsValid(fxid))
		return;
	CommandCounterIncrement();
	PushActiveSnapshot(GetTransactionSnapshot());
	if ((workers = cp_citus_worker_nodes()) == NIL)
	{
		PopActiveSnapshot();
		return;
	}
	foreach(lc, touched)
		roles = list_append_unique_oid(roles, ((CpTouched *) lfirst(lc))->userid);

	foreach(lc, roles)
	{
		Oid			role = lfirst_oid(lc);
		List	   *conns = connect_workers(workers, role);
		List	   *done = NIL;
		ListCell   *lt;
		ListCell   *lcc;

		send_all(conns, "BEGIN", 0, NULL);
		foreach(lt, touched)
		{
			CpTouched  *t = (CpTouched *) lfirst(lt);
			const char *values[2];

			/* list_member compares nodes: the names go in as String nodes */
			if (t->userid != role || list_member(done, makeString(t->model_name)))
				continue;
			done = lappend(done, makeString(t->model_name));
			values[0] = t->model_name;
			values[1] = cp_model_copy_doc(t->model_name, false);
			send_all(conns, "SELECT corgipile.apply_model_copy($1, $2::pg_catalog.jsonb)",
					 2, values);
		}
		foreach(lcc, conns)
		{
			MemoryContext old = MemoryContextSwitchTo(TopTransactionContext);
			CpPrepared *p = palloc(sizeof(CpPrepared));

			p->conn = (CpNodeConn *) lfirst(lcc);
			p->gid = psprintf("%s" UINT64_FORMAT "_%d", gid_prefix(),
							  U64FromFullTransactionId(fxid), n_prepared++);
			/* listed before it is sent: an abort rolls back what it reached */
			prepared = lappend(prepared, p);
			MemoryContextSwitchTo(old);
			cp_node_send(p->conn, psprintf("PREPARE TRANSACTION '%s'", p->gid), 0, NULL);
		}
		cp_node_wait(conns);
	}
	PopActiveSnapshot();
}

/*
 * Finish a prepared transaction on its worker, after the coordinator's
 * commit or abort: nothing may raise an error here, so libpq is used
 * directly and a failure is a WARNING that says how to finish it.
 */
static void
finish_prepared(bool commit)
{
	ListCell   *lc;

	foreach(lc, prepared)
	{
		CpPrepared *p = (CpPrepared *) lfirst(lc);
		PGconn	   *conn = p->conn->conn;
		char	   *sql = psprintf("%s PREPARED '%s'", commit ? "COMMIT" : "ROLLBACK", p->gid);
		PGresult   *res;

		if (conn == NULL || PQstatus(conn) != CONNECTION_OK)
		{
			ereport(WARNING,
					(errmsg("could not %s the model copies on node %s:%d (prepared transaction %s): the connection is gone",
							commit ? "commit" : "roll back", p->conn->host, p->conn->port, p->gid),
					 errhint("corgipile.recover_model_copies() on the coordinator finishes it.")));
			continue;
		}
		/* a PREPARE still under way when the transaction failed: its end first */
		if (p->conn->busy)
		{
			PGcancel   *cancel = PQgetCancel(conn);
			char		errbuf[256];

			if (cancel != NULL)
			{
				(void) PQcancel(cancel, errbuf, sizeof(errbuf));
				PQfreeCancel(cancel);
			}
			while ((res = PQgetResult(conn)) != NULL)
				PQclear(res);
			p->conn->busy = false;
		}
		res = PQexec(conn, sql);
		if (PQresultStatus(res) != PGRES_COMMAND_OK)
		{
			const char *state = PQresultErrorField(res, PG_DIAG_SQLSTATE);

			/* rolling back a PREPARE that had failed: nothing to undo */
			if (commit || state == NULL || strcmp(state, "42704") != 0)
				ereport(WARNING,
						(errmsg("could not %s the model copies on node %s:%d (prepared transaction %s): %s",
								commit ? "commit" : "roll back", p->conn->host, p->conn->port,
								p->gid, pchomp(PQerrorMessage(conn))),
						 errhint("corgipile.recover_model_copies() on the coordinator finishes it.")));
		}
		PQclear(res);
	}
}

static void
sync_xact_callback(XactEvent event, void *arg)
{
	switch (event)
	{
		case XACT_EVENT_PRE_COMMIT:
			sync_pre_commit();
			return;
		case XACT_EVENT_PRE_PREPARE:
			if (touched != NIL)
				ereport(ERROR,
						(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
						 errmsg("cannot PREPARE a transaction that changed corgipile models on a Citus cluster"),
						 errhint("Change models in a transaction that commits directly: their copies on the workers are committed with it.")));
			return;
		case XACT_EVENT_COMMIT:
		case XACT_EVENT_PARALLEL_COMMIT:
			finish_prepared(true);
			break;
		case XACT_EVENT_ABORT:
		case XACT_EVENT_PARALLEL_ABORT:
			finish_prepared(false);
			break;
		case XACT_EVENT_PREPARE:
			break;
		default:
			return;
	}
	touched = NIL;
	prepared = NIL;
}

/*
 * Called from _PG_init after cp_node_conn_init: callbacks registered later
 * run earlier, so the workers' connections are still open when this one
 * commits or rolls back what it prepared on them.
 */
void
cp_model_sync_init(void)
{
	RegisterXactCallback(sync_xact_callback, NULL);
}

static void
require_coordinator(const char *function)
{
	if (!cp_citus_present() || !is_coordinator())
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("%s runs on a Citus coordinator", function),
				 errhint("This database has no Citus coordinator metadata (pg_dist_local_group group 0).")));
}

/*
 * corgipile.recover_model_copies(): finish the prepared transactions a
 * coordinator's model changes left on its workers (a worker or the network
 * failed between the coordinator's commit and the worker's): COMMIT
 * PREPARED where the coordinator's transaction committed, ROLLBACK
 * PREPARED where it aborted, nothing while it is still running.  One row
 * per prepared transaction found.
 */
Datum
corgipile_recover_model_copies(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	char	   *prefix;
	ListCell   *lc;

	InitMaterializedSRF(fcinfo, 0);
	require_coordinator("corgipile.recover_model_copies()");
	prefix = gid_prefix();
	foreach(lc, cp_citus_worker_nodes())
	{
		CpNode	   *node = (CpNode *) lfirst(lc);
		CpNodeConn *c = cp_node_connect(node->node_name, node->node_port);
		const char *values[1];
		PGresult   *res;
		int			n;

		values[0] = psprintf("%s%%", prefix);
		res = cp_node_exec(c, "SELECT gid FROM pg_catalog.pg_prepared_xacts"
						   " WHERE gid OPERATOR(pg_catalog.~~) $1"
						   " AND database OPERATOR(pg_catalog.=) pg_catalog.current_database()"
						   " ORDER BY gid", 1, values);
		n = PQntuples(res);
		/* the result is the connection's: read it all before the next command */
		{
			char	  **gids = palloc(sizeof(char *) * Max(n, 1));

			for (int i = 0; i < n; i++)
				gids[i] = pstrdup(PQgetvalue(res, i, 0));
			for (int i = 0; i < n; i++)
			{
				const char *rest = gids[i] + strlen(prefix);
				char	   *xid = pnstrdup(rest, strcspn(rest, "_"));
				Oid			argtypes[1] = {TEXTOID};
				Datum		args[1] = {CStringGetTextDatum(xid)};
				const char *status = NULL;
				const char *action;
				Datum		out[4];
				bool		nulls[4] = {false, false, false, false};
				int			nest = cp_pin_search_path();

				SPI_connect();
				if (SPI_execute_with_args("SELECT pg_catalog.pg_xact_status($1::pg_catalog.xid8)",
										  1, argtypes, args, NULL, true, 1) == SPI_OK_SELECT &&
					SPI_processed > 0)
					status = SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1);
				status = status != NULL ? pstrdup(status) : "unknown";
				SPI_finish();
				cp_restore_search_path(nest);
				if (strcmp(status, "committed") == 0)
					action = "committed";
				else if (strcmp(status, "aborted") == 0)
					action = "rolled back";
				else
					action = psprintf("left (coordinator transaction %s)", status);
				if (strcmp(status, "committed") == 0 || strcmp(status, "aborted") == 0)
					(void) cp_node_exec(c, psprintf("%s PREPARED '%s'",
													strcmp(status, "committed") == 0 ? "COMMIT" : "ROLLBACK",
													gids[i]), 0, NULL);
				out[0] = CStringGetTextDatum(node->node_name);
				out[1] = Int32GetDatum(node->node_port);
				out[2] = CStringGetTextDatum(gids[i]);
				out[3] = CStringGetTextDatum(action);
				tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, out, nulls);
			}
		}
		cp_node_close(c);
	}
	return (Datum) 0;
}

/* the models the current role sees on a node, with their hashes, by name */
#define CP_HASH_QUERY \
	"SELECT m.model_name, corgipile.model_hash(m.model_name) FROM corgipile.models AS m" \
	" ORDER BY m.model_name COLLATE \"C\""

static void
put_difference(ReturnSetInfo *rsinfo, const char *name, CpNode *node,
			   const char *ours, const char *theirs)
{
	Datum		out[5];
	bool		nulls[5] = {false, false, false, ours == NULL, theirs == NULL};

	out[0] = CStringGetTextDatum(name);
	out[1] = CStringGetTextDatum(node->node_name);
	out[2] = Int32GetDatum(node->node_port);
	out[3] = ours != NULL ? CStringGetTextDatum(ours) : (Datum) 0;
	out[4] = theirs != NULL ? CStringGetTextDatum(theirs) : (Datum) 0;
	tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, out, nulls);
}

/*
 * corgipile.check_model_copies(): on the coordinator, every model the
 * current role sees whose copy on some worker differs (its hash), is
 * missing there (node_hash NULL), or exists only there (coordinator_hash
 * NULL).  No rows: every node holds the same models.
 */
Datum
corgipile_check_model_copies(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	int			n_ours;
	char	  **names;
	char	  **hashes;
	int			nest;
	ListCell   *lc;

	InitMaterializedSRF(fcinfo, 0);
	require_coordinator("corgipile.check_model_copies()");
	nest = cp_pin_search_path();
	SPI_connect();
	if (SPI_execute(CP_HASH_QUERY, true, 0) != SPI_OK_SELECT)
		elog(ERROR, "corgipile: listing the models failed");
	n_ours = (int) SPI_processed;
	names = MemoryContextAlloc(rsinfo->econtext->ecxt_per_query_memory,
							   sizeof(char *) * Max(n_ours, 1));
	hashes = MemoryContextAlloc(rsinfo->econtext->ecxt_per_query_memory,
								sizeof(char *) * Max(n_ours, 1));
	for (int i = 0; i < n_ours; i++)
	{
		names[i] = MemoryContextStrdup(rsinfo->econtext->ecxt_per_query_memory,
									   SPI_getvalue(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1));
		hashes[i] = MemoryContextStrdup(rsinfo->econtext->ecxt_per_query_memory,
										SPI_getvalue(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 2));
	}
	SPI_finish();
	cp_restore_search_path(nest);

	foreach(lc, cp_citus_worker_nodes())
	{
		CpNode	   *node = (CpNode *) lfirst(lc);
		CpNodeConn *c = cp_node_connect(node->node_name, node->node_port);
		PGresult   *res;
		int			i = 0;
		int			j = 0;
		int			n_theirs;

		cp_node_check_extension(c);
		res = cp_node_exec(c, CP_HASH_QUERY, 0, NULL);
		n_theirs = PQntuples(res);
		/* both lists are in byte order of the names: a merge */
		while (i < n_ours || j < n_theirs)
		{
			int			cmp = i >= n_ours ? 1 : j >= n_theirs ? -1 :
				strcmp(names[i], PQgetvalue(res, j, 0));

			if (cmp < 0)
				put_difference(rsinfo, names[i], node, hashes[i], NULL), i++;
			else if (cmp > 0)
				put_difference(rsinfo, PQgetvalue(res, j, 0), node, NULL,
							   PQgetvalue(res, j, 1)), j++;
			else
			{
				if (strcmp(hashes[i], PQgetvalue(res, j, 1)) != 0)
					put_difference(rsinfo, names[i], node, hashes[i], PQgetvalue(res, j, 1));
				i++, j++;
			}
		}
		cp_node_close(c);
	}
	return (Datum) 0;
}

/*
 * corgipile.copy_models(model_name): on the coordinator, write the current
 * role's models (or the one named) to every worker again when the
 * transaction commits, as any change to them would: for a worker added
 * after they were trained, or one check_model_copies() names.  A superuser
 * copies every model.  Returns how many models will be copied.
 */
Datum
corgipile_copy_models(PG_FUNCTION_ARGS)
{
	Oid			argtypes[1] = {TEXTOID};
	Datum		args[1];
	char		nulls[1];
	int			nest;
	int64		n;
	List	   *names = NIL;
	ListCell   *lc;

	require_coordinator("corgipile.copy_models()");
	args[0] = PG_ARGISNULL(0) ? (Datum) 0 : PG_GETARG_DATUM(0);
	nulls[0] = PG_ARGISNULL(0) ? 'n' : ' ';
	nest = cp_pin_search_path();
	SPI_connect();
	if (SPI_execute_with_args("SELECT m.model_name FROM corgipile.models AS m"
							  " WHERE ($1 IS NULL OR m.model_name OPERATOR(pg_catalog.=) $1)"
							  "   AND (m.owner OPERATOR(pg_catalog.=) CURRENT_USER"
							  "        OR (SELECT r.rolsuper FROM pg_catalog.pg_roles AS r"
							  "            WHERE r.rolname OPERATOR(pg_catalog.=) CURRENT_USER))"
							  " ORDER BY m.model_name COLLATE \"C\"",
							  1, argtypes, args, nulls, true, 0) != SPI_OK_SELECT)
		elog(ERROR, "corgipile: listing the models failed");
	n = (int64) SPI_processed;
	for (uint64 i = 0; i < SPI_processed; i++)
	{
		MemoryContext old = MemoryContextSwitchTo(CurTransactionContext);

		names = lappend(names, pstrdup(SPI_getvalue(SPI_tuptable->vals[i],
													SPI_tuptable->tupdesc, 1)));
		MemoryContextSwitchTo(old);
	}
	SPI_finish();
	cp_restore_search_path(nest);
	if (!PG_ARGISNULL(0) && n == 0)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("model \"%s\" does not exist or is not yours",
						text_to_cstring(PG_GETARG_TEXT_PP(0))),
				 errhint("A role copies the models it owns; a superuser, any.")));
	foreach(lc, names)
		cp_model_sync_touch((const char *) lfirst(lc));
	/* the copy runs for transactions that wrote: this one wrote nothing */
	if (n > 0)
		(void) GetTopTransactionId();
	PG_RETURN_INT64(n);
}
