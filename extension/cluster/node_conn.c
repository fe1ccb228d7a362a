/*-------------------------------------------------------------------------
 *
 * node_conn.c
 *	  Connections from a backend to the other nodes of a cluster.
 *
 * A distributed training holds a session per shard for all its rounds, and
 * a model stored on the coordinator is written to every worker.  Both talk
 * libpq to the nodes Citus' catalog names (citus_meta.c), the way Citus
 * does: as the current role (so a node checks that role's privileges), to
 * the current database, with citus.node_conninfo's settings (sslmode and
 * the like) and the server's own password file for the secrets.
 *
 * Every connection is registered from the moment it is started and closed
 * at the end of the (sub)transaction that opened it, an error's included:
 * a node's session, and what it holds for us, never outlives the command
 * that asked for it.  A connection closed while a command runs there is
 * cancelled first, so a cancel or an error on the coordinator stops the
 * nodes' work too.  Waits watch the latch, so a cancel is seen at once.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "access/xact.h"
#include "catalog/indexing.h"
#include "catalog/pg_extension.h"
#include "commands/dbcommands.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "storage/latch.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/guc.h"
#include "utils/rel.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "cluster/node_conn.h"

/* the open connections, in TopMemoryContext */
static List *open_conns = NIL;

/* a connection that takes longer than this fails (Citus' own default) */
#define CP_NODE_CONNECT_TIMEOUT_MS 30000

static void close_conn(CpNodeConn *c);

static void
node_conn_xact_callback(XactEvent event, void *arg)
{
	ListCell   *lc;

	/* at the end of a transaction, however it ends, every connection goes */
	switch (event)
	{
		case XACT_EVENT_COMMIT:
		case XACT_EVENT_PARALLEL_COMMIT:
		case XACT_EVENT_ABORT:
		case XACT_EVENT_PARALLEL_ABORT:
		case XACT_EVENT_PREPARE:
			break;
		default:
			return;
	}
	foreach(lc, open_conns)
		close_conn((CpNodeConn *) lfirst(lc));
	list_free(open_conns);
	open_conns = NIL;
}

static void
node_conn_subxact_callback(SubXactEvent event, SubTransactionId mySubid,
						   SubTransactionId parentSubid, void *arg)
{
	int			level = GetCurrentTransactionNestLevel();
	List	   *keep = NIL;
	ListCell   *lc;
	MemoryContext old;

	if (event != SUBXACT_EVENT_ABORT_SUB)
		return;
	old = MemoryContextSwitchTo(TopMemoryContext);
	foreach(lc, open_conns)
	{
		CpNodeConn *c = (CpNodeConn *) lfirst(lc);

		if (c->subxact_level >= level)
			close_conn(c);
		else
			keep = lappend(keep, c);
	}
	list_free(open_conns);
	open_conns = keep;
	MemoryContextSwitchTo(old);
}

/*
 * Called once from _PG_init.  Callbacks registered later run earlier: one
 * that must still use a connection at commit (to finish what it prepared
 * on the nodes) is registered after this one.
 */
void
cp_node_conn_init(void)
{
	RegisterXactCallback(node_conn_xact_callback, NULL);
	RegisterSubXactCallback(node_conn_subxact_callback, NULL);
}

/* A command still running on the node is cancelled before we hang up. */
static void
close_conn(CpNodeConn *c)
{
	if (c->conn == NULL)
		return;
	if (c->busy)
	{
		PGcancel   *cancel = PQgetCancel(c->conn);
		char		errbuf[256];

		if (cancel != NULL)
		{
			if (!PQcancel(cancel, errbuf, sizeof(errbuf)))
				elog(DEBUG1, "corgipile: could not cancel the command on node %s:%d: %s",
					 c->host, c->port, errbuf);
			PQfreeCancel(cancel);
		}
	}
	PQclear(c->result);
	c->result = NULL;
	PQfinish(c->conn);
	c->conn = NULL;
	c->busy = false;
}

/* Closes one connection before the transaction ends. */
void
cp_node_close(CpNodeConn *c)
{
	close_conn(c);
	open_conns = list_delete_ptr(open_conns, c);
	pfree(c->host);
	pfree(c);
}

