/* The engine attached to an export. See ppl_engine.h. */
#include "config.h"
#include "log.h"

#include <errno.h>
#include <dirent.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ppl/datadir.h"
#include "ppl/node.h"
#include "ppl/page.h"
#include "ppl/redo.h"
#include "ppl_engine.h"

#define SPACE_MAP_SIZE 4096u /* open addressing, fileid -> space id */

struct space_slot {
	uint64_t fileid;       /* 0: empty */
	uint32_t space;
};

struct ppl_engine {
	char *exportdir;
	char *datadir;                 /* where ib_logfile0 is: the export, or a directory in it */
	pthread_mutex_t log_lock;      /* ingest is one thread at a time (node.h) */
	struct ppl_node *node;         /* published once started, under log_lock */
	struct ppl_node *building;     /* not yet started: no reader sees it */
	bool started;                  /* parsing from a checkpoint */
	bool stopped;                  /* the log could not be parsed: ingest off */
	bool waiting_logged;
	size_t page_size;
	struct ppl_datadir *dd;        /* pages by space id, for reads that cover part of a page */
	struct ppl_node *retired[16];  /* replaced nodes, freed at the end: readers may hold them */
	unsigned nretired;

	pthread_mutex_t map_lock;
	struct space_slot map[SPACE_MAP_SIZE];

	uint64_t reads, pages_rebuilt, rebuild_failures, pages_written;
};

static struct ppl_node *node_of(struct ppl_engine *e)
{
	return __atomic_load_n(&e->node, __ATOMIC_ACQUIRE);
}

static void node_log(void *arg, const char *msg)
{
	struct ppl_engine *e = arg;
	LogEvent(COMPONENT_FSAL, "PPL: %s: %s", e->datadir, msg);
}

struct ppl_engine *ppl_engine_new(const char *datadir)
{
	struct ppl_engine *e = calloc(1, sizeof(*e));
	if (e == NULL)
		return NULL;
	e->exportdir = strdup(datadir);
	e->datadir = strdup(datadir);
	if (e->datadir == NULL || e->exportdir == NULL) {
		free(e->exportdir);
		free(e->datadir);
		free(e);
		return NULL;
	}
	pthread_mutex_init(&e->log_lock, NULL);
	pthread_mutex_init(&e->map_lock, NULL);
	return e;
}

void ppl_engine_free(struct ppl_engine *e)
{
	if (e == NULL)
		return;
	ppl_node_free(e->node);
	ppl_node_free(e->building);
	ppl_datadir_close(e->dd);
	for (unsigned i = 0; i < e->nretired; i++)
		ppl_node_free(e->retired[i]);
	pthread_mutex_destroy(&e->log_lock);
	pthread_mutex_destroy(&e->map_lock);
	free(e->datadir);
	free(e->exportdir);
	free(e);
}

/* ---- which space a file holds -------------------------------------------- */

static void map_set(struct ppl_engine *e, uint64_t fileid, uint32_t space)
{
	if (fileid == 0)
		return;
	pthread_mutex_lock(&e->map_lock);
	for (unsigned i = 0; i < SPACE_MAP_SIZE; i++) {
		struct space_slot *s = &e->map[(fileid + i) % SPACE_MAP_SIZE];
		if (s->fileid == fileid || s->fileid == 0) {
			s->fileid = fileid;
			s->space = space;
			break;
		}
	}
	pthread_mutex_unlock(&e->map_lock);
}

static bool map_get(struct ppl_engine *e, uint64_t fileid, uint32_t *space)
{
	bool found = false;
	pthread_mutex_lock(&e->map_lock);
	for (unsigned i = 0; i < SPACE_MAP_SIZE; i++) {
		struct space_slot *s = &e->map[(fileid + i) % SPACE_MAP_SIZE];
		if (s->fileid == 0)
			break;
		if (s->fileid == fileid) {
			*space = s->space;
			found = true;
			break;
		}
	}
	pthread_mutex_unlock(&e->map_lock);
	return found;
}

/* ---- redo ingest ---------------------------------------------------------- */

