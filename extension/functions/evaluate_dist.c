/*-------------------------------------------------------------------------
 *
 * evaluate_dist.c
 *	  corgipile.evaluate(model, t) on a Citus table: each shard is scored on
 *	  its node, and the parts are merged here exactly.
 *
 * Each shard gets a session of its own on its node, as the current role
 * (the node checks that role's SELECT on the shard), and runs
 * corgipile.evaluate_partial() there, all shards at once.  What crosses
 * the network is never a row:
 *
 *   - one state per shard: the rows scored and skipped, the confusion
 *     counts (per class for softmax), and the sums of log-loss and of the
 *     regression errors, each a 106-bit sum (metrics.h, CpSum);
 *   - for a binary model, the shard's distinct scores, ascending, each with
 *     its count of positive and negative rows: 24 bytes per distinct score,
 *     what an exact AUC needs (its pairs cross shards).
 *
 * The coordinator merges the score lists as they arrive, a batch of
 * CP_SCORE_BATCH per shard at a time through a cursor, and walks the
 * merged distinct scores as a single-node evaluate walks its sorted
 * scores (cp_auc_step): the AUC is the same to the bit, and the
 * coordinator's memory is one batch per shard whatever the rows.  Counts
 * add exactly; the sums are added at 106 bits, so each metric is, but for
 * a rounding tie one in 2^50, the single-node figure.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <math.h>

#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/float.h"

#include "cluster/citus_meta.h"
#include "cluster/node_conn.h"
#include "functions/evaluate_dist.h"
#include "model/model_copy.h"

/* distinct scores fetched from a shard at a time */
#define CP_SCORE_BATCH 10000

/* one shard's part: its session, and the head of its sorted score counts */
typedef struct CpShardStream
{
	CpShardPlacement *placement;
	CpNodeConn *conn;
	int			row;			/* the next row of conn->result */
	bool		more;			/* the last fetch was a full batch */
	bool		has;			/* a head below */
	double		score;
	int64		positives;
	int64		negatives;
} CpShardStream;

static const char *
shard_label(CpShardStream *s)
{
	return psprintf("shard %s on node %s:%d", s->placement->shard_name,
					s->placement->node.node_name, s->placement->node.node_port);
}

static void
fetch(CpShardStream *s)
{
	PGresult   *res = cp_node_exec(s->conn, "FETCH " CppAsString2(CP_SCORE_BATCH)
									" FROM corgipile_eval", 0, NULL);

	s->row = 0;
	s->more = PQntuples(res) == CP_SCORE_BATCH;
}

/* the shard's next distinct score into its head, or has = false */
static void
advance(CpShardStream *s)
{
	PGresult   *res = s->conn->result;

	if (s->row >= PQntuples(res))
	{
		if (!s->more)
		{
			s->has = false;
			return;
		}
		fetch(s);
		res = s->conn->result;
		if (PQntuples(res) == 0)
		{
			s->has = false;
			return;
		}
	}
	if (PQgetisnull(res, s->row, 0) || PQgetisnull(res, s->row, 1) ||
		PQgetisnull(res, s->row, 2))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_TEXT_REPRESENTATION),
				 errmsg("the score counts from %s cannot be read", shard_label(s)),
				 errhint("Every node must run the same corgipile version.")));
	s->score = float8in_internal(PQgetvalue(res, s->row, 0), NULL, "double precision",
								 PQgetvalue(res, s->row, 0));
	s->positives = pg_strtoint64(PQgetvalue(res, s->row, 1));
	s->negatives = pg_strtoint64(PQgetvalue(res, s->row, 2));
	s->row++;
	s->has = true;
}

/* The first row of a shard's part: its skipped rows and its metrics' state. */
static void
merge_state(CpEvalState *ev, CpLayout *lo, CpShardStream *s)
{
	PGresult   *res = s->conn->result;
	char	   *state;
	char	   *end;
	int64		counts[3];

	if (PQntuples(res) == 0 || PQgetisnull(res, 0, 3))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_TEXT_REPRESENTATION),
				 errmsg("the evaluation state from %s is missing", shard_label(s)),
				 errhint("Every node must run the same corgipile version.")));
	state = PQgetvalue(res, 0, 3);
	for (int i = 0; i < 3; i++)
	{
		errno = 0;
		counts[i] = strtoll(state, &end, 10);
		if (end == state || errno != 0 || counts[i] < 0)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_TEXT_REPRESENTATION),
					 errmsg("the evaluation state from %s cannot be read", shard_label(s))));
		state = end;
	}
	lo->n_null_label += counts[0];
	lo->n_skipped += counts[1];
	lo->n_unseen += counts[2];
	cp_eval_state_merge(ev, state, shard_label(s));
	s->row = 1;
}

