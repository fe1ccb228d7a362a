/*-------------------------------------------------------------------------
 *
 * predict.c
 *	  corgipile.predict(), predict_class() and predict_proba(): apply a
 *	  stored model to features or to a row.
 *
 * The model is read from corgipile.models once per query and call site and
 * kept in fn_extra, so a prediction costs a dot product, not a lookup.
 * Each function comes in three forms: dense features, sparse features
 * (indices and values), and a whole row, whose feature columns are found by
 * the names the model was trained on.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "catalog/pg_type.h"
#include "fmgr.h"
#include "funcapi.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/typcache.h"

#include "core/linear_model.h"
#include "datum_convert.h"
#include "models.h"
#include "params.h"

PG_FUNCTION_INFO_V1(corgipile_predict_dense);
PG_FUNCTION_INFO_V1(corgipile_predict_sparse);
PG_FUNCTION_INFO_V1(corgipile_predict_row);
PG_FUNCTION_INFO_V1(corgipile_predict_class_dense);
PG_FUNCTION_INFO_V1(corgipile_predict_class_sparse);
PG_FUNCTION_INFO_V1(corgipile_predict_class_row);
PG_FUNCTION_INFO_V1(corgipile_predict_proba_dense);
PG_FUNCTION_INFO_V1(corgipile_predict_proba_sparse);
PG_FUNCTION_INFO_V1(corgipile_predict_proba_row);

typedef enum CpInputForm
{
	CP_INPUT_DENSE,
	CP_INPUT_SPARSE,
	CP_INPUT_ROW
} CpInputForm;

typedef struct CpPredictCache
{
	text	   *name;			/* the model_name this cache is for */
	CpStoredModel *stored;
	CpModel		model;			/* the core's view of the stored weights */
	CpBuffer	row;			/* the one row being predicted */
	int			row_cap;		/* values and indices allocated in row */
	double	   *z;				/* n_outputs */

	/* the row form: where the model's columns are in the row type */
	Oid			row_type;
	int32		row_typmod;
	AttrNumber *attnos;			/* one per feature column */
	Oid		   *atttypes;
	AttrNumber	indices_attno;	/* sparse */
	Datum	   *values;			/* natts, for heap_deform_tuple */
	bool	   *nulls;
} CpPredictCache;

static void *
alloc_zero(Size size)
{
	return palloc0(size);
}

static CpPredictCache *
get_cache(FunctionCallInfo fcinfo)
{
	text	   *name = PG_GETARG_TEXT_PP(0);
	CpPredictCache *cache = (CpPredictCache *) fcinfo->flinfo->fn_extra;
	CpStoredModel *m;
	MemoryContext old;
	int			cap;

	if (cache != NULL &&
		VARSIZE_ANY_EXHDR(name) == VARSIZE_ANY_EXHDR(cache->name) &&
		memcmp(VARDATA_ANY(name), VARDATA_ANY(cache->name),
			   VARSIZE_ANY_EXHDR(name)) == 0)
		return cache;

	old = MemoryContextSwitchTo(fcinfo->flinfo->fn_mcxt);
	cache = palloc0(sizeof(CpPredictCache));
	cache->name = (text *) PG_DETOAST_DATUM_COPY(PG_GETARG_DATUM(0));
	cache->stored = m = cp_models_load(text_to_cstring(name));
	cp_model_init(&cache->model, m->kind, m->n_features, m->n_outputs, false, 1,
				  0.0, 0.0, alloc_zero);
	cache->model.w = m->weights;
	cache->z = palloc(sizeof(double) * m->n_outputs);
	cap = Max(m->n_features, 1);
	cache->row_cap = cap;
	cache->row.n_rows = 1;
	cache->row.n_features = m->n_features;
	cache->row.values = palloc(sizeof(double) * cap);
	cache->row.indices = palloc(sizeof(int32) * cap);
	cache->row.offsets = palloc0(sizeof(int64) * 2);
	cache->row.labels = palloc0(sizeof(double));
	MemoryContextSwitchTo(old);
	fcinfo->flinfo->fn_extra = cache;
	return cache;
}

