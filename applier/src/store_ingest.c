/* The store's redo ingest: MariaDB's log found under the export, the node
 * made once ibdata1 gives the page size, the log parsed from its
 * checkpoint (after a restart its last bytes held back until they are
 * known to be final, and a read of a page they touch made to wait), the
 * records kept in the pool put back (I6), then every log write parsed
 * before it is answered (I2); and the log left behind when it is
 * replaced, removed or copied over (detach).
 *
 * A file of its own because ingest alone publishes the node and moves the
 * ingest states (ppl/store.h's NOTES), under log_lock: the other store
 * files only read the node, and call in here (store_stop_ingest,
 * store_after_restart_parse) when a checkpoint or an elision question
 * vouches for log that was held back. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <urcu-bp.h>

#include "ppl/crash.h"
#include "ppl/datadir.h"
#include "ppl/filemap.h"
#include "ppl/node.h"
#include "ppl/page.h"
#include "ppl/page_cache.h"
#include "ppl/pool.h"
#include "ppl/redo.h"
#include "ppl/store.h"
#include "store_internal.h"

/* ---- redo ingest ---------------------------------------------------------- */

static int read_file(struct ppl_store *e, const char *name, void *buf, size_t len, uint64_t off, uint64_t *size)
{
	const struct ppl_io *io = e->env.io;
	char path[4096];
	snprintf(path, sizeof(path), "%s/%s", e->datadir, name);
	int fd = io->open(io->arg, path, O_RDONLY);
	if (fd < 0)
		return -1;
	struct stat st;
	ssize_t got = len ? io->pread(io->arg, fd, buf, len, (off_t)off) : 0;
	if (size)
		*size = io->fstat(io->arg, fd, &st) == 0 ? (uint64_t)st.st_size : 0;
	io->close(io->arg, fd);
	return got == (ssize_t)len ? 0 : -1;
}

struct log_search {
	struct ppl_store *e;
	const char *dir;
	uint64_t ino;
	int depth;
	char *out;
	size_t outlen;
};

static int find_log_entry(void *arg, const char *name, enum ppl_io_type type)
{
	struct log_search *ls = arg;
	char p[4096];
	struct stat st;
	if (name[0] == '.' || type == PPL_IO_FILE)
		return 0; /* a link to a directory is followed */
	snprintf(p, sizeof(p), "%s/%s", ls->dir, name);
	return store_stat(ls->e, p, &st) == 0 && S_ISDIR(st.st_mode) &&
	       store_find_log(ls->e, p, ls->ino, ls->depth - 1, ls->out, ls->outlen);
}

bool store_find_log(struct ppl_store *e, const char *dir, uint64_t ino, int depth, char *out, size_t outlen)
{
	char p[4096];
	struct stat st;
	snprintf(p, sizeof(p), "%s/ib_logfile0", dir);
	if (store_stat(e, p, &st) == 0 && (ino == 0 || (uint64_t)st.st_ino == ino)) {
		snprintf(out, outlen, "%s", dir);
		return true;
	}
	if (depth == 0)
		return false;
	struct log_search ls = { .e = e, .dir = dir, .ino = ino, .depth = depth, .out = out, .outlen = outlen };
	return e->env.io->list(e->env.io->arg, dir, find_log_entry, &ls) > 0;
}

static void pool_forget_datadir(struct ppl_store *e, const char *old);

static bool locate_datadir(struct ppl_store *e, uint64_t log_fileid)
{
	char dir[4096];
	if (!store_find_log(e, e->exportdir, log_fileid, 3, dir, sizeof(dir)))
		return false;
	if (strcmp(dir, e->datadir) == 0)
		return true;
	char *d = strdup(dir);
	if (d == NULL)
		return false;
	if (e->pool)
		pool_forget_datadir(e, e->datadir);
	free(e->datadir);
	e->datadir = d;
	if (e->dd)
		ppl_datadir_set_root(e->dd, d);
	SLOG(e, PPL_LOG_EVENT, "PPL: %s: MariaDB's datadir is %s", e->exportdir, d);
	return true;
}

/* The node needs the page size, from ibdata1's page 0 (InnoDB creates
 * ibdata1 before the log). */
static int make_node(struct ppl_store *e, bool from_file)
{
	uint8_t hdr[PPL_PAGE0_HEAD];
	if (read_file(e, "ibdata1", hdr, sizeof(hdr), 0, NULL) != 0)
		return -1;
	if (ppl_page0_unwritten(hdr))
		return -1; /* a datadir being created */
	uint32_t flags = ppl_rd4(hdr + PPL_FSP_HEADER_OFFSET + PPL_FSP_SPACE_FLAGS);
	size_t ps = ppl_fsp_flags_page_size(flags);
	if (ps == 0) {
		SLOG(e, PPL_LOG_WARN, "PPL: %s: ibdata1 is not a full_crc32 tablespace this engine reads; "
			"redo is not ingested and pages are served as the data files hold them", e->datadir);
		__atomic_store_n(&e->stopped, true, __ATOMIC_RELEASE);
		return -1;
	}
	struct ppl_node_config c = { .page_size = ps, .log = store_part_logger(e), .log_is_file_image = from_file,
				     .on_accepted = e->archive ? store_archive_accept : NULL,
				     .clock = e->archive ? store_archive_clock : NULL, .accepted_arg = e };
	struct ppl_node *n = ppl_node_new(&c);
	if (n == NULL)
		return -1;
	if (e->page_size && e->page_size != ps) {
		/* a datadir of another page size in place of the old one */
		SLOG(e, PPL_LOG_EVENT, "PPL: %s: the datadir's page size is now %zu B (was %zu B)", e->datadir, ps,
			 e->page_size);
		ppl_page_cache_free(e->cache);
		e->cache = NULL;
	}
	e->page_size = ps;
	e->building = n;
	if (e->cache == NULL && e->cache_bytes >= ps && (e->cache = ppl_page_cache_new(e->cache_bytes, ps)) == NULL)
		SLOG(e, PPL_LOG_WARN, "PPL: %s: no memory for the %zu-byte rebuilt-page cache; pages are rebuilt "
			"on every read", e->datadir, e->cache_bytes);
	if (e->dd == NULL) {
		char err[256];
		e->dd = ppl_datadir_open(e->datadir, e->env.io, err, sizeof(err));
	}
	return 0;
}

void store_stop_ingest(struct ppl_store *e, const char *why)
{
	__atomic_store_n(&e->stopped, true, __ATOMIC_RELEASE);
	SLOG(e, PPL_LOG_CRIT, "PPL: %s: redo ingest stopped: %s. Pages with records parsed before this point "
		"are still rebuilt on read; later ones are served as the data files hold them (nothing is "
		"elided). If the log file itself is damaged, MariaDB's own recovery will stop at the same "
		"place; if only this parse went wrong, restart ganesha.nfsd to ingest again from the log's "
		"checkpoint", e->datadir, why);
}

/* Feeds bytes [from, to) of the log file as it is on disk to n, as log
 * writes or (hold) as bytes not known to be final. */
