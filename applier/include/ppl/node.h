/* The storage node's engine: redo ingest into a per-page index of pending
 * records, pages rebuilt from a base image plus those records, the elision
 * decision, and full page writes that become new bases. No Ganesha and no
 * file system inside: the embedder (the FSAL, or ppl-replay) reads and
 * writes data-file pages itself and passes images in.
 *
 * Threads: one ingest thread at a time calls ppl_node_log_*; rebuild,
 * elide, page_written and the space map may be called from any thread. */
#ifndef PPL_NODE_H
#define PPL_NODE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ppl/log.h"
#include "ppl/page_apply.h"
#include "ppl/redo.h"

struct ppl_node;

struct ppl_node_config {
	size_t page_size;        /* the server's innodb_page_size */
	bool log_is_file_image;  /* fed from a log file, not from a server's writes */
	/* Streaming: instead of keeping each page's records, hand every
	 * (page, mtr) chunk to this sink as soon as it is parsed, and forget
	 * it. `user` is a per-page slot the sink may use (NULL at first).
	 * `from_init`: the chunk starts with INIT_PAGE or FREE_PAGE, so
	 * whatever came before for this page is void. on_drop_space is called
	 * at once when the log drops a space (FILE_DELETE; TRIM_PAGES keeps the
	 * pages below the new size, and drops no space). A
	 * non-zero return stops ingest with an error. Used by ppl-replay,
	 * which needs no index: memory stays at the pages touched. */
	int (*chunk_sink)(void *arg, uint32_t space, uint32_t page_no, void **user, bool from_init,
			  uint64_t start_lsn, uint64_t end_lsn, const uint8_t *recs, size_t len);
	void (*on_drop_space)(void *arg, uint32_t space);
	void *sink_arg;
	/* Each mini-transaction the node accepts, in LSN order, before its
	 * records are indexed; a restart delivers again what it parses
	 * again. The store's log archive (store_archive.c). NULL: none. */
	void (*on_accepted)(void *arg, const struct ppl_mtr *m);
	/* Optional, with accepted_arg: the clock behind ppl_mtr.seen (when
	 * MariaDB's writes first held the mtr). */
	uint64_t (*clock)(void *arg);
	void *accepted_arg;
	/* Notes about file-level records (FILE_DELETE, TRIM_PAGES, ...),
	 * divergences and errors; no function = silent. */
	struct ppl_logger log;
};

struct ppl_node_stats {
	uint64_t log_bytes, mtrs, records, pages_indexed, chunks, chunk_bytes;
	uint64_t rec_by_type[8], rec_by_ext[PPL_EXT_COUNT], file_recs[5];
	uint64_t rebuilds, rebuild_mtrs_applied, rebuild_mtrs_skipped, bases_taken, chunks_dropped;
	uint64_t elide_asked, elide_acked, divergences;
	uint64_t unparsed_bytes;  /* log bytes received, not parsed yet (ppl_redo_unparsed_bytes) */
};

struct ppl_node *ppl_node_new(const struct ppl_node_config *cfg);
void ppl_node_free(struct ppl_node *n);

/* ---- redo ------------------------------------------------------------- */

/* The log file and its size (MariaDB creates it at full size). */
int ppl_node_log_open(struct ppl_node *n, uint64_t file_size);
/* Bytes written to ib_logfile0 at off. 0, or -1 if the log is damaged
 * (ppl_node_error()); records before the damage stay indexed. */
int ppl_node_log_write(struct ppl_node *n, uint64_t off, const void *buf, size_t len);
/* One mini-transaction from elsewhere than a log file (the log archive,
 * ppl/archive.h), in LSN order, for a node that reads no log (no
 * ppl_node_log_open): indexed, or streamed, as a parsed one is; the
 * parsed LSN becomes its end. 0, or -1 (ppl_node_error()). */
int ppl_node_feed_mtr(struct ppl_node *n, const struct ppl_mtr *m);
/* Bytes of the log file not known to be final, after ppl_node_log_live()
 * (ppl_redo_hold()). */
int ppl_node_log_hold(struct ppl_node *n, uint64_t off, const void *buf, size_t len);
/* The server's log is durable up to lsn (ppl_redo_durable()): parse what
 * the node holds below it. 0, or -1 if the log is damaged. */
