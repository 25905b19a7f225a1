/* open/close/dup/rename/unlink: keeping the fd table true to what each
 * descriptor is. The real call always runs first (or, for close, the entry
 * is forgotten first, so that a descriptor number reused by a concurrent
 * open is never wiped after it was classified) and its result and errno
 * are returned unchanged. fsync/fdatasync are passed through as they are. */
#undef _FORTIFY_SOURCE
#include "catcher.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <sys/syscall.h>
#include <unistd.h>

#define MODE_ARG(flags, mode)                                                                  \
	do {                                                                                   \
		if ((flags) & (O_CREAT | __O_TMPFILE)) {                                       \
			va_list ap;                                                            \
			va_start(ap, flags);                                                   \
			mode = (mode_t)va_arg(ap, int);                                        \
			va_end(ap);                                                            \
		}                                                                              \
	} while (0)

static void opened(int fd, const char *path, int flags)
{
	if (fd < 0 || catcher_busy || (flags & (O_APPEND | O_PATH)))
		return; /* with O_APPEND, pwrite ignores its offset: never ours */
	int saved = errno;
	catcher_busy++;
	catcher_fd_opened(fd, path);
	catcher_busy--;
	errno = saved;
}

static int do_openat(int (*real)(int, const char *, int, ...), int dirfd, const char *path, int flags,
		     mode_t mode)
{
	int fd;
	if (!catcher_ready() || catcher_busy)
		return real ? real(dirfd, path, flags, mode) : catcher_sys_openat(dirfd, path, flags, mode);
	fd = real ? real(dirfd, path, flags, mode) : catcher_sys_openat(dirfd, path, flags, mode);
	opened(fd, path, flags);
	return fd;
}

static int do_open(int (*real)(const char *, int, ...), const char *path, int flags, mode_t mode)
{
	int fd;
	if (!catcher_ready() || catcher_busy)
		return real ? real(path, flags, mode) : catcher_sys_openat(AT_FDCWD, path, flags, mode);
	fd = real ? real(path, flags, mode) : catcher_sys_openat(AT_FDCWD, path, flags, mode);
	opened(fd, path, flags);
	return fd;
}

CATCHER_EXPORT int open(const char *path, int flags, ...)
{
	mode_t mode = 0;
	MODE_ARG(flags, mode);
	catcher_ready();
	return do_open(catcher_real.open, path, flags, mode);
}

CATCHER_EXPORT int open64(const char *path, int flags, ...)
{
	mode_t mode = 0;
	MODE_ARG(flags, mode);
	catcher_ready();
	return do_open(catcher_real.open64, path, flags, mode);
}

CATCHER_EXPORT int openat(int dirfd, const char *path, int flags, ...)
{
	mode_t mode = 0;
	MODE_ARG(flags, mode);
	catcher_ready();
	return do_openat(catcher_real.openat, dirfd, path, flags, mode);
}

CATCHER_EXPORT int openat64(int dirfd, const char *path, int flags, ...)
{
	mode_t mode = 0;
	MODE_ARG(flags, mode);
	catcher_ready();
	return do_openat(catcher_real.openat64, dirfd, path, flags, mode);
}

CATCHER_EXPORT int close(int fd)
{
	if (catcher_ready() && !catcher_busy)
		catcher_fd_closed(fd); /* touches nothing for untracked fds */
	return catcher_real.close ? catcher_real.close(fd) : catcher_sys_close(fd);
}

CATCHER_EXPORT int dup(int fd)
{
	bool on = catcher_ready() && !catcher_busy;
	int r = catcher_real.dup ? catcher_real.dup(fd) : (int)syscall(SYS_dup, fd);
	if (on && r >= 0) {
		int saved = errno;
		catcher_fd_dup(fd, r);
		errno = saved;
	}
	return r;
}

CATCHER_EXPORT int dup2(int fd, int fd2)
{
	bool on = catcher_ready() && !catcher_busy;
	int r = catcher_real.dup2 ? catcher_real.dup2(fd, fd2) : (int)syscall(SYS_dup2, fd, fd2);
	if (on && r >= 0 && fd != fd2) {
		int saved = errno;
		catcher_fd_dup(fd, r);
		errno = saved;
	}
	return r;
}

CATCHER_EXPORT int dup3(int fd, int fd2, int flags)
{
	bool on = catcher_ready() && !catcher_busy;
	int r = catcher_real.dup3 ? catcher_real.dup3(fd, fd2, flags) : (int)syscall(SYS_dup3, fd, fd2, flags);
	if (on && r >= 0) {
		int saved = errno;
		catcher_fd_dup(fd, r);
		errno = saved;
	}
	return r;
}

CATCHER_EXPORT int rename(const char *from, const char *to)
{
	bool on = catcher_ready() && !catcher_busy;
	int r = catcher_real.rename ? catcher_real.rename(from, to)
				    : (int)syscall(SYS_renameat, AT_FDCWD, from, AT_FDCWD, to);
	if (on && r == 0) {
		int saved = errno;
		catcher_busy++;
		catcher_fd_renamed(AT_FDCWD, from, to);
		catcher_busy--;
		errno = saved;
	}
	return r;
}

CATCHER_EXPORT int unlink(const char *path)
{
	bool on = catcher_ready() && !catcher_busy;
	/* After the call is fine: canon_path() only needs the directory. */
	int r = catcher_real.unlink ? catcher_real.unlink(path) : (int)syscall(SYS_unlinkat, AT_FDCWD, path, 0);
	if (on && r == 0) {
		int saved = errno;
		catcher_busy++;
		catcher_fd_unlinked(AT_FDCWD, path);
		catcher_busy--;
		errno = saved;
	}
	return r;
}

CATCHER_EXPORT int unlinkat(int dirfd, const char *path, int flags)
{
	bool on = catcher_ready() && !catcher_busy;
	int r = catcher_real.unlinkat ? catcher_real.unlinkat(dirfd, path, flags)
				      : (int)syscall(SYS_unlinkat, dirfd, path, flags);
	if (on && r == 0 && !(flags & AT_REMOVEDIR)) {
		int saved = errno;
		catcher_busy++;
		catcher_fd_unlinked(dirfd, path);
		catcher_busy--;
		errno = saved;
	}
	return r;
}

CATCHER_EXPORT int fsync(int fd)
{
	catcher_ready();
	return catcher_real.fsync ? catcher_real.fsync(fd) : (int)syscall(SYS_fsync, fd);
}

CATCHER_EXPORT int fdatasync(int fd)
{
	catcher_ready();
	return catcher_real.fdatasync ? catcher_real.fdatasync(fd) : (int)syscall(SYS_fdatasync, fd);
}
