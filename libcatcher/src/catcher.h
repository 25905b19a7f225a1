/* libcatcher internals shared by its files. Nothing here is exported from
 * the .so: only the interposed libc/liburing/libaio symbols are (see
 * CMakeLists.txt, -fvisibility=hidden + CATCHER_EXPORT). */
#ifndef CATCHER_H
#define CATCHER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

#define CATCHER_EXPORT __attribute__((visibility("default")))
#define CATCHER_UNLIKELY(x) __builtin_expect(!!(x), 0)

/* ---- configuration (config.c) ---- */

enum catcher_mode { CATCHER_OFF, CATCHER_PASSTHROUGH, CATCHER_ELIDE };

#define CATCHER_MAX_DIRS 8

struct catcher_config {
	enum catcher_mode mode;
	char server_host[256];
	char server_port[8];
	char token[257];
	size_t token_len;
	char datadirs[CATCHER_MAX_DIRS][4096]; /* canonical, no trailing slash */
	int ndatadirs;
	unsigned class_mask;      /* page classes that may be elided (1 << class) */
	uint32_t page_size;       /* 0 = from tablespace flags */
	int timeout_ms;           /* whole question, connect included */
	unsigned connections;     /* pool size */
	int backoff_ms, backoff_max_ms;
	char stats_file[4096];    /* "" = none; %p already replaced by the pid */
	char stats_file_pattern[4096];
	int stats_signal;         /* 0 = none */
	int log_interval_s;       /* 0 = none */
	unsigned max_fds;
	unsigned uring_defer;     /* 0, or io_uring writes completed by our thread with at most
				   * this many pages asked about at a time (uring_defer.c) */
};

extern struct catcher_config catcher_cfg;
/* Ready after the first call of catcher_init(); every wrapper calls
 * catcher_ready() first. */
extern volatile int catcher_inited;
void catcher_init(void);
static inline bool catcher_ready(void)
{
	if (CATCHER_UNLIKELY(!__atomic_load_n(&catcher_inited, __ATOMIC_ACQUIRE)))
		catcher_init();
	return catcher_cfg.mode != CATCHER_OFF;
}
void catcher_config_load(void);
void catcher_config_refresh_pid(void); /* after fork: %p in the stats path */

/* Set while libcatcher itself runs code that may re-enter a wrapper
 * (dlsym, init, its own file I/O): wrappers then only forward. */
extern __thread int catcher_busy __attribute__((tls_model("initial-exec")));

/* ---- the real functions (real.c) ---- */

struct catcher_real {
	ssize_t (*pwrite64)(int, const void *, size_t, off_t);
	ssize_t (*pwrite)(int, const void *, size_t, off_t);
	ssize_t (*pwritev)(int, const struct iovec *, int, off_t);
	ssize_t (*pwritev2)(int, const struct iovec *, int, off_t, int);
	int (*open)(const char *, int, ...);
	int (*open64)(const char *, int, ...);
	int (*openat)(int, const char *, int, ...);
	int (*openat64)(int, const char *, int, ...);
	int (*close)(int);
	int (*dup)(int);
	int (*dup2)(int, int);
	int (*dup3)(int, int, int);
	int (*rename)(const char *, const char *);
	int (*unlink)(const char *);
	int (*unlinkat)(int, const char *, int);
	int (*fsync)(int);
	int (*fdatasync)(int);
	int (*io_uring_submit)(void *);
	int (*io_submit)(void *, long, void **);
};
extern struct catcher_real catcher_real;
void catcher_resolve_all(void);
/* For symbols of libraries that may be loaded after us (liburing, libaio). */
void *catcher_resolve(const char *name);

/* Raw system-call forms, used when the real function is not known yet. */
ssize_t catcher_sys_pwrite(int fd, const void *buf, size_t n, off_t off);
ssize_t catcher_sys_pwritev2(int fd, const struct iovec *iov, int cnt, off_t off, int flags);
int catcher_sys_openat(int dirfd, const char *path, int flags, mode_t mode);
int catcher_sys_close(int fd);

/* ---- file classes and the fd table (fdtable.c) ---- */

enum catcher_class {
	CLASS_NONE = 0, /* not ours: never looked at again */
	CLASS_IBD,      /* file-per-table tablespace *.ibd */
	CLASS_SYSTEM,   /* ibdata* */
	CLASS_UNDO,     /* undo[0-9]* */
	CLASS_REDO,     /* ib_logfile*: counted, never elided */
	CLASS_TEMP,     /* ibtmp*, #sql*: counted, never elided */
	CLASS_OTHER,    /* a page file that was unlinked while open */
	CLASS_COUNT
};
#define CLASS_IS_PAGE(c) ((c) == CLASS_IBD || (c) == CLASS_SYSTEM || (c) == CLASS_UNDO)
const char *catcher_class_name(unsigned cls);

