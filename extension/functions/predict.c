/*-------------------------------------------------------------------------
 *
 * predict.c
 *	  corgipile.predict(), predict_class() and predict_proba(): apply a
 *	  stored model to features or to a row.
 *
 * A model is read from the catalog (checking the caller's USAGE on it and
 * validating the row) once per query, call site and role, and kept in
 * fn_extra with at most CP_PREDICT_CACHED_MODELS others, so a prediction
 * costs a dot product, not a lookup.  Inputs are checked before they are
 * read: argument and column types against what the model needs.
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
#include "miscadmin.h"
#include "funcapi.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/typcache.h"

#include "core/linear_model.h"
#include "util/datum_convert.h"
#include "model/models.h"
#include "params/params.h"
#include "io/prep.h"

/* the values of a predict*() call: no table, no row; the hint's verb */
static const CpRowContext predict_input = {NULL, NULL, "predicting"};

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

/*
 * One loaded model, with everything predicting with it needs.  Each lives
 * in its own memory context, deleted when the entry is evicted.
 */
typedef struct CpPredictCache
{
	MemoryContext cxt;			/* holds this entry and all it points to */
	text	   *name;			/* the model_name this entry is for */
	Oid			userid;			/* the role whose USAGE was checked */
	uint64		last_used;		/* for LRU eviction */
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

	/* category values the model does not know, encoded as zeros */
	int64		n_unseen;
	bool		unseen_noticed; /* one NOTICE per query, not per row */
} CpPredictCache;

/*
 * The models of one call site (fn_extra).  A query whose model name changes
 * from row to row keeps the few most recently used loaded and frees the
 * rest, so memory stays bounded whatever the number of rows.
 */
#define CP_PREDICT_CACHED_MODELS 4

typedef struct CpPredictSite
{
	CpPredictCache *entries[CP_PREDICT_CACHED_MODELS];
	int			n_entries;
	uint64		clock;
} CpPredictSite;

static void *
alloc_zero(Size size)
{
	return MemoryContextAllocExtended(CurrentMemoryContext, size,
									  MCXT_ALLOC_HUGE | MCXT_ALLOC_ZERO);
}

/* Make room for n values (and indices) in an entry's row. */
static void
ensure_row_cap(CpPredictCache *cache, int n)
{
	if (n <= cache->row_cap)
		return;
	cache->row.values = repalloc_huge(cache->row.values, mul_size(sizeof(double), n));
	cache->row.indices = repalloc_huge(cache->row.indices, mul_size(sizeof(int32), n));
	cache->row_cap = n;
}

static CpPredictCache *
load_entry(FunctionCallInfo fcinfo, text *name, Oid userid)
{
	MemoryContext cxt;
	MemoryContext old;
	CpPredictCache *cache;
	CpStoredModel *m;
	bool		sparse_rows;

	cxt = AllocSetContextCreate(fcinfo->flinfo->fn_mcxt, "corgipile predict model",
								ALLOCSET_DEFAULT_SIZES);
	old = MemoryContextSwitchTo(cxt);
	cache = palloc0(sizeof(CpPredictCache));
	cache->cxt = cxt;
	cache->userid = userid;
	cache->name = (text *) PG_DETOAST_DATUM_COPY(PointerGetDatum(name));
	cache->stored = m = cp_models_load(text_to_cstring(name));
	/* the loader checked the weights' length; this also bounds the scratch */
	sparse_rows = m->mode == CP_FEATURES_SPARSE || cp_prep_has_onehot(m->prep);
	cp_check_model_size(m->kind, m->n_features, m->n_outputs, sparse_rows, 1,
						m->model_name);
	if (!cp_model_init(&cache->model, m->kind, m->n_features, m->n_outputs,
					   sparse_rows, 1, 0.0, 0.0, alloc_zero))
		elog(ERROR, "corgipile: could not size model \"%s\"", m->model_name);
	cache->model.w = m->weights;
	cache->z = palloc(sizeof(double) * m->n_outputs);
	/* dense inputs grow the row to n_features on first use */
	cache->row_cap = 1;
	cache->row.n_rows = 1;
	cache->row.n_features = m->n_features;
	cache->row.values = palloc(sizeof(double));
	cache->row.indices = palloc(sizeof(int32));
	cache->row.offsets = palloc0(sizeof(int64) * 2);
	cache->row.labels = palloc0(sizeof(double));
	MemoryContextSwitchTo(old);
	return cache;
}

