/*-------------------------------------------------------------------------
 *
 * params.c
 *	  Checking corgipile.train()'s arguments and sizing blocks and buffers.
 *
 * Every rule about a single argument lives here, so that a bad value is
 * refused at plan time, before any page is read, with a message that names
 * the argument and says what is allowed.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <math.h>

#include "catalog/namespace.h"
#include "catalog/pg_collation.h"
#include "catalog/pg_type.h"
#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "nodes/makefuncs.h"
#include "nodes/primnodes.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "miscadmin.h"
#include "utils/memutils.h"
#include "utils/regproc.h"

#include "core/preprocess.h"
#include "params/params.h"

/*
 * The function the checks' errors name: train()'s arguments are also
 * sizing()'s (functions/sizing.c sets it while it checks them).
 */
const char *cp_params_fn = "corgipile.train";

/* generated from the one list of train()'s parameters (train_args.h) */
#define CP_ARG_NAME(id, name, type, isnull, datum, sqldefault) #name,
static const char *const arg_names[CP_NUM_ARGS] = {
	CP_TRAIN_ARGS(CP_ARG_NAME)
};
#undef CP_ARG_NAME

/*
 * train()'s arguments as Consts holding the SQL defaults (NULL for the
 * required relation and model), in signature order.
 */
List *
cp_default_train_args(void)
{
	List	   *out = NIL;

#define CP_ARG_CONST(id, name, type, isnull, datum, sqldefault) \
	{ \
		int32		typmod; \
		int16		typlen; \
		bool		typbyval; \
		Oid			collid = (type) == TEXTOID ? DEFAULT_COLLATION_OID : InvalidOid; \
		\
		typmod = -1; \
		get_typlenbyval((type), &typlen, &typbyval); \
		out = lappend(out, makeConst((type), typmod, collid, typlen, \
									 (isnull) ? (Datum) 0 : (datum), (isnull), typbyval)); \
	}
	CP_TRAIN_ARGS(CP_ARG_CONST)
#undef CP_ARG_CONST
	return out;
}

const char *
cp_model_kind_name(CpModelKind kind)
{
	switch (kind)
	{
		case CP_MODEL_SVM:
			return "svm";
		case CP_MODEL_LOGISTIC:
			return "logistic";
		case CP_MODEL_LINEAR:
			return "linear";
		case CP_MODEL_SOFTMAX:
			return "softmax";
	}
	return "unknown";
}

bool
cp_parse_model_kind(const char *name, CpModelKind *kind)
{
	if (pg_strcasecmp(name, "svm") == 0)
		*kind = CP_MODEL_SVM;
	else if (pg_strcasecmp(name, "logistic") == 0 || pg_strcasecmp(name, "lr") == 0)
		*kind = CP_MODEL_LOGISTIC;
	else if (pg_strcasecmp(name, "linear") == 0)
		*kind = CP_MODEL_LINEAR;
	else if (pg_strcasecmp(name, "softmax") == 0)
		*kind = CP_MODEL_SOFTMAX;
	else
		return false;
	return true;
}

static void
require_not_null(const bool *nulls, CpArg arg)
{
	if (nulls[arg])
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("%s: %s must not be NULL", cp_params_fn, arg_names[arg])));
}

static double
positive_float(const Datum *values, const bool *nulls, CpArg arg)
{
	double		v;

	require_not_null(nulls, arg);
	v = DatumGetFloat8(values[arg]);
	if (!(v > 0.0) || isinf(v))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s: %s must be a positive finite number, got %g", cp_params_fn,
						arg_names[arg], v)));
	return v;
}

static int32
positive_int(const Datum *values, const bool *nulls, CpArg arg)
{
	int32		v;

	require_not_null(nulls, arg);
	v = DatumGetInt32(values[arg]);
	if (v <= 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s: %s must be positive, got %d", cp_params_fn,
						arg_names[arg], v)));
	return v;
}

static char *
text_arg(const Datum *values, const bool *nulls, CpArg arg)
{
	char	   *s;

	if (nulls[arg])
		return NULL;
	s = TextDatumGetCString(values[arg]);
	if (s[0] == '\0')
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s: %s must not be empty", cp_params_fn, arg_names[arg])));
	return s;
}

