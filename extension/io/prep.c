/*-------------------------------------------------------------------------
 *
 * preprocess_model.c
 *	  A model's preprocessing: one-hot encoding of category columns, the
 *	  standardizing transform, and their JSON form in
 *	  corgipile.model_store.preprocess (docs/preprocessing.md).
 *
 * The stored form is data like every other column of a model row: whoever
 * wrote it (corgipile.import_model() takes user rows), reading it back
 * validates every field, and a damaged one is an ERROR naming the model and
 * the column, never a wrong prediction.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <math.h>

#include "catalog/pg_type.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/float.h"
#include "utils/json.h"
#include "utils/memutils.h"
#include "utils/numeric.h"

#include "io/prep.h"
#include "util/json.h"

/* the core's allocator callback: zeroed memory of the current context */
void *
cp_prep_palloc0(Size size)
{
	return MemoryContextAllocExtended(CurrentMemoryContext, size,
									  MCXT_ALLOC_HUGE | MCXT_ALLOC_ZERO);
}

/* Columns one-hot encoded when named in features. */
bool
cp_prep_is_category_type(Oid type)
{
	return type == TEXTOID || type == VARCHAROID || type == BOOLOID;
}

bool
cp_prep_has_onehot(const CpPrep *prep)
{
	if (prep == NULL)
		return false;
	for (int i = 0; i < prep->n_columns; i++)
		if (prep->columns[i].onehot)
			return true;
	return false;
}

/*
 * Size the imputation of a model of prep->n_features positions: every
 * fill NaN (a position that is not a number: the caller sets the
 * numbers') and no indicator (the caller places them, and counts them in
 * n_indicators).  missing skip has neither.
 */
void
cp_prep_init_missing(CpPrep *prep, CpMissing missing, bool add_indicator)
{
	prep->missing = missing;
	prep->add_indicator = add_indicator;
	prep->n_indicators = 0;
	if (missing == CP_MISSING_SKIP)
		return;
	prep->fill = palloc_array(double, prep->n_features);
	for (int32 j = 0; j < prep->n_features; j++)
		prep->fill[j] = get_float8_nan();
	if (add_indicator)
	{
		prep->indicator = palloc_array(int32, prep->n_features);
		for (int32 j = 0; j < prep->n_features; j++)
			prep->indicator[j] = -1;
	}
}

/*
 * The bytes a category value is known by: a boolean's text output, a
 * string's bytes (detoasted in the current memory context).
 */
const char *
cp_prep_category_bytes(Datum d, Oid type, int32 *len)
{
	if (type == BOOLOID)
	{
		const char *s = DatumGetBool(d) ? CP_PREP_TRUE : CP_PREP_FALSE;

		*len = (int32) strlen(s);
		return s;
	}
	else
	{
		text	   *t = DatumGetTextPP(d);

		*len = (int32) VARSIZE_ANY_EXHDR(t);
		return VARDATA_ANY(t);
	}
}

/*
 * The code of a category column's value (its one indicator is at
 * col->offset + code), or CP_PREP_NO_CODE for NULL and values the
 * dictionary does not know: all indicators 0.  Unknown values count in
 * *unseen, and NULL too unless the training rows had NULLs in the column
 * (a learnt level, not a surprise).
 */
int32
cp_prep_column_code(const CpPrepColumn *col, Datum d, bool isnull, Oid type,
					int64 *unseen)
{
	int32		len;
	const char *s;
	int32		code;

	if (isnull)
	{
		if (!col->nulls_seen)
			(*unseen)++;
		return CP_PREP_NO_CODE;
	}
	s = cp_prep_category_bytes(d, type, &len);
	code = cp_prep_dict_code(col->dict, s, len);
	if (code == CP_PREP_NO_CODE)
		(*unseen)++;
	return code;
}

/* ---------------------------------------------------------------------
 * Writing the jsonb
 * ---------------------------------------------------------------------
 */

/* A key and its string value. */
static void
key_string(JsonbParseState **st, const char *key, const char *value)
{
	cp_jsonb_key(st, key);
	cp_jsonb_string(st, WJB_VALUE, value, (int32) strlen(value));
}

/* A key whose value is true. */
static void
key_true(JsonbParseState **st, const char *key)
{
	JsonbValue	t = {.type = jbvBool,.val.boolean = true};

	cp_jsonb_key(st, key);
	pushJsonbValue(st, WJB_VALUE, &t);
}

