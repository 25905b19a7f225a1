/* io_uring_submit (liburing): MariaDB's default I/O mode. Before the real
 * call, the SQEs the application prepared since the last submit (liburing
 * keeps them between sq.sqe_head and sq.sqe_tail; the kernel cannot see
 * them until the real call publishes the tail) are inspected. A write
 * every page of which passed the local checks is taken by libcatcher's
 * thread, which asks and completes it without holding up the submitter
 * (uring_defer.c). Where that cannot be (the setting, the ring's set-up,
 * the kernel), the pages are asked about here and a write all of whose
 * pages the storage node ACKed gets its fd pointed at /dev/null, so that
 * the kernel completes it with the full length through the application's
 * own completion path. Nothing else in the SQE changes.
 *
 * Why no ordering with the redo log is needed: see intercept_sync.c. */
#include "catcher.h"

#include <errno.h>
#include <liburing.h>

#include "plan_batch.h"
#include "uring_defer.h"

static void retarget(void *ctx, void *owner, int devnull)
{
	(void)ctx;
	((struct io_uring_sqe *)owner)->fd = devnull;
}

/* Whether the write just planned (the batch's last) goes to the thread. */
static bool all_asked(const struct catcher_plan *p)
{
	if (p->reason || p->npages == 0)
		return false;
	for (size_t j = 0; j < p->npages; j++)
		if (!p->q[j].ask)
			return false;
	return true;
}

static void inspect(struct io_uring *ring, struct defer_list *dl)
{
	struct io_uring_sq *sq = &ring->sq;
	unsigned head = sq->sqe_head, tail = sq->sqe_tail;
	if (head == tail)
		return;
	unsigned mask = sq->ring_mask ? sq->ring_mask : *sq->kring_mask;
	unsigned shift = (ring->flags & IORING_SETUP_SQE128) ? 1 : 0;
	struct plan_batch b;
	batch_init(&b);
	bool defer = defer_ring_ok(ring);
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
		struct catcher_plan *p = &b.plans[b.nplans - 1];
		if ((sqe->rw_flags & RWF_APPEND) && !p->reason)
			catcher_plan_refuse(p, R_UNSUPPORTED_OP);
		/* D4 of uring_defer.c: no links, drains or personalities */
		if (defer && !(sqe->flags & ~IOSQE_ASYNC) && !sqe->personality && all_asked(p) &&
		    defer_take(dl, ring, sqe, i, p, iov, cnt)) {
			b.used -= catcher_plan_nq(p);
			b.nplans--;
		}
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

static void before_submit(struct io_uring *ring, struct defer_list *dl)
{
	dl->head = NULL;
	if (catcher_ready() && !catcher_busy) {
		int saved = errno;
		catcher_stats_tick();
		inspect(ring, dl);
		errno = saved;
	}
}

static int after_submit(struct io_uring *ring, struct defer_list *dl, int r)
{
	if (dl->head) {
		int saved = errno;
		defer_commit(dl, ring);
		errno = saved;
	}
	return r;
}

CATCHER_EXPORT int io_uring_submit(struct io_uring *ring)
{
	int (*real)(struct io_uring *) = real_fn((void **)&catcher_real.io_uring_submit, "io_uring_submit");
	if (!real)
		return -ENOSYS;
	struct defer_list dl;
	before_submit(ring, &dl);
	return after_submit(ring, &dl, real(ring));
}

/* The other liburing calls that publish prepared SQEs. */
static void *submit_and_wait_fn, *submit_and_get_events_fn;

CATCHER_EXPORT int io_uring_submit_and_wait(struct io_uring *ring, unsigned wait_nr)
{
	int (*real)(struct io_uring *, unsigned) = real_fn(&submit_and_wait_fn, "io_uring_submit_and_wait");
	if (!real)
		return -ENOSYS;
	struct defer_list dl;
	before_submit(ring, &dl);
	if (!dl.head || wait_nr == 0)
		return after_submit(ring, &dl, real(ring, wait_nr));
	/* The completions waited for may be of the writes just taken, which
	 * the thread only gets once the submit has returned: submit, hand
	 * them over, then wait (nothing is left to submit then). */
	int (*submit)(struct io_uring *) = real_fn((void **)&catcher_real.io_uring_submit, "io_uring_submit");
	int r = after_submit(ring, &dl, submit ? submit(ring) : real(ring, 0));
	if (r >= 0) {
		int w = real(ring, wait_nr);
		if (w < 0 && w != -EINTR && w != -ETIME)
			return w;
	}
	return r;
}

CATCHER_EXPORT int io_uring_submit_and_get_events(struct io_uring *ring)
{
	int (*real)(struct io_uring *) = real_fn(&submit_and_get_events_fn, "io_uring_submit_and_get_events");
	if (!real)
		return -ENOSYS;
	struct defer_list dl;
	before_submit(ring, &dl);
	return after_submit(ring, &dl, real(ring));
}