/*
 * validation => a relation (resolved with the caller's search_path, as the
 * regclass parameter of 0.2.0 was) or a percentage of the training table's
 * rows held out ('20%').
 */
static bool
is_percentage(const char *s)
{
	size_t		len = strlen(s);

	/* '20%'; a quoted name may hold a % of its own ('"10% sample"') */
	return len > 0 && s[len - 1] == '%' && s[0] != '"';
}

static void
parse_validation(const char *s, CpTrainParams *p)
{
	p->validation_relid = InvalidOid;
	p->validation_fraction = 0.0;
	if (s == NULL)
		return;
	if (is_percentage(s))
	{
		if (!cp_prep_parse_percent(s, &p->validation_fraction))
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("%s: validation \"%s\" is not a valid percentage", cp_params_fn, s),
					 errhint("Give a percentage strictly between 0%% and 100%%, such as '20%%', or the name of a table.")));
		return;
	}
	p->validation_relid =
		RangeVarGetRelid(makeRangeVarFromNameList(stringToQualifiedNameList(s)),
						 NoLock, false);
}

/*
 * The validation argument of a call that is planned again under the pinned
 * search_path (train.c's cursor): a relation name is resolved now, with the
 * caller's search_path, and handed on schema-qualified.
 */
Datum
cp_qualify_validation(Datum value)
{
	char	   *s = TextDatumGetCString(value);
	Oid			relid;

	if (s[0] == '\0' || is_percentage(s))
		return value;
	relid = RangeVarGetRelid(makeRangeVarFromNameList(stringToQualifiedNameList(s)),
							 NoLock, false);
	return CStringGetTextDatum(quote_qualified_identifier(get_namespace_name(get_rel_namespace(relid)),
														  get_rel_name(relid)));
}

/* The index of s (any case) in names, or -1: the values of a text parameter. */
static int
name_index(const char *s, const char *const *names, int n)
{
	for (int i = 0; i < n; i++)
		if (pg_strcasecmp(s, names[i]) == 0)
			return i;
	return -1;
}

static const char *const standardize_names[] = {
	[CP_STANDARDIZE_AUTO] = "auto",
	[CP_STANDARDIZE_ON] = "on",
	[CP_STANDARDIZE_SCALE_ONLY] = "scale_only",
	[CP_STANDARDIZE_OFF] = "off",
};

const char *
cp_standardize_name(CpStandardize standardize)
{
	return standardize_names[standardize];
}

static void
parse_standardize(const char *s, CpTrainParams *p)
{
	int			i = name_index(s, standardize_names, lengthof(standardize_names));

	if (i >= 0)
	{
		p->standardize = (CpStandardize) i;
		return;
	}
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("%s: unknown standardize \"%s\"", cp_params_fn, s),
			 errhint("Use auto, on, scale_only or off.")));
}

static const char *const missing_names[] = {
	[CP_MISSING_SKIP] = "skip",
	[CP_MISSING_MEAN] = "mean",
	[CP_MISSING_MEDIAN] = "median",
	[CP_MISSING_ZERO] = "zero",
};

const char *
cp_missing_name(CpMissing missing)
{
	return missing_names[missing];
}

bool
cp_parse_missing(const char *s, CpMissing *missing)
{
	int			i = name_index(s, missing_names, lengthof(missing_names));

	if (i < 0)
		return false;
	*missing = (CpMissing) i;
	return true;
}

/*
 * Parse a size: '10%' of the table, '10MB' (B, kB, MB, GB, TB; case does
 * not matter), or a bare number of heap pages ('32', '32 pages').
 */
