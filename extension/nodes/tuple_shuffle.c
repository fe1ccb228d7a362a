/*-------------------------------------------------------------------------
 *
 * tupleshuffle.c
 *	  TupleShuffle: turn BlockShuffle's rows into buffers of the compact
 *	  layout, in the order the shuffle strategy feeds them to SGD.
 *
 * This node is the driver of the shuffle strategies (shuffle/strategy.h):
 * it reads BlockShuffle's rows a group of whole blocks at a time (at most
 * blocks_per_buffer of them, the epoch's blocks cut into groups of as
 * equal a size as possible), converting each row once into the compact
 * layout, and the strategy chosen at plan time makes buffers of them.
 * The strategy's table entry says whether each buffer is then permuted
 * (corgipile's Fisher-Yates shuffle of each buffer).  Nothing here names a
 * strategy.
 *
 * Under SGD this node is driven a buffer at a time: tuple_shuffle_fill()
 * runs on the main thread and pulls rows from BlockShuffle, deforming each
 * once; cp_tuple_source_permute() is plain C and runs on whichever thread
 * trains on the buffer, which is what lets loading overlap training.  The
 * permutation generator is consumed in buffer order either way, so a seed
 * gives the same tuple order with or without double buffering.
 *
 * Under corgipile.shuffled_scan() the node is an ordinary scan that emits
 * each row's ctid and id in the order one epoch would feed them to SGD.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "commands/explain.h"
#include "executor/executor.h"
#include "executor/instrument.h"
#include "executor/spi.h"
#include "executor/tuptable.h"
#include "nodes/makefuncs.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"

#include "io/block_cache.h"
#include "core/shuffle.h"
#include "io/prep.h"
#include "nodes/first_pass.h"
#include "nodes/tuple_shuffle.h"

static Node *tuple_shuffle_create_state(CustomScan *cscan);
static void tuple_shuffle_begin(CustomScanState *node, EState *estate, int eflags);
static TupleTableSlot *tuple_shuffle_exec(CustomScanState *node);
static void tuple_shuffle_end(CustomScanState *node);
static void tuple_shuffle_rescan(CustomScanState *node);
static void tuple_shuffle_explain(CustomScanState *node, List *ancestors,
								  ExplainState *es);
static bool read_group(void *reader, CpBuffer *dst);

/* The node a source belongs to: the source is embedded in it. */
static inline TupleShuffleState *
source_node(CpTupleSource *src)
{
	return (TupleShuffleState *) ((char *) src - offsetof(TupleShuffleState, source));
}

CustomScanMethods cp_tuple_shuffle_scan_methods = {
	.CustomName = "TupleShuffle",
	.CreateCustomScanState = tuple_shuffle_create_state,
};

static CustomExecMethods tuple_shuffle_exec_methods = {
	.CustomName = "TupleShuffle",
	.BeginCustomScan = tuple_shuffle_begin,
	.ExecCustomScan = tuple_shuffle_exec,
	.EndCustomScan = tuple_shuffle_end,
	.ReScanCustomScan = tuple_shuffle_rescan,
	.ExplainCustomScan = tuple_shuffle_explain,
};

/*
 * Under SGD the node has no output columns.  In scan mode it stands in for
 * the function scan of shuffled_scan() (range table entry rti), like SGD
 * does for train().
 */
CustomScan *
cp_tuple_shuffle_make_plan(Const *params, bool scan_mode, CustomScan *child,
						List *tlist, List *scan_tlist, Index rti)
{
	CustomScan *cscan = makeNode(CustomScan);

	cscan->scan.scanrelid = 0;
	cscan->scan.plan.targetlist = tlist;
	cscan->custom_scan_tlist = scan_tlist;
	cscan->custom_relids = scan_mode ? bms_make_singleton(rti) : NULL;
	cscan->custom_plans = list_make1(child);
	cscan->custom_private = list_make2(params, makeInteger(scan_mode ? 1 : 0));
	cscan->methods = &cp_tuple_shuffle_scan_methods;
	return cscan;
}

static Node *
tuple_shuffle_create_state(CustomScan *cscan)
{
	TupleShuffleState *ts = palloc0(sizeof(TupleShuffleState));

	NodeSetTag(ts, T_CustomScanState);
	ts->css.methods = &tuple_shuffle_exec_methods;
	cp_params_unpack(linitial_node(Const, cscan->custom_private), &ts->params);
	ts->scan_mode = intVal(lsecond(cscan->custom_private)) != 0;
	return (Node *) ts;
}

/*
 * Seed this node's generators and its child's block order.  Each gets its
 * own stream of the one seed.
 */
