/* The store when its own file I/O fails, driven by the host of
 * store_host.h with an I/O table (ppl/io.h) that wraps POSIX and fails
 * one chosen call on one chosen file: a page write into the data file
 * (EIO, or ENOSPC: a full disk, with nothing written or half the page),
 * the fdatasync after it, a read of the data file. They found that a
 * page whose write had failed was later taken as written: read back
 * from the page cache after a failed fdatasync, or from its torn half
 * (its records then dropped), and that each failure kept one more
 * doublewrite slot until none was left.
 *
 * What matters: a page MariaDB was told is written exists somewhere
 * durable, and a read never returns a wrong page. So a checkpoint that
 * needs a page the store could not write is refused (MariaDB stops
 * rather than lose it) with a CRIT line that says why; the page is still
 * served rebuilt meanwhile; once the fault is gone the next checkpoint
 * passes and the data file holds MariaDB's page. A read the store must
 * rebuild from a data file it cannot read fails with EIO, and is served
 * right once the file can be read again. */
#include <pthread.h>
#include <stdio.h>

#include "ppl/io.h"
#include "store_host.h"

/* ---- the faulty table ------------------------------------------------------ */

enum fault_call { FAULT_NONE, FAULT_PREAD, FAULT_PWRITE, FAULT_SYNC };

#define MAX_FDS 1024

/* One fault at a time: `call` on the file at `path` fails with `err`
 * (FAULT_PWRITE with short: half the bytes are written, as a disk that
 * fills up in the middle of the write). The path of every descriptor the
 * store opens is kept, to know which file a call is on. */
static struct faults {
	pthread_mutex_t lock;
	enum fault_call call;
	char path[300];
	int err;
	bool short_write;
	unsigned hits;
	unsigned writes, syncs;        /* pwrites and fdatasyncs of the file at path, failed or not */
	char fd_path[MAX_FDS][300];
} F = {.lock = PTHREAD_MUTEX_INITIALIZER};

static void fault_set(enum fault_call call, const char *path, int err, bool short_write)
{
	pthread_mutex_lock(&F.lock);
	F.call = call;
	snprintf(F.path, sizeof F.path, "%s", path);
	F.err = err;
	F.short_write = short_write;
	F.hits = 0;
	F.writes = F.syncs = 0;
	pthread_mutex_unlock(&F.lock);
}

static unsigned fault_clear(void)
{
	pthread_mutex_lock(&F.lock);
	unsigned hits = F.hits;
	F.call = FAULT_NONE;
	pthread_mutex_unlock(&F.lock);
	return hits;
}

/* Whether `call` on fd is the one that fails (counted). */
static bool fault_hits(enum fault_call call, int fd)
{
	pthread_mutex_lock(&F.lock);
	bool on = fd >= 0 && fd < MAX_FDS && strcmp(F.fd_path[fd], F.path) == 0;
	F.writes += on && call == FAULT_PWRITE;
	F.syncs += on && call == FAULT_SYNC;
	bool hit = F.call == call && on;
	if (hit)
		F.hits++;
	pthread_mutex_unlock(&F.lock);
	return hit;
}

static const struct ppl_io *posix(void)
{
	return ppl_io_posix();
}

static int f_open(void *arg, const char *path, int flags)
{
	(void)arg;
	int fd = posix()->open(posix()->arg, path, flags);
	if (fd >= 0 && fd < MAX_FDS) {
		pthread_mutex_lock(&F.lock);
		snprintf(F.fd_path[fd], sizeof F.fd_path[fd], "%s", path);
		pthread_mutex_unlock(&F.lock);
	}
	return fd;
}

static ssize_t f_pread(void *arg, int fd, void *buf, size_t len, off_t off)
{
	(void)arg;
	if (fault_hits(FAULT_PREAD, fd)) {
		errno = F.err;
		return -1;
	}
	return posix()->pread(posix()->arg, fd, buf, len, off);
}

static ssize_t f_pwrite(void *arg, int fd, const void *buf, size_t len, off_t off)
{
	(void)arg;
	if (fault_hits(FAULT_PWRITE, fd)) {
		if (F.short_write)
			return posix()->pwrite(posix()->arg, fd, buf, len / 2, off);
		errno = F.err;
		return -1;
	}
	return posix()->pwrite(posix()->arg, fd, buf, len, off);
}

