/*-------------------------------------------------------------------------
 *
 * shuffles.c
 *	  The strategies' names and flags, from the one list (params/shuffles.h).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "lib/stringinfo.h"

#include "params/shuffles.h"

#define CP_SHUFFLE_INFO(ID, name, tuple_order, flags) \
	[CP_SHUFFLE_##ID] = {#name, tuple_order, flags},
const CpShuffleInfo cp_shuffles[CP_NUM_SHUFFLES] = {
	CP_SHUFFLES(CP_SHUFFLE_INFO)
};
#undef CP_SHUFFLE_INFO

/* The strategy called name (case-insensitive); false if there is none. */
bool
cp_shuffle_lookup(const char *name, CpShuffle *id)
{
	for (int i = 0; i < CP_NUM_SHUFFLES; i++)
	{
		if (pg_strcasecmp(name, cp_shuffles[i].name) == 0)
		{
			*id = (CpShuffle) i;
			return true;
		}
	}
	return false;
}

const char *
cp_shuffle_name(CpShuffle shuffle)
{
	Assert((int) shuffle >= 0 && (int) shuffle < CP_NUM_SHUFFLES);
	return cp_shuffles[shuffle].name;
}

/* Whether the strategy has flag (CP_SHUFFLE_*). */
bool
cp_shuffle_has(CpShuffle shuffle, uint32 flag)
{
	Assert((int) shuffle >= 0 && (int) shuffle < CP_NUM_SHUFFLES);
	return (cp_shuffles[shuffle].flags & flag) == flag;
}

/*
 * The names of the strategies with flag (0: all of them), in the list's
 * order, for error hints: "a, b and c", or "'a', 'b' and 'c'" when quoted.
 */
char *
cp_shuffle_names(uint32 flag, bool quoted, const char *last_sep)
{
	StringInfoData buf;
	int			n = 0;
	int			count = 0;
	const char *q = quoted ? "'" : "";

	for (int i = 0; i < CP_NUM_SHUFFLES; i++)
		if ((cp_shuffles[i].flags & flag) == flag)
			count++;
	initStringInfo(&buf);
	for (int i = 0; i < CP_NUM_SHUFFLES; i++)
	{
		if ((cp_shuffles[i].flags & flag) != flag)
			continue;
		appendStringInfo(&buf, "%s%s%s%s",
						 n == 0 ? "" : (n == count - 1 ? last_sep : ", "),
						 q, cp_shuffles[i].name, q);
		n++;
	}
	return buf.data;
}
