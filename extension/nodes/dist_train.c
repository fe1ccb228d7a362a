/*-------------------------------------------------------------------------
 *
 * dist_train.c
 *	  Distributed SGD: corgipile.train() on a Citus distributed table, on
 *	  the coordinator (docs/distributed.md).
 *
 * The planner gives a train() call on a distributed table this node
 * instead of SGD -> TupleShuffle -> BlockShuffle, and adds no relation to
 * the query (Citus would then plan the query as a distributed one, and
 * refuse it).  The node holds one session per shard, on the shard's
 * worker, as the calling role (cluster/node_conn.c), for the whole
 * training, and drives the shards' trainings (shard_round.c):
 *
 *   1. every shard's first pass runs on its worker; the coordinator
 *      merges what they learnt (first_pass.c) into the preprocessing a
 *      single-node pass over the same rows learns, and sends it back;
 *   2. each round, every shard trains local_epochs CorgiPile epochs of
 *      its rows from the coordinator's weights, in parallel, and returns
 *      its weights, its iterates' average and its figures; the
 *      coordinator averages the weights by rows trained (core/merge.c),
 *      keeps the average of the iterates over shards and rounds (what the
 *      default schedule stores), and applies the epochs, the penalty and
 *      the stopping rule of the default schedule across rounds;
 *   3. the model is stored here, as a single-node training stores it.
 *
 * Each round returns its epochs' rows (and NOTICEs), so a caller that
 * stops early stops the training; any error, on any node, or a cancel
 * ends the transaction, which closes (and cancels) every session: the
 * workers' state is their sessions', nothing is left behind.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <math.h>

#include "access/table.h"
#include "commands/explain.h"
#include "common/pg_prng.h"
#include "executor/executor.h"
#include "libpq/pqformat.h"
#include "miscadmin.h"
#include "nodes/makefuncs.h"
#include "portability/instr_time.h"
#include "tcop/utility.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"

#include "cluster/citus_meta.h"
#include "cluster/node_conn.h"
#include "core/converge.h"
#include "core/merge.h"
#include "core/shuffle.h"
#include "io/layout.h"
#include "model/models.h"
#include "nodes/dist_train.h"
#include "nodes/first_pass.h"
#include "nodes/sgd.h"
#include "nodes/shard_round.h"
#include "params/params.h"
#include "util/relation.h"
#include "util/spi.h"

/* corgipile.distributed_local_epochs: CorgiPile epochs per shard per round */
int			cp_dist_local_epochs = 1;

/* the per-shard seeds' streams of the training's seed (core/shuffle.c) */
#define CP_DIST_SEED_STREAM 1000

typedef struct DistShard
{
	CpShardPlacement *placement;
	CpNodeConn *conn;
	StringInfoData out;			/* its last output, decoded from hex */
	CpStats    *epoch_stats;
	double	   *w;				/* NULL: no rows */
	int64		avg_n;
	double	   *avg;
	CpStats		scored;			/* the averaged model sent, on its sample */
	double		cpu;			/* CPU seconds of its rounds, summed */
	double		seconds;		/* its last round's, on its worker */
} DistShard;

typedef struct DistState
{
	CustomScanState css;
	CpTrainParams params;
	List	   *args;			/* train()'s arguments as text (String or NULL) */
	Relation	rel;			/* the distributed table (its shell here) */
	CpLayout	lo;
	int64		seed;
	char	   *model_name;
	Datum		model_name_datum;
	bool		name_claimed;
	MemoryContext cxt;
	MemoryContextCallback cleanup;

	bool		started;
	int			n_shards;
	DistShard  *shards;
	List	   *conns;
	StringInfoData merged;		/* the merged first pass, for round 1 */
	CpModel		model;			/* the shape, and w: the current weights */
	double	   *copies;			/* n_shards x n_weights, for merging */
	CpStats    *copy_stats;
	double	   *avg;			/* the iterates' average over shards and rounds */
	int64		avg_n;
	int64		rows;			/* rows of the table trained on (round 1) */
	double		l2;

	CpConvergence conv;
	bool		stop_rule;
	bool		sample_rule;	/* it compares the average on the shards' sample */
	int64		sample_rows;	/* the sample's rows, last scored */
	bool		converged;

	CpEpochResult *results;
	int			results_cap;
	int			n_done;			/* epochs trained */
	int			replay_pos;
	bool		finished;
	bool		saved;
	double		worker_cpu;		/* all shards' CPU seconds */
	int64		bytes_sent;		/* per round, last round */
	int64		bytes_received;
	int			n_rounds;
	double		slowest_sum;	/* seconds: the slowest shard's, summed over rounds */
	double		overhead_sum;	/* the rest of each round, summed */
} DistState;

