/*-------------------------------------------------------------------------
 *
 * linear_model.h
 *	  Losses, gradient steps and metrics of the linear models.
 *
 * Plain C over plain arrays: this is what the helper thread runs while the
 * main thread loads the next buffer, and what the unit tests run without a
 * server.  Weights are w[0..n_features-1] followed by the bias.
 *
 *-------------------------------------------------------------------------
 */
#ifndef CORGIPILE_LINEAR_MODEL_H
#define CORGIPILE_LINEAR_MODEL_H

#include "c.h"

#include <signal.h>
#include <stdatomic.h>

#include "alloc.h"
#include "buffer.h"

/*
 * What tells a training loop to stop early.  raised is set from another
 * thread (cp_cancel_raise: the main thread stopping the helper), so it is
 * an atomic; signal_flag, if not NULL, is a flag a signal handler of the
 * training thread itself sets (the backend's InterruptPending when the
 * main thread trains).  Either one stops the loop at the next check.
 */
typedef struct CpCancel
{
	atomic_int	raised;
	volatile const sig_atomic_t *signal_flag;
} CpCancel;

extern void cp_cancel_init(CpCancel *c, volatile const sig_atomic_t *signal_flag);
extern void cp_cancel_raise(CpCancel *c);
extern bool cp_cancel_requested(CpCancel *c);

typedef enum CpModelKind
{
	CP_MODEL_SVM,				/* hinge loss, labels -1/+1 */
	CP_MODEL_LOGISTIC,			/* log loss, labels -1/+1 */
	CP_MODEL_LINEAR,			/* squared loss, any numeric label */
	CP_MODEL_SOFTMAX			/* cross-entropy, labels 0..K-1 */
} CpModelKind;

/* Figures accumulated over one pass, from predictions made before updates. */
typedef struct CpStats
{
	int64		n;				/* rows seen */
	double		loss_sum;		/* sum of per-row losses */
	int64		n_correct;		/* classification: right predictions */
	double		sum_y;			/* regression: for R^2 */
	double		sum_y2;
	double		sse;
} CpStats;

/*
 * Weights: one block of n_features weights and a bias per output; one
 * output for the binary and regression models, one per class for softmax.
 */
