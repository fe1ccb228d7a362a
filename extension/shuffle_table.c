/*-------------------------------------------------------------------------
 *
 * shuffle_table.c
 *	  corgipile.shuffle_table(src, dst, seed): write a fully shuffled copy
 *	  of a table with the two-pass external shuffle.
 *
 * Pass 1 scans src once and appends each tuple to one of M temporary files
 * ("piles") chosen uniformly at random; pass 2 loads one pile at a time,
 * Fisher-Yates-shuffles it in memory and inserts its tuples into dst.
 * M is chosen so that a pile is expected to fill 80% of work_mem, the
 * budget a sort of the same table would get; a pile that comes out larger
 * is still loaded whole.  The result is a uniform permutation of the table
 * (papers/two-pass-shuffle.txt), with two sequential passes of I/O and no
 * comparisons, where ORDER BY random() sorts.
 *
 * dst is created with CREATE TABLE dst (LIKE src INCLUDING ALL) minus
 * indexes, which would otherwise be maintained row by row; create them
 * afterwards.  Tuples are copied whole; values stored out of line in src's
 * TOAST table are fetched and stored again for dst by the insertion.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <math.h>

#include "access/heapam.h"
#include "access/relation.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "catalog/namespace.h"
#include "executor/spi.h"
#include "executor/tuptable.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "storage/buffile.h"
#include "storage/bufmgr.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"
#include "utils/varlena.h"

#include "core/shuffle.h"
#include "corgipile.h"

PG_FUNCTION_INFO_V1(corgipile_shuffle_table);

#define CP_PILE_FILL 0.8

static void
pile_write(BufFile *f, HeapTuple tup)
{
	uint32		len = tup->t_len;

	BufFileWrite(f, &len, sizeof(len));
	BufFileWrite(f, tup->t_data, len);
}

/* Read the next tuple of a pile, or NULL at its end. */
static HeapTuple
pile_read(BufFile *f)
{
	uint32		len;
	HeapTuple	tup;

	if (BufFileRead(f, &len, sizeof(len)) == 0)
		return NULL;
	tup = (HeapTuple) palloc(HEAPTUPLESIZE + len);
	tup->t_len = len;
	ItemPointerSetInvalid(&tup->t_self);
	tup->t_tableOid = InvalidOid;
	tup->t_data = (HeapTupleHeader) ((char *) tup + HEAPTUPLESIZE);
	if (BufFileRead(f, tup->t_data, len) != len)
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("corgipile: could not read from a temporary shuffle file")));
	return tup;
}

/* CREATE TABLE dst (LIKE src ...) and return dst's OID. */
static Oid
create_destination(Relation src, const char *dst)
{
	List	   *names;
	RangeVar   *rv;
	char	   *sql;
	Oid			relid;

	names = textToQualifiedNameList(cstring_to_text(dst));
	rv = makeRangeVarFromNameList(names);
	sql = psprintf("CREATE TABLE %s (LIKE %s INCLUDING DEFAULTS INCLUDING CONSTRAINTS "
				   "INCLUDING GENERATED INCLUDING IDENTITY INCLUDING STORAGE "
				   "INCLUDING COMMENTS INCLUDING COMPRESSION)",
				   quote_qualified_identifier(rv->schemaname, rv->relname),
				   quote_qualified_identifier(get_namespace_name(RelationGetNamespace(src)),
											  RelationGetRelationName(src)));
	SPI_connect();
	if (SPI_execute(sql, false, 0) != SPI_OK_UTILITY)
		elog(ERROR, "corgipile: could not create \"%s\"", dst);
	SPI_finish();
	CommandCounterIncrement();
	relid = RangeVarGetRelid(rv, AccessExclusiveLock, false);
	return relid;
}

