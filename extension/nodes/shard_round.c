/*-------------------------------------------------------------------------
 *
 * shard_round.c
 *	  The worker side of a distributed training (docs/distributed.md): one
 *	  shard's CorgiPile training, driven a round at a time by the
 *	  coordinator (dist_train.c) over a session held for the training.
 *
 * The coordinator opens, per shard, a transaction on the shard's worker and
 * calls corgipile.shard_open(args): it opens a cursor over the ordinary
 * training plan (SGD -> TupleShuffle -> BlockShuffle on the shard's table)
 * with the SGD node in round mode, and runs the first pass over the shard,
 * whose learnt state it returns instead of finishing it.  Then each round
 * calls corgipile.shard_round(input): the coordinator's weights, the
 * global epoch, the penalty (and, the first time, the shards' merged
 * first pass; from round 3, the averaged model to score on the shard's
 * share of the stopping rule's sample) go in, the cursor is fetched for
 * the round's local epochs, and the weights, the round's iterate average,
 * the epochs' figures and the sample's come out.  Everything between rounds (block cache, shuffle state,
 * buffers) is the open cursor's executor state, so later rounds are cached
 * epochs; it lives in the transaction, and whatever ends the transaction
 * (the coordinator's ROLLBACK, its connection closing, a cancel) frees it.
 * Rows never leave the worker.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <math.h>
#include <sys/resource.h>

#include "access/xact.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "libpq/pqformat.h"
#include "miscadmin.h"
#include "portability/instr_time.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/memutils.h"

#include "nodes/sgd_state.h"
#include "nodes/shard_round.h"

PG_FUNCTION_INFO_V1(corgipile_shard_open);
PG_FUNCTION_INFO_V1(corgipile_shard_round);

#define SHARD_CURSOR "corgipile_shard_training"

typedef enum RoundPhase
{
	PHASE_STATS,				/* shard_open: the first pass */
	PHASE_ROUND					/* shard_round: epochs */
} RoundPhase;

typedef struct CpShardRound
{
	SgdState   *sgd;			/* the cursor's SGD node, once started */
	RoundPhase	phase;
	bool		stats_done;
	StringInfoData stats;		/* PHASE_STATS: the shard's first pass */

	/* the round's input */
	StringInfoData merged;		/* the merged first pass, first round only */
	bool		shape_pending;
	int32		epoch0;			/* global epochs trained before the round */
	int32		n_epochs;		/* local epochs this round */
	int32		epoch_in_round; /* epochs of it done */
	double		l2;
	double	   *w_in;
	int32		n_w_in;
	bool		w_pending;		/* not yet copied into the model */
	int64		table_rows;		/* every shard's, for the sample's share */
	double	   *score_in;		/* weights to score on the sample, or NULL */
	int32		n_score_in;

	/* the round's output */
	CpStats    *epoch_stats;	/* n_epochs */
	double	   *w_out;			/* NULL: no rows on this shard yet */
	double	   *avg_out;
	int64		avg_n;
	double		cpu_mark;		/* CPU seconds when last reported */
} CpShardRound;

static CpShardRound *arming = NULL; /* shard_open, while the cursor starts */
static CpShardRound *session_round = NULL;	/* the transaction's shard training */
static bool callback_registered = false;

static void
shard_round_xact_callback(XactEvent event, void *arg)
{
	/* the round lives in TopTransactionContext, gone with it */
	if (event == XACT_EVENT_COMMIT || event == XACT_EVENT_ABORT ||
		event == XACT_EVENT_PARALLEL_COMMIT || event == XACT_EVENT_PARALLEL_ABORT ||
		event == XACT_EVENT_PREPARE)
	{
		session_round = NULL;
		arming = NULL;
	}
}

/*
 * sgd_begin: the node of the cursor shard_open is opening takes the round
 * mode: the coordinator decides the epochs, the penalty and when to stop,
 * and stores the model; this node only trains epochs of its shard.
 */
