/*-------------------------------------------------------------------------
 *
 * first_pass.c
 *	  The first pass before epoch 1 (docs/preprocessing.md):
 *	  one read of the table (or of a sample of its blocks) that learns what the weights' shape
 *	  and the features' encoding need before the first gradient step.
 *
 *	  - per-feature mean and standard deviation (dense) or scale (sparse),
 *	    when standardize is not off, and the statistic a NULL number is
 *	    imputed with (missing => 'mean', 'median': a selection among the
 *	    values seen, kept in maintenance_work_mem, or sorts that spill to
 *	    disk beyond it), and which number columns had NULLs
 *	    (missing_indicator);
 *	  - the one-hot dictionary of each text or boolean feature column;
 *	  - the class set of softmax, and the two values of a binary
 *	    classifier's text label;
 *	  - the sparse dimension when n_features is not given.
 *
 * A training needs at most this one extra read, and none at all when there
 * is nothing to learn (standardize => 'off', numbers only, a numeric label,
 * a known dimension): then no value is transformed.
 *
 * Rows are read in physical order (the order does not matter to any of
 * these, and sequential reading is fastest).  When the standardizing
 * statistics of dense rows are all there is to learn and the table is
 * larger than corgipile.stats_sample_size, only a seeded random sample of
 * its blocks is read, and kept in the block cache for epoch 1, so that the
 * first epoch reads the table once (sample_plan, read_sample; what a sample
 * does to accuracy is in docs/engine-benchmark.md).  Rows that validation => 'N%'
 * holds out are left out of the statistics and dictionaries, so the
 * held-out score does not see them; the class and label sets, which are
 * the label's domain rather than a feature statistic, come from every row
 * with a label.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <math.h>

#include "access/detoast.h"
#include "access/htup_details.h"
#include "access/tableam.h"
#include "catalog/pg_type.h"
#include "executor/tuptable.h"
#include "miscadmin.h"
#include "portability/instr_time.h"
#include "utils/array.h"
#include "utils/jsonb.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "storage/bufmgr.h"
#include "common/pg_prng.h"
#include "catalog/pg_operator_d.h"
#include "utils/tuplesort.h"
#include "libpq/pqformat.h"

#include "io/block_cache.h"
#include "io/heap_page.h"
#include "core/shuffle.h"
#include "util/datum_convert.h"
#include "util/prefetch.h"
#include "model/models.h"
#include "io/prep.h"
#include "nodes/first_pass.h"

typedef struct PassState
{
	CpLayout   *lo;
	const CpTrainParams *p;
	MemoryContext cxt;			/* what the pass learns lives here, not in
								 * the per-row context */
	CpStandardize standardize;
	bool		want_stats;		/* statistics of the numbers: to standardize
								 * and/or to impute */
	bool		scale;			/* standardize is not off */
	bool		want_missing;	/* missing is not skip: rows with NULL
								 * numbers are learnt from */
	bool		want_dicts;
	bool		want_classes;
	bool		want_dim;
	CpPrepDict *classes;		/* softmax: every label's text */
	CpPrepDict *labels;			/* a binary classifier's text label */
	CpPrepDict **dicts;			/* per column, category columns only */
	bool	   *nulls_seen;		/* per column: it had NULLs (a category
								 * column, or a number column when imputing) */
	int		   *numeric_index;	/* per column: its statistics slot, or -1 */
	int			n_numeric;
	CpPrepStats stats;
	bool		stats_ready;
	bool		stats_too_big;	/* a dimension no model can have */
	double	   *row;			/* a row of numbers */
	int32	   *idx;			/* a sparse row's indices */
	bool	   *row_missing;	/* which values of row are NULL */
	int			row_cap;
	int64		max_index;		/* sparse: the largest index seen, or -1 */
	uint64		dict_bytes;		/* charged to the budget: the dictionaries'
								 * tables, and every learnt value twice
								 * (charge_value) */
	uint64		byte_budget;	/* work_mem */
	uint64		stored_categories;	/* bytes the preprocess jsonb will hold
									 * for the category values */
	uint64		stored_labels;	/* ... and the classes jsonb for the labels */
	int64		n_rows;			/* rows the statistics saw */
	bool		row_has_null;	/* the row learnt last had a NULL number */

	/*
	 * missing => 'median': each value learnt, kept per statistics slot in
	 * memory while they fit maintenance_work_mem (the median is then a
	 * selection, core's cp_prep_median), else in a sort of float8 datums
	 * per slot that spills to temporary files.
	 */
	bool		want_median;
	int			n_median;		/* slots; 0 until the first row learnt */
	double	  **median_vals;	/* per slot, in memory */
	int64	   *median_len;
	int64	   *median_cap;
	Size		median_bytes;
	Tuplesortstate **median_sorts;	/* per slot, once spilled */
	double	   *medians;

	/* filling the block cache with the raw rows (fill_cache_wanted) */
	CpBlockCache *cache;		/* NULL: not filling it */
	uint32		pages_per_block;	/* a cached block's heap pages */
	CpBuffer	block_rows;		/* the current block's rows */
	uint32		block;			/* ... its number */
	bool		in_block;		/* block_rows holds a block */
	int64		skipped_at_start;	/* lo->n_skipped before the pass */
	int64		skipped_at_block;	/* ... before the current block */
	int64		null_label_at_start;	/* the same of lo->n_null_label */
	int64		null_label_at_block;
	bool		row_ready;		/* learn_features converted the row's
								 * float8[] features into row */
	CpBuffer	block_held;		/* validation: the block's held-out rows */
	int64		held_seen;		/* ... and the held-out rows it met */

	/* statistics from a sample of blocks (sample_plan) */
	uint32		n_blocks;		/* BlockShuffle's blocks */
	int64		sampled_blocks; /* 0: every row was read */
} PassState;

/*
 * corgipile.stats_sample_size, in heap pages: a table larger than this
 * learns its standardizing statistics from a random sample of its blocks
 * of about this size (sample_plan); 0 reads every row.
 */
int			cp_stats_sample_pages = 8192;

/* at least this many blocks in a sample: a block may hold a single label */
#define CP_SAMPLE_MIN_BLOCKS 32
/* the sample's own random stream of the training's seed (core/shuffle.c) */
#define CP_SAMPLE_STREAM 9

/* What cp_prep_dict_init allocates for max_categories, before any value. */
static uint64
dict_table_bytes(int32 max_categories)
{
	uint64		slots = 4;

	while (slots < 2 * (uint64) max_categories)
		slots <<= 1;
	return slots * sizeof(int32) +
		(uint64) max_categories * (sizeof(CpPrepDictEntry) + sizeof(int32));
}

/* auto is on for dense features, scale_only for sparse ones */
static CpStandardize
resolve_standardize(const CpLayout *lo, CpStandardize s)
{
	bool		sparse = lo->mode == CP_FEATURES_SPARSE;

	if (s == CP_STANDARDIZE_AUTO)
		return sparse ? CP_STANDARDIZE_SCALE_ONLY : CP_STANDARDIZE_ON;
	if (s == CP_STANDARDIZE_ON && sparse)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("corgipile.train: standardize => 'on' would centre the sparse features of \"%s\" and make every row dense",
						lo->relname),
				 errhint("Use standardize => 'scale_only' (the default for sparse features) or 'off'.")));
	return s;
}

static void
ensure_row(PassState *ps, int n)
{
	MemoryContext old;

	if (n <= ps->row_cap)
		return;
	old = MemoryContextSwitchTo(ps->cxt);
	n = Max(n, ps->row_cap * 2);
	if (ps->row == NULL)
	{
		ps->row = MemoryContextAllocHuge(CurrentMemoryContext, mul_size(sizeof(double), n));
		ps->idx = MemoryContextAllocHuge(CurrentMemoryContext, mul_size(sizeof(int32), n));
		ps->row_missing = MemoryContextAllocHuge(CurrentMemoryContext, mul_size(sizeof(bool), n));
	}
	else
	{
		ps->row = repalloc_huge(ps->row, mul_size(sizeof(double), n));
		ps->idx = repalloc_huge(ps->idx, mul_size(sizeof(int32), n));
		ps->row_missing = repalloc_huge(ps->row_missing, mul_size(sizeof(bool), n));
	}
	ps->row_cap = n;
	MemoryContextSwitchTo(old);
}

/*
 * Statistics over n features; for sparse rows without a known dimension
 * they grow with the largest index, keeping what was learnt (a feature
 * not seen yet has count, mean and m2 zero, which is its true state).
 */
static void
ensure_stats(PassState *ps, int64 n)
{
	CpPrepStats old = ps->stats;
	MemoryContext oldcxt;

	if ((ps->stats_ready && n <= ps->stats.n_features) || ps->stats_too_big)
		return;
	oldcxt = MemoryContextSwitchTo(ps->cxt);
	/*
	 * A dimension whose weights cannot be one array value: the model's size
	 * check refuses it after the pass, with its own message; learn nothing
	 * more for it rather than allocate statistics that size.
	 */
	if (n >= (int64) (MaxAllocSize / sizeof(double)))
	{
		ps->stats_too_big = true;
		return;
	}
	/* grow by half again at least, so rising indices cost little */
	if (ps->stats_ready)
		n = Min(Max(n, (int64) ps->stats.n_features + ps->stats.n_features / 2),
				(int64) (MaxAllocSize / sizeof(double)) - 1);
	if (!cp_prep_stats_init(&ps->stats, (int32) n, cp_prep_palloc0))
		elog(ERROR, "corgipile: could not size the statistics of %lld features",
			 (long long) n);
	if (ps->stats_ready)
	{
		memcpy(ps->stats.count, old.count, sizeof(int64) * old.n_features);
		memcpy(ps->stats.mean, old.mean, sizeof(double) * old.n_features);
		memcpy(ps->stats.m2, old.m2, sizeof(double) * old.n_features);
		ps->stats.n_rows = old.n_rows;
		pfree(old.count);
		pfree(old.mean);
		pfree(old.m2);
	}
	ps->stats_ready = true;
	MemoryContextSwitchTo(oldcxt);
}

