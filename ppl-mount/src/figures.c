#include "figures.h"

#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>

#include "log.h"
#include "ppl/histogram.h"

/* A database page is at most 64 KiB; bigger READs are read-ahead or file
 * copies, whose time is mostly bytes on the wire, so they are counted
 * apart and kept out of the percentiles. */
#define PAGE_READ_MAX (64u * 1024u)

static struct ppl_histogram page_us; /* READs up to PAGE_READ_MAX, in us */
static uint64_t big_reads;

void figures_read(uint64_t ns, size_t size)
{
	if (size <= PAGE_READ_MAX)
		ppl_histogram_add(&page_us, ns / 1000);
	else
		__atomic_add_fetch(&big_reads, 1, __ATOMIC_RELAXED);
}

/* Figures of h (already a difference of two snapshots). */
static void log_hist(const char *what, const struct ppl_histogram *h, uint64_t big)
{
	log_msg("reads %s: %" PRIu64 " of at most 64 KiB, p50 %" PRIu64 " us, p90 %" PRIu64 " us, p99 %" PRIu64
		" us, p99.9 %" PRIu64 " us; %" PRIu64 " larger",
		what, ppl_histogram_count(h), ppl_histogram_percentile(h, 50), ppl_histogram_percentile(h, 90),
		ppl_histogram_percentile(h, 99), ppl_histogram_percentile(h, 99.9), big);
}

static void snapshot(struct ppl_histogram *out, uint64_t *big)
{
	for (unsigned b = 0; b < PPL_HIST_BUCKETS; b++)
		out->n[b] = __atomic_load_n(&page_us.n[b], __ATOMIC_RELAXED);
	*big = __atomic_load_n(&big_reads, __ATOMIC_RELAXED);
}

void figures_log_total(void)
{
	struct ppl_histogram now;
	uint64_t big;
	snapshot(&now, &big);
	log_hist("since the mount", &now, big);
}

static void *reporter(void *arg)
{
	sigset_t *set = arg;
	/* The counts only grow, so an interval is this snapshot minus the
	 * last: no reset that would race with the readers' adds. */
	static struct ppl_histogram last, now, diff;
	uint64_t last_big = 0, big;
	for (;;) {
		int sig;
		if (sigwait(set, &sig) != 0)
			continue;
		snapshot(&now, &big);
		for (unsigned b = 0; b < PPL_HIST_BUCKETS; b++)
			diff.n[b] = now.n[b] - last.n[b];
		log_hist("since the last report", &diff, big - last_big);
		last = now;
		last_big = big;
	}
	return NULL;
}

static sigset_t usr1;

void figures_block_signal(void)
{
	sigemptyset(&usr1);
	sigaddset(&usr1, SIGUSR1);
	pthread_sigmask(SIG_BLOCK, &usr1, NULL);
}

int figures_start(void)
{
	pthread_t t;
	if (pthread_create(&t, NULL, reporter, &usr1) != 0) {
		log_msg("cannot start the read-figures thread; SIGUSR1 will not report figures");
		return -1;
	}
	pthread_detach(t);
	return 0;
}