static int feed_file_to(struct ppl_store *e, struct ppl_node *n, uint64_t from, uint64_t to, bool hold)
{
	uint8_t *b = malloc(1 << 20);
	if (b == NULL)
		return -1;
	int rc = 0;
	while (from < to && rc == 0) {
		size_t len = to - from > (1 << 20) ? (1 << 20) : (size_t)(to - from);
		if (read_file(e, "ib_logfile0", b, len, from, NULL) != 0 ||
		    (hold ? ppl_node_log_hold(n, from, b, len) : ppl_node_log_write(n, from, b, len)) != 0)
			rc = -1;
		from += len;
	}
	free(b);
	return rc;
}

static int feed_file(struct ppl_store *e, uint64_t from, uint64_t to)
{
	return feed_file_to(e, e->building, from, to, false);
}

static void mark_suspect(void *arg, uint32_t space, uint32_t page_no, const struct ppl_node_page_info *i)
{
	struct ppl_store *e = arg;
	(void)i;
	if (!store_elided_put(e, (uint64_t)space << 32 | page_no, true))
		e->gate_all = true; /* out of memory: every page counts as elided */
}

/* Someone vouches that MariaDB's log is durable up to lsn: an elision
 * question or a page write at that LSN (InnoDB flushes its log before it
 * writes a page, WAL). The bytes of the last, provisional log write below
 * it are then final, and are parsed now. A question may come from a
 * client that errs and a page write from a tool, with any LSN: so the
 * bytes must be whole mini-transactions ending at lsn, as they are for
 * every page of MariaDB's, or nothing is parsed (and nothing is called
 * damaged; a checkpoint, which only MariaDB writes, is trusted in full:
 * store_gate.c). Whether the log is parsed up to lsn. */
bool store_log_vouched(struct ppl_store *e, struct ppl_node *n, uint64_t lsn)
{
	if (ppl_node_parsed_lsn(n) >= lsn)
		return true;
	/* (With Ingest_Behind the callers drained the queue before they took
	 * the node: store_behind.c; never here, inside an RCU read section
	 * the ingest thread may be waiting for.) */
	pthread_mutex_lock(&e->log_lock);
	if (e->started && !e->stopped && e->node == n) {
		if (ppl_node_log_durable_if_whole(n, lsn) < 0)
			store_stop_ingest(e, ppl_node_error(n));
		store_after_restart_parse(e, false);
	}
	pthread_mutex_unlock(&e->log_lock);
	return !STOPPED(e) && ppl_node_parsed_lsn(n) >= lsn;
}

/* The log held back at a restart (feed_to_end) is parsed as MariaDB writes
 * again: its pages may have been elided by the previous run too. Called
 * with log_lock held. */
void store_after_restart_parse(struct ppl_store *e, bool log_write)
{
	struct ppl_node *n = e->node;
	if (e->suspect_upto == 0 || n == NULL || e->pool == NULL)
		return;
	uint64_t parsed = ppl_node_parsed_lsn(n);
	if (parsed != e->suspect_seen)
		ppl_node_for_each_page(n, mark_suspect, e);
	e->suspect_seen = parsed;
	/* MariaDB's log writes start at its real end, so what was held is
	 * parsed (or replaced) after its first writes; a client's retries of
	 * older writes may come first, hence a margin of writes. */
	if (parsed >= e->suspect_upto || (log_write && ++e->suspect_writes > 256))
		e->suspect_upto = 0;
}

/* Feeds n the log file from the checkpoint at offset `from`, around the
 * circle, `todo` bytes at most, until its parse stops well behind what was
 * fed: the end of the valid log (what lies beyond is older and would only
 * fill memory). */
static int feed_circle(struct ppl_store *e, struct ppl_node *n, uint64_t from, uint64_t todo, uint64_t size,
		       uint64_t area, bool stop_at_end)
{
	const uint64_t chunk = 1 << 20;
	uint64_t start = ppl_node_parsed_lsn(n), fed = 0, off = from;
	while (fed < todo) {
		uint64_t len = size - off < chunk ? size - off : chunk;
		if (len > todo - fed)
			len = todo - fed;
		if (feed_file_to(e, n, off, off + len, false) != 0)
			return -1;
		fed += len;
		off = off + len == size ? area : off + len;
		if (stop_at_end && fed - (ppl_node_parsed_lsn(n) - start) > 4 * chunk)
			break;
	}
	return 0;
}

/* Where the valid log in the file ends, parsed from the checkpoint by a
 * node of its own; 0 if it cannot be read. *damaged: the parse stopped at
 * damage (the end is where it begins; why in e->start_why). */
static uint64_t valid_end(struct ppl_store *e, uint64_t ck_lsn, uint64_t from, uint64_t size, uint64_t area,
			  bool *damaged)
{
	struct ppl_node_config c = { .page_size = e->page_size, .log_is_file_image = true };
	struct ppl_node *n = ppl_node_new(&c);
	uint8_t *hdr = malloc(area);
	uint64_t end = 0;
	*damaged = false;
	if (n != NULL && hdr != NULL && read_file(e, "ib_logfile0", hdr, area, 0, NULL) == 0 &&
	    ppl_node_log_open(n, size) == 0 && ppl_node_log_write(n, 0, hdr, area) == 0 &&
	    ppl_node_log_start(n, ck_lsn) == 0) {
		int rc = feed_circle(e, n, from, size - area, size, area, true);
		*damaged = rc != 0 && ppl_node_error(n)[0];
		end = rc == 0 || *damaged ? ppl_node_parsed_lsn(n) : 0;
	}
	if (end == 0 || *damaged)
		snprintf(e->start_why, sizeof(e->start_why), "%s",
			 n && ppl_node_error(n)[0] ? ppl_node_error(n) : "the log file cannot be read from its checkpoint");
	free(hdr);
	ppl_node_free(n);
	return end;
}

int store_held_cmp(const void *a, const void *b)
{
	const struct held_page *x = a, *y = b;
	return x->key < y->key ? -1 : x->key > y->key;
}

struct held_walk {
	struct held_page *v;
	size_t n, cap;
	bool incomplete;
};

static void held_add(void *arg, uint32_t space, uint32_t page_no, const struct ppl_node_page_info *i)
{
	struct held_walk *w = arg;
	if (!i->known)
		return;
	if (w->n == w->cap) {
		size_t cap = w->cap ? 2 * w->cap : 256;
		struct held_page *t = realloc(w->v, cap * sizeof(*t));
		if (t == NULL) {
			w->incomplete = true;
			return;
		}
		w->v = t;
		w->cap = cap;
	}
	w->v[w->n++] = (struct held_page){ (uint64_t)space << 32 | page_no, i->last_lsn };
}

/* Which pages have records in the held tail, len bytes of the file from
 * offset off (LSN at): parsed as a file image by a scratch node, so a
 * superset (what lies past the real end parses too, if it does). */