/*
 * What a learnt category or label value costs: its bytes twice, and the
 * JEntry the stored model's jsonb gives it.  Writing the model holds a
 * value in that jsonb, in the executor's copy of the row and in the heap
 * tuple (a category's dictionary entry then points into the jsonb:
 * cp_prep_share_values; a label's stays, a fourth copy), so the values take
 * at most twice what is charged, when the model is written.  Every value
 * and every dictionary's tables are charged to one budget, work_mem; and a
 * model stores at most CP_PREP_MAX_STORED_BYTES of category values, and
 * as much of class labels.
 */
static uint64
value_charge(uint64 len)
{
	return 2 * len + sizeof(JEntry);
}

static void
categories_too_big(PassState *ps, int i, bool store)
{
	CpLayout   *lo = ps->lo;
	const char *column = list_nth(lo->feature_names, i);

	if (store)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("the categories of relation \"%s\" take more than a model can store (%llu MB)",
						lo->relname, (unsigned long long) (CP_PREP_MAX_STORED_BYTES >> 20)),
				 errdetail("Column \"%s\" has %d distinct values so far; a model keeps its category values in one jsonb value.",
						   column, ps->dicts[i]->n_entries),
				 errhint("Leave the column out of features, or map its values to shorter ones (an id, a hash).")));
	ereport(ERROR,
			(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
			 errmsg("the categories of column \"%s\" of relation \"%s\" take more than work_mem (%d kB)",
					column, lo->relname, work_mem),
			 errdetail("%d distinct values so far; each value counts twice, for the dictionary that learns it and for the model row that stores it.",
					   ps->dicts[i]->n_entries),
			 errhint("Leave the column out of features, or raise work_mem.")));
}

/*
 * Whether a value of len bytes, not learnt yet, fits what is left: of the
 * budget (charged twice), and of what the model stores (*stored).
 */
static bool
fits_budget(const PassState *ps, uint64 len)
{
	return ps->dict_bytes + value_charge(len) <= ps->byte_budget;
}

static bool
fits_store(uint64 stored, uint64 len)
{
	return stored + len + sizeof(JEntry) <= CP_PREP_MAX_STORED_BYTES;
}

/* A text value's length before it is detoasted, or -1 for other types. */
static int64
text_length(Datum d, Oid type)
{
	if (type != TEXTOID && type != VARCHAROID)
		return -1;
	return (int64) toast_raw_datum_size(d) - VARHDRSZ;
}

/* What learn_value did with a value. */
typedef enum LearnStatus
{
	LEARN_KNOWN,				/* learnt before */
	LEARN_ADDED,				/* new, learnt and charged */
	LEARN_FULL,					/* new, but the dictionary is full */
	LEARN_NO_MEMORY,			/* the allocator failed */
	LEARN_OVER_STORE,			/* new, more than a model can store */
	LEARN_OVER_BUDGET			/* new, more than work_mem */
} LearnStatus;

/*
 * Learn len bytes s into dict, a new value charged before the dictionary
 * copies it (to the budget, and to *stored, what its jsonb will hold).
 */
static LearnStatus
learn_value(PassState *ps, CpPrepDict *dict, uint64 *stored, const char *s, int32 len)
{
	MemoryContext old;
	CpPrepDictStatus st;

	if (cp_prep_dict_contains(dict, s, len))
		return LEARN_KNOWN;
	if (!fits_store(*stored, len))
		return LEARN_OVER_STORE;
	if (!fits_budget(ps, len))
		return LEARN_OVER_BUDGET;
	old = MemoryContextSwitchTo(ps->cxt);
	st = cp_prep_dict_add(dict, s, len);
	MemoryContextSwitchTo(old);
	if (st == CP_PREP_DICT_FULL)
		return LEARN_FULL;
	if (st == CP_PREP_DICT_NO_MEMORY)
		return LEARN_NO_MEMORY;
	Assert(st == CP_PREP_DICT_ADDED);
	ps->dict_bytes += value_charge(len);
	*stored += len + sizeof(JEntry);
	return LEARN_ADDED;
}

/* Learn a value of a text or boolean feature column. */
static void
learn_category(PassState *ps, int i, Datum d)
{
	CpLayout   *lo = ps->lo;
	CpPrepDict *dict = ps->dicts[i];
	int64		raw = text_length(d, lo->column_types[i]);
	int32		len;
	const char *s;

	/* a value too long to learn at all is refused before it is read */
	if (raw >= 0 && !fits_store(0, raw))
		categories_too_big(ps, i, true);
	if (raw >= 0 && value_charge(raw) > ps->byte_budget)
		categories_too_big(ps, i, false);
	s = cp_prep_category_bytes(d, lo->column_types[i], &len);
	switch (learn_value(ps, dict, &ps->stored_categories, s, len))
	{
		case LEARN_KNOWN:
		case LEARN_ADDED:
			return;
		case LEARN_OVER_STORE:
			categories_too_big(ps, i, true);
			break;
		case LEARN_OVER_BUDGET:
			categories_too_big(ps, i, false);
			break;
		case LEARN_FULL:
			ereport(ERROR,
					(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
					 errmsg("column \"%s\" of relation \"%s\" has more than %d distinct values",
							(char *) list_nth(lo->feature_names, i), lo->relname,
							dict->max_categories),
					 errhint("Raise max_categories, or leave the column out of features.")));
			break;
		case LEARN_NO_MEMORY:
			ereport(ERROR,
					(errcode(ERRCODE_OUT_OF_MEMORY),
					 errmsg("out of memory learning the categories of column \"%s\"",
							(char *) list_nth(lo->feature_names, i))));
			break;
	}
}

static void
labels_too_big(PassState *ps, const CpPrepDict *dict, bool store)
{
	CpLayout   *lo = ps->lo;

	if (store)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("the values of label column \"%s\" of relation \"%s\" take more than a model can store (%llu MB)",
						lo->label_name, lo->relname,
						(unsigned long long) (CP_PREP_MAX_STORED_BYTES >> 20)),
				 errdetail("%d distinct values so far; a model keeps its classes in one jsonb value.",
						   dict->n_entries),
				 errhint("Use shorter labels.")));
	ereport(ERROR,
			(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
			 errmsg("the values of label column \"%s\" of relation \"%s\" take more than work_mem (%d kB)",
					lo->label_name, lo->relname, work_mem),
			 errdetail("%d distinct values so far; each value counts twice, for the dictionary that learns it and for the model row that stores it.",
					   dict->n_entries),
			 errhint("Use shorter labels, or raise work_mem.")));
}

/* Learn a label's text: softmax's classes, or a binary text label. */
static void
learn_label(PassState *ps, Datum d, const CpRowContext *where)
{
	CpLayout   *lo = ps->lo;
	char	   *s;
	int32		len;
	CpPrepDict *dict = ps->want_classes ? ps->classes : ps->labels;

	if (lo->label_type == TEXTOID || lo->label_type == VARCHAROID)
	{
		int64		raw = text_length(d, lo->label_type);
		text	   *t;

		/* a label too long to learn at all is refused before it is read */
		if (!fits_store(0, raw))
			labels_too_big(ps, dict, true);
		if (value_charge(raw) > ps->byte_budget)
			labels_too_big(ps, dict, false);
		/* the dictionary copies what it learns: no copy needed here */
		t = DatumGetTextPP(d);
		len = VARSIZE_ANY_EXHDR(t);
		s = VARDATA_ANY(t);
	}
	else
	{
		if (lo->label_type == BOOLOID)
			s = DatumGetBool(d) ? CP_PREP_TRUE : CP_PREP_FALSE;
		else
			s = psprintf(INT64_FORMAT, cp_datum_to_int64(d, lo->label_type));
		len = (int32) strlen(s);
	}
	switch (learn_value(ps, dict, &ps->stored_labels, s, len))
	{
		case LEARN_KNOWN:
		case LEARN_ADDED:
			return;
		case LEARN_OVER_STORE:
			labels_too_big(ps, dict, true);
			break;
		case LEARN_OVER_BUDGET:
			labels_too_big(ps, dict, false);
			break;
		case LEARN_FULL:
			if (dict == ps->labels)
				ereport(ERROR,
						(errcode(ERRCODE_DATA_EXCEPTION),
						 errmsg("label column \"%s\" of relation \"%s\" has more than two distinct values; a %s model has two classes",
								lo->label_name, lo->relname, cp_model_kind_name(lo->model)),
						 errdetail("\"%s\" in %s is a third value.", pnstrdup(s, len),
								   cp_row_description(where)),
						 errhint("Use model 'softmax' for more than two classes.")));
			ereport(ERROR,
					(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
					 errmsg("label column \"%s\" of \"%s\" has more than %d distinct values",
							lo->label_name, lo->relname, CP_MAX_CLASSES),
					 errhint("A softmax model takes a label with few classes; use 'linear' for a continuous one.")));
			break;
		case LEARN_NO_MEMORY:
			ereport(ERROR,
					(errcode(ERRCODE_OUT_OF_MEMORY),
					 errmsg("out of memory learning the labels of \"%s\"", lo->relname)));
	}
}

/*
 * The largest index of a sparse row's index array, or false when the row
 * has an index training would refuse (NULL, negative, not below limit):
 * training reports that, with the row, when it reads it, so the pass
 * fails no earlier and with no other message than epoch 1 would.
 */
