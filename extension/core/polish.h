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

/* why the polish ended */
typedef enum CpPolishStop
{
	CP_POLISH_CONVERGED,		/* the gradient vanished, or f stopped moving */
	CP_POLISH_BUDGET,			/* the next pass would exceed max_passes */
	CP_POLISH_NO_DESCENT		/* no step along the direction decreased f */
} CpPolishStop;

typedef struct CpPolishResult
{
	int			iterations;		/* L-BFGS steps taken */
	int			passes;			/* passes over the rows (gradients) */
	double		objective_before;
	double		objective_after;
	double		gradient_max;	/* largest |gradient| entry at the end */
	bool		converged;		/* stop == CP_POLISH_CONVERGED */
	CpPolishStop stop;
} CpPolishResult;

/*
 * Called between passes over the rows, where the caller may serve what is
 * pending for it (the backend: CHECK_FOR_INTERRUPTS, which leaves by an
 * error on a cancel and returns on anything else).  The polish itself
 * never stops for an interrupt, so that a connection check or a reload
 * cannot change the model: only the caller's error can cut it short.
 */
typedef void (*CpPolishYield) (void *arg);

extern bool cp_polish_applies(const CpModel *m);
extern Size cp_polish_bytes(const CpModel *m);
extern bool cp_polish(const CpModel *m, const CpBuffer *buf, double *w, int max_passes,
					  double gtol, CpAllocZero alloc, CpPolishYield yield, void *yield_arg,
					  CpPolishResult *res);

#endif							/* CORGIPILE_POLISH_H */
