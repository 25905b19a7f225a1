/* The per-page log (PPL) pool: small per-page redo kept durable on
 * (emulated) NVDIMM, after NV-PPL.
 *
 * A pool is one file mapped with libpmem: real persistent memory on a DAX
 * mount, or a file on tmpfs standing in for it. It holds
 *   - a superblock tying it to one datadir (layout in pool_media.h),
 *   - per-page chains of 64 B blocks (configurable) holding the redo record
 *     bytes of each page with their LSNs, at most max_per_page bytes of
 *     blocks per page,
 *   - doublewrite slots: a page image is made durable here before it is
 *     written to its data file, so a torn data-file write can be repaired,
 *   - the durable LSN: the point from which the redo log must be re-read
 *     after a crash (the store's restart point: store_wrap.c),
 *   - the log area: MariaDB's log writes made durable here, so that a
 *     commit need not wait for the log file's sync (Log_On_Pmem,
 *     store_pmemlog.c), replayed into the file after a crash.
 * A DRAM index (liburcu lock-free hash table) maps (space, page) to the
 * page's chain and to records that did not fit (over the cap, or pool
 * full): those stay in DRAM only, and the caller must materialize the page
 * before the redo log wraps over them (DESIGN I3).
 *
 * Crash consistency: every change becomes visible through one aligned
 * 8-byte store made durable after the bytes it publishes; a crash leaves
 * the old state or the new one. Every record and header carries a
 * checksum, so damage is reported, never applied.
 *
 * Threads: appends, reclaims and doublewrite calls may come from several
 * threads (writers of one page are serialized by a lock chosen by the
 * page's hash); readers (ppl_pool_records, ppl_pool_page_info) take no
 * lock. Threads are registered with RCU automatically (urcu-bp). */
#ifndef PPL_POOL_H
#define PPL_POOL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include "ppl/log.h"

struct ppl_pool;

#define PPL_POOL_IDENTITY_MAX 127

/* Shape of a new pool. Zero fields take the defaults in brackets. */
struct ppl_pool_geometry {
	uint64_t size;          /* bytes of the pool file [64 MiB] */
	uint32_t block_size;    /* power of two, 64..4096 [64] */
	uint32_t max_per_page;  /* bytes of blocks per page, a multiple of block_size [256] */
	uint32_t dw_slots;      /* doublewrite slots [32] */
	uint32_t dw_page_size;  /* largest page a slot holds, 4096..65536 [65536: any InnoDB page] */
	/* bytes of the log area, a multiple of 4096, 64 KiB..1 GiB, or
	 * PPL_POOL_NO_LOG_AREA [an eighth of the pool up to 16 MiB; none
	 * when that is under 256 KiB] */
	uint64_t log_size;
	const char *identity;   /* what the pool belongs to, e.g. the datadir (required) */
};

/* Creates a new pool file; refuses to overwrite an existing non-empty
 * file. 0, or -1 with a message in err. */
int ppl_pool_create(const char *path, const struct ppl_pool_geometry *g, char *err, size_t errlen);

/* Reads and writes data-file pages for the doublewrite restore at open.
 * read: 0, or -1 if the page cannot be read (file gone). write: 0 once the
 * page is durable in the data file, or -1. */
typedef int (*ppl_pool_page_read_fn)(void *arg, uint32_t space, uint32_t page_no, uint8_t *buf, size_t size);
typedef int (*ppl_pool_page_write_fn)(void *arg, uint32_t space, uint32_t page_no, const uint8_t *buf,
				      size_t size);

/* Every store to the pool, every flush and every drain, for the
 * crash-consistency test (NULL in production). Offsets are from the start
 * of the pool file. */
struct ppl_pool_tracer {
	void (*store)(void *arg, uint64_t off, const void *src, size_t len);
	void (*flush)(void *arg, uint64_t off, size_t len);
	void (*drain)(void *arg);
	void *arg;
};

#define PPL_POOL_NO_LOG_AREA UINT64_MAX

struct ppl_pool_options {
	const char *identity;        /* must equal the pool's; NULL = accept any (tools) */
	uint32_t block_size;         /* must equal the pool's; 0 = accept */
	uint32_t max_per_page;       /* must equal the pool's; 0 = accept */
	bool read_only;              /* inspect: map read-only, repair nothing */
	unsigned low_water_pct;      /* free blocks below this: clean [10] */
	unsigned high_water_pct;     /* clean until free blocks reach this [25] */
	ppl_pool_page_read_fn read_page;   /* NULL: doublewrite slots are kept, not restored */
	ppl_pool_page_write_fn write_page;
	void *page_arg;
	struct ppl_logger log;       /* recovery findings and damage; no function = silent */
	const struct ppl_pool_tracer *tracer;
	bool index_wait;             /* build every index entry before returning (tools) */
};

