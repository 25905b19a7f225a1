/* The host a store runs under in the tests and the fuzz target
 * (tests/unit/test_store.c, tests/fuzz/fuzz_store.c), in place of
 * ganesha.nfsd's FSAL: it makes a synthetic datadir (16 KiB full_crc32
 * pages; the log from redo_synth.h) and a pool, writes the files itself
 * and calls the store around each write and read as the FSAL's hooks do,
 * asks elision questions directly, injects the clock and collects the
 * store's log lines. The store's own file I/O goes through h->io (NULL:
 * POSIX; tests/unit/test_store_faults.c gives a table that fails chosen
 * calls); the host's reads and writes are its own, as the FSAL's sub-FSAL
 * does them. Header-only: each program has one host. */
#ifndef PPL_TEST_STORE_HOST_H
#define PPL_TEST_STORE_HOST_H

#include <time.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
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
	char lines[64][1024];
	int nlines;
	const struct ppl_io *io;     /* the store's file I/O (NULL: POSIX); set after host_make */
	bool allow_volatile_pool;    /* Allow_Volatile_Pool */
	bool ingest_behind;          /* Ingest_Behind (also with PPL_TEST_INGEST_BEHIND=1 in the environment) */
	bool log_on_pmem;            /* Log_On_Pmem: each log write made durable in the pool's log area */
	uint64_t persisted, not_persisted; /* log writes ppl_store_log_persist took, and refused */
	size_t page_cache;           /* Page_Cache_Size (0: off) */
	struct ppl_store *s;
};

/* PPL_TEST_INGEST_BEHIND=1: every store a test starts parses behind the
 * replies (tests/CMakeLists.txt runs the store's tests so a second time) */
static inline bool behind_from_env(void)
{
	const char *v = getenv("PPL_TEST_INGEST_BEHIND");
	return v && strcmp(v, "1") == 0;
}

static inline void on_log(void *arg, enum ppl_log_level level, const char *func, int line, const char *msg)
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

static inline uint64_t clock_of(void *arg)
{
	return __atomic_load_n(&((struct host *)arg)->clock_ns, __ATOMIC_RELAXED);
}

static inline bool logged(struct host *h, const char *needle)
{
	bool found = false;
	pthread_mutex_lock(&h->lines_lock);
	for (int i = 0; i < h->nlines && !found; i++)
		found = strstr(h->lines[i], needle) != NULL;
	pthread_mutex_unlock(&h->lines_lock);
	return found;
}

static inline uint64_t ino_of(const char *path)
{
	struct stat st;
	CHECK(stat(path, &st) == 0);
	return (uint64_t)st.st_ino;
}

static inline void write_file(const char *path, const void *buf, size_t len, off_t off)
{
	int fd = open(path, O_WRONLY | O_CREAT, 0644);
	CHECK(fd >= 0);
	CHECK(pwrite(fd, buf, len, off) == (ssize_t)len);
	close(fd);
}

static inline void read_file(const char *path, void *buf, size_t len, off_t off)
{
	int fd = open(path, O_RDONLY);
	CHECK(fd >= 0);
	CHECK(pread(fd, buf, len, off) == (ssize_t)len);
	close(fd);
}

/* A page as MariaDB leaves it: header fields, LSN, full_crc32. */
static inline void make_page(uint8_t *p, uint32_t space, uint32_t page_no, uint16_t type, uint64_t lsn)
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

static inline void make_space(const char *path, uint32_t space, int pages)
{
	static uint8_t p[PS];
	for (int i = 0; i < pages; i++) {
		make_page(p, space, (uint32_t)i, i == 0 ? PPL_FIL_PAGE_TYPE_FSP_HDR : PPL_FIL_PAGE_INDEX, FIRST_LSN);
		write_file(path, p, PS, (off_t)i * PS);
	}
}

/* The host's log write: begin (the checkpoint gate), the file, the store. */
static inline int host_log_write(struct host *h, uint64_t off, const uint8_t *buf, size_t len)
{
	struct iovec iov = {(void *)buf, len};
	int rc = ppl_store_write_begin(h->s, true, h->log_ino, off, &iov, 1, len);
	if (rc)
		return rc;
	write_file(h->log_path, buf, len, (off_t)off);
	if (h->log_on_pmem) {
		if (ppl_store_log_persist(h->s, h->log_ino, off, &iov, 1, len) == 0)
			h->persisted++;
		else
			h->not_persisted++;
	}
	rc = ppl_store_log_write(h->s, h->log_ino, off, &iov, 1, len);
	ppl_store_write_end(h->s, true, h->log_ino, off, len);
	return rc;
}

