/* Base copies (issue 20): every file of the datadir copied by the storage
 * node itself, on a thread of its own, while MariaDB runs. With the log
 * archive from the copy's start LSN on, a base gives the database at any
 * LSN after the copy finished (ppl-replay --archive, ppl-inspect clone).
 *
 * Why it is right, as mariadb-backup's copy plus its redo is:
 *   - The start LSN S is MariaDB's last checkpoint when the copy begins:
 *     every change below S is in its page's file or elided; the archive
 *     holds every mini-transaction from S on.
 *   - Page files are read through the store's own read path, a chunk at a
 *     time between ppl_store_read_begin and _end: each page is the page
 *     this node serves (an elided page rebuilt from its records), whole
 *     (the stripes keep MariaDB's writes and materializations out of the
 *     pages being read), at some LSN of its own at or below the parse.
 *     Replaying the archive from S applies, to each page, exactly the
 *     mini-transactions past that page's LSN (recovery's rule).
 *   - The end LSN F is the parse when the last page was read: no page of
 *     the copy is newer. A clone is possible at any LSN from F on.
 * What it does not give: files that are not InnoDB's (.frm, Aria's and
 * MyISAM's tables, the binary log) are copied as they are, with nothing
 * to bring them forward; a table created or altered after the copy began
 * needs a newer base. The compute node is not involved at all. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <urcu-bp.h>

#include "ppl/archive.h"
#include "ppl/bases.h"
#include "ppl/fileclass.h"
#include "ppl/node.h"
#include "ppl/redo.h"
#include "ppl/store.h"
#include "store_internal.h"

#define CHUNK_PAGES 64


static void set_state(struct ppl_store *e, enum ppl_backup_state s, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void set_state(struct ppl_store *e, enum ppl_backup_state s, const char *fmt, ...)
{
	pthread_mutex_lock(&e->backup_lock);
	e->backup.state = s;
	if (fmt) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(e->backup.error, sizeof e->backup.error, fmt, ap);
		va_end(ap);
	}
	pthread_mutex_unlock(&e->backup_lock);
}

static void add_done(struct ppl_store *e, uint64_t bytes, uint64_t files)
{
	pthread_mutex_lock(&e->backup_lock);
	e->backup.bytes_done += bytes;
	e->backup.files_done += files;
	pthread_mutex_unlock(&e->backup_lock);
}

static bool skipped(const char *name)
{
	enum ppl_innodb_file k = ppl_innodb_file_of(name);
	/* the log is the archive's business; the temporary tablespace and a
	 * server's pid file mean nothing in a copy */
	if (k == PPL_INNODB_REDO || k == PPL_INNODB_REDO_NEW || k == PPL_INNODB_REDO_OLD || k == PPL_INNODB_TEMP)
		return true;
	size_t n = strlen(name);
	return n > 4 && strcmp(name + n - 4, ".pid") == 0;
}

/* Copies one file: through the store's read path for an InnoDB page file
 * (pages as served), as it is for any other. 0, or -1 with the state set. */