static bool
largest_index(ArrayType *idx, int n, int64 limit, int64 *top)
{
	const char *p = ARR_DATA_PTR(idx);
	int64		lo = 0;
	int64		hi = -1;

	if (array_contains_nulls(idx))
		return false;
#define SCAN(type) \
	for (int k = 0; k < n; k++) \
	{ \
		int64		v = ((const type *) p)[k]; \
		lo = Min(lo, v); \
		hi = Max(hi, v); \
	}
	switch (getBaseType(ARR_ELEMTYPE(idx)))
	{
		case INT2OID:
			SCAN(int16);
			break;
		case INT4OID:
			SCAN(int32);
			break;
		case INT8OID:
			SCAN(int64);
			break;
		default:
			return false;
	}
#undef SCAN
	*top = hi;
	return lo >= 0 && hi < limit;
}

/* The largest index of every row, as the max(index) query found it. */
static void
learn_indices(PassState *ps, Datum d, const CpRowContext *where)
{
	ArrayType  *idx = DatumGetArrayTypeP(d);
	int			n = cp_array_length(idx, where, "feature_indices");
	int64		top = -1;

	largest_index(idx, n, PG_INT64_MAX, &top);
	ps->max_index = Max(ps->max_index, top);
}

/* the least memory a tuplesort runs in (tuplesort_begin_common's floor) */
#define CP_MEDIAN_MIN_SORT_KB 64

/* missing => 'median': n slots, their values in memory to begin with */
static void
median_begin(PassState *ps, int n)
{
	MemoryContext old = MemoryContextSwitchTo(ps->cxt);

	ps->n_median = n;
	ps->median_vals = palloc0_array(double *, n);
	ps->median_len = palloc0_array(int64, n);
	ps->median_cap = palloc0_array(int64, n);
	MemoryContextSwitchTo(old);
}

/*
 * The values no longer fit maintenance_work_mem: one sort of float8 datums
 * per slot (a byval datum sort keeps each value in its SortTuple: no tuple
 * is formed, a comparison is one float8 comparison), sharing it and each
 * spilling beyond its share, given the values held so far.  Refused when
 * the slots' least shares alone exceed it.
 */
static void
median_spill(PassState *ps)
{
	int			n = ps->n_median;
	int			kb = maintenance_work_mem / n;
	MemoryContext old;

	if (kb < CP_MEDIAN_MIN_SORT_KB)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("corgipile.train: missing => 'median' needs more than maintenance_work_mem (%d kB) for the values of the %d features of \"%s\"",
						maintenance_work_mem, n, ps->lo->relname),
				 errdetail("Beyond it each feature's values are sorted on disk, in at least %d kB each.",
						   CP_MEDIAN_MIN_SORT_KB),
				 errhint("Raise maintenance_work_mem to %d kB, or use missing => 'mean'.",
						 n * CP_MEDIAN_MIN_SORT_KB)));
	old = MemoryContextSwitchTo(ps->cxt);
	ps->median_sorts = palloc_array(Tuplesortstate *, n);
	for (int j = 0; j < n; j++)
	{
		ps->median_sorts[j] = tuplesort_begin_datum(FLOAT8OID, Float8LessOperator,
													InvalidOid, false, kb, NULL,
													TUPLESORT_NONE);
		for (int64 i = 0; i < ps->median_len[j]; i++)
			tuplesort_putdatum(ps->median_sorts[j], Float8GetDatum(ps->median_vals[j][i]),
							   false);
		if (ps->median_vals[j] != NULL)
			pfree(ps->median_vals[j]);
		ps->median_vals[j] = NULL;
		CHECK_FOR_INTERRUPTS();
	}
	MemoryContextSwitchTo(old);
}

/* The values of a row learnt, present ones only: kept for the medians. */
static void
median_add(PassState *ps, const int32 *slots, const double *values, int n)
{
	if (ps->median_sorts == NULL)
	{
		Size		more = 0;

		/* what the row makes the arrays grow by (its slots are distinct) */
		for (int k = 0; k < n; k++)
		{
			int			j = slots == NULL ? k : slots[k];

			if (ps->median_len[j] == ps->median_cap[j])
				more = add_size(more, mul_size(Max(1024, ps->median_cap[j]),
											   sizeof(double)));
		}
		if (add_size(ps->median_bytes, more) > (Size) maintenance_work_mem * 1024)
			median_spill(ps);
	}
	if (ps->median_sorts != NULL)
	{
		for (int k = 0; k < n; k++)
			tuplesort_putdatum(ps->median_sorts[slots == NULL ? k : slots[k]],
							   Float8GetDatum(values[k]), false);
		return;
	}
	for (int k = 0; k < n; k++)
	{
		int			j = slots == NULL ? k : slots[k];

		if (ps->median_len[j] == ps->median_cap[j])
		{
			int64		cap = Max(1024, ps->median_cap[j] * 2);

			ps->median_bytes += (cap - ps->median_cap[j]) * sizeof(double);
			ps->median_vals[j] = ps->median_vals[j] == NULL ?
				MemoryContextAllocHuge(ps->cxt, mul_size(cap, sizeof(double))) :
				repalloc_huge(ps->median_vals[j], mul_size(cap, sizeof(double)));
			ps->median_cap[j] = cap;
		}
		ps->median_vals[j][ps->median_len[j]++] = values[k];
	}
}

/*
 * The median of each slot's values, as numpy's (the mean of the two middle
 * values of an even count; the statistics have counted them): selected in
 * memory, or read from the middle of each sort.
 */
static void
median_finish(PassState *ps)
{
	ps->medians = palloc0_array(double, ps->n_median);
	for (int j = 0; j < ps->n_median; j++)
	{
		int64		c = ps->stats.count[j];
		Tuplesortstate *sort;
		Datum		low;
		Datum		high;
		bool		isnull;

		CHECK_FOR_INTERRUPTS();
		if (ps->median_sorts == NULL)
		{
			if (ps->median_len[j] != c)
				elog(ERROR, "corgipile: %lld values kept for a median, %lld counted",
					 (long long) ps->median_len[j], (long long) c);
			if (c > 0)
				ps->medians[j] = cp_prep_median(ps->median_vals[j], c);
			continue;
		}
		sort = ps->median_sorts[j];
		tuplesort_performsort(sort);
		if (c > 0)
		{
			if (!tuplesort_skiptuples(sort, (c - 1) / 2, true) ||
				!tuplesort_getdatum(sort, true, &low, &isnull, NULL))
				elog(ERROR, "corgipile: the median's sort holds fewer values than counted");
			high = low;
			if (c % 2 == 0 && !tuplesort_getdatum(sort, true, &high, &isnull, NULL))
				elog(ERROR, "corgipile: the median's sort holds fewer values than counted");
			ps->medians[j] = c % 2 == 1 ? DatumGetFloat8(low) :
				(DatumGetFloat8(low) + DatumGetFloat8(high)) / 2.0;
		}
		tuplesort_end(sort);
	}
	ps->median_sorts = NULL;
}

/*
 * A row's numbers into the statistics: a complete row as it always was,
 * one with NULLs (missing => ...) by its present values, the row counted,
 * so that its NULLs count as values not seen (imputed when the moments
 * are read: cp_prep_stats_moments_filled).  row holds the value of each
 * slot, missing[s] says which are NULL; row is compacted in place.
 */
static void
stats_add_row(PassState *ps, double *row, const bool *missing, int n)
{
	int			m = 0;

	/* an array's width is known from its first row */
	if (ps->want_median && ps->n_median == 0)
		median_begin(ps, ps->stats.n_features);
	if (missing == NULL)
	{
		cp_prep_stats_add_dense(&ps->stats, row);
		if (ps->want_median)
			median_add(ps, NULL, row, n);
		return;
	}
	for (int s = 0; s < n; s++)
	{
		if (missing[s])
			continue;
		ps->idx[m] = s;
		row[m++] = row[s];
	}
	cp_prep_stats_add_sparse(&ps->stats, ps->idx, row, m);
	if (ps->want_median)
		median_add(ps, ps->idx, row, m);
}

