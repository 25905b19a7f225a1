/* Crash consistency of the pool, by simulated power loss.
 *
 * A workload (appends, chains growing across blocks and over the cap,
 * INIT_PAGE replacements, partial and full reclaims, a dropped space, the
 * durable LSN, doublewrite stage / data-file write / release) runs on a
 * pool opened with a tracer that records every store, flush and drain, and
 * the point at which each operation returned (its acknowledgement). After
 * each acknowledgement the pool's own view of every page is snapshotted.
 *
 * Then for every position in the trace, a crash image is built: the
 * initial file, plus every store made durable (flushed, then drained)
 * before that position, plus a choice of the stores still in flight: none,
 * all, and six random subsets of their 8-byte words (a cache may write
 * back any line at any time). The data file of the doublewrite pages is
 * crashed the same way (an unsynced page write: absent, complete or torn).
 * Each image is opened (recovery) and must show, for every page, exactly
 * the records of the last acknowledged state or of the state after the
 * operation in flight — nothing acknowledged lost, nothing torn visible,
 * no damage reported — with the data-file pages either old or new, never
 * torn, and new once their staging was acknowledged. The recovered pool
 * must then take an append and reopen with everything intact (the
 * allocator did not hand out a live block). */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "ppl/page.h"
#include "ppl/pool.h"

#define POOL_SIZE (256u << 10)
#define PS 4096u
#define NPAGES 10
#define MAXREC 24

enum { EV_STORE, EV_FLUSH, EV_DRAIN, EV_ACK, EV_DATA_WRITE, EV_DATA_SYNC };

struct ev {
	uint8_t type;
	uint64_t off;
	uint32_t len;
	uint8_t *data;
};

static struct ev *evs;
static size_t nev, capev;

static struct ev *push(uint8_t type)
{
	if (nev == capev) {
		capev = capev ? 2 * capev : 4096;
		evs = realloc(evs, capev * sizeof(*evs));
	}
	struct ev *e = &evs[nev++];
	memset(e, 0, sizeof(*e));
	e->type = type;
	return e;
}

static void t_store(void *arg, uint64_t off, const void *src, size_t len)
{
	(void)arg;
	struct ev *e = push(EV_STORE);
	e->off = off;
	e->len = (uint32_t)len;
	e->data = malloc(len);
	memcpy(e->data, src, len);
}
static void t_flush(void *arg, uint64_t off, size_t len)
{
	(void)arg;
	struct ev *e = push(EV_FLUSH);
	e->off = off;
	e->len = (uint32_t)len;
}
static void t_drain(void *arg)
{
	(void)arg;
	push(EV_DRAIN);
}

/* The pages the workload touches: space 1 pages 0..7, space 2 pages 0..1
 * (the doublewrite pages, never given records). */
static const uint32_t pg_space[NPAGES] = { 1, 1, 1, 1, 1, 1, 1, 1, 2, 2 };
static const uint32_t pg_no[NPAGES] = { 0, 1, 2, 3, 4, 5, 6, 7, 0, 1 };

struct recs {
	int n;
	uint64_t start[MAXREC];
	uint32_t sum[MAXREC];
};

struct snap {
	struct recs page[NPAGES];
	uint64_t durable_lsn;
};

static struct snap *snaps; /* snaps[k]: after k acknowledged operations */
static int nsnaps;

static uint32_t bytes_sum(const uint8_t *b, size_t n)
{
	uint32_t h = 2166136261u;
	for (size_t i = 0; i < n; i++)
		h = (h ^ b[i]) * 16777619u;
	return h ^ (uint32_t)n;
}

static int take(void *arg, const struct ppl_pool_rec *r)
{
	struct recs *s = arg;
	if (r->in_dram)
		return 0;
	if (s->n < MAXREC) {
		s->start[s->n] = r->start_lsn;
		s->sum[s->n] = bytes_sum(r->bytes, r->len);
	}
	s->n++;
	return 0;
}

static void snapshot(struct ppl_pool *p, struct snap *s)
{
	memset(s, 0, sizeof(*s));
	for (int i = 0; i < NPAGES; i++)
		CHECK_EQ_U(ppl_pool_records(p, pg_space[i], pg_no[i], take, &s->page[i]), PPL_POOL_OK);
	s->durable_lsn = ppl_pool_durable_lsn(p);
}

static struct ppl_pool *traced;

static void ack(void)
{
	push(EV_ACK);
	snaps = realloc(snaps, (size_t)(nsnaps + 1) * sizeof(*snaps));
	snapshot(traced, &snaps[nsnaps++]);
}

/* The record bytes of an append are a function of its LSN, so a record
 * found after a crash can be checked against what was written. */
