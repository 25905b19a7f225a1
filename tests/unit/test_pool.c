/* The per-page log pool: create and the refusals at open (wrong magic,
 * version, identity, geometry, damaged superblock, truncated file), records
 * round-tripping through pmem and DRAM, the cap, reclaim, the pool running
 * full and foreground reclamation, checksums catching flipped bits,
 * doublewrite restore, the durable LSN, oldest-first selection, and readers
 * running without locks against a writer. */
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../applier/src/pool_media.h"
#include "check.h"
#include "ppl/crc32c.h"
#include "ppl/page.h"
#include "ppl/pool.h"

static char path[256];
static char logbuf[8192];

static void logger(void *arg, enum ppl_log_level level, const char *func, int line, const char *msg)
{
	(void)arg;
	(void)level;
	(void)func;
	(void)line;
	size_t n = strlen(logbuf);
	snprintf(logbuf + n, sizeof(logbuf) - n, "%s\n", msg);
}

static struct ppl_pool *open_pool(const char *identity, struct ppl_pool_recovery *rec)
{
	struct ppl_pool_options o = { .identity = identity, .log = {.log = logger} };
	struct ppl_pool *p = NULL;
	char err[512];
	if (ppl_pool_open(path, &o, &p, rec, err, sizeof(err)) != 0) {
		fprintf(stderr, "open: %s\n", err);
		return NULL;
	}
	return p;
}

/* Doublewrite slots for the 16 KiB pages these tests stage (the default,
 * 64 KiB, would not fit the small pools made here). */
#define DW_PS 16384

static int make(uint64_t size)
{
	char err[512];
	unlink(path);
	struct ppl_pool_geometry g = { .size = size, .identity = "/data/test", .dw_slots = 4, .dw_page_size = DW_PS };
	int rc = ppl_pool_create(path, &g, err, sizeof(err));
	if (rc)
		fprintf(stderr, "create: %s\n", err);
	return rc;
}

static int open_err(const struct ppl_pool_options *o, char *err, size_t len)
{
	struct ppl_pool *p = NULL;
	int rc = ppl_pool_open(path, o, &p, NULL, err, len);
	if (rc == 0)
		ppl_pool_close(p);
	return rc;
}

static void patch(off_t off, const void *b, size_t n)
{
	int fd = open(path, O_WRONLY);
	CHECK(fd >= 0 && pwrite(fd, b, n, off) == (ssize_t)n);
	close(fd);
}

static void peek(off_t off, void *b, size_t n)
{
	int fd = open(path, O_RDONLY);
	CHECK(fd >= 0 && pread(fd, b, n, off) == (ssize_t)n);
	close(fd);
}

static void test_refusals(void)
{
	char err[512];
	struct ppl_pool_geometry g = { .size = 1 << 20, .identity = "/data/test", .dw_page_size = DW_PS };
	CHECK(make(1 << 20) == 0);
	CHECK(ppl_pool_create(path, &g, err, sizeof(err)) != 0 && strstr(err, "exists"));
	struct ppl_pool_geometry bad = { .size = 1 << 20, .identity = "x", .block_size = 48 };
	CHECK(ppl_pool_create("/dev/shm/never-made", &bad, err, sizeof(err)) != 0 && strstr(err, "block size"));
	bad.block_size = 64;
	bad.max_per_page = 100;
	CHECK(ppl_pool_create("/dev/shm/never-made", &bad, err, sizeof(err)) != 0 && strstr(err, "cap"));
	struct ppl_pool_geometry noid = { .size = 1 << 20 };
	CHECK(ppl_pool_create("/dev/shm/never-made", &noid, err, sizeof(err)) != 0 && strstr(err, "identity"));
	struct ppl_pool_geometry tiny = { .size = 8192, .identity = "x" };
	CHECK(ppl_pool_create("/dev/shm/never-made", &tiny, err, sizeof(err)) != 0 && strstr(err, "too small"));
	CHECK(access("/dev/shm/never-made", F_OK) != 0);

	struct ppl_pool_options o = { .identity = "/data/other" };
	CHECK(open_err(&o, err, sizeof(err)) != 0 && strstr(err, "belongs to \"/data/test\""));
	struct ppl_pool_options ob = { .block_size = 128 };
	CHECK(open_err(&ob, err, sizeof(err)) != 0 && strstr(err, "64 B blocks"));
	struct ppl_pool_options oc = { .max_per_page = 512 };
	CHECK(open_err(&oc, err, sizeof(err)) != 0 && strstr(err, "cap of 256"));
	struct ppl_pool_options ok = { .identity = "/data/test" };
	CHECK(open_err(&ok, err, sizeof(err)) == 0);

	/* damaged superblock: one flipped bit */
	struct pool_sb sb;
	peek(0, &sb, sizeof(sb));
	struct pool_sb flipped = sb;
	flipped.nblocks ^= 1u << 3;
	patch(0, &flipped, sizeof(flipped));
	CHECK(open_err(&ok, err, sizeof(err)) != 0 && strstr(err, "superblock is damaged"));
	/* another layout version, checksum intact */
	struct pool_sb v2 = sb;
	v2.version = POOL_VERSION + 1;
	v2.crc = ppl_crc32c(0, &v2, offsetof(struct pool_sb, crc));
	patch(0, &v2, sizeof(v2));
	CHECK(open_err(&ok, err, sizeof(err)) != 0 && strstr(err, "layout version 3"));
	/* the version before the log area */
	v2.version = 1;
	v2.crc = ppl_crc32c(0, &v2, offsetof(struct pool_sb, crc));
	patch(0, &v2, sizeof(v2));
	CHECK(open_err(&ok, err, sizeof(err)) != 0 && strstr(err, "layout version 1") &&
	      strstr(err, "re-create the pool"));
	/* not a pool */
	patch(0, "GARBAGE!", 8);
	CHECK(open_err(&ok, err, sizeof(err)) != 0 && strstr(err, "not a PPL pool"));
	/* nothing above changed the file beyond our patches: restore works */
	patch(0, &sb, sizeof(sb));
	CHECK(open_err(&ok, err, sizeof(err)) == 0);
	CHECK(truncate(path, (1 << 20) - 4096) == 0);
	CHECK(open_err(&ok, err, sizeof(err)) != 0 && strstr(err, "truncated"));
	CHECK(truncate(path, 100) == 0);
	CHECK(open_err(&ok, err, sizeof(err)) != 0 && strstr(err, "too short"));
	unlink(path);
	CHECK(open_err(&ok, err, sizeof(err)) != 0 && strstr(err, "pool create"));
}