/* What the open-time scan found and did. */
struct ppl_pool_recovery {
	uint64_t pages, records, blocks_used, blocks_free;
	uint64_t orphan_blocks;        /* in no chain, not marked free: blocks of freed chains, or of an append a crash cut short (normal) */
	uint64_t replaced_chains;      /* an interrupted chain replacement finished */
	uint64_t damaged_pages;        /* chain or record checksum failed: not applied */
	uint64_t damaged_blocks;
	uint64_t dw_pending;           /* slots that were in use at the crash */
	uint64_t dw_restored;          /* data-file page torn or older: copied back */
	uint64_t dw_current;           /* data-file page already complete */
	uint64_t dw_unreadable;        /* data-file page could not be read (or no callback) */
	uint64_t dw_needs_restore;     /* torn or older, not repaired (read-only open, or the write failed) */
	uint64_t dw_damaged;           /* slot checksum failed: left alone */
	uint64_t durable_lsn;
	uint64_t log_pending;          /* log area entries not yet known to be in the log file */
	uint64_t log_pending_bytes;
	bool log_damaged;              /* the log area's header failed its check: the open was refused */
	uint64_t elapsed_ns;           /* open, scan and doublewrite restore: the pool serves from here */
	/* Where elapsed_ns went (the rest: mapping, superblock, allocations). */
	uint64_t heads_ns;             /* every block's commit word read, chain heads sorted by page */
	uint64_t table_ns;             /* the heads merged, the hash table and directory allocated */
	uint64_t walk_ns;              /* every chain's shape checked */
	uint64_t free_ns;              /* the free list built from the blocks no chain holds */
	uint64_t dw_ns;                /* doublewrite slots checked and restored */
	/* For many pages the index entries are built after open by a
	 * background thread (lookups work meanwhile); `records` and damaged
	 * pages found then are logged, not counted here. */
	bool index_background;
	uint64_t index_ns;             /* building the entries, when done inside open */
};

/* Opens (and in read-write mode recovers) a pool. Refuses, with a message
 * saying what to do, a file that is not a pool, a pool of another layout
 * version, block size, cap or identity, a damaged superblock, a truncated
 * file. `rec` may be NULL. */
int ppl_pool_open(const char *path, const struct ppl_pool_options *o, struct ppl_pool **out,
		  struct ppl_pool_recovery *rec, char *err, size_t errlen);
void ppl_pool_close(struct ppl_pool *p);

/* What the superblock says. */
struct ppl_pool_header {
	uint32_t version, block_size, max_per_page, dw_slots, dw_page_size;
	uint64_t size, nblocks, created_unix;
	uint64_t log_size;           /* the log area's bytes, 0: none */
	uint8_t uuid[16];
	char identity[PPL_POOL_IDENTITY_MAX + 1];
	bool is_pmem;                /* real persistent memory (DAX) */
	bool is_volatile;            /* on tmpfs: emptied by a power loss or a reboot */
};
void ppl_pool_get_header(const struct ppl_pool *p, struct ppl_pool_header *out);
/* A pool's uuid as 32 lowercase hex digits and a NUL. */
void ppl_pool_uuid_hex(const uint8_t uuid[16], char out[33]);

/* ---- per-page records ------------------------------------------------- */

/* The most record bytes one pool record holds (one page's share of one
 * mini-transaction; a larger one: ppl_pool_note_in_log). */
#define PPL_POOL_RECORD_MAX 8191u

/* One page's share of one mini-transaction. from_init: it starts with
 * INIT_PAGE or FREE_PAGE, so it voids everything before it. */
struct ppl_pool_rec {
	uint64_t start_lsn, end_lsn;
	bool from_init;
	bool in_dram;                /* not in pmem: over the cap or pool full */
	uint16_t len;
	const uint8_t *bytes;
};

enum ppl_pool_status {
	PPL_POOL_OK = 0,        /* durable in the pool */
	PPL_POOL_OVER_CAP,      /* kept in DRAM only: the page is over its cap; materialize it */
	PPL_POOL_FULL,          /* kept in DRAM only: no free block; reclaim (foreground) */
	PPL_POOL_CORRUPT,       /* a checksum failed: reported, nothing applied */
	PPL_POOL_ERROR,         /* bad argument or out of memory */
	PPL_POOL_IN_LOG,        /* ppl_pool_records: some record's bytes are in the redo log only */
};
const char *ppl_pool_status_name(enum ppl_pool_status s);