void
cp_tuple_source_set_seed(CpTupleSource *src, uint64 seed)
{
	TupleShuffleState *ts = source_node(src);

	pg_prng_seed(&ts->rng, cp_derive_seed(seed, 1));
	if (ts->strategy->seed)
		ts->strategy->seed(ts->strategy_state, seed);
	cp_block_shuffle_set_seed(ts->child, seed);
	if (ts->holdout != NULL)
		ts->holdout->seed = seed;
}

/*
 * A buffer for what the strategy feeds: the driver's layout, row ids under
 * shuffled_scan(), and each row's block for a strategy that learns per
 * block (GraB).  The caller owns it, in cxt.
 */
void
cp_tuple_source_init_buffer(CpTupleSource *src, CpBuffer *buf, MemoryContext cxt)
{
	TupleShuffleState *ts = source_node(src);
	CpStrategyEnv env = ts->env;

	env.cxt = cxt;
	cp_strategy_init_buffer(&env, buf);
	buf->with_blocks = (ts->strategy->epoch_feedback != NULL);
}

static void
tuple_shuffle_begin(CustomScanState *node, EState *estate, int eflags)
{
	TupleShuffleState *ts = (TupleShuffleState *) node;
	CustomScan *cscan = (CustomScan *) node->ss.ps.plan;
	Plan	   *child_plan = linitial(cscan->custom_plans);
	Relation	rel;

	ts->child = (BlockShuffleState *) ExecInitNode(child_plan, estate, eflags);
	node->custom_ps = list_make1(ts->child);

	rel = ts->child->css.ss.ss_currentRelation;
	if (ts->scan_mode)
		cp_layout_ids_only(&ts->layout, RelationGetDescr(rel), RelationGetRelationName(rel));
	else
		cp_layout_resolve(&ts->layout, RelationGetDescr(rel),
						  RelationGetRelationName(rel), &ts->params);
	ts->blocks_per_buffer = ts->child->sizing.blocks_per_buffer;
	ts->source.n_groups = Max(1, ((int64) ts->child->sizing.n_blocks + ts->blocks_per_buffer - 1) /
					   ts->blocks_per_buffer);

	/*
	 * Rows are deformed up to the last column the layout reads, into a
	 * virtual slot of that many columns.  The descriptor keeps the table's
	 * constraints: a row written before ADD COLUMN ... DEFAULT reads the
	 * column's stored default.
	 */
	ts->read_desc = CreateTupleDescCopyConstr(RelationGetDescr(rel));
	ts->read_desc->natts = Min(ts->read_desc->natts, ts->layout.max_attno);
	ts->read_slot = MakeSingleTupleTableSlot(ts->read_desc, &TTSOpsVirtual);
	ts->row_cxt = AllocSetContextCreate(CurrentMemoryContext,
										"corgipile row",
										ALLOCSET_DEFAULT_SIZES);
	ts->buf_cxt = AllocSetContextCreate(CurrentMemoryContext,
										"corgipile tuple shuffle",
										ALLOCSET_DEFAULT_SIZES);

	ts->strategy = cp_strategy_get(ts->params.shuffle);
	ts->env.layout = &ts->layout;
	ts->env.sizing = &ts->child->sizing;
	ts->env.cxt = ts->buf_cxt;
	ts->env.with_ids = ts->scan_mode;
	ts->env.perm_rng = &ts->rng;
	ts->env.read_group = read_group;
	ts->env.reader = ts;
	ts->env.rel = rel;
	/* every buffer of the training is held to it (one-hot rows' memory) */
	ts->env.buffer_budget = cp_training_buffer_budget(&ts->child->sizing, rel);
	ts->strategy_state = ts->strategy->begin(&ts->env);
	ts->permute = ts->strategy->permutes ?
		ts->strategy->permutes(ts->strategy_state) :
		cp_shuffle_has(ts->params.shuffle, CP_SHUFFLE_PERMUTES);
	if (ts->strategy->block_order)
		cp_block_shuffle_set_order_source(ts->child, ts->strategy->block_order,
										  ts->strategy_state);
	cp_tuple_source_init_buffer(&ts->source, &ts->out, ts->buf_cxt);
	if (ts->params.validation_fraction > 0.0 && !ts->scan_mode)
	{
		ts->holdout = MemoryContextAlloc(ts->buf_cxt, sizeof(CpHoldout));
		cp_holdout_init(ts->holdout, ts->params.validation_fraction,
						cp_layout_sparse_rows(&ts->layout), ts->buf_cxt);
		/* with workers, each process reads some blocks: the leader re-reads */
		if (ts->params.workers > 1)
			ts->holdout->reread = true;
	}

	/*
	 * Later epochs take the blocks the first one converted from memory
	 * (block_cache.c), unless the strategy reads the table only once or
	 * this is shuffled_scan(), whose rows carry ids the cache does not keep.
	 * A training of one epoch has a cache too, for the first pass alone
	 * (cp_tuple_source_find_shape): the blocks it read, epoch 1 need not
	 * read again.
	 */
	if (!ts->scan_mode && !cp_shuffle_has(ts->params.shuffle, CP_SHUFFLE_READS_ONCE) &&
		(ts->params.max_epoch_num > 1 || ts->params.workers <= 1) &&
		cp_block_cache_kb > 0 &&
		!(eflags & EXEC_FLAG_EXPLAIN_ONLY))
		ts->cache = cp_block_cache_create(ts->buf_cxt, ts->child->sizing.n_blocks,
										  (Size) cp_block_cache_kb * 1024);

	/*
	 * A buffer of dense rows that holds one group, trained before the next
	 * fill (CP_SHUFFLE_BORROWS_ROWS in params/shuffles.h),
	 * may point into the cache instead of holding a copy.  Other strategies
	 * move rows between buffers of their own, and keep copies.
	 */
	ts->borrow_rows = ts->cache != NULL &&
		!cp_layout_sparse_rows(&ts->layout) &&
		cp_shuffle_has(ts->params.shuffle, CP_SHUFFLE_BORROWS_ROWS);
	if (ts->borrow_rows)
		cp_buffer_init(&ts->block_rows, ts->buf_cxt, false);

	/*
	 * The top operator seeds the run, once: this node under shuffled_scan(),
	 * else SGD (which records the seed it draws with the model).
	 */
	if (ts->scan_mode)
		cp_tuple_source_set_seed(&ts->source, ts->params.has_seed ? (uint64) ts->params.seed :
								 pg_prng_uint64(&pg_global_prng_state));

	/* what the reader reads (n_groups was set above) */
	ts->source.rel = rel;
	ts->source.params = &ts->params;
	ts->source.layout = &ts->layout;
	ts->source.sizing = &ts->child->sizing;
	ts->source.holdout = ts->holdout;
	ts->source.cache = ts->cache;
	ts->source.strategy_state = ts->strategy_state;
	ts->source.wants_feedback = (ts->strategy->epoch_feedback != NULL);
}

