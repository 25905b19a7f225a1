/* Recovery without a server (the engine of ppl-replay).
 *
 * Like InnoDB's recovery it works in two phases: the log, from the
 * checkpoint, is fed to the storage engine (ppl/node.h), which indexes the
 * records per page exactly as the storage node does online; then every
 * indexed page is visited once, in file order: read from its data file
 * (unless the log initializes it), rebuilt, and written back. File records
 * (create, delete, rename, undo truncation) are acted on at the end. */
#include "ppl/replay.h"
#include "ppl/fileclass.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "ppl/archive.h"
#include "ppl/mach.h"
#include "ppl/page.h"
#include "ppl/node.h"
#include "ppl/page_apply.h"

struct space {
	uint32_t id;
	char *path;
	int fd;
	size_t page_size;
	bool deleted, page0_written;
	bool from_new;          /* mariadb-backup's NAME.new, renamed to NAME.ibd at the end */
	unsigned drops;         /* times the log dropped this space (FILE_DELETE, TRIM_PAGES) */
	uint64_t trim_lsn;
	uint32_t trim_pages;
	char *logged_name;      /* from FILE_CREATE/MODIFY/RENAME */
	char *aside_of;         /* its file was moved aside from this path (set_aside) */
};

struct ctx {
	const struct ppl_replay_opts *o;
	struct ppl_replay_result *res;
	size_t page_size;       /* the server's: from ibdata1 */
	struct ppl_node *node;

	struct space *spaces;
	size_t spaces_n, spaces_cap;

	bool streaming;         /* rebuild while reading the log; no index kept */
	int failed;

	uint64_t next_progress_ms; /* now() in ms when the next progress line is due */
	uint64_t progress_ms;      /* the interval */
	uint64_t pages_to_do, pages_done; /* the indexed apply's, for progress */
};

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static pthread_mutex_t fail_lock = PTHREAD_MUTEX_INITIALIZER;

/* The first failure is the one reported; apply workers may race here. */
static int fail(struct ctx *c, const char *fmt, ...)
{
	pthread_mutex_lock(&fail_lock);
	if (!c->failed) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(c->res->error, sizeof c->res->error, fmt, ap);
		va_end(ap);
	}
	__atomic_store_n(&c->failed, 1, __ATOMIC_RELAXED);
	pthread_mutex_unlock(&fail_lock);
	return -1;
}

static void note(struct ctx *c, const char *fmt, ...)
{
	if (!c->o->verbose)
		return;
	va_list ap;
	va_start(ap, fmt);
	vfprintf(c->o->verbose, fmt, ap);
	va_end(ap);
	fputc('\n', c->o->verbose);
}

/* Whether a progress line is due (at most one an interval, none without
 * o->progress); the caller then prints it. Apply workers race here: the
 * first to move next_progress prints. */
static bool progress_due(struct ctx *c)
{
	if (!c->o->progress)
		return false;
	uint64_t t = (uint64_t)(now() * 1e3), due = __atomic_load_n(&c->next_progress_ms, __ATOMIC_RELAXED);
	return t >= due && __atomic_compare_exchange_n(&c->next_progress_ms, &due, t + c->progress_ms, false, __ATOMIC_RELAXED,
						       __ATOMIC_RELAXED);
}

static void progress_read(struct ctx *c, uint64_t lsn, uint64_t from, uint64_t to)
{
	if (!progress_due(c))
		return;
	if (to > from)
		fprintf(c->o->progress, "replay: log read to LSN %llu (%.0f%% of %llu..%llu)\n", (unsigned long long)lsn,
			100.0 * (double)(lsn - from) / (double)(to - from), (unsigned long long)from,
			(unsigned long long)to);
	else
		fprintf(c->o->progress, "replay: log read to LSN %llu\n", (unsigned long long)lsn);
	fflush(c->o->progress);
}

static void *grow(void *p, size_t *cap, size_t need, size_t elem)
{
	if (need <= *cap)
		return p;
	size_t n = *cap ? *cap : 1024;
	while (n < need)
		n *= 2;
	void *q = realloc(p, n * elem);
	if (q)
		*cap = n;
	return q;
}

/* ---- spaces ------------------------------------------------------------ */

static struct space *space_find(struct ctx *c, uint32_t id)
{
	for (size_t i = 0; i < c->spaces_n; i++)
		if (c->spaces[i].id == id)
			return &c->spaces[i];
	return NULL;
}

static struct space *space_add(struct ctx *c, uint32_t id)
{
	struct space *s = space_find(c, id);
	if (s)
		return s;
	struct space *n = grow(c->spaces, &c->spaces_cap, c->spaces_n + 1, sizeof *n);
	if (!n)
		return NULL;
	c->spaces = n;
	s = &c->spaces[c->spaces_n++];
	memset(s, 0, sizeof *s);
	s->id = id;
	s->fd = -1;
	return s;
}

static bool is_page_file(const char *name)
{
	size_t n = strlen(name);
	if (ppl_innodb_file_redo_covered(ppl_innodb_file_of(name)))
		return true;
	/* mariadb-backup copies tables created during the backup as NAME.new */
	return n > 4 && !strcmp(name + n - 4, ".new");
}