/* Tablespace format as learned from page 0 (fdtable.c, page.c). */
enum catcher_fmt { FMT_UNKNOWN = 0, FMT_FCRC32, FMT_UNSUPPORTED };

struct catcher_fd {
	uint8_t cls;
	uint8_t fmt;
	uint32_t page_size; /* for FMT_FCRC32 */
	uint32_t space;     /* valid when space_known */
	uint8_t space_known;
};

void catcher_fd_init(void);
/* Lock-free snapshot of an fd's entry; cls CLASS_NONE if untracked. */
void catcher_fd_get(int fd, struct catcher_fd *out);
/* Records what a write of page 0 told us about the tablespace. */
void catcher_fd_learn(int fd, uint8_t fmt, uint32_t page_size, uint32_t space);
void catcher_fd_opened(int fd, const char *path);
void catcher_fd_closed(int fd);
void catcher_fd_dup(int oldfd, int newfd);
void catcher_fd_renamed(int olddirfd, const char *oldpath, const char *newpath);
void catcher_fd_unlinked(int dirfd, const char *path);
void catcher_fd_after_fork(void);
/* The page size every tablespace of this instance uses, once seen. */
uint32_t catcher_default_page_size(void);
void catcher_set_default_page_size(uint32_t ps);

/* ---- page inspection (page.c) ---- */

/* Why a page (or a write) was written instead of elided. The first
 * PPL_ELIDE_REASON_COUNT values are the storage node's NACK reasons
 * (ppl/elision_proto.h) one to one; the rest are decided locally. */
enum catcher_reason {
	/* 1 .. 12: server NACK reasons */
	R_UNALIGNED = 16,     /* offset/length not whole pages (counted per write) */
	R_PAGE_SIZE,          /* page size not known yet (counted per write) */
	R_UNSUPPORTED_FMT,    /* not full_crc32, or page_compressed */
	R_PAGE_ID,            /* page number/space id do not match the file offset */
	R_LSN_ZERO,
	R_CHECKSUM,           /* full_crc32 checksum or trailer LSN wrong */
	R_PASSTHROUGH,        /* mode passthrough, or class not configured for elision */
	R_UNAVAILABLE,        /* no connection (connect failed, in backoff, refused at hello) */
	R_TIMEOUT,
	R_CONN_LOST,
	R_PROTOCOL,           /* malformed or unexpected answer */
	R_POOL_BUSY,          /* every connection in use for the whole timeout */
	R_UNSUPPORTED_OP,     /* fixed files, unknown offset, ... */
	R_ASYNC_MIXED,        /* ACKed, but another page of the same async I/O was not */
	R_NODEVNULL,          /* could not open /dev/null to complete an elided async I/O */
	R_DOUBLEWRITE,        /* a copy into the doublewrite buffer of ibdata1 */
	R_NEVER_ELIDED,       /* a file of a class never elided (temp, other; redo is not counted) */
	R_BUFFERED,           /* the descriptor lacks O_DIRECT: a client cache would keep the old page */
	R_NOT_ASKED,          /* passed the checks but no answer was recorded (must never be seen) */
	R_COUNT
};
const char *catcher_reason_name(unsigned r);

/* A verdict starts as a refusal and becomes 0 (ACK) only when the storage
 * node's answer is recorded: memory that was never written can then never
 * read as "drop this page". */
struct catcher_query {
	uint32_t space, page_no, checksum, page_size;
	uint64_t lsn;
	uint8_t verdict; /* 0 = ACK, else enum catcher_reason */
	uint8_t ask;     /* passed the local checks: to be asked */
};

/* Checks one page image (whose bytes are contiguous) written at file offset
 * `off`; fills q's page fields and returns 0 if it may be asked about, else
 * a reason. Leaves q->verdict to the caller. */
unsigned catcher_page_check(const uint8_t *page, uint32_t ps, off_t off, const struct catcher_fd *f,
			    struct catcher_query *q);
/* Tablespace format and page size from the flags of a page 0 image. */
uint8_t catcher_flags_fmt(uint32_t flags, uint32_t *page_size);

/* ---- the elision channel client (client.c) ---- */

void catcher_client_init(void);
/* Asks about n pages at once (pipelined) and fills every verdict: 0 only
 * for an explicit ACK. Never blocks longer than the configured timeout. */
void catcher_ask(struct catcher_query **q, size_t n);
void catcher_client_after_fork(void);

/* One connection to the elision service. catcher_ask() keeps a pool of
 * them; libcatcher's io_uring thread (uring_defer.c) owns one of its own. */
struct catcher_conn {
	int fd;
	uint32_t next_id;
	uint32_t window;     /* requests in flight, from the server's HELLO_REPLY */
	uint64_t retry_at;   /* monotonic ns; no connect attempt before */
	int backoff_ms;
};
/* Connects and greets by the deadline; NULL, or why not (c->fd may then
 * be open: drop it). */
