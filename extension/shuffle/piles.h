/*-------------------------------------------------------------------------
 *
 * piles.h
 *	  The two-pass external shuffle: piles of temporary files.  One module
 *	  for the full-shuffle strategies (shuffle_once.c, epoch_shuffle.c) and
 *	  corgipile.shuffle_table() (shuffle_table.c).
 *
 * Pass 1 appends each record to one of M temporary files ("piles") chosen
 * uniformly at random; pass 2 loads one pile at a time and shuffles it in
 * memory.  A uniform choice of pile followed by a uniform shuffle within
 * it gives a uniform permutation of the whole input
 * (papers/two-pass-shuffle.txt).  The files are BufFiles: they live in the
 * server's temporary file space and go away at the end of the transaction,
 * however it ends.
 *
 *-------------------------------------------------------------------------
 */
#ifndef CORGIPILE_SHUFFLE_PILES_H
#define CORGIPILE_SHUFFLE_PILES_H

#include "postgres.h"

#include "common/pg_prng.h"
#include "storage/buffile.h"

#include "core/buffer.h"

/* piles of the two-pass shuffles: at most this many temporary files */
#define CP_MAX_PILES 1024

/* piles are sized to fill this share of the memory budget, leaving room for chance */
#define CP_PILE_FILL 0.8

typedef struct CpPileSet
{
	int			n_piles;
	BufFile   **files;			/* NULL once closed */
	int64	   *bytes;			/* bytes written to each pile */
} CpPileSet;

extern int	cp_piles_count(double input_bytes, double budget_bytes);
extern void cp_piles_open(CpPileSet *ps, int n_piles, MemoryContext cxt);
extern int	cp_piles_choose(const CpPileSet *ps, pg_prng_state *rng);
extern void cp_piles_write(CpPileSet *ps, int k, const void *p, size_t n);
extern void cp_piles_rewind(CpPileSet *ps);
extern void cp_piles_close_one(CpPileSet *ps, int k);
extern void cp_piles_close(CpPileSet *ps);

/* Rows of the compact layout, in a pile or any BufFile. */
extern void cp_piles_write_row(BufFile *f, const CpBuffer *b, int64 row);
extern bool cp_piles_read_row(BufFile *f, CpBuffer *b);
extern void cp_piles_rewind_file(BufFile *f);

#endif							/* CORGIPILE_SHUFFLE_PILES_H */