/* The features of one row that training will use, into the statistics. */
static void
learn_features(PassState *ps, Datum *vals, bool *isnull,
			   const CpRowContext *where)
{
	CpLayout   *lo = ps->lo;

	ps->row_has_null = false;
	switch (lo->mode)
	{
		case CP_FEATURES_COLUMNS:
			for (int i = 0; i < lo->n_columns; i++)
				if (!(lo->column_onehot && lo->column_onehot[i]) &&
					isnull[lo->column_attnos[i] - 1])
				{
					/* training skips the row, or imputes the number */
					if (!ps->want_missing)
						return;
					ps->row_has_null = true;
				}
			for (int i = 0; i < lo->n_columns; i++)
			{
				int			a = lo->column_attnos[i] - 1;

				if (lo->column_onehot && lo->column_onehot[i])
				{
					if (!isnull[a])
						learn_category(ps, i, vals[a]);
					else
						ps->nulls_seen[i] = true;
				}
				else if (isnull[a])
				{
					ps->nulls_seen[i] = true;
					if (ps->want_stats)
						ps->row_missing[ps->numeric_index[i]] = true;
				}
				else if (ps->want_stats)
				{
					double		v = cp_datum_to_double(vals[a], lo->column_types[i]);

					cp_check_finite(v, where);
					ps->row[ps->numeric_index[i]] = v;
					ps->row_missing[ps->numeric_index[i]] = false;
				}
			}
			if (ps->want_stats)
				stats_add_row(ps, ps->row, ps->row_has_null ? ps->row_missing : NULL,
							  ps->n_numeric);
			break;
		case CP_FEATURES_ARRAY:
			{
				ArrayType  *arr;
				int			len;

				if (isnull[lo->values_attno - 1])
					return;
				arr = DatumGetArrayTypeP(vals[lo->values_attno - 1]);
				len = cp_array_length(arr, where, "features");
				if (!ps->stats_ready)
				{
					if (len == 0)
						ereport(ERROR,
								(errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
								 errmsg("features array in %s is empty",
										cp_row_description(where))));
					if (lo->n_features > 0 && len != lo->n_features)
						return;	/* training reports the ragged row */
					ensure_stats(ps, len);
					ensure_row(ps, len);
				}
				if (len != ps->stats.n_features)
					ereport(ERROR,
							(errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
							 errmsg("features array in %s has %d elements; expected %d",
									cp_row_description(where), len, ps->stats.n_features),
							 errhint("Every row needs the same number of features; set n_features to say how many.")));
				if (cp_array_to_doubles(arr, ps->row, len, where))
				{
					stats_add_row(ps, ps->row, NULL, len);
					ps->row_ready = true;
				}
				else if (ps->want_missing)
				{
					/* NULL elements, imputed per element as columns are */
					cp_array_to_doubles_nulls(arr, ps->row, ps->row_missing, len, where);
					ps->row_has_null = true;
					stats_add_row(ps, ps->row, ps->row_missing, len);
				}
				else
					return;		/* training skips the row */
				break;
			}
		case CP_FEATURES_SPARSE:
			{
				ArrayType  *idx;
				ArrayType  *val;
				int			n;
				int64		top = -1;

				if (isnull[lo->values_attno - 1] || isnull[lo->indices_attno - 1])
					return;
				idx = DatumGetArrayTypeP(vals[lo->indices_attno - 1]);
				val = DatumGetArrayTypeP(vals[lo->values_attno - 1]);
				n = cp_array_length(idx, where, "feature_indices");
				if (n != cp_array_length(val, where, "features"))
					return;		/* training reports it */
				if (!largest_index(idx, n, lo->n_features > 0 ? lo->n_features : PG_INT32_MAX,
								   &top))
					return;
				ensure_row(ps, n);
				if (!cp_array_to_indices(idx, ps->idx, n, lo->n_features, where) ||
					!cp_array_to_doubles(val, ps->row, n, where))
					return;
				ensure_stats(ps, Max(top + 1, lo->n_features > 0 ? lo->n_features : 1));
				if (!ps->stats_too_big)
					cp_prep_stats_add_sparse(&ps->stats, ps->idx, ps->row, n);
				break;
			}
		case CP_FEATURES_NONE:
			break;
	}
	ps->n_rows++;
}

/*
 * Filling the block cache during the pass.
 *
 * With features standardized, epoch 1 would read and convert every row a
 * second time, right after the pass has read it.  Instead the pass keeps
 * each row as epoch 1 converts it before the transform (cp_layout_append
 * with no preprocessing yet), block by block, in the block cache
 * (block_cache.c, within its budget); once the statistics are complete,
 * the transform is applied to the cached rows in place
 * (cp_prep_apply_dense), which gives
 * the same doubles as converting after the pass
 * (cp_array_to_doubles_transformed).  Epoch 1 then reads those blocks
 * from memory, as later epochs do, and the heap only for the blocks that
 * did not fit.  A cached block holds exactly the rows reading its heap
 * pages would append, and the rows skipped for NULLs are counted once, so
 * buffers, the NOTICE of skipped rows and the weights a seed gives do not
 * change (tests/python/test_first_pass_cache.py).
 *
 * Only when nothing else the pass learns changes how a row converts: no
 * text label, softmax classes, one-hot dictionary or sparse dimension,
 * dense rows only.  With validation => 'N%', the held-out rows of a cached
 * block are kept with it (cp_block_cache_add_held), and epoch 1 hands them
 * to the holdout when it takes the block from the cache, in its own order
 * (cp_holdout_keep_cached), as it would have kept them reading the heap.
 */
static bool
fill_cache_wanted(const PassState *ps, const CpBlockCache *cache)
{
	const CpLayout *lo = ps->lo;

	return cache != NULL && cache->n_cached == 0 && !cache->full &&
		ps->want_stats && !ps->want_dicts && !ps->want_classes &&
		!ps->want_dim && !lo->label_is_text &&
		(lo->mode == CP_FEATURES_ARRAY ||
		 (lo->mode == CP_FEATURES_COLUMNS && !lo->has_onehot));
}

/* When the pass fills the block cache, the buffers it fills it from. */
static void
start_cache_fill(PassState *ps, CpBlockCache *cache, MemoryContext cxt)
{
	if (!fill_cache_wanted(ps, cache))
		return;
	ps->cache = cache;
	ps->skipped_at_start = ps->lo->n_skipped;
	ps->null_label_at_start = ps->lo->n_null_label;
	cp_buffer_init(&ps->block_rows, cxt, false);
	cp_buffer_init(&ps->block_held, cxt, false);
}

/*
 * Stop filling the cache and forget what it holds: epoch 1 reads every
 * block from the heap and counts its skipped rows, as without the pass.
 */
static void
abandon_cache(PassState *ps)
{
	cp_block_cache_reset(ps->cache);
	ps->lo->n_skipped = ps->skipped_at_start;
	ps->lo->n_null_label = ps->null_label_at_start;
	ps->cache = NULL;
}

/* Hand the current block's rows to the cache; stop once it is full. */
static void
flush_block(PassState *ps)
{
	if (!ps->in_block)
		return;
	ps->in_block = false;
	/* a block of held-out rows only: its width is theirs */
	if (ps->block_rows.n_rows == 0 && ps->block_held.n_rows > 0)
		ps->block_rows.n_features = ps->block_held.n_features;
	cp_block_cache_add_held(ps->cache, ps->block, &ps->block_rows, 0,
							&ps->block_held, ps->held_seen);
	if (!cp_block_cache_has(ps->cache, ps->block))
	{
		/* epoch 1 reads this block, and those after it, from the heap */
		ps->lo->n_skipped = ps->skipped_at_block;
		ps->lo->n_null_label = ps->null_label_at_block;
		ps->cache = NULL;
	}
}

/*
 * Make block the one rows are cached for, handing the previous one to the
 * cache; false once the cache takes no more.
 */
static bool
enter_block(PassState *ps, uint32 block)
{
	if (!ps->in_block || block != ps->block)
	{
		flush_block(ps);
		if (ps->cache == NULL)
			return false;
		cp_buffer_reset(&ps->block_rows, ps->lo->n_features);
		cp_buffer_reset(&ps->block_held, ps->lo->n_features);
		ps->held_seen = 0;
		ps->block = block;
		ps->in_block = true;
		ps->skipped_at_block = ps->lo->n_skipped;
		ps->null_label_at_block = ps->lo->n_null_label;
	}
	return true;
}

/*
 * Append the row in slot to its block's rows, as epoch 1 would before the
 * transform.  A row whose length the pass did not check (n_features given
 * and the first rows ragged) is left to epoch 1 to report, in its order:
 * the cache is given up.
 */
static void
cache_row(PassState *ps, TupleTableSlot *slot, bool held_out)
{
	CpLayout   *lo = ps->lo;
	uint32		block = ItemPointerGetBlockNumber(&slot->tts_tid) / ps->pages_per_block;
	int			n_features = lo->n_features;

	if (!enter_block(ps, block))
		return;
	if (lo->mode == CP_FEATURES_ARRAY &&
		!slot->tts_isnull[lo->label_attno - 1] &&
		!slot->tts_isnull[lo->values_attno - 1])
	{
		ArrayType  *arr = DatumGetArrayTypeP(slot->tts_values[lo->values_attno - 1]);
		int			len = ARR_NDIM(arr) == 1 ?
			ArrayGetNItems(ARR_NDIM(arr), ARR_DIMS(arr)) : -1;
		int			want = n_features > 0 ? n_features :
			(ps->stats_ready ? ps->stats.n_features : -1);

		/*
		 * A held-out row before any learnt one sets the width, as it would
		 * in epoch 1 (which reads it first)
		 */
		if (want < 0 && held_out && len > 0)
		{
			ensure_stats(ps, len);
			ensure_row(ps, len);
			want = ps->stats.n_features;
		}
		if (len != want)
		{
			abandon_cache(ps);
			return;
		}
	}
	if (held_out)
	{
		/* as cp_holdout_take and cp_holdout_keep count and convert it */
		ps->held_seen++;
		if (lo->mode == CP_FEATURES_ARRAY && n_features == 0 && ps->stats_ready)
			lo->n_features = ps->stats.n_features;
		cp_layout_append(lo, slot, &ps->block_held);
		lo->n_features = n_features;
		return;
	}
	if (ps->row_ready)
	{
		/* converted for the statistics already: not a second time */
		lo->n_features = ps->stats.n_features;
		cp_layout_append_converted(lo, slot, &ps->block_rows, ps->row);
	}
	else
		cp_layout_append(lo, slot, &ps->block_rows);
	/* the dimension is the statistics' until the pass ends */
	lo->n_features = n_features;
}

/* What read_pages needs besides the pass's state. */
typedef struct PassReader
{
	TableScanDesc scan;
	TupleDesc	desc;			/* the table's, cut at the layout's last column */
	TupleTableSlot *slot;		/* a virtual slot over desc, for cache_row */
	MemoryContext row_cxt;		/* reset per row */
	uint64		seed;
	BlockNumber n_pages;		/* the scan's */
	CpPrefetcher prefetch;		/* asks for the sample's next block */
	bool		offsets_known;	/* desc's attcacheoff have been set */
	bool		offsets_fixed;	/* every column read has one */
	int64		seen;
} PassReader;

/*
 * The row a training caches most, read straight from the page: float8[]
 * features and a label at fixed offsets in a tuple without NULLs, the
 * array uncompressed, of the statistics' width, not held out, while the
 * pass fills the cache.  It is converted once, into its block's rows
 * (cp_layout_append_float8: the label mapped, the values checked, no
 * transform yet), and the statistics take it from there: the same doubles
 * in the same order as learn_features and cache_row give, without
 * deforming the tuple or storing it in a slot.  False, having done
 * nothing, for any other row.
 */
