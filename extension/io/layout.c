/*-------------------------------------------------------------------------
 *
 * layout.c
 *	  Resolving label and feature columns, and deforming rows into buffers.
 *
 * This runs on the main thread only: it reads slots, detoasts arrays and
 * grows buffers with palloc.  Column names follow SQL identifier rules:
 * unquoted names fold to lower case, and a list is comma-separated.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <math.h>

#include "access/relation.h"
#include "access/sysattr.h"
#include "access/tableam.h"
#include "miscadmin.h"
#include "storage/bufmgr.h"
#include "utils/memutils.h"
#include "catalog/pg_type.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/varlena.h"

#include "util/datum_convert.h"
#include "io/layout.h"
#include "io/prep.h"

const char *
cp_layout_mode_name(CpFeatureMode mode)
{
	switch (mode)
	{
		case CP_FEATURES_ARRAY:
			return "array";
		case CP_FEATURES_COLUMNS:
			return "columns";
		case CP_FEATURES_SPARSE:
			return "sparse";
		case CP_FEATURES_NONE:
			return "none";
	}
	return "unknown";
}

static List *
split_names(const char *value, const char *param)
{
	List	   *names;

	if (!SplitIdentifierString(pstrdup(value), ',', &names) || names == NIL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("corgipile.train: invalid column list in %s: \"%s\"",
						param, value),
				 errhint("Give column names separated by commas; quote mixed-case names.")));
	return names;
}

static AttrNumber
find_column(TupleDesc tupdesc, const char *name, const char *relname,
			const char *param, Oid *type)
{
	for (int i = 0; i < tupdesc->natts; i++)
	{
		Form_pg_attribute attr = TupleDescAttr(tupdesc, i);

		if (!attr->attisdropped && strcmp(NameStr(attr->attname), name) == 0)
		{
			*type = getBaseType(attr->atttypid);
			return attr->attnum;
		}
	}
	ereport(ERROR,
			(errcode(ERRCODE_UNDEFINED_COLUMN),
			 errmsg("column \"%s\" named by %s does not exist in relation \"%s\"",
					name, param, relname),
			 errhint("Column names follow SQL rules: unquoted names fold to lower case.")));
	return InvalidAttrNumber;
}

/* The label is not a feature: training on it would learn the answer. */
static void
check_not_label(const CpLayout *lo, AttrNumber attno, const char *name,
				const char *param)
{
	if (attno == lo->label_attno)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("column \"%s\" of relation \"%s\" is the label; it cannot also be named by %s",
						name, lo->relname, param),
				 errhint("Remove \"%s\" from %s.", name, param)));
}

static char *
single_name(const char *value, const char *param)
{
	List	   *names = split_names(value, param);

	if (list_length(names) != 1)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("corgipile.train: %s must name one column, got \"%s\"",
						param, value)));
	return pstrdup(linitial(names));
}

/* Element type of an array column that holds numbers, or an error. */
static Oid
numeric_array_elem(Oid type, const char *col, const char *relname,
				   bool (*ok) (Oid), const char *expected)
{
	Oid			elem = get_element_type(type);

	if (!OidIsValid(elem) || !ok(getBaseType(elem)))
		ereport(ERROR,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("column \"%s\" of relation \"%s\" has type %s; expected %s",
						col, relname, format_type_be(type), expected)));
	return getBaseType(elem);
}

