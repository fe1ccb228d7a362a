/*-------------------------------------------------------------------------
 *
 * json.h
 *	  Writing JSON text (json.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef CORGIPILE_UTIL_JSON_H
#define CORGIPILE_UTIL_JSON_H

#include "postgres.h"

#include "lib/stringinfo.h"

extern void cp_json_number(StringInfo buf, double v);

#endif							/* CORGIPILE_UTIL_JSON_H */
