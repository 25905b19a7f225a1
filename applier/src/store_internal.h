/* What the store's files share: struct ppl_store, the constants more than
 * one of them uses, and the functions one of them calls in another. Not a
 * public header: only the files of the store's engine include it (store.c,
 * store_ingest.c, store_pages.c, store_gate.c, store_workers.c,
 * store_figures.c, store_archive.c ...); store_config.c and store_json.c use ppl/store.h like
 * any host. ppl/store.h's NOTES say how the parts fit (threads, locks,
 * ingest states); each file's first comment says which part it holds.
 * Comments in these files cite the invariants by number (I1-I7, "DESIGN
 * I3"): ARCHITECTURE.md, "The invariants (I1-I7)". */
#ifndef PPL_STORE_INTERNAL_H
#define PPL_STORE_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <time.h>

#include "ppl/histogram.h"
#include "ppl/log.h"
#include "ppl/node.h"
#include "ppl/store.h"
#include "ppl/store_config.h"

#define STRIPES 1024u
#define WIPED_KEPT 64u
#define BEHIND_MARKS 256u

#define SLOG(e, level, ...) PPL_LOG(&(e)->env.log, level, __VA_ARGS__)

/* Ingest stopped (e->stopped), read where log_lock is not held: the
 * elision decision, a held read's wait, the workers, the figures. */
#define STOPPED(e) __atomic_load_n(&(e)->stopped, __ATOMIC_ACQUIRE)

struct store_pmemlog;