/* Records seen by a walk. */
struct seen {
	int n;
	uint64_t start[64], end[64];
	uint16_t len[64];
	bool dram[64], init[64];
	uint8_t first[64];
};

static int collect(void *arg, const struct ppl_pool_rec *r)
{
	struct seen *s = arg;
	if (s->n < 64) {
		s->start[s->n] = r->start_lsn;
		s->end[s->n] = r->end_lsn;
		s->len[s->n] = r->len;
		s->dram[s->n] = r->in_dram;
		s->init[s->n] = r->from_init;
		s->first[s->n] = r->len ? r->bytes[0] : 0;
	}
	s->n++;
	return 0;
}

static enum ppl_pool_status add(struct ppl_pool *p, uint32_t space, uint32_t page, uint64_t lsn, uint16_t len,
				bool init)
{
	uint8_t b[512];
	for (unsigned i = 0; i < len && i < sizeof(b); i++)
		b[i] = (uint8_t)(lsn + i);
	struct ppl_pool_rec r = { .start_lsn = lsn, .end_lsn = lsn + 7, .from_init = init, .len = len, .bytes = b };
	return ppl_pool_append(p, space, page, &r);
}

static void test_records(void)
{
	CHECK(make(1 << 20) == 0);
	struct ppl_pool_recovery rec;
	struct ppl_pool *p = open_pool("/data/test", &rec);
	CHECK(p != NULL);
	if (!p)
		return;
	CHECK_EQ_U(rec.pages, 0);
	/* 5:1: small records, one spanning blocks; 256 B cap = 4 blocks of 64,
	 * 176 B of record stream */
	CHECK_EQ_U(add(p, 5, 1, 100, 10, false), PPL_POOL_OK);  /* 28 B */
	CHECK_EQ_U(add(p, 5, 1, 200, 40, false), PPL_POOL_OK);  /* 58 B, spans into block 2 */
	CHECK_EQ_U(add(p, 5, 1, 300, 60, false), PPL_POOL_OK);  /* 78 B: 164 of 176 */
	CHECK_EQ_U(add(p, 5, 1, 400, 10, false), PPL_POOL_OVER_CAP);
	CHECK_EQ_U(add(p, 5, 1, 500, 1, false), PPL_POOL_OVER_CAP); /* would fit, but order: DRAM too */
	struct ppl_pool_page_info info;
	CHECK(ppl_pool_page_info(p, 5, 1, &info));
	CHECK(info.spilled);
	CHECK_EQ_U(info.records, 3);
	CHECK_EQ_U(info.dram_records, 2);
	CHECK_EQ_U(info.blocks, 4);
	CHECK_EQ_U(info.first_lsn, 100);
	CHECK_EQ_U(info.last_lsn, 507);
	CHECK_EQ_U(ppl_pool_oldest_dram_lsn(p), 400);
	struct seen s = { 0 };
	CHECK_EQ_U(ppl_pool_records(p, 5, 1, collect, &s), PPL_POOL_OK);
	CHECK_EQ_U(s.n, 5);
	uint64_t want[] = { 100, 200, 300, 400, 500 };
	for (int i = 0; i < 5 && i < s.n; i++) {
		CHECK_EQ_U(s.start[i], want[i]);
		CHECK_EQ_U(s.end[i], want[i] + 7);
		CHECK_EQ_U(s.first[i], (uint8_t)want[i]);
		CHECK(s.dram[i] == (i >= 3));
	}
	/* a record larger than the cap goes to DRAM straight away */
	CHECK_EQ_U(add(p, 6, 1, 100, 300, false), PPL_POOL_OVER_CAP);
	/* INIT_PAGE voids the past: 5:1 back to one pmem record */
	CHECK_EQ_U(add(p, 5, 1, 600, 5, true), PPL_POOL_OK);
	CHECK(ppl_pool_page_info(p, 5, 1, &info));
	CHECK(!info.spilled);
	CHECK_EQ_U(info.records, 1);
	CHECK_EQ_U(info.seq, 2);
	s.n = 0;
	ppl_pool_records(p, 5, 1, collect, &s);
	CHECK_EQ_U(s.n, 1);
	CHECK(s.init[0]);
	CHECK_EQ_U(ppl_pool_oldest_dram_lsn(p), 100); /* 6:1 */
	for (uint32_t pg = 0; pg < 20; pg++)
		CHECK_EQ_U(add(p, 7, pg, 1000 + pg, 20, false), PPL_POOL_OK);
	CHECK_EQ_U(add(p, 7, 3, 2000, 20, false), PPL_POOL_OK);
	ppl_pool_set_durable_lsn(p, 777);

	struct ppl_pool_page_ref old[4];
	CHECK_EQ_U(ppl_pool_oldest(p, old, 4), 4);
	CHECK(old[0].space == 6 && old[0].spilled); /* spilled pages first */
	CHECK(old[1].space == 5 || (old[1].space == 7 && old[1].page_no == 0));

	/* reclaim: partial keeps the later record, full removes the page */
	CHECK_EQ_U(ppl_pool_reclaim(p, 7, 3, 1010), PPL_POOL_OK);
	CHECK(ppl_pool_page_info(p, 7, 3, &info));
	CHECK_EQ_U(info.records, 1);
	CHECK_EQ_U(info.base_lsn, 1010);
	CHECK_EQ_U(info.first_lsn, 2000);
	CHECK_EQ_U(ppl_pool_reclaim(p, 7, 4, 1011), PPL_POOL_OK);
	CHECK(!ppl_pool_page_info(p, 7, 4, &info));
	CHECK_EQ_U(ppl_pool_reclaim(p, 6, 1, 107), PPL_POOL_OK);
	CHECK_EQ_U(ppl_pool_oldest_dram_lsn(p), UINT64_MAX);
	CHECK_EQ_U(ppl_pool_drop_space(p, 7), 19);
	struct ppl_pool_usage u;
	ppl_pool_usage(p, &u);
	CHECK_EQ_U(u.pages, 1);
	CHECK_EQ_U(u.spilled_pages, 0);
	for (uint32_t pg = 0; pg < 5; pg++)
		CHECK_EQ_U(add(p, 8, pg, 3000 + pg, 100, false), PPL_POOL_OK);
	add(p, 8, 4, 4000, 100, false); /* over the cap: DRAM, lost at restart */
	ppl_pool_close(p);

	/* reopen: what was durable is back, DRAM records are not */
	p = open_pool("/data/test", &rec);
	CHECK(p != NULL);
	if (!p)
		return;
	CHECK_EQ_U(rec.pages, 6);
	CHECK_EQ_U(rec.records, 6);
	CHECK_EQ_U(rec.damaged_pages, 0);
	CHECK_EQ_U(rec.durable_lsn, 777);
	CHECK(ppl_pool_page_info(p, 5, 1, &info));
	CHECK_EQ_U(info.seq, 2);
	CHECK_EQ_U(info.records, 1);
	CHECK(ppl_pool_page_info(p, 8, 4, &info));
	CHECK_EQ_U(info.records, 1);
	CHECK(!info.spilled);
	CHECK(!ppl_pool_page_info(p, 7, 3, &info));
	CHECK_EQ_U(rec.blocks_used + rec.blocks_free, u.nblocks);
	ppl_pool_close(p);
}

