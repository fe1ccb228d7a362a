/*-------------------------------------------------------------------------
 *
 * planner.h
 *	  Replacing the function scan of corgipile.train() by the operators
 *	  (planner.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef CORGIPILE_PLANNER_H
#define CORGIPILE_PLANNER_H

#include "postgres.h"


extern void cp_planner_init(void);

#endif							/* CORGIPILE_PLANNER_H */