/* A node's notices (a training's epochs) are the server log's, at DEBUG1. */
static void
node_notice(void *arg, const PGresult *res)
{
	CpNodeConn *c = (CpNodeConn *) arg;

	elog(DEBUG1, "corgipile: node %s:%d: %s", c->host, c->port,
		 PQresultErrorMessage(res));
}

static int
connect_timeout_ms(void)
{
	const char *v = GetConfigOption("citus.node_connection_timeout", true, false);
	int			ms = v != NULL ? atoi(v) : 0;

	return ms > 0 ? ms : CP_NODE_CONNECT_TIMEOUT_MS;
}

/*
 * A new session on the node, as the current role in the current database.
 * An error names the node and says what libpq said.
 */
CpNodeConn *
cp_node_connect(const char *host, int port)
{
	const char *keywords[32];
	const char *values[32];
	int			n = 0;
	char		port_text[16];
	PQconninfoOption *extra = NULL;
	CpNodeConn *c;
	PostgresPollingStatusType status = PGRES_POLLING_WRITING;
	TimestampTz deadline;
	const char *node_conninfo = GetConfigOption("citus.node_conninfo", true, false);

	snprintf(port_text, sizeof(port_text), "%d", port);
	keywords[n] = "host", values[n++] = host;
	keywords[n] = "port", values[n++] = port_text;
	keywords[n] = "dbname", values[n++] = get_database_name(MyDatabaseId);
	keywords[n] = "user", values[n++] = GetUserNameFromId(GetUserId(), false);
	keywords[n] = "application_name", values[n++] = "corgipile";
	keywords[n] = "client_encoding", values[n++] = GetDatabaseEncodingName();
	/* Citus' settings for its own connections (sslmode, ...), never ours */
	if (node_conninfo != NULL && node_conninfo[0] != '\0')
	{
		char	   *err = NULL;

		extra = PQconninfoParse(node_conninfo, &err);
		if (extra == NULL)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("citus.node_conninfo cannot be parsed: %s",
							err != NULL ? err : "out of memory")));
		for (PQconninfoOption *o = extra; o->keyword != NULL; o++)
		{
			if (o->val == NULL || strcmp(o->keyword, "host") == 0 ||
				strcmp(o->keyword, "hostaddr") == 0 ||
				strcmp(o->keyword, "port") == 0 || strcmp(o->keyword, "dbname") == 0 ||
				strcmp(o->keyword, "user") == 0 || n >= lengthof(keywords) - 1)
				continue;
			keywords[n] = o->keyword, values[n++] = o->val;
		}
	}
	keywords[n] = NULL, values[n] = NULL;

	c = MemoryContextAllocZero(TopMemoryContext, sizeof(CpNodeConn));
	c->host = MemoryContextStrdup(TopMemoryContext, host);
	c->port = port;
	c->subxact_level = GetCurrentTransactionNestLevel();
	/* expand_dbname 0: a database name is never read as a connection string */
	c->conn = PQconnectStartParams(keywords, values, 0);
	if (extra != NULL)
		PQconninfoFree(extra);
	{
		MemoryContext old = MemoryContextSwitchTo(TopMemoryContext);

		open_conns = lappend(open_conns, c);
		MemoryContextSwitchTo(old);
	}
	if (c->conn == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OUT_OF_MEMORY),
				 errmsg("could not connect to node %s:%d: out of memory", host, port)));

	deadline = TimestampTzPlusMilliseconds(GetCurrentTimestamp(), connect_timeout_ms());
	while (PQstatus(c->conn) != CONNECTION_BAD &&
		   status != PGRES_POLLING_OK && status != PGRES_POLLING_FAILED)
	{
		long		left = TimestampDifferenceMilliseconds(GetCurrentTimestamp(), deadline);
		int			rc;

		if (left <= 0)
			ereport(ERROR,
					(errcode(ERRCODE_CONNECTION_FAILURE),
					 errmsg("could not connect to node %s:%d within %d ms",
							host, port, connect_timeout_ms()),
					 errhint("Is the node up? citus.node_connection_timeout sets the wait.")));
		rc = WaitLatchOrSocket(MyLatch,
							   WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH |
							   (status == PGRES_POLLING_READING ?
								WL_SOCKET_READABLE : WL_SOCKET_WRITEABLE),
							   PQsocket(c->conn), left, PG_WAIT_EXTENSION);
		if (rc & WL_LATCH_SET)
		{
			ResetLatch(MyLatch);
			CHECK_FOR_INTERRUPTS();
		}
		if (rc & (WL_SOCKET_READABLE | WL_SOCKET_WRITEABLE))
			status = PQconnectPoll(c->conn);
	}
	if (PQstatus(c->conn) != CONNECTION_OK)
		ereport(ERROR,
				(errcode(ERRCODE_CONNECTION_FAILURE),
				 errmsg("could not connect to node %s:%d", host, port),
				 errdetail_internal("%s", pchomp(PQerrorMessage(c->conn)))));
	PQsetNoticeReceiver(c->conn, node_notice, c);
	return c;
}