/* MariaDB's log writer: everything appended since the last write, from the
 * block holding the write position, in one write. */
static inline void flush_log(struct host *h)
{
	size_t from = syn_off(&h->l, h->written) & ~(size_t)511, to = syn_off(&h->l, h->l.lsn);
	CHECK(h->l.lsn - h->written < h->l.size - SYN_AREA);
	if (to <= from) { /* across the end of the circular area: two writes */
		CHECK_EQ_U(host_log_write(h, from, h->l.file + from, h->l.size - from), 0);
		from = SYN_AREA;
	}
	CHECK_EQ_U(host_log_write(h, from, h->l.file + from, to - from), 0);
	h->written = h->l.lsn;
}

static inline int checkpoint(struct host *h, uint64_t lsn)
{
	static int slot;
	uint8_t ck[64];
	syn_checkpoint(ck, lsn, h->l.lsn);
	return host_log_write(h, (slot++ & 1) ? 4096 : 8192, ck, sizeof ck);
}

/* One mini-transaction: `len` bytes of `fill` at byte `at` of the page. */
static inline uint64_t change(struct host *h, uint32_t page_no, uint32_t at, uint8_t fill, size_t len, uint8_t *image)
{
	uint8_t data[600], rec[700];
	memset(data, fill, len);
	size_t n = syn_write_rec(rec, SPACE, page_no, at, data, len);
	syn_mtr(&h->l, rec, n);
	memcpy(image + at, data, len);
	ppl_page_stamp(image, PS, h->l.lsn);
	return h->l.lsn;
}

static inline unsigned ask(struct host *h, uint32_t page_no, const uint8_t *image, uint32_t page_size)
{
	struct ppl_elision_page pg = {SPACE, page_no, ppl_page_lsn(image), ppl_page_stored_crc(image, PS), page_size};
	return ppl_store_elide(h->s, &pg);
}

/* The page read from its file, one mini-transaction on it (`len` bytes of
 * `fill` at `at`), the log flushed, and its write elided: the store says
 * yes to the image. Returns the mini-transaction's end LSN. */
static inline uint64_t elide_one(struct host *h, uint32_t page_no, uint32_t at, uint8_t fill, size_t len,
				 uint8_t *image)
{
	read_file(h->ibd_path, image, PS, (off_t)page_no * PS);
	uint64_t lsn = change(h, page_no, at, fill, len, image);
	flush_log(h);
	CHECK_EQ_U(ask(h, page_no, image, PS), PPL_ELIDE_ACK);
	return lsn;
}

/* MariaDB writes a page itself (the store said no): begin, the file, the
 * store (the page becomes a base), end. */
static inline void host_page_write(struct host *h, uint32_t page_no, const uint8_t *page)
{
	uint64_t off = (uint64_t)page_no * PS;
	struct iovec iov = {(void *)page, PS};
	CHECK_EQ_U(ppl_store_write_begin(h->s, false, h->ibd_ino, off, &iov, 1, PS), 0);
	write_file(h->ibd_path, page, PS, (off_t)off);
	ppl_store_write(h->s, h->ibd_ino, off, &iov, 1, PS);
	ppl_store_write_end(h->s, false, h->ibd_ino, off, PS);
}

/* The host's read of len bytes at off of the table's file: begin, the
 * file, the store, end. */
static inline int host_read_at(struct host *h, uint64_t off, uint8_t *out, size_t len)
{
	ppl_store_read_begin(h->s, h->ibd_ino, off, len);
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	read_file(h->ibd_path, out, len, (off_t)off);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	struct iovec iov = {out, len};
	/* the file's read time, as the FSAL measures the sub-FSAL's (at least 1 ns: measured) */
	uint64_t read_ns = (uint64_t)(t1.tv_sec - t0.tv_sec) * 1000000000ull + (uint64_t)t1.tv_nsec - (uint64_t)t0.tv_nsec;
	int rc = ppl_store_read(h->s, h->ibd_ino, off, &iov, 1, len, read_ns ? read_ns : 1);
	ppl_store_read_end(h->s, h->ibd_ino, off, len);
	return rc;
}

/* The host's read of one page. */
static inline int host_read(struct host *h, uint32_t page_no, uint8_t *out)
{
	return host_read_at(h, (uint64_t)page_no * PS, out, PS);
}

/* The datadir, the log file and a pool of geometry g (NULL: 8 MiB, the
 * defaults), as MariaDB and `ppl-inspect pool create` leave them; no
 * store yet. */
