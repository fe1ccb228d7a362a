/*-------------------------------------------------------------------------
 *
 * buffer.c
 *	  CpBuffer (core/buffer.h): a batch of rows in the compact layout, in
 *	  memory contexts.  Filled by the column resolver (layout.c), the block
 *	  cache and the strategies; read by the training.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "utils/memutils.h"

#include "io/buffer.h"

/*
 * A sparse buffer has offsets[0] from the start, so that offsets[n_rows]
 * is the end of its values even before it has held a row: a block whose
 * rows were all skipped (NULL labels) may be the first a buffer reads, and
 * the block cache and the strategies read offsets[first_row] for it.
 */
void
cp_buffer_init(CpBuffer *buf, MemoryContext cxt, bool sparse)
{
	memset(buf, 0, sizeof(*buf));
	buf->memcxt = cxt;
	buf->sparse = sparse;
	if (sparse)
	{
		buf->offsets = MemoryContextAlloc(cxt, sizeof(int64));
		buf->offsets[0] = 0;
	}
}

/* Buffers that remember where their rows came from. */
void
cp_buffer_init_with_ids(CpBuffer *buf, MemoryContext cxt, bool sparse)
{
	cp_buffer_init(buf, cxt, sparse);
	buf->with_ids = true;
}

void
cp_buffer_reset(CpBuffer *buf, int n_features)
{
	buf->n_rows = 0;
	buf->nnz = 0;
	buf->n_features = n_features;
	buf->row_ptrs = NULL;
	if (buf->offsets != NULL)
		buf->offsets[0] = 0;
}

static void *
grow(MemoryContext cxt, void *ptr, Size size)
{
	if (ptr == NULL)
		return MemoryContextAllocHuge(cxt, size);
	return repalloc_huge(ptr, size);
}

/*
 * The bytes of buf's arrays for rows rows and values values (doubles, and
 * their indices when sparse).  mul_size and add_size raise an ERROR, not a
 * wrong figure, on overflow.
 */
Size
cp_buffer_bytes(const CpBuffer *buf, int64 rows, int64 values)
{
	Size		per_row = sizeof(double) + sizeof(uint32);	/* label, order */
	Size		per_value = sizeof(double);

	if (buf->with_ids)
		per_row += sizeof(uint64) + sizeof(int64);
	if (buf->with_blocks)
		per_row += sizeof(uint32);
	if (buf->row_ptr_store != NULL)
		per_row += sizeof(double *);
	if (buf->sparse)
	{
		per_row += sizeof(int64);	/* offsets */
		per_value += sizeof(int32);
	}
	return add_size(mul_size(per_row, (Size) Max(rows, 0)),
					mul_size(per_value, (Size) Max(values, 0)));
}

/* The bytes the rows held take (not the room reserved beyond them). */
Size
cp_buffer_used_bytes(const CpBuffer *buf)
{
	int64		values = buf->sparse ? buf->nnz :
		(buf->row_ptrs != NULL ? 0 : buf->n_rows * (int64) buf->n_features);

	return cp_buffer_bytes(buf, buf->n_rows, values);
}

/*
 * Hold buf's arrays to budget bytes.  what names the buffer and hint the
 * setting to raise, in the ERROR a row that does not fit raises.
 */
void
cp_buffer_set_budget(CpBuffer *buf, Size budget, const char *what, const char *hint)
{
	buf->budget = budget;
	buf->budget_what = what;
	buf->budget_hint = hint;
}

static void
over_budget(const CpBuffer *buf, int64 rows, int64 values)
{
	ereport(ERROR,
			(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
			 errmsg("corgipile: %s would take more than its budget of %zu kB",
					buf->budget_what ? buf->budget_what : "a buffer of rows",
					buf->budget / 1024),
			 errdetail("Its " INT64_FORMAT " rows with " INT64_FORMAT " values need %zu kB.",
					   rows, values, cp_buffer_bytes(buf, rows, values) / 1024),
			 errhint("%s", buf->budget_hint ? buf->budget_hint : "Raise work_mem.")));
}

/*
 * New capacities for rows rows and values values: doubled (amortised
 * growth), but within the budget, by smaller steps near it and exactly
 * what is needed at the last; an ERROR when that does not fit either.
 */
static void
grow_caps(const CpBuffer *buf, int64 rows, int64 values, int64 *cap_rows,
		  int64 *cap_values)
{
	int64		r = buf->cap_rows;
	int64		v = buf->cap_nnz;

	if (rows > r)
		r = Max(rows, Max(1024, r * 2));
	if (values > v)
		v = Max(values, Max(4096, v * 2));
	if (buf->budget > 0 && cp_buffer_bytes(buf, r, v) > buf->budget)
	{
		if (rows > buf->cap_rows)
			r = Max(rows, buf->cap_rows + buf->cap_rows / 8);
		if (values > buf->cap_nnz)
			v = Max(values, buf->cap_nnz + buf->cap_nnz / 8);
		if (cp_buffer_bytes(buf, r, v) > buf->budget)
		{
			r = Max(rows, buf->cap_rows);
			v = Max(values, buf->cap_nnz);
			if (cp_buffer_bytes(buf, r, v) > buf->budget)
				over_budget(buf, rows, values);
		}
	}
	*cap_rows = r;
	*cap_values = v;
}