const char *catcher_conn_open(struct catcher_conn *c, uint64_t deadline);
/* Closes it and sets the next attempt after the backoff, which doubles. */
void catcher_conn_drop(struct catcher_conn *c, const char *why);
/* Sends all of p by the deadline: 0, -1 error, -2 timeout. */
int catcher_conn_send(int fd, const uint8_t *p, size_t n, uint64_t deadline);
/* The question about q's page as request `id`, written at out; its length. */
size_t catcher_put_question(uint8_t *out, const struct catcher_query *q, uint32_t id);
/* A verdict's reason as recorded: one we do not know counts as "other". */
uint8_t catcher_verdict_reason(uint8_t reason);

/* ---- per-write planning shared by every I/O style (plan.c) ---- */

#define CATCHER_PLAN_MAX_PAGES 256 /* larger writes are not elided */

/* Every plan leaves catcher_plan_write() complete: either `reason` is set
 * (the whole write goes out; q[] of its first pages, up to
 * CATCHER_PLAN_MAX_PAGES, say the same) or npages is between 1 and
 * CATCHER_PLAN_MAX_PAGES and every q[i] holds a refusal or a page to ask
 * about. Only catcher_ask() turns a verdict into an ACK. */
struct catcher_plan {
	int fd;
	struct catcher_fd f;
	off_t off;
	size_t len;
	uint32_t ps;
	size_t npages;          /* whole pages written (0 if not whole pages) */
	unsigned reason;        /* nonzero: nothing is asked, all of it is written */
	struct catcher_query *q; /* q[i].verdict per page */
};

/* Whether an iovec array is one the kernel would accept (count within
 * IOV_MAX, total within SSIZE_MAX); only then do we read it. Sets *len. */
bool catcher_iov_ok(const struct iovec *iov, int cnt, size_t *len);
/* Inspects a write of iov/cnt at off to fd; q must hold
 * CATCHER_PLAN_MAX_PAGES. Does not ask the server. */
void catcher_plan_write(struct catcher_plan *p, int fd, const struct catcher_fd *f, const struct iovec *iov,
			int cnt, off_t off, struct catcher_query *q);
/* Gives the whole write up: reason for the plan and for each query. */
void catcher_plan_refuse(struct catcher_plan *p, unsigned reason);
/* Queries a plan's q[] holds: npages, at most CATCHER_PLAN_MAX_PAGES. */
size_t catcher_plan_nq(const struct catcher_plan *p);
/* Asks the server about every page of several plans in one pipeline. */
void catcher_plan_ask(struct catcher_plan **plans, size_t n);
/* Whether every page of the plan was ACKed. */
bool catcher_plan_all_acked(const struct catcher_plan *p);

/* ---- statistics (stats.c) ---- */

void catcher_stats_init(void);
/* A write request to a tracked file: one call, SQE or iocb. */
void catcher_count_write(unsigned cls, size_t bytes);
/* The pages of a planned write and what became of them (the write itself
 * is counted with catcher_count_write, before it is issued, so that the
 * count is never behind the host's own). `async_elided` says whether an
 * async request was elided as a whole; `sync_done` how many bytes a
 * synchronous one reported done. */
void catcher_count_plan(const struct catcher_plan *p, bool async, bool async_elided, size_t sync_done);
void catcher_count_error(unsigned cls);
/* Which interface a write to a tracked file came through. */
enum catcher_style { STYLE_PWRITE, STYLE_PWRITEV, STYLE_IO_URING, STYLE_LIBAIO, STYLE_COUNT };
void catcher_count_style(enum catcher_style s);
/* Bytes on the elision connection (hellos included) and questions sent,
 * so a run can weigh what the questions cost against the pages saved. */
void catcher_count_wire(size_t sent, size_t received, unsigned questions);
/* How long one catcher_ask() kept its writer waiting (a slot, the
 * connection, the exchange): a page write's whole cost when elided. */
void catcher_count_wait(uint64_t ns);
/* An io_uring write completed by libcatcher's thread (uring_defer.c):
 * its time from the submit to the completion posted. */
void catcher_count_deferred(uint64_t ns);
void catcher_stats_dump(void); /* async-signal-safe */
void catcher_stats_tick(void); /* periodic log line, from the write path */
void catcher_stats_after_fork(void);

/* ---- logging (log.c), async-signal-safe ---- */

void catcher_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Appends decimal v to buf at *pos (bounded by cap). */
void catcher_fmt_u64(char *buf, size_t cap, size_t *pos, uint64_t v);
void catcher_fmt_str(char *buf, size_t cap, size_t *pos, const char *s);

/* ---- /dev/null for completing elided async I/O (devnull.c) ---- */

/* An fd open on /dev/null, verified before each use; -1 if none. */
int catcher_devnull(void);
void catcher_devnull_after_fork(void);

uint64_t catcher_now_ns(void);

#endif
