/*-------------------------------------------------------------------------
 *
 * node_conn.h
 *	  Connections from a backend to the other nodes of a cluster, as the
 *	  current role, that live no longer than the transaction (node_conn.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef CORGIPILE_CLUSTER_NODE_CONN_H
#define CORGIPILE_CLUSTER_NODE_CONN_H

#include "postgres.h"

#include "libpq-fe.h"
#include "nodes/pg_list.h"

typedef struct CpNodeConn
{
	char	   *host;
	int			port;
	PGconn	   *conn;
	PGresult   *result;			/* the last result of the command sent */
	bool		busy;			/* a command sent, its result not yet read */
	int			subxact_level;	/* opened at this nesting level */
} CpNodeConn;

extern void cp_node_conn_init(void);
extern CpNodeConn *cp_node_connect(const char *host, int port);
extern void cp_node_check_extension(CpNodeConn *c);
extern void cp_node_send(CpNodeConn *c, const char *sql, int nparams,
						 const char *const *values);
extern void cp_node_wait(List *conns);
extern PGresult *cp_node_exec(CpNodeConn *c, const char *sql, int nparams,
							  const char *const *values);
extern void cp_node_close(CpNodeConn *c);
extern const char *cp_node_value(CpNodeConn *c, int row, int col);

#endif							/* CORGIPILE_CLUSTER_NODE_CONN_H */