struct ppl_store {
	struct ppl_store_env env;     /* the host's logger, thread hook, clock and I/O table (never NULL) */
	char *exportdir;
	char *datadir;                 /* where ib_logfile0 is: the export, or a directory in it */
	pthread_mutex_t log_lock;      /* ingest is one thread at a time (node.h) */
	/* Ingest_Behind (store_behind.c): log writes queued for the ingest
	 * thread, all under q_lock */
	pthread_mutex_t q_lock;
	pthread_cond_t q_work, q_done;  /* a write queued; a write ingested */
	pthread_t q_thread;
	bool behind, q_stop;            /* behind: the thread runs (atomic reads too) */
	struct log_job *q_head, *q_tail;
	uint64_t q_in, q_out, q_bytes;  /* writes handed over, ingested; bytes waiting */
	uint64_t q_synced;              /* a synced mark the thread has not reached */
	uint64_t q_parsed_at[BEHIND_MARKS]; /* parsed LSN after write k, at k % BEHIND_MARKS */
	uint64_t behind_max_bytes, behind_waits, behind_wait_ns, behind_inline;
	pthread_mutex_t order_lock;    /* held from a log write's begin to its end */
	struct store_pmemlog *pmemlog; /* Log_On_Pmem's syncer, or NULL (store_pmemlog.c) */
	struct ppl_node *node;         /* published once started, under log_lock */
	struct ppl_node *building;     /* not yet started: no reader sees it */
	bool started;                  /* parsing from a checkpoint */
	bool stopped;                  /* the log could not be parsed: ingest off. Set under
					* log_lock, read without it: STOPPED() */
	bool waiting_logged;
	unsigned start_attempts;       /* catch-ups from the file that met a damaged tail */
	/* After a restart with the pool attached, the first look at the log
	 * met bytes still being written: ingest starts only at MariaDB's next
	 * log write, and until then page reads wait (store_start_wait).
	 * Atomic; set and cleared under log_lock. */
	bool start_pending;
	uint64_t start_pending_ns;     /* when it was set (the store's clock) */
	pthread_cond_t start_cond;     /* with log_lock: start_pending cleared */
	char start_why[512];           /* why the last ingest start failed, when the node does not say */
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
	struct ppl_metrics_http *metrics; /* Metrics_Port: the OpenMetrics endpoint */
	pthread_mutex_t stripe_lock;
	pthread_cond_t stripe_cond;
	uint32_t inflight[STRIPES];    /* page writes between begin and end */
	uint8_t busy[STRIPES];         /* materialization in progress */
	pthread_mutex_t gate_lock;     /* one checkpoint gate at a time */
	bool gate_all;                 /* the elided set is incomplete: gate every page */
	bool pool_keeps_nothing;       /* volatile pool, not allowed to keep records (Allow_Volatile_Pool) */
	/* The pool's durable LSN the export's marker last noted (apply
	 * worker 0 and the start only; pool_marker.h) */
	uint64_t marker_lsn;
	bool marker_warned;
	/* pages acknowledged (elided) since their last base: each must be
	 * materialized before a checkpoint passes its records */
	pthread_mutex_t elided_lock;
	uint64_t *elided;              /* open addressing, key+2 (0 empty, 1 removed) */
	size_t elided_n, elided_used, elided_cap;
	uint64_t materialized, gate_waits, gate_ns;
	/* the last checkpoint the gate passed (atomic); log writes that
	 * waited for the wrap guard, how long, the pages it wrote; pages
	 * kept marked in the pool over their cap (store_wrap.c) */
	uint64_t gated_ckpt;
	uint64_t wrap_waits, wrap_ns, wrap_pages, spilled_kept;
	/* Elided pages a read had to rebuild from more than HOT_CHUNKS
	 * mini-transactions: an apply worker writes them into their files,
	 * so that the next read of a hot page is plain and its history
	 * starts again (store_note_hot). A leaf lock. */
	pthread_mutex_t hot_lock;
	uint64_t hot[64];
	size_t hot_n;
	uint64_t hot_settled;
	/* pages whose records went to the pool instead, records appended,
	 * materialized because over the cap or because the pool was full */
	uint64_t pool_kept, pool_records, pool_over_cap, pool_full;
	uint64_t pool_unfit;           /* materialized: one mini-transaction's records too large for a pool record */
	uint64_t pool_loaded_pages, pool_loaded_records; /* put back at a restart */
	uint64_t cleaned, ahead;       /* materialized by the cleaner; settled ahead of a checkpoint */
	/* The disk of the data files failing (store_disk_failed): set by a
	 * failed read, write or sync of a materialization, cleared by the
	 * next page written and synced; while set no page is elided. The
	 * failures of this episode (for the log), of all time, and the
	 * elision questions refused meanwhile. Atomics. */
	int disk_failing;
	int disk_no_slot_told;         /* this episode's "no doublewrite slot" line is out */
	int pool_failed_told;          /* the pool's failed msync is in the log */
	uint64_t disk_episode_failures, disk_failures, elide_refused_disk;

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
	/* whole READ latency in us (the host's read and the store's part):
	 * reads that served no page rebuilt, and reads that served one */
	struct ppl_histogram read_plain_us, read_rebuilt_us;
	/* the elision service's answer in us, from the question's arrival to
	 * its verdict (ppl_store_elide): the storage node's part of the
	 * round trip libcatcher waits for */
	struct ppl_histogram answer_us;
	struct ppl_latency rebuild_ns; /* what a page rebuilt for a read cost, the cache included */
	uint64_t suspect_upto;         /* after a restart: pages with records below this LSN may
					* have been elided by the previous run (mark_suspect) */
	uint64_t suspect_seen, suspect_writes;
	/* After a restart, the log's last bytes are not known to be final
	 * (feed_to_end holds them back): the pages their records touch, by
	 * key, with the end of their last record there. A read of one waits
	 * until the parse has passed it (store_hold_wait). Written before `held`
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
	/* Spaces whose file vanished without the store being told while it
	 * kept pages of them that exist nowhere else (space_vanished in
	 * store_gate.c): logged once, kept until the file is back or the
	 * operator forgets the space. A leaf lock. */
	pthread_mutex_t missing_lock;
	uint32_t *missing;
	size_t missing_n, missing_cap;
	uint32_t dw_page_size;         /* the largest page the pool's doublewrite slots hold */
	/* verify mode's counts: identical, diverged, and not compared by
	 * cause ([PPL_VERIFY_COMPARED] unused) */
	uint64_t verify_same, verify_diverged, verify_skip[PPL_VERIFY_SKIP_COUNT];
	uint64_t verify_behind_said; /* log_behind page writes logged (the first few) */
	/* pages last zeroed inside their files (store_pages.c note_wiped),
	 * verify mode only; a leaf lock */
	pthread_mutex_t wiped_lock;
	uint64_t wiped[WIPED_KEPT];
	unsigned wiped_next;

