/* The storage engine on a synthetic log: indexing per page, INIT_PAGE
 * voiding earlier records (also earlier in the same mtr), rebuilds with the
 * LSN rule, the elision decision (ACK only for the exact LSN and checksum;
 * a mismatch marks the page diverged), full writes as new bases, and a
 * page's chunks taken out and put back (the pool's round trip), and a page
 * written without redo superseding every record parsed before it. */
#include <string.h>

#include "check.h"
#include "ppl/elision_proto.h"
#include "ppl/node.h"
#include "ppl/page.h"
#include "redo_synth.h"

#define PS 16384
static uint8_t disk[PS]; /* the data-file copy of page 5:9 */

static int read_disk(void *arg, uint32_t space, uint32_t page_no, uint8_t *frame)
{
	(void)arg;
	if (space != 5 || page_no != 9)
		return -1;
	memcpy(frame, disk, PS);
	return 0;
}

static size_t init_rec(uint8_t *p, uint32_t space, uint32_t page)
{
	p[0] = 0x10 | 2;
	p[1] = (uint8_t)space;
	p[2] = (uint8_t)page;
	return 3;
}

struct copy_to {
	struct ppl_node *n;
	uint32_t space, page_no;
	unsigned count, inits;
};

static int copy_chunk(void *arg, uint64_t start_lsn, uint64_t end_lsn, bool from_init, const uint8_t *recs,
		      size_t len)
{
	struct copy_to *c = arg;
	c->count++;
	c->inits += from_init;
	return ppl_node_add_chunk(c->n, c->space, c->page_no, start_lsn, end_lsn, from_init, recs, len);
}

/* A rebuild resumed from an image an earlier rebuild of the same base
 * produced (the rebuilt-page cache's) gives the page a rebuild from the
 * base gives, for every split of a history of writes to one page that is
 * initialized, written, freed and initialized again: the image from the base up to mtr k, resumed up to
 * mtr j, equals the base rebuilt up to mtr j, byte for byte, and both
 * say the same about whether the page changed. Only the mtrs after k are
 * applied. */
static void test_resume(void)
{
	struct synlog l;
	syn_init(&l, 1 << 20, 12288);
	enum { N = 40 };
	uint64_t ends[N];
	uint32_t seed = 12345;
	bool freed = false;
	for (int i = 0; i < N; i++) {
		uint8_t rec[256], data[32];
		size_t k = 0;
		seed = seed * 1103515245u + 12345u;
		if (freed || i == 3) { /* (re)initialized, and written in the same mtr */
			k += init_rec(rec + k, 5, 9);
			freed = false;
		} else if (i == N - 10) {
			k += syn_free_page_rec(rec + k, 5, 9);
			freed = true;
		}
		if (!freed) {
			for (unsigned b = 0; b < sizeof data; b++)
				data[b] = (uint8_t)(seed >> (b % 24));
			uint32_t off = 100 + (seed >> 8) % (PS - 300);
			k += syn_write_rec(rec + k, 5, 9, off, data, 1 + (seed >> 4) % sizeof data);
		}
		syn_mtr(&l, rec, k);
		ends[i] = l.lsn;
	}
	static uint8_t base[PS], img[PS], full[PS];
	memset(base, 0, PS);
	ppl_wr4(base + PPL_FIL_PAGE_OFFSET, 9);
	ppl_wr4(base + PPL_FIL_PAGE_SPACE_ID, 5);
	memset(base + 200, 0x5c, 1000);
	ppl_page_stamp(base, PS, 12288);
	struct ppl_node_config cfg = {.page_size = PS};
	unsigned compared = 0, across_init = 0;
	for (int k = 0; k < N; k++) {
		/* the image: rebuilt while the log reached mtr k (a later
		 * initialization not parsed yet), as the cache would keep it */
		struct ppl_node *n = ppl_node_new(&cfg);
		uint8_t ck[64];
		size_t at = syn_off(&l, ends[k]), from = at & ~(size_t)511;
		CHECK(ppl_node_log_open(n, l.size) == 0);
		CHECK(ppl_node_log_write(n, 0, l.file, at) == 0);
		syn_checkpoint(ck, l.first_lsn, ends[k]);
		CHECK(ppl_node_log_write(n, 8192, ck, sizeof(ck)) == 0);
		CHECK_EQ_U(ppl_node_parsed_lsn(n), ends[k]);
		bool img_changed, full_changed, res_changed;
		struct ppl_apply_error e;
		struct ppl_node_page_info before, after;
		memcpy(img, base, PS);
		CHECK(ppl_node_page_info(n, 5, 9, &before));
		CHECK(ppl_node_rebuild(n, 5, 9, img, UINT64_MAX, &img_changed, &e) == PPL_APPLY_OK);
		/* the rest of the log */
		CHECK(ppl_node_log_write(n, from, l.file + from, syn_off(&l, l.lsn) - from) == 0);
		syn_checkpoint(ck, l.first_lsn, l.lsn);
		CHECK(ppl_node_log_write(n, 4096, ck, sizeof(ck)) == 0);
		CHECK_EQ_U(ppl_node_parsed_lsn(n), l.lsn);
		CHECK(ppl_node_page_info(n, 5, 9, &after));
		for (int j = k; img_changed && j < N; j++) {
			/* a page's records before its last initialization are
			 * dropped from its rebuild: it has no state before it */
			if (after.from_init && after.init_lsn >= ends[j])
				continue;
			unsigned applied = 0;
			static uint8_t res[PS];
			memcpy(res, img, PS);
			memcpy(full, base, PS);
			CHECK(ppl_node_rebuild(n, 5, 9, full, ends[j], &full_changed, &e) == PPL_APPLY_OK);
			CHECK(ppl_node_rebuild_resumed(n, 5, 9, res, ends[j], &res_changed, &applied, &e) ==
			      PPL_APPLY_OK);
			CHECK(res_changed == full_changed);
			if (full_changed)
				CHECK(memcmp(res, full, PS) == 0);
			CHECK(applied <= (unsigned)(j - k));
			compared++;
			across_init += after.init_lsn != before.init_lsn && after.init_lsn <= ends[j];
		}
		ppl_node_free(n);
	}
	CHECK(compared >= 300);
	CHECK(across_init > 0);
	free(l.file);
}

