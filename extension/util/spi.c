/*-------------------------------------------------------------------------
 *
 * spi.c
 *	  The pinned search_path our internal queries run under.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "utils/guc.h"

#include "util/spi.h"

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