	/* The log archive (Archive_Path; store_archive.c). archive_lock is a
	 * leaf: the archive thread's stop flag and why archiving stopped. */
	struct ppl_archive *archive;
	char archive_dir[4096];
	pthread_t archive_thread;
	bool archive_thread_started;
	pthread_mutex_t archive_lock;
	pthread_cond_t archive_cond;
	bool archive_stop;
	bool archive_broken;           /* archiving stopped for good: why in archive_why (atomic) */
	char archive_why[512];
	uint64_t archive_flush_failures, archive_said_ns;
	bool archive_check_pending;    /* the next mtr the archive holds is compared with it (under log_lock) */
	uint64_t base_floor;           /* the newest base's start LSN: retention keeps the archive from here (atomic) */
	/* scheduled base copies (Base_Path, Base_Interval, Base_Keep): the
	 * archive thread's own */
	char *base_path;
	uint64_t base_interval_ns, base_last_ns, base_tried_ns;
	unsigned base_keep;
	bool base_running;
	/* The base copy (store_backup.c): backup_lock is a leaf */
	pthread_mutex_t backup_lock, backup_start_lock;
	struct ppl_backup_status backup;
	pthread_t backup_thread;
	bool backup_thread_started, backup_stop;
	/* MariaDB's log is durable in its file up to this LSN (a COMMIT or a
	 * stable WRITE of it; what was in the file at start): atomic */
	uint64_t log_durable_lsn;
};

struct held_page {
	uint64_t key, lsn;
};

/* How many times ingest start may find a damaged log tail before the
 * damage counts as real (see start_ingest). */
#define START_ATTEMPTS 8

/* How long the log followed must have been quiet before another
 * ib_logfile0 under the export is taken for MariaDB's log (a datadir made
 * or copied next to the old one, as mysql-test-run does). */
#define OTHER_LOG_QUIET_NS (5 * 1000000000ull)

/* Stripes cover 64 KiB units of a file, the largest InnoDB page, so every
 * page lies in one unit whatever the page size, and a write's begin and
 * end take and release the same stripes even when the page size becomes
 * known while the write is in flight. */
#define STRIPE_SHIFT 16

/* Page keys (space << 32 | page) collected by a walk, to act on after it
 * (the walks hold locks the actions take). */
struct key_list {
	uint64_t *keys;
	size_t n, cap;
	bool incomplete;               /* out of memory: some page is missing */
};

/* What a walk of the index lists (store_collect_due): the elided pages
 * with a record below upto -- of one part, of one space, or all. */
struct due {
	struct ppl_store *e;
	uint64_t upto;
	unsigned part, nparts;         /* only keys hashing to part (nparts 0: all) */
	bool one_space;                /* only pages of space */
	uint32_t space;
	struct key_list l;
};

/* ---- functions of one store file that another calls ------------------------ */

/* The store's files call each other through these; nothing outside the
 * library may (the FSAL plugin links it in, and ganesha.nfsd or its other
 * plugins must neither see nor bind a generic name like these). */
#pragma GCC visibility push(hidden)

/* store.c: the clock, file status, the published node, the parts' logger, which space a file holds */

/* stat(2) through the host's I/O table (ppl_store_env.io). */
int store_stat(const struct ppl_store *e, const char *path, struct stat *st);
/* A deadline ns from now for pthread_cond_timedwait (CLOCK_REALTIME, the
 * condition variables' clock): the store's threads that wake on a signal
 * or every so often (the archive, Log_On_Pmem's syncer, a held read). */
