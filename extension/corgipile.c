/*-------------------------------------------------------------------------
 *
 * corgipile.c
 *	  Module load: settings, custom scan methods and the planner hook.
 *	  Each part has its own header; this file includes them all and no part
 *	  includes this one (docs/engine.md).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "fmgr.h"
#include "nodes/extensible.h"
#include "utils/guc.h"

#include "cluster/node_conn.h"
#include "model/model_copy.h"
#include "io/block_cache.h"
#include "io/prep.h"
#include "nodes/block_shuffle.h"
#include "nodes/call_scan.h"
#include "nodes/dist_train.h"
#include "nodes/parallel.h"
#include "nodes/first_pass.h"
#include "nodes/planner.h"
#include "nodes/sgd.h"
#include "shuffle/grab.h"
#include "shuffle/strategy.h"
#include "nodes/tuple_shuffle.h"

PG_MODULE_MAGIC;

void		_PG_init(void);

void
_PG_init(void)
{
	DefineCustomBoolVariable("corgipile.progress",
							 "Reports the figures of each training epoch as a NOTICE.",
							 "Clients build progress bars from these NOTICEs, which "
							 "reach them at once while result rows may wait in the "
							 "server's send buffer.",
							 &cp_progress_notices,
							 true,
							 PGC_USERSET,
							 0,
							 NULL, NULL, NULL);
	DefineCustomBoolVariable("corgipile.polish",
							 "Finishes a default training of a small table with the exact "
							 "minimum of its objective.",
							 "With learning_rate left NULL, a table of up to 50000 training "
							 "rows held whole in the block cache, and a smooth loss, L-BFGS "
							 "continues from SGD's model to the minimum scikit-learn's "
							 "solvers find (params.polish says what it did). Off keeps "
							 "SGD's model.",
							 &cp_polish_enabled,
							 true,
							 PGC_USERSET,
							 0,
							 NULL, NULL, NULL);
	DefineCustomIntVariable("corgipile.polish_max_passes",
							"Most passes over the rows the polish of a small table may take.",
							"Each pass computes the objective and its gradient; the polish "
							"stops sooner once no gradient entry exceeds 1e-4 (scikit-learn's "
							"lbfgs bound), and warns when it reaches this budget first.",
							&cp_polish_max_passes,
							1000, 2, INT_MAX,
							PGC_USERSET,
							0,
							NULL, NULL, NULL);
	cp_parallel_init();
	/*
	 * Superuser-set: the cache is memory a training holds for its whole run,
	 * and in a shared database the DBA, not each role, decides how much of
	 * it any session may take.
	 */
	DefineCustomIntVariable("corgipile.block_cache_size",
							"Memory for the rows of blocks converted in a training's first epoch, read from memory in later epochs.",
							"Blocks beyond it are read from the table every epoch; 0 turns the cache off.",
							&cp_block_cache_kb,
							512 * 1024, 0, MAX_KILOBYTES,
							PGC_SUSET,
							GUC_UNIT_KB,
							NULL, NULL, NULL);
	DefineCustomIntVariable("corgipile.stats_sample_size",
							"Table size above which a training learns its standardizing statistics from a random sample of blocks of about this size.",
							"Smaller tables are read whole before epoch 1; a larger one is sampled, and the sampled blocks are kept in the block cache for epoch 1, so that the table is read once.  0 reads every row.",
							&cp_stats_sample_pages,
							8192, 0, INT_MAX / 2,
							PGC_USERSET,
							GUC_UNIT_BLOCKS,
							NULL, NULL, NULL);
	cp_grab_define_gucs();
	cp_dist_train_init();
	MarkGUCPrefixReserved("corgipile");

	RegisterCustomScanMethods(&cp_sgd_scan_methods);
	RegisterCustomScanMethods(&cp_tuple_shuffle_scan_methods);
	RegisterCustomScanMethods(&cp_block_shuffle_scan_methods);
	RegisterCustomScanMethods(&cp_call_scan_methods);
	RegisterCustomScanMethods(&cp_dist_scan_methods);
	cp_planner_init();
	cp_node_conn_init();
	/* after node_conn: its callback must run first (model_sync.c) */
	cp_model_sync_init();
}
