/*-------------------------------------------------------------------------
 *
 * evaluate.c
 *	  corgipile.evaluate(model_name, relation): a stored model's metrics on
 *	  a table.
 *
 * Binary models: accuracy, precision, recall and f1 of the positive class
 * (the label +1, 1 or true), auc, and log_loss (logistic only; NULL for
 * svm, which has no probabilities).  Softmax: accuracy, macro_f1 (the mean
 * F1 over the classes that occur in the labels or the predictions) and
 * log_loss.  Linear: rmse, mae and r2.  Rows with a NULL label or NULL
 * features are skipped, as in training (a NULL number is imputed by a
 * model trained with missing => ...); every model's output ends with the
 * rows scored (rows) and skipped (skipped_null_label,
 * skipped_null_features), and a NOTICE says when rows were skipped.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <math.h>

#include "access/relation.h"
#include "access/tableam.h"
#include "executor/tuptable.h"
#include "fmgr.h"
#include "funcapi.h"
#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"

#include "core/linear_model.h"
#include "util/relation.h"
#include "io/layout.h"
#include "cluster/citus_meta.h"
#include "functions/evaluate_dist.h"
#include "model/metrics.h"
#include "model/model_copy.h"
#include "model/models.h"
#include "io/prep.h"

PG_FUNCTION_INFO_V1(corgipile_evaluate);
PG_FUNCTION_INFO_V1(corgipile_evaluate_partial);

#define CP_EVAL_BATCH 4096

static void *
alloc_zero(Size size)
{
	return palloc0(size);
}

static void
put(void *arg, const char *metric, double value)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) arg;
	Datum		values[2];
	bool		nulls[2] = {false, isnan(value)};

	values[0] = CStringGetTextDatum(metric);
	values[1] = Float8GetDatum(value);
	tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
}

/* Why rows were skipped: how many for a NULL label, how many for features. */
static int
skipped_detail(const CpLayout *lo)
{
	return errdetail(INT64_FORMAT " with a NULL label, " INT64_FORMAT " with a NULL feature.",
					 lo->n_null_label, lo->n_skipped - lo->n_null_label);
}

/* What keeps rows with a NULL number: a model trained to impute them. */
static int
skipped_hint(const CpEvalState *ev, const CpLayout *lo)
{
	if (lo->n_skipped == lo->n_null_label || ev->stored->mode == CP_FEATURES_SPARSE ||
		(ev->stored->prep != NULL && ev->stored->prep->fill != NULL))
		return 0;
	return errhint("A model trained with missing => 'mean' (or 'median', 'zero') imputes NULL numbers and scores such rows.");
}

/*
 * Set ev up for its stored model on rel, whose columns lo resolves; the
 * role must be allowed to read them.
 */
static void
eval_begin(CpEvalState *ev, Relation rel, CpLayout *lo)
{
	cp_check_relation(rel, "relation");
	cp_model_layout(ev->stored, rel, lo);
	lo->use = "evaluating";
	cp_check_select(rel, cp_layout_columns(lo));

	cp_check_model_size(ev->stored->kind, ev->stored->n_features,
						ev->stored->n_outputs, cp_layout_sparse_rows(lo), 1,
						ev->stored->model_name);
	if (!cp_model_init(&ev->model, ev->stored->kind, ev->stored->n_features,
					   ev->stored->n_outputs, cp_layout_sparse_rows(lo), 1,
					   0.0, 0.0, alloc_zero))
		elog(ERROR, "corgipile: could not size model \"%s\"", ev->stored->model_name);
	ev->model.w = ev->stored->weights;
	if (ev->model.kind == CP_MODEL_SOFTMAX)
	{
		ev->class_tp = palloc0(sizeof(int64) * ev->model.n_outputs);
		ev->class_fp = palloc0(sizeof(int64) * ev->model.n_outputs);
		ev->class_fn = palloc0(sizeof(int64) * ev->model.n_outputs);
	}
}

/* Score the rows of a table of this node. */
static void
eval_scan(CpEvalState *ev, Relation rel, CpLayout *lo)
{
	CpBuffer	buf;
	MemoryContext row_cxt;

	cp_buffer_init(&buf, CurrentMemoryContext, cp_layout_sparse_rows(lo));
	/* batches of at most half of work_mem (cp_layout_scan) */
	cp_buffer_set_budget(&buf, mul_size((Size) work_mem, 1024), "a batch of evaluate()",
						 "Raise work_mem: a batch of rows evaluate() scores takes at most work_mem.");
	row_cxt = AllocSetContextCreate(CurrentMemoryContext, "corgipile evaluate row",
									ALLOCSET_DEFAULT_SIZES);
	cp_layout_scan(lo, rel, GetActiveSnapshot(), &buf, CP_EVAL_BATCH, row_cxt,
				   cp_eval_add_rows, ev);
}

