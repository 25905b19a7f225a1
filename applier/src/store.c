/* The storage engine of one export. See ppl/store.h. */

#include <errno.h>
#include <dirent.h>
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

#include "ppl/datadir.h"
#include "ppl/elision_server.h"
#include "ppl/filemap.h"
#include "ppl/node.h"
#include "ppl/pool.h"
#include "ppl/page.h"
#include "ppl/redo.h"
#include "ppl/store_config.h"
#include "ppl/store.h"
#include "ppl/log.h"
#include "ppl/histogram.h"
#include "ppl/page_cache.h"

#define STRIPES 1024u

#define SLOG(e, level, ...) PPL_LOG(&(e)->env.log, level, __VA_ARGS__)

struct ppl_store {
	struct ppl_store_env env;     /* the host's logger, thread hook and clock */
	char *exportdir;
	char *datadir;                 /* where ib_logfile0 is: the export, or a directory in it */
	pthread_mutex_t log_lock;      /* ingest is one thread at a time (node.h) */
	pthread_mutex_t order_lock;    /* held from a log write's begin to its end */
	struct ppl_node *node;         /* published once started, under log_lock */
	struct ppl_node *building;     /* not yet started: no reader sees it */
	bool started;                  /* parsing from a checkpoint */
	bool stopped;                  /* the log could not be parsed: ingest off */
	bool waiting_logged;
	unsigned start_attempts;       /* catch-ups from the file that met a damaged tail */
	size_t page_size;
	struct ppl_datadir *dd;        /* pages by space id, for reads that cover part of a page */
	size_t cache_bytes;            /* Page_Cache_Size; the cache is made once the page size is known */
	struct ppl_page_cache *cache;

	struct ppl_filemap *files;     /* which space each file holds */

	/* Elision (when configured): the pool's doublewrite slots, the
	 * service, and the page-write stripes that keep materialization and
	 * MariaDB's own writes of a page apart. */
	struct ppl_pool *pool;
	struct ppl_elision_server *elision;
	pthread_mutex_t stripe_lock;
	pthread_cond_t stripe_cond;
	uint32_t inflight[STRIPES];    /* page writes between begin and end */
	uint8_t busy[STRIPES];         /* materialization in progress */
	pthread_mutex_t gate_lock;     /* one checkpoint gate at a time */
	bool gate_all;                 /* the elided set is incomplete: gate every page */
	/* pages acknowledged (elided) since their last base: each must be
	 * materialized before a checkpoint passes its records */
	pthread_mutex_t elided_lock;
	uint64_t *elided;              /* open addressing, key+2 (0 empty, 1 removed) */
	size_t elided_n, elided_used, elided_cap;
	uint64_t materialized, gate_waits, gate_ns;
	/* pages whose records went to the pool instead, records appended,
	 * materialized because over the cap or because the pool was full */
	uint64_t pool_kept, pool_records, pool_over_cap, pool_full;
	uint64_t pool_loaded_pages, pool_loaded_records; /* put back at a restart */
	uint64_t cleaned, ahead;       /* materialized by the cleaner; settled ahead of a checkpoint */

	/* Background apply (Apply_Threads): worker i settles the elided pages
	 * whose key hashes to i, ahead of the checkpoints, and cleans the
	 * pool when its free blocks run low. */
	pthread_t workers[PPL_MAX_APPLY_THREADS];
	unsigned nworkers, nstarted;
	uint64_t log_capacity;         /* bytes of records the log file holds */
	uint64_t log_size;             /* the log file's size when ingest started */
	pthread_mutex_t work_lock;
	pthread_cond_t work_cond;
	bool work_stop;

	uint64_t reads, pages_rebuilt, rebuild_failures, pages_written, stale_writes;
	struct ppl_histogram mtrs_per_rebuild; /* mini-transactions applied per page rebuilt for a read */
	uint64_t suspect_upto;         /* after a restart: pages with records below this LSN may
					* have been elided by the previous run (mark_suspect) */
	uint64_t suspect_seen, suspect_writes;
	/* After a restart, the log's last bytes are not known to be final
	 * (feed_to_end holds them back): the pages their records touch, by
	 * key, with the end of their last record there. A read of one waits
	 * until the parse has passed it (hold_wait). Written before `held`
	 * is set, never changed after. */
	struct held_page *held_pages;
	size_t held_n;
	uint64_t held_max;
	bool held;                     /* atomic */
	uint64_t restart_ns, last_log_write_ns; /* atomic */
	uint64_t held_waits, held_timeouts;
	bool verify;                   /* Verify = true: page writes compared with rebuilds */
	/* A log written from its first byte is a log being copied in, not
	 * MariaDB's log writer (see ppl_store_log_write): ingest waits
	 * while the copy goes on, sequentially up from copy_end. */
	bool copying;
	uint64_t copy_end;
	/* The log file ingest follows (0: none yet) and when it was last
	 * written: another datadir's ib_logfile0 under the same export is not
	 * this one's log (see ppl_store_log_write). */
	uint64_t log_fileid, log_write_ns, other_log_writes;
	/* When a log of another datadir was last written (0: never). The
	 * elision protocol does not say which datadir a page is of, so while
	 * another server writes under the export nothing is elided: its
	 * bootstrap pages can match this datadir's page for page (same
	 * spaces, LSNs, checksums), and its file would then lack them. */
	uint64_t other_log_ns;
	/* After a storage-node restart a client sends again the page writes
	 * it had not seen committed (ppl-mount when the write verifier
	 * changes, with MariaDB's first write after the restart, which may be
	 * a checkpoint): until 30 s after MariaDB's first checkpoint since the
	 * restart, a page image older than its file's is such a replay
	 * (keep_newer_pages). Anywhere else an older image is a file written
	 * by something else (mysql-test-run copying a datadir over one just
	 * removed), which a disk would take. 0: no restart; UINT64_MAX: no
	 * checkpoint since it. */
	uint64_t replay_until_ns;
	uint64_t superseded_writes, spaces_dropped, logs_copied_in, partial_overwrites;
	uint32_t dw_page_size;         /* the largest page the pool's doublewrite slots hold */
	uint64_t verify_same, verify_diverged, verify_skipped;
};

struct held_page {
	uint64_t key, lsn;
};

/* How many times ingest start may find a damaged log tail before the
 * damage counts as real (see start_ingest). */
#define START_ATTEMPTS 8