static inline void store_deadline(struct timespec *t, uint64_t ns)
{
	clock_gettime(CLOCK_REALTIME, t);
	ns += (uint64_t)t->tv_nsec;
	t->tv_sec += (time_t)(ns / 1000000000u);
	t->tv_nsec = (long)(ns % 1000000000u);
}

/* The host's monotonic clock (ppl_store_env.now_ns), or CLOCK_MONOTONIC. */
uint64_t store_now_ns(const struct ppl_store *e);
/* A log write as the synchronous path ingests it (store_ingest.c): from
 * ppl_store_log_write, or from the ingest thread in the order written. */
int store_log_ingest(struct ppl_store *e, uint64_t fileid, uint64_t off, const struct iovec *iov, int iovcnt,
		     size_t len);
/* Ingest_Behind (store_behind.c). drain: every log write handed over
 * before the call is ingested (no-op without the thread, or on it). */
void store_behind_stop(struct ppl_store *e);
bool store_behind_on(struct ppl_store *e);
int store_behind_enqueue(struct ppl_store *e, uint64_t fileid, uint64_t off, const struct iovec *iov, int iovcnt,
			 size_t len);
void store_behind_drain(struct ppl_store *e);
/* On the ingest thread, when the log write it ingests arrived (the wall
 * clock): the archive's stamp (store_archive_clock). 0 elsewhere. */
uint64_t store_behind_arrival_ns(void);
/* The same, only when the log is not parsed up to lsn. */
void store_behind_drain_to(struct ppl_store *e, uint64_t lsn);
uint64_t store_behind_mark(struct ppl_store *e);
void store_behind_synced(struct ppl_store *e, uint64_t k);
void store_behind_figures(struct ppl_store *e, struct ppl_store_figures *f);
/* "; ingest behind the replies: ..." for the stats line, or nothing (0). */
int store_behind_format(struct ppl_store *e, char *buf, size_t len);
/* Log_On_Pmem (store_pmemlog.c): the log area's writes put back into the
 * log file when the pool opens; the syncer stopped (the area emptied);
 * figures and the stats line's part. */
int store_pmemlog_repair(struct ppl_store *e, char *err, size_t errlen);
void store_pmemlog_stop(struct ppl_store *e);
void store_pmemlog_figures(struct ppl_store *e, struct ppl_store_figures *f);
int store_pmemlog_format(struct ppl_store *e, char *buf, size_t len);
/* The log file is durable up to lsn: the archive may flush that far. */
void store_log_durable_to(struct ppl_store *e, uint64_t lsn);

/* The published node; outside log_lock only inside an RCU read-side section. */
struct ppl_node *store_node_of(struct ppl_store *e);
/* The logger the store gives its parts: their lines under the datadir's name. */
struct ppl_logger store_part_logger(struct ppl_store *e);
/* Notes that fileid holds space (in the datadir too when the map cannot take it). */
void store_map_set(struct ppl_store *e, uint64_t fileid, uint32_t space);
/* The space the file map has for fileid. */
bool store_map_get(struct ppl_store *e, uint64_t fileid, uint32_t *space);
/* The space a file holds, by what its pages or the log said. */
bool store_file_space(struct ppl_store *e, uint64_t fileid, uint32_t *space);
/* The file the datadir followed has, there now, for space: its stat, its inode. */
bool store_space_file_stat(struct ppl_store *e, uint32_t space, struct stat *st);
bool store_space_file_ino(struct ppl_store *e, uint32_t space, uint64_t *ino);
/* Whether fileid is the followed datadir's file of space, not another datadir's. */
bool store_holds_space(struct ppl_store *e, uint64_t fileid, uint32_t space);

/* store_ingest.c: redo ingest, the held tail, the pool's records */

/* The directory holding the ib_logfile0 with this inode (0: any): dir
 * itself, or a directory up to depth levels down (a datadir inside the
 * export); false if none. */
bool store_find_log(struct ppl_store *e, const char *dir, uint64_t ino, int depth, char *out, size_t outlen);