/* Reads page 0 of a file: its space id and page size. */
static int probe_file(struct ctx *c, const char *path)
{
	int fd = open(path, O_RDONLY);
	if (fd < 0)
		return 0;
	uint8_t hdr[PPL_PAGE0_HEAD];
	ssize_t n = pread(fd, hdr, sizeof hdr, 0);
	close(fd);
	if (n != (ssize_t)sizeof hdr) {
		note(c, "skipping %s: shorter than a page header", path);
		return 0;
	}
	uint32_t id = ppl_rd4(hdr + PPL_FIL_PAGE_SPACE_ID);
	uint32_t flags = ppl_rd4(hdr + PPL_FSP_HEADER_OFFSET + PPL_FSP_SPACE_FLAGS);
	size_t ps = ppl_fsp_flags_page_size(flags);
	if (!ps) {
		note(c, "skipping %s: space %u is not a full_crc32 tablespace (flags 0x%x)", path, id, flags);
		return 0;
	}
	struct space *s = space_find(c, id);
	if (s && s->path) {
		/* A NAME.new beside NAME.ibd: the backup's copy wins, as prepare renames it. */
		size_t l = strlen(path);
		if (!(l > 4 && !strcmp(path + l - 4, ".new")))
			return 0;
		free(s->path);
		s->path = NULL;
	}
	s = space_add(c, id);
	if (!s || !(s->path = strdup(path)))
		return fail(c, "out of memory");
	s->page_size = ps;
	if (id == 0)
		c->page_size = ps;
	note(c, "space %u: %s (page size %zu)", id, path, ps);
	return 0;
}