static int note_held(struct ppl_store *e, uint64_t at, uint64_t off, uint64_t len, uint64_t size, uint64_t area)
{
	struct ppl_node_config c = { .page_size = e->page_size, .log_is_file_image = true };
	struct ppl_node *n = ppl_node_new(&c);
	uint8_t *hdr = malloc(area);
	struct held_walk w = { 0 };
	int rc = -1;
	if (n != NULL && hdr != NULL && read_file(e, "ib_logfile0", hdr, area, 0, NULL) == 0 &&
	    ppl_node_log_open(n, size) == 0 && ppl_node_log_write(n, 0, hdr, area) == 0 &&
	    ppl_node_log_start(n, at) == 0 && feed_circle(e, n, off, len, size, area, false) == 0) {
		/* the scratch reader, too, keeps the end of what it was fed
		 * back as not final: every page those bytes touch is listed */
		ppl_node_log_finish(n);
		ppl_node_for_each_page(n, held_add, &w);
		rc = w.incomplete ? -1 : 0;
	}
	free(hdr);
	ppl_node_free(n);
	if (rc != 0) {
		free(w.v);
		return -1;
	}
	if (w.n == 0) {
		free(w.v);
		return 0;
	}
	if (__atomic_load_n(&e->held, __ATOMIC_ACQUIRE)) {
		free(w.v); /* readers may be looking at the first set */
		return 0;
	}
	qsort(w.v, w.n, sizeof(*w.v), store_held_cmp);
	uint64_t max = 0;
	for (size_t i = 0; i < w.n; i++)
		max = w.v[i].lsn > max ? w.v[i].lsn : max;
	e->held_pages = w.v;
	e->held_n = w.n;
	e->held_max = max;
	__atomic_store_n(&e->restart_ns, store_now_ns(e), __ATOMIC_RELAXED);
	__atomic_store_n(&e->held, true, __ATOMIC_RELEASE);
	SLOG(e, PPL_LOG_EVENT, "PPL: %s: %zu page(s) have records in the last %" PRIu64 " byte(s) of the log, "
		 "which are not known to be final yet; their reads wait until MariaDB's next log write says "
		 "what of it is real", e->datadir, w.n, len);
	return 0;
}

/* The log as the file holds it after a storage-node crash. Its last write
 * may carry, past the real end, old buffer contents that parse as
 * mini-transactions (redo_reader.c): it starts at most 4 KiB before the
 * end of what parses, so the bytes before that are parsed, and the rest
 * is kept unparsed until MariaDB's next log write (which starts at its
 * real end) or an elision question says what of it is real. */
static int feed_to_end(struct ppl_store *e, uint64_t ck_lsn, uint64_t from, uint64_t size, uint64_t area)
{
	const uint64_t provisional = 4096, capacity = size - area;
	bool damaged;
	uint64_t end = valid_end(e, ck_lsn, from, size, area, &damaged);
	if (end == 0)
		return -1;
	if (damaged) {
		/* what parses before the damage, for a start that keeps it
		 * (start_ingest, once nobody completes the log) */
		feed_circle(e, e->building, from, end - ck_lsn, size, area, false);
		return -1;
	}
	uint64_t limit = end > ck_lsn + provisional ? end - provisional : ck_lsn;
	if (feed_circle(e, e->building, from, limit - ck_lsn, size, area, false) != 0 ||
	    ppl_node_log_live(e->building) != 0)
		return -1;
	const struct ppl_redo_reader *r = ppl_node_reader(e->building);
	uint64_t at = ppl_node_parsed_lsn(e->building), left = end + provisional - at;
	if (left > capacity / 2)
		left = capacity / 2;
	e->suspect_upto = end + provisional;
	uint64_t off = ppl_redo_offset_of(r, at);
	if (note_held(e, at, off, left, size, area) != 0)
		return -1;
	while (left) {
		uint64_t len = size - off < left ? size - off : left;
		if (feed_file_to(e, e->building, off, off + len, true) != 0)
			return -1;
		left -= len;
		off = off + len == size ? area : off + len;
	}
	return 0;
}

/* After a restart a page may have records in the log's held tail
 * (note_held): MariaDB may read it back before its next log write tells
 * what of that tail is real, and without them the page would be older
 * than the one MariaDB wrote. The read waits until the parse has passed
 * them. A log that stays quiet for HOLD_QUIET_NS had no appends in flight
 * at its last write, so its bytes are MariaDB's log as they stand and are
 * taken as durable. Returns 0, or EIO after HOLD_MAX_NS: a failed read,
 * rather than an old page. */
#define HOLD_QUIET_NS (2 * 1000000000ull)
#define HOLD_MAX_NS (20 * 1000000000ull)
#define HOLD_SLICE_NS (50 * 1000000ull)
int store_hold_wait(struct ppl_store *e, struct ppl_node *n, uint32_t space, uint32_t page_no)
{
	if (!__atomic_load_n(&e->held, __ATOMIC_ACQUIRE))
		return 0;
	struct held_page k = { (uint64_t)space << 32 | page_no, 0 };
	const struct held_page *h = bsearch(&k, e->held_pages, e->held_n, sizeof(k), store_held_cmp);
	if (h == NULL || ppl_node_parsed_lsn(n) >= h->lsn)
		return 0;
	__atomic_add_fetch(&e->held_waits, 1, __ATOMIC_RELAXED);
	uint64_t t0 = store_now_ns(e);
	/* Woken by the parse as soon as it passes the page's records; the
	 * slice only bounds how late a quiet log or the limit is noticed. */
	while (!ppl_node_wait_parsed(n, h->lsn, HOLD_SLICE_NS) && !STOPPED(e)) {
		uint64_t now = store_now_ns(e), since = __atomic_load_n(&e->last_log_write_ns, __ATOMIC_RELAXED);
		uint64_t restart = __atomic_load_n(&e->restart_ns, __ATOMIC_RELAXED);
		since = since > restart ? since : restart;
		if (now - since > HOLD_QUIET_NS) {
			pthread_mutex_lock(&e->log_lock);
			if (e->started && !e->stopped && e->node == n && ppl_node_log_durable(n, h->lsn) != 0)
				store_stop_ingest(e, ppl_node_error(n));
			/* pages the tail's records touch may have been elided by
			 * the previous run too */
			if (e->started && e->node == n)
				store_after_restart_parse(e, false);
			pthread_mutex_unlock(&e->log_lock);
			if (ppl_node_parsed_lsn(n) >= h->lsn)
				break;
		}
		if (now - t0 > HOLD_MAX_NS) {
			__atomic_add_fetch(&e->held_timeouts, 1, __ATOMIC_RELAXED);
			SLOG(e, PPL_LOG_CRIT, "PPL: %s: page %" PRIu32 ":%" PRIu32 " has records up to LSN %" PRIu64
				" in the log's last bytes from before the restart, and the log was parsed only to %"
				PRIu64 " after %llu s; the READ fails rather than serve an older page. MariaDB's next "
				"log write or a restart of mariadbd resolves it", e->datadir, space, page_no, h->lsn,
				ppl_node_parsed_lsn(n), HOLD_MAX_NS / 1000000000ull);
			return EIO;
		}
	}
	if (ppl_node_parsed_lsn(n) >= e->held_max)
		__atomic_store_n(&e->held, false, __ATOMIC_RELEASE);
	return 0;
}

/* After a restart whose first look at the log met bytes still being
 * written (start_ingest), no node tells which pages the previous run
 * elided until MariaDB's next log write starts ingest (a client sends
 * again the writes the dead server had not carried out): a page read
 * waits for that. A log nobody writes for HOLD_MAX_NS will not be
 * completed by a client; it is taken as it stands (start_ingest keeps
 * what it parses before the damage, ingest stopped). Returns 0, or EIO
 * when even that gives no node: a failed read, rather than a page older
 * than the one MariaDB wrote. */
