/* The store (ppl/store.h) driven as ganesha.nfsd's FSAL drives it, with
 * no Ganesha: this harness is the host. It writes the files of a
 * synthetic datadir itself (16 KiB full_crc32 pages, a log from
 * redo_synth.h), calls the store around each write and read as the
 * FSAL's hooks do, asks elision questions directly, and collects the
 * store's log lines through its logger. The clock is injected.
 *
 * What it checks: an elided page is rebuilt on read exactly as MariaDB
 * wrote it; every refusal the harness can provoke gets its reason; the
 * checkpoint gate keeps a page's records in the pool while they fit under
 * the per-page cap and materializes the page into its data file once they
 * do not, so that after the gate the file (or the pool) and never only
 * the log holds what MariaDB was told is written. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "ppl/elision_proto.h"
#include "ppl/log.h"
#include "ppl/page.h"
#include "ppl/pool.h"
#include "ppl/store.h"
#include "ppl/store_config.h"
#include "redo_synth.h"

#define PS 16384u
#define FIRST_LSN 12288u
#define SPACE 5u
#define NPAGES 32u
#define START_NS 1000000000000ull /* the injected clock at a store's start */
#define FLAGS (PPL_FSP_FLAGS_FCRC32_MASK_MARKER | 5u) /* full_crc32, 16 KiB */

struct host {
	char dir[256], log_path[300], ibd_path[300], pool_path[300];
	uint64_t log_ino, ibd_ino;
	struct synlog l;
	uint64_t written;            /* LSN the log file holds up to */
	uint64_t clock_ns;
	pthread_mutex_t lines_lock;  /* the store logs from its own threads too */
	char lines[64][512];
	int nlines;
	struct ppl_store *s;
};

static void on_log(void *arg, enum ppl_log_level level, const char *func, int line, const char *msg)
{
	struct host *h = arg;
	(void)line;
	pthread_mutex_lock(&h->lines_lock);
	if (h->nlines < 64)
		snprintf(h->lines[h->nlines++], sizeof h->lines[0], "%s %s: %s", ppl_log_level_name(level), func, msg);
	pthread_mutex_unlock(&h->lines_lock);
	if (level <= PPL_LOG_WARN)
		printf("  store: %s %s: %s\n", ppl_log_level_name(level), func, msg);
}

static uint64_t clock_of(void *arg)
{
	return __atomic_load_n(&((struct host *)arg)->clock_ns, __ATOMIC_RELAXED);
}

static bool logged(struct host *h, const char *needle)
{
	bool found = false;
	pthread_mutex_lock(&h->lines_lock);
	for (int i = 0; i < h->nlines && !found; i++)
		found = strstr(h->lines[i], needle) != NULL;
	pthread_mutex_unlock(&h->lines_lock);
	return found;
}

static uint64_t ino_of(const char *path)
{
	struct stat st;
	CHECK(stat(path, &st) == 0);
	return (uint64_t)st.st_ino;
}

static void write_file(const char *path, const void *buf, size_t len, off_t off)
{
	int fd = open(path, O_WRONLY | O_CREAT, 0644);
	CHECK(fd >= 0);
	CHECK(pwrite(fd, buf, len, off) == (ssize_t)len);
	close(fd);
}

static void read_file(const char *path, void *buf, size_t len, off_t off)
{
	int fd = open(path, O_RDONLY);
	CHECK(fd >= 0);
	CHECK(pread(fd, buf, len, off) == (ssize_t)len);
	close(fd);
}

/* A page as MariaDB leaves it: header fields, LSN, full_crc32. */
static void make_page(uint8_t *p, uint32_t space, uint32_t page_no, uint16_t type, uint64_t lsn)
{
	memset(p, 0, PS);
	ppl_wr4(p + PPL_FIL_PAGE_OFFSET, page_no);
	ppl_wr2(p + PPL_FIL_PAGE_TYPE, type);
	ppl_wr4(p + PPL_FIL_PAGE_SPACE_ID, space);
	if (page_no == 0) {
		ppl_wr4(p + PPL_FSP_HEADER_OFFSET + PPL_FSP_SPACE_ID, space);
		ppl_wr4(p + PPL_FSP_HEADER_OFFSET + PPL_FSP_SIZE, 8);
		ppl_wr4(p + PPL_FSP_HEADER_OFFSET + PPL_FSP_SPACE_FLAGS, FLAGS);
	}
	ppl_page_stamp(p, PS, lsn);
}

