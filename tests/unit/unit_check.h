/*
 * unit_check.h
 *	  The check macro and the closing line shared by the C unit tests, which
 *	  run without a server: each prints "N passed, N failed" and exits
 *	  non-zero when a check failed.
 */
#ifndef CORGIPILE_UNIT_CHECK_H
#define CORGIPILE_UNIT_CHECK_H

#include <stdio.h>

static int	n_passed = 0;
static int	n_failed = 0;

#define CHECK(cond, ...) \
	do { \
		if (cond) \
			n_passed++; \
		else \
		{ \
			n_failed++; \
			printf("FAIL %s:%d: ", __FILE__, __LINE__); \
			printf(__VA_ARGS__); \
			printf("\n"); \
		} \
	} while (0)

#endif							/* CORGIPILE_UNIT_CHECK_H */
