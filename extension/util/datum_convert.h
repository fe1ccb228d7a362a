/*-------------------------------------------------------------------------
 *
 * datum_convert.h
 *	  Turning SQL values into plain doubles, for training and prediction.
 *
 *-------------------------------------------------------------------------
 */
#ifndef CORGIPILE_DATUM_CONVERT_H
#define CORGIPILE_DATUM_CONVERT_H

#include "postgres.h"

#include <math.h>

#include "utils/array.h"

/*
 * Context for error messages: which row of which relation, or none, and
 * what the values are read for ("training", "predicting", ...: the hint of
 * a value that is not finite says "before" it).
 */
typedef struct CpRowContext
{
	const char *relname;		/* NULL when not reading a table */
	ItemPointer tid;			/* the row, or NULL */
	const char *use;
} CpRowContext;

extern bool cp_is_number_type(Oid type);
extern bool cp_is_index_type(Oid type);
extern double cp_datum_to_double(Datum d, Oid type);
extern int64 cp_datum_to_int64(Datum d, Oid type);
extern char *cp_row_description(const CpRowContext *where);
extern void cp_report_not_finite(double v, const CpRowContext *where) pg_attribute_noreturn();
extern void cp_check_all_finite(const double *x, int n, const CpRowContext *where);

/* Refuse NaN and infinities; inline, since it runs for every value read. */
static inline void
cp_check_finite(double v, const CpRowContext *where)
{
	if (unlikely(!isfinite(v)))
		cp_report_not_finite(v, where);
}
extern bool cp_array_to_doubles(ArrayType *arr, double *out, int n,
								const CpRowContext *where);
extern int	cp_array_to_doubles_nulls(ArrayType *arr, double *out, bool *isnull,
									  int n, const CpRowContext *where);
extern bool cp_array_to_doubles_transformed(ArrayType *arr, double *out, int n,
											const CpRowContext *where,
											const double *scale,
											const double *offset);
extern void cp_float8_data_to_doubles(const char *src, double *out, int n,
									  const double *scale, const double *offset,
									  const CpRowContext *where);
extern int	cp_array_length(ArrayType *arr, const CpRowContext *where,
							const char *what);
extern bool cp_array_to_indices(ArrayType *arr, int32 *out, int n,
								int n_features, const CpRowContext *where);

#endif							/* CORGIPILE_DATUM_CONVERT_H */