static void
parse_size(const char *s, CpArg arg, bool percent_ok, CpSize *out)
{
	char	   *end;
	double		v;
	const char *unit;

	errno = 0;
	v = strtod(s, &end);
	if (end == s || errno != 0 || !isfinite(v))
		goto bad;
	unit = end;
	while (*unit == ' ')
		unit++;

	if (*unit == '\0' || pg_strcasecmp(unit, "pages") == 0 ||
		pg_strcasecmp(unit, "page") == 0)
	{
		if (v != floor(v))
			goto bad;
		out->unit = CP_SIZE_PAGES;
		out->value = v;
	}
	else if (strcmp(unit, "%") == 0)
	{
		if (!percent_ok)
			goto bad;
		if (v > 100.0)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("%s: %s of %s is above 100%% of the table", cp_params_fn,
							arg_names[arg], s)));
		out->unit = CP_SIZE_PERCENT;
		out->value = v;
	}
	else
	{
		double		mult;

		if (pg_strcasecmp(unit, "b") == 0)
			mult = 1.0;
		else if (pg_strcasecmp(unit, "kb") == 0)
			mult = 1024.0;
		else if (pg_strcasecmp(unit, "mb") == 0)
			mult = 1024.0 * 1024.0;
		else if (pg_strcasecmp(unit, "gb") == 0)
			mult = 1024.0 * 1024.0 * 1024.0;
		else if (pg_strcasecmp(unit, "tb") == 0)
			mult = 1024.0 * 1024.0 * 1024.0 * 1024.0;
		else
			goto bad;
		out->unit = CP_SIZE_BYTES;
		out->value = v * mult;
	}
	if (!(out->value > 0.0))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s: %s must be positive, got '%s'", cp_params_fn,
						arg_names[arg], s)));
	return;

bad:
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("%s: invalid %s '%s'", cp_params_fn, arg_names[arg], s),
			 percent_ok ?
			 errhint("Use a percentage of the table such as '10%%', a size such as '64MB', or a number of pages.") :
			 errhint("Use a size such as '1MB' or a number of pages.")));
}

/*
 * workers => N: at most the processes the server can start, and a strategy
 * that may run in parallel (CP_SHUFFLE_PARALLEL in params/shuffles.h).
 */
static void
check_workers(const CpTrainParams *p)
{
	if (p->workers <= 1)
		return;
	if (p->workers - 1 > max_worker_processes)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s: workers must be at most %d (max_worker_processes + 1, the leader included), got %d", cp_params_fn,
						max_worker_processes + 1, p->workers),
				 errhint("Lower workers, or leave it NULL to let the server choose.")));
	if (!cp_shuffle_has(p->shuffle, CP_SHUFFLE_PARALLEL))
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("%s: shuffle \"%s\" cannot train with workers > 1", cp_params_fn,
						cp_shuffle_name(p->shuffle)),
				 errhint("Use shuffle %s, or workers => 1.",
						 cp_shuffle_names(CP_SHUFFLE_PARALLEL, false, " or "))));
}