int ppl_node_log_durable(struct ppl_node *n, uint64_t lsn);
/* The same for a claim that may be wrong: only when the bytes held up to
 * lsn are whole mini-transactions ending there (ppl_redo_reaches()).
 * 1 parsed, 0 not (nothing changed), -1 the log is damaged. */
int ppl_node_log_durable_if_whole(struct ppl_node *n, uint64_t lsn);
/* A node opened with log_is_file_image has read the log file up to the end
 * of its valid records; from now on it is fed a server's writes. */
int ppl_node_log_live(struct ppl_node *n);
/* Start parsing at lsn (a checkpoint, or the restart point). */
int ppl_node_log_start(struct ppl_node *n, uint64_t lsn);
/* Records of mini-transactions starting below lsn are indexed only for
 * the pages in keys ((space << 32) | page, any order; copied): a restart
 * that reads the log from before MariaDB's checkpoint (the store's own
 * restart point, I3) takes from there only the pages it elided; for every
 * other page the file is authoritative below the checkpoint (I7). File
 * records are delivered as always. 0, or -1 out of memory. */
int ppl_node_only_below(struct ppl_node *n, uint64_t lsn, const uint64_t *keys, size_t count);
/* No more log will come (batch use). */
int ppl_node_log_finish(struct ppl_node *n);
uint64_t ppl_node_parsed_lsn(const struct ppl_node *n);
/* Waits until the log is parsed up to lsn, or timeout_ns of real time
 * passed; whether it is. Woken by every step of the parse, never polled. */
bool ppl_node_wait_parsed(struct ppl_node *n, uint64_t lsn, uint64_t timeout_ns);
const struct ppl_redo_reader *ppl_node_reader(const struct ppl_node *n);
const char *ppl_node_error(const struct ppl_node *n);

/* ---- pages ------------------------------------------------------------ */

/* What the index holds for a page. */
struct ppl_node_page_info {
	bool known;              /* the log touched it since its last base */
	bool from_init;          /* the log (re)initializes it: no base needed */
	bool freed;              /* the last record for it frees it */
	bool diverged;           /* a rebuild differed from a real write: full writes only */
	uint64_t init_lsn, first_lsn, last_lsn; /* start of first pending mtr, end of last */
	unsigned chunks;
	size_t bytes;
};
bool ppl_node_page_info(struct ppl_node *n, uint32_t space, uint32_t page_no, struct ppl_node_page_info *out);

/* Applies the pending records to `frame` (the data-file page, or anything
 * if the page is initialized by the log), up to and including mtrs ending
 * at or below upto_lsn (UINT64_MAX = all). Returns PPL_APPLY_OK and sets
 * *changed when records were applied. */
enum ppl_apply_status ppl_node_rebuild(struct ppl_node *n, uint32_t space, uint32_t page_no, uint8_t *frame,
				       uint64_t upto_lsn, bool *changed, struct ppl_apply_error *err);

/* ppl_node_rebuild, where frame is not the base but an image an earlier
 * rebuild of the page's current base produced up to its LSN (a cache's):
 * only the records after that LSN are applied (ppl_replay_resume), and
 * the result is the one a rebuild from the base gives. *applied (if not
 * NULL): how many were. */
enum ppl_apply_status ppl_node_rebuild_resumed(struct ppl_node *n, uint32_t space, uint32_t page_no, uint8_t *frame,
					       uint64_t upto_lsn, bool *changed, unsigned *applied,
					       struct ppl_apply_error *err);

/* What a cache of rebuilt pages names a page's base by: the data-file
 * page's LSN and (*sum) stored checksum, or for a page the log
 * initializes (ppl_node_page_info's from_init) that initialization's
 * LSN, marked so as never to equal a stored page's, and 0: a page freed
 * and initialized again is another page. Returns the LSN. */
#define PPL_NODE_BASE_FROM_INIT (1ull << 63)
uint64_t ppl_node_base_key(bool from_init, uint64_t init_lsn, const uint8_t *base, size_t page_size,
			   uint32_t *sum);

/* Visits every page that has a sink user slot set, in (space, page) order. */
void ppl_node_for_each_user(struct ppl_node *n, void (*fn)(void *arg, uint32_t space, uint32_t page_no, void *user),
			    void *arg);

/* Visits every indexed page in (space, page) order. */
void ppl_node_for_each_page(struct ppl_node *n, void (*fn)(void *arg, uint32_t space, uint32_t page_no,
							  const struct ppl_node_page_info *info),
			    void *arg);

