/*-------------------------------------------------------------------------
 *
 * models.c
 *	  The model catalog, corgipile.models, through SPI.
 *
 * Training inserts its row in the caller's transaction, so a rolled-back
 * training leaves nothing and a committed one is as durable as any row.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <math.h>

#include "catalog/pg_type.h"
#include "common/shortest_dec.h"
#include "executor/spi.h"
#include "lib/stringinfo.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/json.h"
#include "utils/jsonb.h"
#include "utils/lsyscache.h"

#include "models.h"

char *
cp_models_new_name(Relation rel, CpModelKind kind)
{
	Oid			argtypes[2] = {TEXTOID, TEXTOID};
	Datum		args[2];
	bool		isnull;
	char	   *name;
	MemoryContext caller = CurrentMemoryContext;

	args[0] = CStringGetTextDatum(RelationGetRelationName(rel));
	args[1] = CStringGetTextDatum(cp_model_kind_name(kind));
	SPI_connect();
	if (SPI_execute_with_args("SELECT format('%s_%s_%s', $1, $2, "
							  "pg_catalog.nextval('corgipile.model_name_seq'))",
							  2, argtypes, args, NULL, false, 1) != SPI_OK_SELECT)
		elog(ERROR, "corgipile: could not generate a model name");
	name = TextDatumGetCString(SPI_getbinval(SPI_tuptable->vals[0],
											 SPI_tuptable->tupdesc, 1, &isnull));
	name = MemoryContextStrdup(caller, name);
	SPI_finish();
	return name;
}

void
cp_models_check_absent(const char *model_name)
{
	Oid			argtypes[1] = {TEXTOID};
	Datum		args[1];
	bool		exists;

	args[0] = CStringGetTextDatum(model_name);
	SPI_connect();
	if (SPI_execute_with_args("SELECT 1 FROM corgipile.models WHERE model_name = $1",
							  1, argtypes, args, NULL, true, 1) != SPI_OK_SELECT)
		elog(ERROR, "corgipile: could not read corgipile.models");
	exists = SPI_processed > 0;
	SPI_finish();
	if (exists)
		ereport(ERROR,
				(errcode(ERRCODE_DUPLICATE_OBJECT),
				 errmsg("model \"%s\" already exists", model_name),
				 errhint("Choose another model_name, or remove the old model with corgipile.drop_model('%s').",
						 model_name)));
}

static void
json_number(StringInfo buf, double v)
{
	if (isfinite(v))
	{
		char		num[DOUBLE_SHORTEST_DECIMAL_LEN];

		/* the shortest text that reads back as the same double */
		double_to_shortest_decimal_buf(v, num);
		appendStringInfoString(buf, num);
	}
	else
		appendStringInfoString(buf, "null");
}

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
	json_number(buf, value);
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
	json_key_string(&buf, "buffer_size", cp_size_to_string(&p->buffer_size), true);
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
	if (rec->window_rows > 0)
		json_key_number(&buf, p->shuffle == CP_SHUFFLE_MRS ? "reservoir_rows" : "window_rows",
						(double) rec->window_rows);
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

/*
 * The table's label for each class, as JSON: booleans, numbers or strings.
 * Binary models: the labels of the internal -1 and +1 (-1/+1 also when
 * only positives were seen); softmax: every class in class order.
 */
static char *
classes_json(const CpLayout *lo)
{
	StringInfoData buf;

	if (lo->model == CP_MODEL_LINEAR)
		return NULL;
	if (lo->model != CP_MODEL_SOFTMAX)
	{
		if (lo->label_type == BOOLOID)
			return "[false, true]";
		if (lo->seen_zero)
			return "[0, 1]";
		return "[-1, 1]";
	}
	initStringInfo(&buf);
	appendStringInfoChar(&buf, '[');
	for (int k = 0; k < lo->classes->n_classes; k++)
	{
		if (k > 0)
			appendStringInfoString(&buf, ", ");
		if (lo->classes->is_text)
			escape_json(&buf, lo->classes->names[k]);
		else
			appendStringInfoString(&buf, lo->classes->names[k]);
	}
	appendStringInfoChar(&buf, ']');
	return buf.data;
}

void
cp_models_insert(const CpTrainRecord *rec)
{
	Oid			argtypes[11] = {TEXTOID, TEXTOID, TEXTOID, TEXTOID, TEXTARRAYOID,
	TEXTOID, INT4OID, FLOAT8ARRAYOID, TEXTOID, TEXTOID, TEXTOID};
	Datum		args[11];
	char		nulls[11];
	Datum	   *names;
	Datum	   *weights;
	int			n_names = list_length(rec->layout->feature_names);
	ListCell   *lc;
	char	   *classes = classes_json(rec->layout);
	Relation	rel = rec->rel;

	memset(nulls, ' ', sizeof(nulls));
	names = palloc(sizeof(Datum) * n_names);
	foreach(lc, rec->layout->feature_names)
		names[foreach_current_index(lc)] = CStringGetTextDatum(lfirst(lc));
	weights = palloc(sizeof(Datum) * rec->model->n_weights);
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
		args[8] = CStringGetTextDatum(classes);
	else
		nulls[8] = 'n';
	args[9] = CStringGetTextDatum(params_json(rec));
	args[10] = CStringGetTextDatum(history_json(rec));

	SPI_connect();
	if (SPI_execute_with_args("INSERT INTO corgipile.models (model_name, model, relation, "
							  "label, features, feature_indices, n_features, weights, classes, "
							  "params, history) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, "
							  "$9::jsonb, $10::jsonb, $11::jsonb)",
							  11, argtypes, args, nulls, false, 0) != SPI_OK_INSERT)
		elog(ERROR, "corgipile: could not store model \"%s\"", rec->model_name);
	SPI_finish();
}

