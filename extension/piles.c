/*-------------------------------------------------------------------------
 *
 * piles.c
 *	  The two-pass external shuffle (shuffle_once and epoch_shuffle).
 *
 * Pass 1 reads the table sequentially and appends each row, already in the
 * compact layout, to one of M temporary files ("piles") chosen uniformly at
 * random.  Pass 2 loads one pile at a time and shuffles it in memory.  A
 * uniform choice of pile followed by a uniform shuffle within it gives a
 * uniform permutation of the whole table (papers/two-pass-shuffle.txt).
 * M is chosen so that a pile is expected to fill 80% of buffer_size, the
 * same memory budget as CorgiPile's buffer; a pile that comes out larger is
 * still loaded whole.  M is capped at CP_MAX_PILES (1024) temporary files,
 * whatever the buffer: a tiny buffer on a large table would otherwise open
 * one file per heap page.  Past the cap a pile is larger than the buffer:
 * about n_rows / 1024 rows, and pass 2 holds one pile in memory in the
 * compact layout (8 bytes per label and per dense feature, 12 per sparse
 * non-zero), twice for shuffle_once, which copies it into the output buffer.
 *
 * epoch_shuffle runs both passes every epoch; pass 2 is lazy: a pile is
 * shuffled (on the training thread) as it is trained on.
 *
 * shuffle_once runs both passes once, in the first epoch, writing the
 * shuffled rows to one more temporary file in the compact layout (cheaper
 * to write and to read again than a table); every epoch then reads that
 * copy sequentially, so all epochs see the same order.
 *
 * The temporary files are BufFiles: they live in the server's temporary
 * file space and go away at the end of the transaction, however it ends.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <math.h>

#include "miscadmin.h"
#include "utils/memutils.h"

#include "core/shuffle.h"
#include "corgipile.h"
#include "tupleshuffle.h"

/* piles are sized to fill this share of the buffer, leaving room for chance */
#define CP_PILE_FILL 0.8

static void
write_bytes(BufFile *f, const void *p, size_t n)
{
	BufFileWrite(f, (void *) p, n);
}

static void
write_row(const CpBuffer *b, int64 row, BufFile *f)
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
static bool
read_row(BufFile *f, CpBuffer *b)
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

static void
close_piles(CpPiles *piles)
{
	if (piles->files == NULL)
		return;
	for (int k = 0; k < piles->n_piles; k++)
		if (piles->files[k] != NULL)
			BufFileClose(piles->files[k]);
	pfree(piles->files);
	piles->files = NULL;
	piles->next_pile = 0;
}

/* Pass 1: scatter every row of the table over the piles. */
static void
scatter(TupleShuffleState *ts)
{
	CpPiles    *piles = &ts->piles;
	CpSizing   *sz = &ts->child->sizing;
	double		buffer_pages = (double) sz->blocks_per_buffer * sz->pages_per_block;
	MemoryContext old;

	piles->n_piles = (int) Min(Max(1.0, ceil(sz->n_pages / (buffer_pages * CP_PILE_FILL))),
							   (double) CP_MAX_PILES);
	old = MemoryContextSwitchTo(ts->buf_cxt);
	piles->files = palloc0(sizeof(BufFile *) * piles->n_piles);
	for (int k = 0; k < piles->n_piles; k++)
		piles->files[k] = BufFileCreateTemp(false);
	MemoryContextSwitchTo(old);
	piles->next_pile = 0;
	piles->rows = 0;

	for (;;)
	{
		cp_buffer_reset(&ts->staging, ts->layout.n_features);
		if (!tuple_shuffle_read_group(ts, &ts->staging))
			break;
		for (int64 r = 0; r < ts->staging.n_rows; r++)
		{
			int			k = (int) pg_prng_uint64_range(&piles->rng, 0, piles->n_piles - 1);

			write_row(&ts->staging, r, piles->files[k]);
			if ((r & 1023) == 1023)
				CHECK_FOR_INTERRUPTS();
		}
		piles->rows += ts->staging.n_rows;
	}
	for (int k = 0; k < piles->n_piles; k++)
		if (BufFileSeek(piles->files[k], 0, 0, SEEK_SET) != 0)
			ereport(ERROR,
					(errcode_for_file_access(),
					 errmsg("corgipile: could not rewind a temporary shuffle file")));
}