/* A full page image was written to the data file (after the write reached
 * it): it is the new base. Records of mini-transactions ending at or below
 * the image's LSN are in it and are dropped; so are those ending at or
 * below `superseded` (0: none beyond the image's LSN): a server writes a
 * page with every change it logged for it so far, so when the image is
 * older than records already parsed (a page written without redo: IMPORT
 * TABLESPACE writes LSN 0), those records describe a page that no longer
 * exists and must never be applied to this one. */
void ppl_node_page_written(struct ppl_node *n, const uint8_t *image, uint64_t superseded);

/* Visits the page's pending chunks (one mini-transaction's records for
 * the page each) in LSN order; from_init marks the one that initializes
 * the page. A nonzero return from fn stops the walk and is returned. */
typedef int (*ppl_node_chunk_fn)(void *arg, uint64_t start_lsn, uint64_t end_lsn, bool from_init,
				 const uint8_t *recs, size_t len);
int ppl_node_page_chunks(struct ppl_node *n, uint32_t space, uint32_t page_no, ppl_node_chunk_fn fn, void *arg);

/* Puts back a chunk kept elsewhere (the pmem pool, after a restart): it
 * must start at or after the page's last chunk. -1: out of order or out
 * of memory. */
int ppl_node_add_chunk(struct ppl_node *n, uint32_t space, uint32_t page_no, uint64_t start_lsn, uint64_t end_lsn,
		       bool from_init, const uint8_t *recs, size_t len);

/* The page's chunks will be kept for long (their records are in the pool
 * and the page is not materialized): copy them into the newest arena
 * block, so that they do not keep old blocks alive. */
void ppl_node_rehome(struct ppl_node *n, uint32_t space, uint32_t page_no);

/* ---- elision ---------------------------------------------------------- */

/* Reads the data-file page (the base) for a rebuild; returns 0 or -1. */
typedef int (*ppl_node_read_fn)(void *arg, uint32_t space, uint32_t page_no, uint8_t *frame);

/* Whether the page image (space, page, lsn, checksum) can be reproduced
 * exactly from the base and the indexed records: PPL_ELIDE_ACK or a NACK
 * reason from ppl/elision_proto.h. On a checksum mismatch the page is
 * marked diverged and reported through the config's log. */
unsigned ppl_node_elide(struct ppl_node *n, uint32_t space, uint32_t page_no, uint64_t lsn, uint32_t checksum,
			ppl_node_read_fn read_base, void *read_arg);

/* What an ACK rebuilt, for the caller's cache of rebuilt pages: an
 * elided page is most often one MariaDB evicted, and its next read finds
 * the same base and the same records (a page out of the buffer pool is
 * not changed), so the read need not rebuild it again. */
struct ppl_node_rebuilt {
	uint8_t *frame;    /* page_size bytes, the caller's: the rebuild's work frame */
	uint64_t base_lsn; /* the base it was rebuilt from, as */
	uint32_t base_sum; /* ppl_node_base_key names it */
	bool filled;       /* an ACK whose rebuild applied records */
	/* Optional, the caller's cache: copies into frame a page an earlier
	 * rebuild of this base produced up to an LSN at most upto and returns
	 * that LSN (0: none); the answer's rebuild goes on from it. Only a
	 * yes is taken from such a rebuild: anything else is asked again of
	 * the base and the records alone. */
	uint64_t (*resume)(void *arg, uint32_t space, uint32_t page_no, uint64_t base_lsn, uint32_t base_sum,
			   uint64_t upto, uint8_t *frame);
	void *resume_arg;
};
/* ppl_node_elide, and out filled on such an ACK. */
unsigned ppl_node_elide_rebuilt(struct ppl_node *n, uint32_t space, uint32_t page_no, uint64_t lsn,
				uint32_t checksum, ppl_node_read_fn read_base, void *read_arg,
				struct ppl_node_rebuilt *out);

/* Why verify mode did not compare a page write, by cause. Those up to
 * NO_FILE are the host's to tell (it sees the write's offset and form,
 * and parses the log the write vouches for first); the rest
 * ppl_node_verify's. Every cause but four says why the log cannot
 * describe the bytes; those four (log_behind: MariaDB writes a page only
 * after its log; records_short, records_gone, no_base: records the index
 * should hold) are counted as unexplained (ppl_verify_skip_explained). */
