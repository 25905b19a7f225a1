/* EXTENDED and byte records on every innodb_page_size, 4K to 64K, where
 * the encodings reach what 16 KiB pages never do: record origins,
 * PAGE_HEAP_TOP, PAGE_FREE and TRX_UNDO_PAGE_FREE above 32767, COMPACT
 * next-record links whose distance exceeds 32767 (read modulo the page
 * size, not as a signed 16-bit delta), heap numbers above 255, predecessor
 * offsets that take a 3-byte varint, writes that end at byte 65536. The
 * pages are checked against a walk written here from InnoDB's page
 * invariants (page_simple_validate_new/_old), and against the same
 * operations on a 4 KiB page: the page size may move only the directory. */
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "ppl/mach.h"
#include "ppl/page.h"
#include "ppl/page_apply.h"
#include "ppl/redo.h"
#include "redo_synth.h"

#define MAXPS 65536
#define SPACE 7u
#define PAGENO 5u

/* page0page.h, rem0rec.h */
#define PH 38u
#define N_DIR_SLOTS (PH + 0)
#define HEAP_TOP (PH + 2)
#define N_HEAP (PH + 4)
#define FREE (PH + 6)
#define GARBAGE (PH + 8)
#define LAST_INSERT (PH + 10)
#define DIRECTION_B (PH + 13)
#define N_DIRECTION (PH + 14)
#define N_RECS (PH + 16)
#define NEW_INFIMUM 99u
#define NEW_SUPREMUM 112u
#define NEW_SUPREMUM_END 120u
#define OLD_INFIMUM 101u
#define OLD_SUPREMUM 116u
#define OLD_SUPREMUM_END 125u
#define PAGE_RIGHT 2u

/* The records the tests insert: COMPACT with no variable header bytes and
 * DYN_DATA bytes of payload; REDUNDANT with one short field of OLD_DATA
 * bytes (1 byte of field offsets). */
#define DYN_DATA 100u
#define DYN_SIZE (5u + DYN_DATA)
#define OLD_DATA 100u
#define OLD_EXTRA 7u
#define OLD_SIZE (OLD_EXTRA + OLD_DATA)
#define MAXREC 700

static _Alignas(4096) uint8_t page[MAXPS];
static _Alignas(4096) uint8_t small_page[MAXPS];

static unsigned prev3; /* predecessor offsets that needed a 3-byte varint */

static struct ppl_page_ref ref_of(uint8_t *p, size_t size)
{
	struct ppl_page_ref r = {p, size, SPACE, PAGENO};
	return r;
}

static enum ppl_apply_status ext(uint8_t *p, size_t size, const uint8_t *body, size_t len)
{
	struct ppl_page_ref r = ref_of(p, size);
	struct ppl_apply_error e;
	enum ppl_apply_status s = ppl_apply_extended(&r, body, len, &e);
	if (s != PPL_APPLY_OK)
		fprintf(stderr, "  apply on a %zu-byte page: %s\n", size, e.msg);
	return s;
}

static void new_index_page(uint8_t *p, size_t size, bool comp)
{
	memset(p, 0, size);
	ppl_wr4(p + PPL_FIL_PAGE_OFFSET, PAGENO);
	ppl_wr4(p + PPL_FIL_PAGE_SPACE_ID, SPACE);
	const uint8_t sub = comp ? PPL_EXT_INIT_ROW_FORMAT_DYNAMIC : PPL_EXT_INIT_ROW_FORMAT_REDUNDANT;
	CHECK(ext(p, size, &sub, 1) == PPL_APPLY_OK);
}

static size_t prev_varint(uint8_t *b, uint32_t prev)
{
	size_t n = syn_varint(b, prev);
	prev3 += n == 3;
	return n;
}

static uint8_t pattern(unsigned k, unsigned i) { return (uint8_t)(k * 7 + i); }

/* ---- COMPACT ----------------------------------------------------------- */

static uint32_t dyn_origin(unsigned k) { return NEW_SUPREMUM_END + k * DYN_SIZE + 5; }

