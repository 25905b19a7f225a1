/* Measures the per-page log pool: appends/s and append latency (p50, p99,
 * p99.9) with 1..N threads, lookups/s while appends run, and the recovery
 * scan time per GB. Also `fill`, which populates a pool for tests and
 * tools. A benchmark, never a test: it asserts nothing.
 *
 *   ppl-pool-bench run  --pool PATH [--size 1G] [--seconds 5] [--threads 2]
 *   ppl-pool-bench fill --pool PATH [--size 64M] [--pages N] [--space S]
 *   ppl-pool-bench recover --pool PATH     (times the open-time scan)
 *
 * `run` creates the pool (removing PATH first: give it a scratch path).
 * Appends go to random pages of a working set; a page refused over its cap
 * is reclaimed by the appending thread, as materialization would, and that
 * reclaim is timed apart from appends. */
#include <getopt.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ppl/pool.h"

static uint64_t now_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

static uint64_t xorshift(uint64_t *s)
{
	uint64_t x = *s;
	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	return *s = x;
}

struct worker {
	struct ppl_pool *p;
	int id;
	uint32_t pages;
	volatile int *stop;
	uint64_t appends, reclaims, reclaim_ns, lookups;
	uint32_t *lat;          /* append latencies in ns, capped */
	size_t nlat, caplat;
	uint64_t lsn;
};

static int count_rec(void *arg, const struct ppl_pool_rec *r)
{
	(void)r;
	(*(uint64_t *)arg)++;
	return 0;
}

static void *appender(void *arg)
{
	struct worker *w = arg;
	uint64_t seed = 0x9e3779b97f4a7c15ull * (uint64_t)(w->id + 1);
	uint8_t bytes[64];
	memset(bytes, 0xab, sizeof(bytes));
	while (!*w->stop) {
		uint64_t r = xorshift(&seed);
		/* thread-private pages: space = thread id, like workers
		 * partitioned by page hash */
		uint32_t page = (uint32_t)(r % w->pages);
		uint16_t len = (uint16_t)(8 + (r >> 32) % 33); /* 8..40 B: typical row-update records */
		struct ppl_pool_rec rec = { .start_lsn = w->lsn, .end_lsn = w->lsn + 40, .len = len, .bytes = bytes };
		w->lsn += 50;
		uint64_t t0 = now_ns();
		enum ppl_pool_status st = ppl_pool_append(w->p, (uint32_t)w->id, page, &rec);
		uint64_t t1 = now_ns();
		if (w->nlat < w->caplat)
			w->lat[w->nlat++] = (uint32_t)(t1 - t0 > UINT32_MAX ? UINT32_MAX : t1 - t0);
		w->appends++;
		if (st != PPL_POOL_OK) {
			uint64_t t2 = now_ns();
			ppl_pool_reclaim(w->p, (uint32_t)w->id, page, w->lsn);
			w->reclaim_ns += now_ns() - t2;
			w->reclaims++;
		}
	}
	return NULL;
}

static void *looker(void *arg)
{
	struct worker *w = arg;
	uint64_t seed = 12345, n = 0;
	while (!*w->stop) {
		uint32_t page = (uint32_t)(xorshift(&seed) % w->pages);
		ppl_pool_records(w->p, 0, page, count_rec, &n);
		w->lookups++;
	}
	return NULL;
}

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
	return x < y ? -1 : x > y;
}

static struct ppl_pool *fresh(const char *path, uint64_t size)
{
	char err[512];
	unlink(path);
	struct ppl_pool_geometry g = { .size = size, .identity = "ppl-pool-bench" };
	if (ppl_pool_create(path, &g, err, sizeof(err)) != 0) {
		fprintf(stderr, "ppl-pool-bench: %s\n", err);
		return NULL;
	}
	struct ppl_pool *p;
	if (ppl_pool_open(path, NULL, &p, NULL, err, sizeof(err)) != 0) {
		fprintf(stderr, "ppl-pool-bench: %s\n", err);
		return NULL;
	}
	return p;
}

