/*-------------------------------------------------------------------------
 *
 * sgd_warm.c
 *	  warm_start: the stored model a training starts from, its weights and
 *	  (for grab) its next block order.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "common/base64.h"

#include "core/grab.h"
#include "core/shuffle.h"
#include "nodes/sgd_state.h"
#include "shuffle/grab.h"

/*
 * warm_start, before the first epoch: load the model (cp_models_load checks
 * that the caller may use it) and refuse one of another kind or layout.
 * Its dimension is checked, and its weights copied, once this training's
 * weights exist (cp_sgd_warm_weights).
 */
static void warm_grab_order(SgdState *s);

/* What is wrong with a stored GraB order, for the error's detail. */
static const char *
grab_load_problem(CpGrabLoadStatus st)
{
	switch (st)
	{
		case CP_GRAB_LOAD_OK:
			break;
		case CP_GRAB_LOAD_TRUNCATED:
			return "Its length does not match its header (or it is not base64).";
		case CP_GRAB_LOAD_BAD_MAGIC:
			return "It does not start with the header of a stored GraB order.";
		case CP_GRAB_LOAD_BAD_VERSION:
			return "It was written by a newer format version.";
		case CP_GRAB_LOAD_NOT_PERMUTATION:
			return "Its order is not a permutation of its blocks.";
		case CP_GRAB_LOAD_BAD_SIGNS:
			return "Unused sign bits are set.";
	}
	return "It is damaged.";
}

void
cp_sgd_warm_load(SgdState *s)
{
	const char *name = s->params.warm_start;
	MemoryContext old = MemoryContextSwitchTo(s->train_cxt);

	s->warm = cp_models_load(name);
	MemoryContextSwitchTo(old);
	if (s->warm->kind != s->params.model)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("warm start model \"%s\" is a %s model; this training is %s",
						name, cp_model_kind_name(s->warm->kind),
						cp_model_kind_name(s->params.model)),
				 errhint("Train without warm_start, or name a %s model.",
						 cp_model_kind_name(s->params.model))));
	if (s->warm->mode != s->lo->mode)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("warm start model \"%s\" has the %s feature layout; this training's is %s",
						name, cp_layout_mode_name(s->warm->mode),
						cp_layout_mode_name(s->lo->mode)),
				 errhint("Train without warm_start.")));
	if (OidIsValid(s->warm->relid) && s->warm->relid != s->params.relid)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("warm start model \"%s\" was trained on another relation than \"%s\"",
						name, s->lo->relname),
				 errhint("Train without warm_start.")));
	if (strcmp(s->warm->label, s->params.label) != 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("warm start model \"%s\" was trained on label column \"%s\"; this training's is \"%s\"",
						name, s->warm->label, s->params.label),
				 errhint("Train without warm_start.")));
	if (s->src->wants_feedback)
		warm_grab_order(s);
}

/* The weights must have this training's shape: features and classes. */
void
cp_sgd_warm_weights(SgdState *s)
{
	const char *name = s->params.warm_start;
	CpStoredModel *w = s->warm;

	if (w->n_features != s->model.n_features)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("warm start model \"%s\" has %d features; the features of \"%s\" have %d",
						name, w->n_features, s->lo->relname, s->model.n_features),
				 errhint("Train without warm_start.")));
	if (w->n_outputs != s->model.n_outputs)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("warm start model \"%s\" has %d classes; the labels of \"%s\" have %d",
						name, w->n_outputs, s->lo->relname, s->model.n_outputs),
				 errhint("Train without warm_start.")));
	if (s->lo->classes != NULL && w->class_names != NULL)
	{
		for (int k = 0; k < s->lo->classes->n_classes; k++)
			if (strcmp(s->lo->classes->names[k], w->class_names[k]) != 0)
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						 errmsg("warm start model \"%s\" has other classes than the labels of \"%s\" (class %d is \"%s\", not \"%s\")",
								name, s->lo->relname, k + 1, w->class_names[k],
								s->lo->classes->names[k]),
						 errhint("Train without warm_start.")));
	}
	memcpy(s->model.w, w->weights, sizeof(double) * s->model.n_weights);
}