static int f_sync(void *arg, int fd)
{
	(void)arg;
	if (fault_hits(FAULT_SYNC, fd)) {
		errno = F.err;
		return -1;
	}
	return posix()->sync(posix()->arg, fd);
}

static int f_close(void *arg, int fd)
{
	(void)arg;
	if (fd >= 0 && fd < MAX_FDS) {
		pthread_mutex_lock(&F.lock);
		F.fd_path[fd][0] = '\0';
		pthread_mutex_unlock(&F.lock);
	}
	return posix()->close(posix()->arg, fd);
}

/* POSIX, but for the calls that can fail here. */
static struct ppl_io faulty;

static const struct ppl_io *faulty_io(void)
{
	faulty = *ppl_io_posix();
	faulty.open = f_open;
	faulty.pread = f_pread;
	faulty.pwrite = f_pwrite;
	faulty.sync = f_sync;
	faulty.close = f_close;
	return &faulty;
}

/* Doublewrite slots in use: one is kept per page whose write failed. */
static unsigned dw_slots_in_use(struct host *h)
{
	return ppl_pool_dw_in_use(ppl_store_pool(h->s));
}

/* The pool moved to tmpfs, where it keeps no records past a checkpoint
 * (Allow_Volatile_Pool unset): every elided page a checkpoint passes is
 * written into its data file by the gate itself, the path the gate's
 * fault tests need. (With a pool that keeps records, a page over its cap
 * waits in the log and is written before the log wraps: the wrap guard's
 * test below.) */
static void pool_on_tmpfs(struct host *h, const struct ppl_pool_geometry *g)
{
	static int seq;
	CHECK(unlink(h->pool_path) == 0);
	snprintf(h->pool_path, sizeof h->pool_path, "/dev/shm/ppl-test-faults-%d-%d.pool", (int)getpid(), seq++);
	char err[512];
	struct ppl_pool_geometry geo = g ? *g : (struct ppl_pool_geometry){.size = 8 << 20};
	geo.identity = h->dir;
	if (ppl_pool_create(h->pool_path, &geo, err, sizeof err) != 0)
		printf("pool: %s\n", err);
	h->allow_volatile_pool = false;
}

/* The host's store over the faulty table; the gate materializes. */
static void open_faulty(struct host *h)
{
	host_make(h);
	pool_on_tmpfs(h, NULL);
	h->io = faulty_io();
	host_start(h);
}

/* ---- the tests ------------------------------------------------------------- */

/* Page 3 changed (len bytes at byte 2000) and its write elided. */
static void elide_change(struct host *h, uint8_t fill, size_t len, uint8_t *image)
{
	read_file(h->ibd_path, image, PS, 3 * PS);
	change(h, 3, 2000, fill, len, image);
	flush_log(h);
	CHECK_EQ_U(ask(h, 3, image, PS), PPL_ELIDE_ACK);
}

/* The gate's write of the page into its data file fails (the pwrite, or
 * the fdatasync after it): the checkpoint write is refused and a CRIT
 * line says what happened, the page is served rebuilt all the while (from
 * the image its doublewrite slot kept if the file's page is torn), and
 * once the fault is gone the next checkpoint writes the page again and
 * passes: even when the file seems to hold it already (after a failed
 * fdatasync the bytes may be in the page cache only), and even when it
 * is torn (half written: its header already names the new LSN, so a
 * rebuild from it would change nothing). One doublewrite slot is kept
 * for the page however often its write fails, none once it succeeds.
 * `expect` is the error the CRIT line names. */