static int scan_dir(struct ctx *c, const char *dir, int depth)
{
	DIR *d = opendir(dir);
	if (!d)
		return fail(c, "cannot open directory %s: %s", dir, strerror(errno));
	struct dirent *e;
	while ((e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		char path[4096];
		snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
		struct stat st;
		if (lstat(path, &st))
			continue;
		if (S_ISDIR(st.st_mode) && depth == 0)
			scan_dir(c, path, 1);
		else if (S_ISREG(st.st_mode) && is_page_file(e->d_name))
			probe_file(c, path);
		if (c->failed)
			break;
	}
	closedir(d);
	return c->failed ? -1 : 0;
}

static void set_name(struct ctx *c, struct space *s, const uint8_t *name, size_t len)
{
	char *n = malloc(len + 1);
	if (!n) {
		fail(c, "out of memory");
		return;
	}
	memcpy(n, name, len);
	n[len] = 0;
	free(s->logged_name);
	s->logged_name = n;
}

/* File records from the log, in LSN order. */
static void on_file(void *arg, const struct ppl_node_file_event *e)
{
	struct ctx *c = arg;
	struct space *s = space_add(c, e->space_id);
	if (!s) {
		fail(c, "out of memory");
		return;
	}
	switch (e->type) {
	case PPL_FILE_DELETE:
		s->deleted = true;
		break;
	case PPL_FILE_RENAME:
		set_name(c, s, (const uint8_t *)e->name2, strlen(e->name2));
		break;
	case PPL_FILE_CREATE:
	case PPL_FILE_MODIFY:
		set_name(c, s, (const uint8_t *)e->name, strlen(e->name));
		break;
	case PPL_EXT_TRIM_PAGES:
		s->trim_lsn = e->lsn;
		s->trim_pages = e->pages;
		break;
	}
}

static void log_note(void *arg, enum ppl_log_level level, const char *func, int line, const char *msg)
{
	(void)level;
	(void)func;
	(void)line;
	note(arg, "%s", msg);
}

/* ---- phase 1: parse ---------------------------------------------------- */

static int parse_log(struct ctx *c)
{
	const char *path = c->o->logfile;
	char buf[4096];
	if (!path) {
		snprintf(buf, sizeof buf, "%s/ib_logfile0", c->o->datadir);
		path = buf;
	}
	int fd = open(path, O_RDONLY);
	if (fd < 0)
		return fail(c, "cannot open redo log %s: %s", path, strerror(errno));
	struct stat st;
	fstat(fd, &st);
	struct ppl_node *n = c->node;
	size_t chunk = 8 << 20;
	uint8_t *b = malloc(chunk);
	int ret = -1;
	uint64_t area = ppl_dialect_mariadb_10_8.area_start;
	if (!b) {
		fail(c, "out of memory");
		goto out;
	}
	if (ppl_node_log_open(n, (uint64_t)st.st_size)) {
		fail(c, "%s is too small to be a redo log (%lld bytes)", path, (long long)st.st_size);
		goto out;
	}
	if (pread(fd, b, area, 0) != (ssize_t)area) {
		fail(c, "%s: cannot read the header and checkpoint blocks", path);
		goto out;
	}
	ppl_node_log_write(n, 0, b, area);
	const struct ppl_redo_reader *r = ppl_node_reader(n);
	const struct ppl_log_header *h = ppl_redo_header(r);
	if (!h) {
		fail(c, "%s: %s", path, ppl_redo_error(r));
		goto out;
	}
	const struct ppl_checkpoint *ck = ppl_redo_checkpoint(r);
	uint64_t start = c->o->start_lsn;
	if (!start) {
		if (!ck) {
			fail(c, "%s: no valid checkpoint block; give a start LSN explicitly", path);
			goto out;
		}
		start = ck->lsn;
	}
	note(c, "log %s: created by \"%s\", first LSN %llu, checkpoint %llu, starting at %llu", path, h->creator,
	     (unsigned long long)h->first_lsn, ck ? (unsigned long long)ck->lsn : 0ull, (unsigned long long)start);
	if (ppl_node_log_start(n, start)) {
		fail(c, "start LSN %llu is before the log's first LSN %llu", (unsigned long long)start,
		     (unsigned long long)h->first_lsn);
		goto out;
	}
	c->res->start_lsn = start;
	uint64_t cap = (uint64_t)st.st_size - area, done = 0;
	uint64_t off = ppl_redo_offset_of(r, start);
	/* Read the circular area once around from the start point, stopping
	 * as soon as the reader stalls at the end of the log. */
	while (done < cap) {
		size_t len = chunk;
		if (len > cap - done)
			len = (size_t)(cap - done);
		if (len > (uint64_t)st.st_size - off)
			len = (size_t)((uint64_t)st.st_size - off);
		ssize_t got = pread(fd, b, len, (off_t)off);
		if (got <= 0) {
			fail(c, "%s: read error at offset %llu: %s", path, (unsigned long long)off,
			     got < 0 ? strerror(errno) : "unexpected end of file");
			goto out;
		}
		if (ppl_node_log_write(n, off, b, (size_t)got)) {
			fail(c, "%s", ppl_node_error(n));
			goto out;
		}
		if (c->failed)
			goto out;
		done += (uint64_t)got;
		off += (uint64_t)got;
		if (off == (uint64_t)st.st_size)
			off = area;
		progress_read(c, ppl_node_parsed_lsn(n), start, 0);
		if (ppl_redo_stall(r) != PPL_FRAME_MORE)
			break;
	}
	if (ppl_node_log_finish(n)) {
		fail(c, "%s", ppl_node_error(n));
		goto out;
	}
	c->res->end_lsn = ppl_node_parsed_lsn(n);
	c->res->log_bytes = c->res->end_lsn - c->res->start_lsn;
	ret = 0;
out:
	free(b);
	close(fd);
	return ret;
}

static int feed_archived(void *arg, const struct ppl_mtr *m, uint64_t wall_ns)
{
	struct ctx *c = arg;
	(void)wall_ns;
	if (ppl_node_feed_mtr(c->node, m) != 0)
		return fail(c, "%s", ppl_node_error(c->node));
	progress_read(c, m->end_lsn, c->o->start_lsn, c->o->stop_lsn);
	return c->failed ? -1 : 0;
}

/* The records from the log archive instead of a log file. */
static int parse_archive(struct ctx *c)
{
	const struct ppl_replay_opts *o = c->o;
	if (o->start_lsn == 0 || o->stop_lsn < o->start_lsn)
		return fail(c, "replaying from the archive %s needs a start LSN (the base's) and a stop LSN at or "
			    "after it", o->archive_dir);
	c->res->start_lsn = c->res->end_lsn = o->start_lsn;
	if (o->stop_lsn == o->start_lsn)
		return 0; /* the base is the database at that LSN */
	char err[4400];
	note(c, "archive %s: mini-transactions ending after LSN %llu up to LSN %llu", o->archive_dir,
	     (unsigned long long)o->start_lsn, (unsigned long long)o->stop_lsn);
	if (ppl_archive_read(o->archive_dir, o->start_lsn, o->stop_lsn, feed_archived, c, err, sizeof err) != 0)
		return c->failed ? -1 : fail(c, "%s", err);
	c->res->start_lsn = o->start_lsn;
	c->res->end_lsn = o->stop_lsn;
	c->res->log_bytes = o->stop_lsn - o->start_lsn;
	return 0;
}

/* A new log whose checkpoint is the end of what was applied. */
static int write_fresh_log(struct ctx *c)
{
	const struct ppl_replay_opts *o = c->o;
	char path[4096];
	snprintf(path, sizeof path, "%s/ib_logfile0", o->datadir);
	if (o->new_log_size < (1u << 20))
		return fail(c, "a new log of %llu bytes is too small (at least 1 MiB)",
			    (unsigned long long)o->new_log_size);
	uint8_t buf[16384];
	size_t n = ppl_mariadb_fresh_log(buf, sizeof buf, c->res->end_lsn, "ppl-replay");
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0660);
	if (fd < 0)
		return fail(c, "cannot create %s: %s", path, strerror(errno));
	int rc = n && pwrite(fd, buf, n, 0) == (ssize_t)n && ftruncate(fd, (off_t)o->new_log_size) == 0 &&
		 fsync(fd) == 0 ? 0 : -1;
	int e = errno;
	close(fd);
	if (rc)
		return fail(c, "cannot write %s: %s", path, strerror(e));
	note(c, "new log %s: %llu bytes, checkpoint at LSN %llu", path, (unsigned long long)o->new_log_size,
	     (unsigned long long)c->res->end_lsn);
	return 0;
}