/* A key and an array of n numbers. */
static void
key_doubles(JsonbParseState **st, const char *key, const double *v, int32 n)
{
	cp_jsonb_key(st, key);
	pushJsonbValue(st, WJB_BEGIN_ARRAY, NULL);
	for (int32 j = 0; j < n; j++)
		cp_jsonb_number(st, WJB_ELEM, v[j]);
	pushJsonbValue(st, WJB_END_ARRAY, NULL);
}

/*
 * The preprocess jsonb of a trained model (shape in docs/preprocessing.md),
 * built as a jsonb rather than parsed from text: the category values go
 * from the dictionaries into it once, never escaped, copied or parsed
 * (docs/security.md, "Resource bounds").  Means and stds are the numerics
 * of the shortest exact float8 output, so the transform rebuilt from them
 * is bit-identical to training's.
 */
Jsonb *
cp_prep_to_jsonb(const CpPrep *prep, List *feature_names, CpFeatureMode mode)
{
	bool		scaled = prep->transform != NULL;
	JsonbParseState *st = NULL;
	JsonbValue *root;

	pushJsonbValue(&st, WJB_BEGIN_OBJECT, NULL);
	cp_jsonb_key(&st, "version");
	cp_jsonb_int(&st, WJB_VALUE, 1);
	key_string(&st, "standardize", cp_standardize_name(prep->standardize));
	/* since 0.4.0, only when imputing: absent reads as skip */
	if (prep->fill != NULL)
	{
		key_string(&st, "missing", cp_missing_name(prep->missing));
		if (prep->add_indicator)
			key_true(&st, "missing_indicator");
	}
	cp_jsonb_key(&st, "features");
	pushJsonbValue(&st, WJB_BEGIN_ARRAY, NULL);
	if (mode == CP_FEATURES_COLUMNS)
	{
		for (int i = 0; i < prep->n_columns; i++)
		{
			const CpPrepColumn *col = &prep->columns[i];

			pushJsonbValue(&st, WJB_BEGIN_OBJECT, NULL);
			key_string(&st, "name", col->name);
			if (col->onehot)
			{
				key_string(&st, "kind", "onehot");
				cp_jsonb_key(&st, "categories");
				pushJsonbValue(&st, WJB_BEGIN_ARRAY, NULL);
				for (int32 c = 0; c < col->width; c++)
				{
					int32		len;
					const char *s = cp_prep_dict_value(col->dict, c, &len);

					cp_jsonb_string(&st, WJB_ELEM, s, len);
				}
				pushJsonbValue(&st, WJB_END_ARRAY, NULL);
				/* since 0.4.0, only when true: absent reads as false */
				if (col->nulls_seen)
					key_true(&st, "nulls");
			}
			else
			{
				key_string(&st, "kind", "number");
				if (scaled)
				{
					cp_jsonb_key(&st, "mean");
					cp_jsonb_number(&st, WJB_VALUE, prep->means[col->offset]);
					cp_jsonb_key(&st, "std");
					cp_jsonb_number(&st, WJB_VALUE, prep->stds[col->offset]);
				}
				if (prep->fill != NULL)
				{
					cp_jsonb_key(&st, "fill");
					cp_jsonb_number(&st, WJB_VALUE, prep->fill[col->offset]);
				}
				if (col->nulls_seen)
					key_true(&st, "nulls");
			}
			pushJsonbValue(&st, WJB_END_OBJECT, NULL);
		}
	}
	else
	{
		pushJsonbValue(&st, WJB_BEGIN_OBJECT, NULL);
		key_string(&st, "name", linitial(feature_names));
		key_string(&st, "kind", mode == CP_FEATURES_SPARSE ? "sparse" : "array");
		if (scaled)
		{
			key_doubles(&st, "mean", prep->means, prep->n_features);
			key_doubles(&st, "std", prep->stds, prep->n_features);
		}
		if (prep->fill != NULL)
			key_doubles(&st, "fill", prep->fill, prep->n_features);
		pushJsonbValue(&st, WJB_END_OBJECT, NULL);
	}
	pushJsonbValue(&st, WJB_END_ARRAY, NULL);
	cp_jsonb_key(&st, "n_model_features");
	cp_jsonb_int(&st, WJB_VALUE, prep->n_features);
	cp_jsonb_key(&st, "constant_features");
	cp_jsonb_int(&st, WJB_VALUE, prep->n_constant);
	cp_jsonb_key(&st, "rows");
	cp_jsonb_int(&st, WJB_VALUE, prep->n_rows);
	root = pushJsonbValue(&st, WJB_END_OBJECT, NULL);
	return JsonbValueToJsonb(root);
}

