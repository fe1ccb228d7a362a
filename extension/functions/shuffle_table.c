/*-------------------------------------------------------------------------
 *
 * shuffle_table.c
 *	  corgipile.shuffle_table(src, dst, seed): write a fully shuffled copy
 *	  of a table with the two-pass external shuffle.
 *
 * Pass 1 scans src once and appends each tuple to one of M temporary files
 * ("piles", the pile module shuffle/piles.c that the full-shuffle training
 * strategies use too) chosen uniformly at random; pass 2 loads one pile at
 * a time,
 * Fisher-Yates-shuffles it in memory and inserts its tuples into dst.
 * M is chosen so that a pile is expected to fill 80% of work_mem, the
 * budget a sort of the same table would get; a pile that comes out larger
 * is still loaded whole.  Tuples go into dst in batches through
 * table_multi_insert(), as COPY does.  The result is a uniform permutation
 * of the table
 * (papers/two-pass-shuffle.txt), with two sequential passes of I/O and no
 * comparisons, where ORDER BY random() sorts.
 *
 * dst is created with CREATE TABLE dst (LIKE src INCLUDING ALL) minus
 * indexes, which would otherwise be maintained row by row; create them
 * afterwards.  dst's physical layout is not src's: LIKE leaves out dropped
 * columns, and values that src holds only in the catalog (attmissingval,
 * from ADD COLUMN ... DEFAULT) must be stored in dst's tuples.  So each
 * tuple is deformed with src's descriptor (which fills in missing values),
 * its values are mapped column by column onto dst's attributes, and a new
 * tuple is formed with dst's descriptor.  Values stored out of line in
 * src's TOAST table are detoasted here and stored again for dst by the
 * insertion.  Generated columns keep their stored values (the expression
 * is the same); identity columns keep their values, while dst's identity
 * sequence starts afresh, as after CREATE TABLE ... LIKE and INSERT ...
 * OVERRIDING SYSTEM VALUE.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/detoast.h"
#include "access/heapam.h"
#include "access/htup_details.h"
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
#include "util/relation.h"
#include "util/spi.h"
#include "shuffle/piles.h"

PG_FUNCTION_INFO_V1(corgipile_shuffle_table);

/* tuples handed to table_multi_insert at a time, as COPY does */
#define CP_INSERT_BATCH 1000

/*
 * A record is the tuple's length (8 bytes) and its bytes, padded so that
 * every tuple starts MAXALIGNed when the pile is loaded whole.
 */
static void
pile_write(CpPileSet *piles, int k, HeapTuple tup)
{
	static const char zeros[MAXIMUM_ALIGNOF] = {0};
	uint64		len = tup->t_len;

	cp_piles_write(piles, k, &len, sizeof(len));
	cp_piles_write(piles, k, tup->t_data, len);
	if (MAXALIGN(len) > len)
		cp_piles_write(piles, k, zeros, MAXALIGN(len) - len);
}

/*
 * Load a whole pile (size bytes, as written: a temporary BufFile does not
 * know its own size until flushed) in one read into an arena, and point a
 * tuple header at each record; returns the number of tuples.
 */
static int64
pile_load(BufFile *f, int64 size, HeapTupleData **tuples_out)
{
	char	   *arena;
	char	   *p;
	char	   *end;
	int64		n = 0;
	int64		cap = 1024;
	HeapTupleData *tuples;

	if (BufFileSeek(f, 0, 0, SEEK_SET) != 0)
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("corgipile: could not rewind a temporary shuffle file")));
	arena = MemoryContextAllocHuge(CurrentMemoryContext, Max(size, 1));
	if (size > 0 && BufFileRead(f, arena, size) != (size_t) size)
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("corgipile: could not read from a temporary shuffle file")));
	tuples = palloc(sizeof(HeapTupleData) * cap);
	for (p = arena, end = arena + size; p < end;)
	{
		uint64		len;

		memcpy(&len, p, sizeof(len));
		p += sizeof(len);
		if (n == cap)
		{
			cap *= 2;
			tuples = repalloc_huge(tuples, mul_size(sizeof(HeapTupleData), cap));
		}
		tuples[n].t_len = (uint32) len;
		ItemPointerSetInvalid(&tuples[n].t_self);
		tuples[n].t_tableOid = InvalidOid;
		tuples[n].t_data = (HeapTupleHeader) p;
		p += MAXALIGN(len);
		n++;
	}
	*tuples_out = tuples;
	return n;
}

/*
 * For each attribute of dst, the attribute of src that holds its value:
 * LIKE copies src's live columns in order, under the same names and types.
 * Anything else (a concurrent change, which the locks rule out) is refused
 * rather than copied wrong.
 */
