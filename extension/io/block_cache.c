/*-------------------------------------------------------------------------
 *
 * block_cache.c
 *	  A memory cache of converted blocks, for the epochs after the first.
 *
 * Reading a heap tuple costs a page lookup, the deforming of the tuple and
 * the conversion of its columns; reading a row already in the compact
 * layout costs a copy.  So the first epoch keeps the rows it converted,
 * block by block, as long as they fit in corgipile.block_cache_size, and
 * later epochs take those blocks from memory, in whatever order the epoch
 * visits them, and read only the others from the heap.  Every epoch of a
 * training reads under the same snapshot, and the conversion of a row
 * does not change from one epoch to the next, so a cached block holds
 * exactly the rows (and skips exactly the rows) the heap would give: the
 * buffers, and the weights a seed gives, are the same with or without the
 * cache (tests/python/test_engine_pinned.py).
 *
 * The cache lives in a memory context under the node's, and goes with the
 * query.  Rows carry no ids here: shuffled_scan() does not use the cache.
 *
 * The blocks' arrays are carved from slabs of up to 32MB (cache_alloc),
 * whose pages are asked for at once (MADV_POPULATE_WRITE) rather than
 * faulted in one at a time as the rows are copied: filling 464MB took
 * 0.27 s of CPU in blocks of 170kB each malloc'd (mmap'd) and faulted,
 * 0.19 s in populated slabs, and freeing it 0.04 s against 0.03 s
 * (a standalone test of the 2M-row table's shapes on this machine's VM).
 * A slab is sized for the blocks still to come, so a small table takes
 * no more than it needs, and slabs never add up to more than the budget.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <sys/mman.h>
#include <unistd.h>

#include "miscadmin.h"
#include "utils/memutils.h"

#include "io/block_cache.h"
#include "io/buffer.h"

int			cp_block_cache_kb = 512 * 1024;

#define CP_CACHE_SLAB ((Size) 32 * 1024 * 1024)
/* each array of a block starts on a cache line of its own */
#define CP_CACHE_ALIGN 64
#define CACHE_ALIGNED(len) TYPEALIGN(CP_CACHE_ALIGN, (len))

#if defined(__linux__) && !defined(MADV_POPULATE_WRITE)
#define MADV_POPULATE_WRITE 23	/* Linux 5.14; older kernels refuse it */
#endif

/* One block's rows, in the layout of a CpBuffer. */
struct CpCachedBlock
{
	int64		n_rows;
	int			n_features;		/* dense: the row stride */
	int64		nnz;			/* sparse: values held */
	double	   *labels;
	double	   *values;			/* dense: n_rows * n_features; sparse: nnz */
	int32	   *indices;		/* sparse: nnz */
	int32	   *lengths;		/* sparse: values per row */

	/*
	 * validation => 'N%', blocks the first pass cached: the block's held-out
	 * rows (dense, converted as epoch 1 keeps them), which epoch 1 hands to
	 * the holdout when it takes the block from here (cp_block_cache_held).
	 */
	int64		held_seen;		/* held-out rows met, NULLs included */
	int64		held_rows;		/* of them, the rows kept */
	double	   *held_labels;
	double	   *held_values;	/* held_rows * n_features */
};

CpBlockCache *
cp_block_cache_create(MemoryContext parent, uint32 n_blocks, Size budget)
{
	CpBlockCache *cache = MemoryContextAllocZero(parent, sizeof(CpBlockCache));

	cache->cxt = AllocSetContextCreate(parent, "corgipile block cache",
									   ALLOCSET_DEFAULT_SIZES);
	cache->n_blocks = n_blocks;
	cache->blocks = MemoryContextAllocExtended(cache->cxt,
											   mul_size(sizeof(CpCachedBlock *),
														Max(n_blocks, 1)),
											   MCXT_ALLOC_HUGE | MCXT_ALLOC_ZERO);
	cache->budget = budget;
	cache->used = sizeof(CpCachedBlock *) * (Size) n_blocks;
	cache->reserved = cache->used;
	return cache;
}

