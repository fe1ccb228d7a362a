/*-------------------------------------------------------------------------
 *
 * heap_page.c
 *	  Reading a heap table a page at a time (heap_page.h).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/heapam.h"
#include "access/relscan.h"
#include "miscadmin.h"
#include "storage/bufmgr.h"
#include "utils/rel.h"

#include "io/heap_page.h"

TableScanDesc
cp_heap_begin(Relation rel, Snapshot snapshot, BlockNumber *n_pages)
{
	TableScanDesc scan = table_beginscan_strat(rel, snapshot, 0, NULL,
											   true, false);

	*n_pages = ((HeapScanDesc) scan)->rs_nblocks;
	return scan;
}

void
cp_heap_read_page(TableScanDesc scan, BlockNumber blkno, CpHeapPage *hp)
{
	HeapScanDesc hscan = (HeapScanDesc) scan;

	CHECK_FOR_INTERRUPTS();
	heapgetpage(scan, blkno);
	hp->relid = RelationGetRelid(scan->rs_rd);
	hp->blkno = blkno;
	hp->buffer = hscan->rs_cbuf;
	hp->page = BufferGetPage(hscan->rs_cbuf);
	hp->offsets = hscan->rs_vistuples;
	hp->n = hscan->rs_ntuples;
}