static void make_space(const char *path, uint32_t space, int pages)
{
	static uint8_t p[PS];
	for (int i = 0; i < pages; i++) {
		make_page(p, space, (uint32_t)i, i == 0 ? PPL_FIL_PAGE_TYPE_FSP_HDR : PPL_FIL_PAGE_INDEX, FIRST_LSN);
		write_file(path, p, PS, (off_t)i * PS);
	}
}

/* The host's log write: begin (the checkpoint gate), the file, the store. */
static int host_log_write(struct host *h, uint64_t off, const uint8_t *buf, size_t len)
{
	struct iovec iov = {(void *)buf, len};
	int rc = ppl_store_write_begin(h->s, true, h->log_ino, off, &iov, 1, len);
	if (rc)
		return rc;
	write_file(h->log_path, buf, len, (off_t)off);
	rc = ppl_store_log_write(h->s, h->log_ino, off, &iov, 1, len);
	ppl_store_write_end(h->s, true, h->log_ino, off, len);
	return rc;
}

/* MariaDB's log writer: everything appended since the last write, from the
 * block holding the write position, in one write. */
static void flush_log(struct host *h)
{
	size_t from = syn_off(&h->l, h->written) & ~(size_t)511, to = syn_off(&h->l, h->l.lsn);
	CHECK(to > from);
	CHECK_EQ_U(host_log_write(h, from, h->l.file + from, to - from), 0);
	h->written = h->l.lsn;
}

static int checkpoint(struct host *h, uint64_t lsn)
{
	static int slot;
	uint8_t ck[64];
	syn_checkpoint(ck, lsn, h->l.lsn);
	return host_log_write(h, (slot++ & 1) ? 4096 : 8192, ck, sizeof ck);
}

/* One mini-transaction: `len` bytes of `fill` at byte `at` of the page. */
static uint64_t change(struct host *h, uint32_t page_no, uint32_t at, uint8_t fill, size_t len, uint8_t *image)
{
	uint8_t data[600], rec[700];
	memset(data, fill, len);
	size_t n = syn_write_rec(rec, SPACE, page_no, at, data, len);
	syn_mtr(&h->l, rec, n);
	memcpy(image + at, data, len);
	ppl_page_stamp(image, PS, h->l.lsn);
	return h->l.lsn;
}

static unsigned ask(struct host *h, uint32_t page_no, const uint8_t *image, uint32_t page_size)
{
	struct ppl_elision_page pg = {SPACE, page_no, ppl_page_lsn(image), ppl_page_stored_crc(image, PS), page_size};
	return ppl_store_elide(h->s, &pg);
}

/* The host's read of one page: begin, the file, the store, end. */
static int host_read(struct host *h, uint32_t page_no, uint8_t *out)
{
	uint64_t off = (uint64_t)page_no * PS;
	ppl_store_read_begin(h->s, h->ibd_ino, off, PS);
	read_file(h->ibd_path, out, PS, (off_t)off);
	struct iovec iov = {out, PS};
	int rc = ppl_store_read(h->s, h->ibd_ino, off, &iov, 1, PS);
	ppl_store_read_end(h->s, h->ibd_ino, off, PS);
	return rc;
}

/* The datadir, the log file and the pool, as MariaDB and `ppl-inspect
 * pool create` leave them; no store yet. */
