/* Turning one write request (pwrite/pwritev call, io_uring SQE or libaio
 * iocb) into per-page questions, and asking them. The same for every I/O
 * style so that they cannot disagree about what may be elided. */
#include "catcher.h"

#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ppl/mach.h"
#include "ppl/page.h"

/* Page 0 carries the tablespace flags: learn (or re-learn) the format and
 * page size from what is actually being written. */
static void learn_page0(struct catcher_plan *p, const struct iovec *iov, int cnt)
{
	if (p->off != 0 || cnt < 1 || iov[0].iov_len < PPL_PAGE0_HEAD)
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

size_t catcher_plan_nq(const struct catcher_plan *p)
{
	return p->npages < CATCHER_PLAN_MAX_PAGES ? p->npages : CATCHER_PLAN_MAX_PAGES;
}

void catcher_plan_refuse(struct catcher_plan *p, unsigned reason)
{
	p->reason = reason;
	for (size_t i = 0, n = catcher_plan_nq(p); i < n; i++) {
		p->q[i].verdict = (uint8_t)reason;
		p->q[i].ask = 0;
	}
}

/* Whether a write on fd bypasses the page cache of whatever is below us.
 * Asked of the open file description at write time, not remembered from
 * open: O_DIRECT can be switched with fcntl(F_SETFL), by the host or
 * through a duplicate, and one F_GETFL costs far less than the question
 * it guards. */
static bool fd_direct(int fd)
{
	int fl = fcntl(fd, F_GETFL);
	return fl >= 0 && (fl & O_DIRECT);
}

/* Once per process: elision is off for buffered descriptors, and what the
 * operator can change to get it back. */
static void warn_buffered(int fd)
{
	static int warned;
	if (__atomic_exchange_n(&warned, 1, __ATOMIC_RELAXED))
		return;
	char link[64], path[PATH_MAX];
	snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
	ssize_t n = readlink(link, path, sizeof path - 1);
	path[n > 0 ? n : 0] = 0;
	catcher_log("page writes to files opened without O_DIRECT are written, never elided (first: %s): "
		    "a dropped write would leave a client-side page cache (NFS, FUSE) holding the old page, "
		    "which InnoDB could read back. To elide, set innodb_flush_method=O_DIRECT "
		    "(or O_DIRECT_NO_FSYNC) in MariaDB's configuration",
		    n > 0 ? path : "?");
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
	if (off >= 0 && f->cls != CLASS_REDO)
		learn_page0(p, iov, cnt);
	/* Counted in pages whenever the write is whole pages, so that the
	 * page counts add up to InnoDB's own, temporary tablespace included. */
	uint32_t ps = page_size_for(p);
	if (f->cls != CLASS_REDO && ps && off >= 0 && (uint64_t)off % ps == 0 && p->len % ps == 0 && p->len) {
		p->ps = ps;
		p->npages = p->len / ps;
	}
	if (!CLASS_IS_PAGE(f->cls)) {
		/* Redo log, temporary tablespace, #sql intermediate tables,
		 * files unlinked or moved while open: the storage node cannot
		 * vouch for their pages (DESIGN I7). */
		catcher_plan_refuse(p, R_NEVER_ELIDED);
		return;
	}
	if (off < 0) {
		catcher_plan_refuse(p, R_UNSUPPORTED_OP); /* "current position": we do not track it */
		return;
	}
	if (p->f.fmt == FMT_UNSUPPORTED) {
		catcher_plan_refuse(p, R_UNSUPPORTED_FMT);
		return;
	}
	if (!ps) {
		catcher_plan_refuse(p, R_PAGE_SIZE);
		return;
	}
	if (!p->npages) {
		catcher_plan_refuse(p, R_UNALIGNED);
		return;
	}
	if (catcher_cfg.mode != CATCHER_ELIDE || !(catcher_cfg.class_mask & (1u << f->cls))) {
		catcher_plan_refuse(p, R_PASSTHROUGH);
		return;
	}
	if (p->npages > CATCHER_PLAN_MAX_PAGES) {
		catcher_plan_refuse(p, R_UNSUPPORTED_OP);
		return;
	}
	if (!fd_direct(fd)) {
		warn_buffered(fd);
		catcher_plan_refuse(p, R_BUFFERED);
		return;
	}

	/* Walk the iovecs page by page. A page split across iovecs is copied
	 * so that its checksum can be computed over contiguous bytes. */
	for (size_t i = 0; i < p->npages; i++)
		q[i] = (struct catcher_query){.verdict = R_NOT_ASKED};
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
		if (r)
			q[i].verdict = (uint8_t)r;
		else
			q[i].ask = 1; /* the verdict stays a refusal until an answer replaces it */
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
			if (!p->q[j].ask)
				continue;
			p->q[j].ask = 0;
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
	if (p->reason || p->npages == 0 || p->npages > CATCHER_PLAN_MAX_PAGES)
		return false;
	for (size_t j = 0; j < p->npages; j++)
		if (p->q[j].verdict != 0)
			return false;
	return true;
}