static void test_gate_write_fails(const char *what, enum fault_call call, int err, bool short_write,
				  const char *expect)
{
	printf("gate, %s\n", what);
	struct host h;
	open_faulty(&h);
	static uint8_t image[PS], got[PS];
	/* MariaDB's next checkpoint can pass the page's records only once
	 * the page is in its data file (the pool keeps nothing) */
	elide_change(&h, 0x22, 300, image);

	fault_set(call, h.ibd_path, err, short_write);
	CHECK(checkpoint(&h, h.l.lsn) != 0);
	CHECK(F.hits > 0);
	CHECK(logged(&h, "CRIT"));
	CHECK(logged(&h, "could not be written to its file"));
	CHECK(logged(&h, expect));
	CHECK(logged(&h, "checkpoint write"));
	CHECK(checkpoint(&h, h.l.lsn) != 0); /* again: still refused */
	CHECK_EQ_U(dw_slots_in_use(&h), 1);
	struct ppl_store_figures f;
	ppl_store_figures(h.s, &f);
	CHECK_EQ_U(f.materialized, 0);
	/* a disk that cannot take this page gets no more: elision stops,
	 * said once with what to do, and MariaDB writes its pages itself */
	CHECK(f.disk_failing);
	CHECK(f.disk_failures >= 2);
	CHECK(logged(&h, "the disk fails"));
	CHECK(logged(&h, "Elision is stopped"));
	CHECK(logged(&h, err == ENOSPC ? "Free space" : "Check the disk"));
	CHECK_EQ_U(ask(&h, 3, image, PS), PPL_ELIDE_NACK_BUSY);
	ppl_store_figures(h.s, &f);
	CHECK_EQ_U(f.elide_refused_disk, 1);
	/* MariaDB's page, whatever the file holds now */
	CHECK_EQ_U(host_read(&h, 3, got), 0);
	CHECK(memcmp(got, image, PS) == 0);

	fault_clear();
	CHECK_EQ_U(checkpoint(&h, h.l.lsn), 0);
	ppl_store_figures(h.s, &f);
	CHECK_EQ_U(f.materialized, 1);
	CHECK_EQ_U(dw_slots_in_use(&h), 0);
	read_file(h.ibd_path, got, PS, 3 * PS);
	CHECK(memcmp(got, image, PS) == 0); /* the file holds MariaDB's page */
	CHECK_EQ_U(host_read(&h, 3, got), 0);
	CHECK(memcmp(got, image, PS) == 0);
	/* the page written: the disk takes pages again, and elision resumes */
	CHECK(!f.disk_failing);
	CHECK(logged(&h, "elision resumes"));
	elide_change(&h, 0x33, 100, image);
	host_close(&h);
}

/* Every doublewrite slot kept by a page whose write failed (here the
 * pool has one slot; in production 32 pages of a full disk): the next
 * page to write cannot get a slot. Before, the gate waited for one
 * forever, holding MariaDB's checkpoint write; now that write is refused
 * at once, with a CRIT line that says what to do. Once the disk is fixed,
 * a restart of the storage node writes the kept page from its slot (the
 * pool's open), ingest finds both pages' records in the log again (the
 * refused checkpoint did not pass them), and the next checkpoint
 * materializes them. */
static void test_every_slot_kept(void)
{
	printf("every doublewrite slot kept\n");
	struct host h;
	static const struct ppl_pool_geometry one_slot = {.size = 8 << 20, .dw_slots = 1, .dw_page_size = PS};
	host_make_pool(&h, &one_slot);
	pool_on_tmpfs(&h, &one_slot);
	h.io = faulty_io();
	host_start(&h);
	static uint8_t p3[PS], p4[PS], got[PS];
	read_file(h.ibd_path, p3, PS, 3 * PS);
	read_file(h.ibd_path, p4, PS, 4 * PS);
	change(&h, 3, 2000, 0x41, 300, p3); /* over the per-page pool cap: to be materialized */
	change(&h, 4, 2000, 0x42, 300, p4);
	flush_log(&h);
	CHECK_EQ_U(ask(&h, 3, p3, PS), PPL_ELIDE_ACK);
	CHECK_EQ_U(ask(&h, 4, p4, PS), PPL_ELIDE_ACK);

	fault_set(FAULT_PWRITE, h.ibd_path, ENOSPC, false);
	CHECK(checkpoint(&h, h.l.lsn) != 0); /* page 3's write fails: its slot is kept */
	CHECK(checkpoint(&h, h.l.lsn) != 0); /* MariaDB tries again: no slot left */
	CHECK(logged(&h, "every doublewrite slot (1) holds a page whose data-file write failed"));
	CHECK_EQ_U(dw_slots_in_use(&h), 1);
	CHECK_EQ_U(host_read(&h, 3, got), 0);
	CHECK(memcmp(got, p3, PS) == 0);
	CHECK_EQ_U(host_read(&h, 4, got), 0);
	CHECK(memcmp(got, p4, PS) == 0);

	/* the disk is fixed; the storage node restarts */
	fault_clear();
	ppl_store_free(h.s);
	host_start(&h);
	CHECK_EQ_U(dw_slots_in_use(&h), 0);
	CHECK_EQ_U(checkpoint(&h, h.l.lsn), 0);
	read_file(h.ibd_path, got, PS, 3 * PS);
	CHECK(memcmp(got, p3, PS) == 0);
	read_file(h.ibd_path, got, PS, 4 * PS);
	CHECK(memcmp(got, p4, PS) == 0);
	host_close(&h);
}

