/* Turning one write request (pwrite/pwritev call, io_uring SQE or libaio
 * iocb) into per-page questions, and asking them. The same for every I/O
 * style so that they cannot disagree about what may be elided. */
#include "catcher.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "ppl/mach.h"
#include "ppl/page.h"

#define PENDING 0xffu

/* Page 0 carries the tablespace flags: learn (or re-learn) the format and
 * page size from what is actually being written. */
static void learn_page0(struct catcher_plan *p, const struct iovec *iov, int cnt)
{
	if (p->off != 0 || cnt < 1 || iov[0].iov_len < PPL_FSP_HEADER_OFFSET + PPL_FSP_SPACE_FLAGS + 4)
		return;
	const uint8_t *b = iov[0].iov_base;
	if (ppl_rd4(b + PPL_FIL_PAGE_OFFSET) != 0 || ppl_rd8(b + PPL_FIL_PAGE_LSN) == 0)
		return;
	uint32_t ps = 0;
	uint8_t fmt = catcher_flags_fmt(ppl_rd4(b + PPL_FSP_HEADER_OFFSET + PPL_FSP_SPACE_FLAGS), &ps);
	uint32_t space = ppl_rd4(b + PPL_FIL_PAGE_SPACE_ID);
	catcher_fd_learn(p->fd, fmt, ps, space);
	p->f.fmt = fmt;
	p->f.page_size = ps;
	p->f.space = space;
	p->f.space_known = 1;
}

bool catcher_iov_ok(const struct iovec *iov, int cnt, size_t *len)
{
	*len = 0;
	if (cnt < 0 || cnt > IOV_MAX || (cnt && !iov))
		return false;
	for (int i = 0; i < cnt; i++) {
		if (iov[i].iov_len > (size_t)SSIZE_MAX - *len)
			return false;
		*len += iov[i].iov_len;
	}
	return true;
}

static uint32_t page_size_for(const struct catcher_plan *p)
{
	if (p->f.fmt == FMT_FCRC32)
		return p->f.page_size;
	return catcher_default_page_size();
}

void catcher_plan_write(struct catcher_plan *p, int fd, const struct catcher_fd *f, const struct iovec *iov,
			int cnt, off_t off, struct catcher_query *q)
{
	memset(p, 0, sizeof *p);
	p->fd = fd;
	p->f = *f;
	p->off = off;
	p->q = q;
	for (int i = 0; i < cnt; i++)
		p->len += iov[i].iov_len;
	if (!CLASS_IS_PAGE(f->cls)) {
		/* Never elided. Temporary-tablespace pages are still counted as
		 * pages so that the page counts add up to InnoDB's own. */
		uint32_t ps = catcher_default_page_size();
		if (f->cls != CLASS_REDO && ps && off >= 0 && (uint64_t)off % ps == 0 && p->len % ps == 0) {
			p->ps = ps;
			p->npages = p->len / ps;
		}
		return;
	}
	if (off < 0) {
		p->reason = R_UNSUPPORTED_OP; /* "current position": we do not track it */
		return;
	}
	learn_page0(p, iov, cnt);
	if (p->f.fmt == FMT_UNSUPPORTED) {
		p->reason = R_UNSUPPORTED_FMT;
		return;
	}
	uint32_t ps = page_size_for(p);
	if (!ps) {
		p->reason = R_PAGE_SIZE;
		return;
	}
	if (p->len == 0 || (uint64_t)off % ps || p->len % ps) {
		p->reason = R_UNALIGNED;
		return;
	}
	p->ps = ps;
	p->npages = p->len / ps;
	if (catcher_cfg.mode != CATCHER_ELIDE || !(catcher_cfg.class_mask & (1u << f->cls))) {
		p->reason = R_PASSTHROUGH;
		return;
	}
	if (p->npages > CATCHER_PLAN_MAX_PAGES) {
		p->reason = R_UNSUPPORTED_OP;
		return;
	}

	/* Walk the iovecs page by page. A page split across iovecs is copied
	 * so that its checksum can be computed over contiguous bytes. */
	int vi = 0;
	size_t vo = 0;
	uint8_t *scratch = NULL;
	for (size_t i = 0; i < p->npages; i++) {
		while (vi < cnt && vo == iov[vi].iov_len) {
			vi++;
			vo = 0;
		}
		const uint8_t *page;
		if (iov[vi].iov_len - vo >= ps) {
			page = (const uint8_t *)iov[vi].iov_base + vo;
			vo += ps;
		} else {
			if (!scratch && !(scratch = malloc(ps))) {
				for (size_t j = i; j < p->npages; j++)
					q[j].verdict = R_UNSUPPORTED_OP;
				break;
			}
			size_t got = 0;
			while (got < ps) {
				while (vo == iov[vi].iov_len) {
					vi++;
					vo = 0;
				}
				size_t take = iov[vi].iov_len - vo;
				if (take > ps - got)
					take = ps - got;
				memcpy(scratch + got, (const uint8_t *)iov[vi].iov_base + vo, take);
				got += take;
				vo += take;
			}
			page = scratch;
		}
		unsigned r = catcher_page_check(page, ps, off + (off_t)(i * ps), &p->f, &q[i]);
		q[i].verdict = r ? (uint8_t)r : PENDING;
	}
	free(scratch);
}

void catcher_plan_ask(struct catcher_plan **plans, size_t n)
{
	struct catcher_query *ask[CATCHER_PLAN_MAX_PAGES];
	size_t k = 0;
	for (size_t i = 0; i < n; i++) {
		struct catcher_plan *p = plans[i];
		if (p->reason)
			continue;
		for (size_t j = 0; j < p->npages; j++) {
			if (p->q[j].verdict != PENDING)
				continue;
			if (k == CATCHER_PLAN_MAX_PAGES) {
				catcher_ask(ask, k);
				k = 0;
			}
			ask[k++] = &p->q[j];
		}
	}
	if (k)
		catcher_ask(ask, k);
}

bool catcher_plan_all_acked(const struct catcher_plan *p)
{
	if (p->reason || p->npages == 0)
		return false;
	for (size_t j = 0; j < p->npages; j++)
		if (p->q[j].verdict != 0)
			return false;
	return true;
}
