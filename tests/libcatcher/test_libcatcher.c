/* libcatcher end to end, without MariaDB: a writer process running with
 * LD_PRELOAD=libcatcher.so writes InnoDB-shaped pages in each I/O style
 * (pwrite64, pwritev/pwritev2, io_uring, libaio) while ppl-elision-ref
 * answers in each scripted way (ACK all, NACK all, ACK a list, time out,
 * drop the connection, wrong token, no server at all, ACKs for request ids
 * never asked), and in passthrough
 * and off modes. Afterwards this process (not preloaded) reads the file
 * back: a page must hold the new image unless the storage node ACKed it,
 * every call/completion must report the full length, and the stats file
 * must account for every page.
 *
 *   test_libcatcher LIBCATCHER_SO PPL_ELISION_REF   (orchestrator)
 *   test_libcatcher --writer STYLE DATADIR RESULTS BEHAVIOUR   (under LD_PRELOAD) */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <libaio.h>
#include <liburing.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "ppl/crc32c.h"
#include "ppl/elision_proto.h"
#include "ppl/mach.h"

#define PS 16384u
#define NPAGES 16u
#define SPACE 5u
#define TIMEOUT_MS 100
#define FILL 0xee

/* ---- page images shared by writer and checker ---- */

static bool page_valid(unsigned i)
{
	return i != 3 && i != 4 && i != 5;
}

static void make_page(uint8_t *p, unsigned i, uint64_t lsn)
{
	memset(p, (int)(i * 7 + 1), PS);
	ppl_wr4(p + 4, i == 5 ? 99 : i);           /* page 5 claims to be page 99 */
	ppl_wr8(p + 16, i == 3 ? 0 : lsn);         /* page 3 was never logged */
	ppl_wr2(p + 24, 17855);
	ppl_wr4(p + 34, SPACE);
	if (i == 0) {
		ppl_wr4(p + 38, SPACE);
		ppl_wr4(p + 38 + 16, 0x15); /* full_crc32, 16 KiB */
	}
	ppl_wr4(p + PS - 8, i == 3 ? 0 : (uint32_t)lsn);
	ppl_wr4(p + PS - 4, ppl_crc32c(0, p, PS - 4));
	if (i == 4)
		p[100] ^= 1; /* torn after the checksum was computed */
}

static uint64_t lsn_of(unsigned i)
{
	return 1000 + i;
}

/* ---- writer (runs with libcatcher preloaded) ---- */

static FILE *results;
static double max_op_ms;

static double now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* 0 is an ACK verdict: a query or plan that libcatcher forgot to
 * initialise reads as "elide this page" when the stack beneath the caller
 * is zero. Zeroing a large area just before every intercepted write makes
 * such a forgotten initialisation drop writes every time, not by chance. */
static __attribute__((noinline)) void poison_stack(void)
{
	uint8_t area[256 * 1024];
	memset(area, 0, sizeof area);
	__asm__ volatile("" : : "r"(area) : "memory");
}

static void result(const char *op, long got, long want)
{
	fprintf(results, "%s %ld %ld\n", op, got, want);
}

static void timed_start(double *t)
{
	*t = now_ms();
}

static void timed_end(double t)
{
	double d = now_ms() - t;
	if (d > max_op_ms)
		max_op_ms = d;
}

static uint8_t *images(void)
{
	uint8_t *buf = aligned_alloc(4096, (size_t)PS * NPAGES);
	for (unsigned i = 0; i < NPAGES; i++)
		make_page(buf + (size_t)i * PS, i, lsn_of(i));
	return buf;
}

static void write_sync(int fd, uint8_t *buf, bool vectored)
{
	double t;
	char op[64];
	for (unsigned i = 0; i < 8; i++) {
		ssize_t r;
		errno = 4242;
		timed_start(&t);
		poison_stack();
		if (vectored) {
			/* the page crosses from one iovec into the next (at a
			 * 512-byte boundary, which O_DIRECT accepts) */
			struct iovec v[2] = {{buf + (size_t)i * PS, 4608}, {buf + (size_t)i * PS + 4608, PS - 4608}};
			r = pwritev(fd, v, 2, (off_t)i * PS);
		} else if (i == 6) {
			/* through a duplicate: dup2 must carry the fd's class */
			int d = dup2(fd, 100);
			poison_stack();
			r = pwrite64(d, buf + (size_t)i * PS, PS, (off_t)i * PS);
			close(d);
		} else {
			r = pwrite64(fd, buf + (size_t)i * PS, PS, (off_t)i * PS);
		}
		timed_end(t);
		snprintf(op, sizeof op, "page%u", i);
		result(op, r, PS);
		result("errno_kept", errno, 4242);
	}
	ssize_t r;
	timed_start(&t);
	poison_stack();
	if (vectored) {
		struct iovec v[3] = {{buf + 8 * PS, 20480}, {buf + 8 * PS + 20480, 69632},
				     {buf + 8 * PS + 90112, 8 * PS - 90112}};
		r = pwritev2(fd, v, 3, 8 * PS, 0);
	} else {
		r = pwrite64(fd, buf + 8 * PS, 8 * PS, 8 * PS);
	}
	timed_end(t);
	result("pages8-15", r, 8 * PS);
}

static void write_uring(int fd, uint8_t *buf)
{
	struct io_uring ring;
	int e = io_uring_queue_init(32, &ring, 0);
	if (e < 0) {
		result("io_uring_queue_init", e, 0);
		return;
	}
	struct iovec iov[8];
	double t;
	/* pages 0..3: one WRITEV per submit, as MariaDB does */
	for (unsigned i = 0; i < 4; i++) {
		struct io_uring_sqe *sqe = io_uring_get_sqe(&ring);
		iov[i] = (struct iovec){buf + (size_t)i * PS, PS};
		io_uring_prep_writev(sqe, fd, &iov[i], 1, (off_t)i * PS);
		io_uring_sqe_set_data64(sqe, i);
		timed_start(&t);
		poison_stack();
		result("submit1", io_uring_submit(&ring), 1);
		timed_end(t);
	}
	/* pages 4..7 pending together, then one multi-page WRITE for 8..15 */
	for (unsigned i = 4; i < 8; i++) {
		struct io_uring_sqe *sqe = io_uring_get_sqe(&ring);
		iov[i] = (struct iovec){buf + (size_t)i * PS, PS};
		io_uring_prep_writev(sqe, fd, &iov[i], 1, (off_t)i * PS);
		io_uring_sqe_set_data64(sqe, i);
	}
	timed_start(&t);
	poison_stack();
	result("submit4", io_uring_submit(&ring), 4);
	timed_end(t);
	struct io_uring_sqe *sqe = io_uring_get_sqe(&ring);
	io_uring_prep_write(sqe, fd, buf + 8 * PS, 8 * PS, 8 * PS);
	io_uring_sqe_set_data64(sqe, 8);
	timed_start(&t);
	poison_stack();
	result("submit_multi", io_uring_submit_and_wait(&ring, 1), 1); /* the other submit entry */
	timed_end(t);
	for (unsigned n = 0; n < 9; n++) {
		struct io_uring_cqe *cqe;
		if (io_uring_wait_cqe(&ring, &cqe) != 0) {
			result("wait_cqe", -1, 0);
			break;
		}
		unsigned id = (unsigned)io_uring_cqe_get_data64(cqe);
		char op[32];
		snprintf(op, sizeof op, "cqe%u", id);
		result(op, cqe->res, id == 8 ? 8 * PS : PS);
		io_uring_cqe_seen(&ring, cqe);
	}
	io_uring_queue_exit(&ring);
}