void
cp_params_from_datums(const Datum *values, const bool *nulls, CpTrainParams *p)
{
	char	   *s;

	memset(p, 0, sizeof(*p));

	require_not_null(nulls, CP_ARG_RELATION);
	p->relid = DatumGetObjectId(values[CP_ARG_RELATION]);

	require_not_null(nulls, CP_ARG_MODEL);
	s = text_arg(values, nulls, CP_ARG_MODEL);
	if (!cp_parse_model_kind(s, &p->model))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s: unknown model \"%s\"", cp_params_fn, s),
				 errhint("Valid models are 'svm', 'logistic' (alias 'lr'), 'linear' and 'softmax'.")));

	p->model_name = text_arg(values, nulls, CP_ARG_MODEL_NAME);
	require_not_null(nulls, CP_ARG_LABEL);
	p->label = text_arg(values, nulls, CP_ARG_LABEL);
	require_not_null(nulls, CP_ARG_FEATURES);
	p->features = text_arg(values, nulls, CP_ARG_FEATURES);
	p->feature_indices = text_arg(values, nulls, CP_ARG_FEATURE_INDICES);
	p->n_features = nulls[CP_ARG_N_FEATURES] ? 0 :
		positive_int(values, nulls, CP_ARG_N_FEATURES);

	require_not_null(nulls, CP_ARG_SHUFFLE);
	s = text_arg(values, nulls, CP_ARG_SHUFFLE);
	if (!cp_shuffle_lookup(s, &p->shuffle))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s: unknown shuffle \"%s\"", cp_params_fn, s),
				 errhint("Valid shuffles are %s.", cp_shuffle_names(0, true, " and "))));

	/*
	 * NULL: by the loss.  Squared loss's gradient grows with the label's and
	 * the features' scale, and 0.1 left linear regression 0.03-0.14 R2 below
	 * a scikit-learn pipeline on real tables where 0.01 (scikit-learn's
	 * SGDRegressor default) came within 0.01 (docs/real-datasets.md).
	 */
	/*
	 * average => NULL: on with the default rate, off with a rate the user
	 * chose, so that an explicit learning_rate keeps giving the weights it
	 * gave before 0.4.0.
	 */
	p->default_rate = nulls[CP_ARG_LEARNING_RATE];
	p->average = nulls[CP_ARG_AVERAGE] ? p->default_rate :
		DatumGetBool(values[CP_ARG_AVERAGE]);
	if (!p->default_rate)
		p->learning_rate = positive_float(values, nulls, CP_ARG_LEARNING_RATE);
	else if (p->average || p->model != CP_MODEL_LINEAR)
		p->learning_rate = CP_DEFAULT_LEARNING_RATE;
	else
		p->learning_rate = CP_DEFAULT_LEARNING_RATE_LINEAR;
	p->decay = positive_float(values, nulls, CP_ARG_DECAY);
	if (p->decay > 1.0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s: decay must be in (0, 1], got %g", cp_params_fn, p->decay),
				 errhint("The learning rate is multiplied by decay after each epoch; use 1 for a constant rate.")));
	p->epochs_auto = nulls[CP_ARG_MAX_EPOCH_NUM];
	p->max_epoch_num = p->epochs_auto ? CP_DEFAULT_EPOCHS :
		positive_int(values, nulls, CP_ARG_MAX_EPOCH_NUM);
	p->batch_size = positive_int(values, nulls, CP_ARG_BATCH_SIZE);

	/* NULL: 0, or 1/rows with the default schedule (CP_DEFAULT_EPOCHS' note) */
	p->l2_auto = nulls[CP_ARG_L2] && p->default_rate && p->average;
	p->l2 = nulls[CP_ARG_L2] ? 0.0 : DatumGetFloat8(values[CP_ARG_L2]);
	if (!(p->l2 >= 0.0) || isinf(p->l2))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s: l2 must be a non-negative finite number, got %g", cp_params_fn,
						p->l2)));

	s = text_arg(values, nulls, CP_ARG_BLOCK_SIZE);
	if (s != NULL)
		parse_size(s, CP_ARG_BLOCK_SIZE, false, &p->block_size);
	p->buffer_auto = nulls[CP_ARG_BUFFER_SIZE];
	if (p->buffer_auto)
	{
		p->buffer_size.unit = CP_SIZE_PERCENT;
		p->buffer_size.value = CP_DEFAULT_BUFFER_PERCENT;
	}
	else
		parse_size(text_arg(values, nulls, CP_ARG_BUFFER_SIZE), CP_ARG_BUFFER_SIZE,
				   true, &p->buffer_size);

	p->has_seed = !nulls[CP_ARG_SEED];
	if (p->has_seed)
		p->seed = DatumGetInt64(values[CP_ARG_SEED]);

	require_not_null(nulls, CP_ARG_DOUBLE_BUFFER);
	p->double_buffer = DatumGetBool(values[CP_ARG_DOUBLE_BUFFER]);

	parse_validation(text_arg(values, nulls, CP_ARG_VALIDATION), p);

	require_not_null(nulls, CP_ARG_L1);
	p->l1 = DatumGetFloat8(values[CP_ARG_L1]);
	if (!(p->l1 >= 0.0) || isinf(p->l1))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s: l1 must be a non-negative finite number, got %g", cp_params_fn,
						p->l1)));

	p->early_stopping = !nulls[CP_ARG_TOLERANCE];
	if (p->early_stopping)
	{
		p->tolerance = DatumGetFloat8(values[CP_ARG_TOLERANCE]);
		if (!(p->tolerance >= 0.0) || isinf(p->tolerance))
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("%s: tolerance must be a non-negative finite number, got %g", cp_params_fn,
							p->tolerance),
					 errhint("Leave tolerance NULL for the default rule (or, with max_epoch_num, exactly that many epochs).")));
	}
	/* NULL: the rule's own patience (params.h) */
	/* the default rule belongs to the default schedule (params.h) */
	p->converge_auto = !p->early_stopping && p->epochs_auto &&
		p->default_rate && p->average;
	p->n_iter_no_change = !nulls[CP_ARG_N_ITER_NO_CHANGE] ?
		positive_int(values, nulls, CP_ARG_N_ITER_NO_CHANGE) :
		p->early_stopping ? CP_TOLERANCE_PATIENCE : CP_DEFAULT_PATIENCE;
	p->warm_start = text_arg(values, nulls, CP_ARG_WARM_START);

	require_not_null(nulls, CP_ARG_STANDARDIZE);
	parse_standardize(text_arg(values, nulls, CP_ARG_STANDARDIZE), p);
	p->max_categories = positive_int(values, nulls, CP_ARG_MAX_CATEGORIES);
	if (p->max_categories > CP_PREP_MAX_CATEGORIES)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s: max_categories must be at most %d, got %d", cp_params_fn,
						CP_PREP_MAX_CATEGORIES, p->max_categories),
				 errhint("A column with that many distinct values is an identifier, not a category: leave it out of features.")));
	require_not_null(nulls, CP_ARG_MISSING);
	s = text_arg(values, nulls, CP_ARG_MISSING);
	if (!cp_parse_missing(s, &p->missing))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s: unknown missing \"%s\"", cp_params_fn, s),
				 errhint("Use skip (leave out rows with a NULL number), mean, median or zero (impute it).")));
	require_not_null(nulls, CP_ARG_MISSING_INDICATOR);
	p->missing_indicator = DatumGetBool(values[CP_ARG_MISSING_INDICATOR]);
	if (p->missing_indicator && p->missing == CP_MISSING_SKIP)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s: missing_indicator needs missing => 'mean', 'median' or 'zero'",
						cp_params_fn),
				 errdetail("With missing => 'skip' no training row has a NULL number to indicate.")));
	/* NULL: chosen at executor start from the table's size (parallel.c) */
	p->workers = nulls[CP_ARG_WORKERS] ? 0 :
		positive_int(values, nulls, CP_ARG_WORKERS);
	check_workers(p);
}

