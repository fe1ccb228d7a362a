/*-------------------------------------------------------------------------
 *
 * alloc.h
 *	  Where the core's memory comes from: the caller's allocator, zeroed
 *	  (palloc0 in the server, calloc in the unit tests), or NULL on
 *	  failure.  The core never allocates otherwise.
 *
 *-------------------------------------------------------------------------
 */
#ifndef CORGIPILE_CORE_ALLOC_H
#define CORGIPILE_CORE_ALLOC_H

#include "c.h"

typedef void *(*CpAllocZero) (Size size);

#endif							/* CORGIPILE_CORE_ALLOC_H */