/* Ingest off until the log is left behind (detach), with the line that says why. */
void store_stop_ingest(struct ppl_store *e, const char *why);
/* After a restart, while the held tail is parsed: every page with records counts as elided. log_lock held. */
void store_after_restart_parse(struct ppl_store *e, bool log_write);
bool store_log_vouched(struct ppl_store *e, struct ppl_node *n, uint64_t lsn);
/* Orders struct held_page by key, for qsort and bsearch. */
int store_held_cmp(const void *a, const void *b);
/* A read of a page with records in the held tail waits until they are parsed; 0, or EIO. */
int store_hold_wait(struct ppl_store *e, struct ppl_node *n, uint32_t space, uint32_t page_no);
int store_start_wait(struct ppl_store *e);
/* Appends a page's key; out of memory marks the list incomplete. */
void store_key_list_add(struct key_list *l, uint32_t space, uint32_t page_no);

/* store_pages.c: page I/O and the stripes */

/* len bytes at byte position pos of the iovec: into buf when out, else from buf into the iovec. */
void store_iov_copy(struct iovec *iov, int iovcnt, size_t pos, uint8_t *buf, size_t len, bool out);
/* Drops everything held for a page (index, pool, elided set); false when the index had nothing. */
bool store_forget_page(struct ppl_store *e, struct ppl_node *n, uint32_t space, uint32_t page_no);
/* The stripe of a file's 1 << STRIPE_SHIFT byte unit. */
unsigned store_stripe_of(uint64_t fileid, uint64_t unit);

struct store_batch;

/* store_gate.c: the elided set, settle and materialize, the checkpoint gate, the elision decision */

/* Adds or removes a page of the elided set; false when an add could not be recorded. */
bool store_elided_put(struct ppl_store *e, uint64_t key, bool add);
/* Removes the space's pages from first_page on from the elided set; returns how many. */
size_t store_elided_drop_pages(struct ppl_store *e, uint32_t space, uint32_t first_page);
/* Removes every page of the space from the elided set; returns how many. */
size_t store_elided_drop_space(struct ppl_store *e, uint32_t space);
/* I7: a space whose file is gone keeps nothing: no records, in memory or the pool, no elided page. */
bool store_drop_space(struct ppl_store *e, uint32_t space, const char *why);
/* I7: whether a read of the page is served rebuilt (this node may have elided it). */
bool store_served_rebuilt(struct ppl_store *e, uint32_t space, uint32_t page_no);
/* Whether the page is in the elided set. */
bool store_elided_has(struct ppl_store *e, uint64_t key);
/* A materialization's read, write or sync of the data file of `space`
 * failed with err (`what`: "an open", "a read", "a write", "a sync"). Elision stops until a
 * page is written again (store_disk_wrote): a full or failing disk must
 * not be given more pages whose only copy is their records. The first
 * failure of an episode logs what happened and what to do. Returns
 * whether the caller should log its own line for this page too (the
 * first few of an episode: the rest are counted, not logged). */
bool store_disk_failed(struct ppl_store *e, uint32_t space, uint32_t page_no, const char *what, int err);
/* Whether the pool's file failed to persist (a failed msync): then no
 * page is elided and none is kept in the pool (settle writes it into its
 * file), until the store is opened again. Logged once. */
bool store_pool_failed(struct ppl_store *e);
/* Whether to log that a page found no doublewrite slot: always, but
 * while the disk fails only once (every page would say it). */
bool store_no_slot_tell(struct ppl_store *e);
/* A page was written into its data file and synced, or (why says) the
 * disk is worth trying again. */
void store_disk_wrote(struct ppl_store *e, const char *why);

/* While the disk fails (apply worker 0, each second): the pages whose
 * doublewrite slots are kept written again, or one elided page: the only
 * way to learn that the disk takes pages again when no checkpoint needs
 * one written, and to get the slots back. */
void store_disk_probe(struct ppl_store *e, struct ppl_node *n);

/* The page's records made durable in the pool, or the page materialized
 * (through batch b when not NULL: durable once b is flushed); takes its stripe. */