typedef struct CpModel
{
	CpModelKind kind;
	int			n_features;
	int			n_outputs;		/* 1, or the number of classes */
	int			stride;			/* n_features + 1 */
	int			n_weights;		/* n_outputs * stride */
	bool		sparse;			/* rows come in the sparse layout */

	/*
	 * With sparse rows: apply l2 and l1 to every weight at every step, as
	 * for dense rows, instead of lazily to the weights a row touches.  Set
	 * for one-hot encoded columns, whose rows are sparse only to save
	 * memory: the weights are then those of the dense rows, but for the
	 * summation order of the margin.  A step with l2 or l1 costs
	 * O(n_features) then, as a dense step does; without them O(nnz).
	 */
	bool		reg_all;

	/*
	 * reg_all with l2: the feature weights are l2_scale * w while a
	 * buffer trains in O(nnz) steps (linear_model.c, train_scaled_l2), 0
	 * when they are w itself.  It is non-zero only between a call stopped
	 * by a cancel and the call that resumes it, so the weights do not
	 * depend on where interrupts arrived.
	 */
	double		l2_scale;
	double	   *w;

	/* hyper-parameters in force; learning_rate changes per epoch */
	double		learning_rate;
	double		l2;
	double		l1;
	int			batch_size;

	double	   *z;				/* n_outputs scratch */
	double	   *g;				/* n_outputs scratch */

	/* mini-batch accumulator (batch_size > 1 only) */
	int			batch_fill;
	double	   *grad;			/* n_weights */
	int32	   *touched;		/* sparse: features with pending gradient */
	uint8	   *mark;			/* sparse: touched[] membership */
	int			n_touched;

	/* dense rows are gathered here in visiting order before training */
	int			gather_rows;
	double	   *gather_values;	/* gather_rows * n_features */
	double	   *gather_labels;	/* gather_rows */
	uint32	   *gather_blocks;	/* gather_rows, set by the caller with grab
								 * (else NULL: GraB then trains in place) */

	CpStats		stats;			/* the current epoch */

	/*
	 * Averaged SGD (Polyak-Ruppert, Bottou's ASGD): avg is the mean of the
	 * weights after every avg_every-th step since averaging began (NULL:
	 * no averaging).  averaging is off until the caller turns it on (after
	 * the first epoch); avg_n counts the snapshots averaged so far.
	 */
	double	   *avg;			/* n_weights, or NULL */
	bool		averaging;
	int			avg_every;		/* rows between snapshots */
	int			avg_rows;		/* rows since the last snapshot */
	int64		avg_n;

	/*
	 * Squared loss only: take the implicit (proximal) step
	 * w <- w - lr / (1 + lr |x|^2) (w.x - y) x, which is stable for any rate
	 * and any row norm, where the explicit step overshoots once
	 * lr |x|^2 > 2 (a standardized outlier of 40 sigmas has |x|^2 > 1600).
	 */
	bool		normalized_step;

	/*
	 * shuffle => 'grab': per-block gradient sums of the epoch (core/grab.h),
	 * or NULL.  Rows then come with their block (CpBuffer.row_blocks).
	 */
	struct CpGrabAcc *grab;
	double	   *grab_snap;		/* n_weights, set by the caller with grab: the
								 * weights at a block's start (NULL: sums are
								 * added row by row) */
	double	   *grab_pw;		/* with grab_snap and projected sums: 2 x dim,
								 * the projected weights at the current
								 * block's start and scratch for its end
								 * (NULL: sums from the weights' difference) */
	bool		grab_pw_flip;	/* which half of grab_pw is the start */
	const uint32 *grab_unit_of; /* block -> GraB unit, the sums' index; NULL:
								 * each block is its own unit */
	double		grab_g2;		/* with grab_snap: the epoch's sum over rows
								 * of sum_k g_k^2 (GraB's buffer rule) */
} CpModel;

/* a model has at most this many weights (they are indexed by int) */
#define CP_MAX_WEIGHTS ((int64) PG_INT32_MAX)

extern bool cp_model_bytes(CpModelKind kind, int n_features, int n_outputs,
						   bool sparse, int batch_size, uint64 *bytes,
						   int64 *n_weights);
extern bool cp_model_init(CpModel *m, CpModelKind kind, int n_features,
						  int n_outputs, bool sparse, int batch_size,
						  double l2, double l1, CpAllocZero alloc);
extern void cp_model_outputs(const CpModel *m, const CpBuffer *buf, int64 row,
							 double *z);
extern double cp_softmax(double *z, int k);
extern double cp_sigmoid(double t);
extern double cp_margin_dense(const double *w, const double *x, int n);
extern double cp_loss(CpModelKind kind, double margin, double y);
extern double cp_dloss(CpModelKind kind, double margin, double y);
extern double cp_predict_from_margin(CpModelKind kind, double margin);
extern void cp_stats_add(CpStats *st, CpModelKind kind, double margin, double y);
extern void cp_stats_add_outputs(CpStats *st, const CpModel *m, double *z, double y);
extern int64 cp_model_train(CpModel *m, const CpBuffer *buf, int64 start,
							CpCancel *cancel);
extern bool cp_model_is_finite(const CpModel *m);
extern void cp_model_average_init(CpModel *m, double *avg);
extern void cp_model_average_add(CpModel *m);
extern const double *cp_model_final_weights(const CpModel *m);
extern void cp_model_flush(CpModel *m);
extern void cp_model_evaluate(const CpModel *m, const CpBuffer *buf, CpStats *st);
extern double cp_model_penalty(const CpModel *m, const double *w, double l2, double l1);
extern double cp_stats_loss(const CpStats *st);
extern double cp_stats_score(const CpStats *st, CpModelKind kind);

#endif							/* CORGIPILE_LINEAR_MODEL_H */
