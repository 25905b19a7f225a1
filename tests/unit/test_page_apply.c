/* Byte records (WRITE, MEMSET, MEMMOVE), INIT_PAGE and FREE_PAGE applied to
 * a page, the LSN rules of recovery, and the final LSN/checksum stamp. */
#include <string.h>

#include "check.h"
#include "ppl/crc32c.h"
#include "ppl/page.h"
#include "ppl/page_apply.h"
#include "redo_synth.h"

#define PS 16384
static uint8_t page[PS], before[PS];

static struct ppl_page_ref ref(uint32_t space, uint32_t no)
{
	struct ppl_page_ref r = {page, PS, space, no};
	return r;
}

static void fresh_page(uint32_t space, uint32_t no, uint64_t lsn)
{
	memset(page, 0, PS);
	ppl_wr4(page + PPL_FIL_PAGE_OFFSET, no);
	ppl_wr4(page + PPL_FIL_PAGE_SPACE_ID, space);
	for (int i = 100; i < 700; i++)
		page[i] = (uint8_t)i;
	ppl_page_stamp(page, PS, lsn);
}

static void test_byte_records(void)
{
	fresh_page(5, 9, 1000);
	uint8_t recs[256];
	size_t n = 0;
	const uint8_t d[4] = {0xde, 0xad, 0xbe, 0xef};
	n += syn_write_rec(recs + n, 5, 9, 200, d, 4);      /* bytes 200..203 */
	recs[n++] = 0x80 | 0x40 | 3;                         /* MEMSET same page: +6 -> 210, 5 bytes of 0x77 */
	recs[n++] = 6;
	recs[n++] = 5;
	recs[n++] = 0x77;
	recs[n++] = 0x80 | 0x40 | 4;                         /* MEMSET +0 -> 215, 5 bytes of pattern ab cd */
	recs[n++] = 0;
	recs[n++] = 5;
	recs[n++] = 0xab;
	recs[n++] = 0xcd;
	recs[n++] = 0x80 | 0x50 | 3;                         /* MEMMOVE +5 -> 225, 4 bytes from 225-25=200 */
	recs[n++] = 5;
	recs[n++] = 4;
	recs[n++] = (25 - 1) << 1 | 1;
	memcpy(before, page, PS);
	struct ppl_page_ref r = ref(5, 9);
	struct ppl_apply_cursor cur = {0};
	bool mod;
	struct ppl_apply_error e;
	CHECK(ppl_apply_mtr_recs(&r, &cur, recs, n, &mod, &e) == PPL_APPLY_OK);
	CHECK(mod);
	CHECK(!memcmp(page + 200, d, 4));
	for (int i = 210; i < 215; i++)
		CHECK_EQ_U(page[i], 0x77);
	const uint8_t pat[5] = {0xab, 0xcd, 0xab, 0xcd, 0xab};
	CHECK(!memcmp(page + 215, pat, 5));
	CHECK(!memcmp(page + 225, d, 4));
	CHECK(!memcmp(page + 229, before + 229, PS - 229 - 8));
	CHECK_EQ_U(cur.last_offset, 229);

	/* A record for another page, or running outside the page, is corrupt. */
	n = syn_write_rec(recs, 5, 10, 200, d, 4);
	CHECK(ppl_apply_mtr_recs(&r, &cur, recs, n, &mod, &e) == PPL_APPLY_CORRUPT);
	n = syn_write_rec(recs, 5, 9, PS - 2, d, 4);
	CHECK(ppl_apply_mtr_recs(&r, &cur, recs, n, &mod, &e) == PPL_APPLY_CORRUPT);
	CHECK(e.rec_type == 0x30 && e.msg[0]);
	/* MEMMOVE whose source lies before byte 8 */
	n = syn_write_rec(recs, 5, 9, 10, d, 1);
	recs[n++] = 0x80 | 0x50 | 3;
	recs[n++] = 0;
	recs[n++] = 4;
	recs[n++] = (10 - 1) << 1 | 1;
	CHECK(ppl_apply_mtr_recs(&r, &cur, recs, n, &mod, &e) == PPL_APPLY_CORRUPT);
}

static void test_init_free(void)
{
	fresh_page(5, 9, 1000);
	uint8_t recs[64];
	size_t n = 0;
	recs[n++] = 0x10 | 2; /* INIT_PAGE 5:9 */
	recs[n++] = 5;
	recs[n++] = 9;
	const uint8_t t[2] = {0x45, 0xbf}; /* same-page WRITE at FIL_PAGE_TYPE (+0) */
	recs[n++] = 0x80 | 0x30 | 3;
	recs[n++] = 0;
	memcpy(recs + n, t, 2);
	n += 2;
	struct ppl_page_ref r = ref(5, 9);
	struct ppl_apply_cursor cur = {0};
	bool mod;
	struct ppl_apply_error e;
	CHECK(ppl_apply_mtr_recs(&r, &cur, recs, n, &mod, &e) == PPL_APPLY_OK);
	CHECK(mod);
	CHECK_EQ_U(ppl_page_no(page), 9);
	CHECK_EQ_U(ppl_page_space(page), 5);
	CHECK_EQ_U(ppl_rd4(page + PPL_FIL_PAGE_PREV), 0xffffffffu);
	CHECK_EQ_U(ppl_rd4(page + PPL_FIL_PAGE_NEXT), 0xffffffffu);
	CHECK_EQ_U(ppl_page_type(page), 0x45bf);
	CHECK_EQ_U(page[300], 0);

	/* FREE_PAGE changes nothing and forbids a following same-page record. */
	memcpy(before, page, PS);
	n = 0;
	recs[n++] = 0x00 | 2;
	recs[n++] = 5;
	recs[n++] = 9;
	CHECK(ppl_apply_mtr_recs(&r, &cur, recs, n, &mod, &e) == PPL_APPLY_OK);
	CHECK(!mod);
	CHECK(!memcmp(page, before, PS));
	recs[n++] = 0x80 | 0x30 | 2;
	recs[n++] = 40;
	recs[n++] = 1;
	CHECK(ppl_apply_mtr_recs(&r, &cur, recs, n, &mod, &e) == PPL_APPLY_CORRUPT);
}

