/* The store: the storage node's engine for one export. It follows
 * MariaDB's redo log as it is written, answers elision questions, serves
 * page reads rebuilt from the data file and the log, keeps elided pages'
 * records durable (the pmem pool, or the data file through a doublewrite
 * slot) before MariaDB's checkpoint passes them, and survives its own
 * crash. It knows nothing of NFS: its inputs are file identities (inode
 * numbers), offsets and iovecs, and it reads and writes the export's files
 * on the local file system itself.
 *
 * NOTES
 *
 * Using it. A host (the FSAL: ganesha-fsal-ppl/src/ppl_hooks.c; a test:
 * tests/unit/test_store.c) does
 *
 *     s = ppl_store_new(export_dir, &env);          logger, thread hook, clock, I/O
 *     ppl_store_start_elision(s, &cfg, err, len);   if elision is on (a pool)
 *     ppl_store_start_archive(s, &cfg, err, len);   Archive_Path
 *     ppl_store_start_ingest_behind(s, &cfg, ...);  Ingest_Behind
 *     ppl_store_start_log_on_pmem(s, &cfg, ...);    Log_On_Pmem
 *     ppl_store_start_from_disk(s);                 a log already there (I6)
 *
 * then brackets every operation on the export's files:
 *
 *     log write:   ppl_store_write_begin(is_log) -> write the file ->
 *                  ppl_store_log_write -> ppl_store_write_end
 *     page write:  ppl_store_write_begin -> write -> ppl_store_write -> _end
 *     page read:   ppl_store_read_begin -> read -> ppl_store_read -> _end
 *     removal, rename, truncation: ppl_store_file_gone / _file_leaving,
 *                  ppl_store_log_gone / _log_replaced
 *
 * and ppl_store_free at the end (a clean stop: every elided page is
 * written into its file). ppl_store_write_begin of a checkpoint block is
 * the checkpoint gate: a non-zero return must fail that WRITE (I3).
 *
 * I/O. The store's own reads and writes of the export's files (the log
 * read at ingest, pages read to rebuild or materialize them, pages
 * written into their files, the directory scans) go through the I/O
 * table of env.io (ppl/io.h; NULL: the system calls), and so do the
 * datadir map's (datadir.c); its log lines through env.log. It never
 * calls the host otherwise, so it runs under a test harness, and tests
 * make a write fail with EIO or ENOSPC, a sync fail, a read fail
 * (tests/unit/test_store_faults.c). The pmem pool is not file I/O: it is
 * mapped with libpmem (pool.c).
 *
 * Files. The store is applier/src/store.c (its life, which space a file
 * holds) and, one concern each, store_ingest.c (redo ingest, the held
 * tail, the pool's records put back), store_pages.c (page reads and
 * writes, verify, the stripes), store_gate.c (the elided set, settle and
 * materialize, the checkpoint gate, the elision decision), store_wrap.c
 * (the restart point and the log-wrap guard, I3), store_workers.c
 * (Apply_Threads), store_archive.c (the log archive, Archive_Path),
 * store_behind.c (log writes parsed behind their replies, Ingest_Behind),
 * store_pmemlog.c (log writes made durable in the pool, Log_On_Pmem)
 * and store_figures.c (figures, stats lines); they share
 * store_internal.h. The POSIX I/O table is applier/src/io_posix.c.
 *
 * Threads. The host's threads call in concurrently; the store adds the
 * elision service's threads (applier/src/elision_server.c), Apply_Threads
 * workers (settle pages ahead of checkpoints, clean the pool), with
 * Ingest_Behind the ingest thread (store_behind.c), and liburcu's
 * call_rcu thread. Every thread that calls in is an RCU reader
 * (urcu-bp registers it): the published node is freed only after a grace
 * period.
 *
 * Locks, in the order they may be taken (never the other way):
 *     order_lock -> log_lock          a log write, begin to end; then ingest
 *     order_lock -> q_lock -> log_lock  Ingest_Behind: queued, or parsed in place
 *     gate_lock  -> stripe_lock       one gate or materialization pass; one page
 *     elided_lock, missing_lock,      leaves: nothing is taken under them
 *     work_lock
 * log_lock and gate_lock are never held together: the gate parses under
 * log_lock, lets it go, then takes gate_lock. The node's rwlock and the
 * pool's locks are below all of these.
 *
 * Ingest states (fields of struct ppl_store in store_internal.h: building,
 * started, held, start_pending, suspect_upto, stopped, copying, gate_all), and the
 * function of each transition (all in store_ingest.c):
 *
 *   NONE ---- make_node (start_from_disk, or the first log write) ----> BUILDING
 *   BUILDING -- start_ingest: parse from the log file's checkpoint, or from
 *                the pool's restart point before it (store_wrap.c) -----> STARTED
 *   BUILDING -- start_ingest(TO_END) after a restart: feed_to_end -----> HELD TAIL
 *   BUILDING -- start_ingest(TO_END) meets damage before the end the
 *                checkpoint vouches for (a write the dead server never
 *                carried out) --------------------------------------> START PENDING
 *   START PENDING -- the next log write (the client sends it again):
 *                start_ingest(TO_END) ----------------------------------> HELD TAIL
 *   START PENDING -- no log write for HOLD_MAX_NS (store_start_wait):
 *                the file taken as it stands, what parses kept --------> STOPPED
 *   HELD TAIL -- MariaDB's writes parse past it (store_after_restart_parse),
 *                or a quiet log plus a durable mark (store_hold_wait) -> STARTED
 *   STARTED, HELD TAIL -- the server vouches for log past a stall
 *                (store_stop_ingest) ----------------------------------> STOPPED
 *   any ------ detach: the log replaced, removed, copied in, or another
 *              datadir's log after this one went quiet ----------------> NONE
 *   NONE ----- a log write from its first byte (ppl_store_log_write) --> COPYING
 *   COPYING -- MariaDB's checkpoint block, or a write behind the copy -> BUILDING
 *
 *   STARTED: every log write parsed before its WRITE is answered; with
 *     Ingest_Behind, after, on the ingest thread in the order written, and
 *     whatever depends on it (an elision question past the parse, a page
 *     write, the checkpoint gate, the guards, a removal) waits for the
 *     queue first (store_behind.c).
 *   HELD TAIL: the log file's last bytes after a restart are not known to
 *     be final; a read of a page they touch waits until they are parsed.
 *   START PENDING (start_pending): no node yet, and which pages the
 *     previous run elided is unknown: every page read waits
 *     (store_start_wait), never served from a file that may be older.
 *   SUSPECT (suspect_upto != 0, with HELD TAIL): every page with records
 *     counts as elided (mark_suspect): the previous run's answers are lost.
 *   STOPPED: nothing more is parsed or elided; pages parsed before are
 *     still rebuilt, later ones served as the files hold them.
 *   GATE-ALL (gate_all): the elided set ran out of memory; every page with
 *     records counts as elided until the next detach.
 *
 * Invariants I1-I7 (ARCHITECTURE.md, "The invariants"): the checkpoint
 * gate and the log-wrap guard (store_wrap.c) keep I3; ppl_store_elide parses up to the page's LSN before it
 * answers (I2) and says yes only for the exact image (I1, I4);
 * materialization goes through a doublewrite slot (I5); load_pool and the
 * held tail serve after a restart what was served before (I6); reads are
 * rebuilt only for pages this store may have elided, and a page or file
 * the log no longer describes drops its records (I7). */
