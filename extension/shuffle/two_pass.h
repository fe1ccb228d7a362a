/*-------------------------------------------------------------------------
 *
 * two_pass.h
 *	  What shuffle_once and epoch_shuffle share: the two-pass shuffle of the
 *	  table's rows, in the compact layout, over piles (piles.h).
 *
 * M piles are chosen so that a pile is expected to fill 80% of
 * buffer_size, the same memory budget as CorgiPile's buffer (capped at
 * CP_MAX_PILES: past the cap a pile is about n_rows / 1024 rows, and pass 2
 * holds one pile in memory in the compact layout, 8 bytes per label and per
 * dense feature, 12 per sparse non-zero; twice for shuffle_once, which
 * copies it into the output buffer).
 *
 *-------------------------------------------------------------------------
 */
#ifndef CORGIPILE_SHUFFLE_TWO_PASS_H
#define CORGIPILE_SHUFFLE_TWO_PASS_H

#include "shuffle/piles.h"
#include "shuffle/strategy.h"

typedef struct CpTwoPass
{
	const CpStrategyEnv *env;
	CpPileSet	piles;			/* pass 1 output; files NULL between epochs */
	int			next_pile;		/* pass 2: the next pile to load */
	int64		rows;			/* rows written in pass 1 */
	int			n_piles_used;	/* for EXPLAIN: piles of the last pass 1 */
	BufFile    *stream;			/* shuffle_once: the whole shuffled copy */
	bool		stream_done;	/* shuffle_once: the copy is complete */
	bool		drained;		/* the epoch has no more rows */
	CpBuffer	staging;		/* rows on their way to a pile */
	pg_prng_state rng;			/* pile choices */
} CpTwoPass;

extern void *cp_two_pass_begin(const CpStrategyEnv *env);
extern void cp_two_pass_seed(void *state, uint64 seed);
extern void cp_two_pass_scatter(CpTwoPass *tp);
extern void cp_two_pass_load_pile(CpTwoPass *tp, int k, CpBuffer *into);
extern void cp_two_pass_end(void *state);
extern void cp_two_pass_explain(void *state, ExplainState *es);

#endif							/* CORGIPILE_SHUFFLE_TWO_PASS_H */
