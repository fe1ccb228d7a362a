/*-------------------------------------------------------------------------
 *
 * model_insert.c
 *	  Storing a trained model: its row of corgipile.model_store, with the
 *	  training's parameters and history as JSON.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <math.h>

#include "access/htup_details.h"
#include "access/xact.h"
#include "catalog/namespace.h"
#include "catalog/pg_class.h"
#include "catalog/pg_type.h"
#include "common/int.h"
#include "common/shortest_dec.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "lib/stringinfo.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/json.h"
#include "utils/jsonb.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"
#include "utils/syscache.h"

#include "model/model_copy.h"
#include "model/models.h"
#include "util/json.h"
#include "model/model_store.h"
#include "io/prep.h"
static void
json_key_string(StringInfo buf, const char *key, const char *value, bool comma)
{
	if (comma)
		appendStringInfoString(buf, ", ");
	escape_json(buf, key);
	appendStringInfoString(buf, ": ");
	if (value)
		escape_json(buf, value);
	else
		appendStringInfoString(buf, "null");
}

static void
json_key_number(StringInfo buf, const char *key, double value)
{
	appendStringInfoString(buf, ", ");
	escape_json(buf, key);
	appendStringInfoString(buf, ": ");
	cp_json_number(buf, value);
}

static char *
params_json(const CpTrainRecord *rec)
{
	const CpTrainParams *p = rec->params;
	StringInfoData buf;

	initStringInfo(&buf);
	appendStringInfoChar(&buf, '{');
	json_key_string(&buf, "shuffle", cp_shuffle_name(p->shuffle), false);
	json_key_number(&buf, "learning_rate", p->learning_rate);
	json_key_number(&buf, "decay", p->decay);
	json_key_number(&buf, "max_epoch_num", p->max_epoch_num);
	json_key_number(&buf, "batch_size", p->batch_size);
	json_key_number(&buf, "l2", p->l2);
	json_key_string(&buf, "block_size", p->block_size.unit == CP_SIZE_UNSET ? NULL :
					cp_size_to_string(&p->block_size), true);
	json_key_string(&buf, "buffer_size", p->buffer_auto ? NULL :
					cp_size_to_string(&p->buffer_size), true);
	json_key_string(&buf, "buffer_choice",
					cp_buffer_choice(p, rec->sizing->n_pages), true);
	appendStringInfo(&buf, ", \"average\": %s", p->average ? "true" : "false");
	if (rec->baseline_kind != NULL)
	{
		json_key_string(&buf, "baseline", rec->baseline_kind, true);
		json_key_number(&buf, "baseline_score", rec->baseline_score);
	}
	json_key_number(&buf, "pages_per_block", rec->sizing->pages_per_block);
	json_key_number(&buf, "blocks_per_buffer", rec->sizing->blocks_per_buffer);
	json_key_number(&buf, "n_blocks", rec->sizing->n_blocks);
	/* as text: a bigint seed need not fit a double */
	json_key_string(&buf, "seed", psprintf(INT64_FORMAT, rec->seed), true);
	json_key_string(&buf, "double_buffer", p->double_buffer ? "true" : "false", true);
	json_key_string(&buf, "layout", cp_layout_mode_name(rec->layout->mode), true);
	json_key_string(&buf, "validation", rec->validation_name, true);
	json_key_number(&buf, "l1", p->l1);
	json_key_number(&buf, "tolerance", p->early_stopping ? p->tolerance : NAN);
	json_key_number(&buf, "n_iter_no_change", p->n_iter_no_change);
	json_key_number(&buf, "best_epoch", rec->best_epoch);
	json_key_number(&buf, "n_outputs", rec->model->n_outputs);
	if (rec->holdout_json != NULL)
		appendStringInfo(&buf, ", \"holdout\": %s", rec->holdout_json);
	if (rec->stopping_json != NULL)
		appendStringInfo(&buf, ", \"stopping\": %s", rec->stopping_json);
	if (rec->polish_json != NULL)
		appendStringInfo(&buf, ", \"polish\": %s", rec->polish_json);
	/* whether preprocess holds a transform: the models view may hide it */
	json_key_string(&buf, "standardize", rec->layout->prep && rec->layout->prep->transform ?
					cp_standardize_name(rec->layout->prep->standardize) : "off", true);
	/*
	 * Where the standardizing statistics came from: a seed gives the same
	 * model only with the same sample (corgipile.stats_sample_size).  A
	 * warm start keeps its model's statistics: that model's params say.
	 */
	if (rec->layout->prep && rec->layout->prep->transform && p->warm_start == NULL)
		json_key_number(&buf, "stats_sample_blocks", rec->layout->prep->sampled_blocks);
	json_key_number(&buf, "max_categories", p->max_categories);
	/* what preprocess does with a NULL number (a warm start: its model's) */
	json_key_string(&buf, "missing", rec->layout->prep && rec->layout->prep->fill ?
					cp_missing_name(rec->layout->prep->missing) : "skip", true);
	if (rec->layout->prep && rec->layout->prep->add_indicator)
		appendStringInfoString(&buf, ", \"missing_indicator\": true");
	json_key_number(&buf, "workers", Max(rec->workers, 1));
	if (rec->parallel_sync != NULL)
		json_key_string(&buf, "parallel_sync", rec->parallel_sync, true);
	if (rec->parallel_grab != NULL)
		json_key_string(&buf, "parallel_grab", rec->parallel_grab, true);
	if (rec->held_rows > 0 && rec->held_rows_key != NULL)
		json_key_number(&buf, rec->held_rows_key, (double) rec->held_rows);
	if (rec->grab)
	{
		json_key_string(&buf, "grab_granularity",
						rec->grab_unit_blocks > 1 ? "blocks" : "block", true);
		json_key_number(&buf, "grab_unit_blocks", rec->grab_unit_blocks);
		json_key_string(&buf, "grab_buffer_shuffle",
						rec->grab_buffer_shuffle ? "true" : "false", true);
		json_key_number(&buf, "grab_epochs_kept", rec->grab_epochs_kept);
		json_key_number(&buf, "grab_epochs_random", rec->grab_epochs_random);
		if (rec->grab_statistic >= 0)
		{
			json_key_number(&buf, "grab_block_mean_sq", rec->grab_statistic);
			json_key_number(&buf, "grab_step", rec->grab_step);
		}
		json_key_number(&buf, "grab_pages_per_block", rec->sizing->pages_per_block);
		json_key_number(&buf, "grab_n_blocks", rec->sizing->n_blocks);
		json_key_number(&buf, "grab_n_pages", rec->sizing->n_pages);
		json_key_number(&buf, "grab_dim", rec->grab_dim);
		json_key_string(&buf, "grab_projected",
						rec->grab_dim < rec->grab_n_weights ? "true" : "false", true);
		json_key_string(&buf, "grab_state", rec->grab_state, true);
	}
	appendStringInfoChar(&buf, '}');
	return buf.data;
}