void
cp_sgd_round_begin(SgdState *s)
{
	s->round = arming;
	if (arming == NULL)
		return;
	arming = NULL;
	s->round->sgd = s;
	s->params.epochs_auto = false;
	s->params.converge_auto = false;
	s->params.l2_auto = false;
	s->params.early_stopping = false;
	s->params.max_epoch_num = PG_INT32_MAX;
	s->params.workers = 1;
}

/* sgd_next, phase stats: the first pass, sent rather than finished. */
bool
cp_sgd_round_stats(SgdState *s)
{
	CpShardRound *r = s->round;

	if (r == NULL || r->phase != PHASE_STATS)
		return false;
	if (r->stats_done)
		elog(ERROR, "corgipile: a shard training's statistics were asked for twice");
	cp_tuple_source_dist_stats(s->src, (uint64) s->seed, &r->stats);
	r->stats_done = true;
	return true;
}

/* cp_sgd_run_epoch, before epoch 1: the shards' merged first pass. */
void
cp_sgd_round_shape(SgdState *s)
{
	CpShardRound *r = s->round;

	if (!r->shape_pending)
		ereport(ERROR,
				(errcode(ERRCODE_PROTOCOL_VIOLATION),
				 errmsg("corgipile: the first round of a shard training must carry the merged statistics")));
	cp_tuple_source_dist_shape(s->src, &r->merged);
	r->shape_pending = false;
}

/* The coordinator's weights, into the model once it has its shape. */
void
cp_sgd_round_weights(SgdState *s)
{
	CpShardRound *r = s->round;

	if (r == NULL || !r->w_pending)
		return;
	if (r->n_w_in != s->model.n_weights)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_EXCEPTION),
				 errmsg("corgipile: the coordinator sent %d weights; the model of shard \"%s\" has %d",
						r->n_w_in, s->lo->relname, s->model.n_weights),
				 errhint("Every node must run the same corgipile version.")));
	memcpy(s->model.w, r->w_in, sizeof(double) * r->n_w_in);
	s->model.l2_scale = 0.0;
	r->w_pending = false;
}

/*
 * cp_sgd_run_epoch, before the epoch trains: the global epoch's rate and
 * penalty; at a round's first epoch the coordinator's weights, and an
 * iterate average of this round alone (the coordinator averages them over
 * the shards and the rounds, as one process averages its epochs').
 */
void
cp_sgd_round_epoch_begin(SgdState *s)
{
	CpShardRound *r = s->round;
	int32		epoch = r->epoch0 + r->epoch_in_round;

	if (r->phase != PHASE_ROUND || r->epoch_in_round >= r->n_epochs)
		ereport(ERROR,
				(errcode(ERRCODE_PROTOCOL_VIOLATION),
				 errmsg("corgipile: a shard training's epochs are run by corgipile.shard_round()")));
	s->learning_rate = s->params.learning_rate * pow(s->params.decay, epoch);
	s->params.l2 = r->l2;
	if (!s->model_ready)
		return;					/* cp_sgd_ensure_model takes them */
	s->model.learning_rate = s->learning_rate;
	s->model.l2 = r->l2;
	cp_sgd_round_weights(s);
	if (r->epoch_in_round == 0 && s->model.avg != NULL)
	{
		memset(s->model.avg, 0, sizeof(double) * s->model.n_weights);
		s->model.avg_n = 0;
		s->model.avg_rows = 0;
	}
	s->model.averaging = s->params.average && epoch >= 1;
}

/* cp_sgd_run_epoch, after the epoch: its figures, and at the round's end the weights. */
void
cp_sgd_round_epoch_end(SgdState *s)
{
	CpShardRound *r = s->round;

	r->epoch_stats[r->epoch_in_round] = s->model_ready ? s->model.stats : (CpStats)
	{
		0
	};
	r->epoch_in_round++;
	if (r->epoch_in_round < r->n_epochs || !s->model_ready)
		return;
	r->w_out = s->model.w;
	r->avg_out = s->model.avg;
	r->avg_n = s->model.avg != NULL ? s->model.avg_n : 0;
}

