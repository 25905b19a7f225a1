/* What pool.c (open, scan, recovery), pool_chain.c (records and the DRAM
 * index) and pool_dw.c (doublewrite slots) share. Not a public header. */
#ifndef PPL_POOL_INT_H
#define PPL_POOL_INT_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include <urcu-bp.h>
#include <urcu/rculfhash.h>

#include "pool_media.h"
#include "ppl/hash.h"
#include "pool_persist.h"
#include "ppl/pool.h"
#include "rcu_tsan.h"

/* The end of a read-side section over the pool's index, told to
 * ThreadSanitizer (rcu_tsan.h: the pool is the domain). */
static inline void pool_read_unlock(struct ppl_pool *p)
{
	PPL_TSAN_READ_DONE(p);
	rcu_read_unlock();
}

#define POOL_WRITER_LOCKS 256u
#define POOL_MAX_BLOCK 4096u
/* The longest chain: the largest cap (4096 B, pool.c checks it) in the
 * smallest blocks (64 B). Sizes the block lists built on the stack. */
#define POOL_MAX_CHAIN_BLOCKS (4096u / 64u)

/* DRAM-only records of a page, in the pmem record format, appended in
 * segments that are never moved so readers need no lock. */
struct dram_seg {
	struct dram_seg *next;   /* published with a release store */
	uint32_t used;           /* published with a release store */
	uint32_t cap;
	uint8_t data[];
};

/* One page in the DRAM index. `head` never changes for the life of an
 * entry: a chain is replaced by a new entry, and the old one is freed
 * after an RCU grace period, blocks included. Fields below the line are
 * the writer's bookkeeping, read by others only as snapshots. */
struct pool_page {
	struct cds_lfht_node node;
	uint64_t key;
	uint32_t head;           /* 0: no chain in pmem */
	uint32_t seq;
	struct dram_seg *dram;   /* published with a release store */
	/* ---- */
	uint32_t tail, nblocks, bytes, records;
	uint64_t base_lsn, first_lsn, last_lsn;
	struct dram_seg *dram_tail;
	uint32_t dram_records, dram_bytes;
	uint64_t dram_first_lsn;
	uint8_t spill;           /* 0, or PPL_POOL_OVER_CAP / PPL_POOL_FULL */
	bool log_only;           /* a DRAM record holds LSNs only: the bytes are in the log (ppl_pool_note_in_log) */
	bool damaged;
	struct ppl_pool *pool;
	struct rcu_head rcu;
};

/* A page found by the recovery scan whose index entry is not built yet:
 * entries for millions of pages are built by a background thread after
 * open, so the pool serves at once; until then lookups fall back to a
 * binary search of this sorted directory. `consumed`: the entry exists
 * (or the page was since replaced): the slot must not be used again. */
struct dir_ent {
	uint64_t key;
	uint32_t head, seq;
	uint8_t consumed;
};

/* What a doublewrite slot is doing in memory (dw_busy): being staged
 * or written (it comes back by itself), or kept because its page's
 * data-file write failed or could not be checked (it comes back only
 * once the page is written). */
#define DW_IN_FLIGHT 1u
#define DW_KEPT 2u

/* The monotonic clock in ns: the open's phases and the index build's time. */
static inline uint64_t pool_now_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

struct ppl_pool {
	struct pool_pm pm;
	bool read_only;
	int fd;                  /* read-only mapping only */
	struct pool_sb sb;       /* validated copy */
	uint32_t bs, cap_blocks;
	uint64_t nblocks, blocks_off;
	struct ppl_pool_options opt;

	struct cds_lfht *ht;
	pthread_mutex_t writer[POOL_WRITER_LOCKS];

	pthread_mutex_t alloc_lock;
	uint32_t *free_stack;
	uint64_t free_top;
	uint8_t *quarantine;     /* blocks with a damaged commit word: never reused */

	/* index entries: fixed-size, from huge-page chunks, reused through a
	 * free list; chunks go back at close */
	pthread_mutex_t ent_lock;
	struct pool_page *ent_free;
	uint8_t *ent_bump, *ent_end;
	void **ent_chunks;
	size_t n_ent_chunks;

	pthread_mutex_t ckpt_lock;
	uint64_t ckpt_seq, durable_lsn;

