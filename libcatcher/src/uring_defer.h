/* io_uring page writes taken out of the application's ring at submit,
 * asked about without waiting and completed by libcatcher's own thread
 * once the storage node has answered (uring_defer.c says why and how). */
#ifndef CATCHER_URING_DEFER_H
#define CATCHER_URING_DEFER_H

#include <liburing.h>

#include "catcher.h"

struct deferred;

/* The writes taken during one submit, until the real submit has returned. */
struct defer_list {
	struct deferred *head;
};

/* Whether writes of this ring may be deferred: the setting, a ring whose
 * set-up libcatcher knows how to complete into, a kernel that has the
 * operations (checked once), the thread running (started on first use). */
bool defer_ring_ok(struct io_uring *ring);

/* Takes the write of `sqe` (at position `index` of the SQ ring), planned
 * in `p`, every page of which is to be asked: the SQE becomes a NOP that
 * posts no completion. False (and nothing changed) if it cannot be taken;
 * the caller then treats it as before. */
bool defer_take(struct defer_list *l, struct io_uring *ring, struct io_uring_sqe *sqe, unsigned index,
		const struct catcher_plan *p, const struct iovec *iov, int cnt);

/* After the real submit: the writes whose NOP the kernel consumed are
 * asked about (the caller waits only while the window is full) and left
 * to the thread; any other SQE is put back as the application prepared it. */
void defer_commit(struct defer_list *l, struct io_uring *ring);

void defer_after_fork(void);

#endif