static void test_full(void)
{
	CHECK(make(256 << 10) == 0); /* 4 dw slots of 16K: ~3000 blocks */
	struct ppl_pool *p = open_pool("/data/test", NULL);
	if (!p)
		return;
	struct ppl_pool_usage u;
	ppl_pool_usage(p, &u);
	uint32_t pg = 0;
	enum ppl_pool_status st;
	while ((st = add(p, 9, pg, 10 + pg, 100, false)) == PPL_POOL_OK) /* 3 blocks each */
		pg++;
	CHECK_EQ_U(st, PPL_POOL_FULL);
	CHECK(pg > 900);
	ppl_pool_usage(p, &u);
	CHECK(u.needs_cleaning);
	CHECK_EQ_U(u.appends_full, 1);
	CHECK_EQ_U(ppl_pool_oldest_dram_lsn(p), 10 + pg);
	/* foreground reclamation: the oldest pages materialized, freed */
	struct ppl_pool_page_ref old[64];
	size_t n = ppl_pool_oldest(p, old, 64);
	CHECK_EQ_U(n, 64);
	CHECK(old[0].spilled && old[0].page_no == pg);
	CHECK(!old[1].spilled && old[1].page_no == 0 && old[2].page_no == 1);
	for (size_t i = 1; i < n; i++)
		CHECK_EQ_U(ppl_pool_reclaim(p, old[i].space, old[i].page_no, old[i].first_lsn + 7), PPL_POOL_OK);
	CHECK_EQ_U(add(p, 9, pg + 1, 5000, 100, false), PPL_POOL_OK);
	/* the spilled page moves back into the pool once reclaimed past nothing */
	CHECK_EQ_U(ppl_pool_reclaim(p, 9, pg, 0), PPL_POOL_OK);
	struct ppl_pool_page_info info;
	CHECK(ppl_pool_page_info(p, 9, pg, &info));
	CHECK(!info.spilled && info.records == 1);
	ppl_pool_close(p);
}