/* nthreads appenders (+ one looker if lookers) for `seconds`. */
static int phase(const char *path, uint64_t size, int nthreads, bool lookers, double seconds)
{
	struct ppl_pool *p = fresh(path, size);
	if (p == NULL)
		return 1;
	volatile int stop = 0;
	struct worker w[9];
	pthread_t t[9];
	uint32_t pages = 200000; /* per thread: ~3 blocks each at the cap, well inside 1 GB */
	memset(w, 0, sizeof(w));
	for (int i = 0; i < nthreads; i++) {
		w[i] = (struct worker){ .p = p, .id = i, .pages = pages, .stop = &stop, .lsn = 1000 };
		w[i].caplat = 50u << 20;
		w[i].lat = malloc(w[i].caplat * sizeof(uint32_t));
		pthread_create(&t[i], NULL, appender, &w[i]);
	}
	if (lookers) {
		w[nthreads] = (struct worker){ .p = p, .id = nthreads, .pages = pages, .stop = &stop };
		pthread_create(&t[nthreads], NULL, looker, &w[nthreads]);
	}
	uint64_t t0 = now_ns();
	usleep((useconds_t)(seconds * 1e6));
	stop = 1;
	for (int i = 0; i < nthreads + (lookers ? 1 : 0); i++)
		pthread_join(t[i], NULL);
	double el = (double)(now_ns() - t0) / 1e9;
	uint64_t appends = 0, reclaims = 0, reclaim_ns = 0;
	size_t nlat = 0;
	for (int i = 0; i < nthreads; i++) {
		appends += w[i].appends;
		reclaims += w[i].reclaims;
		reclaim_ns += w[i].reclaim_ns;
		nlat += w[i].nlat;
	}
	uint32_t *all = malloc(nlat * sizeof(uint32_t));
	size_t k = 0;
	for (int i = 0; i < nthreads; i++) {
		memcpy(all + k, w[i].lat, w[i].nlat * sizeof(uint32_t));
		k += w[i].nlat;
		free(w[i].lat);
	}
	qsort(all, nlat, sizeof(uint32_t), cmp_u32);
	struct ppl_pool_usage u;
	ppl_pool_usage(p, &u);
	printf("%d appender thread(s)%s, %.1f s: %.0f appends/s; append latency p50 %.2f us, p99 %.2f us, "
	       "p99.9 %.2f us (%zu samples); %.0f reclaims/s (mean %.2f us)",
	       nthreads, lookers ? " + 1 lookup thread" : "", el, (double)appends / el,
	       nlat ? all[nlat / 2] / 1e3 : 0.0, nlat ? all[nlat * 99 / 100] / 1e3 : 0.0,
	       nlat ? all[nlat * 999 / 1000] / 1e3 : 0.0, nlat, (double)reclaims / el,
	       reclaims ? (double)reclaim_ns / (double)reclaims / 1e3 : 0.0);
	if (lookers)
		printf("; %.0f lookups/s (page walks, checksums verified)", (double)w[nthreads].lookups / el);
	printf("; pool %" PRIu64 " pages, %" PRIu64 " of %" PRIu64 " blocks free\n", u.pages, u.free_blocks,
	       u.nblocks);
	free(all);
	ppl_pool_close(p);
	return 0;
}

/* Fills pages with 1..cap-sized chains; returns pages written. */
static uint64_t fill(struct ppl_pool *p, uint32_t space, uint64_t pages)
{
	uint8_t bytes[64];
	memset(bytes, 0x5c, sizeof(bytes));
	uint64_t seed = 777, lsn = 1000, n = 0;
	for (uint64_t pg = 0; pg < pages; pg++) {
		int recs = 1 + (int)(xorshift(&seed) % 6);
		for (int i = 0; i < recs; i++) {
			struct ppl_pool_rec r = { .start_lsn = lsn, .end_lsn = lsn + 30, .len = 20, .bytes = bytes };
			lsn += 40;
			enum ppl_pool_status st = ppl_pool_append(p, space, (uint32_t)pg, &r);
			if (st == PPL_POOL_FULL)
				return n;
		}
		n++;
	}
	return n;
}

static void count_page(void *arg, uint32_t space, uint32_t page_no, const struct ppl_pool_page_info *i)
{
	(void)space;
	(void)page_no;
	((uint64_t *)arg)[0]++;
	((uint64_t *)arg)[1] += i->records;
}

/* Opens the pool and reports the open (the pool serves from then on) and
 * the moment every index entry is built. */