static void write_aio(int fd, uint8_t *buf)
{
	io_context_t ctx = 0;
	int e = io_setup(32, &ctx);
	if (e < 0) {
		result("io_setup", e, 0);
		return;
	}
	struct iocb cbs[9];
	struct iocb *ptrs[9];
	double t;
	for (unsigned i = 0; i < 9; i++) {
		size_t len = i == 8 ? 8 * PS : PS;
		io_prep_pwrite(&cbs[i], fd, buf + (size_t)i * PS, len, (long long)i * PS);
		cbs[i].data = (void *)(uintptr_t)(i + 1);
		ptrs[i] = &cbs[i];
	}
	for (unsigned i = 0; i < 4; i++) {
		timed_start(&t);
		poison_stack();
		result("io_submit1", io_submit(ctx, 1, &ptrs[i]), 1);
		timed_end(t);
	}
	timed_start(&t);
	poison_stack();
	result("io_submit5", io_submit(ctx, 5, &ptrs[4]), 5); /* 4..7 and the multi-page 8..15 */
	timed_end(t);
	for (unsigned i = 0; i < 9; i++)
		result("iocb_fd_restored", cbs[i].aio_fildes, fd);
	unsigned got = 0;
	while (got < 9) {
		struct io_event ev[9];
		int n = io_getevents(ctx, 1, 9, ev, NULL);
		if (n < 0 && n != -EINTR) {
			result("io_getevents", n, 0);
			break;
		}
		for (int k = 0; k < n; k++) {
			unsigned id = (unsigned)(uintptr_t)ev[k].data - 1;
			char op[32];
			snprintf(op, sizeof op, "event%u", id);
			result(op, (long)ev[k].res, id == 8 ? 8 * PS : PS);
		}
		got += n > 0 ? (unsigned)n : 0;
	}
	io_destroy(ctx);
}

/* A multi-page pwrite split around ACKed pages, where the kernel cuts one
 * of the real writes short (RLIMIT_FSIZE at page 12): the call must return
 * what one write would have, the bytes done up to the cut. */
static int write_limited(const char *behaviour, const char *dir)
{
	char path[4096];
	uint8_t *buf = images();
	snprintf(path, sizeof path, "%s/db/t1.ibd", dir);
	int fd = open(path, O_RDWR | O_DIRECT | O_CLOEXEC);
	result("page0", pwrite64(fd, buf, PS, 0), PS); /* the format, learned */
	signal(SIGXFSZ, SIG_IGN);
	struct rlimit old, lim;
	getrlimit(RLIMIT_FSIZE, &old);
	lim = old;
	lim.rlim_cur = 12 * PS;
	setrlimit(RLIMIT_FSIZE, &lim);
	errno = 4242;
	poison_stack();
	ssize_t r = pwrite64(fd, buf + 8 * PS, 8 * PS, 8 * PS);
	int e = errno;
	setrlimit(RLIMIT_FSIZE, &old);
	/* ack: nothing is written, nothing is cut; list: pages 8 | 9 10 ACKed |
	 * 11 12 cut after 11; others: one write cut after 11 */
	result("limited_write", r, !strcmp(behaviour, "ack") ? 8 * PS : 4 * PS);
	result("errno_kept", e, 4242);
	close(fd);
	free(buf);
	return 0;
}

static int writer(const char *style, const char *dir, const char *resfile, const char *behaviour)
{
	results = fopen(resfile, "w");
	if (!results)
		return 1;
	char path[4096], path2[4096];
	uint8_t *buf = images();
	snprintf(path, sizeof path, "%s/db/t1.ibd", dir);
	int fd = open(path, O_RDWR | O_DIRECT | O_CLOEXEC);
	if (fd < 0) {
		result("open", -1, 0);
		return 1;
	}
	if (!strcmp(style, "limit")) {
		close(fd);
		write_limited(behaviour, dir);
		fprintf(results, "max_op_ms %.0f 0\n", max_op_ms);
		fclose(results);
		free(buf);
		return 0;
	}
	if (!strcmp(style, "pwrite"))
		write_sync(fd, buf, false);
	else if (!strcmp(style, "pwritev"))
		write_sync(fd, buf, true);
	else if (!strcmp(style, "uring") || !strcmp(style, "uring-deferred"))
		write_uring(fd, buf);
	else
		write_aio(fd, buf);

	/* A forked child asks on its own connections (the inherited sockets
	 * are closed in the child) and completes its write like the parent. */
	fflush(results);
	pid_t child = fork();
	if (child == 0)
		_exit(pwrite64(fd, buf + 2 * PS, PS, 2 * PS) == PS ? 0 : 1);
	int cst = -1;
	waitpid(child, &cst, 0);
	result("fork_child", WIFEXITED(cst) ? WEXITSTATUS(cst) : 99, 0);

	/* Renamed to a temporary name while open: the same fd now refers to
	 * a file that is never elided. Page 7 gets a newer image. */
	snprintf(path2, sizeof path2, "%s/db/#sql-t1.ibd", dir);
	result("rename", rename(path, path2), 0);
	uint8_t *p7 = aligned_alloc(4096, PS);
	make_page(p7, 7, 5000);
	poison_stack();
	result("renamed_write", pwrite64(fd, p7, PS, 7 * PS), PS);
	result("close", close(fd), 0);

	/* A page file unlinked while open: never elided (class other). */
	snprintf(path, sizeof path, "%s/db/t3.ibd", dir);
	int ufd = open(path, O_RDWR | O_DIRECT | O_CLOEXEC);
	result("unlink", unlink(path), 0);
	poison_stack();
	result("unlinked_write", pwrite64(ufd, buf + PS, PS, PS), PS);
	close(ufd);

	/* Never elided: the temporary tablespace, and a page file outside
	 * the data directory. */
	const char *others[] = {"ibtmp1", "../outside/t9.ibd"};
	for (unsigned k = 0; k < 2; k++) {
		snprintf(path, sizeof path, "%s/%s", dir, others[k]);
		int ofd = open(path, O_RDWR | O_DIRECT | O_CLOEXEC);
		poison_stack();
		result("other_write", ofd >= 0 ? pwrite64(ofd, buf + PS, PS, PS) : -1, PS);
		if (ofd >= 0)
			close(ofd);
	}
	fprintf(results, "max_op_ms %.0f 0\n", max_op_ms);
	fclose(results);
	free(p7);
	free(buf);
	return 0;
}