static bool
pass_row_direct(PassState *ps, PassReader *rd, HeapTuple tup)
{
	CpLayout   *lo = ps->lo;
	char	   *tp;
	Form_pg_attribute la;
	Form_pg_attribute fa;
	ArrayType  *arr;
	int			d;
	int			n_features = lo->n_features;
	bool		ok;

	if (!rd->offsets_fixed || ps->cache == NULL || lo->mode != CP_FEATURES_ARRAY ||
		!ps->stats_ready || ps->want_dicts || ps->want_median ||
		HeapTupleHasNulls(tup) ||
		HeapTupleHeaderGetNatts(tup->t_data) < rd->desc->natts)
		return false;
	d = ps->stats.n_features;
	if (n_features > 0 && n_features != d)
		return false;
	tp = (char *) tup->t_data + tup->t_data->t_hoff;
	la = TupleDescAttr(rd->desc, lo->label_attno - 1);
	fa = TupleDescAttr(rd->desc, lo->values_attno - 1);
	arr = (ArrayType *) (tp + fa->attcacheoff);
	if (!VARATT_IS_4B_U(arr) || ARR_NDIM(arr) != 1 || ARR_HASNULL(arr) ||
		ARR_ELEMTYPE(arr) != FLOAT8OID || ARR_DIMS(arr)[0] != d)
		return false;
	if (ps->p->validation_fraction > 0.0 &&
		cp_prep_holdout(rd->seed, ItemPointerGetBlockNumber(&tup->t_self),
						ItemPointerGetOffsetNumber(&tup->t_self),
						ps->p->validation_fraction))
		return false;
	if (!enter_block(ps, ItemPointerGetBlockNumber(&tup->t_self) / ps->pages_per_block))
		return false;			/* the cache is full: the slow path learns it */
	lo->n_features = d;
	ok = cp_layout_append_float8(lo, fetchatt(la, tp + la->attcacheoff), arr,
								 &tup->t_self, &ps->block_rows);
	lo->n_features = n_features;
	if (!ok)
		return false;
	if (ps->want_stats)
	{
		cp_prep_stats_add_dense(&ps->stats,
								ps->block_rows.values + (ps->block_rows.n_rows - 1) * d);
		ps->n_rows++;
	}
	return true;
}

/*
 * Whether a labelled row has a NULL number that training will impute
 * (missing => ...): the cache holds rows converted without the
 * preprocessing, which would skip it, so the pass stops caching.
 */
static bool
imputed_row(const PassState *ps, Datum *vals, bool *isnull)
{
	const CpLayout *lo = ps->lo;

	if (!ps->want_missing)
		return false;
	if (lo->mode == CP_FEATURES_COLUMNS)
	{
		for (int i = 0; i < lo->n_columns; i++)
			if (!(lo->column_onehot && lo->column_onehot[i]) &&
				isnull[lo->column_attnos[i] - 1])
				return true;
		return false;
	}
	return lo->mode == CP_FEATURES_ARRAY && !isnull[lo->values_attno - 1] &&
		array_contains_nulls(DatumGetArrayTypeP(vals[lo->values_attno - 1]));
}

/* One visible row: into what the pass learns, and into the cache. */
static void
pass_row(PassState *ps, PassReader *rd, HeapTuple tup)
{
	CpLayout   *lo = ps->lo;
	CpRowContext where = {lo->relname, &tup->t_self, lo->use};
	MemoryContext old = MemoryContextSwitchTo(rd->row_cxt);
	Datum	   *vals = rd->slot->tts_values;
	bool	   *isnull = rd->slot->tts_isnull;
	double		fraction = ps->p->validation_fraction;
	bool		has_label;
	bool		held_out;

	if (pass_row_direct(ps, rd, tup))
	{
		MemoryContextSwitchTo(old);
		return;
	}
	heap_deform_tuple(tup, rd->desc, vals, isnull);
	if (!rd->offsets_known && !HeapTupleHasNulls(tup) &&
		HeapTupleHeaderGetNatts(tup->t_data) >= rd->desc->natts)
	{
		/* heap_deform_tuple has cached the offsets it could */
		rd->offsets_known = true;
		rd->offsets_fixed = true;
		for (int i = 0; i < rd->desc->natts; i++)
			if (TupleDescAttr(rd->desc, i)->attcacheoff < 0)
				rd->offsets_fixed = false;
	}
	has_label = !isnull[lo->label_attno - 1];
	ps->row_ready = false;
	held_out = fraction > 0.0 &&
		cp_prep_holdout(rd->seed, ItemPointerGetBlockNumber(&tup->t_self),
						ItemPointerGetOffsetNumber(&tup->t_self), fraction);

	/* as the max(index) query did: every row's indices */
	if (ps->want_dim && !isnull[lo->indices_attno - 1])
		learn_indices(ps, vals[lo->indices_attno - 1], &where);
	/* as the DISTINCT query did: every row's label */
	if (has_label && (ps->want_classes || lo->label_is_text))
		learn_label(ps, vals[lo->label_attno - 1], &where);
	if ((ps->want_stats || ps->want_dicts) && has_label && !held_out)
		learn_features(ps, vals, isnull, &where);
	if (ps->cache != NULL && has_label && imputed_row(ps, vals, isnull))
		abandon_cache(ps);
	if (ps->cache != NULL)
	{
		ExecStoreVirtualTuple(rd->slot);
		rd->slot->tts_tid = tup->t_self;
		cache_row(ps, rd->slot, held_out);
		ExecClearTuple(rd->slot);
	}
	MemoryContextSwitchTo(old);
	MemoryContextReset(rd->row_cxt);
}

/*
 * The visible rows of heap pages [first, end), in page and line pointer
 * order, read as a sequential scan (heap_getnext) reads them
 * (io/heap_page.h: pruning, visibility against the snapshot a page at a
 * time, serializable reads), and each tuple is deformed straight from the pinned
 * page (heap_deform_tuple over the cut descriptor) rather than stored in a
 * slot: the same rows in the same order as heap_getnext gives, so the same
 * statistics.  The descriptor keeps the table's constraints, so a row
 * written before ADD COLUMN ... DEFAULT reads the column's default.
 */
static void
read_pages(PassState *ps, PassReader *rd, BlockNumber first, BlockNumber end)
{
	HeapTupleData tup;
	CpHeapPage	hp;

	for (BlockNumber page = first; page < Min(end, rd->n_pages); page++)
	{
		cp_heap_read_page(rd->scan, page, &hp);
		for (int i = 0; i < hp.n; i++)
		{
			cp_heap_page_tuple(&hp, i, &tup);
			pass_row(ps, rd, &tup);
		}
		rd->seen += hp.n;
	}
}


/*
 * How many blocks the statistics sample, or 0 to read every row.
 *
 * Only the standardizing and imputing statistics may come from a sample:
 * when the pass learns anything else (a dictionary, the classes, a text
 * label's values, the sparse dimension, which columns get a missing
 * indicator: all of which a single unsampled row may change), or reads
 * sparse rows, it reads every row.  A table of at most
 * corgipile.stats_sample_size pages is read whole, in physical order, as
 * before (the same statistics, bit for bit); a larger one samples blocks
 * (BlockShuffle's runs of pages, so that the sample's blocks can be cached
 * as whole blocks and epoch 1 reads them from memory) totalling about that
 * many pages, and at least CP_SAMPLE_MIN_BLOCKS blocks.
 */
static int64
sample_plan(const PassState *ps, BlockNumber n_pages)
{
	const CpLayout *lo = ps->lo;
	int64		k;

	if (cp_stats_sample_pages <= 0 || !ps->want_stats || ps->want_dicts ||
		ps->want_classes || ps->want_dim || lo->label_is_text ||
		ps->p->missing_indicator ||
		!(lo->mode == CP_FEATURES_ARRAY ||
		  (lo->mode == CP_FEATURES_COLUMNS && !lo->has_onehot)) ||
		n_pages <= (BlockNumber) cp_stats_sample_pages || ps->n_blocks == 0)
		return 0;
	k = ((int64) cp_stats_sample_pages + ps->pages_per_block - 1) / ps->pages_per_block;
	k = Max(k, CP_SAMPLE_MIN_BLOCKS);
	return k < (int64) ps->n_blocks ? k : 0;
}

/*
 * A sample of k of the n_blocks blocks, each chosen with the same
 * probability (Knuth's selection sampling, algorithm S: block b is taken
 * with probability (k - taken) / (n_blocks - b)), drawn from the training's
 * seed and read in ascending order, each block's successor prefetched.  The
 * sampled blocks go into the block cache while it has room, so that epoch
 * 1 reads them from memory: the table is read once in all.  Should the
 * sample hold no row to learn from (every sampled row NULL or held out),
 * the other blocks are read too.
 */
static void
read_sample(PassState *ps, PassReader *rd, int64 k)
{
	pg_prng_state rng;
	uint32	   *blocks = palloc_array(uint32, k);
	int64		taken = 0;
	uint32		ppb = ps->pages_per_block;

	pg_prng_seed(&rng, cp_derive_seed(rd->seed, CP_SAMPLE_STREAM));
	for (uint32 b = 0; b < ps->n_blocks && taken < k; b++)
		if (pg_prng_double(&rng) * (double) (ps->n_blocks - b) < (double) (k - taken))
			blocks[taken++] = b;
	for (int64 i = 0; i < taken; i++)
	{
		if (i + 1 < taken)
			cp_prefetch_range(&rd->prefetch, (BlockNumber) blocks[i + 1] * ppb,
							  Min((BlockNumber) blocks[i + 1] * ppb + ppb, rd->n_pages));
		read_pages(ps, rd, (BlockNumber) blocks[i] * ppb,
				   (BlockNumber) blocks[i] * ppb + ppb);
	}
	ps->sampled_blocks = taken;
	if (ps->n_rows == 0)
	{
		/* nothing to learn from in the sample: every block, then */
		int64		next = 0;

		for (uint32 b = 0; b < ps->n_blocks; b++)
		{
			if (next < taken && blocks[next] == b)
			{
				next++;
				continue;
			}
			read_pages(ps, rd, (BlockNumber) b * ppb, (BlockNumber) b * ppb + ppb);
		}
		ps->sampled_blocks = 0;
	}
	pfree(blocks);
}