void
cp_dist_train_init(void)
{
	DefineCustomIntVariable("corgipile.distributed_local_epochs",
							"CorgiPile epochs each shard trains per round of a distributed training.",
							"The coordinator averages the shards' weights after each round; "
							"more epochs per round mean fewer rounds and less traffic, "
							"and shards that drift further apart (docs/distributed.md).",
							&cp_dist_local_epochs,
							1, 1, 1000,
							PGC_USERSET,
							0,
							NULL, NULL, NULL);
}

static Node *dist_create_state(CustomScan *cscan);
static void dist_begin(CustomScanState *node, EState *estate, int eflags);
static TupleTableSlot *dist_exec(CustomScanState *node);
static void dist_end(CustomScanState *node);
static void dist_rescan(CustomScanState *node);
static void dist_explain(CustomScanState *node, List *ancestors, ExplainState *es);

CustomScanMethods cp_dist_scan_methods = {
	.CustomName = "Distributed SGD",
	.CreateCustomScanState = dist_create_state,
};

static CustomExecMethods dist_exec_methods = {
	.CustomName = "Distributed SGD",
	.BeginCustomScan = dist_begin,
	.ExecCustomScan = dist_exec,
	.EndCustomScan = dist_end,
	.ReScanCustomScan = dist_rescan,
	.ExplainCustomScan = dist_explain,
};

/*
 * What a distributed training cannot do yet: refused at plan time, before
 * any node is reached.
 */
void
cp_dist_check_params(const CpTrainParams *p, const char *relname)
{
	const char *what = cp_prep_dist_unsupported(p);

	if (what == NULL && (OidIsValid(p->validation_relid) || p->validation_fraction > 0.0))
		what = "validation";
	if (what == NULL && p->workers > 1)
		what = "workers > 1 (each shard trains in its own worker backend already)";
	if (what != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("corgipile.train on distributed table \"%s\" does not support %s yet",
						relname, what),
				 errhint("See docs/distributed.md for what a distributed training supports.")));
}

/* train()'s arguments, as the text each shard's call is given. */
List *
cp_dist_args_text(List *args)
{
	List	   *out = NIL;
	ListCell   *lc;

	foreach(lc, args)
	{
		Const	   *c = lfirst_node(Const, lc);
		Oid			typout;
		bool		varlena;

		if (c->constisnull)
		{
			out = lappend(out, NULL);
			continue;
		}
		getTypeOutputInfo(c->consttype, &typout, &varlena);
		out = lappend(out, makeString(OidOutputFunctionCall(typout, c->constvalue)));
	}
	return out;
}

CustomScan *
cp_dist_make_plan(Const *params, List *args_text, List *tlist, List *scan_tlist,
				  List *quals, Index rti)
{
	CustomScan *cscan = makeNode(CustomScan);

	cscan->scan.scanrelid = 0;
	cscan->scan.plan.targetlist = tlist;
	cscan->scan.plan.qual = quals;
	cscan->custom_scan_tlist = scan_tlist;
	cscan->custom_relids = bms_make_singleton(rti);
	cscan->custom_private = list_make2(params, args_text);
	cscan->methods = &cp_dist_scan_methods;
	return cscan;
}

static Node *
dist_create_state(CustomScan *cscan)
{
	DistState  *s = palloc0(sizeof(DistState));

	NodeSetTag(s, T_CustomScanState);
	s->css.methods = &dist_exec_methods;
	cp_params_unpack(linitial_node(Const, cscan->custom_private), &s->params);
	s->args = lsecond(cscan->custom_private);
	return (Node *) s;
}

static void
dist_cleanup(void *arg)
{
	DistState  *s = (DistState *) arg;

	if (s->name_claimed)
		cp_models_release_name(s->model_name);
}