/* The largest cap in the smallest blocks: chains of 64 blocks, built,
 * grown, replaced by a reclaim and read back (a chain longer than 16
 * blocks once overran a block list on the stack). */
static void test_largest_cap(void)
{
	char err[512];
	unlink(path);
	struct ppl_pool_geometry g = { .size = 1 << 20, .identity = "/data/test", .dw_slots = 4,
				       .max_per_page = 4096, .dw_page_size = DW_PS };
	CHECK(ppl_pool_create(path, &g, err, sizeof(err)) == 0);
	struct ppl_pool *p = open_pool("/data/test", NULL);
	if (!p)
		return;
	/* one record of 400 B takes 8 more blocks at once */
	CHECK_EQ_U(add(p, 2, 7, 100, 400, false), PPL_POOL_OK);
	unsigned k = 1;
	enum ppl_pool_status st;
	while ((st = add(p, 2, 7, 100 + 10 * k, 300, false)) == PPL_POOL_OK)
		k++;
	CHECK_EQ_U(st, PPL_POOL_OVER_CAP);
	struct ppl_pool_page_info info;
	CHECK(ppl_pool_page_info(p, 2, 7, &info));
	CHECK(info.blocks > 16 && info.blocks <= 64 && info.records == k);
	/* a reclaim that keeps all but the first rebuilds the whole chain */
	CHECK_EQ_U(ppl_pool_reclaim(p, 2, 7, 107), PPL_POOL_OK);
	struct seen s = { 0 };
	CHECK_EQ_U(ppl_pool_records(p, 2, 7, collect, &s), PPL_POOL_OK);
	CHECK_EQ_U(s.n, k);
	CHECK(s.start[0] == 110 && s.len[0] == 300 && s.first[0] == (uint8_t)110);
	ppl_pool_close(p);
	p = open_pool("/data/test", NULL);
	if (!p)
		return;
	s = (struct seen){ 0 };
	CHECK_EQ_U(ppl_pool_records(p, 2, 7, collect, &s), PPL_POOL_OK);
	CHECK_EQ_U(s.n, k);
	CHECK(s.dram[s.n - 1] == false && s.start[s.n - 1] == 100 + 10 * k);
	ppl_pool_close(p);
}

