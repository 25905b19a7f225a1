/* Micro-benchmark for scripts/bench-libcatcher.py (not a test): times
 * write calls made by this process, which the script runs with and
 * without LD_PRELOAD=libcatcher.so in each mode.
 *
 *   bench_libcatcher loop FILE SIZE N   N pwrite64 calls of SIZE bytes at
 *                                       page-aligned offsets of FILE;
 *                                       prints the best ns/call of 5 rounds
 *   bench_libcatcher rtt FILE N [K]     N pwrite64 calls of K (default 1)
 *                                       valid 16 KiB pages each (one
 *                                       pipelined exchange of K questions
 *                                       per call); prints p50/p99/max
 *                                       latency per call in microseconds */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ppl/crc32c.h"
#include "ppl/mach.h"

#define PS 16384u
#define SPAN 64u /* pages cycled over */

static double now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static void make_page(uint8_t *p, uint32_t page_no, uint64_t lsn)
{
	memset(p, (int)page_no, PS);
	ppl_wr4(p + 4, page_no);
	ppl_wr8(p + 16, lsn);
	ppl_wr4(p + 34, 7);
	if (page_no == 0) {
		ppl_wr4(p + 38, 7);
		ppl_wr4(p + 38 + 16, 0x15); /* full_crc32, 16 KiB */
	}
	ppl_wr4(p + PS - 8, (uint32_t)lsn);
	ppl_wr4(p + PS - 4, ppl_crc32c(0, p, PS - 4));
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
	if (argc < 4)
		return 2;
	/* rtt times elided writes: libcatcher elides only on O_DIRECT
	 * descriptors, as MariaDB opens its data files by default. */
	int direct = !strcmp(argv[1], "rtt") ? O_DIRECT : 0;
	int fd = open(argv[2], O_RDWR | O_CREAT | O_CLOEXEC | direct, 0644);
	if (fd < 0) {
		perror(direct ? "open with O_DIRECT (tmpfs accepts it from Linux 6.6)" : argv[2]);
		return 1;
	}
	if (!strcmp(argv[1], "loop") && argc == 5) {
		size_t size = (size_t)atol(argv[3]);
		long n = atol(argv[4]);
		uint8_t *buf = aligned_alloc(4096, PS);
		memset(buf, 0, PS); /* LSN 0: libcatcher would never ask about it */
		double best = 1e30;
		for (int round = 0; round < 5; round++) {
			double t = now_ns();
			for (long i = 0; i < n; i++)
				if (pwrite(fd, buf, size, (off_t)((i % SPAN) * PS)) != (ssize_t)size)
					return 1;
			double per = (now_ns() - t) / (double)n;
			if (per < best)
				best = per;
		}
		printf("%.1f\n", best);
		return 0;
	}
	if (!strcmp(argv[1], "rtt")) {
		long n = atol(argv[3]);
		uint32_t k = argc > 4 ? (uint32_t)atol(argv[4]) : 1;
		if (k < 1 || k > SPAN)
			return 2;
		uint8_t *pages = aligned_alloc(4096, (size_t)PS * SPAN);
		for (uint32_t i = 0; i < SPAN; i++)
			make_page(pages + (size_t)i * PS, i, 1000 + i);
		double *lat = malloc(sizeof *lat * (size_t)n);
		for (long i = 0; i < n; i++) {
			uint32_t pg = (uint32_t)((i * k) % (SPAN - k + 1));
			double t = now_ns();
			if (pwrite(fd, pages + (size_t)pg * PS, (size_t)k * PS, (off_t)pg * PS) != (ssize_t)(k * PS))
				return 1;
			lat[i] = (now_ns() - t) / 1e3;
		}
		qsort(lat, (size_t)n, sizeof *lat, cmp);
		printf("%.1f %.1f %.1f\n", lat[n / 2], lat[(size_t)(n * 0.99)], lat[n - 1]);
		return 0;
	}
	return 2;
}
