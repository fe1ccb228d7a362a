/*-------------------------------------------------------------------------
 *
 * evaluate_dist.h
 *	  evaluate() on a Citus table: its shards scored on their nodes, the
 *	  parts merged here (evaluate_dist.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef CORGIPILE_EVALUATE_DIST_H
#define CORGIPILE_EVALUATE_DIST_H

#include "postgres.h"

#include "io/layout.h"
#include "model/metrics.h"

extern void cp_evaluate_shards(CpEvalState *ev, CpLayout *lo, Oid relid);

#endif							/* CORGIPILE_EVALUATE_DIST_H */