void
cp_evaluate_shards(CpEvalState *ev, CpLayout *lo, Oid relid)
{
	List	   *placements = cp_citus_shard_placements(relid);
	int			n = list_length(placements);
	CpShardStream *streams = palloc0(sizeof(CpShardStream) * Max(n, 1));
	char	   *doc = cp_model_copy_doc(ev->stored->model_name, true);
	const char *values[3];
	List	   *conns = NIL;
	List	   *checked = NIL;
	CpAucWalk	walk = {0.0, 0};
	ListCell   *lc;

	values[0] = ev->stored->model_name;
	values[2] = cp_model_copy_hash(doc);
	foreach(lc, placements)
	{
		CpShardStream *s = &streams[foreach_current_index(lc)];
		char	   *node;

		s->placement = (CpShardPlacement *) lfirst(lc);
		s->conn = cp_node_connect(s->placement->node.node_name, s->placement->node.node_port);
		node = psprintf("%s:%d", s->placement->node.node_name, s->placement->node.node_port);
		if (!list_member(checked, makeString(node)))
		{
			cp_node_check_extension(s->conn);
			checked = lappend(checked, makeString(node));
		}
		conns = lappend(conns, s->conn);
	}
	foreach(lc, conns)
		cp_node_send((CpNodeConn *) lfirst(lc), "BEGIN", 0, NULL);
	cp_node_wait(conns);
	for (int i = 0; i < n; i++)
	{
		values[1] = streams[i].placement->shard_name;
		cp_node_send(streams[i].conn,
					 "DECLARE corgipile_eval NO SCROLL CURSOR FOR"
					 " SELECT score, positives, negatives, state"
					 " FROM corgipile.evaluate_partial($1, $2::pg_catalog.regclass, $3)",
					 3, values);
	}
	cp_node_wait(conns);
	/* the first fetch scores every shard, side by side */
	foreach(lc, conns)
		cp_node_send((CpNodeConn *) lfirst(lc), "FETCH " CppAsString2(CP_SCORE_BATCH)
					 " FROM corgipile_eval", 0, NULL);
	cp_node_wait(conns);
	for (int i = 0; i < n; i++)
	{
		streams[i].more = PQntuples(streams[i].conn->result) == CP_SCORE_BATCH;
		merge_state(ev, lo, &streams[i]);
		advance(&streams[i]);
	}

	/* the merged distinct scores, ascending, as one scan's sorts give them */
	for (;;)
	{
		CpShardStream *low = NULL;
		int64		positives = 0;
		int64		negatives = 0;
		double		score;

		for (int i = 0; i < n; i++)
			if (streams[i].has &&
				(low == NULL || float8_cmp_internal(streams[i].score, low->score) < 0))
				low = &streams[i];
		if (low == NULL)
			break;
		score = low->score;
		for (int i = 0; i < n; i++)
			while (streams[i].has && float8_cmp_internal(streams[i].score, score) == 0)
			{
				positives += streams[i].positives;
				negatives += streams[i].negatives;
				advance(&streams[i]);
			}
		cp_auc_step(&walk, positives, negatives);
		CHECK_FOR_INTERRUPTS();
	}
	if (ev->model.kind == CP_MODEL_SVM || ev->model.kind == CP_MODEL_LOGISTIC)
	{
		int64		n_neg = ev->n - ev->n_pos;

		ev->auc_given = true;
		ev->auc = (ev->n_pos == 0 || n_neg == 0) ? NAN :
			walk.u / ((double) ev->n_pos * (double) n_neg);
	}
	foreach(lc, conns)
		cp_node_close((CpNodeConn *) lfirst(lc));
}