static int read_file(const char *dir, const char *name, void *buf, size_t len, uint64_t off, uint64_t *size)
{
	char path[4096];
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	int fd = open(path, O_RDONLY);
	if (fd < 0)
		return -1;
	struct stat st;
	ssize_t got = len ? pread(fd, buf, len, (off_t)off) : 0;
	if (size)
		*size = fstat(fd, &st) == 0 ? (uint64_t)st.st_size : 0;
	close(fd);
	return got == (ssize_t)len ? 0 : -1;
}

/* The directory holding the ib_logfile0 with this inode: the export
 * itself, or a directory up to three levels down (a datadir inside the
 * export). */
static bool find_log(const char *dir, uint64_t ino, int depth, char *out, size_t outlen)
{
	char p[4096];
	struct stat st;
	snprintf(p, sizeof(p), "%s/ib_logfile0", dir);
	if (stat(p, &st) == 0 && (uint64_t)st.st_ino == ino) {
		snprintf(out, outlen, "%s", dir);
		return true;
	}
	if (depth == 0)
		return false;
	DIR *d = opendir(dir);
	struct dirent *de;
	bool found = false;
	while (d && !found && (de = readdir(d)) != NULL) {
		if (de->d_name[0] == '.' || (de->d_type != DT_DIR && de->d_type != DT_UNKNOWN))
			continue;
		snprintf(p, sizeof(p), "%s/%s", dir, de->d_name);
		if (stat(p, &st) == 0 && S_ISDIR(st.st_mode))
			found = find_log(p, ino, depth - 1, out, outlen);
	}
	if (d)
		closedir(d);
	return found;
}

static void locate_datadir(struct ppl_engine *e, uint64_t log_fileid)
{
	char dir[4096];
	if (!find_log(e->exportdir, log_fileid, 3, dir, sizeof(dir)) || strcmp(dir, e->datadir) == 0)
		return;
	char *d = strdup(dir);
	if (d == NULL)
		return;
	free(e->datadir);
	e->datadir = d;
	LogEvent(COMPONENT_FSAL, "PPL: %s: MariaDB's datadir is %s", e->exportdir, d);
}

/* The node needs the page size, from ibdata1's page 0 (InnoDB creates
 * ibdata1 before the log). */
static int make_node(struct ppl_engine *e)
{
	uint8_t hdr[PPL_FSP_HEADER_OFFSET + PPL_FSP_SPACE_FLAGS + 4];
	if (read_file(e->datadir, "ibdata1", hdr, sizeof(hdr), 0, NULL) != 0)
		return -1;
	uint32_t flags = ppl_rd4(hdr + PPL_FSP_HEADER_OFFSET + PPL_FSP_SPACE_FLAGS);
	if (flags == 0 && ppl_rd4(hdr + PPL_FIL_PAGE_SPACE_ID) == 0 && ppl_page_lsn(hdr) == 0)
		return -1; /* page 0 not written yet (a datadir being created) */
	size_t ps = ppl_fsp_flags_page_size(flags);
	if (ps == 0) {
		LogCrit(COMPONENT_FSAL, "PPL: %s: ibdata1 is not a full_crc32 tablespace this engine reads; "
			"redo is not ingested and pages are served as the data files hold them", e->datadir);
		e->stopped = true;
		return -1;
	}
	struct ppl_node_config c = { .page_size = ps, .log = node_log, .log_arg = e };
	struct ppl_node *n = ppl_node_new(&c);
	if (n == NULL)
		return -1;
	e->page_size = ps;
	e->building = n;
	if (e->dd == NULL) {
		char err[256];
		e->dd = ppl_datadir_open(e->datadir, err, sizeof(err));
	}
	return 0;
}

static void stop_ingest(struct ppl_engine *e, const char *why)
{
	e->stopped = true;
	LogCrit(COMPONENT_FSAL, "PPL: %s: redo ingest stopped: %s. Pages with records parsed before this point "
		"are still rebuilt on read; later ones are served as the data files hold them (nothing is "
		"elided). If the log file itself is damaged, MariaDB's own recovery will stop at the same "
		"place; if only this parse went wrong, restart ganesha.nfsd to ingest again from the log's "
		"checkpoint", e->datadir, why);
}