static void
dist_begin(CustomScanState *node, EState *estate, int eflags)
{
	DistState  *s = (DistState *) node;
	int			nest;

	s->rel = table_open(s->params.relid, AccessShareLock);
	cp_layout_resolve(&s->lo, RelationGetDescr(s->rel), RelationGetRelationName(s->rel),
					  &s->params);
	/* the calling role's rights, as BlockShuffle checks them */
	cp_check_access_at_start(s->rel, cp_layout_columns(&s->lo), "relation");
	s->seed = s->params.has_seed ? s->params.seed :
		pg_prng_int64p(&pg_global_prng_state);
	if (eflags & EXEC_FLAG_EXPLAIN_ONLY)
		return;

	PreventCommandIfReadOnly("corgipile.train()");
	PreventCommandIfParallelMode("corgipile.train()");
	nest = cp_pin_search_path();
	s->model_name = s->params.model_name != NULL ? s->params.model_name :
		cp_models_new_name(s->rel, s->params.model);
	cp_models_check_absent(s->model_name);
	cp_restore_search_path(nest);
	s->model_name_datum = CStringGetTextDatum(s->model_name);
	s->cxt = AllocSetContextCreate(estate->es_query_cxt, "corgipile distributed training",
								   ALLOCSET_DEFAULT_SIZES);
	s->cleanup.func = dist_cleanup;
	s->cleanup.arg = s;
	MemoryContextRegisterResetCallback(s->cxt, &s->cleanup);
	cp_models_claim_name(s->model_name);
	s->name_claimed = true;
	s->results_cap = 64;
	s->results = MemoryContextAllocZero(s->cxt, sizeof(CpEpochResult) * s->results_cap);
}

/* A bytea's text output (hex) as bytes, into out. */
static void
hex_to_bytes(const char *hex, StringInfo out, CpShardPlacement *pl)
{
	size_t		len;

	if (hex == NULL || strncmp(hex, "\\x", 2) != 0)
		ereport(ERROR,
				(errcode(ERRCODE_PROTOCOL_VIOLATION),
				 errmsg("corgipile: shard %lld on %s:%d returned no result",
						(long long) pl->shard_id, pl->node.node_name, pl->node.node_port)));
	len = strlen(hex + 2);
	resetStringInfo(out);
	enlargeStringInfo(out, (int) (len / 2 + 1));
	out->len = hex_decode(hex + 2, len, out->data);
	out->data[out->len] = '\0';
	out->cursor = 0;
}

static char *
bytes_to_hex(const char *data, int len)
{
	char	   *hex = palloc((Size) len * 2 + 3);
	uint64		n;

	hex[0] = '\\';
	hex[1] = 'x';
	n = hex_encode(data, len, hex + 2);
	hex[2 + n] = '\0';
	return hex;
}

/* The text array literal of one shard's train() arguments. */
static char *
shard_args(DistState *s, int i)
{
	StringInfoData buf;
	ListCell   *lc;
	int			k = 0;

	initStringInfo(&buf);
	appendStringInfoChar(&buf, '{');
	foreach(lc, s->args)
	{
		const char *v = lfirst(lc) ? strVal(lfirst(lc)) : NULL;
		char		num[32];

		switch (k)
		{
			case CP_ARG_RELATION:
				v = s->shards[i].placement->shard_name;
				break;
			case CP_ARG_MODEL_NAME:
				v = NULL;
				break;
			case CP_ARG_MAX_EPOCH_NUM:
				v = "2147483647";
				break;
			case CP_ARG_SEED:
				snprintf(num, sizeof(num), INT64_FORMAT,
						 (int64) cp_derive_seed((uint64) s->seed, CP_DIST_SEED_STREAM + i));
				v = num;
				break;
			default:
				break;
		}
		if (k > 0)
			appendStringInfoChar(&buf, ',');
		if (v == NULL)
			appendStringInfoString(&buf, "NULL");
		else
		{
			appendStringInfoChar(&buf, '"');
			for (const char *c = v; *c; c++)
			{
				if (*c == '"' || *c == '\\')
					appendStringInfoChar(&buf, '\\');
				appendStringInfoChar(&buf, *c);
			}
			appendStringInfoChar(&buf, '"');
		}
		k++;
	}
	appendStringInfoChar(&buf, '}');
	return buf.data;
}

