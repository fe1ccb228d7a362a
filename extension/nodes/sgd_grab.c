/*-------------------------------------------------------------------------
 *
 * sgd_grab.c
 *	  SGD's side of shuffle => 'grab': the per-block gradient sums, and
 *	  the ordering state stored with the model.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "common/base64.h"
#include "miscadmin.h"
#include "utils/memutils.h"

#include "core/grab.h"
#include "core/shuffle.h"
#include "nodes/sgd_state.h"
#include "shuffle/grab.h"

/*
 * shuffle => 'grab': the per-block gradient sums, exact when one
 * n_weights vector per block fits in maintenance_work_mem, else the core's
 * random projection (docs/grab.md).
 */
void
cp_sgd_init_grab(SgdState *s)
{
	const CpSizing *sz = s->src->sizing;
	void	   *state = s->src->strategy_state;
	Size		budget = (Size) maintenance_work_mem * 1024;
	uint32		n_units;
	int32		dim;

	/* parallel.c keeps a sum per block, in shared memory */
	if (s->par != NULL)
		cp_grab_set_unit_blocks(state, 1);
	n_units = cp_grab_n_units(state);
	dim = cp_grab_choose_dim(Max(n_units, 1), s->model.n_weights, budget);

	if (dim < 0)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("shuffle \"grab\" needs more memory than maintenance_work_mem (%d kB) for the gradient sums of %u blocks",
						maintenance_work_mem, sz->n_blocks),
				 errhint("Raise maintenance_work_mem, block_size or corgipile.grab_unit_blocks.")));
	s->grab = palloc0(sizeof(CpGrabAcc));
	if (!cp_grab_acc_init(s->grab, Max(n_units, 1), s->model.n_weights, dim,
						  cp_derive_seed((uint64) s->seed, 7), palloc0))
		elog(ERROR, "corgipile: GraB sizes do not fit");	/* checked above */
	s->model.grab = s->grab;
	/* units of several blocks: sums are kept per unit */
	s->model.grab_unit_of = cp_grab_unit_map(state);
	s->model.grab_snap = palloc(mul_size(sizeof(double), s->model.n_weights));
	/* projected sums: from the projected weights (core/grab.c) */
	if (s->grab->proj_nnz > 0)
		s->model.grab_pw = palloc(mul_size(sizeof(double) * 2, dim));
	/* shuffled dense buffers are gathered before training (core), blocks too */
	if (s->model.gather_rows > 0)
		s->model.gather_blocks = palloc0(mul_size(sizeof(uint32), s->model.gather_rows));
}

/*
 * The ordering state a warm start needs (docs/grab.md): the last walked
 * epoch's order and signs, serialised by the core and stored base64 in the
 * model's params, with the run's choices.
 */
void
cp_sgd_record_grab(SgdState *s, CpTrainRecord *rec)
{
	void	   *state = s->src->strategy_state;
	const uint32 *visit;
	const int8 *signs;
	uint32		n_blocks;
	Size		bytes;

	rec->grab = true;
	rec->grab_buffer_shuffle = strcmp(cp_grab_buffer_choice(state), "shuffled") == 0;
	cp_grab_choices(state, &rec->grab_unit_blocks, &rec->grab_epochs,
					&rec->grab_epochs_kept, &rec->grab_epochs_random,
					&rec->grab_statistic, &rec->grab_step);
	rec->grab_dim = s->grab ? s->grab->dim : 0;
	rec->grab_n_weights = s->model.n_weights;

	/*
	 * workers => N: parallel.c walked the blocks (PairBalance over the
	 * slots), not the strategy.  The next order is stored as a visit with
	 * every sign +1, which a warm start's reorder keeps as it is.
	 */
	if (s->par != NULL && cp_parallel_grab_next_order(s->par, &visit, &n_blocks))
	{
		int8	   *ones = palloc(Max(n_blocks, 1));

		memset(ones, 1, Max(n_blocks, 1));
		signs = ones;
	}
	else if (!cp_grab_last_walk(state, &visit, &signs, &n_blocks))
		return;
	if (cp_grab_serialized_bytes(n_blocks, &bytes) && bytes < MaxAllocSize / 2)
	{
		uint8	   *raw = palloc(bytes);
		int			len = pg_b64_enc_len((int) bytes);
		char	   *b64 = palloc(len + 1);
		int			n;

		cp_grab_serialize(visit, signs, n_blocks, raw);
		n = pg_b64_encode((const char *) raw, (int) bytes, b64, len);
		if (n < 0)
			elog(ERROR, "corgipile: could not encode the GraB state");
		b64[n] = '\0';
		rec->grab_state = b64;
	}
}