/* Parse the argument list of a planned call, all of it constants. */
void
cp_params_from_consts(List *args, CpTrainParams *p)
{
	Datum		values[CP_NUM_ARGS];
	bool		nulls[CP_NUM_ARGS];
	int			i = 0;
	ListCell   *lc;

	if (list_length(args) != CP_NUM_ARGS)
		elog(ERROR, "%s: expected %d arguments, got %d", cp_params_fn,
			 CP_NUM_ARGS, list_length(args));
	foreach(lc, args)
	{
		Const	   *c = lfirst_node(Const, lc);

		values[i] = c->constvalue;
		nulls[i] = c->constisnull;
		i++;
	}
	cp_params_from_datums(values, nulls, p);
}

static double
size_in_pages(const CpSize *size, BlockNumber n_pages)
{
	switch (size->unit)
	{
		case CP_SIZE_PERCENT:
			return ceil((double) n_pages * size->value / 100.0);
		case CP_SIZE_BYTES:
			return size->value / (double) BLCKSZ;
		case CP_SIZE_PAGES:
			return size->value;
		case CP_SIZE_UNSET:
			break;
	}
	return 0.0;
}

/*
 * Cut the table into blocks and a buffer into whole blocks.
 *
 * Without an explicit block_size, a block is 1/256 of the buffer
 * (CP_TARGET_BLOCKS_PER_BUFFER), at least one page and at most 10 MB: the
 * paper's fixed 10 MB blocks give a small table a buffer of one block, which
 * does not shuffle at all.  A percentage buffer is at least 16 pages (or the
 * whole table).  Sizes round to whole pages, the buffer to whole blocks (at
 * least one).
 */