enum ppl_verify_skip {
	PPL_VERIFY_COMPARED = 0,
	PPL_VERIFY_NOT_FULL_CRC32,   /* another checksum: innodb_checksum_algorithm, ROW_FORMAT=COMPRESSED */
	PPL_VERIFY_PAGE_COMPRESSED,  /* page_compressed: stored in a form the redo does not produce */
	PPL_VERIFY_OTHER_PAGE,       /* the image names another page: the doublewrite buffer's copies */
	PPL_VERIFY_NO_LSN,           /* LSN 0: written without redo (a new file's pages, IMPORT) */
	PPL_VERIFY_NO_INDEX,         /* no index: ingest stopped or not started */
	PPL_VERIFY_LOG_BEHIND,       /* an LSN past the log the node holds: written before its log (not WAL) */
	PPL_VERIFY_NO_FILE,          /* the datadir holds no file for the page's space: a copy (IMPORT's) */
	PPL_VERIFY_TOOL_OVER_ELIDED, /* at or below an elided write's LSN: a tool's bytes */
	PPL_VERIFY_DIVERGED_BEFORE,  /* the page diverged earlier and is written in full since */
	PPL_VERIFY_BASE_DAMAGED,     /* the file's page fails its checksum: the write is the new base */
	PPL_VERIFY_NO_REDO,          /* other bytes than the file's at the file's LSN: a tool, a restore */
	PPL_VERIFY_OLDER,            /* older than the file's page: a client replaying its writes */
	PPL_VERIFY_NO_BASE,          /* the file's page unreadable, past its end or not a sound page */
	PPL_VERIFY_NOT_REACHED,      /* the records end short of the image's LSN */
	PPL_VERIFY_RECORDS_GONE,     /* nothing pending, yet the file's page is older than the image */
	PPL_VERIFY_LSN_FUTURE,       /* an LSN more than the log's capacity past its parse: no log holds it, a tool's */
	PPL_VERIFY_OTHER_DATADIR,    /* a file of another datadir under the export: another log describes it */
	PPL_VERIFY_AFTER_WIPE,       /* over a page a tool zeroed in its file: MariaDB writing it back (doublewrite) */
	PPL_VERIFY_SKIP_COUNT
};
const char *ppl_verify_skip_name(enum ppl_verify_skip s);
/* Unexplained page writes are logged one by one up to this many per
 * cause's teller (the node, the host), then only counted: enough to look
 * into, never a flood. */
#define PPL_VERIFY_SAID_MAX 20
bool ppl_verify_skip_explained(enum ppl_verify_skip s);

/* Verify mode: a full page image is about to be written, and compared
 * byte for byte with the page this node would serve at the image's LSN:
 * the rebuild from the index when records of the page lie at or below
 * that LSN, else the file's page when it is at that very LSN. 1:
 * identical; 0: not comparable, *skip (may be NULL) says why (a change
 * without redo is reported through the log, no divergence); -1: they
 * differ, the page is marked diverged (full page writes only) and
 * reported through the config's log with its type, the first differing
 * byte and the record types involved. */
int ppl_node_verify(struct ppl_node *n, const uint8_t *image, ppl_node_read_fn read_base, void *read_arg,
		    enum ppl_verify_skip *skip);

/* ---- files -------------------------------------------------------------- */

/* File-level events from the log, in LSN order, for the embedder to act on
 * (ppl-replay deletes and creates files; the FSAL moves state). Delivered
 * after ppl_node_log_write() returns, outside the lock; in streaming mode
 * (chunk_sink) at once, in log order with the chunks. */
struct ppl_node_file_event {
	uint8_t type;            /* PPL_FILE_CREATE/DELETE/RENAME/MODIFY, or PPL_EXT_TRIM_PAGES */
	uint32_t space_id;
	uint32_t pages;          /* TRIM_PAGES: the new size in pages */
	uint64_t lsn;            /* start of the mini-transaction */
	char name[512], name2[512];
};
typedef void (*ppl_node_file_fn)(void *arg, const struct ppl_node_file_event *e);
void ppl_node_on_file_event(struct ppl_node *n, ppl_node_file_fn fn, void *arg);

/* Forgets every page of a space (the file was deleted or truncated). */
void ppl_node_drop_space(struct ppl_node *n, uint32_t space);

void ppl_node_get_stats(struct ppl_node *n, struct ppl_node_stats *out);

#endif
