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
#include "nodes/bitmapset.h"
#include "utils/palloc.h"
#include "utils/rel.h"
#include "utils/snapshot.h"

#include "core/buffer.h"
#include "params.h"

typedef enum CpFeatureMode
{
	CP_FEATURES_ARRAY,			/* one float4[]/float8[]/... column */
	CP_FEATURES_COLUMNS,		/* a list of numeric columns */
	CP_FEATURES_SPARSE,			/* an index array and a value array */
	CP_FEATURES_NONE			/* no label or features: row ids only */
} CpFeatureMode;

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
} CpLayout;

extern void cp_layout_resolve(CpLayout *lo, TupleDesc tupdesc,
							  const char *relname, const CpTrainParams *p);
extern void cp_layout_ids_only(CpLayout *lo, TupleDesc tupdesc, const char *relname);
extern Bitmapset *cp_layout_columns(const CpLayout *lo);
extern const char *cp_layout_mode_name(CpFeatureMode mode);
extern void cp_buffer_init(CpBuffer *buf, MemoryContext cxt, bool sparse);
extern void cp_buffer_init_with_ids(CpBuffer *buf, MemoryContext cxt, bool sparse);
extern void cp_buffer_reset(CpBuffer *buf, int n_features);
extern void cp_buffer_reserve(CpBuffer *buf, int64 rows, int64 values);
extern void cp_buffer_free(CpBuffer *buf);
extern bool cp_layout_append(CpLayout *lo, TupleTableSlot *slot, CpBuffer *buf);
extern void cp_buffer_append_row(CpBuffer *dst, const CpBuffer *src, int64 row);

typedef void (*CpBatchFn) (const CpBuffer *buf, void *arg);
extern void cp_layout_scan(CpLayout *lo, Relation rel, Snapshot snapshot,
						   CpBuffer *buf, int64 batch, MemoryContext row_cxt,
						   CpBatchFn fn, void *arg);
extern CpClassMap *cp_class_map_scan(Relation rel, const CpLayout *lo);
extern CpClassMap *cp_class_map_from_names(Oid type, char **names, int n);
extern bool cp_is_class_label_type(Oid type);

#endif							/* CORGIPILE_LAYOUT_H */