/*
 * Make room for a block's arrays of need bytes (CACHE_ALIGNED parts) in
 * the current slab, taking a new one if they do not fit: false if that
 * would take the slabs past the budget.  A new slab holds the blocks not
 * yet cached, as large as this one (the table's blocks are of similar
 * sizes), up to CP_CACHE_SLAB; the rest of the old slab is left unused.
 */
static bool
cache_reserve(CpBlockCache *cache, Size need)
{
	Size		size;
	uint32		to_come;

	if (need <= cache->slab_free)
		return true;
	if (cache->reserved > cache->budget || need > cache->budget - cache->reserved)
		return false;
	to_come = cache->n_blocks > cache->n_cached ? cache->n_blocks - cache->n_cached : 1;
	size = Min(CP_CACHE_SLAB, cache->budget - cache->reserved);
	if ((double) need * to_come < (double) size)
		size = need * to_come;
	size = Max(size, need);
	cache->slab = MemoryContextAllocHuge(cache->cxt, size + CP_CACHE_ALIGN);
	cache->slab = (char *) TYPEALIGN(CP_CACHE_ALIGN, cache->slab);
	cache->slab_free = size;
	cache->reserved += size;
#ifdef MADV_POPULATE_WRITE
	{
		/* the whole pages of the slab; a refusal leaves them to faults */
		uintptr_t	page = (uintptr_t) sysconf(_SC_PAGESIZE);
		uintptr_t	from = TYPEALIGN(page, (uintptr_t) cache->slab);
		uintptr_t	to = TYPEALIGN_DOWN(page, (uintptr_t) cache->slab + size);

		if (to > from)
			(void) madvise((void *) from, to - from, MADV_POPULATE_WRITE);
	}
#endif
	return true;
}

/* len bytes from the room cache_reserve made */
static void *
cache_alloc(CpBlockCache *cache, Size len)
{
	void	   *p = cache->slab;

	len = CACHE_ALIGNED(Max(len, 1));
	Assert(len <= cache->slab_free);
	cache->slab += len;
	cache->slab_free -= len;
	return p;
}

/*
 * Forget every cached block, for a caller whose conversion of rows has
 * changed (a pass before the first epoch that read rows through the same
 * path with other settings): the next reads refill the cache.  The rows
 * are freed: no buffer may still borrow them (cp_block_cache_borrow).
 */
void
cp_block_cache_reset(CpBlockCache *cache)
{
	CpCachedBlock **blocks;

	MemoryContextReset(cache->cxt);
	blocks = MemoryContextAllocExtended(cache->cxt,
										mul_size(sizeof(CpCachedBlock *),
												 Max(cache->n_blocks, 1)),
										MCXT_ALLOC_HUGE | MCXT_ALLOC_ZERO);
	cache->blocks = blocks;
	cache->used = sizeof(CpCachedBlock *) * (Size) cache->n_blocks;
	cache->reserved = cache->used;
	cache->slab = NULL;
	cache->slab_free = 0;
	cache->full = false;
	cache->n_cached = 0;
	cache->hits = 0;
	cache->prefilled = 0;
}

bool
cp_block_cache_has(const CpBlockCache *cache, uint32 block)
{
	return block < cache->n_blocks && cache->blocks[block] != NULL;
}

/*
 * What a read and a borrow both append after the rows: the labels, each
 * row's block for GraB, and the count.
 */
static int64
append_labels(const CpCachedBlock *cb, uint32 block, CpBuffer *dst)
{
	int64		at = dst->n_rows;
	int64		n = cb->n_rows;

	memcpy(dst->labels + at, cb->labels, sizeof(double) * n);
	if (dst->with_blocks)
		for (int64 i = 0; i < n; i++)
			dst->row_blocks[at + i] = block;
	dst->n_rows = at + n;
	return n;
}

/*
 * Append the cached rows of block to dst (the same layout they were taken
 * from).  Returns the number of rows.
 */
