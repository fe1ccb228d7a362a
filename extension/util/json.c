/*-------------------------------------------------------------------------
 *
 * json.c
 *	  Writing JSON text: numbers as the model row's jsonb stores them.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <math.h>

#include "common/shortest_dec.h"

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
