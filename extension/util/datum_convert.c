/*-------------------------------------------------------------------------
 *
 * datum_convert.c
 *	  Conversions of labels, feature arrays and index arrays into doubles.
 *
 * Shared by the TupleShuffle loader and by predict(), so that training and
 * prediction accept exactly the same inputs and reject them with the same
 * messages.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <math.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

#include "catalog/pg_type.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/numeric.h"

#include "util/datum_convert.h"

bool
cp_is_number_type(Oid type)
{
	switch (type)
	{
		case INT2OID:
		case INT4OID:
		case INT8OID:
		case FLOAT4OID:
		case FLOAT8OID:
		case NUMERICOID:
			return true;
		default:
			return false;
	}
}

bool
cp_is_index_type(Oid type)
{
	return type == INT2OID || type == INT4OID || type == INT8OID;
}

double
cp_datum_to_double(Datum d, Oid type)
{
	switch (type)
	{
		case FLOAT8OID:
			return DatumGetFloat8(d);
		case FLOAT4OID:
			return (double) DatumGetFloat4(d);
		case INT2OID:
			return (double) DatumGetInt16(d);
		case INT4OID:
			return (double) DatumGetInt32(d);
		case INT8OID:
			return (double) DatumGetInt64(d);
		case NUMERICOID:
			return DatumGetFloat8(DirectFunctionCall1(numeric_float8_no_overflow, d));
		case BOOLOID:
			return DatumGetBool(d) ? 1.0 : 0.0;
		default:
			{
				/* a domain is read as its base type */
				Oid			base = getBaseType(type);

				if (base != type)
					return cp_datum_to_double(d, base);
			}
			ereport(ERROR,
					(errcode(ERRCODE_DATATYPE_MISMATCH),
					 errmsg("corgipile cannot read a value of type %s as a number",
							format_type_be(type))));
	}
	return 0.0;
}

/*
 * An integer or boolean value as an exact int64 (class keys, row ids):
 * going through a double would merge integers above 2^53.
 */
int64
cp_datum_to_int64(Datum d, Oid type)
{
	switch (type)
	{
		case INT2OID:
			return (int64) DatumGetInt16(d);
		case INT4OID:
			return (int64) DatumGetInt32(d);
		case INT8OID:
			return DatumGetInt64(d);
		case BOOLOID:
			return DatumGetBool(d) ? 1 : 0;
		default:
			{
				Oid			base = getBaseType(type);

				if (base != type)
					return cp_datum_to_int64(d, base);
			}
			ereport(ERROR,
					(errcode(ERRCODE_DATATYPE_MISMATCH),
					 errmsg("corgipile cannot read a value of type %s as an integer",
							format_type_be(type))));
	}
	return 0;
}

/*
 * The element type an array's data is laid out as: a domain over a number
 * type is stored exactly like that type.
 */
static Oid
storage_elem_type(ArrayType *arr)
{
	Oid			elemtype = ARR_ELEMTYPE(arr);

	switch (elemtype)
	{
		case FLOAT8OID:
		case FLOAT4OID:
		case INT2OID:
		case INT4OID:
		case INT8OID:
		case NUMERICOID:
			return elemtype;
		default:
			return getBaseType(elemtype);
	}
}

char *
cp_row_description(const CpRowContext *where)
{
	if (where != NULL && where->tid != NULL && where->relname != NULL)
		return psprintf("row (%u,%u) of \"%s\"",
						ItemPointerGetBlockNumber(where->tid),
						ItemPointerGetOffsetNumber(where->tid),
						where->relname);
	return pstrdup("the input");
}

void
cp_report_not_finite(double v, const CpRowContext *where)
{
	ereport(ERROR,
			(errcode(ERRCODE_DATA_EXCEPTION),
			 errmsg("feature value %s in %s is not a finite number",
					isnan(v) ? "NaN" : (v > 0 ? "Infinity" : "-Infinity"),
					cp_row_description(where)),
			 errhint("Remove or impute NaN and infinite values before %s.",
					 where != NULL && where->use != NULL ? where->use : "using them")));
}

/* Length of a one-dimensional array; an empty array has length 0. */
int
cp_array_length(ArrayType *arr, const CpRowContext *where, const char *what)
{
	if (ARR_NDIM(arr) == 0)
		return 0;
	if (ARR_NDIM(arr) != 1)
		ereport(ERROR,
				(errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
				 errmsg("%s in %s is a %d-dimensional array; expected one dimension",
						what, cp_row_description(where), ARR_NDIM(arr))));
	return ARR_DIMS(arr)[0];
}

