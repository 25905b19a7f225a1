/* io_uring_submit (liburing): MariaDB's default I/O mode. Before the real
 * call, the SQEs the application prepared since the last submit (liburing
 * keeps them between sq.sqe_head and sq.sqe_tail; the kernel cannot see
 * them until the real call publishes the tail) are inspected; a write all
 * of whose pages the storage node ACKed gets its fd pointed at /dev/null,
 * so that the kernel completes it with the full length through the
 * application's own completion path. Nothing else in the SQE changes.
 *
 * Why no ordering with the redo log is needed: see intercept_sync.c. */
#include "catcher.h"

#include <errno.h>
#include <liburing.h>

#include "plan_batch.h"

static void retarget(void *ctx, void *owner, int devnull)
{
	(void)ctx;
	((struct io_uring_sqe *)owner)->fd = devnull;
}

static void inspect(struct io_uring *ring)
{
	struct io_uring_sq *sq = &ring->sq;
	unsigned head = sq->sqe_head, tail = sq->sqe_tail;
	if (head == tail)
		return;
	unsigned mask = sq->ring_mask ? sq->ring_mask : *sq->kring_mask;
	unsigned shift = (ring->flags & IORING_SETUP_SQE128) ? 1 : 0;
	struct plan_batch b;
	batch_init(&b);
	for (unsigned i = head; i != tail; i++) {
		struct io_uring_sqe *sqe = &sq->sqes[(i & mask) << shift];
		struct iovec one;
		const struct iovec *iov;
		int cnt;
		switch (sqe->opcode) {
		case IORING_OP_WRITEV:
			iov = (const struct iovec *)(uintptr_t)sqe->addr;
			cnt = (int)sqe->len;
			break;
		case IORING_OP_WRITE:
		case IORING_OP_WRITE_FIXED:
			one.iov_base = (void *)(uintptr_t)sqe->addr;
			one.iov_len = sqe->len;
			iov = &one;
			cnt = 1;
			break;
		default:
			continue;
		}
		if (sqe->flags & IOSQE_FIXED_FILE)
			continue; /* fd is an index into registered files: not ours to know */
		struct catcher_fd f;
		catcher_fd_get(sqe->fd, &f);
		if (f.cls == CLASS_NONE)
			continue;
		catcher_count_style(STYLE_IO_URING);
		size_t len;
		if (!catcher_iov_ok(iov, cnt, &len))
			continue; /* the kernel will refuse it; we do not read it */
		if (!batch_fits(&b, len))
			batch_flush(&b, retarget, NULL);
		off_t off = sqe->off == (uint64_t)-1 ? -1 : (off_t)sqe->off;
		batch_add(&b, sqe, sqe->fd, &f, iov, cnt, off);
		if ((sqe->rw_flags & RWF_APPEND) && !b.plans[b.nplans - 1].reason)
			catcher_plan_refuse(&b.plans[b.nplans - 1], R_UNSUPPORTED_OP);
	}
	batch_flush(&b, retarget, NULL);
}

/* The liburing function behind one of our wrappers, found on first use:
 * liburing may be loaded after us. */
static void *real_fn(void **slot, const char *name)
{
	void *fn = __atomic_load_n(slot, __ATOMIC_ACQUIRE);
	if (!fn) {
		fn = catcher_resolve(name);
		__atomic_store_n(slot, fn, __ATOMIC_RELEASE);
	}
	return fn;
}

static void before_submit(struct io_uring *ring)
{
	if (catcher_ready() && !catcher_busy) {
		int saved = errno;
		catcher_stats_tick();
		inspect(ring);
		errno = saved;
	}
}

CATCHER_EXPORT int io_uring_submit(struct io_uring *ring)
{
	int (*real)(struct io_uring *) = real_fn((void **)&catcher_real.io_uring_submit, "io_uring_submit");
	if (!real)
		return -ENOSYS;
	before_submit(ring);
	return real(ring);
}

/* The other liburing calls that publish prepared SQEs. */
static void *submit_and_wait_fn, *submit_and_get_events_fn;

CATCHER_EXPORT int io_uring_submit_and_wait(struct io_uring *ring, unsigned wait_nr)
{
	int (*real)(struct io_uring *, unsigned) = real_fn(&submit_and_wait_fn, "io_uring_submit_and_wait");
	if (!real)
		return -ENOSYS;
	before_submit(ring);
	return real(ring, wait_nr);
}

CATCHER_EXPORT int io_uring_submit_and_get_events(struct io_uring *ring)
{
	int (*real)(struct io_uring *) = real_fn(&submit_and_get_events_fn, "io_uring_submit_and_get_events");
	if (!real)
		return -ENOSYS;
	before_submit(ring);
	return real(ring);
}