void
cp_layout_resolve(CpLayout *lo, TupleDesc tupdesc, const char *relname,
				  const CpTrainParams *p)
{
	List	   *names;
	ListCell   *lc;
	Oid			type;

	memset(lo, 0, sizeof(*lo));
	lo->relname = pstrdup(relname);
	lo->use = "training";
	lo->model = p->model;
	lo->n_features = p->n_features;

	/* label */
	lo->label_name = single_name(p->label, "label");
	lo->label_attno = find_column(tupdesc, lo->label_name, relname, "label", &type);
	lo->label_type = type;
	if (lo->model == CP_MODEL_SOFTMAX)
	{
		if (!cp_is_class_label_type(type))
			ereport(ERROR,
					(errcode(ERRCODE_DATATYPE_MISMATCH),
					 errmsg("label column \"%s\" of relation \"%s\" has type %s; expected integer, boolean or text classes",
							lo->label_name, relname, format_type_be(type)),
					 errhint("Use model 'linear' for a continuous label.")));
	}
	else if (lo->model != CP_MODEL_LINEAR &&
			 (type == TEXTOID || type == VARCHAROID))
		lo->label_is_text = true;	/* two values, learnt before epoch 1 */
	else if (!(cp_is_number_type(type) ||
			   (type == BOOLOID && lo->model != CP_MODEL_LINEAR)))
		ereport(ERROR,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("label column \"%s\" of relation \"%s\" has type %s; expected %s",
						lo->label_name, relname, format_type_be(type),
						lo->model == CP_MODEL_LINEAR ? "a numeric type" :
						"a numeric or boolean type"),
				 (type == TEXTOID || type == VARCHAROID) ?
				 errhint("Use model 'softmax' for text classes.") : 0));
	lo->max_attno = lo->label_attno;

	names = split_names(p->features, "features");
	if (p->feature_indices != NULL)
	{
		char	   *values_name = single_name(p->features, "features");

		lo->mode = CP_FEATURES_SPARSE;
		lo->indices_name = single_name(p->feature_indices, "feature_indices");
		lo->indices_attno = find_column(tupdesc, lo->indices_name, relname,
										"feature_indices", &type);
		numeric_array_elem(type, lo->indices_name, relname, cp_is_index_type,
						   "an integer array (int2[], int4[] or int8[])");
		lo->values_attno = find_column(tupdesc, values_name, relname,
									   "features", &type);
		numeric_array_elem(type, values_name, relname, cp_is_number_type,
						   "a numeric array such as float4[] or float8[]");
		check_not_label(lo, lo->indices_attno, lo->indices_name, "feature_indices");
		check_not_label(lo, lo->values_attno, values_name, "features");
		lo->feature_names = list_make1(values_name);
		lo->max_attno = Max(lo->max_attno, Max(lo->indices_attno, lo->values_attno));
		return;
	}

	if (list_length(names) == 1)
	{
		char	   *name = pstrdup(linitial(names));
		AttrNumber	attno = find_column(tupdesc, name, relname, "features", &type);

		if (OidIsValid(get_element_type(type)))
		{
			numeric_array_elem(type, name, relname, cp_is_number_type,
							   "a numeric array such as float4[] or float8[]");
			check_not_label(lo, attno, name, "features");
			lo->mode = CP_FEATURES_ARRAY;
			lo->values_attno = attno;
			lo->feature_names = list_make1(name);
			lo->max_attno = Max(lo->max_attno, attno);
			return;
		}
	}

	lo->mode = CP_FEATURES_COLUMNS;
	lo->n_columns = list_length(names);
	lo->column_attnos = palloc(sizeof(AttrNumber) * lo->n_columns);
	lo->column_types = palloc(sizeof(Oid) * lo->n_columns);
	foreach(lc, names)
	{
		int			i = foreach_current_index(lc);
		char	   *name = pstrdup(lfirst(lc));

		lo->column_attnos[i] = find_column(tupdesc, name, relname, "features", &type);
		if (cp_prep_is_category_type(type))
		{
			/* one-hot encoded: its width is known after the first pass */
			if (lo->column_onehot == NULL)
				lo->column_onehot = palloc0(sizeof(bool) * lo->n_columns);
			lo->column_onehot[i] = true;
			lo->has_onehot = true;
		}
		else if (!cp_is_number_type(type))
			ereport(ERROR,
					(errcode(ERRCODE_DATATYPE_MISMATCH),
					 errmsg("feature column \"%s\" of relation \"%s\" has type %s; expected a numeric, text or boolean type",
							name, relname, format_type_be(type)),
					 errhint("Name one numeric array column, or a comma-separated list of numeric, text or boolean columns.")));
		lo->column_types[i] = type;
		lo->feature_names = lappend(lo->feature_names, name);
		lo->max_attno = Max(lo->max_attno, lo->column_attnos[i]);
	}
	foreach(lc, names)
		check_not_label(lo, lo->column_attnos[foreach_current_index(lc)],
						lfirst(lc), "features");
	if (lo->has_onehot)
	{
		/* the dimension follows from the dictionaries: checked then */
		lo->n_features = 0;
		return;
	}
	if (lo->n_features > 0 && lo->n_features != lo->n_columns)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("corgipile.train: n_features is %d but %d feature columns are named",
						lo->n_features, lo->n_columns)));
	lo->n_features = lo->n_columns;
}

/*
 * A layout that reads no label or features, only where each row is: its
 * ctid and, if the table has an integer column named id, that id.
 */
void
cp_layout_ids_only(CpLayout *lo, TupleDesc tupdesc, const char *relname)
{
	memset(lo, 0, sizeof(*lo));
	lo->relname = pstrdup(relname);
	lo->mode = CP_FEATURES_NONE;
	lo->with_ids = true;
	for (int i = 0; i < tupdesc->natts; i++)
	{
		Form_pg_attribute attr = TupleDescAttr(tupdesc, i);
		Oid			type;

		/* a dropped column has no type to look up */
		if (attr->attisdropped || strcmp(NameStr(attr->attname), "id") != 0)
			continue;
		type = getBaseType(attr->atttypid);
		if (cp_is_index_type(type))
		{
			lo->id_attno = attr->attnum;
			lo->id_type = type;
		}
	}
	lo->max_attno = lo->id_attno;
}

