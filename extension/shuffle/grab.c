/*-------------------------------------------------------------------------
 *
 * grab.c
 *	  grab: CorgiPile's buffers of whole blocks, with the blocks visited in
 *	  GraB's gradient-balanced order (docs/grab.md).
 *
 * The first epoch visits the blocks in BlockShuffle's seeded random order.
 * During an epoch SGD adds each row's gradient into its block's sum (the
 * accumulator of core/grab.h, which SGD owns because it knows the model's
 * size); at the epoch's end it hands the sums to epoch_feedback, which runs
 * the balancing walk over the blocks in the order they were visited, and
 * block_order returns the walk's reordering for the next epoch.
 *
 * Whether a buffer's rows are still shuffled is decided once per run from
 * the table's statistics, by the rule of docs/grab-simulation.md: blocks of
 * at most 100 rows on average keep GraB's order, larger blocks (or a table
 * never analysed) get their buffer shuffled.  corgipile.grab_buffer
 * overrides the rule.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "utils/guc.h"
#include "utils/rel.h"

#include "core/grab.h"
#include "core/shuffle.h"
#include "shuffle/strategy.h"

/* the largest average block, in rows, that keeps GraB's order in a buffer */
#define GRAB_KEEP_ORDER_MAX_ROWS 100.0

/* corgipile.grab_buffer: the rule above, or an override */
typedef enum GrabBufferMode
{
	GRAB_BUFFER_AUTO,
	GRAB_BUFFER_SHUFFLED,
	GRAB_BUFFER_KEPT
} GrabBufferMode;

static const struct config_enum_entry grab_buffer_options[] = {
	{"auto", GRAB_BUFFER_AUTO, false},
	{"shuffled", GRAB_BUFFER_SHUFFLED, false},
	{"kept", GRAB_BUFFER_KEPT, false},
	{NULL, 0, false}
};

static int	grab_buffer_mode = GRAB_BUFFER_AUTO;

/*
 * The buffer choice is measured, not derived (docs/grab.md), so a user whose
 * table sits near the threshold, and the study that measured it, can set it.
 * A setting, not a train() parameter: it changes no SQL signature, and the
 * choice made is recorded in the model's params either way.
 */
void
cp_grab_define_gucs(void)
{
	DefineCustomEnumVariable("corgipile.grab_buffer",
							 "Whether shuffle => 'grab' shuffles the rows of a buffer or keeps GraB's block order.",
							 "auto keeps the order when a block holds at most 100 rows on average (pg_class estimate), "
							 "else shuffles; shuffled and kept force the choice.",
							 &grab_buffer_mode,
							 GRAB_BUFFER_AUTO,
							 grab_buffer_options,
							 PGC_USERSET,
							 0,
							 NULL, NULL, NULL);
}

typedef struct GrabState
{
	const CpStrategyEnv *env;
	uint32		n_blocks;
	bool		shuffle_buffer; /* decided at begin, from the statistics */
	double		rows_per_block; /* the estimate it was decided from; < 0:
								 * unknown */
	uint32	   *visit;			/* the order handed out for this epoch */
	uint32	   *next;			/* the walk's order for the next epoch */
	int8	   *signs;			/* the last walk's signs, in visiting order */
	double	   *work;			/* 2 * dim doubles of scratch for the walk */
	int32		work_dim;
	bool		have_next;		/* next holds a walk's order */
	bool		have_signs;		/* signs and visit describe a walked epoch */
	int64		walks;
} GrabState;

