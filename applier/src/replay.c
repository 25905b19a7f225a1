/* Recovery without a server (the engine of ppl-replay).
 *
 * Like InnoDB's recovery it works in two phases: parse the log from the
 * checkpoint into per-page lists of mini-transaction records, then visit
 * every page once, in file order, reading it (unless the log initializes
 * it), applying its records with the LSN rules, and writing it back.
 * Records are kept in one arena; each page has a chain of chunks, one per
 * mini-transaction, holding that mtr's records for the page in the
 * server's own encoding (what log_phys_t keeps). */
#include "ppl/replay.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "ppl/mach.h"
#include "ppl/page.h"
#include "ppl/page_apply.h"

struct chunk {
	uint64_t start, end;
	size_t off;
	uint32_t len;
	uint32_t next;          /* index+1 in chunks, 0 = none */
};

struct page {
	uint64_t key;           /* space << 32 | page_no; 0 = empty slot (space 0 page 0 uses key 1<<63) */
	uint64_t init_lsn;
	uint32_t first, last;   /* chunk index+1 */
};

struct space {
	uint32_t id;
	char *path;
	int fd;
	size_t page_size;
	bool deleted, page0_written;
	bool from_new;          /* mariadb-backup's NAME.new, renamed to NAME.ibd at the end */
	uint64_t trim_lsn;
	uint32_t trim_pages;
	char *logged_name;      /* from FILE_CREATE/MODIFY/RENAME */
};

struct ctx {
	const struct ppl_replay_opts *o;
	struct ppl_replay_result *res;
	size_t page_size;       /* the server's: from ibdata1 */

	struct page *pages;
	size_t pages_cap, pages_n;

	struct chunk *chunks;
	size_t chunks_n, chunks_cap;
	uint8_t *arena;
	size_t arena_n, arena_cap;

	struct space *spaces;
	size_t spaces_n, spaces_cap;

	uint64_t cur_mtr_start;
	int failed;
};

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static int fail(struct ctx *c, const char *fmt, ...)
{
	if (!c->failed) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(c->res->error, sizeof c->res->error, fmt, ap);
		va_end(ap);
	}
	c->failed = 1;
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
	if (n > 4 && !strcmp(name + n - 4, ".ibd"))
		return true;
	if (!strncmp(name, "ibdata", 6))
		return true;
	if (!strncmp(name, "undo", 4) && name[4] >= '0' && name[4] <= '9')
		return true;
	/* mariadb-backup copies tables created during the backup as NAME.new */
	if (n > 4 && !strcmp(name + n - 4, ".new"))
		return true;
	return false;
}