int store_start_wait(struct ppl_store *e)
{
	if (!__atomic_load_n(&e->start_pending, __ATOMIC_ACQUIRE))
		return 0;
	__atomic_add_fetch(&e->held_waits, 1, __ATOMIC_RELAXED);
	bool forced = false;
	pthread_mutex_lock(&e->log_lock);
	/* Woken as soon as ingest starts (or the log is detached); the
	 * slice only bounds how late the limit, on the store's clock, is
	 * noticed. */
	while (__atomic_load_n(&e->start_pending, __ATOMIC_ACQUIRE)) {
		uint64_t since = __atomic_load_n(&e->start_pending_ns, __ATOMIC_RELAXED);
		if (!forced && store_now_ns(e) - since > HOLD_MAX_NS) {
			forced = true;
			if (!e->started && !e->stopped && e->building == NULL)
				e->start_attempts = START_ATTEMPTS - 1; /* the last: damage now is real */
			pthread_mutex_unlock(&e->log_lock);
			ppl_store_start_from_disk(e);
			pthread_mutex_lock(&e->log_lock);
			continue;
		}
		if (forced || STOPPED(e)) {
			pthread_mutex_unlock(&e->log_lock);
			__atomic_add_fetch(&e->held_timeouts, 1, __ATOMIC_RELAXED);
			SLOG(e, PPL_LOG_CRIT, "PPL: %s: a page READ after the restart fails rather than serve a page "
				"older than the one MariaDB wrote: the log's last bytes from before the restart are "
				"incomplete, nobody completed them, and redo ingest could not start (see above)",
				e->datadir);
			return EIO;
		}
		struct timespec t;
		store_deadline(&t, HOLD_SLICE_NS);
		pthread_cond_timedwait(&e->start_cond, &e->log_lock, &t);
	}
	pthread_mutex_unlock(&e->log_lock);
	return 0;
}

/* ---- per-page records kept in the pool, put back at a restart ---------- */

void store_key_list_add(struct key_list *l, uint32_t space, uint32_t page_no)
{
	if (l->n == l->cap) {
		size_t cap = l->cap ? 2 * l->cap : 256;
		uint64_t *t = realloc(l->keys, cap * sizeof(*t));
		if (t == NULL) {
			l->incomplete = true;
			return;
		}
		l->keys = t;
		l->cap = cap;
	}
	l->keys[l->n++] = (uint64_t)space << 32 | page_no;
}

static void collect_pool_page(void *arg, uint32_t space, uint32_t page_no, const struct ppl_pool_page_info *i)
{
	(void)i;
	store_key_list_add(arg, space, page_no);
}

/* Appends "space:page" to a log line's short list of pages (the first
 * four: the line names examples, not every page). */
static void list_page(char *buf, size_t len, uint64_t i, uint32_t space, uint32_t page_no)
{
	size_t at = strlen(buf);
	if (i < 4 && at < len)
		snprintf(buf + at, len - at, "%s%" PRIu32 ":%" PRIu32, i ? ", " : "", space, page_no);
}

/* Forgets the pool's records of the space's pages from first_page on. */
static void pool_drop_pages(struct ppl_store *e, uint32_t space, uint32_t first_page)
{
	struct key_list k = { 0 };
	ppl_pool_for_each_page(e->pool, collect_pool_page, &k);
	for (size_t i = 0; i < k.n; i++)
		if ((uint32_t)(k.keys[i] >> 32) == space && (uint32_t)k.keys[i] >= first_page)
			ppl_pool_reclaim(e->pool, space, (uint32_t)k.keys[i], UINT64_MAX);
	free(k.keys);
}

/* Another datadir is followed now. detach() wrote the old one's pages
 * back to its files; whatever the pool still holds is that datadir's and
 * must never be put back into the index of this one, whose space ids are
 * the same numbers for other files. */
static void pool_forget_datadir(struct ppl_store *e, const char *old)
{
	struct key_list k = { 0 };
	ppl_pool_for_each_page(e->pool, collect_pool_page, &k);
	uint64_t dropped = 0;
	char some[96] = "";
	for (size_t i = 0; i < k.n; i++) {
		uint32_t space = (uint32_t)(k.keys[i] >> 32);
		list_page(some, sizeof(some), i, space, (uint32_t)k.keys[i]);
		if (i == 0 || space != (uint32_t)(k.keys[i - 1] >> 32))
			dropped += ppl_pool_drop_space(e->pool, space);
	}
	free(k.keys);
	if (dropped)
		SLOG(e, PPL_LOG_CRIT, "PPL: %s: %" PRIu64 " page(s) of the datadir followed before (%s%s) could "
			"not be written back to its files (see the lines above) and are dropped from the pool: "
			"they belong to that datadir, not to the one followed now, and its files lack their "
			"newest versions; do not start MariaDB on %s again without a backup", old, dropped, some,
			k.n > 4 ? ", ..." : "", old);
}

struct pool_load {
	struct ppl_node *n;
	uint32_t space, page_no;
	uint64_t before;               /* the log is re-read from here */
	uint64_t file_lsn;             /* the data file's page holds records up to here */
	unsigned added;
	bool failed;
};

static int pool_rec_to_node(void *arg, const struct ppl_pool_rec *r)
{
	struct pool_load *l = arg;
	if (r->start_lsn >= l->before)
		return 1; /* the log holds it and everything after it */
	if (r->end_lsn <= l->file_lsn)
		return 0;
	if (ppl_node_add_chunk(l->n, l->space, l->page_no, r->start_lsn, r->end_lsn, r->from_init, r->bytes,
			       r->len) != 0) {
		l->failed = true;
		return 1;
	}
	l->added++;
	return 0;
}

/* The page as its data file holds it, read into frame: 1 and its LSN in
 * *lsn; 0 when the file's page is another (not written yet), *lsn 0; -1
 * when no file of the space can be read. */
static int file_page_lsn(struct ppl_store *e, uint32_t space, uint32_t page_no, uint8_t *frame, uint64_t *lsn)
{
	*lsn = 0;
	if (ppl_datadir_read_page(e->dd, space, page_no, frame, e->page_size) != 0)
		return -1;
	if (ppl_page_no(frame) != page_no || ppl_page_space(frame) != space)
		return 0;
	*lsn = ppl_page_lsn(frame);
	return 1;
}

/* After a restart the index starts at MariaDB's checkpoint; the records of
 * pages kept in the pool instead of materialized (settle()) lie before it
 * and come back from the pool (I6), and the pages count as elided again:
 * their newest version exists nowhere but in records. Records the data
 * file already holds (a write that reached it just before the crash) are
 * skipped, not reclaimed here: a reclaim that keeps later records needs
 * new blocks, and in a full pool those records would fall back to DRAM
 * although the log no longer holds them. */