#ifndef PPL_STORE_H
#define PPL_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include "ppl/elision_server.h"
#include "ppl/histogram.h"
#include "ppl/io.h"
#include "ppl/log.h"
#include "ppl/node.h"
#include "ppl/pool.h"
#include "ppl/page_cache.h"

struct ppl_store;
struct ppl_config;

/* What the host gives the store: it never logs, names a thread, reads
 * the clock or touches a file of the export but through these. */
struct ppl_store_env {
	struct ppl_logger log;
	/* Called first in each thread the store starts (the apply workers),
	 * with the thread's name. NULL: nothing. */
	void (*thread_started)(void *arg, const char *name);
	void *thread_arg;
	/* The monotonic clock in ns (NULL: CLOCK_MONOTONIC); tests inject
	 * their own to reach timeouts without waiting. */
	uint64_t (*now_ns)(void *arg);
	void *clock_arg;
	/* Every file operation on the export's files (ppl/io.h: which calls,
	 * from which threads; it must outlive the store). NULL: POSIX, as
	 * the FSAL has it. Tests inject faults through it. */
	const struct ppl_io *io;
};

/* The store of the export whose directory is datadir (MariaDB's datadir
 * may turn out to be a directory inside it). env is copied; NULL: no
 * logging, the system clock. */
struct ppl_store *ppl_store_new(const char *datadir, const struct ppl_store_env *env);
void ppl_store_free(struct ppl_store *e);

/* The export starts over a datadir that already has a log (a restart of
 * the storage node): ingest from its checkpoint to its end now, so that
 * pages read before MariaDB's next log write are rebuilt too (I6). */
void ppl_store_start_from_disk(struct ppl_store *e);

