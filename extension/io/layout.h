/*-------------------------------------------------------------------------
 *
 * layout.h
 *	  Which columns hold the label and the features, and how a row of them
 *	  becomes a row of a CpBuffer.
 *
 *-------------------------------------------------------------------------
 */
#ifndef CORGIPILE_LAYOUT_H
#define CORGIPILE_LAYOUT_H

#include "postgres.h"

#include "access/tupdesc.h"
#include "executor/tuptable.h"
#include "utils/array.h"
#include "nodes/bitmapset.h"
#include "utils/palloc.h"
#include "utils/rel.h"
#include "utils/snapshot.h"

#include "core/buffer.h"
#include "io/buffer.h"
#include "io/features.h"
#include "io/prep.h"
#include "core/preprocess.h"
#include "params/params.h"

/* The classes of a softmax model, in class order. */
typedef struct CpClassMap
{
	Oid			type;			/* the label column's base type */
	bool		is_text;		/* text labels; else integers or booleans */
	int			n_classes;
	int64	   *keys;			/* integer labels (booleans as 0/1), sorted */
	char	  **names;			/* each class as text, in class order */
} CpClassMap;

/* a softmax model has at most this many classes */
#define CP_MAX_CLASSES 10000

typedef struct CpLayout
{
	char	   *relname;
	const char *use;			/* what rows are read for, in error hints:
								 * "training" unless the reader says */
	CpModelKind model;

	AttrNumber	label_attno;
	Oid			label_type;
	char	   *label_name;

	CpFeatureMode mode;
	AttrNumber	values_attno;	/* ARRAY and SPARSE: the values array */
	AttrNumber	indices_attno;	/* SPARSE: the index array */
	char	   *indices_name;
	int			n_columns;		/* COLUMNS */
	AttrNumber *column_attnos;
	Oid		   *column_types;
	List	   *feature_names;	/* the feature column names (char *) */
	AttrNumber	max_attno;

	int			n_features;		/* 0 until known */

	/*
	 * Preprocessing: which feature columns are categories (text, varchar,
	 * boolean: one-hot encoded), the model's encoding and transform once
	 * learnt (NULL: raw numbers), and a
	 * binary classifier's text label dictionary (code 0 is -1, code 1 +1).
	 */
	bool	   *column_onehot;	/* COLUMNS: per column */
	bool		has_onehot;
	bool		label_is_text;
	const CpPrep *prep;
	CpPrepDict *label_dict;
	int64		n_unseen;		/* category values encoded as all zeros */

	/* where rows come from, for inspecting orders (shuffled_scan) */
	bool		with_ids;
	AttrNumber	id_attno;		/* an integer column named id, or 0 */
	Oid			id_type;

	CpClassMap *classes;		/* softmax: label -> class number */

	/* which label values have been seen, for the label convention */
	bool		seen_minus_one;
	bool		seen_zero;
	bool		seen_one;

	int64		n_skipped;		/* rows with a NULL label or features */
	int64		n_null_label;	/* ... of which with a NULL label */
} CpLayout;

/*
 * Rows are held sparse (CSR) in buffers: the sparse layout, and the
 * columns layout with category columns, whose one-hot indicators would
 * otherwise take rows x categories doubles.
 */
static inline bool
cp_layout_sparse_rows(const CpLayout *lo)
{
	return lo->mode == CP_FEATURES_SPARSE ||
		(lo->mode == CP_FEATURES_COLUMNS && lo->has_onehot);
}

extern void cp_layout_resolve(CpLayout *lo, TupleDesc tupdesc,
							  const char *relname, const CpTrainParams *p);
extern void cp_layout_ids_only(CpLayout *lo, TupleDesc tupdesc, const char *relname);
extern Bitmapset *cp_layout_columns(const CpLayout *lo);
extern const char *cp_layout_mode_name(CpFeatureMode mode);
extern Size cp_training_buffer_budget(const CpSizing *sizing, Relation rel);

/*
 * A training buffer may take the larger of work_mem and this many times
 * the bytes of the table it holds (heap and TOAST pages, buffer_size's
 * share): converted rows take at most ~12 times their heap bytes (a
 * boolean or one-byte text becomes a 12-byte sparse entry), and a window
 * strategy's store holds a few buffers' rows.  Only values that pack much
 * denser on disk than in memory (compressed arrays) can reach it.
 */
#define CP_BUFFER_BUDGET_FACTOR 32
/* ... and that share is at least this many rows' pages (a window's store) */
#define CP_BUFFER_BUDGET_MIN_ROWS 4096
extern bool cp_layout_append(CpLayout *lo, TupleTableSlot *slot, CpBuffer *buf);
extern bool cp_layout_append_float8(CpLayout *lo, Datum label, const ArrayType *arr,
									ItemPointer tid, CpBuffer *buf);
extern void cp_layout_append_converted(CpLayout *lo, TupleTableSlot *slot, CpBuffer *buf,
									   const double *x);

typedef void (*CpBatchFn) (const CpBuffer *buf, void *arg);
extern void cp_layout_scan(CpLayout *lo, Relation rel, Snapshot snapshot,
						   CpBuffer *buf, int64 batch, MemoryContext row_cxt,
						   CpBatchFn fn, void *arg);
extern CpClassMap *cp_class_map_from_names(Oid type, char **names, int n);
extern bool cp_is_class_label_type(Oid type);
extern bool cp_is_text_label_type(Oid type);
extern void cp_layout_check_label_kind(const CpLayout *lo, bool text_classes,
									   const char *model_name);
extern void cp_layout_use_prep(CpLayout *lo, const CpPrep *prep,
							   const char *model_name);
extern void cp_layout_share_encoding(CpLayout *dst, const CpLayout *src,
									 const char *model_name);
extern CpPrepDict *cp_label_dict_from_names(char **names, int n,
											const char *model_name);

#endif							/* CORGIPILE_LAYOUT_H */