/*
 * The source of a TupleShuffle node, for the operator above it (SGD, or a
 * parallel worker's top node).
 */
CpTupleSource *
cp_tuple_shuffle_source(PlanState *ps)
{
	TupleShuffleState *ts = (TupleShuffleState *) ps;

	if (!IsA(ps, CustomScanState) ||
		((CustomScanState *) ps)->methods != &tuple_shuffle_exec_methods)
		elog(ERROR, "corgipile: the plan node under training is not TupleShuffle");
	return &ts->source;
}

/*
 * Deform the columns the layout reads (read_desc's) into values/isnull.
 * When the tuple has no NULLs and holds every column read, and each of
 * them lies at an offset heap_deform_tuple has found to be the same in
 * every tuple (attcacheoff: no variable-length column before it), each is
 * fetched from there; otherwise heap_deform_tuple walks the tuple.  The
 * offsets are known once heap_deform_tuple has walked a tuple without
 * NULLs.
 */
static inline void
deform_row(TupleShuffleState *ts, HeapTuple tup, Datum *values, bool *isnull)
{
	TupleDesc	desc = ts->read_desc;
	HeapTupleHeader hdr = tup->t_data;

	if (ts->offsets_fixed && !HeapTupleHasNulls(tup) &&
		HeapTupleHeaderGetNatts(hdr) >= desc->natts)
	{
		char	   *tp = (char *) hdr + hdr->t_hoff;

		for (int i = 0; i < desc->natts; i++)
		{
			Form_pg_attribute att = TupleDescAttr(desc, i);

			values[i] = fetchatt(att, tp + att->attcacheoff);
			isnull[i] = false;
		}
		return;
	}
	heap_deform_tuple(tup, desc, values, isnull);
	if (!ts->offsets_known && !HeapTupleHasNulls(tup) &&
		HeapTupleHeaderGetNatts(hdr) >= desc->natts)
	{
		ts->offsets_known = true;
		ts->offsets_fixed = true;
		for (int i = 0; i < desc->natts; i++)
			if (TupleDescAttr(desc, i)->attcacheoff < 0)
				ts->offsets_fixed = false;
	}
}