/* Connect to every shard's worker, open the shards' trainings, merge their first passes. */
static void
dist_start(DistState *s)
{
	MemoryContext old = MemoryContextSwitchTo(s->cxt);
	List	   *placements = cp_citus_shard_placements(s->params.relid);
	List	   *states = NIL;
	ListCell   *lc;
	int			i = 0;
	int			n_outputs;

	s->n_shards = list_length(placements);
	if (s->n_shards == 0)
		ereport(ERROR,
				(errcode(ERRCODE_NO_DATA),
				 errmsg("distributed table \"%s\" has no shards", s->lo.relname)));
	s->shards = palloc0(sizeof(DistShard) * s->n_shards);
	foreach(lc, placements)
	{
		DistShard  *sh = &s->shards[i++];

		sh->placement = lfirst(lc);
		/* one session, hence one worker backend, per shard: they train in parallel */
		sh->conn = cp_node_connect(sh->placement->node.node_name, sh->placement->node.node_port);
		cp_node_check_extension(sh->conn);
		initStringInfo(&sh->out);
		s->conns = lappend(s->conns, sh->conn);
	}
	foreach(lc, s->conns)
		cp_node_send(lfirst(lc), "BEGIN ISOLATION LEVEL REPEATABLE READ", 0, NULL);
	cp_node_wait(s->conns);
	for (i = 0; i < s->n_shards; i++)
	{
		const char *values[1];

		values[0] = shard_args(s, i);
		cp_node_send(s->shards[i].conn,
					 "SELECT corgipile.shard_open($1::pg_catalog.text[])", 1, values);
	}
	cp_node_wait(s->conns);
	for (i = 0; i < s->n_shards; i++)
	{
		DistShard  *sh = &s->shards[i];
		StringInfo	st = makeStringInfo();

		hex_to_bytes(cp_node_value(sh->conn, 0, 0), st, sh->placement);
		states = lappend(states, st);
	}

	/* the shards' first passes, merged, and finished here as on every shard */
	initStringInfo(&s->merged);
	cp_prep_dist_finish(&s->lo, &s->params, s->cxt, states, &s->merged, NULL);

	n_outputs = s->lo.classes ? s->lo.classes->n_classes : 1;
	cp_check_model_size(s->params.model, s->lo.n_features, n_outputs,
						cp_layout_sparse_rows(&s->lo), s->params.batch_size, s->lo.relname);
	if (!cp_model_init(&s->model, s->params.model, s->lo.n_features, n_outputs,
					   cp_layout_sparse_rows(&s->lo), 1, 0.0, s->params.l1, palloc0))
		elog(ERROR, "corgipile: model sizes do not fit");
	s->copies = palloc0(mul_size(mul_size(sizeof(double), s->model.n_weights), s->n_shards));
	s->copy_stats = palloc0(sizeof(CpStats) * s->n_shards);
	s->avg = palloc0(sizeof(double) * s->model.n_weights);
	s->l2 = s->params.l2_auto ? 0.0 : s->params.l2;

	s->stop_rule = cp_sgd_stop_rule_init(&s->params, &s->conv);
	/* one node's rule (sgd_validate.c): an averaged model's objective on a sample */
	s->sample_rule = s->stop_rule && s->params.average;
	MemoryContextSwitchTo(old);
	s->started = true;
}

static double *
read_weights(StringInfo in, int n_weights, DistShard *sh)
{
	int32		n = pq_getmsgint(in, 4);
	double	   *w;

	if (n == 0)
		return NULL;
	if (n != n_weights)
		ereport(ERROR,
				(errcode(ERRCODE_PROTOCOL_VIOLATION),
				 errmsg("corgipile: shard %lld on %s:%d returned %d weights; the model has %d",
						(long long) sh->placement->shard_id, sh->placement->node.node_name,
						sh->placement->node.node_port, n, n_weights)));
	w = palloc(sizeof(double) * n);
	for (int j = 0; j < n; j++)
		w[j] = pq_getmsgfloat8(in);
	return w;
}

