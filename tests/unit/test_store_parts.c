/* The rebuilt-page cache and the percentile histogram of FSAL_PPL. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "ppl/histogram.h"
#include "ppl/page_cache.h"

#define PS 4096u

static void test_cache(void)
{
	CHECK(ppl_page_cache_new(PS - 1, PS) == NULL); /* less than a page: off */
	struct ppl_page_cache *c = ppl_page_cache_new(8 * PS, PS);
	CHECK(c != NULL);
	if (c == NULL)
		return;
	static uint8_t a[PS], b[PS], out[PS];
	memset(a, 0xaa, PS);
	memset(b, 0xbb, PS);
	uint64_t g = ppl_page_cache_generation(c);
	CHECK(!ppl_page_cache_get(c, 5, 9, 100, 7, 200, out));
	ppl_page_cache_put(c, g, 5, 9, 100, 7, 200, a);
	CHECK(ppl_page_cache_get(c, 5, 9, 100, 7, 200, out) && memcmp(out, a, PS) == 0);
	/* a new record (another result LSN) or a new base misses */
	CHECK(!ppl_page_cache_get(c, 5, 9, 100, 7, 201, out));
	CHECK(!ppl_page_cache_get(c, 5, 9, 150, 7, 200, out));
	CHECK(!ppl_page_cache_get(c, 5, 10, 100, 7, 200, out));
	CHECK(!ppl_page_cache_get(c, 6, 9, 100, 7, 200, out));
	/* a base of the same LSN with other bytes (a file copied in) misses */
	CHECK(!ppl_page_cache_get(c, 5, 9, 100, 8, 200, out));
	/* a rebuild of a later result goes on from the entry (the records
	 * after 200 are the only ones it applies): only for the same base,
	 * and never from an entry past what it asks for */
	memset(out, 0, PS);
	CHECK_EQ_U(ppl_page_cache_get_before(c, 5, 9, 100, 7, 250, out), 200);
	CHECK(memcmp(out, a, PS) == 0);
	CHECK_EQ_U(ppl_page_cache_get_before(c, 5, 9, 100, 7, 200, out), 200);
	CHECK_EQ_U(ppl_page_cache_get_before(c, 5, 9, 100, 7, 199, out), 0);
	CHECK_EQ_U(ppl_page_cache_get_before(c, 5, 9, 150, 7, 250, out), 0);
	CHECK_EQ_U(ppl_page_cache_get_before(c, 5, 9, 100, 8, 250, out), 0);
	CHECK_EQ_U(ppl_page_cache_get_before(c, 5, 10, 100, 7, 250, out), 0);
	/* a newer rebuild of the page replaces the entry */
	ppl_page_cache_put(c, g, 5, 9, 100, 7, 201, b);
	CHECK(ppl_page_cache_get(c, 5, 9, 100, 7, 201, out) && memcmp(out, b, PS) == 0);
	CHECK(!ppl_page_cache_get(c, 5, 9, 100, 7, 200, out));
	/* a new generation (another datadir's log, a dropped space): what
	 * was put before misses although base and result match, and a page
	 * rebuilt from records read before it is not kept */
	ppl_page_cache_forget_all(c);
	CHECK(!ppl_page_cache_get(c, 5, 9, 100, 7, 201, out));
	CHECK_EQ_U(ppl_page_cache_get_before(c, 5, 9, 100, 7, 300, out), 0);
	ppl_page_cache_put(c, g, 5, 9, 100, 7, 201, b);
	CHECK(!ppl_page_cache_get(c, 5, 9, 100, 7, 201, out));
	g = ppl_page_cache_generation(c);
	ppl_page_cache_put(c, g, 5, 9, 100, 7, 201, a);
	CHECK(ppl_page_cache_get(c, 5, 9, 100, 7, 201, out) && memcmp(out, a, PS) == 0);
	/* more pages than slots: whatever is served is the page asked for */
	for (uint32_t p = 0; p < 64; p++) {
		memset(a, (int)p, PS);
		ppl_page_cache_put(c, g, 7, p, 1, 0, 1000 + p, a);
	}
	unsigned hits = 0;
	for (uint32_t p = 0; p < 64; p++)
		if (ppl_page_cache_get(c, 7, p, 1, 0, 1000 + p, out)) {
			hits++;
			CHECK(out[0] == (uint8_t)p && out[PS - 1] == (uint8_t)p);
		}
	CHECK(hits >= 1 && hits <= 8);
	struct ppl_page_cache_stats st;
	ppl_page_cache_get_stats(c, &st);
	CHECK_EQ_U(st.slots, 8);
	CHECK_EQ_U(st.hits, 3 + hits);
	CHECK_EQ_U(st.resumed, 2);
	ppl_page_cache_free(c);
}

static void test_histogram(void)
{
	static struct ppl_histogram h;
	CHECK_EQ_U(ppl_histogram_percentile(&h, 50), 0);
	for (uint64_t v = 1; v <= 100; v++)
		ppl_histogram_add(&h, v % 50); /* 0..49 twice each */
	CHECK_EQ_U(ppl_histogram_count(&h), 100);
	CHECK_EQ_U(ppl_histogram_percentile(&h, 50), 24);
	CHECK_EQ_U(ppl_histogram_percentile(&h, 100), 49);
	CHECK_EQ_U(ppl_histogram_percentile(&h, 1), 0);
	/* above 64: the upper bound of its bucket, 1/16 of a power of two */
	static struct ppl_histogram big;
	for (int i = 0; i < 98; i++)
		ppl_histogram_add(&big, 3);
	ppl_histogram_add(&big, 100);
	ppl_histogram_add(&big, 5000);
	CHECK_EQ_U(ppl_histogram_percentile(&big, 50), 3);
	CHECK_EQ_U(ppl_histogram_percentile(&big, 99), 103);   /* [100, 104) */
	CHECK_EQ_U(ppl_histogram_percentile(&big, 100), 5119); /* [4864, 5120) */
	/* every value lies in its bucket, and the bucket is at most 1/16 wide */
	for (uint64_t v = 64; v < (1ull << 40); v = v * 3 / 2 + 7) {
		static struct ppl_histogram one;
		memset(&one, 0, sizeof(one));
		ppl_histogram_add(&one, v);
		uint64_t top = ppl_histogram_percentile(&one, 100);
		CHECK(top >= v && top - v <= v / 16);
	}
	ppl_histogram_add(&big, UINT64_MAX);
	CHECK_EQ_U(ppl_histogram_percentile(&big, 100), UINT64_MAX);
}

int main(void)
{
	test_cache();
	test_histogram();
	CHECK_DONE();
}