/* ---- files that must never be elided (writer side) ----
 *
 * The temporary tablespace and #sql intermediate tables are redo-uncovered
 * (DESIGN I7), and a descriptor without O_DIRECT writes through a cache
 * that an elided write would leave stale on a caching client mount: every
 * write to them must reach the file, whatever the storage node answers.
 * Their pages are perfectly valid images, so nothing but the file's class
 * or the descriptor's mode can keep them from being asked about and ACKed;
 * one file switched to O_DIRECT with fcntl shows the check is made on the
 * descriptor as it is at write time, not as it was opened. */

#define TP 8u /* pages per file */

enum how_opened { DIRECT, BUFFERED, TO_DIRECT, TO_BUFFERED };

static const struct tfile {
	const char *name;
	uint32_t space;
	enum how_opened how;
	bool elidable; /* with a server that ACKs everything */
} tfiles[] = {
	{"ibtmp1", 0xfffffffeu, DIRECT, false},
	{"db/#sql-alter-4d2-5.ibd", 21, DIRECT, false},
	{"db/#sql-ib42.ibd", 22, DIRECT, false},
	{"db/buffered.ibd", 23, BUFFERED, false},
	{"db/to_direct.ibd", 24, TO_DIRECT, true},
	{"db/to_buffered.ibd", 25, TO_BUFFERED, false},
};
#define NTF (sizeof tfiles / sizeof *tfiles)

/* A valid full_crc32 page i of `space`, page 0 carrying the flags. */
static void valid_page(uint8_t *p, unsigned i, uint32_t space)
{
	uint64_t lsn = 7000 + space * 100 + i;
	memset(p, (int)(space + i * 3), PS);
	ppl_wr4(p + 4, i);
	ppl_wr8(p + 16, lsn);
	ppl_wr2(p + 24, 17855);
	ppl_wr4(p + 34, space);
	if (i == 0) {
		ppl_wr4(p + 38, space);
		ppl_wr4(p + 38 + 16, 0x15);
	}
	ppl_wr4(p + PS - 8, (uint32_t)lsn);
	ppl_wr4(p + PS - 4, ppl_crc32c(0, p, PS - 4));
}

static int open_tfile(const char *dir, const struct tfile *t)
{
	char path[4096];
	snprintf(path, sizeof path, "%s/%s", dir, t->name);
	int fd = open(path, O_RDWR | O_CLOEXEC | (t->how == DIRECT || t->how == TO_BUFFERED ? O_DIRECT : 0));
	if (fd >= 0 && (t->how == TO_DIRECT || t->how == TO_BUFFERED)) {
		int fl = fcntl(fd, F_GETFL);
		fl = t->how == TO_DIRECT ? fl | O_DIRECT : fl & ~O_DIRECT;
		if (fcntl(fd, F_SETFL, fl) != 0)
			result("fcntl", -1, 0);
	}
	return fd;
}

