/*-------------------------------------------------------------------------
 *
 * preprocess.h
 *	  Preprocessing stored with the model and the divergence rules:
 *	  per-feature statistics, the standardizing transform and
 *	  its inverse on the weights, one-hot dictionaries, the per-row holdout
 *	  decision of validation => 'N%', and the stop / warn decisions.
 *
 * Plain C over caller-prepared memory like the rest of core/: nothing here
 * calls into the server; memory comes from a CpAllocZero callback (palloc0
 * in a memory context in the server, calloc in the unit tests) and is never
 * freed here, the caller's context owns it.  See docs/preprocessing.md.
 *
 *-------------------------------------------------------------------------
 */
#ifndef CORGIPILE_PREPROCESS_H
#define CORGIPILE_PREPROCESS_H

#include "c.h"

#include "alloc.h"

/*
 * Per-feature statistics, accumulated in one pass (Welford) and mergeable
 * (Chan et al.'s pairwise combination, cp_prep_stats_merge), so that parts
 * of a table learnt apart (the shards of a distributed training) combine
 * into the statistics of the whole, as if added one by one; reset empties
 * one for reuse.
 *
 * count[j], mean[j], m2[j] describe only the values actually seen for
 * feature j; n_rows counts rows.  A dense row sees every feature, so
 * count[j] == n_rows.  A sparse row sees only its stored entries: the
 * n_rows - count[j] other rows hold implicit zeros, which the moments
 * include when they are finalised (cp_prep_stats_moments), exactly as if
 * they had been added one by one.
 */
typedef struct CpPrepStats
{
	int32		n_features;
	int64		n_rows;
	int64	   *count;			/* n_features: values seen */
	double	   *mean;			/* n_features: mean of the values seen */
	double	   *m2;				/* n_features: sum of squared deviations */
} CpPrepStats;

extern bool cp_prep_stats_bytes(int32 n_features, Size *bytes);
extern bool cp_prep_stats_init(CpPrepStats *st, int32 n_features,
							   CpAllocZero alloc);
extern void cp_prep_stats_reset(CpPrepStats *st);
extern void cp_prep_stats_add_dense(CpPrepStats *st, const double *x);
extern void cp_prep_stats_add_sparse(CpPrepStats *st, const int32 *indices,
									 const double *values, int64 nnz);
extern void cp_prep_stats_merge(CpPrepStats *into, const CpPrepStats *from);
extern void cp_prep_stats_moments(const CpPrepStats *st, int32 j,
								  double *mean, double *var);
extern void cp_prep_stats_moments_filled(const CpPrepStats *st, int32 j,
										 double fill, double *mean,
										 double *var);
extern bool cp_prep_is_constant(double mean, double var, int64 n);
extern double cp_prep_median(double *v, int64 n);
extern void cp_prep_select_kth(double *v, int64 n, int64 k, int budget);

/*
 * The transform x' = x * scale[j] + offset[j]: one multiply-add per value.
 * Standardizing (dense): scale = 1/std, offset = -mean/std.  Scale-only
 * (sparse, centred == false): scale = 1/std, offset = 0, so zeros stay
 * zeros.  A constant column (std == 0) keeps scale 1: standardizing maps it
 * to x - mean (0 on the training rows), scale-only leaves it as it is.  A
 * skipped column (one-hot indicators) is the identity.
 *
 * standardize => off has no transform at all: the engine must not call
 * these functions then, which is what keeps today's results bit-for-bit.
 */
typedef struct CpPrepTransform
{
	int32		n_features;
	bool		centred;
	double	   *scale;			/* n_features */
	double	   *offset;			/* n_features; all 0 when !centred */
} CpPrepTransform;

extern bool cp_prep_transform_init(CpPrepTransform *t, int32 n_features,
								   bool centred, CpAllocZero alloc);
extern void cp_prep_transform_set(CpPrepTransform *t, int32 j, double mean,
								  double std);
extern int32 cp_prep_transform_from_stats(CpPrepTransform *t,
										  const CpPrepStats *st,
										  const int32 *stats_col,
										  const double *fill,
										  double *means, double *stds);
extern void cp_prep_apply_dense(const CpPrepTransform *t, double *x);
extern void cp_prep_apply_sparse(const CpPrepTransform *t,
								 const int32 *indices, double *values,
								 int64 nnz);
