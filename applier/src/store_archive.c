/* The store's log archive (Archive_Path): every mini-transaction the node
 * accepts goes to the archive (ppl/archive.h) as it is parsed, and a
 * thread of its own makes it durable behind MariaDB's log.
 *
 * The rules, and why:
 *   - Nothing in the archive that MariaDB's log file could lose. A record
 *     is flushed only once its log bytes are durable in the log file: a
 *     COMMIT of the log, or a stable WRITE of it, covers everything
 *     parsed before it began (ppl_store_log_mark, ppl_store_log_synced).
 *     Otherwise a crash of the storage node's machine could leave the
 *     archive holding mini-transactions that MariaDB, recovering from its
 *     log, never had, and writes again differently at the same LSNs.
 *   - A commit never waits for the archive. Appends copy into memory
 *     under the node's parse; the flush runs on the archive thread.
 *   - Nothing skipped silently. When MariaDB's log is about to overwrite
 *     LSNs the archive has not made durable (its disk failing, full, or
 *     too slow), archiving stops with a CRIT line saying from which LSN
 *     the archive ends and what to do; MariaDB goes on. At ingest start
 *     the archive catches up from the log file (a separate reader from
 *     its end to where the node starts); when the log no longer holds
 *     that range, archiving stops the same way. A hole is never bridged.
 *   - A damaged archive refuses the export at start: the operator decides
 *     (ppl_archive_open's message names the file). */
#include <dirent.h>
#include <errno.h>
#include <ftw.h>
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
#include "ppl/node.h"
#include "ppl/redo.h"
#include "ppl/store.h"
#include "store_internal.h"

#define FLUSH_EVERY_MS 100
#define PRUNE_EVERY_NS (60ull * 1000000000ull)
#define SAY_FAILING_EVERY_NS (60ull * 1000000000ull)

/* The wall clock (the archive's time of each record, a base copy's
 * times): what an operator names a clone's moment by. */
uint64_t store_wall_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_REALTIME, &t);
	return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

