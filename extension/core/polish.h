/*-------------------------------------------------------------------------
 *
 * polish.h
 *	  The exact minimum of a training's objective, from where SGD ended.
 *
 * SGD with the default schedule comes close to the minimum of the mean
 * loss plus l2 / 2 |w|^2 (scikit-learn's C = 1 objective), but its rate
 * decays, and on a small table with about as many columns as rows it
 * stops measurably short (docs/real-datasets.md).  When a training's rows
 * are all in memory, L-BFGS from SGD's weights finishes the job: full
 * passes over the rows, each a gradient, until the gradient vanishes.
 * Smooth losses only (logistic, softmax, linear); biases are not
 * penalised, as in the SGD steps.  Plain C, no server.
 *
 *-------------------------------------------------------------------------
 */
#ifndef CORGIPILE_POLISH_H
#define CORGIPILE_POLISH_H

#include "c.h"

#include "alloc.h"
#include "buffer.h"
#include "linear_model.h"

typedef struct CpPolishResult
{
	int			iterations;		/* L-BFGS steps taken */
	int			passes;			/* passes over the rows (gradients) */
	double		objective_before;
	double		objective_after;
	double		gradient_max;	/* largest |gradient| entry at the end */
	bool		converged;		/* the gradient vanished (else: stopped) */
} CpPolishResult;

extern bool cp_polish_applies(const CpModel *m);
extern Size cp_polish_bytes(const CpModel *m);
extern bool cp_polish(const CpModel *m, const CpBuffer *buf, double *w, int max_passes,
					  CpAllocZero alloc, CpCancel *cancel, CpPolishResult *res);

#endif							/* CORGIPILE_POLISH_H */
