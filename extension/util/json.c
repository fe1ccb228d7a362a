/*-------------------------------------------------------------------------
 *
 * json.c
 *	  Writing JSON text and jsonb values: numbers as the model row's jsonb
 *	  stores them.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <math.h>

#include "common/shortest_dec.h"
#include "fmgr.h"
#include "utils/builtins.h"
#include "utils/numeric.h"

#include "util/json.h"

/*
 * A float8 as JSON: the shortest text that reads back as the same double
 * (PostgreSQL's float8out), or null when it is not finite.  The one writer
 * of numbers for the model row's jsonb (params, history, preprocess).
 */
void
cp_json_number(StringInfo buf, double v)
{
	if (isfinite(v))
	{
		char		num[DOUBLE_SHORTEST_DECIMAL_LEN];

		/* the shortest text that reads back as the same double */
		double_to_shortest_decimal_buf(v, num);
		appendStringInfoString(buf, num);
	}
	else
		appendStringInfoString(buf, "null");
}

/*
 * The same number as a jsonb scalar (seq: WJB_VALUE after a key, WJB_ELEM
 * in an array): the numeric jsonb_in would read from cp_json_number's text.
 */
void
cp_jsonb_number(JsonbParseState **state, JsonbIteratorToken seq, double v)
{
	JsonbValue	jv;

	if (isfinite(v))
	{
		char		num[DOUBLE_SHORTEST_DECIMAL_LEN];

		double_to_shortest_decimal_buf(v, num);
		jv.type = jbvNumeric;
		jv.val.numeric = DatumGetNumeric(DirectFunctionCall3(numeric_in,
															 CStringGetDatum(num),
															 ObjectIdGetDatum(InvalidOid),
															 Int32GetDatum(-1)));
	}
	else
		jv.type = jbvNull;
	pushJsonbValue(state, seq, &jv);
}

/* An integer as a jsonb scalar. */
void
cp_jsonb_int(JsonbParseState **state, JsonbIteratorToken seq, int64 v)
{
	JsonbValue	jv;

	jv.type = jbvNumeric;
	jv.val.numeric = int64_to_numeric(v);
	pushJsonbValue(state, seq, &jv);
}

/*
 * A string scalar of len bytes, not copied: s must live until the jsonb is
 * built (JsonbValueToJsonb copies it then).
 */
void
cp_jsonb_string(JsonbParseState **state, JsonbIteratorToken seq, const char *s, int32 len)
{
	JsonbValue	jv;

	jv.type = jbvString;
	jv.val.string.val = (char *) s;
	jv.val.string.len = len;
	pushJsonbValue(state, seq, &jv);
}

/* An object's key. */
void
cp_jsonb_key(JsonbParseState **state, const char *key)
{
	cp_jsonb_string(state, WJB_KEY, key, (int32) strlen(key));
}