/* Archiving stops for good (until the export restarts): one CRIT line. */
static void archive_break(struct ppl_store *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void archive_break(struct ppl_store *e, const char *fmt, ...)
{
	char why[sizeof e->archive_why];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(why, sizeof why, fmt, ap);
	va_end(ap);
	pthread_mutex_lock(&e->archive_lock);
	bool first = !e->archive_broken;
	if (first) {
		snprintf(e->archive_why, sizeof e->archive_why, "%s", why);
		__atomic_store_n(&e->archive_broken, true, __ATOMIC_RELEASE);
	}
	pthread_mutex_unlock(&e->archive_lock);
	uint64_t durable = ppl_archive_durable_lsn(e->archive);
	char end[80] = "holding nothing durable yet";
	if (durable)
		snprintf(end, sizeof end, "at LSN %" PRIu64 " (clones can be made up to there)", durable);
	if (first)
		SLOG(e, PPL_LOG_CRIT, "PPL: %s: log archive %s stops, %s: %s. MariaDB is not affected. To archive "
			 "again: fix the cause, move %s aside and restart the export (a new archive begins; take a "
			 "new base copy)", e->datadir, e->archive_dir, end, why, e->archive_dir);
}

static bool broken(struct ppl_store *e)
{
	return __atomic_load_n(&e->archive_broken, __ATOMIC_ACQUIRE);
}

struct same_check {
	const struct ppl_mtr *m;
	bool same;
};

static int same_record(void *arg, const struct ppl_mtr *a, uint64_t wall_ns)
{
	struct same_check *c = arg;
	(void)wall_ns;
	c->same = a->start_lsn == c->m->start_lsn && a->end_lsn == c->m->end_lsn && a->len == c->m->len &&
		  memcmp(a->recs, c->m->recs, a->len) == 0;
	return 0;
}

/* The first mini-transaction parsed after an ingest start that the
 * archive already holds durably must be the archive's, byte for byte:
 * otherwise the log is another database's (a datadir re-created or
 * restored under the export, its LSNs starting over), and appending its
 * later records would splice two databases into one chain. */
static void check_same_database(struct ppl_store *e, const struct ppl_mtr *m)
{
	if (m->end_lsn > ppl_archive_end_lsn(e->archive)) {
		e->archive_check_pending = false; /* past the archive: the chain itself is the check */
		return;
	}
	if (m->end_lsn > ppl_archive_durable_lsn(e->archive))
		return; /* still in memory: the next one, once durable */
	struct ppl_archive_figures f;
	ppl_archive_get_figures(e->archive, &f);
	if (m->start_lsn < f.first_lsn)
		return; /* from before the archive began: the next one */
	e->archive_check_pending = false;
	struct same_check c = {.m = m};
	char err[4400];
	if (ppl_archive_read(e->archive_dir, m->start_lsn, m->end_lsn, same_record, &c, err, sizeof err) != 0 ||
	    !c.same)
		archive_break(e, "the log's mini-transaction at LSN %" PRIu64 " to %" PRIu64 " is not the archive's "
			      "there: this datadir's log is not the one archived (a datadir re-created or restored "
			      "under the export?)", m->start_lsn, m->end_lsn);
}

uint64_t store_archive_clock(void *arg)
{
	(void)arg;
	/* with Ingest_Behind, the write's arrival: its reply went out then,
	 * and the parse comes later */
	uint64_t t = store_behind_arrival_ns();
	return t ? t : store_wall_ns();
}

void store_archive_accept(void *arg, const struct ppl_mtr *m)
{
	struct ppl_store *e = arg;
	char err[300];
	if (e->archive == NULL || broken(e))
		return;
	if (e->archive_check_pending) {
		check_same_database(e, m);
		if (broken(e))
			return;
	}
	/* stamped with when MariaDB's log first held it (the reader's clock,
	 * store_archive_clock): a clone "at" a time holds what was committed
	 * before it */
	if (ppl_archive_append(e->archive, m, m->seen ? m->seen : store_wall_ns(), err, sizeof err) != 0)
		archive_break(e, "%s", err);
}

uint64_t ppl_store_log_mark(struct ppl_store *e)
{
	if (store_behind_on(e))
		return store_behind_mark(e); /* a count of writes: store_behind.c */
	rcu_read_lock();
	struct ppl_node *n = store_node_of(e);
	uint64_t lsn = n ? ppl_node_parsed_lsn(n) : 0;
	rcu_read_unlock();
	return lsn;
}

void store_log_durable_to(struct ppl_store *e, uint64_t lsn)
{
	uint64_t was = __atomic_load_n(&e->log_durable_lsn, __ATOMIC_RELAXED);
	while (was < lsn && !__atomic_compare_exchange_n(&e->log_durable_lsn, &was, lsn, false, __ATOMIC_RELEASE,
							 __ATOMIC_RELAXED))
		;
}

void ppl_store_log_synced(struct ppl_store *e, uint64_t fileid, uint64_t mark)
{
	/* a sync of another datadir's log says nothing of this one */
	if (fileid != __atomic_load_n(&e->log_fileid, __ATOMIC_RELAXED))
		return;
	if (store_behind_on(e))
		store_behind_synced(e, mark);
	else
		store_log_durable_to(e, mark);
}

/* One flush up to the log's durable end: 0, or -1 (counted, and said
 * once a minute while it goes on: the disk under the archive). */
static int flush_once(struct ppl_store *e)
{
	char err[PATH_MAX + 200];
	uint64_t upto = __atomic_load_n(&e->log_durable_lsn, __ATOMIC_ACQUIRE);
	if (ppl_archive_flush(e->archive, upto, err, sizeof err) == 0)
		return 0;
	__atomic_add_fetch(&e->archive_flush_failures, 1, __ATOMIC_RELAXED);
	uint64_t now = store_now_ns(e);
	if (e->archive_said_ns == 0 || now - e->archive_said_ns >= SAY_FAILING_EVERY_NS) {
		e->archive_said_ns = now;
		SLOG(e, PPL_LOG_CRIT, "PPL: %s: log archive: %s; the records wait in memory and are written again; "
			 "if MariaDB's log wraps over them first, archiving stops. Free space on (or repair) the "
			 "archive's disk", e->datadir, err);
	}
	return -1;
}

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)ftw;
	return flag == FTW_DP ? rmdir(path) : unlink(path);
}