extern void cp_prep_weights_to_original(const CpPrepTransform *t,
										const double *w_scaled,
										double *w_orig, int32 n_outputs);

/*
 * One-hot dictionary of one text or boolean column.  Values are byte
 * strings (the column's text output); codes are assigned by
 * cp_prep_dict_finish in bytewise (memcmp, shorter prefix first) order,
 * so they do not depend on the order rows arrive in (block order is random)
 * nor on the database's collation.  Before finish, cp_prep_dict_add learns
 * values; after it, cp_prep_dict_code looks them up.
 */
#define CP_PREP_NO_CODE (-1)
/* default cap on categories per column, and the most we accept at all */
#define CP_PREP_DEFAULT_MAX_CATEGORIES 1000
#define CP_PREP_MAX_CATEGORIES (1 << 20)

typedef enum CpPrepDictStatus
{
	CP_PREP_DICT_FOUND,			/* value already known */
	CP_PREP_DICT_ADDED,			/* new value learnt */
	CP_PREP_DICT_FULL,			/* new value, but max_categories reached */
	CP_PREP_DICT_NO_MEMORY		/* the allocator returned NULL */
} CpPrepDictStatus;

typedef struct CpPrepDictEntry
{
	const char *str;			/* copy owned by the dictionary's allocator */
	int32		len;
	int32		code;			/* CP_PREP_NO_CODE until finish */
	uint64		hash;
} CpPrepDictEntry;

typedef struct CpPrepDict
{
	int32		max_categories;
	int32		n_entries;
	int64		n_refused;		/* new values refused when full */
	uint64		total_bytes;	/* bytes of the learnt strings, for a budget */
	bool		finished;
	uint32		mask;			/* slots - 1; slots a power of two */
	int32	   *slots;			/* entry index + 1, 0 = empty */
	CpPrepDictEntry *entries;	/* max_categories, in first-seen order */
	int32	   *by_code;		/* after finish: entry index of each code */
	CpAllocZero alloc;
} CpPrepDict;

extern bool cp_prep_dict_init(CpPrepDict *d, int32 max_categories,
							  CpAllocZero alloc);
extern CpPrepDictStatus cp_prep_dict_add(CpPrepDict *d, const char *str,
										 int32 len);
extern bool cp_prep_dict_contains(const CpPrepDict *d, const char *str,
								  int32 len);
extern void cp_prep_dict_finish(CpPrepDict *d);
extern int32 cp_prep_dict_code(const CpPrepDict *d, const char *str,
							   int32 len);
extern const char *cp_prep_dict_value(const CpPrepDict *d, int32 code,
									  int32 *len);
extern const char *cp_prep_dict_share(CpPrepDict *d, int32 code,
									  const char *str);

/*
 * validation => 'N%': a row is held out when a hash of (seed, ctid) falls
 * below the fraction.  It depends on nothing but the seed and where the row
 * is, so it is the same whatever order blocks are read in and in every
 * epoch, and each row is held out with probability exactly fraction (to
 * 2^-53).
 */
extern bool cp_prep_parse_percent(const char *s, double *fraction);
extern double cp_prep_holdout_u(uint64 seed, uint32 block, uint16 offset);
extern bool cp_prep_holdout(uint64 seed, uint32 block, uint16 offset,
							double fraction);

/*
 * Divergence (docs/preprocessing.md).  cp_prep_divergence is asked after
 * every epoch with the training losses of epochs 1..n;
 * cp_prep_divergence_final once at the end.
 * The caller turns STOP_* into an ERROR naming the epoch (n) and
 * suggesting a smaller learning_rate or standardize, and WARN_* into a
 * WARNING.  See docs/preprocessing.md for why the factor is 1000.
 */
#define CP_PREP_DIVERGENCE_FACTOR 1000.0

typedef enum CpPrepDivergence
{
	CP_PREP_CONTINUE,
	CP_PREP_STOP_NOT_FINITE,	/* the last loss is NaN or infinite */
	CP_PREP_STOP_GROWN,			/* last > factor * best and last > first */
	CP_PREP_WARN_ABOVE_FIRST	/* final: last > first */
} CpPrepDivergence;

extern CpPrepDivergence cp_prep_divergence(const double *losses, int32 n,
										   double factor, int32 *best_epoch);
extern CpPrepDivergence cp_prep_divergence_final(const double *losses,
												 int32 n);

#endif							/* CORGIPILE_PREPROCESS_H */
