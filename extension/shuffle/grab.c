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
 * Whether a buffer's rows are still shuffled is decided by the rule
 * measured in docs/grab.md ("Buffer shuffle"): blocks of at most 100 rows on
 * average (pg_class estimate) keep GraB's order, larger blocks (or a table
 * never analysed) get their buffer shuffled.  From the second epoch on, an
 * epoch whose steps are large (the epoch's rate x the previous epoch's mean
 * squared loss derivative x the rows' mean |block mean row|^2, measured on
 * the first epoch's buffers, above GRAB_MAX_STEP) is trained as corgipile
 * trains it: random block order, shuffled buffer, no block sums.
 * corgipile.grab_buffer overrides both rules.
 *
 * GraB's unit (granularity) is a block, or with corgipile.grab_unit_blocks
 * = k a group of k consecutive blocks of the first epoch's order, which
 * then moves as a whole: fewer sums (k times less memory, so exact sums fit
 * where they would be projected) and one kept-order sum per k blocks, at a
 * cost in what the order can balance (docs/grab.md measured it: not the
 * default).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "utils/guc.h"
#include "utils/rel.h"

#include "core/grab.h"
#include "core/shuffle.h"
#include "shuffle/grab.h"
#include "shuffle/strategy.h"

/* the largest average block, in rows, that keeps GraB's order in a buffer */
#define GRAB_KEEP_ORDER_MAX_ROWS 100.0

/*
 * ... and from the second epoch on, the largest step that does: rate x mean
 * sum_k g_k^2 x the rows' mean |block mean row|^2, how much a step on one
 * row of a block changes the loss of the block's next rows.  Above it the
 * previous epoch's block sums no longer describe the next epoch (the
 * weights move too far within one) and neither GraB's order nor its kept
 * buffer did better than corgipile: measured on Fashion-MNIST softmax at
 * rate 0.01 (value 0.27), where every GraB variant ended 1.8x corgipile's
 * gap, while from 0.002 to 0.09 (Fashion-MNIST binary up to rate 0.03,
 * softmax at 0.003, the Gaussian table at 0.3) kept order was as good as a
 * shuffled buffer or better (docs/grab.md, grab-engine-check.md part C).
 * The epoch then is corgipile's: a random block order, a shuffled buffer,
 * no block sums.  One block a unit only.
 */
#define GRAB_MAX_STEP 0.2

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
static int	grab_unit_blocks = 1;

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
							 "else shuffles, and trains an epoch as corgipile does when its steps are large; "
							 "shuffled and kept force the buffer choice for every epoch.",
							 &grab_buffer_mode,
							 GRAB_BUFFER_AUTO,
							 grab_buffer_options,
							 PGC_USERSET,
							 0,
							 NULL, NULL, NULL);
	DefineCustomIntVariable("corgipile.grab_unit_blocks",
							"Blocks in one unit of shuffle => 'grab''s order.",
							"k > 1 groups k consecutive blocks of the first epoch's order into one unit that "
							"the order moves as a whole (fewer, cheaper sums; a coarser order).",
							&grab_unit_blocks,
							1, 1, INT_MAX,
							PGC_USERSET,
							0,
							NULL, NULL, NULL);
}

