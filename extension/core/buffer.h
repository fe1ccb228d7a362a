/*-------------------------------------------------------------------------
 *
 * buffer.h
 *	  The compact in-memory layout that TupleShuffle fills and SGD trains on.
 *
 * A buffer holds the deformed rows of a group of whole blocks as plain
 * arrays.  The main thread allocates and fills it; the helper thread only
 * reads the rows and writes the visiting order.  Nothing in here may call
 * into the server, so this header includes only c.h.
 *
 *-------------------------------------------------------------------------
 */
#ifndef CORGIPILE_BUFFER_H
#define CORGIPILE_BUFFER_H

#include "c.h"

typedef struct CpBuffer
{
	int64		n_rows;			/* rows held */
	int64		cap_rows;		/* rows allocated */
	int			n_features;		/* dense stride; model dimension */
	bool		sparse;			/* CSR layout instead of dense rows */

	double	   *labels;			/* n_rows labels, already mapped to the
								 * model's internal encoding */
	double	   *values;			/* dense: n_rows * n_features, sparse: nnz */

	/*
	 * Dense rows borrowed from memory that outlives the buffer (the block
	 * cache): row i is row_ptrs[i], and values is unused.  NULL when the
	 * rows are in values.  Read dense rows through cp_buffer_dense_row.
	 */
	const double **row_ptrs;
	const double **row_ptr_store;	/* cap_rows entries, once allocated */
	int32	   *indices;		/* sparse only: nnz feature indices */
	int64	   *offsets;		/* sparse only: n_rows + 1 row starts */
	int64		nnz;			/* sparse only: values used */
	int64		cap_nnz;		/* sparse only: values allocated */

	/*
	 * The most bytes the arrays may take (0: no limit), and what to say
	 * when a row does not fit: the buffer's name and the setting to raise
	 * (cp_buffer_set_budget).  Checked by cp_buffer_reserve, on the main
	 * thread.
	 */
	Size		budget;
	const char *budget_what;
	const char *budget_hint;

	uint32	   *order;			/* visiting order: a permutation of rows */
	bool		order_is_identity;	/* order[i] == i: rows already in order */
	void	   *memcxt;			/* owner of the arrays; opaque to the core */

	/* with_ids: where each row came from, to inspect the order */
	bool		with_ids;
	uint64	   *row_tids;		/* ctid packed as block << 16 | offset */
	int64	   *row_keys;		/* the table's id column, if it has one */

	/*
	 * with_blocks (shuffle => 'grab'): the block each row was read from, so
	 * that SGD can add the row's gradient to its block's sum.  Per-buffer
	 * data, not per-tuple state that outlives the buffer.
	 */
	bool		with_blocks;
	uint32	   *row_blocks;
} CpBuffer;

/* Pointer to the dense feature row i. */
static inline const double *
cp_buffer_dense_row(const CpBuffer *buf, int64 i)
{
	if (buf->row_ptrs != NULL)
		return buf->row_ptrs[i];
	return buf->values + i * (int64) buf->n_features;
}

#endif							/* CORGIPILE_BUFFER_H */
