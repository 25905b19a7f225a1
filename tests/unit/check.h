/* Minimal assertion helpers for the C unit tests: a failed check prints
 * where and why, and the test exits non-zero at the end. */
#ifndef PPL_TEST_CHECK_H
#define PPL_TEST_CHECK_H
#include <stdio.h>
#include <stdlib.h>

static int check_failures;
#define CHECK(cond) do { if (!(cond)) { \
	fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
	check_failures++; } } while (0)
#define CHECK_EQ_U(a, b) do { unsigned long long _a = (a), _b = (b); if (_a != _b) { \
	fprintf(stderr, "%s:%d: CHECK failed: %s == %s (%llu != %llu)\n", __FILE__, __LINE__, #a, #b, _a, _b); \
	check_failures++; } } while (0)
#define CHECK_DONE() do { if (check_failures) { fprintf(stderr, "%d check(s) failed\n", check_failures); return 1; } \
	printf("all checks passed\n"); return 0; } while (0)
#endif
