/* pwrite64/pwrite/pwritev/pwritev2: the synchronous data-file writes
 * (MariaDB with --innodb-use-native-aio=0, the doublewrite buffer, and the
 * redo log, which is only counted).
 *
 * Why no extra ordering with the redo log is needed before a page write is
 * dropped: InnoDB issues a page write only after it has made the redo log
 * durable up to that page's LSN (buf_flush_page -> log_write_up_to(lsn)),
 * and the storage node ACKs only if it holds that log, durably, up to the
 * LSN it was asked about (DESIGN I2). The question itself therefore
 * carries all the ordering there is: an ACK can only exist once the log it
 * depends on is safe, and a dropped page is as durable as a written one.
 *
 * A write covering several pages is split: ACKed pages are skipped, each
 * run of refused pages is written with one call of the same kind at its own
 * offset. The result is what one call would have returned: the full length,
 * or a short count up to the first run that failed or came up short, or -1
 * with the real call's errno if nothing was done. */
#include "catcher.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum kind { K_PWRITE64, K_PWRITE, K_PWRITEV, K_PWRITEV2 };

static ssize_t call_real(enum kind k, int fd, const struct iovec *iov, int cnt, off_t off, int flags)
{
	struct catcher_real *r = &catcher_real;
	switch (k) {
	case K_PWRITE64:
		return r->pwrite64 ? r->pwrite64(fd, iov[0].iov_base, iov[0].iov_len, off)
				   : catcher_sys_pwrite(fd, iov[0].iov_base, iov[0].iov_len, off);
	case K_PWRITE:
		return r->pwrite ? r->pwrite(fd, iov[0].iov_base, iov[0].iov_len, off)
				 : catcher_sys_pwrite(fd, iov[0].iov_base, iov[0].iov_len, off);
	case K_PWRITEV:
		return r->pwritev ? r->pwritev(fd, iov, cnt, off) : catcher_sys_pwritev2(fd, iov, cnt, off, 0);
	default:
		return r->pwritev2 ? r->pwritev2(fd, iov, cnt, off, flags)
				   : catcher_sys_pwritev2(fd, iov, cnt, off, flags);
	}
}

/* The iovecs covering bytes [from, from + len) of iov. */
static int slice(const struct iovec *iov, int cnt, size_t from, size_t len, struct iovec *out)
{
	int n = 0;
	for (int i = 0; i < cnt && len; i++) {
		if (from >= iov[i].iov_len) {
			from -= iov[i].iov_len;
			continue;
		}
		size_t take = iov[i].iov_len - from;
		if (take > len)
			take = len;
		out[n].iov_base = (uint8_t *)iov[i].iov_base + from;
		out[n].iov_len = take;
		n++;
		len -= take;
		from = 0;
	}
	return n;
}

/* Writes the refused pages of an elided plan; see the file comment. */
static ssize_t write_refused(enum kind k, const struct catcher_plan *p, const struct iovec *iov, int cnt,
			     int flags, int saved_errno)
{
	struct iovec small[16];
	struct iovec *sub = cnt < 16 ? small : malloc(((size_t)cnt + 1) * sizeof *sub);
	if (!sub) {
		errno = saved_errno;
		return call_real(k, p->fd, iov, cnt, p->off, flags); /* write it all: always correct */
	}
	size_t done = 0, i = 0;
	ssize_t result = 0;
	while (i < p->npages) {
		if (p->q[i].verdict == 0) {
			done += p->ps;
			i++;
			continue;
		}
		size_t j = i;
		while (j < p->npages && p->q[j].verdict != 0)
			j++;
		size_t from = i * p->ps, len = (j - i) * p->ps;
		int n = slice(iov, cnt, from, len, sub);
		errno = saved_errno;
		ssize_t r = call_real(k, p->fd, sub, n, p->off + (off_t)from, flags);
		if (r < 0) {
			catcher_count_error(p->f.cls);
			result = done ? (ssize_t)done : -1;
			goto out;
		}
		done += (size_t)r;
		if ((size_t)r < len) {
			result = (ssize_t)done;
			goto out;
		}
		i = j;
	}
	result = (ssize_t)done;
out:
	if (sub != small)
		free(sub);
	if (result >= 0)
		errno = saved_errno;
	catcher_count_plan(p, false, false, result > 0 ? (size_t)result : 0);
	return result;
}

static ssize_t sync_write(enum kind k, int fd, const struct iovec *iov, int cnt, off_t off, int flags)
{
	if (!catcher_ready() || catcher_busy)
		return call_real(k, fd, iov, cnt, off, flags);
	struct catcher_fd f;
	catcher_fd_get(fd, &f);
	size_t len;
	if (f.cls == CLASS_NONE || !catcher_iov_ok(iov, cnt, &len))
		return call_real(k, fd, iov, cnt, off, flags);

	int saved = errno;
	catcher_stats_tick();
	catcher_count_style(k == K_PWRITE64 || k == K_PWRITE ? STYLE_PWRITE : STYLE_PWRITEV);
	catcher_count_write(f.cls, len);
	struct catcher_query q[CATCHER_PLAN_MAX_PAGES];
	struct catcher_plan plan;
	catcher_plan_write(&plan, fd, &f, iov, cnt, off, q);
	if (k == K_PWRITEV2 && (flags & RWF_APPEND) && !plan.reason)
		catcher_plan_refuse(&plan, R_UNSUPPORTED_OP); /* the offset is ignored: pages are not where we think */
	if (!plan.reason) {
		struct catcher_plan *pp = &plan;
		catcher_plan_ask(&pp, 1);
		for (size_t i = 0; i < plan.npages; i++)
			if (q[i].verdict == 0)
				return write_refused(k, &plan, iov, cnt, flags, saved);
	}
	errno = saved;
	ssize_t r = call_real(k, fd, iov, cnt, off, flags);
	if (r < 0) {
		saved = errno;
		catcher_count_error(f.cls);
	}
	catcher_count_plan(&plan, false, false, r > 0 ? (size_t)r : 0);
	if (r < 0)
		errno = saved;
	return r;
}

CATCHER_EXPORT ssize_t pwrite64(int fd, const void *buf, size_t n, off_t off)
{
	struct iovec v = {(void *)buf, n};
	return sync_write(K_PWRITE64, fd, &v, 1, off, 0);
}

CATCHER_EXPORT ssize_t pwrite(int fd, const void *buf, size_t n, off_t off)
{
	struct iovec v = {(void *)buf, n};
	return sync_write(K_PWRITE, fd, &v, 1, off, 0);
}

CATCHER_EXPORT ssize_t pwritev(int fd, const struct iovec *iov, int cnt, off_t off)
{
	return sync_write(K_PWRITEV, fd, iov, cnt, off, 0);
}

CATCHER_EXPORT ssize_t pwritev64(int fd, const struct iovec *iov, int cnt, off_t off)
{
	return sync_write(K_PWRITEV, fd, iov, cnt, off, 0);
}

CATCHER_EXPORT ssize_t pwritev2(int fd, const struct iovec *iov, int cnt, off_t off, int flags)
{
	return sync_write(K_PWRITEV2, fd, iov, cnt, off, flags);
}

CATCHER_EXPORT ssize_t pwritev64v2(int fd, const struct iovec *iov, int cnt, off_t off, int flags)
{
	return sync_write(K_PWRITEV2, fd, iov, cnt, off, flags);
}
