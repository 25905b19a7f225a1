/* The log archive (ppl/archive.h): what is appended and flushed reads back
 * byte for byte and in order, across segments and a reopen; a range, a
 * time and the window are found; a torn tail after a crash is cut and
 * the archive goes on from there; a damaged or missing segment, a hole in
 * the chain, a range outside the archive are each an error that says
 * what and where, never a silent skip; a failing write keeps the records
 * buffered until it succeeds; retention never removes what a base needs
 * or the last segment; appends and flushes from two threads lose
 * nothing. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "ppl/archive.h"

#define BASE_LSN 12288u
#define T0 1700000000000000000ull

static char root[] = "/tmp/ppl-test-archive-XXXXXX";
static char err[1024];

/* The n-th synthetic mini-transaction: 1..300 bytes of records whose
 * bytes depend on n, occupying its record bytes plus 8 in the log, accepted
 * 1 ms after the one before. */
static size_t rec_len(unsigned n) { return 1 + (n * 37u) % 300; }
static uint64_t start_of(unsigned n)
{
	uint64_t lsn = BASE_LSN;
	for (unsigned i = 0; i < n; i++)
		lsn += rec_len(i) + 8;
	return lsn;
}
static uint64_t time_of(unsigned n) { return T0 + (uint64_t)n * 1000000u; }

static void fill(unsigned n, uint8_t *buf)
{
	for (size_t i = 0; i < rec_len(n); i++)
		buf[i] = (uint8_t)(n * 131u + i * 7u);
}

static int append_n(struct ppl_archive *a, unsigned n)
{
	uint8_t buf[300];
	fill(n, buf);
	struct ppl_mtr m = {.start_lsn = start_of(n), .end_lsn = start_of(n) + rec_len(n) + 8, .recs = buf,
			    .len = rec_len(n)};
	return ppl_archive_append(a, &m, time_of(n), err, sizeof err);
}

static void close_flushed(struct ppl_archive *a)
{
	if (ppl_archive_flush(a, UINT64_MAX, err, sizeof err) != 0)
		fprintf(stderr, "flush at close: %s\n", err);
	ppl_archive_close(a);
}

static void make_dir(char *out, size_t len, const char *name)
{
	snprintf(out, len, "%s/%s", root, name);
	if (mkdir(out, 0700) != 0)
		abort();
}

static struct ppl_archive *open_dir(const char *dir, uint64_t segment, uint64_t keep_bytes, uint64_t keep_s)
{
	struct ppl_archive_config cfg = {.dir = dir, .segment_bytes = segment, .retention_bytes = keep_bytes,
					 .retention_s = keep_s};
	struct ppl_archive *a = ppl_archive_open(&cfg, err, sizeof err);
	if (a == NULL)
		fprintf(stderr, "open %s: %s\n", dir, err);
	return a;
}

/* Reads back [from, to) and checks each mini-transaction is the one
 * appended: first and count delivered. */
struct expect {
	unsigned next, count;
	bool bad;
};

static int check_each(void *arg, const struct ppl_mtr *m, uint64_t wall_ns)
{
	struct expect *x = arg;
	uint8_t buf[300];
	unsigned n = x->next++;
	fill(n, buf);
	if (m->start_lsn != start_of(n) || m->end_lsn != start_of(n) + rec_len(n) + 8 || m->len != rec_len(n) ||
	    memcmp(m->recs, buf, m->len) != 0 || wall_ns != time_of(n)) {
		if (!x->bad)
			fprintf(stderr, "mini-transaction %u read back wrong (LSN %" PRIu64 ")\n", n, m->start_lsn);
		x->bad = true;
	}
	x->count++;
	return 0;
}

static int read_range(const char *dir, unsigned from_n, uint64_t from_lsn, uint64_t to_lsn, struct expect *x)
{
	memset(x, 0, sizeof *x);
	x->next = from_n;
	return ppl_archive_read(dir, from_lsn, to_lsn, check_each, x, err, sizeof err);
}

static unsigned count_segments(const char *dir)
{
	DIR *d = opendir(dir);
	unsigned n = 0;
	struct dirent *e;
	while (d && (e = readdir(d)) != NULL)
		n += strncmp(e->d_name, "seg-", 4) == 0;
	if (d)
		closedir(d);
	return n;
}