/* The columns read, as offsets for RangeTblEntry.selectedCols. */
Bitmapset *
cp_layout_columns(const CpLayout *lo)
{
	Bitmapset  *cols = NULL;

#define ADD_COL(attno) \
	cols = bms_add_member(cols, (attno) - FirstLowInvalidHeapAttributeNumber)
	if (lo->mode == CP_FEATURES_NONE)
	{
		if (lo->id_attno > 0)
			ADD_COL(lo->id_attno);
		return cols;
	}
	ADD_COL(lo->label_attno);
	if (lo->mode == CP_FEATURES_COLUMNS)
	{
		for (int i = 0; i < lo->n_columns; i++)
			ADD_COL(lo->column_attnos[i]);
	}
	else
		ADD_COL(lo->values_attno);
	if (lo->mode == CP_FEATURES_SPARSE)
		ADD_COL(lo->indices_attno);
#undef ADD_COL
	return cols;
}

/*
 * The budget of each buffer of a training (TupleShuffle's, SGD's two, a
 * window strategy's store): the larger of work_mem and
 * CP_BUFFER_BUDGET_FACTOR times the buffer's share of the table's bytes,
 * heap and TOAST.  The share is the buffer's pages (sizing), but at least
 * the pages of CP_BUFFER_BUDGET_MIN_ROWS rows, as the statistics count
 * rows a page (the whole table without statistics): a window strategy's
 * store keeps up to 2 x 1024 rows however small the window (window.c).
 */
Size
cp_training_buffer_budget(const CpSizing *sizing, Relation rel)
{
	Size		n_pages = (Size) Max(sizing->n_pages, 1);
	Size		pages = mul_size(sizing->blocks_per_buffer, sizing->pages_per_block);
	Size		floor_pages = n_pages;
	Size		table_bytes;
	Oid			toast = rel->rd_rel->reltoastrelid;
	float4		tuples = rel->rd_rel->reltuples;
	int32		rel_pages = rel->rd_rel->relpages;

	if (tuples >= 1 && rel_pages > 0)
		floor_pages = (Size) ceil(CP_BUFFER_BUDGET_MIN_ROWS * (double) rel_pages / tuples);
	pages = Min(Max(pages, floor_pages), n_pages);
	table_bytes = mul_size(pages, BLCKSZ);
	if (OidIsValid(toast))
	{
		Relation	trel = relation_open(toast, AccessShareLock);
		Size		toast_pages = RelationGetNumberOfBlocks(trel);

		relation_close(trel, AccessShareLock);
		/* the buffer's share of the TOAST pages, as of the heap's */
		table_bytes = add_size(table_bytes,
							   mul_size(toast_pages / n_pages + 1, mul_size(pages, BLCKSZ)));
	}
	return Max(mul_size(table_bytes, CP_BUFFER_BUDGET_FACTOR),
			   mul_size((Size) work_mem, 1024));
}

/*
 * Whether a label column of this type holds text classes.  Labels are read
 * with their own column's type and looked up in classes learnt elsewhere
 * (the training table, a stored model), so both sides must agree on it.
 */
bool
cp_is_text_label_type(Oid type)
{
	return type == TEXTOID || type == VARCHAROID;
}

/*
 * Refuse a relation whose labels are not of the kind of a model's classes
 * (text against numbers or booleans, or the reverse), before any row is
 * read: its labels would be looked up in a map of the other type, which
 * reads one type's datum as the other's.  Checked once here for every
 * relation that is read against classes learnt elsewhere: a validation
 * table and evaluate()'s relation.  A linear model has no classes.
 */
void
cp_layout_check_label_kind(const CpLayout *lo, bool text_classes,
						   const char *model_name)
{
	bool		text_labels = cp_is_text_label_type(lo->label_type);

	if (lo->model == CP_MODEL_LINEAR || text_labels == text_classes)
		return;
	ereport(ERROR,
			(errcode(ERRCODE_DATATYPE_MISMATCH),
			 errmsg("label column \"%s\" of relation \"%s\" has type %s, but the classes of model \"%s\" are %s",
					lo->label_name, lo->relname, format_type_be(lo->label_type),
					model_name, text_classes ? "text" : "numbers or booleans"),
			 errhint("Labels must be of the same kind as those the model was trained on.")));
}

bool
cp_is_class_label_type(Oid type)
{
	return cp_is_index_type(type) || type == BOOLOID || type == TEXTOID ||
		type == VARCHAROID;
}

static int
cmp_int64(const void *a, const void *b)
{
	int64		x = *(const int64 *) a;
	int64		y = *(const int64 *) b;

	return (x > y) - (x < y);
}

static int
cmp_string(const void *a, const void *b)
{
	return strcmp(*(char *const *) a, *(char *const *) b);
}