/* ---- phase 2: apply ---------------------------------------------------- */

/* The log creates a file whose name is taken: the copy the backup made
 * of this very space before its page 0 was written (page 0 blank or of
 * this space), or the file of a space the log has dropped by now (a table
 * dropped and created again under its name). Either is this space's file
 * from here on; a dropped space's file starts empty, as recovery creates
 * it. Anything else is a conflict the caller reports. */
/* Whose file fd is, by its page 0: false when page 0 is not written yet
 * (or short), else true with the space id it names in *owner. */
static bool page0_owner(int fd, uint32_t *owner)
{
	uint8_t hdr[PPL_PAGE0_HEAD];
	ssize_t got = pread(fd, hdr, sizeof(hdr), 0);
	*owner = got == (ssize_t)sizeof(hdr) ? ppl_rd4(hdr + PPL_FSP_HEADER_OFFSET + PPL_FSP_SPACE_ID) : 0;
	return got == (ssize_t)sizeof(hdr) && !ppl_page0_unwritten(hdr);
}

static int reuse_existing(struct ctx *c, struct space *s)
{
	int fd = open(s->path, O_RDWR);
	if (fd < 0)
		return -1;
	uint32_t owner;
	bool blank = !page0_owner(fd, &owner);
	struct space *other = blank || owner == s->id ? NULL : space_find(c, owner);
	if (!blank && owner != s->id && !(other && other->deleted)) {
		close(fd);
		errno = EEXIST;
		return -1;
	}
	if (other && ftruncate(fd, 0) != 0) {
		close(fd);
		return -1;
	}
	s->fd = fd;
	s->page_size = c->page_size;
	note(c, "space %u: %s exists (%s); used as this space's file", s->id, s->path,
	     blank ? "page 0 not written yet" : other ? "its space was dropped by the log" : "already this space");
	return 0;
}

/* The log creates a file whose name a later incarnation of the table
 * holds: the backup copied NAME.ibd while it was space `owner`, which the
 * log creates after this space (and drops, or not, later still). A
 * streaming replay cannot know yet whether the log drops it; recovery
 * would sort it out from the whole log. That file is moved aside under a
 * name of its own and keeps serving its space; at the end it goes back
 * to its name unless the log dropped it (apply_pages). 0 when moved. */
static int set_aside(struct ctx *c, struct space *s)
{
	int fd = open(s->path, O_RDONLY);
	if (fd < 0)
		return -1;
	uint32_t owner;
	bool written = page0_owner(fd, &owner);
	close(fd);
	struct space *other = written && owner > s->id ? space_find(c, owner) : NULL;
	if (other == NULL || other->deleted || other->path == NULL || strcmp(other->path, s->path) != 0) {
		errno = EEXIST;
		return -1;
	}
	char aside[4200];
	snprintf(aside, sizeof aside, "%s.ppl-space%u", s->path, owner);
	char *moved = strdup(aside), *was = strdup(s->path);
	if (moved == NULL || was == NULL || rename(s->path, aside) != 0) {
		free(moved);
		free(was);
		return -1;
	}
	free(other->path);
	other->path = moved;
	other->aside_of = was;
	note(c, "space %u: %s holds the later space %u (copied by the backup): moved aside to %s until the end",
	     s->id, was, owner, moved);
	return 0;
}

static int space_open(struct ctx *c, struct space *s)
{
	if (s->fd >= 0)
		return 0;
	if (!s->path) {
		/* Created after the checkpoint and not copied: build it from
		 * the log, as recovery does for a deferred tablespace. */
		if (!s->logged_name)
			return fail(c, "records for space %u, but no data file and no FILE_CREATE/MODIFY names it",
				    s->id);
		const char *n = s->logged_name;
		if (!strncmp(n, "./", 2))
			n += 2;
		char p[4096];
		snprintf(p, sizeof p, "%s/%s", c->o->datadir, n);
		size_t pl = strlen(p);
		if (access(p, F_OK) && pl > 4 && !strcmp(p + pl - 4, ".ibd")) {
			/* mariadb-backup copies a table created after the
			 * checkpoint as an empty NAME.new: its pages all come
			 * from the log. */
			memcpy(p + pl - 4, ".new", 4);
			if (!access(p, F_OK)) {
				s->path = strdup(p);
				s->from_new = true;
				s->page_size = c->page_size;
				note(c, "space %u: %s (named by the log; pages from the log)", s->id, p);
				if (!s->path)
					return fail(c, "out of memory");
				s->fd = open(s->path, c->o->dry_run ? O_RDONLY : O_RDWR);
				if (s->fd < 0)
					return fail(c, "cannot open %s: %s", s->path, strerror(errno));
				return 0;
			}
			memcpy(p + pl - 4, ".ibd", 4);
		}
		s->path = strdup(p);
		if (!s->path)
			return fail(c, "out of memory");
		if (!c->o->dry_run) {
			s->fd = open(s->path, O_RDWR | O_CREAT | O_EXCL, 0660);
			if (s->fd < 0 && errno == EEXIST && reuse_existing(c, s) == 0)
				return 0;
			if (s->fd < 0 && errno == EEXIST && set_aside(c, s) == 0)
				s->fd = open(s->path, O_RDWR | O_CREAT | O_EXCL, 0660);
			if (s->fd < 0)
				return fail(c, "cannot create %s for space %u: %s", s->path, s->id, strerror(errno));
		}
		c->res->files_created++;
		note(c, "space %u: creating %s from the log", s->id, s->path);
		s->page_size = c->page_size;
		return 0;
	}
	s->fd = open(s->path, c->o->dry_run ? O_RDONLY : O_RDWR);
	if (s->fd < 0)
		return fail(c, "cannot open %s: %s", s->path, strerror(errno));
	return 0;
}