/*
 * Raise the node's error as ours, its SQLSTATE kept and the node named, as
 * postgres_fdw reports a remote error.
 */
static void
node_error(CpNodeConn *c, PGresult *res)
{
	const char *sqlstate = res != NULL ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : NULL;
	const char *primary = res != NULL ? PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY) : NULL;
	const char *detail = res != NULL ? PQresultErrorField(res, PG_DIAG_MESSAGE_DETAIL) : NULL;
	const char *hint = res != NULL ? PQresultErrorField(res, PG_DIAG_MESSAGE_HINT) : NULL;
	int			code = sqlstate != NULL && strlen(sqlstate) == 5 ?
		MAKE_SQLSTATE(sqlstate[0], sqlstate[1], sqlstate[2], sqlstate[3], sqlstate[4]) :
		ERRCODE_CONNECTION_FAILURE;
	char	   *message = pstrdup(primary != NULL ? primary :
								  pchomp(PQerrorMessage(c->conn)));

	ereport(ERROR,
			(errcode(code),
			 errmsg("node %s:%d: %s", c->host, c->port, message),
			 detail != NULL ? errdetail_internal("%s", detail) : 0,
			 hint != NULL ? errhint("%s", hint) : 0));
}

/*
 * Send a command (text parameters, NULL for a null) without waiting for
 * its result: commands sent to several nodes run side by side until
 * cp_node_wait.
 */
void
cp_node_send(CpNodeConn *c, const char *sql, int nparams, const char *const *values)
{
	Assert(c->conn != NULL && !c->busy);
	PQclear(c->result);
	c->result = NULL;
	if (!PQsendQueryParams(c->conn, sql, nparams, NULL, values, NULL, NULL, 0))
		node_error(c, NULL);
	c->busy = true;
}

/*
 * Read what has arrived on a connection; true once the command's last
 * result is in.  The first result is the one kept (a command of ours is
 * one statement); an error result is raised as soon as the command is over.
 */
static bool
absorb(CpNodeConn *c)
{
	if (!PQconsumeInput(c->conn))
		node_error(c, NULL);
	while (!PQisBusy(c->conn))
	{
		PGresult   *res = PQgetResult(c->conn);

		if (res == NULL)
		{
			c->busy = false;
			if (c->result != NULL &&
				PQresultStatus(c->result) != PGRES_COMMAND_OK &&
				PQresultStatus(c->result) != PGRES_TUPLES_OK)
				node_error(c, c->result);
			return true;
		}
		if (c->result == NULL)
			c->result = res;
		else
			PQclear(res);
	}
	return false;
}

/*
 * Wait for the latch or for one of the busy connections to have input;
 * returns that connection, or NULL for the latch.  Nothing here raises an
 * error between the set's creation and its freeing (in PostgreSQL 15 no
 * resource owner would close its descriptor).
 */
