/* See plan_batch.h. */
#include "plan_batch.h"

void batch_init(struct plan_batch *b)
{
	b->nplans = 0;
	b->used = 0;
}

bool batch_fits(const struct plan_batch *b, size_t len)
{
	size_t need = len / 4096; /* the smallest page size bounds the page count */
	if (need > CATCHER_PLAN_MAX_PAGES)
		need = CATCHER_PLAN_MAX_PAGES;
	return b->nplans < BATCH_MAX_PLANS && CATCHER_PLAN_MAX_PAGES - b->used >= need;
}

void batch_add(struct plan_batch *b, void *owner, int fd, const struct catcher_fd *f, const struct iovec *iov,
	       int cnt, off_t off)
{
	struct catcher_plan *p = &b->plans[b->nplans];
	catcher_plan_write(p, fd, f, iov, cnt, off, b->pool + b->used);
	catcher_count_write(f->cls, p->len);
	/* A refused plan's queries hold its refusal too: they are its own,
	 * never shared with the next plan (batch_fits reserved room for them). */
	b->used += catcher_plan_nq(p);
	b->ptrs[b->nplans] = p;
	b->owner[b->nplans] = owner;
	b->nplans++;
}

void batch_flush(struct plan_batch *b, batch_retarget_fn fn, void *ctx)
{
	catcher_plan_ask(b->ptrs, b->nplans);
	int devnull = -2;
	for (size_t i = 0; i < b->nplans; i++) {
		struct catcher_plan *p = &b->plans[i];
		bool elide = catcher_plan_all_acked(p);
		if (elide) {
			if (devnull == -2)
				devnull = catcher_devnull();
			if (devnull < 0) {
				for (size_t j = 0; j < catcher_plan_nq(p); j++)
					p->q[j].verdict = R_NODEVNULL;
				elide = false;
			} else {
				fn(ctx, b->owner[i], devnull);
			}
		}
		catcher_count_plan(p, true, elide, 0);
	}
	batch_init(b);
}
