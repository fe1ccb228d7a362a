/*-------------------------------------------------------------------------
 *
 * grab.h
 *	  Block-level GraB and CD-GraB: per-block gradient sums, the balancing
 *	  walk that turns them into the next epoch's block order, PairBalance
 *	  across parallel workers, and the compact stored form of an order.
 *
 * Plain C over caller-prepared memory, like the rest of core/: the SGD
 * operator (or its helper thread) adds gradients into block sums, and the
 * strategy runs the walk at the end of the epoch.  Nothing here calls into
 * the server or allocates on its own after initialisation; see docs/grab.md.
 *
 *-------------------------------------------------------------------------
 */
#ifndef CORGIPILE_GRAB_H
#define CORGIPILE_GRAB_H

#include "c.h"

#include "alloc.h"

/*
 * Random projection of big gradients: each input coordinate is sent to
 * CP_GRAB_PROJ_NNZ output coordinates, one in each of CP_GRAB_PROJ_NNZ equal
 * segments, with a random sign and weight 1/sqrt(CP_GRAB_PROJ_NNZ) (the
 * "block" sparse Johnson-Lindenstrauss transform of Kane and Nelson).  The
 * rows and signs are a hash of (seed, coordinate, segment), so the matrix is
 * never stored and a sparse gradient costs CP_GRAB_PROJ_NNZ additions per
 * nonzero, not one per output dimension as a dense Gaussian matrix would.
 *
 * One segment (CountSketch: each coordinate to one output, random sign):
 * with 4 a grab epoch of Fashion-MNIST softmax took 2-2.7x corgipile's, with
 * 1 about 2x, and the unit test's inner products stay within 15% at
 * 3,000 -> 512 (docs/grab.md).
 */
#define CP_GRAB_PROJ_NNZ 1
/* a projection narrower than this orders blocks little better than random */
#define CP_GRAB_MIN_PROJ_DIM 64

/*
 * ... and a wider one costs more than it gives: an add costs
 * CP_GRAB_PROJ_NNZ additions per gradient coordinate whatever the width, but
 * each block's sum update, the walk and the reset at each epoch's end cost
 * n_blocks x dim, and wide sums spread the adds over more cache.  Measured
 * on Fashion-MNIST softmax (7,850 weights, 1,199 blocks, sums from the
 * projected weights): 1,024 dimensions, a grab epoch took 1.15x corgipile's;
 * 512, 1.10x, with a final gap of 0.967 x corgipile's against 0.958 at
 * 1,024 (docs/grab.md).  Projected to 6,995 it had taken 2.4x.
 */
#define CP_GRAB_MAX_PROJ_DIM 512
/* the projection's (row, sign) table is kept when it takes at most this */
#define CP_GRAB_PROJ_MAP_MAX_BYTES ((Size) 16 * 1024 * 1024)

/* Per-epoch accumulator: one dim-vector and one tuple count per block. */
typedef struct CpGrabAcc
{
	int64		n_blocks;
	int32		n_weights;		/* length of the gradients that are added */
	int32		dim;			/* length of a stored sum */
	int32		proj_nnz;		/* 0: sums are exact; else projected */
	uint64		proj_seed;
	double		proj_scale;		/* 1 / sqrt(proj_nnz) */
	double	   *sums;			/* n_blocks * dim, block-major */
	int64	   *counts;			/* n_blocks tuples */

	/*
	 * Projected only: the hash's output for every (coordinate, segment), as
	 * (row << 1) | sign, n_weights * proj_nnz entries; NULL when that would
	 * exceed CP_GRAB_PROJ_MAP_MAX_BYTES (the hash is then computed per add).
	 */
	int32	   *proj_map;
	/*
	 * One segment with the table: each coordinate's sign as +-1.0
	 * (n_weights), for the projection of the weights, a multiply-add a
	 * weight instead of unpacking the table's sign bit; NULL above
	 * CP_GRAB_PROJ_MAP_MAX_BYTES.
	 */
	double	   *proj_sign;
} CpGrabAcc;

