/* The pool's log area (Log_On_Pmem, applier/src/pool_log.c): every write
 * appended and not released is found again at open, in order, byte for
 * byte; a release leaves nothing; the ring wraps and stays exact over many
 * laps with nothing of an earlier lap taken for a pending write; a torn
 * last entry ends the run; a full area and a too-large write are refused
 * (the caller syncs instead); a crash between the release's two stores
 * loses nothing; a damaged header refuses the open; concurrent appenders
 * and a releaser keep the run whole. */
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../applier/src/pool_media.h"
#include "check.h"
#include "ppl/pool.h"

static char path[256];

static int make(uint64_t size, uint64_t log_size)
{
	char err[512];
	unlink(path);
	struct ppl_pool_geometry g = {.size = size, .identity = "/data/log", .dw_slots = 2, .dw_page_size = 16384,
				      .log_size = log_size};
	int rc = ppl_pool_create(path, &g, err, sizeof(err));
	if (rc)
		fprintf(stderr, "create: %s\n", err);
	return rc;
}

static struct ppl_pool *open_pool(struct ppl_pool_recovery *rec, char *err, size_t errlen)
{
	struct ppl_pool_options o = {.identity = "/data/log"};
	struct ppl_pool *p = NULL;
	struct ppl_pool_recovery r;
	if (ppl_pool_open(path, &o, &p, rec ? rec : &r, err, errlen) != 0)
		return NULL;
	return p;
}

/* A write's bytes from its number: what a check expects back. */
static void fill(uint8_t *b, size_t len, uint64_t n)
{
	for (size_t i = 0; i < len; i++)
		b[i] = (uint8_t)(n * 131 + i * 7 + (i >> 8));
}

static size_t size_of(uint64_t n) { return 1 + (n * 977) % 3000; }

static int append(struct ppl_pool *p, uint64_t n)
{
	uint8_t b[4096];
	size_t len = size_of(n);
	fill(b, len, n);
	/* two pieces, as an NFS WRITE's buffers may come */
	struct iovec iov[2] = {{b, len / 3}, {b + len / 3, len - len / 3}};
	return ppl_pool_log_append(p, 7, n * 4096, iov, 2, len);
}

struct seen {
	uint64_t first, count;
	int bad;
};

static int check_entry(void *arg, uint64_t seq, uint64_t fileid, uint64_t offset, const uint8_t *bytes, uint32_t len)
{
	(void)seq;
	struct seen *s = arg;
	uint64_t n = s->first + s->count;
	uint8_t b[4096];
	fill(b, size_of(n), n);
	if (fileid != 7 || offset != n * 4096 || len != size_of(n) || memcmp(b, bytes, len) != 0) {
		fprintf(stderr, "entry %llu: fileid %llu offset %llu len %u\n", (unsigned long long)n,
			(unsigned long long)fileid, (unsigned long long)offset, len);
		s->bad++;
	}
	s->count++;
	return 0;
}

static void expect_pending(uint64_t first, uint64_t count)
{
	char err[512];
	struct ppl_pool_recovery rec;
	struct ppl_pool *p = open_pool(&rec, err, sizeof(err));
	CHECK(p != NULL);
	if (p == NULL)
		return;
	CHECK_EQ_U(rec.log_pending, count);
	struct seen s = {.first = first};
	CHECK(ppl_pool_log_pending(p, check_entry, &s) == 0);
	CHECK_EQ_U(s.count, count);
	CHECK_EQ_U(s.bad, 0);
	ppl_pool_close(p);
}

