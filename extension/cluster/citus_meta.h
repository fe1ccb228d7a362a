/*-------------------------------------------------------------------------
 *
 * citus_meta.h
 *	  What Citus' catalog says of a table and of the cluster's nodes, read
 *	  without linking against Citus (citus_meta.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef CORGIPILE_CLUSTER_CITUS_META_H
#define CORGIPILE_CLUSTER_CITUS_META_H

#include "postgres.h"

#include "nodes/pg_list.h"

/* a node of the cluster: a primary that is active */
typedef struct CpNode
{
	char	   *node_name;
	int			node_port;
	int32		group_id;
} CpNode;

/* the placement of a shard that queries use, on its node */
typedef struct CpShardPlacement
{
	int64		shard_id;
	char	   *shard_name;		/* the shard's table on its node, quoted and
								 * schema-qualified as Citus names it */
	CpNode		node;
} CpShardPlacement;

extern bool cp_citus_present(void);
extern bool cp_citus_is_distributed(Oid relid);
extern List *cp_citus_shard_placements(Oid relid);
extern List *cp_citus_worker_nodes(void);

#endif							/* CORGIPILE_CLUSTER_CITUS_META_H */