int64
cp_block_cache_read(CpBlockCache *cache, uint32 block, CpBuffer *dst)
{
	CpCachedBlock *cb = cache->blocks[block];
	int64		at = dst->n_rows;
	int64		n = cb->n_rows;

	cache->hits++;
	if (n == 0)
		return 0;
	if (dst->sparse)
	{
		int64		nnz = dst->nnz;

		cp_buffer_reserve(dst, at + n, nnz + cb->nnz);
		memcpy(dst->values + nnz, cb->values, sizeof(double) * cb->nnz);
		memcpy(dst->indices + nnz, cb->indices, sizeof(int32) * cb->nnz);
		for (int64 i = 0; i < n; i++)
		{
			nnz += cb->lengths[i];
			dst->offsets[at + i + 1] = nnz;
		}
		dst->nnz = nnz;
	}
	else
	{
		int			d = cb->n_features;

		dst->n_features = d;
		cp_buffer_reserve(dst, at + n, (at + n) * d);
		memcpy(dst->values + at * d, cb->values, sizeof(double) * d * n);
	}
	return append_labels(cb, block, dst);
}

/*
 * The held-out rows the first pass kept with block (cp_block_cache_has
 * must be true): returns how many held-out rows it met (0 for a block
 * cached by an epoch); *rows of them were kept, at *labels and *values
 * (rows of *n_features doubles).
 */
int64
cp_block_cache_held(const CpBlockCache *cache, uint32 block, int64 *rows,
					int *n_features, const double **labels, const double **values)
{
	const CpCachedBlock *cb = cache->blocks[block];

	*rows = cb->held_rows;
	*n_features = cb->n_features;
	*labels = cb->held_labels;
	*values = cb->held_values;
	return cb->held_seen;
}

/* The rows cached for block (cp_block_cache_has must be true). */
int64
cp_block_cache_rows(const CpBlockCache *cache, uint32 block)
{
	return cache->blocks[block]->n_rows;
}

/*
 * Append block's cached rows to dst without copying them: dst (dense, made
 * ready by cp_buffer_reserve_borrowed for all the rows it will take)
 * points at them, and only the labels are copied.  The cache outlives
 * every buffer (it goes with the query), and nothing changes a cached
 * block once a buffer may borrow it (cp_block_cache_map_dense runs before
 * the first epoch), so the rows stay valid while the buffer is trained,
 * on whichever thread.  A later epoch thus costs no copy of its rows: the
 * rows in storage order are trained where they lie, and shuffled ones are
 * gathered from here (core/linear_model.c) instead of from a copy.
 * Returns the number of rows.
 */
int64
cp_block_cache_borrow(CpBlockCache *cache, uint32 block, CpBuffer *dst)
{
	CpCachedBlock *cb = cache->blocks[block];
	int64		at = dst->n_rows;
	int64		n = cb->n_rows;
	int			d = cb->n_features;
	const double **rows = dst->row_ptrs + at;

	Assert(!dst->sparse && dst->row_ptrs != NULL && at + n <= dst->cap_rows);
	cache->hits++;
	dst->n_features = d;
	for (int64 i = 0; i < n; i++)
		rows[i] = cb->values + i * d;
	return append_labels(cb, block, dst);
}

/*
 * Apply fn to every cached dense row, in place: for the first pass
 * (preprocess_pass.c), which caches rows before the transform they are
 * trained with is known.  Before any buffer borrows the rows.
 */
void
cp_block_cache_map_dense(CpBlockCache *cache,
						 void (*fn) (double *row, const void *arg), const void *arg)
{
	for (uint32 b = 0; b < cache->n_blocks; b++)
	{
		CpCachedBlock *cb = cache->blocks[b];

		if (cb == NULL)
			continue;
		Assert(cb->indices == NULL);
		for (int64 i = 0; i < cb->n_rows; i++)
			fn(cb->values + i * cb->n_features, arg);
		for (int64 i = 0; i < cb->held_rows; i++)
			fn(cb->held_values + i * cb->n_features, arg);
		if ((b % 1024) == 0)
			CHECK_FOR_INTERRUPTS();
	}
}

/*
 * Keep the rows src[first_row..] (block's rows, just converted) if they fit
 * in the budget.  Once a block does not fit, no more are added: the table's
 * blocks are of similar sizes, and the first epoch has visited them all.
 */
void
cp_block_cache_add(CpBlockCache *cache, uint32 block, const CpBuffer *src,
				   int64 first_row)
{
	cp_block_cache_add_held(cache, block, src, first_row, NULL, 0);
}

