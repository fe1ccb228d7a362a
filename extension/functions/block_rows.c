/*-------------------------------------------------------------------------
 *
 * block_rows.c
 *	  corgipile.block_rows(relation, first_pages, pages_per_block, ...): the
 *	  rows of whole blocks, converted as training converts them, packed as
 *	  little-endian float32 or float64 bytes.
 *
 * The reader of corgipile.torch asks for a buffer's blocks in one call and
 * gets one row per block (or per chunk of a large block): the number of
 * rows, the labels as float64, the features as a dense n_rows x dim matrix
 * and optionally the id column as int64.  Sending raw element bytes instead
 * of arrays spares the server array_send's per-element work and the client
 * the per-row parsing (docs/torch.md).
 *
 * Rows are converted by the engine's own layout (io/layout.c): a numeric
 * array, a list of numeric columns, or a sparse index/value pair (made
 * dense here); rows with a NULL label or features are skipped, as training
 * skips them.  With model => 'm' the model's columns, label encoding and
 * preprocessing apply (standardize, one-hot categories), so a table that
 * train() takes feeds PyTorch with the same encoding as the model (for a
 * role that may see the model's preprocessing: the models view's rule, as
 * for model_coefficients): labels
 * are then the softmax class number, 0/1 for a binary model (1 the
 * positive class) or the value for linear regression.  Without a model the
 * features are the raw numbers and the label is its numeric value.
 *
 * Pages are read as BlockShuffle reads them (io/heap_page.h: pruning,
 * visibility under the query's snapshot, serializable checks; then the
 * visible tuples in line pointer order), after the checks train() makes: a heap
 * table without row-level security, and SELECT on the columns read.
 * Memory is bounded by CP_BLOCK_ROWS_CHUNK_BYTES of converted features per
 * output row, whatever the block size.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "access/relation.h"
#include "access/sysattr.h"
#include "access/tableam.h"
#include "catalog/pg_type.h"
#include "executor/tuptable.h"
#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "port/pg_bswap.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"
#include "utils/varlena.h"

#include "util/relation.h"
#include "io/heap_page.h"
#include "io/layout.h"
#include "model/metrics.h"
#include "io/prep.h"
#include "model/models.h"
#include "util/datum_convert.h"

PG_FUNCTION_INFO_V1(corgipile_block_rows);

/* converted features (as doubles) held before a chunk is sent */
#define CP_BLOCK_ROWS_CHUNK_BYTES (16 * 1024 * 1024)

/* output columns */
enum
{
	BR_PAGE,
	BR_N_ROWS,
	BR_DIM,
	BR_Y,
	BR_X,
	BR_IDS,
	BR_NCOLS
};

typedef struct BlockRowsState
{
	Relation	rel;
	TableScanDesc scan;
	TupleTableSlot *slot;
	HeapTupleData tuple;
	CpLayout	lo;
	CpBuffer	buf;
	MemoryContext row_cxt;
	CpModelKind kind;
	bool		with_model;
	bool		float8;
	TupleDesc	tupdesc;

	int64	   *first_pages;
	int			n_blocks;
	uint32		pages_per_block;
	BlockNumber rel_pages;

	int			block_idx;		/* the next block to read */
	bool		in_block;		/* block_idx is being read */
	BlockNumber page;
	BlockNumber page_end;
	bool		page_loaded;
	CpHeapPage	hp;				/* the page read, once page_loaded */
	int			tuple_idx;

	AttrNumber	id_attno;		/* 0: no id column */
	Oid			id_type;
	int64	   *ids;
	int64		ids_cap;
	bool		finished;
	ExprContext *econtext;		/* where end_scan is registered, or NULL */
} BlockRowsState;

static void
end_scan(Datum arg)
{
	BlockRowsState *st = (BlockRowsState *) DatumGetPointer(arg);

	if (st->finished)
		return;
	st->finished = true;
	ExecDropSingleTupleTableSlot(st->slot);
	table_endscan(st->scan);
	relation_close(st->rel, NoLock);
}

static char *
text_or_null(FunctionCallInfo fcinfo, int i)
{
	return PG_ARGISNULL(i) ? NULL : text_to_cstring(PG_GETARG_TEXT_PP(i));
}