static int cmp_name(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The scheduled copies in Base_Path beyond the newest Base_Keep go (only
 * base-* directories holding a finished copy: nothing else there is
 * touched). */
static void prune_bases(struct ppl_store *e)
{
	DIR *d = opendir(e->base_path);
	if (d == NULL)
		return;
	char **names = NULL;
	size_t n = 0, cap = 0;
	struct dirent *de;
	while ((de = readdir(d)) != NULL) {
		char manifest[PATH_MAX];
		if (strncmp(de->d_name, "base-", 5) != 0 ||
		    snprintf(manifest, sizeof manifest, "%s/%s/ppl-base.json", e->base_path, de->d_name) >=
			    (int)sizeof manifest ||
		    access(manifest, F_OK) != 0)
			continue;
		if (n == cap) {
			cap = cap ? 2 * cap : 16;
			char **m = realloc(names, cap * sizeof *m);
			if (m == NULL)
				break;
			names = m;
		}
		if ((names[n] = strdup(de->d_name)) != NULL)
			n++;
	}
	closedir(d);
	if (n)
		qsort(names, n, sizeof *names, cmp_name);
	for (size_t i = 0; i + e->base_keep < n; i++) {
		char path[PATH_MAX];
		snprintf(path, sizeof path, "%s/%s", e->base_path, names[i]);
		if (nftw(path, rm_entry, 8, FTW_DEPTH | FTW_PHYS) == 0)
			SLOG(e, PPL_LOG_EVENT, "PPL: %s: base copy %s removed (Base_Keep = %u newer ones kept)", e->datadir,
				 path, e->base_keep);
		else
			SLOG(e, PPL_LOG_WARN, "PPL: %s: old base copy %s cannot be removed: %s", e->datadir, path,
				 strerror(errno));
	}
	for (size_t i = 0; i < n; i++)
		free(names[i]);
	free(names);
}

/* Base_Interval: a copy into Base_Path when the last one is that old
 * (at once when there is none), and the old ones pruned after it. */
static void schedule_base(struct ppl_store *e)
{
	struct ppl_backup_status b;
	ppl_store_backup_status(e, &b);
	if (e->base_running) {
		if (b.state == PPL_BACKUP_RUNNING)
			return;
		e->base_running = false;
		if (b.state == PPL_BACKUP_DONE) {
			e->base_last_ns = b.finished_ns;
			prune_bases(e);
		}
		return;
	}
	uint64_t now = store_wall_ns();
	if (b.state == PPL_BACKUP_RUNNING || now < e->base_last_ns + e->base_interval_ns ||
	    now < e->base_tried_ns + 2000000000ull)
		return;
	e->base_tried_ns = now;
	char dest[PATH_MAX], msg[PATH_MAX + 300];
	time_t s = (time_t)(now / 1000000000ull);
	struct tm tm;
	gmtime_r(&s, &tm);
	size_t k = (size_t)snprintf(dest, sizeof dest, "%s/base-", e->base_path);
	strftime(dest + k, sizeof dest - k, "%Y%m%dT%H%M%SZ", &tm);
	if (ppl_store_backup_start(e, dest, msg, sizeof msg) == 0)
		e->base_running = true;
	else
		SLOG(e, PPL_LOG_DEBUG, "PPL: %s: scheduled base copy not started yet: %s", e->datadir, msg);
}

static void *archive_main(void *arg)
{
	struct ppl_store *e = arg;
	if (e->env.thread_started)
		e->env.thread_started(e->env.thread_arg, "ppl_archive");
	uint64_t pruned_ns = store_now_ns(e);
	pthread_mutex_lock(&e->archive_lock);
	while (!e->archive_stop) {
		struct timespec t;
		store_deadline(&t, FLUSH_EVERY_MS * 1000000ull);
		pthread_cond_timedwait(&e->archive_cond, &e->archive_lock, &t);
		if (e->archive_stop)
			break;
		pthread_mutex_unlock(&e->archive_lock);
		if (!broken(e))
			flush_once(e);
		if (e->base_path && e->base_interval_ns && !broken(e))
			schedule_base(e);
		if (store_now_ns(e) - pruned_ns >= PRUNE_EVERY_NS) {
			char err[PATH_MAX + 200];
			pruned_ns = store_now_ns(e);
			/* what the newest base needs stays (none yet: retention alone) */
			uint64_t floor = __atomic_load_n(&e->base_floor, __ATOMIC_RELAXED);
			int n = ppl_archive_prune(e->archive, floor ? floor : UINT64_MAX, store_wall_ns(), err, sizeof err);
			if (n < 0)
				SLOG(e, PPL_LOG_WARN, "PPL: %s: log archive retention: %s", e->datadir, err);
			else if (n > 0)
				SLOG(e, PPL_LOG_EVENT, "PPL: %s: log archive: %d old segment(s) removed (retention)",
					 e->datadir, n);
		}
		pthread_mutex_lock(&e->archive_lock);
	}
	pthread_mutex_unlock(&e->archive_lock);
	return NULL;
}

int ppl_store_start_archive(struct ppl_store *e, const struct ppl_config *c, char *err, size_t errlen)
{
	if (c->archive_path == NULL || c->archive_path[0] == '\0')
		return 0;
	char real[PATH_MAX], exp[PATH_MAX];
	if (realpath(c->archive_path, real) == NULL) {
		snprintf(err, errlen, "Archive_Path \"%s\": %s", c->archive_path, strerror(errno));
		return -1;
	}
	size_t el = realpath(e->exportdir, exp) ? strlen(exp) : 0;
	if (el && strncmp(real, exp, el) == 0 && (real[el] == '/' || real[el] == '\0')) {
		snprintf(err, errlen, "Archive_Path \"%s\" is inside the export %s: MariaDB's clients would see it, "
			 "and a full archive would fill the datadir's disk; put it outside the export", c->archive_path,
			 e->exportdir);
		return -1;
	}
	struct ppl_archive_config ac = {.dir = real, .segment_bytes = c->archive_segment_size,
					.retention_bytes = c->archive_retention_size,
					.retention_s = c->archive_retention_age};
	char why[PATH_MAX + 300];
	e->archive = ppl_archive_open(&ac, why, sizeof why);
	if (e->archive == NULL) {
		snprintf(err, errlen, "log archive: %s. Nothing was changed: repair the file or move the archive "
			 "aside, then start again", why);
		return -1;
	}
	snprintf(e->archive_dir, sizeof e->archive_dir, "%s", real);
	struct ppl_base_info *bases;
	size_t nb;
	if (ppl_bases_list(real, &bases, &nb, why, sizeof why) != 0) {
		ppl_archive_close(e->archive);
		e->archive = NULL;
		snprintf(err, errlen, "log archive: %s", why);
		return -1;
	}
	for (size_t i = 0; i < nb; i++) {
		store_archive_base_done(e, bases[i].start_lsn);
		if (bases[i].finished_ns > e->base_last_ns)
			e->base_last_ns = bases[i].finished_ns;
	}
	free(bases);
	if (c->base_path && c->base_path[0] && c->base_interval) {
		char bp[PATH_MAX];
		if (realpath(c->base_path, bp) == NULL || (el && strncmp(bp, exp, el) == 0 &&
							   (bp[el] == '/' || bp[el] == '\0'))) {
			ppl_archive_close(e->archive);
			e->archive = NULL;
			snprintf(err, errlen, "Base_Path \"%s\" is inside the export %s (or cannot be resolved): put it "
				 "outside", c->base_path, e->exportdir);
			return -1;
		}
		e->base_path = strdup(bp);
		e->base_interval_ns = (uint64_t)c->base_interval * 1000000000ull;
		e->base_keep = c->base_keep ? c->base_keep : PPL_DEFAULT_BASE_KEEP;
	}
	int rc = pthread_create(&e->archive_thread, NULL, archive_main, e);
	if (rc != 0) {
		ppl_archive_close(e->archive);
		e->archive = NULL;
		snprintf(err, errlen, "log archive: its thread cannot start: %s", strerror(rc));
		return -1;
	}
	e->archive_thread_started = true;
	struct ppl_archive_figures f;
	ppl_archive_get_figures(e->archive, &f);
	if (f.segments)
		SLOG(e, PPL_LOG_EVENT, "PPL: %s: log archive %s holds LSN %" PRIu64 " to %" PRIu64 " (%" PRIu64
			 " segment(s), %.1f MB)%s; it goes on from there", e->datadir, real, f.first_lsn, f.end_lsn,
			 f.segments, (double)f.bytes / 1e6, f.torn_bytes_cut ? ", a torn last record cut" : "");
	else
		SLOG(e, PPL_LOG_EVENT, "PPL: %s: log archive %s is empty; it begins with the first mini-transaction "
			 "parsed", e->datadir, real);
	return 0;
}

void store_archive_base_done(struct ppl_store *e, uint64_t start_lsn)
{
	/* the newest base's start: bases are made one after the other, each
	 * from a later checkpoint */
	uint64_t was = __atomic_load_n(&e->base_floor, __ATOMIC_RELAXED);
	while (was < start_lsn && !__atomic_compare_exchange_n(&e->base_floor, &was, start_lsn, false,
							       __ATOMIC_RELAXED, __ATOMIC_RELAXED))
		;
}

void store_stop_archive(struct ppl_store *e)
{
	if (e->archive == NULL)
		return;
	pthread_mutex_lock(&e->archive_lock);
	e->archive_stop = true;
	pthread_cond_broadcast(&e->archive_cond);
	pthread_mutex_unlock(&e->archive_lock);
	if (e->archive_thread_started)
		pthread_join(e->archive_thread, NULL);
	/* a clean stop: what the log holds durably goes in; the rest is
	 * taken from the log at the next start */
	if (!broken(e))
		flush_once(e);
	struct ppl_archive_figures f;
	ppl_archive_get_figures(e->archive, &f);
	if (f.buffered_bytes)
		SLOG(e, PPL_LOG_EVENT, "PPL: %s: log archive ends at LSN %" PRIu64 " at this stop; %" PRIu64 " B of "
			 "records past it were not yet durable in MariaDB's log and are taken from the log at the next "
			 "start", e->datadir, f.durable_lsn, f.buffered_bytes);
	struct ppl_archive *a = e->archive;
	e->archive = NULL;
	ppl_archive_close(a);
	free(e->base_path);
	e->base_path = NULL;
}

void store_archive_before_overwrite(struct ppl_store *e, uint64_t over_lsn)
{
	if (e->archive == NULL || broken(e) || over_lsn == 0)
		return;
	uint64_t durable = ppl_archive_durable_lsn(e->archive);
	struct ppl_archive_figures f;
	ppl_archive_get_figures(e->archive, &f);
	/* nothing archived yet, or below the archive's start: log from
	 * before archiving began */
	if (durable >= over_lsn || f.end_lsn == 0 || over_lsn <= f.first_lsn)
		return;
	store_behind_drain(e); /* writes queued behind their replies may carry the syncs */
	flush_once(e);
	durable = ppl_archive_durable_lsn(e->archive);
	if (durable < over_lsn)
		archive_break(e, "MariaDB's log is about to overwrite LSN %" PRIu64 ", and the archive holds only up to "
			      "LSN %" PRIu64 " durably (its disk failing or full, or MariaDB's log not synced)",
			      over_lsn, durable);
}

/* ---- catching up from the log file at ingest start ---------------------------- */

struct catch_up {
	struct ppl_store *e;
	uint64_t upto;
	int failed;
};

static int catch_up_mtr(void *arg, const struct ppl_mtr *m)
{
	struct catch_up *c = arg;
	if (m->start_lsn >= c->upto)
		return 1; /* the node takes it from here */
	store_archive_accept(c->e, m);
	return broken(c->e) ? 2 : 0;
}

void store_archive_ingest_start(struct ppl_store *e, uint64_t start, uint64_t log_size)
{
	if (e->archive == NULL || broken(e))
		return;
	e->archive_check_pending = true;
	uint64_t end = ppl_archive_end_lsn(e->archive);
	if (end == 0 || end >= start)
		return;
	const struct ppl_redo_dialect *d = &ppl_dialect_mariadb_10_8;
	struct catch_up c = {.e = e, .upto = start};
	struct ppl_redo_sink sink = {.arg = &c, .on_mtr = catch_up_mtr};
	struct ppl_redo_reader *r = ppl_redo_reader_new(d, log_size, PPL_REDO_FILE_IMAGE, &sink);
	const struct ppl_io *io = e->env.io;
	char path[PATH_MAX];
	snprintf(path, sizeof path, "%s/ib_logfile0", e->datadir);
	int fd = r ? io->open(io->arg, path, O_RDONLY) : -1;
	size_t chunk = 1 << 20;
	uint8_t *buf = fd >= 0 ? malloc(chunk > d->area_start ? chunk : d->area_start) : NULL;
	const char *why = NULL;
	if (buf == NULL || io->pread(io->arg, fd, buf, d->area_start, 0) != (ssize_t)d->area_start) {
		why = "the log file cannot be read";
	} else if (ppl_redo_feed(r, 0, buf, d->area_start) < 0 || ppl_redo_start_at(r, end) != 0) {
		why = "the log no longer holds it (it was re-created, or wrapped while the storage node was down or "
		      "archiving was off)";
	} else {
		uint64_t cap = ppl_redo_capacity(r), todo = start - end;
		if (todo > cap) {
			why = "MariaDB's log wrapped over it while the storage node was down or archiving was off";
		} else {
			uint64_t off = ppl_redo_offset_of(r, end);
			int rc = 0;
			while (todo > 0 && rc == 0) {
				uint64_t room = d->area_start + cap - off, n = todo < chunk ? todo : chunk;
				if (n > room)
					n = room;
				if (io->pread(io->arg, fd, buf, n, (off_t)off) != (ssize_t)n) {
					why = "the log file cannot be read";
					break;
				}
				rc = ppl_redo_feed(r, off, buf, n);
				todo -= n;
				off += n;
				if (off == d->area_start + cap)
					off = d->area_start;
			}
			if (!why && !broken(e) && ppl_archive_end_lsn(e->archive) != start)
				why = "the log's bytes there are not whole mini-transactions any more (overwritten)";
		}
	}
	if (why && !broken(e))
		archive_break(e, "the archive ends at LSN %" PRIu64 " and the log is read from LSN %" PRIu64
			      " at this start, but %s", end, start, why);
	else if (!broken(e))
		SLOG(e, PPL_LOG_EVENT, "PPL: %s: log archive caught up from LSN %" PRIu64 " to %" PRIu64
			 " from the log file", e->datadir, end, start);
	free(buf);
	if (fd >= 0)
		io->close(io->arg, fd);
	ppl_redo_reader_free(r);
}

void store_archive_ingest_started(struct ppl_store *e, uint64_t parsed)
{
	/* the log file as it was found at start survived whatever came
	 * before: what parses in it is durable */
	store_log_durable_to(e, parsed);
}

void store_archive_figures(struct ppl_store *e, struct ppl_store_figures *f)
{
	f->archive = e->archive != NULL;
	if (e->archive == NULL)
		return;
	struct ppl_archive_figures a;
	ppl_archive_get_figures(e->archive, &a);
	f->archive_first_lsn = a.first_lsn;
	f->archive_end_lsn = a.end_lsn;
	f->archive_durable_lsn = a.durable_lsn;
	f->archive_segments = a.segments;
	f->archive_bytes = a.bytes;
	f->archive_buffered = a.buffered_bytes;
	f->archive_flush_failures = __atomic_load_n(&e->archive_flush_failures, __ATOMIC_RELAXED);
	f->archive_broken = broken(e);
	f->log_durable_lsn = __atomic_load_n(&e->log_durable_lsn, __ATOMIC_RELAXED);
}