static inline void host_make_pool(struct host *h, const struct ppl_pool_geometry *pool)
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
	struct ppl_pool_geometry g = {.size = 8 << 20};
	if (pool)
		g = *pool;
	g.identity = h->dir;
	if (ppl_pool_create(h->pool_path, &g, err, sizeof err) != 0)
		printf("pool: %s\n", err);
}

/* A store started over a log counts every page the log's first 4 KiB
 * after its end touch as elided (the previous run's answers are lost:
 * store_after_restart_parse): MariaDB writes on, and then writes that
 * page itself, so a test starts with no page elided. With store false,
 * only the changes (a parent's copy of a child's log). */
static inline void leave_restart_window_as(struct host *h, bool store)
{
	static uint8_t filler[PS];
	read_file(h->ibd_path, filler, PS, (off_t)(NPAGES - 1) * PS);
	for (unsigned i = 0; i < 12; i++)
		change(h, NPAGES - 1, 1000 + i * 500, (uint8_t)i, 400, filler);
	if (!store)
		return;
	flush_log(h);
	host_page_write(h, NPAGES - 1, filler);
}

static inline void leave_restart_window(struct host *h)
{
	leave_restart_window_as(h, true);
}

/* MariaDB's log goes on with changes of page 5 (never elided; image: its
 * page as they leave it), written and checkpointed every 60 KB, until
 * its LSN reaches `upto`; the last changes stay unwritten. */
static inline void log_on_until(struct host *h, uint64_t upto, uint8_t *image)
{
	static unsigned i;
	while (h->l.lsn < upto) {
		change(h, 5, 1000 + (i % 16) * 500, (uint8_t)i, 400, image);
		i++;
		if (h->l.lsn - h->written > 60000) {
			flush_log(h);
			CHECK_EQ_U(checkpoint(h, h->l.lsn), 0);
		}
	}
}

static inline void host_make(struct host *h)
{
	host_make_pool(h, NULL);
}

/* The store over the host's files, as an export starts: elision on (its
 * pool opened, doublewrite slots checked, records put back), then ingest
 * from the log file's checkpoint. */
/* A store over the host's files with its elision on and the pool at
 * pool_path: *out, and ppl_store_start_elision's result (err says why it
 * refused). The caller frees *out. */
static inline int host_store_elision(struct host *h, const char *pool_path, unsigned apply_threads,
				     struct ppl_store **out, char *err, size_t errlen)
{
	struct ppl_store_env env = {.log = {.log = on_log, .arg = h}, .now_ns = clock_of, .clock_arg = h, .io = h->io};
	*out = ppl_store_new(h->dir, &env);
	CHECK(*out != NULL);
	struct ppl_config c = {.pool_path = (char *)pool_path, .block_size = 64, .max_per_page = 256,
			       .apply_threads = apply_threads, .elision_address = "127.0.0.1", .elision_port = 0,
			       .elision_clients = "127.0.0.1", .elision_token = "t",
			       .allow_volatile_pool = h->allow_volatile_pool,
			       .ingest_behind = h->ingest_behind || behind_from_env(), .log_on_pmem = h->log_on_pmem};
	int rc = ppl_store_start_elision(*out, &c, err, errlen);
	if (rc == 0)
		rc = ppl_store_start_ingest_behind(*out, &c, err, errlen);
	return rc != 0 ? rc : ppl_store_start_log_on_pmem(*out, &c, err, errlen);
}

static inline void host_start_threads(struct host *h, unsigned apply_threads)
{
	char err[512];
	pthread_mutex_lock(&h->lines_lock);
	h->nlines = 0;
	pthread_mutex_unlock(&h->lines_lock);
	h->clock_ns = START_NS;
	int rc = host_store_elision(h, h->pool_path, apply_threads, &h->s, err, sizeof err);
	if (rc)
		printf("start_elision: %s\n", err);
	CHECK(rc == 0);
	ppl_store_set_page_cache(h->s, h->page_cache);
	ppl_store_start_from_disk(h->s);
	h->clock_ns += 60ull * 1000000000ull; /* past every start-up window */
}

static inline void host_start(struct host *h)
{
	host_start_threads(h, 0);
}

static inline void host_open(struct host *h)
{
	host_make(h);
	host_start(h);
}

static inline int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)ftw;
	return flag == FTW_DP ? rmdir(path) : unlink(path);
}

static inline void host_close(struct host *h)
{
	ppl_store_free(h->s);
	CHECK(nftw(h->dir, rm_entry, 8, FTW_DEPTH | FTW_PHYS) == 0);
	CHECK(unlink(h->pool_path) == 0);
	free(h->l.file);
}


#endif
