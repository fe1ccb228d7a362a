/*-------------------------------------------------------------------------
 *
 * sizing.c
 *	  corgipile.sizing(relation, block_size, buffer_size, pages): how
 *	  corgipile.train() would cut a relation into blocks and buffers.
 *
 * The arguments go through the same checks as train()'s (params.c, with
 * train()'s defaults for the others), and the sizes come from the same
 * cp_resolve_sizing, so a client that reads blocks itself (corgipile.torch)
 * asks the engine instead of restating its rules.  pages overrides the
 * measured size: a client that reads several shards as one table sizes
 * their sum, and one that measured the relation in an exported snapshot
 * passes what it measured.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "access/relation.h"
#include "catalog/pg_type.h"
#include "fmgr.h"
#include "funcapi.h"
#include "storage/bufmgr.h"
#include "utils/builtins.h"
#include "utils/rel.h"

#include "util/relation.h"
#include "params/params.h"

PG_FUNCTION_INFO_V1(corgipile_sizing);

Datum
corgipile_sizing(PG_FUNCTION_ARGS)
{
	Datum		values[CP_NUM_ARGS];
	bool		nulls[CP_NUM_ARGS];
	CpTrainParams p;
	CpSizing	s;
	TupleDesc	tupdesc;
	Datum		out[5];
	bool		outnull[5] = {false, false, false, false, false};
	BlockNumber n_pages;
	int			i = 0;

	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("corgipile.sizing: relation must not be NULL")));

	/* train()'s defaults, then this call's sizes: the same checks apply */
#define CP_ARG_DEFAULT(id, name, type, isnull, datum, sqldefault) \
	nulls[i] = (isnull); \
	values[i] = (isnull) ? (Datum) 0 : (datum); \
	i++;
	CP_TRAIN_ARGS(CP_ARG_DEFAULT)
#undef CP_ARG_DEFAULT
	values[CP_ARG_RELATION] = PG_GETARG_DATUM(0);
	nulls[CP_ARG_RELATION] = false;
	values[CP_ARG_MODEL] = CStringGetTextDatum("svm");
	nulls[CP_ARG_MODEL] = false;
	values[CP_ARG_BLOCK_SIZE] = PG_ARGISNULL(1) ? (Datum) 0 : PG_GETARG_DATUM(1);
	nulls[CP_ARG_BLOCK_SIZE] = PG_ARGISNULL(1);
	/* NULL: train()'s default, the whole table if it fits (cp_buffer_choice) */
	values[CP_ARG_BUFFER_SIZE] = PG_ARGISNULL(2) ? (Datum) 0 : PG_GETARG_DATUM(2);
	nulls[CP_ARG_BUFFER_SIZE] = PG_ARGISNULL(2);
	/* the checks' errors name this function, not train() */
	cp_params_fn = "corgipile.sizing";
	PG_TRY();
	{
		cp_params_from_datums(values, nulls, &p);
	}
	PG_FINALLY();
	{
		cp_params_fn = "corgipile.train";
	}
	PG_END_TRY();

	if (PG_ARGISNULL(3))
	{
		Relation	rel = cp_open_relation(p.relid, AccessShareLock, "relation");

		cp_check_relation(rel, "relation");
		n_pages = RelationGetNumberOfBlocks(rel);
		relation_close(rel, AccessShareLock);
	}
	else
	{
		int64		pages = PG_GETARG_INT64(3);

		if (pages < 0 || pages > (int64) MaxBlockNumber)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("corgipile.sizing: pages must be between 0 and %u, got " INT64_FORMAT,
							MaxBlockNumber, pages),
					 errhint("Leave pages NULL to measure the relation.")));
		n_pages = (BlockNumber) pages;
	}

	cp_resolve_sizing(&p, n_pages, &s);

	if (get_call_result_type(fcinfo, NULL, &tupdesc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "corgipile.sizing: return type must be a row type");
	tupdesc = BlessTupleDesc(tupdesc);
	out[0] = Int64GetDatum((int64) s.n_pages);
	out[1] = Int32GetDatum(BLCKSZ);
	out[2] = Int64GetDatum((int64) s.pages_per_block);
	out[3] = Int64GetDatum((int64) s.n_blocks);
	out[4] = Int64GetDatum((int64) s.blocks_per_buffer);
	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(tupdesc, out, outnull)));
}