static void test_round_trip(void)
{
	char err[512];
	CHECK(make(8 << 20, 256 << 10) == 0);
	struct ppl_pool_header h;
	struct ppl_pool *p = open_pool(NULL, err, sizeof(err));
	CHECK(p != NULL);
	ppl_pool_get_header(p, &h);
	CHECK_EQ_U(h.log_size, 256 << 10);
	for (uint64_t n = 0; n < 20; n++)
		CHECK(append(p, n) == PPL_POOL_OK);
	ppl_pool_close(p); /* a crash: nothing released */
	expect_pending(0, 20);
	/* released up to a mark taken after 10 more: the 10 after it stay */
	p = open_pool(NULL, err, sizeof(err));
	struct ppl_pool_log_usage u;
	ppl_pool_log_usage(p, &u);
	CHECK_EQ_U(u.pending, 20);
	struct ppl_pool_log_mark m;
	ppl_pool_log_mark(p, &m);
	for (uint64_t n = 20; n < 30; n++)
		CHECK(append(p, n) == PPL_POOL_OK);
	CHECK(ppl_pool_log_release(p, &m) == 0);
	ppl_pool_log_usage(p, &u);
	CHECK_EQ_U(u.pending, 10);
	ppl_pool_close(p);
	expect_pending(20, 10);
	/* everything released */
	p = open_pool(NULL, err, sizeof(err));
	ppl_pool_log_mark(p, &m);
	CHECK(ppl_pool_log_release(p, &m) == 0);
	ppl_pool_close(p);
	expect_pending(0, 0);
	/* the default: an eighth of the pool, none for a small one */
	unlink(path);
	struct ppl_pool_geometry g = {.size = 8 << 20, .identity = "/data/log", .dw_slots = 2, .dw_page_size = 16384};
	CHECK(ppl_pool_create(path, &g, err, sizeof(err)) == 0);
	p = open_pool(NULL, err, sizeof(err));
	ppl_pool_get_header(p, &h);
	CHECK_EQ_U(h.log_size, 1 << 20);
	CHECK(append(p, 1) == PPL_POOL_OK);
	ppl_pool_close(p);
	unlink(path);
	g.size = 1 << 20;
	CHECK(ppl_pool_create(path, &g, err, sizeof(err)) == 0);
	p = open_pool(NULL, err, sizeof(err));
	ppl_pool_get_header(p, &h);
	CHECK_EQ_U(h.log_size, 0);
	CHECK(append(p, 1) == PPL_POOL_ERROR);
	ppl_pool_close(p);
	/* a log area the geometry cannot hold, or of a wrong size */
	unlink(path);
	g.log_size = 1000;
	CHECK(ppl_pool_create(path, &g, err, sizeof(err)) != 0 && strstr(err, "log area 1000 B"));
}

/* Many laps of a small ring with releases lagging behind: after a crash
 * at any point the pending run is exactly the unreleased appends. */
static void test_laps(void)
{
	char err[512];
	CHECK(make(8 << 20, 64 << 10) == 0);
	struct ppl_pool *p = open_pool(NULL, err, sizeof(err));
	uint64_t released = 0, n = 0;
	struct ppl_pool_log_mark marks[64];
	uint64_t mark_n[64];
	unsigned nm = 0;
	for (unsigned round = 0; round < 400; round++) {
		for (int k = 0; k < 3; k++) {
			enum ppl_pool_status st = append(p, n);
			if (st == PPL_POOL_FULL) {
				/* release the oldest mark and retry */
				CHECK(nm > 0);
				if (nm == 0)
					break;
				CHECK(ppl_pool_log_release(p, &marks[0]) == 0);
				released = mark_n[0];
				memmove(marks, marks + 1, --nm * sizeof(marks[0]));
				memmove(mark_n, mark_n + 1, nm * sizeof(mark_n[0]));
				st = append(p, n);
			}
			CHECK(st == PPL_POOL_OK);
			n++;
		}
		if (nm < 64) {
			ppl_pool_log_mark(p, &marks[nm]);
			mark_n[nm++] = n;
		}
	}
	struct ppl_pool_log_usage u;
	ppl_pool_log_usage(p, &u);
	CHECK(u.full > 0);
	CHECK_EQ_U(u.pending, n - released);
	ppl_pool_close(p);
	expect_pending(released, n - released);
	/* everything released after many laps: nothing of them comes back */
	p = open_pool(NULL, err, sizeof(err));
	struct ppl_pool_log_mark m;
	ppl_pool_log_mark(p, &m);
	CHECK(ppl_pool_log_release(p, &m) == 0);
	ppl_pool_close(p);
	expect_pending(0, 0);
	/* and appends go on after the reopen with later numbers */
	p = open_pool(NULL, err, sizeof(err));
	for (uint64_t k = 0; k < 40; k++)
		CHECK(append(p, n + k) == PPL_POOL_OK);
	ppl_pool_close(p);
	expect_pending(n, 40);
}

