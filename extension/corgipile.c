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

#include "blockshuffle.h"
#include "corgipile.h"
#include "sgd.h"
#include "tupleshuffle.h"

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
	MarkGUCPrefixReserved("corgipile");

	RegisterCustomScanMethods(&sgd_scan_methods);
	RegisterCustomScanMethods(&tuple_shuffle_scan_methods);
	RegisterCustomScanMethods(&block_shuffle_scan_methods);
	cp_planner_init();
}