static void segment_path(const char *dir, unsigned index, char *out, size_t len)
{
	/* the index-th segment in LSN order (names sort as LSNs) */
	DIR *d = opendir(dir);
	char names[512][64];
	unsigned n = 0;
	struct dirent *e;
	while (d && (e = readdir(d)) != NULL && n < 512)
		if (strncmp(e->d_name, "seg-", 4) == 0 && strlen(e->d_name) < 64)
			memcpy(names[n++], e->d_name, strlen(e->d_name) + 1);
	closedir(d);
	qsort(names, n, 64, (int (*)(const void *, const void *))strcmp);
	snprintf(out, len, "%s/%s", dir, index < n ? names[index] : "none");
}

static void test_round_trip(void)
{
	char dir[256];
	make_dir(dir, sizeof dir, "round");
	struct ppl_archive *a = open_dir(dir, 4096, 0, 0);
	CHECK(a != NULL);
	CHECK_EQ_U(ppl_archive_end_lsn(a), 0);
	struct ppl_archive_window w;
	CHECK(ppl_archive_window(dir, &w, err, sizeof err) != 0);
	CHECK(strstr(err, "empty") != NULL || strstr(err, "no mini-transaction") != NULL);
	for (unsigned n = 0; n < 1000; n++) {
		CHECK(append_n(a, n) == 0);
		if (n % 97 == 0)
			CHECK(ppl_archive_flush(a, UINT64_MAX, err, sizeof err) == 0);
	}
	CHECK_EQ_U(ppl_archive_end_lsn(a), start_of(1000));
	CHECK(ppl_archive_durable_lsn(a) < start_of(1000));
	/* only what MariaDB's log holds durably: whole records up to there */
	CHECK(ppl_archive_flush(a, start_of(995) + 3, err, sizeof err) == 0);
	CHECK_EQ_U(ppl_archive_durable_lsn(a), start_of(995));
	CHECK(ppl_archive_flush(a, UINT64_MAX, err, sizeof err) == 0);
	CHECK_EQ_U(ppl_archive_durable_lsn(a), start_of(1000));
	struct ppl_archive_figures f;
	ppl_archive_get_figures(a, &f);
	CHECK_EQ_U(f.first_lsn, BASE_LSN);
	CHECK_EQ_U(f.records_appended, 1000);
	CHECK_EQ_U(f.buffered_bytes, 0);
	CHECK(f.segments > 20); /* 4 KiB segments of about 180 kB of records */
	CHECK_EQ_U(f.segments, count_segments(dir));
	CHECK_EQ_U(f.first_ns, time_of(0));
	CHECK_EQ_U(f.last_ns, time_of(999));

	/* already there (a restart parses from its checkpoint again): kept once */
	CHECK(append_n(a, 500) == 0);
	CHECK(append_n(a, 999) == 0);
	CHECK_EQ_U(ppl_archive_end_lsn(a), start_of(1000));
	/* a hole: refused, with both LSNs */
	CHECK(append_n(a, 1001) != 0);
	char want[64];
	snprintf(want, sizeof want, "%" PRIu64, start_of(1000));
	CHECK(strstr(err, want) != NULL);
	close_flushed(a);

	/* after a reopen, every record, in order, byte for byte */
	a = open_dir(dir, 4096, 0, 0);
	CHECK(a != NULL);
	CHECK_EQ_U(ppl_archive_end_lsn(a), start_of(1000));
	struct expect x;
	CHECK(read_range(dir, 0, BASE_LSN, start_of(1000), &x) == 0);
	CHECK_EQ_U(x.count, 1000);
	CHECK(!x.bad);
	/* a range that starts inside a record takes that record */
	CHECK(read_range(dir, 400, start_of(400) + 3, start_of(600), &x) == 0);
	CHECK_EQ_U(x.count, 200);
	CHECK(!x.bad);
	CHECK(read_range(dir, 400, start_of(400), start_of(401), &x) == 0);
	CHECK_EQ_U(x.count, 1);
	/* outside the archive, or not a record's end: errors */
	CHECK(read_range(dir, 0, BASE_LSN, start_of(1000) + 1, &x) != 0);
	CHECK(strstr(err, "not the end") != NULL || strstr(err, "ends at") != NULL);
	CHECK(read_range(dir, 990, start_of(990), start_of(1001), &x) != 0);
	CHECK(strstr(err, "ends at LSN") != NULL);
	CHECK(read_range(dir, 10, start_of(10), start_of(20) + 1, &x) != 0);
	CHECK(strstr(err, "not the end of a mini-transaction") != NULL);

	/* the window and time to LSN */
	CHECK(ppl_archive_window(dir, &w, err, sizeof err) == 0);
	CHECK_EQ_U(w.first_lsn, BASE_LSN);
	CHECK_EQ_U(w.end_lsn, start_of(1000));
	CHECK_EQ_U(w.first_ns, time_of(0));
	CHECK_EQ_U(w.last_ns, time_of(999));
	CHECK_EQ_U(w.records, 1000);
	CHECK_EQ_U(w.segments, count_segments(dir));
	CHECK(w.bytes > start_of(1000) - BASE_LSN);
	uint64_t lsn = 0;
	CHECK(ppl_archive_lsn_at(dir, time_of(250) + 500000, &lsn, err, sizeof err) == 0);
	CHECK_EQ_U(lsn, start_of(251));
	CHECK(ppl_archive_lsn_at(dir, time_of(999) + 1000000000ull, &lsn, err, sizeof err) == 0);
	CHECK_EQ_U(lsn, start_of(1000));
	CHECK(ppl_archive_lsn_at(dir, T0 - 1, &lsn, err, sizeof err) != 0);
	CHECK(strstr(err, "begins at") != NULL);

	/* and it goes on from its end */
	for (unsigned n = 1000; n < 1100; n++)
		CHECK(append_n(a, n) == 0);
	close_flushed(a);
	CHECK(read_range(dir, 0, BASE_LSN, start_of(1100), &x) == 0);
	CHECK_EQ_U(x.count, 1100);
	CHECK(!x.bad);
}

