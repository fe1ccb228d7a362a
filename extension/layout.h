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

#include "core/buffer.h"
#include "params.h"

typedef enum CpFeatureMode
{
	CP_FEATURES_ARRAY,			/* one float4[]/float8[]/... column */
	CP_FEATURES_COLUMNS,		/* a list of numeric columns */
	CP_FEATURES_SPARSE			/* an index array and a value array */
} CpFeatureMode;

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

	/* which label values have been seen, for the label convention */
	bool		seen_minus_one;
	bool		seen_zero;
	bool		seen_one;

	int64		n_skipped;		/* rows with a NULL label or features */
} CpLayout;

extern void cp_layout_resolve(CpLayout *lo, TupleDesc tupdesc,
							  const char *relname, const CpTrainParams *p);
extern Bitmapset *cp_layout_columns(const CpLayout *lo);
extern const char *cp_layout_mode_name(CpFeatureMode mode);
extern void cp_buffer_init(CpBuffer *buf, MemoryContext cxt, bool sparse);
extern void cp_buffer_reset(CpBuffer *buf, int n_features);
extern bool cp_layout_append(CpLayout *lo, TupleTableSlot *slot, CpBuffer *buf);

#endif							/* CORGIPILE_LAYOUT_H */