/* Entries that tile the ring exactly (1023 units of 64 B = 31 entries of
 * 33 units): after whole laps released, the head sits on an entry of the
 * lap before, whole and with a good checksum. Only its number tells it is
 * not pending (L4). */
static void test_stale_lap(void)
{
	char err[512];
	CHECK(make(8 << 20, 64 << 10) == 0);
	struct ppl_pool *p = open_pool(NULL, err, sizeof(err));
	static uint8_t b[2048];
	struct iovec iov = {b, sizeof(b)};
	for (unsigned lap = 0; lap < 3; lap++) {
		for (unsigned k = 0; k < 31; k++) {
			b[0] = (uint8_t)k;
			CHECK(ppl_pool_log_append(p, 7, k * 2048ull, &iov, 1, sizeof(b)) == PPL_POOL_OK);
		}
		struct ppl_pool_log_mark m;
		ppl_pool_log_mark(p, &m);
		CHECK(ppl_pool_log_release(p, &m) == 0);
	}
	struct ppl_pool_log_usage u;
	ppl_pool_log_usage(p, &u);
	CHECK_EQ_U(u.full, 0);
	ppl_pool_close(p);
	struct ppl_pool_recovery rec;
	p = open_pool(&rec, err, sizeof(err));
	CHECK(p != NULL);
	CHECK_EQ_U(rec.log_pending, 0);
	ppl_pool_close(p);
}

static void peek(uint64_t off, void *buf, size_t len)
{
	int fd = open(path, O_RDONLY);
	CHECK(pread(fd, buf, len, (off_t)off) == (ssize_t)len);
	close(fd);
}

static void poke(uint64_t off, const void *buf, size_t len)
{
	int fd = open(path, O_RDWR);
	CHECK(pwrite(fd, buf, len, (off_t)off) == (ssize_t)len);
	close(fd);
}

static void test_torn_and_damaged(void)
{
	char err[512];
	CHECK(make(8 << 20, 256 << 10) == 0);
	struct ppl_pool *p = open_pool(NULL, err, sizeof(err));
	for (uint64_t n = 0; n < 5; n++)
		CHECK(append(p, n) == PPL_POOL_OK);
	ppl_pool_close(p);
	struct pool_sb sb;
	peek(0, &sb, sizeof(sb));
	/* the fifth entry torn: a byte of its data never reached the pool */
	uint64_t at = sb.log_off + POOL_LOG_HDR;
	for (uint64_t n = 0; n < 4; n++)
		at += POOL_LOG_ALIGN + (size_of(n) + POOL_LOG_ALIGN - 1) / POOL_LOG_ALIGN * POOL_LOG_ALIGN;
	uint8_t b;
	peek(at + POOL_LOG_ALIGN + 1, &b, 1);
	b ^= 0x40;
	poke(at + POOL_LOG_ALIGN + 1, &b, 1);
	expect_pending(0, 4);
	/* the next append overwrites it */
	p = open_pool(NULL, err, sizeof(err));
	CHECK(append(p, 4) == PPL_POOL_OK);
	ppl_pool_close(p);
	expect_pending(0, 5);

	/* a crash between the release's two stores: the whole number is
	 * new, the word old -- the word's entries are still all there */
	p = open_pool(NULL, err, sizeof(err));
	struct ppl_pool_log_mark m;
	ppl_pool_log_mark(p, &m);
	for (uint64_t n = 5; n < 8; n++)
		CHECK(append(p, n) == PPL_POOL_OK);
	CHECK(ppl_pool_log_release(p, &m) == 0);
	ppl_pool_log_mark(p, &m);
	ppl_pool_close(p);
	expect_pending(5, 3);
	uint64_t word_and_seq[2];
	peek(sb.log_off, word_and_seq, sizeof(word_and_seq));
	CHECK(word_and_seq[0] != 0);
	word_and_seq[1] = m.seq;
	poke(sb.log_off, word_and_seq, sizeof(word_and_seq));
	expect_pending(5, 3);

	/* a flipped bit in the tail word: refused, with what to do */
	uint64_t w = word_and_seq[0] ^ 1ull << 33;
	poke(sb.log_off, &w, sizeof(w));
	struct ppl_pool_recovery rec;
	CHECK(open_pool(&rec, err, sizeof(err)) == NULL);
	CHECK(strstr(err, "log area header is damaged") != NULL);
	CHECK(rec.log_damaged);
}