/* Pages 3.. changed past the per-page pool cap and their writes elided. */
static void elide_many(struct host *h, unsigned npages, uint8_t fill, uint8_t (*images)[PS])
{
	for (unsigned i = 0; i < npages; i++) {
		read_file(h->ibd_path, images[i], PS, (off_t)(3 + i) * PS);
		change(h, 3 + i, 2000, (uint8_t)(fill + i), 300, images[i]);
	}
	flush_log(h);
	for (unsigned i = 0; i < npages; i++)
		CHECK_EQ_U(ask(h, 3 + i, images[i], PS), PPL_ELIDE_ACK);
}

/* A checkpoint that needs many pages of one file materializes them in
 * batches: a doublewrite slot and a write per page, but one fdatasync of
 * the file per batch (half the pool's slots, at most 16), not one per
 * page. When that one sync fails, every page of the batch keeps its slot,
 * the checkpoint is refused and the pages are served rebuilt; once the
 * disk is back the next checkpoint writes them all and passes. */
static void test_gate_batches(void)
{
	printf("gate materializes in batches, one sync per file and batch\n");
	enum { N = 20 };
	struct host h;
	open_faulty(&h);
	struct ppl_pool_header ph;
	ppl_pool_get_header(ppl_store_pool(h.s), &ph);
	unsigned cap = ph.dw_slots / 2 < 16 ? ph.dw_slots / 2 : 16;
	static uint8_t img[N][PS], got[PS];
	elide_many(&h, N, 0x50, img);

	fault_set(FAULT_NONE, h.ibd_path, 0, false); /* only counted */
	CHECK_EQ_U(checkpoint(&h, h.l.lsn), 0);
	CHECK_EQ_U(F.writes, N);
	CHECK_EQ_U(F.syncs, (N + cap - 1) / cap);
	CHECK(F.syncs < N);
	for (unsigned i = 0; i < N; i++) {
		read_file(h.ibd_path, got, PS, (off_t)(3 + i) * PS);
		CHECK(memcmp(got, img[i], PS) == 0);
	}
	CHECK_EQ_U(dw_slots_in_use(&h), 0);
	struct ppl_store_figures f;
	ppl_store_figures(h.s, &f);
	CHECK_EQ_U(f.materialized, N);

	elide_many(&h, 5, 0x70, img);
	fault_set(FAULT_SYNC, h.ibd_path, EIO, false);
	CHECK(checkpoint(&h, h.l.lsn) != 0);
	CHECK_EQ_U(F.syncs, 1);
	CHECK(logged(&h, "its sync failed"));
	CHECK_EQ_U(dw_slots_in_use(&h), 5);
	for (unsigned i = 0; i < 5; i++) {
		CHECK_EQ_U(host_read(&h, 3 + i, got), 0);
		CHECK(memcmp(got, img[i], PS) == 0);
	}
	fault_clear();
	CHECK_EQ_U(checkpoint(&h, h.l.lsn), 0);
	CHECK_EQ_U(dw_slots_in_use(&h), 0);
	for (unsigned i = 0; i < 5; i++) {
		read_file(h.ibd_path, got, PS, (off_t)(3 + i) * PS);
		CHECK(memcmp(got, img[i], PS) == 0);
	}
	host_close(&h);
}