/* Feeds bytes [from, to) of the log file as it is on disk. */
static int feed_file(struct ppl_engine *e, uint64_t from, uint64_t to)
{
	uint8_t *b = malloc(1 << 20);
	if (b == NULL)
		return -1;
	int rc = 0;
	while (from < to && rc == 0) {
		size_t n = to - from > (1 << 20) ? (1 << 20) : (size_t)(to - from);
		if (read_file(e->datadir, "ib_logfile0", b, n, from, NULL) != 0 ||
		    ppl_node_log_write(e->building, from, b, n) != 0)
			rc = -1;
		from += n;
	}
	free(b);
	return rc;
}

/* First log write since the engine started: read the header and the
 * checkpoints from the file, start at the checkpoint, catch up with what
 * the file holds up to the end of this write. */
static int start_ingest(struct ppl_engine *e, uint64_t write_end)
{
	uint64_t size = 0, area = ppl_dialect_mariadb_10_8.area_start;
	uint8_t *hdr = malloc(area);
	if (hdr == NULL)
		return -1;
	int got = read_file(e->datadir, "ib_logfile0", hdr, area, 0, &size);
	if (got != 0 || size <= area || write_end < area) {
		free(hdr);
		return 0; /* the header is not written yet */
	}
	if (ppl_node_log_open(e->building, size) != 0) {
		free(hdr);
		stop_ingest(e, "ib_logfile0 is too small to be a redo log");
		return -1;
	}
	ppl_node_log_write(e->building, 0, hdr, area);
	free(hdr);
	const struct ppl_redo_reader *r = ppl_node_reader(e->building);
	const struct ppl_log_header *h = ppl_redo_header(r);
	const struct ppl_checkpoint *ck = ppl_redo_checkpoint(r);
	if (h == NULL || ck == NULL) {
		if (!e->waiting_logged)
			LogEvent(COMPONENT_FSAL, "PPL: %s: ib_logfile0 has no valid %s yet; ingest waits for it",
				 e->datadir, h ? "checkpoint" : "header");
		e->waiting_logged = true;
		/* a fresh node next time: this one saw an incomplete header */
		ppl_node_free(e->building);
		e->building = NULL;
		return 0;
	}
	if (ppl_node_log_start(e->building, ck->lsn) != 0) {
		stop_ingest(e, "the checkpoint LSN is before the log's first LSN");
		return -1;
	}
	uint64_t from = ppl_redo_offset_of(r, ck->lsn);
	int rc = 0;
	if (write_end > from) {
		rc = feed_file(e, from, write_end);
	} else {
		rc = feed_file(e, from, size);
		if (rc == 0)
			rc = feed_file(e, area, write_end);
	}
	if (rc != 0) {
		stop_ingest(e, ppl_node_error(e->building) ? ppl_node_error(e->building) : "cannot read ib_logfile0");
		return -1;
	}
	e->started = true;
	__atomic_store_n(&e->node, e->building, __ATOMIC_RELEASE);
	e->building = NULL;
	LogEvent(COMPONENT_FSAL, "PPL: %s: redo ingest started at the checkpoint LSN %" PRIu64 " (log of %" PRIu64
		 " B by \"%s\", %zu B pages)", e->datadir, ck->lsn, size, h->creator, e->page_size);
	return 0;
}

int ppl_engine_log_write(struct ppl_engine *e, uint64_t fileid, uint64_t off, const struct iovec *iov, int iovcnt,
			 size_t len)
{
	pthread_mutex_lock(&e->log_lock);
	if (e->stopped)
		goto out;
	if (!e->started && e->building == NULL)
		locate_datadir(e, fileid);
	if (!e->started && e->building == NULL && make_node(e) != 0)
		goto out;
	if (!e->started) {
		start_ingest(e, off + len); /* the file already holds this write */
		goto out;
	}
	size_t left = len;
	for (int i = 0; i < iovcnt && left; i++) {
		size_t n = iov[i].iov_len < left ? iov[i].iov_len : left;
		if (ppl_node_log_write(e->node, off, iov[i].iov_base, n) != 0) {
			stop_ingest(e, ppl_node_error(e->node));
			break;
		}
		off += n;
		left -= n;
	}
out:
	pthread_mutex_unlock(&e->log_lock);
	return 0;
}