static AttrNumber
find_id_column(Relation rel, const char *name, Oid *type)
{
	TupleDesc	desc = RelationGetDescr(rel);

	for (int i = 0; i < desc->natts; i++)
	{
		Form_pg_attribute a = TupleDescAttr(desc, i);

		if (!a->attisdropped && strcmp(NameStr(a->attname), name) == 0)
		{
			*type = getBaseType(a->atttypid);
			if (!cp_is_index_type(*type))
				ereport(ERROR,
						(errcode(ERRCODE_DATATYPE_MISMATCH),
						 errmsg("corgipile.block_rows: id_column \"%s\" of relation \"%s\" has type %s; expected smallint, integer or bigint",
								name, RelationGetRelationName(rel),
								format_type_be(a->atttypid))));
			return a->attnum;
		}
	}
	ereport(ERROR,
			(errcode(ERRCODE_UNDEFINED_COLUMN),
			 errmsg("corgipile.block_rows: id_column \"%s\" does not exist in relation \"%s\"",
					name, RelationGetRelationName(rel))));
	return InvalidAttrNumber;
}

/* Resolve the arguments, check access and start the scan. */
static BlockRowsState *
begin(FunctionCallInfo fcinfo)
{
	BlockRowsState *st = palloc0(sizeof(BlockRowsState));
	char	   *label = text_or_null(fcinfo, 3);
	char	   *features = text_or_null(fcinfo, 4);
	char	   *feature_indices = text_or_null(fcinfo, 5);
	char	   *model = text_or_null(fcinfo, 6);
	char	   *id_column = text_or_null(fcinfo, 7);
	char	   *dtype;
	ArrayType  *pages;
	Datum	   *elems;
	bool	   *elnulls;
	int			n;
	int32		ppb;
	Bitmapset  *cols;

	{
		/* the arguments without a default, and dtype: name the NULL one */
		static const struct
		{
			int			arg;
			const char *name;
		}			required[] = {{0, "relation"}, {1, "first_pages"}, {2, "pages_per_block"}, {9, "dtype"}};

		for (int i = 0; i < lengthof(required); i++)
			if (PG_ARGISNULL(required[i].arg))
				ereport(ERROR,
						(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
						 errmsg("corgipile.block_rows: %s must not be NULL", required[i].name)));
	}
	ppb = PG_GETARG_INT32(2);
	if (ppb < 1)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("corgipile.block_rows: pages_per_block must be positive, got %d", ppb),
				 errhint("corgipile.sizing() gives the engine's pages_per_block for a relation.")));
	st->pages_per_block = (uint32) ppb;
	dtype = text_to_cstring(PG_GETARG_TEXT_PP(9));
	if (strcmp(dtype, "float4") == 0 || strcmp(dtype, "float32") == 0)
		st->float8 = false;
	else if (strcmp(dtype, "float8") == 0 || strcmp(dtype, "float64") == 0)
		st->float8 = true;
	else
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("corgipile.block_rows: unknown dtype \"%s\"", dtype),
				 errhint("Use 'float4' or 'float8'.")));

	pages = PG_GETARG_ARRAYTYPE_P(1);
	if (ARR_NDIM(pages) > 1)
		ereport(ERROR,
				(errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
				 errmsg("corgipile.block_rows: first_pages must be a one-dimensional array")));
	deconstruct_array(pages, INT8OID, 8, FLOAT8PASSBYVAL, TYPALIGN_DOUBLE,
					  &elems, &elnulls, &n);
	st->first_pages = palloc(sizeof(int64) * Max(n, 1));
	for (int i = 0; i < n; i++)
	{
		if (elnulls[i] || DatumGetInt64(elems[i]) < 0 ||
			DatumGetInt64(elems[i]) > (int64) MaxBlockNumber)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("corgipile.block_rows: first_pages[%d] is %s; expected a page number between 0 and %u",
							i + 1, elnulls[i] ? "NULL" :
							psprintf(INT64_FORMAT, DatumGetInt64(elems[i])),
							MaxBlockNumber)));
		st->first_pages[i] = DatumGetInt64(elems[i]);
	}
	st->n_blocks = n;

	st->rel = cp_open_relation(PG_GETARG_OID(0), AccessShareLock, "relation");
	cp_check_relation(st->rel, "relation");

	if (model != NULL)
	{
		const CpStoredModel *m;

		if (label != NULL || features != NULL || feature_indices != NULL)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("corgipile.block_rows: model => '%s' reads the model's own label and feature columns", model),
					 errhint("Leave label, features and feature_indices NULL when a model is named.")));
		m = cp_models_load(model);
		/* encoded rows beside raw ones would reveal the model's statistics */
		cp_models_check_may_see_data(m, "Rows encoded with it");
		cp_model_layout(m, st->rel, &st->lo);
		st->kind = m->kind;
		st->with_model = true;
	}
	else
	{
		CpTrainParams p;

		memset(&p, 0, sizeof(p));
		p.label = label ? label : "label";

		/*
		 * A numeric label is read as its value (linear regression's reading
		 * of it), a boolean as a binary classifier's (sent as 0/1); text
		 * classes need a model's dictionary.
		 */
		p.model = CP_MODEL_LINEAR;
		st->kind = CP_MODEL_LINEAR;
		{
			/* the name as SQL reads it ("label" quoted keeps its case) */
			List	   *names = NIL;
			AttrNumber	attno = SplitIdentifierString(pstrdup(p.label), ',', &names) &&
				list_length(names) == 1 ?
				get_attnum(RelationGetRelid(st->rel), linitial(names)) : InvalidAttrNumber;
			Oid			type = attno > 0 ? get_atttype(RelationGetRelid(st->rel), attno) : InvalidOid;

			if (OidIsValid(type) && getBaseType(type) == BOOLOID)
			{
				p.model = CP_MODEL_LOGISTIC;
				st->kind = CP_MODEL_LOGISTIC;
			}
			else if (OidIsValid(type) && (getBaseType(type) == TEXTOID ||
										  getBaseType(type) == VARCHAROID))
				ereport(ERROR,
						(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
						 errmsg("corgipile.block_rows: label column \"%s\" of relation \"%s\" holds text classes",
								p.label, RelationGetRelationName(st->rel)),
						 errhint("Name a model trained on this label (model => 'name') to send its class numbers.")));
		}
		p.features = features ? features : "features";
		p.feature_indices = feature_indices;
		p.n_features = PG_ARGISNULL(8) ? 0 : PG_GETARG_INT32(8);
		if (p.n_features < 0)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("corgipile.block_rows: n_features must be positive, got %d",
							p.n_features)));
		cp_layout_resolve(&st->lo, RelationGetDescr(st->rel),
						  RelationGetRelationName(st->rel), &p);
		if (st->lo.has_onehot)
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("corgipile.block_rows: the features of \"%s\" include text or boolean columns, which need a model's categories",
							RelationGetRelationName(st->rel)),
					 errhint("Name a model trained on these columns (model => 'name') to one-hot encode them as it does.")));
		if (st->lo.mode == CP_FEATURES_SPARSE && st->lo.n_features <= 0)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("corgipile.block_rows: sparse features need n_features"),
					 errhint("Sparse rows are sent dense: give their width, e.g. n_features => 1000.")));
	}

	st->lo.use = "reading them with corgipile.block_rows()";
	cols = cp_layout_columns(&st->lo);
	if (id_column != NULL)
	{
		st->id_attno = find_id_column(st->rel, id_column, &st->id_type);
		cols = bms_add_member(cols, st->id_attno - FirstLowInvalidHeapAttributeNumber);
	}
	cp_check_select(st->rel, cols);

	/* CSR for sparse rows and one-hot categories (made dense in pack()) */
	cp_buffer_init(&st->buf, CurrentMemoryContext, cp_layout_sparse_rows(&st->lo));
	st->row_cxt = AllocSetContextCreate(CurrentMemoryContext, "corgipile block_rows row",
										ALLOCSET_DEFAULT_SIZES);
	st->scan = cp_heap_begin(st->rel, GetActiveSnapshot(), &st->rel_pages);
	st->slot = table_slot_create(st->rel, NULL);
	return st;
}