static void rec_bytes(uint64_t lsn, uint16_t len, uint8_t *b)
{
	for (unsigned i = 0; i < len; i++)
		b[i] = (uint8_t)(lsn * 31 + i * 7);
}

static uint64_t lsn = 1000;
static int n_ok, n_over;

static void append(int page, uint16_t len, bool init)
{
	uint8_t b[256];
	rec_bytes(lsn, len, b);
	struct ppl_pool_rec r = { .start_lsn = lsn, .end_lsn = lsn + 5, .from_init = init, .len = len, .bytes = b };
	enum ppl_pool_status st = ppl_pool_append(traced, pg_space[page], pg_no[page], &r);
	CHECK(st == PPL_POOL_OK || st == PPL_POOL_OVER_CAP);
	n_ok += st == PPL_POOL_OK;
	n_over += st == PPL_POOL_OVER_CAP;
	lsn += 10;
	ack();
	/* what the pool now says is durable for the page: every record has
	 * the bytes that were appended under its LSN, in LSN order */
	struct recs *s = &snaps[nsnaps - 1].page[page];
	for (int i = 0; i < s->n && i < MAXREC; i++) {
		uint8_t want[256];
		uint16_t wl = 0;
		/* the length of a record is recoverable from its LSN here */
		for (uint16_t l = 1; l <= 200; l++) {
			rec_bytes(s->start[i], l, want);
			if (bytes_sum(want, l) == s->sum[i]) {
				wl = l;
				break;
			}
		}
		CHECK(wl != 0);
		CHECK(i == 0 || s->start[i] > s->start[i - 1]);
	}
	if (st == PPL_POOL_OK)
		CHECK(s->n > 0 && s->start[s->n - 1] == lsn - 10);
}

static uint8_t old_img[2][PS], new_img[2][PS];
static int stage_op[2] = { -1, -1 }; /* snapshot index at which staging was acknowledged */

static void run_workload(void)
{
	for (int round = 0; round < 4; round++) {
		for (int pg = 0; pg < 8; pg++)
			append(pg, (uint16_t)(8 + 13 * ((pg + round) % 4)), false); /* 8..47 B */
		append(3, 60, false); /* page 3 grows across blocks, then over the cap */
		append(3, 20, false);
	}
	append(5, 5, true); /* INIT_PAGE replaces the chain */
	append(5, 9, false);
	ppl_pool_reclaim(traced, 1, 3, 1000 + 10 * 20); /* partial: over-cap records move into pmem */
	ack();
	ppl_pool_reclaim(traced, 1, 0, lsn); /* full */
	ack();
	ppl_pool_set_durable_lsn(traced, 4242);
	ack();
	append(0, 30, false);
	ppl_pool_drop_space(traced, 1); /* every page at once, one at a time */
	ack();
	for (int pg = 0; pg < 4; pg++)
		append(pg, 44, false);
	ppl_pool_set_durable_lsn(traced, 5151);
	ack();

	char err[200];
	for (int i = 0; i < 2; i++) {
		int slot = ppl_pool_dw_stage(traced, 2, pg_no[8 + i], new_img[i], PS, err, sizeof(err));
		CHECK(slot >= 0);
		ack();
		stage_op[i] = nsnaps - 1;
		struct ev *e = push(EV_DATA_WRITE);
		e->off = (uint64_t)i;
		push(EV_DATA_SYNC)->off = (uint64_t)i;
		ppl_pool_dw_release(traced, slot);
		ack();
		append(i, 12, false);
	}
}

/* ---- crash images -------------------------------------------------------- */

static uint8_t *init_img, *img;
static size_t img_len;
static size_t *durable_at; /* per store event: index of the drain that made it durable, or SIZE_MAX */

/* For each store, the first drain after flushes covering all its bytes. */
static void compute_durability(void)
{
	durable_at = malloc(nev * sizeof(*durable_at));
	for (size_t i = 0; i < nev; i++) {
		durable_at[i] = SIZE_MAX;
		if (evs[i].type != EV_STORE)
			continue;
		uint64_t lo = evs[i].off, hi = evs[i].off + evs[i].len;
		/* cache-line granularity, as the hardware flushes */
		uint64_t need_lo = lo & ~63ull, covered_to = need_lo;
		size_t j;
		for (j = i + 1; j < nev && covered_to < hi; j++)
			if (evs[j].type == EV_FLUSH && (evs[j].off & ~63ull) <= covered_to &&
			    evs[j].off + evs[j].len > covered_to)
				covered_to = (evs[j].off + evs[j].len + 63) & ~63ull;
		if (covered_to < hi)
			continue;
		for (; j < nev; j++)
			if (evs[j].type == EV_DRAIN) {
				durable_at[i] = j;
				break;
			}
	}
}

static uint64_t rng;
static uint32_t rnd(void)
{
	rng = rng * 6364136223846793005ull + 1442695040888963407ull;
	return (uint32_t)(rng >> 33);
}