static void test_damage(void)
{
	CHECK(make(1 << 20) == 0);
	struct ppl_pool *p = open_pool("/data/test", NULL);
	if (!p)
		return;
	CHECK_EQ_U(add(p, 3, 3, 50, 30, false), PPL_POOL_OK);
	CHECK_EQ_U(add(p, 3, 4, 60, 30, false), PPL_POOL_OK);
	CHECK_EQ_U(add(p, 3, 5, 70, 30, false), PPL_POOL_OK);
	ppl_pool_close(p);
	struct pool_sb sb;
	peek(0, &sb, sizeof(sb));
	/* blocks 1.. in allocation order are the top of the free stack: find
	 * the heads by scanning */
	off_t heads[3];
	int nh = 0;
	for (uint64_t b = 1; b < sb.nblocks && nh < 3; b++) {
		uint64_t w;
		peek((off_t)(sb.blocks_off + b * 64), &w, 8);
		if (blk_kind(w) == BLK_HEAD)
			heads[nh++] = (off_t)(sb.blocks_off + b * 64);
	}
	CHECK_EQ_U(nh, 3);
	/* a flipped bit in a record byte, in a head's page id, in a commit word */
	uint8_t x;
	peek(heads[0] + BLK_HEAD_HDR + 20, &x, 1);
	x ^= 0x10;
	patch(heads[0] + BLK_HEAD_HDR + 20, &x, 1);
	peek(heads[1] + BLK_OFF_PAGE, &x, 1);
	x ^= 0x01;
	patch(heads[1] + BLK_OFF_PAGE, &x, 1);
	peek(heads[2] + 2, &x, 1);
	x ^= 0x04;
	patch(heads[2] + 2, &x, 1);
	logbuf[0] = '\0';
	struct ppl_pool_recovery rec;
	p = open_pool("/data/test", &rec);
	CHECK(p != NULL);
	if (!p)
		return;
	CHECK_EQ_U(rec.damaged_pages, 1);
	CHECK_EQ_U(rec.damaged_blocks, 2);
	CHECK_EQ_U(rec.pages, 1);
	CHECK(strstr(logbuf, "fails its checksum") != NULL);
	CHECK(strstr(logbuf, "commit word is damaged") != NULL);
	struct seen s = { 0 };
	uint32_t page = 0;
	for (uint32_t pg = 3; pg <= 5; pg++) {
		struct ppl_pool_page_info info;
		if (ppl_pool_page_info(p, 3, pg, &info)) {
			CHECK(info.damaged);
			page = pg;
		}
	}
	CHECK_EQ_U(ppl_pool_records(p, 3, page, collect, &s), PPL_POOL_CORRUPT);
	CHECK_EQ_U(s.n, 0);
	/* a damaged page takes new records in DRAM until INIT or reclaim */
	CHECK_EQ_U(add(p, 3, page, 80, 5, false), PPL_POOL_CORRUPT);
	CHECK_EQ_U(ppl_pool_reclaim(p, 3, page, 79), PPL_POOL_OK);
	s.n = 0;
	CHECK_EQ_U(ppl_pool_records(p, 3, page, collect, &s), PPL_POOL_OK);
	CHECK_EQ_U(s.n, 1);
	CHECK_EQ_U(s.start[0], 80);

	/* damage while open (a bit flipped under a running server) */
	CHECK_EQ_U(add(p, 4, 1, 90, 30, false), PPL_POOL_OK);
	uint64_t hb = 0;
	for (uint64_t b = 1; b < sb.nblocks; b++) {
		uint64_t w;
		uint32_t sp, pg;
		peek((off_t)(sb.blocks_off + b * 64), &w, 8);
		peek((off_t)(sb.blocks_off + b * 64 + BLK_OFF_SPACE), &sp, 4);
		peek((off_t)(sb.blocks_off + b * 64 + BLK_OFF_PAGE), &pg, 4);
		if (blk_kind(w) == BLK_HEAD && sp == 4 && pg == 1)
			hb = b;
	}
	CHECK(hb != 0);
	peek((off_t)(sb.blocks_off + hb * 64 + BLK_HEAD_HDR + REC_HDR), &x, 1);
	x ^= 0x80;
	patch((off_t)(sb.blocks_off + hb * 64 + BLK_HEAD_HDR + REC_HDR), &x, 1);
	logbuf[0] = '\0';
	s.n = 0;
	CHECK_EQ_U(ppl_pool_records(p, 4, 1, collect, &s), PPL_POOL_CORRUPT);
	CHECK_EQ_U(s.n, 0);
	CHECK(strstr(logbuf, "page 4:1") != NULL);
	ppl_pool_close(p);
}

/* ---- doublewrite ---- */
#define PS 16384
static uint8_t datafile[3][PS];
static int fail_read;

static int dread(void *arg, uint32_t space, uint32_t page, uint8_t *buf, size_t size)
{
	(void)arg;
	if (fail_read || space != 2 || page >= 3 || size != PS)
		return -1;
	memcpy(buf, datafile[page], PS);
	return 0;
}

static int dwrite(void *arg, uint32_t space, uint32_t page, const uint8_t *buf, size_t size)
{
	(void)arg;
	if (space != 2 || page >= 3 || size != PS)
		return -1;
	memcpy(datafile[page], buf, PS);
	return 0;
}

