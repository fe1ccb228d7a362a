/*
 * Unit tests of model averaging (core/merge.c), run without a server:
 * make unittest.  Prints "N passed, N failed".
 */
#include "c.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "core/merge.h"

#include "unit_check.h"

static CpStats
rows(int64 n)
{
	CpStats		st;

	memset(&st, 0, sizeof(st));
	st.n = n;
	st.loss_sum = 0.5 * n;
	st.n_correct = n / 2;
	return st;
}

int
main(void)
{
	double		copies[3 * 2] = {1.0, 10.0, 3.0, 20.0, 100.0, 1000.0};
	CpStats		st[3];
	double		out[2] = {-7.0, -7.0};
	CpStats		total;

	/* weighted by rows: (1*1 + 3*3) / 4 and (1*10 + 3*20) / 4 */
	st[0] = rows(1);
	st[1] = rows(3);
	st[2] = rows(0);			/* trained on nothing: not counted */
	cp_merge_weighted(copies, st, 3, 2, out);
	CHECK(out[0] == 10.0 / 4.0, "weight 0 is %g", out[0]);
	CHECK(out[1] == 70.0 / 4.0, "weight 1 is %g", out[1]);

	/* equal rows: the plain mean */
	st[0] = rows(5);
	st[1] = rows(5);
	st[2] = rows(5);
	cp_merge_weighted(copies, st, 3, 2, out);
	CHECK(fabs(out[0] - 104.0 / 3.0) < 1e-12, "mean 0 is %g", out[0]);
	CHECK(fabs(out[1] - 1030.0 / 3.0) < 1e-12, "mean 1 is %g", out[1]);

	/* no rows at all: the starting weights stay */
	out[0] = 0.25;
	out[1] = -0.5;
	st[0] = rows(0);
	st[1] = rows(0);
	st[2] = rows(0);
	cp_merge_weighted(copies, st, 3, 2, out);
	CHECK(out[0] == 0.25 && out[1] == -0.5, "unchanged: %g %g", out[0], out[1]);

	/* one copy: itself, bit for bit */
	st[0] = rows(7);
	cp_merge_weighted(copies + 2, st, 1, 2, out);
	CHECK(out[0] == 3.0 && out[1] == 20.0, "single copy: %g %g", out[0], out[1]);

	/* the same inputs give the same bits */
	{
		double		a[2],
					b[2];
		double		odd[4] = {0.1, 0.7, 0.2, 0.3};

		st[0] = rows(3);
		st[1] = rows(11);
		cp_merge_weighted(odd, st, 2, 2, a);
		cp_merge_weighted(odd, st, 2, 2, b);
		CHECK(memcmp(a, b, sizeof(a)) == 0, "repeatable");
	}

	/* figures add up */
	memset(&total, 0, sizeof(total));
	st[0] = rows(4);
	st[1] = rows(6);
	cp_stats_merge(&total, &st[0]);
	cp_stats_merge(&total, &st[1]);
	CHECK(total.n == 10 && total.loss_sum == 5.0 && total.n_correct == 5,
		  "merged stats: n=%lld loss=%g correct=%lld", (long long) total.n,
		  total.loss_sum, (long long) total.n_correct);

	printf("%d passed, %d failed\n", n_passed, n_failed);
	return n_failed > 0;
}