/* The class number of a label, or an error if it is not a class. */
static double
class_of(const CpLayout *lo, Datum d, const CpRowContext *where)
{
	const CpClassMap *cm = lo->classes;
	void	   *hit;
	char	   *label_text = NULL;

	/*
	 * The datum is read with the layout's type: a map of the other kind
	 * would read one type's datum as the other's (cp_layout_check_label_kind
	 * refuses such a relation before its first row; this keeps it so).
	 */
	if (unlikely(cm->is_text != cp_is_text_label_type(lo->label_type)))
		elog(ERROR, "corgipile: the labels of \"%s\" are not of the kind of the classes they are looked up in",
			 lo->relname);
	if (cm->is_text)
	{
		label_text = TextDatumGetCString(d);
		hit = bsearch(&label_text, cm->names, cm->n_classes, sizeof(char *), cmp_string);
		if (hit != NULL)
			return (double) ((char **) hit - cm->names);
	}
	else
	{
		/* exact int64: a double would merge labels above 2^53 */
		int64		key = cp_datum_to_int64(d, lo->label_type);

		hit = bsearch(&key, cm->keys, cm->n_classes, sizeof(int64), cmp_int64);
		if (hit != NULL)
			return (double) ((int64 *) hit - cm->keys);
		label_text = psprintf(INT64_FORMAT, key);
	}
	ereport(ERROR,
			(errcode(ERRCODE_DATA_EXCEPTION),
			 errmsg("label \"%s\" in %s is not one of the model's %d classes",
					label_text, cp_row_description(where), cm->n_classes)));
	return 0.0;
}

/*
 * A class map from class names (the text of each label), e.g. as stored
 * with a model.  Integer and boolean names are parsed back into keys; text
 * names are kept, not copied, so they must live as long as the map.
 */
CpClassMap *
cp_class_map_from_names(Oid type, char **names, int n)
{
	CpClassMap *cm = palloc0(sizeof(CpClassMap));

	cm->type = type;
	cm->is_text = (type == TEXTOID || type == VARCHAROID);
	cm->n_classes = n;
	cm->names = palloc(sizeof(char *) * Max(n, 1));
	/* text labels are not copied (they may be long): names must outlive the map */
	if (n > 0)
		memcpy(cm->names, names, sizeof(char *) * n);
	if (cm->is_text)
		qsort(cm->names, n, sizeof(char *), cmp_string);
	else
	{
		cm->keys = palloc(sizeof(int64) * Max(n, 1));
		for (int i = 0; i < n; i++)
			cm->keys[i] = (strcmp(names[i], "true") == 0) ? 1 :
				(strcmp(names[i], "false") == 0) ? 0 : strtoll(names[i], NULL, 10);
		qsort(cm->keys, n, sizeof(int64), cmp_int64);
		for (int i = 0; i < n; i++)
			cm->names[i] = (type == BOOLOID) ? pstrdup(cm->keys[i] ? "true" : "false") :
				psprintf(INT64_FORMAT, cm->keys[i]);
	}
	return cm;
}

/*
 * A binary classifier's text label: the first of its two values in byte
 * order is the class -1, the second +1 (the dictionary learnt before
 * epoch 1, or the model's stored classes).
 */
static double
text_label(const CpLayout *lo, Datum d, const CpRowContext *where)
{
	text	   *t = DatumGetTextPP(d);
	int32		code;

	if (lo->label_dict == NULL)
		elog(ERROR, "corgipile: the text labels of \"%s\" were not learnt", lo->relname);
	code = cp_prep_dict_code(lo->label_dict, VARDATA_ANY(t), VARSIZE_ANY_EXHDR(t));
	if (code == CP_PREP_NO_CODE)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_EXCEPTION),
				 errmsg("label \"%s\" in %s is not one of the %s model's two classes",
						text_to_cstring(t), cp_row_description(where),
						cp_model_kind_name(lo->model)),
				 errhint("Use model 'softmax' for more than two classes.")));
	return code == 0 ? -1.0 : 1.0;
}

/*
 * The dictionary of a binary model's two text classes, from the classes it
 * stores (in code order: the -1 class first).
 */
CpPrepDict *
cp_label_dict_from_names(char **names, int n, const char *model_name)
{
	CpPrepDict *d = palloc0(sizeof(CpPrepDict));

	if (!cp_prep_dict_init(d, 2, cp_prep_palloc0))
		elog(ERROR, "corgipile: could not size a label dictionary");
	for (int i = 0; i < n; i++)
		if (cp_prep_dict_add(d, names[i], (int32) strlen(names[i])) != CP_PREP_DICT_ADDED)
			n = -1;
	if (n == 2)
	{
		cp_prep_dict_finish(d);
		if (cp_prep_dict_code(d, names[0], (int32) strlen(names[0])) == 0)
			return d;
	}
	ereport(ERROR,
			(errcode(ERRCODE_DATA_CORRUPTED),
			 errmsg("model \"%s\" is damaged: column classes is invalid", model_name),
			 errdetail("A binary model's text classes are two distinct strings in byte order."),
			 errhint("Drop the model with corgipile.drop_model() and train it again.")));
	return NULL;
}

/*
 * Map a label onto the model's encoding: -1/+1 for classifiers, which
 * accept -1/+1, 0/1 or booleans (but not 0 and -1 in one table), and the
 * value itself for regression.  Inlined into both appends: a call per
 * row costs an epoch of standardize => 'off' about 2% of its instructions.
 */
