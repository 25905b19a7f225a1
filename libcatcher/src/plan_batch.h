/* A round of asynchronous requests (the pending SQEs of one io_uring_submit,
 * the iocbs of one io_submit) planned into a shared pool of page queries,
 * so that all their pages go to the storage node in one pipeline. An
 * asynchronous request is elided only as a whole: its single completion
 * must report either the full length or whatever the real write returns. */
#ifndef CATCHER_PLAN_BATCH_H
#define CATCHER_PLAN_BATCH_H

#include "catcher.h"

#define BATCH_MAX_PLANS 64

struct plan_batch {
	struct catcher_plan plans[BATCH_MAX_PLANS];
	struct catcher_plan *ptrs[BATCH_MAX_PLANS];
	void *owner[BATCH_MAX_PLANS]; /* the SQE or iocb each plan came from */
	size_t nplans, used;          /* plans, and queries of the pool in use */
	struct catcher_query pool[CATCHER_PLAN_MAX_PAGES];
};

/* Called for each request whose pages were all ACKed, to point it at
 * the /dev/null descriptor. */
typedef void (*batch_retarget_fn)(void *ctx, void *owner, int devnull);

void batch_init(struct plan_batch *b);
/* Whether a request of len bytes surely fits (else flush first). */
bool batch_fits(const struct plan_batch *b, size_t len);
void batch_add(struct plan_batch *b, void *owner, int fd, const struct catcher_fd *f, const struct iovec *iov,
	       int cnt, off_t off);
/* Asks, retargets fully ACKed requests, counts, and empties the batch. */
void batch_flush(struct plan_batch *b, batch_retarget_fn fn, void *ctx);

#endif
