/*-------------------------------------------------------------------------
 *
 * block_cache.h
 *	  The rows of whole blocks, as TupleShuffle converted them in the first
 *	  epoch, kept in memory for the epochs after it.
 *
 *-------------------------------------------------------------------------
 */
#ifndef CORGIPILE_BLOCK_CACHE_H
#define CORGIPILE_BLOCK_CACHE_H

#include "postgres.h"

#include "core/buffer.h"

/* corgipile.block_cache_size, in kB: 0 turns the cache off */
extern int	cp_block_cache_kb;

typedef struct CpCachedBlock CpCachedBlock;

typedef struct CpBlockCache
{
	MemoryContext cxt;			/* holds every cached block */
	uint32		n_blocks;
	CpCachedBlock **blocks;		/* by block number; NULL: not cached */
	Size		budget;			/* bytes */
	Size		used;			/* bytes of the blocks held */
	char	   *slab;			/* free space of the newest slab */
	Size		slab_free;		/* bytes at slab */
	Size		reserved;		/* bytes of every slab taken, <= budget */
	bool		full;			/* a block did not fit: stop adding */
	int64		n_cached;		/* blocks held */
	int64		hits;			/* blocks served from memory */
	int64		prefilled;		/* blocks the first pass cached, which
								 * epoch 1 read from memory (counted in
								 * hits) */
} CpBlockCache;

extern CpBlockCache *cp_block_cache_create(MemoryContext parent, uint32 n_blocks,
										   Size budget);
extern void cp_block_cache_reset(CpBlockCache *cache);
extern bool cp_block_cache_has(const CpBlockCache *cache, uint32 block);
extern int64 cp_block_cache_read(CpBlockCache *cache, uint32 block, CpBuffer *dst);
extern int64 cp_block_cache_rows(const CpBlockCache *cache, uint32 block);
extern int64 cp_block_cache_borrow(CpBlockCache *cache, uint32 block, CpBuffer *dst);
extern void cp_block_cache_map_dense(CpBlockCache *cache,
									 void (*fn) (double *row, const void *arg),
									 const void *arg);
extern void cp_block_cache_add(CpBlockCache *cache, uint32 block, const CpBuffer *src,
							   int64 first_row);
extern void cp_block_cache_add_held(CpBlockCache *cache, uint32 block,
									const CpBuffer *src, int64 first_row,
									const CpBuffer *held, int64 held_seen);
extern int64 cp_block_cache_held(const CpBlockCache *cache, uint32 block, int64 *rows,
								 int *n_features, const double **labels,
								 const double **values);

#endif							/* CORGIPILE_BLOCK_CACHE_H */
