/*-------------------------------------------------------------------------
 *
 * heap_page.h
 *	  Reading a heap table a page at a time, as a sequential scan does: the
 *	  one place that knows the heap's scan internals (heapgetpage,
 *	  HeapScanDesc's rs_vistuples), so the one place to change when they
 *	  change (PostgreSQL 16+).
 *
 * A page is read with heapgetpage(), which prunes it, checks each tuple's
 * visibility against the scan's snapshot, records serializable reads and
 * uses the bulk-read ring for a large table; its visible tuples are then
 * walked in line pointer order, the order heap_getnext gives.  Visibility
 * is never skipped and no page is read raw (ARCHITECTURE.md, "Reading a
 * block").  A tuple points into the pinned page: no slot and no pin per
 * tuple.
 *
 *-------------------------------------------------------------------------
 */
#ifndef CORGIPILE_IO_HEAP_PAGE_H
#define CORGIPILE_IO_HEAP_PAGE_H

#include "postgres.h"

#include "access/htup_details.h"
#include "access/tableam.h"
#include "storage/bufpage.h"
#include "utils/snapshot.h"

/* One page's visible tuples, valid until the scan reads another page. */
typedef struct CpHeapPage
{
	Oid			relid;			/* the table's, for t_tableOid */
	BlockNumber blkno;
	Buffer		buffer;			/* pinned by the scan */
	Page		page;
	const OffsetNumber *offsets;	/* the visible tuples' line pointers */
	int			n;				/* entries of offsets */
} CpHeapPage;

/*
 * A scan of the whole table, from its first page (never joining a
 * synchronized scan mid-table: the rows' order must not depend on what
 * else reads the table), under snapshot.  *n_pages is the table's page
 * count fixed at the start: every tuple the snapshot can see lies below it.
 * End it with table_endscan().
 */
extern TableScanDesc cp_heap_begin(Relation rel, Snapshot snapshot,
								   BlockNumber *n_pages);

/* Read page blkno (< n_pages) into *hp; serves interrupts first. */
extern void cp_heap_read_page(TableScanDesc scan, BlockNumber blkno,
							  CpHeapPage *hp);

/* The i-th visible tuple of the page (0 <= i < hp->n) into *tup. */
static inline void
cp_heap_page_tuple(const CpHeapPage *hp, int i, HeapTuple tup)
{
	OffsetNumber off = hp->offsets[i];
	ItemId		lpp = PageGetItemId(hp->page, off);

	tup->t_data = (HeapTupleHeader) PageGetItem(hp->page, lpp);
	tup->t_len = ItemIdGetLength(lpp);
	tup->t_tableOid = hp->relid;
	ItemPointerSet(&tup->t_self, hp->blkno, off);
}

#endif							/* CORGIPILE_IO_HEAP_PAGE_H */
