/* The log archive's segment files: writing (buffered appends, flushes
 * that roll over to a new segment, the cut of a torn tail at open,
 * retention) and reading (window, time to LSN, a range of
 * mini-transactions). The format and the promises are in ppl/archive.h. */
#include "ppl/archive.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ppl/crc32c.h"
#include "ppl/mach.h"

static const char MAGIC[8] = "PPLARCH1";
#define DEFAULT_SEGMENT (64ull << 20)
/* A mini-transaction's records are bounded by InnoDB's log buffer; a
 * length past this is a damaged record header, not a record to allocate. */
#define RECORDS_MAX (256u << 20)

static void say(char *err, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void say(char *err, size_t len, const char *fmt, ...)
{
	if (err == NULL || len == 0)
		return;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(err, len, fmt, ap);
	va_end(ap);
}

/* ---- format ---------------------------------------------------------------- */

static void put_header(uint8_t *h, uint64_t first_lsn, uint64_t created_ns)
{
	memset(h, 0, PPL_ARCHIVE_HEADER);
	memcpy(h, MAGIC, sizeof MAGIC);
	ppl_wr4(h + 8, PPL_ARCHIVE_VERSION);
	ppl_wr8(h + 16, first_lsn);
	ppl_wr8(h + 24, created_ns);
	ppl_wr4(h + 60, ppl_crc32c(0, h, 60));
}

/* 0, or -1 with why in err */
static int get_header(const uint8_t *h, uint64_t *first_lsn, uint64_t *created_ns, char *err, size_t len)
{
	if (memcmp(h, MAGIC, sizeof MAGIC) != 0) {
		say(err, len, "not an archive segment (no PPLARCH1 magic)");
		return -1;
	}
	if (ppl_rd4(h + 60) != ppl_crc32c(0, h, 60)) {
		say(err, len, "its header fails its checksum");
		return -1;
	}
	if (ppl_rd4(h + 8) != PPL_ARCHIVE_VERSION) {
		say(err, len, "format version %" PRIu32 ", this build reads version %d", ppl_rd4(h + 8),
		    PPL_ARCHIVE_VERSION);
		return -1;
	}
	*first_lsn = ppl_rd8(h + 16);
	*created_ns = ppl_rd8(h + 24);
	return 0;
}

static void put_record_header(uint8_t *r, const struct ppl_mtr *m, uint64_t wall_ns)
{
	ppl_wr4(r, (uint32_t)m->len);
	ppl_wr8(r + 4, m->start_lsn);
	ppl_wr8(r + 12, m->end_lsn);
	ppl_wr8(r + 20, wall_ns);
	uint32_t crc = ppl_crc32c(0, r, 28);
	ppl_wr4(r + 28, ppl_crc32c(crc, m->recs, m->len));
}

static bool seg_name(const char *name, uint64_t *lsn)
{
	unsigned long long v;
	char tail[8];
	if (strlen(name) != 4 + 16 + 5 || sscanf(name, "seg-%16llx%7s", &v, tail) != 2 || strcmp(tail, ".ppla") != 0)
		return false;
	*lsn = v;
	return true;
}

/* ppl_archive_open refuses a directory whose segments' paths would not
 * fit: a truncated path here would name another file. */
#define NAME_ROOM 32

static void seg_path(const char *dir, uint64_t first_lsn, char *out, size_t len)
{
	if (snprintf(out, len, "%s/seg-%016" PRIx64 ".ppla", dir, first_lsn) >= (int)len)
		abort();
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

/* The segments of dir by first LSN, sorted: 0 with *out (malloc'd; may be
 * NULL when there are none), or -1 with err. */
static int list_segments(const char *dir, uint64_t **out, size_t *n, char *err, size_t len)
{
	*out = NULL;
	*n = 0;
	if (strlen(dir) + NAME_ROOM >= PATH_MAX) {
		say(err, len, "archive directory path too long (%zu bytes)", strlen(dir));
		return -1;
	}
	DIR *d = opendir(dir);
	if (d == NULL) {
		say(err, len, "archive directory %s cannot be read: %s", dir, strerror(errno));
		return -1;
	}
	size_t cap = 0;
	struct dirent *e;
	while ((e = readdir(d)) != NULL) {
		uint64_t lsn;
		if (!seg_name(e->d_name, &lsn))
			continue;
		if (*n == cap) {
			cap = cap ? 2 * cap : 64;
			uint64_t *m = realloc(*out, cap * sizeof **out);
			if (m == NULL) {
				closedir(d);
				free(*out);
				*out = NULL;
				say(err, len, "out of memory listing %s", dir);
				return -1;
			}
			*out = m;
		}
		(*out)[(*n)++] = lsn;
	}
	closedir(d);
	if (*n)
		qsort(*out, *n, sizeof **out, cmp_u64);
	return 0;
}

/* ---- reading one segment -------------------------------------------------- */

/* One record read from a segment: its header's fields and its records
 * (valid until the next call). */
struct rec {
	struct ppl_mtr m;
	uint64_t wall_ns;
	uint64_t off;       /* where it starts in the file */
};

struct seg_reader {
	FILE *f;
	char path[PATH_MAX];
	uint64_t first_lsn, created_ns;
	uint64_t off;       /* of the next record */
	uint8_t *buf;
	size_t cap;
};

enum rd { RD_OK, RD_END, RD_TORN, RD_ERR };

static void seg_close(struct seg_reader *s)
{
	if (s->f)
		fclose(s->f);
	free(s->buf);
	memset(s, 0, sizeof *s);
}

/* RD_OK with the header read, RD_TORN (a header short or failing its
 * checksum: why in err), RD_ERR (cannot open or read). */
static enum rd seg_open(struct seg_reader *s, const char *dir, uint64_t name_lsn, char *err, size_t len)
{
	memset(s, 0, sizeof *s);
	seg_path(dir, name_lsn, s->path, sizeof s->path);
	s->f = fopen(s->path, "rb");
	if (s->f == NULL) {
		say(err, len, "archive segment %s cannot be opened: %s", s->path, strerror(errno));
		return RD_ERR;
	}
	uint8_t h[PPL_ARCHIVE_HEADER];
	size_t got = fread(h, 1, sizeof h, s->f);
	if (got != sizeof h) {
		if (ferror(s->f)) {
			say(err, len, "archive segment %s cannot be read: %s", s->path, strerror(errno));
			return RD_ERR;
		}
		say(err, len, "archive segment %s is %zu bytes, shorter than its header", s->path, got);
		return RD_TORN;
	}
	char why[160];
	if (get_header(h, &s->first_lsn, &s->created_ns, why, sizeof why) != 0) {
		say(err, len, "archive segment %s: %s", s->path, why);
		return RD_TORN;
	}
	if (s->first_lsn != name_lsn) {
		say(err, len, "archive segment %s: its header says it starts at LSN %" PRIu64 ", its name %" PRIu64,
		    s->path, s->first_lsn, name_lsn);
		return RD_TORN;
	}
	s->off = PPL_ARCHIVE_HEADER;
	return RD_OK;
}

/* The next record: RD_OK, RD_END (the file ends exactly here), RD_TORN
 * (a short or damaged record at s->off: why in err), RD_ERR. */
static enum rd seg_next(struct seg_reader *s, struct rec *r, char *err, size_t len)
{
	uint8_t h[PPL_ARCHIVE_RECORD_HEADER];
	size_t got = fread(h, 1, sizeof h, s->f);
	if (got == 0 && !ferror(s->f))
		return RD_END;
	if (got != sizeof h) {
		if (ferror(s->f)) {
			say(err, len, "archive segment %s cannot be read: %s", s->path, strerror(errno));
			return RD_ERR;
		}
		say(err, len, "archive segment %s ends inside a record header at offset %" PRIu64, s->path, s->off);
		return RD_TORN;
	}
	uint32_t n = ppl_rd4(h);
	uint64_t start = ppl_rd8(h + 4), end = ppl_rd8(h + 12);
	if (n > RECORDS_MAX || end <= start) {
		say(err, len, "archive segment %s: the record at offset %" PRIu64 " is damaged (length %" PRIu32
		    ", LSN %" PRIu64 " to %" PRIu64 ")", s->path, s->off, n, start, end);
		return RD_TORN;
	}
	if (n > s->cap) {
		uint8_t *b = realloc(s->buf, n);
		if (b == NULL) {
			say(err, len, "out of memory reading %s", s->path);
			return RD_ERR;
		}
		s->buf = b;
		s->cap = n;
	}
	if (n && fread(s->buf, 1, n, s->f) != n) {
		if (ferror(s->f)) {
			say(err, len, "archive segment %s cannot be read: %s", s->path, strerror(errno));
			return RD_ERR;
		}
		say(err, len, "archive segment %s ends inside the record at offset %" PRIu64, s->path, s->off);
		return RD_TORN;
	}
	uint32_t crc = ppl_crc32c(ppl_crc32c(0, h, 28), s->buf, n);
	if (crc != ppl_rd4(h + 28)) {
		say(err, len, "archive segment %s: the record at offset %" PRIu64 " (LSN %" PRIu64 " to %" PRIu64
		    ") fails its checksum", s->path, s->off, start, end);
		return RD_TORN;
	}
	r->m.start_lsn = start;
	r->m.end_lsn = end;
	r->m.recs = s->buf;
	r->m.len = n;
	r->wall_ns = ppl_rd8(h + 20);
	r->off = s->off;
	s->off += sizeof h + n;
	return RD_OK;
}

/* ---- the writer ------------------------------------------------------------ */

struct seg {
	uint64_t first_lsn, end_lsn;  /* end_lsn == first_lsn: no record yet */
	uint64_t first_ns, last_ns, created_ns;
	uint64_t bytes;               /* durable bytes of the file (header included) */
};

struct ppl_archive {
	struct ppl_archive_config cfg;
	char dir[PATH_MAX];
	pthread_mutex_t lock;        /* everything below but the flush's own state */
	pthread_mutex_t flush_lock;  /* one flush at a time; taken before lock */
	struct seg *segs;
	size_t nsegs, segcap;
	uint64_t end_lsn, durable_lsn;
	uint64_t first_appended;     /* start of the first record appended to an empty archive */
	uint8_t *buf;                /* records appended, not yet durable */
	size_t buf_len, buf_cap;
	int fd;                      /* the last segment's, open for writing; -1 */
	struct ppl_archive_figures fig;
};

static struct seg *last_seg(struct ppl_archive *a)
{
	return a->nsegs ? &a->segs[a->nsegs - 1] : NULL;
}

static int add_seg(struct ppl_archive *a, const struct seg *s)
{
	if (a->nsegs == a->segcap) {
		size_t cap = a->segcap ? 2 * a->segcap : 64;
		struct seg *m = realloc(a->segs, cap * sizeof *m);
		if (m == NULL)
			return -1;
		a->segs = m;
		a->segcap = cap;
	}
	a->segs[a->nsegs++] = *s;
	return 0;
}

static int sync_dir(const char *dir)
{
	int fd = open(dir, O_RDONLY | O_DIRECTORY);
	if (fd < 0)
		return -1;
	int r = fsync(fd);
	int e = errno;
	close(fd);
	errno = e;
	return r;
}

/* Reads a segment to its end for open: its summary in *out. In the last
 * segment, a torn record ends it (the file is cut there); elsewhere it is
 * damage. The chain must continue from *chain_end (0: anything). */
static int scan_segment(struct ppl_archive *a, uint64_t name_lsn, bool last, uint64_t *chain_end, struct seg *out,
			char *err, size_t len)
{
	struct seg_reader s;
	struct rec r;
	char why[PATH_MAX + 200];
	memset(out, 0, sizeof *out);
	enum rd st = seg_open(&s, a->dir, name_lsn, why, sizeof why);
	if (st == RD_TORN && last) {
		/* a segment whose header never became durable: the crash came
		 * while it was being made; nothing in it counts */
		struct stat sb;
		uint64_t size = stat(s.path, &sb) == 0 ? (uint64_t)sb.st_size : 0;
		seg_close(&s);
		char path[PATH_MAX];
		seg_path(a->dir, name_lsn, path, sizeof path);
		if (unlink(path) != 0) {
			say(err, len, "%s, and it cannot be removed: %s", why, strerror(errno));
			return -1;
		}
		a->fig.torn_bytes_cut += size;
		return 1; /* no segment */
	}
	if (st != RD_OK) {
		say(err, len, "%s%s", why, st == RD_TORN ? "; it is not the last segment: the archive is damaged" : "");
		seg_close(&s);
		return -1;
	}
	if (*chain_end && s.first_lsn != *chain_end) {
		say(err, len, "archive segment %s starts at LSN %" PRIu64 " but the one before it ends at %" PRIu64
		    ": the mini-transactions between are missing", s.path, s.first_lsn, *chain_end);
		seg_close(&s);
		return -1;
	}
	out->first_lsn = out->end_lsn = s.first_lsn;
	out->created_ns = s.created_ns;
	out->bytes = PPL_ARCHIVE_HEADER;
	for (;;) {
		st = seg_next(&s, &r, why, sizeof why);
		if (st == RD_OK && r.m.start_lsn != out->end_lsn) {
			snprintf(why, sizeof why, "archive segment %s: the record at offset %" PRIu64 " starts at LSN %"
				 PRIu64 " where the one before ends at %" PRIu64, s.path, r.off, r.m.start_lsn,
				 out->end_lsn);
			st = RD_TORN;
		}
		if (st != RD_OK)
			break;
		if (out->end_lsn == out->first_lsn)
			out->first_ns = r.wall_ns;
		out->last_ns = r.wall_ns;
		out->end_lsn = r.m.end_lsn;
		out->bytes = s.off;
	}
	if (st == RD_ERR || (st == RD_TORN && !last)) {
		say(err, len, "%s%s", why, st == RD_TORN ? "; it is not the last segment: the archive is damaged" : "");
		seg_close(&s);
		return -1;
	}
	if (st == RD_TORN) {
		/* the tail of the last flush before a crash: cut, the host
		 * takes those mini-transactions from the log again */
		struct stat sb;
		uint64_t size = fstat(fileno(s.f), &sb) == 0 ? (uint64_t)sb.st_size : out->bytes;
		if (truncate(s.path, (off_t)out->bytes) != 0) {
			say(err, len, "%s, and it cannot be cut there: %s", why, strerror(errno));
			seg_close(&s);
			return -1;
		}
		a->fig.torn_bytes_cut += size - out->bytes;
	}
	seg_close(&s);
	*chain_end = out->end_lsn;
	return 0;
}

struct ppl_archive *ppl_archive_open(const struct ppl_archive_config *cfg, char *err, size_t errlen)
{
	struct ppl_archive *a = calloc(1, sizeof *a);
	uint64_t *names = NULL;
	size_t n = 0;
	if (a == NULL) {
		say(err, errlen, "out of memory");
		return NULL;
	}
	a->cfg = *cfg;
	if (a->cfg.segment_bytes == 0)
		a->cfg.segment_bytes = DEFAULT_SEGMENT;
	if (snprintf(a->dir, sizeof a->dir, "%s", cfg->dir) >= (int)sizeof a->dir - NAME_ROOM) {
		say(err, errlen, "archive directory path too long");
		free(a);
		return NULL;
	}
	a->cfg.dir = a->dir;
	a->fd = -1;
	pthread_mutex_init(&a->lock, NULL);
	pthread_mutex_init(&a->flush_lock, NULL);
	if (list_segments(a->dir, &names, &n, err, errlen) != 0)
		goto fail;
	uint64_t chain = 0;
	for (size_t i = 0; i < n; i++) {
		struct seg s;
		int r = scan_segment(a, names[i], i + 1 == n, &chain, &s, err, errlen);
		if (r < 0)
			goto fail;
		if (r == 0 && add_seg(a, &s) != 0) {
			say(err, errlen, "out of memory");
			goto fail;
		}
	}
	free(names);
	a->end_lsn = a->durable_lsn = a->nsegs ? last_seg(a)->end_lsn : 0;
	return a;
fail:
	free(names);
	pthread_mutex_destroy(&a->lock);
	pthread_mutex_destroy(&a->flush_lock);
	free(a->segs);
	free(a);
	return NULL;
}

void ppl_archive_close(struct ppl_archive *a)
{
	if (a == NULL)
		return;
	if (a->fd >= 0)
		close(a->fd);
	pthread_mutex_destroy(&a->lock);
	pthread_mutex_destroy(&a->flush_lock);
	free(a->segs);
	free(a->buf);
	free(a);
}

uint64_t ppl_archive_end_lsn(struct ppl_archive *a)
{
	pthread_mutex_lock(&a->lock);
	uint64_t v = a->end_lsn;
	pthread_mutex_unlock(&a->lock);
	return v;
}

uint64_t ppl_archive_durable_lsn(struct ppl_archive *a)
{
	pthread_mutex_lock(&a->lock);
	uint64_t v = a->durable_lsn;
	pthread_mutex_unlock(&a->lock);
	return v;
}

int ppl_archive_append(struct ppl_archive *a, const struct ppl_mtr *m, uint64_t wall_ns, char *err, size_t errlen)
{
	if (m->end_lsn <= m->start_lsn || m->len > RECORDS_MAX) {
		say(err, errlen, "not a mini-transaction: LSN %" PRIu64 " to %" PRIu64 ", %zu bytes of records",
		    m->start_lsn, m->end_lsn, m->len);
		return -1;
	}
	size_t need = PPL_ARCHIVE_RECORD_HEADER + m->len;
	pthread_mutex_lock(&a->lock);
	if (a->end_lsn && m->end_lsn <= a->end_lsn) {
		pthread_mutex_unlock(&a->lock);
		return 0; /* already archived */
	}
	if (a->end_lsn && m->start_lsn != a->end_lsn) {
		say(err, errlen, "the mini-transaction at LSN %" PRIu64 " does not continue the archive, which ends at "
		    "LSN %" PRIu64 ": the log between was never archived", m->start_lsn, a->end_lsn);
		pthread_mutex_unlock(&a->lock);
		return -1;
	}
	if (a->buf_len + need > a->buf_cap) {
		size_t cap = a->buf_cap ? a->buf_cap : 1 << 16;
		while (cap < a->buf_len + need)
			cap *= 2;
		uint8_t *b = realloc(a->buf, cap);
		if (b == NULL) {
			pthread_mutex_unlock(&a->lock);
			say(err, errlen, "out of memory for %zu bytes of archive records", a->buf_len + need);
			return -1;
		}
		a->buf = b;
		a->buf_cap = cap;
	}
	if (a->end_lsn == 0)
		a->first_appended = m->start_lsn;
	put_record_header(a->buf + a->buf_len, m, wall_ns);
	memcpy(a->buf + a->buf_len + PPL_ARCHIVE_RECORD_HEADER, m->recs, m->len);
	a->buf_len += need;
	a->end_lsn = m->end_lsn;
	a->fig.records_appended++;
	pthread_mutex_unlock(&a->lock);
	return 0;
}

/* A new segment for records from first_lsn on, its header durable and its
 * name in the directory: 0, or -1 with err. */
static int new_segment(struct ppl_archive *a, uint64_t first_lsn, uint64_t now_ns, char *err, size_t errlen)
{
	char path[PATH_MAX];
	seg_path(a->dir, first_lsn, path, sizeof path);
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0640);
	if (fd < 0) {
		say(err, errlen, "archive segment %s cannot be created: %s", path, strerror(errno));
		return -1;
	}
	uint8_t h[PPL_ARCHIVE_HEADER];
	put_header(h, first_lsn, now_ns);
	ssize_t w = pwrite(fd, h, sizeof h, 0);
	if (w != (ssize_t)sizeof h || fdatasync(fd) != 0 || sync_dir(a->dir) != 0) {
		say(err, errlen, "archive segment %s cannot be written: %s", path,
		    w >= 0 && w != (ssize_t)sizeof h ? "no space left on device" : strerror(errno));
		close(fd);
		unlink(path);
		return -1;
	}
	struct seg s = {.first_lsn = first_lsn, .end_lsn = first_lsn, .created_ns = now_ns,
			.bytes = PPL_ARCHIVE_HEADER};
	pthread_mutex_lock(&a->lock);
	int r = add_seg(a, &s);
	pthread_mutex_unlock(&a->lock);
	if (r != 0) {
		close(fd);
		say(err, errlen, "out of memory");
		return -1;
	}
	if (a->fd >= 0)
		close(a->fd);
	a->fd = fd;
	return 0;
}

static int open_last(struct ppl_archive *a, char *err, size_t errlen)
{
	char path[PATH_MAX];
	seg_path(a->dir, last_seg(a)->first_lsn, path, sizeof path);
	a->fd = open(path, O_WRONLY | O_CLOEXEC);
	if (a->fd < 0) {
		say(err, errlen, "archive segment %s cannot be opened: %s", path, strerror(errno));
		return -1;
	}
	return 0;
}

/* What was written into the last segment up to `bytes` (its records up
 * to LSN end, accepted from first_ns to last_ns) made durable and
 * counted: 0, or -1 with err (nothing counted). */
static int sync_segment(struct ppl_archive *a, struct seg *s, uint64_t bytes, uint64_t end, uint64_t first_ns,
			uint64_t last_ns, char *err, size_t errlen)
{
	if (fdatasync(a->fd) != 0) {
		say(err, errlen, "archive segment of LSN %" PRIu64 " cannot be synced: %s", s->first_lsn,
		    strerror(errno));
		return -1;
	}
	pthread_mutex_lock(&a->lock);
	s->bytes = bytes;
	s->end_lsn = end;
	if (s->first_ns == 0)
		s->first_ns = first_ns;
	s->last_ns = last_ns;
	a->durable_lsn = end;
	pthread_mutex_unlock(&a->lock);
	return 0;
}

int ppl_archive_flush(struct ppl_archive *a, uint64_t upto_lsn, char *err, size_t errlen)
{
	pthread_mutex_lock(&a->flush_lock);
	pthread_mutex_lock(&a->lock);
	/* the whole records that end at or below upto_lsn; the rest stays */
	size_t len = 0;
	while (len < a->buf_len && ppl_rd8(a->buf + len + 12) <= upto_lsn)
		len += PPL_ARCHIVE_RECORD_HEADER + ppl_rd4(a->buf + len);
	uint8_t *buf = a->buf;
	if (len < a->buf_len) {
		uint8_t *rest = malloc(a->buf_len - len);
		if (rest == NULL) {
			pthread_mutex_unlock(&a->lock);
			pthread_mutex_unlock(&a->flush_lock);
			say(err, errlen, "out of memory flushing the archive");
			return -1;
		}
		memcpy(rest, a->buf + len, a->buf_len - len);
		a->buf = rest;
		a->buf_len = a->buf_cap = a->buf_len - len;
	} else {
		a->buf = NULL;
		a->buf_len = a->buf_cap = 0;
	}
	pthread_mutex_unlock(&a->lock);
	size_t done = 0;   /* bytes of buf durable */
	size_t at = 0;     /* bytes of buf written */
	int rc = 0;
	uint64_t first_ns = 0, last_ns = 0, end = 0;
	if (len && a->nsegs && a->fd < 0 && open_last(a, err, errlen) != 0)
		rc = -1;
	while (rc == 0 && at < len) {
		const uint8_t *r = buf + at;
		size_t n = PPL_ARCHIVE_RECORD_HEADER + ppl_rd4(r);
		uint64_t start = ppl_rd8(r + 4);
		struct seg *s = last_seg(a);
		uint64_t written = s ? s->bytes + (at - done) : 0;
		bool holds = written > PPL_ARCHIVE_HEADER; /* records durable or written this flush */
		if (s == NULL || (holds && written + n > a->cfg.segment_bytes) || (!holds && s->first_lsn != start)) {
			/* the current segment is full: what is written in it is
			 * made durable, then the next one begins */
			if (s && at > done) {
				if (sync_segment(a, s, written, end, first_ns, last_ns, err, errlen) != 0) {
					rc = -1;
					break;
				}
				done = at;
				first_ns = 0;
			}
			if (s && !holds && s->first_lsn != start) {
				/* an empty segment named for another LSN (its first
				 * records were cut at open): replaced */
				char path[PATH_MAX];
				seg_path(a->dir, s->first_lsn, path, sizeof path);
				unlink(path);
				pthread_mutex_lock(&a->lock);
				a->nsegs--;
				pthread_mutex_unlock(&a->lock);
			}
			if (new_segment(a, start, ppl_rd8(r + 20), err, errlen) != 0) {
				rc = -1;
				break;
			}
			continue;
		}
		ssize_t w = pwrite(a->fd, r, n, (off_t)written);
		if (w != (ssize_t)n) {
			say(err, errlen, "archive segment of LSN %" PRIu64 " cannot be written at offset %" PRIu64 ": %s",
			    s->first_lsn, written, w >= 0 ? "no space left on device" : strerror(errno));
			rc = -1;
			break;
		}
		if (first_ns == 0)
			first_ns = ppl_rd8(r + 20);
		last_ns = ppl_rd8(r + 20);
		end = ppl_rd8(r + 12);
		at += n;
	}
	if (rc == 0 && at > done) {
		struct seg *s = last_seg(a);
		if (sync_segment(a, s, s->bytes + (at - done), end, first_ns, last_ns, err, errlen) != 0)
			rc = -1;
		else
			done = at;
	}
	/* what is not durable goes back in front of what was appended since:
	 * the next flush writes it again at the segment's durable end (a
	 * sync that failed may have lost any of it) */
	pthread_mutex_lock(&a->lock);
	if (done < len) {
		size_t keep = len - done, total = keep + a->buf_len;
		uint8_t *b = malloc(total > 0 ? total : 1);
		if (b == NULL) {
			/* cannot happen in practice; if it does, the records
			 * are still in MariaDB's log, and end_lsn moves back so
			 * that the host feeds them again */
			a->end_lsn = a->durable_lsn;
			free(a->buf);
			a->buf = NULL;
			a->buf_len = a->buf_cap = 0;
		} else {
			memcpy(b, buf + done, keep);
			if (a->buf_len)
				memcpy(b + keep, a->buf, a->buf_len);
			free(a->buf);
			a->buf = b;
			a->buf_len = a->buf_cap = total;
		}
	}
	a->fig.flushes++;
	pthread_mutex_unlock(&a->lock);
	free(buf);
	pthread_mutex_unlock(&a->flush_lock);
	return rc;
}

int ppl_archive_prune(struct ppl_archive *a, uint64_t keep_from_lsn, uint64_t now_ns, char *err, size_t errlen)
{
	int removed = 0;
	pthread_mutex_lock(&a->flush_lock);
	for (;;) {
		pthread_mutex_lock(&a->lock);
		uint64_t total = 0;
		for (size_t i = 0; i < a->nsegs; i++)
			total += a->segs[i].bytes;
		struct seg s = a->nsegs ? a->segs[0] : (struct seg){0};
		bool last = a->nsegs <= 1;
		pthread_mutex_unlock(&a->lock);
		if (last || s.end_lsn > keep_from_lsn)
			break;
		bool over_size = a->cfg.retention_bytes && total > a->cfg.retention_bytes;
		bool too_old = a->cfg.retention_s && s.last_ns && now_ns > s.last_ns &&
			       now_ns - s.last_ns > a->cfg.retention_s * 1000000000ull;
		if (!over_size && !too_old)
			break;
		char path[PATH_MAX];
		seg_path(a->dir, s.first_lsn, path, sizeof path);
		if (unlink(path) != 0) {
			say(err, errlen, "archive segment %s cannot be removed: %s", path, strerror(errno));
			pthread_mutex_unlock(&a->flush_lock);
			return -1;
		}
		pthread_mutex_lock(&a->lock);
		memmove(a->segs, a->segs + 1, (a->nsegs - 1) * sizeof *a->segs);
		a->nsegs--;
		a->fig.segments_pruned++;
		pthread_mutex_unlock(&a->lock);
		removed++;
	}
	pthread_mutex_unlock(&a->flush_lock);
	if (removed)
		(void)sync_dir(a->dir);
	return removed;
}

void ppl_archive_get_figures(struct ppl_archive *a, struct ppl_archive_figures *f)
{
	pthread_mutex_lock(&a->lock);
	*f = a->fig;
	f->end_lsn = a->end_lsn;
	f->durable_lsn = a->durable_lsn;
	f->buffered_bytes = a->buf_len;
	f->segments = a->nsegs;
	f->bytes = 0;
	for (size_t i = 0; i < a->nsegs; i++)
		f->bytes += a->segs[i].bytes;
	f->first_lsn = a->first_appended;
	if (a->nsegs) {
		f->first_lsn = a->segs[0].first_lsn;
		f->first_ns = a->segs[0].first_ns;
		f->last_ns = last_seg(a)->last_ns;
	}
	pthread_mutex_unlock(&a->lock);
}

/* ---- readers ------------------------------------------------------------------- */

/* Calls each(arg, rec) for every record of the archive in dir from the
 * segment that can hold from_lsn on, checking the chain; each returns 0 to
 * go on, 1 to stop (found), or another value (stops, returned). Returns 0
 * at the archive's end, 1 when stopped, -1 with err. */
static int walk(const char *dir, uint64_t from_lsn, int (*each)(void *, const struct rec *), void *arg,
		uint64_t *end_out, char *err, size_t len)
{
	uint64_t *names;
	size_t n;
	if (list_segments(dir, &names, &n, err, len) != 0)
		return -1;
	if (n == 0) {
		say(err, len, "the archive in %s is empty", dir);
		free(names);
		return -1;
	}
	size_t i = 0;
	while (i + 1 < n && names[i + 1] <= from_lsn)
		i++;
	uint64_t chain = 0;
	int rc = 0;
	for (; i < n && rc == 0; i++) {
		struct seg_reader s;
		struct rec r;
		enum rd st = seg_open(&s, dir, names[i], err, len);
		if (st != RD_OK) {
			seg_close(&s);
			/* a writer beside this reader is making its next
			 * segment: the archive ends before it */
			if (!(st == RD_TORN && i + 1 == n))
				rc = -1;
			break;
		}
		if (chain && s.first_lsn != chain) {
			say(err, len, "archive segment %s starts at LSN %" PRIu64 " but the one before it ends at %" PRIu64
			    ": the mini-transactions between are missing", s.path, s.first_lsn, chain);
			seg_close(&s);
			rc = -1;
			break;
		}
		chain = s.first_lsn;
		while (rc == 0 && (st = seg_next(&s, &r, err, len)) == RD_OK) {
			if (r.m.start_lsn != chain) {
				say(err, len, "archive segment %s: the record at offset %" PRIu64 " starts at LSN %" PRIu64
				    " where the one before ends at %" PRIu64, s.path, r.off, r.m.start_lsn, chain);
				rc = -1;
				break;
			}
			chain = r.m.end_lsn;
			rc = each(arg, &r);
		}
		if (rc == 0 && st != RD_END) {
			/* a reader beside a writer may see its last flush half
			 * done: only the last segment's tail may be so */
			if (!(st == RD_TORN && i + 1 == n))
				rc = -1;
		}
		seg_close(&s);
	}
	free(names);
	if (end_out)
		*end_out = chain;
	return rc;
}

struct window_walk {
	struct ppl_archive_window *w;
	bool first;
};

static int window_each(void *arg, const struct rec *r)
{
	struct window_walk *ww = arg;
	if (ww->first) {
		ww->w->first_lsn = r->m.start_lsn;
		ww->w->first_ns = r->wall_ns;
		ww->first = false;
	}
	ww->w->end_lsn = r->m.end_lsn;
	ww->w->last_ns = r->wall_ns;
	ww->w->records++;
	return 0;
}

int ppl_archive_window(const char *dir, struct ppl_archive_window *w, char *err, size_t errlen)
{
	struct window_walk ww = {.w = w, .first = true};
	memset(w, 0, sizeof *w);
	if (walk(dir, 0, window_each, &ww, NULL, err, errlen) < 0)
		return -1;
	if (ww.first) {
		say(err, errlen, "the archive in %s holds no mini-transaction", dir);
		return -1;
	}
	uint64_t *names;
	size_t n;
	if (list_segments(dir, &names, &n, err, errlen) != 0)
		return -1;
	for (size_t i = 0; i < n; i++) {
		char path[PATH_MAX];
		struct stat st;
		seg_path(dir, names[i], path, sizeof path);
		if (stat(path, &st) == 0)
			w->bytes += (uint64_t)st.st_size;
	}
	w->segments = n;
	free(names);
	return 0;
}

struct at_walk {
	uint64_t wall_ns, lsn;
	bool any;
};

static int at_each(void *arg, const struct rec *r)
{
	struct at_walk *aw = arg;
	if (r->wall_ns > aw->wall_ns)
		return 1;
	aw->lsn = r->m.end_lsn;
	aw->any = true;
	return 0;
}

int ppl_archive_lsn_at(const char *dir, uint64_t wall_ns, uint64_t *lsn, char *err, size_t errlen)
{
	struct ppl_archive_window w;
	if (ppl_archive_window(dir, &w, err, errlen) != 0)
		return -1;
	if (wall_ns < w.first_ns) {
		say(err, errlen, "the archive in %s begins at %" PRIu64 " ns (LSN %" PRIu64 "), after the time asked "
		    "for; it covers %" PRIu64 " to %" PRIu64 " ns (LSN %" PRIu64 " to %" PRIu64 ")", dir, w.first_ns,
		    w.first_lsn, w.first_ns, w.last_ns, w.first_lsn, w.end_lsn);
		return -1;
	}
	struct at_walk aw = {.wall_ns = wall_ns};
	if (walk(dir, 0, at_each, &aw, NULL, err, errlen) < 0)
		return -1;
	if (!aw.any) {
		say(err, errlen, "no mini-transaction of the archive in %s was accepted at or before %" PRIu64 " ns "
		    "(its clock went back?)", dir, wall_ns);
		return -1;
	}
	*lsn = aw.lsn;
	return 0;
}

struct range_walk {
	uint64_t from, to;
	ppl_archive_mtr_fn fn;
	void *arg;
	bool started;
	int rc;
	uint64_t first_start;
};

static int range_each(void *arg, const struct rec *r)
{
	struct range_walk *rw = arg;
	if (r->m.end_lsn <= rw->from)
		return 0;
	if (!rw->started) {
		rw->started = true;
		rw->first_start = r->m.start_lsn;
		if (r->m.start_lsn > rw->from)
			return 2; /* the archive begins after from */
	}
	if (r->m.end_lsn > rw->to)
		return 3; /* to is not a record's end */
	rw->rc = rw->fn(rw->arg, &r->m, r->wall_ns);
	if (rw->rc != 0)
		return 4;
	return r->m.end_lsn == rw->to ? 1 : 0;
}

int ppl_archive_read(const char *dir, uint64_t from_lsn, uint64_t to_lsn, ppl_archive_mtr_fn on_mtr, void *arg,
		     char *err, size_t errlen)
{
	if (to_lsn <= from_lsn) {
		say(err, errlen, "nothing to read: LSN %" PRIu64 " to %" PRIu64, from_lsn, to_lsn);
		return -1;
	}
	struct range_walk rw = {.from = from_lsn, .to = to_lsn, .fn = on_mtr, .arg = arg};
	uint64_t end = 0;
	int r = walk(dir, from_lsn, range_each, &rw, &end, err, errlen);
	switch (r) {
	case 1:
		return 0;
	case 2:
		say(err, errlen, "the archive in %s begins at LSN %" PRIu64 ", after LSN %" PRIu64 " asked for",
		    dir, rw.first_start, from_lsn);
		return -1;
	case 3:
		say(err, errlen, "LSN %" PRIu64 " is not the end of a mini-transaction in the archive in %s", to_lsn,
		    dir);
		return -1;
	case 4:
		return rw.rc;
	case 0:
		say(err, errlen, "the archive in %s ends at LSN %" PRIu64 ", before LSN %" PRIu64 " asked for", dir,
		    end, to_lsn);
		return -1;
	default:
		return -1;
	}
}
