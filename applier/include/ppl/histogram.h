/* A lock-free histogram of small counts (mini-transactions applied per
 * rebuilt read) for the percentiles of the stats line: exact below 64,
 * power-of-two buckets above, so a percentile above 64 is given as the
 * upper bound of its bucket. Writers only add; readers take a snapshot
 * that may be a few counts behind. */
#ifndef PPL_HISTOGRAM_H
#define PPL_HISTOGRAM_H

#include <stdint.h>

#define PPL_HIST_EXACT 64u
#define PPL_HIST_BUCKETS (PPL_HIST_EXACT + 58u) /* up to 2^64 */

struct ppl_histogram {
	uint64_t n[PPL_HIST_BUCKETS];
};

void ppl_histogram_add(struct ppl_histogram *h, uint64_t value);
uint64_t ppl_histogram_count(const struct ppl_histogram *h);
/* The value at percentile pct (0..100) of what was added; 0 when empty. */
uint64_t ppl_histogram_percentile(const struct ppl_histogram *h, double pct);

#endif
