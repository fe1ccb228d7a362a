/*-------------------------------------------------------------------------
 *
 * predict.c
 *	  corgipile.predict(): apply a stored model to features or to a row.
 *
 * The model is read from corgipile.models once per query and call site and
 * kept in fn_extra, so a prediction costs a dot product, not a lookup.
 * The answer is the label in the training table's own convention (-1/+1,
 * 0/1, or 0/1 for booleans).
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

PG_FUNCTION_INFO_V1(corgipile_predict_dense);
PG_FUNCTION_INFO_V1(corgipile_predict_sparse);
PG_FUNCTION_INFO_V1(corgipile_predict_row);

typedef struct CpPredictCache
{
	text	   *name;			/* the model_name this cache is for */
	CpStoredModel *model;
	double	   *x;				/* n_features scratch */

	/* predict(name, row): where the model's columns are in the row type */
	Oid			row_type;
	int32		row_typmod;
	int			natts;
	AttrNumber *attnos;			/* one per feature column */
	Oid		   *atttypes;
	AttrNumber	indices_attno;	/* sparse */
	Datum	   *values;			/* natts, for heap_deform_tuple */
	bool	   *nulls;
} CpPredictCache;

static CpPredictCache *
get_cache(FunctionCallInfo fcinfo)
{
	text	   *name = PG_GETARG_TEXT_PP(0);
	CpPredictCache *cache = (CpPredictCache *) fcinfo->flinfo->fn_extra;
	MemoryContext old;

	if (cache != NULL &&
		VARSIZE_ANY_EXHDR(name) == VARSIZE_ANY_EXHDR(cache->name) &&
		memcmp(VARDATA_ANY(name), VARDATA_ANY(cache->name),
			   VARSIZE_ANY_EXHDR(name)) == 0)
		return cache;

	old = MemoryContextSwitchTo(fcinfo->flinfo->fn_mcxt);
	cache = palloc0(sizeof(CpPredictCache));
	cache->name = (text *) PG_DETOAST_DATUM_COPY(PG_GETARG_DATUM(0));
	cache->model = cp_models_load(text_to_cstring(name));
	cache->x = palloc(sizeof(double) * cache->model->n_features);
	MemoryContextSwitchTo(old);
	fcinfo->flinfo->fn_extra = cache;
	return cache;
}

static double
answer(const CpStoredModel *m, double margin)
{
	double		y = cp_predict_from_margin(m->kind, margin);

	if (m->kind == CP_MODEL_LINEAR)
		return y;
	return y > 0 ? m->class_values[1] : m->class_values[0];
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

/* Margin of a dense array; false if it holds a NULL. */
static bool
dense_margin(CpPredictCache *cache, ArrayType *arr, double *margin)
{
	CpStoredModel *m = cache->model;
	int			len;

	check_numeric_array(arr, "features");
	len = cp_array_length(arr, NULL, "features");
	if (len != m->n_features)
		wrong_dimension(m, len);
	if (!cp_array_to_doubles(arr, cache->x, len, NULL))
		return false;
	*margin = cp_margin_dense(m->weights, cache->x, len) + m->weights[len];
	return true;
}

/* Margin of a sparse pair of arrays; false if either holds a NULL. */
static bool
sparse_margin(CpPredictCache *cache, ArrayType *idx, ArrayType *val, double *margin)
{
	CpStoredModel *m = cache->model;
	int			n_idx;
	int			n_val;
	int32	   *indices;
	double	   *values;
	double		z = 0.0;

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
	indices = palloc(sizeof(int32) * Max(n_idx, 1));
	values = palloc(sizeof(double) * Max(n_idx, 1));
	if (!cp_array_to_indices(idx, indices, n_idx, m->n_features, NULL) ||
		!cp_array_to_doubles(val, values, n_idx, NULL))
		return false;
	for (int k = 0; k < n_idx; k++)
		z += m->weights[indices[k]] * values[k];
	*margin = z + m->weights[m->n_features];
	pfree(indices);
	pfree(values);
	return true;
}

Datum
corgipile_predict_dense(PG_FUNCTION_ARGS)
{
	CpPredictCache *cache = get_cache(fcinfo);
	double		margin;

	if (!dense_margin(cache, PG_GETARG_ARRAYTYPE_P(1), &margin))
		PG_RETURN_NULL();
	PG_RETURN_FLOAT8(answer(cache->model, margin));
}

Datum
corgipile_predict_sparse(PG_FUNCTION_ARGS)
{
	CpPredictCache *cache = get_cache(fcinfo);
	double		margin;

	if (!sparse_margin(cache, PG_GETARG_ARRAYTYPE_P(1), PG_GETARG_ARRAYTYPE_P(2),
					   &margin))
		PG_RETURN_NULL();
	PG_RETURN_FLOAT8(answer(cache->model, margin));
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
resolve_row(CpPredictCache *cache, HeapTupleHeader td)
{
	Oid			type = HeapTupleHeaderGetTypeId(td);
	int32		typmod = HeapTupleHeaderGetTypMod(td);
	CpStoredModel *m = cache->model;
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
	cache->natts = desc->natts;
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

Datum
corgipile_predict_row(PG_FUNCTION_ARGS)
{
	CpPredictCache *cache = get_cache(fcinfo);
	CpStoredModel *m = cache->model;
	HeapTupleHeader td = PG_GETARG_HEAPTUPLEHEADER(1);
	HeapTupleData tuple;
	TupleDesc	desc;
	double		margin = 0.0;
	bool		ok = true;

	resolve_row(cache, td);
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
				PG_RETURN_NULL();
			ok = dense_margin(cache,
							  DatumGetArrayTypeP(cache->values[cache->attnos[0] - 1]),
							  &margin);
			break;
		case CP_FEATURES_COLUMNS:
			for (int i = 0; i < m->n_features; i++)
			{
				AttrNumber	a = cache->attnos[i];

				if (cache->nulls[a - 1])
					PG_RETURN_NULL();
				if (!cp_is_number_type(cache->atttypes[i]))
					ereport(ERROR,
							(errcode(ERRCODE_DATATYPE_MISMATCH),
							 errmsg("column \"%s\" of the row has type %s; expected a numeric type",
									(char *) list_nth(m->features, i),
									format_type_be(cache->atttypes[i]))));
				cache->x[i] = cp_datum_to_double(cache->values[a - 1], cache->atttypes[i]);
				cp_check_finite(cache->x[i], NULL);
			}
			margin = cp_margin_dense(m->weights, cache->x, m->n_features) +
				m->weights[m->n_features];
			break;
		case CP_FEATURES_SPARSE:
			if (cache->nulls[cache->indices_attno - 1] ||
				cache->nulls[cache->attnos[0] - 1])
				PG_RETURN_NULL();
			ok = sparse_margin(cache,
							   DatumGetArrayTypeP(cache->values[cache->indices_attno - 1]),
							   DatumGetArrayTypeP(cache->values[cache->attnos[0] - 1]),
							   &margin);
			break;
		case CP_FEATURES_NONE:
			elog(ERROR, "corgipile: model \"%s\" has no features", m->model_name);
	}
	if (!ok)
		PG_RETURN_NULL();
	PG_RETURN_FLOAT8(answer(m, margin));
}