static void
read_stats(StringInfo in, CpStats *st)
{
	st->n = pq_getmsgint64(in);
	st->loss_sum = pq_getmsgfloat8(in);
	st->n_correct = pq_getmsgint64(in);
	st->sum_y = pq_getmsgfloat8(in);
	st->sum_y2 = pq_getmsgfloat8(in);
	st->sse = pq_getmsgfloat8(in);
}

/* One shard's round output. */
static void
read_output(DistState *s, DistShard *sh, int n_epochs, bool first)
{
	StringInfo	in = &sh->out;

	bool		ok = pq_getmsgbyte(in) == CP_ROUND_FORMAT;

	if (ok)
	{
		read_stats(in, &sh->scored);
		ok = pq_getmsgint(in, 4) == n_epochs;
	}
	if (!ok)
		ereport(ERROR,
				(errcode(ERRCODE_PROTOCOL_VIOLATION),
				 errmsg("corgipile: shard %lld on %s:%d returned a round of another format",
						(long long) sh->placement->shard_id, sh->placement->node.node_name,
						sh->placement->node.node_port),
				 errhint("Every node must run the same corgipile version.")));
	for (int k = 0; k < n_epochs; k++)
		read_stats(in, &sh->epoch_stats[k]);
	sh->w = read_weights(in, s->model.n_weights, sh);
	sh->avg_n = pq_getmsgint64(in);
	sh->avg = read_weights(in, s->model.n_weights, sh);
	s->lo.seen_minus_one |= pq_getmsgbyte(in) != 0;
	s->lo.seen_zero |= pq_getmsgbyte(in) != 0;
	s->lo.seen_one |= pq_getmsgbyte(in) != 0;
	if (first)
	{
		s->lo.n_skipped += pq_getmsgint64(in);
		s->lo.n_null_label += pq_getmsgint64(in);
	}
	else
		(void) pq_getmsgint64(in), (void) pq_getmsgint64(in);
	sh->cpu += pq_getmsgfloat8(in);
	sh->seconds = pq_getmsgfloat8(in);
	pq_getmsgend(in);
}

/*
 * Whether this round scores the averaged model on the shards' sample for
 * the stopping rule: from the average after epoch 2 on (epoch 1's is of
 * an iterate, not compared, as on one node).  The round scores the
 * average it is sent before it trains, so the rule's figure of the
 * previous round arrives with this one's results.
 */
static bool
round_scores(DistState *s)
{
	return s->sample_rule && s->n_done >= 2 && s->avg_n > 0;
}

/* The round's input, the same for every shard. */
static char *
round_input(DistState *s, int n_epochs)
{
	StringInfoData buf;
	bool		first = s->n_done == 0;
	char	   *hex;

	pq_begintypsend(&buf);
	/* pq_begintypsend leaves room for a varlena header: drop it */
	resetStringInfo(&buf);
	pq_sendbyte(&buf, CP_ROUND_FORMAT);
	pq_sendint32(&buf, s->n_done);
	pq_sendint32(&buf, n_epochs);
	pq_sendfloat8(&buf, s->l2);
	pq_sendint32(&buf, s->model.n_weights);
	for (int j = 0; j < s->model.n_weights; j++)
		pq_sendfloat8(&buf, s->model.w[j]);
	pq_sendint64(&buf, s->rows);
	if (round_scores(s))
	{
		pq_sendint32(&buf, s->model.n_weights);
		for (int j = 0; j < s->model.n_weights; j++)
			pq_sendfloat8(&buf, s->avg[j]);
	}
	else
		pq_sendint32(&buf, 0);
	if (first)
	{
		pq_sendint32(&buf, s->merged.len);
		pq_sendbytes(&buf, s->merged.data, s->merged.len);
	}
	else
		pq_sendint32(&buf, 0);
	hex = bytes_to_hex(buf.data, buf.len);
	s->bytes_sent = (int64) buf.len * s->n_shards;
	return hex;
}

/*
 * The previous round's averaged model, scored by every shard on its share
 * of the sample: one node's figure for the stopping rule.
 */