static AttrNumber *
map_columns(TupleDesc sdesc, TupleDesc ddesc, const char *dst)
{
	AttrNumber *map = palloc0(sizeof(AttrNumber) * Max(ddesc->natts, 1));
	int			j = 0;

	for (int i = 0; i < ddesc->natts; i++)
	{
		Form_pg_attribute d = TupleDescAttr(ddesc, i);
		Form_pg_attribute sa = NULL;

		while (j < sdesc->natts && TupleDescAttr(sdesc, j)->attisdropped)
			j++;
		if (j < sdesc->natts)
			sa = TupleDescAttr(sdesc, j);
		if (d->attisdropped || sa == NULL ||
			strcmp(NameStr(d->attname), NameStr(sa->attname)) != 0 ||
			d->atttypid != sa->atttypid || d->atttypmod != sa->atttypmod)
			ereport(ERROR,
					(errcode(ERRCODE_DATATYPE_MISMATCH),
					 errmsg("corgipile.shuffle_table: column \"%s\" of \"%s\" does not match the source table",
							NameStr(d->attname), dst)));
		map[i] = sa->attnum;
		j++;
	}
	return map;
}

/* CREATE TABLE dst (LIKE src ...) and return dst's OID. */
static Oid
create_destination(Relation src, const char *dst)
{
	List	   *names;
	RangeVar   *rv;
	char	   *sql;
	Oid			relid;
	int			nest;

	names = textToQualifiedNameList(cstring_to_text(dst));
	rv = makeRangeVarFromNameList(names);

	/*
	 * The schema is resolved with the caller's search_path, as CREATE TABLE
	 * would; the statement then runs under a pinned one and names it.
	 */
	if (rv->schemaname == NULL)
		rv->schemaname = get_namespace_name(RangeVarGetCreationNamespace(rv));
	sql = psprintf("CREATE TABLE %s (LIKE %s INCLUDING DEFAULTS INCLUDING CONSTRAINTS "
				   "INCLUDING GENERATED INCLUDING IDENTITY INCLUDING STORAGE "
				   "INCLUDING COMMENTS INCLUDING COMPRESSION)",
				   quote_qualified_identifier(rv->schemaname, rv->relname),
				   quote_qualified_identifier(get_namespace_name(RelationGetNamespace(src)),
											  RelationGetRelationName(src)));
	nest = cp_pin_search_path();
	SPI_connect();
	if (SPI_execute(sql, false, 0) != SPI_OK_UTILITY)
		elog(ERROR, "corgipile: could not create \"%s\"", dst);
	SPI_finish();
	cp_restore_search_path(nest);
	CommandCounterIncrement();
	relid = RangeVarGetRelid(rv, AccessExclusiveLock, false);
	return relid;
}

