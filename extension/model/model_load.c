/*-------------------------------------------------------------------------
 *
 * model_load.c
 *	  Loading a model for predict() and evaluate(), validating every field:
 *	  a model row is data, not code we trust, whoever wrote it.
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
#include "utils/snapmgr.h"
#include "utils/syscache.h"

#include "model/models.h"
#include "model/model_store.h"
#include "io/prep.h"
/* A damaged model row: an error that names the model and the field. */
#define damaged(model_name, field, ...) \
	ereport(ERROR, \
			(errcode(ERRCODE_DATA_CORRUPTED), \
			 errmsg("model \"%s\" is damaged: column %s is invalid", (model_name), (field)), \
			 errdetail(__VA_ARGS__), \
			 errhint("Drop the model with corgipile.drop_model() and train it again.")))

/* A text[] column as C strings; every element non-NULL and non-empty. */

static List *
text_list(const char *model_name, const char *field, Datum d)
{
	ArrayType  *arr = DatumGetArrayTypeP(d);
	Datum	   *elems;
	bool	   *elem_nulls;
	int			n;
	List	   *out = NIL;

	if (ARR_NDIM(arr) > 1)
		damaged(model_name, field, "It is a %d-dimensional array.", ARR_NDIM(arr));
	deconstruct_array(arr, TEXTOID, -1, false, TYPALIGN_INT, &elems, &elem_nulls, &n);
	for (int i = 0; i < n; i++)
	{
		char	   *s;

		if (elem_nulls[i])
			damaged(model_name, field, "Element %d is NULL.", i + 1);
		s = TextDatumGetCString(elems[i]);
		if (s[0] == '\0')
			damaged(model_name, field, "Element %d is empty.", i + 1);
		out = lappend(out, s);
	}
	return out;
}

/* A text column as a C string, or NULL. */
static char *
text_or_null(HeapTuple tup, TupleDesc desc, int col)
{
	bool		isnull;
	Datum		d = SPI_getbinval(tup, desc, col, &isnull);

	return isnull ? NULL : TextDatumGetCString(d);
}

