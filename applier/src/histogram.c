#include "ppl/histogram.h"

static unsigned bucket_of(uint64_t v)
{
	if (v < PPL_HIST_EXACT)
		return (unsigned)v;
	/* [64,128) -> 64, [128,256) -> 65, ... */
	return PPL_HIST_EXACT + (unsigned)(63 - __builtin_clzll(v)) - 6;
}

static uint64_t bucket_top(unsigned b)
{
	if (b < PPL_HIST_EXACT)
		return b;
	unsigned shift = b - PPL_HIST_EXACT + 7;
	return shift >= 64 ? UINT64_MAX : (1ull << shift) - 1;
}

void ppl_histogram_add(struct ppl_histogram *h, uint64_t value)
{
	__atomic_add_fetch(&h->n[bucket_of(value)], 1, __ATOMIC_RELAXED);
}

uint64_t ppl_histogram_count(const struct ppl_histogram *h)
{
	uint64_t total = 0;
	for (unsigned b = 0; b < PPL_HIST_BUCKETS; b++)
		total += __atomic_load_n(&h->n[b], __ATOMIC_RELAXED);
	return total;
}

uint64_t ppl_histogram_percentile(const struct ppl_histogram *h, double pct)
{
	uint64_t snap[PPL_HIST_BUCKETS], total = 0;
	for (unsigned b = 0; b < PPL_HIST_BUCKETS; b++)
		total += snap[b] = __atomic_load_n(&h->n[b], __ATOMIC_RELAXED);
	if (total == 0)
		return 0;
	/* the smallest value with at least pct% of the counts at or below it */
	uint64_t want = (uint64_t)((double)total * pct / 100.0 + 0.999999), seen = 0;
	if (want == 0)
		want = 1;
	for (unsigned b = 0; b < PPL_HIST_BUCKETS; b++) {
		seen += snap[b];
		if (seen >= want)
			return bucket_top(b);
	}
	return bucket_top(PPL_HIST_BUCKETS - 1);
}