/* A crash halfway through a flush leaves a torn last record: cut at open,
 * and the archive goes on from the last whole record. */
static void test_torn_tail(void)
{
	char dir[256], path[512];
	make_dir(dir, sizeof dir, "torn");
	struct ppl_archive *a = open_dir(dir, 1 << 20, 0, 0);
	for (unsigned n = 0; n < 50; n++)
		CHECK(append_n(a, n) == 0);
	close_flushed(a);
	segment_path(dir, 0, path, sizeof path);
	struct stat st;
	CHECK(stat(path, &st) == 0);
	CHECK(truncate(path, st.st_size - 5) == 0); /* inside record 49 */
	a = open_dir(dir, 1 << 20, 0, 0);
	CHECK(a != NULL);
	CHECK_EQ_U(ppl_archive_end_lsn(a), start_of(49));
	struct ppl_archive_figures f;
	ppl_archive_get_figures(a, &f);
	CHECK_EQ_U(f.torn_bytes_cut, PPL_ARCHIVE_RECORD_HEADER + rec_len(49) - 5);
	for (unsigned n = 49; n < 60; n++)
		CHECK(append_n(a, n) == 0);
	close_flushed(a);
	struct expect x;
	CHECK(read_range(dir, 0, BASE_LSN, start_of(60), &x) == 0);
	CHECK_EQ_U(x.count, 60);
	CHECK(!x.bad);

	/* a damaged byte in the last record of the last segment: cut too */
	CHECK(stat(path, &st) == 0);
	int fd = open(path, O_RDWR);
	uint8_t b;
	CHECK(pread(fd, &b, 1, st.st_size - 2) == 1);
	b ^= 0x40;
	CHECK(pwrite(fd, &b, 1, st.st_size - 2) == 1);
	close(fd);
	a = open_dir(dir, 1 << 20, 0, 0);
	CHECK(a != NULL);
	CHECK_EQ_U(ppl_archive_end_lsn(a), start_of(59));
	close_flushed(a);

	/* a new segment whose header never became durable: removed */
	char empty[512];
	snprintf(empty, sizeof empty, "%s/seg-%016" PRIx64 ".ppla", dir, start_of(59));
	fd = open(empty, O_WRONLY | O_CREAT, 0600);
	CHECK(fd >= 0 && write(fd, "PPLARCH1", 8) == 8);
	close(fd);
	a = open_dir(dir, 1 << 20, 0, 0);
	CHECK(a != NULL);
	CHECK(access(empty, F_OK) != 0);
	CHECK_EQ_U(ppl_archive_end_lsn(a), start_of(59));
	close_flushed(a);
}