static int time_open(const char *path, double gib)
{
	char err[512];
	struct ppl_pool *p;
	struct ppl_pool_recovery rec;
	uint64_t t0 = now_ns();
	if (ppl_pool_open(path, NULL, &p, &rec, err, sizeof(err)) != 0) {
		fprintf(stderr, "ppl-pool-bench: %s\n", err);
		return 1;
	}
	uint64_t c[2] = { 0, 0 };
	ppl_pool_for_each_page(p, count_page, c); /* waits for the index */
	double open_s = (double)rec.elapsed_ns / 1e9, all_s = (double)(now_ns() - t0) / 1e9;
	printf("recovery of a %.2f GiB pool: %" PRIu64 " pages, %" PRIu64 " records, %" PRIu64 " blocks used; "
	       "open (scan, serving) %.3f s = %.3f s per GiB; index fully built %.3f s after the call\n", gib,
	       c[0], c[1], rec.blocks_used, open_s, open_s / gib, all_s);
	printf("  open's phases: heads %.3f s, table %.3f s, walk %.3f s, free list %.3f s, doublewrite %.3f s, "
	       "the rest %.3f s\n", (double)rec.heads_ns / 1e9, (double)rec.table_ns / 1e9, (double)rec.walk_ns / 1e9,
	       (double)rec.free_ns / 1e9, (double)rec.dw_ns / 1e9,
	       (double)(rec.elapsed_ns - rec.heads_ns - rec.table_ns - rec.walk_ns - rec.free_ns - rec.dw_ns) / 1e9);
	ppl_pool_close(p);
	return 0;
}

static int recovery(const char *path, uint64_t size)
{
	struct ppl_pool *p = fresh(path, size);
	if (p == NULL)
		return 1;
	uint64_t pages = fill(p, 1, UINT64_MAX);
	struct ppl_pool_usage u;
	ppl_pool_usage(p, &u);
	ppl_pool_close(p);
	printf("filled %" PRIu64 " pages (%" PRIu64 " of %" PRIu64 " blocks free)\n", pages, u.free_blocks, u.nblocks);
	return time_open(path, (double)size / (1u << 30));
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "pool", required_argument, 0, 'p' }, { "size", required_argument, 0, 's' },
		{ "seconds", required_argument, 0, 't' }, { "threads", required_argument, 0, 'n' },
		{ "pages", required_argument, 0, 'g' }, { "space", required_argument, 0, 'S' }, { 0, 0, 0, 0 },
	};
	const char *path = NULL, *verb = argc > 1 ? argv[1] : "";
	uint64_t size = 0, pages = 1000;
	double seconds = 5;
	int threads = 2, c;
	uint32_t space = 1;
	optind = 2;
	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 'p': path = optarg; break;
		case 's': {
			char *e;
			size = strtoull(optarg, &e, 10);
			size <<= *e == 'G' ? 30 : *e == 'M' ? 20 : *e == 'K' ? 10 : 0;
			break;
		}
		case 't': seconds = atof(optarg); break;
		case 'n': threads = atoi(optarg); break;
		case 'g': pages = strtoull(optarg, NULL, 10); break;
		case 'S': space = (uint32_t)strtoul(optarg, NULL, 10); break;
		default: return 2;
		}
	}
	if (path == NULL || threads < 1 || threads > 8 || (strcmp(verb, "run") && strcmp(verb, "fill") && strcmp(verb, "recover"))) {
		fprintf(stderr, "usage: ppl-pool-bench run --pool PATH [--size 1G] [--seconds 5] [--threads 2]\n"
				"       ppl-pool-bench fill --pool PATH [--size 64M] [--pages 1000] [--space 1]\n"
				"       ppl-pool-bench recover --pool PATH\n");
		return 2;
	}
	if (strcmp(verb, "recover") == 0) {
		struct stat st;
		if (stat(path, &st) != 0) {
			perror(path);
			return 1;
		}
		return time_open(path, (double)st.st_size / (1u << 30));
	}
	if (strcmp(verb, "fill") == 0) {
		char err[512];
		struct ppl_pool *p;
		if (access(path, F_OK) != 0) {
			p = fresh(path, size ? size : 64u << 20);
		} else if (ppl_pool_open(path, NULL, &p, NULL, err, sizeof(err)) != 0) {
			fprintf(stderr, "ppl-pool-bench: %s\n", err);
			p = NULL;
		}
		if (p == NULL)
			return 1;
		uint64_t n = fill(p, space, pages);
		printf("filled %" PRIu64 " pages of space %u\n", n, space);
		ppl_pool_close(p);
		return 0;
	}
	if (size == 0)
		size = 1ull << 30;
	for (int n = 1; n <= threads; n++)
		if (phase(path, size, n, false, seconds) != 0)
			return 1;
	if (phase(path, size, 1, true, seconds) != 0 || recovery(path, size) != 0)
		return 1;
	unlink(path);
	return 0;
}