static int load_pool(struct ppl_store *e, struct ppl_node *n, uint64_t start, uint64_t ck_lsn, uint64_t capacity)
{
	struct key_list k = { 0 };
	uint64_t t0 = store_now_ns(e), durable = ppl_pool_durable_lsn(e->pool);
	ppl_pool_for_each_page(e->pool, collect_pool_page, &k);
	if (k.incomplete) {
		free(k.keys);
		store_stop_ingest(e, "out of memory listing the pool's pages");
		return -1;
	}
	/* From the restart point to the checkpoint the log is read for the
	 * pages the pool holds only (store_wrap.c): the others' files are
	 * authoritative there (I7) */
	if (start < ck_lsn && ppl_node_only_below(n, ck_lsn, k.keys, k.n) != 0) {
		free(k.keys);
		store_stop_ingest(e, "out of memory noting the pool's pages");
		return -1;
	}
	if (k.n && durable > ck_lsn + capacity) {
		free(k.keys);
		store_stop_ingest(e, "the pool's records reach LSN beyond anything this log can have written: the pool "
			       "belongs to another datadir (re-create it with `ppl-inspect pool create` after the "
			       "datadir was re-initialized)");
		return -1;
	}
	uint8_t *frame = aligned_alloc(4096, e->page_size);
	int rc = frame ? 0 : -1;
	uint64_t unfound = 0;
	char some[96] = "";
	e->pool_loaded_pages = e->pool_loaded_records = 0; /* an earlier attempt's node is gone */
	for (size_t i = 0; i < k.n && rc == 0; i++) {
		struct pool_load l = { .n = n, .space = (uint32_t)(k.keys[i] >> 32), .page_no = (uint32_t)k.keys[i],
				       .before = start };
		if (file_page_lsn(e, l.space, l.page_no, frame, &l.file_lsn) < 0 && unfound++ < 8) {
			SLOG(e, PPL_LOG_CRIT, "PPL: %s: the pool holds records of page %" PRIu32 ":%" PRIu32 " but no "
				"file of space %" PRIu32 " is found: they are kept; MariaDB's checkpoint cannot pass "
				"them until the file is back", e->datadir, l.space, l.page_no, l.space);
		}
		enum ppl_pool_status st = ppl_pool_records(e->pool, l.space, l.page_no, pool_rec_to_node, &l);
		if (st == PPL_POOL_CORRUPT) {
			char why[160];
			snprintf(why, sizeof(why), "the pool's records of page %" PRIu32 ":%" PRIu32 " fail their "
				 "checksum (ppl-inspect pool dump shows them)", l.space, l.page_no);
			store_stop_ingest(e, why);
			rc = -1;
		} else if (l.failed) {
			store_stop_ingest(e, "out of memory putting the pool's records back into the index");
			rc = -1;
		} else if (l.added && !store_elided_put(e, k.keys[i], true)) {
			store_stop_ingest(e, "out of memory noting the pages put back from the pool");
			rc = -1;
		} else if (l.added) {
			list_page(some, sizeof(some), e->pool_loaded_pages, l.space, l.page_no);
			e->pool_loaded_pages++;
			e->pool_loaded_records += l.added;
		} else if (l.file_lsn && start == ck_lsn) {
			/* nothing before the checkpoint the file lacks: the
			 * blocks are free again (later records are in the log;
			 * from a restart point before the checkpoint the page's
			 * head is what lets the log's records through) */
			ppl_pool_reclaim(e->pool, l.space, l.page_no, l.file_lsn);
		}
	}
	free(frame);
	free(k.keys);
	if (rc == 0 && k.n)
		SLOG(e, PPL_LOG_EVENT, "PPL: %s: %" PRIu64 " page(s)%s%s%s with %" PRIu64 " record(s) before the "
			 "%s LSN %" PRIu64 " put back from the pool in %.3f s", e->datadir,
			 e->pool_loaded_pages, some[0] ? " (" : "", some,
			 some[0] ? (e->pool_loaded_pages > 4 ? ", ...)" : ")") : "",
			 e->pool_loaded_records, start < ck_lsn ? "restart point" : "checkpoint", start,
			 (double)(store_now_ns(e) - t0) / 1e9);
	return rc;
}

/* After a restart that read the log from the restart point: a pool page
 * the index knows nothing of now holds nothing its file lacks (its
 * records are at or below the file's page LSN, or it was a mark whose
 * records a file event dropped) unless the log's held tail touches it:
 * its blocks are free again. Done after
 * the catch-up, not in load_pool, because until then a mark with no
 * record in pmem is what lets its records through (ppl_node_only_below). */
static void drop_settled_pool_pages(struct ppl_store *e, struct ppl_node *n)
{
	struct key_list k = { 0 };
	ppl_pool_for_each_page(e->pool, collect_pool_page, &k);
	uint8_t *frame = aligned_alloc(4096, e->page_size);
	for (size_t i = 0; frame && i < k.n; i++) {
		uint32_t space = (uint32_t)(k.keys[i] >> 32), page_no = (uint32_t)k.keys[i];
		struct ppl_node_page_info info;
		struct held_page hk = { k.keys[i], 0 };
		if (ppl_node_page_info(n, space, page_no, &info) ||
		    (e->held_n && bsearch(&hk, e->held_pages, e->held_n, sizeof(hk), store_held_cmp)))
			continue; /* records in the index, or in the log's held tail */
		uint64_t lsn;
		if (file_page_lsn(e, space, page_no, frame, &lsn) == 1)
			ppl_pool_reclaim(e->pool, space, page_no, lsn);
	}
	free(frame);
	free(k.keys);
}

/* The pool can hold records of pages the index no longer lists (kept
 * there past MariaDB's checkpoint, when the log no longer has them). When
 * the log is left behind (detach) they are written to their files from
 * the file's page and the pool's records, so that nothing of this datadir
 * waits in the pool for a log that will not come back, and nothing of it
 * is put back into the index of another datadir. */
static void write_back_pool(struct ppl_store *e)
{
	struct key_list k = { 0 };
	ppl_pool_for_each_page(e->pool, collect_pool_page, &k);
	if (k.n == 0) {
		free(k.keys);
		return;
	}
	struct ppl_node_config c = { .page_size = e->page_size, .log = store_part_logger(e) };
	struct ppl_node *tmp = ppl_node_new(&c);
	uint8_t *frame = aligned_alloc(4096, e->page_size);
	size_t written = 0, failed = 0;
	pthread_mutex_lock(&e->gate_lock);
	for (size_t i = 0; tmp && frame && i < k.n; i++) {
		struct pool_load l = { .n = tmp, .space = (uint32_t)(k.keys[i] >> 32), .page_no = (uint32_t)k.keys[i],
				       .before = UINT64_MAX };
		file_page_lsn(e, l.space, l.page_no, frame, &l.file_lsn);
		if (ppl_pool_records(e->pool, l.space, l.page_no, pool_rec_to_node, &l) != PPL_POOL_OK || l.failed) {
			failed++;
			continue;
		}
		if (l.added == 0) {
			ppl_pool_reclaim(e->pool, l.space, l.page_no, UINT64_MAX); /* the file holds it */
			continue;
		}
		if (store_materialize_page(e, tmp, l.space, l.page_no, NULL) == 0)
			written++;
		else
			failed++;
	}
	pthread_mutex_unlock(&e->gate_lock);
	if (tmp == NULL || frame == NULL)
		failed = k.n;
	ppl_node_free(tmp);
	free(frame);
	free(k.keys);
	if (failed)
		SLOG(e, PPL_LOG_CRIT, "PPL: %s: %zu page(s) kept in the pool could not be written to their data "
			"files; they stay in the pool", e->datadir, failed);
	else if (written)
		SLOG(e, PPL_LOG_EVENT, "PPL: %s: %zu page(s) kept in the pool past MariaDB's checkpoint written to "
			 "their data files", e->datadir, written);
}

