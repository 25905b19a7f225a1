/* A lock-free histogram for the percentiles of the stats line
 * (mini-transactions applied per rebuilt read, read latencies in us):
 * exact below 64, then 16 buckets per power of two, so a percentile above
 * 64 is the upper bound of its bucket, at most 1/16 above the true value
 * (fine enough to tell a read 10% slower). Writers only add; readers take
 * a snapshot that may be a few counts behind. */
#ifndef PPL_HISTOGRAM_H
#define PPL_HISTOGRAM_H

#include <stdint.h>

#define PPL_HIST_EXACT 64u
#define PPL_HIST_SUB 16u                                        /* buckets per power of two */
#define PPL_HIST_BUCKETS (PPL_HIST_EXACT + 58u * PPL_HIST_SUB) /* up to 2^64 */

struct ppl_histogram {
	uint64_t n[PPL_HIST_BUCKETS];
};

void ppl_histogram_add(struct ppl_histogram *h, uint64_t value);
uint64_t ppl_histogram_count(const struct ppl_histogram *h);
/* The value at percentile pct (0..100) of what was added; 0 when empty. */
uint64_t ppl_histogram_percentile(const struct ppl_histogram *h, double pct);

/* A lock-free histogram of durations in ns for the metrics endpoint:
 * fixed bounds from 1 us to 10 s in 1-2.5-5 steps (a scrape's buckets
 * must not move), plus the sum. Adding is two relaxed atomic adds and a
 * short scan: cheap enough for every page a read rebuilds. */
#define PPL_LATENCY_BOUNDS 22u

struct ppl_latency {
	uint64_t n[PPL_LATENCY_BOUNDS + 1]; /* [i]: at most bound i; the last: above them all */
	uint64_t sum_ns;
};

extern const uint64_t ppl_latency_bounds_ns[PPL_LATENCY_BOUNDS];
void ppl_latency_add(struct ppl_latency *h, uint64_t ns);
/* A copy for a scrape; it may be a few counts behind, and the sum a few
 * values apart from the counts. */
void ppl_latency_get(const struct ppl_latency *h, struct ppl_latency *out);

#endif