/*
 * Whether rows may be read straight from the page (read_block): float8[]
 * features in a buffer without ids, read over a descriptor whose columns
 * up to the features lie at fixed offsets in a tuple without NULLs (known
 * once deform_row has walked such a tuple).
 */
static inline bool
direct_rows(const TupleShuffleState *ts, const CpBuffer *dst)
{
	return ts->offsets_fixed && ts->layout.mode == CP_FEATURES_ARRAY &&
		!dst->with_ids && !dst->sparse;
}

/*
 * Append the rows of the block BlockShuffle has just started to dst.
 *
 * BlockShuffle hands over a page at a time (its visible tuples, io/heap_page.h).
 * The common row, float8[] features and a label in a tuple without NULLs
 * whose columns lie at fixed offsets, is converted straight from the page
 * (cp_layout_append_float8: no slot, no deformed row, no memory to
 * reset).  Any other row is deformed straight from its pinned page into
 * the read slot's arrays (deform_row, over a descriptor cut at the last
 * column the layout reads), and cp_layout_append reads the slot, which is
 * virtual, as it would any slot, and detoasts only what is toasted or
 * compressed.  No executor call, buffer pin or slot store per row.
 */
static int64
read_block(TupleShuffleState *ts, uint32 block, CpBuffer *dst)
{
	TupleTableSlot *slot = ts->read_slot;
	TupleDesc	desc = ts->read_desc;
	HeapTupleData tup;
	int64		n = 0;
	const CpHeapPage *hp;

	while ((hp = cp_block_shuffle_next_page(ts->child)) != NULL)
	{
		n += hp->n;
		for (int i = 0; i < hp->n; i++)
		{
			bool		keep = false;
			bool		held_out;

			cp_heap_page_tuple(hp, i, &tup);

			/*
			 * validation => 'N%': held-out rows are never trained on (nor
			 * cached).  The ctid decides, so a row that is not kept (every
			 * epoch after the first) is not even deformed.
			 */
			held_out = ts->holdout != NULL && cp_holdout_take(ts->holdout, &tup.t_self, &keep);
			if (held_out && !keep)
				continue;
			if (!held_out && direct_rows(ts, dst) && !HeapTupleHasNulls(&tup) &&
				HeapTupleHeaderGetNatts(tup.t_data) >= desc->natts)
			{
				char	   *tp = (char *) tup.t_data + tup.t_data->t_hoff;
				Form_pg_attribute la = TupleDescAttr(desc, ts->layout.label_attno - 1);
				Form_pg_attribute fa = TupleDescAttr(desc, ts->layout.values_attno - 1);
				struct varlena *v = (struct varlena *) (tp + fa->attcacheoff);

				if (VARATT_IS_4B_U(v) &&
					cp_layout_append_float8(&ts->layout, fetchatt(la, tp + la->attcacheoff),
											(ArrayType *) v, &tup.t_self, dst))
				{
					if (dst->with_blocks)
						dst->row_blocks[dst->n_rows - 1] = block;
					continue;
				}
			}
			deform_row(ts, &tup, slot->tts_values, slot->tts_isnull);
			ExecStoreVirtualTuple(slot);
			slot->tts_tid = tup.t_self;
			if (held_out)
			{
				cp_holdout_keep(ts->holdout, &ts->layout, slot);
				ExecClearTuple(slot);
				MemoryContextReset(ts->row_cxt);
				continue;
			}
			if (cp_layout_append(&ts->layout, slot, dst) && dst->with_blocks)
				dst->row_blocks[dst->n_rows - 1] = block;
			ExecClearTuple(slot);
			MemoryContextReset(ts->row_cxt);
		}
	}
	return n;
}

/*
 * Append to dst the rows of the blocks that start before limit, from the
 * cache or the heap; the blocks read from the heap join the cache.
 * Returns the rows read.
 */
static int64
read_blocks(TupleShuffleState *ts, int64 limit, CpBuffer *dst)
{
	uint32		block;
	int64		n_read = 0;
	MemoryContext old;

	old = MemoryContextSwitchTo(ts->row_cxt);
	while (cp_block_shuffle_next_block(ts->child, limit, &block))
	{
		int64		first_row = dst->n_rows;
		int64		next = ts->child->next_block;

		if (ts->cache != NULL && cp_block_cache_has(ts->cache, block))
		{
			n_read += cp_block_cache_read(ts->cache, block, dst);
			if (ts->holdout != NULL)
				cp_holdout_keep_cached(ts->holdout, ts->cache, block);
			continue;
		}
		/* the OS reads the next block's pages while we convert this one */
		if (next < ts->child->sizing.n_blocks &&
			!(ts->cache != NULL && cp_block_cache_has(ts->cache, ts->child->order[next])))
			cp_block_shuffle_prefetch(ts->child, next);
		n_read += read_block(ts, block, dst);
		if (ts->cache != NULL)
			cp_block_cache_add(ts->cache, block, dst, first_row);
	}
	MemoryContextSwitchTo(old);
	return n_read;
}