static enum ppl_apply_status dyn_insert(uint8_t *p, size_t size, bool reuse, uint32_t prev_origin, unsigned k)
{
	uint8_t b[16 + DYN_DATA];
	size_t n = 0;
	b[n++] = reuse ? PPL_EXT_INSERT_REUSE_DYNAMIC : PPL_EXT_INSERT_HEAP_DYNAMIC;
	n += prev_varint(b + n, prev_origin - NEW_INFIMUM);
	if (reuse)
		b[n++] = 0; /* same size as the freed record: no shift */
	b[n++] = 0;         /* no literal header bytes; info bits 0, ordinary */
	b[n++] = 0;         /* hdr_c */
	b[n++] = 0;         /* data_c */
	for (unsigned i = 0; i < DYN_DATA; i++)
		b[n++] = pattern(k, i);
	return ext(p, size, b, n);
}

static enum ppl_apply_status dyn_delete(uint8_t *p, size_t size, uint32_t prev_origin)
{
	uint8_t b[16];
	size_t n = 0;
	b[n++] = PPL_EXT_DELETE_ROW_FORMAT_DYNAMIC;
	n += prev_varint(b + n, prev_origin - NEW_INFIMUM);
	b[n++] = 0; /* header bytes beyond the 5 fixed ones */
	n += syn_varint(b + n, DYN_DATA);
	return ext(p, size, b, n);
}

/* A COMPACT link is a 16-bit distance taken modulo the page size
 * (rec_get_next_offs), which at 64 KiB can exceed 32767 either way. */
static uint32_t next_new(const uint8_t *p, size_t size, uint32_t rec)
{
	uint32_t d = ppl_rd2(p + rec - 2);
	return d ? (rec + d) & (uint32_t)(size - 1) : 0;
}

static uint32_t next_old(const uint8_t *p, uint32_t rec) { return ppl_rd2(p + rec - 2); }

static unsigned heap_no(const uint8_t *p, uint32_t rec, bool comp)
{
	return ppl_rd2(p + rec - (comp ? 4 : 5)) >> 3;
}

static unsigned n_owned(const uint8_t *p, uint32_t rec, bool comp) { return p[rec - (comp ? 5 : 6)] & 15; }

/* The user records in list order; -1 if the list does not reach the
 * supremum, or the directory does not describe the list: slot 0 holds the
 * infimum (owning itself), the last the supremum, each slot's record owns
 * the records since the previous slot's, 4..8 of them except in the first
 * and last slots, and no other record owns any. */
static int walk(const uint8_t *p, size_t size, bool comp, uint32_t *out)
{
	const uint32_t inf = comp ? NEW_INFIMUM : OLD_INFIMUM, sup = comp ? NEW_SUPREMUM : OLD_SUPREMUM;
	const unsigned nslots = ppl_rd2(p + N_DIR_SLOTS);
	if (nslots < 2 || size - 8 - 2 * nslots < ppl_rd2(p + HEAP_TOP))
		return -1;
	if (ppl_rd2(p + size - 10) != inf || n_owned(p, inf, comp) != 1)
		return -1;
	unsigned slot = 1, since = 0;
	int n = 0;
	uint32_t rec = inf;
	for (;;) {
		rec = comp ? next_new(p, size, rec) : next_old(p, rec);
		if (rec != sup && (rec < (comp ? NEW_SUPREMUM_END : OLD_SUPREMUM_END) || rec >= ppl_rd2(p + HEAP_TOP) ||
				   n >= MAXREC))
			return -1;
		since++;
		const unsigned own = n_owned(p, rec, comp);
		if (own) {
			if (slot >= nslots || ppl_rd2(p + size - 10 - 2 * slot) != rec || own != since)
				return -1;
			if (rec != sup && (own < 4 || own > 8))
				return -1;
			slot++;
			since = 0;
		}
		if (rec == sup)
			return slot == nslots && own ? n : -1;
		out[n++] = rec;
	}
}

/* How many records of DYN_SIZE fill about nine tenths of the page. */
static unsigned fill_count(size_t size, unsigned rec_size) { return (unsigned)((size - 200) * 9 / 10 / rec_size); }

/* The deletes: every third record, alternating between the low and the
 * high end so that the PAGE_FREE list jumps across the whole page both
 * ways. The last record is kept: deleting it would shrink the heap
 * instead of freeing it (page_mem_free). */
