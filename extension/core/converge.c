/*-------------------------------------------------------------------------
 *
 * converge.c
 *	  The stopping rule of the epoch loop (converge.h).
 *
 *-------------------------------------------------------------------------
 */
#include "c.h"

#include <float.h>
#include <math.h>

#include "converge.h"

void
cp_convergence_init(CpConvergence *c, double atol, double rtol, int patience)
{
	memset(c, 0, sizeof(*c));
	c->atol = atol;
	c->rtol = rtol;
	c->patience = Max(patience, 1);
	c->last_change = NAN;
}

/*
 * Feed one epoch's objective; true when training should stop: patience
 * epochs in a row have not beaten the best by atol + rtol * |best|.  A
 * non-finite objective never improves.  The best epoch and its figure
 * are kept (the caller keeps its weights, if it wants them).
 */
bool
cp_convergence_update(CpConvergence *c, double objective)
{
	bool		finite = isfinite(objective);

	c->epochs++;
	if (c->epochs > 1 && finite && isfinite(c->last))
		c->last_change = (c->last - objective) / Max(fabs(c->last), DBL_MIN);
	c->previous = c->last;
	c->last = objective;
	if (c->best_epoch == 0 ||
		(finite && objective < c->best - (c->atol + c->rtol * fabs(c->best))))
		c->since_best = 0;
	else
		c->since_best++;
	if (finite && (c->best_epoch == 0 || objective < c->best))
	{
		c->best_epoch = c->epochs;
		c->best = objective;
	}
	return c->since_best >= c->patience;
}