static char *
history_json(const CpTrainRecord *rec)
{
	StringInfoData buf;

	initStringInfo(&buf);
	appendStringInfoChar(&buf, '[');
	for (int i = 0; i < rec->n_results; i++)
	{
		const CpEpochResult *r = &rec->results[i];

		if (i > 0)
			appendStringInfoString(&buf, ", ");
		appendStringInfo(&buf, "{\"epoch\": %d, \"tuples\": " INT64_FORMAT,
						 r->epoch, r->tuples);
		json_key_number(&buf, "loss", r->loss);
		json_key_number(&buf, "score", r->score);
		json_key_number(&buf, "validation_score",
						r->has_validation ? r->validation_score : NAN);
		json_key_number(&buf, "validation_loss",
						r->has_validation ? r->validation_loss : NAN);
		json_key_number(&buf, "seconds", r->seconds);
		appendStringInfoChar(&buf, '}');
	}
	appendStringInfoChar(&buf, ']');
	return buf.data;
}

/* A class label that is not text: a boolean, or an integer. */
static void
push_label(JsonbParseState **st, const char *name)
{
	JsonbValue	v;

	if (strcmp(name, "true") == 0 || strcmp(name, "false") == 0)
	{
		v.type = jbvBool;
		v.val.boolean = name[0] == 't';
		pushJsonbValue(st, WJB_ELEM, &v);
	}
	else
		cp_jsonb_int(st, WJB_ELEM, pg_strtoint64(name));
}

/*
 * The table's label for each class, as a jsonb array: booleans, numbers or
 * strings.  Binary models: the labels of the internal -1 and +1 (-1/+1
 * also when only positives were seen); softmax: every class in class
 * order.  Built as a jsonb, not parsed from text: text labels go from the
 * dictionary into it once (they may be long: the first pass charges them
 * as it charges category values).  NULL for linear models.
 */