/* none of the in-flight stores, all, and six random subsets */
enum variant { V_NONE, V_ALL, V_COUNT = 8 };

static uint8_t data_page[2][PS];

static void build(size_t crash, enum variant v)
{
	memcpy(img, init_img, img_len);
	rng = crash * V_COUNT + v + 1;
	for (size_t i = 0; i < crash; i++) {
		const struct ev *e = &evs[i];
		if (e->type != EV_STORE)
			continue;
		if (durable_at[i] < crash || v == V_ALL) {
			memcpy(img + e->off, e->data, e->len);
			continue;
		}
		if (v == V_NONE)
			continue;
		/* in flight: each 8-byte word independently */
		for (uint64_t w = e->off & ~7ull; w < e->off + e->len; w += 8) {
			if (rnd() & 1)
				continue;
			uint64_t lo = w < e->off ? e->off : w, hi = w + 8 < e->off + e->len ? w + 8 : e->off + e->len;
			memcpy(img + lo, e->data + (lo - e->off), hi - lo);
		}
	}
	for (int i = 0; i < 2; i++)
		memcpy(data_page[i], old_img[i], PS);
	for (size_t i = 0; i < crash; i++) {
		if (evs[i].type != EV_DATA_WRITE)
			continue;
		int pg = (int)evs[i].off;
		bool synced = i + 1 < crash && evs[i + 1].type == EV_DATA_SYNC;
		if (synced || v == V_ALL)
			memcpy(data_page[pg], new_img[pg], PS);
		else if (v != V_NONE)
			memcpy(data_page[pg], new_img[pg], PS / 2); /* torn */
	}
}

static int dread(void *arg, uint32_t space, uint32_t page, uint8_t *buf, size_t size)
{
	(void)arg;
	if (space != 2 || page > 1 || size != PS)
		return -1;
	memcpy(buf, data_page[page], PS);
	return 0;
}

static int dwrite(void *arg, uint32_t space, uint32_t page, const uint8_t *buf, size_t size)
{
	(void)arg;
	if (space != 2 || page > 1 || size != PS)
		return -1;
	memcpy(data_page[page], buf, PS);
	return 0;
}

static char logbuf[4096];
static void logger(void *arg, enum ppl_log_level level, const char *func, int line, const char *msg)
{
	(void)arg;
	(void)level;
	(void)func;
	(void)line;
	size_t n = strlen(logbuf);
	snprintf(logbuf + n, sizeof(logbuf) - n, "%s\n", msg);
}

static bool same(const struct recs *a, const struct recs *b)
{
	if (a->n != b->n)
		return false;
	for (int i = 0; i < a->n && i < MAXREC; i++)
		if (a->start[i] != b->start[i] || a->sum[i] != b->sum[i])
			return false;
	return true;
}

static int failures_reported;

static void verify(const char *path, size_t crash, enum variant v)
{
	int acked = 0;
	for (size_t i = 0; i < crash; i++)
		acked += evs[i].type == EV_ACK;
	const struct snap *before = &snaps[acked], *after = &snaps[acked + 1 < nsnaps ? acked + 1 : acked];
	struct ppl_pool_options o = { .identity = "crash-test", .read_page = dread, .write_page = dwrite,
				      .log = {.log = logger} };
	struct ppl_pool *p = NULL;
	struct ppl_pool_recovery rec;
	char err[512];
	logbuf[0] = '\0';
	int bad = check_failures;
	if (ppl_pool_open(path, &o, &p, &rec, err, sizeof(err)) != 0) {
		fprintf(stderr, "crash %zu/%d: open failed: %s\n", crash, v, err);
		check_failures++;
		return;
	}
	CHECK_EQ_U(rec.damaged_pages + rec.damaged_blocks + rec.dw_damaged, 0);
	struct snap now;
	snapshot(p, &now);
	for (int i = 0; i < NPAGES; i++)
		CHECK(same(&now.page[i], &before->page[i]) || same(&now.page[i], &after->page[i]));
	CHECK(now.durable_lsn == before->durable_lsn || now.durable_lsn == after->durable_lsn);
	for (int i = 0; i < 2; i++) {
		bool is_new = memcmp(data_page[i], new_img[i], PS) == 0;
		bool is_old = memcmp(data_page[i], old_img[i], PS) == 0;
		CHECK(is_new || is_old);
		if (stage_op[i] >= 0 && acked >= stage_op[i])
			CHECK(is_new);
	}
	/* the recovered allocator must not hand out a live block */
	uint8_t b[40];
	rec_bytes(99999, sizeof(b), b);
	struct ppl_pool_rec r = { .start_lsn = 99999, .end_lsn = 99999, .len = sizeof(b), .bytes = b };
	for (uint32_t k = 0; k < 6; k++)
		CHECK_EQ_U(ppl_pool_append(p, 3, k, &r), PPL_POOL_OK);
	ppl_pool_close(p);
	if (ppl_pool_open(path, &o, &p, &rec, err, sizeof(err)) != 0) {
		fprintf(stderr, "crash %zu/%d: second open failed: %s\n", crash, v, err);
		check_failures++;
		return;
	}
	struct snap again;
	snapshot(p, &again);
	for (int i = 0; i < NPAGES; i++)
		CHECK(same(&now.page[i], &again.page[i]));
	CHECK_EQ_U(rec.damaged_pages + rec.damaged_blocks, 0);
	CHECK_EQ_U(rec.pages, (uint64_t)(6 + (now.page[0].n > 0) + (now.page[1].n > 0) + (now.page[2].n > 0) +
					  (now.page[3].n > 0) + (now.page[4].n > 0) + (now.page[5].n > 0) +
					  (now.page[6].n > 0) + (now.page[7].n > 0)));
	ppl_pool_close(p);
	if (check_failures != bad && failures_reported++ < 5)
		fprintf(stderr, "  ^ at crash point %zu (event type %d), variant %d, %d ops acknowledged; log:\n%s",
			crash, crash < nev ? evs[crash].type : -1, v, acked, logbuf);
}