void ppl_engine_log_replaced(struct ppl_engine *e)
{
	pthread_mutex_lock(&e->log_lock);
	ppl_node_free(e->building);
	e->building = NULL;
	if (e->node) {
		/* Readers may be inside the old node; it is freed with the
		 * engine. MariaDB re-creates the log only after a checkpoint
		 * that left every page in its data file. */
		if (e->nretired < 16) {
			e->retired[e->nretired++] = e->node;
		} else {
			LogWarn(COMPONENT_FSAL, "PPL: %s: the log was replaced more than 16 times; keeping the "
				"old index", e->datadir);
			pthread_mutex_unlock(&e->log_lock);
			return;
		}
		__atomic_store_n(&e->node, NULL, __ATOMIC_RELEASE);
	}
	e->started = false;
	e->stopped = false;
	e->waiting_logged = false;
	LogEvent(COMPONENT_FSAL, "PPL: %s: ib_logfile0 was replaced (log resize); ingest restarts at its "
		 "checkpoint", e->datadir);
	pthread_mutex_unlock(&e->log_lock);
}

/* ---- pages ------------------------------------------------------------------ */

/* Copies len bytes at byte position pos of the iovec into/out of buf. */
static void iov_copy(struct iovec *iov, int iovcnt, size_t pos, uint8_t *buf, size_t len, bool out)
{
	for (int i = 0; i < iovcnt && len; i++) {
		if (pos >= iov[i].iov_len) {
			pos -= iov[i].iov_len;
			continue;
		}
		size_t n = iov[i].iov_len - pos < len ? iov[i].iov_len - pos : len;
		if (out)
			memcpy(buf, (uint8_t *)iov[i].iov_base + pos, n);
		else
			memcpy((uint8_t *)iov[i].iov_base + pos, buf, n);
		buf += n;
		len -= n;
		pos = 0;
	}
}

static bool all_zero(const uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (p[i])
			return false;
	return true;
}

/* The space a page belongs to: its header says, or (a page never written)
 * what the file's other pages said. */
static bool page_space(struct ppl_engine *e, uint64_t fileid, const uint8_t *page, uint32_t page_no,
		       uint32_t *space)
{
	if (ppl_page_no(page) == page_no && !all_zero(page, e->page_size)) {
		*space = ppl_page_space(page);
		map_set(e, fileid, *space);
		return true;
	}
	return map_get(e, fileid, space);
}