static int files_writer(const char *style, const char *dir, const char *resfile)
{
	results = fopen(resfile, "w");
	if (!results)
		return 1;
	int fds[NTF];
	uint8_t *img[NTF];
	for (unsigned k = 0; k < NTF; k++) {
		fds[k] = open_tfile(dir, &tfiles[k]);
		result("open", fds[k] >= 0, 1);
		img[k] = aligned_alloc(4096, (size_t)PS * TP);
		for (unsigned i = 0; i < TP; i++)
			valid_page(img[k] + (size_t)i * PS, i, tfiles[k].space);
	}
	char op[64];
	if (!strcmp(style, "pwrite")) {
		for (unsigned k = 0; k < NTF; k++) {
			for (unsigned i = 0; i < TP - 2; i++) {
				poison_stack();
				ssize_t r = pwrite64(fds[k], img[k] + (size_t)i * PS, PS, (off_t)i * PS);
				snprintf(op, sizeof op, "file%u_page%u", k, i);
				result(op, r, PS);
			}
			struct iovec v[2] = {{img[k] + (size_t)(TP - 2) * PS, PS}, {img[k] + (size_t)(TP - 1) * PS, PS}};
			poison_stack();
			ssize_t r = pwritev(fds[k], v, 2, (off_t)(TP - 2) * PS);
			snprintf(op, sizeof op, "file%u_last2", k);
			result(op, r, 2 * PS);
		}
	} else if (!strcmp(style, "uring")) {
		struct io_uring ring;
		int e = io_uring_queue_init(64, &ring, 0);
		if (e < 0) {
			result("io_uring_queue_init", e, 0);
			return 1;
		}
		struct iovec iov[NTF][TP];
		/* pages 0..3 of each file one submit each, as MariaDB does; then
		 * pages 4..7 of every file in one submit, so that plans of every
		 * class share one batch */
		for (unsigned k = 0; k < NTF; k++) {
			for (unsigned i = 0; i < 4; i++) {
				struct io_uring_sqe *sqe = io_uring_get_sqe(&ring);
				iov[k][i] = (struct iovec){img[k] + (size_t)i * PS, PS};
				io_uring_prep_writev(sqe, fds[k], &iov[k][i], 1, (off_t)i * PS);
				io_uring_sqe_set_data64(sqe, k * 16 + i);
				poison_stack();
				result("submit1", io_uring_submit(&ring), 1);
			}
		}
		for (unsigned i = 4; i < TP; i++) {
			for (unsigned k = 0; k < NTF; k++) {
				struct io_uring_sqe *sqe = io_uring_get_sqe(&ring);
				iov[k][i] = (struct iovec){img[k] + (size_t)i * PS, PS};
				io_uring_prep_writev(sqe, fds[k], &iov[k][i], 1, (off_t)i * PS);
				io_uring_sqe_set_data64(sqe, k * 16 + i);
			}
		}
		poison_stack();
		result("submit_all", io_uring_submit(&ring), (long)(NTF * 4));
		for (unsigned n = 0; n < NTF * TP; n++) {
			struct io_uring_cqe *cqe;
			if (io_uring_wait_cqe(&ring, &cqe) != 0) {
				result("wait_cqe", -1, 0);
				break;
			}
			unsigned id = (unsigned)io_uring_cqe_get_data64(cqe);
			snprintf(op, sizeof op, "cqe_file%u_page%u", id / 16, id % 16);
			result(op, cqe->res, PS);
			io_uring_cqe_seen(&ring, cqe);
		}
		io_uring_queue_exit(&ring);
	} else {
		io_context_t ctx = 0;
		int e = io_setup(64, &ctx);
		if (e < 0) {
			result("io_setup", e, 0);
			return 1;
		}
		struct iocb cbs[NTF * TP];
		struct iocb *ptrs[NTF * TP];
		unsigned n = 0;
		for (unsigned k = 0; k < NTF; k++) {
			for (unsigned i = 0; i < 4; i++, n++) {
				io_prep_pwrite(&cbs[n], fds[k], img[k] + (size_t)i * PS, PS, (long long)i * PS);
				cbs[n].data = (void *)(uintptr_t)(k * 16 + i + 1);
				ptrs[n] = &cbs[n];
				poison_stack();
				result("io_submit1", io_submit(ctx, 1, &ptrs[n]), 1);
			}
		}
		unsigned first = n;
		for (unsigned i = 4; i < TP; i++) {
			for (unsigned k = 0; k < NTF; k++, n++) {
				io_prep_pwrite(&cbs[n], fds[k], img[k] + (size_t)i * PS, PS, (long long)i * PS);
				cbs[n].data = (void *)(uintptr_t)(k * 16 + i + 1);
				ptrs[n] = &cbs[n];
			}
		}
		poison_stack();
		result("io_submit_all", io_submit(ctx, (long)(n - first), &ptrs[first]), (long)(n - first));
		for (unsigned c = 0; c < n; c++)
			result("iocb_fd_restored", cbs[c].aio_fildes, (long)fds[(unsigned)(uintptr_t)cbs[c].data / 16]);
		unsigned got = 0;
		while (got < n) {
			struct io_event ev[NTF * TP];
			int r = io_getevents(ctx, 1, NTF * TP, ev, NULL);
			if (r < 0 && r != -EINTR) {
				result("io_getevents", r, 0);
				break;
			}
			for (int c = 0; c < r; c++) {
				unsigned id = (unsigned)(uintptr_t)ev[c].data - 1;
				snprintf(op, sizeof op, "event_file%u_page%u", id / 16, id % 16);
				result(op, (long)ev[c].res, PS);
			}
			got += r > 0 ? (unsigned)r : 0;
		}
		io_destroy(ctx);
	}
	for (unsigned k = 0; k < NTF; k++) {
		close(fds[k]);
		free(img[k]);
	}
	fclose(results);
	return 0;
}

/* ---- orchestrator ---- */

static const char *lib, *ref_tool, *self;
static char tmpdir[256];

struct behaviour {
	const char *name;
	const char *mode;       /* LIBCATCHER_MODE */
	const char *ref_mode;   /* NULL: no server at all */
	bool acks;              /* ACKs valid pages (all, or the list) */
	bool list;
	const char *ref_token;  /* the server's token */
	const char *expect_reason; /* where refused valid pages must be counted, NULL = any */
};

static const unsigned listed[] = {1, 2, 9, 10, 13};

static bool in_list(unsigned i)
{
	for (size_t k = 0; k < sizeof listed / sizeof *listed; k++)
		if (listed[k] == i)
			return true;
	return false;
}

static void write_file(const char *path, const void *data, size_t len)
{
	FILE *f = fopen(path, "w");
	if (!f || fwrite(data, 1, len, f) != len || fclose(f) != 0) {
		fprintf(stderr, "cannot write %s\n", path);
		exit(1);
	}
}

static void prefill(const char *path, size_t pages)
{
	uint8_t *b = malloc((size_t)PS * pages);
	memset(b, FILL, (size_t)PS * pages);
	write_file(path, b, (size_t)PS * pages);
	free(b);
}

static uint8_t *read_all(const char *path, size_t *len)
{
	FILE *f = fopen(path, "r");
	if (!f)
		return NULL;
	uint8_t *b = malloc((size_t)PS * (NPAGES + 1));
	*len = fread(b, 1, (size_t)PS * (NPAGES + 1), f);
	fclose(f);
	return b;
}

