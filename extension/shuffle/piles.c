/*-------------------------------------------------------------------------
 *
 * piles.c
 *	  The piles of the two-pass external shuffle (see piles.h), and rows of
 *	  the compact layout written to and read from temporary files.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <math.h>

#include "miscadmin.h"
#include "utils/memutils.h"

#include "io/buffer.h"
#include "shuffle/piles.h"

/*
 * How many piles for input_bytes of input, each expected to fill
 * CP_PILE_FILL of budget_bytes.  Capped at CP_MAX_PILES temporary files,
 * whatever the budget: a tiny budget on a large table would otherwise open
 * one file per heap page.  Past the cap a pile is larger than the budget,
 * and is still loaded whole.
 */
int
cp_piles_count(double input_bytes, double budget_bytes)
{
	return (int) Min(Max(1.0, ceil(input_bytes / (budget_bytes * CP_PILE_FILL))),
					 (double) CP_MAX_PILES);
}

void
cp_piles_open(CpPileSet *ps, int n_piles, MemoryContext cxt)
{
	MemoryContext old = MemoryContextSwitchTo(cxt);

	ps->n_piles = n_piles;
	ps->files = palloc0(sizeof(BufFile *) * n_piles);
	ps->bytes = palloc0(sizeof(int64) * n_piles);
	/*
	 * Creating a temporary file costs a few milliseconds on a busy disk, and
	 * epoch_shuffle creates up to CP_MAX_PILES of them every epoch: look for
	 * a cancel between files (an error here leaves the files created so far
	 * to the resource owner, which deletes them).
	 */
	for (int k = 0; k < n_piles; k++)
	{
		CHECK_FOR_INTERRUPTS();
		ps->files[k] = BufFileCreateTemp(false);
	}
	MemoryContextSwitchTo(old);
}

/* A pile drawn uniformly. */
int
cp_piles_choose(const CpPileSet *ps, pg_prng_state *rng)
{
	return (int) pg_prng_uint64_range(rng, 0, ps->n_piles - 1);
}

void
cp_piles_write(CpPileSet *ps, int k, const void *p, size_t n)
{
	BufFileWrite(ps->files[k], (void *) p, n);
	ps->bytes[k] += n;
}

void
cp_piles_rewind_file(BufFile *f)
{
	if (BufFileSeek(f, 0, 0, SEEK_SET) != 0)
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("corgipile: could not rewind a temporary shuffle file")));
}

/* End of pass 1: every pile back to its start. */
void
cp_piles_rewind(CpPileSet *ps)
{
	for (int k = 0; k < ps->n_piles; k++)
	{
		CHECK_FOR_INTERRUPTS();
		cp_piles_rewind_file(ps->files[k]);
	}
}

void
cp_piles_close_one(CpPileSet *ps, int k)
{
	if (ps->files != NULL && ps->files[k] != NULL)
	{
		BufFileClose(ps->files[k]);
		ps->files[k] = NULL;
	}
}

void
cp_piles_close(CpPileSet *ps)
{
	if (ps->files == NULL)
		return;
	/* deleting the files is as slow as creating them: stay cancellable */
	for (int k = 0; k < ps->n_piles; k++)
	{
		CHECK_FOR_INTERRUPTS();
		cp_piles_close_one(ps, k);
	}
	pfree(ps->files);
	pfree(ps->bytes);
	ps->files = NULL;
	ps->bytes = NULL;
}

static void
write_bytes(BufFile *f, const void *p, size_t n)
{
	BufFileWrite(f, (void *) p, n);
}

/* Row row of b, in the compact layout. */
void
cp_piles_write_row(BufFile *f, const CpBuffer *b, int64 row)
{
	write_bytes(f, &b->labels[row], sizeof(double));
	if (b->sparse)
	{
		int64		start = b->offsets[row];
		int32		nnz = (int32) (b->offsets[row + 1] - start);

		write_bytes(f, &nnz, sizeof(int32));
		write_bytes(f, b->values + start, sizeof(double) * nnz);
		write_bytes(f, b->indices + start, sizeof(int32) * nnz);
	}
	else
		write_bytes(f, cp_buffer_dense_row(b, row), sizeof(double) * b->n_features);
	if (b->with_ids)
	{
		write_bytes(f, &b->row_tids[row], sizeof(uint64));
		write_bytes(f, &b->row_keys[row], sizeof(int64));
	}
}

static void
read_bytes(BufFile *f, void *p, size_t n)
{
	if (BufFileRead(f, p, n) != n)
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("corgipile: could not read from a temporary shuffle file")));
}

/* Append the next row of f to b; false at the end of the file. */
bool
cp_piles_read_row(BufFile *f, CpBuffer *b)
{
	double		label;
	int64		at = b->n_rows;

	if (BufFileRead(f, &label, sizeof(double)) == 0)
		return false;
	if (b->sparse)
	{
		int32		nnz;

		read_bytes(f, &nnz, sizeof(int32));
		cp_buffer_reserve(b, at + 1, b->nnz + nnz);
		read_bytes(f, b->values + b->nnz, sizeof(double) * nnz);
		read_bytes(f, b->indices + b->nnz, sizeof(int32) * nnz);
		b->nnz += nnz;
		b->offsets[at + 1] = b->nnz;
	}
	else
	{
		cp_buffer_reserve(b, at + 1, (at + 1) * b->n_features);
		read_bytes(f, b->values + at * b->n_features, sizeof(double) * b->n_features);
	}
	if (b->with_ids)
	{
		read_bytes(f, &b->row_tids[at], sizeof(uint64));
		read_bytes(f, &b->row_keys[at], sizeof(int64));
	}
	b->labels[at] = label;
	b->n_rows = at + 1;
	return true;
}