/* Damage anywhere but the last segment's tail, and a missing segment:
 * reported with the file, never skipped. */
static void test_damage_reported(void)
{
	char dir[256], path[512];
	make_dir(dir, sizeof dir, "damage");
	struct ppl_archive *a = open_dir(dir, 4096, 0, 0);
	for (unsigned n = 0; n < 300; n++)
		CHECK(append_n(a, n) == 0);
	close_flushed(a);
	CHECK(count_segments(dir) >= 5);

	/* a flipped byte inside the second segment */
	segment_path(dir, 1, path, sizeof path);
	int fd = open(path, O_RDWR);
	uint8_t b;
	CHECK(pread(fd, &b, 1, 200) == 1);
	b ^= 1;
	CHECK(pwrite(fd, &b, 1, 200) == 1);
	a = open_dir(dir, 4096, 0, 0);
	CHECK(a == NULL);
	CHECK(strstr(err, path) != NULL && strstr(err, "damaged") != NULL);
	struct expect x;
	CHECK(read_range(dir, 0, BASE_LSN, start_of(300), &x) != 0);
	CHECK(strstr(err, path) != NULL);
	/* what lies before the damage still reads */
	CHECK(read_range(dir, 0, BASE_LSN, start_of(5), &x) == 0);
	CHECK_EQ_U(x.count, 5);
	b ^= 1;
	CHECK(pwrite(fd, &b, 1, 200) == 1);
	close(fd);
	a = open_dir(dir, 4096, 0, 0);
	CHECK(a != NULL);
	close_flushed(a);

	/* a missing segment: the hole's LSNs */
	segment_path(dir, 2, path, sizeof path);
	char saved[600];
	snprintf(saved, sizeof saved, "%s.away", path);
	CHECK(rename(path, saved) == 0);
	a = open_dir(dir, 4096, 0, 0);
	CHECK(a == NULL);
	CHECK(strstr(err, "missing") != NULL);
	CHECK(read_range(dir, 0, BASE_LSN, start_of(300), &x) != 0);
	CHECK(strstr(err, "missing") != NULL);
	CHECK(rename(saved, path) == 0);
	CHECK(read_range(dir, 0, BASE_LSN, start_of(300), &x) == 0);
	CHECK_EQ_U(x.count, 300);
}

/* A write that fails (a full disk: here the file size limit) leaves the
 * records buffered; the next flush writes them, and nothing is lost or
 * doubled. */
static void test_failed_flush_keeps_records(void)
{
	char dir[256];
	make_dir(dir, sizeof dir, "full");
	struct ppl_archive *a = open_dir(dir, 1 << 20, 0, 0);
	for (unsigned n = 0; n < 20; n++)
		CHECK(append_n(a, n) == 0);
	CHECK(ppl_archive_flush(a, UINT64_MAX, err, sizeof err) == 0);
	uint64_t durable = ppl_archive_durable_lsn(a);
	for (unsigned n = 20; n < 200; n++)
		CHECK(append_n(a, n) == 0);
	struct rlimit old, small;
	getrlimit(RLIMIT_FSIZE, &old);
	small = old;
	small.rlim_cur = 8192;
	signal(SIGXFSZ, SIG_IGN);
	CHECK(setrlimit(RLIMIT_FSIZE, &small) == 0);
	CHECK(ppl_archive_flush(a, UINT64_MAX, err, sizeof err) != 0);
	CHECK(strstr(err, "cannot be written") != NULL);
	CHECK_EQ_U(ppl_archive_durable_lsn(a), durable);
	for (unsigned n = 200; n < 210; n++)
		CHECK(append_n(a, n) == 0);
	CHECK(setrlimit(RLIMIT_FSIZE, &old) == 0);
	CHECK(ppl_archive_flush(a, UINT64_MAX, err, sizeof err) == 0);
	CHECK_EQ_U(ppl_archive_durable_lsn(a), start_of(210));
	close_flushed(a);
	struct expect x;
	CHECK(read_range(dir, 0, BASE_LSN, start_of(210), &x) == 0);
	CHECK_EQ_U(x.count, 210);
	CHECK(!x.bad);
}

