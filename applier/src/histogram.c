#include "ppl/histogram.h"

static unsigned bucket_of(uint64_t v)
{
	if (v < PPL_HIST_EXACT)
		return (unsigned)v;
	/* v in [2^e, 2^(e+1)), e >= 6: 16 equal slices of that octave */
	unsigned e = (unsigned)(63 - __builtin_clzll(v));
	unsigned sub = (unsigned)(v >> (e - 4)) & (PPL_HIST_SUB - 1);
	return PPL_HIST_EXACT + (e - 6) * PPL_HIST_SUB + sub;
}

static uint64_t bucket_top(unsigned b)
{
	if (b < PPL_HIST_EXACT)
		return b;
	unsigned e = (b - PPL_HIST_EXACT) / PPL_HIST_SUB + 6, sub = (b - PPL_HIST_EXACT) % PPL_HIST_SUB;
	if (e == 63 && sub == PPL_HIST_SUB - 1)
		return UINT64_MAX;
	return ((uint64_t)(PPL_HIST_SUB + sub + 1) << (e - 4)) - 1;
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

const uint64_t ppl_latency_bounds_ns[PPL_LATENCY_BOUNDS] = {
	1000,       2500,       5000,       10000,       25000,       50000,       100000,    250000,
	500000,     1000000,    2500000,    5000000,     10000000,    25000000,    50000000,  100000000,
	250000000,  500000000,  1000000000, 2500000000u, 5000000000u, 10000000000u,
};

void ppl_latency_add(struct ppl_latency *h, uint64_t ns)
{
	unsigned b = 0;
	while (b < PPL_LATENCY_BOUNDS && ns > ppl_latency_bounds_ns[b])
		b++;
	__atomic_add_fetch(&h->n[b], 1, __ATOMIC_RELAXED);
	__atomic_add_fetch(&h->sum_ns, ns, __ATOMIC_RELAXED);
}

void ppl_latency_get(const struct ppl_latency *h, struct ppl_latency *out)
{
	for (unsigned b = 0; b <= PPL_LATENCY_BOUNDS; b++)
		out->n[b] = __atomic_load_n(&h->n[b], __ATOMIC_RELAXED);
	out->sum_ns = __atomic_load_n(&h->sum_ns, __ATOMIC_RELAXED);
}