static void test_limits(void)
{
	char err[512];
	CHECK(make(8 << 20, 64 << 10) == 0);
	struct ppl_pool *p = open_pool(NULL, err, sizeof(err));
	static uint8_t big[40 << 10];
	struct iovec iov = {big, sizeof(big)};
	CHECK(ppl_pool_log_append(p, 7, 0, &iov, 1, sizeof(big)) == PPL_POOL_ERROR);
	iov.iov_len = 8 << 10;
	int ok = 0;
	while (ppl_pool_log_append(p, 7, 0, &iov, 1, iov.iov_len) == PPL_POOL_OK)
		ok++;
	CHECK(ok >= 6 && ok <= 8);
	struct ppl_pool_log_usage u;
	ppl_pool_log_usage(p, &u);
	CHECK_EQ_U(u.full, 1);
	CHECK_EQ_U(u.too_big, 1);
	/* a length past the buffers given is refused, not read past them */
	CHECK(ppl_pool_log_append(p, 7, 0, &iov, 1, iov.iov_len + 1) == PPL_POOL_ERROR);
	struct ppl_pool_log_mark m;
	ppl_pool_log_mark(p, &m);
	CHECK(ppl_pool_log_release(p, &m) == 0);
	CHECK(ppl_pool_log_append(p, 7, 0, &iov, 1, iov.iov_len) == PPL_POOL_OK);
	ppl_pool_close(p);
	/* read-only (inspection) appends nothing */
	struct ppl_pool_options o = {.read_only = true};
	CHECK(ppl_pool_open(path, &o, &p, NULL, err, sizeof(err)) == 0);
	CHECK(ppl_pool_log_append(p, 7, 0, &iov, 1, iov.iov_len) == PPL_POOL_ERROR);
	ppl_pool_close(p);
}

/* Appenders and a releaser at once (also under ThreadSanitizer): the run
 * found after a crash holds every append not released, in order. */
static struct ppl_pool *shared;
static volatile int appending;
static uint64_t next_n;
static pthread_mutex_t n_lock = PTHREAD_MUTEX_INITIALIZER;

static void *appender(void *arg)
{
	(void)arg;
	for (int k = 0; k < 2000; k++) {
		/* the numbers in append order: one lock around both, as the
		 * store's order_lock keeps log writes in order */
		pthread_mutex_lock(&n_lock);
		while (append(shared, next_n) != PPL_POOL_OK)
			;
		next_n++;
		pthread_mutex_unlock(&n_lock);
	}
	return NULL;
}

static void *releaser(void *arg)
{
	(void)arg;
	while (__atomic_load_n(&appending, __ATOMIC_ACQUIRE)) {
		struct ppl_pool_log_mark m;
		ppl_pool_log_mark(shared, &m);
		usleep(200);
		ppl_pool_log_release(shared, &m);
	}
	return NULL;
}

static void test_threads(void)
{
	char err[512];
	CHECK(make(8 << 20, 128 << 10) == 0);
	shared = open_pool(NULL, err, sizeof(err));
	appending = 1;
	pthread_t a[2], r;
	pthread_create(&r, NULL, releaser, NULL);
	for (int i = 0; i < 2; i++)
		pthread_create(&a[i], NULL, appender, NULL);
	for (int i = 0; i < 2; i++)
		pthread_join(a[i], NULL);
	__atomic_store_n(&appending, 0, __ATOMIC_RELEASE);
	pthread_join(r, NULL);
	struct ppl_pool_log_usage u;
	ppl_pool_log_usage(shared, &u);
	CHECK(u.releases > 0);
	uint64_t pending = u.pending;
	ppl_pool_close(shared);
	expect_pending(next_n - pending, pending);
}

int main(void)
{
	snprintf(path, sizeof(path), "/dev/shm/ppl-test-pool-log-%d", (int)getpid());
	test_round_trip();
	test_laps();
	test_stale_lap();
	test_torn_and_damaged();
	test_limits();
	test_threads();
	unlink(path);
	CHECK_DONE();
}