/*
 * Lent rows become the buffer's own: copy every row dst borrows into its
 * values, and stop borrowing (once a training, when the cache fills up
 * during read_blocks_lent).
 */
static void
own_borrowed_rows(CpBuffer *dst)
{
	int64		n = dst->n_rows;
	int			d = dst->n_features;
	const double **rows = dst->row_ptrs;

	dst->row_ptrs = NULL;
	cp_buffer_reserve(dst, n, n * d);
	for (int64 i = 0; i < n; i++)
		memcpy(dst->values + i * d, rows[i], sizeof(double) * d);
}

/*
 * read_blocks for a buffer that may borrow cached rows (borrow_rows), while
 * the cache takes more blocks (the first epoch): each block read from the
 * heap is converted into block_rows, one block's rows that stay in the CPU
 * caches, handed to the block cache, and lent to dst from there, as the
 * cached blocks are.  So the epoch does not write its rows into a buffer of
 * a tenth of the table and copy them from there into the cache (each a
 * pass over memory, the buffer's first one faulting its pages in): the
 * rows are converted once, copied once into the cache, and trained on
 * where they lie.  The same rows in the same order: the same weights.  Once
 * a block does not fit, dst takes copies of the rows it borrowed so far,
 * and the rest of the group is read into it as read_blocks does.
 */
static int64
read_blocks_lent(TupleShuffleState *ts, int64 limit, CpBuffer *dst)
{
	uint32		block;
	int64		n_read = 0;
	MemoryContext old;

	Assert(dst->n_rows == 0 && !dst->sparse);
	cp_buffer_reserve_borrowed(dst, dst->cap_rows);
	old = MemoryContextSwitchTo(ts->row_cxt);
	while (cp_block_shuffle_next_block(ts->child, limit, &block))
	{
		int64		next = ts->child->next_block;
		int64		first_row = dst->n_rows;
		CpBuffer   *br = &ts->block_rows;

		if (!cp_block_cache_has(ts->cache, block))
		{
			/* the OS reads the next block's pages while we convert this one */
			if (next < ts->child->sizing.n_blocks &&
				!cp_block_cache_has(ts->cache, ts->child->order[next]))
				cp_block_shuffle_prefetch(ts->child, next);
			cp_buffer_reset(br, ts->layout.n_features);
			n_read += read_block(ts, block, br);
			cp_block_cache_add(ts->cache, block, br, 0);
			if (!cp_block_cache_has(ts->cache, block))
			{
				/* the cache is full: dst holds its rows from here on */
				own_borrowed_rows(dst);
				for (int64 i = 0; i < br->n_rows; i++)
				{
					cp_buffer_append_row(dst, br, i);
					if (dst->with_blocks)
						dst->row_blocks[dst->n_rows - 1] = block;
				}
				MemoryContextSwitchTo(old);
				return n_read + read_blocks(ts, limit, dst);
			}
			/* as cp_block_cache_borrow counts a hit, it was not one */
			ts->cache->hits--;
		}
		else
		{
			n_read += cp_block_cache_rows(ts->cache, block);
			if (ts->holdout != NULL)
				cp_holdout_keep_cached(ts->holdout, ts->cache, block);
		}
		cp_buffer_reserve(dst, first_row + cp_block_cache_rows(ts->cache, block), 0);
		(void) cp_block_cache_borrow(ts->cache, block, dst);
	}
	MemoryContextSwitchTo(old);
	return n_read;
}

/*
 * When every block of the group that starts now (up to limit) is cached,
 * lend dst their rows (cp_block_cache_borrow) and return true; else false,
 * having started no block.
 */
static bool
borrow_group(TupleShuffleState *ts, int64 limit, CpBuffer *dst, int64 *n_read)
{
	int64		from;
	int64		to;
	const uint32 *order = cp_block_shuffle_upcoming(ts->child, limit, &from, &to);
	int64		rows = 0;
	uint32		block;

	if (dst->n_rows != 0 || from >= to)
		return false;
	for (int64 i = from; i < to; i++)
	{
		if (!cp_block_cache_has(ts->cache, order[i]))
			return false;
		rows += cp_block_cache_rows(ts->cache, order[i]);
	}
	cp_buffer_reserve_borrowed(dst, rows);
	while (cp_block_shuffle_next_block(ts->child, limit, &block))
	{
		*n_read += cp_block_cache_borrow(ts->cache, block, dst);
		if (ts->holdout != NULL)
			cp_holdout_keep_cached(ts->holdout, ts->cache, block);
	}
	return true;
}