/* ---- ingest start, log writes, a log left behind ------------------------------ */

/* FILE_CREATE and FILE_RENAME name the file of a space, which its page 0
 * cannot do while every write to it is elided. */
static void on_file(void *arg, const struct ppl_node_file_event *ev)
{
	struct ppl_store *e = arg;
	if (e->dd == NULL)
		return;
	/* the node has dropped the space's records; its pool records and
	 * elided pages go too (I7) */
	if (ev->type == PPL_FILE_DELETE) {
		if (e->pool)
			ppl_pool_drop_space(e->pool, ev->space_id);
		store_elided_drop_space(e, ev->space_id);
	}
	/* an undo tablespace truncated: only the pages past its new end go */
	if (ev->type == PPL_EXT_TRIM_PAGES) {
		if (e->pool)
			pool_drop_pages(e, ev->space_id, ev->pages);
		store_elided_drop_pages(e, ev->space_id, ev->pages);
	}
	if (ev->type == PPL_FILE_CREATE)
		ppl_datadir_note(e->dd, ev->space_id, ev->name);
	else if (ev->type == PPL_FILE_RENAME)
		ppl_datadir_note(e->dd, ev->space_id, ev->name2);
}

#define TO_END UINT64_MAX

/* First log write since the engine started (or the export started with a
 * log in place: write_end TO_END): read the header and the
 * checkpoints from the file, start at the checkpoint, catch up with what
 * the file holds up to the end of this write. */
static int start_ingest(struct ppl_store *e, uint64_t write_end)
{
	uint64_t size = 0, area = ppl_dialect_mariadb_10_8.area_start;
	uint8_t *hdr = malloc(area);
	if (hdr == NULL)
		return -1;
	e->start_why[0] = '\0';
	int got = read_file(e, "ib_logfile0", hdr, area, 0, &size);
	if (got != 0 || size <= area || (write_end != TO_END && write_end < area)) {
		free(hdr);
		return 0; /* the header is not written yet */
	}
	if (ppl_node_log_open(e->building, size) != 0) {
		free(hdr);
		store_stop_ingest(e, "ib_logfile0 is too small to be a redo log");
		return -1;
	}
	e->log_size = size;
	ppl_node_log_write(e->building, 0, hdr, area);
	free(hdr);
	const struct ppl_redo_reader *r = ppl_node_reader(e->building);
	const struct ppl_log_header *h = ppl_redo_header(r);
	const struct ppl_checkpoint *ck = ppl_redo_checkpoint(r);
	if (h == NULL || ck == NULL) {
		if (!e->waiting_logged)
			SLOG(e, PPL_LOG_EVENT, "PPL: %s: ib_logfile0 has no valid %s yet; ingest waits for it",
				 e->datadir, h ? "checkpoint" : "header");
		e->waiting_logged = true;
		/* a fresh node next time: this one saw an incomplete header */
		ppl_node_free(e->building);
		e->building = NULL;
		return 0;
	}
	/* The store's restart point (store_wrap.c): records of pages marked
	 * in the pool may lie before MariaDB's checkpoint, in the log only */
	uint64_t start = ck->lsn;
	if (e->pool != NULL && !e->pool_keeps_nothing) {
		uint64_t rp = ppl_pool_durable_lsn(e->pool);
		struct ppl_pool_page_ref any;
		if (rp != 0 && rp < ck->lsn && ppl_pool_oldest(e->pool, &any, 1) > 0) {
			if (ck->lsn - rp >= size - area) {
				char why[320];
				snprintf(why, sizeof(why), "the pool's restart point (LSN %" PRIu64 ") is more than the "
					 "log's capacity behind its checkpoint (LSN %" PRIu64 "): the log no longer holds "
					 "the records of the pages marked in the pool (was the log resized or replaced "
					 "while the storage node was down?)", rp, ck->lsn);
				store_stop_ingest(e, why);
				return -1;
			}
			start = rp;
		}
	}
	if (ppl_node_log_start(e->building, start) != 0) {
		store_stop_ingest(e, start < ck->lsn ? "the pool's restart point is before the log's first LSN (the "
				  "log was re-created while the storage node was down?)"
						   : "the checkpoint LSN is before the log's first LSN");
		return -1;
	}
	uint64_t from = ppl_redo_offset_of(r, start);
	__atomic_store_n(&e->log_capacity, size - area, __ATOMIC_RELAXED);
	__atomic_store_n(&e->gated_ckpt, ck->lsn, __ATOMIC_RELAXED);
	if (e->pool != NULL && load_pool(e, e->building, start, ck->lsn, size - area) != 0)
		return -1;
	/* The catch-up below names files too: a table created since the
	 * checkpoint whose page 0 was elided, never materialized (a restart
	 * after a crash), is found by its FILE_CREATE only; a FILE_DELETE
	 * drops what the pool put back of its space. */
	ppl_node_on_file_event(e->building, on_file, e);
	store_archive_ingest_start(e, start, size);
	int rc = 0;
	if (write_end == TO_END) {
		rc = feed_to_end(e, start, from, size, area);
	} else if (write_end > from) {
		rc = feed_file(e, from, write_end);
	} else {
		rc = feed_file(e, from, size);
		if (rc == 0)
			rc = feed_file(e, area, write_end);
	}
	const char *why = ppl_node_error(e->building)[0] ? ppl_node_error(e->building) : e->start_why;
	if (rc != 0 && ++e->start_attempts < START_ATTEMPTS) {
		/* The file was read while other pieces of MariaDB's log write
		 * (a client splits a large write into several WRITEs that run
		 * at once) may not have reached it: their old bytes fail the
		 * CRC. MariaDB's next log write starts after the whole of
		 * this one is on disk; catch up then. Damage that persists
		 * is real and stops ingest below. */
		SLOG(e, PPL_LOG_EVENT, "PPL: %s: the log read at ingest start ends in bytes still being written "
			 "(%s); starting again at the next log write%s", e->datadir, why,
			 write_end == TO_END && e->pool ? "; page reads wait until then" : "");
		/* After a restart: which pages the previous run elided is known
		 * only from the log, and the bytes still to come (a client's
		 * writes the dead server had not carried out, sent again) may
		 * hold their newest records. A page file's bytes may be older
		 * than what MariaDB wrote, so reads wait for ingest. */
		if (write_end == TO_END && e->pool && !__atomic_load_n(&e->start_pending, __ATOMIC_ACQUIRE)) {
			__atomic_store_n(&e->start_pending_ns, store_now_ns(e), __ATOMIC_RELAXED);
			__atomic_store_n(&e->start_pending, true, __ATOMIC_RELEASE);
		}
		ppl_node_free(e->building);
		e->building = NULL;
		return 0;
	}
	/* After a restart with the pool attached, the records parsed up to
	 * damage that persists are all that tells which pages the previous
	 * run elided: the node is kept, stopped, and those pages are served
	 * rebuilt from what it holds (store_stop_ingest says so). */
	bool keep = rc != 0 && e->pool != NULL &&
		    (write_end == TO_END || __atomic_load_n(&e->start_pending, __ATOMIC_ACQUIRE));
	if (rc != 0) {
		store_stop_ingest(e, why[0] ? why : "cannot read ib_logfile0");
		if (!keep)
			return -1;
	}
	if (rc == 0 && e->pool != NULL && start < ck->lsn)
		drop_settled_pool_pages(e, e->building);
	e->start_attempts = 0;
	e->started = true;
	__atomic_store_n(&e->start_pending, false, __ATOMIC_RELEASE);
	pthread_cond_broadcast(&e->start_cond);
	/* The writes the previous run elided are not known: any page with
	 * records from the log read here may be one of them, and stays in
	 * the elided set until it is materialized or written in full. */
	if (e->pool != NULL)
		ppl_node_for_each_page(e->building, mark_suspect, e);
	__atomic_store_n(&e->node, e->building, __ATOMIC_RELEASE);
	store_archive_ingest_started(e, ppl_node_parsed_lsn(e->building));
	e->building = NULL;
	PPL_CRASH(INGEST_STARTED);
	SLOG(e, PPL_LOG_EVENT, "PPL: %s: redo ingest %s at the %s LSN %" PRIu64 " (log of %" PRIu64
		 " B by \"%s\", %zu B pages)", e->datadir, keep ? "stopped: what was parsed is kept, from" : "started",
		 start < ck->lsn ? "restart point" : "checkpoint", start, size, h->creator, e->page_size);
	if (keep)
		return -1;
	return 0;
}