static int copy_file(struct ppl_store *e, const char *from, const char *to, bool pages)
{
	const struct ppl_io *io = e->env.io;
	int in = io->open(io->arg, from, O_RDONLY);
	if (in < 0) {
		if (errno == ENOENT)
			return 0; /* gone since the listing: its FILE_DELETE is in the archive */
		set_state(e, PPL_BACKUP_FAILED, "%s cannot be opened: %s", from, strerror(errno));
		return -1;
	}
	struct stat st;
	if (io->fstat(io->arg, in, &st) != 0) {
		set_state(e, PPL_BACKUP_FAILED, "%s: %s", from, strerror(errno));
		io->close(io->arg, in);
		return -1;
	}
	int out = open(to, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0640);
	if (out < 0) {
		set_state(e, PPL_BACKUP_FAILED, "%s cannot be created: %s", to, strerror(errno));
		io->close(io->arg, in);
		return -1;
	}
	size_t ps = e->page_size ? e->page_size : 16384, chunk = pages ? CHUNK_PAGES * ps : (1u << 20);
	uint8_t *buf = aligned_alloc(4096, chunk);
	int rc = buf ? 0 : -1;
	if (!buf)
		set_state(e, PPL_BACKUP_FAILED, "out of memory");
	for (uint64_t off = 0; rc == 0 && off < (uint64_t)st.st_size;) {
		size_t len = (uint64_t)st.st_size - off < chunk ? (size_t)((uint64_t)st.st_size - off) : chunk;
		if (pages)
			ppl_store_read_begin(e, (uint64_t)st.st_ino, off, len);
		ssize_t got = io->pread(io->arg, in, buf, len, (off_t)off);
		if (got > 0 && pages) {
			struct iovec iov = {buf, (size_t)got};
			if (ppl_store_read(e, (uint64_t)st.st_ino, off, &iov, 1, (size_t)got, 1) != 0) {
				set_state(e, PPL_BACKUP_FAILED, "%s: the pages at offset %" PRIu64 " cannot be served "
					  "(the storage node's log says why)", from, off);
				rc = -1;
			}
		}
		if (pages)
			ppl_store_read_end(e, (uint64_t)st.st_ino, off, len);
		if (rc)
			break;
		if (got < 0) {
			set_state(e, PPL_BACKUP_FAILED, "%s cannot be read at offset %" PRIu64 ": %s", from, off,
				  strerror(errno));
			rc = -1;
			break;
		}
		if (got == 0)
			break; /* shrunk meanwhile (an undo tablespace truncated): the archive has it */
		if (write(out, buf, (size_t)got) != got) {
			set_state(e, PPL_BACKUP_FAILED, "%s cannot be written: %s", to, strerror(errno));
			rc = -1;
			break;
		}
		off += (uint64_t)got;
		add_done(e, (uint64_t)got, 0);
		if (__atomic_load_n(&e->backup_stop, __ATOMIC_RELAXED)) {
			set_state(e, PPL_BACKUP_FAILED, "stopped: the export is shutting down");
			rc = -1;
		}
	}
	if (rc == 0 && fsync(out) != 0) {
		set_state(e, PPL_BACKUP_FAILED, "%s cannot be synced: %s", to, strerror(errno));
		rc = -1;
	}
	free(buf);
	close(out);
	io->close(io->arg, in);
	if (rc == 0)
		add_done(e, 0, 1);
	return rc;
}

struct walk {
	struct ppl_store *e;
	const char *from, *to;
	int depth, rc;
};

static int copy_tree(struct ppl_store *e, const char *from, const char *to, int depth);

static int each_entry(void *arg, const char *name, enum ppl_io_type type)
{
	struct walk *w = arg;
	char src[PATH_MAX], dst[PATH_MAX];
	if (snprintf(src, sizeof src, "%s/%s", w->from, name) >= (int)sizeof src ||
	    snprintf(dst, sizeof dst, "%s/%s", w->to, name) >= (int)sizeof dst) {
		set_state(w->e, PPL_BACKUP_FAILED, "a path under %s is too long", w->from);
		return -1;
	}
	if (type == PPL_IO_UNKNOWN) {
		struct stat st;
		if (w->e->env.io->stat(w->e->env.io->arg, src, &st) != 0)
			return 0;
		type = S_ISDIR(st.st_mode) ? PPL_IO_DIR : S_ISREG(st.st_mode) ? PPL_IO_FILE : PPL_IO_OTHER;
	}
	if (type == PPL_IO_DIR) {
		/* a datadir's databases are one level down; nothing deeper is InnoDB's */
		if (w->depth >= 1 || name[0] == '#')
			return 0;
		if (mkdir(dst, 0750) != 0) {
			set_state(w->e, PPL_BACKUP_FAILED, "%s cannot be created: %s", dst, strerror(errno));
			return -1;
		}
		return copy_tree(w->e, src, dst, w->depth + 1) ? -1 : 0;
	}
	if (type != PPL_IO_FILE || skipped(name))
		return 0;
	return copy_file(w->e, src, dst, ppl_innodb_file_has_pages(ppl_innodb_file_of(name)) &&
					       ppl_innodb_file_of(name) != PPL_INNODB_TEMP) ? -1 : 0;
}

static int copy_tree(struct ppl_store *e, const char *from, const char *to, int depth)
{
	struct walk w = {.e = e, .from = from, .to = to, .depth = depth};
	int rc = e->env.io->list(e->env.io->arg, from, each_entry, &w);
	if (rc < 0 && e->backup.state != PPL_BACKUP_FAILED)
		set_state(e, PPL_BACKUP_FAILED, "%s cannot be listed: %s", from, strerror(errno));
	return rc ? -1 : 0;
}

/* The manifest, then the archive's registry (its retention now keeps
 * what this base needs). */