/* Why a stored order was refused (cp_grab_deserialize). */
typedef enum CpGrabLoadStatus
{
	CP_GRAB_LOAD_OK,
	CP_GRAB_LOAD_TRUNCATED,		/* length does not match the header */
	CP_GRAB_LOAD_BAD_MAGIC,		/* not a stored GraB order */
	CP_GRAB_LOAD_BAD_VERSION,	/* written by a newer format */
	CP_GRAB_LOAD_NOT_PERMUTATION,	/* an entry out of range or repeated */
	CP_GRAB_LOAD_BAD_SIGNS		/* unused sign bits set */
} CpGrabLoadStatus;

#define CP_GRAB_FORMAT_VERSION 1
#define CP_GRAB_HEADER_BYTES 12

/* sizing */
extern bool cp_grab_acc_bytes(int64 n_blocks, int32 dim, Size *bytes);
extern int32 cp_grab_choose_dim(int64 n_blocks, int32 n_weights, Size budget);

/* accumulation */
extern bool cp_grab_acc_init(CpGrabAcc *acc, int64 n_blocks, int32 n_weights,
							 int32 dim, uint64 proj_seed, CpAllocZero alloc);
extern void cp_grab_acc_reset(CpGrabAcc *acc);
extern void cp_grab_add_dense(CpGrabAcc *acc, int64 block, int32 offset,
							  const double *x, int32 n, double scale);
extern void cp_grab_add_sparse(CpGrabAcc *acc, int64 block, int32 offset,
							   const int32 *indices, const double *values,
							   int32 nnz, double scale);
extern void cp_grab_add_step_delta(CpGrabAcc *acc, int64 block, int32 offset,
								   double *snap, const double *w, int32 n,
								   double shrink, double inv_lr);
extern void cp_grab_project_weights(const CpGrabAcc *acc, int32 offset,
									const double *w, int32 n, double *out);
extern void cp_grab_add_projected_delta(CpGrabAcc *acc, int64 block,
										const double *prev, const double *cur,
										double shrink, double inv_lr);

/* One tuple (or n) of this block contributed to its sum. */
static inline void
cp_grab_count(CpGrabAcc *acc, int64 block, int64 n)
{
	acc->counts[block] += n;
}

/* ordering */
extern void cp_grab_reorder(const uint32 *visit, const int8 *signs, int64 n,
							uint32 *next);
extern void cp_grab_mean(const CpGrabAcc *acc, const uint32 *visit, int64 n,
						 double *mean);
extern void cp_grab_walk_with_mean(const CpGrabAcc *acc, const uint32 *visit,
								   int64 n, const double *mean, double *run,
								   int8 *signs, uint32 *next);
extern void cp_grab_walk(const CpGrabAcc *acc, const uint32 *visit, int64 n,
						 double *work, int8 *signs, uint32 *next);
extern void cp_grab_form_units(const uint32 *first, int64 n, int32 unit_blocks,
							   uint32 *unit_of);
extern bool cp_grab_walk_units(const CpGrabAcc *acc, const uint32 *visit,
							   int64 n_blocks, const uint32 *unit_of,
							   int64 n_units, uint32 *uvisit, uint32 *unext,
							   int8 *usigns, int8 *unit_sign, double *work,
							   int8 *signs, uint32 *next);
extern void cp_grab_pair_balance(const CpGrabAcc *acc, int32 n_workers,
								 const int64 *starts, const uint32 *visit,
								 double *work, int8 *signs, uint32 *next);
extern void cp_grab_walk_independent(const CpGrabAcc *acc, int32 n_workers,
									 const int64 *starts, const uint32 *visit,
									 double *work, int8 *signs, uint32 *next);
extern int	cp_grab_online_step(double *run, const double *sum, int64 count,
								const double *mean, int32 dim);

/* stored state */
extern bool cp_grab_serialized_bytes(uint32 n_blocks, Size *bytes);
extern void cp_grab_serialize(const uint32 *visit, const int8 *signs,
							  uint32 n_blocks, uint8 *out);
extern CpGrabLoadStatus cp_grab_stored_blocks(const uint8 *in, Size len,
											  uint32 *n_blocks);
extern CpGrabLoadStatus cp_grab_deserialize(const uint8 *in, Size len,
											uint32 *visit, int8 *signs,
											uint8 *seen);
extern uint32 cp_grab_adapt_order(const uint32 *order, uint32 old_n,
								  uint32 new_n, uint64 seed, uint32 *out);

#endif							/* CORGIPILE_GRAB_H */