/*
 * Keep the category values once: each dictionary's entries point at the
 * same bytes in jb, the model row's preprocess jsonb built from prep
 * (cp_prep_to_jsonb), and free their own copies: the values stay the
 * same, only where they are kept changes.  jb must live as long as prep.
 * Writing a model then holds its values three times (this jsonb, the
 * executor's copy of the row, the heap tuple), not four: the first pass
 * charges twice what it learns (first_pass.c).
 */
void
cp_prep_share_values(const CpPrep *prep, Jsonb *jb)
{
	JsonbValue *features = getKeyJsonValueFromContainer(&jb->root, "features", 8, NULL);

	Assert(features != NULL && features->type == jbvBinary);
	for (int i = 0; i < prep->n_columns; i++)
	{
		const CpPrepColumn *col = &prep->columns[i];
		JsonbValue *feature;
		JsonbValue *cats;

		if (!col->onehot)
			continue;
		feature = getIthJsonbValueFromContainer(features->val.binary.data, i);
		Assert(feature != NULL && feature->type == jbvBinary);
		cats = getKeyJsonValueFromContainer(feature->val.binary.data, "categories", 10, NULL);
		Assert(cats != NULL && cats->type == jbvBinary);
		for (int32 c = 0; c < col->width; c++)
		{
			JsonbValue *v = getIthJsonbValueFromContainer(cats->val.binary.data, c);

			Assert(v != NULL && v->type == jbvString);
			pfree((void *) cp_prep_dict_share(col->dict, c, v->val.string.val));
			pfree(v);
		}
	}
}

/*
 * The weights in the features' original units, one block per output
 * (cp_prep_weights_to_original); a copy of w when nothing is scaled.
 */
double *
cp_prep_original_weights(const CpPrep *prep, const double *w, int32 n_outputs)
{
	Size		n = mul_size((Size) prep->n_features + 1, n_outputs);
	double	   *out = palloc_array(double, n);

	if (prep->transform == NULL)
		memcpy(out, w, sizeof(double) * n);
	else
		cp_prep_weights_to_original(prep->transform, w, out, n_outputs);
	return out;
}

/* ---------------------------------------------------------------------
 * Reading and validating the JSON
 * ---------------------------------------------------------------------
 */

#define damaged(model_name, ...) \
	ereport(ERROR, \
			(errcode(ERRCODE_DATA_CORRUPTED), \
			 errmsg("model \"%s\" is damaged: column preprocess is invalid", (model_name)), \
			 errdetail(__VA_ARGS__), \
			 errhint("Drop the model with corgipile.drop_model() and train it again.")))

static JsonbValue *
get_key(JsonbContainer *obj, const char *key)
{
	return getKeyJsonValueFromContainer(obj, key, strlen(key), NULL);
}

static char *
get_string(JsonbContainer *obj, const char *key, const char *model_name,
		   const char *where)
{
	JsonbValue *v = get_key(obj, key);

	if (v == NULL || v->type != jbvString)
		damaged(model_name, "%s has no string \"%s\".", where, key);
	return pnstrdup(v->val.string.val, v->val.string.len);
}

static double
value_double(const JsonbValue *v, const char *model_name, const char *what)
{
	double		d;

	if (v == NULL || v->type != jbvNumeric)
		damaged(model_name, "%s is not a number.", what);
	d = DatumGetFloat8(DirectFunctionCall1(numeric_float8,
										   NumericGetDatum(v->val.numeric)));
	if (!isfinite(d))
		damaged(model_name, "%s is not a finite number.", what);
	return d;
}

/* The elements of a JSON array (nested containers as jbvBinary). */
static JsonbValue *
array_elements(const JsonbValue *v, const char *model_name, const char *what,
			   int *n)
{
	JsonbIterator *it;
	JsonbValue	elem;
	JsonbIteratorToken tok;
	JsonbValue *out;
	int			count;
	int			i = 0;

	if (v == NULL || v->type != jbvBinary ||
		!JsonContainerIsArray(v->val.binary.data) ||
		JsonContainerIsScalar(v->val.binary.data))
		damaged(model_name, "%s is not a JSON array.", what);
	count = JsonContainerSize(v->val.binary.data);
	out = palloc_array(JsonbValue, Max(count, 1));
	it = JsonbIteratorInit(v->val.binary.data);
	while ((tok = JsonbIteratorNext(&it, &elem, true)) != WJB_DONE)
	{
		if (tok != WJB_ELEM)
			continue;
		if (i >= count)
			damaged(model_name, "%s has more elements than it says.", what);
		out[i++] = elem;
	}
	*n = i;
	return out;
}