/* errpath: where the child's stderr goes (NULL: ours). */
static pid_t spawn_err(char *const argv[], char *const envp[], const char *errpath)
{
	pid_t pid = fork();
	if (pid == 0) {
		if (errpath) {
			int e = open(errpath, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
			if (e < 0 || dup2(e, 2) != 2)
				_exit(126);
		}
		execve(argv[0], argv, envp);
		_exit(127);
	}
	return pid;
}

static pid_t spawn(char *const argv[], char *const envp[])
{
	return spawn_err(argv, envp, NULL);
}

static pid_t start_ref(const struct behaviour *b, const char *dir, int *port)
{
	char portfile[512], pagefile[512], logfile[512];
	snprintf(portfile, sizeof portfile, "%s/ref.port", dir);
	snprintf(pagefile, sizeof pagefile, "%s/ref.pages", dir);
	snprintf(logfile, sizeof logfile, "%s/ref.log", dir);
	FILE *pf = fopen(pagefile, "w");
	for (size_t k = 0; k < sizeof listed / sizeof *listed; k++)
		fprintf(pf, "%u %u\n", SPACE, listed[k]);
	fclose(pf);
	char *argv[] = {(char *)ref_tool, "--mode", (char *)b->ref_mode, "--port", "0", "--port-file", portfile,
			"--pages", pagefile, "--log", logfile, "--delay-ms", "3000", "--token",
			(char *)b->ref_token, NULL};
	char *envp[] = {"PATH=/usr/bin:/bin", NULL};
	pid_t pid = spawn(argv, envp);
	for (int i = 0; i < 500; i++) {
		FILE *f = fopen(portfile, "r");
		if (f) {
			int ok = fscanf(f, "%d", port);
			fclose(f);
			if (ok == 1)
				return pid;
		}
		usleep(10000);
	}
	fprintf(stderr, "reference server did not start\n");
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	return -1;
}

/* A server that greets properly, then answers every question with an ACK
 * carrying a request id that was never asked: libcatcher must take none of
 * them as a yes, drop the connection and write every page. */
static pid_t start_liar(int *port)
{
	int ls = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in sa = {.sin_family = AF_INET};
	inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
	socklen_t sl = sizeof sa;
	if (ls < 0 || bind(ls, (struct sockaddr *)&sa, sizeof sa) != 0 || listen(ls, 8) != 0 ||
	    getsockname(ls, (struct sockaddr *)&sa, &sl) != 0)
		return -1;
	*port = ntohs(sa.sin_port);
	pid_t pid = fork();
	if (pid != 0) {
		close(ls);
		return pid;
	}
	for (;;) {
		int c = accept(ls, NULL, NULL);
		if (c < 0)
			continue;
		uint8_t in[4096], out[64];
		size_t have = 0;
		bool greeted = false;
		for (;;) {
			ssize_t r = read(c, in + have, sizeof in - have);
			if (r <= 0)
				break;
			have += (size_t)r;
			struct ppl_elide_hdr h;
			long n;
			while ((n = ppl_elide_frame(in, have, &h)) > 0) {
				size_t olen;
				if (!greeted) {
					struct ppl_elide_hello_reply rep = {.version = PPL_ELIDE_VERSION, .max_inflight = 64};
					olen = ppl_elide_put_hello_reply(out, &rep);
					greeted = true;
				} else {
					struct ppl_elide_verdict v = {.id = h.id + 1000, .reason = PPL_ELIDE_ACK};
					olen = ppl_elide_put_verdict(out, &v);
				}
				if (write(c, out, olen) != (ssize_t)olen)
					break;
				memmove(in, in + n, have - (size_t)n);
				have -= (size_t)n;
			}
		}
		close(c);
	}
}

/* A port nothing listens on: bound by the reference server and closed. */
static int dead_port(const char *dir)
{
	struct behaviour b = {.ref_mode = "nack", .ref_token = ""};
	int port = 0;
	pid_t pid = start_ref(&b, dir, &port);
	kill(pid, SIGTERM);
	waitpid(pid, NULL, 0);
	return port;
}

static long json_get(const char *json, const char *cls, const char *key)
{
	/* Our own stats file: {"classes": {"ibd": {"writes": N, ...}}}. */
	char pat[64];
	snprintf(pat, sizeof pat, "\"%s\": {", cls);
	const char *c = strstr(json, pat);
	if (!c)
		return -1;
	const char *end = strstr(c, "}}");
	snprintf(pat, sizeof pat, "\"%s\": ", key);
	const char *k = strstr(c, pat);
	if (!k || (end && k > end))
		return 0; /* refused reasons are listed only when nonzero */
	return atol(k + strlen(pat));
}

static void run(const char *style, const struct behaviour *b)
{
	char dir[512], path[600], res[600], stats[600], env_server[128], env_dir[600], env_stats[700],
	    env_pre[600], env_mode[64];
	static int seq;
	snprintf(dir, sizeof dir, "%s/%d-%s-%s", tmpdir, seq++, style, b->name);
	snprintf(path, sizeof path, "%s/data", dir);
	mkdir(dir, 0755);
	mkdir(path, 0755);
	snprintf(path, sizeof path, "%s/data/db", dir);
	mkdir(path, 0755);
	snprintf(path, sizeof path, "%s/outside", dir);
	mkdir(path, 0755);
	snprintf(path, sizeof path, "%s/data/db/t1.ibd", dir);
	prefill(path, NPAGES);
	snprintf(path, sizeof path, "%s/data/ibtmp1", dir);
	prefill(path, 2);
	snprintf(path, sizeof path, "%s/data/db/t3.ibd", dir);
	prefill(path, 2);
	snprintf(path, sizeof path, "%s/outside/t9.ibd", dir);
	prefill(path, 2);

	int port = 0;
	pid_t ref = -1;
	if (b->ref_mode && !strcmp(b->ref_mode, "liar")) {
		ref = start_liar(&port);
		CHECK(ref > 0);
	} else if (b->ref_mode) {
		ref = start_ref(b, dir, &port);
		CHECK(ref > 0);
	} else {
		port = dead_port(dir);
	}
	snprintf(res, sizeof res, "%s/results", dir);
	snprintf(stats, sizeof stats, "%s/stats.json", dir);
	snprintf(env_server, sizeof env_server, "LIBCATCHER_SERVER=127.0.0.1:%d", port);
	snprintf(env_dir, sizeof env_dir, "LIBCATCHER_DATADIR=%s/data", dir);
	snprintf(env_stats, sizeof env_stats, "LIBCATCHER_STATS_FILE=%s", stats);
	snprintf(env_pre, sizeof env_pre, "LD_PRELOAD=%s", lib);
	snprintf(env_mode, sizeof env_mode, "LIBCATCHER_MODE=%s", b->mode);
	char datadir[600];
	snprintf(datadir, sizeof datadir, "%s/data", dir);
	char *argv[] = {(char *)self, "--writer", (char *)style, datadir, res, (char *)b->name, NULL};
	/* verify_asan_link_order: under PPL_SANITIZE the writer and the
	 * preloaded library are both instrumented, but the preload comes
	 * before the ASan runtime in the load order. */
	bool deferred = !strcmp(style, "uring-deferred");
	char *envp[] = {env_pre, env_server, env_dir, env_stats, env_mode, "LIBCATCHER_TIMEOUT_MS=100",
			"LIBCATCHER_TOKEN=sesame", "LIBCATCHER_BACKOFF_MS=5",
			"ASAN_OPTIONS=verify_asan_link_order=0:detect_leaks=0",
			deferred ? "LIBCATCHER_URING_DEFER=4" : NULL, NULL};
	pid_t w = spawn(argv, envp);
	int status = 0;
	waitpid(w, &status, 0);
	if (ref > 0) {
		kill(ref, b->ref_mode && !strcmp(b->ref_mode, "liar") ? SIGKILL : SIGTERM);
		waitpid(ref, NULL, 0);
	}
	fprintf(stderr, "--- %s / %s\n", style, b->name);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);

	/* every call and completion reported what the application asked for */
	FILE *rf = fopen(res, "r");
	CHECK(rf != NULL);
	char op[64];
	long got, want;
	int nres = 0;
	while (rf && fscanf(rf, "%63s %ld %ld", op, &got, &want) == 3) {
		nres++;
		if (!strcmp(op, "max_op_ms")) {
			/* nothing waits much past LIBCATCHER_TIMEOUT_MS (plus the
			 * connect, which shares the same deadline) */
			if (got > TIMEOUT_MS + 400)
				fprintf(stderr, "an I/O call took %ld ms\n", got);
			CHECK(got <= TIMEOUT_MS + 400);
			continue;
		}
		if (got != want)
			fprintf(stderr, "%s: %ld, want %ld\n", op, got, want);
		CHECK_EQ_U(got, want);
	}
	if (rf)
		fclose(rf);
	CHECK(nres >= (strcmp(style, "limit") ? 10 : 4));

	if (!strcmp(style, "limit"))
		return; /* only the return values matter there */

	/* the bytes on disk */
	bool async = !strcmp(style, "uring") || deferred || !strcmp(style, "aio");
	bool eliding = !strcmp(b->mode, "elide");
	uint8_t img[PS];
	size_t len = 0;
	snprintf(path, sizeof path, "%s/data/db/#sql-t1.ibd", dir);
	uint8_t *disk = read_all(path, &len);
	CHECK(disk && len == (size_t)PS * NPAGES);
	unsigned expect_elided = 0, mixed = 0;
	bool group_acked = true; /* pages 8..15 went as one async request */
	for (unsigned i = 8; i < 16; i++)
		group_acked &= eliding && b->acks && page_valid(i) && (!b->list || in_list(i));
	for (unsigned i = 0; disk && len == (size_t)PS * NPAGES && i < NPAGES; i++) {
		bool acked = eliding && b->acks && page_valid(i) && (!b->list || in_list(i));
		bool elided = acked && !(async && i >= 8 && !group_acked);
		if (acked && !elided)
			mixed++;
		if (i == 7) {
			make_page(img, 7, 5000); /* rewritten after the rename: always on disk */
		} else if (elided) {
			memset(img, FILL, PS);
		} else {
			make_page(img, i, lsn_of(i));
		}
		expect_elided += elided;
		if (memcmp(disk + (size_t)i * PS, img, PS) != 0)
			fprintf(stderr, "page %u: %s on disk\n", i, elided ? "written but should be elided"
									 : "wrong (a refused page must be written)");
		CHECK(memcmp(disk + (size_t)i * PS, img, PS) == 0);
	}
	free(disk);
	const char *others[] = {"data/ibtmp1", "outside/t9.ibd"};
	make_page(img, 1, lsn_of(1));
	for (unsigned k = 0; k < 2; k++) {
		snprintf(path, sizeof path, "%s/%s", dir, others[k]);
		uint8_t *o = read_all(path, &len);
		CHECK(o && len == 2 * PS && memcmp(o + PS, img, PS) == 0);
		free(o);
	}

	/* the stats account for every page */
	uint8_t *js = NULL;
	snprintf(path, sizeof path, "%s", stats);
	FILE *sf = fopen(path, "r");
	if (!strcmp(b->mode, "off")) {
		CHECK(sf == NULL); /* off means off: not even a stats file */
		if (sf)
			fclose(sf);
		return;
	}
	CHECK(sf != NULL);
	if (!sf)
		return;
	js = calloc(1, 65536);
	size_t jl = fread(js, 1, 65535, sf);
	fclose(sf);
	(void)jl;
	const char *j = (const char *)js;
	long writes = json_get(j, "ibd", "writes");
	CHECK_EQ_U(writes, 9); /* 8 single-page + 1 multi-page request */
	CHECK_EQ_U(json_get(j, "ibd", "pages"), NPAGES);
	CHECK_EQ_U(json_get(j, "ibd", "elided"), expect_elided);
	CHECK_EQ_U(json_get(j, "ibd", "bytes_not_sent"), (unsigned long long)expect_elided * PS);
	CHECK_EQ_U(json_get(j, "ibd", "refused_total"), NPAGES - expect_elided);
	CHECK_EQ_U(json_get(j, "ibd", "errors"), 0);
	if (eliding) {
		CHECK_EQ_U(json_get(j, "ibd", "lsn_zero"), 1);
		CHECK_EQ_U(json_get(j, "ibd", "bad_checksum"), 1);
		CHECK_EQ_U(json_get(j, "ibd", "page_id_mismatch"), 1);
		CHECK_EQ_U(json_get(j, "ibd", "async_mixed"), mixed);
	}
	if (b->expect_reason) {
		unsigned valid_refused = 13 - expect_elided - mixed;
		long n = json_get(j, "ibd", b->expect_reason);
		if (!strcmp(b->expect_reason, "timeout") || !strcmp(b->expect_reason, "connection_lost") ||
		    !strcmp(b->expect_reason, "protocol_error")) {
			/* the first failure drops the connection; the pages asked
			 * during the backoff count as unavailable */
			long u = json_get(j, "ibd", "unavailable");
			CHECK(n >= 1);
			CHECK_EQ_U(n + u, valid_refused);
		} else {
			CHECK_EQ_U(n, valid_refused);
		}
	}
	/* the renamed write and ibtmp1: class temp; outside: not tracked */
	CHECK_EQ_U(json_get(j, "temp", "writes"), 2);
	CHECK_EQ_U(json_get(j, "temp", "elided"), 0);
	CHECK_EQ_U(json_get(j, "other", "writes"), 1); /* the unlinked file */
	CHECK_EQ_U(json_get(j, "other", "elided"), 0);
	CHECK_EQ_U(json_get(j, "total", "writes"), 12);
	/* with LIBCATCHER_URING_DEFER=1, io_uring writes every page of which
	 * passed the local checks (0, 1, 2, 6, 7 one by one; 8..15 at once)
	 * are completed by libcatcher's own thread whatever the server says;
	 * nothing else is, and nothing by default */
	CHECK_EQ_U(json_get(j, "elision", "deferred_writes"), deferred && eliding ? 6 : 0);

	/* the server saw exactly the pages that passed the local checks */
	if (b->ref_mode && eliding && b->acks) {
		snprintf(path, sizeof path, "%s/ref.log", dir);
		FILE *lf = fopen(path, "r");
		unsigned space, page, psz, n = 0;
		unsigned long long lsn;
		char ck[16], verdict[32];
		while (lf && fscanf(lf, "%u %u %llu %15s %u %31s", &space, &page, &lsn, ck, &psz, verdict) == 6) {
			n++;
			CHECK_EQ_U(space, SPACE);
			CHECK(page_valid(page) && page < NPAGES);
			CHECK_EQ_U(lsn, lsn_of(page));
			CHECK_EQ_U(psz, PS);
		}
		if (lf)
			fclose(lf);
		CHECK_EQ_U(n, 13 + 1); /* + the forked child's page 2 */
		/* the parent's own questions, and their bytes on the wire: 32 per
		 * question and 16 per verdict, plus one hello exchange at least */
		CHECK_EQ_U(json_get(j, "elision", "questions"), 13);
		/* every question was waited for (by the writer, or for io_uring by libcatcher's thread), in at most 13 exchanges, and
		 * a round trip over loopback takes at least a microsecond */
		long ex = json_get(j, "elision", "exchanges");
		if (deferred) {
			/* libcatcher's thread asked them all: no writer waited */
			CHECK_EQ_U(ex, 0);
			CHECK(json_get(j, "elision", "deferred_p50_us") >= 1);
			CHECK(json_get(j, "elision", "deferred_p99_us") >= json_get(j, "elision", "deferred_p50_us"));
		} else {
			CHECK(ex >= 1 && ex <= 13);
			CHECK(json_get(j, "elision", "wait_p50_us") >= 1);
			CHECK(json_get(j, "elision", "wait_p99_us") >= json_get(j, "elision", "wait_p50_us"));
		}
		CHECK(json_get(j, "elision", "bytes_sent") >= 13 * 32 + 20);
		CHECK(json_get(j, "elision", "bytes_received") >= 13 * 16 + 20);
	}
	free(js);
}