static void host_make(struct host *h)
{
	memset(h, 0, sizeof *h);
	pthread_mutex_init(&h->lines_lock, NULL);
	snprintf(h->dir, sizeof h->dir, "/tmp/ppl-test-store-XXXXXX");
	CHECK(mkdtemp(h->dir) != NULL);
	char p[300];
	snprintf(p, sizeof p, "%s/test", h->dir);
	CHECK(mkdir(p, 0755) == 0);
	snprintf(p, sizeof p, "%s/ibdata1", h->dir);
	make_space(p, 0, 8);
	snprintf(h->ibd_path, sizeof h->ibd_path, "%s/test/t1.ibd", h->dir);
	make_space(h->ibd_path, SPACE, NPAGES);
	syn_init(&h->l, 1 << 20, FIRST_LSN);
	snprintf(h->log_path, sizeof h->log_path, "%s/ib_logfile0", h->dir);
	write_file(h->log_path, h->l.file, h->l.size, 0);
	h->written = h->l.lsn;
	h->log_ino = ino_of(h->log_path);
	h->ibd_ino = ino_of(h->ibd_path);
	snprintf(h->pool_path, sizeof h->pool_path, "%s.pool", h->dir);
	char err[512];
	struct ppl_pool_geometry g = {.size = 8 << 20, .identity = h->dir};
	if (ppl_pool_create(h->pool_path, &g, err, sizeof err) != 0)
		printf("pool: %s\n", err);
}

/* The store over the host's files, as an export starts: elision on (its
 * pool opened, doublewrite slots checked, records put back), then ingest
 * from the log file's checkpoint. */
static void host_start_threads(struct host *h, unsigned apply_threads)
{
	char err[512];
	pthread_mutex_lock(&h->lines_lock);
	h->nlines = 0;
	pthread_mutex_unlock(&h->lines_lock);
	h->clock_ns = START_NS;
	struct ppl_store_env env = {.log = {.log = on_log, .arg = h}, .now_ns = clock_of, .clock_arg = h};
	h->s = ppl_store_new(h->dir, &env);
	CHECK(h->s != NULL);
	struct ppl_config c = {.pool_path = h->pool_path, .block_size = 64, .max_per_page = 256,
			       .apply_threads = apply_threads, .elision_address = "127.0.0.1", .elision_port = 0,
			       .elision_clients = "127.0.0.1", .elision_token = "t"};
	int rc = ppl_store_start_elision(h->s, &c, err, sizeof err);
	if (rc)
		printf("start_elision: %s\n", err);
	CHECK(rc == 0);
	ppl_store_start_from_disk(h->s);
	h->clock_ns += 60ull * 1000000000ull; /* past every start-up window */
}

static void host_start(struct host *h)
{
	host_start_threads(h, 0);
}

static void host_open(struct host *h)
{
	host_make(h);
	host_start(h);
}

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)ftw;
	return flag == FTW_DP ? rmdir(path) : unlink(path);
}

static void host_close(struct host *h)
{
	ppl_store_free(h->s);
	CHECK(nftw(h->dir, rm_entry, 8, FTW_DEPTH | FTW_PHYS) == 0);
	CHECK(unlink(h->pool_path) == 0);
	free(h->l.file);
}