void ppl_store_start_from_disk(struct ppl_store *e)
{
	pthread_mutex_lock(&e->log_lock);
	if (!e->started && !e->stopped && e->building == NULL && locate_datadir(e, 0) && make_node(e, true) == 0) {
		char path[4096];
		struct stat st;
		snprintf(path, sizeof(path), "%s/ib_logfile0", e->datadir);
		if (store_stat(e, path, &st) == 0)
			__atomic_store_n(&e->log_fileid, (uint64_t)st.st_ino, __ATOMIC_RELEASE);
		__atomic_store_n(&e->log_write_ns, store_now_ns(e), __ATOMIC_RELAXED);
		start_ingest(e, TO_END);
		/* a restart: a client sends again the page writes it had not
		 * seen committed (keep_newer_pages), whenever ingest starts */
		if (e->started || __atomic_load_n(&e->start_pending, __ATOMIC_ACQUIRE))
			__atomic_store_n(&e->replay_until_ns, UINT64_MAX, __ATOMIC_RELEASE);
		if (!e->started && e->building != NULL) {
			/* not a usable log yet: the first log write tries again */
			ppl_node_free(e->building);
			e->building = NULL;
		}
	}
	pthread_mutex_unlock(&e->log_lock);
}

/* The log as ingest knew it is gone: replaced by MariaDB (ib_logfile101
 * renamed over it: a log resize or re-creation), removed (a datadir
 * removed), or being written from its first byte by something else (a
 * datadir copied in). Pages kept in the pool have records before the
 * new log's checkpoint that only the old index holds in memory: they go
 * to their data files (those a copy replaced have had their records
 * dropped already, I7), then the index is dropped and ingest starts over
 * at the next log write. */
static void detach(struct ppl_store *e, const char *why)
{
	rcu_read_lock();
	struct ppl_node *old = store_node_of(e);
	if (old && e->pool)
		store_materialize_elided(e, old);
	rcu_read_unlock();
	if (e->pool && e->dd && e->page_size)
		write_back_pool(e);
	pthread_mutex_lock(&e->log_lock);
	ppl_node_free(e->building);
	e->building = NULL;
	struct ppl_node *gone = e->node;
	__atomic_store_n(&e->node, NULL, __ATOMIC_RELEASE);
	bool was = e->started || e->stopped || gone;
	e->started = false;
	__atomic_store_n(&e->stopped, false, __ATOMIC_RELEASE);
	e->waiting_logged = false;
	e->start_attempts = 0;
	__atomic_store_n(&e->start_pending, false, __ATOMIC_RELEASE);
	pthread_cond_broadcast(&e->start_cond);
	e->suspect_upto = 0;
	__atomic_store_n(&e->log_fileid, 0, __ATOMIC_RELEASE);
	__atomic_store_n(&e->held, false, __ATOMIC_RELEASE);
	if (was)
		SLOG(e, PPL_LOG_EVENT, "PPL: %s: %s; ingest restarts at the log's checkpoint when MariaDB next "
			 "writes it", e->datadir, why);
	pthread_mutex_unlock(&e->log_lock);
	if (gone) {
		/* readers may be inside it (store_node_of) */
		synchronize_rcu();
		ppl_node_free(gone);
	}
	/* after the grace period: no reader of the old index can put a page
	 * into the cache's new generation (another datadir's pages reach
	 * the same LSNs) */
	if (e->cache)
		ppl_page_cache_forget_all(e->cache);
	/* Which file holds which space was learned from the old log's
	 * records and from files it named; the next log names its own. A
	 * file named by the old log and made again under the same name (a
	 * datadir bootstrapped again in place) would otherwise be taken
	 * for the old space, and its elided pages read as the zeros on
	 * disk. Every page elided so far is in its file now (above), page 0
	 * included, so the files are found again by their page 0. */
	ppl_filemap_clear(e->files);
	if (e->dd)
		ppl_datadir_forget_notes(e->dd);
	/* anything else noted about the old log's pages describes nothing now */
	pthread_mutex_lock(&e->elided_lock);
	if (e->elided_cap)
		memset(e->elided, 0, e->elided_cap * sizeof(*e->elided));
	e->elided_n = e->elided_used = 0;
	pthread_mutex_unlock(&e->elided_lock);
	e->gate_all = false;
}

/* How far behind a copy's furthest write a write may land and still be
 * the copy's (a client sends the pieces of a large write at once, and
 * they may arrive out of order). */
#define COPY_REORDER (4u << 20)

/* Whether a write is MariaDB's checkpoint block: a lone block at one of
 * the two checkpoint offsets, never part of a copy's sequential writes. */
static bool is_checkpoint_block(uint64_t off, size_t len)
{
	const struct ppl_redo_dialect *d = &ppl_dialect_mariadb_10_8;
	return (off == d->checkpoint_off[0] || off == d->checkpoint_off[1]) && len <= d->area_start - d->checkpoint_off[1];
}

/* One log at a time: while the one followed is written, writes of
 * another datadir's log under the same export are passed through and not
 * ingested (nothing of that datadir is elided or rebuilt: reads check the
 * file, store_served_rebuilt). Once it has been quiet for a while, another
 * log being written is a new datadir: follow it. */
enum other_log { OURS, OTHER_LIVE, OTHER_AFTER_QUIET };