static int finish(struct ppl_store *e, const char *dest)
{
	pthread_mutex_lock(&e->backup_lock);
	struct ppl_backup_status s = e->backup;
	pthread_mutex_unlock(&e->backup_lock);
	struct ppl_base_info b = {.start_lsn = s.start_lsn, .end_lsn = s.end_lsn, .started_ns = s.started_ns,
				  .finished_ns = s.finished_ns, .log_file_size = e->log_size, .page_size = e->page_size,
				  .files = s.files_done, .bytes = s.bytes_done};
	snprintf(b.dir, sizeof b.dir, "%s", dest);
	snprintf(b.archive, sizeof b.archive, "%s", e->archive_dir);
	if (ppl_base_write(dest, &b) != 0) {
		set_state(e, PPL_BACKUP_FAILED, "%s/ppl-base.json cannot be written: %s", dest, strerror(errno));
		return -1;
	}
	char err[4400];
	if (ppl_bases_add(e->archive_dir, &b, err, sizeof err) != 0) {
		set_state(e, PPL_BACKUP_FAILED, "%s", err);
		return -1;
	}
	store_archive_base_done(e, b.start_lsn);
	return 0;
}

static void *backup_main(void *arg)
{
	struct ppl_store *e = arg;
	if (e->env.thread_started)
		e->env.thread_started(e->env.thread_arg, "ppl_backup");
	char dest[PATH_MAX];
	pthread_mutex_lock(&e->backup_lock);
	snprintf(dest, sizeof dest, "%s", e->backup.dest);
	pthread_mutex_unlock(&e->backup_lock);
	SLOG(e, PPL_LOG_EVENT, "PPL: %s: base copy into %s begins at MariaDB's checkpoint LSN %" PRIu64, e->datadir,
		 dest, e->backup.start_lsn);
	if (copy_tree(e, e->datadir, dest, 0) == 0) {
		rcu_read_lock();
		struct ppl_node *n = store_node_of(e);
		uint64_t end = n ? ppl_node_parsed_lsn(n) : 0;
		rcu_read_unlock();
		pthread_mutex_lock(&e->backup_lock);
		e->backup.end_lsn = end;
		e->backup.finished_ns = store_wall_ns();
		pthread_mutex_unlock(&e->backup_lock);
		if (finish(e, dest) == 0)
			set_state(e, PPL_BACKUP_DONE, NULL);
	}
	pthread_mutex_lock(&e->backup_lock);
	struct ppl_backup_status b = e->backup;
	pthread_mutex_unlock(&e->backup_lock);
	if (b.state == PPL_BACKUP_DONE)
		SLOG(e, PPL_LOG_EVENT, "PPL: %s: base copy %s done: %" PRIu64 " file(s), %.1f MB in %.1f s; a clone is "
			 "possible at any LSN from %" PRIu64 " on (the archive from %" PRIu64 ")", e->datadir, dest,
			 b.files_done, (double)b.bytes_done / 1e6, (double)(b.finished_ns - b.started_ns) / 1e9,
			 b.end_lsn, b.start_lsn);
	else
		SLOG(e, PPL_LOG_CRIT, "PPL: %s: base copy %s failed: %s; the copy is incomplete (no ppl-base.json): "
			 "remove it and start again", e->datadir, dest, b.error);
	return NULL;
}