static void
dist_check_sample(DistState *s)
{
	CpStats		st;

	memset(&st, 0, sizeof(st));
	for (int i = 0; i < s->n_shards; i++)
		cp_stats_merge(&st, &s->shards[i].scored);
	if (st.n == 0)
		return;
	s->sample_rows = st.n;
	/* one node's training objective (sgd_validate.c): mean loss plus penalty */
	if (cp_convergence_update(&s->conv, cp_stats_loss(&st) +
							  cp_model_penalty(&s->model, s->avg, s->l2, s->params.l1)))
		s->converged = true;
	elog(DEBUG1, "corgipile: model %s epoch %d: stopping rule's objective %.9g on %lld sampled rows (change %.3g)",
		 s->model_name, s->n_done, s->conv.last, (long long) st.n, s->conv.last_change);
}

/* One round: every shard trains n_epochs epochs from the current weights. */
static void
dist_round(DistState *s)
{
	MemoryContext old = MemoryContextSwitchTo(s->cxt);
	int			n_epochs = Min(cp_dist_local_epochs, s->params.max_epoch_num - s->n_done);
	const char *values[1];
	bool		first = s->n_done == 0;
	instr_time	start;
	instr_time	elapsed;
	int64		received = 0;
	int64		round_avg_n = 0;
	bool		scores = round_scores(s);

	INSTR_TIME_SET_CURRENT(start);
	values[0] = round_input(s, n_epochs);
	for (int i = 0; i < s->n_shards; i++)
		cp_node_send(s->shards[i].conn,
					 "SELECT corgipile.shard_round($1::pg_catalog.bytea)", 1, values);
	cp_node_wait(s->conns);
	for (int i = 0; i < s->n_shards; i++)
	{
		DistShard  *sh = &s->shards[i];

		hex_to_bytes(cp_node_value(sh->conn, 0, 0), &sh->out, sh->placement);
		received += sh->out.len;
		if (sh->epoch_stats == NULL)
			sh->epoch_stats = palloc0(sizeof(CpStats) * Max(cp_dist_local_epochs, 1));
		read_output(s, sh, n_epochs, first);
	}
	s->bytes_received = received;

	if (s->lo.seen_zero && s->lo.seen_minus_one)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_EXCEPTION),
				 errmsg("labels of relation \"%s\" mix 0 and -1", s->lo.relname),
				 errdetail("A binary %s model takes labels -1/+1 or 0/1, not both.",
						   cp_model_kind_name(s->lo.model))));

	/* the figure of the average sent, before this round's iterates join it */
	if (scores)
		dist_check_sample(s);

	/* the weights, averaged by the rows each shard trained on in the round */
	for (int i = 0; i < s->n_shards; i++)
	{
		DistShard  *sh = &s->shards[i];

		memset(&s->copy_stats[i], 0, sizeof(CpStats));
		if (sh->w == NULL)
			continue;
		s->copy_stats[i] = sh->epoch_stats[n_epochs - 1];
		memcpy(s->copies + (Size) i * s->model.n_weights, sh->w,
			   sizeof(double) * s->model.n_weights);
	}
	cp_merge_weighted(s->copies, s->copy_stats, s->n_shards, s->model.n_weights, s->model.w);

	/* the iterates' averages, by the snapshots each holds, into the running one */
	for (int i = 0; i < s->n_shards; i++)
	{
		DistShard  *sh = &s->shards[i];

		memset(&s->copy_stats[i], 0, sizeof(CpStats));
		if (sh->avg == NULL || sh->avg_n <= 0)
			continue;
		s->copy_stats[i].n = sh->avg_n;
		round_avg_n += sh->avg_n;
		memcpy(s->copies + (Size) i * s->model.n_weights, sh->avg,
			   sizeof(double) * s->model.n_weights);
	}
	if (round_avg_n > 0)
	{
		double	   *round_avg = palloc(sizeof(double) * s->model.n_weights);
		double		share = (double) round_avg_n / (double) (s->avg_n + round_avg_n);

		cp_merge_weighted(s->copies, s->copy_stats, s->n_shards, s->model.n_weights, round_avg);
		for (int j = 0; j < s->model.n_weights; j++)
			s->avg[j] += (round_avg[j] - s->avg[j]) * share;
		s->avg_n += round_avg_n;
		pfree(round_avg);
	}

	INSTR_TIME_SET_CURRENT(elapsed);
	INSTR_TIME_SUBTRACT(elapsed, start);
	{
		double		slowest = 0.0;

		for (int i = 0; i < s->n_shards; i++)
			slowest = Max(slowest, s->shards[i].seconds);
		s->n_rounds++;
		s->slowest_sum += slowest;
		s->overhead_sum += INSTR_TIME_GET_DOUBLE(elapsed) - slowest;
	}

	/* the round's epochs, each merged over the shards */
	for (int k = 0; k < n_epochs; k++)
	{
		CpStats		st;
		CpEpochResult *res;

		memset(&st, 0, sizeof(st));
		for (int i = 0; i < s->n_shards; i++)
			cp_stats_merge(&st, &s->shards[i].epoch_stats[k]);
		if (s->n_done >= s->results_cap)
		{
			s->results = repalloc_huge(s->results, sizeof(CpEpochResult) * s->results_cap * 2);
			memset(s->results + s->results_cap, 0, sizeof(CpEpochResult) * s->results_cap);
			s->results_cap *= 2;
		}
		res = &s->results[s->n_done];
		res->epoch = s->n_done + 1;
		res->tuples = st.n;
		res->loss = cp_stats_loss(&st);
		res->score = cp_stats_score(&st, s->model.kind);
		res->seconds = INSTR_TIME_GET_DOUBLE(elapsed) / n_epochs;
		s->n_done++;
		if (st.n == 0)
			ereport(ERROR,
					(errcode(ERRCODE_NO_DATA),
					 errmsg("relation \"%s\" has no rows with a non-NULL label and features to train on",
							s->lo.relname)));
		if (!isfinite(res->loss) || !cp_model_is_finite(&s->model))
			ereport(ERROR,
					(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
					 errmsg("training of model \"%s\" diverged in epoch %d: the loss is no longer a finite number",
							s->model_name, res->epoch),
					 errhint("Train with a smaller learning_rate.")));
		if (s->n_done == 1)
		{
			s->rows = st.n;
			if (s->params.l2_auto)
				s->l2 = 1.0 / (double) st.n;
			if (s->params.epochs_auto)
				s->params.max_epoch_num = cp_sgd_default_epochs(st.n);
		}
		if (cp_progress_notices)
			ereport(NOTICE,
					(errmsg("corgipile: model=%s epoch=%d/%d tuples=%lld loss=%.6f score=%.6f validation_score=null seconds=%.3f",
							s->model_name, res->epoch, s->params.max_epoch_num,
							(long long) res->tuples, res->loss, res->score, res->seconds),
					 res->epoch == 1 ?
					 errdetail("A distributed training over %d shards: loss and score are taken on the training rows of every shard, each predicted before its own update.",
							   s->n_shards) : 0));
		/*
		 * Plain SGD's rule (its last iterate is the model): the round's
		 * training loss, from epoch 2 on, as one node compares it.
		 */
		if (k == n_epochs - 1 && s->stop_rule && !s->sample_rule && s->n_done >= 2 &&
			cp_convergence_update(&s->conv, res->loss))
			s->converged = true;
	}
	if (first && s->lo.n_skipped > 0)
		ereport(NOTICE,
				(errmsg("corgipile: skipped %lld rows of \"%s\" with a NULL label or NULL features",
						(long long) s->lo.n_skipped, s->lo.relname)));
	if (s->converged || s->n_done >= s->params.max_epoch_num)
		s->finished = true;
	MemoryContextSwitchTo(old);
}