static pg_attribute_always_inline double
map_label(CpLayout *lo, Datum d, const CpRowContext *where)
{
	double		v;

	if (lo->model == CP_MODEL_SOFTMAX)
		return class_of(lo, d, where);
	if (lo->label_is_text)
		return text_label(lo, d, where);
	if (lo->label_type == BOOLOID)
		return DatumGetBool(d) ? 1.0 : -1.0;
	v = cp_datum_to_double(d, lo->label_type);
	if (lo->model == CP_MODEL_LINEAR)
	{
		if (!isfinite(v))
			ereport(ERROR,
					(errcode(ERRCODE_DATA_EXCEPTION),
					 errmsg("label in %s is not a finite number",
							cp_row_description(where))));
		return v;
	}
	if (v == 1.0)
	{
		lo->seen_one = true;
		return 1.0;
	}
	if (v == -1.0 || v == 0.0)
	{
		if (v == 0.0)
			lo->seen_zero = true;
		else
			lo->seen_minus_one = true;
		if (lo->seen_zero && lo->seen_minus_one)
			ereport(ERROR,
					(errcode(ERRCODE_DATA_EXCEPTION),
					 errmsg("labels of relation \"%s\" mix 0 and -1", lo->relname),
					 errdetail("A binary %s model takes labels -1/+1 or 0/1, not both.",
							   cp_model_kind_name(lo->model))));
		return -1.0;
	}
	ereport(ERROR,
			(errcode(ERRCODE_DATA_EXCEPTION),
			 errmsg("label %g in %s is not a valid %s label",
					v, cp_row_description(where), cp_model_kind_name(lo->model)),
			 errhint("A binary model takes labels -1/+1, 0/1 or boolean.")));
	return 0.0;
}

static void
ragged(const CpLayout *lo, int len, const CpRowContext *where)
{
	ereport(ERROR,
			(errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
			 errmsg("features array in %s has %d elements; expected %d",
					cp_row_description(where), len, lo->n_features),
			 errhint("Every row needs the same number of features; set n_features to say how many.")));
}

/*
 * Whether the columns layout's row has a NULL number: skipped unless the
 * model imputes (missing => ...).
 */
static inline bool
null_number(const CpLayout *lo, const bool *isnull)
{
	for (int i = 0; i < lo->n_columns; i++)
		if (!(lo->column_onehot && lo->column_onehot[i]) &&
			isnull[lo->column_attnos[i] - 1])
			return true;
	return false;
}

/*
 * A row of the columns layout with category columns, as a sparse row: each
 * number at its position, transformed, and each
 * category column's one indicator (value 1 at offset + code), so a row
 * takes one entry per feature column whatever the number of categories.
 * The entries are in position order, the numbers explicit even when 0
 * (centring needs them).  A NULL number skips the row, or is imputed
 * (prep->fill) and its missing indicator set; a NULL or unseen category
 * has no entry (all its indicators 0), counted in n_unseen as
 * cp_prep_column_code says.
 */
static bool
append_encoded(CpLayout *lo, Datum *vals, bool *isnull, CpBuffer *buf,
			   int64 row, const CpRowContext *where)
{
	const CpPrep *prep = lo->prep;
	const CpPrepTransform *t;
	int32	   *idx;
	double	   *val;
	int			n = 0;
	bool		has_null;

	if (prep == NULL)
		elog(ERROR, "corgipile: the categories of \"%s\" were not learnt", lo->relname);
	Assert(buf->sparse);
	has_null = null_number(lo, isnull);
	if (has_null && prep->fill == NULL)
		return false;
	t = prep->transform;
	buf->n_features = lo->n_features;
	cp_buffer_reserve(buf, row + 1, buf->nnz + lo->n_columns + prep->n_indicators);
	idx = buf->indices + buf->nnz;
	val = buf->values + buf->nnz;
	for (int i = 0; i < lo->n_columns; i++)
	{
		const CpPrepColumn *col = &prep->columns[i];
		int			a = lo->column_attnos[i] - 1;

		if (col->onehot)
		{
			int32		code = cp_prep_column_code(col, vals[a], isnull[a],
												   lo->column_types[i],
												   &lo->n_unseen);

			if (code == CP_PREP_NO_CODE)
				continue;
			/* an indicator is not scaled (its transform is x * 1 + 0) */
			idx[n] = col->offset + code;
			val[n++] = 1.0;
		}
		else
		{
			double		x;

			if (isnull[a])
				x = prep->fill[col->offset];
			else
			{
				x = cp_datum_to_double(vals[a], lo->column_types[i]);
				cp_check_finite(x, where);
			}
			/* the arithmetic of cp_prep_apply_dense, value by value */
			if (t != NULL)
				x = x * t->scale[col->offset] + t->offset[col->offset];
			idx[n] = col->offset;
			val[n++] = x;
		}
	}
	/* the missing indicators come after every column's positions, in order */
	for (int i = 0; has_null && prep->indicator != NULL && i < lo->n_columns; i++)
	{
		int32		at = prep->indicator[prep->columns[i].offset];

		if (!prep->columns[i].onehot && at >= 0 && isnull[lo->column_attnos[i] - 1])
		{
			idx[n] = at;
			val[n++] = 1.0;
		}
	}
	buf->nnz += n;
	buf->offsets[row + 1] = buf->nnz;
	return true;
}