static CpNodeConn *
wait_any(List *conns, int busy)
{
	WaitEventSet *set = CreateWaitEventSet(CurrentMemoryContext, busy + 2);
	WaitEvent	event;
	ListCell   *lc;

	AddWaitEventToSet(set, WL_LATCH_SET, PGINVALID_SOCKET, MyLatch, NULL);
	AddWaitEventToSet(set, WL_EXIT_ON_PM_DEATH, PGINVALID_SOCKET, NULL, NULL);
	foreach(lc, conns)
	{
		CpNodeConn *c = (CpNodeConn *) lfirst(lc);

		if (c->busy)
			AddWaitEventToSet(set, WL_SOCKET_READABLE, PQsocket(c->conn), NULL, c);
	}
	(void) WaitEventSetWait(set, -1, &event, 1, PG_WAIT_EXTENSION);
	FreeWaitEventSet(set);
	return (event.events & WL_SOCKET_READABLE) ? (CpNodeConn *) event.user_data : NULL;
}

/*
 * Wait until every command sent on these connections is done, all at once.
 * The first node to fail raises its error; the end of the transaction then
 * cancels and closes the others.
 */
void
cp_node_wait(List *conns)
{
	for (;;)
	{
		int			busy = 0;
		ListCell   *lc;
		CpNodeConn *ready;

		foreach(lc, conns)
			busy += ((CpNodeConn *) lfirst(lc))->busy ? 1 : 0;
		if (busy == 0)
			return;
		ready = wait_any(conns, busy);
		if (ready != NULL)
			(void) absorb(ready);
		else
		{
			ResetLatch(MyLatch);
			CHECK_FOR_INTERRUPTS();
		}
	}
}

/* Send a command and wait for its result, which the connection owns. */
PGresult *
cp_node_exec(CpNodeConn *c, const char *sql, int nparams, const char *const *values)
{
	cp_node_send(c, sql, nparams, values);
	cp_node_wait(list_make1(c));
	return c->result;
}

/* Column col of row row of the last result, or NULL. */
const char *
cp_node_value(CpNodeConn *c, int row, int col)
{
	if (c->result == NULL || row >= PQntuples(c->result) || col >= PQnfields(c->result) ||
		PQgetisnull(c->result, row, col))
		return NULL;
	return PQgetvalue(c->result, row, col);
}

/* corgipile's version in this database's catalog */
static char *
local_version(void)
{
	Relation	rel = table_open(ExtensionRelationId, AccessShareLock);
	ScanKeyData key;
	SysScanDesc scan;
	HeapTuple	tuple;
	char	   *version = NULL;

	ScanKeyInit(&key, Anum_pg_extension_extname, BTEqualStrategyNumber, F_NAMEEQ,
				CStringGetDatum("corgipile"));
	scan = systable_beginscan(rel, ExtensionNameIndexId, true, NULL, 1, &key);
	tuple = systable_getnext(scan);
	if (HeapTupleIsValid(tuple))
	{
		bool		isnull;
		Datum		d = heap_getattr(tuple, Anum_pg_extension_extversion,
									 RelationGetDescr(rel), &isnull);

		if (!isnull)
			version = text_to_cstring(DatumGetTextPP(d));
	}
	systable_endscan(scan);
	table_close(rel, AccessShareLock);
	return version;
}

/*
 * The node must have corgipile at the coordinator's version: another
 * version's functions would take other arguments or mean other things.
 * The connection's last result is then the node's version (one row).
 */
void
cp_node_check_extension(CpNodeConn *c)
{
	const char *theirs;
	char	   *ours = local_version();

	(void) cp_node_exec(c, "SELECT extversion FROM pg_catalog.pg_extension"
						" WHERE extname OPERATOR(pg_catalog.=) 'corgipile'", 0, NULL);
	theirs = cp_node_value(c, 0, 0);
	if (theirs == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("node %s:%d does not have the corgipile extension in database \"%s\"",
						c->host, c->port, get_database_name(MyDatabaseId)),
				 errhint("Run CREATE EXTENSION corgipile on every node of the cluster.")));
	if (ours == NULL || strcmp(ours, theirs) != 0)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("node %s:%d has corgipile %s, this node %s",
						c->host, c->port, theirs, ours != NULL ? ours : "none"),
				 errhint("Run ALTER EXTENSION corgipile UPDATE on every node of the cluster.")));
}