static JsonbContainer *
value_object(const JsonbValue *v, const char *model_name, const char *what)
{
	if (v == NULL || v->type != jbvBinary || !JsonContainerIsObject(v->val.binary.data))
		damaged(model_name, "%s is not a JSON object.", what);
	return v->val.binary.data;
}

/* mean and std of a number column, or of each element of an array */
static void
read_moments(CpPrep *prep, JsonbContainer *f, int32 at, int32 n,
			 bool arrays, const char *model_name, const char *name)
{
	JsonbValue *mv = get_key(f, "mean");
	JsonbValue *sv = get_key(f, "std");
	JsonbValue *means = mv;
	JsonbValue *stds = sv;
	int			n_means = 1;
	int			n_stds = 1;

	if (arrays)
	{
		means = array_elements(mv, model_name, psprintf("The mean of \"%s\"", name), &n_means);
		stds = array_elements(sv, model_name, psprintf("The std of \"%s\"", name), &n_stds);
	}
	if (n_means != n || n_stds != n)
		damaged(model_name, "Feature \"%s\" has %d means and %d stds for %d features.",
				name, n_means, n_stds, n);
	for (int32 j = 0; j < n; j++)
	{
		double		mean = value_double(&means[j], model_name,
										psprintf("A mean of \"%s\"", name));
		double		std = value_double(&stds[j], model_name,
									   psprintf("A std of \"%s\"", name));

		if (std < 0.0)
			damaged(model_name, "A std of \"%s\" is negative.", name);
		prep->means[at + j] = mean;
		prep->stds[at + j] = std;
		cp_prep_transform_set(prep->transform, at + j, mean, std);
	}
}

/*
 * A onehot column's categories, element by element: add each to the
 * dictionary (check_order false), or check that each has its position as
 * code (true).  Streamed from the jsonb rather than copied into an array
 * of JsonbValues first: a model may have 2^20 categories.
 */
static void
walk_categories(CpPrepColumn *col, JsonbContainer *cats, int n, bool check_order,
				const char *model_name)
{
	JsonbIterator *it = JsonbIteratorInit(cats);
	JsonbValue	elem;
	JsonbIteratorToken tok;
	int			i = 0;

	while ((tok = JsonbIteratorNext(&it, &elem, true)) != WJB_DONE)
	{
		if (tok != WJB_ELEM)
			continue;
		if (i >= n)
			damaged(model_name, "The categories of \"%s\" has more elements than it says.",
					col->name);
		if (elem.type != jbvString)
			damaged(model_name, "Category %d of \"%s\" is not a string.", i + 1, col->name);
		if (!check_order)
		{
			if (cp_prep_dict_add(col->dict, elem.val.string.val,
								 elem.val.string.len) != CP_PREP_DICT_ADDED)
				damaged(model_name, "Category %d of \"%s\" repeats an earlier one.", i + 1, col->name);
		}
		/* codes are positions only if the list is in bytewise order */
		else if (cp_prep_dict_code(col->dict, elem.val.string.val,
								   elem.val.string.len) != i)
			damaged(model_name, "The categories of \"%s\" are not in byte order.", col->name);
		i++;
		if ((i & 65535) == 0)
			CHECK_FOR_INTERRUPTS();
	}
}

/* whether training met NULLs in a column: a boolean since 0.4.0, absent before */
static bool
read_nulls(JsonbContainer *f, const char *model_name, const char *name)
{
	JsonbValue *nulls = get_key(f, "nulls");

	if (nulls != NULL && nulls->type != jbvBool)
		damaged(model_name, "\"nulls\" of \"%s\" is not a boolean.", name);
	return nulls != NULL && nulls->val.boolean;
}