/* This backend's CPU seconds: a round reports its own, the first also the pass's. */
static double
cpu_seconds(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return ru.ru_utime.tv_sec + ru.ru_stime.tv_sec +
		(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

static const char *
arg_text(ArrayType *arr, int i, Datum *elems, bool *nulls)
{
	if (nulls[i])
		return NULL;
	return TextDatumGetCString(elems[i]);
}

/* The SQL of the training call, its arguments as literals of their types. */
static char *
training_call(ArrayType *args)
{
	static const Oid types[] = {
#define CP_ARG_TYPE(id, name, type, isnull, datum, sqldefault) type,
		CP_TRAIN_ARGS(CP_ARG_TYPE)
#undef CP_ARG_TYPE
	};
	Datum	   *elems;
	bool	   *nulls;
	int			n;
	StringInfoData sql;

	if (ARR_NDIM(args) > 1 || ARR_ELEMTYPE(args) != TEXTOID)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("corgipile.shard_open: args must be a one-dimensional text array")));
	deconstruct_array(args, TEXTOID, -1, false, TYPALIGN_INT, &elems, &nulls, &n);
	if (n != CP_NUM_ARGS)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("corgipile.shard_open: %d arguments given; corgipile.train takes %d",
						n, CP_NUM_ARGS),
				 errhint("Every node must run the same corgipile version.")));
	initStringInfo(&sql);
	appendStringInfoString(&sql, "SELECT * FROM corgipile.train(");
	for (int i = 0; i < n; i++)
	{
		const char *v = arg_text(args, i, elems, nulls);

		appendStringInfo(&sql, "%s%s::%s", i > 0 ? ", " : "",
						 v == NULL ? "NULL" : quote_literal_cstr(v),
						 format_type_be_qualified(types[i]));
	}
	appendStringInfoChar(&sql, ')');
	return sql.data;
}

/*
 * corgipile.shard_open(args text[]) returns bytea: train()'s arguments (as
 * text) for the shard's table; opens the shard's training in this
 * transaction and returns its first pass's learnt state.
 */
Datum
corgipile_shard_open(PG_FUNCTION_ARGS)
{
	ArrayType  *args = PG_GETARG_ARRAYTYPE_P(0);
	char	   *sql;
	CpShardRound *r;
	SPIPlanPtr	plan;
	Portal		portal;
	bytea	   *result;

	if (!IsTransactionBlock())
		ereport(ERROR,
				(errcode(ERRCODE_NO_ACTIVE_SQL_TRANSACTION),
				 errmsg("corgipile.shard_open() must run inside a transaction block"),
				 errdetail("A shard's training lives in the transaction of the coordinator's session.")));
	if (session_round != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_DUPLICATE_CURSOR),
				 errmsg("a shard training is already open in this transaction")));
	if (!callback_registered)
	{
		RegisterXactCallback(shard_round_xact_callback, NULL);
		callback_registered = true;
	}
	sql = training_call(args);

	r = MemoryContextAllocZero(TopTransactionContext, sizeof(CpShardRound));
	r->phase = PHASE_STATS;
	r->cpu_mark = cpu_seconds();
	{
		MemoryContext old = MemoryContextSwitchTo(TopTransactionContext);

		initStringInfo(&r->stats);
		initStringInfo(&r->merged);
		MemoryContextSwitchTo(old);
	}

	SPI_connect();
	plan = SPI_prepare(sql, 0, NULL);
	if (plan == NULL)
		elog(ERROR, "corgipile: could not prepare the shard's training: %s",
			 SPI_result_code_string(SPI_result));
	arming = r;
	PG_TRY();
	{
		portal = SPI_cursor_open(SHARD_CURSOR, plan, NULL, NULL, false);
	}
	PG_FINALLY();
	{
		arming = NULL;
	}
	PG_END_TRY();
	if (r->sgd == NULL)
		elog(ERROR, "corgipile: the shard's training did not plan as a training");
	session_round = r;
	SPI_cursor_fetch(portal, true, 1);
	if (!r->stats_done)
		elog(ERROR, "corgipile: the shard's training returned no statistics");
	SPI_finish();

	result = palloc(VARHDRSZ + r->stats.len);
	SET_VARSIZE(result, VARHDRSZ + r->stats.len);
	memcpy(VARDATA(result), r->stats.data, r->stats.len);
	PG_RETURN_BYTEA_P(result);
}