/* The next visible tuple of the current block into the slot, or false. */
static bool
next_tuple(BlockRowsState *st)
{
	while (!st->page_loaded || st->tuple_idx >= st->hp.n)
	{
		if (st->page_loaded)
			st->page++;
		if (st->page >= st->page_end)
			return false;
		cp_heap_read_page(st->scan, st->page, &st->hp);
		st->page_loaded = true;
		st->tuple_idx = 0;
	}
	cp_heap_page_tuple(&st->hp, st->tuple_idx++, &st->tuple);
	ExecStoreBufferHeapTuple(&st->tuple, st->slot, st->hp.buffer);
	return true;
}

static void
put_float4(char *dst, double v)
{
	float4		f = (float4) v;
	uint32		u;

	memcpy(&u, &f, sizeof(u));
#ifdef WORDS_BIGENDIAN
	u = pg_bswap32(u);
#endif
	memcpy(dst, &u, sizeof(u));
}

static void
put_int8(char *dst, int64 v)
{
	uint64		u = (uint64) v;

#ifdef WORDS_BIGENDIAN
	u = pg_bswap64(u);
#endif
	memcpy(dst, &u, sizeof(u));
}

/* a double's bits, little-endian, as put_int8 writes them */
static void
put_float8(char *dst, double v)
{
	uint64		u;

	memcpy(&u, &v, sizeof(u));
	put_int8(dst, (int64) u);
}

