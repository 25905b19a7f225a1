/* Which open file descriptors are InnoDB files under the data directory,
 * of which class, and what their tablespace header says. The write path
 * reads an entry without locks (a few relaxed atomic loads); open, close,
 * dup, rename and unlink change entries under one mutex. An fd beyond the
 * table is simply not tracked, which means its writes are never elided. */
#include "catcher.h"

#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "ppl/fileclass.h"
#include "ppl/mach.h"
#include "ppl/page.h"

struct entry {
	uint8_t cls, fmt, space_known;
	uint32_t page_size, space;
	char *path; /* canonical; only under `lock` */
};

static struct entry *table;
static unsigned table_len;
static int max_tracked = -1; /* highest fd that ever had a path, under lock */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static uint32_t default_ps;

#define LOAD(x) __atomic_load_n(&(x), __ATOMIC_RELAXED)
#define STORE(x, v) __atomic_store_n(&(x), (v), __ATOMIC_RELAXED)

const char *catcher_class_name(unsigned cls)
{
	static const char *const names[CLASS_COUNT] = {"none", "ibd", "ibdata", "undo", "redo", "temp", "other"};
	return cls < CLASS_COUNT ? names[cls] : "?";
}

void catcher_fd_init(void)
{
	size_t bytes = (size_t)catcher_cfg.max_fds * sizeof(struct entry);
	/* mmap, not calloc: this can run before the host's allocator is
	 * usable, and untouched pages of the table cost nothing. */
	void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED) {
		catcher_log("cannot map the fd table (%zu bytes): no file is tracked", bytes);
		return;
	}
	table = p;
	__atomic_store_n(&table_len, catcher_cfg.max_fds, __ATOMIC_RELEASE);
}

uint32_t catcher_default_page_size(void)
{
	return catcher_cfg.page_size ? catcher_cfg.page_size : LOAD(default_ps);
}

void catcher_set_default_page_size(uint32_t ps)
{
	if (!LOAD(default_ps))
		STORE(default_ps, ps);
}

void catcher_fd_get(int fd, struct catcher_fd *out)
{
	/* Every field filled, tracked or not: a caller never sees stale stack. */
	*out = (struct catcher_fd){.cls = CLASS_NONE};
	unsigned len = __atomic_load_n(&table_len, __ATOMIC_ACQUIRE);
	if (fd < 0 || (unsigned)fd >= len)
		return;
	struct entry *e = &table[fd];
	/* Acquire pairs with the release stores of cls: whoever sees a class
	 * also sees the format fields written before it. */
	out->cls = __atomic_load_n(&e->cls, __ATOMIC_ACQUIRE);
	if (out->cls == CLASS_NONE)
		return;
	out->fmt = LOAD(e->fmt);
	out->page_size = LOAD(e->page_size);
	out->space_known = LOAD(e->space_known);
	out->space = LOAD(e->space);
}

static void set_format(struct entry *e, uint8_t fmt, uint32_t ps, uint32_t space)
{
	STORE(e->page_size, ps);
	STORE(e->space, space);
	STORE(e->space_known, 1);
	STORE(e->fmt, fmt);
}

void catcher_fd_learn(int fd, uint8_t fmt, uint32_t ps, uint32_t space)
{
	if (fd < 0 || (unsigned)fd >= LOAD(table_len))
		return;
	pthread_mutex_lock(&lock);
	if (LOAD(table[fd].cls) != CLASS_NONE)
		set_format(&table[fd], fmt, ps, space);
	pthread_mutex_unlock(&lock);
	if (fmt == FMT_FCRC32)
		catcher_set_default_page_size(ps);
}

/* Class from the file name alone; CLASS_NONE for anything that is not an
 * InnoDB file we know. */
static unsigned class_of_name(const char *path)
{
	/* The intermediate #sql tables are redo-logged, but they live only
	 * for one ALTER: eliding their pages would gain little and put the
	 * ALTER's result at stake, so they are written like temporary files. */
	switch (ppl_innodb_file_of(path)) {
	case PPL_INNODB_REDO:
	case PPL_INNODB_REDO_NEW:
	case PPL_INNODB_REDO_OLD:
		return CLASS_REDO;
	case PPL_INNODB_TEMP:
	case PPL_INNODB_INTERMEDIATE:
		return CLASS_TEMP;
	case PPL_INNODB_SYSTEM:
		return CLASS_SYSTEM;
	case PPL_INNODB_UNDO:
		return CLASS_UNDO;
	case PPL_INNODB_TABLE:
		return CLASS_IBD;
	default:
		return CLASS_NONE;
	}
}