typedef struct GrabState
{
	const CpStrategyEnv *env;
	uint32		n_blocks;
	bool		shuffle_buffer; /* this epoch's choice */
	bool		random_order;	/* the next (then this) epoch's blocks in a
								 * random order, without block sums */
	bool		collecting;		/* this epoch's block sums are collected */
	bool		rows_shuffle;	/* the rows-per-block rule's (or the setting's) */
	double		rows_per_block; /* the estimate it was decided from; < 0:
								 * unknown */

	/*
	 * The step rule's statistic, from the first epoch's dense buffers: sum
	 * over blocks of rows x |block mean row|^2, and the rows summed.
	 */
	double	   *stat_vec;		/* n_features of scratch */
	int32		stat_dim;
	double		stat_sum;
	int64		stat_rows;
	bool		stat_sparse;	/* a sparse buffer was seen: no statistic */
	double		last_step;		/* rate x mean_g2 x statistic, last decision */
	int64		epochs;			/* block orders handed out */
	int64		epochs_kept;	/* ... with the buffer kept in order */
	int64		epochs_random;	/* ... in a random block order after the
								 * first */

	/* GraB's units: unit_blocks consecutive blocks of the first order */
	int32		unit_blocks;
	uint32		n_units;
	uint32	   *unit_of;		/* n_blocks; formed at the first order */
	bool		units_formed;
	uint32	   *uvisit;			/* n_units: units as visited */
	int8	   *usigns;			/* n_units: the walk's signs, visiting order */
	uint32	   *unext;			/* n_units: the walk's unit order (unused) */
	int8	   *unit_sign;		/* n_units: by unit number */

	uint32	   *visit;			/* the order handed out for this epoch */
	uint32	   *next;			/* the walk's order for the next epoch */
	int8	   *signs;			/* the last walk's signs, in visiting order */
	double	   *work;			/* 2 * dim doubles of scratch for the walk */
	int32		work_dim;
	bool		have_next;		/* next holds a walk's order */
	bool		have_signs;		/* signs and walked describe a walked epoch */
	uint32	   *walked;			/* the order of the last walked epoch */
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
	g->walked = MemoryContextAllocZero(env->cxt, mul_size(sizeof(uint32), n));
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
		g->rows_shuffle = !(g->rows_per_block >= 0 &&
							g->rows_per_block <= GRAB_KEEP_ORDER_MAX_ROWS);
	else
		g->rows_shuffle = (grab_buffer_mode == GRAB_BUFFER_SHUFFLED);
	/* the first epoch: the rows rule alone (no statistic yet) */
	g->shuffle_buffer = g->rows_shuffle;

	cp_grab_set_unit_blocks(g, grab_unit_blocks);
	g->unit_of = MemoryContextAllocZero(env->cxt, mul_size(sizeof(uint32), n));
	return g;
}

/*
 * The unit size (1: every block is its own unit, as a parallel training
 * needs).  Before the first walk only.
 */
void
cp_grab_set_unit_blocks(void *state, int32 unit_blocks)
{
	GrabState  *g = state;
	uint32		n = Max(g->n_blocks, 1);

	Assert(g->walks == 0);
	g->unit_blocks = Max(1, Min(unit_blocks, (int32) Min(n, INT32_MAX)));
	g->n_units = (n + (uint32) g->unit_blocks - 1) / (uint32) g->unit_blocks;
	if (g->unit_blocks > 1 && g->uvisit == NULL)
	{
		g->uvisit = MemoryContextAllocZero(g->env->cxt, mul_size(sizeof(uint32), n));
		g->unext = MemoryContextAllocZero(g->env->cxt, mul_size(sizeof(uint32), n));
		g->usigns = MemoryContextAllocZero(g->env->cxt, n);
		g->unit_sign = MemoryContextAllocZero(g->env->cxt, n);
	}
}

/* How many GraB units the sums are kept for (n_blocks with one a unit). */
uint32
cp_grab_n_units(void *state)
{
	return ((GrabState *) state)->n_units;
}

/*
 * The block -> unit map SGD adds with (NULL with one block a unit).  Valid
 * once the first epoch's order is handed out.
 */
const uint32 *
cp_grab_unit_map(void *state)
{
	GrabState  *g = state;

	return g->unit_blocks > 1 ? g->unit_of : NULL;
}

/*
 * The step rule's statistic: for the rows of out (appended by whole blocks,
 * a block's rows one after the other), add |block mean row|^2 x rows per
 * block.  Dense rows only: a sparse model keeps the rows rule.
 */