int store_settle_page(struct ppl_store *e, struct ppl_node *n, uint32_t space, uint32_t page_no,
		      struct store_batch *b);
/* The page written into its data file through a doublewrite slot; takes its stripe. */
int store_materialize_page(struct ppl_store *e, struct ppl_node *n, uint32_t space, uint32_t page_no,
			   struct store_batch *b);
/* The page in its data file is at the LSN of frame, durably: records up to it leave the node and the pool. */
void store_page_settled(struct ppl_store *e, struct ppl_node *n, const uint8_t *frame);
/* Which of nparts parts (one per apply worker) a page key falls in. */
unsigned store_key_part(uint64_t key, unsigned nparts);
/* A ppl_node_for_each_page walk: lists in d->l the elided pages its struct due selects. */
void store_collect_due(void *arg, uint32_t space, uint32_t page_no, const struct ppl_node_page_info *i);
/* A log write that holds a checkpoint block: what it passes is settled first (I3); 0 or an errno. */
int store_checkpoint_gate(struct ppl_store *e, uint64_t off, const struct iovec *iov, int iovcnt, size_t len);
/* A data-file write of the page failed earlier and its doublewrite slot was
 * kept: true, and frame (the file's page) replaced by the kept image when it
 * is torn or not newer. The page's stripe held, or a read of it in flight. */
bool store_dw_kept_base(struct ppl_store *e, uint32_t space, uint32_t page_no, uint8_t *frame);
/* Writes every elided page into its data file (a clean stop, a detach). */
void store_materialize_elided(struct ppl_store *e, struct ppl_node *n);
/* A page's base as its data file holds it, for the node (verify mode, the elision verdict). */
int store_read_base(void *arg, uint32_t space, uint32_t page_no, uint8_t *frame);

/* store_batch.c: materializations written together, one sync per file */

#define STORE_BATCH_MAX 16
struct store_batch_page {
	uint32_t space, page_no;
	int slot;                      /* its doublewrite slot, staged */
	bool kept;                     /* an older kept slot of the page goes once it is durable */
	unsigned file;                 /* index into file[] */
	uint8_t *frame;                /* the image written (the batch frees it) */
};
struct store_batch_file {
	uint32_t space;
	uint64_t ino;
	int fd;
};
struct store_batch {
	struct ppl_store *e;
	struct ppl_node *n;
	size_t cap, npages, nfiles;
	struct store_batch_page page[STORE_BATCH_MAX];
	struct store_batch_file file[STORE_BATCH_MAX];
	size_t written;                /* pages written through the batch, all flushes */
	size_t failed;                 /* pages whose file could not be synced, all flushes */
	size_t failed_acked;           /* of them, pages acknowledged to libcatcher */
	/* The space whose file this batch's work found there last, and its
	 * inode: a gate's pass settles many pages of one space, and looking
	 * at the directory for each (two path walks, an open) cost more
	 * than the settling. Until the next flush: a pass is milliseconds,
	 * and MariaDB's checkpoint waits for it. */
	bool checked;
	uint32_t checked_space;
	uint64_t checked_ino;
};
void store_batch_init(struct store_batch *b, struct ppl_store *e, struct ppl_node *n);
/* Stages frame (a rebuilt page of space's file ino; the batch owns it
 * from now on) in a doublewrite slot and writes it to its file without a
 * sync; 0, or -1 when it could not be (logged, its slot kept). The page's
 * stripe is held by the caller. */
int store_batch_write(struct store_batch *b, uint32_t space, uint32_t page_no, uint64_t ino, uint8_t *frame, bool kept);
/* Syncs every file written, then settles each page whose file is durable;
 * returns b->failed. Never takes a stripe. */
size_t store_batch_flush(struct store_batch *b);

/* The pool's durable LSN noted in the export's marker when it moved and
 * the pool holds records (apply worker 0, about once a second). */
void store_marker_follow(struct ppl_store *e);

/* store_wrap.c: the restart point and the log's wrap (I3) */