static unsigned delete_order(unsigned n, unsigned *ks)
{
	unsigned lo = 1, hi = (n - 1) / 3 * 3 + 1, m = 0;
	if (hi >= n - 1)
		hi -= 3;
	while (lo <= hi) {
		ks[m++] = lo;
		if (hi != lo)
			ks[m++] = hi;
		lo += 3;
		hi -= 3;
	}
	return m;
}

static void fill_dynamic(uint8_t *p, size_t size, unsigned n)
{
	new_index_page(p, size, true);
	uint32_t prev = NEW_INFIMUM;
	for (unsigned k = 0; k < n; k++) {
		CHECK(dyn_insert(p, size, false, prev, k) == PPL_APPLY_OK);
		prev = dyn_origin(k);
	}
}

static void test_dynamic(size_t size)
{
	const unsigned n = fill_count(size, DYN_SIZE);
	uint32_t recs[MAXREC];
	prev3 = 0;
	fill_dynamic(page, size, n);
	CHECK_EQ_U(walk(page, size, true, recs), n);
	for (unsigned k = 0; k < n; k++) {
		CHECK_EQ_U(recs[k], dyn_origin(k));
		CHECK_EQ_U(heap_no(page, recs[k], true), k + 2);
		CHECK_EQ_U(page[recs[k] - 3] & 7, 0); /* ordinary leaf record */
		CHECK_EQ_U(page[recs[k] + DYN_DATA - 1], pattern(k, DYN_DATA - 1));
	}
	CHECK_EQ_U(ppl_rd2(page + HEAP_TOP), NEW_SUPREMUM_END + n * DYN_SIZE);
	CHECK_EQ_U(ppl_rd2(page + N_HEAP), 0x8000u | (n + 2));
	CHECK_EQ_U(ppl_rd2(page + N_RECS), n);
	CHECK_EQ_U(ppl_rd2(page + LAST_INSERT), dyn_origin(n - 1));
	CHECK_EQ_U(page[DIRECTION_B], PAGE_RIGHT);
	CHECK_EQ_U(ppl_rd2(page + N_DIRECTION), n - 1);
	if (size == 65536) {
		/* what this test is for: the encodings 16 KiB pages never reach */
		CHECK(ppl_rd2(page + HEAP_TOP) > 49152 && n + 2 > 511);
		CHECK(prev3 > 100);
		/* the last record links back to the supremum over more than 32 KiB */
		CHECK(recs[n - 1] - NEW_SUPREMUM > 32768);
	}

	/* Delete a third of them, then put each back where it was, reusing
	 * PAGE_FREE's record each time. */
	unsigned ks[MAXREC];
	const unsigned m = delete_order(n, ks);
	for (unsigned i = 0; i < m; i++)
		CHECK(dyn_delete(page, size, dyn_origin(ks[i] - 1)) == PPL_APPLY_OK);
	CHECK_EQ_U(walk(page, size, true, recs), n - m);
	CHECK_EQ_U(ppl_rd2(page + N_RECS), n - m);
	CHECK_EQ_U(ppl_rd2(page + GARBAGE), m * DYN_SIZE);
	CHECK_EQ_U(ppl_rd2(page + LAST_INSERT), 0);
	/* the free list, newest first, linked by distances modulo the page */
	uint32_t f = ppl_rd2(page + FREE);
	for (unsigned i = m; i--;) {
		CHECK_EQ_U(f, dyn_origin(ks[i]));
		/* page_mem_free() clears the freed record but its link */
		CHECK_EQ_U(page[f + DYN_DATA - 1], 0);
		f = next_new(page, size, f);
	}
	CHECK_EQ_U(f, 0);
	for (unsigned i = m; i--;) {
		unsigned k = (unsigned)((ppl_rd2(page + FREE) - dyn_origin(0)) / DYN_SIZE);
		CHECK_EQ_U(k, ks[i]);
		CHECK(dyn_insert(page, size, true, dyn_origin(k - 1), k) == PPL_APPLY_OK);
	}
	CHECK_EQ_U(walk(page, size, true, recs), n);
	for (unsigned k = 0; k < n; k++) {
		CHECK_EQ_U(recs[k], dyn_origin(k));
		CHECK_EQ_U(heap_no(page, recs[k], true), k + 2);
		CHECK_EQ_U(page[recs[k] + DYN_DATA - 1], pattern(k, DYN_DATA - 1));
	}
	CHECK_EQ_U(ppl_rd2(page + FREE), 0);
	CHECK_EQ_U(ppl_rd2(page + GARBAGE), 0);
	CHECK_EQ_U(ppl_rd2(page + HEAP_TOP), NEW_SUPREMUM_END + n * DYN_SIZE);

	/* Deleting the last record links its predecessor to the supremum,
	 * across most of the page, and gives its space back to the heap. */
	CHECK(dyn_delete(page, size, dyn_origin(n - 2)) == PPL_APPLY_OK);
	CHECK_EQ_U(walk(page, size, true, recs), n - 1);
	CHECK_EQ_U(next_new(page, size, dyn_origin(n - 2)), NEW_SUPREMUM);
	CHECK_EQ_U(ppl_rd2(page + HEAP_TOP), NEW_SUPREMUM_END + (n - 1) * DYN_SIZE);
	CHECK_EQ_U(ppl_rd2(page + N_HEAP), 0x8000u | (n + 1));
	CHECK_EQ_U(ppl_rd2(page + FREE), 0);
	CHECK_EQ_U(ppl_rd2(page + GARBAGE), 0);
}