/*
 * Append to dst the rows of the epoch's next group of blocks.  Returns
 * false when the epoch had no blocks left; true otherwise, even if all the
 * group's rows were skipped for NULLs.
 */
static bool
read_group(void *reader, CpBuffer *dst)
{
	TupleShuffleState *ts = reader;
	Instrumentation *instr = ts->child->css.ss.ps.instrument;
	int64		limit;
	int64		n_read = 0;

	if (ts->eof)
		return false;

	/* BlockShuffle's rows, counted for EXPLAIN ANALYZE as if it returned them */
	if (instr)
		InstrStartNode(instr);

	/*
	 * The epoch's blocks are cut into n_groups groups of as equal a size as
	 * possible, none larger than blocks_per_buffer.  Cutting full groups and
	 * leaving the remainder for last would end many epochs on a group of a
	 * block or two, which on a clustered table is a single label's rows fed
	 * last and unmixed: that alone cost 5-25 points of accuracy
	 * (docs/block-size.md).
	 */
	limit = ((ts->next_group + 1) * (int64) ts->child->sizing.n_blocks) / ts->source.n_groups;
	ts->next_group++;

	if (!(ts->borrow_rows && borrow_group(ts, limit, dst, &n_read)))
	{
		if (ts->borrow_rows && !ts->cache->full && dst->n_rows == 0)
			n_read = read_blocks_lent(ts, limit, dst);
		else
			n_read = read_blocks(ts, limit, dst);
	}
	if (instr)
		InstrStopNode(instr, (double) n_read);
	ts->eof = cp_block_shuffle_epoch_done(ts->child);
	return true;
}

/*
 * Fill buf with the next rows the strategy feeds to SGD.  Returns false
 * when the epoch has no rows left.  A buffer may come back empty (rows
 * skipped for NULLs, or a window still filling up).
 */
bool
cp_tuple_source_fill(CpTupleSource *src, CpBuffer *buf)
{
	TupleShuffleState *ts = source_node(src);
	bool		more;

	/* the parent calls us directly, so keep EXPLAIN ANALYZE's counts here */
	if (ts->css.ss.ps.instrument)
		InstrStartNode(ts->css.ss.ps.instrument);

	cp_buffer_reset(buf, ts->layout.n_features);
	more = ts->strategy->fill(ts->strategy_state, buf);
	if (more)
		ts->buffers_filled++;
	if (ts->css.ss.ps.instrument)
		InstrStopNode(ts->css.ss.ps.instrument, (double) buf->n_rows);
	return more;
}

/*
 * Set the buffer's visiting order.  Plain C on memory the main thread
 * prepared: the helper thread may run this.
 */
void
cp_tuple_source_permute(CpTupleSource *src, CpBuffer *buf)
{
	TupleShuffleState *ts = source_node(src);
	bool		permute = ts->permute;

	cp_order_identity(buf->order, buf->n_rows);
	buf->order_is_identity = !permute;
	if (permute)
		cp_shuffle_uint32(buf->order, buf->n_rows, &ts->rng);
}

/*
 * The rows the strategy holds back (window, reservoir), and the params
 * JSON key naming them; 0 if it holds none.
 */
int64
cp_tuple_source_held_rows(CpTupleSource *src, const char **key)
{
	TupleShuffleState *ts = source_node(src);

	*key = ts->strategy->held_rows_key;
	if (ts->strategy->held_rows == NULL)
		return 0;
	return ts->strategy->held_rows(ts->strategy_state);
}

/*
 * Before the first epoch: learn what the weights' shape and the features'
 * encoding need and the layout does not know yet (the sparse dimension,
 * softmax's classes, text labels, categories, standardizing statistics),
 * in one pass over the table (preprocess_pass.c).
 */
void
cp_tuple_source_find_shape(CpTupleSource *src, uint64 seed)
{
	TupleShuffleState *ts = source_node(src);

	/*
	 * The pass may fill the block cache with the rows it reads, so that
	 * epoch 1 takes them from memory (preprocess_pass.c says when).  Not
	 * with workers: each process caches its own share of the blocks.
	 */
	cp_prep_first_pass(&ts->layout, ts->source.rel,
					   ts->css.ss.ps.state->es_snapshot, &ts->params, seed,
					   ts->buf_cxt, ts->params.workers <= 1 ? ts->cache : NULL,
					   ts->child->sizing.pages_per_block,
					   ts->child->sizing.n_blocks);

	/*
	 * A training of one epoch keeps what the pass cached, and no more: no
	 * later epoch would read what epoch 1 added.
	 */
	if (ts->cache != NULL && ts->params.max_epoch_num <= 1)
		ts->cache->full = true;
}

