/* Log_On_Pmem: MariaDB's commits wait for persistent memory, not for the
 * storage node's disk (NV-PPL's redo log on NVDIMM, issue 18).
 *
 * Without it, a commit is a log WRITE and a COMMIT, and the COMMIT waits
 * for the log file's fdatasync. With it, the host (the FSAL) writes a log
 * WRITE into the file without a sync, and ppl_store_log_persist makes its
 * bytes durable in the pool's log area (pool_log.c); the WRITE is then
 * answered as stable (FILE_SYNC), and the client has nothing left to
 * COMMIT. The syncer thread here makes the file durable behind the
 * replies, every SYNC_EVERY_MS or sooner when the area fills, and
 * releases what each sync covered.
 *
 *   write answered  <-  entry persisted in the area  (L1, pool_log.c)
 *   area released   <-  the file synced after the entry was written (L3)
 *
 * A crash of the storage node (or a power loss of its disk's cache) can
 * lose the file's unsynced bytes, never the area's: when the store opens
 * the pool, every entry still needed is written into the log file and
 * synced (store_pmemlog_repair) before anything reads the file -- ingest's
 * catch-up, MariaDB's recovery through the mount. An entry of a log file
 * that was since replaced (another inode: MariaDB re-created its log) is
 * skipped: that file is gone.
 *
 * Which file: the one whose inode the entries carry (the newest entry's,
 * found under the export as the store finds its log: store_find_log), not
 * a path remembered from the start -- MariaDB may make its datadir after
 * the node started, and re-create its log. A sync is never assumed: an
 * area is released only after a sync of the newest entry's file
 * succeeded, which covers the older entries of that file, and those of a
 * file since replaced need none.
 *
 * The repair runs whenever a pool with a log area is opened, whether or
 * not Log_On_Pmem is still on: an operator who turns it off after a
 * crash must not lose the writes the area holds. */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <unistd.h>

#include "store_internal.h"

#define SYNC_EVERY_MS 10

struct store_pmemlog {
	pthread_t thread;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool stop, kick;
	int fd;                   /* the syncer's own descriptor of the log file */
	uint64_t fd_ino;
	uint64_t last_fileid;     /* the newest entry's log file (atomic) */
	uint64_t quarter;         /* area bytes past which an append wakes the syncer */
	/* figures (atomic) */
	uint64_t persisted, persisted_bytes, fallbacks, syncs, sync_failures, sync_ns;
	bool said_failure;
};

/* The path of the log file with this inode under the export; -1 if none. */
static int log_path(struct ppl_store *e, uint64_t ino, char *buf, size_t len)
{
	char dir[4096];
	if (!store_find_log(e, e->exportdir, ino, 3, dir, sizeof(dir)))
		return -1;
	return snprintf(buf, len, "%s/ib_logfile0", dir) < (int)len ? 0 : -1;
}

static int newest_entry(void *arg, uint64_t seq, uint64_t fileid, uint64_t offset, const uint8_t *bytes,
			uint32_t len)
{
	(void)seq, (void)offset, (void)bytes, (void)len;
	*(uint64_t *)arg = fileid;
	return 0;
}

struct repair {
	struct ppl_store *e;
	int fd;
	uint64_t ino;
	uint64_t written, bytes, skipped;
	int err;
};

static int repair_one(void *arg, uint64_t seq, uint64_t fileid, uint64_t offset, const uint8_t *bytes,
		      uint32_t len)
{
	struct repair *r = arg;
	(void)seq;
	if (r->fd < 0 || fileid != r->ino) {
		r->skipped++;
		return 0;
	}
	const struct ppl_io *io = r->e->env.io;
	if (io->pwrite(io->arg, r->fd, bytes, len, (off_t)offset) != (ssize_t)len) {
		r->err = errno ? errno : ENOSPC;
		return -1;
	}
	r->written++;
	r->bytes += len;
	return 0;
}