/*
 * The entry for this call's model name and role, loading it (and checking
 * the role's USAGE on the model) on a miss.  The role is part of the key,
 * so a cached model is never used by a role other than the one checked
 * (plpgsql keeps expression state across calls within a transaction, and
 * the role may change between them).
 */
static CpPredictCache *
get_cache(FunctionCallInfo fcinfo)
{
	text	   *name = PG_GETARG_TEXT_PP(0);
	Oid			userid = GetUserId();
	CpPredictSite *site = (CpPredictSite *) fcinfo->flinfo->fn_extra;
	CpPredictCache *cache;
	int			victim = 0;

	if (site == NULL)
	{
		site = MemoryContextAllocZero(fcinfo->flinfo->fn_mcxt, sizeof(CpPredictSite));
		fcinfo->flinfo->fn_extra = site;
	}
	for (int i = 0; i < site->n_entries; i++)
	{
		cache = site->entries[i];
		if (cache->userid == userid &&
			VARSIZE_ANY_EXHDR(name) == VARSIZE_ANY_EXHDR(cache->name) &&
			memcmp(VARDATA_ANY(name), VARDATA_ANY(cache->name),
				   VARSIZE_ANY_EXHDR(name)) == 0)
		{
			cache->last_used = ++site->clock;
			return cache;
		}
	}

	cache = load_entry(fcinfo, name, userid);
	cache->last_used = ++site->clock;
	if (site->n_entries < CP_PREDICT_CACHED_MODELS)
	{
		site->entries[site->n_entries++] = cache;
		return cache;
	}
	for (int i = 1; i < site->n_entries; i++)
		if (site->entries[i]->last_used < site->entries[victim]->last_used)
			victim = i;
	MemoryContextDelete(site->entries[victim]->cxt);
	site->entries[victim] = cache;
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
				 errmsg("%s must be an array of numbers, got an array of %s", what,
						format_type_be(ARR_ELEMTYPE(arr))),
				 errhint("Cast the array to float8[].")));
}

/*
 * A dense array with NULL elements, for a model that imputes: each NULL at
 * a number's position takes the fill training stored; a NULL anywhere
 * else (a category's or a missing indicator's position, whose value the
 * caller gives) is no prediction.  Then the transform.
 */
static bool
load_dense_imputed(CpPredictCache *cache, ArrayType *arr, int len)
{
	const CpPrep *prep = cache->stored->prep;
	bool	   *isnull = palloc(sizeof(bool) * len);
	double	   *x = cache->row.values;
	bool		ok = true;

	cp_array_to_doubles_nulls(arr, x, isnull, len, &predict_input);
	for (int j = 0; j < len && ok; j++)
	{
		if (!isnull[j])
			continue;
		if (isnan(prep->fill[j]))
			ok = false;
		x[j] = prep->fill[j];
	}
	pfree(isnull);
	if (ok && prep->transform)
		cp_prep_apply_dense(prep->transform, x);
	return ok;
}