/* A page over its cap waits in the log (a pool that keeps records) until
 * MariaDB's log is about to wrap over its records; then the wrap guard
 * writes it into its data file first. When that write fails, the log
 * write is refused (MariaDB stops rather than overwrite the only copy of
 * the records) with a CRIT line that says why, and the page is served
 * rebuilt all the while; once the disk is back, MariaDB's next log write
 * passes and the file holds the page. */
static void test_wrap_guard_write_fails(void)
{
	printf("wrap guard, the page write fails\n");
	struct host h;
	host_make(&h);
	h.io = faulty_io();
	host_start(&h);
	static uint8_t image[PS], other[PS], got[PS];
	leave_restart_window(&h);
	uint64_t over = h.l.lsn, cap = h.l.size - SYN_AREA;
	elide_change(&h, 0x61, 300, image);
	CHECK_EQ_U(checkpoint(&h, h.l.lsn), 0); /* no data-file write */
	read_file(h.ibd_path, other, PS, 5 * PS);
	log_on_until(&h, over + cap - 4096, other);
	flush_log(&h);
	log_on_until(&h, h.l.lsn + 16 * 420, other);
	size_t from = syn_off(&h.l, h.written) & ~(size_t)511, to = syn_off(&h.l, h.l.lsn);
	CHECK(to > from);
	fault_set(FAULT_PWRITE, h.ibd_path, ENOSPC, false);
	CHECK(host_log_write(&h, from, h.l.file + from, to - from) != 0);
	CHECK(F.hits > 0);
	CHECK(logged(&h, "could not be written to its file"));
	CHECK(logged(&h, "a log write up to LSN"));
	CHECK_EQ_U(host_read(&h, 3, got), 0);
	CHECK(memcmp(got, image, PS) == 0);
	fault_clear();
	CHECK_EQ_U(host_log_write(&h, from, h.l.file + from, to - from), 0);
	h.written = h.l.lsn;
	read_file(h.ibd_path, got, PS, 3 * PS);
	CHECK(memcmp(got, image, PS) == 0);
	CHECK_EQ_U(dw_slots_in_use(&h), 0);
	host_close(&h);
}

/* A read of part of an elided page (never InnoDB's own, but a client's):
 * the store rebuilds the whole page from its data file and copies the
 * part. When the data file cannot be read, the READ fails with EIO
 * rather than return stale bytes; once it can, the bytes are MariaDB's. */
static void test_read_fails(void)
{
	printf("read of the data file fails\n");
	struct host h;
	open_faulty(&h);
	static uint8_t image[PS], got[PS];
	elide_change(&h, 0x33, 100, image);

	fault_set(FAULT_PREAD, h.ibd_path, EIO, false);
	CHECK_EQ_U(host_read_at(&h, 3 * PS + 1990, got, 200), EIO);
	CHECK(F.hits > 0);
	CHECK(logged(&h, "cannot be served rebuilt"));
	fault_clear();

	memset(got, 0, 200);
	CHECK_EQ_U(host_read_at(&h, 3 * PS + 1990, got, 200), 0);
	CHECK(memcmp(got, image + 1990, 200) == 0);
	CHECK_EQ_U(host_read(&h, 3, got), 0);
	CHECK(memcmp(got, image, PS) == 0);
	host_close(&h);
}

int main(void)
{
	test_gate_write_fails("the page write fails with EIO", FAULT_PWRITE, EIO, false, strerror(EIO));
	test_gate_write_fails("the disk is full (ENOSPC, nothing written)", FAULT_PWRITE, ENOSPC, false,
			      strerror(ENOSPC));
	test_gate_write_fails("the disk fills up in the middle of the page (half written)", FAULT_PWRITE, ENOSPC,
			      true, strerror(ENOSPC));
	test_gate_write_fails("fdatasync fails with EIO", FAULT_SYNC, EIO, false, strerror(EIO));
	test_every_slot_kept();
	test_gate_batches();
	test_wrap_guard_write_fails();
	test_read_fails();
	CHECK_DONE();
}
