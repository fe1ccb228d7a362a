/*-------------------------------------------------------------------------
 *
 * models.h
 *	  The model catalog: corgipile.model_store, read by roles through the
 *	  view corgipile.models and written only by the functions of the
 *	  model_*.c files, which run their queries as the storage's owner
 *	  (model_store.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef CORGIPILE_MODELS_H
#define CORGIPILE_MODELS_H

#include "postgres.h"

#include "lib/stringinfo.h"
#include "utils/rel.h"

#include "core/linear_model.h"
#include "io/layout.h"
#include "params/params.h"

/* The figures of one epoch, as returned and as kept in history. */
typedef struct CpEpochResult
{
	int32		epoch;
	int64		tuples;
	double		loss;
	double		score;
	bool		has_validation;
	double		validation_score;
	double		validation_loss;
	int64		validation_n;	/* rows validation_score is taken on */
	double		seconds;
} CpEpochResult;

/* What training records about itself besides the weights. */
typedef struct CpTrainRecord
{
	const char *model_name;
	const CpTrainParams *params;
	const CpLayout *layout;
	const CpSizing *sizing;
	Relation	rel;
	const char *validation_name;	/* or NULL */
	const char *holdout_json;	/* validation => 'N%': the held-out rows'
								 * figures (holdout.c), or NULL */
	const char *stopping_json;	/* the stopping rule's last figures
								 * (sgd_validate.c), or NULL */
	const char *polish_json;	/* the polish after the last epoch (sgd_polish.c),
								 * or NULL */
	int64		seed;
	const CpModel *model;
	const double *weights;		/* the weights kept (the best epoch's) */
	int			best_epoch;
	int64		held_rows;		/* rows the strategy holds back (window,
								 * reservoir) */
	const char *held_rows_key;	/* their params JSON key */
	int			workers;		/* processes that trained, leader included */
	const char *parallel_sync;	/* workers > 1: corgipile.parallel_sync */
	const char *parallel_grab;	/* ... and for grab, corgipile.parallel_grab */
	const CpEpochResult *results;
	int			n_results;
	const char *baseline_kind;	/* "majority class" or "mean", or NULL */
	double		baseline_score; /* its score on the training rows */

	/*
	 * shuffle => 'grab' only: the run's buffer choice, the length of a
	 * block sum, and the last walked epoch's order and signs in the form of
	 * cp_grab_serialize, base64 (NULL when no epoch was walked).
	 */
	bool		grab;
	bool		grab_buffer_shuffle;	/* the last epoch's */
	int32		grab_unit_blocks;	/* blocks in a GraB unit */
	int64		grab_epochs;	/* epochs ordered, and kept in order */
	int64		grab_epochs_kept;
	int64		grab_epochs_random; /* ... in a random block order */
	double		grab_statistic; /* mean |block mean row|^2; < 0: none */
	double		grab_step;		/* the buffer rule's last value */
	int32		grab_dim;
	int32		grab_n_weights;
	const char *grab_state;
} CpTrainRecord;

/* A model as predict() needs it. */
typedef struct CpStoredModel
{
	char	   *model_name;
	CpModelKind kind;
	int			n_features;
	int			n_outputs;		/* 1, or the classes of softmax */
	double	   *weights;		/* n_outputs blocks of n_features + 1 */
	int			n_classes;		/* classifiers: 2, or softmax's classes */
	char	  **class_names;	/* each class's label as text */
	double	   *class_values;	/* ... as a number, when labels are numbers
								 * or booleans (0/1) */
	bool		classes_are_text;
	char	   *label;			/* the label column */
	CpFeatureMode mode;
	List	   *features;		/* feature column names */
	char	   *feature_indices;	/* sparse index column, or NULL */
	Oid			owner;			/* the owning role's OID */
	Oid		   *usage;			/* roles granted USAGE */
	int			n_usage;

	/*
	 * shuffle => 'grab' models: params->>'grab_state' (base64, unchecked
	 * here: the caller validates it) and params->>'grab_pages_per_block';
	 * NULL / 0 for other models.
	 */
	char	   *grab_state;
	int64		grab_pages_per_block;
	Oid			relid;			/* the relation it was trained on, or
								 * InvalidOid (arrays, imported rows) */

	/*
	 * The preprocess column: category encoding and standardizing applied
	 * before the weights (NULL: raw features); and a binary model's text
	 * classes as a dictionary (code 0 the -1 class), else NULL.
	 */
	CpPrep	   *prep;
	CpPrepDict *label_dict;

	/*
	 * cp_models_may_see_data for the role that loaded it: false, the role
	 * gets the model's function only (predict's row form for a model with
	 * category columns, no NULL counted as seen).
	 */
	bool		sees_data;
} CpStoredModel;

extern char *cp_models_new_name(Relation rel, CpModelKind kind);
extern void cp_models_check_new_name(const char *model_name);
extern void cp_models_check_absent(const char *model_name);
extern void cp_models_claim_name(const char *model_name);
extern void cp_models_release_name(const char *model_name);
extern void cp_models_insert(const CpTrainRecord *rec);
extern CpStoredModel *cp_models_load(const char *model_name);
extern void cp_model_layout(const CpStoredModel *m, Relation rel, CpLayout *lo);
extern bool cp_models_may_see_data(const CpStoredModel *m);
extern void cp_models_check_may_see_data(const CpStoredModel *m, const char *what);

#endif							/* CORGIPILE_MODELS_H */