/*
 * A dense row of the columns layout with a NULL number, which the model
 * imputes: the fill in its place, its missing indicator 1 (the others 0),
 * then the transform.  x has the model's n_features.
 */
static void
impute_columns(const CpLayout *lo, const Datum *vals, const bool *isnull,
			   double *x, const CpRowContext *where)
{
	const CpPrep *prep = lo->prep;

	memset(x, 0, sizeof(double) * lo->n_features);
	for (int i = 0; i < lo->n_columns; i++)
	{
		int			a = lo->column_attnos[i] - 1;

		if (isnull[a])
		{
			x[i] = prep->fill[i];
			if (prep->indicator != NULL && prep->indicator[i] >= 0)
				x[prep->indicator[i]] = 1.0;
			continue;
		}
		x[i] = cp_datum_to_double(vals[a], lo->column_types[i]);
		cp_check_finite(x[i], where);
	}
	if (prep->transform)
		cp_prep_apply_dense(prep->transform, x);
}

/*
 * An array with NULL elements, which the model imputes element by
 * element, into x (n_features), transformed; false when the array's
 * length is not the model's (the caller reported a ragged row already).
 */
static bool
impute_array(const CpLayout *lo, ArrayType *arr, double *x,
			 const CpRowContext *where)
{
	const CpPrep *prep = lo->prep;
	bool	   *isnull = palloc(sizeof(bool) * lo->n_features);

	if (prep->n_features != lo->n_features)
		return false;
	cp_array_to_doubles_nulls(arr, x, isnull, lo->n_features, where);
	for (int j = 0; j < lo->n_features; j++)
		if (isnull[j])
			x[j] = prep->fill[j];
	pfree(isnull);
	if (prep->transform)
		cp_prep_apply_dense(prep->transform, x);
	return true;
}

/*
 * Append the row in slot to buf.  Returns false, and counts the row as
 * skipped, when its label or any of its features is NULL (a NULL number
 * only when the model does not impute it).  Allocations of
 * detoasting happen in CurrentMemoryContext, which the caller resets.
 */
