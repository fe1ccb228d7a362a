/*-------------------------------------------------------------------------
 *
 * converge.h
 *	  When to stop training: the one stopping rule of every epoch loop.
 *
 * scikit-learn's rule (SGDClassifier's tol and n_iter_no_change): an epoch
 * improves when its objective is below the best so far by more than a
 * threshold; after patience epochs in a row without improvement, stop.
 * The threshold is atol + rtol * |best|: an absolute tolerance (train()'s
 * tolerance, in the loss's units) or a relative one (the default rule,
 * whatever the label's scale), or both.
 *
 * The objective is the caller's: for the default schedule the averaged
 * model's training objective on a sample of rows fixed by the seed, with
 * a validation the validation loss.  A caller that trains in rounds (a
 * distributed coordinator keeping the averaged iterate across rounds)
 * feeds one figure per round.  The rule only sees the figures, so the
 * same figures stop at the same epoch, whatever the timing.  Plain C.
 *
 *-------------------------------------------------------------------------
 */
#ifndef CORGIPILE_CONVERGE_H
#define CORGIPILE_CONVERGE_H

#include "c.h"

typedef struct CpConvergence
{
	/* the rule */
	double		atol;			/* absolute improvement needed */
	double		rtol;			/* ... plus this share of |best| */
	int			patience;		/* epochs without improvement before stopping */

	/* what it has seen */
	int			epochs;			/* figures fed */
	int			best_epoch;		/* 1-based; 0: none yet */
	double		best;
	double		last;
	double		previous;		/* the figure before last */
	double		last_change;	/* relative: (previous - last) / |previous| */
	int			since_best;		/* epochs in a row without improvement */
} CpConvergence;

extern void cp_convergence_init(CpConvergence *c, double atol, double rtol, int patience);
extern bool cp_convergence_update(CpConvergence *c, double objective);

#endif							/* CORGIPILE_CONVERGE_H */