int store_pmemlog_repair(struct ppl_store *e, char *err, size_t errlen)
{
	struct ppl_pool_log_usage u;
	ppl_pool_log_usage(e->pool, &u);
	if (u.pending == 0)
		return 0;
	char path[4200] = "the log file";
	const struct ppl_io *io = e->env.io;
	struct repair r = {.e = e, .fd = -1};
	ppl_pool_log_pending(e->pool, newest_entry, &r.ino);
	if (log_path(e, r.ino, path, sizeof(path)) == 0) {
		r.fd = io->open(io->arg, path, O_RDWR);
		if (r.fd < 0) {
			snprintf(err, errlen, "the pool's log area holds %" PRIu64 " write(s) of MariaDB's log not yet "
				 "known to be in %s, which cannot be opened: %s. Nothing was changed; make the file "
				 "writable for the storage node and start it again", u.pending, path, strerror(errno));
			return -1;
		}
	}
	struct ppl_pool_log_mark m;
	ppl_pool_log_mark(e->pool, &m);
	int rc = ppl_pool_log_pending(e->pool, repair_one, &r);
	if (rc == 0 && r.fd >= 0 && r.written && io->sync(io->arg, r.fd) != 0)
		rc = -1, r.err = errno;
	if (r.fd >= 0)
		io->close(io->arg, r.fd);
	if (rc != 0) {
		snprintf(err, errlen, "the pool's log area holds %" PRIu64 " write(s) of MariaDB's log not yet known "
			 "to be in %s, and writing them there failed: %s. Nothing was released from the pool: fix the "
			 "disk (or free space) and start the storage node again", u.pending, path, strerror(r.err));
		return -1;
	}
	if (ppl_pool_log_release(e->pool, &m) != 0) {
		snprintf(err, errlen, "the pool's log area could not be released after its writes were put back "
			 "into %s (the pool's persistence failed): check the pool's device", path);
		return -1;
	}
	SLOG(e, PPL_LOG_EVENT, "PPL: %s: the pool's log area held %" PRIu64 " write(s) of MariaDB's log (%" PRIu64
	     " B) that the log file may have lost (its sync had not covered them): %" PRIu64 " written into %s "
	     "again and synced%s", e->exportdir, u.pending, r.bytes, r.written, path,
	     r.skipped ? "; the others were of a log file since replaced, and skipped" : "");
	return 0;
}

/* The syncer's descriptor of the log file with this inode: -1 when it
 * cannot be found or opened now. */
static int syncer_fd(struct ppl_store *e, struct store_pmemlog *s, uint64_t ino)
{
	char path[4200];
	struct stat st;
	const struct ppl_io *io = e->env.io;
	if (s->fd >= 0 && s->fd_ino == ino)
		return s->fd;
	if (s->fd >= 0)
		io->close(io->arg, s->fd);
	s->fd = -1;
	if (log_path(e, ino, path, sizeof(path)) != 0)
		return -1;
	s->fd = io->open(io->arg, path, O_RDONLY);
	if (s->fd >= 0 && (io->fstat(io->arg, s->fd, &st) != 0 || (uint64_t)st.st_ino != ino)) {
		io->close(io->arg, s->fd); /* replaced between the lookup and the open */
		s->fd = -1;
	}
	s->fd_ino = ino;
	return s->fd;
}

/* One pass: the file made durable, then everything appended before it
 * released (L3). A failed sync releases nothing: the area fills, and
 * then log writes are synced in their replies, where a failure reaches
 * MariaDB. */
static void sync_once(struct ppl_store *e, struct store_pmemlog *s)
{
	struct ppl_pool_log_usage u;
	ppl_pool_log_usage(e->pool, &u);
	if (u.used == 0)
		return;
	struct ppl_pool_log_mark m;
	ppl_pool_log_mark(e->pool, &m);
	const struct ppl_io *io = e->env.io;
	/* the mark is taken first: the newest entry's file is then that of
	 * every entry it covers, or of one appended after it */
	int fd = syncer_fd(e, s, __atomic_load_n(&s->last_fileid, __ATOMIC_ACQUIRE));
	uint64_t t0 = store_now_ns(e);
	if (fd < 0 || io->sync(io->arg, fd) != 0) {
		int err = fd < 0 ? ENOENT : errno;
		__atomic_add_fetch(&s->sync_failures, 1, __ATOMIC_RELAXED);
		if (!s->said_failure)
			SLOG(e, PPL_LOG_CRIT, "PPL: %s: the log file's sync failed: %s. Its writes stay in the pool's "
			     "log area, and once that is full each log write is synced in its reply, where MariaDB "
			     "sees the error. Check the disk", e->exportdir,
			     fd < 0 ? "the log file could not be found or opened" : strerror(err));
		s->said_failure = true;
		return;
	}
	if (s->said_failure)
		SLOG(e, PPL_LOG_EVENT, "PPL: %s: the log file's sync works again", e->exportdir);
	s->said_failure = false;
	__atomic_add_fetch(&s->syncs, 1, __ATOMIC_RELAXED);
	__atomic_add_fetch(&s->sync_ns, store_now_ns(e) - t0, __ATOMIC_RELAXED);
	ppl_pool_log_release(e->pool, &m);
}