/* Reads page 0 of a file: its space id and page size. */
static int probe_file(struct ctx *c, const char *path)
{
	int fd = open(path, O_RDONLY);
	if (fd < 0)
		return 0;
	uint8_t hdr[PPL_FSP_HEADER_OFFSET + PPL_FSP_SPACE_FLAGS + 4];
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

/* ---- pages ------------------------------------------------------------- */

static uint64_t page_key(uint32_t space, uint32_t page)
{
	uint64_t k = (uint64_t)space << 32 | page;
	return k ? k : 1ull << 63;
}

static uint64_t hash64(uint64_t k)
{
	k ^= k >> 33;
	k *= 0xff51afd7ed558ccdull;
	k ^= k >> 33;
	return k;
}

static int pages_rehash(struct ctx *c)
{
	size_t ncap = c->pages_cap ? c->pages_cap * 2 : 1 << 16;
	struct page *n = calloc(ncap, sizeof *n);
	if (!n)
		return -1;
	for (size_t i = 0; i < c->pages_cap; i++) {
		if (!c->pages[i].key)
			continue;
		size_t j = hash64(c->pages[i].key) & (ncap - 1);
		while (n[j].key)
			j = (j + 1) & (ncap - 1);
		n[j] = c->pages[i];
	}
	free(c->pages);
	c->pages = n;
	c->pages_cap = ncap;
	return 0;
}

static struct page *page_get(struct ctx *c, uint32_t space, uint32_t page_no)
{
	if ((c->pages_n + 1) * 2 > c->pages_cap && pages_rehash(c))
		return NULL;
	uint64_t k = page_key(space, page_no);
	size_t j = hash64(k) & (c->pages_cap - 1);
	while (c->pages[j].key && c->pages[j].key != k)
		j = (j + 1) & (c->pages_cap - 1);
	if (!c->pages[j].key) {
		c->pages[j].key = k;
		c->pages_n++;
	}
	return &c->pages[j];
}

static int arena_put(struct ctx *c, const uint8_t *p, size_t n)
{
	uint8_t *a = grow(c->arena, &c->arena_cap, c->arena_n + n, 1);
	if (!a)
		return -1;
	c->arena = a;
	memcpy(a + c->arena_n, p, n);
	c->arena_n += n;
	return 0;
}

/* Adds a record to its page's chunk for the current mtr. */
static int keep_record(struct ctx *c, const struct ppl_mtr *m, const struct ppl_rec *r)
{
	struct page *pg = page_get(c, r->space_id, r->page_no);
	if (!pg)
		return fail(c, "out of memory indexing pages");
	struct chunk *last = pg->last ? &c->chunks[pg->last - 1] : NULL;
	if (last && last->start == m->start_lsn) {
		if (last->off + last->len != c->arena_n) {
			/* Other pages' records came between: move this page's
			 * chunk to the end so it stays contiguous (grow first:
			 * the copy's source is inside the arena). */
			uint8_t *a = grow(c->arena, &c->arena_cap, c->arena_n + last->len + r->raw_len, 1);
			if (!a)
				return fail(c, "out of memory");
			c->arena = a;
			memcpy(a + c->arena_n, a + last->off, last->len);
			last->off = c->arena_n;
			c->arena_n += last->len;
		}
		if (arena_put(c, r->raw, r->raw_len))
			return fail(c, "out of memory");
		last->len += (uint32_t)r->raw_len;
		return 0;
	}
	struct chunk *n = grow(c->chunks, &c->chunks_cap, c->chunks_n + 1, sizeof *n);
	if (!n)
		return fail(c, "out of memory");
	c->chunks = n;
	struct chunk *ch = &c->chunks[c->chunks_n++];
	ch->start = m->start_lsn;
	ch->end = m->end_lsn;
	ch->off = c->arena_n;
	ch->len = (uint32_t)r->raw_len;
	ch->next = 0;
	if (arena_put(c, r->raw, r->raw_len))
		return fail(c, "out of memory");
	if (pg->last)
		c->chunks[pg->last - 1].next = (uint32_t)c->chunks_n;
	else
		pg->first = (uint32_t)c->chunks_n;
	pg->last = (uint32_t)c->chunks_n;
	return 0;
}

static void set_name(struct ctx *c, struct space *s, const uint8_t *name, size_t len)
{
	(void)c;
	char *n = malloc(len + 1);
	if (!n)
		return;
	memcpy(n, name, len);
	n[len] = 0;
	free(s->logged_name);
	s->logged_name = n;
}

static int on_mtr(void *arg, const struct ppl_mtr *m)
{
	struct ctx *c = arg;
	struct ppl_rec_iter it;
	struct ppl_rec r;
	int k;
	ppl_rec_iter_init(&it, m->recs, m->len, c->page_size);
	while ((k = ppl_rec_next(&it, &r)) > 0) {
		c->res->records++;
		switch (r.kind) {
		case PPL_RK_PAGE:
			c->res->rec_by_type[r.type >> 4]++;
			if (r.type == PPL_REC_EXTENDED && r.ext_subtype >= 0 && r.ext_subtype < PPL_EXT_COUNT)
				c->res->rec_by_ext[r.ext_subtype]++;
			if (r.type == PPL_REC_INIT_PAGE || r.type == PPL_REC_FREE_PAGE) {
				/* page_recv_t::will_not_read(): the page will not be
				 * read, and every earlier record for it, even one
				 * earlier in this mtr, is void. */
				struct page *pg = page_get(c, r.space_id, r.page_no);
				if (!pg)
					return fail(c, "out of memory");
				pg->init_lsn = m->start_lsn;
				pg->first = pg->last = 0;
			}
			if (keep_record(c, m, &r))
				return -1;
			break;
		case PPL_RK_TRIM: {
			c->res->rec_by_ext[PPL_EXT_TRIM_PAGES]++;
			struct space *s = space_add(c, r.space_id);
			if (!s)
				return fail(c, "out of memory");
			s->trim_lsn = m->start_lsn;
			s->trim_pages = r.page_no;
			break;
		}
		case PPL_RK_FILE: {
			c->res->file_recs[(r.type >> 4) - 8]++;
			struct space *s = space_add(c, r.space_id);
			if (!s)
				return fail(c, "out of memory");
			if (r.type == PPL_FILE_DELETE)
				s->deleted = true;
			else if (r.type == PPL_FILE_RENAME)
				set_name(c, s, r.name2, r.name2_len);
			else
				set_name(c, s, r.name, r.name_len);
			break;
		}
		case PPL_RK_CHECKPOINT:
			c->res->file_recs[4]++;
			break;
		case PPL_RK_IGNORED:
		case PPL_RK_PADDING:
			break;
		}
		if (c->failed)
			return -1;
	}
	if (k < 0)
		return fail(c, "mini-transaction at LSN %llu has a checksum but does not parse: %s",
			    (unsigned long long)m->start_lsn, it.err);
	c->res->mtrs++;
	c->res->end_lsn = m->end_lsn;
	return 0;
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
	struct ppl_redo_sink sink = {.arg = c, .on_mtr = on_mtr};
	struct ppl_redo_reader *r = ppl_redo_reader_new(&ppl_dialect_mariadb_10_8, (uint64_t)st.st_size,
							   PPL_REDO_FILE_IMAGE, &sink);
	if (!r) {
		close(fd);
		return fail(c, "%s is too small to be a redo log (%lld bytes)", path, (long long)st.st_size);
	}
	size_t chunk = 8 << 20;
	uint8_t *b = malloc(chunk);
	int ret = -1;
	if (!b) {
		fail(c, "out of memory");
		goto out;
	}
	uint64_t area = ppl_dialect_mariadb_10_8.area_start;
	if (pread(fd, b, area, 0) != (ssize_t)area) {
		fail(c, "%s: cannot read the header and checkpoint blocks", path);
		goto out;
	}
	ppl_redo_feed(r, 0, b, area);
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
	if (ppl_redo_start_at(r, start)) {
		fail(c, "start LSN %llu is before the log's first LSN %llu", (unsigned long long)start,
		     (unsigned long long)h->first_lsn);
		goto out;
	}
	c->res->start_lsn = c->res->end_lsn = start;
	uint64_t cap = (uint64_t)st.st_size - area, done = 0;
	uint64_t off = ppl_redo_offset_of(r, start);
	/* Read the circular area once around from the start point, stopping
	 * as soon as the reader stalls at the end of the log. */
	while (done < cap) {
		size_t n = chunk;
		if (n > cap - done)
			n = (size_t)(cap - done);
		if (n > (uint64_t)st.st_size - off)
			n = (size_t)((uint64_t)st.st_size - off);
		ssize_t got = pread(fd, b, n, (off_t)off);
		if (got <= 0) {
			fail(c, "%s: read error at offset %llu: %s", path, (unsigned long long)off,
			     got < 0 ? strerror(errno) : "unexpected end of file");
			goto out;
		}
		c->res->log_bytes += (uint64_t)got;
		int k = ppl_redo_feed(r, off, b, (size_t)got);
		if (k) {
			if (!c->failed)
				fail(c, "%s", ppl_redo_error(r));
			goto out;
		}
		done += (uint64_t)got;
		off += (uint64_t)got;
		if (off == (uint64_t)st.st_size)
			off = area;
		if (ppl_redo_stall(r) != PPL_FRAME_MORE)
			break;
	}
	if (ppl_redo_finish(r)) {
		fail(c, "%s", ppl_redo_error(r));
		goto out;
	}
	c->res->log_bytes = c->res->end_lsn - c->res->start_lsn;
	ret = 0;
out:
	free(b);
	ppl_redo_reader_free(r);
	close(fd);
	return ret;
}

/* ---- phase 2: apply ---------------------------------------------------- */

static int cmp_page(const void *a, const void *b)
{
	uint64_t x = ((const struct page *)a)->key, y = ((const struct page *)b)->key;
	if (x == 1ull << 63) x = 0;
	if (y == 1ull << 63) y = 0;
	return x < y ? -1 : x > y;
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

static int apply_pages(struct ctx *c)
{
	/* Compact the hash table into a sorted array: file order. */
	size_t n = 0;
	for (size_t i = 0; i < c->pages_cap; i++)
		if (c->pages[i].key)
			c->pages[n++] = c->pages[i];
	qsort(c->pages, n, sizeof *c->pages, cmp_page);
	c->res->pages_touched = n;

	uint8_t *frame = aligned_alloc(4096, 65536);
	if (!frame)
		return fail(c, "out of memory");
	int ret = -1;
	for (size_t i = 0; i < n; i++) {
		struct page *pg = &c->pages[i];
		uint64_t key = pg->key == 1ull << 63 ? 0 : pg->key;
		uint32_t space_id = (uint32_t)(key >> 32), page_no = (uint32_t)key;
		struct space *s = space_find(c, space_id);
		if (s && s->deleted)
			continue; /* FILE_DELETE: the file is gone, and so is its log */
		if (!s) {
			fail(c, "records for space %u (page %u), but no data file and no file record for it",
			     space_id, page_no);
			goto out;
		}
		if (space_open(c, s))
			goto out;
		size_t ps = s->page_size;
		uint64_t init = pg->init_lsn;
		if (s->trim_lsn && init < s->trim_lsn)
			init = s->trim_lsn; /* undo tablespace truncated: older log is void */
		if (init) {
			memset(frame, 0, ps);
		} else if (s->fd >= 0) {
			ssize_t got = pread(s->fd, frame, ps, (off_t)page_no * (off_t)ps);
			if (got < 0) {
				fail(c, "%s: read error at page %u: %s", s->path, page_no, strerror(errno));
				goto out;
			}
			if ((size_t)got < ps)
				memset(frame + got, 0, ps - (size_t)got);
		} else {
			memset(frame, 0, ps);
		}
		struct ppl_page_ref ref = {frame, ps, space_id, page_no};
		struct ppl_page_replay rp;
		ppl_replay_begin(&rp, &ref, init);
		bool trace = c->o->trace && c->o->verbose && space_id == c->o->trace_space && page_no == c->o->trace_page;
		if (trace)
			fprintf(c->o->verbose, "page %u:%u in %s: init LSN %llu, page LSN %llu\n", space_id, page_no,
				s->path, (unsigned long long)init, (unsigned long long)ppl_page_lsn(frame));
		for (uint32_t ci = pg->first; ci; ci = c->chunks[ci - 1].next) {
			const struct chunk *ch = &c->chunks[ci - 1];
			struct ppl_apply_error e;
			if (trace) {
				fprintf(c->o->verbose, "  mtr %llu..%llu:", (unsigned long long)ch->start,
					(unsigned long long)ch->end);
				struct ppl_rec_iter it;
				struct ppl_rec r;
				ppl_rec_iter_init(&it, c->arena + ch->off, ch->len, ps);
				while (ppl_rec_next(&it, &r) > 0)
					fprintf(c->o->verbose, " %s(%zu)", ppl_rec_type_name(r.type, r.ext_subtype), r.body_len);
				fputc('\n', c->o->verbose);
			}
			enum ppl_apply_status st = ppl_replay_mtr(&rp, ch->start, ch->end, c->arena + ch->off, ch->len, &e);
			if (st != PPL_APPLY_OK) {
				fail(c, "space %u page %u (%s, %s) mtr at LSN %llu: %s record %s at byte %u: %s",
				     space_id, page_no, s->path, ppl_page_type_name(ppl_page_type(frame)),
				     (unsigned long long)ch->start, st == PPL_APPLY_UNSUPPORTED ? "unsupported" : "corrupt",
				     ppl_rec_type_name(e.rec_type, e.ext_subtype), e.rec_offset, e.msg);
				goto out;
			}
		}
		c->res->mtrs_skipped_lsn += rp.skipped;
		if (!ppl_replay_finish(&rp)) {
			c->res->pages_skipped_freed++;
			continue;
		}
		if (page_no == 0)
			s->page0_written = true;
		c->res->pages_written++;
		if (!c->o->dry_run && pwrite(s->fd, frame, ps, (off_t)page_no * (off_t)ps) != (ssize_t)ps) {
			fail(c, "%s: write error at page %u: %s", s->path, page_no, strerror(errno));
			goto out;
		}
		if (page_no == 0 && !c->o->dry_run) {
			/* Recovery extends a file to the size its header logs. */
			uint64_t want = (uint64_t)ppl_rd4(frame + PPL_FSP_HEADER_OFFSET + PPL_FSP_SIZE) * ps;
			struct stat st;
			if (!fstat(s->fd, &st) && (uint64_t)st.st_size < want) {
				if (ftruncate(s->fd, (off_t)want)) {
					fail(c, "%s: cannot extend to %llu bytes: %s", s->path, (unsigned long long)want,
					     strerror(errno));
					goto out;
				}
				c->res->files_extended++;
			}
		}
	}
	for (size_t i = 0; i < c->spaces_n; i++) {
		struct space *s = &c->spaces[i];
		if (s->trim_lsn && s->fd >= 0 && !c->o->dry_run &&
		    ftruncate(s->fd, (off_t)s->trim_pages * (off_t)s->page_size)) {
			fail(c, "%s: cannot truncate: %s", s->path, strerror(errno));
			goto out;
		}
		if (s->from_new && !s->deleted && !c->o->dry_run) {
			char to[4096];
			size_t l = strlen(s->path);
			snprintf(to, sizeof to, "%.*s.ibd", (int)(l - 4), s->path);
			if (rename(s->path, to)) {
				fail(c, "cannot rename %s to %s: %s", s->path, to, strerror(errno));
				goto out;
			}
		}
		if (s->deleted && s->path && !c->o->dry_run) {
			if (unlink(s->path) == 0) {
				c->res->files_deleted++;
				note(c, "space %u: deleted %s (FILE_DELETE)", s->id, s->path);
			}
		}
	}
	ret = 0;
out:
	free(frame);
	return ret;
}

int ppl_replay_datadir(const struct ppl_replay_opts *o, struct ppl_replay_result *res)
{
	struct ctx c = {.o = o, .res = res};
	memset(res, 0, sizeof *res);
	double t0 = now();
	int ret = -1;
	if (scan_dir(&c, o->datadir, 0))
		goto out;
	if (!c.page_size) {
		fail(&c, "%s has no readable system tablespace (ibdata1): not an InnoDB datadir?", o->datadir);
		goto out;
	}
	if (parse_log(&c))
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
	ret = 0;
out:
	res->total_s = now() - t0;
	res->spaces = c.spaces_n;
	for (size_t i = 0; i < c.spaces_n; i++) {
		if (c.spaces[i].fd >= 0)
			close(c.spaces[i].fd);
		free(c.spaces[i].path);
		free(c.spaces[i].logged_name);
	}
	free(c.spaces);
	free(c.pages);
	free(c.chunks);
	free(c.arena);
	return ret;
}