/* The files of tfiles[] written in one I/O style, in elide mode against a
 * server that ACKs every question (or in passthrough): only the file
 * switched to O_DIRECT may lose its writes to the ACKs; every other page
 * must be on disk, never asked about, and counted under its reason; the
 * advice about O_DIRECT is printed once. */
/* Set by --memcheck: the writer runs under valgrind's memcheck, which
 * reports every decision libcatcher makes on memory nobody wrote (the
 * stack poisoning above catches only what zero bytes would trip). */
static const char *valgrind;

static void run_files(const char *style, const struct behaviour *b)
{
	char dir[512], path[700], res[600], errf[600], stats[600], env_server[128], env_dir[700], env_stats[700],
	    env_pre[600], env_mode[64], datadir[600];
	static int seq;
	snprintf(dir, sizeof dir, "%s/files%d-%s-%s", tmpdir, seq++, style, b->name);
	snprintf(datadir, sizeof datadir, "%s/data", dir);
	mkdir(dir, 0755);
	mkdir(datadir, 0755);
	snprintf(path, sizeof path, "%s/db", datadir);
	mkdir(path, 0755);
	for (unsigned k = 0; k < NTF; k++) {
		snprintf(path, sizeof path, "%s/%s", datadir, tfiles[k].name);
		prefill(path, TP);
	}
	int port = 0;
	pid_t ref = start_ref(b, dir, &port);
	CHECK(ref > 0);
	snprintf(res, sizeof res, "%s/results", dir);
	snprintf(errf, sizeof errf, "%s/writer.err", dir);
	snprintf(stats, sizeof stats, "%s/stats.json", dir);
	snprintf(env_server, sizeof env_server, "LIBCATCHER_SERVER=127.0.0.1:%d", port);
	snprintf(env_dir, sizeof env_dir, "LIBCATCHER_DATADIR=%s", datadir);
	snprintf(env_stats, sizeof env_stats, "LIBCATCHER_STATS_FILE=%s", stats);
	snprintf(env_pre, sizeof env_pre, "LD_PRELOAD=%s", lib);
	snprintf(env_mode, sizeof env_mode, "LIBCATCHER_MODE=%s", b->mode);
	char *argv[] = {(char *)self, "--files-writer", (char *)style, datadir, res, NULL};
	char *vg_argv[] = {(char *)valgrind, "-q", "--error-exitcode=99", "--track-origins=yes",
			   (char *)self, "--files-writer", (char *)style, datadir, res, NULL};
	char *envp[] = {env_pre, env_server, env_dir, env_stats, env_mode, "LIBCATCHER_TIMEOUT_MS=5000",
			"LIBCATCHER_TOKEN=sesame", "ASAN_OPTIONS=verify_asan_link_order=0:detect_leaks=0", NULL};
	pid_t w = spawn_err(valgrind ? vg_argv : argv, envp, errf);
	int status = 0;
	waitpid(w, &status, 0);
	if (ref > 0) {
		kill(ref, SIGTERM);
		waitpid(ref, NULL, 0);
	}
	fprintf(stderr, "--- files %s / %s%s\n", style, b->name, valgrind ? " (memcheck)" : "");
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		char cmd[700];
		snprintf(cmd, sizeof cmd, "cat '%s' >&2", errf);
		if (system(cmd) != 0)
			fprintf(stderr, "(no stderr of the writer)\n");
	}
	bool eliding = !strcmp(b->mode, "elide");

	FILE *rf = fopen(res, "r");
	CHECK(rf != NULL);
	char op[64];
	long got, want;
	int nres = 0;
	while (rf && fscanf(rf, "%63s %ld %ld", op, &got, &want) == 3) {
		nres++;
		if (got != want)
			fprintf(stderr, "%s: %ld, want %ld\n", op, got, want);
		CHECK_EQ_U(got, want);
	}
	if (rf)
		fclose(rf);
	CHECK(nres >= (int)(NTF * 2));

	/* the bytes on disk */
	uint8_t img[PS];
	for (unsigned k = 0; k < NTF; k++) {
		snprintf(path, sizeof path, "%s/%s", datadir, tfiles[k].name);
		size_t len = 0;
		uint8_t *disk = read_all(path, &len);
		CHECK(disk && len == (size_t)PS * TP);
		bool elided = eliding && tfiles[k].elidable;
		for (unsigned i = 0; disk && len == (size_t)PS * TP && i < TP; i++) {
			if (elided)
				memset(img, FILL, PS);
			else
				valid_page(img, i, tfiles[k].space);
			if (memcmp(disk + (size_t)i * PS, img, PS) != 0)
				fprintf(stderr, "%s page %u: %s\n", tfiles[k].name, i,
					elided ? "written but ACKed" : "not on disk (the write was dropped)");
			CHECK(memcmp(disk + (size_t)i * PS, img, PS) == 0);
		}
		free(disk);
	}

	/* the server was asked about the O_DIRECT page file only */
	snprintf(path, sizeof path, "%s/ref.log", dir);
	FILE *lf = fopen(path, "r");
	unsigned space, page, psz, asked = 0, asked_other = 0;
	unsigned long long lsn;
	char ck[16], verdict[32];
	while (lf && fscanf(lf, "%u %u %llu %15s %u %31s", &space, &page, &lsn, ck, &psz, verdict) == 6) {
		if (space == 24)
			asked++;
		else
			asked_other++;
	}
	if (lf)
		fclose(lf);
	if (asked_other)
		fprintf(stderr, "the server was asked about %u pages of files never to be elided\n", asked_other);
	CHECK_EQ_U(asked_other, 0);
	CHECK_EQ_U(asked, eliding ? TP : 0);

	/* the stats: every page counted, under its reason */
	FILE *sf = fopen(stats, "r");
	CHECK(sf != NULL);
	if (sf) {
		char *j = calloc(1, 65536);
		size_t jl = fread(j, 1, 65535, sf);
		(void)jl;
		fclose(sf);
		unsigned per_file = !strcmp(style, "pwrite") ? TP - 1 : TP; /* requests */
		CHECK_EQ_U(json_get(j, "temp", "writes"), 3 * per_file);
		CHECK_EQ_U(json_get(j, "temp", "pages"), 3 * TP);
		CHECK_EQ_U(json_get(j, "temp", "elided"), 0);
		CHECK_EQ_U(json_get(j, "temp", "refused_total"), 3 * TP);
		CHECK_EQ_U(json_get(j, "temp", "never_elided"), 3 * TP);
		CHECK_EQ_U(json_get(j, "ibd", "writes"), 3 * per_file);
		CHECK_EQ_U(json_get(j, "ibd", "pages"), 3 * TP);
		CHECK_EQ_U(json_get(j, "ibd", "elided"), eliding ? TP : 0);
		CHECK_EQ_U(json_get(j, "ibd", "refused_total"), eliding ? 2 * TP : 3 * TP);
		CHECK_EQ_U(json_get(j, "ibd", "buffered_io"), eliding ? 2 * TP : 0);
		CHECK_EQ_U(json_get(j, "ibd", "passthrough"), eliding ? 0 : 3 * TP);
		free(j);
	}

	/* what to change, said once */
	size_t elen = 0;
	FILE *ef = fopen(errf, "r");
	char *e = calloc(1, 65536);
	if (ef) {
		elen = fread(e, 1, 65535, ef);
		fclose(ef);
	}
	unsigned advice = 0;
	for (const char *q = e; (q = strstr(q, "innodb_flush_method=O_DIRECT")); q++)
		advice++;
	if (advice != (eliding ? 1u : 0u))
		fprintf(stderr, "writer's stderr (%zu bytes):\n%s\n", elen, e);
	CHECK_EQ_U(advice, eliding ? 1 : 0);
	free(e);
}