/* The buffer's rows as an output row: page, n_rows, dim, y, x, ids. */
static HeapTuple
pack(BlockRowsState *st, int64 first_page)
{
	const CpBuffer *b = &st->buf;
	int64		n = b->n_rows;
	int			d = st->lo.n_features;
	Size		esize = st->float8 ? 8 : 4;
	Size		xbytes = mul_size(mul_size((Size) n, (Size) Max(d, 0)), esize);
	bytea	   *x;
	bytea	   *y;
	char	   *p;
	Datum		values[BR_NCOLS];
	bool		nulls[BR_NCOLS] = {false};

	if (xbytes > MaxAllocSize - VARHDRSZ)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("corgipile.block_rows: a chunk of " INT64_FORMAT " rows of %d features does not fit one bytea",
						n, d)));
	x = palloc(VARHDRSZ + xbytes);
	SET_VARSIZE(x, VARHDRSZ + xbytes);
	p = VARDATA(x);
	if (b->sparse)
	{
		memset(p, 0, xbytes);
		for (int64 r = 0; r < n; r++)
			for (int64 k = b->offsets[r]; k < b->offsets[r + 1]; k++)
			{
				char	   *at = p + ((Size) r * d + b->indices[k]) * esize;

				if (st->float8)
					put_float8(at, b->values[k]);
				else
					put_float4(at, b->values[k]);
			}
	}
	else if (st->float8)
	{
		for (int64 r = 0; r < n; r++)
		{
			const double *row = cp_buffer_dense_row(b, r);

			for (int j = 0; j < d; j++, p += 8)
				put_float8(p, row[j]);
		}
	}
	else
	{
		for (int64 r = 0; r < n; r++)
		{
			const double *row = cp_buffer_dense_row(b, r);

			for (int j = 0; j < d; j++, p += 4)
				put_float4(p, row[j]);
		}
	}

	y = palloc(VARHDRSZ + n * 8);
	SET_VARSIZE(y, VARHDRSZ + n * 8);
	for (int64 r = 0; r < n; r++)
	{
		double		v = b->labels[r];

		/* binary classifiers encode -1/+1; PyTorch's losses take 0/1 */
		if (st->kind == CP_MODEL_SVM || st->kind == CP_MODEL_LOGISTIC)
			v = v > 0 ? 1.0 : 0.0;
		put_float8(VARDATA(y) + r * 8, v);
	}

	values[BR_PAGE] = Int64GetDatum(first_page);
	values[BR_N_ROWS] = Int32GetDatum((int32) n);
	values[BR_DIM] = Int32GetDatum(d);
	values[BR_Y] = PointerGetDatum(y);
	values[BR_X] = PointerGetDatum(x);
	if (st->id_attno > 0)
	{
		bytea	   *ids = palloc(VARHDRSZ + n * 8);

		SET_VARSIZE(ids, VARHDRSZ + n * 8);
		for (int64 r = 0; r < n; r++)
			put_int8(VARDATA(ids) + r * 8, st->ids[r]);
		values[BR_IDS] = PointerGetDatum(ids);
	}
	else
		nulls[BR_IDS] = true;
	return heap_form_tuple(st->tupdesc, values, nulls);
}

