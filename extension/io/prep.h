/*-------------------------------------------------------------------------
 *
 * prep.h
 *	  The preprocessing a model carries: which feature
 *	  columns are one-hot encoded and with which dictionary, where each
 *	  column lands in the model's feature vector, and the standardizing
 *	  transform.  Learnt by a first pass over the table before epoch 1
 *	  (nodes/first_pass.c), stored as the model's preprocess jsonb, rebuilt
 *	  from it for predict*() and evaluate().  The arithmetic is the plain-C
 *	  core's (core/preprocess.h); this is the server-side glue.
 *
 *-------------------------------------------------------------------------
 */
#ifndef CORGIPILE_PREPROCESS_MODEL_H
#define CORGIPILE_PREPROCESS_MODEL_H

#include "postgres.h"

#include "lib/stringinfo.h"
#include "utils/jsonb.h"

#include "core/preprocess.h"
#include "io/features.h"
#include "params/params.h"

/* One feature column of the columns layout. */
typedef struct CpPrepColumn
{
	char	   *name;
	bool		onehot;			/* a text, varchar or boolean column */
	CpPrepDict *dict;			/* onehot: its categories */
	int32		offset;			/* its first position in the model's vector */
	int32		width;			/* 1, or the number of categories */

	/*
	 * The training rows had NULLs in this column.  onehot: a NULL is
	 * encoded as all zeros either way (the column's reference level); it
	 * counts as an unseen value only when training never met one (and in
	 * models stored before 0.4.0, whose preprocess does not say), or for a
	 * role that may not see the training rows (model_load.c).  A number:
	 * with missing_indicator, the column has an indicator feature.
	 */
	bool		nulls_seen;
} CpPrepColumn;

typedef struct CpPrep
{
	CpStandardize standardize;	/* resolved: ON, SCALE_ONLY or OFF */
	int32		n_columns;		/* columns layout: one per feature column;
								 * 0 for the array and sparse layouts */
	CpPrepColumn *columns;
	int32		n_features;		/* the model's dimension */
	CpPrepTransform *transform; /* NULL when standardize is off */
	double	   *means;			/* n_features, what is stored; NULL if off */
	double	   *stds;
	int32		n_constant;		/* constant numeric columns (std 0) */
	int64		n_rows;			/* rows the statistics were learnt from */
	int64		sampled_blocks; /* blocks they were sampled from, 0: every
								 * row was read (params.stats_sample_blocks) */

	/*
	 * Imputation (missing => ...).  fill[j] is what a NULL number at model
	 * position j becomes, in the feature's original units (the transform
	 * applies after it); NULL when missing is skip: such a row is left out
	 * and such a prediction is NULL, as before 0.4.0.  With
	 * missing_indicator, each number column that had NULLs in training has
	 * an indicator feature, 1 when the value is NULL: indicator[j] is its
	 * position (-1: none), after every column's own positions, in column
	 * order; indicators are not scaled.
	 */
	CpMissing	missing;
	bool		add_indicator;
	double	   *fill;			/* n_features, or NULL */
	int32	   *indicator;		/* n_features, or NULL */
	int32		n_indicators;
} CpPrep;

/*
 * The most bytes of category values (or of a softmax model's class labels)
 * a model stores, their JEntry headers included: each set is one jsonb
 * value, whose containers PostgreSQL limits to 255 MB (JENTRY_OFFLENMASK);
 * half of that leaves room for the other fields, and refusing in the first
 * pass, before any training, is what a limit found at the INSERT of the
 * model (after every epoch) is not.
 */
#define CP_PREP_MAX_STORED_BYTES ((uint64) JENTRY_OFFLENMASK / 2)

/* a boolean column's categories, as its text output */
#define CP_PREP_FALSE "false"
#define CP_PREP_TRUE "true"

extern bool cp_prep_is_category_type(Oid type);
extern void *cp_prep_palloc0(Size size);
extern const char *cp_prep_category_bytes(Datum d, Oid type, int32 *len);
extern bool cp_prep_has_onehot(const CpPrep *prep);
extern void cp_prep_init_missing(CpPrep *prep, CpMissing missing,
								 bool add_indicator);
extern int32 cp_prep_column_code(const CpPrepColumn *col, Datum d, bool isnull,
								 Oid type, int64 *unseen);
extern CpPrep *cp_prep_from_jsonb(Jsonb *jb, const char *model_name,
								  int32 n_features, List *feature_names,
								  CpFeatureMode mode);
extern Jsonb *cp_prep_to_jsonb(const CpPrep *prep, List *feature_names,
							   CpFeatureMode mode);
extern void cp_prep_share_values(const CpPrep *prep, Jsonb *jb);
extern double *cp_prep_original_weights(const CpPrep *prep, const double *w,
										int32 n_outputs);

#endif							/* CORGIPILE_PREPROCESS_MODEL_H */