	/* the directory and the thread turning it into index entries */
	struct dir_ent *dir;
	size_t ndir;
	int dir_state;           /* 1 while entries are being built */
	pthread_t indexer;
	bool indexer_running;
	pthread_t prefaulter; /* write-faults the mapping in after open */
	bool prefaulter_running;
	int indexer_stop;
	pthread_mutex_t idx_lock;
	pthread_cond_t idx_cond;
	uint64_t idx_records, idx_damaged, idx_ns;

	pthread_mutex_t dw_lock;
	pthread_cond_t dw_cond;
	uint8_t *dw_busy;        /* 0 free, DW_IN_FLIGHT, DW_KEPT (dw_lock) */
	uint64_t *dw_page;       /* space << 32 | page of each busy slot (dw_lock) */
	uint64_t dw_seq;

	uint64_t n_retiring;     /* blocks waiting for a grace period */
	uint64_t n_retire_cbs;   /* retired entries not yet freed */
	uint64_t n_pages, n_spilled, n_damaged, n_dram_records, n_dram_bytes;
	uint64_t n_appends, n_over_cap, n_full, n_reclaims;

	/* the log area (pool_log.c): byte counters that only grow, their
	 * value modulo log_ring_size a place in the ring (log_lock) */
	pthread_mutex_t log_lock;
	uint64_t log_ring_off, log_ring_size;
	uint64_t log_head, log_tail;
	uint64_t log_next_seq, log_tail_seq;
	uint64_t log_entries, log_tail_entries; /* data entries appended and released, counted from the open */
	uint64_t log_appends, log_append_bytes, log_full, log_too_big, log_releases;
};

static inline uint64_t pool_key(uint32_t space, uint32_t page_no) { return (uint64_t)space << 32 | page_no; }
static inline uint64_t blk_off(const struct ppl_pool *p, uint32_t b) { return p->blocks_off + (uint64_t)b * p->bs; }
static inline uint32_t blk_payload_off(uint32_t kind) { return kind == BLK_HEAD ? BLK_HEAD_HDR : BLK_HDR; }
static inline uint32_t blk_payload_cap(const struct ppl_pool *p, uint32_t kind)
{
	return p->bs - blk_payload_off(kind);
}
static inline const uint8_t *blk_ptr(const struct ppl_pool *p, uint32_t b) { return p->pm.base + blk_off(p, b); }

/* Recovery findings and damage, through the pool's logger. */
#define pool_logf(p, ...) PPL_LOG(&(p)->opt.log, PPL_LOG_EVENT, __VA_ARGS__)
uint32_t pool_head_crc(uint32_t space, uint32_t page_no, uint64_t base_lsn, uint32_t seq);
uint32_t pool_rec_crc(uint32_t space, uint32_t page_no, const uint8_t *hdr, const uint8_t *bytes, size_t len);

/* pool_chain.c */
void pool_free_push(struct ppl_pool *p, uint32_t b);
struct pool_page *pool_page_new(struct ppl_pool *p, uint64_t key);
void pool_entries_fini(struct ppl_pool *p);
void pool_page_insert(struct ppl_pool *p, struct pool_page *e);
/* Parses a chain's committed stream; 0, or -1 (damage, described in why). */
int pool_chain_load(struct ppl_pool *p, uint32_t head, uint32_t space, uint32_t page_no, uint8_t *stream,
		    uint32_t *len, uint32_t *nblocks, uint32_t *tail, uint8_t *visited, char *why, size_t whylen);
int pool_stream_parse(uint32_t space, uint32_t page_no, const uint8_t *s, uint32_t len,
		      int (*fn)(void *arg, const struct ppl_pool_rec *r), void *arg, uint32_t *records,
		      uint64_t *first_lsn, uint64_t *last_lsn);

/* Builds the index entries of every directory slot (the recovery scan's
 * pages); from open, or from the background thread. */
void pool_index_build(struct ppl_pool *p);
/* Returns once every entry is built. */
void pool_index_wait(struct ppl_pool *p);

/* pool_log.c: finds the pending entries at open (-1: the area's header
 * is damaged, described in err) */
int pool_log_open(struct ppl_pool *p, struct ppl_pool_recovery *rec, char *err, size_t errlen);

/* pool_dw.c */
int pool_dw_init(struct ppl_pool *p);
void pool_dw_recover(struct ppl_pool *p, struct ppl_pool_recovery *rec);
void pool_dw_fini(struct ppl_pool *p);

#endif