/* The same records on a 4 KiB page and on a larger one: everything from
 * the page header to PAGE_HEAP_TOP and the directory (counted from the end)
 * must be the same bytes, and nothing in between. */
static void test_only_the_directory_moves(size_t size)
{
	const unsigned n = fill_count(4096, DYN_SIZE);
	unsigned ks[MAXREC];
	const unsigned m = delete_order(n, ks);
	uint8_t *pages[2] = {small_page, page};
	const size_t sizes[2] = {4096, size};
	for (int i = 0; i < 2; i++) {
		fill_dynamic(pages[i], sizes[i], n);
		for (unsigned j = 0; j < m; j++)
			CHECK(dyn_delete(pages[i], sizes[i], dyn_origin(ks[j] - 1)) == PPL_APPLY_OK);
	}
	const size_t top = ppl_rd2(page + HEAP_TOP), dir = 2u * ppl_rd2(page + N_DIR_SLOTS) + 8;
	CHECK(!memcmp(small_page, page, top));
	CHECK(!memcmp(small_page + 4096 - dir, page + size - dir, dir));
	size_t nonzero = 0;
	for (size_t i = top; i < size - dir; i++)
		nonzero += page[i] != 0;
	CHECK_EQ_U(nonzero, 0);
}

/* ---- REDUNDANT --------------------------------------------------------- */

static uint32_t old_origin(unsigned k) { return OLD_SUPREMUM_END + k * OLD_SIZE + OLD_EXTRA; }

static enum ppl_apply_status old_insert(size_t size, bool reuse, uint32_t prev_origin, unsigned k)
{
	uint8_t b[16 + OLD_DATA];
	size_t n = 0;
	b[n++] = reuse ? PPL_EXT_INSERT_REUSE_REDUNDANT : PPL_EXT_INSERT_HEAP_REDUNDANT;
	n += prev_varint(b + n, prev_origin - OLD_INFIMUM);
	b[n++] = 1 << 2; /* one field, 1-byte offsets, info bits 0 */
	b[n++] = 0;      /* hdr_c */
	b[n++] = 0;      /* data_c */
	b[n++] = OLD_DATA; /* end offset of the field */
	for (unsigned i = 0; i < OLD_DATA; i++)
		b[n++] = pattern(k, i);
	return ext(page, size, b, n);
}

static enum ppl_apply_status old_delete(size_t size, uint32_t prev_origin)
{
	uint8_t b[8];
	size_t n = 0;
	b[n++] = PPL_EXT_DELETE_ROW_FORMAT_REDUNDANT;
	n += prev_varint(b + n, prev_origin - OLD_INFIMUM);
	return ext(page, size, b, n);
}