static int read_base(void *arg, uint32_t space_id, uint32_t page_no, uint8_t *frame)
{
	struct space *s = arg;
	(void)space_id;
	ssize_t got = s->fd >= 0 ? pread(s->fd, frame, s->page_size, (off_t)page_no * (off_t)s->page_size) : 0;
	if (got < 0)
		return -1;
	memset(frame + got, 0, s->page_size - (size_t)got);
	return 0;
}

/* The elision question for the reference copy of this page, asked while
 * the data file still holds the base. */
static void ask_elision(struct ctx *c, struct space *s, uint32_t space_id, uint32_t page_no)
{
	char ref[4096];
	const char *rel = s->path + strlen(c->o->datadir);
	size_t rl = strlen(rel);
	/* prepare renames NAME.new to NAME.ibd */
	if (rl > 4 && !strcmp(rel + rl - 4, ".new"))
		snprintf(ref, sizeof ref, "%s%.*s.ibd", c->o->elide_against, (int)(rl - 4), rel);
	else
		snprintf(ref, sizeof ref, "%s%s", c->o->elide_against, rel);
	int fd = open(ref, O_RDONLY);
	if (fd < 0)
		return;
	uint8_t *page = aligned_alloc(4096, s->page_size);
	if (page && pread(fd, page, s->page_size, (off_t)page_no * (off_t)s->page_size) == (ssize_t)s->page_size &&
	    ppl_page_lsn(page)) {
		__atomic_add_fetch(&c->res->elide_asked, 1, __ATOMIC_RELAXED);
		unsigned v = ppl_node_elide(c->node, space_id, page_no, ppl_page_lsn(page),
					    ppl_page_stored_crc(page, s->page_size), read_base, s);
		if (v == 0)
			__atomic_add_fetch(&c->res->elide_acked, 1, __ATOMIC_RELAXED);
		else {
			__atomic_add_fetch(&c->res->elide_nacked, 1, __ATOMIC_RELAXED);
			note(c, "elision of page %u:%u at LSN %llu refused: reason %u", space_id, page_no,
			     (unsigned long long)ppl_page_lsn(page), v);
		}
	}
	free(page);
	close(fd);
}

static void finish_page(struct ctx *c, struct space *s, uint32_t page_no, const uint8_t *frame, bool changed);

/* Reads a page's base from its data file (zeros past the end). */
static int read_page(struct ctx *c, struct space *s, uint32_t page_no, uint8_t *frame)
{
	size_t ps = s->page_size;
	if (s->fd < 0) {
		memset(frame, 0, ps);
		return 0;
	}
	ssize_t got = pread(s->fd, frame, ps, (off_t)page_no * (off_t)ps);
	if (got < 0)
		return fail(c, "%s: read error at page %u: %s", s->path, page_no, strerror(errno));
	if ((size_t)got < ps)
		memset(frame + got, 0, ps - (size_t)got);
	return 0;
}

/* A page to rebuild in the apply phase. */
struct job {
	uint32_t space, page_no;
	struct ppl_node_page_info info;
};

struct jobs {
	struct job *v;
	size_t n, cap;
};

static void collect_page(void *arg, uint32_t space_id, uint32_t page_no, const struct ppl_node_page_info *info)
{
	struct jobs *j = arg;
	if (j->n == j->cap) {
		size_t cap = j->cap ? j->cap * 2 : 4096;
		struct job *v = realloc(j->v, cap * sizeof *v);
		if (!v)
			return; /* counted as missing below */
		j->v = v;
		j->cap = cap;
	}
	j->v[j->n++] = (struct job){space_id, page_no, *info};
}