void
cp_resolve_sizing(const CpTrainParams *p, BlockNumber n_pages, CpSizing *out)
{
	double		buffer_pages = cp_buffer_auto_whole(p, n_pages) ? Max(1.0, (double) n_pages) :
		Max(1.0, size_in_pages(&p->buffer_size, n_pages));
	double		max_block_pages = (double) (CP_MAX_BLOCK_BYTES / BLCKSZ);
	double		ppb;
	double		bpb;

	/*
	 * A percentage of a small table would be a buffer of a page or two,
	 * which cannot hold many blocks and barely shuffles.  Such a buffer is
	 * raised to CP_MIN_BUFFER_PAGES pages (or the whole table): small tables
	 * are cheap to buffer.
	 */
	if (p->buffer_size.unit == CP_SIZE_PERCENT)
		buffer_pages = Max(buffer_pages,
						   Min((double) n_pages, (double) CP_MIN_BUFFER_PAGES));

	if (p->block_size.unit == CP_SIZE_UNSET)
		ppb = Min(max_block_pages,
				  floor(buffer_pages / CP_TARGET_BLOCKS_PER_BUFFER));
	else
		ppb = rint(size_in_pages(&p->block_size, n_pages));
	ppb = Max(1.0, Min(ppb, (double) MaxBlockNumber));

	bpb = Max(1.0, rint(buffer_pages / ppb));

	out->n_pages = n_pages;
	out->pages_per_block = (uint32) ppb;
	out->n_blocks = (uint32) (((uint64) n_pages + out->pages_per_block - 1) /
								 out->pages_per_block);
	out->blocks_per_buffer = (uint32) Min(bpb, (double) PG_UINT32_MAX);
}

/*
 * buffer_size => NULL on a table whose heap fits maintenance_work_mem: one
 * buffer of the whole table.  A table of a few MB is cheap to hold (its
 * rows, converted, take about its heap's size), and a 10% buffer of it
 * holds a few dozen one-page blocks, each of one class when the table is
 * stored by its label: 3.3 accuracy points below a full shuffle on a
 * 5-class real table (docs/real-datasets.md).  Above the budget the buffer is 10% of the
 * table, which is then more than 800 pages: 256 blocks or more.
 */
bool
cp_buffer_auto_whole(const CpTrainParams *p, BlockNumber n_pages)
{
	return p->buffer_auto &&
		(double) n_pages * BLCKSZ <= (double) maintenance_work_mem * 1024.0;
}

/* What buffer_size => NULL chose and why, for EXPLAIN and params. */
char *
cp_buffer_choice(const CpTrainParams *p, BlockNumber n_pages)
{
	if (!p->buffer_auto)
		return psprintf("given: %s", cp_size_to_string(&p->buffer_size));
	if (cp_buffer_auto_whole(p, n_pages))
		return psprintf("whole table: %.0f kB of heap fit maintenance_work_mem (%d kB)",
						(double) n_pages * BLCKSZ / 1024.0, maintenance_work_mem);
	return psprintf("%g%%: %.0f kB of heap exceed maintenance_work_mem (%d kB)",
					CP_DEFAULT_BUFFER_PERCENT, (double) n_pages * BLCKSZ / 1024.0,
					maintenance_work_mem);
}

char *
cp_size_to_string(const CpSize *size)
{
	switch (size->unit)
	{
		case CP_SIZE_PERCENT:
			return psprintf("%g%%", size->value);
		case CP_SIZE_BYTES:
			return psprintf("%.0f bytes", size->value);
		case CP_SIZE_PAGES:
			return psprintf("%.0f pages", size->value);
		case CP_SIZE_UNSET:
			break;
	}
	return pstrdup("auto");
}

/*
 * Refuse, with an error that names the sizes, a model whose weights do not
 * fit: more weights than an int indexes, or more than one array value can
 * hold (MaxAllocSize: the weights are stored as one float8[] with the
 * model).  Called before any page is read: at plan time when n_features is
 * given, and once the dimension and the classes are known.  n_outputs is
 * the number of classes (softmax) or 1.
 */