static void
dist_save(DistState *s)
{
	CpTrainRecord rec;
	CpSizing	sizing;
	int			nest;
	char	   *stopping = NULL;

	memset(&rec, 0, sizeof(rec));
	memset(&sizing, 0, sizeof(sizing));
	if (s->stop_rule && s->conv.epochs > 0)
		stopping = psprintf("{\"rule\": \"%s\", \"figure\": \"%s\", \"rows\": %lld"
							", \"epochs_compared\": %d, \"objective\": %.17g, \"last_change\": %.6g"
							", \"converged\": %s}",
							s->params.early_stopping ? "tolerance" : "default",
							s->sample_rule ? "averaged model's objective on the sample of every shard" :
							"training loss of every shard",
							(long long) (s->sample_rule ? s->sample_rows : 0),
							s->conv.epochs, s->conv.last,
							isnan(s->conv.last_change) ? 0.0 : s->conv.last_change,
							s->converged ? "true" : "false");
	rec.model_name = s->model_name;
	rec.params = &s->params;
	rec.layout = &s->lo;
	rec.sizing = &sizing;
	rec.rel = s->rel;
	rec.stopping_json = stopping;
	rec.seed = s->seed;
	rec.model = &s->model;
	rec.results = s->results;
	rec.n_results = s->n_done;
	rec.weights = (s->params.average && s->avg_n > 0) ? s->avg : s->model.w;
	rec.best_epoch = s->n_done;
	rec.workers = 1;
	nest = cp_pin_search_path();
	cp_models_insert(&rec);
	cp_restore_search_path(nest);
	s->saved = true;
}