/* After the gate settled what a checkpoint at ckpt passes (0: no new
 * checkpoint), moves the pool's durable LSN -- the restart point -- up to
 * min(ckpt, the oldest record of a marked page kept only in the log);
 * never back. gate_lock held. 0, or EIO. */
int store_restart_advance(struct ppl_store *e, struct ppl_node *n, uint64_t ckpt);
/* Before a log write at file offset off: when it would overwrite records
 * of marked pages, they are materialized first; EIO when one could not
 * be (the write must fail). */
int store_wrap_guard(struct ppl_store *e, uint64_t off, size_t len);
/* Apply worker idx: materializes its part of the marked pages whose
 * records are more than half the log behind the parse. */
void store_keep_ahead(struct ppl_store *e, struct ppl_node *n, unsigned idx);

/* The rebuilt-page cache's page of this base up to at most upto, for a
 * rebuild to go on from (ppl_page_cache_get_before; struct
 * ppl_node_rebuilt's resume). */
uint64_t store_cache_resume(void *arg, uint32_t space, uint32_t page_no, uint64_t base_lsn, uint32_t base_sum,
			    uint64_t upto, uint8_t *frame);

/* Rebuilds the page in frame (its base, as the file holds it, info
 * read before it) to the end of its records: from the rebuilt-page
 * cache's older image of this base when there is one, else from the
 * base. *spare: a page-size work frame, allocated on first use, the
 * caller's to free. *applied: the mini-transactions applied. */
enum ppl_apply_status store_rebuild(struct ppl_store *e, struct ppl_node *n, uint32_t space, uint32_t page_no,
				    const struct ppl_node_page_info *info, uint8_t *frame, uint8_t **spare, bool *changed,
				    unsigned *applied, struct ppl_apply_error *err);

/* store_workers.c: background apply */

/* A read rebuilt this many of a page's mini-transactions or more: the
 * page is hot and its history long; a worker makes it a new base. */
#define HOT_CHUNKS 32
/* Queues an elided page for an apply worker to materialize (a read found
 * its history long); dropped when the queue is full or there is no worker. */
void store_note_hot(struct ppl_store *e, uint32_t space, uint32_t page_no);

/* Starts count apply workers (Apply_Threads). */
void store_start_workers(struct ppl_store *e, unsigned count);
/* Stops the apply workers and waits for them. */
void store_stop_workers(struct ppl_store *e);

/* store_archive.c: the log archive */

uint64_t store_wall_ns(void);

/* The node's hook (ppl_node_config.on_accepted): appends to the archive. */
void store_archive_accept(void *arg, const struct ppl_mtr *m);
/* Ingest starts at LSN start in a log file of log_size bytes (under
 * log_lock, before the node is fed): the archive takes what lies between
 * its end and start from the file, or stops when the log lost it. */
void store_archive_ingest_start(struct ppl_store *e, uint64_t start, uint64_t log_size);
/* Ingest started and parsed the file up to parsed: durable. */
void store_archive_ingest_started(struct ppl_store *e, uint64_t parsed);
/* The node's clock for ppl_mtr.seen (the store's wall clock): when
 * MariaDB's log writes first held a mini-transaction, its archive stamp. */
uint64_t store_archive_clock(void *arg);
/* A log write is about to overwrite LSNs below over_lsn: the archive
 * makes them durable now, or stops (never holds the write). */
void store_archive_before_overwrite(struct ppl_store *e, uint64_t over_lsn);
void store_stop_archive(struct ppl_store *e);
/* A base copy from start_lsn finished (or was found registered). */
void store_archive_base_done(struct ppl_store *e, uint64_t start_lsn);
/* store_backup.c: a running base copy is stopped (it ends failed) */
void store_stop_backup(struct ppl_store *e);
void store_archive_figures(struct ppl_store *e, struct ppl_store_figures *f);
/* store_wrap.c: the LSN a log write at file offset off ends at (0: not
 * known), and the log's capacity in *cap */
uint64_t store_log_write_end_lsn(struct ppl_node *n, uint64_t off, size_t len, uint64_t *cap);

#pragma GCC visibility pop

#endif