static bool under_datadir(const char *canon)
{
	for (int i = 0; i < catcher_cfg.ndatadirs; i++) {
		const char *d = catcher_cfg.datadirs[i];
		size_t n = strlen(d);
		if (!strncmp(canon, d, n) && (canon[n] == '/' || (n == 1 && d[0] == '/')))
			return true;
	}
	return false;
}

static unsigned classify(const char *canon)
{
	return under_datadir(canon) ? class_of_name(canon) : CLASS_NONE;
}

/* Reads the FSP header of page 0 through a separate buffered descriptor
 * (the host's may be O_DIRECT, which a small read would not satisfy). */
static void read_header(struct entry *e, const char *canon)
{
	uint8_t buf[PPL_PAGE0_HEAD];
	int fd = catcher_sys_openat(AT_FDCWD, canon, O_RDONLY | O_CLOEXEC | O_NOFOLLOW, 0);
	if (fd < 0)
		return;
	ssize_t n = pread(fd, buf, sizeof buf, 0);
	catcher_sys_close(fd);
	if (n != (ssize_t)sizeof buf)
		return; /* new, empty file: learned from its page 0 write */
	if (ppl_page0_unwritten(buf))
		return; /* allocated, not written yet: learned from its page 0 write */
	uint32_t flags = ppl_rd4(buf + PPL_FSP_HEADER_OFFSET + PPL_FSP_SPACE_FLAGS);
	uint32_t space = ppl_rd4(buf + PPL_FIL_PAGE_SPACE_ID);
	uint32_t ps = 0;
	uint8_t fmt = catcher_flags_fmt(flags, &ps);
	set_format(e, fmt, ps, space);
	if (fmt == FMT_FCRC32)
		catcher_set_default_page_size(ps);
}

static void clear(struct entry *e)
{
	STORE(e->cls, CLASS_NONE);
	STORE(e->fmt, FMT_UNKNOWN);
	STORE(e->space_known, 0);
	free(e->path);
	e->path = NULL;
}

void catcher_fd_opened(int fd, const char *path)
{
	if (fd < 0 || (unsigned)fd >= LOAD(table_len))
		return;
	if (LOAD(table[fd].cls) != CLASS_NONE) {
		/* Closed behind our back (close_range, a raw syscall): forget. */
		pthread_mutex_lock(&lock);
		clear(&table[fd]);
		pthread_mutex_unlock(&lock);
	}
	/* Cheap test on the name as given before asking the kernel for the
	 * canonical path: most opens are of files that are not ours. */
	if (!path || class_of_name(path) == CLASS_NONE)
		return;
	char link[64], canon[PATH_MAX];
	snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
	ssize_t n = readlink(link, canon, sizeof canon - 1);
	if (n <= 0)
		return;
	canon[n] = 0;
	unsigned cls = classify(canon);
	if (cls == CLASS_NONE)
		return;
	char *copy = strdup(canon);
	pthread_mutex_lock(&lock);
	struct entry *e = &table[fd];
	clear(e);
	e->path = copy;
	if (CLASS_IS_PAGE(cls))
		read_header(e, canon);
	if (fd > max_tracked)
		max_tracked = fd;
	__atomic_store_n(&e->cls, (uint8_t)cls, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&lock);
}

void catcher_fd_closed(int fd)
{
	if (fd < 0 || (unsigned)fd >= LOAD(table_len) || LOAD(table[fd].cls) == CLASS_NONE)
		return;
	pthread_mutex_lock(&lock);
	clear(&table[fd]);
	pthread_mutex_unlock(&lock);
}