/* Load a dense array into the cached row; false if it holds a NULL. */
static bool
load_dense(CpPredictCache *cache, ArrayType *arr)
{
	int			len;

	check_numeric_array(arr, "features");
	len = cp_array_length(arr, &predict_input, "features");
	if (len != cache->stored->n_features)
		wrong_dimension(cache->stored, len);
	ensure_row_cap(cache, len);
	cache->row.sparse = false;
	if (cache->stored->prep && cache->stored->prep->fill && array_contains_nulls(arr))
		return load_dense_imputed(cache, arr, len);
	/* the model's feature vector before scaling: scale it as training did */
	if (cache->stored->prep && cache->stored->prep->transform &&
		cache->stored->prep->transform->n_features == len)
	{
		const CpPrepTransform *t = cache->stored->prep->transform;

		return cp_array_to_doubles_transformed(arr, cache->row.values, len, &predict_input,
											   t->scale, t->offset);
	}
	if (!cp_array_to_doubles(arr, cache->row.values, len, &predict_input))
		return false;
	if (cache->stored->prep && cache->stored->prep->transform)
		cp_prep_apply_dense(cache->stored->prep->transform, cache->row.values);
	return true;
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
				 errmsg("feature_indices must be an array of integers, got an array of %s",
						format_type_be(ARR_ELEMTYPE(idx))),
				 errhint("Cast the indices to integer[].")));
	check_numeric_array(val, "features");
	n_idx = cp_array_length(idx, &predict_input, "feature_indices");
	n_val = cp_array_length(val, &predict_input, "features");
	if (n_idx != n_val)
		ereport(ERROR,
				(errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
				 errmsg("feature_indices has %d elements but features has %d",
						n_idx, n_val)));
	/* an index may repeat, so there can be more values than features */
	ensure_row_cap(cache, n_idx);
	cache->row.sparse = true;
	cache->row.offsets[1] = n_idx;
	if (!cp_array_to_indices(idx, cache->row.indices, n_idx, m->n_features, &predict_input) ||
		!cp_array_to_doubles(val, cache->row.values, n_idx, &predict_input))
		return false;
	if (m->prep && m->prep->transform)
		cp_prep_apply_sparse(m->prep->transform, cache->row.indices,
							 cache->row.values, n_idx);
	return true;
}

/*
 * Check a row column's type against what the model reads from it, before
 * any value is read: an array of numbers (of integers for the sparse
 * index column) or a number.  Domains are looked through.
 */
static void
check_row_column(const char *name, Oid type, const CpStoredModel *m,
				 bool want_array, bool (*elem_ok) (Oid), const char *need)
{
	Oid			elem = want_array ? get_element_type(type) : InvalidOid;

	if (want_array ? (OidIsValid(elem) && elem_ok(elem)) : elem_ok(type))
		return;
	ereport(ERROR,
			(errcode(ERRCODE_DATATYPE_MISMATCH),
			 errmsg("column \"%s\" of the row has type %s, but model \"%s\" needs %s there",
					name, format_type_be(type), m->model_name, need),
			 errhint("Pass a row whose column \"%s\" is %s, or cast it.", name, need)));
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
		if (m->mode == CP_FEATURES_COLUMNS && m->prep != NULL &&
			m->prep->columns[i].onehot)
			check_row_column(lfirst(lc), cache->atttypes[i], m, false,
							 cp_prep_is_category_type, "text or a boolean");
		else if (m->mode == CP_FEATURES_COLUMNS)
			check_row_column(lfirst(lc), cache->atttypes[i], m, false,
							 cp_is_number_type, "a number");
		else
			check_row_column(lfirst(lc), cache->atttypes[i], m, true,
							 cp_is_number_type, "an array of numbers");
	}
	if (m->mode == CP_FEATURES_SPARSE)
	{
		cache->indices_attno = row_column(desc, m->feature_indices, m, &t);
		check_row_column(m->feature_indices, t, m, true, cp_is_index_type,
						 "an array of integers");
	}
	/* cp_models_load() checked the columns against n_features */
	Assert(m->mode != CP_FEATURES_COLUMNS || n == m->n_features || m->prep != NULL);
	MemoryContextSwitchTo(old);
	ReleaseTupleDesc(desc);
}

/*
 * Number column i of the row being predicted, or the fill of a model that
 * imputes when it is NULL; false: NULL, and no prediction.
 */
