/*-------------------------------------------------------------------------
 *
 * params.h
 *	  The arguments of corgipile.train() and the sizes derived from them.
 *
 * The three operators each carry the call's constant arguments in their
 * custom_private list and parse them here, so every node checks the same
 * rules and reads the same values.
 *
 *-------------------------------------------------------------------------
 */
#ifndef CORGIPILE_PARAMS_H
#define CORGIPILE_PARAMS_H

#include "postgres.h"

#include "nodes/pg_list.h"
#include "nodes/primnodes.h"
#include "storage/block.h"

#include "core/linear_model.h"
#include "params/shuffles.h"
#include "params/train_args.h"

/* Positions of corgipile.train()'s arguments, as in the SQL signature. */
#define CP_ARG_ENUM(id, name, type, isnull, datum, sqldefault) CP_ARG_##id,
typedef enum CpArg
{
	CP_TRAIN_ARGS(CP_ARG_ENUM)
	CP_NUM_ARGS
} CpArg;
#undef CP_ARG_ENUM

typedef enum CpSizeUnit
{
	CP_SIZE_UNSET,
	CP_SIZE_PERCENT,			/* of the table's pages */
	CP_SIZE_BYTES,
	CP_SIZE_PAGES
} CpSizeUnit;

typedef struct CpSize
{
	CpSizeUnit	unit;
	double		value;
} CpSize;

/* standardize => ...: how numeric features are scaled before training */
typedef enum CpStandardize
{
	CP_STANDARDIZE_AUTO,		/* on for dense features, scale_only for sparse */
	CP_STANDARDIZE_ON,			/* centre and scale */
	CP_STANDARDIZE_SCALE_ONLY,	/* scale, keep zeros (sparsity) */
	CP_STANDARDIZE_OFF			/* raw features */
} CpStandardize;

/*
 * missing => ...: what a NULL number (a feature column, or an element of a
 * features array) becomes.  SKIP leaves the row out, as before 0.4.0; the
 * others impute it with a statistic of the training rows, as
 * scikit-learn's SimpleImputer does (docs/preprocessing.md).
 */
typedef enum CpMissing
{
	CP_MISSING_SKIP,			/* the row is skipped (the default) */
	CP_MISSING_MEAN,			/* the mean of the column's values */
	CP_MISSING_MEDIAN,			/* their median */
	CP_MISSING_ZERO				/* 0 (SimpleImputer's constant 0) */
} CpMissing;

typedef struct CpTrainParams
{
	Oid			relid;
	CpModelKind model;
	char	   *model_name;		/* NULL: generate one */
	char	   *label;
	char	   *features;
	char	   *feature_indices;	/* NULL: dense layout */
	char	   *warm_start;		/* model to start from, or NULL */
	int32		n_features;		/* 0: infer */
	CpShuffle	shuffle;
	double		learning_rate;
	double		decay;
	int32		max_epoch_num;
	int32		batch_size;
	double		l2;
	CpSize		block_size;
	CpSize		buffer_size;
	bool		has_seed;
	int64		seed;
	bool		double_buffer;
	Oid			validation_relid;	/* InvalidOid: none */
	double		validation_fraction;	/* 0: none; else rows held out, (0, 1) */
	double		l1;
	bool		early_stopping; /* tolerance given */
	double		tolerance;
	int32		n_iter_no_change;	/* the stopping rule's patience */
	CpStandardize standardize;
	int32		max_categories;
	CpMissing	missing;
	bool		missing_indicator;	/* an indicator feature per column that
									 * had NULLs in training */
	int32		workers;			/* processes that train, leader included */

	/*
	 * learning_rate => NULL: the default schedule (averaged SGD, the
	 * implicit squared-loss step); see CP_DEFAULT_LEARNING_RATE.
	 */
	bool		default_rate;
	bool		average;		/* averaged SGD: average => or its default */
	bool		buffer_auto;	/* buffer_size => NULL: chosen by the table's size */
	bool		epochs_auto;	/* max_epoch_num => NULL: chosen after epoch 1 */
	bool		converge_auto;	/* the default schedule with tolerance and
								 * max_epoch_num NULL: the default stopping
								 * rule (CP_DEFAULT_RTOL) */
	bool		l2_auto;		/* l2 => NULL with the default schedule: 1/rows
								 * from epoch 2 on */
} CpTrainParams;

/*
 * learning_rate => NULL: 0.1 for every model, with the iterates averaged
 * from the second epoch on and the squared loss's step taken implicitly
 * (docs/real-datasets.md).  The rate a training without averaging had by
 * default before 0.4.0 (0.01 for linear) is kept for average => false.
 */
#define CP_DEFAULT_LEARNING_RATE 0.1
#define CP_DEFAULT_LEARNING_RATE_LINEAR 0.01

/*
 * buffer_size => NULL: the whole table when its heap fits
 * maintenance_work_mem (the rows then shuffle as one buffer, as a full
 * shuffle does), else this share of it.
 */
#define CP_DEFAULT_BUFFER_PERCENT 10.0

/*
 * max_epoch_num => NULL: 20 epochs, or on a smaller table as many as make
 * CP_DEFAULT_MIN_ROW_STEPS row steps, at most CP_DEFAULT_MAX_EPOCHS.  An
 * averaged SGD's distance to the optimum shrinks with the number of steps:
 * 1,000,000 row steps leave none of the 37 real tables of
 * docs/real-datasets.md short of scikit-learn's answer, where 20 epochs
 * of a small table (6,000 steps at 300 rows) or 200,000 steps do, and take
 * tenths of a second on a small row.
 */