int main(void)
{
	test_resume();
	struct synlog l;
	syn_init(&l, 1 << 20, 12288);
	/* base page on disk at LSN 12288 */
	memset(disk, 0, PS);
	ppl_wr4(disk + PPL_FIL_PAGE_OFFSET, 9);
	ppl_wr4(disk + PPL_FIL_PAGE_SPACE_ID, 5);
	ppl_page_stamp(disk, PS, 12288);

	uint8_t rec[64];
	const uint8_t a = 0xaa, b = 0xbb;
	size_t k = syn_write_rec(rec, 5, 9, 300, &a, 1);
	uint64_t m1 = syn_mtr(&l, rec, k);
	k = syn_write_rec(rec, 5, 9, 301, &b, 1);
	uint64_t m2 = syn_mtr(&l, rec, k);
	/* page 5:10: a WRITE then INIT_PAGE in the same mtr: the WRITE is void */
	k = syn_write_rec(rec, 5, 10, 400, &a, 1);
	k += init_rec(rec + k, 5, 10);
	uint64_t m3 = syn_mtr(&l, rec, k);
	uint64_t end = l.lsn;

	struct ppl_node_config cfg = {.page_size = PS};
	struct ppl_node *n = ppl_node_new(&cfg);
	CHECK(ppl_node_log_write(n, 0, l.file, 100) == -1); /* before log_open: refused */
	CHECK(ppl_node_log_open(n, l.size) == 0);
	CHECK(ppl_node_log_write(n, 0, l.file, syn_off(&l, end)) == 0);
	/* the write's last block may still change (redo_reader.c): nothing
	 * in it is parsed until the server's checkpoint says it is final */
	CHECK(ppl_node_parsed_lsn(n) < end);
	uint8_t ck[64];
	syn_checkpoint(ck, l.first_lsn, end);
	CHECK(ppl_node_log_write(n, 8192, ck, sizeof(ck)) == 0);
	CHECK_EQ_U(ppl_node_parsed_lsn(n), end);

	struct ppl_node_page_info info;
	CHECK(ppl_node_page_info(n, 5, 9, &info));
	CHECK_EQ_U(info.chunks, 2);
	CHECK_EQ_U(info.first_lsn, m1);
	CHECK(!info.from_init);
	CHECK(ppl_node_page_info(n, 5, 10, &info));
	CHECK(info.from_init && info.chunks == 1 && info.init_lsn == m3);

	/* Rebuild 5:9 from the disk base: both bytes, LSN = end of m2. */
	uint8_t page[PS];
	memcpy(page, disk, PS);
	bool changed;
	struct ppl_apply_error e;
	CHECK(ppl_node_rebuild(n, 5, 9, page, UINT64_MAX, &changed, &e) == PPL_APPLY_OK && changed);
	CHECK(page[300] == 0xaa && page[301] == 0xbb);
	uint64_t lsn2 = ppl_page_lsn(page);
	CHECK_EQ_U(lsn2, m3); /* m2 ends where m3 starts */
	uint32_t crc2 = ppl_page_stored_crc(page, PS);
	/* Only up to m1. */
	memcpy(page, disk, PS);
	CHECK(ppl_node_rebuild(n, 5, 9, page, m2, &changed, &e) == PPL_APPLY_OK && changed);
	CHECK(page[300] == 0xaa && page[301] == 0);
	uint32_t crc1 = ppl_page_stored_crc(page, PS);

	/* 5:10 is built from the INIT alone; the voided WRITE is not in it. */
	uint8_t p10[PS];
	memset(p10, 0x77, PS);
	CHECK(ppl_node_rebuild(n, 5, 10, p10, UINT64_MAX, &changed, &e) == PPL_APPLY_OK && changed);
	CHECK(p10[400] == 0 && ppl_page_no(p10) == 10);

	/* The chunks as the pool keeps them, put back into a node that never
	 * saw the log (a restart): the same rebuilds, the initialization
	 * still voiding what came before it. */
	struct ppl_node *n2 = ppl_node_new(&cfg);
	struct copy_to cp = { n2, 5, 9, 0, 0 };
	CHECK(ppl_node_page_chunks(n, 5, 9, copy_chunk, &cp) == 0 && cp.count == 2 && cp.inits == 0);
	cp = (struct copy_to){ n2, 5, 10, 0, 0 };
	CHECK(ppl_node_page_chunks(n, 5, 10, copy_chunk, &cp) == 0 && cp.count == 1 && cp.inits == 1);
	CHECK(ppl_node_add_chunk(n2, 5, 9, m1, m2, false, rec, 4) == -1); /* before the page's last chunk */
	CHECK(ppl_node_page_info(n2, 5, 10, &info) && info.from_init && info.init_lsn == m3);
	uint8_t again[PS];
	memcpy(again, disk, PS);
	CHECK(ppl_node_rebuild(n2, 5, 9, again, UINT64_MAX, &changed, &e) == PPL_APPLY_OK && changed);
	CHECK(ppl_page_lsn(again) == lsn2 && ppl_page_stored_crc(again, PS) == crc2);
	memset(again, 0x55, PS);
	CHECK(ppl_node_rebuild(n2, 5, 10, again, UINT64_MAX, &changed, &e) == PPL_APPLY_OK);
	CHECK(memcmp(again, p10, PS) == 0);
	/* moved to the newest arena block: still the same page */
	ppl_node_rehome(n, 5, 9);
	memcpy(again, disk, PS);
	CHECK(ppl_node_rebuild(n, 5, 9, again, UINT64_MAX, &changed, &e) == PPL_APPLY_OK && changed);
	CHECK(ppl_page_stored_crc(again, PS) == crc2);
	CHECK(ppl_node_page_info(n, 5, 9, &info) && info.chunks == 2 && info.first_lsn == m1);
	ppl_node_free(n2);

	/* Elision: the exact page is accepted; an older LSN or another
	 * checksum is not. */
	CHECK_EQ_U(ppl_node_elide(n, 5, 9, lsn2, crc2, read_disk, NULL), PPL_ELIDE_ACK);
	CHECK_EQ_U(ppl_node_elide(n, 5, 9, m2, crc1, read_disk, NULL), PPL_ELIDE_NACK_LSN_AHEAD);
	CHECK_EQ_U(ppl_node_elide(n, 5, 9, end + 100, crc2, read_disk, NULL), PPL_ELIDE_NACK_NOT_DURABLE);
	CHECK_EQ_U(ppl_node_elide(n, 5, 77, lsn2, crc2, read_disk, NULL), PPL_ELIDE_NACK_UNKNOWN_PAGE);
	CHECK_EQ_U(ppl_node_elide(n, 5, 9, lsn2, crc2 ^ 1, read_disk, NULL), PPL_ELIDE_NACK_CHECKSUM);
	/* diverged: no more elisions for it until a real write arrives */
	CHECK(ppl_node_page_info(n, 5, 9, &info) && info.diverged);
	CHECK(ppl_node_elide(n, 5, 9, lsn2, crc2, read_disk, NULL) != PPL_ELIDE_ACK);

	/* The page as of m1 is written: it is the new base; m1's chunk goes. */
	memcpy(disk, page, PS); /* page holds the m1 rebuild */
	ppl_node_page_written(n, disk, 0);
	CHECK(ppl_node_page_info(n, 5, 9, &info));
	CHECK_EQ_U(info.chunks, 1);
	CHECK(!info.diverged);
	CHECK_EQ_U(ppl_node_elide(n, 5, 9, lsn2, crc2, read_disk, NULL), PPL_ELIDE_ACK);
	/* The page as of m2 is written: nothing pending. */
	memcpy(page, disk, PS);
	CHECK(ppl_node_rebuild(n, 5, 9, page, UINT64_MAX, &changed, &e) == PPL_APPLY_OK && changed);
	ppl_node_page_written(n, page, 0);
	CHECK(!ppl_node_page_info(n, 5, 9, &info));
	/* Nothing pending: only the page the data file holds can be elided. */
	CHECK_EQ_U(ppl_node_elide(n, 5, 9, lsn2, crc2, read_disk, NULL), PPL_ELIDE_NACK_UNKNOWN_PAGE);
	memcpy(disk, page, PS);
	CHECK_EQ_U(ppl_node_elide(n, 5, 9, lsn2, crc2, read_disk, NULL), PPL_ELIDE_ACK);
	CHECK_EQ_U(ppl_node_elide(n, 5, 9, lsn2, crc2 ^ 1, read_disk, NULL), PPL_ELIDE_NACK_UNKNOWN_PAGE);
	CHECK_EQ_U(ppl_node_elide(n, 5, 9, lsn2 + 1, crc2, read_disk, NULL), PPL_ELIDE_NACK_UNKNOWN_PAGE);

	/* Verify mode: a written page equal to the rebuild at its LSN, one
	 * that differs (reported, diverged), then the diverged page again:
	 * written in full since, not compared. */
	enum ppl_verify_skip skip = PPL_VERIFY_SKIP_COUNT;
	CHECK_EQ_U(ppl_node_verify(n, p10, read_disk, NULL, &skip), 1);
	CHECK_EQ_U(skip, PPL_VERIFY_COMPARED);
	p10[1000] ^= 1;
	CHECK_EQ_U(ppl_node_verify(n, p10, read_disk, NULL, &skip), -1);
	CHECK(ppl_node_page_info(n, 5, 10, &info) && info.diverged);
	p10[1000] ^= 1;
	CHECK_EQ_U(ppl_node_verify(n, p10, read_disk, NULL, &skip), 0);
	CHECK_EQ_U(skip, PPL_VERIFY_DIVERGED_BEFORE);

	/* Nothing pending for page 9: the page this node serves is its
	 * file's, so a write at the file's LSN is compared with it; other
	 * bytes at that LSN are a change without redo, an older LSN a
	 * client's replay, a newer one records the index should have held
	 * (unexplained), LSN 0 a page written without redo. */
	uint8_t w9[PS];
	ppl_node_page_written(n, disk, 0); /* page 9's elision above is over */
	memcpy(w9, disk, PS);
	CHECK_EQ_U(ppl_node_verify(n, w9, read_disk, NULL, &skip), 1);
	CHECK_EQ_U(skip, PPL_VERIFY_COMPARED);
	w9[2000] ^= 1;
	ppl_page_stamp(w9, PS, ppl_page_lsn(disk));
	CHECK_EQ_U(ppl_node_verify(n, w9, read_disk, NULL, &skip), 0);
	CHECK_EQ_U(skip, PPL_VERIFY_NO_REDO);
	CHECK(!ppl_node_page_info(n, 5, 9, &info));
	ppl_page_stamp(w9, PS, ppl_page_lsn(disk) - 1);
	CHECK_EQ_U(ppl_node_verify(n, w9, read_disk, NULL, &skip), 0);
	CHECK_EQ_U(skip, PPL_VERIFY_OLDER);
	ppl_page_stamp(w9, PS, ppl_page_lsn(disk) + 1);
	CHECK_EQ_U(ppl_node_verify(n, w9, read_disk, NULL, &skip), 0);
	CHECK_EQ_U(skip, PPL_VERIFY_RECORDS_GONE);
	CHECK(!ppl_verify_skip_explained(skip));
	ppl_page_stamp(w9, PS, 0);
	CHECK_EQ_U(ppl_node_verify(n, w9, read_disk, NULL, &skip), 0);
	CHECK_EQ_U(skip, PPL_VERIFY_NO_LSN);
	CHECK(ppl_verify_skip_explained(skip));
	/* the file's page damaged (a tool's; MariaDB writes it back from its
	 * doublewrite buffer): the write is the new base, explained */
	disk[3000] ^= 0x40;
	ppl_page_stamp(w9, PS, ppl_page_lsn(disk));
	CHECK_EQ_U(ppl_node_verify(n, w9, read_disk, NULL, &skip), 0);
	CHECK_EQ_U(skip, PPL_VERIFY_BASE_DAMAGED);
	CHECK(ppl_verify_skip_explained(skip));
	disk[3000] ^= 0x40;
	/* a page whose file cannot give it (read_disk knows only page 9) */
	w9[PPL_FIL_PAGE_OFFSET + 3] = 99; /* page 99 */
	ppl_page_stamp(w9, PS, ppl_page_lsn(disk));
	CHECK_EQ_U(ppl_node_verify(n, w9, read_disk, NULL, &skip), 0);
	CHECK_EQ_U(skip, PPL_VERIFY_NO_BASE);
	for (unsigned i = 0; i < PPL_VERIFY_SKIP_COUNT; i++)
		CHECK(strcmp(ppl_verify_skip_name((enum ppl_verify_skip)i), "?") != 0);

	/* A write at the LSN of the page its file holds, no record applied
	 * (the only one lies below that LSN), other bytes: a change without
	 * redo (a tool corrupting a page on purpose, a restore), not a
	 * divergence of the rebuild. */
	struct ppl_node *n3 = ppl_node_new(&cfg);
	CHECK(n3 != NULL);
	if (n3) {
		CHECK(ppl_node_add_chunk(n3, 5, 9, 1, ppl_page_lsn(disk), false, rec, 4) == 0);
		uint8_t tampered[PS];
		memcpy(tampered, disk, PS);
		CHECK_EQ_U(ppl_node_verify(n3, tampered, read_disk, NULL, NULL), 1);
		tampered[24] ^= 0x42; /* FIL_PAGE_TYPE, as innodb.alter_kill does */
		CHECK_EQ_U(ppl_node_verify(n3, tampered, read_disk, NULL, &skip), 0);
		CHECK_EQ_U(skip, PPL_VERIFY_NO_REDO);
		CHECK(ppl_node_page_info(n3, 5, 9, &info) && !info.diverged);
		/* asked to elide a page of other bytes at the file's LSN:
		 * refused (the write goes through), not diverged */
		CHECK_EQ_U(ppl_node_elide(n3, 5, 9, ppl_page_lsn(disk), ppl_page_stored_crc(disk, PS) ^ 1, read_disk,
					  NULL), PPL_ELIDE_NACK_CHECKSUM);
		CHECK(ppl_node_page_info(n3, 5, 9, &info) && !info.diverged);
		ppl_node_free(n3);
	}

	struct ppl_node_stats st;
	ppl_node_get_stats(n, &st);
	CHECK_EQ_U(st.mtrs, 3);
	CHECK(st.elide_acked == 3 && st.divergences == 2);

	/* A page written without redo (IMPORT TABLESPACE writes LSN 0): by
	 * its LSN alone it holds none of 5:10's records, and they would be
	 * applied over it; written with everything parsed so far superseded,
	 * none of them is left to apply. */
	uint8_t imported[PS];
	memset(imported, 0x33, PS);
	ppl_wr4(imported + PPL_FIL_PAGE_OFFSET, 10);
	ppl_wr4(imported + PPL_FIL_PAGE_SPACE_ID, 5);
	ppl_page_stamp(imported, PS, 0);
	ppl_node_page_written(n, imported, 0);
	CHECK(ppl_node_page_info(n, 5, 10, &info) && info.chunks == 1);
	ppl_node_page_written(n, imported, ppl_node_parsed_lsn(n));
	CHECK(!ppl_node_page_info(n, 5, 10, &info));
	ppl_node_free(n);
	free(l.file);
	CHECK_DONE();
}