/* Elided, rebuilt on read, refused for every reason the harness can make. */
static void test_elide_and_read(void)
{
	struct host h;
	host_open(&h);
	static uint8_t image[PS], got[PS];
	read_file(h.ibd_path, image, PS, 3 * PS);
	change(&h, 3, 200, 0xab, 40, image);
	change(&h, 3, 1000, 0xcd, 10, image);
	flush_log(&h);

	/* a page size other than the datadir's */
	CHECK_EQ_U(ask(&h, 3, image, 8192), PPL_ELIDE_NACK_PAGE_SIZE);

	/* the exact page: yes, and a read serves it though the file is older */
	CHECK_EQ_U(ask(&h, 3, image, PS), PPL_ELIDE_ACK);
	CHECK_EQ_U(host_read(&h, 3, got), 0);
	CHECK(memcmp(got, image, PS) == 0);
	read_file(h.ibd_path, got, PS, 3 * PS);
	CHECK(memcmp(got, image, PS) != 0); /* nothing written to the file yet */

	/* a checksum the rebuild does not give: no, and the page stays on
	 * full page writes (a divergence), even for its right image */
	static uint8_t p5[PS], wrong[PS];
	read_file(h.ibd_path, p5, PS, 5 * PS);
	change(&h, 5, 64, 0x77, 16, p5);
	flush_log(&h);
	memcpy(wrong, p5, PS);
	wrong[300] ^= 1;
	ppl_page_stamp(wrong, PS, ppl_page_lsn(p5));
	CHECK_EQ_U(ask(&h, 5, wrong, PS), PPL_ELIDE_NACK_CHECKSUM);
	CHECK(logged(&h, "divergence"));
	CHECK_EQ_U(ask(&h, 5, p5, PS), PPL_ELIDE_NACK_UNSUPPORTED);

	/* a page nobody elided is served as its file holds it */
	static uint8_t p4[PS], f4[PS];
	read_file(h.ibd_path, f4, PS, 4 * PS);
	memcpy(p4, f4, PS);
	change(&h, 4, 500, 0x11, 8, p4);
	flush_log(&h);
	CHECK_EQ_U(host_read(&h, 4, got), 0);
	CHECK(memcmp(got, f4, PS) == 0);
	host_close(&h);
}

/* The checkpoint gate: while a page's records fit under the per-page cap
 * they are kept in the pool and the checkpoint passes; once they do not,
 * the page is materialized into its file before the checkpoint passes. */
static void test_gate_settles_then_materializes(void)
{
	struct host h;
	host_open(&h);
	static uint8_t image[PS], got[PS];
	read_file(h.ibd_path, image, PS, 3 * PS);
	change(&h, 3, 200, 0x21, 20, image);
	flush_log(&h);
	CHECK_EQ_U(ask(&h, 3, image, PS), PPL_ELIDE_ACK);
	CHECK_EQ_U(checkpoint(&h, h.l.lsn), 0);
	struct ppl_store_figures f;
	ppl_store_figures(h.s, &f);
	CHECK_EQ_U(f.pool_kept, 1);      /* small: kept in the pool */
	CHECK_EQ_U(f.materialized, 0);
	CHECK_EQ_U(host_read(&h, 3, got), 0);
	CHECK(memcmp(got, image, PS) == 0);

	/* more records than the cap (256 B) */
	change(&h, 3, 2000, 0x22, 300, image);
	flush_log(&h);
	CHECK_EQ_U(ask(&h, 3, image, PS), PPL_ELIDE_ACK);
	CHECK_EQ_U(checkpoint(&h, h.l.lsn), 0);
	ppl_store_figures(h.s, &f);
	CHECK(f.materialized >= 1);
	read_file(h.ibd_path, got, PS, 3 * PS);
	CHECK(memcmp(got, image, PS) == 0); /* the file holds MariaDB's page */
	CHECK_EQ_U(host_read(&h, 3, got), 0);
	CHECK(memcmp(got, image, PS) == 0);
	CHECK(!logged(&h, "CRIT"));
	host_close(&h);
}

/* The storage node dies (no clean stop) after the checkpoint gate kept a
 * page's records in the pool and MariaDB's checkpoint passed them: the
 * log no longer has them, the data file is older, only the pool holds the
 * page. The next store on the same files puts the pool's records back and
 * serves the page MariaDB wrote. */
