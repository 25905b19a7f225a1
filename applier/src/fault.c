/* The disk-fault switch of the test build (ppl/fault.h says what and why).
 * Its cost when nothing is armed is one atomic load per file operation,
 * and there is none at all outside the test build. */
#include "ppl/fault.h"

#include "ppl/crash.h"
#include "ppl/fileclass.h"

enum ppl_fault_files ppl_fault_files_of(const char *path)
{
	enum ppl_innodb_file k = ppl_innodb_file_of(path);
	if (k == PPL_INNODB_REDO || k == PPL_INNODB_REDO_NEW || k == PPL_INNODB_REDO_OLD)
		return PPL_FAULT_FILE_LOG;
	return ppl_innodb_file_has_pages(k) ? PPL_FAULT_FILE_DATA : PPL_FAULT_FILE_OTHER;
}

#ifndef PPL_CRASH_POINTS
#include <stdio.h>

int ppl_fault_arm(const char *spec, char *msg, size_t len)
{
	(void)spec;
	snprintf(msg, len, "this build has no fault injection (only the test plugin, "
		 "build/ganesha-fsal-ppl/plugins-crash, has)");
	return -1;
}

void ppl_fault_state(char *spec, size_t len, unsigned long long *hits)
{
	if (len)
		spec[0] = '\0';
	*hits = 0;
}

int ppl_fault_hit(enum ppl_fault_op op, enum ppl_fault_files files, const char *path)
{
	(void)op, (void)files, (void)path;
	return 0;
}

const struct ppl_io *ppl_fault_io(void)
{
	return ppl_io_posix();
}

#else
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

struct fault {
	int op;                  /* enum ppl_fault_op, or -1: any */
	int files;               /* enum ppl_fault_files, or -1: any */
	int err;                 /* the errno, or 0: slow only */
	unsigned ms;             /* the wait before the call */
	unsigned long long left; /* calls still to hit, or 0: until cleared */
	char spec[80];
};

static pthread_once_t once = PTHREAD_ONCE_INIT;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int armed;                /* read without the lock: the fast path */
static struct fault F;
static unsigned long long hits;  /* of the armed fault */
static bool told;                /* its first hit is on stderr */

static const char *const op_names[] = {"write", "sync", "read"};
static const char *const file_names[] = {"log", "data", "other", "pool"};

static int pick(const char *word, size_t len, const char *const *names, int count)
{
	if (len == 3 && strncmp(word, "any", 3) == 0)
		return -1;
	for (int i = 0; i < count; i++)
		if (strlen(names[i]) == len && strncmp(word, names[i], len) == 0)
			return i;
	return -2;
}

static int parse(const char *spec, struct fault *f, char *msg, size_t len)
{
	static const char usage[] = "give <op>:<files>:<effect>[:<count>]: op write|sync|read|any, "
				    "files log|data|pool|any, effect EIO|ENOSPC|<N>ms";
	const char *part[5];
	size_t plen[5];
	int n = 0;
	const char *p = spec;
	while (n < 5) {
		const char *c = strchr(p, ':');
		part[n] = p;
		plen[n++] = c ? (size_t)(c - p) : strlen(p);
		if (c == NULL)
			break;
		p = c + 1;
	}
	if (n < 3 || n > 4 || strlen(spec) >= sizeof f->spec) {
		snprintf(msg, len, "fault \"%s\": %s", spec, usage);
		return -1;
	}
	memset(f, 0, sizeof *f);
	f->op = pick(part[0], plen[0], op_names, 3);
	f->files = pick(part[1], plen[1], file_names, 4);
	if (f->files == PPL_FAULT_FILE_OTHER)
		f->files = -2;
	if (f->op == -2 || f->files == -2) {
		snprintf(msg, len, "fault \"%s\": no such %s: %s", spec, f->op == -2 ? "operation" : "kind of file",
			 usage);
		return -1;
	}
	char *end;
	if (plen[2] == 3 && strncmp(part[2], "EIO", 3) == 0) {
		f->err = EIO;
	} else if (plen[2] == 6 && strncmp(part[2], "ENOSPC", 6) == 0) {
		f->err = ENOSPC;
	} else {
		errno = 0;
		unsigned long ms = strtoul(part[2], &end, 10);
		if (end == part[2] || strncmp(end, "ms", 2) != 0 || end + 2 != part[2] + plen[2] || errno ||
		    ms == 0 || ms > 60000) {
			snprintf(msg, len, "fault \"%s\": no such effect (EIO, ENOSPC, or 1ms..60000ms)", spec);
			return -1;
		}
		f->ms = (unsigned)ms;
	}
	if (n == 4) {
		errno = 0;
		f->left = strtoull(part[3], &end, 10);
		if (end == part[3] || *end != '\0' || errno || f->left == 0) {
			snprintf(msg, len, "fault \"%s\": the count must be a number from 1", spec);
			return -1;
		}
	}
	snprintf(f->spec, sizeof f->spec, "%s", spec);
	return 0;
}

