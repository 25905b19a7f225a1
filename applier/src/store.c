/* The storage engine of one export. See ppl/store.h.
 *
 * This file holds the store's life -- made, configured, its pool and
 * elision service started, freed (a clean stop writes every elided page
 * into its file) -- and which space each file holds, which every other
 * part asks. Each of the engine's other concerns is a file of its own, so
 * that it can be read, and the invariants it keeps checked, without the
 * rest; they share struct ppl_store and each other's functions through
 * store_internal.h:
 *
 *     store_ingest.c    redo ingest: the log found, parsed from its checkpoint, held back after a
 *                       restart, left behind; the pool's records put back at a restart
 *     store_pages.c     page reads (rebuilt), page writes, partial writes, verify mode, the stripes
 *     store_gate.c      the elided set, settle and materialize, the checkpoint gate, the elision decision
 *     store_workers.c   background apply (Apply_Threads)
 *     store_figures.c   the figures and the stats lines */
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "ppl/datadir.h"
#include "ppl/elision_server.h"
#include "ppl/filemap.h"
#include "ppl/metrics_http.h"
#include "ppl/node.h"
#include "ppl/page_cache.h"
#include "ppl/pool.h"
#include "ppl/pool_marker.h"
#include "ppl/store.h"
#include "ppl/store_config.h"
#include "store_internal.h"

int store_stat(const struct ppl_store *e, const char *path, struct stat *st)
{
	return e->env.io->stat(e->env.io->arg, path, st);
}

uint64_t store_now_ns(const struct ppl_store *e)
{
	if (e->env.now_ns)
		return e->env.now_ns(e->env.clock_arg);
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

/* The published node. Outside log_lock, only inside an RCU read-side
 * section (urcu-bp: every thread registers itself): a node replaced
 * (detach) is freed only after every such section that could have seen
 * it has ended. */
struct ppl_node *store_node_of(struct ppl_store *e)
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

struct ppl_logger store_part_logger(struct ppl_store *e)
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
	if (e->env.io == NULL)
		e->env.io = ppl_io_posix();
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
	pthread_mutex_init(&e->q_lock, NULL);
	pthread_cond_init(&e->q_work, NULL);
	pthread_cond_init(&e->q_done, NULL);
	pthread_mutex_init(&e->order_lock, NULL);
	pthread_mutex_init(&e->stripe_lock, NULL);
	pthread_cond_init(&e->stripe_cond, NULL);
	pthread_mutex_init(&e->gate_lock, NULL);
	pthread_mutex_init(&e->elided_lock, NULL);
	pthread_mutex_init(&e->missing_lock, NULL);
	pthread_mutex_init(&e->hot_lock, NULL);
	pthread_cond_init(&e->start_cond, NULL);
	pthread_mutex_init(&e->work_lock, NULL);
	pthread_cond_init(&e->work_cond, NULL);
	pthread_mutex_init(&e->archive_lock, NULL);
	pthread_mutex_init(&e->backup_lock, NULL);
	pthread_mutex_init(&e->wiped_lock, NULL);
	pthread_mutex_init(&e->backup_start_lock, NULL);
	pthread_cond_init(&e->archive_cond, NULL);
	return e;
}

void store_marker_follow(struct ppl_store *e)
{
	if (e->pool == NULL || e->pool_keeps_nothing)
		return;
	uint64_t lsn = ppl_pool_durable_lsn(e->pool);
	struct ppl_pool_usage u;
	ppl_pool_usage(e->pool, &u);
	if (lsn <= e->marker_lsn || u.pages == 0)
		return; /* an older copy of a pool that holds nothing loses nothing */
	struct ppl_pool_header h;
	char merr[512];
	ppl_pool_get_header(e->pool, &h);
	if (ppl_pool_marker_note_lsn(e->exportdir, h.uuid, lsn, merr, sizeof(merr)) == 0)
		e->marker_lsn = lsn;
	else if (!e->marker_warned) {
		e->marker_warned = true;
		SLOG(e, PPL_LOG_WARN, "PPL: %s: %s: an older copy of the pool put back later could not be told "
			 "apart", e->exportdir, merr);
	}
}

/* The pool holds nothing the data files lack (no page's records, no
 * doublewrite slot): the marker says so, and a new pool may serve the
 * export after this stop (pool_marker.h). */
