/*-------------------------------------------------------------------------
 *
 * cluster_nodes.c
 *	  corgipile.cluster_nodes(): the Citus nodes a distributed training or a
 *	  model's copy would reach, each connected to as the current role.
 *
 * A DBA runs it once the cluster is set up, before the first distributed
 * training: a node that is down, refuses the role, or lacks corgipile at
 * this node's version is named here, in the words the training would use.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "fmgr.h"
#include "funcapi.h"
#include "utils/builtins.h"

#include "cluster/citus_meta.h"
#include "cluster/node_conn.h"

PG_FUNCTION_INFO_V1(corgipile_cluster_nodes);

Datum
corgipile_cluster_nodes(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	ListCell   *lc;

	InitMaterializedSRF(fcinfo, 0);
	if (!cp_citus_present())
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("the citus extension is not in this database"),
				 errhint("corgipile.cluster_nodes() lists the nodes of a Citus cluster, on its coordinator.")));
	foreach(lc, cp_citus_worker_nodes())
	{
		CpNode	   *node = (CpNode *) lfirst(lc);
		CpNodeConn *c = cp_node_connect(node->node_name, node->node_port);
		Datum		values[4];
		bool		nulls[4] = {false, false, false, false};

		/* its last result is the node's version, checked to be ours */
		cp_node_check_extension(c);
		values[0] = CStringGetTextDatum(node->node_name);
		values[1] = Int32GetDatum(node->node_port);
		values[2] = Int32GetDatum(node->group_id);
		values[3] = CStringGetTextDatum(cp_node_value(c, 0, 0));
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
		cp_node_close(c);
	}
	return (Datum) 0;
}