static void mkpage(uint8_t *pg, uint32_t page_no, uint64_t lsn, uint8_t fill)
{
	memset(pg, fill, PS);
	ppl_wr4(pg + PPL_FIL_PAGE_OFFSET, page_no);
	ppl_wr4(pg + PPL_FIL_PAGE_SPACE_ID, 2);
	ppl_page_stamp(pg, PS, lsn);
}

static void test_doublewrite(void)
{
	CHECK(make(1 << 20) == 0);
	struct ppl_pool_options o = { .identity = "/data/test", .read_page = dread, .write_page = dwrite,
				      .log = {.log = logger} };
	struct ppl_pool *p = NULL;
	char err[256];
	struct ppl_pool_recovery rec;
	CHECK(ppl_pool_open(path, &o, &p, &rec, err, sizeof(err)) == 0);
	if (!p)
		return;
	uint8_t img[3][PS];
	for (uint32_t i = 0; i < 3; i++) {
		mkpage(datafile[i], i, 1000, 0x11);
		mkpage(img[i], i, 2000 + i, 0x22);
	}
	CHECK(ppl_pool_dw_stage(p, 2, 0, img[0], PS + 1, err, sizeof(err)) < 0 && strstr(err, "does not fit"));
	int s0 = ppl_pool_dw_stage(p, 2, 0, img[0], PS, err, sizeof(err));
	int s1 = ppl_pool_dw_stage(p, 2, 1, img[1], PS, err, sizeof(err));
	int s2 = ppl_pool_dw_stage(p, 2, 2, img[2], PS, err, sizeof(err));
	CHECK(s0 >= 0 && s1 >= 0 && s2 >= 0 && s0 != s1 && s1 != s2);
	/* crash: page 0 torn in its data file, page 1 never written, page 2
	 * written completely */
	memcpy(datafile[0], img[0], PS / 2);
	memcpy(datafile[2], img[2], PS);
	ppl_pool_close(p);
	fail_read = 1;
	logbuf[0] = '\0';
	CHECK(ppl_pool_open(path, &o, &p, &rec, err, sizeof(err)) == 0);
	CHECK_EQ_U(rec.dw_pending, 3);
	CHECK_EQ_U(rec.dw_unreadable, 3);
	ppl_pool_close(p);
	fail_read = 0;
	CHECK(ppl_pool_open(path, &o, &p, &rec, err, sizeof(err)) == 0);
	CHECK_EQ_U(rec.dw_pending, 3);
	CHECK_EQ_U(rec.dw_restored, 2);
	CHECK_EQ_U(rec.dw_current, 1);
	CHECK(memcmp(datafile[0], img[0], PS) == 0);
	CHECK(memcmp(datafile[1], img[1], PS) == 0);
	CHECK(memcmp(datafile[2], img[2], PS) == 0);
	CHECK(strstr(logbuf, "was torn") != NULL);
	ppl_pool_close(p);
	CHECK(ppl_pool_open(path, &o, &p, &rec, err, sizeof(err)) == 0);
	CHECK_EQ_U(rec.dw_pending, 0);
	/* a released slot is never restored, even over an older page */
	int s = ppl_pool_dw_stage(p, 2, 1, img[1], PS, err, sizeof(err));
	ppl_pool_dw_release(p, s);
	mkpage(datafile[1], 1, 5, 0x33);
	ppl_pool_close(p);
	CHECK(ppl_pool_open(path, &o, &p, &rec, err, sizeof(err)) == 0);
	CHECK_EQ_U(rec.dw_pending, 0);
	CHECK(datafile[1][100] == 0x33);
	/* a damaged slot is reported, not copied */
	s = ppl_pool_dw_stage(p, 2, 1, img[1], PS, err, sizeof(err));
	ppl_pool_close(p);
	struct pool_sb sb;
	peek(0, &sb, sizeof(sb));
	uint8_t x = 0x5a;
	patch((off_t)(sb.dw_img_off + (uint64_t)s * sb.dw_page_size + 300), &x, 1);
	logbuf[0] = '\0';
	CHECK(ppl_pool_open(path, &o, &p, &rec, err, sizeof(err)) == 0);
	CHECK_EQ_U(rec.dw_damaged, 1);
	CHECK_EQ_U(rec.dw_restored, 0);
	CHECK(datafile[1][100] == 0x33);
	CHECK(strstr(logbuf, "fails its checksum") != NULL);
	ppl_pool_close(p);
}

/* ---- readers against a writer ---- */
struct rd {                     /* shared by the reader threads: atomics */
	struct ppl_pool *p;
	int stop;
	unsigned long walks, bad;
};