/* Appends a record for a page. LSNs must not go backwards for a page. A
 * from_init record replaces the page's chain. Returns OK once the record
 * is durable; OVER_CAP or FULL when it was kept in DRAM instead (and every
 * later record of that page goes to DRAM too, to keep LSN order, until a
 * reclaim covers them). */
enum ppl_pool_status ppl_pool_append(struct ppl_pool *p, uint32_t space, uint32_t page_no,
				     const struct ppl_pool_rec *r);

/* One mini-transaction's records for the page are too large for a pool
 * record (REC_LEN_MASK): only its LSNs are noted, in DRAM, after the
 * page's other records, and the page gets a head if it has none, as an
 * over-cap page does. Its records stay in the redo log, which the caller
 * keeps from wrapping over them (ppl_pool_oldest_dram_lsn counts the
 * note); ppl_pool_records answers IN_LOG for the page until a reclaim
 * passes the note. Returns OVER_CAP (kept so), or ERROR. */
enum ppl_pool_status ppl_pool_note_in_log(struct ppl_pool *p, uint32_t space, uint32_t page_no, uint64_t start_lsn,
					  uint64_t end_lsn);

/* Calls fn for each record of the page, pmem records first, in LSN order,
 * after checking every checksum: CORRUPT (and no call) if one fails. A fn
 * returning nonzero stops the walk. OK also when the page has nothing. */
typedef int (*ppl_pool_rec_fn)(void *arg, const struct ppl_pool_rec *r);
enum ppl_pool_status ppl_pool_records(struct ppl_pool *p, uint32_t space, uint32_t page_no, ppl_pool_rec_fn fn,
				      void *arg);

struct ppl_pool_page_info {
	bool present;
	bool spilled;                /* has DRAM-only records */
	bool damaged;
	uint32_t seq;                /* chain generation */
	/* blocks > 0: the page has a head in pmem, maybe with no record (its
	 * first record was over the cap): after a restart the pool still
	 * names the page, and the store reads its records from the log */
	uint32_t blocks, records, dram_records;
	uint32_t bytes;              /* record bytes in pmem, headers included */
	uint32_t dram_bytes;
	uint64_t base_lsn;           /* records at or below it were materialized */
	uint64_t first_lsn, last_lsn; /* start of the first record, end of the last */
};
bool ppl_pool_page_info(struct ppl_pool *p, uint32_t space, uint32_t page_no, struct ppl_pool_page_info *out);

/* The page was materialized durably at page LSN upto: drops its records
 * ending at or below upto, pmem and DRAM; the rest (if any) move to a new
 * chain. Frees the blocks (after readers are done with them). */
enum ppl_pool_status ppl_pool_reclaim(struct ppl_pool *p, uint32_t space, uint32_t page_no, uint64_t upto);

/* Forgets every page of a space (file dropped or truncated). Returns the
 * number of pages dropped. */
uint64_t ppl_pool_drop_space(struct ppl_pool *p, uint32_t space);

/* Visits every page (no order). The info is a snapshot. */
void ppl_pool_for_each_page(struct ppl_pool *p,
			    void (*fn)(void *arg, uint32_t space, uint32_t page_no,
				       const struct ppl_pool_page_info *info),
			    void *arg);

/* The n pages with the oldest first record (spilled pages first: they hold
 * the log), oldest first. Returns how many were written to out. */
struct ppl_pool_page_ref {
	uint32_t space, page_no;
	uint64_t first_lsn;
	bool spilled;
};
size_t ppl_pool_oldest(struct ppl_pool *p, struct ppl_pool_page_ref *out, size_t n);

/* The oldest LSN whose record is only in DRAM (UINT64_MAX if none): the
 * redo log must not be overwritten from there on (I3). */
uint64_t ppl_pool_oldest_dram_lsn(struct ppl_pool *p);

struct ppl_pool_usage {
	uint64_t nblocks, free_blocks, pages, spilled_pages, damaged_pages;
	uint64_t dram_records, dram_bytes;
	uint64_t appends, appends_over_cap, appends_full, reclaims;
	uint64_t retiring_blocks;    /* reclaimed, free after a grace period */
	uint64_t low_water_blocks, high_water_blocks;
	bool needs_cleaning;         /* free and retiring below the low-water mark */
	bool cleaned_enough;         /* free and retiring at or above the high-water mark */
};
void ppl_pool_usage(struct ppl_pool *p, struct ppl_pool_usage *out);

/* ---- durable LSN -------------------------------------------------------- */

/* Everything the log holds before lsn is durable in the pool or in the
 * data files: a restart re-reads the log from here. */
int ppl_pool_set_durable_lsn(struct ppl_pool *p, uint64_t lsn);
uint64_t ppl_pool_durable_lsn(const struct ppl_pool *p);
/* 0, or the errno of the pool file's first failed msync (a pool on a
 * disk-backed file): from then on nothing the pool holds can be counted
 * on as durable, until it is opened again. */