/*
 * Load a model for prediction.  The result is allocated in the caller's
 * memory context.
 */
CpStoredModel *
cp_models_load(const char *model_name)
{
	Oid			argtypes[1] = {TEXTOID};
	Datum		args[1];
	MemoryContext caller = CurrentMemoryContext;
	MemoryContext old;
	CpStoredModel *m;
	HeapTuple	tup;
	TupleDesc	desc;
	bool		isnull;
	char	   *kind;
	char	   *layout;
	char	   *class_type;
	Datum	   *elems;
	int			n_elems;

	args[0] = CStringGetTextDatum(model_name);
	SPI_connect();
	if (SPI_execute_with_args("SELECT model, n_features, weights, "
							  "ARRAY(SELECT jsonb_array_elements_text(classes)), "
							  "jsonb_typeof(classes->0), params->>'layout', features, "
							  "feature_indices, label "
							  "FROM corgipile.models WHERE model_name = $1",
							  1, argtypes, args, NULL, true, 1) != SPI_OK_SELECT)
		elog(ERROR, "corgipile: could not read corgipile.models");
	if (SPI_processed == 0)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("model \"%s\" does not exist", model_name),
				 errhint("List the models with SELECT model_name FROM corgipile.models.")));
	tup = SPI_tuptable->vals[0];
	desc = SPI_tuptable->tupdesc;

	old = MemoryContextSwitchTo(caller);
	m = palloc0(sizeof(CpStoredModel));
	m->model_name = pstrdup(model_name);
	kind = SPI_getvalue(tup, desc, 1);
	if (!cp_parse_model_kind(kind, &m->kind))
		ereport(ERROR,
				(errcode(ERRCODE_DATA_CORRUPTED),
				 errmsg("model \"%s\" has unknown kind \"%s\"", model_name, kind)));
	m->n_features = DatumGetInt32(SPI_getbinval(tup, desc, 2, &isnull));

	deconstruct_array(DatumGetArrayTypeP(SPI_getbinval(tup, desc, 3, &isnull)),
					  FLOAT8OID, sizeof(float8), FLOAT8PASSBYVAL,
					  TYPALIGN_DOUBLE, &elems, NULL, &n_elems);
	m->n_outputs = n_elems / (m->n_features + 1);
	if (n_elems % (m->n_features + 1) != 0 || m->n_outputs < 1 ||
		(m->kind != CP_MODEL_SOFTMAX && m->n_outputs != 1))
		ereport(ERROR,
				(errcode(ERRCODE_DATA_CORRUPTED),
				 errmsg("model \"%s\" has %d weights, which do not fit %d features",
						model_name, n_elems, m->n_features)));
	m->weights = palloc(sizeof(double) * n_elems);
	for (int j = 0; j < n_elems; j++)
		m->weights[j] = DatumGetFloat8(elems[j]);

	/* the classes: their text, and their value when they are numbers */
	deconstruct_array(DatumGetArrayTypeP(SPI_getbinval(tup, desc, 4, &isnull)),
					  TEXTOID, -1, false, TYPALIGN_INT, &elems, NULL, &n_elems);
	class_type = SPI_getvalue(tup, desc, 5);
	m->n_classes = n_elems;
	m->classes_are_text = class_type != NULL && strcmp(class_type, "string") == 0;
	m->class_names = palloc(sizeof(char *) * Max(n_elems, 1));
	m->class_values = palloc(sizeof(double) * Max(n_elems, 1));
	for (int k = 0; k < n_elems; k++)
	{
		char	   *name = TextDatumGetCString(elems[k]);

		m->class_names[k] = name;
		m->class_values[k] = strcmp(name, "true") == 0 ? 1.0 :
			strcmp(name, "false") == 0 ? 0.0 : strtod(name, NULL);
	}
	if (m->kind != CP_MODEL_LINEAR &&
		n_elems != (m->kind == CP_MODEL_SOFTMAX ? m->n_outputs : 2))
		ereport(ERROR,
				(errcode(ERRCODE_DATA_CORRUPTED),
				 errmsg("model \"%s\" has %d classes for %d outputs",
						model_name, n_elems, m->n_outputs)));

	layout = SPI_getvalue(tup, desc, 6);
	if (layout != NULL && strcmp(layout, "sparse") == 0)
		m->mode = CP_FEATURES_SPARSE;
	else if (layout != NULL && strcmp(layout, "columns") == 0)
		m->mode = CP_FEATURES_COLUMNS;
	else
		m->mode = CP_FEATURES_ARRAY;
	deconstruct_array(DatumGetArrayTypeP(SPI_getbinval(tup, desc, 7, &isnull)),
					  TEXTOID, -1, false, TYPALIGN_INT, &elems, NULL, &n_elems);
	for (int i = 0; i < n_elems; i++)
		m->features = lappend(m->features, TextDatumGetCString(elems[i]));
	if (SPI_getvalue(tup, desc, 8) != NULL)
		m->feature_indices = SPI_getvalue(tup, desc, 8);
	m->label = SPI_getvalue(tup, desc, 9);
	MemoryContextSwitchTo(old);
	SPI_finish();
	return m;
}