/* Bytes written to ib_logfile0 (already durable in the file). A write
 * from the log's first byte is a log copied in: ingest waits until
 * MariaDB writes it. Returns 0,
 * or an errno to fail the WRITE: never, today: a log the engine cannot
 * parse is logged and ingest stops, and pages are then served as the data
 * files hold them (MariaDB writes every page itself while nothing is
 * elided). */
int ppl_store_log_write(struct ppl_store *e, uint64_t fileid, uint64_t off, const struct iovec *iov, int iovcnt,
			 size_t len);
/* Returns once every log write handed to ppl_store_log_write before the
 * call has been parsed: at once, unless Ingest_Behind queues them
 * (store_behind.c). For a host about to look at what they did. */
void ppl_store_log_drain(struct ppl_store *e);
/* The log file was replaced (ib_logfile101 renamed over the file
 * old_fileid, 0 if none): start over, if it was the log followed. */
void ppl_store_log_replaced(struct ppl_store *e, uint64_t old_fileid);
/* The log file was removed (a datadir removed): start over when a log is
 * written again, if it was the log followed. */
void ppl_store_log_gone(struct ppl_store *e, uint64_t fileid);

/* A read of a page file filled iov: rebuild the pages the index has
 * records for, in place. 0, or EIO when a page cannot be rebuilt (a wrong
 * page is never served). read_ns is how long the host's read took (0: not
 * measured); with the store's own time it makes the READ's latency,
 * counted as a plain read or, when a page was served rebuilt, a rebuilt
 * one (issue 17: a rebuilt read must cost about what a plain read does). */
int ppl_store_read(struct ppl_store *e, uint64_t fileid, uint64_t off, struct iovec *iov, int iovcnt,
		    size_t len, uint64_t read_ns);
/* A write to a page file reached the file: whole pages become bases. */
void ppl_store_write(struct ppl_store *e, uint64_t fileid, uint64_t off, const struct iovec *iov, int iovcnt,
		      size_t len);

/* A page file was unlinked, replaced by a rename or truncated to nothing:
 * forget which space it held (a new file may reuse its inode number) and
 * everything the log said about that space (I7). */
void ppl_store_file_gone(struct ppl_store *e, uint64_t fileid);
/* The page file is about to be renamed to a name that is not a page
 * file's (moved aside, as mysql-test-run does, perhaps to come back): the
 * pages elided for it are written into it first, so that it holds what a
 * disk would; once renamed, its space's state goes (file_gone). */
void ppl_store_file_leaving(struct ppl_store *e, uint64_t fileid);

/* Verify = true: every full page write is first compared byte for byte
 * with the page the index rebuilds at its LSN; divergences are counted in
 * the stats line and logged (space id, page number, page type, record
 * types), and the page falls back to full page writes. */
void ppl_store_set_verify(struct ppl_store *e, bool on);

/* Page_Cache_Size: bytes of rebuilt pages kept for repeated reads (0: off). */
void ppl_store_set_page_cache(struct ppl_store *e, size_t bytes);

/* Elision (Elision_Port set): opens the pool (its doublewrite slots are
 * checked and torn data-file pages restored), starts the service. 0, or
 * -1 with a message: the export is refused. */
int ppl_store_start_elision(struct ppl_store *e, const struct ppl_config *c, char *err, size_t errlen);
/* An elision question (the service's callback, callable directly): ACK
 * only for the exact page (LSN, checksum) the store can rebuild from its
 * data file and the log, and materialize before a checkpoint passes it;
 * otherwise a NACK reason (ppl/elision_proto.h). An ACK puts the page in
 * the elided set before it returns. */
unsigned ppl_store_elide(struct ppl_store *e, const struct ppl_elision_page *pg);

/* Around the sub-FSAL's write of a log or page file (see ppl_hooks.h). */
int ppl_store_write_begin(struct ppl_store *e, bool is_log, uint64_t fileid, uint64_t off, const struct iovec *iov,
			   int iovcnt, size_t len);
void ppl_store_write_end(struct ppl_store *e, bool is_log, uint64_t fileid, uint64_t off, size_t len);
/* Around the sub-FSAL's read of a page file: a read and a materialization
 * of the same page never overlap. */
void ppl_store_read_begin(struct ppl_store *e, uint64_t fileid, uint64_t off, size_t len);
void ppl_store_read_end(struct ppl_store *e, uint64_t fileid, uint64_t off, size_t len);

/* Every figure of the engine at one moment, for the live JSON
 * (store_json.c) and the metrics (store_metrics.c). */