/*
 * grab with warm_start: the first epoch follows the stored model's next
 * order (the reordering of its last epoch's order and signs), adapted when
 * the table's block count changed.  A model trained with another strategy
 * has no stored order: the first epoch is random, as without warm_start.
 */
static void
warm_grab_order(SgdState *s)
{
	const char *name = s->params.warm_start;
	const CpSizing *sz = s->src->sizing;
	const char *state_b64 = s->warm->grab_state;
	int64		stored_ppb = s->warm->grab_pages_per_block;
	uint8	   *raw;
	int			raw_len;
	uint32		old_n;
	uint32	   *visit;
	int8	   *signs;
	uint8	   *seen;
	uint32	   *order;
	CpGrabLoadStatus st;

	if (state_b64 == NULL)
		return;

	/*
	 * The order and its block count come from the training rows (their
	 * gradients' signs, the relation's size): the models view's rule
	 * applies, as to the preprocessing.
	 */
	if (!s->warm->sees_data)
	{
		ereport(NOTICE,
				(errmsg("stored block order of model \"%s\" not used: it is a figure of the rows the model was trained on",
						name),
				 errdetail("The weights are used; the first epoch visits the blocks in a random order."),
				 OidIsValid(s->warm->relid) ?
				 errhint("Ask for SELECT on the relation the model was trained on.") : 0));
		return;
	}

	if (stored_ppb != (int64) sz->pages_per_block)
	{
		ereport(NOTICE,
				(errmsg("stored block order of model \"%s\" not used: it orders blocks of %lld pages, this training reads blocks of %u",
						name, (long long) stored_ppb, sz->pages_per_block),
				 errdetail("The weights are used; the first epoch visits the blocks in a random order.")));
		return;
	}

	raw = palloc(pg_b64_dec_len(strlen(state_b64)));
	raw_len = pg_b64_decode(state_b64, strlen(state_b64), (char *) raw,
							pg_b64_dec_len(strlen(state_b64)));
	st = raw_len < 0 ? CP_GRAB_LOAD_TRUNCATED :
		cp_grab_stored_blocks(raw, raw_len, &old_n);
	if (st == CP_GRAB_LOAD_OK)
	{
		visit = palloc(mul_size(sizeof(uint32), Max(old_n, 1)));
		signs = palloc(Max(old_n, 1));
		seen = palloc0(Max(old_n, 1));
		st = cp_grab_deserialize(raw, raw_len, visit, signs, seen);
	}
	if (st != CP_GRAB_LOAD_OK)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_CORRUPTED),
				 errmsg("stored GraB order of model \"%s\" is damaged", name),
				 errdetail("%s", grab_load_problem(st)),
				 errhint("Train it again without warm_start.")));

	order = palloc(mul_size(sizeof(uint32), Max(old_n, 1)));
	cp_grab_reorder(visit, signs, old_n, order);
	if (old_n != sz->n_blocks)
	{
		uint32	   *adapted = palloc(mul_size(sizeof(uint32), Max(sz->n_blocks, 1)));
		uint32		changed = cp_grab_adapt_order(order, old_n, sz->n_blocks,
												  cp_derive_seed((uint64) s->seed, 8),
												  adapted);

		ereport(NOTICE,
				(errmsg("stored block order of model \"%s\" adapted: table \"%s\" has %u blocks of %u pages, the model ordered %u; %u blocks %s",
						name, s->lo->relname, sz->n_blocks, sz->pages_per_block, old_n,
						changed, sz->n_blocks > old_n ? "appended in random order" : "dropped")));
		order = adapted;
	}
	cp_grab_set_first_order(s->src->strategy_state, order);
}