/* Read the round's input (dist_train.c writes it). */
static void
read_input(CpShardRound *r, bytea *input)
{
	StringInfoData in;
	int32		merged_len;
	MemoryContext old = MemoryContextSwitchTo(TopTransactionContext);

	in.data = VARDATA_ANY(input);
	in.len = VARSIZE_ANY_EXHDR(input);
	in.maxlen = in.len;
	in.cursor = 0;
	if (pq_getmsgbyte(&in) != CP_ROUND_FORMAT)
		ereport(ERROR,
				(errcode(ERRCODE_PROTOCOL_VIOLATION),
				 errmsg("corgipile.shard_round: the coordinator's input is of another format"),
				 errhint("Every node must run the same corgipile version.")));
	r->epoch0 = pq_getmsgint(&in, 4);
	r->n_epochs = pq_getmsgint(&in, 4);
	r->l2 = pq_getmsgfloat8(&in);
	r->n_w_in = pq_getmsgint(&in, 4);
	if (r->epoch0 < 0 || r->n_epochs < 1 || r->n_epochs > 1000 || r->n_w_in < 0 ||
		(int64) r->n_w_in * 8 > in.len - in.cursor || !isfinite(r->l2) || r->l2 < 0)
		ereport(ERROR,
				(errcode(ERRCODE_PROTOCOL_VIOLATION),
				 errmsg("corgipile.shard_round: the coordinator's input is damaged")));
	if (r->w_in != NULL)
		pfree(r->w_in);
	r->w_in = palloc(sizeof(double) * Max(r->n_w_in, 1));
	for (int32 j = 0; j < r->n_w_in; j++)
		r->w_in[j] = pq_getmsgfloat8(&in);
	r->w_pending = true;
	r->table_rows = pq_getmsgint64(&in);
	r->n_score_in = pq_getmsgint(&in, 4);
	if (r->table_rows < 0 || r->n_score_in < 0 ||
		(int64) r->n_score_in * 8 > in.len - in.cursor)
		ereport(ERROR,
				(errcode(ERRCODE_PROTOCOL_VIOLATION),
				 errmsg("corgipile.shard_round: the coordinator's input is damaged")));
	if (r->score_in != NULL)
		pfree(r->score_in);
	r->score_in = palloc(sizeof(double) * Max(r->n_score_in, 1));
	for (int32 j = 0; j < r->n_score_in; j++)
		r->score_in[j] = pq_getmsgfloat8(&in);
	merged_len = pq_getmsgint(&in, 4);
	if (merged_len < 0 || merged_len > in.len - in.cursor)
		ereport(ERROR,
				(errcode(ERRCODE_PROTOCOL_VIOLATION),
				 errmsg("corgipile.shard_round: the coordinator's input is damaged")));
	if (merged_len > 0)
	{
		resetStringInfo(&r->merged);
		appendBinaryStringInfo(&r->merged, pq_getmsgbytes(&in, merged_len), merged_len);
		r->shape_pending = true;
	}
	pq_getmsgend(&in);
	if (r->epoch_stats != NULL)
		pfree(r->epoch_stats);
	r->epoch_stats = palloc0(sizeof(CpStats) * r->n_epochs);
	r->epoch_in_round = 0;
	r->w_out = NULL;
	r->avg_out = NULL;
	r->avg_n = 0;
	MemoryContextSwitchTo(old);
}

static void
send_weights(StringInfo out, const double *w, int32 n)
{
	pq_sendint32(out, n);
	for (int32 j = 0; j < n; j++)
		pq_sendfloat8(out, w[j]);
}

static void
send_stats(StringInfo out, const CpStats *st)
{
	pq_sendint64(out, st->n);
	pq_sendfloat8(out, st->loss_sum);
	pq_sendint64(out, st->n_correct);
	pq_sendfloat8(out, st->sum_y);
	pq_sendfloat8(out, st->sum_y2);
	pq_sendfloat8(out, st->sse);
}