static uint64_t now_ns(const struct ppl_store *e)
{
	if (e->env.now_ns)
		return e->env.now_ns(e->env.clock_arg);
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

static int checkpoint_gate(struct ppl_store *e, uint64_t off, const struct iovec *iov, int iovcnt, size_t len);
static int gate(struct ppl_store *e, struct ppl_node *n, uint64_t ckpt, uint64_t end);
static void on_file(void *arg, const struct ppl_node_file_event *ev);
static bool elided_put(struct ppl_store *e, uint64_t key, bool add);
static void materialize_elided(struct ppl_store *e, struct ppl_node *n);
static void stop_workers(struct ppl_store *e);
static bool file_space(struct ppl_store *e, uint64_t fileid, uint32_t *space);
static void drop_space(struct ppl_store *e, uint32_t space, const char *why);
static bool elided_has(struct ppl_store *e, uint64_t key);
static bool served_rebuilt(struct ppl_store *e, uint32_t space, uint32_t page_no);
static bool holds_space(struct ppl_store *e, uint64_t fileid, uint32_t space);
static bool held_has(struct ppl_store *e, uint64_t key);
static int settle_page(struct ppl_store *e, struct ppl_node *n, uint32_t space, uint32_t page_no);
static int materialize_page(struct ppl_store *e, struct ppl_node *n, uint32_t space, uint32_t page_no);
static void detach(struct ppl_store *e, const char *why);
static void write_back_pool(struct ppl_store *e);
static size_t elided_drop_space(struct ppl_store *e, uint32_t space);
static size_t elided_drop_pages(struct ppl_store *e, uint32_t space, uint32_t first_page);

/* The published node. Outside log_lock, only inside an RCU read-side
 * section (urcu-bp: every thread registers itself): a node replaced
 * (detach) is freed only after every such section that could have seen
 * it has ended. */
static struct ppl_node *node_of(struct ppl_store *e)
{
	return __atomic_load_n(&e->node, __ATOMIC_ACQUIRE);
}

/* The logger the store gives its parts (node, pool, elision service):
 * their messages, under the datadir's name, to the host's logger. */
static void part_log(void *arg, enum ppl_log_level level, const char *func, int line, const char *msg)
{
	struct ppl_store *e = arg;
	ppl_logf(&e->env.log, level, func, line, "PPL: %s: %s", e->datadir, msg);
}

static bool part_enabled(void *arg, enum ppl_log_level level)
{
	struct ppl_store *e = arg;
	return !e->env.log.enabled || e->env.log.enabled(e->env.log.arg, level);
}

static struct ppl_logger part_logger(struct ppl_store *e)
{
	return (struct ppl_logger){.log = part_log, .enabled = part_enabled, .arg = e};
}

struct ppl_store *ppl_store_new(const char *datadir, const struct ppl_store_env *env)
{
	struct ppl_store *e = calloc(1, sizeof(*e));
	if (e == NULL)
		return NULL;
	if (env)
		e->env = *env;
	e->exportdir = strdup(datadir);
	e->datadir = strdup(datadir);
	e->files = ppl_filemap_new();
	if (e->datadir == NULL || e->exportdir == NULL || e->files == NULL) {
		ppl_filemap_free(e->files);
		free(e->exportdir);
		free(e->datadir);
		free(e);
		return NULL;
	}
	pthread_mutex_init(&e->log_lock, NULL);
	pthread_mutex_init(&e->order_lock, NULL);
	pthread_mutex_init(&e->stripe_lock, NULL);
	pthread_cond_init(&e->stripe_cond, NULL);
	pthread_mutex_init(&e->gate_lock, NULL);
	pthread_mutex_init(&e->elided_lock, NULL);
	pthread_mutex_init(&e->work_lock, NULL);
	pthread_cond_init(&e->work_cond, NULL);
	return e;
}

void ppl_store_free(struct ppl_store *e)
{
	if (e == NULL)
		return;
	/* the service and the workers first: their threads call into the node */
	if (e->elision)
		ppl_elision_server_stop(e->elision);
	stop_workers(e);
	/* A clean stop leaves a datadir MariaDB can use without this node:
	 * pages kept in the pool go to their files (after a crash they come
	 * back from the pool at the next start instead). */
	if (e->pool && e->node)
		materialize_elided(e, e->node);
	ppl_pool_close(e->pool);
	pthread_mutex_destroy(&e->stripe_lock);
	pthread_cond_destroy(&e->stripe_cond);
	pthread_mutex_destroy(&e->gate_lock);
	pthread_mutex_destroy(&e->elided_lock);
	pthread_mutex_destroy(&e->work_lock);
	pthread_cond_destroy(&e->work_cond);
	free(e->elided);
	free(e->held_pages);
	ppl_node_free(e->node);
	ppl_node_free(e->building);
	ppl_datadir_close(e->dd);
	ppl_page_cache_free(e->cache);
	pthread_mutex_destroy(&e->log_lock);
	pthread_mutex_destroy(&e->order_lock);
	ppl_filemap_free(e->files);
	free(e->datadir);
	free(e->exportdir);
	free(e);
}

/* ---- which space a file holds -------------------------------------------- */

static void map_set(struct ppl_store *e, uint64_t fileid, uint32_t space)
{
	if (fileid == 0)
		return;
	/* The datadir learns which file holds the space, for a file whose
	 * page 0 never reached the disk; also when the map is out of memory
	 * (-1): the map only spares the datadir's lookup. */
	if (ppl_filemap_set(e->files, fileid, space) != 0 && e->dd)
		ppl_datadir_bind(e->dd, fileid, space);
}

static bool map_get(struct ppl_store *e, uint64_t fileid, uint32_t *space)
{
	return ppl_filemap_get(e->files, fileid, space);
}

void ppl_store_file_gone(struct ppl_store *e, uint64_t fileid)
{
	/* I7: what the log said about a file that is gone describes nothing
	 * any more. A space id can come back with another file (undo
	 * tablespaces re-created, IMPORT into a table whose file was
	 * discarded): its old records must never reach that file, and an
	 * elided page of a removed file has no file to be materialized into.
	 * Its inode number can come back with a new file too, which must not
	 * be taken for the old space: the binding is removed, not kept. */
	/* A copy of a page file (mysql-test-run copies a table's file aside
	 * and removes the copy; a backup tool does the same) names its space
	 * in page 0 like the space's own file, but its removal leaves the
	 * space's file and its elided pages as they are: only the file the
	 * space is bound to (by the map, or a note of the datadir's), or the
	 * last file that holds it, takes the space with it. */
	uint32_t space, bound;
	bool mapped = map_get(e, fileid, &space);
	if (mapped || (e->dd && ppl_datadir_space_of(e->dd, fileid, &space) == 0)) {
		bool is_its_file = mapped || (ppl_datadir_bound_space(e->dd, fileid, &bound) == 0 && bound == space);
		if (!is_its_file && ppl_datadir_held_elsewhere(e->dd, space, fileid))
			SLOG(e, PPL_LOG_EVENT, "PPL: %s: a file whose page 0 names space %" PRIu32 " was removed "
				 "(fileid %" PRIu64 "), but it is not that space's file (a copy of it): the space "
				 "keeps its records and elided pages", e->datadir, space, fileid);
		else
			drop_space(e, space, "its file was removed");
	}
	ppl_filemap_remove(e->files, fileid, NULL);
	if (e->dd)
		ppl_datadir_forget(e->dd, fileid);
}

/* The space a file holds, by what its pages or the log said. */
static bool file_space(struct ppl_store *e, uint64_t fileid, uint32_t *space)
{
	return map_get(e, fileid, space) || (e->dd && ppl_datadir_space_of(e->dd, fileid, space) == 0);
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

/* The directory holding the ib_logfile0 with this inode (0: any): the export
 * itself, or a directory up to three levels down (a datadir inside the
 * export). */
static bool find_log(const char *dir, uint64_t ino, int depth, char *out, size_t outlen)
{
	char p[4096];
	struct stat st;
	snprintf(p, sizeof(p), "%s/ib_logfile0", dir);
	if (stat(p, &st) == 0 && (ino == 0 || (uint64_t)st.st_ino == ino)) {
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

static void pool_forget_datadir(struct ppl_store *e, const char *old);

static bool locate_datadir(struct ppl_store *e, uint64_t log_fileid)
{
	char dir[4096];
	if (!find_log(e->exportdir, log_fileid, 3, dir, sizeof(dir)))
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
	uint8_t hdr[PPL_FSP_HEADER_OFFSET + PPL_FSP_SPACE_FLAGS + 4];
	if (read_file(e->datadir, "ibdata1", hdr, sizeof(hdr), 0, NULL) != 0)
		return -1;
	uint32_t flags = ppl_rd4(hdr + PPL_FSP_HEADER_OFFSET + PPL_FSP_SPACE_FLAGS);
	if (flags == 0 && ppl_rd4(hdr + PPL_FIL_PAGE_SPACE_ID) == 0 && ppl_page_lsn(hdr) == 0)
		return -1; /* page 0 not written yet (a datadir being created) */
	size_t ps = ppl_fsp_flags_page_size(flags);
	if (ps == 0) {
		SLOG(e, PPL_LOG_CRIT, "PPL: %s: ibdata1 is not a full_crc32 tablespace this engine reads; "
			"redo is not ingested and pages are served as the data files hold them", e->datadir);
		e->stopped = true;
		return -1;
	}
	struct ppl_node_config c = { .page_size = ps, .log = part_logger(e), .log_is_file_image = from_file };
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
		e->dd = ppl_datadir_open(e->datadir, err, sizeof(err));
	}
	return 0;
}

static void stop_ingest(struct ppl_store *e, const char *why)
{
	e->stopped = true;
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
		if (read_file(e->datadir, "ib_logfile0", b, len, from, NULL) != 0 ||
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
	if (!elided_put(e, (uint64_t)space << 32 | page_no, true))
		e->gate_all = true; /* out of memory: every page counts as elided */
}

/* The log held back at a restart (feed_to_end) is parsed as MariaDB writes
 * again: its pages may have been elided by the previous run too. Called
 * with log_lock held. */
static void after_restart_parse(struct ppl_store *e, bool log_write)
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
 * node of its own; 0 if it cannot be read. */
static uint64_t valid_end(struct ppl_store *e, uint64_t ck_lsn, uint64_t from, uint64_t size, uint64_t area)
{
	struct ppl_node_config c = { .page_size = e->page_size, .log_is_file_image = true };
	struct ppl_node *n = ppl_node_new(&c);
	uint8_t *hdr = malloc(area);
	uint64_t end = 0;
	if (n != NULL && hdr != NULL && read_file(e->datadir, "ib_logfile0", hdr, area, 0, NULL) == 0 &&
	    ppl_node_log_open(n, size) == 0 && ppl_node_log_write(n, 0, hdr, area) == 0 &&
	    ppl_node_log_start(n, ck_lsn) == 0 && feed_circle(e, n, from, size - area, size, area, true) == 0)
		end = ppl_node_parsed_lsn(n);
	free(hdr);
	ppl_node_free(n);
	return end;
}

static int held_cmp(const void *a, const void *b)
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
	if (n != NULL && hdr != NULL && read_file(e->datadir, "ib_logfile0", hdr, area, 0, NULL) == 0 &&
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
	qsort(w.v, w.n, sizeof(*w.v), held_cmp);
	uint64_t max = 0;
	for (size_t i = 0; i < w.n; i++)
		max = w.v[i].lsn > max ? w.v[i].lsn : max;
	e->held_pages = w.v;
	e->held_n = w.n;
	e->held_max = max;
	__atomic_store_n(&e->restart_ns, now_ns(e), __ATOMIC_RELAXED);
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
	uint64_t end = valid_end(e, ck_lsn, from, size, area);
	if (end == 0)
		return -1;
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

/* ---- per-page records kept in the pool, put back at a restart ---------- */

/* Page keys (space << 32 | page) collected by a walk, to act on after it
 * (the walks hold locks the actions take). */
struct key_list {
	uint64_t *keys;
	size_t n, cap;
	bool incomplete;               /* out of memory: some page is missing */
};

static void key_list_add(struct key_list *l, uint32_t space, uint32_t page_no)
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
	key_list_add(arg, space, page_no);
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

/* After a restart the index starts at MariaDB's checkpoint; the records of
 * pages kept in the pool instead of materialized (settle()) lie before it
 * and come back from the pool (I6), and the pages count as elided again:
 * their newest version exists nowhere but in records. Records the data
 * file already holds (a write that reached it just before the crash) are
 * skipped, not reclaimed here: a reclaim that keeps later records needs
 * new blocks, and in a full pool those records would fall back to DRAM
 * although the log no longer holds them. */
static int load_pool(struct ppl_store *e, struct ppl_node *n, uint64_t ck_lsn, uint64_t capacity)
{
	struct key_list k = { 0 };
	uint64_t t0 = now_ns(e), durable = ppl_pool_durable_lsn(e->pool);
	ppl_pool_for_each_page(e->pool, collect_pool_page, &k);
	if (k.incomplete) {
		free(k.keys);
		stop_ingest(e, "out of memory listing the pool's pages");
		return -1;
	}
	if (k.n && durable > ck_lsn + capacity) {
		free(k.keys);
		stop_ingest(e, "the pool's records reach LSN beyond anything this log can have written: the pool "
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
				       .before = ck_lsn };
		if (ppl_datadir_read_page(e->dd, l.space, l.page_no, frame, e->page_size) == 0) {
			if (ppl_page_no(frame) == l.page_no && ppl_page_space(frame) == l.space)
				l.file_lsn = ppl_page_lsn(frame);
		} else if (unfound++ < 8) {
			SLOG(e, PPL_LOG_CRIT, "PPL: %s: the pool holds records of page %" PRIu32 ":%" PRIu32 " but no "
				"file of space %" PRIu32 " is found: they are kept; MariaDB's checkpoint cannot pass "
				"them until the file is back", e->datadir, l.space, l.page_no, l.space);
		}
		enum ppl_pool_status st = ppl_pool_records(e->pool, l.space, l.page_no, pool_rec_to_node, &l);
		if (st == PPL_POOL_CORRUPT) {
			char why[160];
			snprintf(why, sizeof(why), "the pool's records of page %" PRIu32 ":%" PRIu32 " fail their "
				 "checksum (ppl-inspect pool dump shows them)", l.space, l.page_no);
			stop_ingest(e, why);
			rc = -1;
		} else if (l.failed) {
			stop_ingest(e, "out of memory putting the pool's records back into the index");
			rc = -1;
		} else if (l.added && !elided_put(e, k.keys[i], true)) {
			stop_ingest(e, "out of memory noting the pages put back from the pool");
			rc = -1;
		} else if (l.added) {
			list_page(some, sizeof(some), e->pool_loaded_pages, l.space, l.page_no);
			e->pool_loaded_pages++;
			e->pool_loaded_records += l.added;
		} else if (l.file_lsn) {
			/* nothing before the checkpoint the file lacks: the
			 * blocks are free again (later records are in the log) */
			ppl_pool_reclaim(e->pool, l.space, l.page_no, l.file_lsn);
		}
	}
	free(frame);
	free(k.keys);
	if (rc == 0 && k.n)
		SLOG(e, PPL_LOG_EVENT, "PPL: %s: %" PRIu64 " page(s)%s%s%s with %" PRIu64 " record(s) before the "
			 "checkpoint LSN %" PRIu64 " put back from the pool in %.3f s", e->datadir,
			 e->pool_loaded_pages, some[0] ? " (" : "", some,
			 some[0] ? (e->pool_loaded_pages > 4 ? ", ...)" : ")") : "",
			 e->pool_loaded_records, ck_lsn, (double)(now_ns(e) - t0) / 1e9);
	return rc;
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
	int got = read_file(e->datadir, "ib_logfile0", hdr, area, 0, &size);
	if (got != 0 || size <= area || (write_end != TO_END && write_end < area)) {
		free(hdr);
		return 0; /* the header is not written yet */
	}
	if (ppl_node_log_open(e->building, size) != 0) {
		free(hdr);
		stop_ingest(e, "ib_logfile0 is too small to be a redo log");
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
	if (ppl_node_log_start(e->building, ck->lsn) != 0) {
		stop_ingest(e, "the checkpoint LSN is before the log's first LSN");
		return -1;
	}
	uint64_t from = ppl_redo_offset_of(r, ck->lsn);
	e->log_capacity = size - area;
	if (e->pool != NULL && load_pool(e, e->building, ck->lsn, size - area) != 0)
		return -1;
	int rc = 0;
	if (write_end == TO_END) {
		rc = feed_to_end(e, ck->lsn, from, size, area);
	} else if (write_end > from) {
		rc = feed_file(e, from, write_end);
	} else {
		rc = feed_file(e, from, size);
		if (rc == 0)
			rc = feed_file(e, area, write_end);
	}
	if (rc != 0 && ppl_node_error(e->building) && ++e->start_attempts < START_ATTEMPTS) {
		/* The file was read while other pieces of MariaDB's log write
		 * (a client splits a large write into several WRITEs that run
		 * at once) may not have reached it: their old bytes fail the
		 * CRC. MariaDB's next log write starts after the whole of
		 * this one is on disk; catch up then. Damage that persists
		 * is real and stops ingest below. */
		SLOG(e, PPL_LOG_EVENT, "PPL: %s: the log read at ingest start ends in bytes still being written "
			 "(%s); starting again at the next log write", e->datadir, ppl_node_error(e->building));
		ppl_node_free(e->building);
		e->building = NULL;
		return 0;
	}
	if (rc != 0) {
		stop_ingest(e, ppl_node_error(e->building) ? ppl_node_error(e->building) : "cannot read ib_logfile0");
		return -1;
	}
	e->start_attempts = 0;
	e->started = true;
	/* The writes the previous run elided are not known: any page with
	 * records from the log read here may be one of them, and stays in
	 * the elided set until it is materialized or written in full. */
	if (e->pool != NULL)
		ppl_node_for_each_page(e->building, mark_suspect, e);
	ppl_node_on_file_event(e->building, on_file, e);
	__atomic_store_n(&e->node, e->building, __ATOMIC_RELEASE);
	e->building = NULL;
	SLOG(e, PPL_LOG_EVENT, "PPL: %s: redo ingest started at the checkpoint LSN %" PRIu64 " (log of %" PRIu64
		 " B by \"%s\", %zu B pages)", e->datadir, ck->lsn, size, h->creator, e->page_size);
	return 0;
}

void ppl_store_start_from_disk(struct ppl_store *e)
{
	pthread_mutex_lock(&e->log_lock);
	if (!e->started && !e->stopped && e->building == NULL && locate_datadir(e, 0) && make_node(e, true) == 0) {
		char path[4096];
		struct stat st;
		snprintf(path, sizeof(path), "%s/ib_logfile0", e->datadir);
		if (stat(path, &st) == 0)
			e->log_fileid = (uint64_t)st.st_ino;
		e->log_write_ns = now_ns(e);
		start_ingest(e, TO_END);
		if (e->started)
			__atomic_store_n(&e->replay_until_ns, UINT64_MAX, __ATOMIC_RELEASE);
		if (!e->started && e->building != NULL) {
			/* not a usable log yet: the first log write tries again */
			ppl_node_free(e->building);
			e->building = NULL;
		}
	}
	pthread_mutex_unlock(&e->log_lock);
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

/* How long the log followed must have been quiet before another
 * ib_logfile0 under the export is taken for MariaDB's log (a datadir made
 * or copied next to the old one, as mysql-test-run does). */
#define OTHER_LOG_QUIET_NS (5 * 1000000000ull)
/* How long after MariaDB's first checkpoint since a restart a client's
 * replays of older page writes are still expected. */
#define REPLAY_AFTER_CHECKPOINT_NS (30 * 1000000000ull)

int ppl_store_log_write(struct ppl_store *e, uint64_t fileid, uint64_t off, const struct iovec *iov, int iovcnt,
			 size_t len)
{
	/* One log at a time: while the one followed is written, writes of
	 * another datadir's log under the same export are passed through
	 * and not ingested (nothing of that datadir is elided or rebuilt:
	 * reads check the file, served_rebuilt). Once it has been quiet for
	 * a while, another log being written is a new datadir: follow it. */
	pthread_mutex_lock(&e->log_lock);
	bool other = e->log_fileid != 0 && fileid != e->log_fileid;
	bool quiet = now_ns(e) - e->log_write_ns > OTHER_LOG_QUIET_NS;
	if (other)
		__atomic_store_n(&e->other_log_ns, now_ns(e), __ATOMIC_RELAXED);
	if (other && !quiet && e->other_log_writes++ == 0)
		SLOG(e, PPL_LOG_EVENT, "PPL: %s: another ib_logfile0 (fileid %" PRIu64 ") is written under the export "
			 "while this datadir's log is live: it is not ingested, and its datadir's pages are neither "
			 "elided nor rebuilt", e->datadir, fileid);
	pthread_mutex_unlock(&e->log_lock);
	if (other && !quiet)
		return 0;
	if (other)
		detach(e, "another ib_logfile0 is written after this one stayed quiet: a new datadir");
	pthread_mutex_lock(&e->log_lock);
	e->log_fileid = fileid;
	e->log_write_ns = now_ns(e);
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
	if (!e->started && e->building == NULL && make_node(e, false) != 0)
		goto out;
	if (!e->started) {
		start_ingest(e, off + len); /* the file already holds this write */
		goto out;
	}
	if (off + len > ppl_dialect_mariadb_10_8.area_start)
		__atomic_store_n(&e->last_log_write_ns, now_ns(e), __ATOMIC_RELAXED);
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
	after_restart_parse(e, true);
out:
	pthread_mutex_unlock(&e->log_lock);
	return 0;
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
	struct ppl_node *old = node_of(e);
	if (old && e->pool)
		materialize_elided(e, old);
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
	e->stopped = false;
	e->waiting_logged = false;
	e->start_attempts = 0;
	e->suspect_upto = 0;
	e->log_fileid = 0;
	__atomic_store_n(&e->held, false, __ATOMIC_RELEASE);
	if (was)
		SLOG(e, PPL_LOG_EVENT, "PPL: %s: %s; ingest restarts at the log's checkpoint when MariaDB next "
			 "writes it", e->datadir, why);
	pthread_mutex_unlock(&e->log_lock);
	if (gone) {
		/* readers may be inside it (node_of) */
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
	if (!other_log(e, old_fileid))
		detach(e, "ib_logfile0 was replaced (log resize or re-creation)");
}

void ppl_store_log_gone(struct ppl_store *e, uint64_t fileid)
{
	if (!other_log(e, fileid))
		detach(e, "ib_logfile0 was removed");
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

/* The inode of the file the datadir followed has, there now, for space. */
static bool space_file_ino(struct ppl_store *e, uint32_t space, uint64_t *ino)
{
	char path[4096];
	struct stat st;
	if (e->dd == NULL || ppl_datadir_path(e->dd, space, path, sizeof(path)) != 0 || stat(path, &st) != 0)
		return false;
	*ino = (uint64_t)st.st_ino;
	return true;
}

/* The space a page belongs to: its header says, or (a page never written)
 * what the file's other pages said. */
static bool page_space(struct ppl_store *e, uint64_t fileid, const uint8_t *page, uint32_t page_no,
		       uint32_t *space)
{
	if (ppl_page_no(page) == page_no && !all_zero(page, e->page_size)) {
		*space = ppl_page_space(page);
		/* A page file copied under another name (a backup, the
		 * .ibd copied for IMPORT TABLESPACE) carries its space's
		 * pages; they are not that space's pages while the space's
		 * own file is elsewhere: no base, no binding (I7). */
		uint32_t known;
		if (map_get(e, fileid, &known) && known == *space)
			return true; /* the usual case, without a look at the datadir */
		uint64_t ino;
		if (space_file_ino(e, *space, &ino) && ino != fileid)
			return false;
		map_set(e, fileid, *space);
		return true;
	}
	/* else what its other pages said, or (a file none of whose pages
	 * reached the disk yet) what the log named it */
	if (!file_space(e, fileid, space))
		return false;
	map_set(e, fileid, *space);
	return true;
}

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
		elided_drop_space(e, ev->space_id);
	}
	/* an undo tablespace truncated: only the pages past its new end go */
	if (ev->type == PPL_EXT_TRIM_PAGES) {
		if (e->pool)
			pool_drop_pages(e, ev->space_id, ev->pages);
		elided_drop_pages(e, ev->space_id, ev->pages);
	}
	if (ev->type == PPL_FILE_CREATE)
		ppl_datadir_note(e->dd, ev->space_id, ev->name);
	else if (ev->type == PPL_FILE_RENAME)
		ppl_datadir_note(e->dd, ev->space_id, ev->name2);
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
static int hold_wait(struct ppl_store *e, struct ppl_node *n, uint32_t space, uint32_t page_no)
{
	if (!__atomic_load_n(&e->held, __ATOMIC_ACQUIRE))
		return 0;
	struct held_page k = { (uint64_t)space << 32 | page_no, 0 };
	const struct held_page *h = bsearch(&k, e->held_pages, e->held_n, sizeof(k), held_cmp);
	if (h == NULL || ppl_node_parsed_lsn(n) >= h->lsn)
		return 0;
	__atomic_add_fetch(&e->held_waits, 1, __ATOMIC_RELAXED);
	uint64_t t0 = now_ns(e);
	/* Woken by the parse as soon as it passes the page's records; the
	 * slice only bounds how late a quiet log or the limit is noticed. */
	while (!ppl_node_wait_parsed(n, h->lsn, HOLD_SLICE_NS) && !e->stopped) {
		uint64_t now = now_ns(e), since = __atomic_load_n(&e->last_log_write_ns, __ATOMIC_RELAXED);
		uint64_t restart = __atomic_load_n(&e->restart_ns, __ATOMIC_RELAXED);
		since = since > restart ? since : restart;
		if (now - since > HOLD_QUIET_NS) {
			pthread_mutex_lock(&e->log_lock);
			if (e->started && !e->stopped && e->node == n && ppl_node_log_durable(n, h->lsn) != 0)
				stop_ingest(e, ppl_node_error(n));
			/* pages the tail's records touch may have been elided by
			 * the previous run too */
			if (e->started && e->node == n)
				after_restart_parse(e, false);
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

static int read_pages(struct ppl_store *e, struct ppl_node *n, uint64_t fileid, uint64_t off, struct iovec *iov,
		      int iovcnt, size_t len)
{
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
		if (!page_space(e, fileid, frame, page_no, &space) || !served_rebuilt(e, space, page_no) ||
		    !holds_space(e, fileid, space))
			continue;
		if ((rc = hold_wait(e, n, space, page_no)) != 0)
			break;
		/* before the records are looked at: a page rebuilt from
		 * records a new generation has left behind is not cached */
		uint64_t gen = e->cache ? ppl_page_cache_generation(e->cache) : 0;
		if (!ppl_node_page_info(n, space, page_no, &info))
			continue;
		/* the log initializes the page: the rebuild does not read the base */
		uint64_t base = info.from_init ? 0 : ppl_page_lsn(frame);
		uint32_t base_sum = info.from_init ? 0 : ppl_rd4(frame + ps - 4);
		if (e->cache && ppl_page_cache_get(e->cache, space, page_no, base, base_sum, info.last_lsn, frame)) {
			iov_copy(iov, iovcnt, p - off, frame, ps, false);
			__atomic_add_fetch(&e->pages_rebuilt, 1, __ATOMIC_RELAXED);
			continue;
		}
		bool changed = false;
		struct ppl_apply_error err;
		enum ppl_apply_status st = ppl_node_rebuild(n, space, page_no, frame, UINT64_MAX, &changed, &err);
		if (st != PPL_APPLY_OK) {
			__atomic_add_fetch(&e->rebuild_failures, 1, __ATOMIC_RELAXED);
			SLOG(e, PPL_LOG_CRIT, "PPL: %s: page %" PRIu32 ":%" PRIu32 " cannot be rebuilt (%s); the "
				"READ fails rather than serve a page that may be wrong", e->datadir, space, page_no,
				err.msg);
			rc = EIO;
			break;
		}
		if (changed) {
			iov_copy(iov, iovcnt, p - off, frame, ps, false);
			__atomic_add_fetch(&e->pages_rebuilt, 1, __ATOMIC_RELAXED);
			ppl_histogram_add(&e->mtrs_per_rebuild, info.chunks);
			if (e->cache)
				ppl_page_cache_put(e->cache, gen, space, page_no, base, base_sum, ppl_page_lsn(frame),
						   frame);
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
		if (!file_space(e, fileid, &space) || !served_rebuilt(e, space, (uint32_t)pg) ||
		    !holds_space(e, fileid, space))
			continue;
		if ((rc = hold_wait(e, n, space, (uint32_t)pg)) != 0)
			break;
		if (!ppl_node_page_info(n, space, (uint32_t)pg, &info))
			continue;
		if (frame == NULL && (frame = aligned_alloc(4096, ps)) == NULL)
			return ENOMEM;
		bool changed = false;
		struct ppl_apply_error err;
		if (e->dd == NULL || ppl_datadir_read_page(e->dd, space, (uint32_t)pg, frame, ps) != 0 ||
		    ppl_node_rebuild(n, space, (uint32_t)pg, frame, UINT64_MAX, &changed, &err) != PPL_APPLY_OK) {
			__atomic_add_fetch(&e->rebuild_failures, 1, __ATOMIC_RELAXED);
			SLOG(e, PPL_LOG_CRIT, "PPL: %s: a READ of part of page %" PRIu32 ":%" PRIu64 " cannot be "
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

int ppl_store_read(struct ppl_store *e, uint64_t fileid, uint64_t off, struct iovec *iov, int iovcnt,
		    size_t len)
{
	rcu_read_lock();
	struct ppl_node *n = node_of(e);
	int rc = n ? read_pages(e, n, fileid, off, iov, iovcnt, len) : 0;
	rcu_read_unlock();
	return rc;
}

/* A page of a file was overwritten with bytes that are not that page: its
 * records and its place in the elided set and the pool go (I7). */
/* Everything held for the page goes: index, pool, elided set. */
static bool forget_page(struct ppl_store *e, struct ppl_node *n, uint32_t space, uint32_t page_no)
{
	uint8_t hdr[38] = { 0 }; /* FIL_PAGE_DATA: the header page_written reads */
	ppl_wr4(hdr + PPL_FIL_PAGE_OFFSET, page_no);
	ppl_wr4(hdr + PPL_FIL_PAGE_SPACE_ID, space);
	if (!ppl_node_page_info(n, space, page_no, &(struct ppl_node_page_info){ 0 }))
		return false;
	ppl_node_page_written(n, hdr, UINT64_MAX);
	if (e->pool)
		ppl_pool_reclaim(e->pool, space, page_no, UINT64_MAX);
	elided_put(e, (uint64_t)space << 32 | page_no, false);
	return true;
}

static void page_overwritten(struct ppl_store *e, struct ppl_node *n, uint32_t space, uint32_t page_no)
{
	if (!forget_page(e, n, space, page_no))
		return;
	SLOG(e, PPL_LOG_EVENT, "PPL: %s: page %" PRIu32 ":%" PRIu32 " was overwritten with bytes that are not an "
		 "InnoDB page of that position: it is served as written, and its records are dropped", e->datadir,
		 space, page_no);
}

static void write_pages(struct ppl_store *e, struct ppl_node *n, uint64_t fileid, uint64_t off,
			const struct iovec *iov, int iovcnt, size_t len)
{
	if (off % e->page_size)
		return;
	size_t ps = e->page_size;
	uint8_t *frame = aligned_alloc(4096, ps);
	if (frame == NULL)
		return;
	uint64_t parsed = ppl_node_parsed_lsn(n);
	for (uint64_t p = off; p + ps <= off + len; p += ps) {
		iov_copy((struct iovec *)iov, iovcnt, p - off, frame, ps, true);
		uint32_t space, page_no = (uint32_t)(p / ps);
		/* Only a page written where it belongs is that page's new
		 * base: not the doublewrite buffer's copies of other pages in
		 * ibdata1, not zeros that extend a file. */
		if (all_zero(frame, ps))
			continue;
		if (ppl_page_no(frame) != page_no) {
			/* Not an InnoDB page of this position: bytes written over
			 * a page by something else (a tool that corrupts a page on
			 * purpose, a partial copy) -- the page is what was
			 * written, and nothing the log said of it applies any
			 * more. The doublewrite area of ibdata1, whose pages hold
			 * copies of other pages, has no records of its own. */
			if (file_space(e, fileid, &space))
				page_overwritten(e, n, space, page_no);
			continue;
		}
		if (!page_space(e, fileid, frame, page_no, &space))
			continue;
		/* An LSN 0 image is a page written without redo (IMPORT
		 * TABLESPACE writes its pages so): every record parsed by now
		 * belongs to a page that no longer exists. Any other image
		 * supersedes only what its LSN covers: a client may deliver a
		 * page write after log writes of later changes to the page
		 * (ppl-mount sends page writes unstable and commits only the
		 * log file), and those records are newer than the image. A
		 * page that may be elided keeps its newer records in any case:
		 * they are its only copy. */
		uint64_t superseded = ppl_page_lsn(frame) == 0 && !served_rebuilt(e, space, page_no) ? parsed : 0;
		struct ppl_node_page_info before;
		if (superseded > ppl_page_lsn(frame) && ppl_node_page_info(n, space, page_no, &before) &&
		    before.last_lsn > ppl_page_lsn(frame))
			__atomic_add_fetch(&e->superseded_writes, 1, __ATOMIC_RELAXED);
		ppl_node_page_written(n, frame, superseded);
		if (e->pool) {
			/* the pool lets go of what the index let go of: records
			 * left there would come back at the next ingest start */
			uint64_t upto = superseded > ppl_page_lsn(frame) ? superseded : ppl_page_lsn(frame);
			ppl_pool_reclaim(e->pool, space, ppl_page_no(frame), upto);
			/* still elided while records newer than this image
			 * wait (a replayed old write, see keep_newer_pages) */
			struct ppl_node_page_info info;
			if (!ppl_node_page_info(n, space, ppl_page_no(frame), &info))
				elided_put(e, (uint64_t)space << 32 | ppl_page_no(frame), false);
		}
		__atomic_add_fetch(&e->pages_written, 1, __ATOMIC_RELAXED);
	}
	free(frame);
}

/* A write that covers only part of a page is never one of InnoDB's page
 * writes of a logged page: it is a tool overwriting bytes (mysql-test-run
 * zeroes half of a page 0 to test the doublewrite buffer), or a file
 * copied in pieces. A disk would then hold MariaDB's newest page with
 * those bytes over it. So before the write an elided page is materialized
 * (its file then holds that newest page), and after it the page is what
 * its file holds: its records are dropped, nothing rebuilds it. */
static void partial_pages(struct ppl_store *e, uint64_t fileid, uint64_t off, size_t len, bool before)
{
	size_t ps = e->page_size;
	uint32_t space;
	if (ps == 0 || len == 0 || (off % ps == 0 && len % ps == 0) || !file_space(e, fileid, &space) ||
	    !holds_space(e, fileid, space))
		return;
	rcu_read_lock();
	struct ppl_node *n = node_of(e);
	for (uint64_t pg = off / ps; n && pg <= (off + len - 1) / ps; pg++) {
		if (pg * ps >= off && pg * ps + ps <= off + len)
			continue; /* covered whole: a page write (write_pages) */
		if (before) {
			if (served_rebuilt(e, space, (uint32_t)pg))
				materialize_page(e, n, space, (uint32_t)pg);
		} else if (forget_page(e, n, space, (uint32_t)pg) &&
			   __atomic_add_fetch(&e->partial_overwrites, 1, __ATOMIC_RELAXED) <= 16) {
			SLOG(e, PPL_LOG_EVENT, "PPL: %s: page %" PRIu32 ":%" PRIu64 " was partly overwritten (%zu B at "
				 "offset %" PRIu64 " of its file), not by a page write of InnoDB's: it is served as its "
				 "file holds it, and its records are dropped", e->datadir, space, pg, len, off);
		}
	}
	rcu_read_unlock();
}

void ppl_store_write(struct ppl_store *e, uint64_t fileid, uint64_t off, const struct iovec *iov, int iovcnt,
		      size_t len)
{
	rcu_read_lock();
	struct ppl_node *n = node_of(e);
	if (n)
		write_pages(e, n, fileid, off, iov, iovcnt, len);
	rcu_read_unlock();
	partial_pages(e, fileid, off, len, false);
}


/* ---- elision, materialization, the checkpoint gate ----------------------------- */

/* Slot of key in t (cap a power of two): where it is, or the first free
 * slot its probe reaches. Removed keys leave a tombstone (1) that keeps
 * later keys of the same probe reachable. */
static size_t elided_slot(const uint64_t *t, size_t cap, uint64_t k)
{
	size_t j = (size_t)((k * 0x9e3779b97f4a7c15ull) >> 17) & (cap - 1);
	while (t[j] != 0 && t[j] != k)
		j = (j + 1) & (cap - 1);
	return j;
}

/* Adds or removes a page. An add that cannot be recorded returns false:
 * the caller must not acknowledge the elision then. */
static bool elided_put(struct ppl_store *e, uint64_t key, bool add)
{
	uint64_t k = key + 2; /* 0 empty, 1 removed */
	bool ok = true;
	pthread_mutex_lock(&e->elided_lock);
	/* tombstones count as used: a table full of them has no free slot
	 * left to end a probe */
	if (add && (e->elided_used + 1) * 2 > e->elided_cap) {
		size_t cap = 1024;
		while (cap < 4 * (e->elided_n + 1))
			cap *= 2;
		uint64_t *t = calloc(cap, sizeof(*t));
		if (t == NULL) {
			ok = false;
			goto out;
		}
		for (size_t i = 0; i < e->elided_cap; i++)
			if (e->elided[i] > 1)
				t[elided_slot(t, cap, e->elided[i])] = e->elided[i];
		free(e->elided);
		e->elided = t;
		e->elided_cap = cap;
		e->elided_used = e->elided_n;
	}
	if (e->elided_cap == 0)
		goto out;
	size_t j = elided_slot(e->elided, e->elided_cap, k);
	if (add && e->elided[j] == 0) {
		e->elided[j] = k;
		e->elided_n++;
		e->elided_used++;
	} else if (!add && e->elided[j] == k) {
		e->elided[j] = 1;
		e->elided_n--;
	}
out:
	pthread_mutex_unlock(&e->elided_lock);
	return ok;
}

static bool elided_has(struct ppl_store *e, uint64_t key)
{
	bool found = false;
	pthread_mutex_lock(&e->elided_lock);
	if (e->elided_cap)
		found = e->elided[elided_slot(e->elided, e->elided_cap, key + 2)] == key + 2;
	pthread_mutex_unlock(&e->elided_lock);
	return found;
}

/* Removes every page of a space from the elided set; returns how many. */
static size_t elided_drop_pages(struct ppl_store *e, uint32_t space, uint32_t first_page)
{
	size_t n = 0;
	pthread_mutex_lock(&e->elided_lock);
	for (size_t i = 0; i < e->elided_cap; i++) {
		if (e->elided[i] > 1 && (uint32_t)((e->elided[i] - 2) >> 32) == space &&
		    (uint32_t)(e->elided[i] - 2) >= first_page) {
			e->elided[i] = 1;
			e->elided_n--;
			n++;
		}
	}
	pthread_mutex_unlock(&e->elided_lock);
	return n;
}

static size_t elided_drop_space(struct ppl_store *e, uint32_t space)
{
	return elided_drop_pages(e, space, 0);
}

/* I7: a space whose file is gone (or was replaced by something the log
 * does not describe) keeps nothing here: no records in the index or the
 * pool, no page in the elided set. Its pages then need no materializing
 * before a checkpoint, and a file that later holds the same space id
 * starts from what it holds. */
static void drop_space(struct ppl_store *e, uint32_t space, const char *why)
{
	struct ppl_node_stats before = { 0 }, after = { 0 };
	rcu_read_lock();
	struct ppl_node *n = node_of(e);
	if (n) {
		ppl_node_get_stats(n, &before);
		ppl_node_drop_space(n, space);
		ppl_node_get_stats(n, &after);
	}
	rcu_read_unlock();
	size_t elided = elided_drop_space(e, space);
	uint64_t pooled = e->pool ? ppl_pool_drop_space(e->pool, space) : 0;
	/* the space's next file (a copy, a re-created tablespace) may have
	 * pages of the same LSNs */
	if (e->cache)
		ppl_page_cache_forget_all(e->cache);
	__atomic_add_fetch(&e->spaces_dropped, 1, __ATOMIC_RELAXED);
	if (elided || pooled || after.chunks_dropped != before.chunks_dropped)
		SLOG(e, PPL_LOG_EVENT, "PPL: %s: space %" PRIu32 ": %s; its records (%" PRIu64 " mini-transaction "
			 "chunk(s) in memory, %" PRIu64 " page(s) in the pool) and %zu elided page(s) are dropped",
			 e->datadir, space, why, after.chunks_dropped - before.chunks_dropped, pooled, elided);
}

/* I7: reads are served rebuilt only for pages this node may have told
 * libcatcher not to write -- the elided set, every page with records
 * when that set is incomplete (gate_all), and after a restart the pages
 * whose records are still in the log's held tail. MariaDB wrote every
 * other page itself, so its file holds it exactly; records the node
 * holds for such a page can only be older than the file (the checkpoint
 * passed them), or describe a file that was replaced without redo (a
 * copy, IMPORT TABLESPACE, undo tablespaces re-created), and must never
 * be applied to it. */
static bool held_has(struct ppl_store *e, uint64_t key)
{
	if (!__atomic_load_n(&e->held, __ATOMIC_ACQUIRE))
		return false;
	struct held_page k = { key, 0 };
	return bsearch(&k, e->held_pages, e->held_n, sizeof(k), held_cmp) != NULL;
}

static bool served_rebuilt(struct ppl_store *e, uint32_t space, uint32_t page_no)
{
	uint64_t key = (uint64_t)space << 32 | page_no;
	return e->pool != NULL && (e->gate_all || elided_has(e, key) || held_has(e, key));
}

/* Whether fileid is the file of the datadir followed that holds space:
 * another datadir under the same export (mysql-test-run makes several)
 * reuses the same space ids, and none of this datadir's records may reach
 * its files. */
static bool holds_space(struct ppl_store *e, uint64_t fileid, uint32_t space)
{
	uint64_t ino;
	return space_file_ino(e, space, &ino) && ino == fileid;
}

/* Stripes cover 64 KiB units of a file, the largest InnoDB page, so every
 * page lies in one unit whatever the page size, and a write's begin and
 * end take and release the same stripes even when the page size becomes
 * known while the write is in flight. */
#define STRIPE_SHIFT 16

static unsigned stripe_of(uint64_t fileid, uint64_t unit)
{
	uint64_t k = fileid * 0x9e3779b97f4a7c15ull ^ unit * 0xbf58476d1ce4e5b9ull;
	return (unsigned)((k ^ (k >> 29)) % STRIPES);
}

/* A page write or read of MariaDB's and a materialization of the same
 * page never overlap: a read that took the file's bytes before the page
 * was materialized, and decided after it left the elided set, would serve
 * the old page. I/O enters its stripes (waiting while one is being
 * materialized); materialization waits until none is in flight. */
static void stripes_enter(struct ppl_store *e, uint64_t fileid, uint64_t off, size_t len)
{
	pthread_mutex_lock(&e->stripe_lock);
	for (uint64_t u = off >> STRIPE_SHIFT; u <= (off + len - 1) >> STRIPE_SHIFT; u++) {
		unsigned s = stripe_of(fileid, u);
		while (e->busy[s])
			pthread_cond_wait(&e->stripe_cond, &e->stripe_lock);
		e->inflight[s]++;
	}
	pthread_mutex_unlock(&e->stripe_lock);
}

static void stripes_leave(struct ppl_store *e, uint64_t fileid, uint64_t off, size_t len)
{
	pthread_mutex_lock(&e->stripe_lock);
	for (uint64_t u = off >> STRIPE_SHIFT; u <= (off + len - 1) >> STRIPE_SHIFT; u++)
		e->inflight[stripe_of(fileid, u)]--;
	pthread_cond_broadcast(&e->stripe_cond);
	pthread_mutex_unlock(&e->stripe_lock);
}

void ppl_store_set_verify(struct ppl_store *e, bool on)
{
	e->verify = on;
}

void ppl_store_set_page_cache(struct ppl_store *e, size_t bytes)
{
	e->cache_bytes = bytes;
}

static int read_base(void *arg, uint32_t space, uint32_t page_no, uint8_t *frame);

/* Verify mode: each whole page about to be written, against the page the
 * index rebuilds at its LSN from the data file (not yet overwritten). */
static void verify_write(struct ppl_store *e, uint64_t off, const struct iovec *iov, int iovcnt, size_t len)
{
	size_t ps = e->page_size;
	if (e->dd == NULL || ps == 0 || off % ps)
		return;
	uint8_t *frame = aligned_alloc(4096, ps);
	if (frame == NULL)
		return;
	rcu_read_lock();
	struct ppl_node *n = node_of(e);
	for (uint64_t p = off; n && p + ps <= off + len; p += ps) {
		iov_copy((struct iovec *)iov, iovcnt, p - off, frame, ps, true);
		/* Only a plain full_crc32 page is what the log describes:
		 * ROW_FORMAT=COMPRESSED files (other page sizes, old
		 * checksums) and page_compressed pages (the type's top bit, or
		 * the old compressed types) are written in a form the redo
		 * does not produce, and are never elided (libcatcher) or
		 * rebuilt (served_rebuilt): not comparable. */
		uint16_t type = ppl_page_type(frame);
		if (!ppl_page_crc_ok(frame, ps) || (type & 0x8000u) || type == 34354u || type == 37401u) {
			__atomic_add_fetch(&e->verify_skipped, 1, __ATOMIC_RELAXED);
			continue;
		}
		int r = ppl_node_verify(n, frame, read_base, e);
		__atomic_add_fetch(r > 0 ? &e->verify_same : r < 0 ? &e->verify_diverged : &e->verify_skipped, 1,
				   __ATOMIC_RELAXED);
	}
	rcu_read_unlock();
	free(frame);
}

/* A whole page write older than the page in its file never comes from
 * InnoDB's page cleaner (a page's LSN only grows), but a client replays
 * its UNSTABLE writes after the server restarted (the write verifier
 * changed): an image written before pages were elided and materialized
 * since would put an old page back over one whose records are already
 * dropped. Such a page is replaced in the request by the file's newer
 * image, so the write changes nothing for it. Only with elision on
 * (otherwise every page the file holds came from the client in order),
 * only in the replay window after a restart (replay_until_ns), and never
 * for an LSN 0 image: that is a page written without redo (IMPORT
 * TABLESPACE), which a disk would take, and so does this node. */
static void keep_newer_pages(struct ppl_store *e, uint64_t off, const struct iovec *iov, int iovcnt, size_t len)
{
	size_t ps = e->page_size;
	if (e->dd == NULL || ps == 0 || off % ps || len < ps ||
	    now_ns(e) >= __atomic_load_n(&e->replay_until_ns, __ATOMIC_ACQUIRE))
		return;
	uint8_t *in = aligned_alloc(4096, ps), *disk = aligned_alloc(4096, ps);
	for (uint64_t p = off; in && disk && p + ps <= off + len; p += ps) {
		iov_copy((struct iovec *)iov, iovcnt, p - off, in, ps, true);
		uint32_t space = ppl_page_space(in), page_no = ppl_page_no(in);
		/* LSN 0: a page written without redo, never a replay of one
		 * of InnoDB's logged pages */
		if (page_no != p / ps || ppl_page_lsn(in) == 0 || !ppl_page_crc_ok(in, ps) ||
		    ppl_datadir_read_page(e->dd, space, page_no, disk, ps) != 0 || !ppl_page_crc_ok(disk, ps) ||
		    ppl_page_space(disk) != space || ppl_page_no(disk) != page_no || ppl_page_lsn(disk) <= ppl_page_lsn(in))
			continue;
		iov_copy((struct iovec *)iov, iovcnt, p - off, disk, ps, false);
		if (__atomic_add_fetch(&e->stale_writes, 1, __ATOMIC_RELAXED) <= 16)
			SLOG(e, PPL_LOG_EVENT, "PPL: %s: a write of page %" PRIu32 ":%" PRIu32 " at LSN %" PRIu64
				 " is older than the page in its file (LSN %" PRIu64 "; a client replaying its "
				 "unstable writes after a restart): the file keeps the newer page", e->datadir,
				 space, page_no, ppl_page_lsn(in), ppl_page_lsn(disk));
	}
	free(in);
	free(disk);
}

int ppl_store_write_begin(struct ppl_store *e, bool is_log, uint64_t fileid, uint64_t off, const struct iovec *iov,
			   int iovcnt, size_t len)
{
	if (is_log) {
		int rc = e->pool ? checkpoint_gate(e, off, iov, iovcnt, len) : 0;
		/* The file and the reader must see log writes in the same
		 * order: two WRITEs of the tail block processed at once could
		 * otherwise reach the disk in one order and the reader in the
		 * other, leaving it older bytes than the file holds. */
		if (rc == 0)
			pthread_mutex_lock(&e->order_lock);
		return rc;
	}
	if (e->pool == NULL || len == 0) {
		if (e->verify)
			verify_write(e, off, iov, iovcnt, len);
		return 0;
	}
	partial_pages(e, fileid, off, len, true); /* before its stripes: materialization takes them */
	stripes_enter(e, fileid, off, len);
	keep_newer_pages(e, off, iov, iovcnt, len);
	if (e->verify)
		verify_write(e, off, iov, iovcnt, len);
	return 0;
}

void ppl_store_write_end(struct ppl_store *e, bool is_log, uint64_t fileid, uint64_t off, size_t len)
{
	if (is_log) {
		pthread_mutex_unlock(&e->order_lock);
		return;
	}
	if (e->pool != NULL && len != 0)
		stripes_leave(e, fileid, off, len);
}

void ppl_store_read_begin(struct ppl_store *e, uint64_t fileid, uint64_t off, size_t len)
{
	if (e->pool != NULL && len != 0)
		stripes_enter(e, fileid, off, len);
}

void ppl_store_read_end(struct ppl_store *e, uint64_t fileid, uint64_t off, size_t len)
{
	if (e->pool != NULL && len != 0)
		stripes_leave(e, fileid, off, len);
}

/* The page's stripe, taken for materialization or for moving its records
 * to the pool: no write of MariaDB's to it is in flight meanwhile, and no
 * other thread works on it. -1 when no file can be found for the space; 1
 * (no stripe taken) when its file is gone and the space was dropped. */
static int page_claim(struct ppl_store *e, struct ppl_node *n, uint32_t space, uint32_t page_no, unsigned *stripe,
		      uint64_t *inop)
{
	char path[4096];
	uint64_t ino = 0;
	bool named = ppl_datadir_path(e->dd, space, path, sizeof(path)) == 0;
	if (!named || ppl_datadir_check(e->dd, space, &ino) != 0) {
		/* A file known to be gone -- the file the log or its page 0
		 * named no longer exists, or another file (another space's:
		 * its inode or its page 0 says so) took its name, or the
		 * whole datadir went -- takes its space's records with it
		 * (I7: MariaDB removed it, or re-created undo tablespaces, or
		 * the datadir was removed or replaced by a copy). Never forget
		 * records only because a file cannot be found: the decision
		 * acknowledges pages of files it found. */
		if (named && (errno == ENOENT || errno == ESTALE)) {
			drop_space(e, space, errno == ENOENT ? "its file is gone"
							     : "its file was replaced by another space's file");
			return 1;
		}
		if (!named && access(e->datadir, F_OK) != 0) {
			drop_space(e, space, "its file is gone");
			return 1;
		}
		/* The space was dropped (its file removed) after the page was
		 * picked: nothing of it is left to materialize. */
		struct ppl_node_page_info ni;
		struct ppl_pool_page_info pi;
		if (!ppl_node_page_info(n, space, page_no, &ni) &&
		    (e->pool == NULL || !ppl_pool_page_info(e->pool, space, page_no, &pi)) &&
		    !elided_has(e, (uint64_t)space << 32 | page_no))
			return 1;
		SLOG(e, PPL_LOG_CRIT, "PPL: %s: page %" PRIu32 ":%" PRIu32 " cannot be materialized: no file holds "
			"space %" PRIu32, e->datadir, space, page_no, space);
		return -1;
	}
	unsigned s = stripe_of(ino, ((uint64_t)page_no * e->page_size) >> STRIPE_SHIFT);
	pthread_mutex_lock(&e->stripe_lock);
	while (e->busy[s] || e->inflight[s])
		pthread_cond_wait(&e->stripe_cond, &e->stripe_lock);
	e->busy[s] = 1;
	pthread_mutex_unlock(&e->stripe_lock);
	*stripe = s;
	*inop = ino;
	return 0;
}

static void page_release(struct ppl_store *e, unsigned s)
{
	pthread_mutex_lock(&e->stripe_lock);
	e->busy[s] = 0;
	pthread_cond_broadcast(&e->stripe_cond);
	pthread_mutex_unlock(&e->stripe_lock);
}

/* The page now in its data file is at LSN lsn: records up to it leave the
 * index and the pool, and the page leaves the elided set unless records
 * newer than the image wait: libcatcher may have been told yes for a
 * newer version while this one was being written (elision takes no
 * stripe), and that version exists nowhere but in those records. */
static void page_settled(struct ppl_store *e, struct ppl_node *n, const uint8_t *frame)
{
	uint32_t space = ppl_page_space(frame), page_no = ppl_page_no(frame);
	struct ppl_node_page_info info;
	ppl_node_page_written(n, frame, 0);
	ppl_pool_reclaim(e->pool, space, page_no, ppl_page_lsn(frame));
	if (!ppl_node_page_info(n, space, page_no, &info))
		elided_put(e, (uint64_t)space << 32 | page_no, false);
}

/* Writes the page as the index has it, through a doublewrite slot, unless
 * the data file already holds it; then it is the page's base. The caller
 * holds the page's stripe. */
static int materialize(struct ppl_store *e, struct ppl_node *n, uint32_t space, uint32_t page_no, uint64_t ino)
{
	size_t ps = e->page_size;
	int rc = -1;
	uint8_t *frame = aligned_alloc(4096, ps);
	bool changed = false;
	struct ppl_apply_error aerr;
	char err[256];
	struct ppl_node_page_info fi;
	if (ppl_node_page_info(n, space, page_no, &fi) && fi.freed) {
		/* The log's last word on the page frees it: MariaDB's recovery
		 * does not touch it, MariaDB writes it no more, and it is
		 * initialized by the log before any reuse. Nothing is
		 * written; its records would otherwise wait in the pool and
		 * the elided set for a write that never comes. */
		forget_page(e, n, space, page_no);
		free(frame);
		return 0;
	}
	if (frame == NULL || ppl_datadir_read_page_of(e->dd, space, ino, page_no, frame, ps) != 0) {
		SLOG(e, PPL_LOG_CRIT, "PPL: %s: page %" PRIu32 ":%" PRIu32 " cannot be read to materialize it: %s",
			e->datadir, space, page_no, frame == NULL ? "out of memory" : strerror(errno));
	} else if (ppl_node_rebuild(n, space, page_no, frame, UINT64_MAX, &changed, &aerr) != PPL_APPLY_OK) {
		SLOG(e, PPL_LOG_CRIT, "PPL: %s: page %" PRIu32 ":%" PRIu32 " cannot be rebuilt to materialize it "
			"(%s)", e->datadir, space, page_no, aerr.msg);
	} else if (!changed) {
		page_settled(e, n, frame); /* the file already holds it */
		rc = 0;
	} else {
		int slot = ppl_pool_dw_stage(e->pool, space, page_no, frame, ps, err, sizeof(err));
		if (slot < 0) {
			SLOG(e, PPL_LOG_CRIT, "PPL: %s: page %" PRIu32 ":%" PRIu32 ": %s", e->datadir, space, page_no,
				err);
		} else if (ppl_datadir_write_page_of(e->dd, space, ino, page_no, frame, ps) != 0) {
			SLOG(e, PPL_LOG_CRIT, "PPL: %s: page %" PRIu32 ":%" PRIu32 " could not be written to its "
				"file: %s; its doublewrite slot is kept", e->datadir, space, page_no, strerror(errno));
		} else {
			ppl_pool_dw_release(e->pool, slot);
			page_settled(e, n, frame);
			__atomic_add_fetch(&e->materialized, 1, __ATOMIC_RELAXED);
			rc = 0;
		}
	}
	free(frame);
	return rc;
}

struct to_pool {
	struct ppl_pool *pool;
	uint32_t space, page_no;
	uint64_t have;                 /* the pool holds the page's records up to here */
	enum ppl_pool_status st;
	unsigned appended;
};

static int chunk_to_pool(void *arg, uint64_t start_lsn, uint64_t end_lsn, bool from_init, const uint8_t *recs,
			 size_t len)
{
	struct to_pool *t = arg;
	if (end_lsn <= t->have)
		return 0;
	if (len > UINT16_MAX) {
		t->st = PPL_POOL_OVER_CAP;
		return 1;
	}
	struct ppl_pool_rec r = { .start_lsn = start_lsn, .end_lsn = end_lsn, .from_init = from_init,
				  .len = (uint16_t)len, .bytes = recs };
	t->st = ppl_pool_append(t->pool, t->space, t->page_no, &r);
	if (t->st != PPL_POOL_OK)
		return 1;
	t->appended++;
	return 0;
}

/* Makes every record the index holds for an elided page durable outside
 * the log: in the pmem pool while the page is under its cap (NV-PPL: the
 * page stays unmaterialized), else by materializing it. Page 0 is always
 * materialized: it names its file's space, and after a restart the pool's
 * records are found a file only through it. The caller holds the
 * page's stripe. */
static int settle(struct ppl_store *e, struct ppl_node *n, uint32_t space, uint32_t page_no, uint64_t ino)
{
	struct ppl_pool_page_info pi;
	struct to_pool t = { .pool = e->pool, .space = space, .page_no = page_no, .st = PPL_POOL_OK };
	if (page_no == 0)
		return materialize(e, n, space, page_no, ino);
	if (ppl_pool_page_info(e->pool, space, page_no, &pi)) {
		if (pi.spilled || pi.damaged)
			return materialize(e, n, space, page_no, ino);
		t.have = pi.last_lsn;
	}
	ppl_node_page_chunks(n, space, page_no, chunk_to_pool, &t);
	if (t.st != PPL_POOL_OK) {
		/* over the cap, or the pool is full (foreground reclamation:
		 * this page's records leave the pool with it) */
		__atomic_add_fetch(t.st == PPL_POOL_FULL ? &e->pool_full : &e->pool_over_cap, 1, __ATOMIC_RELAXED);
		if (t.st == PPL_POOL_FULL)
			pthread_cond_broadcast(&e->work_cond); /* wake the cleaner */
		return materialize(e, n, space, page_no, ino);
	}
	if (t.appended) {
		ppl_node_rehome(n, space, page_no);
		__atomic_add_fetch(&e->pool_records, t.appended, __ATOMIC_RELAXED);
		__atomic_add_fetch(&e->pool_kept, 1, __ATOMIC_RELAXED);
	}
	return 0;
}

typedef int (*page_op)(struct ppl_store *e, struct ppl_node *n, uint32_t space, uint32_t page_no, uint64_t ino);

/* op with the page's stripe held. */
static int claimed(struct ppl_store *e, struct ppl_node *n, uint32_t space, uint32_t page_no, page_op op)
{
	unsigned s;
	uint64_t ino;
	int c = page_claim(e, n, space, page_no, &s, &ino);
	if (c != 0)
		return c < 0 ? -1 : 0; /* a dropped space needs nothing more */
	int rc = op(e, n, space, page_no, ino);
	page_release(e, s);
	return rc;
}

/* The page's records durable somewhere the log's wrap cannot reach: the
 * pool while they fit under the per-page cap, else its data file. */
static int settle_page(struct ppl_store *e, struct ppl_node *n, uint32_t space, uint32_t page_no)
{
	return claimed(e, n, space, page_no, settle);
}

/* The page written into its data file (through a doublewrite slot). */
static int materialize_page(struct ppl_store *e, struct ppl_node *n, uint32_t space, uint32_t page_no)
{
	return claimed(e, n, space, page_no, materialize);
}

static unsigned key_part(uint64_t key, unsigned nparts)
{
	return (unsigned)(((key * 0x9e3779b97f4a7c15ull) >> 32) % nparts);
}

struct due {
	struct ppl_store *e;
	uint64_t upto;
	unsigned part, nparts;         /* only keys hashing to part (nparts 0: all) */
	bool one_space;                /* only pages of space */
	uint32_t space;
	struct key_list l;
};

static void collect_due(void *arg, uint32_t space, uint32_t page_no, const struct ppl_node_page_info *i)
{
	struct due *d = arg;
	if (!i->known || i->first_lsn >= d->upto || (d->one_space && space != d->space))
		return;
	uint64_t key = (uint64_t)space << 32 | page_no;
	if (d->nparts && key_part(key, d->nparts) != d->part)
		return;
	if (!d->e->gate_all && !elided_has(d->e, key))
		return; /* MariaDB wrote it itself */
	key_list_add(&d->l, space, page_no);
}

/* MariaDB is about to write a checkpoint: from then on, a restart reads
 * the log only from that LSN. Every page still holding records below it
 * (pages whose writes were elided) is materialized first, or the write
 * fails (MariaDB 10.11 then stops with a fatal error) rather than lose them
 * (DESIGN I1, I3). */
static int checkpoint_gate(struct ppl_store *e, uint64_t off, const struct iovec *iov, int iovcnt, size_t len)
{
	const struct ppl_redo_dialect *d = &ppl_dialect_mariadb_10_8;
	uint8_t blk[64];
	uint64_t at = UINT64_MAX;
	if (off == 0 || off >= d->area_start || d->checkpoint_peek > sizeof(blk))
		return 0; /* from the first byte: a log copied in (ppl_store_log_write) */
	for (int slot = 0; slot < 2 && at == UINT64_MAX; slot++)
		if (off <= d->checkpoint_off[slot] && off + len >= d->checkpoint_off[slot] + d->checkpoint_peek)
			at = d->checkpoint_off[slot] - off;
	if (at == UINT64_MAX)
		return 0;
	iov_copy((struct iovec *)iov, iovcnt, at, blk, d->checkpoint_peek, true);
	struct ppl_checkpoint c;
	d->peek_checkpoint(blk, &c);
	uint64_t ckpt = c.lsn, end = c.end_lsn;
	if (ckpt == 0)
		return 0;
	rcu_read_lock();
	struct ppl_node *n = node_of(e);
	int rc = n ? gate(e, n, ckpt, end) : 0;
	rcu_read_unlock();
	uint64_t until = UINT64_MAX;
	if (rc == 0)
		__atomic_compare_exchange_n(&e->replay_until_ns, &until, now_ns(e) + REPLAY_AFTER_CHECKPOINT_NS, false,
					    __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
	return rc;
}

/* The checkpoint gate proper, for a checkpoint at ckpt whose log ends at
 * end. */
static int gate(struct ppl_store *e, struct ppl_node *n, uint64_t ckpt, uint64_t end)
{
	/* MariaDB flushed its log up to the checkpoint's end before writing
	 * it: parse all of that first, so that a FILE_DELETE in the last,
	 * provisional log write has dropped its space (its file is gone and
	 * its pages need no materializing). */
	pthread_mutex_lock(&e->log_lock);
	if (end >= ckpt && e->started && !e->stopped && e->node == n) {
		if (ppl_node_log_durable(n, end) != 0)
			stop_ingest(e, ppl_node_error(n));
		after_restart_parse(e, false);
	}
	pthread_mutex_unlock(&e->log_lock);
	pthread_mutex_lock(&e->gate_lock);
	uint64_t t0 = now_ns(e);
	struct due d = { .e = e, .upto = ckpt };
	ppl_node_for_each_page(n, collect_due, &d);
	int rc = d.l.incomplete ? ENOMEM : 0; /* never pass a page it could not list */
	for (size_t i = 0; i < d.l.n && rc == 0; i++)
		if (settle_page(e, n, (uint32_t)(d.l.keys[i] >> 32), (uint32_t)d.l.keys[i]) != 0 &&
		    elided_has(e, d.l.keys[i]))
			rc = EIO; /* an acknowledged page: the checkpoint must not pass it */
	free(d.l.keys);
	/* a restart re-reads the log from the checkpoint: what lies before
	 * it is now in the pool or in the data files */
	if (rc == 0 && ppl_pool_set_durable_lsn(e->pool, ckpt) != 0)
		rc = EIO;
	if (d.l.n) {
		e->gate_waits++;
		e->gate_ns += now_ns(e) - t0;
		SLOG(e, PPL_LOG_DEBUG, "PPL: %s: checkpoint %" PRIu64 " waited for %zu page(s) to be materialized",
			 e->datadir, ckpt, d.l.n);
	}
	pthread_mutex_unlock(&e->gate_lock);
	if (rc)
		SLOG(e, PPL_LOG_CRIT, "PPL: %s: the checkpoint write (LSN %" PRIu64 ") is refused: a page it needs "
			"could not be materialized (see above); MariaDB stops on this error rather than lose "
			"the page: find why the page could not be written, then restart it", e->datadir, ckpt);
	return rc;
}

/* Writes every page elided so far (d's filter: of one space or all) to
 * its data file; how many could not be. d->l is left with the pages
 * listed (the caller frees it). */
static size_t materialize_due(struct ppl_store *e, struct ppl_node *n, struct due *d)
{
	pthread_mutex_lock(&e->gate_lock);
	ppl_node_for_each_page(n, collect_due, d);
	size_t failed = 0;
	for (size_t i = 0; i < d->l.n; i++)
		if (materialize_page(e, n, (uint32_t)(d->l.keys[i] >> 32), (uint32_t)d->l.keys[i]) != 0)
			failed++;
	pthread_mutex_unlock(&e->gate_lock);
	return failed;
}

static void materialize_elided(struct ppl_store *e, struct ppl_node *n)
{
	struct due d = { .e = e, .upto = UINT64_MAX };
	size_t failed = materialize_due(e, n, &d);
	free(d.l.keys);
	if (failed || d.l.incomplete)
		SLOG(e, PPL_LOG_CRIT, "PPL: %s: %zu page(s) could not be materialized%s; their records stay in "
			"the pool and are put back into the index at the next ingest start", e->datadir, failed,
			d.l.incomplete ? " (out of memory listing them)" : "");
	else if (d.l.n)
		SLOG(e, PPL_LOG_EVENT, "PPL: %s: %zu page(s) kept in the pool or memory written to their data "
			 "files", e->datadir, d.l.n);
}

void ppl_store_file_leaving(struct ppl_store *e, uint64_t fileid)
{
	uint32_t space;
	if (e->pool == NULL || !file_space(e, fileid, &space) || !holds_space(e, fileid, space))
		return;
	struct due d = { .e = e, .upto = UINT64_MAX, .one_space = true, .space = space };
	size_t failed = 0;
	rcu_read_lock();
	struct ppl_node *n = node_of(e);
	if (n)
		failed = materialize_due(e, n, &d);
	rcu_read_unlock();
	free(d.l.keys);
	if (failed || d.l.incomplete)
		SLOG(e, PPL_LOG_CRIT, "PPL: %s: space %" PRIu32 "'s file is renamed away with %zu elided page(s) not "
			"written into it%s (see the lines above): those pages are lost to it", e->datadir, space,
			failed, d.l.incomplete ? " (out of memory listing them)" : "");
	else if (d.l.n)
		SLOG(e, PPL_LOG_EVENT, "PPL: %s: space %" PRIu32 "'s file is renamed away: its %zu elided page(s) "
			 "were written into it first", e->datadir, space, d.l.n);
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
	struct ppl_node_config c = { .page_size = e->page_size, .log = part_logger(e) };
	struct ppl_node *tmp = ppl_node_new(&c);
	uint8_t *frame = aligned_alloc(4096, e->page_size);
	size_t written = 0, failed = 0;
	pthread_mutex_lock(&e->gate_lock);
	for (size_t i = 0; tmp && frame && i < k.n; i++) {
		struct pool_load l = { .n = tmp, .space = (uint32_t)(k.keys[i] >> 32), .page_no = (uint32_t)k.keys[i],
				       .before = UINT64_MAX };
		if (ppl_datadir_read_page(e->dd, l.space, l.page_no, frame, e->page_size) == 0 &&
		    ppl_page_no(frame) == l.page_no && ppl_page_space(frame) == l.space)
			l.file_lsn = ppl_page_lsn(frame);
		if (ppl_pool_records(e->pool, l.space, l.page_no, pool_rec_to_node, &l) != PPL_POOL_OK || l.failed) {
			failed++;
			continue;
		}
		if (l.added == 0) {
			ppl_pool_reclaim(e->pool, l.space, l.page_no, UINT64_MAX); /* the file holds it */
			continue;
		}
		if (materialize_page(e, tmp, l.space, l.page_no) == 0)
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

/* ---- background apply ----------------------------------------------------- */

struct worker {
	struct ppl_store *e;
	unsigned idx;
};

/* Pool below its low-water mark: materialize its oldest pages (this
 * worker's share) until the high-water mark is reached, checked page by
 * page: every page materialized is a data-file write the pool was there
 * to save. */
static void clean_pool(struct ppl_store *e, struct ppl_node *n, unsigned idx)
{
	struct ppl_pool_page_ref refs[256];
	struct ppl_pool_usage u;
	ppl_pool_usage(e->pool, &u);
	if (!u.needs_cleaning)
		return;
	unsigned long done = 0;
	for (int round = 0; round < 64 && !u.cleaned_enough && !e->work_stop; round++) {
		size_t k = ppl_pool_oldest(e->pool, refs, sizeof(refs) / sizeof(refs[0])), mine = 0;
		for (size_t i = 0; i < k; i++) {
			uint64_t key = (uint64_t)refs[i].space << 32 | refs[i].page_no;
			if (key_part(key, e->nworkers) != idx)
				continue;
			mine++;
			if (materialize_page(e, n, refs[i].space, refs[i].page_no) == 0)
				done++;
			ppl_pool_usage(e->pool, &u);
			if (u.cleaned_enough)
				break;
		}
		if (mine == 0)
			break;
	}
	__atomic_add_fetch(&e->cleaned, done, __ATOMIC_RELAXED);
	if (done)
		SLOG(e, PPL_LOG_DEBUG, "PPL: %s: pool cleaner materialized %lu page(s); %" PRIu64 " of %" PRIu64
			 " blocks free", e->datadir, done, u.free_blocks, u.nblocks);
}

/* Elided pages whose first record is older than half the log behind the
 * parse: settle them now, so that MariaDB's checkpoint does not wait for
 * them (seed 001's background apply, partitioned by page). */
static void settle_ahead(struct ppl_store *e, struct ppl_node *n, unsigned idx)
{
	uint64_t parsed = ppl_node_parsed_lsn(n), lag = e->log_capacity / 2;
	if (lag == 0 || parsed <= lag)
		return;
	struct due d = { .e = e, .upto = parsed - lag, .part = idx, .nparts = e->nworkers };
	ppl_node_for_each_page(n, collect_due, &d);
	for (size_t i = 0; i < d.l.n && !e->work_stop; i++)
		if (settle_page(e, n, (uint32_t)(d.l.keys[i] >> 32), (uint32_t)d.l.keys[i]) == 0)
			__atomic_add_fetch(&e->ahead, 1, __ATOMIC_RELAXED);
	free(d.l.keys);
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	struct ppl_store *e = w->e;
	char name[16];
	snprintf(name, sizeof(name), "ppl_apply%u", w->idx);
	if (e->env.thread_started)
		e->env.thread_started(e->env.thread_arg, name);
	pthread_mutex_lock(&e->work_lock);
	while (!e->work_stop) {
		struct timespec t;
		clock_gettime(CLOCK_REALTIME, &t);
		t.tv_sec += 1;
		pthread_cond_timedwait(&e->work_cond, &e->work_lock, &t);
		if (e->work_stop)
			break;
		pthread_mutex_unlock(&e->work_lock);
		rcu_read_lock();
		struct ppl_node *n = node_of(e);
		if (n != NULL && !e->stopped) {
			clean_pool(e, n, w->idx);
			settle_ahead(e, n, w->idx);
		}
		rcu_read_unlock();
		pthread_mutex_lock(&e->work_lock);
	}
	pthread_mutex_unlock(&e->work_lock);
	free(w);
	return NULL;
}

static void start_workers(struct ppl_store *e, unsigned count)
{
	/* what key_part() divides by: fixed before any worker runs (config
	 * caps Apply_Threads at the array's size) */
	e->nworkers = count;
	for (unsigned i = 0; i < count; i++) {
		struct worker *w = malloc(sizeof(*w));
		if (w == NULL) {
			e->nworkers = i;
			break;
		}
		*w = (struct worker){ .e = e, .idx = i };
		int rc = pthread_create(&e->workers[i], NULL, worker_main, w);
		if (rc != 0) {
			free(w);
			SLOG(e, PPL_LOG_CRIT, "PPL: %s: apply thread %u could not start (%s); pages are still "
				"settled at MariaDB's checkpoints", e->exportdir, i, strerror(rc));
			e->nworkers = i;
			break;
		}
		e->nstarted++;
	}
}

static void stop_workers(struct ppl_store *e)
{
	pthread_mutex_lock(&e->work_lock);
	e->work_stop = true;
	pthread_cond_broadcast(&e->work_cond);
	pthread_mutex_unlock(&e->work_lock);
	for (unsigned i = 0; i < e->nstarted; i++)
		pthread_join(e->workers[i], NULL);
	e->nstarted = 0;
}

static int read_base(void *arg, uint32_t space, uint32_t page_no, uint8_t *frame)
{
	struct ppl_store *e = arg;
	return ppl_datadir_read_page(e->dd, space, page_no, frame, e->page_size);
}

/* The elision decision: yes only for the exact page (LSN and checksum) the
 * index can rebuild from the data file and the log. The log up to the
 * page's LSN is durable and parsed: InnoDB writes a page only after its
 * log is flushed, and log writes are parsed before they are acknowledged. */
static unsigned decide_page(struct ppl_store *e, struct ppl_node *n, const struct ppl_elision_page *pg)
{
	if (e->stopped || e->dd == NULL)
		return PPL_ELIDE_NACK_NOT_DURABLE;
	uint64_t other = __atomic_load_n(&e->other_log_ns, __ATOMIC_RELAXED);
	if (other != 0 && now_ns(e) - other < 2 * OTHER_LOG_QUIET_NS)
		return PPL_ELIDE_NACK_OTHER; /* the page may be of that other datadir */
	/* a page it could not materialize through a doublewrite slot is
	 * never elided */
	if (pg->page_size != e->page_size || pg->page_size > e->dw_page_size)
		return PPL_ELIDE_NACK_PAGE_SIZE;
	if (ppl_node_parsed_lsn(n) < pg->lsn) {
		/* The question itself says the log is durable up to its LSN
		 * (InnoDB flushes the log before it writes a page): bytes of
		 * the last, provisional log write below it become final. */
		pthread_mutex_lock(&e->log_lock);
		if (e->started && !e->stopped && e->node == n) {
			if (ppl_node_log_durable(n, pg->lsn) != 0)
				stop_ingest(e, ppl_node_error(n));
			after_restart_parse(e, false);
		}
		pthread_mutex_unlock(&e->log_lock);
		if (e->stopped || ppl_node_parsed_lsn(n) < pg->lsn)
			return PPL_ELIDE_NACK_NOT_DURABLE;
	}
	/* only pages it could materialize before a checkpoint passes them */
	char path[4096];
	if (ppl_datadir_path(e->dd, pg->space, path, sizeof(path)) != 0)
		return PPL_ELIDE_NACK_UNKNOWN_FILE;
	/* recorded before the answer leaves: a checkpoint write can only
	 * follow the elided write */
	uint64_t key = (uint64_t)pg->space << 32 | pg->page_no;
	bool was = elided_has(e, key);
	if (!was && !elided_put(e, key, true))
		return PPL_ELIDE_NACK_INTERNAL; /* out of memory: it could not be materialized */
	unsigned v = ppl_node_elide(n, pg->space, pg->page_no, pg->lsn, pg->checksum, read_base, e);
	/* a page elided before stays elided: that older version still
	 * exists only in its records until MariaDB's write of this one */
	if (v != PPL_ELIDE_ACK && !was)
		elided_put(e, key, false);
	return v;
}

unsigned ppl_store_elide(struct ppl_store *e, const struct ppl_elision_page *pg)
{
	rcu_read_lock();
	struct ppl_node *n = node_of(e);
	unsigned v = n ? decide_page(e, n, pg) : PPL_ELIDE_NACK_NOT_DURABLE;
	rcu_read_unlock();
	return v;
}

static unsigned decide(void *arg, const struct ppl_elision_page *pg)
{
	return ppl_store_elide(arg, pg);
}


/* The directory under the export that holds ib_logfile0 (by name: at
 * start nothing has been written yet), or the export. */
static void guess_datadir(const char *dir, int depth, char *out, size_t outlen)
{
	char p[4096];
	struct stat st;
	snprintf(p, sizeof(p), "%s/ib_logfile0", dir);
	if (stat(p, &st) == 0) {
		snprintf(out, outlen, "%s", dir);
		return;
	}
	DIR *d = depth ? opendir(dir) : NULL;
	struct dirent *de;
	while (d && (de = readdir(d)) != NULL && out[0] == '\0') {
		if (de->d_name[0] == '.')
			continue;
		snprintf(p, sizeof(p), "%s/%s", dir, de->d_name);
		if (stat(p, &st) == 0 && S_ISDIR(st.st_mode))
			guess_datadir(p, depth - 1, out, outlen);
	}
	if (d)
		closedir(d);
}

int ppl_store_start_elision(struct ppl_store *e, const struct ppl_config *c, char *err, size_t errlen)
{
	char dir[4096] = "";
	guess_datadir(e->exportdir, 3, dir, sizeof(dir));
	if (dir[0]) {
		free(e->datadir);
		e->datadir = strdup(dir);
	}
	e->dd = ppl_datadir_open(e->datadir, err, errlen);
	if (e->dd == NULL)
		return -1;
	struct ppl_pool_options o = { .identity = e->exportdir, .block_size = c->block_size,
				      .max_per_page = c->max_per_page, .read_page = ppl_datadir_read_page,
				      .write_page = ppl_datadir_write_page, .page_arg = e->dd, .log = part_logger(e) };
	struct ppl_pool_recovery rec;
	char perr[512];
	if (ppl_pool_open(c->pool_path, &o, &e->pool, &rec, perr, sizeof(perr)) != 0) {
		snprintf(err, errlen, "%s (a pool is made with `ppl-inspect pool create %s --identity %s --size N`)",
			 perr, c->pool_path, e->exportdir);
		return -1;
	}
	struct ppl_pool_header h;
	ppl_pool_get_header(e->pool, &h);
	e->dw_page_size = h.dw_page_size;
	if (c->pool_size && h.size != c->pool_size) {
		snprintf(err, errlen, "pool %s holds %" PRIu64 " bytes but Pool_Size = %" PRIu64 ": set Pool_Size to "
			 "the pool's size (or leave it out), or re-create the pool with `ppl-inspect pool create %s "
			 "--identity %s --size %" PRIu64 "` once its pages are materialized (a clean stop does that)",
			 c->pool_path, h.size, c->pool_size, c->pool_path, e->exportdir, c->pool_size);
		ppl_pool_close(e->pool);
		e->pool = NULL;
		return -1;
	}
	SLOG(e, PPL_LOG_EVENT, "PPL: %s: pool %s opened in %.3f s: %" PRIu64 " doublewrite slot(s) pending, %"
		 PRIu64 " page(s) restored, %" PRIu64 " current, %" PRIu64 " not checked", e->exportdir, c->pool_path,
		 (double)rec.elapsed_ns / 1e9, rec.dw_pending, rec.dw_restored, rec.dw_current,
		 rec.dw_unreadable + rec.dw_needs_restore);
	struct ppl_elision_server_config sc = { .address = c->elision_address, .port = c->elision_port,
						.token = c->elision_token, .allow = c->elision_clients,
						.decide = decide, .decide_arg = e, .log = part_logger(e) };
	if (ppl_elision_server_start(&sc, &e->elision, err, errlen) != 0)
		return -1;
	start_workers(e, c->apply_threads);
	return 0;
}

static int format_node(struct ppl_store *e, struct ppl_node *n, char *buf, size_t len)
{
	struct ppl_node_stats s;
	ppl_node_get_stats(n, &s);
	struct ppl_page_cache_stats cs = { 0 };
	if (e->cache)
		ppl_page_cache_get_stats(e->cache, &cs);
	return snprintf(buf, len,
			"engine: redo %.1f MB parsed to LSN %" PRIu64 ", %" PRIu64 " mtrs, %" PRIu64
			" records, %" PRIu64 " pages pending; reads %" PRIu64 ", pages rebuilt %" PRIu64
			" (%" PRIu64 " mtrs applied, per page p50 %" PRIu64 " p99 %" PRIu64 "; %" PRIu64
			" from the cache), rebuild failures %" PRIu64
			"; page writes taken as bases %" PRIu64 "%s",
			(double)s.log_bytes / 1e6, ppl_node_parsed_lsn(n), s.mtrs, s.records, s.pages_indexed,
			__atomic_load_n(&e->reads, __ATOMIC_RELAXED),
			__atomic_load_n(&e->pages_rebuilt, __ATOMIC_RELAXED), s.rebuild_mtrs_applied,
			ppl_histogram_percentile(&e->mtrs_per_rebuild, 50),
			ppl_histogram_percentile(&e->mtrs_per_rebuild, 99), cs.hits,
			__atomic_load_n(&e->rebuild_failures, __ATOMIC_RELAXED),
			__atomic_load_n(&e->pages_written, __ATOMIC_RELAXED), e->stopped ? "; INGEST STOPPED" : "");
}

static int format_engine(struct ppl_store *e, char *buf, size_t len)
{
	rcu_read_lock();
	struct ppl_node *n = node_of(e);
	int r = n ? format_node(e, n, buf, len) :
		    snprintf(buf, len, "engine: %s", e->stopped ? "ingest stopped (see above)" :
				   e->copying ? "waiting: the log is being copied in" :
				   "waiting for ibdata1 and the log's checkpoint");
	rcu_read_unlock();
	return r;
}

static int format_verify(struct ppl_store *e, char *buf, size_t len)
{
	if (!e->verify)
		return 0;
	return snprintf(buf, len, "; verify: %" PRIu64 " page writes identical to the rebuild, %" PRIu64
			" diverged, %" PRIu64 " not comparable",
			__atomic_load_n(&e->verify_same, __ATOMIC_RELAXED),
			__atomic_load_n(&e->verify_diverged, __ATOMIC_RELAXED),
			__atomic_load_n(&e->verify_skipped, __ATOMIC_RELAXED));
}

static int format_elision(struct ppl_store *e, char *buf, size_t len)
{
	if (e->elision == NULL)
		return snprintf(buf, len, "; elision off");
	struct ppl_elision_server_stats s;
	ppl_elision_server_get_stats(e->elision, &s);
	uint64_t nacks = 0;
	for (int i = 1; i < PPL_ELIDE_REASON_COUNT; i++)
		nacks += s.verdicts[i];
	return snprintf(buf, len,
			"; elision: %" PRIu64 " asked, %" PRIu64 " acked, %" PRIu64 " refused (lsn behind %" PRIu64
			", lsn ahead %" PRIu64 ", checksum %" PRIu64 ", not durable %" PRIu64 ", unknown page %" PRIu64
			", other %" PRIu64 "), clients refused %" PRIu64 "; materialized %" PRIu64
			" page(s), checkpoints held %" PRIu64 " (%.3f s)",
			s.requests, s.verdicts[0], nacks, s.verdicts[PPL_ELIDE_NACK_LSN_BEHIND],
			s.verdicts[PPL_ELIDE_NACK_LSN_AHEAD], s.verdicts[PPL_ELIDE_NACK_CHECKSUM],
			s.verdicts[PPL_ELIDE_NACK_NOT_DURABLE], s.verdicts[PPL_ELIDE_NACK_UNKNOWN_PAGE],
			nacks - s.verdicts[PPL_ELIDE_NACK_LSN_BEHIND] - s.verdicts[PPL_ELIDE_NACK_LSN_AHEAD] -
				s.verdicts[PPL_ELIDE_NACK_CHECKSUM] - s.verdicts[PPL_ELIDE_NACK_NOT_DURABLE] -
				s.verdicts[PPL_ELIDE_NACK_UNKNOWN_PAGE],
			s.refused_address + s.refused_hello, __atomic_load_n(&e->materialized, __ATOMIC_RELAXED),
			e->gate_waits, (double)e->gate_ns / 1e9);
}

void ppl_store_figures(struct ppl_store *e, struct ppl_store_figures *f)
{
	memset(f, 0, sizeof(*f));
	rcu_read_lock();
	struct ppl_node *n = node_of(e);
	f->datadir = e->datadir;
	f->started = n != NULL;
	f->stopped = e->stopped;
	f->page_size = e->page_size;
	if (e->cache)
		ppl_page_cache_get_stats(e->cache, &f->cache);
	if (n) {
		f->parsed_lsn = ppl_node_parsed_lsn(n);
		ppl_node_get_stats(n, &f->node);
	}
	f->reads = __atomic_load_n(&e->reads, __ATOMIC_RELAXED);
	f->pages_rebuilt = __atomic_load_n(&e->pages_rebuilt, __ATOMIC_RELAXED);
	f->mtrs_per_rebuild_p50 = ppl_histogram_percentile(&e->mtrs_per_rebuild, 50);
	f->mtrs_per_rebuild_p99 = ppl_histogram_percentile(&e->mtrs_per_rebuild, 99);
	f->rebuild_failures = __atomic_load_n(&e->rebuild_failures, __ATOMIC_RELAXED);
	f->pages_written = __atomic_load_n(&e->pages_written, __ATOMIC_RELAXED);
	f->stale_writes = __atomic_load_n(&e->stale_writes, __ATOMIC_RELAXED);
	f->verify = e->verify;
	f->verify_same = __atomic_load_n(&e->verify_same, __ATOMIC_RELAXED);
	f->verify_diverged = __atomic_load_n(&e->verify_diverged, __ATOMIC_RELAXED);
	f->verify_skipped = __atomic_load_n(&e->verify_skipped, __ATOMIC_RELAXED);
	f->elision = e->elision != NULL;
	if (e->elision)
		ppl_elision_server_get_stats(e->elision, &f->service);
	f->materialized = __atomic_load_n(&e->materialized, __ATOMIC_RELAXED);
	f->checkpoints_held = e->gate_waits;
	f->checkpoint_wait_ns = e->gate_ns;
	f->pool = e->pool != NULL;
	if (e->pool) {
		ppl_pool_usage(e->pool, &f->pool_usage);
		f->pool_durable_lsn = ppl_pool_durable_lsn(e->pool);
	}
	f->pool_kept = __atomic_load_n(&e->pool_kept, __ATOMIC_RELAXED);
	f->pool_records = __atomic_load_n(&e->pool_records, __ATOMIC_RELAXED);
	f->pool_over_cap = __atomic_load_n(&e->pool_over_cap, __ATOMIC_RELAXED);
	f->pool_full = __atomic_load_n(&e->pool_full, __ATOMIC_RELAXED);
	f->cleaned = __atomic_load_n(&e->cleaned, __ATOMIC_RELAXED);
	f->ahead = __atomic_load_n(&e->ahead, __ATOMIC_RELAXED);
	f->pool_loaded_pages = e->pool_loaded_pages;
	f->pool_loaded_records = e->pool_loaded_records;
	f->copying = e->copying;
	f->logs_copied_in = e->logs_copied_in;
	f->superseded_writes = __atomic_load_n(&e->superseded_writes, __ATOMIC_RELAXED);
	f->spaces_dropped = __atomic_load_n(&e->spaces_dropped, __ATOMIC_RELAXED);
	rcu_read_unlock();
}

struct ppl_node *ppl_store_node(struct ppl_store *e)
{
	return node_of(e);
}

struct ppl_pool *ppl_store_pool(struct ppl_store *e)
{
	return e->pool;
}

int ppl_store_format_pool(struct ppl_store *e, char *buf, size_t len)
{
	if (e->pool == NULL)
		return 0;
	struct ppl_pool_usage u;
	ppl_pool_usage(e->pool, &u);
	return snprintf(buf, len,
			"%" PRIu64 " page(s) kept unmaterialized, %" PRIu64 " of %" PRIu64 " blocks used, %"
			PRIu64 " record(s) appended, materialized over the cap %" PRIu64 ", when the pool was full %"
			PRIu64 ", by the cleaner %" PRIu64 ", put back at start %" PRIu64 " page(s)",
			u.pages, u.nblocks - u.free_blocks, u.nblocks,
			__atomic_load_n(&e->pool_records, __ATOMIC_RELAXED),
			__atomic_load_n(&e->pool_over_cap, __ATOMIC_RELAXED),
			__atomic_load_n(&e->pool_full, __ATOMIC_RELAXED),
			__atomic_load_n(&e->cleaned, __ATOMIC_RELAXED), e->pool_loaded_pages);
}

int ppl_store_format(struct ppl_store *e, char *buf, size_t len)
{
	int k = format_engine(e, buf, len);
	if (k < 0 || (size_t)k >= len)
		return k;
	int v = format_verify(e, buf + k, len - (size_t)k);
	if (v < 0 || (size_t)(k + v) >= len)
		return k + (v < 0 ? 0 : v);
	k += v;
	uint64_t waits = __atomic_load_n(&e->held_waits, __ATOMIC_RELAXED);
	if (waits) {
		v = snprintf(buf + k, len - (size_t)k, "; reads that waited for the log's tail after the restart %"
			     PRIu64 " (failed %" PRIu64 ")", waits,
			     __atomic_load_n(&e->held_timeouts, __ATOMIC_RELAXED));
		if (v < 0 || (size_t)(k + v) >= len)
			return k + (v < 0 ? 0 : v);
		k += v;
	}
	return k + format_elision(e, buf + k, len - (size_t)k);
}