static void mark_drained(struct ppl_store *e)
{
	struct ppl_pool_usage u;
	struct ppl_pool_header h;
	char merr[512];
	ppl_pool_usage(e->pool, &u);
	unsigned slots = ppl_pool_dw_in_use(e->pool);
	ppl_pool_get_header(e->pool, &h);
	if (u.pages != 0 || slots != 0) {
		SLOG(e, PPL_LOG_WARN, "PPL: %s: the pool still holds %" PRIu64 " page(s) and %u doublewrite slot(s) "
			 "at this stop: it is needed at the next start (see the lines above)", e->exportdir, u.pages,
			 slots);
		return;
	}
	if (ppl_pool_marker_write(e->exportdir, h.uuid, true, merr, sizeof(merr)) != 0)
		SLOG(e, PPL_LOG_WARN, "PPL: %s: %s: the next start with a new pool will be refused until the "
			 "marker is removed", e->exportdir, merr);
}

void ppl_store_free(struct ppl_store *e)
{
	if (e == NULL)
		return;
	/* the endpoint, the service and the workers first: their threads
	 * call into the node */
	ppl_metrics_http_stop(e->metrics);
	store_stop_backup(e); /* it reads through the store */
	if (e->elision)
		ppl_elision_server_stop(e->elision);
	store_behind_stop(e); /* the writes it holds are ingested first */
	store_pmemlog_stop(e); /* the log file synced, the pool's log area emptied */
	store_stop_workers(e);
	store_stop_archive(e);
	/* A clean stop leaves a datadir MariaDB can use without this node:
	 * pages kept in the pool go to their files (after a crash they come
	 * back from the pool at the next start instead). */
	if (e->pool && e->node)
		store_materialize_elided(e, e->node);
	if (e->pool)
		mark_drained(e);
	ppl_pool_close(e->pool);
	pthread_mutex_destroy(&e->stripe_lock);
	pthread_cond_destroy(&e->stripe_cond);
	pthread_mutex_destroy(&e->gate_lock);
	pthread_mutex_destroy(&e->elided_lock);
	pthread_mutex_destroy(&e->missing_lock);
	pthread_mutex_destroy(&e->hot_lock);
	pthread_cond_destroy(&e->start_cond);
	pthread_mutex_destroy(&e->work_lock);
	pthread_cond_destroy(&e->work_cond);
	pthread_mutex_destroy(&e->archive_lock);
	pthread_mutex_destroy(&e->backup_lock);
	pthread_mutex_destroy(&e->wiped_lock);
	pthread_mutex_destroy(&e->backup_start_lock);
	pthread_cond_destroy(&e->archive_cond);
	free(e->elided);
	free(e->missing);
	free(e->held_pages);
	ppl_node_free(e->node);
	ppl_node_free(e->building);
	ppl_datadir_close(e->dd);
	ppl_page_cache_free(e->cache);
	pthread_mutex_destroy(&e->log_lock);
	pthread_mutex_destroy(&e->q_lock);
	pthread_cond_destroy(&e->q_work);
	pthread_cond_destroy(&e->q_done);
	pthread_mutex_destroy(&e->order_lock);
	ppl_filemap_free(e->files);
	free(e->datadir);
	free(e->exportdir);
	free(e);
}

void ppl_store_set_verify(struct ppl_store *e, bool on)
{
	e->verify = on;
}

void ppl_store_set_page_cache(struct ppl_store *e, size_t bytes)
{
	e->cache_bytes = bytes;
}

static unsigned decide(void *arg, const struct ppl_elision_page *pg)
{
	return ppl_store_elide(arg, pg);
}

static char *metrics_text(void *arg)
{
	return ppl_store_metrics(arg);
}

int ppl_store_start_metrics(struct ppl_store *e, const struct ppl_config *c, char *err, size_t errlen)
{
	e->metrics = ppl_metrics_http_start(c->metrics_address, c->metrics_port, metrics_text, e, err, errlen);
	if (e->metrics == NULL)
		return -1;
	SLOG(e, PPL_LOG_EVENT, "PPL: %s: metrics at http://%s%s%s:%u/metrics", e->exportdir,
	     strchr(c->metrics_address, ':') ? "[" : "", c->metrics_address, strchr(c->metrics_address, ':') ? "]" : "",
	     (unsigned)ppl_metrics_http_port(e->metrics));
	return 0;
}