int main(void)
{
	char path[128], cpath[128];
	char err[512];
	snprintf(path, sizeof(path), "/dev/shm/ppl-crash-pool-%d", (int)getpid());
	snprintf(cpath, sizeof(cpath), "/dev/shm/ppl-crash-image-%d", (int)getpid());
	unlink(path);
	struct ppl_pool_geometry g = { .size = POOL_SIZE, .identity = "crash-test", .dw_slots = 2, .dw_page_size = PS };
	if (ppl_pool_create(path, &g, err, sizeof(err)) != 0) {
		fprintf(stderr, "create: %s\n", err);
		return 1;
	}
	img_len = POOL_SIZE;
	init_img = malloc(img_len);
	img = malloc(img_len);
	int fd = open(path, O_RDONLY);
	CHECK(fd >= 0 && read(fd, init_img, img_len) == (ssize_t)img_len);
	close(fd);
	for (int i = 0; i < 2; i++) {
		memset(old_img[i], 0x10 + i, PS);
		ppl_wr4(old_img[i] + PPL_FIL_PAGE_OFFSET, (uint32_t)i);
		ppl_wr4(old_img[i] + PPL_FIL_PAGE_SPACE_ID, 2);
		ppl_page_stamp(old_img[i], PS, 500);
		memset(new_img[i], 0x20 + i, PS);
		ppl_wr4(new_img[i] + PPL_FIL_PAGE_OFFSET, (uint32_t)i);
		ppl_wr4(new_img[i] + PPL_FIL_PAGE_SPACE_ID, 2);
		ppl_page_stamp(new_img[i], PS, 9000 + (uint64_t)i);
	}

	struct ppl_pool_tracer tr = { t_store, t_flush, t_drain, NULL };
	struct ppl_pool_options o = { .identity = "crash-test", .tracer = &tr };
	if (ppl_pool_open(path, &o, &traced, NULL, err, sizeof(err)) != 0) {
		fprintf(stderr, "open: %s\n", err);
		return 1;
	}
	nev = 0;
	snaps = malloc(sizeof(*snaps));
	snapshot(traced, &snaps[0]);
	nsnaps = 1;
	run_workload();
	ppl_pool_close(traced);
	CHECK(n_ok > 30);
	CHECK(n_over > 0);

	compute_durability();
	size_t stores = 0, points = 0;
	for (size_t i = 0; i < nev; i++)
		stores += evs[i].type == EV_STORE;
	for (size_t crash = 0; crash <= nev; crash++) {
		for (int v = 0; v < V_COUNT; v++) {
			build(crash, (enum variant)v);
			fd = open(cpath, O_WRONLY | O_CREAT | O_TRUNC, 0600);
			CHECK(fd >= 0 && write(fd, img, img_len) == (ssize_t)img_len);
			close(fd);
			verify(cpath, crash, (enum variant)v);
			points++;
		}
	}
	printf("crash points: %zu (%zu trace positions x %d variants; %zu stores, %d acknowledged operations, "
	       "%d appends to pmem, %d over the cap)\n", points, nev + 1, V_COUNT, stores, nsnaps - 1, n_ok, n_over);
	unlink(path);
	unlink(cpath);
	for (size_t i = 0; i < nev; i++)
		free(evs[i].data);
	free(evs);
	free(snaps);
	free(durable_at);
	free(init_img);
	free(img);
	CHECK_DONE();
}