Datum
corgipile_shuffle_table(PG_FUNCTION_ARGS)
{
	Oid			src_oid;
	char	   *dst_name;
	pg_prng_state rng;
	Relation	src;
	Relation	dst;
	TableScanDesc scan;
	TupleTableSlot *in;
	TupleTableSlot **batch;
	CpPileSet	piles;
	BulkInsertState bistate;
	CommandId	cid;
	MemoryContext pile_cxt;
	MemoryContext old;
	int64		rows = 0;
	AclResult	acl;
	TupleDesc	sdesc;
	TupleDesc	ddesc;
	AttrNumber *map;
	Datum	   *svalues;
	bool	   *sisnull;
	Datum	   *dvalues;
	bool	   *disnull;
	MemoryContext batch_cxt;

	/* not STRICT, so that a NULL seed means a random one */
	if (PG_ARGISNULL(0) || PG_ARGISNULL(1))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("corgipile.shuffle_table: %s must not be NULL",
						PG_ARGISNULL(0) ? "src" : "dst")));
	src_oid = PG_GETARG_OID(0);
	dst_name = text_to_cstring(PG_GETARG_TEXT_PP(1));
	if (dst_name[0] == '\0')
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_NAME),
				 errmsg("corgipile.shuffle_table: dst must name the table to create")));

	if (PG_ARGISNULL(2))
		pg_prng_seed(&rng, pg_prng_uint64(&pg_global_prng_state));
	else
		pg_prng_seed(&rng, cp_derive_seed((uint64) PG_GETARG_INT64(2), 4));

	src = cp_open_relation(src_oid, AccessShareLock, "relation");
	cp_check_relation(src, "relation");
	acl = pg_class_aclcheck(src_oid, GetUserId(), ACL_SELECT);
	if (acl != ACLCHECK_OK)
		aclcheck_error(acl, get_relkind_objtype(src->rd_rel->relkind),
					   RelationGetRelationName(src));

	dst = table_open(create_destination(src, dst_name), NoLock);

	/* pass 1: scatter the tuples over the piles */
	cp_piles_open(&piles,
				  cp_piles_count((double) RelationGetNumberOfBlocks(src) * BLCKSZ,
								 (double) work_mem * 1024.0),
				  CurrentMemoryContext);
	scan = table_beginscan(src, GetActiveSnapshot(), 0, NULL);
	in = table_slot_create(src, NULL);
	while (table_scan_getnextslot(scan, ForwardScanDirection, in))
	{
		bool		should_free;
		HeapTuple	tup = ExecFetchSlotHeapTuple(in, false, &should_free);

		int			k = cp_piles_choose(&piles, &rng);

		pile_write(&piles, k, tup);
		if (should_free)
			heap_freetuple(tup);
		if ((++rows & 1023) == 0)
			CHECK_FOR_INTERRUPTS();
	}
	table_endscan(scan);
	ExecDropSingleTupleTableSlot(in);

	/*
	 * pass 2: shuffle each pile in memory and append it to dst, a batch of
	 * tuples at a time as COPY does (one WAL record per page filled rather
	 * than per row)
	 */
	bistate = GetBulkInsertState();
	cid = GetCurrentCommandId(true);
	sdesc = RelationGetDescr(src);
	ddesc = RelationGetDescr(dst);
	map = map_columns(sdesc, ddesc, RelationGetRelationName(dst));
	svalues = palloc(sizeof(Datum) * Max(sdesc->natts, 1));
	sisnull = palloc(sizeof(bool) * Max(sdesc->natts, 1));
	dvalues = palloc(sizeof(Datum) * Max(ddesc->natts, 1));
	disnull = palloc(sizeof(bool) * Max(ddesc->natts, 1));
	batch_cxt = AllocSetContextCreate(CurrentMemoryContext, "corgipile insert batch",
									  ALLOCSET_DEFAULT_SIZES);
	batch = palloc(sizeof(TupleTableSlot *) * CP_INSERT_BATCH);
	for (int i = 0; i < CP_INSERT_BATCH; i++)
		batch[i] = MakeSingleTupleTableSlot(ddesc, &TTSOpsHeapTuple);
	pile_cxt = AllocSetContextCreate(CurrentMemoryContext, "corgipile pile",
									 ALLOCSET_DEFAULT_SIZES);
	for (int k = 0; k < piles.n_piles; k++)
	{
		HeapTupleData *tuples;
		uint32	   *order;
		int64		n;
		int			filled = 0;

		old = MemoryContextSwitchTo(pile_cxt);
		n = pile_load(piles.files[k], piles.bytes[k], &tuples);
		cp_piles_close_one(&piles, k);
		order = MemoryContextAllocHuge(CurrentMemoryContext,
									   mul_size(sizeof(uint32), Max(n, 1)));
		cp_order_identity(order, n);
		cp_shuffle_uint32(order, n, &rng);
		MemoryContextSwitchTo(old);

		for (int64 i = 0; i < n; i++)
		{
			HeapTuple	formed;

			/*
			 * src's values (missing ones filled in) as dst's columns, formed
			 * into a tuple of dst's layout in the batch's memory
			 */
			heap_deform_tuple(&tuples[order[i]], sdesc, svalues, sisnull);
			old = MemoryContextSwitchTo(batch_cxt);
			for (int a = 0; a < ddesc->natts; a++)
			{
				int			from = map[a] - 1;
				Datum		v = svalues[from];

				/* a value in src's TOAST table is fetched, then stored anew */
				if (!sisnull[from] && TupleDescAttr(ddesc, a)->attlen == -1 &&
					VARATT_IS_EXTERNAL(DatumGetPointer(v)))
					v = PointerGetDatum(detoast_external_attr((struct varlena *) DatumGetPointer(v)));
				dvalues[a] = v;
				disnull[a] = sisnull[from];
			}
			formed = heap_form_tuple(ddesc, dvalues, disnull);
			MemoryContextSwitchTo(old);
			ExecStoreHeapTuple(formed, batch[filled++], false);
			if (filled == CP_INSERT_BATCH || i == n - 1)
			{
				/* what the insertion allocates (TOAST) goes with the batch */
				old = MemoryContextSwitchTo(batch_cxt);
				table_multi_insert(dst, batch, filled, cid, TABLE_INSERT_SKIP_FSM, bistate);
				MemoryContextSwitchTo(old);
				for (int j = 0; j < filled; j++)
					ExecClearTuple(batch[j]);
				MemoryContextReset(batch_cxt);
				filled = 0;
				CHECK_FOR_INTERRUPTS();
			}
		}
		MemoryContextReset(pile_cxt);
	}
	cp_piles_close(&piles);
	for (int i = 0; i < CP_INSERT_BATCH; i++)
		ExecDropSingleTupleTableSlot(batch[i]);
	FreeBulkInsertState(bistate);
	table_close(dst, NoLock);
	relation_close(src, NoLock);
	PG_RETURN_INT64(rows);
}