int ppl_store_start_elision(struct ppl_store *e, const struct ppl_config *c, char *err, size_t errlen)
{
	/* MariaDB's datadir: the directory under the export that holds an
	 * ib_logfile0 (any: at start nothing has been written yet), or the
	 * export */
	char dir[4096];
	if (store_find_log(e, e->exportdir, 0, 3, dir, sizeof(dir))) {
		free(e->datadir);
		e->datadir = strdup(dir);
	}
	e->dd = ppl_datadir_open(e->datadir, e->env.io, err, errlen);
	if (e->dd == NULL)
		return -1;
	struct ppl_pool_options o = { .identity = e->exportdir, .block_size = c->block_size,
				      .max_per_page = c->max_per_page, .read_page = ppl_datadir_read_page,
				      .write_page = ppl_datadir_write_page, .page_arg = e->dd,
				      .log = store_part_logger(e) };
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
	/* before anything reads the log file: ingest's catch-up, MariaDB's
	 * recovery through the mount (store_pmemlog.c) */
	if (store_pmemlog_repair(e, err, errlen) != 0) {
		ppl_pool_close(e->pool);
		e->pool = NULL;
		return -1;
	}
	if (ppl_config_check_pool_size(c, e->exportdir, h.size, err, errlen) != 0 ||
	    ppl_pool_marker_admit(e->exportdir, h.uuid, ppl_pool_durable_lsn(e->pool), err, errlen) != 0) {
		ppl_pool_close(e->pool);
		e->pool = NULL;
		return -1;
	}
	/* A pool a power loss empties never holds the only copy of records
	 * MariaDB's checkpoint has passed, unless the operator said so. */
	e->pool_keeps_nothing = h.is_volatile && !c->allow_volatile_pool;
	if (e->pool_keeps_nothing)
		SLOG(e, PPL_LOG_WARN, "PPL: %s: pool %s is on tmpfs, which a power loss or a reboot empties: it keeps "
			 "no page's records past MariaDB's checkpoint (each page a checkpoint needs is written into "
			 "its data file instead, a data-file write per page the pool would have spared), and its "
			 "doublewrite slots do not survive a power loss. Put the pool on a DAX mount of NVDIMM, or "
			 "set Allow_Volatile_Pool = true to use it as NVDIMM at the risk of losing those records at "
			 "a power loss", e->exportdir, c->pool_path);
	else if (h.is_volatile)
		SLOG(e, PPL_LOG_WARN, "PPL: %s: pool %s is on tmpfs and Allow_Volatile_Pool = true: records of "
			 "pages kept in it past MariaDB's checkpoint exist nowhere else, so a power loss or a reboot "
			 "without a clean stop loses them (the export then refuses the datadir: restore it from a "
			 "backup), and a torn page write at a power loss has no doublewrite slot to repair it",
			 e->exportdir, c->pool_path);
	else if (!h.is_pmem)
		SLOG(e, PPL_LOG_WARN, "PPL: %s: pool %s is on a disk-backed file system, not a DAX mount of "
			 "persistent memory: every persist is an msync to the disk, paid by each elision and by "
			 "MariaDB's checkpoint writes, which wait while the checkpoint gate settles the pages a flush "
			 "elided (milliseconds per checkpoint, where DAX or tmpfs take microseconds). Put the pool "
			 "on a DAX mount of NVDIMM (or, for tests, tmpfs with Allow_Volatile_Pool = true)",
			 e->exportdir, c->pool_path);
	/* A pool that may keep nothing and holds nothing now never will: its
	 * loss costs nothing, and a new pool may take its place. */
	struct ppl_pool_usage u;
	ppl_pool_usage(e->pool, &u);
	bool empty_for_good = e->pool_keeps_nothing && u.pages == 0;
	char merr[512];
	e->marker_lsn = ppl_pool_durable_lsn(e->pool);
	if ((empty_for_good ? ppl_pool_marker_write(e->exportdir, h.uuid, true, merr, sizeof(merr))
			    : ppl_pool_marker_note_lsn(e->exportdir, h.uuid, e->marker_lsn, merr, sizeof(merr))) != 0)
		SLOG(e, PPL_LOG_WARN, "PPL: %s: %s: should this pool be lost before a clean stop, the next start "
			"could not tell (make the export's directory writable for the storage node)", e->exportdir,
			merr);
	SLOG(e, PPL_LOG_EVENT, "PPL: %s: pool %s opened in %.3f s (%" PRIu64 " page(s) in %" PRIu64
		 " block(s); chain heads %.3f s, table %.3f s, chains %.3f s, free list %.3f s, doublewrite %.3f s): %"
		 PRIu64 " doublewrite slot(s) pending, %" PRIu64 " page(s) restored, %" PRIu64 " current, %" PRIu64
		 " not checked", e->exportdir, c->pool_path, (double)rec.elapsed_ns / 1e9, rec.pages, rec.blocks_used,
		 (double)rec.heads_ns / 1e9, (double)rec.table_ns / 1e9, (double)rec.walk_ns / 1e9,
		 (double)rec.free_ns / 1e9, (double)rec.dw_ns / 1e9, rec.dw_pending, rec.dw_restored, rec.dw_current,
		 rec.dw_unreadable + rec.dw_needs_restore);
	struct ppl_elision_server_config sc = { .address = c->elision_address, .port = c->elision_port,
						.token = c->elision_token, .allow = c->elision_clients,
						.decide = decide, .decide_arg = e, .log = store_part_logger(e) };
	if (ppl_elision_server_start(&sc, &e->elision, err, errlen) != 0)
		return -1;
	store_start_workers(e, c->apply_threads);
	return 0;
}