static void
grab_add_statistic(GrabState *g, const CpBuffer *out)
{
	int32		d = out->n_features;
	int64		i = 0;

	if (out->sparse || g->stat_sparse)
	{
		g->stat_sparse = true;
		return;
	}
	if (out->row_blocks == NULL || d <= 0)
		return;
	if (g->stat_vec == NULL || g->stat_dim < d)
	{
		g->stat_vec = MemoryContextAlloc(g->env->cxt, mul_size(sizeof(double), d));
		g->stat_dim = d;
	}
	while (i < out->n_rows)
	{
		uint32		block = out->row_blocks[i];
		int64		first = i;
		double		sq = 0.0;

		memset(g->stat_vec, 0, sizeof(double) * d);
		for (; i < out->n_rows && out->row_blocks[i] == block; i++)
		{
			const double *x = cp_buffer_dense_row(out, i);

			for (int32 j = 0; j < d; j++)
				g->stat_vec[j] += x[j];
		}
		for (int32 j = 0; j < d; j++)
			sq += g->stat_vec[j] * g->stat_vec[j];
		/* rows x |sum / rows|^2 */
		g->stat_sum += sq / (double) (i - first);
		g->stat_rows += i - first;
	}
}

/* The mean |block mean row|^2 of the first epoch; < 0 when not measured. */
static double
grab_statistic(const GrabState *g)
{
	if (g->stat_sparse || g->stat_rows == 0)
		return -1.0;
	return g->stat_sum / (double) g->stat_rows;
}

/*
 * The choices for the next epoch, trained at rate, after an epoch
 * whose rows' mean sum_k g_k^2 (squared loss derivatives) was mean_g2
 * (called by SGD before the epoch's feedback; the driver asks permutes()
 * after it).  rate x mean_g2 x |block mean row|^2 is, to first order, how
 * much a step on one row of a block changes the loss of the block's next
 * rows: what kept order lets pile up within a block.
 */
void
cp_grab_plan_epoch(void *state, double rate, double mean_g2)
{
	GrabState  *g = state;
	double		stat = grab_statistic(g);

	g->shuffle_buffer = g->rows_shuffle;
	g->random_order = false;
	if (stat >= 0)
	{
		g->last_step = rate * mean_g2 * stat;
		if (grab_buffer_mode == GRAB_BUFFER_AUTO && g->unit_blocks == 1 &&
			g->last_step > GRAB_MAX_STEP)
		{
			g->shuffle_buffer = true;
			g->random_order = true;
		}
	}
}

static bool
grab_fill(void *state, CpBuffer *out)
{
	GrabState  *g = state;
	bool		more = g->env->read_group(g->env->reader, out);

	/* the first epoch's rows give the step rule its statistic */
	if (g->epochs == 1 && g->walks == 0)
		grab_add_statistic(g, out);
	return more;
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
	if (g->have_next && !g->random_order)
		memcpy(order, g->next, sizeof(uint32) * n_blocks);
	else
	{
		cp_order_identity(order, n_blocks);
		cp_shuffle_uint32(order, n_blocks, rng);
		if (g->epochs > 0)
			g->epochs_random++;
	}
	g->collecting = !g->random_order;
	memcpy(g->visit, order, sizeof(uint32) * n_blocks);
	g->have_next = false;
	g->epochs++;
	if (!g->shuffle_buffer)
		g->epochs_kept++;
	/* units: consecutive blocks of the first order, fixed from then on */
	if (!g->units_formed)
	{
		cp_grab_form_units(order, n_blocks, g->unit_blocks, g->unit_of);
		g->units_formed = true;
	}
}

