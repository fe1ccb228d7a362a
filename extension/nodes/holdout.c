/*-------------------------------------------------------------------------
 *
 * holdout.c
 *	  validation => 'N%': which rows are held out, keeping them, scoring
 *	  them (see holdout.h).
 *
 * The decision depends only on (seed, ctid), so it is the same in every
 * epoch and whatever order blocks are read in; with the seed recorded in
 * the model it can be repeated on an unchanged table (not across UPDATE,
 * VACUUM FULL or CLUSTER, which move rows).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <math.h>

#include "access/tableam.h"
#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "utils/json.h"
#include "utils/memutils.h"

#include "core/preprocess.h"
#include "io/block_cache.h"
#include "nodes/holdout.h"
#include "model/metrics.h"
#include "model/models.h"
#include "util/json.h"

void
cp_holdout_init(CpHoldout *h, double fraction, bool sparse, MemoryContext cxt)
{
	memset(h, 0, sizeof(*h));
	h->fraction = fraction;
	h->budget = (Size) maintenance_work_mem * 1024;
	cp_buffer_init(&h->rows, cxt, sparse);
}

bool
cp_holdout_is_held_out(const CpHoldout *h, ItemPointer tid)
{
	return cp_prep_holdout(h->seed, ItemPointerGetBlockNumberNoCheck(tid),
						   ItemPointerGetOffsetNumberNoCheck(tid), h->fraction);
}

/* What the kept rows' arrays take, as cp_buffer_reserve sizes them. */
static Size
kept_bytes(const CpBuffer *b)
{
	Size		per_value = sizeof(double) + (b->sparse ? sizeof(int32) : 0);
	Size		per_row = sizeof(double) + sizeof(uint32) + (b->sparse ? sizeof(int64) : 0);

	return (Size) b->cap_rows * per_row + (Size) b->cap_nnz * per_value;
}

/*
 * Is the row at tid held out?  *keep says whether the caller must hand it
 * to cp_holdout_keep: during the first epoch, while the kept rows fit the
 * budget.  Decided from the ctid alone, before the row is deformed.
 */
bool
cp_holdout_take(CpHoldout *h, ItemPointer tid, bool *keep)
{
	*keep = false;
	if (!cp_holdout_is_held_out(h, tid))
		return false;
	if (h->complete)
		return true;
	h->n_seen++;
	*keep = !h->reread;
	return true;
}

/*
 * Keep a held-out row of the first epoch, converted with the training's
 * layout (so labels map, and categories and the standardizing transform
 * apply, the same way), unless the kept rows would outgrow the budget: then
 * drop them all and score by reading the table again.  (The arrays grow by
 * doubling, so for a moment while they are copied they may take up to
 * twice the budget.)  Called on the main thread, in the row memory context
 * of the caller.
 */
void
cp_holdout_keep(CpHoldout *h, CpLayout *lo, TupleTableSlot *slot)
{
	cp_layout_append(lo, slot, &h->rows);
	if (kept_bytes(&h->rows) > h->budget)
	{
		cp_buffer_free(&h->rows);
		h->reread = true;
	}
}

/*
 * Epoch 1 takes a block from the block cache that the first pass filled:
 * the block's held-out rows, which the pass met and converted as
 * cp_holdout_keep would (cp_block_cache_add_held), are counted and kept
 * here, in epoch 1's order, as if the block had been read from the heap.
 */
void
cp_holdout_keep_cached(CpHoldout *h, const CpBlockCache *cache, uint32 block)
{
	int64		rows;
	int			d;
	const double *labels;
	const double *values;
	int64		seen;
	int64		at;

	if (h->complete)
		return;
	seen = cp_block_cache_held(cache, block, &rows, &d, &labels, &values);
	h->n_seen += seen;
	if (h->reread || rows == 0)
		return;
	at = h->rows.n_rows;
	h->rows.n_features = d;
	cp_buffer_reserve(&h->rows, at + rows, (at + rows) * d);
	memcpy(h->rows.labels + at, labels, sizeof(double) * rows);
	memcpy(h->rows.values + at * d, values, sizeof(double) * rows * d);
	h->rows.n_rows = at + rows;
	if (kept_bytes(&h->rows) > h->budget)
	{
		cp_buffer_free(&h->rows);
		h->reread = true;
	}
}

/* The first epoch has read every row: the kept rows are all of them. */
void
cp_holdout_epoch_done(CpHoldout *h)
{
	h->complete = true;
}

/*
 * Hand the held-out rows to fn: the kept rows at once, or, over budget,
 * batches of batch_rows read from rel (converted with a copy of the
 * layout, so that the training's counts do not change).
 */