static TupleTableSlot *
dist_next(ScanState *node)
{
	DistState  *s = (DistState *) node;
	TupleTableSlot *slot = node->ss_ScanTupleSlot;
	CpEpochResult *res;

	ExecClearTuple(slot);
	if (!s->started)
		dist_start(s);
	if (s->replay_pos == s->n_done && !s->finished)
		dist_round(s);
	if (s->replay_pos >= s->n_done)
		return slot;
	res = &s->results[s->replay_pos++];
	/* stored when the caller takes the last row: a LIMIT that stops sooner stores none */
	if (s->finished && s->replay_pos == s->n_done && !s->saved)
		dist_save(s);
	return cp_sgd_epoch_row(slot, s->model_name_datum, res, false);
}

static bool
dist_recheck(ScanState *node, TupleTableSlot *slot)
{
	return true;
}

static TupleTableSlot *
dist_exec(CustomScanState *node)
{
	return ExecScan(&node->ss, dist_next, dist_recheck);
}

static void
dist_rescan(CustomScanState *node)
{
	((DistState *) node)->replay_pos = 0;
}

/* The sessions end with the transaction; a training that ends sooner closes them now. */
static void
dist_end(CustomScanState *node)
{
	DistState  *s = (DistState *) node;

	for (int i = 0; i < s->n_shards; i++)
		if (s->shards[i].conn != NULL)
			cp_node_close(s->shards[i].conn);
	s->n_shards = 0;
	if (s->rel != NULL)
		table_close(s->rel, NoLock);
}

static void
dist_explain(CustomScanState *node, List *ancestors, ExplainState *es)
{
	DistState  *s = (DistState *) node;

	ExplainPropertyText("Model", cp_model_kind_name(s->params.model), es);
	ExplainPropertyText("Shuffle", psprintf("%s on every shard", cp_shuffle_name(s->params.shuffle)), es);
	ExplainPropertyText("Relation", RelationGetRelationName(s->rel), es);
	ExplainPropertyInteger("Shards", NULL, list_length(cp_citus_shard_placements(s->params.relid)), es);
	ExplainPropertyInteger("Local Epochs per Round", NULL, cp_dist_local_epochs, es);
	if (s->params.epochs_auto && !(es->analyze && s->n_done > 0))
		ExplainPropertyText("Epochs", "chosen after epoch 1 by the rows of every shard", es);
	else
		ExplainPropertyInteger("Epochs", NULL, s->params.max_epoch_num, es);
	if (es->analyze)
	{
		double		cpu = 0.0;

		for (int i = 0; i < s->n_shards; i++)
			cpu += s->shards[i].cpu;
		ExplainPropertyInteger("Epochs Trained", NULL, s->n_done, es);
		ExplainPropertyFloat("Worker CPU Seconds", NULL, cpu, 3, es);
		ExplainPropertyInteger("Rounds", NULL, s->n_rounds, es);
		ExplainPropertyFloat("Slowest Shard ms per Round", NULL,
							 s->n_rounds ? s->slowest_sum * 1000.0 / s->n_rounds : 0.0, 3, es);
		ExplainPropertyFloat("Coordinator ms per Round", NULL,
							 s->n_rounds ? s->overhead_sum * 1000.0 / s->n_rounds : 0.0, 3, es);
		ExplainPropertyInteger("Bytes Sent per Round", NULL, s->bytes_sent, es);
		ExplainPropertyInteger("Bytes Received per Round", NULL, s->bytes_received, es);
	}
}