/*
 * Distributed training, on a shard's worker: the first pass's learning,
 * sent to out for the coordinator to merge (first_pass.c) ...
 */
void
cp_tuple_source_dist_stats(CpTupleSource *src, uint64 seed, StringInfo out)
{
	TupleShuffleState *ts = source_node(src);

	cp_prep_dist_stats(&ts->layout, ts->source.rel,
					   ts->css.ss.ps.state->es_snapshot, &ts->params, seed,
					   ts->buf_cxt, ts->cache, ts->child->sizing.pages_per_block,
					   ts->child->sizing.n_blocks, out);
}

/* ... and, before epoch 1, the shape and preprocessing the shards' merged. */
void
cp_tuple_source_dist_shape(CpTupleSource *src, StringInfo merged)
{
	TupleShuffleState *ts = source_node(src);

	cp_prep_dist_finish(&ts->layout, &ts->params, ts->buf_cxt,
						list_make1(merged), NULL, ts->cache);
}

/*
 * Every training row, from the block cache, into dst (empty; dense rows
 * lent, sparse rows copied), in block order: false when the cache does not
 * hold every block.  For the polish after the last epoch (sgd_polish.c); not
 * counted as cache hits, which EXPLAIN reports per epoch.
 */
/* Whether the block cache holds every block of the table (after epoch 1). */
bool
cp_tuple_source_cached_whole(CpTupleSource *src)
{
	CpBlockCache *cache = source_node(src)->cache;

	return cache != NULL && cache->n_cached >= (int64) cache->n_blocks;
}

bool
cp_tuple_source_cached_rows(CpTupleSource *src, CpBuffer *dst)
{
	TupleShuffleState *ts = source_node(src);
	CpBlockCache *cache = ts->cache;
	int64		rows = 0;
	int64		hits;

	if (!cp_tuple_source_cached_whole(src))
		return false;
	hits = cache->hits;
	for (uint32 b = 0; b < cache->n_blocks; b++)
		rows += cp_block_cache_rows(cache, b);
	cp_buffer_reset(dst, ts->layout.n_features);
	if (!dst->sparse)
		cp_buffer_reserve_borrowed(dst, rows);
	for (uint32 b = 0; b < cache->n_blocks; b++)
	{
		if (dst->sparse)
			(void) cp_block_cache_read(cache, b, dst);
		else
			(void) cp_block_cache_borrow(cache, b, dst);
	}
	cache->hits = hits;
	return true;
}

/* Hand the strategy the epoch's per-block gradient sums. */
void
cp_tuple_source_epoch_feedback(CpTupleSource *src, const struct CpGrabAcc *acc)
{
	TupleShuffleState *ts = source_node(src);

	ts->strategy->epoch_feedback(ts->strategy_state, acc);
	/* GraB decides the next epoch's buffer shuffle per epoch */
	if (ts->strategy->permutes)
		ts->permute = ts->strategy->permutes(ts->strategy_state);
}

/*
 * Parallel training (parallel.c, docs/parallel.md).  Each process reads
 * whole groups of the epoch's order, which lives in shared memory; groups
 * are cut exactly as read_group() cuts them, so group g holds the same
 * blocks in every process.
 */
/* A worker cuts the table as the leader did, whatever page count it sees. */
void
cp_tuple_source_impose_sizing(CpTupleSource *src, const CpSizing *sz)
{
	TupleShuffleState *ts = source_node(src);

	ts->child->sizing = *sz;
	ts->blocks_per_buffer = sz->blocks_per_buffer;
	ts->source.n_groups = Max(1, ((int64) sz->n_blocks + ts->blocks_per_buffer - 1) /
					   ts->blocks_per_buffer);
}

/* Draw the next epoch's block order, as one process would read it. */
const uint32 *
cp_tuple_source_draw_order(CpTupleSource *src)
{
	return cp_block_shuffle_draw_order(source_node(src)->child);
}

/* The next fill reads group g of order, and only it. */
void
cp_tuple_source_seek_group(CpTupleSource *src, const uint32 *order, int64 group)
{
	TupleShuffleState *ts = source_node(src);
	int64		n_blocks = ts->child->sizing.n_blocks;

	/* read_group() ends the group at its limit, from next_group */
	ts->eof = false;
	ts->next_group = group;
	cp_block_shuffle_read_range(ts->child, order, (group * n_blocks) / ts->source.n_groups);
}