Datum
corgipile_shuffle_table(PG_FUNCTION_ARGS)
{
	Oid			src_oid = PG_GETARG_OID(0);
	char	   *dst_name = text_to_cstring(PG_GETARG_TEXT_PP(1));
	pg_prng_state rng;
	Relation	src;
	Relation	dst;
	TableScanDesc scan;
	TupleTableSlot *in;
	TupleTableSlot *out;
	BufFile   **piles;
	int			n_piles;
	double		budget = (double) work_mem * 1024.0 * CP_PILE_FILL;
	BulkInsertState bistate;
	CommandId	cid;
	MemoryContext pile_cxt;
	MemoryContext old;
	int64		rows = 0;
	AclResult	acl;

	if (PG_ARGISNULL(2))
		pg_prng_seed(&rng, pg_prng_uint64(&pg_global_prng_state));
	else
		pg_prng_seed(&rng, cp_derive_seed((uint64) PG_GETARG_INT64(2), 4));

	src = relation_open(src_oid, AccessShareLock);
	cp_check_relation(src, "relation");
	acl = pg_class_aclcheck(src_oid, GetUserId(), ACL_SELECT);
	if (acl != ACLCHECK_OK)
		aclcheck_error(acl, get_relkind_objtype(src->rd_rel->relkind),
					   RelationGetRelationName(src));

	dst = table_open(create_destination(src, dst_name), NoLock);

	/* pass 1: scatter the tuples over the piles */
	n_piles = (int) Min(Max(1.0, ceil((double) RelationGetNumberOfBlocks(src) * BLCKSZ / budget)),
						(double) (MaxAllocSize / sizeof(BufFile *)));
	piles = palloc(sizeof(BufFile *) * n_piles);
	for (int k = 0; k < n_piles; k++)
		piles[k] = BufFileCreateTemp(false);
	scan = table_beginscan(src, GetActiveSnapshot(), 0, NULL);
	in = table_slot_create(src, NULL);
	while (table_scan_getnextslot(scan, ForwardScanDirection, in))
	{
		bool		should_free;
		HeapTuple	tup = ExecFetchSlotHeapTuple(in, false, &should_free);

		pile_write(piles[pg_prng_uint64_range(&rng, 0, n_piles - 1)], tup);
		if (should_free)
			heap_freetuple(tup);
		if ((++rows & 1023) == 0)
			CHECK_FOR_INTERRUPTS();
	}
	table_endscan(scan);
	ExecDropSingleTupleTableSlot(in);

	/* pass 2: shuffle each pile in memory and append it to dst */
	bistate = GetBulkInsertState();
	cid = GetCurrentCommandId(true);
	out = MakeSingleTupleTableSlot(RelationGetDescr(dst), &TTSOpsHeapTuple);
	pile_cxt = AllocSetContextCreate(CurrentMemoryContext, "corgipile pile",
									 ALLOCSET_DEFAULT_SIZES);
	for (int k = 0; k < n_piles; k++)
	{
		HeapTuple  *tuples;
		int64		n = 0;
		int64		cap = 1024;
		HeapTuple	tup;

		if (BufFileSeek(piles[k], 0, 0, SEEK_SET) != 0)
			ereport(ERROR,
					(errcode_for_file_access(),
					 errmsg("corgipile: could not rewind a temporary shuffle file")));
		old = MemoryContextSwitchTo(pile_cxt);
		tuples = palloc(sizeof(HeapTuple) * cap);
		while ((tup = pile_read(piles[k])) != NULL)
		{
			if (n == cap)
			{
				cap *= 2;
				tuples = repalloc_huge(tuples, sizeof(HeapTuple) * cap);
			}
			tuples[n++] = tup;
		}
		MemoryContextSwitchTo(old);
		BufFileClose(piles[k]);

		for (int64 i = n - 1; i > 0; i--)
		{
			int64		j = (int64) pg_prng_uint64_range(&rng, 0, (uint64) i);
			HeapTuple	t = tuples[i];

			tuples[i] = tuples[j];
			tuples[j] = t;
		}
		for (int64 i = 0; i < n; i++)
		{
			ExecStoreHeapTuple(tuples[i], out, false);
			table_tuple_insert(dst, out, cid, 0, bistate);
			ExecClearTuple(out);
			if ((i & 1023) == 0)
				CHECK_FOR_INTERRUPTS();
		}
		MemoryContextReset(pile_cxt);
	}
	FreeBulkInsertState(bistate);
	ExecDropSingleTupleTableSlot(out);
	table_close(dst, NoLock);
	relation_close(src, NoLock);
	PG_RETURN_INT64(rows);
}