Datum
corgipile_evaluate(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	CpEvalState ev;
	CpLayout	lo;
	Relation	rel;
	Oid			relid = PG_GETARG_OID(1);

	InitMaterializedSRF(fcinfo, 0);
	memset(&ev, 0, sizeof(ev));
	ev.stored = cp_models_load(text_to_cstring(PG_GETARG_TEXT_PP(0)));

	rel = cp_open_relation(relid, AccessShareLock, "relation");
	eval_begin(&ev, rel, &lo);
	/* a Citus table: its shards are scored where they are */
	if (cp_citus_is_distributed(relid))
		cp_evaluate_shards(&ev, &lo, relid);
	else
		eval_scan(&ev, rel, &lo);
	relation_close(rel, NoLock);

	if (ev.n == 0)
		ereport(ERROR,
				(errcode(ERRCODE_NO_DATA),
				 errmsg("relation \"%s\" has no rows with a non-NULL label and features to evaluate",
						lo.relname),
				 skipped_detail(&lo), skipped_hint(&ev, &lo)));
	if (lo.n_skipped > 0)
		ereport(NOTICE,
				(errmsg("corgipile.evaluate: scored " INT64_FORMAT " rows of \"%s\", skipped " INT64_FORMAT " with a NULL label or NULL features",
						ev.n, lo.relname, lo.n_skipped),
				 skipped_detail(&lo), skipped_hint(&ev, &lo)));

	cp_eval_metrics(&ev, put, rsinfo);
	cp_eval_end(&ev);
	/* category values the model had not seen (or NULL), encoded as zeros */
	if (cp_prep_has_onehot(ev.stored->prep))
		put(rsinfo, "unseen_values", (double) lo.n_unseen);
	/* the rows the metrics are taken on, and those left out */
	put(rsinfo, "rows", (double) ev.n);
	put(rsinfo, "skipped_null_label", (double) lo.n_null_label);
	put(rsinfo, "skipped_null_features", (double) (lo.n_skipped - lo.n_null_label));
	return (Datum) 0;
}

static void
put_score(void *arg, double score, int64 positives, int64 negatives)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) arg;
	Datum		values[4];
	bool		nulls[4] = {false, false, false, true};

	values[0] = Float8GetDatum(score);
	values[1] = Int64GetDatum(positives);
	values[2] = Int64GetDatum(negatives);
	values[3] = (Datum) 0;
	tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
}

/*
 * corgipile.evaluate_partial(model_name text, relation regclass,
 * model_hash text): what evaluate() on a Citus table needs of one shard,
 * run on the shard's node (evaluate_dist.c).  First a row with state: the
 * rows skipped and the metrics' counts and sums
 * (cp_eval_state_out); then, for a binary model, one row per distinct
 * score in ascending order with its positive and negative rows.  Those are
 * metrics and score counts, never rows.  model_hash: the coordinator's
 * copy's (model_copy.c): a node whose copy differs is an error.
 */
Datum
corgipile_evaluate_partial(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	CpEvalState ev;
	CpLayout	lo;
	Relation	rel;
	char	   *name = text_to_cstring(PG_GETARG_TEXT_PP(0));
	char	   *hash = text_to_cstring(PG_GETARG_TEXT_PP(2));
	StringInfoData state;
	Datum		values[4];
	bool		nulls[4] = {true, true, true, false};

	InitMaterializedSRF(fcinfo, 0);
	memset(&ev, 0, sizeof(ev));
	ev.stored = cp_models_load(name);
	if (strcmp(cp_model_copy_hash(cp_model_copy_doc(name, true)), hash) != 0)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("this node's copy of model \"%s\" differs from the coordinator's", name),
				 errhint("corgipile.check_model_copies() on the coordinator lists the models whose copies differ.")));

	rel = cp_open_relation(PG_GETARG_OID(1), AccessShareLock, "relation");
	eval_begin(&ev, rel, &lo);
	eval_scan(&ev, rel, &lo);
	relation_close(rel, NoLock);

	initStringInfo(&state);
	appendStringInfo(&state, INT64_FORMAT " " INT64_FORMAT " " INT64_FORMAT " ",
					 lo.n_null_label, lo.n_skipped, lo.n_unseen);
	cp_eval_state_out(&ev, &state);
	values[3] = CStringGetTextDatum(state.data);
	tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	if (ev.model.kind == CP_MODEL_SVM || ev.model.kind == CP_MODEL_LOGISTIC)
		cp_eval_scores(&ev, put_score, rsinfo);
	cp_eval_end(&ev);
	return (Datum) 0;
}