struct ppl_store_figures {
	const char *datadir;
	bool started, stopped, verify, elision, pool;
	size_t page_size;
	uint64_t parsed_lsn;
	struct ppl_node_stats node;
	struct ppl_page_cache_stats cache;
	uint64_t reads, pages_rebuilt, rebuild_failures, pages_written, stale_writes;
	uint64_t mtrs_per_rebuild_p50, mtrs_per_rebuild_p99; /* exact up to 63, then within 1/16 above */
	/* READ latency percentiles in us (ppl_store_read's read_ns and the
	 * store's part), for reads that served no page rebuilt and those that did */
	uint64_t read_plain_n, read_plain_p50_us, read_plain_p99_us;
	uint64_t read_rebuilt_n, read_rebuilt_p50_us, read_rebuilt_p99_us;
	struct ppl_latency rebuild_latency; /* ns per page rebuilt for a read (cache hits included) */
	/* not compared: in all, by cause, and of those the causes that would
	 * mean lost records (ppl_verify_skip_explained) */
	uint64_t verify_same, verify_diverged, verify_skipped, verify_unexplained;
	uint64_t verify_skip[PPL_VERIFY_SKIP_COUNT];
	struct ppl_elision_server_stats service;
	uint64_t answer_p50_us, answer_p99_us; /* the storage node's time per question */
	uint64_t materialized, checkpoints_held, checkpoint_wait_ns;
	/* log writes held by the wrap guard, for how long, pages it wrote;
	 * pages kept marked in the pool over their cap (store_wrap.c) */
	uint64_t log_wraps_held, log_wrap_wait_ns, log_wrap_pages, pool_spilled_kept;
	/* elided pages written by a worker because a read rebuilt them from a long history */
	uint64_t hot_settled;
	struct ppl_pool_usage pool_usage;
	uint64_t pool_durable_lsn, pool_kept, pool_records, pool_over_cap, pool_full, cleaned, ahead;
	uint64_t pool_loaded_pages, pool_loaded_records;
	bool copying;                  /* a log being copied in: ingest waits */
	uint64_t logs_copied_in, superseded_writes, spaces_dropped;
	uint64_t spaces_missing;       /* files vanished unannounced, their pages kept */
	/* the data files' disk failing now (no page elided until a page is
	 * written again); failed reads, writes and syncs of materializations;
	 * elision questions refused because of it */
	bool disk_failing;
	uint64_t disk_failures, elide_refused_disk;
	int pool_persist_failed;       /* errno of the pool file's failed msync, or 0 */
	/* the log archive (Archive_Path): the LSNs it holds, how far they are
	 * durable, what waits in memory, flushes that failed, and whether it
	 * stopped for good; how far MariaDB's log file is durable */
	bool archive, archive_broken;
	uint64_t archive_first_lsn, archive_end_lsn, archive_durable_lsn, archive_segments, archive_bytes;
	uint64_t archive_buffered, archive_flush_failures, log_durable_lsn;
	/* Ingest_Behind (store_behind.c): log writes answered and waiting to
	 * be parsed, and their bytes; the most bytes that ever waited; writes
	 * that waited for room in the queue, and for how long; writes parsed
	 * in the caller's thread for want of memory for a copy */
	bool ingest_behind;
	uint64_t behind_writes, behind_bytes, behind_max_bytes, behind_waits, behind_wait_ns, behind_inline;
	/* Log_On_Pmem (store_pmemlog.c): log writes made durable in the
	 * pool's log area and their bytes; those synced in their replies
	 * instead (area full, write too large); the syncs behind, failed
	 * syncs and their time; the area and what of it is in use */
	bool log_on_pmem;
	uint64_t pmem_log_writes, pmem_log_bytes, pmem_log_fallbacks, pmem_log_syncs, pmem_log_sync_failures;
	uint64_t pmem_log_sync_ns, pmem_log_area, pmem_log_used;
};
void ppl_store_figures(struct ppl_store *e, struct ppl_store_figures *f);
/* The index and the pool, for one page's dump; NULL when there is none.
 * The node only inside an RCU read-side section (rcu_read_lock()): it is
 * freed when the log is replaced. */
struct ppl_node *ppl_store_node(struct ppl_store *e);
struct ppl_pool *ppl_store_pool(struct ppl_store *e);

/* The operator's word that the space's file, found gone without a
 * removal the store heard of, was removed on purpose: what the store
 * kept of the space (records, pool pages, elided pages) is dropped, and
 * the checkpoints it held back may pass. Refused (-1) while a file of
 * the datadir holds the space. msg says what was done, or why not. */
int ppl_store_forget_space(struct ppl_store *e, uint32_t space, char *msg, size_t msglen);