static void
wrong_dimension(const CpStoredModel *m, int got)
{
	ereport(ERROR,
			(errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
			 errmsg("model \"%s\" expects %d features, got %d",
					m->model_name, m->n_features, got)));
}

static void
check_numeric_array(ArrayType *arr, const char *what)
{
	if (!cp_is_number_type(ARR_ELEMTYPE(arr)))
		ereport(ERROR,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("%s must be a numeric array, got %s", what,
						format_type_be(get_array_type(ARR_ELEMTYPE(arr))))));
}

/* Load a dense array into the cached row; false if it holds a NULL. */
static bool
load_dense(CpPredictCache *cache, ArrayType *arr)
{
	int			len;

	check_numeric_array(arr, "features");
	len = cp_array_length(arr, NULL, "features");
	if (len != cache->stored->n_features)
		wrong_dimension(cache->stored, len);
	cache->row.sparse = false;
	return cp_array_to_doubles(arr, cache->row.values, len, NULL);
}

/* Load sparse arrays into the cached row; false if either holds a NULL. */
static bool
load_sparse(CpPredictCache *cache, ArrayType *idx, ArrayType *val)
{
	CpStoredModel *m = cache->stored;
	int			n_idx;
	int			n_val;

	if (!cp_is_index_type(ARR_ELEMTYPE(idx)))
		ereport(ERROR,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("feature_indices must be an integer array, got %s",
						format_type_be(get_array_type(ARR_ELEMTYPE(idx))))));
	check_numeric_array(val, "features");
	n_idx = cp_array_length(idx, NULL, "feature_indices");
	n_val = cp_array_length(val, NULL, "features");
	if (n_idx != n_val)
		ereport(ERROR,
				(errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
				 errmsg("feature_indices has %d elements but features has %d",
						n_idx, n_val)));
	if (n_idx > cache->row_cap)
	{
		/* an index may repeat, so there can be more values than features */
		cache->row.values = repalloc(cache->row.values, sizeof(double) * n_idx);
		cache->row.indices = repalloc(cache->row.indices, sizeof(int32) * n_idx);
		cache->row_cap = n_idx;
	}
	cache->row.sparse = true;
	cache->row.offsets[1] = n_idx;
	return cp_array_to_indices(idx, cache->row.indices, n_idx, m->n_features, NULL) &&
		cp_array_to_doubles(val, cache->row.values, n_idx, NULL);
}

static AttrNumber
row_column(TupleDesc desc, const char *name, const CpStoredModel *m, Oid *type)
{
	for (int i = 0; i < desc->natts; i++)
	{
		Form_pg_attribute attr = TupleDescAttr(desc, i);

		if (!attr->attisdropped && strcmp(NameStr(attr->attname), name) == 0)
		{
			*type = getBaseType(attr->atttypid);
			return attr->attnum;
		}
	}
	ereport(ERROR,
			(errcode(ERRCODE_UNDEFINED_COLUMN),
			 errmsg("the row has no column \"%s\", which model \"%s\" was trained on",
					name, m->model_name)));
	return InvalidAttrNumber;
}

/* Find the model's columns in this row type; cached per row type. */
static void
resolve_row(CpPredictCache *cache, Oid type, int32 typmod)
{
	CpStoredModel *m = cache->stored;
	TupleDesc	desc;
	MemoryContext old;
	ListCell   *lc;
	int			n = list_length(m->features);
	Oid			t;

	if (cache->attnos != NULL && cache->row_type == type && cache->row_typmod == typmod)
		return;
	desc = lookup_rowtype_tupdesc(type, typmod);
	old = MemoryContextSwitchTo(GetMemoryChunkContext(cache));
	cache->row_type = type;
	cache->row_typmod = typmod;
	cache->attnos = palloc(sizeof(AttrNumber) * n);
	cache->atttypes = palloc(sizeof(Oid) * n);
	cache->values = palloc(sizeof(Datum) * desc->natts);
	cache->nulls = palloc(sizeof(bool) * desc->natts);
	foreach(lc, m->features)
	{
		int			i = foreach_current_index(lc);

		cache->attnos[i] = row_column(desc, lfirst(lc), m, &cache->atttypes[i]);
	}
	if (m->mode == CP_FEATURES_SPARSE)
		cache->indices_attno = row_column(desc, m->feature_indices, m, &t);
	if (m->mode == CP_FEATURES_COLUMNS && n != m->n_features)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_CORRUPTED),
				 errmsg("model \"%s\" names %d feature columns but has %d features",
						m->model_name, n, m->n_features)));
	MemoryContextSwitchTo(old);
	ReleaseTupleDesc(desc);
}