/* Rebuilds one page (its space is already open) into `frame` and writes it. */
static void apply_page(struct ctx *c, uint8_t *frame, uint32_t space_id, uint32_t page_no,
		       const struct ppl_node_page_info *info)
{
	if (c->failed)
		return;
	__atomic_add_fetch(&c->res->pages_touched, 1, __ATOMIC_RELAXED);
	struct space *s = space_find(c, space_id);
	if (s && s->deleted)
		return; /* FILE_DELETE: the file is gone, and so is its log */
	if (!s) {
		fail(c, "records for space %u (page %u), but no data file and no file record for it", space_id,
		     page_no);
		return;
	}
	if (info->from_init)
		memset(frame, 0, s->page_size);
	else if (read_page(c, s, page_no, frame))
		return;
	if (c->o->trace && c->o->verbose && space_id == c->o->trace_space && page_no == c->o->trace_page)
		fprintf(c->o->verbose, "page %u:%u in %s: %u mtrs pending (LSN %llu..%llu), %s, page LSN %llu\n",
			space_id, page_no, s->path, info->chunks, (unsigned long long)info->first_lsn,
			(unsigned long long)info->last_lsn, info->from_init ? "initialized by the log" : "read from file",
			(unsigned long long)ppl_page_lsn(frame));
	if (c->o->elide_against && !info->freed)
		ask_elision(c, s, space_id, page_no);
	bool changed;
	struct ppl_apply_error e;
	enum ppl_apply_status st = ppl_node_rebuild(c->node, space_id, page_no, frame, UINT64_MAX, &changed, &e);
	if (st != PPL_APPLY_OK) {
		fail(c, "space %u page %u (%s, %s): %s record %s at byte %u of an mtr: %s", space_id, page_no, s->path,
		     ppl_page_type_name(ppl_page_type(frame)), ppl_apply_status_name(st),
		     ppl_rec_type_name(e.rec_type, e.ext_subtype), e.rec_offset, e.msg);
		return;
	}
	finish_page(c, s, page_no, frame, changed);
}

/* Writes a rebuilt page back, extending the file as recovery does. */
static void finish_page(struct ctx *c, struct space *s, uint32_t page_no, const uint8_t *frame, bool changed)
{
	size_t ps = s->page_size;
	if (!changed) {
		__atomic_add_fetch(&c->res->pages_skipped_freed, 1, __ATOMIC_RELAXED);
		return;
	}
	__atomic_add_fetch(&c->res->pages_written, 1, __ATOMIC_RELAXED);
	if (!c->o->dry_run && pwrite(s->fd, frame, ps, (off_t)page_no * (off_t)ps) != (ssize_t)ps) {
		fail(c, "%s: write error at page %u: %s", s->path, page_no, strerror(errno));
		return;
	}
	if (page_no == 0 && !c->o->dry_run) {
		/* Recovery extends a file to the size its header logs. */
		uint64_t want = (uint64_t)ppl_rd4(frame + PPL_FSP_HEADER_OFFSET + PPL_FSP_SIZE) * ps;
		struct stat st2;
		if (!fstat(s->fd, &st2) && (uint64_t)st2.st_size < want) {
			if (ftruncate(s->fd, (off_t)want)) {
				fail(c, "%s: cannot extend to %llu bytes: %s", s->path, (unsigned long long)want,
				     strerror(errno));
				return;
			}
			__atomic_add_fetch(&c->res->files_extended, 1, __ATOMIC_RELAXED);
		}
	}
}

struct worker {
	struct ctx *c;
	struct jobs *jobs;
	unsigned id, count;
};

static void *apply_worker(void *arg)
{
	struct worker *w = arg;
	uint8_t *frame = aligned_alloc(4096, 65536);
	if (!frame) {
		fail(w->c, "out of memory");
		return NULL;
	}
	for (size_t i = w->id; i < w->jobs->n && !__atomic_load_n(&w->c->failed, __ATOMIC_RELAXED); i += w->count) {
		const struct job *j = &w->jobs->v[i];
		apply_page(w->c, frame, j->space, j->page_no, &j->info);
		uint64_t done = __atomic_add_fetch(&w->c->pages_done, 1, __ATOMIC_RELAXED);
		if (progress_due(w->c)) {
			fprintf(w->c->o->progress, "replay: %llu of %llu pages rebuilt\n", (unsigned long long)done,
				(unsigned long long)w->c->pages_to_do);
			fflush(w->c->o->progress);
		}
	}
	free(frame);
	return NULL;
}

/* Every indexed page, in file order, split across worker threads: pages
 * are independent once the log is indexed. Files are opened (or created)
 * first, by this thread. */
static int apply_indexed(struct ctx *c)
{
	struct jobs jobs = {0};
	ppl_node_for_each_page(c->node, collect_page, &jobs);
	c->pages_to_do = jobs.n;
	for (size_t i = 0; i < jobs.n && !c->failed; i++) {
		struct space *s = space_find(c, jobs.v[i].space);
		if (s && !s->deleted && (i == 0 || jobs.v[i - 1].space != jobs.v[i].space))
			space_open(c, s);
	}
	unsigned count = c->o->threads ? c->o->threads : 2;
	if (count > 16)
		count = 16;
	pthread_t tid[16];
	struct worker w[16];
	unsigned started = 0;
	for (unsigned t = 0; t < count && !c->failed; t++) {
		w[t] = (struct worker){c, &jobs, t, count};
		if (pthread_create(&tid[t], NULL, apply_worker, &w[t]))
			break;
		started++;
	}
	if (!started && !c->failed)
		fail(c, "cannot start apply threads");
	else if (started < count)
		for (unsigned t = started; t < count; t++) /* do the missing share here */
			apply_worker(&(struct worker){c, &jobs, t, count});
	for (unsigned t = 0; t < started; t++)
		pthread_join(tid[t], NULL);
	free(jobs.v);
	return c->failed ? -1 : 0;
}