static Jsonb *
classes_jsonb(const CpLayout *lo)
{
	JsonbParseState *st = NULL;
	JsonbValue *root;

	if (lo->model == CP_MODEL_LINEAR)
		return NULL;
	pushJsonbValue(&st, WJB_BEGIN_ARRAY, NULL);
	if (lo->model != CP_MODEL_SOFTMAX && lo->label_is_text)
	{
		/* the two values in code order: the -1 class first */
		for (int c = 0; c < 2; c++)
		{
			int32		len;
			const char *s = cp_prep_dict_value(lo->label_dict, c, &len);

			cp_jsonb_string(&st, WJB_ELEM, s, len);
		}
	}
	else if (lo->model != CP_MODEL_SOFTMAX)
	{
		if (lo->label_type == BOOLOID)
		{
			push_label(&st, "false");
			push_label(&st, "true");
		}
		else
		{
			cp_jsonb_int(&st, WJB_ELEM, lo->seen_zero ? 0 : -1);
			cp_jsonb_int(&st, WJB_ELEM, 1);
		}
	}
	else
	{
		for (int k = 0; k < lo->classes->n_classes; k++)
		{
			if (lo->classes->is_text)
				cp_jsonb_string(&st, WJB_ELEM, lo->classes->names[k],
								(int32) strlen(lo->classes->names[k]));
			else
				push_label(&st, lo->classes->names[k]);
		}
	}
	root = pushJsonbValue(&st, WJB_END_ARRAY, NULL);
	return JsonbValueToJsonb(root);
}

void
cp_models_insert(const CpTrainRecord *rec)
{
	Oid			argtypes[14] = {TEXTOID, TEXTOID, TEXTOID, TEXTOID, TEXTARRAYOID,
		TEXTOID, INT4OID, FLOAT8ARRAYOID, JSONBOID, TEXTOID, TEXTOID, OIDOID, OIDOID,
	JSONBOID};
	Datum		args[14];
	char		nulls[14];
	Datum	   *names;
	Datum	   *weights;
	int			n_names = list_length(rec->layout->feature_names);
	ListCell   *lc;
	Jsonb	   *classes = classes_jsonb(rec->layout);
	Relation	rel = rec->rel;

	memset(nulls, ' ', sizeof(nulls));
	names = palloc(sizeof(Datum) * n_names);
	foreach(lc, rec->layout->feature_names)
		names[foreach_current_index(lc)] = CStringGetTextDatum(lfirst(lc));
	weights = palloc_array(Datum, rec->model->n_weights);
	for (int j = 0; j < rec->model->n_weights; j++)
		weights[j] = Float8GetDatum(rec->weights[j]);

	args[0] = CStringGetTextDatum(rec->model_name);
	args[1] = CStringGetTextDatum(cp_model_kind_name(rec->params->model));
	args[2] = CStringGetTextDatum(quote_qualified_identifier(get_namespace_name(RelationGetNamespace(rel)),
															 RelationGetRelationName(rel)));
	args[3] = CStringGetTextDatum(rec->layout->label_name);
	args[4] = PointerGetDatum(construct_array(names, n_names, TEXTOID, -1, false,
											  TYPALIGN_INT));
	if (rec->layout->indices_name)
		args[5] = CStringGetTextDatum(rec->layout->indices_name);
	else
		nulls[5] = 'n';
	args[6] = Int32GetDatum(rec->model->n_features);
	args[7] = PointerGetDatum(construct_array(weights, rec->model->n_weights,
											  FLOAT8OID, sizeof(float8),
											  FLOAT8PASSBYVAL, TYPALIGN_DOUBLE));
	if (classes)
		args[8] = JsonbPGetDatum(classes);
	else
		nulls[8] = 'n';
	args[9] = CStringGetTextDatum(params_json(rec));
	args[10] = CStringGetTextDatum(history_json(rec));
	/* the role that trains owns the model */
	args[11] = ObjectIdGetDatum(GetUserId());
	args[12] = ObjectIdGetDatum(RelationGetRelid(rel));
	/* NULL when features go in raw (standardize => off, numbers only) */
	if (rec->layout->prep != NULL)
	{
		const CpPrep *prep = rec->layout->prep;
		MemoryContext old = MemoryContextSwitchTo(GetMemoryChunkContext((void *) prep));
		Jsonb	   *jb = cp_prep_to_jsonb(prep, rec->layout->feature_names,
										  rec->layout->mode);

		MemoryContextSwitchTo(old);
		/* the category values, possibly long, are held once from here on */
		cp_prep_share_values(prep, jb);
		args[13] = JsonbPGetDatum(jb);
	}
	else
		nulls[13] = 'n';

	SPI_connect();
	cp_model_store_query("INSERT INTO corgipile.model_store (model_name, model, relation, "
				"label, features, feature_indices, n_features, weights, classes, "
				"params, history, owner_id, relid, preprocess) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, "
				"$9, $10::pg_catalog.jsonb, $11::pg_catalog.jsonb, $12, $13, $14)",
				14, argtypes, args, nulls, false, SPI_OK_INSERT);
	SPI_finish();
	/* on a Citus coordinator, copied to the workers at commit */
	cp_model_sync_touch(rec->model_name);
}