void
cp_holdout_score(CpHoldout *h, const CpLayout *lo, Relation rel, Snapshot snapshot,
				 CpBuffer *batch, int64 batch_rows, MemoryContext row_cxt,
				 CpBatchFn fn, void *arg)
{
	CpLayout	vlo = *lo;
	TableScanDesc scan;
	TupleTableSlot *slot;
	MemoryContext old;
	int64		seen = 0;

	Assert(h->complete);
	if (!h->reread)
	{
		h->rows.n_features = lo->n_features;
		fn(&h->rows, arg);
		return;
	}
	scan = table_beginscan(rel, snapshot, 0, NULL);
	slot = table_slot_create(rel, NULL);
	cp_buffer_reset(batch, lo->n_features);
	while (table_scan_getnextslot(scan, ForwardScanDirection, slot))
	{
		if ((++seen % 256) == 0)
			CHECK_FOR_INTERRUPTS();
		if (!cp_holdout_is_held_out(h, &slot->tts_tid))
			continue;
		old = MemoryContextSwitchTo(row_cxt);
		cp_layout_append(&vlo, slot, batch);
		MemoryContextSwitchTo(old);
		MemoryContextReset(row_cxt);
		if (batch->n_rows >= batch_rows)
		{
			fn(batch, arg);
			cp_buffer_reset(batch, lo->n_features);
		}
	}
	fn(batch, arg);
	ExecDropSingleTupleTableSlot(slot);
	table_endscan(scan);
}

/* ---------------------------------------------------------------------
 * What the model row records of the held-out rows
 * ---------------------------------------------------------------------
 */

typedef struct ReportPass
{
	const CpModel *model;		/* the kept weights */
	CpStats		stats;			/* loss and score, as per epoch */
	CpEvalState ev;				/* corgipile.evaluate()'s metrics */
} ReportPass;

static void
report_batch(const CpBuffer *buf, void *arg)
{
	ReportPass *r = (ReportPass *) arg;

	cp_model_evaluate(r->model, buf, &r->stats);
	cp_eval_add_rows(buf, &r->ev);
}

static void
json_key_number(StringInfo buf, const char *key, double v)
{
	escape_json(buf, key);
	appendStringInfoString(buf, ": ");
	cp_json_number(buf, v);
}

typedef struct MetricsOut
{
	StringInfoData json;		/* "name": value, ... */
	StringInfoData text;		/* name=value ... for the NOTICE */
} MetricsOut;

static void
add_metric(void *arg, const char *metric, double value)
{
	MetricsOut *out = (MetricsOut *) arg;

	if (out->json.len > 0)
		appendStringInfoString(&out->json, ", ");
	json_key_number(&out->json, metric, value);
	if (!isnan(value))
		appendStringInfo(&out->text, " %s=%.6f", metric, value);
}

/*
 * The held-out rows scored once more with the weights the model keeps
 * (those of epoch, the best one under early stopping), as a JSON object for
 * the model's params: the fraction, the seed that decides the split, the
 * rows, the loss and score as the epochs report them, and the metrics
 * corgipile.evaluate() would give on those rows; *summary says the same
 * in a line of text.
 */
char *
cp_holdout_report(CpHoldout *h, const CpLayout *lo, Relation rel, Snapshot snapshot,
				  CpBuffer *batch, MemoryContext row_cxt, const CpModel *model,
				  double *w, int epoch, char **summary)
{
	ReportPass	r;
	CpModel		kept = *model;
	StringInfoData buf;
	MetricsOut	out;

	kept.w = w;
	memset(&r, 0, sizeof(r));
	r.model = &kept;
	cp_eval_init(&r.ev, model, w);
	cp_holdout_score(h, lo, rel, snapshot, batch, 4096, row_cxt, report_batch, &r);

	initStringInfo(&buf);
	appendStringInfoChar(&buf, '{');
	json_key_number(&buf, "fraction", h->fraction);
	/* as text: a bigint seed need not fit a double */
	appendStringInfo(&buf, ", \"seed\": \"" INT64_FORMAT "\", \"rows\": " INT64_FORMAT,
					 (int64) h->seed, r.stats.n);
	appendStringInfo(&buf, ", \"epoch\": %d, ", epoch);
	json_key_number(&buf, "loss", r.stats.n > 0 ? cp_stats_loss(&r.stats) : NAN);
	appendStringInfoString(&buf, ", ");
	json_key_number(&buf, "score", r.stats.n > 0 ? cp_stats_score(&r.stats, model->kind) : NAN);
	initStringInfo(&out.json);
	initStringInfo(&out.text);
	if (r.ev.n > 0)
		cp_eval_metrics(&r.ev, add_metric, &out);
	cp_eval_end(&r.ev);
	appendStringInfo(&buf, ", \"metrics\": {%s}}", out.json.data);
	*summary = psprintf("held out " INT64_FORMAT " rows (%g%%), epoch %d:%s",
						r.stats.n, h->fraction * 100.0, epoch, out.text.data);
	return buf.data;
}