static void test_pool_survives_a_crash(void)
{
	struct host h;
	host_make(&h);
	static uint8_t image[PS], got[PS];
	read_file(h.ibd_path, image, PS, 3 * PS);
	uint64_t log_end;
	pid_t pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		host_start(&h);
		change(&h, 3, 200, 0x31, 24, image);
		flush_log(&h);
		int ok = ask(&h, 3, image, PS) == PPL_ELIDE_ACK && checkpoint(&h, h.l.lsn) == 0;
		struct ppl_store_figures f;
		ppl_store_figures(h.s, &f);
		_exit(ok && f.pool_kept == 1 && check_failures == 0 ? 0 : 1);
	}
	int status = 0;
	CHECK(waitpid(pid, &status, 0) == pid);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	change(&h, 3, 200, 0x31, 24, image); /* the same change, for the expected page */
	log_end = h.l.lsn;
	read_file(h.ibd_path, got, PS, 3 * PS);
	CHECK(memcmp(got, image, PS) != 0); /* the file is older: not materialized */
	/* the log file's newest checkpoint is past the page's records */
	static uint8_t hdr[12288];
	read_file(h.log_path, hdr, sizeof hdr, 0);
	CHECK(ppl_rd8(hdr + 8192) == log_end || ppl_rd8(hdr + 4096) == log_end);

	host_start(&h);
	struct ppl_store_figures f;
	ppl_store_figures(h.s, &f);
	CHECK_EQ_U(f.pool_loaded_pages, 1);
	CHECK_EQ_U(host_read(&h, 3, got), 0);
	CHECK(memcmp(got, image, PS) == 0);
	host_close(&h);
}

/* MariaDB's page reads while it writes its log, asks, and checkpoints,
 * with the store's apply workers running: every page read is a whole,
 * valid page (materialization and reads of a page never overlap), and at
 * the end every page reads as MariaDB last wrote it. Run under
 * ThreadSanitizer in the suite. */
struct reader_arg {
	struct host *h;
	int stop;
	unsigned reads, seed;
};

static void *reader(void *arg)
{
	struct reader_arg *a = arg;
	uint8_t *got = malloc(PS);
	while (!__atomic_load_n(&a->stop, __ATOMIC_ACQUIRE)) {
		a->seed = a->seed * 1103515245u + 12345u;
		uint32_t p = 1 + (a->seed >> 8) % (NPAGES - 1);
		CHECK_EQ_U(host_read(a->h, p, got), 0);
		CHECK(ppl_page_crc_ok(got, PS));
		CHECK_EQ_U(ppl_page_no(got), p);
		a->reads++;
	}
	free(got);
	return NULL;
}

static void test_concurrent_reads_and_gate(void)
{
	static struct host h;
	static uint8_t images[NPAGES][PS], got[PS];
	host_make(&h);
	host_start_threads(&h, 2);
	for (uint32_t p = 1; p < NPAGES; p++)
		read_file(h.ibd_path, images[p], PS, (off_t)p * PS);
	struct reader_arg ra[2] = {{.h = &h, .seed = 1}, {.h = &h, .seed = 2}};
	pthread_t t[2];
	for (int i = 0; i < 2; i++)
		CHECK(pthread_create(&t[i], NULL, reader, &ra[i]) == 0);
	unsigned acks = 0;
	for (unsigned round = 0; round < 12; round++) {
		for (uint32_t p = 1; p < NPAGES; p++)
			change(&h, p, 100 + (round * 997 + p * 131) % 15000, (uint8_t)(round * 16 + p), 60 + p % 5 * 20,
			       images[p]);
		flush_log(&h);
		for (uint32_t p = 1; p < NPAGES; p++)
			acks += ask(&h, p, images[p], PS) == PPL_ELIDE_ACK;
		CHECK_EQ_U(checkpoint(&h, h.l.lsn), 0);
	}
	for (int i = 0; i < 2; i++) {
		__atomic_store_n(&ra[i].stop, 1, __ATOMIC_RELEASE);
		pthread_join(t[i], NULL);
	}
	CHECK_EQ_U(acks, 12 * (NPAGES - 1));
	CHECK(ra[0].reads > 0 && ra[1].reads > 0);
	struct ppl_store_figures f;
	ppl_store_figures(h.s, &f);
	CHECK(f.materialized > 0 && f.pool_kept > 0);
	for (uint32_t p = 1; p < NPAGES; p++) {
		CHECK_EQ_U(host_read(&h, p, got), 0);
		CHECK(memcmp(got, images[p], PS) == 0);
	}
	CHECK(!logged(&h, "CRIT"));
	printf("concurrent: %u + %u reads, %u acks, %llu materialized, %llu kept in the pool\n", ra[0].reads,
	       ra[1].reads, acks, (unsigned long long)f.materialized, (unsigned long long)f.pool_kept);
	host_close(&h);
}