/*
 * The coordinator's averaged model scored on this shard's share of the
 * stopping rule's sample: the first rows of the shard's epoch 1, in its
 * seeded order, as many as its share of the table's rows is of
 * CP_SAMPLE_ROWS (rounded up), so the shards' samples make about one
 * node's.  Scored before the round trains, on the weights it was sent.
 */
static CpStats
score_sample(CpShardRound *r)
{
	SgdState   *s = r->sgd;
	CpStats		none;
	int64		shard_rows;
	int64		rows;

	memset(&none, 0, sizeof(none));
	if (r->n_score_in == 0 || !s->model_ready || s->n_done == 0 ||
		s->sample.n_rows == 0 || r->table_rows <= 0)
		return none;
	if (r->n_score_in != s->model.n_weights)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_EXCEPTION),
				 errmsg("corgipile: the coordinator sent %d weights to score; the model of shard \"%s\" has %d",
						r->n_score_in, s->lo->relname, s->model.n_weights),
				 errhint("Every node must run the same corgipile version.")));
	shard_rows = s->results[0].tuples;
	/* the share rounded up, without adding to table_rows (which is sent) */
	rows = CP_SAMPLE_ROWS * shard_rows / r->table_rows +
		((CP_SAMPLE_ROWS * shard_rows) % r->table_rows != 0);
	return cp_sgd_sample_stats(s, r->score_in, rows);
}

/*
 * corgipile.shard_round(input bytea) returns bytea: one round of the
 * transaction's shard training (see the file's header).
 */
Datum
corgipile_shard_round(PG_FUNCTION_ARGS)
{
	bytea	   *input = PG_GETARG_BYTEA_PP(0);
	CpShardRound *r = session_round;
	SgdState   *s;
	Portal		portal;
	StringInfoData out;
	instr_time	start;
	instr_time	elapsed;
	double		cpu;
	CpStats		scored;

	if (r == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("no shard training is open in this transaction"),
				 errhint("corgipile.shard_round() is called by a distributed training's coordinator after corgipile.shard_open().")));
	s = r->sgd;
	INSTR_TIME_SET_CURRENT(start);
	read_input(r, input);
	r->phase = PHASE_ROUND;
	scored = score_sample(r);

	SPI_connect();
	portal = SPI_cursor_find(SHARD_CURSOR);
	if (portal == NULL)
		elog(ERROR, "corgipile: the shard training's cursor is gone");
	SPI_cursor_fetch(portal, true, r->n_epochs);
	if (SPI_processed != (uint64) r->n_epochs || r->epoch_in_round != r->n_epochs)
		elog(ERROR, "corgipile: the shard's training ran %d of %d epochs",
			 r->epoch_in_round, r->n_epochs);
	SPI_finish();

	pq_begintypsend(&out);
	pq_sendbyte(&out, CP_ROUND_FORMAT);
	send_stats(&out, &scored);
	pq_sendint32(&out, r->n_epochs);
	for (int k = 0; k < r->n_epochs; k++)
		send_stats(&out, &r->epoch_stats[k]);
	send_weights(&out, r->w_out, r->w_out != NULL ? s->model.n_weights : 0);
	pq_sendint64(&out, r->avg_n);
	send_weights(&out, r->avg_out, r->avg_n > 0 ? s->model.n_weights : 0);
	pq_sendbyte(&out, s->lo->seen_minus_one);
	pq_sendbyte(&out, s->lo->seen_zero);
	pq_sendbyte(&out, s->lo->seen_one);
	pq_sendint64(&out, s->lo->n_skipped);
	pq_sendint64(&out, s->lo->n_null_label);
	cpu = cpu_seconds();
	pq_sendfloat8(&out, cpu - r->cpu_mark);
	r->cpu_mark = cpu;
	INSTR_TIME_SET_CURRENT(elapsed);
	INSTR_TIME_SUBTRACT(elapsed, start);
	pq_sendfloat8(&out, INSTR_TIME_GET_DOUBLE(elapsed));
	PG_RETURN_BYTEA_P(pq_endtypsend(&out));
}