static void test_redundant(size_t size)
{
	const unsigned n = fill_count(size, OLD_SIZE);
	uint32_t recs[MAXREC];
	prev3 = 0;
	new_index_page(page, size, false);
	uint32_t prev = OLD_INFIMUM;
	for (unsigned k = 0; k < n; k++) {
		CHECK(old_insert(size, false, prev, k) == PPL_APPLY_OK);
		prev = old_origin(k);
	}
	CHECK_EQ_U(walk(page, size, false, recs), n);
	for (unsigned k = 0; k < n; k++) {
		CHECK_EQ_U(recs[k], old_origin(k));
		CHECK_EQ_U(heap_no(page, recs[k], false), k + 2);
		CHECK_EQ_U(page[recs[k] - OLD_EXTRA], OLD_DATA);
	}
	CHECK_EQ_U(ppl_rd2(page + HEAP_TOP), OLD_SUPREMUM_END + n * OLD_SIZE);
	CHECK_EQ_U(ppl_rd2(page + N_HEAP), n + 2);
	if (size == 65536)
		CHECK(ppl_rd2(page + HEAP_TOP) > 49152 && n + 2 > 511 && prev3 > 100);

	unsigned ks[MAXREC];
	const unsigned m = delete_order(n, ks);
	for (unsigned i = 0; i < m; i++)
		CHECK(old_delete(size, old_origin(ks[i] - 1)) == PPL_APPLY_OK);
	CHECK_EQ_U(walk(page, size, false, recs), n - m);
	CHECK_EQ_U(ppl_rd2(page + GARBAGE), m * OLD_SIZE);
	uint32_t f = ppl_rd2(page + FREE);
	for (unsigned i = m; i--;) {
		CHECK_EQ_U(f, old_origin(ks[i]));
		f = next_old(page, f);
	}
	CHECK_EQ_U(f, 0);
	for (unsigned i = m; i--;) {
		unsigned k = (unsigned)((ppl_rd2(page + FREE) - old_origin(0)) / OLD_SIZE);
		CHECK_EQ_U(k, ks[i]);
		CHECK(old_insert(size, true, old_origin(k - 1), k) == PPL_APPLY_OK);
	}
	CHECK_EQ_U(walk(page, size, false, recs), n);
	for (unsigned k = 0; k < n; k++) {
		CHECK_EQ_U(recs[k], old_origin(k));
		CHECK_EQ_U(heap_no(page, recs[k], false), k + 2);
	}
	CHECK_EQ_U(ppl_rd2(page + GARBAGE), 0);
	CHECK_EQ_U(ppl_rd2(page + FREE), 0);

	CHECK(old_delete(size, old_origin(n - 2)) == PPL_APPLY_OK);
	CHECK_EQ_U(walk(page, size, false, recs), n - 1);
	CHECK_EQ_U(next_old(page, old_origin(n - 2)), OLD_SUPREMUM);
	CHECK_EQ_U(ppl_rd2(page + HEAP_TOP), OLD_SUPREMUM_END + (n - 1) * OLD_SIZE);
	CHECK_EQ_U(ppl_rd2(page + N_HEAP), n + 1);
	CHECK_EQ_U(ppl_rd2(page + FREE), 0);
}

/* ---- undo pages ---------------------------------------------------------- */

#define UNDO_FREE (38u + 4u)

/* log_phys_t::undo_append: the record, 4 bytes of links, and 6 more must
 * stay below the page trailer. */