/* ---- which space a file holds -------------------------------------------- */

void store_map_set(struct ppl_store *e, uint64_t fileid, uint32_t space)
{
	if (fileid == 0)
		return;
	/* The datadir learns which file holds the space, for a file whose
	 * page 0 never reached the disk; also when the map is out of memory
	 * (-1): the map only spares the datadir's lookup. */
	if (ppl_filemap_set(e->files, fileid, space) != 0 && e->dd)
		ppl_datadir_bind(e->dd, fileid, space);
}

bool store_map_get(struct ppl_store *e, uint64_t fileid, uint32_t *space)
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
	store_behind_drain(e); /* what the log says of it first (FILE_DELETE) */
	uint32_t space, bound;
	bool mapped = store_map_get(e, fileid, &space);
	if (mapped || (e->dd && ppl_datadir_space_of(e->dd, fileid, &space) == 0)) {
		bool is_its_file = mapped || (ppl_datadir_bound_space(e->dd, fileid, &bound) == 0 && bound == space);
		if (!is_its_file && ppl_datadir_held_elsewhere(e->dd, space, fileid))
			SLOG(e, PPL_LOG_EVENT, "PPL: %s: a file whose page 0 names space %" PRIu32 " was removed "
				 "(fileid %" PRIu64 "), but it is not that space's file (a copy of it): the space "
				 "keeps its records and elided pages", e->datadir, space, fileid);
		else
			store_drop_space(e, space, "its file was removed");
	}
	ppl_filemap_remove(e->files, fileid, NULL);
	if (e->dd)
		ppl_datadir_forget(e->dd, fileid);
}

/* The space a file holds, by what its pages or the log said. */
bool store_file_space(struct ppl_store *e, uint64_t fileid, uint32_t *space)
{
	return store_map_get(e, fileid, space) || (e->dd && ppl_datadir_space_of(e->dd, fileid, space) == 0);
}

/* The stat of the file the datadir followed has, there now, for space. */
bool store_space_file_stat(struct ppl_store *e, uint32_t space, struct stat *st)
{
	char path[4096];
	return e->dd != NULL && ppl_datadir_path(e->dd, space, path, sizeof(path)) == 0 && store_stat(e, path, st) == 0;
}

/* Its inode. */
bool store_space_file_ino(struct ppl_store *e, uint32_t space, uint64_t *ino)
{
	struct stat st;
	if (!store_space_file_stat(e, space, &st))
		return false;
	*ino = (uint64_t)st.st_ino;
	return true;
}

/* Whether fileid is the file of the datadir followed that holds space:
 * another datadir under the same export (mysql-test-run makes several)
 * reuses the same space ids, and none of this datadir's records may reach
 * its files. */
bool store_holds_space(struct ppl_store *e, uint64_t fileid, uint32_t space)
{
	uint64_t ino;
	/* asked for every page a READ serves: the file the datadir keeps
	 * open for the space says yes without a look at the directory; a
	 * no is looked at */
	if (e->dd != NULL && ppl_datadir_known(e->dd, space, &ino) == 0 && ino == fileid)
		return true;
	return store_space_file_ino(e, space, &ino) && ino == fileid;
}