void
cp_check_model_size(CpModelKind kind, int64 n_features, int n_outputs,
					bool sparse, int batch_size, const char *relname)
{
	uint64		bytes = 0;
	int64		n_weights = 0;
	int			outputs = (kind == CP_MODEL_SOFTMAX) ? Max(n_outputs, 1) : 1;
	bool		fits;

	fits = n_features >= 0 && n_features < PG_INT32_MAX &&
		cp_model_bytes(kind, (int) n_features, outputs, sparse,
					   Max(batch_size, 1), &bytes, &n_weights) &&
		(Size) n_weights <= MaxAllocSize / sizeof(double) &&
		bytes <= (uint64) MaxAllocHugeSize;
	if (!fits)
	{
		/* the figures, computed in floating point so that they cannot wrap */
		double		want = (double) outputs * ((double) n_features + 1.0) * sizeof(double);

		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("%s model of %lld features x %d %s on \"%s\" is too large",
						cp_model_kind_name(kind), (long long) n_features, outputs,
						kind == CP_MODEL_SOFTMAX ? "classes" : "output",
						relname),
				 errdetail("Its weights need %.0f bytes; a model's weights are at most %zu bytes (one array value).",
						   want, (size_t) MaxAllocSize),
				 errhint("Use a smaller n_features (hash the feature indices into fewer dimensions), or fewer classes.")));
	}
}

/*
 * The plan description: the parameters validated once, by the planner,
 * packed into one bytea Const that the three operators carry in their
 * custom_private (a Const copies, prints and reads back like any plan
 * node).  The strings follow the struct, each NUL-terminated, in the order
 * of the string fields below; their pointers are rebuilt on unpacking.
 */
#define CP_PACKED_STRINGS 5

static char **
packed_string(CpTrainParams *p, int i)
{
	switch (i)
	{
		case 0:
			return &p->model_name;
		case 1:
			return &p->label;
		case 2:
			return &p->features;
		case 3:
			return &p->feature_indices;
		default:
			return &p->warm_start;
	}
}

Const *
cp_params_pack(const CpTrainParams *p)
{
	CpTrainParams flat;
	StringInfoData buf;
	bytea	   *packed;

	/* memcpy keeps the padding, which cp_params_from_datums zeroed */
	memcpy(&flat, p, sizeof(flat));
	initStringInfo(&buf);
	for (int i = 0; i < CP_PACKED_STRINGS; i++)
		*packed_string(&flat, i) = NULL;
	appendBinaryStringInfo(&buf, (const char *) &flat, sizeof(flat));
	for (int i = 0; i < CP_PACKED_STRINGS; i++)
	{
		const char *str = *packed_string((CpTrainParams *) p, i);
		char		present = (str != NULL);

		appendBinaryStringInfo(&buf, &present, 1);
		if (present)
			appendBinaryStringInfo(&buf, str, strlen(str) + 1);
	}
	packed = palloc(VARHDRSZ + buf.len);
	SET_VARSIZE(packed, VARHDRSZ + buf.len);
	memcpy(VARDATA(packed), buf.data, buf.len);
	pfree(buf.data);
	return makeConst(BYTEAOID, -1, InvalidOid, -1, PointerGetDatum(packed), false, false);
}

void
cp_params_unpack(const Const *packed, CpTrainParams *p)
{
	bytea	   *b = DatumGetByteaPP(packed->constvalue);
	const char *data = VARDATA_ANY(b);
	const char *end = data + VARSIZE_ANY_EXHDR(b);
	const char *at;

	if (VARSIZE_ANY_EXHDR(b) < sizeof(CpTrainParams))
		elog(ERROR, "corgipile: malformed plan description");
	memcpy(p, data, sizeof(CpTrainParams));
	at = data + sizeof(CpTrainParams);
	for (int i = 0; i < CP_PACKED_STRINGS; i++)
	{
		char		present;
		size_t		len;

		if (at >= end)
			elog(ERROR, "corgipile: malformed plan description");
		present = *at++;
		if (!present)
		{
			*packed_string(p, i) = NULL;
			continue;
		}
		len = strnlen(at, end - at);
		if (at + len >= end)
			elog(ERROR, "corgipile: malformed plan description");
		*packed_string(p, i) = pnstrdup(at, len);
		at += len + 1;
	}
}