static bool
load_number(CpPredictCache *cache, int i, double *x)
{
	const CpPrep *prep = cache->stored->prep;
	AttrNumber	a = cache->attnos[i];

	if (cache->nulls[a - 1])
	{
		if (prep == NULL || prep->fill == NULL)
			return false;
		*x = prep->fill[prep->columns[i].offset];
		return true;
	}
	*x = cp_datum_to_double(cache->values[a - 1], cache->atttypes[i]);
	cp_check_finite(*x, &predict_input);
	return true;
}

/*
 * The columns of a row through the model's preprocessing, as a sparse row
 * (one entry per column, as training holds it: layout.c): numbers (NULL:
 * the fill of a model that imputes, with its missing indicator; else no
 * prediction, as without preprocessing) transformed, each category's
 * indicator (NULL or unseen: none, i.e. all zeros, reported once per query
 * when it counts as unseen: cp_prep_column_code).
 */
static bool
load_encoded(CpPredictCache *cache)
{
	const CpPrep *prep = cache->stored->prep;
	const CpPrepTransform *t = prep->transform;
	int64		before = cache->n_unseen;
	int			n = 0;

	ensure_row_cap(cache, prep->n_columns + prep->n_indicators);
	cache->row.sparse = true;
	for (int i = 0; i < prep->n_columns; i++)
	{
		const CpPrepColumn *col = &prep->columns[i];
		AttrNumber	a = cache->attnos[i];

		if (col->onehot)
		{
			int32		code = cp_prep_column_code(col, cache->values[a - 1],
												   cache->nulls[a - 1],
												   cache->atttypes[i],
												   &cache->n_unseen);

			if (code == CP_PREP_NO_CODE)
				continue;
			cache->row.indices[n] = col->offset + code;
			cache->row.values[n++] = 1.0;
		}
		else
		{
			double		x;

			if (!load_number(cache, i, &x))
				return false;
			if (t != NULL)
				x = x * t->scale[col->offset] + t->offset[col->offset];
			cache->row.indices[n] = col->offset;
			cache->row.values[n++] = x;
		}
	}
	/* missing indicators, after every column's positions (layout.c) */
	for (int i = 0; prep->indicator != NULL && i < prep->n_columns; i++)
	{
		int32		at = prep->indicator[prep->columns[i].offset];

		if (!prep->columns[i].onehot && at >= 0 && cache->nulls[cache->attnos[i] - 1])
		{
			cache->row.indices[n] = at;
			cache->row.values[n++] = 1.0;
		}
	}
	cache->row.offsets[1] = n;
	if (cache->n_unseen > before && !cache->unseen_noticed)
	{
		cache->unseen_noticed = true;
		ereport(NOTICE,
				(errmsg("model \"%s\": a category value it was not trained on (or NULL) is encoded as all zeros",
						cache->stored->model_name),
				 errdetail("This notice is given once per query.")));
	}
	return true;
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
			if (cp_prep_has_onehot(m->prep))
				return load_encoded(cache);
			/* numbers, then any missing indicators (layout.c) */
			ensure_row_cap(cache, m->n_features);
			cache->row.sparse = false;
			memset(cache->row.values, 0, sizeof(double) * m->n_features);
			for (int i = 0; i < list_length(m->features); i++)
			{
				if (!load_number(cache, i, &cache->row.values[i]))
					return false;
				if (m->prep != NULL && m->prep->indicator != NULL &&
					m->prep->indicator[i] >= 0 && cache->nulls[cache->attnos[i] - 1])
					cache->row.values[m->prep->indicator[i]] = 1.0;
			}
			if (m->prep != NULL && m->prep->transform != NULL)
				cp_prep_apply_dense(m->prep->transform, cache->row.values);
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

	/*
	 * An array addresses a model with category columns in its one-hot
	 * space, whose size and per-category weights are its training rows'
	 * figures: the row form only, for a role that may not see them.
	 */
	if (!cache->stored->sees_data && form != CP_INPUT_ROW &&
		cp_prep_has_onehot(cache->stored->prep))
		cp_models_check_may_see_data(cache->stored,
									 "Predicting from an array in its one-hot encoding, rather than from a row of its columns,");
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