/* Load the model's features out of a row; false if any is NULL. */
static bool
load_row(CpPredictCache *cache, HeapTupleHeader td)
{
	CpStoredModel *m = cache->stored;
	HeapTupleData tuple;
	TupleDesc	desc;

	resolve_row(cache, HeapTupleHeaderGetTypeId(td), HeapTupleHeaderGetTypMod(td));
	desc = lookup_rowtype_tupdesc(cache->row_type, cache->row_typmod);
	tuple.t_len = HeapTupleHeaderGetDatumLength(td);
	ItemPointerSetInvalid(&tuple.t_self);
	tuple.t_tableOid = InvalidOid;
	tuple.t_data = td;
	heap_deform_tuple(&tuple, desc, cache->values, cache->nulls);
	ReleaseTupleDesc(desc);

	switch (m->mode)
	{
		case CP_FEATURES_ARRAY:
			if (cache->nulls[cache->attnos[0] - 1])
				return false;
			return load_dense(cache, DatumGetArrayTypeP(cache->values[cache->attnos[0] - 1]));
		case CP_FEATURES_COLUMNS:
			cache->row.sparse = false;
			for (int i = 0; i < m->n_features; i++)
			{
				AttrNumber	a = cache->attnos[i];

				if (cache->nulls[a - 1])
					return false;
				if (!cp_is_number_type(cache->atttypes[i]))
					ereport(ERROR,
							(errcode(ERRCODE_DATATYPE_MISMATCH),
							 errmsg("column \"%s\" of the row has type %s; expected a numeric type",
									(char *) list_nth(m->features, i),
									format_type_be(cache->atttypes[i]))));
				cache->row.values[i] = cp_datum_to_double(cache->values[a - 1],
														  cache->atttypes[i]);
				cp_check_finite(cache->row.values[i], NULL);
			}
			return true;
		case CP_FEATURES_SPARSE:
			if (cache->nulls[cache->indices_attno - 1] ||
				cache->nulls[cache->attnos[0] - 1])
				return false;
			return load_sparse(cache,
							   DatumGetArrayTypeP(cache->values[cache->indices_attno - 1]),
							   DatumGetArrayTypeP(cache->values[cache->attnos[0] - 1]));
		case CP_FEATURES_NONE:
			break;
	}
	elog(ERROR, "corgipile: model \"%s\" has no features", m->model_name);
	return false;
}

/*
 * The model's outputs for this call's input, in cache->z; NULL if the input
 * has a NULL.
 */
static CpPredictCache *
compute(FunctionCallInfo fcinfo, CpInputForm form)
{
	CpPredictCache *cache = get_cache(fcinfo);
	bool		ok = false;

	switch (form)
	{
		case CP_INPUT_DENSE:
			ok = load_dense(cache, PG_GETARG_ARRAYTYPE_P(1));
			break;
		case CP_INPUT_SPARSE:
			ok = load_sparse(cache, PG_GETARG_ARRAYTYPE_P(1), PG_GETARG_ARRAYTYPE_P(2));
			break;
		case CP_INPUT_ROW:
			ok = load_row(cache, PG_GETARG_HEAPTUPLEHEADER(1));
			break;
	}
	if (!ok)
		return NULL;
	cp_model_outputs(&cache->model, &cache->row, 0, cache->z);
	return cache;
}

/* The predicted class's number, for classifiers. */
static int
predicted_class(const CpPredictCache *cache, const char *function)
{
	const CpStoredModel *m = cache->stored;
	int			best = 0;

	switch (m->kind)
	{
		case CP_MODEL_SVM:
		case CP_MODEL_LOGISTIC:
			/* a zero margin goes to the negative class, as in training */
			return cache->z[0] > 0.0 ? 1 : 0;
		case CP_MODEL_SOFTMAX:
			for (int k = 1; k < m->n_outputs; k++)
				if (cache->z[k] > cache->z[best])
					best = k;
			return best;
		case CP_MODEL_LINEAR:
			break;
	}
	ereport(ERROR,
			(errcode(ERRCODE_WRONG_OBJECT_TYPE),
			 errmsg("%s: model \"%s\" is a regression model, not a classifier",
					function, m->model_name),
			 errhint("Use corgipile.predict().")));
	return 0;
}

