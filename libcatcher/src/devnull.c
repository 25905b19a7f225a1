/* An elided asynchronous write still has to complete through the host's
 * own completion path with its full length. We get that by pointing the
 * SQE/iocb at a descriptor open on /dev/null, which accepts any write in
 * full. The descriptor is checked before every use (fstat: a character
 * device 1:3): a host that closed it behind our back, and maybe reused the
 * number for a data file, must never receive our redirected writes. */
#include "catcher.h"

#include <fcntl.h>
#include <pthread.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

static int devnull_fd = -1;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

static bool is_devnull(int fd)
{
	struct stat st;
	return fd >= 0 && fstat(fd, &st) == 0 && S_ISCHR(st.st_mode) && major(st.st_rdev) == 1 &&
	       minor(st.st_rdev) == 3;
}

int catcher_devnull(void)
{
	int fd = __atomic_load_n(&devnull_fd, __ATOMIC_ACQUIRE);
	if (is_devnull(fd))
		return fd;
	pthread_mutex_lock(&lock);
	fd = devnull_fd;
	if (!is_devnull(fd)) {
		/* If the old number now belongs to the host, leave it alone. */
		fd = catcher_sys_openat(AT_FDCWD, "/dev/null", O_WRONLY | O_CLOEXEC, 0);
		if (fd >= 0) {
			/* Keep it away from the low numbers hosts like to close
			 * or dup2 over. */
			int high = fcntl(fd, F_DUPFD_CLOEXEC, 512);
			if (high >= 0) {
				catcher_sys_close(fd);
				fd = high;
			}
		}
		__atomic_store_n(&devnull_fd, fd, __ATOMIC_RELEASE);
	}
	pthread_mutex_unlock(&lock);
	return is_devnull(fd) ? fd : -1;
}

void catcher_devnull_after_fork(void)
{
	/* Another thread of the parent may have held the lock at fork; the
	 * descriptor itself is inherited and still good. */
	pthread_mutex_t fresh = PTHREAD_MUTEX_INITIALIZER;
	memcpy(&lock, &fresh, sizeof lock);
}