static int arm_locked(const char *spec, char *msg, size_t len)
{
	if (strcmp(spec, "clear") == 0) {
		snprintf(msg, len, "%s", armed ? F.spec : "");
		__atomic_store_n(&armed, 0, __ATOMIC_RELEASE);
		return 0;
	}
	struct fault f;
	if (parse(spec, &f, msg, len) != 0)
		return -1;
	F = f;
	hits = 0;
	told = false;
	__atomic_store_n(&armed, 1, __ATOMIC_RELEASE);
	snprintf(msg, len, "%s", F.spec);
	return 0;
}

static void from_env(void)
{
	const char *s = getenv("PPL_FAULT");
	char msg[300];
	if (s == NULL || *s == '\0')
		return;
	pthread_mutex_lock(&lock);
	int rc = arm_locked(s, msg, sizeof msg - 1);
	pthread_mutex_unlock(&lock);
	if (rc != 0) {
		/* a test that cannot meet its fault must not pass */
		strcat(msg, " (PPL_FAULT)\n");
		ppl_crash_say(msg);
		abort();
	}
}

int ppl_fault_arm(const char *spec, char *msg, size_t len)
{
	pthread_once(&once, from_env);
	pthread_mutex_lock(&lock);
	int rc = arm_locked(spec, msg, len);
	pthread_mutex_unlock(&lock);
	return rc;
}

void ppl_fault_state(char *spec, size_t len, unsigned long long *h)
{
	pthread_once(&once, from_env);
	pthread_mutex_lock(&lock);
	snprintf(spec, len, "%s", armed ? F.spec : "");
	*h = hits;
	pthread_mutex_unlock(&lock);
}

int ppl_fault_hit(enum ppl_fault_op op, enum ppl_fault_files files, const char *path)
{
	pthread_once(&once, from_env);
	if (!__atomic_load_n(&armed, __ATOMIC_ACQUIRE))
		return 0;
	pthread_mutex_lock(&lock);
	if (!armed || (F.op >= 0 && F.op != (int)op) || (F.files >= 0 && F.files != (int)files)) {
		pthread_mutex_unlock(&lock);
		return 0;
	}
	hits++;
	bool first = !told;
	told = true;
	int err = F.err;
	unsigned ms = F.ms;
	char spec[sizeof F.spec];
	memcpy(spec, F.spec, sizeof spec);
	if (F.left && --F.left == 0)
		__atomic_store_n(&armed, 0, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&lock);
	if (first) {
		char line[PATH_MAX + 200];
		snprintf(line, sizeof line, "PPL fault %s hit: %s of %s (%s)\n", spec, op_names[op], path,
			 file_names[files]);
		ppl_crash_say(line);
	}
	if (ms) {
		struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};
		while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
			;
	}
	return err;
}

/* ---- the store's I/O table behind the switch --------------------------- */

/* The path of an open descriptor, read only while a fault is armed. */
static int hit_fd(enum ppl_fault_op op, int fd)
{
	if (!__atomic_load_n(&armed, __ATOMIC_ACQUIRE))
		return 0;
	char link[64], path[PATH_MAX];
	snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
	ssize_t n = readlink(link, path, sizeof path - 1);
	if (n < 0)
		return 0;
	path[n] = '\0';
	return ppl_fault_hit(op, ppl_fault_files_of(path), path);
}

static int f_open(void *arg, const char *path, int flags)
{
	(void)arg;
	return ppl_io_posix()->open(NULL, path, flags);
}

static ssize_t f_pread(void *arg, int fd, void *buf, size_t len, off_t off)
{
	(void)arg;
	int err = hit_fd(PPL_FAULT_READ, fd);
	if (err) {
		errno = err;
		return -1;
	}
	return ppl_io_posix()->pread(NULL, fd, buf, len, off);
}

static ssize_t f_pwrite(void *arg, int fd, const void *buf, size_t len, off_t off)
{
	(void)arg;
	int err = hit_fd(PPL_FAULT_WRITE, fd);
	if (err) {
		errno = err;
		return -1;
	}
	return ppl_io_posix()->pwrite(NULL, fd, buf, len, off);
}

static int f_sync(void *arg, int fd)
{
	(void)arg;
	int err = hit_fd(PPL_FAULT_SYNC, fd);
	if (err) {
		errno = err;
		return -1;
	}
	return ppl_io_posix()->sync(NULL, fd);
}

static int f_close(void *arg, int fd)
{
	(void)arg;
	return ppl_io_posix()->close(NULL, fd);
}

static int f_stat(void *arg, const char *path, struct stat *st)
{
	(void)arg;
	return ppl_io_posix()->stat(NULL, path, st);
}

static int f_fstat(void *arg, int fd, struct stat *st)
{
	(void)arg;
	return ppl_io_posix()->fstat(NULL, fd, st);
}

static int f_list(void *arg, const char *dir, ppl_io_each_fn each, void *each_arg)
{
	(void)arg;
	return ppl_io_posix()->list(NULL, dir, each, each_arg);
}

static const struct ppl_io fault_io = {
	.open = f_open,
	.pread = f_pread,
	.pwrite = f_pwrite,
	.sync = f_sync,
	.close = f_close,
	.stat = f_stat,
	.fstat = f_fstat,
	.list = f_list,
};

const struct ppl_io *ppl_fault_io(void)
{
	return &fault_io;
}
#endif