/* The live socket's answer to a request line ("stats", "page S:P" or
 * "forget-space S"): a malloc'ed JSON text (store_json.c). */
char *ppl_store_json(struct ppl_store *e, const char *request);

/* The store's figures as OpenMetrics text ending in "# EOF", malloc'ed
 * (store_metrics.c): what the metrics endpoint serves and the live
 * socket's "metrics" request answers. NULL when out of memory. */
char *ppl_store_metrics(struct ppl_store *e);
/* Archive_Path set: keeps every mini-transaction parsed in the log
 * archive (ppl/archive.h; store_archive.c says what it promises), from
 * the next ingest start on. Call before ppl_store_start_from_disk. 0, or
 * -1 with a message (the directory is inside the export, or the archive
 * in it is damaged): the export must not start. */
int ppl_store_start_archive(struct ppl_store *e, const struct ppl_config *c, char *err, size_t errlen);
/* Ingest_Behind = true: starts the ingest thread (store_behind.c); log
 * writes are parsed behind their replies from then on. Call after
 * ppl_store_start_elision and _archive (with or without them: the pool
 * and the archive must be in place before the first write is parsed
 * behind) and before ppl_store_start_from_disk. Does nothing when the
 * option is off. 0, or -1 with a message: the export must not start. */
int ppl_store_start_ingest_behind(struct ppl_store *e, const struct ppl_config *c, char *err, size_t errlen);

/* Log_On_Pmem (store_pmemlog.c), after ppl_store_start_elision: a log
 * write may be made durable in the pool's log area instead of by a sync
 * of the log file, which a thread of the store then makes behind it.
 * Refused without a pool, a pool without a log area, or a pool on tmpfs
 * unless Allow_Volatile_Pool. */
int ppl_store_start_log_on_pmem(struct ppl_store *e, const struct ppl_config *c, char *err, size_t errlen);
/* The host wrote a log write into the file (not synced): 0 once its
 * bytes are durable in the pool's log area -- answer it as stable -- or
 * -1 (Log_On_Pmem off, the area full, the write too large): make it
 * durable the ordinary way (sync the file) before answering it so. */
int ppl_store_log_persist(struct ppl_store *e, uint64_t fileid, uint64_t off, const struct iovec *iov, int iovcnt,
			  size_t len);
/* A base copy (store_backup.c says what it holds and why it is right):
 * every file of the datadir copied into dest (a new directory outside
 * the export, its parent existing) on a thread of the store's own, page
 * files through the store's read path, then dest/ppl-base.json with the
 * copy's start and end LSNs. Needs the log archive. 0 with what started
 * in msg, or -1 with why not (nothing started). */
enum ppl_backup_state { PPL_BACKUP_NONE, PPL_BACKUP_RUNNING, PPL_BACKUP_DONE, PPL_BACKUP_FAILED };
struct ppl_backup_status {
	enum ppl_backup_state state;
	char dest[4096];
	uint64_t start_lsn, end_lsn, started_ns, finished_ns; /* wall clock */
	uint64_t files_done, bytes_done;
	char error[512];
};
int ppl_store_backup_start(struct ppl_store *e, const char *dest, char *msg, size_t len);
/* The last (or running) copy's progress. */
void ppl_store_backup_status(struct ppl_store *e, struct ppl_backup_status *out);

/* MariaDB's log file is being made durable (a COMMIT of it): the mark
 * taken before the host's sync, then, once the sync succeeded, the
 * synced call says the log is durable up to the mark. A stable WRITE of
 * the log does both after ppl_store_log_write. Only the archive uses it:
 * it never holds what the log file could still lose. */
uint64_t ppl_store_log_mark(struct ppl_store *e);
void ppl_store_log_synced(struct ppl_store *e, uint64_t fileid, uint64_t mark);

/* Metrics_Port set: serves ppl_store_metrics() on
 * http://Metrics_Address:Metrics_Port/metrics until ppl_store_free.
 * 0, or -1 with a message (a port in use, a bad address): the export
 * works without it, so the host only logs it. */
int ppl_store_start_metrics(struct ppl_store *e, const struct ppl_config *c, char *err, size_t errlen);

/* "redo 12.3 MB, 4567 mtrs, ... " for the stats line. */
int ppl_store_format(struct ppl_store *e, char *buf, size_t len);
/* The pool's figures for a line of their own; 0 when elision is off. */
int ppl_store_format_pool(struct ppl_store *e, char *buf, size_t len);
/* The log archive's, likewise; 0 when there is none. */
int ppl_store_format_archive(struct ppl_store *e, char *buf, size_t len);

#endif