int ppl_pool_persist_failed(const struct ppl_pool *p);

/* ---- doublewrite ---------------------------------------------------------- */

/* Makes the page image durable in a free slot (waits for one if all are in
 * use). Write the page to its data file afterwards, make it durable, then
 * release the slot. Returns the slot, or -1 with a message (page larger
 * than the slots). */
int ppl_pool_dw_stage(struct ppl_pool *p, uint32_t space, uint32_t page_no, const uint8_t *image, size_t size,
		      char *err, size_t errlen);
/* The same without waiting: -2 when every slot is in use now. A caller
 * that holds slots of its own (a batch of materializations) must never
 * wait for one: it writes its pages and releases them first. */
int ppl_pool_dw_try_stage(struct ppl_pool *p, uint32_t space, uint32_t page_no, const uint8_t *image, size_t size,
			  char *err, size_t errlen);
void ppl_pool_dw_release(struct ppl_pool *p, int slot);
/* The slot's data-file write failed: it stays staged (its image is the
 * page's) until released. When every slot is kept, ppl_pool_dw_stage
 * fails at once with a message instead of waiting for one. */
void ppl_pool_dw_keep(struct ppl_pool *p, int slot);
/* A slot of the page staged and never released: its data-file write
 * failed (the file's page may be torn, or written but not durable). The
 * newest such slot's page LSN in *lsn and image in *img (the pool's
 * mapping: valid until the slot is released); -1 if none. The caller
 * keeps every other materialization of the page out meanwhile (its
 * stripe), so no slot of the page is in flight. */
int ppl_pool_dw_kept(struct ppl_pool *p, uint32_t space, uint32_t page_no, uint64_t *lsn, const uint8_t **img);
/* Releases the page's slots but `keep` (-1: all): a newer image of the
 * page is durable, in its data file or in slot `keep`. */
void ppl_pool_dw_release_page(struct ppl_pool *p, uint32_t space, uint32_t page_no, int keep);

/* How many slots hold a staged page (in flight, or kept after a failed write). */
unsigned ppl_pool_dw_in_use(struct ppl_pool *p);
/* The pages (space << 32 | page_no) of up to max slots kept after a
 * failed write; how many. */
size_t ppl_pool_dw_kept_pages(struct ppl_pool *p, uint64_t *keys, size_t max);
/* Slots in use (for inspection). fn gets space, page, page LSN and size. */
void ppl_pool_dw_for_each(struct ppl_pool *p,
			  void (*fn)(void *arg, int slot, uint32_t space, uint32_t page_no, uint64_t lsn,
				     uint32_t size, bool intact),
			  void *arg);

/* ---- the log area ---------------------------------------------------------- */

/* Makes a write of the log file durable in the log area: 0 once it is (the
 * write may be acknowledged as stable), or PPL_POOL_FULL (no room until a
 * release) or PPL_POOL_ERROR (no log area, larger than half of it, the
 * pool's persistence failed, or a read-only pool): then nothing was kept
 * and the caller makes the write durable in the file itself. Appends are
 * serialized, each persisted whole before the next begins. */
enum ppl_pool_status ppl_pool_log_append(struct ppl_pool *p, uint64_t fileid, uint64_t offset,
					 const struct iovec *iov, int iovcnt, size_t len);

/* Where the log area's appends have come to: take one, make the log file
 * durable, then release it: every entry appended before the mark is then
 * no longer needed. */
struct ppl_pool_log_mark {
	uint64_t seq, head, entries;
};
void ppl_pool_log_mark(struct ppl_pool *p, struct ppl_pool_log_mark *m);
int ppl_pool_log_release(struct ppl_pool *p, const struct ppl_pool_log_mark *m);

/* Calls fn for each entry still needed, oldest first (a restart writes
 * them into the log file, in this order: a later write of the same bytes
 * wins). A nonzero return stops the walk and is returned. */
typedef int (*ppl_pool_log_fn)(void *arg, uint64_t seq, uint64_t fileid, uint64_t offset, const uint8_t *bytes,
			       uint32_t len);
int ppl_pool_log_pending(struct ppl_pool *p, ppl_pool_log_fn fn, void *arg);

struct ppl_pool_log_usage {
	uint64_t area;               /* bytes of the ring, 0: no log area */
	uint64_t used;               /* bytes between the tail and the head */
	uint64_t pending;            /* entries between them */
	uint64_t appends, append_bytes, full, too_big, releases;
};
void ppl_pool_log_usage(struct ppl_pool *p, struct ppl_pool_log_usage *out);

#endif
