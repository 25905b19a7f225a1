/* libFuzzer target: the store (ppl/store.h) under random interleavings of
 * what MariaDB does to a few pages -- change them (redo), flush its log,
 * write a page (asking first; writing it itself on a no), read a page
 * back, checkpoint -- with the host of the store tests
 * (tests/unit/store_host.h). The oracle is MariaDB's own page: every page
 * read returns exactly the version MariaDB last wrote (elided or not),
 * every checkpoint is let through, and at the end every page reads as
 * MariaDB has it. A page MariaDB did not write, or a lost one, aborts. */
#include "store_host.h"

#define FUZZ_PAGES 6u

struct mariadb {
	uint8_t page[FUZZ_PAGES][PS];    /* in its buffer pool */
	bool dirty[FUZZ_PAGES];
	uint64_t oldest[FUZZ_PAGES];     /* LSN of the first change since the last write */
};

static void write_page(struct host *h, struct mariadb *m, uint32_t p)
{
	if (h->l.lsn > h->written)
		flush_log(h); /* the log before the page (I2) */
	if (ask(h, p, m->page[p], PS) != PPL_ELIDE_ACK)
		host_page_write(h, p, m->page[p]);
	m->dirty[p] = false;
}

static uint64_t checkpoint_lsn(const struct host *h, const struct mariadb *m)
{
	uint64_t lsn = h->l.lsn;
	for (uint32_t p = 1; p < FUZZ_PAGES; p++)
		if (m->dirty[p] && m->oldest[p] < lsn)
			lsn = m->oldest[p];
	return lsn;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct host h;
	static struct mariadb m;
	static uint8_t got[PS];
	if (size > 400)
		size = 400;
	host_make(&h);
	host_start(&h);
	memset(&m, 0, sizeof m);
	for (uint32_t p = 1; p < FUZZ_PAGES; p++)
		read_file(h.ibd_path, m.page[p], PS, (off_t)p * PS);
	for (size_t i = 0; i + 1 < size; i += 2) {
		uint8_t op = data[i], arg = data[i + 1];
		uint32_t p = 1 + (uint32_t)(op >> 3) % (FUZZ_PAGES - 1);
		switch (op % 6) {
		case 0:
		case 1: {
			size_t len = 1 + (size_t)arg * 2;
			uint32_t at = PPL_FIL_PAGE_DATA + (uint32_t)(arg * 61u) % (PS - 8 - PPL_FIL_PAGE_DATA - 600);
			if (!m.dirty[p])
				m.oldest[p] = h.l.lsn;
			change(&h, p, at, arg, len, m.page[p]);
			m.dirty[p] = true;
			break;
		}
		case 2:
			if (h.l.lsn > h.written)
				flush_log(&h);
			break;
		case 3:
			write_page(&h, &m, p);
			break;
		case 4:
			if (!m.dirty[p]) { /* MariaDB reads only pages it does not hold */
				CHECK_EQ_U(host_read(&h, p, got), 0);
				CHECK(memcmp(got, m.page[p], PS) == 0);
			}
			break;
		case 5:
			if (h.l.lsn > h.written)
				flush_log(&h);
			CHECK_EQ_U(checkpoint(&h, checkpoint_lsn(&h, &m)), 0);
			break;
		}
		if (check_failures) {
			fprintf(stderr, "fuzz_store: step %zu (op %u, page %u) failed\n", i / 2, op % 6, p);
			abort();
		}
	}
	for (uint32_t p = 1; p < FUZZ_PAGES; p++)
		if (m.dirty[p])
			write_page(&h, &m, p);
	for (uint32_t p = 1; p < FUZZ_PAGES; p++) {
		CHECK_EQ_U(host_read(&h, p, got), 0);
		CHECK(memcmp(got, m.page[p], PS) == 0);
	}
	if (logged(&h, "CRIT") || logged(&h, "divergence"))
		CHECK(!"the store logged a failure");
	host_close(&h);
	if (check_failures)
		abort();
	return 0;
}