static int check_order(void *arg, const struct ppl_pool_rec *r)
{
	uint64_t *prev = arg;
	if (r->start_lsn <= *prev || r->len != 12 || r->bytes[0] != (uint8_t)r->start_lsn)
		return (*prev = UINT64_MAX), 1;
	*prev = r->start_lsn;
	return 0;
}

static void *reader(void *arg)
{
	struct rd *r = arg;
	while (!__atomic_load_n(&r->stop, __ATOMIC_ACQUIRE)) {
		for (uint32_t pg = 0; pg < 64; pg++) {
			uint64_t prev = 0;
			enum ppl_pool_status st = ppl_pool_records(r->p, 1, pg, check_order, &prev);
			if (st != PPL_POOL_OK || prev == UINT64_MAX)
				__atomic_add_fetch(&r->bad, 1, __ATOMIC_RELAXED);
			__atomic_add_fetch(&r->walks, 1, __ATOMIC_RELAXED);
		}
	}
	return NULL;
}

static void test_concurrent(void)
{
	CHECK(make(4 << 20) == 0);
	struct ppl_pool *p = open_pool("/data/test", NULL);
	if (!p)
		return;
	struct rd r = { .p = p };
	pthread_t t[2];
	for (int i = 0; i < 2; i++)
		pthread_create(&t[i], NULL, reader, &r);
	uint64_t lsn = 1;
	/* 300 rounds at least, and until the readers have walked the pages
	 * while appends ran (a loaded machine may not schedule them at once) */
	for (int round = 0; round < 300 || (__atomic_load_n(&r.walks, __ATOMIC_RELAXED) < 2 * 64 && round < 1000000);
	     round++) {
		for (uint32_t pg = 0; pg < 64; pg++) {
			uint8_t b[12];
			lsn++;
			memset(b, (uint8_t)lsn, sizeof(b));
			struct ppl_pool_rec rec = { .start_lsn = lsn, .end_lsn = lsn, .len = 12, .bytes = b };
			ppl_pool_append(p, 1, pg, &rec);
		}
		if (round % 7 == 6)
			for (uint32_t pg = 0; pg < 64; pg += 3)
				ppl_pool_reclaim(p, 1, pg, lsn - 100);
	}
	__atomic_store_n(&r.stop, 1, __ATOMIC_RELEASE);
	for (int i = 0; i < 2; i++)
		pthread_join(t[i], NULL);
	CHECK(r.walks > 0);
	CHECK_EQ_U(r.bad, 0);
	ppl_pool_close(p);
}

/* ---- many pages: the index is built in the background after open ---- */
static int one_rec(void *arg, const struct ppl_pool_rec *r)
{
	uint64_t *got = arg;
	got[0]++;
	got[1] = r->start_lsn;
	got[2] = r->len ? r->bytes[0] : 0;
	return 0;
}

static void count_pages(void *arg, uint32_t space, uint32_t page_no, const struct ppl_pool_page_info *i)
{
	(void)space;
	(void)page_no;
	uint64_t *c = arg;
	c[0]++;
	c[1] += i->records;
}

static void test_background_index(void)
{
	const uint32_t N = 120000;
	CHECK(make(32 << 20) == 0);
	struct ppl_pool *p = open_pool("/data/test", NULL);
	if (!p)
		return;
	for (uint32_t pg = 0; pg < N; pg++)
		CHECK_EQ_U(add(p, 4, pg, 10 * (uint64_t)pg + 1, 12, false), PPL_POOL_OK);
	ppl_pool_close(p);
	struct ppl_pool_recovery rec;
	p = open_pool("/data/test", &rec);
	if (!p)
		return;
	CHECK(rec.index_background);
	CHECK_EQ_U(rec.pages, N);
	/* served at once, while entries are still being built: reads, and
	 * writers that reach pages before the builder does */
	unsigned bad = 0;
	for (uint32_t pg = N - 1; pg > N - 2000; pg -= 7) {
		uint64_t got[3] = { 0 };
		if (ppl_pool_records(p, 4, pg, one_rec, got) != PPL_POOL_OK || got[0] != 1 ||
		    got[1] != 10 * (uint64_t)pg + 1 || got[2] != (uint8_t)(10 * pg + 1))
			bad++;
	}
	CHECK_EQ_U(bad, 0);
	CHECK_EQ_U(add(p, 4, N - 3, 10 * (uint64_t)N + 5, 12, false), PPL_POOL_OK);
	CHECK_EQ_U(ppl_pool_reclaim(p, 4, N - 10, UINT64_MAX - 1), PPL_POOL_OK);
	struct ppl_pool_page_info info;
	CHECK(ppl_pool_page_info(p, 4, N - 3, &info) && info.records == 2);
	CHECK(!ppl_pool_page_info(p, 4, N - 10, &info));
	CHECK(ppl_pool_page_info(p, 4, 5, &info) && info.records == 1 && info.first_lsn == 51);
	uint64_t c[2] = { 0, 0 };
	ppl_pool_for_each_page(p, count_pages, c); /* waits for the builder */
	CHECK_EQ_U(c[0], N - 1);
	CHECK_EQ_U(c[1], N);
	struct ppl_pool_usage u;
	ppl_pool_usage(p, &u);
	CHECK_EQ_U(u.pages, N - 1);
	ppl_pool_close(p);
	struct ppl_pool_options o = { .identity = "/data/test", .index_wait = true };
	char err[256];
	CHECK(ppl_pool_open(path, &o, &p, &rec, err, sizeof(err)) == 0);
	CHECK(!rec.index_background);
	CHECK_EQ_U(rec.records, N);
	/* closing while the builder still runs */
	ppl_pool_close(p);
	CHECK(ppl_pool_open(path, NULL, &p, &rec, err, sizeof(err)) == 0);
	ppl_pool_close(p);
}

