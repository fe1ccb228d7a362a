/*-------------------------------------------------------------------------
 *
 * parallel.h
 *	  train(workers => N): one epoch trained by the leader and N - 1
 *	  parallel workers (PostgreSQL's ParallelContext), the epoch's block
 *	  order and the model in dynamic shared memory (docs/parallel.md).
 *
 *-------------------------------------------------------------------------
 */
#ifndef CORGIPILE_PARALLEL_H
#define CORGIPILE_PARALLEL_H

#include "postgres.h"

#include "commands/explain.h"
#include "nodes/execnodes.h"
#include "storage/dsm.h"
#include "storage/shm_toc.h"
#include "utils/relcache.h"

#include "core/linear_model.h"
#include "params/params.h"

struct CpTupleSource;

/* corgipile.parallel_sync: how the processes of a parallel epoch meet */
typedef enum CpParallelSync
{
	CP_SYNC_AVERAGE,			/* per round of buffers, average the copies
								 * (deterministic) */
	CP_SYNC_HOGWILD				/* lock-free updates of shared weights */
} CpParallelSync;

extern int	cp_parallel_sync;

/* corgipile.parallel_grab: how shuffle grab orders a parallel training */
typedef enum CpParallelGrab
{
	CP_GRAB_PAIR_BALANCE,		/* CD-GraB: one PairBalance over all workers */
	CP_GRAB_INDEPENDENT			/* one GraB walk per worker (ID-GraB) */
} CpParallelGrab;

extern int	cp_parallel_grab;
extern void cp_parallel_init(void);

typedef struct CpParallel CpParallel;

/* Executor start: the processes (leader included) a training will use. */
extern int	cp_parallel_choose(const CpTrainParams *p, Relation rel,
							   const CpSizing *sz, int64 n_groups);

extern CpParallel *cp_parallel_create(struct CpTupleSource *src, Plan *plan,
									  EState *estate, int n_procs, uint64 seed,
									  const char *model_name);
extern bool cp_parallel_prefill(CpParallel *par, CpBuffer *buf, bool need_rows);
extern void cp_parallel_run_epoch(CpParallel *par, CpModel *model, CpBuffer *buf,
								  int epoch);
extern void cp_parallel_finish(CpParallel *par);
extern bool cp_parallel_grab_next_order(CpParallel *par, const uint32 **order,
										uint32 *n_blocks);
extern void cp_parallel_explain(CpParallel *par, ExplainState *es);

/* The entry point of a parallel worker (looked up by name). */
extern PGDLLEXPORT void cp_parallel_worker_main(dsm_segment *seg, shm_toc *toc);

#endif							/* CORGIPILE_PARALLEL_H */
