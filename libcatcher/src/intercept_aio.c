/* io_submit (libaio, MariaDB with --innodb-linux-aio=aio): like io_uring,
 * a write all of whose pages were ACKed is pointed at /dev/null so that
 * its completion event carries the full length. The kernel copies each
 * iocb during io_submit, so the application's iocbs get their own fd back
 * as soon as the real call returns: nothing the application later reads
 * from its iocb differs from what it wrote there.
 *
 * Why no ordering with the redo log is needed: see intercept_sync.c. */
#include "catcher.h"

#include <errno.h>
#include <linux/aio_abi.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "plan_batch.h"

struct restore {
	struct iocb *cb;
	uint32_t fd;
};

struct restore_list {
	struct restore *r;
	size_t n;
};

static void retarget(void *ctx, void *owner, int devnull)
{
	struct restore_list *l = ctx;
	struct iocb *cb = owner;
	l->r[l->n].cb = cb;
	l->r[l->n].fd = cb->aio_fildes;
	l->n++;
	cb->aio_fildes = (uint32_t)devnull;
}

static void inspect(long nr, struct iocb **cbs, struct restore_list *l)
{
	struct plan_batch b;
	batch_init(&b);
	for (long i = 0; i < nr; i++) {
		struct iocb *cb = cbs[i];
		struct iovec one;
		const struct iovec *iov;
		int cnt;
		if (cb->aio_lio_opcode == IOCB_CMD_PWRITE) {
			one.iov_base = (void *)(uintptr_t)cb->aio_buf;
			one.iov_len = (size_t)cb->aio_nbytes;
			iov = &one;
			cnt = 1;
		} else if (cb->aio_lio_opcode == IOCB_CMD_PWRITEV) {
			iov = (const struct iovec *)(uintptr_t)cb->aio_buf;
			cnt = (int)cb->aio_nbytes;
		} else {
			continue;
		}
		struct catcher_fd f;
		catcher_fd_get((int)cb->aio_fildes, &f);
		if (f.cls == CLASS_NONE)
			continue;
		catcher_count_style(STYLE_LIBAIO);
		size_t len;
		if (!catcher_iov_ok(iov, cnt, &len))
			continue; /* the kernel will refuse it; we do not read it */
		if (!batch_fits(&b, len))
			batch_flush(&b, retarget, l);
		batch_add(&b, cb, (int)cb->aio_fildes, &f, iov, cnt, (off_t)cb->aio_offset);
		if ((cb->aio_rw_flags & RWF_APPEND) && !b.plans[b.nplans - 1].reason)
			catcher_plan_refuse(&b.plans[b.nplans - 1], R_UNSUPPORTED_OP);
	}
	batch_flush(&b, retarget, l);
}

/* libaio returns -errno rather than setting errno; so does the fallback. */
static int submit(int (*real)(void *, long, void **), void *ctx, long nr, struct iocb **cbs)
{
	if (real)
		return real(ctx, nr, (void **)cbs);
	long r = syscall(SYS_io_submit, ctx, nr, cbs);
	return r < 0 ? -errno : (int)r;
}

CATCHER_EXPORT int io_submit(void *ctx, long nr, struct iocb **cbs)
{
	int (*real)(void *, long, void **) = __atomic_load_n(&catcher_real.io_submit, __ATOMIC_ACQUIRE);
	if (!real) {
		real = (int (*)(void *, long, void **))catcher_resolve("io_submit");
		__atomic_store_n(&catcher_real.io_submit, real, __ATOMIC_RELEASE);
	}
	if (!catcher_ready() || catcher_busy || nr <= 0 || !cbs)
		return submit(real, ctx, nr, cbs);
	int saved = errno;
	struct restore small[16];
	struct restore_list l = {nr <= 16 ? small : malloc((size_t)nr * sizeof(struct restore)), 0};
	if (!l.r) {
		errno = saved;
		return submit(real, ctx, nr, cbs);
	}
	catcher_stats_tick();
	inspect(nr, cbs, &l);
	errno = saved;
	int ret = submit(real, ctx, nr, cbs);
	saved = errno;
	for (size_t i = 0; i < l.n; i++)
		l.r[i].cb->aio_fildes = l.r[i].fd;
	if (l.r != small)
		free(l.r);
	errno = saved;
	return ret;
}