static Datum
predict_value(FunctionCallInfo fcinfo, CpInputForm form)
{
	CpPredictCache *cache = compute(fcinfo, form);
	CpStoredModel *m;
	int			k;

	if (cache == NULL)
		PG_RETURN_NULL();
	m = cache->stored;
	if (m->kind == CP_MODEL_LINEAR)
		PG_RETURN_FLOAT8(cache->z[0]);
	k = predicted_class(cache, "corgipile.predict");
	if (m->classes_are_text)
		ereport(ERROR,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("model \"%s\" has text classes, which corgipile.predict() cannot return as a number",
						m->model_name),
				 errhint("Use corgipile.predict_class(), which returns the class as text.")));
	PG_RETURN_FLOAT8(m->class_values[k]);
}

static Datum
predict_class(FunctionCallInfo fcinfo, CpInputForm form)
{
	CpPredictCache *cache = compute(fcinfo, form);

	if (cache == NULL)
		PG_RETURN_NULL();
	PG_RETURN_TEXT_P(cstring_to_text(cache->stored->class_names[predicted_class(cache, "corgipile.predict_class")]));
}

static Datum
predict_proba(FunctionCallInfo fcinfo, CpInputForm form)
{
	CpPredictCache *cache = compute(fcinfo, form);
	CpStoredModel *m;
	Datum	   *d;
	int			n;

	if (cache == NULL)
		PG_RETURN_NULL();
	m = cache->stored;
	if (m->kind == CP_MODEL_SOFTMAX)
	{
		n = m->n_outputs;
		cp_softmax(cache->z, n);
	}
	else if (m->kind == CP_MODEL_LOGISTIC)
	{
		n = 1;
		cache->z[0] = cp_sigmoid(cache->z[0]);
	}
	else
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("corgipile.predict_proba: model \"%s\" (%s) has no probabilities",
						m->model_name, cp_model_kind_name(m->kind)),
				 errhint("Probabilities come from logistic and softmax models.")));
	d = palloc(sizeof(Datum) * n);
	for (int k = 0; k < n; k++)
		d[k] = Float8GetDatum(cache->z[k]);
	PG_RETURN_ARRAYTYPE_P(construct_array(d, n, FLOAT8OID, sizeof(float8),
										  FLOAT8PASSBYVAL, TYPALIGN_DOUBLE));
}

Datum
corgipile_predict_dense(PG_FUNCTION_ARGS)
{
	return predict_value(fcinfo, CP_INPUT_DENSE);
}

Datum
corgipile_predict_sparse(PG_FUNCTION_ARGS)
{
	return predict_value(fcinfo, CP_INPUT_SPARSE);
}

Datum
corgipile_predict_row(PG_FUNCTION_ARGS)
{
	return predict_value(fcinfo, CP_INPUT_ROW);
}

Datum
corgipile_predict_class_dense(PG_FUNCTION_ARGS)
{
	return predict_class(fcinfo, CP_INPUT_DENSE);
}

Datum
corgipile_predict_class_sparse(PG_FUNCTION_ARGS)
{
	return predict_class(fcinfo, CP_INPUT_SPARSE);
}

Datum
corgipile_predict_class_row(PG_FUNCTION_ARGS)
{
	return predict_class(fcinfo, CP_INPUT_ROW);
}

Datum
corgipile_predict_proba_dense(PG_FUNCTION_ARGS)
{
	return predict_proba(fcinfo, CP_INPUT_DENSE);
}

Datum
corgipile_predict_proba_sparse(PG_FUNCTION_ARGS)
{
	return predict_proba(fcinfo, CP_INPUT_SPARSE);
}

Datum
corgipile_predict_proba_row(PG_FUNCTION_ARGS)
{
	return predict_proba(fcinfo, CP_INPUT_ROW);
}