/* the fills of positions [at, at + n) (imputing models) */
static void
read_fills(CpPrep *prep, JsonbContainer *f, int32 at, int32 n, bool array,
		   const char *model_name, const char *name)
{
	JsonbValue *v = get_key(f, "fill");
	JsonbValue *fills = v;
	int			n_fills = 1;

	if (array)
		fills = array_elements(v, model_name, psprintf("The fill of \"%s\"", name), &n_fills);
	if (n_fills != n)
		damaged(model_name, "Feature \"%s\" has %d fills for %d features.", name, n_fills, n);
	for (int32 j = 0; j < n; j++)
		prep->fill[at + j] = value_double(&fills[j], model_name,
										  psprintf("The fill of \"%s\"", name));
}

/* A onehot column's dictionary, rebuilt so that code i is categories[i]. */
static void
read_categories(CpPrepColumn *col, JsonbContainer *f, const char *model_name)
{
	JsonbValue *cats = get_key(f, "categories");
	int			n;

	if (cats == NULL || cats->type != jbvBinary ||
		!JsonContainerIsArray(cats->val.binary.data) ||
		JsonContainerIsScalar(cats->val.binary.data))
		damaged(model_name, "The categories of \"%s\" is not a JSON array.", col->name);
	n = JsonContainerSize(cats->val.binary.data);
	if (n < 1 || n > CP_PREP_MAX_CATEGORIES)
		damaged(model_name, "Column \"%s\" has %d categories; expected 1 to %d.",
				col->name, n, CP_PREP_MAX_CATEGORIES);
	col->dict = palloc0(sizeof(CpPrepDict));
	if (!cp_prep_dict_init(col->dict, n, cp_prep_palloc0))
		elog(ERROR, "corgipile: could not size a dictionary of %d categories", n);
	walk_categories(col, cats->val.binary.data, n, false, model_name);
	if (col->dict->n_entries != n)
		damaged(model_name, "Column \"%s\" has %d categories; expected %d.",
				col->name, col->dict->n_entries, n);
	cp_prep_dict_finish(col->dict);
	col->nulls_seen = read_nulls(f, model_name, col->name);
	walk_categories(col, cats->val.binary.data, n, true, model_name);
	col->width = n;
}

/*
 * The preprocessing stored with a model, validated against what the rest
 * of its row says (the model's dimension, its feature columns, its
 * layout).  Allocated in the current memory context.
 */