/*
 * A double is not finite exactly when its exponent bits are all ones, and
 * then adding 1 to the exponent field carries into the sign bit:
 * ((bits & EXP) + EXP_ONE) has the sign bit set for NaN and the
 * infinities only.  OR-ed over the values, this is four integer
 * operations a value with neither branches nor calls.
 */
#define CP_EXP_BITS		UINT64CONST(0x7FF0000000000000)
#define CP_EXP_ONE		UINT64CONST(0x0010000000000000)
#define CP_SIGN_BIT		UINT64CONST(0x8000000000000000)

/*
 * Copy n doubles from src (an array's data, any alignment) to out and say
 * whether any of them is not finite: the copy and the check in one pass
 * over the values, which is most of what converting a float8[] costs.
 */
static inline bool
copy_doubles_nonfinite(double *out, const char *src, int n)
{
	uint64		bad = 0;
	int			i = 0;

#ifdef __SSE2__
	{
		const __m128i exp_bits = _mm_set1_epi64x((long long) CP_EXP_BITS);
		const __m128i exp_one = _mm_set1_epi64x((long long) CP_EXP_ONE);
		__m128i		acc = _mm_setzero_si128();
		__m128i		acc2 = _mm_setzero_si128();
		uint64		lanes[2];

		/* four values an iteration, two independent accumulators */
		for (; i + 4 <= n; i += 4)
		{
			__m128i		v = _mm_loadu_si128((const __m128i *) (src + i * sizeof(double)));
			__m128i		w = _mm_loadu_si128((const __m128i *) (src + (i + 2) * sizeof(double)));

			_mm_storeu_si128((__m128i *) (out + i), v);
			_mm_storeu_si128((__m128i *) (out + i + 2), w);
			acc = _mm_or_si128(acc, _mm_add_epi64(_mm_and_si128(v, exp_bits), exp_one));
			acc2 = _mm_or_si128(acc2, _mm_add_epi64(_mm_and_si128(w, exp_bits), exp_one));
		}
		if (i + 2 <= n)
		{
			__m128i		v = _mm_loadu_si128((const __m128i *) (src + i * sizeof(double)));

			_mm_storeu_si128((__m128i *) (out + i), v);
			acc = _mm_or_si128(acc, _mm_add_epi64(_mm_and_si128(v, exp_bits), exp_one));
			i += 2;
		}
		_mm_storeu_si128((__m128i *) lanes, _mm_or_si128(acc, acc2));
		bad = lanes[0] | lanes[1];
	}
#endif
	for (; i < n; i++)
	{
		uint64		bits;

		memcpy(&bits, src + i * sizeof(double), sizeof(bits));
		memcpy(&out[i], &bits, sizeof(bits));
		bad |= (bits & CP_EXP_BITS) + CP_EXP_ONE;
	}
	return (bad & CP_SIGN_BIT) != 0;
}

/*
 * copy_doubles_nonfinite, with each value x stored as x * scale + offset
 * (a standardizing transform, core/preprocess.c): the multiplication and
 * the addition are the scalar code's, in the same order and without a
 * fused multiply-add, so the values are the same doubles as
 * cp_prep_apply_dense gives after a plain copy.  The check is on the
 * values read, as it is there.
 */
static inline bool
copy_transform_doubles_nonfinite(double *out, const char *src, int n,
								 const double *scale, const double *offset)
{
	uint64		bad = 0;
	int			i = 0;

#ifdef __SSE2__
	{
		const __m128i exp_bits = _mm_set1_epi64x((long long) CP_EXP_BITS);
		const __m128i exp_one = _mm_set1_epi64x((long long) CP_EXP_ONE);
		__m128i		acc = _mm_setzero_si128();
		__m128i		acc2 = _mm_setzero_si128();
		uint64		lanes[2];

		for (; i + 4 <= n; i += 4)
		{
			__m128i		v = _mm_loadu_si128((const __m128i *) (src + i * sizeof(double)));
			__m128i		w = _mm_loadu_si128((const __m128i *) (src + (i + 2) * sizeof(double)));
			__m128d		x = _mm_add_pd(_mm_mul_pd(_mm_castsi128_pd(v), _mm_loadu_pd(scale + i)),
									   _mm_loadu_pd(offset + i));
			__m128d		y = _mm_add_pd(_mm_mul_pd(_mm_castsi128_pd(w), _mm_loadu_pd(scale + i + 2)),
									   _mm_loadu_pd(offset + i + 2));

			_mm_storeu_pd(out + i, x);
			_mm_storeu_pd(out + i + 2, y);
			acc = _mm_or_si128(acc, _mm_add_epi64(_mm_and_si128(v, exp_bits), exp_one));
			acc2 = _mm_or_si128(acc2, _mm_add_epi64(_mm_and_si128(w, exp_bits), exp_one));
		}
		_mm_storeu_si128((__m128i *) lanes, _mm_or_si128(acc, acc2));
		bad = lanes[0] | lanes[1];
	}
#endif
	for (; i < n; i++)
	{
		uint64		bits;
		double		x;

		memcpy(&bits, src + i * sizeof(double), sizeof(bits));
		memcpy(&x, &bits, sizeof(x));
		out[i] = x * scale[i] + offset[i];
		bad |= (bits & CP_EXP_BITS) + CP_EXP_ONE;
	}
	return (bad & CP_SIGN_BIT) != 0;
}