#define CP_DEFAULT_EPOCHS 20

/*
 * The default schedule's epochs (learning_rate, average, max_epoch_num and
 * tolerance NULL), once the first epoch has counted the rows:
 *
 * - on a table the polish takes (sgd_polish.c: at most
 *   CP_DEFAULT_MIN_ROW_STEPS / CP_DEFAULT_EPOCHS rows, cached whole, a
 *   smooth loss), CP_DEFAULT_POLISH_EPOCHS epochs, then the polish: two
 *   epochs of averaged iterates are as good a start for L-BFGS as more
 *   (on the real tables measured the polish took about as many passes
 *   after 3 epochs as after hundreds), and each epoch costs about a pass;
 * - else until the averaged model's objective, on a sample of the training
 *   rows fixed by the seed, improves by less than CP_DEFAULT_RTOL of itself
 *   in CP_DEFAULT_PATIENCE epochs (scikit-learn's tol and n_iter_no_change,
 *   on the stored model rather than on the iterates), compared from epoch 2
 *   (the first average) on, so 3 epochs at the least; at most the epochs
 *   above (20, or up to 1000 on a small table).  On 2M rows x 28 stored by
 *   label (10% of the labels flipped) the objective moved by 0.14-0.33% at
 *   epoch 3 and kept moving by 0.1-0.3% an epoch for 17 more (0.1% never
 *   stopped one seed in 20 epochs) while the held-out accuracy stayed
 *   within 0.01 points of scikit-learn's from epoch 2 on; on Fertility
 *   (204k rows) it moved by 0.02% at epoch 3 (docs/real-datasets.md).
 *
 * An explicit learning_rate (or average => false) keeps the epochs above
 * without the rule, as before 0.4.0: the same settings, the same weights.
 */
#define CP_DEFAULT_POLISH_EPOCHS 3
#define CP_DEFAULT_RTOL 5e-3
#define CP_DEFAULT_PATIENCE 1
/* n_iter_no_change NULL with an explicit tolerance: scikit-learn's 5 */
#define CP_TOLERANCE_PATIENCE 5

/*
 * l2 => NULL: with the default schedule (learning_rate NULL, averaging
 * on), 1 / the rows the first epoch trained on, from epoch 2 on; else 0.
 * It is scikit-learn's default penalty written per row:
 * LogisticRegression's C = 1 (C times the summed losses plus |w|^2 / 2)
 * and Ridge's alpha = 1, divided by the rows, are the mean loss plus
 * |w|^2 / (2 n).  The exact solvers' answer is that objective's minimum;
 * without it a nearly separable table has none, and more epochs only grow
 * the weights.
 */
#define CP_DEFAULT_MIN_ROW_STEPS 1000000
#define CP_DEFAULT_MAX_EPOCHS 1000

/* How a table is cut into blocks and buffers. */
typedef struct CpSizing
{
	BlockNumber n_pages;		/* heap pages of the table */
	uint32		pages_per_block;
	uint32		n_blocks;		/* ceil(n_pages / pages_per_block) */
	uint32		blocks_per_buffer;
} CpSizing;

/*
 * When block_size is not given, a buffer should hold this many blocks.  The
 * more blocks a buffer mixes, the closer each buffer's label mix is to the
 * table's: with 16, a 10% buffer of a label-clustered table held 27% to 72%
 * positives and SVM ended 15-20 points below a full shuffle; with 112 or
 * more it matched (docs/block-size.md).
 */
#define CP_TARGET_BLOCKS_PER_BUFFER 256
/* ... and a percentage buffer is never smaller than this many pages */
#define CP_MIN_BUFFER_PAGES 16
/* ... and a block is never larger than the paper's 10 MB */
#define CP_MAX_BLOCK_BYTES (10 * 1024 * 1024)

extern const char *cp_params_fn;
extern void cp_params_from_datums(const Datum *values, const bool *nulls,
								  CpTrainParams *p);
extern void cp_params_from_consts(List *args, CpTrainParams *p);
extern Datum cp_qualify_validation(Datum value);
extern Const *cp_params_pack(const CpTrainParams *p);
extern void cp_params_unpack(const Const *packed, CpTrainParams *p);
extern List *cp_default_train_args(void);
extern void cp_resolve_sizing(const CpTrainParams *p, BlockNumber n_pages,
							  CpSizing *out);
extern bool cp_buffer_auto_whole(const CpTrainParams *p, BlockNumber n_pages);
extern char *cp_buffer_choice(const CpTrainParams *p, BlockNumber n_pages);
extern const char *cp_model_kind_name(CpModelKind kind);
extern bool cp_parse_model_kind(const char *name, CpModelKind *kind);
extern const char *cp_standardize_name(CpStandardize standardize);
extern const char *cp_missing_name(CpMissing missing);
extern bool cp_parse_missing(const char *s, CpMissing *missing);
extern char *cp_size_to_string(const CpSize *size);
extern void cp_check_model_size(CpModelKind kind, int64 n_features, int n_outputs,
								bool sparse, int batch_size, const char *relname);

#endif							/* CORGIPILE_PARAMS_H */