/* The end of an epoch: walk the blocks as visited, keep the next order. */
static void
grab_epoch_feedback(void *state, const struct CpGrabAcc *acc)
{
	GrabState  *g = state;

	Assert(acc->n_blocks == g->n_units);
	/* a random-order epoch collected no sums: the next starts afresh */
	if (!g->collecting)
	{
		g->have_next = false;
		return;
	}
	if (g->work == NULL || g->work_dim < acc->dim)
	{
		g->work = MemoryContextAlloc(g->env->cxt,
									 mul_size(sizeof(double), mul_size(2, acc->dim)));
		g->work_dim = acc->dim;
	}
	if (g->unit_blocks <= 1)
		cp_grab_walk(acc, g->visit, g->n_blocks, g->work, g->signs, g->next);
	else if (!cp_grab_walk_units(acc, g->visit, g->n_blocks, g->unit_of, g->n_units,
								 g->uvisit, g->unext, g->usigns, g->unit_sign,
								 g->work, g->signs, g->next))
		elog(ERROR, "corgipile: the block order did not visit each GraB unit's blocks together");
	memcpy(g->walked, g->visit, sizeof(uint32) * g->n_blocks);
	g->have_next = true;
	g->have_signs = true;
	g->walks++;
}

/*
 * Whether the next epoch collects block sums (SGD then adds them): not in
 * an epoch planned in a random block order.
 */
bool
cp_grab_collects(void *state)
{
	return !((GrabState *) state)->random_order;
}

static void
grab_explain(void *state, ExplainState *es)
{
	GrabState  *g = state;

	ExplainPropertyInteger("GraB Walks", NULL, g->walks, es);
	ExplainPropertyInteger("GraB Epochs Kept in Order", NULL, g->epochs_kept, es);
	ExplainPropertyInteger("GraB Epochs in Random Order", NULL, g->epochs_random, es);
	if (grab_statistic(g) >= 0)
		ExplainPropertyFloat("GraB Step", NULL, g->last_step, 3, es);
}

/*
 * EXPLAIN without ANALYZE too (the explain_plan hook): the first epoch's
 * buffer choice, how later epochs decide it, and the unit.
 */
static void
grab_explain_plan(void *state, ExplainState *es)
{
	GrabState  *g = state;
	char		unit[64];

	ExplainPropertyText("GraB Buffer", cp_grab_buffer_choice(state), es);

	if (grab_buffer_mode == GRAB_BUFFER_AUTO && !g->rows_shuffle)
		ExplainPropertyText("GraB Buffer Rule",
							psprintf("epoch 2 on: corgipile's epoch when rate x g^2 x block-mean |x|^2 > %g",
									 GRAB_MAX_STEP), es);
	else if (grab_buffer_mode == GRAB_BUFFER_AUTO)
		ExplainPropertyText("GraB Buffer Rule",
							psprintf("shuffled (over 100 rows a block, or not analysed); epoch 2 on: corgipile's epoch when rate x g^2 x block-mean |x|^2 > %g",
									 GRAB_MAX_STEP), es);
	else
		ExplainPropertyText("GraB Buffer Rule", "set by corgipile.grab_buffer", es);
	if (g->unit_blocks == 1)
		snprintf(unit, sizeof(unit), "1 block");
	else
		snprintf(unit, sizeof(unit), "%d blocks", g->unit_blocks);
	ExplainPropertyText("GraB Unit", unit, es);
}

/* The run's choices for params (cp_train_record). */
void
cp_grab_choices(void *state, int32 *unit_blocks, int64 *epochs, int64 *epochs_kept,
				int64 *epochs_random, double *statistic, double *step)
{
	GrabState  *g = state;

	*step = g->last_step;
	*epochs_random = g->epochs_random;
	*unit_blocks = g->unit_blocks;
	*epochs = g->epochs;
	*epochs_kept = g->epochs_kept;
	*statistic = grab_statistic(g);
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
	*visit = g->walked;
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
	.begin = grab_begin,
	.fill = grab_fill,
	.explain = grab_explain,
	.explain_plan = grab_explain_plan,
	.block_order = grab_block_order,
	.epoch_feedback = grab_epoch_feedback,
	.permutes = grab_permutes,
};