/* Buffer permutations from a stream of its own per group. */
void
cp_tuple_source_seed_permutation(CpTupleSource *src, uint64 seed)
{
	TupleShuffleState *ts = source_node(src);

	pg_prng_seed(&ts->rng, seed);
}

/* shuffled_scan(): the next row id in feeding order. */
static TupleTableSlot *
tuple_shuffle_next(ScanState *node)
{
	TupleShuffleState *ts = (TupleShuffleState *) node;
	TupleTableSlot *slot = node->ss_ScanTupleSlot;
	int64		row;
	uint64		tid;

	ExecClearTuple(slot);
	while (ts->out_pos >= ts->out.n_rows)
	{
		if (!cp_tuple_source_fill(&ts->source, &ts->out))
			return slot;
		cp_tuple_source_permute(&ts->source, &ts->out);
		ts->out_pos = 0;
	}
	row = ts->out.order[ts->out_pos++];
	tid = ts->out.row_tids[row];
	ItemPointerSet(&ts->out_tid, (BlockNumber) (tid >> 16), (OffsetNumber) (tid & 0xFFFF));
	slot->tts_values[0] = PointerGetDatum(&ts->out_tid);
	slot->tts_isnull[0] = false;
	slot->tts_values[1] = Int64GetDatum(ts->out.row_keys[row]);
	slot->tts_isnull[1] = (ts->layout.id_attno == 0 || ts->out.row_keys[row] < 0);
	return ExecStoreVirtualTuple(slot);
}

static bool
tuple_shuffle_recheck(ScanState *node, TupleTableSlot *slot)
{
	return true;
}

static TupleTableSlot *
tuple_shuffle_exec(CustomScanState *node)
{
	TupleShuffleState *ts = (TupleShuffleState *) node;

	if (!ts->scan_mode)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("TupleShuffle hands whole buffers to SGD; it has no rows of its own here")));
	return ExecScan(&node->ss, tuple_shuffle_next, tuple_shuffle_recheck);
}

static void
tuple_shuffle_rescan(CustomScanState *node)
{
	TupleShuffleState *ts = (TupleShuffleState *) node;

	ts->eof = false;
	ts->next_group = 0;
	ts->out_pos = 0;
	ts->out.n_rows = 0;
	if (ts->strategy->rescan)
		ts->strategy->rescan(ts->strategy_state);
	ExecReScan(&ts->child->css.ss.ps);
}

static void
tuple_shuffle_end(CustomScanState *node)
{
	TupleShuffleState *ts = (TupleShuffleState *) node;

	if (ts->strategy->end)
		ts->strategy->end(ts->strategy_state);
	if (ts->read_slot != NULL)
		ExecDropSingleTupleTableSlot(ts->read_slot);
	ts->read_slot = NULL;
	ExecEndNode(&ts->child->css.ss.ps);
}

static void
tuple_shuffle_explain(CustomScanState *node, List *ancestors, ExplainState *es)
{
	TupleShuffleState *ts = (TupleShuffleState *) node;

	ExplainPropertyText("Tuple Order", cp_shuffles[ts->params.shuffle].tuple_order, es);
	ExplainPropertyInteger("Blocks per Buffer", NULL, ts->blocks_per_buffer, es);
	ExplainPropertyText("Buffer", cp_buffer_choice(&ts->params, ts->child->sizing.n_pages), es);
	ExplainPropertyText("Features", cp_layout_mode_name(ts->layout.mode), es);
	if (ts->strategy->explain_plan)
		ts->strategy->explain_plan(ts->strategy_state, es);
	if (es->analyze)
	{
		ExplainPropertyInteger("Buffers Filled", NULL, ts->buffers_filled, es);
		if (es->verbose && ts->cache != NULL)
		{
			ExplainPropertyInteger("Cached Blocks", NULL, ts->cache->n_cached, es);
			ExplainPropertyInteger("Cache Memory", "kB", (int64) (ts->cache->used / 1024), es);
			/* the later epochs' reads; epoch 1's are the first pass's blocks */
			ExplainPropertyInteger("Blocks Read from Cache", NULL,
								   ts->cache->hits - ts->cache->prefilled, es);
			ExplainPropertyInteger("Blocks Cached by First Pass", NULL,
								   ts->cache->prefilled, es);
		}
		if (ts->strategy->explain)
			ts->strategy->explain(ts->strategy_state, es);
	}
}