static void *syncer_main(void *arg)
{
	struct ppl_store *e = arg;
	struct store_pmemlog *s = e->pmemlog;
	if (e->env.thread_started)
		e->env.thread_started(e->env.thread_arg, "ppl_logsync");
	pthread_mutex_lock(&s->lock);
	while (!s->stop) {
		if (!s->kick) {
			struct timespec t;
			store_deadline(&t, SYNC_EVERY_MS * 1000000ull);
			pthread_cond_timedwait(&s->cond, &s->lock, &t);
		}
		s->kick = false;
		bool stop = s->stop;
		pthread_mutex_unlock(&s->lock);
		if (!stop)
			sync_once(e, s);
		pthread_mutex_lock(&s->lock);
	}
	pthread_mutex_unlock(&s->lock);
	/* a clean stop leaves nothing in the area */
	sync_once(e, s);
	if (s->fd >= 0)
		e->env.io->close(e->env.io->arg, s->fd);
	return NULL;
}

int ppl_store_start_log_on_pmem(struct ppl_store *e, const struct ppl_config *c, char *err, size_t errlen)
{
	if (!c->log_on_pmem)
		return 0;
	struct ppl_pool_header h;
	if (e->pool == NULL) {
		snprintf(err, errlen, "Log_On_Pmem needs the pool (Pool_Path, and elision on: Elision_Port)");
		return -1;
	}
	ppl_pool_get_header(e->pool, &h);
	if (h.log_size == 0) {
		snprintf(err, errlen, "Log_On_Pmem: the pool %s has no log area (made by an older build, or with "
			 "--log-size none): stop MariaDB cleanly, then re-create the pool with `ppl-inspect pool "
			 "create`, or set Log_On_Pmem = false", c->pool_path);
		return -1;
	}
	if (h.is_volatile && !c->allow_volatile_pool) {
		snprintf(err, errlen, "Log_On_Pmem: the pool %s is on tmpfs, which a power loss or a reboot empties, "
			 "and with Log_On_Pmem it holds the only durable copy of MariaDB's last commits until the "
			 "log file is synced behind them (every %u ms): put the pool on a DAX mount of persistent "
			 "memory, or set Allow_Volatile_Pool = true to accept losing those commits at a power loss",
			 c->pool_path, SYNC_EVERY_MS);
		return -1;
	}
	struct store_pmemlog *s = calloc(1, sizeof(*s));
	if (s == NULL) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	s->fd = -1;
	struct ppl_pool_log_usage u;
	ppl_pool_log_usage(e->pool, &u);
	s->quarter = u.area / 4;
	pthread_mutex_init(&s->lock, NULL);
	pthread_cond_init(&s->cond, NULL);
	e->pmemlog = s;
	if (pthread_create(&s->thread, NULL, syncer_main, e) != 0) {
		e->pmemlog = NULL;
		pthread_mutex_destroy(&s->lock);
		pthread_cond_destroy(&s->cond);
		free(s);
		snprintf(err, errlen, "Log_On_Pmem: cannot start the log's sync thread");
		return -1;
	}
	SLOG(e, PPL_LOG_EVENT, "PPL: %s: Log_On_Pmem: MariaDB's log writes are answered once durable in the pool's "
	     "log area (%" PRIu64 " B%s); the log file is synced behind them every %u ms", e->exportdir, u.area,
	     h.is_pmem ? "" : h.is_volatile ? ", on tmpfs: lost at a power loss (Allow_Volatile_Pool)"
					    : ", on a disk-backed file: each persist is an msync",
	     SYNC_EVERY_MS);
	return 0;
}