/*
 * Read every row in physical order, or a sample of blocks (sample_plan).
 */
static void
read_table(PassState *ps, Relation rel, Snapshot snapshot, uint64 seed)
{
	CpLayout   *lo = ps->lo;
	PassReader	rd;
	int64		k;

	/*
	 * From the first page, never joining a synchronized scan mid-table: the
	 * statistics' last bits depend on the order rows are added in, and a
	 * seed must give the same model whatever else reads the table.
	 */
	rd.scan = cp_heap_begin(rel, snapshot, &rd.n_pages);
	rd.desc = CreateTupleDescCopyConstr(RelationGetDescr(rel));
	rd.desc->natts = Min(rd.desc->natts, lo->max_attno);
	rd.slot = MakeSingleTupleTableSlot(rd.desc, &TTSOpsVirtual);
	rd.row_cxt = AllocSetContextCreate(CurrentMemoryContext,
									   "corgipile first pass row",
									   ALLOCSET_DEFAULT_SIZES);
	rd.seed = seed;
	cp_prefetch_init(&rd.prefetch, rel);
	rd.seen = 0;
	rd.offsets_known = false;
	rd.offsets_fixed = false;

	k = sample_plan(ps, rd.n_pages);
	if (k > 0)
		read_sample(ps, &rd, k);
	else
		read_pages(ps, &rd, 0, rd.n_pages);
	if (ps->cache != NULL)
		flush_block(ps);
	cp_prefetch_end(&rd.prefetch);
	table_endscan(rd.scan);
	MemoryContextDelete(rd.row_cxt);
	ExecDropSingleTupleTableSlot(rd.slot);
	FreeTupleDesc(rd.desc);
}

/* The classes of softmax, from the labels' text, in class order. */
static void
finish_classes(PassState *ps)
{
	CpLayout   *lo = ps->lo;
	int			n = ps->classes->n_entries;
	char	  **names;

	if (n > CP_MAX_CLASSES)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("label column \"%s\" of \"%s\" has more than %d distinct values",
						lo->label_name, lo->relname, CP_MAX_CLASSES),
				 errhint("A softmax model takes a label with few classes; use 'linear' for a continuous one.")));
	if (n < 2)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_EXCEPTION),
				 errmsg("label column \"%s\" of \"%s\" has %d distinct value%s; softmax needs at least two classes",
						lo->label_name, lo->relname, n, n == 1 ? "" : "s")));
	cp_prep_dict_finish(ps->classes);
	names = palloc_array(char *, n);
	/* the dictionary's values, NUL-terminated there, not copied: they may be long */
	for (int c = 0; c < n; c++)
	{
		int32		len;

		names[c] = (char *) cp_prep_dict_value(ps->classes, c, &len);
	}
	/* integer classes are sorted by value there */
	lo->classes = cp_class_map_from_names(lo->label_type, names, n);
}

static void
finish_labels(PassState *ps)
{
	CpLayout   *lo = ps->lo;

	if (ps->labels->n_entries != 2)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_EXCEPTION),
				 errmsg("label column \"%s\" of relation \"%s\" has %d distinct value%s; a %s model needs two",
						lo->label_name, lo->relname, ps->labels->n_entries,
						ps->labels->n_entries == 1 ? "" : "s",
						cp_model_kind_name(lo->model))));
	cp_prep_dict_finish(ps->labels);
	lo->label_dict = ps->labels;
}

/*
 * What a NULL number of statistics slot s becomes (missing => ...): the
 * mean or the median of the values learnt, or 0.  name: the column or
 * array, for the error when it had no value at all.
 */
static double
imputed_value(const PassState *ps, int s, const char *name)
{
	if (ps->p->missing == CP_MISSING_ZERO)
		return 0.0;
	if (ps->stats.count[s] == 0)
		ereport(ERROR,
				(errcode(ERRCODE_NO_DATA),
				 errmsg("%s of relation \"%s\" has no non-NULL value to learn its %s from",
						name, ps->lo->relname, cp_missing_name(ps->p->missing)),
				 errhint("Leave it out of features, or train with missing => 'zero'.")));
	return ps->p->missing == CP_MISSING_MEDIAN ? ps->medians[s] : ps->stats.mean[s];
}

/* The model's encoding and transform from what the pass learnt. */
static CpPrep *
build_prep(PassState *ps)
{
	CpLayout   *lo = ps->lo;
	CpPrep	   *prep = palloc0(sizeof(CpPrep));
	int32		at = 0;
	int32	   *stats_col = NULL;
	int32		n_indicators = 0;

	prep->standardize = ps->standardize;
	prep->n_rows = ps->n_rows;
	prep->sampled_blocks = ps->sampled_blocks;
	if (lo->mode == CP_FEATURES_COLUMNS)
	{
		prep->n_columns = lo->n_columns;
		prep->columns = palloc0_array(CpPrepColumn, lo->n_columns);
		for (int i = 0; i < lo->n_columns; i++)
		{
			CpPrepColumn *col = &prep->columns[i];

			col->name = list_nth(lo->feature_names, i);
			col->offset = at;
			if (lo->column_onehot && lo->column_onehot[i])
			{
				col->onehot = true;
				col->dict = ps->dicts[i];
				col->nulls_seen = ps->nulls_seen[i];
				cp_prep_dict_finish(col->dict);
				/* a column with only NULLs still takes one (always 0) slot */
				col->width = Max(col->dict->n_entries, 1);
				if (col->dict->n_entries == 0)
					ereport(ERROR,
							(errcode(ERRCODE_NO_DATA),
							 errmsg("column \"%s\" of relation \"%s\" has no non-NULL value to learn categories from",
									col->name, lo->relname),
							 errhint("Leave the column out of features.")));
			}
			else
				col->width = 1;
			if (at > PG_INT32_MAX - col->width)
				ereport(ERROR,
						(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
						 errmsg("the features of \"%s\" encode to too many columns",
								lo->relname)));
			at += col->width;
		}
		if (lo->has_onehot && ps->p->n_features > 0 && ps->p->n_features != at)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("corgipile.train: n_features is %d but the feature columns encode to %d features",
							ps->p->n_features, at)));
	}
	else
		at = lo->n_features > 0 ? lo->n_features :
			(ps->stats_ready ? ps->stats.n_features : 0);

	/*
	 * Imputation: a missing indicator after every column's own positions
	 * for each number column that had NULLs, then the fill of every number
	 * (the statistics' slot s of position j).
	 */
	if (ps->want_missing && lo->mode == CP_FEATURES_COLUMNS && ps->p->missing_indicator)
		for (int i = 0; i < lo->n_columns; i++)
			if (!prep->columns[i].onehot && ps->nulls_seen[i])
				n_indicators++;
	prep->n_features = at + n_indicators;
	if (ps->want_missing && at > 0)
	{
		if (ps->n_median > 0)
			median_finish(ps);
		cp_prep_init_missing(prep, ps->p->missing, ps->p->missing_indicator);
		for (int i = 0; lo->mode == CP_FEATURES_COLUMNS && i < lo->n_columns; i++)
		{
			CpPrepColumn *col = &prep->columns[i];

			if (col->onehot)
				continue;
			col->nulls_seen = ps->nulls_seen[i];
			prep->fill[col->offset] =
				imputed_value(ps, ps->numeric_index[i],
							  psprintf("column \"%s\"", col->name));
			if (prep->indicator != NULL && col->nulls_seen)
				prep->indicator[col->offset] = at + prep->n_indicators++;
		}
		for (int32 j = 0; lo->mode == CP_FEATURES_ARRAY && j < at; j++)
			prep->fill[j] = imputed_value(ps, j,
										  psprintf("element %d of column \"%s\"", j + 1,
												   (char *) linitial(lo->feature_names)));
	}
	/* sparse rows may not have reached the last indices: size them now */
	if (lo->mode != CP_FEATURES_COLUMNS && at > 0 && ps->want_stats)
		ensure_stats(ps, at);
	if (at <= 0 || !ps->want_stats || !ps->scale || ps->stats_too_big)
	{
		/* nothing scaled (e.g. only category columns): say so */
		prep->standardize = CP_STANDARDIZE_OFF;
		return prep;
	}

	prep->transform = palloc0(sizeof(CpPrepTransform));
	if (!cp_prep_transform_init(prep->transform, prep->n_features,
								ps->standardize == CP_STANDARDIZE_ON, cp_prep_palloc0))
		elog(ERROR, "corgipile: could not size the transform of %d features", prep->n_features);
	prep->means = palloc0_array(double, prep->n_features);
	prep->stds = palloc0_array(double, prep->n_features);
	if (lo->mode == CP_FEATURES_COLUMNS)
	{
		int			i = 0;

		/*
		 * a numeric column's statistics slot; one-hot and missing indicators
		 * (after every column's positions) stay 0/1 (-1)
		 */
		stats_col = palloc_array(int32, prep->n_features);
		for (int32 j = 0; j < prep->n_features; j++)
		{
			while (i + 1 < lo->n_columns && prep->columns[i + 1].offset <= j)
				i++;
			stats_col[j] = j >= at || prep->columns[i].onehot ? -1 : ps->numeric_index[i];
		}
	}
	/* the columns as imputed (a scikit-learn imputer, then the scaler) */
	prep->n_constant = cp_prep_transform_from_stats(prep->transform, &ps->stats,
													stats_col, prep->fill,
													prep->means, prep->stds);
	return prep;
}