/* A storage-node restart whose log file ends in records of an elided
 * page: those last bytes are held (not known to be final), and a read of
 * the page waits until the parse passes them, woken by MariaDB's next log
 * writes. Then, after another restart, a log that stays quiet is taken as
 * it stands (the injected clock jumps past the quiet time). */
struct held_read {
	struct host *h;
	uint32_t page;
	uint8_t *out;
	int rc, done;
};

static void *held_reader(void *arg)
{
	struct held_read *a = arg;
	a->rc = host_read(a->h, a->page, a->out);
	__atomic_store_n(&a->done, 1, __ATOMIC_RELEASE);
	return NULL;
}

/* The child: a store that elides one change of `page` and dies. */
static void crash_after_eliding(struct host *h, uint32_t page, uint32_t at, uint8_t fill, size_t len, uint8_t *image)
{
	pid_t pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		host_start(h);
		change(h, page, at, fill, len, image);
		flush_log(h);
		_exit(ask(h, page, image, PS) == PPL_ELIDE_ACK && check_failures == 0 ? 0 : 1);
	}
	int status = 0;
	CHECK(waitpid(pid, &status, 0) == pid);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	change(h, page, at, fill, len, image); /* the same, in this process's copy */
	h->written = h->l.lsn;
}

static void test_held_tail_after_restart(void)
{
	static struct host h;
	static uint8_t image[PS], got[PS];
	host_make(&h);
	read_file(h.ibd_path, image, PS, 3 * PS);
	crash_after_eliding(&h, 3, 300, 0x41, 32, image);

	/* restart; a read just after it waits for MariaDB's next log write */
	host_start(&h);
	h.clock_ns = START_NS + 500000000ull;
	struct held_read a = {.h = &h, .page = 3, .out = got};
	pthread_t t;
	CHECK(pthread_create(&t, NULL, held_reader, &a) == 0);
	usleep(200 * 1000);
	CHECK(!__atomic_load_n(&a.done, __ATOMIC_ACQUIRE)); /* waiting, not served older */
	static uint8_t p4[PS];
	read_file(h.ibd_path, p4, PS, 4 * PS);
	change(&h, 4, 100, 0x42, 500, p4);
	flush_log(&h); /* a lone block: final only once a write starts past it */
	change(&h, 4, 1000, 0x44, 500, p4);
	flush_log(&h);
	pthread_join(t, NULL);
	CHECK_EQ_U(a.rc, 0);
	CHECK(memcmp(got, image, PS) == 0);
	ppl_store_free(h.s);

	/* another crash and restart, and the log stays quiet: the read is
	 * served once the quiet time has passed on the store's clock */
	crash_after_eliding(&h, 3, 900, 0x43, 16, image);
	host_start(&h);
	h.clock_ns = START_NS + 500000000ull;
	a = (struct held_read){.h = &h, .page = 3, .out = got};
	CHECK(pthread_create(&t, NULL, held_reader, &a) == 0);
	usleep(200 * 1000);
	CHECK(!__atomic_load_n(&a.done, __ATOMIC_ACQUIRE));
	__atomic_add_fetch(&h.clock_ns, 5ull * 1000000000ull, __ATOMIC_RELAXED);
	pthread_join(t, NULL);
	CHECK_EQ_U(a.rc, 0);
	CHECK(memcmp(got, image, PS) == 0);
	CHECK(!logged(&h, "CRIT"));
	host_close(&h);
}

int main(void)
{
	test_elide_and_read();
	test_gate_settles_then_materializes();
	test_pool_survives_a_crash();
	test_concurrent_reads_and_gate();
	test_held_tail_after_restart();
	CHECK_DONE();
}