bool
cp_layout_append(CpLayout *lo, TupleTableSlot *slot, CpBuffer *buf)
{
	CpRowContext where = {lo->relname, &slot->tts_tid, lo->use};
	Datum	   *vals;
	bool	   *isnull;
	double		label;
	int64		row = buf->n_rows;

	if (lo->max_attno > 0)
		slot_getsomeattrs(slot, lo->max_attno);
	vals = slot->tts_values;
	isnull = slot->tts_isnull;

	if (lo->mode == CP_FEATURES_NONE)
		label = 0.0;
	else if (isnull[lo->label_attno - 1])
	{
		lo->n_null_label++;
		goto skip;
	}
	else
		label = map_label(lo, vals[lo->label_attno - 1], &where);

	switch (lo->mode)
	{
		case CP_FEATURES_NONE:
			cp_buffer_reserve(buf, row + 1, 0);
			break;
		case CP_FEATURES_ARRAY:
			{
				ArrayType  *arr;
				int			len;

				if (isnull[lo->values_attno - 1])
					goto skip;
				arr = DatumGetArrayTypeP(vals[lo->values_attno - 1]);
				len = cp_array_length(arr, &where, "features");
				if (lo->n_features == 0)
				{
					if (len == 0)
						ereport(ERROR,
								(errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
								 errmsg("features array in %s is empty",
										cp_row_description(&where))));
					lo->n_features = len;
				}
				else if (len != lo->n_features)
					ragged(lo, len, &where);
				buf->n_features = lo->n_features;
				cp_buffer_reserve(buf, row + 1, (row + 1) * lo->n_features);
				if (lo->prep && lo->prep->fill && array_contains_nulls(arr))
				{
					if (!impute_array(lo, arr, buf->values + row * lo->n_features, &where))
						goto skip;
					break;
				}
				if (lo->prep && lo->prep->transform &&
					lo->prep->transform->n_features == lo->n_features)
				{
					/* standardized as converted, in one pass */
					const CpPrepTransform *t = lo->prep->transform;

					if (!cp_array_to_doubles_transformed(arr, buf->values + row * lo->n_features,
														 lo->n_features, &where,
														 t->scale, t->offset))
						goto skip;
					break;
				}
				if (!cp_array_to_doubles(arr, buf->values + row * lo->n_features,
										 lo->n_features, &where))
					goto skip;
				if (lo->prep && lo->prep->transform)
					cp_prep_apply_dense(lo->prep->transform,
										buf->values + row * lo->n_features);
				break;
			}
		case CP_FEATURES_COLUMNS:
			{
				double	   *x;

				if (lo->has_onehot)
				{
					if (!append_encoded(lo, vals, isnull, buf, row, &where))
						goto skip;
					break;
				}
				if (null_number(lo, isnull))
				{
					if (lo->prep == NULL || lo->prep->fill == NULL)
						goto skip;
					buf->n_features = lo->n_features;
					cp_buffer_reserve(buf, row + 1, (row + 1) * lo->n_features);
					impute_columns(lo, vals, isnull, buf->values + row * lo->n_features,
								   &where);
					break;
				}
				buf->n_features = lo->n_features;
				cp_buffer_reserve(buf, row + 1, (row + 1) * lo->n_features);
				x = buf->values + row * lo->n_features;
				for (int i = 0; i < lo->n_columns; i++)
				{
					x[i] = cp_datum_to_double(vals[lo->column_attnos[i] - 1],
											  lo->column_types[i]);
					cp_check_finite(x[i], &where);
				}
				/* a complete row: every missing indicator 0 */
				if (lo->n_features > lo->n_columns)
					memset(x + lo->n_columns, 0,
						   sizeof(double) * (lo->n_features - lo->n_columns));
				if (lo->prep && lo->prep->transform)
					cp_prep_apply_dense(lo->prep->transform, x);
				break;
			}
		case CP_FEATURES_SPARSE:
			{
				ArrayType  *idx;
				ArrayType  *val;
				int			n_idx;
				int			n_val;

				if (isnull[lo->indices_attno - 1] || isnull[lo->values_attno - 1])
					goto skip;
				idx = DatumGetArrayTypeP(vals[lo->indices_attno - 1]);
				val = DatumGetArrayTypeP(vals[lo->values_attno - 1]);
				n_idx = cp_array_length(idx, &where, "feature_indices");
				n_val = cp_array_length(val, &where, "features");
				if (n_idx != n_val)
					ereport(ERROR,
							(errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
							 errmsg("feature_indices has %d elements but features has %d in %s",
									n_idx, n_val, cp_row_description(&where))));
				buf->n_features = lo->n_features;
				cp_buffer_reserve(buf, row + 1, buf->nnz + n_idx);
				if (!cp_array_to_indices(idx, buf->indices + buf->nnz, n_idx,
										 lo->n_features, &where) ||
					!cp_array_to_doubles(val, buf->values + buf->nnz, n_idx, &where))
					goto skip;
				if (lo->prep && lo->prep->transform)
					cp_prep_apply_sparse(lo->prep->transform, buf->indices + buf->nnz,
										 buf->values + buf->nnz, n_idx);
				buf->nnz += n_idx;
				buf->offsets[row + 1] = buf->nnz;
				break;
			}
	}
	buf->labels[row] = label;
	if (buf->with_ids)
	{
		buf->row_tids[row] = ((uint64) ItemPointerGetBlockNumber(&slot->tts_tid) << 16) |
			ItemPointerGetOffsetNumber(&slot->tts_tid);
		buf->row_keys[row] = (lo->id_attno > 0 && !isnull[lo->id_attno - 1]) ?
			cp_datum_to_int64(vals[lo->id_attno - 1], lo->id_type) : -1;
	}
	buf->n_rows = row + 1;
	return true;

skip:
	lo->n_skipped++;
	return false;
}

/*
 * cp_layout_append for a float8[]-features row whose label is not NULL and
 * whose features the caller has already converted into x (lo->n_features
 * values, every one finite, no transform to apply): the first pass, which
 * converted them for its statistics (preprocess_pass.c).  The label maps
 * as there, with the same errors.
 */
void
cp_layout_append_converted(CpLayout *lo, TupleTableSlot *slot, CpBuffer *buf,
						   const double *x)
{
	CpRowContext where = {lo->relname, &slot->tts_tid, lo->use};
	int64		row = buf->n_rows;
	int			d = lo->n_features;
	double		label;

	Assert(lo->mode == CP_FEATURES_ARRAY && lo->prep == NULL && d > 0 &&
		   !buf->with_ids && !slot->tts_isnull[lo->label_attno - 1]);
	label = map_label(lo, slot->tts_values[lo->label_attno - 1], &where);
	buf->n_features = d;
	cp_buffer_reserve(buf, row + 1, (row + 1) * d);
	buf->labels[row] = label;
	memcpy(buf->values + row * d, x, sizeof(double) * d);
	buf->n_rows = row + 1;
}

