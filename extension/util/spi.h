/*-------------------------------------------------------------------------
 *
 * spi.h
 *	  The pinned search_path our internal queries run under (spi.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef CORGIPILE_UTIL_SPI_H
#define CORGIPILE_UTIL_SPI_H

#include "postgres.h"

extern int	cp_pin_search_path(void);
extern void cp_restore_search_path(int nest);

#endif							/* CORGIPILE_UTIL_SPI_H */