CpPrep *
cp_prep_from_jsonb(Jsonb *jb, const char *model_name, int32 n_features,
				   List *feature_names, CpFeatureMode mode)
{
	JsonbContainer *root = &jb->root;
	CpPrep	   *prep = palloc0(sizeof(CpPrep));
	JsonbValue *v;
	JsonbValue *feats;
	char	   *standardize;
	int			n_feats;
	int32		at = 0;
	CpMissing	missing = CP_MISSING_SKIP;
	bool		add_indicator = false;

	if (!JsonContainerIsObject(root))
		damaged(model_name, "It is not a JSON object.");
	v = get_key(root, "version");
	if (value_double(v, model_name, "version") != 1.0)
		damaged(model_name, "Its version is not 1.");
	standardize = get_string(root, "standardize", model_name, "It");
	if (strcmp(standardize, "on") == 0)
		prep->standardize = CP_STANDARDIZE_ON;
	else if (strcmp(standardize, "scale_only") == 0)
		prep->standardize = CP_STANDARDIZE_SCALE_ONLY;
	else if (strcmp(standardize, "off") == 0)
		prep->standardize = CP_STANDARDIZE_OFF;
	else
		damaged(model_name, "standardize \"%s\" is not on, scale_only or off.", standardize);
	if (mode == CP_FEATURES_SPARSE && prep->standardize == CP_STANDARDIZE_ON)
		damaged(model_name, "A sparse model cannot be centred.");
	if (value_double(get_key(root, "n_model_features"), model_name,
					 "n_model_features") != (double) n_features)
		damaged(model_name, "n_model_features is not the model's n_features %d.", n_features);
	prep->n_features = n_features;
	/* imputation: since 0.4.0, absent before (skip) */
	v = get_key(root, "missing");
	if (v != NULL)
	{
		char	   *name = get_string(root, "missing", model_name, "It");

		if (!cp_parse_missing(name, &missing))
			damaged(model_name, "missing \"%s\" is not skip, mean, median or zero.", name);
		v = get_key(root, "missing_indicator");
		if (v != NULL && v->type != jbvBool)
			damaged(model_name, "missing_indicator is not a boolean.");
		add_indicator = v != NULL && v->val.boolean;
		if (add_indicator && (mode != CP_FEATURES_COLUMNS || missing == CP_MISSING_SKIP))
			damaged(model_name, "missing_indicator needs feature columns and imputation.");
		if (missing != CP_MISSING_SKIP && mode == CP_FEATURES_SPARSE)
			damaged(model_name, "A sparse model does not impute.");
	}
	cp_prep_init_missing(prep, missing, add_indicator);
	if (prep->standardize != CP_STANDARDIZE_OFF)
	{
		prep->transform = palloc0(sizeof(CpPrepTransform));
		if (!cp_prep_transform_init(prep->transform, n_features,
									prep->standardize == CP_STANDARDIZE_ON,
									cp_prep_palloc0))
			elog(ERROR, "corgipile: could not size the transform of %d features", n_features);
		prep->means = palloc0_array(double, n_features);
		prep->stds = palloc0_array(double, n_features);
	}

	feats = array_elements(get_key(root, "features"), model_name, "features", &n_feats);
	if (n_feats != list_length(feature_names))
		damaged(model_name, "It describes %d features; the model has %d feature columns.",
				n_feats, list_length(feature_names));
	if (mode == CP_FEATURES_COLUMNS)
	{
		prep->n_columns = n_feats;
		prep->columns = palloc0_array(CpPrepColumn, n_feats);
	}
	for (int i = 0; i < n_feats; i++)
	{
		JsonbContainer *f = value_object(&feats[i], model_name, "A feature");
		char	   *name = get_string(f, "name", model_name, "A feature");
		char	   *kind = get_string(f, "kind", model_name, "A feature");

		if (strcmp(name, list_nth(feature_names, i)) != 0)
			damaged(model_name, "Feature %d is \"%s\"; the model's feature column %d is \"%s\".",
					i + 1, name, i + 1, (char *) list_nth(feature_names, i));
		if (mode != CP_FEATURES_COLUMNS)
		{
			const char *want = mode == CP_FEATURES_SPARSE ? "sparse" : "array";

			if (strcmp(kind, want) != 0)
				damaged(model_name, "Feature \"%s\" has kind \"%s\"; the model's layout needs \"%s\".",
						name, kind, want);
			if (prep->transform)
				read_moments(prep, f, 0, n_features, true, model_name, name);
			if (prep->fill)
				read_fills(prep, f, 0, n_features, true, model_name, name);
			at = n_features;
			continue;
		}
		prep->columns[i].name = name;
		prep->columns[i].offset = at;
		if (strcmp(kind, "number") == 0)
		{
			prep->columns[i].width = 1;
			if (at >= n_features)
				damaged(model_name, "The features need more than n_features %d positions.", n_features);
			if (prep->transform)
				read_moments(prep, f, at, 1, false, model_name, name);
			if (prep->fill)
				read_fills(prep, f, at, 1, false, model_name, name);
			prep->columns[i].nulls_seen = read_nulls(f, model_name, name);
		}
		else if (strcmp(kind, "onehot") == 0)
		{
			prep->columns[i].onehot = true;
			read_categories(&prep->columns[i], f, model_name);
			if (prep->columns[i].width > n_features - at)
				damaged(model_name, "The features need more than n_features %d positions.", n_features);
		}
		else
			damaged(model_name, "Feature \"%s\" has kind \"%s\"; expected number or onehot.",
					name, kind);
		at += prep->columns[i].width;
	}
	/* the indicators follow, one per number column that had NULLs */
	for (int i = 0; add_indicator && i < prep->n_columns; i++)
	{
		CpPrepColumn *col = &prep->columns[i];

		if (col->onehot || !col->nulls_seen)
			continue;
		if (at >= n_features)
			damaged(model_name, "The missing indicators need more than n_features %d positions.",
					n_features);
		prep->indicator[col->offset] = at++;
		prep->n_indicators++;
	}
	if (at != n_features)
		damaged(model_name, "The features fill %d positions; the model has %d.", at, n_features);
	/* figures for information, kept through a warm start */
	v = get_key(root, "constant_features");
	if (v != NULL)
	{
		double		c = value_double(v, model_name, "constant_features");

		if (c < 0 || c > n_features || c != floor(c))
			damaged(model_name, "constant_features is not a count of features.");
		prep->n_constant = (int32) c;
	}
	v = get_key(root, "rows");
	if (v != NULL)
	{
		double		r = value_double(v, model_name, "rows");

		if (r < 0 || r > (double) PG_INT64_MAX || r != floor(r))
			damaged(model_name, "rows is not a count of rows.");
		prep->n_rows = (int64) r;
	}
	return prep;
}
