/* Finding the real libc/liburing/libaio functions behind our wrappers with
 * dlsym(RTLD_NEXT). Done once at init; anything called before that, or
 * from inside dlsym itself (which may allocate, and an allocator may open
 * files), goes straight to the system call instead. */
#include "catcher.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <sys/syscall.h>
#include <unistd.h>

struct catcher_real catcher_real;

void *catcher_resolve(const char *name)
{
	catcher_busy++;
	void *p = dlsym(RTLD_NEXT, name);
	catcher_busy--;
	return p;
}

#define RESOLVE(field, name)                                                                   \
	do {                                                                                   \
		void *p_ = catcher_resolve(name);                                              \
		__atomic_store_n((void **)&catcher_real.field, p_, __ATOMIC_RELEASE);          \
	} while (0)

void catcher_resolve_all(void)
{
	RESOLVE(pwrite64, "pwrite64");
	RESOLVE(pwrite, "pwrite");
	RESOLVE(pwritev, "pwritev");
	RESOLVE(pwritev2, "pwritev2");
	RESOLVE(open, "open");
	RESOLVE(open64, "open64");
	RESOLVE(openat, "openat");
	RESOLVE(openat64, "openat64");
	RESOLVE(close, "close");
	RESOLVE(dup, "dup");
	RESOLVE(dup2, "dup2");
	RESOLVE(dup3, "dup3");
	RESOLVE(rename, "rename");
	RESOLVE(unlink, "unlink");
	RESOLVE(unlinkat, "unlinkat");
	RESOLVE(fsync, "fsync");
	RESOLVE(fdatasync, "fdatasync");
	/* May be NULL now (library not loaded yet); the wrappers retry. */
	RESOLVE(io_uring_submit, "io_uring_submit");
	RESOLVE(io_submit, "io_submit");
}

/* glibc's pwrite/pwritev2 system calls take the offset as one register on
 * x86-64 (pwritev2 splits it in two halves on every arch). */
ssize_t catcher_sys_pwrite(int fd, const void *buf, size_t n, off_t off)
{
	return syscall(SYS_pwrite64, fd, buf, n, off);
}

ssize_t catcher_sys_pwritev2(int fd, const struct iovec *iov, int cnt, off_t off, int flags)
{
	unsigned long lo = (unsigned long)(uint64_t)off, hi = (unsigned long)((uint64_t)off >> 32);
#ifdef __LP64__
	hi = 0; /* the kernel shifts the high half out of a 64-bit long */
#endif
	return syscall(SYS_pwritev2, fd, iov, cnt, lo, hi, flags);
}

int catcher_sys_openat(int dirfd, const char *path, int flags, mode_t mode)
{
	return (int)syscall(SYS_openat, dirfd, path, flags, mode);
}

int catcher_sys_close(int fd)
{
	return (int)syscall(SYS_close, fd);
}