int ppl_engine_read(struct ppl_engine *e, uint64_t fileid, uint64_t off, struct iovec *iov, int iovcnt,
		    size_t len)
{
	struct ppl_node *n = node_of(e);
	if (n == NULL)
		return 0;
	size_t ps = e->page_size;
	uint8_t *frame = NULL;
	int rc = 0;
	__atomic_add_fetch(&e->reads, 1, __ATOMIC_RELAXED);
	for (uint64_t p = (off + ps - 1) / ps * ps; p + ps <= off + len; p += ps) {
		if (frame == NULL && (frame = aligned_alloc(4096, ps)) == NULL)
			return ENOMEM;
		iov_copy(iov, iovcnt, p - off, frame, ps, true);
		uint32_t page_no = (uint32_t)(p / ps), space;
		struct ppl_node_page_info info;
		if (!page_space(e, fileid, frame, page_no, &space) || !ppl_node_page_info(n, space, page_no, &info))
			continue;
		bool changed = false;
		struct ppl_apply_error err;
		enum ppl_apply_status st = ppl_node_rebuild(n, space, page_no, frame, UINT64_MAX, &changed, &err);
		if (st != PPL_APPLY_OK) {
			__atomic_add_fetch(&e->rebuild_failures, 1, __ATOMIC_RELAXED);
			LogCrit(COMPONENT_FSAL, "PPL: %s: page %" PRIu32 ":%" PRIu32 " cannot be rebuilt (%s); the "
				"READ fails rather than serve a page that may be wrong", e->datadir, space, page_no,
				err.msg);
			rc = EIO;
			break;
		}
		if (changed) {
			iov_copy(iov, iovcnt, p - off, frame, ps, false);
			__atomic_add_fetch(&e->pages_rebuilt, 1, __ATOMIC_RELAXED);
		}
	}
	/* A read that covers only part of a page (never InnoDB's own, which
	 * reads whole pages) must not return stale bytes of a page with
	 * pending records either: rebuild the whole page from its file and
	 * copy the part. */
	uint64_t first = off / ps, last = (off + len - 1) / ps;
	for (uint64_t pg = first; rc == 0 && len && pg <= last; pg++) {
		uint64_t ps0 = pg * ps;
		if (ps0 >= off && ps0 + ps <= off + len)
			continue; /* whole: done above */
		uint32_t space;
		struct ppl_node_page_info info;
		if (!map_get(e, fileid, &space) || !ppl_node_page_info(n, space, (uint32_t)pg, &info))
			continue;
		if (frame == NULL && (frame = aligned_alloc(4096, ps)) == NULL)
			return ENOMEM;
		bool changed = false;
		struct ppl_apply_error err;
		if (e->dd == NULL || ppl_datadir_read_page(e->dd, space, (uint32_t)pg, frame, ps) != 0 ||
		    ppl_node_rebuild(n, space, (uint32_t)pg, frame, UINT64_MAX, &changed, &err) != PPL_APPLY_OK) {
			__atomic_add_fetch(&e->rebuild_failures, 1, __ATOMIC_RELAXED);
			LogCrit(COMPONENT_FSAL, "PPL: %s: a READ of part of page %" PRIu32 ":%" PRIu64 " cannot be "
				"served rebuilt; it fails rather than return stale bytes", e->datadir, space, pg);
			rc = EIO;
			break;
		}
		uint64_t from = off > ps0 ? off : ps0, to = off + len < ps0 + ps ? off + len : ps0 + ps;
		iov_copy(iov, iovcnt, from - off, frame + (from - ps0), to - from, false);
		if (changed)
			__atomic_add_fetch(&e->pages_rebuilt, 1, __ATOMIC_RELAXED);
	}
	free(frame);
	return rc;
}

void ppl_engine_write(struct ppl_engine *e, uint64_t fileid, uint64_t off, const struct iovec *iov, int iovcnt,
		      size_t len)
{
	struct ppl_node *n = node_of(e);
	if (n == NULL || off % e->page_size)
		return;
	size_t ps = e->page_size;
	uint8_t *frame = aligned_alloc(4096, ps);
	if (frame == NULL)
		return;
	for (uint64_t p = off; p + ps <= off + len; p += ps) {
		iov_copy((struct iovec *)iov, iovcnt, p - off, frame, ps, true);
		uint32_t space;
		if (!page_space(e, fileid, frame, (uint32_t)(p / ps), &space))
			continue;
		ppl_node_page_written(n, frame);
		__atomic_add_fetch(&e->pages_written, 1, __ATOMIC_RELAXED);
	}
	free(frame);
}

int ppl_engine_format(struct ppl_engine *e, char *buf, size_t len)
{
	struct ppl_node *n = node_of(e);
	if (n == NULL)
		return snprintf(buf, len, "engine: %s", e->stopped ? "ingest stopped (see above)" :
						       "waiting for ibdata1 and the log's checkpoint");
	struct ppl_node_stats s;
	ppl_node_get_stats(n, &s);
	return snprintf(buf, len,
			"engine: redo %.1f MB parsed to LSN %" PRIu64 ", %" PRIu64 " mtrs, %" PRIu64
			" records, %" PRIu64 " pages pending; reads %" PRIu64 ", pages rebuilt %" PRIu64
			" (%" PRIu64 " mtrs applied), rebuild failures %" PRIu64 "; page writes taken as bases %"
			PRIu64 "%s",
			(double)s.log_bytes / 1e6, ppl_node_parsed_lsn(n), s.mtrs, s.records, s.pages_indexed,
			__atomic_load_n(&e->reads, __ATOMIC_RELAXED),
			__atomic_load_n(&e->pages_rebuilt, __ATOMIC_RELAXED), s.rebuild_mtrs_applied,
			__atomic_load_n(&e->rebuild_failures, __ATOMIC_RELAXED),
			__atomic_load_n(&e->pages_written, __ATOMIC_RELAXED), e->stopped ? "; INGEST STOPPED" : "");
}