static void *
grab_begin(const CpStrategyEnv *env)
{
	GrabState  *g = MemoryContextAllocZero(env->cxt, sizeof(GrabState));
	uint32		n = Max(env->sizing->n_blocks, 1);
	double		tuples = env->rel ? env->rel->rd_rel->reltuples : -1;
	double		pages = env->rel ? env->rel->rd_rel->relpages : 0;

	g->env = env;
	g->n_blocks = env->sizing->n_blocks;
	g->visit = MemoryContextAllocZero(env->cxt, mul_size(sizeof(uint32), n));
	g->next = MemoryContextAllocZero(env->cxt, mul_size(sizeof(uint32), n));
	g->signs = MemoryContextAllocZero(env->cxt, mul_size(sizeof(int8), n));

	/*
	 * rows per block from pg_class, as the planner estimates: reltuples < 0
	 * means never analysed (or vacuumed), and then the shuffled buffer, which
	 * the simulation never found much worse than corgipile, is the safe side.
	 */
	if (tuples >= 0 && pages > 0)
		g->rows_per_block = tuples / pages * env->sizing->pages_per_block;
	else
		g->rows_per_block = -1;
	if (grab_buffer_mode == GRAB_BUFFER_AUTO)
		g->shuffle_buffer = !(g->rows_per_block >= 0 &&
							  g->rows_per_block <= GRAB_KEEP_ORDER_MAX_ROWS);
	else
		g->shuffle_buffer = (grab_buffer_mode == GRAB_BUFFER_SHUFFLED);
	return g;
}

static bool
grab_fill(void *state, CpBuffer *out)
{
	GrabState  *g = state;

	return g->env->read_group(g->env->reader, out);
}

static bool
grab_permutes(void *state)
{
	return ((GrabState *) state)->shuffle_buffer;
}

/*
 * The epoch's block order: the previous walk's, else (first epoch, or no
 * feedback, as under shuffled_scan()) a random permutation from BlockShuffle's
 * stream, the same one corgipile draws.
 */
static void
grab_block_order(void *state, uint32 *order, uint32 n_blocks, pg_prng_state *rng)
{
	GrabState  *g = state;

	Assert(n_blocks == g->n_blocks);
	if (g->have_next)
		memcpy(order, g->next, sizeof(uint32) * n_blocks);
	else
	{
		cp_order_identity(order, n_blocks);
		cp_shuffle_uint32(order, n_blocks, rng);
	}
	memcpy(g->visit, order, sizeof(uint32) * n_blocks);
	g->have_next = false;
}

/* The end of an epoch: walk the blocks as visited, keep the next order. */
static void
grab_epoch_feedback(void *state, const struct CpGrabAcc *acc)
{
	GrabState  *g = state;

	Assert(acc->n_blocks == g->n_blocks);
	if (g->work == NULL || g->work_dim < acc->dim)
	{
		g->work = MemoryContextAlloc(g->env->cxt,
									 mul_size(sizeof(double), mul_size(2, acc->dim)));
		g->work_dim = acc->dim;
	}
	cp_grab_walk(acc, g->visit, g->n_blocks, g->work, g->signs, g->next);
	g->have_next = true;
	g->have_signs = true;
	g->walks++;
}

static void
grab_explain(void *state, ExplainState *es)
{
	GrabState  *g = state;

	ExplainPropertyInteger("GraB Walks", NULL, g->walks, es);
}

/* Shown by plain EXPLAIN too: the choices made for this run. */
const char *
cp_grab_buffer_choice(void *state)
{
	return ((GrabState *) state)->shuffle_buffer ? "shuffled" : "kept in order";
}

/* The last walked epoch's order and signs (false before the first walk). */
bool
cp_grab_last_walk(void *state, const uint32 **visit, const int8 **signs,
				  uint32 *n_blocks)
{
	GrabState  *g = state;

	if (!g->have_signs)
		return false;
	*visit = g->visit;
	*signs = g->signs;
	*n_blocks = g->n_blocks;
	return true;
}

/*
 * warm_start: the first epoch visits the blocks in order (n_blocks entries,
 * a permutation) instead of a random order.
 */
void
cp_grab_set_first_order(void *state, const uint32 *order)
{
	GrabState  *g = state;

	memcpy(g->next, order, sizeof(uint32) * g->n_blocks);
	g->have_next = true;
}

const CpStrategy cp_strategy_grab = {
	.id = CP_SHUFFLE_GRAB,
	.name = "grab",
	.tuple_order = "gradient-balanced blocks",
	.random_blocks = true,
	.permute_buffers = true,
	.begin = grab_begin,
	.fill = grab_fill,
	.explain = grab_explain,
	.block_order = grab_block_order,
	.epoch_feedback = grab_epoch_feedback,
	.permutes = grab_permutes,
};