/* Append the slot's row; false if it was skipped (NULL label or features). */
static void
append(BlockRowsState *st)
{
	MemoryContext old = MemoryContextSwitchTo(st->row_cxt);
	int64		row = st->buf.n_rows;
	bool		kept = cp_layout_append(&st->lo, st->slot, &st->buf);

	if (kept && st->id_attno > 0)
	{
		slot_getsomeattrs(st->slot, st->id_attno);
		if (st->slot->tts_isnull[st->id_attno - 1])
		{
			CpRowContext where = {st->lo.relname, &st->slot->tts_tid, st->lo.use};

			ereport(ERROR,
					(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					 errmsg("corgipile.block_rows: the id column is NULL in %s",
							cp_row_description(&where))));
		}
		MemoryContextSwitchTo(st->buf.memcxt);
		if (row >= st->ids_cap)
		{
			st->ids_cap = Max(1024, st->ids_cap * 2);
			st->ids = st->ids ? repalloc_huge(st->ids, sizeof(int64) * st->ids_cap) :
				MemoryContextAllocHuge(st->buf.memcxt, sizeof(int64) * st->ids_cap);
		}
		st->ids[row] = cp_datum_to_int64(st->slot->tts_values[st->id_attno - 1],
										 st->id_type);
	}
	MemoryContextSwitchTo(old);
	MemoryContextReset(st->row_cxt);
}

Datum
corgipile_block_rows(PG_FUNCTION_ARGS)
{
	FuncCallContext *funcctx;
	BlockRowsState *st;

	if (SRF_IS_FIRSTCALL())
	{
		MemoryContext old;
		ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
		TupleDesc	tupdesc;

		funcctx = SRF_FIRSTCALL_INIT();
		old = MemoryContextSwitchTo(funcctx->multi_call_memory_ctx);
		if (get_call_result_type(fcinfo, NULL, &tupdesc) != TYPEFUNC_COMPOSITE)
			elog(ERROR, "corgipile.block_rows: return type must be a row type");
		st = begin(fcinfo);
		st->tupdesc = BlessTupleDesc(tupdesc);
		funcctx->user_fctx = st;
		/* a caller that stops early (LIMIT) still ends the scan */
		if (rsinfo != NULL && IsA(rsinfo, ReturnSetInfo))
		{
			st->econtext = rsinfo->econtext;
			RegisterExprContextCallback(st->econtext, end_scan, PointerGetDatum(st));
		}
		MemoryContextSwitchTo(old);
	}
	funcctx = SRF_PERCALL_SETUP();
	st = (BlockRowsState *) funcctx->user_fctx;

	if (st->finished)
		SRF_RETURN_DONE(funcctx);
	if (!st->in_block && st->block_idx < st->n_blocks)
	{
		/* start the next block; pages past the table's end are empty */
		int64		first = st->first_pages[st->block_idx];

		st->page = (BlockNumber) Min(first, (int64) st->rel_pages);
		st->page_end = (BlockNumber) Min(first + (int64) st->pages_per_block,
										 (int64) st->rel_pages);
		st->page_loaded = false;
		st->in_block = true;
	}
	if (st->in_block)
	{
		int64		first = st->first_pages[st->block_idx];
		HeapTuple	t;

		cp_buffer_reset(&st->buf, st->lo.n_features);
		while (next_tuple(st))
		{
			append(st);
			/* a large block goes out in chunks: memory stays bounded */
			if ((Size) st->buf.n_rows * Max(st->lo.n_features, 1) * sizeof(double) >=
				CP_BLOCK_ROWS_CHUNK_BYTES)
				SRF_RETURN_NEXT(funcctx, HeapTupleGetDatum(pack(st, first)));
		}
		/* the block's last (or only) chunk */
		t = pack(st, first);
		st->block_idx++;
		st->in_block = false;
		SRF_RETURN_NEXT(funcctx, HeapTupleGetDatum(t));
	}
	/*
	 * Done: SRF_RETURN_DONE frees st with the call's memory, so the callback
	 * that would end the scan at the caller's shutdown goes first (left
	 * registered, it read freed memory there: a backend crash sqlsmith found
	 * once that memory had been reused).
	 */
	if (st->econtext != NULL)
		UnregisterExprContextCallback(st->econtext, end_scan, PointerGetDatum(st));
	end_scan(PointerGetDatum(st));
	SRF_RETURN_DONE(funcctx);
}