void catcher_fd_dup(int oldfd, int newfd)
{
	unsigned len = LOAD(table_len);
	if (newfd < 0 || (unsigned)newfd >= len)
		return;
	pthread_mutex_lock(&lock);
	struct entry *n = &table[newfd];
	clear(n);
	if (oldfd >= 0 && (unsigned)oldfd < len && LOAD(table[oldfd].cls) != CLASS_NONE) {
		struct entry *o = &table[oldfd];
		n->path = o->path ? strdup(o->path) : NULL;
		set_format(n, o->fmt, o->page_size, o->space);
		STORE(n->space_known, o->space_known);
		if (newfd > max_tracked)
			max_tracked = newfd;
		__atomic_store_n(&n->cls, o->cls, __ATOMIC_RELEASE);
	}
	pthread_mutex_unlock(&lock);
}

/* Canonical form of a path that may no longer exist (after rename or
 * unlink): its directory resolved, its last component kept. */
static bool canon_path(int dirfd, const char *path, char *out, size_t cap)
{
	char full[PATH_MAX * 2], dir[PATH_MAX], rdir[PATH_MAX];
	if (path[0] == '/') {
		snprintf(full, sizeof full, "%s", path);
	} else {
		if (dirfd == AT_FDCWD) {
			if (!getcwd(dir, sizeof dir))
				return false;
		} else {
			char link[64];
			snprintf(link, sizeof link, "/proc/self/fd/%d", dirfd);
			ssize_t n = readlink(link, dir, sizeof dir - 1);
			if (n <= 0)
				return false;
			dir[n] = 0;
		}
		snprintf(full, sizeof full, "%s/%s", dir, path);
	}
	size_t len = strlen(full);
	while (len > 1 && full[len - 1] == '/')
		full[--len] = 0;
	char *slash = strrchr(full, '/');
	if (slash == full) {
		snprintf(out, cap, "%s", full);
		return true;
	}
	*slash = 0;
	if (!realpath(full, rdir))
		return false;
	return (size_t)snprintf(out, cap, "%s/%s", strcmp(rdir, "/") ? rdir : "", slash + 1) < cap;
}

void catcher_fd_renamed(int olddirfd, const char *oldpath, const char *newpath)
{
	char from[PATH_MAX], to[PATH_MAX];
	if (!LOAD(table_len) || !canon_path(olddirfd, oldpath, from, sizeof from) ||
	    !canon_path(AT_FDCWD, newpath, to, sizeof to))
		return;
	size_t flen = strlen(from);
	pthread_mutex_lock(&lock);
	for (int fd = 0; fd <= max_tracked; fd++) {
		struct entry *e = &table[fd];
		if (!e->path || LOAD(e->cls) == CLASS_NONE)
			continue;
		char *np = NULL;
		if (!strcmp(e->path, from)) {
			np = strdup(to);
		} else if (!strncmp(e->path, from, flen) && e->path[flen] == '/') {
			/* A directory on the way to the file was renamed. */
			size_t len = strlen(to) + strlen(e->path + flen) + 1;
			np = malloc(len);
			if (np)
				snprintf(np, len, "%s%s", to, e->path + flen);
		} else {
			continue;
		}
		if (!np)
			continue;
		free(e->path);
		e->path = np;
		unsigned cls = classify(np);
		/* A file that leaves the data directory or stops being a page
		 * file is still open: keep counting it, never elide it. */
		STORE(e->cls, (uint8_t)(cls == CLASS_NONE ? CLASS_OTHER : cls));
	}
	pthread_mutex_unlock(&lock);
}

void catcher_fd_unlinked(int dirfd, const char *path)
{
	char canon[PATH_MAX];
	if (!LOAD(table_len) || !canon_path(dirfd, path, canon, sizeof canon))
		return;
	pthread_mutex_lock(&lock);
	for (int fd = 0; fd <= max_tracked; fd++) {
		struct entry *e = &table[fd];
		if (e->path && LOAD(e->cls) != CLASS_NONE && !strcmp(e->path, canon))
			STORE(e->cls, CLASS_OTHER);
	}
	pthread_mutex_unlock(&lock);
}

void catcher_fd_after_fork(void)
{
	/* Another thread of the parent may have held the lock at fork. */
	pthread_mutex_t fresh = PTHREAD_MUTEX_INITIALIZER;
	memcpy(&lock, &fresh, sizeof lock);
}