/* ---- streaming: each page is rebuilt in memory as its records arrive -- */

/* A page being rebuilt while the log is read. */
struct spage {
	struct ppl_page_replay rp;
	unsigned epoch;         /* its space's drop count when it started */
	bool no_base;           /* no data file held it when it was first touched */
	/* A record did not apply. Not yet an error: the log may still drop
	 * the space (recovery discards the records of a deleted file), or
	 * reinitialize the page; judged at the end. */
	char *error;
	uint8_t frame[];
};

static int stream_chunk(void *arg, uint32_t space_id, uint32_t page_no, void **user, bool from_init,
			uint64_t start, uint64_t end, const uint8_t *recs, size_t len)
{
	struct ctx *c = arg;
	struct space *s = space_find(c, space_id);
	if (!s && !(s = space_add(c, space_id)))
		return fail(c, "out of memory");
	if (!s->page_size)
		s->page_size = c->page_size;
	struct spage *p = *user;
	if (!p) {
		p = aligned_alloc(64, (sizeof *p + s->page_size + 63) & ~(size_t)63);
		if (!p)
			return fail(c, "out of memory");
		*user = p;
		p->error = NULL;
		from_init = true; /* decided below: read a base or not */
		p->epoch = s->drops + 1; /* force a start */
	}
	struct ppl_page_ref ref = {p->frame, s->page_size, space_id, page_no};
	if (from_init || p->epoch != s->drops) {
		/* The first chunk, a page (re)initialized or freed by the log, or
		 * a space the log dropped and recreated: start over. Only the
		 * first touch of a page that the log does not initialize reads
		 * its data file. */
		bool first = p->epoch == s->drops + 1;
		p->epoch = s->drops;
		p->no_base = false;
		free(p->error);
		p->error = NULL;
		uint64_t init_lsn = 0;
		unsigned t = recs[0] & 0x70;
		if ((t == 0x00 || t == 0x10) && !(recs[0] & 0x80)) {
			init_lsn = start; /* INIT_PAGE or FREE_PAGE first: not read */
			memset(p->frame, 0, s->page_size);
		} else if (!first) {
			init_lsn = start; /* a dropped space: its old pages are void */
			memset(p->frame, 0, s->page_size);
		} else if (!s->deleted && (s->path || s->logged_name)) {
			if (space_open(c, s) || read_page(c, s, page_no, p->frame))
				return -1;
		} else {
			p->no_base = true;
			memset(p->frame, 0, s->page_size);
		}
		ppl_replay_begin(&p->rp, &ref, init_lsn);
	}
	if (p->error)
		return 0; /* already failed: wait for a reinitialization or a drop */
	struct ppl_apply_error e;
	enum ppl_apply_status st = ppl_replay_mtr(&p->rp, start, end, recs, len, &e);
	if (st != PPL_APPLY_OK) {
		char msg[512];
		snprintf(msg, sizeof msg, "space %u page %u (%s, %s) mtr at LSN %llu: %s record %s at byte %u: %s",
			 space_id, page_no, s->path ? s->path : "no file", ppl_page_type_name(ppl_page_type(p->frame)),
			 (unsigned long long)start, ppl_apply_status_name(st),
			 ppl_rec_type_name(e.rec_type, e.ext_subtype), e.rec_offset, e.msg);
		if (!(p->error = strdup(msg)))
			return fail(c, "out of memory");
	}
	return 0;
}

static void stream_drop_space(void *arg, uint32_t space_id)
{
	struct ctx *c = arg;
	struct space *s = space_find(c, space_id);
	if (!s)
		s = space_add(c, space_id);
	if (s)
		s->drops++;
}

static void stream_finish(void *arg, uint32_t space_id, uint32_t page_no, void *user)
{
	struct ctx *c = arg;
	struct spage *p = user;
	struct space *s = space_find(c, space_id);
	if (c->failed || !s) {
		free(p->error);
		free(p);
		return;
	}
	if (s->deleted || p->epoch != s->drops) {
		/* deleted file; or a space dropped after this page's last record */
		free(p->error);
		free(p);
		return;
	}
	if (p->error) {
		fail(c, "%s", p->error);
		free(p->error);
		free(p);
		return;
	}
	bool changed = ppl_replay_finish(&p->rp);
	__atomic_add_fetch(&c->res->pages_touched, 1, __ATOMIC_RELAXED);
	c->res->mtrs_skipped_lsn += p->rp.skipped;
	if (p->no_base && changed) {
		fail(c, "records for space %u page %u, but no data file held it and the log does not "
			"initialize it", space_id, page_no);
	} else if (!space_open(c, s)) {
		finish_page(c, s, page_no, p->frame, changed);
	}
	free(p);
}

/* Whether a live space uses the same file: a table dropped and created
 * again under its name resolves to the same path, and the drop must not
 * delete the new table's file. */
static bool path_in_use(struct ctx *c, const struct space *dead)
{
	for (size_t i = 0; i < c->spaces_n; i++) {
		const struct space *s = &c->spaces[i];
		if (s != dead && !s->deleted && s->path && !strcmp(s->path, dead->path))
			return true;
	}
	return false;
}