/*
 * Load a model for prediction, after checking that the current role may use
 * it, and validate every field so that a damaged row is an error, never a
 * wrong read.  The result is allocated in the caller's memory context.
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
	Datum		d;
	char	   *kind;
	char	   *layout;
	char	   *classes_type;
	char	   *class_type = NULL;
	Datum	   *elems;
	bool	   *elem_nulls;
	int			n_elems;
	int			n_features_columns;
	int32		width;
	int32		expected;
	ArrayType  *arr;

	args[0] = CStringGetTextDatum(model_name);
	SPI_connect();

	/*
	 * The classes are unpacked by the query: their JSON types (checked
	 * below) and their text.  A non-array classes value unpacks to nothing
	 * and its type says so.
	 */
	if (cp_model_store_query("SELECT s.model, s.n_features, s.weights, "
					"pg_catalog.jsonb_typeof(s.classes), "
					"ARRAY(SELECT pg_catalog.jsonb_typeof(e.v) FROM pg_catalog.jsonb_array_elements("
					"  CASE WHEN pg_catalog.jsonb_typeof(s.classes) OPERATOR(pg_catalog.=) 'array' "
					"  THEN s.classes END) AS e(v)), "
					"ARRAY(SELECT e.v FROM pg_catalog.jsonb_array_elements_text("
					"  CASE WHEN pg_catalog.jsonb_typeof(s.classes) OPERATOR(pg_catalog.=) 'array' "
					"  THEN s.classes END) AS e(v)), "
					"s.params OPERATOR(pg_catalog.->>) 'layout', s.features, "
					"s.feature_indices, s.label, s.owner_id, s.usage_roles, "
					"s.params OPERATOR(pg_catalog.->>) 'grab_state', "
					"s.params OPERATOR(pg_catalog.->>) 'grab_pages_per_block', s.relid, "
					"s.preprocess "
					"FROM corgipile.model_store AS s "
					"WHERE s.model_name OPERATOR(pg_catalog.=) $1",
					1, argtypes, args, NULL, true, SPI_OK_SELECT) == 0)
		cp_model_no_such(model_name);
	tup = SPI_tuptable->vals[0];
	desc = SPI_tuptable->tupdesc;

	old = MemoryContextSwitchTo(caller);
	m = palloc0(sizeof(CpStoredModel));
	m->model_name = pstrdup(model_name);

	/* privileges first: a role without USAGE learns nothing of the row */
	d = SPI_getbinval(tup, desc, 11, &isnull);
	m->owner = isnull ? InvalidOid : DatumGetObjectId(d);
	d = SPI_getbinval(tup, desc, 12, &isnull);
	if (!isnull)
	{
		arr = DatumGetArrayTypeP(d);
		deconstruct_array(arr, OIDOID, sizeof(Oid), true, TYPALIGN_INT,
						  &elems, &elem_nulls, &n_elems);
		m->usage = palloc(sizeof(Oid) * Max(n_elems, 1));
		for (int i = 0; i < n_elems; i++)
			if (!elem_nulls[i])
				m->usage[m->n_usage++] = DatumGetObjectId(elems[i]);
	}
	if (!cp_model_may_use(m->owner, m->usage, m->n_usage))
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("permission denied for model \"%s\"", model_name),
				 errhint("The model's owner can grant USAGE with corgipile.grant_model('%s', role).",
						 model_name)));

	m->grab_state = text_or_null(tup, desc, 13);
	d = SPI_getbinval(tup, desc, 15, &isnull);
	m->relid = isnull ? InvalidOid : DatumGetObjectId(d);
	{
		char	   *ppb = text_or_null(tup, desc, 14);

		m->grab_pages_per_block = ppb ? strtoll(ppb, NULL, 10) : 0;
	}

	kind = text_or_null(tup, desc, 1);
	if (kind == NULL || !cp_parse_model_kind(kind, &m->kind))
		damaged(model_name, "model", "The kind \"%s\" is not svm, logistic, linear or softmax.",
				kind ? kind : "NULL");

	d = SPI_getbinval(tup, desc, 2, &isnull);
	if (isnull || DatumGetInt32(d) <= 0)
		damaged(model_name, "n_features", "n_features is %s; it must be positive.",
				isnull ? "NULL" : psprintf("%d", DatumGetInt32(d)));
	m->n_features = DatumGetInt32(d);

	/* the weights: n_outputs blocks of n_features + 1, no NULL, finite */
	d = SPI_getbinval(tup, desc, 3, &isnull);
	if (isnull)
		damaged(model_name, "weights", "The weights are NULL.");
	arr = DatumGetArrayTypeP(d);
	if (ARR_NDIM(arr) != 1)
		damaged(model_name, "weights", "The weights are a %d-dimensional array; expected one dimension.",
				ARR_NDIM(arr));
	if (array_contains_nulls(arr))
		damaged(model_name, "weights", "The weights contain a NULL.");
	n_elems = ArrayGetNItems(ARR_NDIM(arr), ARR_DIMS(arr));
	if (pg_add_s32_overflow(m->n_features, 1, &width))
		damaged(model_name, "n_features", "n_features %d is too large.", m->n_features);
	m->n_outputs = (m->kind == CP_MODEL_SOFTMAX) ? n_elems / width : 1;
	if (m->n_outputs < 1 ||
		pg_mul_s32_overflow(m->n_outputs, width, &expected) ||
		expected != n_elems ||
		(m->kind == CP_MODEL_SOFTMAX && m->n_outputs < 2))
		damaged(model_name, "weights",
				"%d weights do not fit %d features plus a bias%s.",
				n_elems, m->n_features,
				m->kind == CP_MODEL_SOFTMAX ? " for two or more classes" : "");
	m->weights = MemoryContextAllocHuge(caller, mul_size(sizeof(double), n_elems));
	memcpy(m->weights, ARR_DATA_PTR(arr), mul_size(sizeof(double), n_elems));
	for (int j = 0; j < n_elems; j++)
		if (!isfinite(m->weights[j]))
			damaged(model_name, "weights", "Weight %d is not a finite number.", j + 1);

	/*
	 * The classes: none for linear models; two for binary classifiers; one
	 * per output for softmax.  All strings, all numbers or all booleans.
	 */
	classes_type = text_or_null(tup, desc, 4);
	if (m->kind == CP_MODEL_LINEAR)
	{
		if (classes_type != NULL && strcmp(classes_type, "null") != 0)
			damaged(model_name, "classes", "A linear model has no classes.");
	}
	else
	{
		int			want = m->kind == CP_MODEL_SOFTMAX ? m->n_outputs : 2;
		List	   *types;
		ListCell   *lc;

		if (classes_type == NULL || strcmp(classes_type, "array") != 0)
		{
			if (classes_type == NULL)
				damaged(model_name, "classes", "The classes are NULL; expected a JSON array.");
			damaged(model_name, "classes", "The classes are a JSON %s; expected a JSON array.",
					classes_type);
		}
		types = text_list(model_name, "classes", SPI_getbinval(tup, desc, 5, &isnull));
		if (list_length(types) != want)
			damaged(model_name, "classes", "There are %d classes; a %s model with %d outputs has %d.",
					list_length(types), kind, m->n_outputs, want);
		foreach(lc, types)
		{
			char	   *t = lfirst(lc);

			if (strcmp(t, "string") != 0 && strcmp(t, "number") != 0 &&
				strcmp(t, "boolean") != 0)
				damaged(model_name, "classes", "Class %d is a JSON %s; classes are strings, numbers or booleans.",
						foreach_current_index(lc) + 1, t);
			if (class_type != NULL && strcmp(class_type, t) != 0)
				damaged(model_name, "classes", "The classes mix JSON %ss and %ss.", class_type, t);
			class_type = t;
		}
		d = SPI_getbinval(tup, desc, 6, &isnull);
		deconstruct_array(DatumGetArrayTypeP(d), TEXTOID, -1, false, TYPALIGN_INT,
						  &elems, &elem_nulls, &n_elems);
		m->n_classes = n_elems;
		m->classes_are_text = strcmp(class_type, "string") == 0;
		m->class_names = palloc(sizeof(char *) * n_elems);
		m->class_values = palloc(sizeof(double) * n_elems);
		for (int k = 0; k < n_elems; k++)
		{
			char	   *name = TextDatumGetCString(elems[k]);

			m->class_names[k] = name;
			m->class_values[k] = strcmp(name, "true") == 0 ? 1.0 :
				strcmp(name, "false") == 0 ? 0.0 : strtod(name, NULL);
		}
	}

	/* the features and how they are laid out */
	d = SPI_getbinval(tup, desc, 8, &isnull);
	if (isnull)
		damaged(model_name, "features", "The feature column list is NULL.");
	m->features = text_list(model_name, "features", d);
	n_features_columns = list_length(m->features);
	if (n_features_columns == 0)
		damaged(model_name, "features", "The feature column list is empty.");
	m->feature_indices = text_or_null(tup, desc, 9);
	if (m->feature_indices != NULL && m->feature_indices[0] == '\0')
		damaged(model_name, "feature_indices", "The index column's name is empty.");
	layout = text_or_null(tup, desc, 7);
	/* rows imported without params: the layout follows from the columns */
	if (layout == NULL)
		layout = m->feature_indices ? "sparse" : "array";
	if (strcmp(layout, "sparse") == 0)
		m->mode = CP_FEATURES_SPARSE;
	else if (strcmp(layout, "columns") == 0)
		m->mode = CP_FEATURES_COLUMNS;
	else if (strcmp(layout, "array") == 0)
		m->mode = CP_FEATURES_ARRAY;
	else
		damaged(model_name, "params", "The layout \"%s\" is not array, columns or sparse.", layout);
	if (m->mode == CP_FEATURES_SPARSE && m->feature_indices == NULL)
		damaged(model_name, "feature_indices", "A sparse model needs the name of its index column.");
	if (m->mode != CP_FEATURES_SPARSE && m->feature_indices != NULL)
		damaged(model_name, "feature_indices", "A model with the %s layout has no index column.", layout);
	if (m->mode != CP_FEATURES_COLUMNS && n_features_columns != 1)
		damaged(model_name, "features", "A model with the %s layout has one feature column, not %d.",
				layout, n_features_columns);

	m->label = text_or_null(tup, desc, 10);
	if (m->label == NULL || m->label[0] == '\0')
		damaged(model_name, "label", "The label column's name is missing.");

	/* a binary model's text classes: the -1 class first, in byte order */
	if (m->classes_are_text && m->kind != CP_MODEL_SOFTMAX)
		m->label_dict = cp_label_dict_from_names(m->class_names, m->n_classes,
												 model_name);

	/* preprocessing, validated against the row's other columns */
	d = SPI_getbinval(tup, desc, 16, &isnull);
	if (!isnull)
		m->prep = cp_prep_from_jsonb(DatumGetJsonbP(d), model_name, m->n_features,
									 m->features, m->mode);
	else if (m->mode == CP_FEATURES_COLUMNS && n_features_columns != m->n_features)
		damaged(model_name, "features", "%d feature columns for %d features.",
				n_features_columns, m->n_features);

	/*
	 * A role that may not see the training rows gets the model's function
	 * and nothing more.  Whether a category column held NULLs changes no
	 * prediction (NULL is all zeros either way), only whether a NULL is
	 * counted as unseen: for such a role every NULL is, so the count tells
	 * nothing of the training rows.  (A number column's flag gives it a
	 * missing indicator, part of the function: kept.)
	 */
	m->sees_data = cp_models_may_see_data(m);
	if (m->prep != NULL && !m->sees_data)
		for (int i = 0; i < m->prep->n_columns; i++)
			if (m->prep->columns[i].onehot)
				m->prep->columns[i].nulls_seen = false;

	MemoryContextSwitchTo(old);
	SPI_finish();
	return m;
}

/* corgipile.drop_model(model_name text) */

/*
 * Whether the current role may see what the model holds of its training
 * relation's rows (cp_model_may_see_data: the one rule).
 */
bool
cp_models_may_see_data(const CpStoredModel *m)
{
	return cp_model_may_see_data(m->relid, m->owner);
}

/*
 * Refuse a use of a model's preprocessing that would show it to a role the
 * models view hides it from: its original-unit weights, or a new model that
 * copies it (warm_start).  what says which use, for the message.
 */
void
cp_models_check_may_see_data(const CpStoredModel *m, const char *what)
{
	if (m->prep == NULL || m->sees_data)
		return;
	ereport(ERROR,
			(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
			 errmsg("permission denied for the preprocessing of model \"%s\"", m->model_name),
			 errdetail("%s would reveal the statistics and category values of the rows it was trained on.", what),
			 OidIsValid(m->relid) ?
			 errhint("Ask for SELECT on the relation the model was trained on.") :
			 errhint("Only the model's owner may use the preprocessing of a model without a training relation.")));
}
