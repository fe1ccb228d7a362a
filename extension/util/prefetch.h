/*-------------------------------------------------------------------------
 *
 * prefetch.h
 *	  Asking the OS for a run of a relation's pages at once (prefetch.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef CORGIPILE_UTIL_PREFETCH_H
#define CORGIPILE_UTIL_PREFETCH_H

#include "postgres.h"

#include "storage/block.h"
#include "utils/relcache.h"

typedef struct CpPrefetcher
{
	Relation	rel;
	bool		enabled;
	int			fd;				/* the open segment's descriptor, or -1 */
	BlockNumber segno;			/* which segment fd is */
	int64		runs;			/* runs the OS was asked for (EXPLAIN) */
} CpPrefetcher;

extern void cp_prefetch_init(CpPrefetcher *pf, Relation rel);
extern void cp_prefetch_range(CpPrefetcher *pf, BlockNumber first, BlockNumber end);
extern void cp_prefetch_end(CpPrefetcher *pf);

#endif							/* CORGIPILE_UTIL_PREFETCH_H */