void store_pmemlog_stop(struct ppl_store *e)
{
	struct store_pmemlog *s = e->pmemlog;
	if (s == NULL)
		return;
	pthread_mutex_lock(&s->lock);
	s->stop = true;
	pthread_cond_signal(&s->cond);
	pthread_mutex_unlock(&s->lock);
	pthread_join(s->thread, NULL);
	pthread_mutex_destroy(&s->lock);
	pthread_cond_destroy(&s->cond);
	e->pmemlog = NULL;
	free(s);
}

int ppl_store_log_persist(struct ppl_store *e, uint64_t fileid, uint64_t off, const struct iovec *iov, int iovcnt,
			  size_t len)
{
	struct store_pmemlog *s = e->pmemlog;
	if (s == NULL)
		return -1;
	__atomic_store_n(&s->last_fileid, fileid, __ATOMIC_RELEASE);
	if (ppl_pool_log_append(e->pool, fileid, off, iov, iovcnt, len) != PPL_POOL_OK) {
		__atomic_add_fetch(&s->fallbacks, 1, __ATOMIC_RELAXED);
		pthread_mutex_lock(&s->lock);
		s->kick = true;
		pthread_cond_signal(&s->cond);
		pthread_mutex_unlock(&s->lock);
		return -1;
	}
	__atomic_add_fetch(&s->persisted, 1, __ATOMIC_RELAXED);
	__atomic_add_fetch(&s->persisted_bytes, len, __ATOMIC_RELAXED);
	struct ppl_pool_log_usage u;
	ppl_pool_log_usage(e->pool, &u);
	if (u.used > s->quarter) {
		pthread_mutex_lock(&s->lock);
		s->kick = true;
		pthread_cond_signal(&s->cond);
		pthread_mutex_unlock(&s->lock);
	}
	return 0;
}

void store_pmemlog_figures(struct ppl_store *e, struct ppl_store_figures *f)
{
	struct store_pmemlog *s = e->pmemlog;
	if (s == NULL)
		return;
	f->log_on_pmem = true;
	f->pmem_log_writes = __atomic_load_n(&s->persisted, __ATOMIC_RELAXED);
	f->pmem_log_bytes = __atomic_load_n(&s->persisted_bytes, __ATOMIC_RELAXED);
	f->pmem_log_fallbacks = __atomic_load_n(&s->fallbacks, __ATOMIC_RELAXED);
	f->pmem_log_syncs = __atomic_load_n(&s->syncs, __ATOMIC_RELAXED);
	f->pmem_log_sync_failures = __atomic_load_n(&s->sync_failures, __ATOMIC_RELAXED);
	f->pmem_log_sync_ns = __atomic_load_n(&s->sync_ns, __ATOMIC_RELAXED);
	struct ppl_pool_log_usage u;
	ppl_pool_log_usage(e->pool, &u);
	f->pmem_log_area = u.area;
	f->pmem_log_used = u.used;
}

int store_pmemlog_format(struct ppl_store *e, char *buf, size_t len)
{
	struct ppl_store_figures f;
	memset(&f, 0, sizeof(f));
	store_pmemlog_figures(e, &f);
	if (!f.log_on_pmem)
		return 0;
	return snprintf(buf, len, "; log on pmem: %" PRIu64 " write(s) answered from the pool (%.1f MB), %" PRIu64
			" synced in the reply (area full or too large), %" PRIu64 " sync(s) behind (%.0f us each)%s, "
			"%" PRIu64 " of %" PRIu64 " B of the area in use", f.pmem_log_writes,
			(double)f.pmem_log_bytes / 1e6, f.pmem_log_fallbacks, f.pmem_log_syncs,
			f.pmem_log_syncs ? (double)f.pmem_log_sync_ns / 1e3 / (double)f.pmem_log_syncs : 0.0,
			f.pmem_log_sync_failures ? " SYNC FAILURES" : "", f.pmem_log_used, f.pmem_log_area);
}
