/*-------------------------------------------------------------------------
 *
 * shard_round.h
 *	  What the coordinator of a distributed training (dist_train.c) and a
 *	  shard's worker (shard_round.c) agree on.
 *
 * A round's input (bytea, pqformat): byte CP_ROUND_FORMAT, int32 global
 * epochs done, int32 local epochs, float8 l2, int32 n + n float8 weights,
 * int64 rows of the table and int32 n + n float8 weights to score (n 0:
 * none), int32 n + n bytes of the merged first pass (first round only,
 * else 0).  Its output: byte CP_ROUND_FORMAT, the CpStats of the weights
 * to score on the shard's share of the sample (all 0 when none), int32
 * epochs, per epoch the CpStats (a CpStats: int64 n, float8 loss_sum,
 * int64 n_correct, float8 sum_y, sum_y2, sse),
 * int32 n + n float8 weights (0: the shard has no rows), int64 snapshots
 * averaged, int32 n + n float8 their average, bytes seen -1, 0, 1, int64
 * rows skipped, of which with a NULL label, float8 CPU seconds (since the
 * last round; the first round's include shard_open's pass), float8 seconds
 * the round took on the worker.
 *
 *-------------------------------------------------------------------------
 */
#ifndef CORGIPILE_SHARD_ROUND_H
#define CORGIPILE_SHARD_ROUND_H

#define CP_ROUND_FORMAT 2

#endif							/* CORGIPILE_SHARD_ROUND_H */
