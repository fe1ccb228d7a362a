/*-------------------------------------------------------------------------
 *
 * corgipile.c
 *	  Module load: settings, custom scan methods and the planner hook.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "fmgr.h"
#include "nodes/extensible.h"
#include "utils/guc.h"

#include "io/block_cache.h"
#include "io/prep.h"
#include "nodes/block_shuffle.h"
#include "corgipile.h"
#include "nodes/parallel.h"
#include "nodes/sgd.h"
#include "shuffle/strategy.h"
#include "nodes/tuple_shuffle.h"

PG_MODULE_MAGIC;

bool		cp_progress_notices = true;

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
	MarkGUCPrefixReserved("corgipile");

	RegisterCustomScanMethods(&cp_sgd_scan_methods);
	RegisterCustomScanMethods(&cp_tuple_shuffle_scan_methods);
	RegisterCustomScanMethods(&cp_block_shuffle_scan_methods);
	RegisterCustomScanMethods(&cp_call_scan_methods);
	cp_planner_init();
}

/*
 * Our internal queries run under search_path = pg_catalog, pg_temp, so
 * that no function or operator a user created in a schema of the caller's
 * path can match one of ours more exactly (they also name pg_catalog's
 * explicitly).  Returns the GUC nest level to hand to
 * cp_restore_search_path; an error unwinds it with the (sub)transaction.
 */
int
cp_pin_search_path(void)
{
	int			nest = NewGUCNestLevel();

	(void) set_config_option("search_path", "pg_catalog, pg_temp",
							 PGC_USERSET, PGC_S_SESSION,
							 GUC_ACTION_SAVE, true, 0, false);
	return nest;
}

void
cp_restore_search_path(int nest)
{
	AtEOXact_GUC(true, nest);
}