/* Adopt a warm start model's stored preprocessing (or its absence). */
static void
adopt_warm(PassState *ps)
{
	CpLayout   *lo = ps->lo;
	CpStoredModel *w = cp_models_load(ps->p->warm_start);

	/* the new model would store it, readable by this role */
	cp_models_check_may_see_data(w, "A warm start from it");

	/* SGD's warm start checks say what does not fit */
	if (w->mode != lo->mode ||
		(w->prep != NULL && lo->n_features > 0 && w->prep->n_features != lo->n_features))
		return;
	cp_layout_use_prep(lo, w->prep, w->model_name);
}

/* The transform, applied to a cached row (cp_block_cache_map_dense). */
static void
transform_row(double *row, const void *arg)
{
	cp_prep_apply_dense((const CpPrepTransform *) arg, row);
}

/*
 * What the pass is to learn for this layout and these parameters, and the
 * (empty) dictionaries and statistics it learns into.  The caller has
 * switched to cxt.
 */
static void
pass_setup(PassState *ps, CpLayout *lo, const CpTrainParams *p,
		   MemoryContext cxt, uint32 pages_per_block, uint32 n_blocks)
{
	bool		warm = p->warm_start != NULL;

	memset(ps, 0, sizeof(*ps));
	ps->lo = lo;
	ps->p = p;
	ps->cxt = cxt;
	ps->standardize = resolve_standardize(lo, p->standardize);
	ps->scale = ps->standardize != CP_STANDARDIZE_OFF;
	ps->want_missing = p->missing != CP_MISSING_SKIP && !warm;
	if (ps->want_missing && lo->mode == CP_FEATURES_SPARSE)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("corgipile.train: missing => '%s' imputes NULL numbers of feature columns and arrays, not sparse features",
						cp_missing_name(p->missing)),
				 errdetail("A sparse row's absent entries are zeros already; a row with a NULL index or value array is skipped."),
				 errhint("Leave missing at 'skip' for sparse features.")));
	if (p->missing_indicator && lo->mode != CP_FEATURES_COLUMNS && !warm)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("corgipile.train: missing_indicator needs feature columns; \"%s\" is an array",
						(char *) linitial(lo->feature_names)),
				 errdetail("An array model has one weight per element."),
				 errhint("Name the features as columns, or train without missing_indicator.")));
	/* the imputed statistic and which columns had NULLs come with them */
	ps->want_stats = (ps->scale || ps->want_missing) && !warm;
	ps->want_dicts = lo->has_onehot && !warm;
	ps->want_classes = lo->model == CP_MODEL_SOFTMAX;
	ps->want_dim = lo->mode == CP_FEATURES_SPARSE && lo->n_features == 0;
	ps->max_index = -1;
	ps->byte_budget = (uint64) work_mem * 1024;
	ps->pages_per_block = Max(pages_per_block, 1);
	ps->n_blocks = n_blocks;

	if (ps->want_classes)
	{
		ps->classes = palloc0(sizeof(CpPrepDict));
		if (!cp_prep_dict_init(ps->classes, CP_MAX_CLASSES + 1, cp_prep_palloc0))
			elog(ERROR, "corgipile: could not size the class dictionary");
	}
	if (lo->label_is_text)
	{
		ps->labels = palloc0(sizeof(CpPrepDict));
		if (!cp_prep_dict_init(ps->labels, 2, cp_prep_palloc0))
			elog(ERROR, "corgipile: could not size the label dictionary");
	}
	if (lo->mode == CP_FEATURES_COLUMNS)
	{
		ps->dicts = palloc0_array(CpPrepDict *, lo->n_columns);
		ps->nulls_seen = palloc0_array(bool, lo->n_columns);
		ps->numeric_index = palloc_array(int, lo->n_columns);
		for (int i = 0; i < lo->n_columns; i++)
		{
			ps->numeric_index[i] = -1;
			if (lo->column_onehot && lo->column_onehot[i])
			{
				if (!ps->want_dicts)
					continue;
				/* the dictionary's tables are sized for max_categories now */
				ps->dict_bytes += dict_table_bytes(p->max_categories);
				if (ps->dict_bytes > ps->byte_budget)
					ereport(ERROR,
							(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
							 errmsg("the category dictionaries of relation \"%s\" would take more than work_mem (%d kB)",
									lo->relname, work_mem),
							 errdetail("Each text or boolean feature column takes %llu bytes for max_categories %d, before its values.",
									   (unsigned long long) dict_table_bytes(p->max_categories),
									   p->max_categories),
							 errhint("Lower max_categories, name fewer category columns, or raise work_mem.")));
				ps->dicts[i] = palloc0(sizeof(CpPrepDict));
				if (!cp_prep_dict_init(ps->dicts[i], p->max_categories, cp_prep_palloc0))
					ereport(ERROR,
							(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
							 errmsg("corgipile.train: max_categories %d is too large",
									p->max_categories)));
			}
			else
				ps->numeric_index[i] = ps->n_numeric++;
		}
		if (ps->want_stats && ps->n_numeric > 0)
		{
			ensure_stats(ps, ps->n_numeric);
			ensure_row(ps, ps->n_numeric);
		}
		else if (ps->want_stats)
		{
			/* only categories: nothing to scale or impute */
			ps->want_stats = false;
			ps->want_missing = false;
		}
	}
	else if (ps->want_stats && lo->n_features > 0)
	{
		ensure_stats(ps, lo->n_features);
		ensure_row(ps, lo->n_features);
	}
}

/*
 * The layout's shape and preprocessing from what the pass learnt (or what
 * the shards' passes learnt, merged: dist_stats below).
 */
static void
pass_finish(PassState *ps)
{
	CpLayout   *lo = ps->lo;
	bool		warm = ps->p->warm_start != NULL;

	if (ps->want_dim)
	{
		if (ps->max_index < 0)
			ereport(ERROR,
					(errcode(ERRCODE_NO_DATA),
					 errmsg("relation \"%s\" has no feature indices to train on",
							lo->relname)));
		if (ps->max_index >= PG_INT32_MAX)
			ereport(ERROR,
					(errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
					 errmsg("feature index %lld in relation \"%s\" is out of range",
							(long long) ps->max_index, lo->relname)));
		lo->n_features = (int) ps->max_index + 1;
	}
	if (ps->want_classes)
		finish_classes(ps);
	if (lo->label_is_text)
		finish_labels(ps);
	if (warm)
		adopt_warm(ps);
	else if (ps->want_stats || ps->want_dicts)
		cp_layout_use_prep(lo, build_prep(ps), "(being trained)");
}

/*
 * The rows the pass cached, standardized now as epoch 1 would convert
 * them; false when epoch 1 would convert them otherwise (no transform of
 * the rows' width: statistics too big to keep), and they must be dropped.
 * Rows converted without a transform are epoch 1's when nothing is scaled
 * (missing => ... with standardize => 'off': no cached row had a NULL to
 * impute).
 */
static bool
convert_cached(const PassState *ps, CpBlockCache *cache)
{
	const CpLayout *lo = ps->lo;
	const CpPrepTransform *t = lo->prep ? lo->prep->transform : NULL;

	if (t != NULL && t->n_features == lo->n_features)
		cp_block_cache_map_dense(cache, transform_row, t);
	else if (!(t == NULL && lo->prep != NULL && lo->prep->fill != NULL &&
			   !ps->scale && lo->prep->n_indicators == 0))
		return false;
	cache->prefilled = cache->n_cached;
	return true;
}

/*
 * Before epoch 1: learn what the layout needs, and attach the model's
 * preprocessing to it (lo->prep, NULL when nothing is encoded or scaled).
 * Everything lives in cxt, the training's memory.  cache, when not NULL,
 * is the training's block cache, still empty: the pass may fill it with
 * the rows epoch 1 would read (fill_cache_wanted), a block being
 * pages_per_block heap pages (BlockShuffle's).
 */
void
cp_prep_first_pass(CpLayout *lo, Relation rel, Snapshot snapshot,
				   const CpTrainParams *p, uint64 seed, MemoryContext cxt,
				   CpBlockCache *cache, uint32 pages_per_block, uint32 n_blocks)
{
	PassState	ps;
	MemoryContext old;

	old = MemoryContextSwitchTo(cxt);
	pass_setup(&ps, lo, p, cxt, pages_per_block, n_blocks);
	ps.want_median = ps.want_missing && p->missing == CP_MISSING_MEDIAN;
	start_cache_fill(&ps, cache, cxt);
	if (ps.want_stats || ps.want_dicts || ps.want_classes || ps.want_dim ||
		lo->label_is_text)
	{
		instr_time	start;
		instr_time	elapsed;

		INSTR_TIME_SET_CURRENT(start);
		read_table(&ps, rel, snapshot, seed);
		INSTR_TIME_SET_CURRENT(elapsed);
		INSTR_TIME_SUBTRACT(elapsed, start);
		/* scripts/bench_first_pass.py reads this */
		ereport(DEBUG1,
				(errmsg_internal("corgipile: first pass over \"%s\": %.6f s, " INT64_FORMAT " rows learnt from, " INT64_FORMAT " of %u blocks sampled (0: every row read)",
								 lo->relname, INSTR_TIME_GET_DOUBLE(elapsed), ps.n_rows,
								 ps.sampled_blocks, ps.n_blocks)));
	}

	pass_finish(&ps);

	/* the cached rows: converted now, or dropped (convert_cached) */
	if (cache != NULL && cache->n_cached > 0 && ps.block_rows.memcxt != NULL &&
		!convert_cached(&ps, cache))
	{
		ps.cache = cache;
		abandon_cache(&ps);
	}
	if (ps.block_rows.memcxt != NULL)
	{
		cp_buffer_free(&ps.block_rows);
		cp_buffer_free(&ps.block_held);
	}
	MemoryContextSwitchTo(old);
}