/* Make room for rows rows and values values (doubles). */
void
cp_buffer_reserve(CpBuffer *buf, int64 rows, int64 values)
{
	int64		cap_rows;
	int64		cap_values;

	if (rows <= buf->cap_rows && values <= buf->cap_nnz)
		return;
	grow_caps(buf, rows, values, &cap_rows, &cap_values);
	if (cap_rows > buf->cap_rows)
	{
		int64		cap = cap_rows;

		if (cap > (int64) PG_UINT32_MAX)
			ereport(ERROR,
					(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
					 errmsg("a corgipile buffer cannot hold more than %u rows",
							PG_UINT32_MAX),
					 errhint("Use a smaller buffer_size.")));
		buf->labels = grow(buf->memcxt, buf->labels, mul_size(sizeof(double), cap));
		buf->order = grow(buf->memcxt, buf->order, mul_size(sizeof(uint32), cap));
		if (buf->with_ids)
		{
			buf->row_tids = grow(buf->memcxt, buf->row_tids, mul_size(sizeof(uint64), cap));
			buf->row_keys = grow(buf->memcxt, buf->row_keys, mul_size(sizeof(int64), cap));
		}
		if (buf->with_blocks)
			buf->row_blocks = grow(buf->memcxt, buf->row_blocks, mul_size(sizeof(uint32), cap));
		if (buf->row_ptr_store != NULL)
		{
			buf->row_ptr_store = grow(buf->memcxt, buf->row_ptr_store,
									  mul_size(sizeof(double *), cap));
			if (buf->row_ptrs != NULL)
				buf->row_ptrs = buf->row_ptr_store;
		}
		if (buf->sparse)
		{
			bool		fresh = (buf->offsets == NULL);

			buf->offsets = grow(buf->memcxt, buf->offsets, mul_size(sizeof(int64), add_size(cap, 1)));
			if (fresh)
				buf->offsets[0] = 0;
		}
		buf->cap_rows = cap;
	}
	if (cap_values > buf->cap_nnz)
	{
		int64		cap = cap_values;

		buf->values = grow(buf->memcxt, buf->values, mul_size(sizeof(double), cap));
		if (buf->sparse)
			buf->indices = grow(buf->memcxt, buf->indices, mul_size(sizeof(int32), cap));
		buf->cap_nnz = cap;
	}
}

/* Append row of src to dst (same layout); the main thread's row copy. */
void
cp_buffer_append_row(CpBuffer *dst, const CpBuffer *src, int64 row)
{
	int64		at = dst->n_rows;

	dst->n_features = src->n_features;
	if (src->sparse)
	{
		int64		start = src->offsets[row];
		int64		len = src->offsets[row + 1] - start;

		cp_buffer_reserve(dst, at + 1, dst->nnz + len);
		memcpy(dst->values + dst->nnz, src->values + start, sizeof(double) * len);
		memcpy(dst->indices + dst->nnz, src->indices + start, sizeof(int32) * len);
		dst->nnz += len;
		dst->offsets[at + 1] = dst->nnz;
	}
	else
	{
		int			d = src->n_features;

		cp_buffer_reserve(dst, at + 1, (at + 1) * d);
		memcpy(dst->values + at * d, cp_buffer_dense_row(src, row), sizeof(double) * d);
	}
	dst->labels[at] = src->labels[row];
	if (dst->with_ids)
	{
		dst->row_tids[at] = src->row_tids[row];
		dst->row_keys[at] = src->row_keys[row];
	}
	dst->n_rows = at + 1;
}

/*
 * src's sparse rows as dense rows in dst (a dense buffer, emptied first):
 * for a pass over rows whose entries are a fair share of the dimension
 * (one-hot columns), where the dense dot product is cheaper than the
 * indexed one.
 */
void
cp_buffer_densify(CpBuffer *dst, const CpBuffer *src)
{
	int			d = src->n_features;

	Assert(src->sparse && !dst->sparse);
	cp_buffer_reset(dst, d);
	cp_buffer_reserve(dst, src->n_rows, (int64) mul_size((Size) src->n_rows, (Size) d));
	memset(dst->values, 0, mul_size(sizeof(double), mul_size((Size) src->n_rows, (Size) d)));
	for (int64 row = 0; row < src->n_rows; row++)
	{
		double	   *x = dst->values + row * d;

		for (int64 e = src->offsets[row]; e < src->offsets[row + 1]; e++)
			x[src->indices[e]] += src->values[e];
		dst->labels[row] = src->labels[row];
	}
	dst->n_rows = src->n_rows;
}

/*
 * Make room for rows dense rows borrowed from memory that outlives the
 * buffer (block_cache.c): the buffer, empty, holds pointers to its rows
 * from now until the next reset.
 */
void
cp_buffer_reserve_borrowed(CpBuffer *buf, int64 rows)
{
	Assert(!buf->sparse && buf->n_rows == 0);
	cp_buffer_reserve(buf, rows, 0);
	if (buf->row_ptr_store == NULL)
		buf->row_ptr_store = MemoryContextAllocHuge(buf->memcxt,
													mul_size(sizeof(double *),
															 Max(buf->cap_rows, 1)));
	buf->row_ptrs = buf->row_ptr_store;
}

/* Free a buffer's arrays (the struct itself belongs to the caller). */
void
cp_buffer_free(CpBuffer *buf)
{
	void	   *arrays[] = {buf->labels, buf->values, buf->indices, buf->offsets,
	buf->order, buf->row_tids, buf->row_keys, buf->row_ptr_store};

	for (int i = 0; i < lengthof(arrays); i++)
		if (arrays[i] != NULL)
			pfree(arrays[i]);
	buf->labels = buf->values = NULL;
	buf->indices = NULL;
	buf->offsets = NULL;
	buf->order = NULL;
	buf->row_tids = NULL;
	buf->row_keys = NULL;
	buf->row_ptrs = buf->row_ptr_store = NULL;
	buf->n_rows = buf->cap_rows = buf->nnz = buf->cap_nnz = 0;
}
