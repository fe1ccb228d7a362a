/*-------------------------------------------------------------------------
 *
 * call_scan.h
 *	  A FROM-clause call of corgipile.train() or shuffled_scan() whose
 *	  arguments are known only at execution (call_scan.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef CORGIPILE_CALL_SCAN_H
#define CORGIPILE_CALL_SCAN_H

#include "postgres.h"

#include "nodes/extensible.h"

extern CustomScanMethods cp_call_scan_methods;
extern CustomScan *cp_call_make_plan(List *args, bool shuffled_scan, List *tlist,
									 List *scan_tlist, List *quals, Index rti);

#endif							/* CORGIPILE_CALL_SCAN_H */