/*
 * Distributed training (docs/distributed.md): each shard's pass learns on
 * its worker and sends what it learnt, in the form below, to the
 * coordinator, which merges every shard's into one (statistics by Chan's
 * combination, dictionaries as the union of their values, the sparse
 * dimension as the largest index) and sends that to every shard: each
 * then finishes the pass on the merged state as a single-node pass
 * finishes on its own, so every node gets the same preprocessing, and the
 * one a single-node pass over the same rows would learn (dictionary codes
 * are sorted values, whatever the order values came in).
 */
#define DIST_STATS_VERSION 1

static void
send_dict(StringInfo out, const CpPrepDict *d)
{
	if (d == NULL)
	{
		pq_sendint32(out, -1);
		return;
	}
	pq_sendint32(out, d->n_entries);
	for (int32 e = 0; e < d->n_entries; e++)
	{
		pq_sendint32(out, d->entries[e].len);
		pq_sendbytes(out, d->entries[e].str, d->entries[e].len);
	}
}

static void
dist_stats_send(const PassState *ps, StringInfo out)
{
	const CpLayout *lo = ps->lo;
	int			n_columns = lo->mode == CP_FEATURES_COLUMNS ? lo->n_columns : 0;

	pq_sendbyte(out, DIST_STATS_VERSION);
	pq_sendint64(out, ps->n_rows);
	pq_sendint64(out, ps->sampled_blocks);
	pq_sendint64(out, ps->max_index);
	pq_sendbyte(out, ps->stats_too_big);
	pq_sendint32(out, ps->stats_ready ? ps->stats.n_features : -1);
	if (ps->stats_ready)
	{
		pq_sendint64(out, ps->stats.n_rows);
		for (int32 j = 0; j < ps->stats.n_features; j++)
		{
			pq_sendint64(out, ps->stats.count[j]);
			pq_sendfloat8(out, ps->stats.mean[j]);
			pq_sendfloat8(out, ps->stats.m2[j]);
		}
	}
	pq_sendint32(out, n_columns);
	for (int i = 0; i < n_columns; i++)
	{
		pq_sendbyte(out, ps->nulls_seen ? ps->nulls_seen[i] : false);
		send_dict(out, ps->dicts ? ps->dicts[i] : NULL);
	}
	send_dict(out, ps->classes);
	send_dict(out, ps->labels);
}

static void
dist_stats_damaged(const char *what)
{
	ereport(ERROR,
			(errcode(ERRCODE_DATA_CORRUPTED),
			 errmsg("corgipile: a shard's statistics do not fit this training (%s)", what),
			 errhint("Every node must run the same corgipile version.")));
}

/* Merge one dictionary's values (in their first-seen order) into d. */
static void
merge_dict(PassState *ps, StringInfo in, CpPrepDict *d, uint64 *stored,
		   const char *what)
{
	int32		n = pq_getmsgint(in, 4);

	if (n < 0)
	{
		if (d != NULL)
			dist_stats_damaged(what);
		return;
	}
	if (d == NULL)
		dist_stats_damaged(what);
	for (int32 e = 0; e < n; e++)
	{
		int32		len = pq_getmsgint(in, 4);
		const char *s;

		if (len < 0 || len > in->len - in->cursor)
			dist_stats_damaged(what);
		s = pq_getmsgbytes(in, len);
		switch (learn_value(ps, d, stored, s, len))
		{
			case LEARN_KNOWN:
			case LEARN_ADDED:
				break;
			case LEARN_FULL:
				ereport(ERROR,
						(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
						 errmsg("%s of relation \"%s\" has more than %d distinct values",
								what, ps->lo->relname, d->max_categories),
						 d == ps->labels ?
						 errhint("Use model 'softmax' for more than two classes.") :
						 errhint("Raise max_categories, or leave the column out of features.")));
				break;
			case LEARN_OVER_STORE:
			case LEARN_OVER_BUDGET:
			case LEARN_NO_MEMORY:
				ereport(ERROR,
						(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
						 errmsg("the values of %s of relation \"%s\" take more than work_mem (%d kB) or than a model can store",
								what, ps->lo->relname, work_mem)));
				break;
		}
	}
}

static void
dist_stats_merge(PassState *ps, StringInfo in)
{
	CpLayout   *lo = ps->lo;
	int32		n_stats;
	int32		n_columns;
	int64		max_index;

	if (pq_getmsgbyte(in) != DIST_STATS_VERSION)
		dist_stats_damaged("format version");
	ps->n_rows += pq_getmsgint64(in);
	ps->sampled_blocks += pq_getmsgint64(in);
	max_index = pq_getmsgint64(in);
	ps->max_index = Max(ps->max_index, max_index);
	ps->stats_too_big |= pq_getmsgbyte(in) != 0;
	n_stats = pq_getmsgint(in, 4);
	if (n_stats >= 0)
	{
		CpPrepStats from;

		if (!ps->want_stats || (int64) n_stats * 24 > in->len - in->cursor)
			dist_stats_damaged("statistics");
		ensure_stats(ps, n_stats);
		if (ps->stats_too_big)
			dist_stats_damaged("statistics");
		if (!cp_prep_stats_init(&from, ps->stats.n_features, cp_prep_palloc0))
			elog(ERROR, "corgipile: could not size the statistics of %d features",
				 ps->stats.n_features);
		from.n_rows = pq_getmsgint64(in);
		for (int32 j = 0; j < n_stats; j++)
		{
			from.count[j] = pq_getmsgint64(in);
			from.mean[j] = pq_getmsgfloat8(in);
			from.m2[j] = pq_getmsgfloat8(in);
		}
		cp_prep_stats_merge(&ps->stats, &from);
		pfree(from.count);
		pfree(from.mean);
		pfree(from.m2);
	}
	n_columns = pq_getmsgint(in, 4);
	if (n_columns != (lo->mode == CP_FEATURES_COLUMNS ? lo->n_columns : 0))
		dist_stats_damaged("feature columns");
	for (int i = 0; i < n_columns; i++)
	{
		bool		nulls = pq_getmsgbyte(in) != 0;

		if (ps->nulls_seen)
			ps->nulls_seen[i] |= nulls;
		merge_dict(ps, in, ps->dicts ? ps->dicts[i] : NULL, &ps->stored_categories,
				   psprintf("column \"%s\"", (char *) list_nth(lo->feature_names, i)));
	}
	merge_dict(ps, in, ps->classes, &ps->stored_labels,
			   psprintf("label column \"%s\"", lo->label_name));
	merge_dict(ps, in, ps->labels, &ps->stored_labels,
			   psprintf("label column \"%s\"", lo->label_name));
	if (in->cursor != in->len)
		dist_stats_damaged("trailing bytes");
}

/* Why a training's first pass cannot be merged across shards, or NULL. */
const char *
cp_prep_dist_unsupported(const CpTrainParams *p)
{
	if (p->missing == CP_MISSING_MEDIAN)
		return "missing => 'median' (a median is not merged from the shards' medians)";
	if (p->warm_start != NULL)
		return "warm_start";
	return NULL;
}

/*
 * On a shard's worker: the pass over the shard, learning what
 * cp_prep_first_pass learns, sent to out rather than finished.  As on one
 * node, the pass may fill the block cache with the rows it reads, raw until
 * the merged pass is finished (cp_prep_dist_finish), so that epoch 1 does
 * not read the shard again.
 */
void
cp_prep_dist_stats(CpLayout *lo, Relation rel, Snapshot snapshot,
				   const CpTrainParams *p, uint64 seed, MemoryContext cxt,
				   CpBlockCache *cache, uint32 pages_per_block, uint32 n_blocks,
				   StringInfo out)
{
	PassState	ps;
	MemoryContext old = MemoryContextSwitchTo(cxt);

	pass_setup(&ps, lo, p, cxt, pages_per_block, n_blocks);
	start_cache_fill(&ps, cache, cxt);
	if (ps.want_stats || ps.want_dicts || ps.want_classes || ps.want_dim ||
		lo->label_is_text)
		read_table(&ps, rel, snapshot, seed);
	if (ps.block_rows.memcxt != NULL)
	{
		cp_buffer_free(&ps.block_rows);
		cp_buffer_free(&ps.block_held);
	}
	dist_stats_send(&ps, out);
	MemoryContextSwitchTo(old);
}

/*
 * The shards' states (a List of StringInfo), merged in list order and
 * finished into lo as cp_prep_first_pass would; the merged state is also
 * sent to merged_out when not NULL (the coordinator sends it to every
 * shard, which finishes it in turn).
 */
void
cp_prep_dist_finish(CpLayout *lo, const CpTrainParams *p, MemoryContext cxt,
					List *states, StringInfo merged_out, CpBlockCache *cache)
{
	PassState	ps;
	MemoryContext old = MemoryContextSwitchTo(cxt);
	ListCell   *lc;

	pass_setup(&ps, lo, p, cxt, 1, 0);
	foreach(lc, states)
		dist_stats_merge(&ps, (StringInfo) lfirst(lc));
	if (merged_out != NULL)
		dist_stats_send(&ps, merged_out);
	pass_finish(&ps);

	/* a shard's rows cached raw by its pass: converted as cp_prep_first_pass does */
	if (cache != NULL && cache->n_cached > 0 && cache->prefilled == 0 &&
		!convert_cached(&ps, cache))
	{
		/* nothing read before the shard's pass: its counts start at 0 */
		cp_block_cache_reset(cache);
		lo->n_skipped = 0;
		lo->n_null_label = 0;
	}
	MemoryContextSwitchTo(old);
}