static void test_undo_append_at_the_end(size_t size)
{
	uint8_t body[1 + 300];
	const size_t len = 300;
	body[0] = PPL_EXT_UNDO_APPEND;
	for (size_t i = 0; i < len; i++)
		body[1 + i] = (uint8_t)(i * 3);
	const uint8_t init = PPL_EXT_UNDO_INIT;
	const uint32_t last_ok = (uint32_t)(size - 8 - 6 - len - 1);

	memset(page, 0, size);
	ppl_wr4(page + PPL_FIL_PAGE_OFFSET, PAGENO);
	CHECK(ext(page, size, &init, 1) == PPL_APPLY_OK);
	ppl_wr2(page + UNDO_FREE, last_ok);
	CHECK(ext(page, size, body, 1 + len) == PPL_APPLY_OK);
	CHECK_EQ_U(ppl_rd2(page + UNDO_FREE), last_ok + 4 + len);
	CHECK_EQ_U(ppl_rd2(page + last_ok), last_ok + 4 + len);
	CHECK(!memcmp(page + last_ok + 2, body + 1, len));
	CHECK_EQ_U(ppl_rd2(page + last_ok + 2 + len), last_ok);

	struct ppl_page_ref r = ref_of(page, size);
	struct ppl_apply_error e;
	ppl_wr2(page + UNDO_FREE, last_ok + 1);
	CHECK(ppl_apply_extended(&r, body, 1 + len, &e) == PPL_APPLY_CORRUPT);
	CHECK_EQ_U(ppl_rd2(page + UNDO_FREE), last_ok + 1);
}

/* ---- byte records at the very end of a 64 KiB page ----------------------- */

/* A WRITE may end at byte 65536 (its 16-bit end offset would wrap to 0 in
 * log_phys_t::apply), but MariaDB's parser, which keeps the end offset in
 * a wider type, refuses any same-page record after it as corrupt log; so
 * do the record iterator and the applier, instead of writing near byte 0. */
static void test_write_to_the_last_byte(void)
{
	const size_t size = 65536;
	memset(page, 0, size);
	const uint8_t d[8] = {1, 2, 3, 4, 5, 6, 7, 8};
	uint8_t recs[64];
	size_t n = syn_write_rec(recs, SPACE, PAGENO, (uint32_t)(size - 8), d, 8);
	struct ppl_page_ref r = ref_of(page, size);
	struct ppl_apply_cursor cur = {0};
	struct ppl_apply_error e;
	bool mod;
	CHECK(ppl_apply_mtr_recs(&r, &cur, recs, n, &mod, &e) == PPL_APPLY_OK);
	CHECK(!memcmp(page + size - 8, d, 8));

	recs[n++] = 0x80 | 0x30 | 2; /* same-page WRITE: offset +8 (from 65536), one byte */
	recs[n++] = 8;
	recs[n++] = 0xee;
	cur.last_offset = 0;
	CHECK(ppl_apply_mtr_recs(&r, &cur, recs, n, &mod, &e) == PPL_APPLY_CORRUPT);
	CHECK_EQ_U(page[8], 0);
	struct ppl_rec_iter it;
	struct ppl_rec rec;
	ppl_rec_iter_init(&it, recs, n, size);
	CHECK_EQ_U(ppl_rec_next(&it, &rec), 1);
	CHECK_EQ_U(ppl_rec_next(&it, &rec), (unsigned long long)-1);
}

/* ---- sizes InnoDB does not have ------------------------------------------ */

static void test_not_a_page_size(void)
{
	static const size_t bad[] = {2048, 12288, 131072};
	const uint8_t sub = PPL_EXT_INIT_ROW_FORMAT_DYNAMIC;
	for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
		struct ppl_page_ref r = ref_of(page, bad[i]);
		struct ppl_apply_error e;
		memset(page, 0x5a, sizeof page);
		CHECK(ppl_apply_extended(&r, &sub, 1, &e) == PPL_APPLY_UNSUPPORTED);
		CHECK(strstr(e.msg, "not an InnoDB page size") != NULL);
		uint8_t recs[32];
		size_t n = syn_write_rec(recs, SPACE, PAGENO, 100, "x", 1);
		struct ppl_apply_cursor cur = {0};
		bool mod = true;
		CHECK(ppl_apply_mtr_recs(&r, &cur, recs, n, &mod, &e) == PPL_APPLY_UNSUPPORTED);
		CHECK(!mod && strstr(e.msg, "not an InnoDB page size") != NULL);
		CHECK_EQ_U(page[100], 0x5a);
	}
}

int main(void)
{
	for (size_t size = 4096; size <= 65536; size *= 2) {
		test_dynamic(size);
		test_redundant(size);
		test_undo_append_at_the_end(size);
		if (size > 4096)
			test_only_the_directory_moves(size);
	}
	test_write_to_the_last_byte();
	test_not_a_page_size();
	CHECK_DONE();
}
