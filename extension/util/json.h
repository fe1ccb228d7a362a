/*-------------------------------------------------------------------------
 *
 * json.h
 *	  Writing JSON text and jsonb values (json.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef CORGIPILE_UTIL_JSON_H
#define CORGIPILE_UTIL_JSON_H

#include "postgres.h"

#include "lib/stringinfo.h"
#include "utils/jsonb.h"

extern void cp_json_number(StringInfo buf, double v);
extern void cp_jsonb_number(JsonbParseState **state, JsonbIteratorToken seq, double v);
extern void cp_jsonb_int(JsonbParseState **state, JsonbIteratorToken seq, int64 v);
extern void cp_jsonb_string(JsonbParseState **state, JsonbIteratorToken seq,
							const char *s, int32 len);
extern void cp_jsonb_key(JsonbParseState **state, const char *key);

#endif							/* CORGIPILE_UTIL_JSON_H */