static void test_retention(void)
{
	char dir[256];
	make_dir(dir, sizeof dir, "keep");
	struct ppl_archive *a = open_dir(dir, 4096, 16384, 0);
	for (unsigned n = 0; n < 600; n++)
		CHECK(append_n(a, n) == 0);
	CHECK(ppl_archive_flush(a, UINT64_MAX, err, sizeof err) == 0);
	struct ppl_archive_figures f;
	ppl_archive_get_figures(a, &f);
	unsigned before = (unsigned)f.segments;
	CHECK(before > 10);
	/* a base that still needs LSN start_of(100): nothing at or past it goes */
	int removed = ppl_archive_prune(a, start_of(100), time_of(600), err, sizeof err);
	CHECK(removed > 0);
	struct ppl_archive_window w;
	CHECK(ppl_archive_window(dir, &w, err, sizeof err) == 0);
	CHECK(w.first_lsn <= start_of(100));
	CHECK(w.first_lsn > BASE_LSN);
	/* no base: down to the size limit, and the last segment always stays */
	removed = ppl_archive_prune(a, UINT64_MAX, time_of(600), err, sizeof err);
	CHECK(removed > 0);
	ppl_archive_get_figures(a, &f);
	CHECK(f.bytes <= 16384 + 4096);
	CHECK(f.segments >= 1);
	CHECK_EQ_U(f.segments_pruned, (uint64_t)(before - f.segments));
	struct expect x;
	CHECK(read_range(dir, 0, BASE_LSN, start_of(600), &x) != 0);
	CHECK(strstr(err, "begins at LSN") != NULL);
	close_flushed(a);

	/* by age: older than 2 s at a time far after the last record */
	char dir2[256];
	make_dir(dir2, sizeof dir2, "age");
	a = open_dir(dir2, 4096, 0, 2);
	for (unsigned n = 0; n < 300; n++)
		CHECK(append_n(a, n) == 0);
	CHECK(ppl_archive_flush(a, UINT64_MAX, err, sizeof err) == 0);
	CHECK_EQ_U(ppl_archive_prune(a, UINT64_MAX, time_of(299) + 1000000000ull, err, sizeof err), 0);
	CHECK(ppl_archive_prune(a, UINT64_MAX, time_of(299) + 60000000000ull, err, sizeof err) > 0);
	ppl_archive_get_figures(a, &f);
	CHECK_EQ_U(f.segments, 1);
	CHECK_EQ_U(count_segments(dir2), 1);
	close_flushed(a);
}

static struct ppl_archive *shared;
static volatile int appending;

static void *flusher(void *arg)
{
	(void)arg;
	char e[512];
	while (__atomic_load_n(&appending, __ATOMIC_ACQUIRE))
		if (ppl_archive_flush(shared, UINT64_MAX, e, sizeof e) != 0)
			fprintf(stderr, "flush: %s\n", e);
	return NULL;
}

static void test_threads(void)
{
	char dir[256];
	make_dir(dir, sizeof dir, "threads");
	shared = open_dir(dir, 8192, 0, 0);
	appending = 1;
	pthread_t t;
	pthread_create(&t, NULL, flusher, NULL);
	for (unsigned n = 0; n < 5000; n++)
		CHECK(append_n(shared, n) == 0);
	__atomic_store_n(&appending, 0, __ATOMIC_RELEASE);
	pthread_join(t, NULL);
	close_flushed(shared);
	struct expect x;
	CHECK(read_range(dir, 0, BASE_LSN, start_of(5000), &x) == 0);
	CHECK_EQ_U(x.count, 5000);
	CHECK(!x.bad);
}

int main(void)
{
	if (mkdtemp(root) == NULL)
		return 2;
	test_round_trip();
	test_torn_tail();
	test_damage_reported();
	test_failed_flush_keeps_records();
	test_retention();
	test_threads();
	if (check_failures == 0) {
		char cmd[300];
		snprintf(cmd, sizeof cmd, "rm -rf %s", root);
		if (system(cmd) != 0)
			fprintf(stderr, "could not remove %s\n", root);
	}
	CHECK_DONE();
}