static void
load_pile(TupleShuffleState *ts, int k, CpBuffer *into)
{
	BufFile    *f = ts->piles.files[k];

	int64		n = 0;

	into->n_features = ts->layout.n_features;
	while (read_row(f, into))
	{
		/* a pile can be large (CP_MAX_PILES): stay cancellable */
		if ((++n & 1023) == 0)
			CHECK_FOR_INTERRUPTS();
	}
	CHECK_FOR_INTERRUPTS();
}

/* shuffle_once, later epochs: the next buffer's worth of the shuffled copy. */
static bool
read_stream(TupleShuffleState *ts, CpBuffer *out)
{
	CpPiles    *piles = &ts->piles;
	int64		chunk = Max(1, piles->rows / piles->n_piles);

	out->n_features = ts->layout.n_features;
	while (out->n_rows < chunk && read_row(piles->stream, out))
	{
		if ((out->n_rows & 1023) == 0)
			CHECK_FOR_INTERRUPTS();
	}
	if (out->n_rows == 0)
	{
		ts->drained = true;
		return false;
	}
	return true;
}

bool
piles_fill(TupleShuffleState *ts, CpBuffer *out)
{
	CpPiles    *piles = &ts->piles;

	if (ts->drained)
		return false;
	if (ts->shuffle == CP_SHUFFLE_SHUFFLE_ONCE && piles->stream_done)
		return read_stream(ts, out);

	if (piles->files == NULL)
		scatter(ts);
	if (piles->next_pile >= piles->n_piles)
	{
		ts->drained = true;
		close_piles(piles);
		if (ts->shuffle == CP_SHUFFLE_SHUFFLE_ONCE)
		{
			piles->stream_done = true;
			if (BufFileSeek(piles->stream, 0, 0, SEEK_SET) != 0)
				ereport(ERROR,
						(errcode_for_file_access(),
						 errmsg("corgipile: could not rewind a temporary shuffle file")));
		}
		return false;
	}

	if (ts->shuffle == CP_SHUFFLE_EPOCH_SHUFFLE)
	{
		/* lazy pass 2: the training side permutes the pile */
		load_pile(ts, piles->next_pile++, out);
		return true;
	}

	/* shuffle_once, first epoch: shuffle the pile here and keep the copy */
	if (piles->stream == NULL)
	{
		MemoryContext old = MemoryContextSwitchTo(ts->buf_cxt);

		piles->stream = BufFileCreateTemp(false);
		MemoryContextSwitchTo(old);
	}
	cp_buffer_reset(&ts->staging, ts->layout.n_features);
	load_pile(ts, piles->next_pile++, &ts->staging);
	cp_order_identity(ts->staging.order, ts->staging.n_rows);
	cp_shuffle_uint32(ts->staging.order, ts->staging.n_rows, &ts->rng);
	for (int64 i = 0; i < ts->staging.n_rows; i++)
	{
		int64		row = ts->staging.order[i];

		cp_buffer_append_row(out, &ts->staging, row);
		write_row(&ts->staging, row, piles->stream);
		if ((i & 1023) == 1023)
			CHECK_FOR_INTERRUPTS();
	}
	return true;
}

void
piles_rescan(TupleShuffleState *ts)
{
	CpPiles    *piles = &ts->piles;

	if (ts->shuffle == CP_SHUFFLE_SHUFFLE_ONCE && piles->stream_done)
	{
		if (BufFileSeek(piles->stream, 0, 0, SEEK_SET) != 0)
			ereport(ERROR,
					(errcode_for_file_access(),
					 errmsg("corgipile: could not rewind a temporary shuffle file")));
		return;
	}
	/* epoch_shuffle (or a copy never finished): shuffle again from scratch */
	close_piles(piles);
	if (piles->stream != NULL)
	{
		BufFileClose(piles->stream);
		piles->stream = NULL;
	}
}

void
piles_end(TupleShuffleState *ts)
{
	close_piles(&ts->piles);
	if (ts->piles.stream != NULL)
		BufFileClose(ts->piles.stream);
	ts->piles.stream = NULL;
}