/*
 * cp_layout_append for the row epochs read most: a float8[] features
 * column (arr, in the page, uncompressed) and a label (label, not NULL),
 * read by the caller straight from a tuple without NULLs, into a buffer
 * without ids.  The same label mapping, the same doubles (with the same
 * transform) and the same errors as cp_layout_append, without a slot, a
 * deformed row or a look at what the layout's mode is per row.  Returns
 * false, having appended and counted nothing, for a row it does not handle
 * (another dimension or element type, NULL elements, the first row when
 * the dimension is not known yet): the caller hands that row to
 * cp_layout_append, which converts it or reports what is wrong.
 */
bool
cp_layout_append_float8(CpLayout *lo, Datum label, const ArrayType *arr,
						ItemPointer tid, CpBuffer *buf)
{
	int			d = lo->n_features;
	int64		row = buf->n_rows;
	const CpPrepTransform *t = lo->prep ? lo->prep->transform : NULL;
	CpRowContext where = {lo->relname, tid, lo->use};
	double		y;

	Assert(lo->mode == CP_FEATURES_ARRAY && !buf->with_ids && !buf->sparse);
	if (d <= 0 || ARR_NDIM(arr) != 1 || ARR_HASNULL(arr) ||
		ARR_ELEMTYPE(arr) != FLOAT8OID || ARR_DIMS(arr)[0] != d ||
		(t != NULL && t->n_features != d))
		return false;
	y = map_label(lo, label, &where);
	if (unlikely(row + 1 > buf->cap_rows || (row + 1) * d > buf->cap_nnz))
		cp_buffer_reserve(buf, row + 1, (row + 1) * d);
	buf->n_features = d;
	cp_float8_data_to_doubles(ARR_DATA_PTR(arr), buf->values + row * d, d,
							  t ? t->scale : NULL, t ? t->offset : NULL, &where);
	buf->labels[row] = y;
	buf->n_rows = row + 1;
	return true;
}

/*
 * Read every row of rel that snapshot sees into buf, handing each batch of
 * batch rows (fewer when buf has a budget and they reach half of it; and
 * the last, shorter one) to fn.  For scoring a whole table
 * (validation, evaluate()); detoasting happens in row_cxt, reset per row.
 */
void
cp_layout_scan(CpLayout *lo, Relation rel, Snapshot snapshot, CpBuffer *buf,
			   int64 batch, MemoryContext row_cxt, CpBatchFn fn, void *arg)
{
	TableScanDesc scan = table_beginscan(rel, snapshot, 0, NULL);
	TupleTableSlot *slot = table_slot_create(rel, NULL);
	MemoryContext old;
	int64		seen = 0;

	cp_buffer_reset(buf, lo->n_features);
	while (table_scan_getnextslot(scan, ForwardScanDirection, slot))
	{
		old = MemoryContextSwitchTo(row_cxt);
		cp_layout_append(lo, slot, buf);
		MemoryContextSwitchTo(old);
		MemoryContextReset(row_cxt);
		/* a batch is at most batch rows, and half its budget's bytes */
		if (buf->n_rows >= batch ||
			(buf->budget > 0 && cp_buffer_used_bytes(buf) >= buf->budget / 2))
		{
			fn(buf, arg);
			cp_buffer_reset(buf, lo->n_features);
		}
		if ((++seen % 256) == 0)
			CHECK_FOR_INTERRUPTS();
	}
	fn(buf, arg);
	ExecDropSingleTupleTableSlot(slot);
	table_endscan(scan);
}

/*
 * Convert rows with a model's preprocessing (NULL: none), after checking
 * that the relation's feature columns are what the model encodes: a
 * category column where the model has a number, or the reverse, is an
 * error, not a misread.
 */
void
cp_layout_use_prep(CpLayout *lo, const CpPrep *prep, const char *model_name)
{
	if (lo->mode == CP_FEATURES_COLUMNS)
	{
		for (int i = 0; i < lo->n_columns; i++)
		{
			bool		is_cat = lo->column_onehot != NULL && lo->column_onehot[i];
			bool		model_cat = prep != NULL && i < prep->n_columns &&
				prep->columns[i].onehot;

			if (is_cat != model_cat)
				ereport(ERROR,
						(errcode(ERRCODE_DATATYPE_MISMATCH),
						 errmsg("column \"%s\" of relation \"%s\" has type %s, but model \"%s\" reads it as %s",
								(char *) list_nth(lo->feature_names, i), lo->relname,
								format_type_be(lo->column_types[i]), model_name,
								model_cat ? "a category (text or boolean)" : "a number")));
		}
		if (prep != NULL && prep->n_columns != lo->n_columns)
			elog(ERROR, "corgipile: model \"%s\" encodes %d columns, not %d",
				 model_name, prep->n_columns, lo->n_columns);
	}
	lo->prep = prep;
	if (prep != NULL)
		lo->n_features = prep->n_features;
}

/*
 * A second relation read for a training (validation): the training
 * layout's text label dictionary and preprocessing.
 */
void
cp_layout_share_encoding(CpLayout *dst, const CpLayout *src, const char *model_name)
{
	dst->label_dict = src->label_dict;
	cp_layout_use_prep(dst, src->prep, model_name);
}