static int apply_pages(struct ctx *c)
{
	if (c->streaming) {
		ppl_node_for_each_user(c->node, stream_finish, c);
	} else if (apply_indexed(c)) {
		return -1;
	}
	if (c->failed)
		return -1;
	for (size_t i = 0; i < c->spaces_n; i++) {
		struct space *s = &c->spaces[i];
		if (s->trim_lsn && s->fd >= 0 && !c->o->dry_run &&
		    ftruncate(s->fd, (off_t)s->trim_pages * (off_t)s->page_size))
			return fail(c, "%s: cannot truncate: %s", s->path, strerror(errno));
		if (s->from_new && !s->deleted && !c->o->dry_run) {
			char to[4096];
			size_t l = strlen(s->path);
			snprintf(to, sizeof to, "%.*s.ibd", (int)(l - 4), s->path);
			if (rename(s->path, to))
				return fail(c, "cannot rename %s to %s: %s", s->path, to, strerror(errno));
		}
		if (s->deleted && s->path && !c->o->dry_run && !path_in_use(c, s)) {
			if (unlink(s->path) == 0) {
				c->res->files_deleted++;
				note(c, "space %u: deleted %s (FILE_DELETE)", s->id, s->path);
			}
		}
	}
	/* files set aside and not dropped by the log go back to their names,
	 * now that the spaces that held those names meanwhile are settled */
	for (size_t i = 0; i < c->spaces_n; i++) {
		struct space *s = &c->spaces[i];
		if (!s->aside_of || s->deleted || c->o->dry_run)
			continue;
		if (access(s->aside_of, F_OK) == 0)
			return fail(c, "%s is held at the end by two spaces, %u (set aside as %s) and another the log "
				    "created under that name", s->aside_of, s->id, s->path);
		if (rename(s->path, s->aside_of) != 0)
			return fail(c, "cannot rename %s back to %s: %s", s->path, s->aside_of, strerror(errno));
		note(c, "space %u: %s back to %s", s->id, s->path, s->aside_of);
	}
	return 0;
}

int ppl_replay_datadir(const struct ppl_replay_opts *o, struct ppl_replay_result *res)
{
	struct ctx c = {.o = o, .res = res};
	memset(res, 0, sizeof *res);
	double t0 = now();
	c.progress_ms = o->progress_every > 0 ? (uint64_t)(o->progress_every * 1e3) : 0;
	c.next_progress_ms = (uint64_t)(t0 * 1e3) + c.progress_ms; /* a short replay prints none */
	int ret = -1;
	if (scan_dir(&c, o->datadir, 0))
		goto out;
	if (!c.page_size) {
		fail(&c, "%s has no readable system tablespace (ibdata1): not an InnoDB datadir?", o->datadir);
		goto out;
	}
	if (o->stream && o->elide_against) {
		fail(&c, "--elide-against needs the records kept: it cannot be combined with streaming");
		goto out;
	}
	c.streaming = o->stream;
	struct ppl_node_config nc = {.page_size = c.page_size, .log_is_file_image = true,
				     .log = {.log = log_note, .arg = &c}};
	if (c.streaming) {
		nc.chunk_sink = stream_chunk;
		nc.on_drop_space = stream_drop_space;
		nc.sink_arg = &c;
	}
	c.node = ppl_node_new(&nc);
	if (!c.node) {
		fail(&c, "out of memory");
		goto out;
	}
	ppl_node_on_file_event(c.node, on_file, &c);
	if (o->archive_dir ? parse_archive(&c) : parse_log(&c))
		goto out;
	double t1 = now();
	res->parse_s = t1 - t0;
	if (apply_pages(&c))
		goto out;
	for (size_t i = 0; i < c.spaces_n; i++)
		if (c.spaces[i].fd >= 0 && !o->dry_run && fsync(c.spaces[i].fd)) {
			fail(&c, "%s: fsync failed: %s", c.spaces[i].path, strerror(errno));
			goto out;
		}
	res->apply_s = now() - t1;
	if (o->new_log_size && !o->dry_run && write_fresh_log(&c))
		goto out;
	ret = 0;
out:
	res->total_s = now() - t0;
	res->spaces = c.spaces_n;
	if (c.node) {
		struct ppl_node_stats st;
		ppl_node_get_stats(c.node, &st);
		res->mtrs = st.mtrs;
		res->records = st.records;
		memcpy(res->rec_by_type, st.rec_by_type, sizeof st.rec_by_type);
		memcpy(res->rec_by_ext, st.rec_by_ext, sizeof st.rec_by_ext);
		memcpy(res->file_recs, st.file_recs, sizeof st.file_recs);
		if (!c.streaming)
			res->mtrs_skipped_lsn = st.rebuild_mtrs_skipped;
		ppl_node_free(c.node);
	}
	for (size_t i = 0; i < c.spaces_n; i++) {
		if (c.spaces[i].fd >= 0)
			close(c.spaces[i].fd);
		free(c.spaces[i].path);
		free(c.spaces[i].logged_name);
		free(c.spaces[i].aside_of);
	}
	free(c.spaces);
	return ret;
}
