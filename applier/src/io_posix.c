/* The file I/O table of the system calls themselves (ppl/io.h). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ppl/io.h"

static int posix_open(void *arg, const char *path, int flags)
{
	(void)arg;
	return open(path, flags);
}

static ssize_t posix_pread(void *arg, int fd, void *buf, size_t len, off_t off)
{
	(void)arg;
	return pread(fd, buf, len, off);
}

static ssize_t posix_pwrite(void *arg, int fd, const void *buf, size_t len, off_t off)
{
	(void)arg;
	return pwrite(fd, buf, len, off);
}

static int posix_sync(void *arg, int fd)
{
	(void)arg;
	return fdatasync(fd);
}

static int posix_close(void *arg, int fd)
{
	(void)arg;
	return close(fd);
}

static int posix_stat(void *arg, const char *path, struct stat *st)
{
	(void)arg;
	return stat(path, st);
}

static int posix_fstat(void *arg, int fd, struct stat *st)
{
	(void)arg;
	return fstat(fd, st);
}

static int posix_list(void *arg, const char *dir, ppl_io_each_fn each, void *each_arg)
{
	(void)arg;
	DIR *d = opendir(dir);
	if (d == NULL)
		return -1;
	struct dirent *de;
	int rc = 0;
	while (rc == 0 && (de = readdir(d)) != NULL) {
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		enum ppl_io_type t = de->d_type == DT_DIR ? PPL_IO_DIR
				   : de->d_type == DT_REG ? PPL_IO_FILE
				   : de->d_type == DT_UNKNOWN ? PPL_IO_UNKNOWN : PPL_IO_OTHER;
		rc = each(each_arg, de->d_name, t);
	}
	int err = errno;
	closedir(d);
	errno = err;
	return rc;
}

static const struct ppl_io posix_io = {
	.open = posix_open,
	.pread = posix_pread,
	.pwrite = posix_pwrite,
	.sync = posix_sync,
	.close = posix_close,
	.stat = posix_stat,
	.fstat = posix_fstat,
	.list = posix_list,
};

const struct ppl_io *ppl_io_posix(void)
{
	return &posix_io;
}