static enum other_log other_log_write(struct ppl_store *e, uint64_t fileid)
{
	/* Without log_lock: with Ingest_Behind a log write asks this before
	 * it is queued, and must not wait for the parse that holds the lock.
	 * The fields are written atomically under it. */
	uint64_t followed = __atomic_load_n(&e->log_fileid, __ATOMIC_ACQUIRE);
	if (followed == 0 || fileid == followed)
		return OURS;
	uint64_t now = store_now_ns(e);
	__atomic_store_n(&e->other_log_ns, now, __ATOMIC_RELAXED);
	if (now - __atomic_load_n(&e->log_write_ns, __ATOMIC_RELAXED) > OTHER_LOG_QUIET_NS)
		return OTHER_AFTER_QUIET;
	if (__atomic_fetch_add(&e->other_log_writes, 1, __ATOMIC_RELAXED) == 0)
		SLOG(e, PPL_LOG_EVENT, "PPL: %s: another ib_logfile0 (fileid %" PRIu64 ") is written under the export "
			 "while this datadir's log is live: it is not ingested, and its datadir's pages are neither "
			 "elided nor rebuilt", e->datadir, fileid);
	return OTHER_LIVE;
}

int ppl_store_log_write(struct ppl_store *e, uint64_t fileid, uint64_t off, const struct iovec *iov, int iovcnt,
			 size_t len)
{
	if (!store_behind_on(e))
		return store_log_ingest(e, fileid, off, iov, iovcnt, len);
	/* Another datadir's log is told at once, not when the queue reaches
	 * it: an elision question meanwhile is refused as it would be
	 * without the queue (its pages could match this datadir's). */
	if (other_log_write(e, fileid) == OTHER_LIVE)
		return 0;
	return store_behind_enqueue(e, fileid, off, iov, iovcnt, len);
}

int store_log_ingest(struct ppl_store *e, uint64_t fileid, uint64_t off, const struct iovec *iov, int iovcnt,
		     size_t len)
{
	PPL_CRASH(LOG_WRITTEN);
	enum other_log o = other_log_write(e, fileid);
	if (o == OTHER_LIVE)
		return 0;
	if (o == OTHER_AFTER_QUIET)
		detach(e, "another ib_logfile0 is written after this one stayed quiet: a new datadir");
	pthread_mutex_lock(&e->log_lock);
	__atomic_store_n(&e->log_fileid, fileid, __ATOMIC_RELEASE);
	__atomic_store_n(&e->log_write_ns, store_now_ns(e), __ATOMIC_RELAXED);
	pthread_mutex_unlock(&e->log_lock);

	/* MariaDB's log writer never writes the header of ib_logfile0 (a
	 * new log is written as ib_logfile101 and renamed): a write from
	 * the first byte is a log being copied in (a migration, a restore,
	 * mysql-test-run's datadirs). Its bytes are not MariaDB's log
	 * writes, and parsing them as they arrive would stop ingest at the
	 * first byte past the copied log's end. Ingest waits while the copy
	 * goes on and starts from the log's checkpoint at MariaDB's first
	 * write of it: a checkpoint block, or a write well behind the copy. */
	if (off == 0 && len > 0) {
		pthread_mutex_lock(&e->log_lock);
		bool was = e->copying;
		pthread_mutex_unlock(&e->log_lock);
		if (!was)
			detach(e, "ib_logfile0 is being written from its first byte: a log copied in (MariaDB "
				  "writes a new log as ib_logfile101), not MariaDB's log writes; ingest waits "
				  "until the copy is done");
		pthread_mutex_lock(&e->log_lock);
		if (!e->copying)
			e->logs_copied_in++;
		e->copying = true;
		e->copy_end = off + len > e->copy_end || !was ? off + len : e->copy_end;
		pthread_mutex_unlock(&e->log_lock);
		return 0;
	}
	pthread_mutex_lock(&e->log_lock);
	if (e->copying) {
		if (!is_checkpoint_block(off, len) && off + len + COPY_REORDER > e->copy_end) {
			if (off + len > e->copy_end)
				e->copy_end = off + len;
			goto out;
		}
		e->copying = false;
		SLOG(e, PPL_LOG_EVENT, "PPL: %s: the log copied in is now written by MariaDB (%zu B at offset %" PRIu64
			 ")", e->datadir, len, off);
	}
	/* MariaDB creates its log at full size and never writes past its end.
	 * A write past the size ingest started with is the rest of a copy
	 * that was still arriving when ingest read the file (its pieces come
	 * out of order): the circular area, and so every wrap point, was
	 * taken too small. Start over with the file as it is now. */
	if (e->started && off + len > e->log_size) {
		uint64_t was = e->log_size;
		pthread_mutex_unlock(&e->log_lock);
		char why[200];
		snprintf(why, sizeof why, "ib_logfile0 is written up to %" PRIu64 ", past the %" PRIu64 " B ingest "
			 "started with (a copy still arriving)", off + len, was);
		detach(e, why);
		pthread_mutex_lock(&e->log_lock);
	}
	if (e->stopped)
		goto out;
	if (!e->started && e->building == NULL)
		locate_datadir(e, fileid);
	/* After a restart whose log was incomplete (start_pending): the
	 * file as it stands now, its last bytes held, as at an export's
	 * start -- pages the previous run elided may have records there. */
	bool pending = __atomic_load_n(&e->start_pending, __ATOMIC_ACQUIRE);
	if (!e->started && e->building == NULL && make_node(e, pending) != 0)
		goto out;
	if (!e->started) {
		start_ingest(e, pending ? TO_END : off + len); /* the file already holds this write */
		goto out;
	}
	if (off + len > ppl_dialect_mariadb_10_8.area_start) {
		__atomic_store_n(&e->last_log_write_ns, store_now_ns(e), __ATOMIC_RELAXED);
	}
	size_t left = len;
	for (int i = 0; i < iovcnt && left; i++) {
		size_t n = iov[i].iov_len < left ? iov[i].iov_len : left;
		if (ppl_node_log_write(e->node, off, iov[i].iov_base, n) != 0) {
			store_stop_ingest(e, ppl_node_error(e->node));
			break;
		}
		off += n;
		left -= n;
	}
	store_after_restart_parse(e, true);
	PPL_CRASH(LOG_PARSED);
out:
	pthread_mutex_unlock(&e->log_lock);
	return 0;
}

/* Whether fileid (0: unknown) is another log than the one followed. */
static bool other_log(struct ppl_store *e, uint64_t fileid)
{
	pthread_mutex_lock(&e->log_lock);
	bool other = e->log_fileid != 0 && fileid != e->log_fileid;
	pthread_mutex_unlock(&e->log_lock);
	return other;
}

void ppl_store_log_replaced(struct ppl_store *e, uint64_t old_fileid)
{
	store_behind_drain(e); /* the old log's last writes first */
	if (!other_log(e, old_fileid))
		detach(e, "ib_logfile0 was replaced (log resize or re-creation)");
}

void ppl_store_log_gone(struct ppl_store *e, uint64_t fileid)
{
	store_behind_drain(e);
	if (!other_log(e, fileid))
		detach(e, "ib_logfile0 was removed");
}