/*
 * cp_array_to_doubles, then each value x turned into x * scale[i] +
 * offset[i] (the model's standardizing transform, as cp_prep_apply_dense
 * applies it, with the same results): for float8[], in the same pass as
 * the copy and the check.  The check, and its error, are on the values
 * read.
 */
bool
cp_array_to_doubles_transformed(ArrayType *arr, double *out, int n,
								const CpRowContext *where,
								const double *scale, const double *offset)
{
	if (n > 0 && storage_elem_type(arr) == FLOAT8OID && !array_contains_nulls(arr))
	{
		const char *src = (const char *) ARR_DATA_PTR(arr);

		if (unlikely(copy_transform_doubles_nonfinite(out, src, n, scale, offset)))
		{
			/* report the value read, not what the transform made of it */
			(void) copy_doubles_nonfinite(out, src, n);
			cp_check_all_finite(out, n, where);
		}
		return true;
	}
	if (!cp_array_to_doubles(arr, out, n, where))
		return false;
	for (int i = 0; i < n; i++)
		out[i] = out[i] * scale[i] + offset[i];
	return true;
}

/*
 * The n doubles of a float8[]'s data (src, any alignment; the caller has
 * checked the array's type, dimension and the absence of NULLs) into out,
 * each finite, transformed when scale is not NULL: what
 * cp_array_to_doubles_transformed and cp_array_to_doubles do for such an
 * array, the same doubles and the same error, without looking at the
 * array's header again (TupleShuffle's read of rows straight from the
 * page, cp_layout_append_float8).
 */
void
cp_float8_data_to_doubles(const char *src, double *out, int n,
						  const double *scale, const double *offset,
						  const CpRowContext *where)
{
	if (scale != NULL)
	{
		if (unlikely(copy_transform_doubles_nonfinite(out, src, n, scale, offset)))
		{
			(void) copy_doubles_nonfinite(out, src, n);
			cp_check_all_finite(out, n, where);
		}
	}
	else if (unlikely(copy_doubles_nonfinite(out, src, n)))
		cp_check_all_finite(out, n, where);
}

/*
 * cp_array_to_doubles for an array that may hold NULL elements (a row the
 * model imputes): isnull[i] says which, out[i] is 0 there.  The elements
 * that are not NULL are checked as cp_array_to_doubles checks them.
 * Returns the number of NULL elements.
 */
int
cp_array_to_doubles_nulls(ArrayType *arr, double *out, bool *isnull, int n,
						  const CpRowContext *where)
{
	Oid			elemtype = storage_elem_type(arr);
	Datum	   *elems;
	bool	   *nulls;
	int			nelems;
	int16		typlen;
	bool		typbyval;
	char		typalign;
	int			n_null = 0;

	if (!array_contains_nulls(arr))
	{
		memset(isnull, 0, sizeof(bool) * n);
		cp_array_to_doubles(arr, out, n, where);
		return 0;
	}
	get_typlenbyvalalign(elemtype, &typlen, &typbyval, &typalign);
	deconstruct_array(arr, elemtype, typlen, typbyval, typalign,
					  &elems, &nulls, &nelems);
	for (int i = 0; i < n; i++)
	{
		isnull[i] = nulls[i];
		out[i] = nulls[i] ? 0.0 : cp_datum_to_double(elems[i], elemtype);
		n_null += nulls[i];
	}
	pfree(elems);
	pfree(nulls);
	cp_check_all_finite(out, n, where);
	return n_null;
}