/*
 * cp_block_cache_add, with the block's held-out rows (held: dense rows of
 * the same width, NULL for none) and the number of held-out rows met
 * (held_seen, the rows skipped for NULLs included): for the first pass,
 * which reads the held-out rows of the blocks it caches once, so that
 * epoch 1 need not read those blocks again.  Both are kept, or neither.
 */
void
cp_block_cache_add_held(CpBlockCache *cache, uint32 block, const CpBuffer *src,
						int64 first_row, const CpBuffer *held, int64 held_seen)
{
	int64		n = src->n_rows - first_row;
	int64		nnz;
	int64		held_n = held != NULL ? held->n_rows : 0;
	Size		bytes;
	Size		need;
	CpCachedBlock *cb;

	if (cache->full || block >= cache->n_blocks || cache->blocks[block] != NULL)
		return;
	nnz = src->sparse ? src->nnz - src->offsets[first_row] : n * (int64) src->n_features;
	/* labels and values, and a sparse block's indices and row lengths */
	bytes = add_size(sizeof(CpCachedBlock), mul_size(sizeof(double), add_size(n, nnz)));
	if (src->sparse)
		bytes = add_size(bytes, mul_size(sizeof(int32), add_size(nnz, n)));
	Assert(held_n == 0 || (!src->sparse && held->n_features == src->n_features));
	bytes = add_size(bytes, mul_size(sizeof(double),
									 mul_size((Size) held_n, (Size) (1 + src->n_features))));
	if (cache->used > cache->budget || bytes > cache->budget - cache->used)
	{
		cache->full = true;
		return;
	}
	/* the same arrays, each on cache lines of its own (bytes is in budget) */
	need = CACHE_ALIGNED(sizeof(double) * Max(n, 1)) + CACHE_ALIGNED(sizeof(double) * Max(nnz, 1));
	if (src->sparse)
		need += CACHE_ALIGNED(sizeof(int32) * Max(nnz, 1)) + CACHE_ALIGNED(sizeof(int32) * Max(n, 1));
	if (held_n > 0)
		need += CACHE_ALIGNED(sizeof(double) * held_n) +
			CACHE_ALIGNED(sizeof(double) * held_n * src->n_features);
	if (!cache_reserve(cache, need))
	{
		cache->full = true;
		return;
	}

	cb = MemoryContextAlloc(cache->cxt, sizeof(CpCachedBlock));
	cb->n_rows = n;
	cb->n_features = src->n_features;
	cb->nnz = nnz;
	cb->labels = cache_alloc(cache, sizeof(double) * n);
	memcpy(cb->labels, src->labels + first_row, sizeof(double) * n);
	cb->values = cache_alloc(cache, sizeof(double) * nnz);
	cb->indices = NULL;
	cb->lengths = NULL;
	cb->held_seen = held_seen;
	cb->held_rows = held_n;
	cb->held_labels = NULL;
	cb->held_values = NULL;
	if (held_n > 0)
	{
		Size		vals = mul_size(sizeof(double),
									mul_size((Size) held_n, (Size) src->n_features));

		cb->held_labels = cache_alloc(cache, sizeof(double) * held_n);
		memcpy(cb->held_labels, held->labels, sizeof(double) * held_n);
		cb->held_values = cache_alloc(cache, vals);
		memcpy(cb->held_values, held->values, vals);
	}
	if (src->sparse)
	{
		int64		start = src->offsets[first_row];

		memcpy(cb->values, src->values + start, sizeof(double) * nnz);
		cb->indices = cache_alloc(cache, sizeof(int32) * nnz);
		memcpy(cb->indices, src->indices + start, sizeof(int32) * nnz);
		cb->lengths = cache_alloc(cache, sizeof(int32) * n);
		for (int64 i = 0; i < n; i++)
			cb->lengths[i] = (int32) (src->offsets[first_row + i + 1] -
									  src->offsets[first_row + i]);
	}
	else
	{
		/* rows just read from the heap are in src's own array */
		Assert(src->row_ptrs == NULL);
		memcpy(cb->values, src->values + first_row * (int64) src->n_features,
			   sizeof(double) * nnz);
	}
	cache->blocks[block] = cb;
	cache->used += bytes;
	cache->n_cached++;
}