int ppl_store_backup_start(struct ppl_store *e, const char *dest, char *msg, size_t len)
{
	if (e->archive == NULL || __atomic_load_n(&e->archive_broken, __ATOMIC_ACQUIRE)) {
		snprintf(msg, len, "a base copy needs the log archive (Archive_Path), and %s",
			 e->archive ? "archiving has stopped (see the CRIT line)" : "this export has none");
		return -1;
	}
	if (dest[0] != '/') {
		snprintf(msg, len, "%s is relative: give the copy's directory as an absolute path", dest);
		return -1;
	}
	char parent[PATH_MAX], real[PATH_MAX], exp[PATH_MAX];
	snprintf(parent, sizeof parent, "%s", dest);
	char *slash = strrchr(parent, '/');
	if (slash == parent)
		slash[1] = '\0';
	else
		*slash = '\0';
	if (realpath(parent, real) == NULL) {
		snprintf(msg, len, "%s: %s (its parent directory must exist)", parent, strerror(errno));
		return -1;
	}
	size_t el = realpath(e->exportdir, exp) ? strlen(exp) : 0;
	if (el && strncmp(real, exp, el) == 0 && (real[el] == '/' || real[el] == '\0')) {
		snprintf(msg, len, "%s is inside the export: put the copy outside it", dest);
		return -1;
	}
	rcu_read_lock();
	struct ppl_node *n = store_node_of(e);
	const struct ppl_checkpoint *ck = n && !STOPPED(e) ? ppl_redo_checkpoint(ppl_node_reader(n)) : NULL;
	uint64_t start = ck ? ck->lsn : 0;
	rcu_read_unlock();
	struct ppl_archive_figures af;
	ppl_archive_get_figures(e->archive, &af);
	if (start == 0) {
		snprintf(msg, len, "the storage node does not follow MariaDB's log now (no checkpoint parsed, or ingest "
			 "stopped): nothing to copy from");
		return -1;
	}
	if (af.end_lsn == 0 || af.first_lsn > start) {
		snprintf(msg, len, "the archive begins at LSN %" PRIu64 ", after MariaDB's checkpoint (LSN %" PRIu64 "): "
			 "start the copy once MariaDB's checkpoint has passed the archive's start", af.first_lsn, start);
		return -1;
	}
	/* one start at a time (the live socket's, the schedule's): the
	 * last copy's thread is joined outside backup_lock, which it takes
	 * on its way out */
	pthread_mutex_lock(&e->backup_start_lock);
	pthread_mutex_lock(&e->backup_lock);
	bool stopping = __atomic_load_n(&e->backup_stop, __ATOMIC_RELAXED);
	bool running = e->backup.state == PPL_BACKUP_RUNNING, join = !running && e->backup_thread_started;
	char was[sizeof e->backup.dest];
	snprintf(was, sizeof was, "%s", e->backup.dest);
	if (join)
		e->backup_thread_started = false;
	pthread_mutex_unlock(&e->backup_lock);
	if (join)
		pthread_join(e->backup_thread, NULL);
	if (stopping || running) {
		pthread_mutex_unlock(&e->backup_start_lock);
		if (stopping)
			snprintf(msg, len, "the export is shutting down");
		else
			snprintf(msg, len, "a base copy into %s is running", was);
		return -1;
	}
	pthread_mutex_lock(&e->backup_lock);
	if (__atomic_load_n(&e->backup_stop, __ATOMIC_RELAXED)) { /* store_stop_backup came meanwhile */
		pthread_mutex_unlock(&e->backup_lock);
		pthread_mutex_unlock(&e->backup_start_lock);
		snprintf(msg, len, "the export is shutting down");
		return -1;
	}
	if (mkdir(dest, 0750) != 0) {
		pthread_mutex_unlock(&e->backup_lock);
		pthread_mutex_unlock(&e->backup_start_lock);
		snprintf(msg, len, "%s cannot be made: %s (it must not exist)", dest, strerror(errno));
		return -1;
	}
	memset(&e->backup, 0, sizeof e->backup);
	snprintf(e->backup.dest, sizeof e->backup.dest, "%s", dest);
	e->backup.state = PPL_BACKUP_RUNNING;
	e->backup.start_lsn = start;
	e->backup.started_ns = store_wall_ns();
	int rc = pthread_create(&e->backup_thread, NULL, backup_main, e);
	if (rc == 0)
		e->backup_thread_started = true;
	else
		e->backup.state = PPL_BACKUP_FAILED;
	pthread_mutex_unlock(&e->backup_lock);
	pthread_mutex_unlock(&e->backup_start_lock);
	if (rc != 0) {
		snprintf(msg, len, "the copy's thread cannot start: %s", strerror(rc));
		return -1;
	}
	snprintf(msg, len, "base copy into %s started at MariaDB's checkpoint LSN %" PRIu64, dest, start);
	return 0;
}

void ppl_store_backup_status(struct ppl_store *e, struct ppl_backup_status *out)
{
	pthread_mutex_lock(&e->backup_lock);
	*out = e->backup;
	pthread_mutex_unlock(&e->backup_lock);
}

void store_stop_backup(struct ppl_store *e)
{
	pthread_mutex_lock(&e->backup_lock);
	__atomic_store_n(&e->backup_stop, true, __ATOMIC_RELAXED);
	bool started = e->backup_thread_started;
	e->backup_thread_started = false;
	pthread_mutex_unlock(&e->backup_lock);
	if (started)
		pthread_join(e->backup_thread, NULL);
}