/*
 * Copy n elements of a numeric array into out, checking that each is
 * finite.  Returns false, leaving out undefined, if an element is NULL.
 */
bool
cp_array_to_doubles(ArrayType *arr, double *out, int n, const CpRowContext *where)
{
	Oid			elemtype = storage_elem_type(arr);

	if (n == 0)
		return true;
	if (array_contains_nulls(arr))
		return false;

	switch (elemtype)
	{
		case FLOAT8OID:
			if (unlikely(copy_doubles_nonfinite(out, (const char *) ARR_DATA_PTR(arr), n)))
				cp_check_all_finite(out, n, where);	/* finds and reports it */
			return true;
		case FLOAT4OID:
			{
				const float4 *src = (const float4 *) ARR_DATA_PTR(arr);

				for (int i = 0; i < n; i++)
					out[i] = (double) src[i];
			}
			break;
		case INT4OID:
			{
				const int32 *src = (const int32 *) ARR_DATA_PTR(arr);

				for (int i = 0; i < n; i++)
					out[i] = (double) src[i];
			}
			return true;		/* integers are always finite */
		case INT2OID:
			{
				const int16 *src = (const int16 *) ARR_DATA_PTR(arr);

				for (int i = 0; i < n; i++)
					out[i] = (double) src[i];
			}
			return true;
		case INT8OID:
			{
				const int64 *src = (const int64 *) ARR_DATA_PTR(arr);

				for (int i = 0; i < n; i++)
					out[i] = (double) src[i];
			}
			return true;
		default:
			{
				Datum	   *elems;
				int			nelems;
				int16		typlen;
				bool		typbyval;
				char		typalign;

				get_typlenbyvalalign(elemtype, &typlen, &typbyval, &typalign);
				deconstruct_array(arr, elemtype, typlen, typbyval, typalign,
								  &elems, NULL, &nelems);
				for (int i = 0; i < n; i++)
					out[i] = cp_datum_to_double(elems[i], elemtype);
				pfree(elems);
			}
			break;
	}
	cp_check_all_finite(out, n, where);
	return true;
}

/*
 * Refuse a NaN or an infinity among x[0..n-1], with the test above; the
 * culprit is looked for only when there is one.
 */
void
cp_check_all_finite(const double *x, int n, const CpRowContext *where)
{
	uint64		bad = 0;

	for (int i = 0; i < n; i++)
	{
		uint64		bits;

		memcpy(&bits, &x[i], sizeof(bits));
		bad |= (bits & CP_EXP_BITS) + CP_EXP_ONE;
	}
	if (likely((bad & CP_SIGN_BIT) == 0))
		return;
	for (int i = 0; i < n; i++)
		cp_check_finite(x[i], where);
}

static void
index_out_of_range(int64 v, int n_features, const CpRowContext *where)
{
	ereport(ERROR,
			(errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
			 errmsg("feature index %lld in %s is out of range for %d features",
					(long long) v, cp_row_description(where), n_features),
			 errhint("Sparse feature indices are 0-based and must be below n_features.")));
}

/*
 * Copy n indices of an integer array into out, checking 0 <= i < n_features
 * (the upper bound only when n_features > 0).  Returns false if an element
 * is NULL.
 */
bool
cp_array_to_indices(ArrayType *arr, int32 *out, int n, int n_features,
					const CpRowContext *where)
{
	Oid			elemtype = storage_elem_type(arr);
	const char *p = ARR_DATA_PTR(arr);

	if (n == 0)
		return true;
	if (array_contains_nulls(arr))
		return false;
	for (int i = 0; i < n; i++)
	{
		int64		v;

		switch (elemtype)
		{
			case INT2OID:
				v = ((const int16 *) p)[i];
				break;
			case INT4OID:
				v = ((const int32 *) p)[i];
				break;
			case INT8OID:
				v = ((const int64 *) p)[i];
				break;
			default:
				ereport(ERROR,
						(errcode(ERRCODE_DATATYPE_MISMATCH),
						 errmsg("feature indices of type %s[] in %s are not integers",
								format_type_be(ARR_ELEMTYPE(arr)),
								cp_row_description(where)),
						 errhint("Use an int2[], int4[] or int8[] column for feature_indices.")));
				v = 0;
		}
		if (v < 0 || v > PG_INT32_MAX || (n_features > 0 && v >= n_features))
			index_out_of_range(v, n_features, where);
		out[i] = (int32) v;
	}
	return true;
}