/* A mini-transaction's records too large for a pool record: the pool
 * notes its LSNs only, in DRAM; the page gets a head (its mark for a
 * restart) and never a record with nothing in it in pmem; its records
 * cannot all be given (IN_LOG) until a reclaim passes the note; the
 * oldest DRAM LSN counts the note (the store's restart point). */
static void test_note_in_log(void)
{
	unlink(path);
	CHECK(make(1 << 20) == 0);
	struct ppl_pool_recovery rec;
	struct ppl_pool *p = open_pool("/data/test", &rec);
	CHECK(p != NULL);
	if (!p)
		return;
	CHECK_EQ_U(ppl_pool_note_in_log(p, 8, 2, 1000, 1100), PPL_POOL_OVER_CAP);
	struct ppl_pool_page_info info;
	CHECK(ppl_pool_page_info(p, 8, 2, &info));
	CHECK(info.spilled);
	CHECK_EQ_U(info.blocks, 1);
	CHECK_EQ_U(info.records, 0);
	CHECK_EQ_U(info.dram_records, 1);
	CHECK_EQ_U(info.last_lsn, 1100);
	CHECK_EQ_U(ppl_pool_oldest_dram_lsn(p), 1000);
	struct seen s = { 0 };
	CHECK_EQ_U(ppl_pool_records(p, 8, 2, collect, &s), PPL_POOL_IN_LOG);
	CHECK_EQ_U(s.n, 0);
	/* a later, small record follows it into DRAM, in order */
	CHECK_EQ_U(add(p, 8, 2, 1200, 10, false), PPL_POOL_OVER_CAP);
	/* the page written at 1100: the note goes, the rest may be read */
	CHECK_EQ_U(ppl_pool_reclaim(p, 8, 2, 1100), PPL_POOL_OK);
	CHECK_EQ_U(ppl_pool_records(p, 8, 2, collect, &s), PPL_POOL_OK);
	CHECK_EQ_U(s.n, 1);
	CHECK_EQ_U(s.start[0], 1200);
	/* a note on a page with pmem records, then a restart: the pmem
	 * records and the head are all that is left, every one with bytes */
	CHECK_EQ_U(add(p, 9, 4, 2000, 10, false), PPL_POOL_OK);
	CHECK_EQ_U(ppl_pool_note_in_log(p, 9, 4, 2100, 2200), PPL_POOL_OVER_CAP);
	CHECK_EQ_U(ppl_pool_reclaim(p, 9, 4, 2007), PPL_POOL_OK); /* the note moves, not to pmem */
	CHECK(ppl_pool_page_info(p, 9, 4, &info));
	CHECK_EQ_U(info.records, 0);
	CHECK_EQ_U(info.dram_records, 1);
	ppl_pool_close(p);
	p = open_pool("/data/test", &rec);
	CHECK(p != NULL);
	if (!p)
		return;
	CHECK(ppl_pool_page_info(p, 9, 4, &info)); /* the mark survives */
	CHECK_EQ_U(info.records, 0);
	s.n = 0;
	CHECK_EQ_U(ppl_pool_records(p, 9, 4, collect, &s), PPL_POOL_OK);
	CHECK_EQ_U(s.n, 0);
	ppl_pool_close(p);
	unlink(path);
}

int main(void)
{
	snprintf(path, sizeof(path), "/dev/shm/ppl-test-pool-%d", (int)getpid());
	test_refusals();
	test_records();
	test_full();
	test_largest_cap();
	test_damage();
	test_doublewrite();
	test_concurrent();
	test_background_index();
	test_note_in_log();
	unlink(path);
	CHECK_DONE();
}