static void test_replay_rules(void)
{
	/* Page at LSN 1000. mtr A (start 900) is in it already; B (start 1000)
	 * and C (start 1100) are applied; the page ends at C's end LSN. */
	fresh_page(5, 9, 1000);
	uint8_t a[32], b[32], c[32];
	const uint8_t x = 0x11, y = 0x22, z = 0x33;
	size_t na = syn_write_rec(a, 5, 9, 500, &x, 1);
	size_t nb = syn_write_rec(b, 5, 9, 501, &y, 1);
	size_t nc = syn_write_rec(c, 5, 9, 502, &z, 1);
	struct ppl_page_ref r = ref(5, 9);
	struct ppl_page_replay rp;
	struct ppl_apply_error e;
	ppl_replay_begin(&rp, &r, 0);
	CHECK(ppl_replay_mtr(&rp, 900, 1000, a, na, &e) == PPL_APPLY_OK);
	CHECK(ppl_replay_mtr(&rp, 1000, 1100, b, nb, &e) == PPL_APPLY_OK);
	CHECK(ppl_replay_mtr(&rp, 1100, 1150, c, nc, &e) == PPL_APPLY_OK);
	CHECK_EQ_U(rp.skipped, 1);
	CHECK_EQ_U(rp.applied, 2);
	CHECK(ppl_replay_finish(&rp));
	CHECK_EQ_U(page[500], 500 & 0xff); /* A skipped: byte untouched */
	CHECK_EQ_U(page[501], 0x22);
	CHECK_EQ_U(page[502], 0x33);
	CHECK_EQ_U(ppl_page_lsn(page), 1150);
	CHECK_EQ_U(ppl_rd4(page + PS - 8), 1150);
	CHECK(ppl_page_crc_ok(page, PS));

	/* Everything already in the page: nothing to write. */
	ppl_replay_begin(&rp, &r, 0);
	CHECK(ppl_replay_mtr(&rp, 1000, 1100, b, nb, &e) == PPL_APPLY_OK);
	CHECK(!ppl_replay_finish(&rp));

	/* Initialized by the log at LSN 2000: earlier mtrs are void even if the
	 * page's stored LSN is stale or garbage. */
	fresh_page(5, 9, 99999999);
	uint8_t init[8] = {0x10 | 2, 5, 9};
	ppl_replay_begin(&rp, &r, 2000);
	CHECK(ppl_replay_mtr(&rp, 1500, 1600, a, na, &e) == PPL_APPLY_OK);
	CHECK(ppl_replay_mtr(&rp, 2000, 2010, init, 3, &e) == PPL_APPLY_OK);
	CHECK(ppl_replay_mtr(&rp, 2010, 2020, b, nb, &e) == PPL_APPLY_OK);
	CHECK(ppl_replay_finish(&rp));
	CHECK_EQ_U(page[500], 0);
	CHECK_EQ_U(page[501], 0x22);
	CHECK_EQ_U(ppl_page_lsn(page), 2020);

	/* Freed last: the page is left as it was on disk. */
	uint8_t fr[4] = {0x00 | 2, 5, 9};
	fresh_page(5, 9, 1000);
	ppl_replay_begin(&rp, &r, 1200);
	CHECK(ppl_replay_mtr(&rp, 1100, 1150, c, nc, &e) == PPL_APPLY_OK);
	CHECK(ppl_replay_mtr(&rp, 1200, 1210, fr, 3, &e) == PPL_APPLY_OK);
	CHECK(!ppl_replay_finish(&rp));
}

static void test_stamp(void)
{
	fresh_page(1, 2, 0x123456789abcull);
	CHECK_EQ_U(ppl_page_lsn(page), 0x123456789abcull);
	CHECK_EQ_U(ppl_rd4(page + PS - 8), 0x56789abcu);
	CHECK_EQ_U(ppl_rd4(page + PS - 4), ppl_crc32c(0, page, PS - 4));
	CHECK(ppl_page_crc_ok(page, PS));
	page[1000] ^= 1;
	CHECK(!ppl_page_crc_ok(page, PS));
	CHECK_EQ_U(ppl_fsp_flags_page_size(0x15), 16384);
	CHECK_EQ_U(ppl_fsp_flags_page_size(0x13), 4096);
	CHECK_EQ_U(ppl_fsp_flags_page_size(0x14), 8192);
	CHECK_EQ_U(ppl_fsp_flags_page_size(0x05), 0); /* not full_crc32 */
}

int main(void)
{
	test_byte_records();
	test_init_free();
	test_replay_rules();
	test_stamp();
	CHECK_DONE();
}