int main(int argc, char **argv)
{
	if (argc == 6 && !strcmp(argv[1], "--writer"))
		return writer(argv[2], argv[3], argv[4], argv[5]);
	if (argc == 5 && !strcmp(argv[1], "--files-writer"))
		return files_writer(argv[2], argv[3], argv[4]);
	if (argc == 5 && !strcmp(argv[1], "--memcheck")) {
		valgrind = argv[2];
		argv += 2;
		argc -= 2;
	}
	if (argc != 3) {
		fprintf(stderr, "usage: %s [--memcheck VALGRIND] LIBCATCHER_SO PPL_ELISION_REF\n", argv[0]);
		return 2;
	}
	lib = argv[1];
	ref_tool = argv[2];
	static char selfpath[4096];
	ssize_t n = readlink("/proc/self/exe", selfpath, sizeof selfpath - 1);
	if (n <= 0)
		return 2;
	selfpath[n] = 0;
	self = selfpath;
	const char *t = getenv("TMPDIR");
	snprintf(tmpdir, sizeof tmpdir, "%s/test_libcatcher.XXXXXX", t && *t ? t : "/tmp");
	if (!mkdtemp(tmpdir))
		return 2;

	static const struct behaviour behaviours[] = {
		{"ack", "elide", "ack", true, false, "sesame", NULL},
		{"list", "elide", "list", true, true, "sesame", "nack_unknown_page"},
		{"nack", "elide", "nack", false, false, "sesame", "nack_not_durable"},
		{"timeout", "elide", "timeout", false, false, "sesame", "timeout"},
		{"drop", "elide", "drop", false, false, "sesame", "connection_lost"},
		{"badtoken", "elide", "ack", false, false, "other", "unavailable"},
		{"liar", "elide", "liar", false, false, "sesame", "protocol_error"},
		{"noserver", "elide", NULL, false, false, "sesame", "unavailable"},
		{"passthrough", "passthrough", "ack", false, false, "sesame", NULL},
		{"off", "off", "ack", false, false, "sesame", NULL},
	};
	const char *styles[] = {"pwrite", "pwritev", "uring", "uring-deferred", "aio"};
	const char *file_styles[] = {"pwrite", "uring", "aio"};
	if (valgrind) {
		/* Slow under memcheck: the paths of every I/O style with files
		 * of every class, against a server that ACKs all. */
		for (size_t st = 0; st < 3; st++)
			run_files(file_styles[st], &behaviours[0]);
		goto done;
	}
	for (size_t s = 0; s < sizeof styles / sizeof *styles; s++)
		for (size_t b = 0; b < sizeof behaviours / sizeof *behaviours; b++)
			run(styles[s], &behaviours[b]);
	for (size_t b = 0; b < 3; b++) /* ack, list, nack */
		run("limit", &behaviours[b]);
	for (size_t st = 0; st < 3; st++) {
		run_files(file_styles[st], &behaviours[0]); /* elide, the server ACKs all */
		run_files(file_styles[st], &behaviours[8]); /* passthrough */
	}
done:
	if (!check_failures) {
		char cmd[600];
		snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
		if (system(cmd) != 0)
			fprintf(stderr, "could not remove %s\n", tmpdir);
	} else {
		fprintf(stderr, "files kept in %s\n", tmpdir);
	}
	CHECK_DONE();
}
