/*-------------------------------------------------------------------------
 *
 * citus_meta.c
 *	  What Citus' catalog says of a table and of the cluster's nodes.
 *
 * corgipile does not link against Citus: a server without it must load and
 * run the extension as before.  So Citus is found as an extension of the
 * current database, and its catalog (pg_dist_partition, pg_dist_shard,
 * pg_dist_placement, pg_dist_node, all in pg_catalog) is read with SPI under
 * the pinned search_path, every name qualified.  Shard names come from
 * Citus' own pg_catalog.shard_name(), which knows how it shortens a name
 * that would pass NAMEDATALEN.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "commands/extension.h"
#include "executor/spi.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"

#include "cluster/citus_meta.h"
#include "util/spi.h"

/* Is the citus extension created in this database? */
bool
cp_citus_present(void)
{
	return OidIsValid(get_extension_oid("citus", true));
}

/*
 * Run a read-only catalog query with one oid argument; the caller reads
 * SPI_tuptable and calls SPI_finish() and cp_restore_search_path(*nest).
 */
static void
citus_query(const char *sql, Oid relid, int *nest)
{
	Oid			argtypes[1] = {OIDOID};
	Datum		args[1] = {ObjectIdGetDatum(relid)};
	int			rc;

	*nest = cp_pin_search_path();
	SPI_connect();
	rc = SPI_execute_with_args(sql, OidIsValid(relid) ? 1 : 0, argtypes, args,
							   NULL, true, 0);
	if (rc != SPI_OK_SELECT)
		elog(ERROR, "corgipile: reading Citus' catalog failed: %s",
			 SPI_result_code_string(rc));
}

static void
citus_query_done(int nest)
{
	SPI_finish();
	cp_restore_search_path(nest);
}

/* text column i of row r of the last query, copied into the caller's memory */
static char *
column_text(int r, int i, MemoryContext into)
{
	char	   *v = SPI_getvalue(SPI_tuptable->vals[r], SPI_tuptable->tupdesc, i);

	return v == NULL ? NULL : MemoryContextStrdup(into, v);
}

/* lappend in the caller's memory (SPI's is current, and gone at SPI_finish) */
static List *
list_in(MemoryContext into, List *list, void *item)
{
	MemoryContext old = MemoryContextSwitchTo(into);

	list = lappend(list, item);
	MemoryContextSwitchTo(old);
	return list;
}

/*
 * Citus' partition method of a table: 'h' (hash), 'r' (range), 'a'
 * (append), 'n' (none: reference tables, Citus local tables and single-shard
 * tables), or '\0' when the table is not Citus' (or Citus is not there).
 */
static char
citus_partition_method(Oid relid)
{
	char		method = '\0';
	int			nest;

	if (!cp_citus_present())
		return '\0';
	citus_query("SELECT partmethod FROM pg_catalog.pg_dist_partition WHERE logicalrelid = $1",
				relid, &nest);
	if (SPI_processed > 0)
	{
		char	   *v = SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1);

		method = v != NULL ? v[0] : '\0';
	}
	citus_query_done(nest);
	return method;
}

/*
 * Is the table Citus' (distributed, reference, Citus local or single-shard)?
 * Its rows are then in its shards' tables, on whichever nodes hold them:
 * the table the coordinator sees by that name is an empty shell (for a
 * reference or Citus local table too, once Citus has copied it), and
 * Citus refuses the queries a local training plans.  Every such table
 * trains and evaluates shard by shard on the shards' nodes.
 */
bool
cp_citus_is_distributed(Oid relid)
{
	return citus_partition_method(relid) != '\0';
}

/*
 * One placement of each shard of a distributed table, ordered by shard id:
 * the active placement on an active primary node (the lowest placement id
 * when a shard is replicated, as Citus' own reads pick the first).  A shard
 * with no such placement is an error naming it: training on the others
 * would quietly leave its rows out.
 */
List *
cp_citus_shard_placements(Oid relid)
{
	MemoryContext caller = CurrentMemoryContext;
	List	   *result = NIL;
	int			nest;

	citus_query("SELECT s.shardid, pg_catalog.shard_name(s.logicalrelid, s.shardid),"
				" n.nodename, n.nodeport, n.groupid"
				" FROM pg_catalog.pg_dist_shard s"
				" LEFT JOIN LATERAL (SELECT n.nodename, n.nodeport, n.groupid"
				"   FROM pg_catalog.pg_dist_placement p"
				"   JOIN pg_catalog.pg_dist_node n ON n.groupid OPERATOR(pg_catalog.=) p.groupid"
				"   WHERE p.shardid OPERATOR(pg_catalog.=) s.shardid"
				"     AND p.shardstate OPERATOR(pg_catalog.=) 1"
				"     AND n.noderole OPERATOR(pg_catalog.=) 'primary' AND n.isactive"
				"   ORDER BY p.placementid LIMIT 1) n ON true"
				" WHERE s.logicalrelid OPERATOR(pg_catalog.=) $1"
				" ORDER BY s.shardid",
				relid, &nest);
	for (uint64 r = 0; r < SPI_processed; r++)
	{
		CpShardPlacement *p;
		char	   *shard_id = column_text(r, 1, caller);
		char	   *port;

		if (column_text(r, 3, caller) == NULL)
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("shard %s of table \"%s\" has no active placement on an active node",
							shard_id, get_rel_name(relid)),
					 errhint("Check pg_dist_placement and pg_dist_node (citus_activate_node)")));
		p = MemoryContextAllocZero(caller, sizeof(CpShardPlacement));
		p->shard_id = pg_strtoint64(shard_id);
		p->shard_name = column_text(r, 2, caller);
		p->node.node_name = column_text(r, 3, caller);
		port = column_text(r, 4, caller);
		p->node.node_port = pg_strtoint32(port);
		p->node.group_id = pg_strtoint32(column_text(r, 5, caller));
		result = list_in(caller, result, p);
	}
	citus_query_done(nest);
	return result;
}

/*
 * The active primary nodes other than the coordinator (group 0), ordered by
 * group: where a model stored on the coordinator must also be for a query
 * to use it on any shard.
 */
List *
cp_citus_worker_nodes(void)
{
	MemoryContext caller = CurrentMemoryContext;
	List	   *result = NIL;
	int			nest;

	citus_query("SELECT nodename, nodeport, groupid FROM pg_catalog.pg_dist_node"
				" WHERE noderole OPERATOR(pg_catalog.=) 'primary' AND isactive"
				"   AND groupid OPERATOR(pg_catalog.<>) 0"
				" ORDER BY groupid, nodeid",
				InvalidOid, &nest);
	for (uint64 r = 0; r < SPI_processed; r++)
	{
		CpNode	   *n = MemoryContextAllocZero(caller, sizeof(CpNode));

		n->node_name = column_text(r, 1, caller);
		n->node_port = pg_strtoint32(column_text(r, 2, caller));
		n->group_id = pg_strtoint32(column_text(r, 3, caller));
		result = list_in(caller, result, n);
	}
	citus_query_done(nest);
	return result;
}
