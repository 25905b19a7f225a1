/* Per-page chains of blocks and the DRAM index over them: the block
 * allocator, append (to the pool while the page is under its cap, to DRAM
 * after), lock-free reads, reclaim and chain replacement. The layout is in
 * pool_media.h; every store goes through pool_persist.c. */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "ppl/crash.h"
#include "pool_int.h"

#define ADD(p, field, v) __atomic_add_fetch(&(p)->field, (uint64_t)(v), __ATOMIC_RELAXED)
#define SUB(p, field, v) __atomic_sub_fetch(&(p)->field, (uint64_t)(v), __ATOMIC_RELAXED)
/* A field of a published entry that readers (snapshot, ppl_pool_oldest)
 * load without the entry's lock: one writer at a time, under it, but
 * the store itself must be atomic. */
#define PUT(field, v) __atomic_store_n(&(field), (v), __ATOMIC_RELAXED)
#define REC_MAX (REC_HDR + REC_LEN_MASK)
_Static_assert(PPL_POOL_RECORD_MAX == REC_LEN_MASK, "the pool's largest record, as pool.h says");

const char *ppl_pool_status_name(enum ppl_pool_status s)
{
	switch (s) {
	case PPL_POOL_OK: return "ok";
	case PPL_POOL_OVER_CAP: return "over-cap";
	case PPL_POOL_FULL: return "pool-full";
	case PPL_POOL_CORRUPT: return "corrupt";
	case PPL_POOL_ERROR: return "error";
	case PPL_POOL_IN_LOG: return "in-log";
	}
	return "?";
}

/* ---- allocator ------------------------------------------------------------ */

void pool_free_push(struct ppl_pool *p, uint32_t b)
{
	p->free_stack[p->free_top++] = b;
}

static bool alloc_blocks(struct ppl_pool *p, uint32_t n, uint32_t *out)
{
	for (int attempt = 0; attempt < 2; attempt++) {
		pthread_mutex_lock(&p->alloc_lock);
		if (p->free_top >= n) {
			for (uint32_t i = 0; i < n; i++)
				out[i] = p->free_stack[--p->free_top];
			pthread_mutex_unlock(&p->alloc_lock);
			return true;
		}
		pthread_mutex_unlock(&p->alloc_lock);
		/* Blocks of retired chains come back after a grace period:
		 * wait for them before calling the pool full. Not inside a
		 * read-side section (the store's gate appends under one): a
		 * grace period cannot end while this thread is in it, and
		 * liburcu refuses the barrier. The caller then materializes
		 * the page instead. */
		if (attempt == 0 && __atomic_load_n(&p->n_retire_cbs, __ATOMIC_ACQUIRE) > 0 && !rcu_read_ongoing())
			rcu_barrier();
		else
			break;
	}
	return false;
}

/* ---- the index -------------------------------------------------------------- */

static int match_key(struct cds_lfht_node *node, const void *key)
{
	const struct pool_page *e = caa_container_of(node, struct pool_page, node);
	return e->key == *(const uint64_t *)key;
}

#define ENTRY_CHUNK (16u << 20)

/* Millions of entries: from 16 MiB huge-page chunks rather than one
 * malloc each, so building the index at open costs neither a page fault
 * nor a TLB miss per page, and entries made one after the other (the
 * recovery scan inserts in the table's list order) sit side by side. */
struct pool_page *pool_page_new(struct ppl_pool *p, uint64_t key)
{
	struct pool_page *e = NULL;
	pthread_mutex_lock(&p->ent_lock);
	if (p->ent_free) {
		e = p->ent_free;
		p->ent_free = *(struct pool_page **)e;
	} else {
		if (p->ent_bump == NULL || p->ent_end - p->ent_bump < (ptrdiff_t)sizeof(*e)) {
			void **list = realloc(p->ent_chunks, (p->n_ent_chunks + 1) * sizeof(void *));
			void *c = NULL;
			if (list != NULL) {
				p->ent_chunks = list;
				c = aligned_alloc(2u << 20, ENTRY_CHUNK);
			}
			if (c != NULL) {
				madvise(c, ENTRY_CHUNK, MADV_HUGEPAGE);
				p->ent_chunks[p->n_ent_chunks++] = c;
				p->ent_bump = c;
				p->ent_end = (uint8_t *)c + ENTRY_CHUNK;
			}
		}
		if (p->ent_bump && p->ent_end - p->ent_bump >= (ptrdiff_t)sizeof(*e)) {
			e = (struct pool_page *)p->ent_bump;
			p->ent_bump += sizeof(*e);
		}
	}
	pthread_mutex_unlock(&p->ent_lock);
	if (e == NULL)
		return NULL;
	memset(e, 0, sizeof(*e));
	cds_lfht_node_init(&e->node);
	e->key = key;
	e->pool = p;
	e->first_lsn = UINT64_MAX;
	e->dram_first_lsn = UINT64_MAX;
	return e;
}

static void pool_page_free(struct ppl_pool *p, struct pool_page *e)
{
	pthread_mutex_lock(&p->ent_lock);
	*(struct pool_page **)e = p->ent_free;
	p->ent_free = e;
	pthread_mutex_unlock(&p->ent_lock);
}

void pool_entries_fini(struct ppl_pool *p)
{
	for (size_t i = 0; i < p->n_ent_chunks; i++)
		free(p->ent_chunks[i]);
	free(p->ent_chunks);
	p->ent_chunks = NULL;
	p->n_ent_chunks = 0;
	pthread_mutex_destroy(&p->ent_lock);
}

void pool_page_insert(struct ppl_pool *p, struct pool_page *e)
{
	PPL_TSAN_PUBLISH(e);
	rcu_read_lock();
	cds_lfht_add(p->ht, ppl_hash64(e->key), &e->node);
	pool_read_unlock(p);
	ADD(p, n_pages, 1);
}

/* Caller holds the RCU read lock. */
static struct pool_page *lookup(struct ppl_pool *p, uint64_t key)
{
	struct cds_lfht_iter it;
	cds_lfht_lookup(p->ht, ppl_hash64(key), match_key, &key, &it);
	struct cds_lfht_node *n = cds_lfht_iter_get_node(&it);
	struct pool_page *e = n ? caa_container_of(n, struct pool_page, node) : NULL;
	if (e)
		PPL_TSAN_FOUND(e);
	return e;
}

/* The directory slot of a page whose entry is not built yet, or NULL.
 * Caller holds the RCU read lock (the directory is freed after a grace
 * period once every entry is built). */
static struct dir_ent *dir_find(struct ppl_pool *p, uint64_t key)
{
	if (__atomic_load_n(&p->dir_state, __ATOMIC_ACQUIRE) != 1)
		return NULL;
	size_t lo = 0, hi = p->ndir;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (p->dir[mid].key < key)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == p->ndir || p->dir[lo].key != key || __atomic_load_n(&p->dir[lo].consumed, __ATOMIC_ACQUIRE))
		return NULL;
	return &p->dir[lo];
}

static int load_entry(struct ppl_pool *p, struct pool_page *e, uint8_t *stream, char *why, size_t whylen);

/* Builds the entry of a directory slot. Caller holds the page's writer
 * lock, so no append or reclaim of the page runs meanwhile. */
static struct pool_page *migrate(struct ppl_pool *p, struct dir_ent *d)
{
	uint8_t stream[4096];
	char why[200];
	struct pool_page *e = pool_page_new(p, d->key);
	if (e == NULL)
		return NULL;
	e->head = d->head;
	e->seq = d->seq;
	if (load_entry(p, e, stream, why, sizeof(why)) != 0) {
		e->damaged = true;
		ADD(p, n_damaged, 1);
		ADD(p, idx_damaged, 1);
		pool_logf(p, "pool: page %u:%u: %s; its %u pool block(s) are kept and not applied; the page must be "
			  "rebuilt from the redo log or its data file checked", (uint32_t)(d->key >> 32),
			  (uint32_t)d->key, why, e->nblocks);
	} else {
		ADD(p, idx_records, e->records);
	}
	PPL_TSAN_PUBLISH(e);
	rcu_read_lock();
	cds_lfht_add(p->ht, ppl_hash64(e->key), &e->node);
	pool_read_unlock(p);
	__atomic_store_n(&d->consumed, 1, __ATOMIC_RELEASE);
	return e;
}

static pthread_mutex_t *writer_lock(struct ppl_pool *p, uint64_t key)
{
	return &p->writer[ppl_hash64(key) % POOL_WRITER_LOCKS];
}

/* The page's entry for a writer (holding its lock), built from the
 * directory if need be. */
static struct pool_page *writer_lookup(struct ppl_pool *p, uint64_t key)
{
	rcu_read_lock();
	struct pool_page *e = lookup(p, key);
	struct dir_ent *d = e ? NULL : dir_find(p, key);
	pool_read_unlock(p); /* e stays: only holders of this writer lock retire it */
	if (d)
		e = migrate(p, d);
	return e;
}

struct build_range {
	struct ppl_pool *p;
	size_t from, to;
};

static void *build_range(void *arg)
{
	struct build_range *r = arg;
	struct ppl_pool *p = r->p;
	for (size_t i = r->from; i < r->to && !__atomic_load_n(&p->indexer_stop, __ATOMIC_RELAXED); i++) {
		struct dir_ent *d = &p->dir[i];
		pthread_mutex_t *lk = writer_lock(p, d->key);
		pthread_mutex_lock(lk);
		if (!__atomic_load_n(&d->consumed, __ATOMIC_ACQUIRE))
			migrate(p, d);
		pthread_mutex_unlock(lk);
	}
	return NULL;
}

void pool_index_build(struct ppl_pool *p)
{
	uint64_t t0 = pool_now_ns();
	/* two builders, one per half of the directory */
	struct build_range r[2] = { { p, 0, p->ndir / 2 }, { p, p->ndir / 2, p->ndir } };
	pthread_t t;
	bool threaded = p->ndir > 65536 && p->opt.tracer == NULL && pthread_create(&t, NULL, build_range, &r[1]) == 0;
	build_range(&r[0]);
	if (threaded)
		pthread_join(t, NULL);
	else
		build_range(&r[1]);
	p->idx_ns = pool_now_ns() - t0;
}

void pool_index_wait(struct ppl_pool *p)
{
	pthread_mutex_lock(&p->idx_lock);
	while (__atomic_load_n(&p->dir_state, __ATOMIC_ACQUIRE) == 1)
		pthread_cond_wait(&p->idx_cond, &p->idx_lock);
	pthread_mutex_unlock(&p->idx_lock);
}

static void retire_cb(struct rcu_head *h)
{
	struct pool_page *e = caa_container_of(h, struct pool_page, rcu);
	struct ppl_pool *p = e->pool;
	PPL_TSAN_GRACE(p);
	uint32_t b = e->head;
	pthread_mutex_lock(&p->alloc_lock);
	for (uint32_t i = 0; i < e->nblocks && b != 0 && b < p->nblocks; i++) {
		uint64_t w = pm_load8(&p->pm, blk_off(p, b));
		pool_free_push(p, b);
		b = blk_next(w);
	}
	pthread_mutex_unlock(&p->alloc_lock);
	__atomic_sub_fetch(&p->n_retiring, e->nblocks, __ATOMIC_RELAXED);
	__atomic_sub_fetch(&p->n_retire_cbs, 1, __ATOMIC_RELEASE);
	for (struct dram_seg *s = e->dram; s;) {
		struct dram_seg *n = s->next;
		free(s);
		s = n;
	}
	pool_page_free(p, e);
}

/* Takes the entry out of the pool's counters; retire_cb() then gives its
 * blocks and DRAM records back. */
static void uncount(struct ppl_pool *p, struct pool_page *e)
{
	if (e->spill)
		SUB(p, n_spilled, 1);
	if (e->damaged)
		SUB(p, n_damaged, 1);
	SUB(p, n_dram_records, e->dram_records);
	SUB(p, n_dram_bytes, e->dram_bytes);
	__atomic_add_fetch(&p->n_retiring, e->nblocks, __ATOMIC_RELAXED);
	__atomic_add_fetch(&p->n_retire_cbs, 1, __ATOMIC_RELAXED);
}

/* The entry left the index (or was replaced): its blocks and DRAM records
 * go back once no reader can still be looking at them. */
static void retire(struct ppl_pool *p, struct pool_page *e)
{
	uncount(p, e);
	call_rcu(&e->rcu, retire_cb);
}

/* Marks a chain's head free: from this store on, a crash forgets the
 * chain. Next and used stay, for readers still walking it. */
static void free_head(struct ppl_pool *p, uint32_t head)
{
	if (head == 0)
		return;
	uint64_t w = pm_load8(&p->pm, blk_off(p, head));
	pm_store8(&p->pm, blk_off(p, head), blk_word(blk_next(w), blk_used(w), BLK_FREE));
	pm_persist(&p->pm, blk_off(p, head), 8);
}

/* ---- records ------------------------------------------------------------------ */

static size_t rec_encode(uint8_t *dst, uint32_t space, uint32_t page_no, const struct ppl_pool_rec *r)
{
	uint32_t delta = (uint32_t)(r->end_lsn - r->start_lsn);
	uint16_t lf = (uint16_t)(r->len | (r->from_init ? REC_FLAG_INIT : 0));
	memcpy(dst, &r->start_lsn, 8);
	memcpy(dst + 8, &delta, 4);
	memcpy(dst + 12, &lf, 2);
	if (r->len) /* a note of LSNs only has no bytes */
		memcpy(dst + REC_HDR, r->bytes, r->len);
	uint32_t crc = pool_rec_crc(space, page_no, dst, r->bytes, r->len);
	memcpy(dst + 14, &crc, 4);
	return REC_HDR + r->len;
}

static uint64_t rec_end(const uint8_t *hdr)
{
	uint64_t start;
	uint32_t delta;
	memcpy(&start, hdr, 8);
	memcpy(&delta, hdr + 8, 4);
	return start + delta;
}

int pool_stream_parse(uint32_t space, uint32_t page_no, const uint8_t *s, uint32_t len,
		      int (*fn)(void *arg, const struct ppl_pool_rec *r), void *arg, uint32_t *records,
		      uint64_t *first_lsn, uint64_t *last_lsn)
{
	uint32_t off = 0, n = 0;
	while (off < len) {
		if (len - off < REC_HDR)
			return -1;
		struct ppl_pool_rec r;
		uint32_t delta, crc;
		uint16_t lf;
		memcpy(&r.start_lsn, s + off, 8);
		memcpy(&delta, s + off + 8, 4);
		memcpy(&lf, s + off + 12, 2);
		memcpy(&crc, s + off + 14, 4);
		r.len = lf & REC_LEN_MASK;
		if (len - off - REC_HDR < r.len)
			return -1;
		r.bytes = s + off + REC_HDR;
		if (crc != pool_rec_crc(space, page_no, s + off, r.bytes, r.len))
			return -1;
		r.end_lsn = r.start_lsn + delta;
		r.from_init = (lf & REC_FLAG_INIT) != 0;
		r.in_dram = false;
		if (n == 0 && first_lsn)
			*first_lsn = r.start_lsn;
		if (last_lsn)
			*last_lsn = r.end_lsn;
		n++;
		off += REC_HDR + r.len;
		if (fn && fn(arg, &r) != 0)
			break;
	}
	if (records)
		*records = n;
	return 0;
}

int pool_chain_load(struct ppl_pool *p, uint32_t head, uint32_t space, uint32_t page_no, uint8_t *stream,
		    uint32_t *len, uint32_t *nblocks, uint32_t *tail, uint8_t *visited, char *why, size_t whylen)
{
	uint32_t b = head, n = 0, l = 0;
	why[0] = '\0';
	*nblocks = 0;
	*len = 0;
	for (;;) {
		if (b == 0 || b >= p->nblocks) {
			snprintf(why, whylen, "block %u of its chain points outside the pool (%u)", n, b);
			return -1;
		}
		if (visited && __atomic_load_n(&visited[b], __ATOMIC_RELAXED)) {
			snprintf(why, whylen, "block %u of its chain (%u) belongs to another chain", n, b);
			return -1;
		}
		uint64_t w = pm_load8(&p->pm, blk_off(p, b));
		uint32_t kind = blk_kind(w);
		/* A reader may meet a head just freed by a replacement: its
		 * contents stay until the grace period ends. */
		bool kind_ok = n == 0 ? (kind == BLK_HEAD || (visited == NULL && kind == BLK_FREE)) : kind == BLK_CONT;
		if (!blk_word_ok(w) || !kind_ok) {
			snprintf(why, whylen, "block %u of its chain (%u) has a damaged or unexpected commit word "
				 "%016llx", n, b, (unsigned long long)w);
			return -1;
		}
		const uint8_t *blk = blk_ptr(p, b);
		if (n > 0) {
			uint32_t s, pg;
			memcpy(&s, blk + BLK_OFF_SPACE, 4);
			memcpy(&pg, blk + BLK_OFF_PAGE, 4);
			if (s != space || pg != page_no) {
				snprintf(why, whylen, "block %u of its chain (%u) is labelled %u:%u", n, b, s, pg);
				return -1;
			}
		}
		uint32_t used = blk_used(w), poff = n == 0 ? BLK_HEAD_HDR : BLK_HDR;
		if (used > p->bs - poff || l + used > p->sb.max_per_page || n + 1 > p->cap_blocks) {
			snprintf(why, whylen, "block %u of its chain (%u) claims %u bytes, beyond the cap", n, b, used);
			return -1;
		}
		/* claimed atomically: two walks run at once at open */
		if (visited && __atomic_exchange_n(&visited[b], 1, __ATOMIC_RELAXED)) {
			snprintf(why, whylen, "block %u of its chain (%u) belongs to another chain", n, b);
			return -1;
		}
		if (stream) /* NULL: check the chain's shape only */
			memcpy(stream + l, blk + poff, used);
		l += used;
		n++;
		*nblocks = n;
		*tail = b;
		*len = l;
		b = blk_next(w);
		if (b == 0)
			return 0;
	}
}

/* Fills an entry's bookkeeping from its chain in pmem (head set). 0, or
 * -1 with the damage described in why. */
static int load_entry(struct ppl_pool *p, struct pool_page *e, uint8_t *stream, char *why, size_t whylen)
{
	uint32_t space = (uint32_t)(e->key >> 32), page_no = (uint32_t)e->key, len = 0;
	memcpy(&e->base_lsn, blk_ptr(p, e->head) + BLK_OFF_BASE, 8);
	if (pool_chain_load(p, e->head, space, page_no, stream, &len, &e->nblocks, &e->tail, NULL, why, whylen) != 0)
		return -1;
	if (pool_stream_parse(space, page_no, stream, len, NULL, NULL, &e->records, &e->first_lsn, &e->last_lsn) != 0) {
		snprintf(why, whylen, "a record fails its checksum");
		return -1;
	}
	e->bytes = len;
	return 0;
}

/* ---- DRAM records ------------------------------------------------------------------ */

static int dram_append(struct ppl_pool *p, struct pool_page *e, const uint8_t *rec, size_t rl, uint64_t start_lsn,
		       uint8_t reason)
{
	struct dram_seg *t = e->dram_tail;
	if (t == NULL || t->cap - t->used < rl) {
		uint32_t cap = rl > 4096 ? (uint32_t)rl : 4096;
		struct dram_seg *s = malloc(sizeof(*s) + cap);
		if (s == NULL)
			return -1;
		s->next = NULL;
		s->used = 0;
		s->cap = cap;
		if (t == NULL)
			__atomic_store_n(&e->dram, s, __ATOMIC_RELEASE);
		else
			__atomic_store_n(&t->next, s, __ATOMIC_RELEASE);
		e->dram_tail = t = s;
	}
	memcpy(t->data + t->used, rec, rl);
	__atomic_store_n(&t->used, t->used + (uint32_t)rl, __ATOMIC_RELEASE);
	if (rl == REC_HDR) /* LSNs only (ppl_pool_note_in_log) */
		__atomic_store_n(&e->log_only, true, __ATOMIC_RELEASE);
	if (e->dram_records == 0)
		PUT(e->dram_first_lsn, start_lsn);
	if (!e->spill) {
		PUT(e->spill, reason);
		ADD(p, n_spilled, 1);
	}
	PUT(e->dram_records, e->dram_records + 1);
	PUT(e->dram_bytes, e->dram_bytes + (uint32_t)rl);
	PUT(e->last_lsn, rec_end(rec));
	if (e->first_lsn == UINT64_MAX)
		PUT(e->first_lsn, start_lsn);
	ADD(p, n_dram_records, 1);
	ADD(p, n_dram_bytes, rl);
	return 0;
}

/* ---- writing chains -------------------------------------------------------------- */

/* Blocks a stream of len bytes takes in a new chain. */
static uint32_t blocks_for(const struct ppl_pool *p, uint32_t len)
{
	uint32_t hc = blk_payload_cap(p, BLK_HEAD), cc = blk_payload_cap(p, BLK_CONT);
	return len <= hc ? 1 : 1 + (len - hc + cc - 1) / cc;
}

/* Writes payload bytes into fresh CONT blocks blk[0..n) linked in order and
 * flushes them; they are unreachable until the caller links blk[0]. */
static void write_conts(struct ppl_pool *p, uint32_t space, uint32_t page_no, const uint32_t *blk, uint32_t n,
			const uint8_t *src, uint32_t len)
{
	uint32_t cc = blk_payload_cap(p, BLK_CONT);
	uint8_t id[8];
	memcpy(id, &space, 4);
	memcpy(id + 4, &page_no, 4);
	for (uint32_t i = 0; i < n; i++) {
		uint32_t chunk = len < cc ? len : cc;
		uint64_t off = blk_off(p, blk[i]);
		pm_write(&p->pm, off + BLK_OFF_SPACE, id, 8);
		pm_write(&p->pm, off + BLK_HDR, src, chunk);
		pm_store8(&p->pm, off, blk_word(i + 1 < n ? blk[i + 1] : 0, chunk, BLK_CONT));
		pm_flush(&p->pm, off, BLK_HDR + chunk);
		src += chunk;
		len -= chunk;
	}
}

/* Appends one encoded record to the page's pmem chain: the bytes and any
 * new blocks first, durable; then the tail's commit word. */
static enum ppl_pool_status pmem_append(struct ppl_pool *p, struct pool_page *e, uint32_t space, uint32_t page_no,
					const uint8_t *rec, uint32_t rl)
{
	uint64_t toff = blk_off(p, e->tail);
	uint64_t w = pm_load8(&p->pm, toff);
	uint32_t kind = blk_kind(w), used = blk_used(w), poff = blk_payload_off(kind);
	uint32_t room = blk_payload_cap(p, kind) - used;
	uint32_t extra = 0, newb[POOL_MAX_CHAIN_BLOCKS];
	if (rl > room) {
		uint32_t cc = blk_payload_cap(p, BLK_CONT);
		extra = (rl - room + cc - 1) / cc;
		if (e->nblocks + extra > p->cap_blocks || e->bytes + rl > p->sb.max_per_page)
			return PPL_POOL_OVER_CAP;
		if (!alloc_blocks(p, extra, newb))
			return PPL_POOL_FULL;
	}
	uint32_t first = rl < room ? rl : room;
	if (first) {
		pm_write(&p->pm, toff + poff + used, rec, first);
		pm_flush(&p->pm, toff + poff + used, first);
	}
	if (extra)
		write_conts(p, space, page_no, newb, extra, rec + first, rl - first);
	pm_drain(&p->pm);
	pm_store8(&p->pm, toff, blk_word(extra ? newb[0] : blk_next(w), used + first, kind));
	pm_persist(&p->pm, toff, 8);
	PPL_CRASH(POOL_APPENDED);
	if (extra)
		e->tail = newb[extra - 1];
	PUT(e->nblocks, e->nblocks + extra);
	PUT(e->bytes, e->bytes + rl);
	PUT(e->records, e->records + 1);
	PUT(e->last_lsn, rec_end(rec));
	return PPL_POOL_OK;
}

/* A list of encoded records, in order. */
struct rec_list {
	uint8_t *buf;
	uint32_t len, cap, n;
};

static int list_add(struct rec_list *l, const uint8_t *rec, uint32_t rl)
{
	if (l->len + rl > l->cap) {
		uint32_t cap = l->cap ? l->cap : 1024;
		while (cap < l->len + rl)
			cap *= 2;
		uint8_t *b = realloc(l->buf, cap);
		if (b == NULL)
			return -1;
		l->buf = b;
		l->cap = cap;
	}
	memcpy(l->buf + l->len, rec, rl);
	l->len += rl;
	l->n++;
	return 0;
}

static uint32_t rec_size(const uint8_t *rec)
{
	uint16_t lf;
	memcpy(&lf, rec + 12, 2);
	return REC_HDR + (lf & REC_LEN_MASK);
}

/* Makes a new entry for the page holding `recs` (a prefix in a new pmem
 * chain as far as the cap and free blocks allow, the rest in DRAM), makes
 * it durable, frees the old chain and swaps the entries in the index.
 * `recs` empty: the page leaves the index. Caller holds the writer lock. */
static enum ppl_pool_status replace_chain(struct ppl_pool *p, struct pool_page *old, uint64_t key,
					  const struct rec_list *recs, uint64_t base_lsn, uint8_t force_reason)
{
	uint32_t space = (uint32_t)(key >> 32), page_no = (uint32_t)key;
	if (recs->n == 0) {
		if (old) {
			free_head(p, old->head);
			rcu_read_lock();
			cds_lfht_del(p->ht, &old->node);
			pool_read_unlock(p);
			SUB(p, n_pages, 1);
			retire(p, old);
		}
		return PPL_POOL_OK;
	}
	struct pool_page *e = pool_page_new(p, key);
	if (e == NULL)
		return PPL_POOL_ERROR;
	e->seq = old ? old->seq + 1 : 1;
	e->base_lsn = base_lsn;
	uint32_t pm_len = 0, pm_n = 0, capacity = blk_payload_cap(p, BLK_HEAD) +
					     (p->cap_blocks - 1) * blk_payload_cap(p, BLK_CONT);
	if (capacity > p->sb.max_per_page)
		capacity = p->sb.max_per_page;
	/* a note of LSNs only (ppl_pool_note_in_log) never goes to pmem: a
	 * restart would apply it as a record with nothing in it */
	while (!force_reason && pm_len < recs->len && pm_len + rec_size(recs->buf + pm_len) <= capacity &&
	       rec_size(recs->buf + pm_len) > REC_HDR) {
		pm_len += rec_size(recs->buf + pm_len);
		pm_n++;
	}
	uint8_t reason = force_reason ? force_reason : pm_len < recs->len ? PPL_POOL_OVER_CAP : 0;
	uint32_t blk[POOL_MAX_CHAIN_BLOCKS];
	/* A page whose first record is over the cap still gets a head, empty:
	 * the durable mark that it is in the pool at all, so that a restart
	 * knows its records are to come from the log (ppl_pool_marked). */
	bool head = pm_n > 0 || reason == PPL_POOL_OVER_CAP;
	if (head && !alloc_blocks(p, pm_n ? blocks_for(p, pm_len) : 1, blk)) {
		pm_len = 0;
		pm_n = 0;
		head = false;
		reason = PPL_POOL_FULL;
	}
	if (head) {
		uint32_t nb = pm_n ? blocks_for(p, pm_len) : 1, hc = blk_payload_cap(p, BLK_HEAD);
		uint32_t first = pm_len < hc ? pm_len : hc;
		uint64_t hoff = blk_off(p, blk[0]);
		uint8_t hdr[BLK_HEAD_HDR - BLK_OFF_SPACE];
		uint32_t hcrc = pool_head_crc(space, page_no, base_lsn, e->seq);
		memcpy(hdr, &space, 4);
		memcpy(hdr + 4, &page_no, 4);
		memcpy(hdr + 8, &base_lsn, 8);
		memcpy(hdr + 16, &e->seq, 4);
		memcpy(hdr + 20, &hcrc, 4);
		pm_write(&p->pm, hoff + BLK_OFF_SPACE, hdr, sizeof(hdr));
		pm_write(&p->pm, hoff + BLK_HEAD_HDR, recs->buf, first);
		pm_flush(&p->pm, hoff + BLK_OFF_SPACE, sizeof(hdr) + first);
		if (nb > 1)
			write_conts(p, space, page_no, blk + 1, nb - 1, recs->buf + first, pm_len - first);
		pm_drain(&p->pm);
		pm_store8(&p->pm, hoff, blk_word(nb > 1 ? blk[1] : 0, first, BLK_HEAD));
		pm_persist(&p->pm, hoff, 8);
		PPL_CRASH(POOL_RECHAINED);
		e->head = blk[0];
		e->tail = blk[nb - 1];
		e->nblocks = nb;
		e->bytes = pm_len;
		e->records = pm_n;
		if (pm_n)
			memcpy(&e->first_lsn, recs->buf, 8);
	}
	/* last_lsn of the pmem part: walk to its last record */
	if (pm_n > 0) {
		uint32_t off = 0, last = 0;
		while (off < pm_len) {
			last = off;
			off += rec_size(recs->buf + off);
		}
		e->last_lsn = rec_end(recs->buf + last);
	}
	for (uint32_t off = pm_len; off < recs->len; off += rec_size(recs->buf + off)) {
		uint64_t start;
		memcpy(&start, recs->buf + off, 8);
		if (dram_append(p, e, recs->buf + off, rec_size(recs->buf + off), start, reason) != 0) {
			/* Nothing was swapped yet: the old entry stays whole,
			 * and no reader ever saw this one. */
			free_head(p, e->head);
			uncount(p, e);
			retire_cb(&e->rcu);
			return PPL_POOL_ERROR;
		}
	}
	if (old)
		free_head(p, old->head);
	PPL_TSAN_PUBLISH(e);
	rcu_read_lock();
	struct cds_lfht_node *prev = cds_lfht_add_replace(p->ht, ppl_hash64(key), match_key, &key, &e->node);
	pool_read_unlock(p);
	if (prev)
		retire(p, caa_container_of(prev, struct pool_page, node));
	else
		ADD(p, n_pages, 1);
	return reason ? (enum ppl_pool_status)reason : PPL_POOL_OK;
}

/* Encoded records of an entry with end LSN above `above`, pmem ones first.
 * pmem records of a damaged chain are skipped (they cannot be read). */
static int collect(struct ppl_pool *p, struct pool_page *e, uint64_t above, struct rec_list *out)
{
	uint32_t space = (uint32_t)(e->key >> 32), page_no = (uint32_t)e->key;
	if (e->head && !e->damaged) {
		uint8_t stream[4096];
		uint32_t len, nb, tail;
		char why[200];
		if (pool_chain_load(p, e->head, space, page_no, stream, &len, &nb, &tail, NULL, why, sizeof(why)) != 0)
			return -1;
		for (uint32_t off = 0; off < len;) {
			uint32_t rl = rec_size(stream + off);
			if (off + rl > len)
				return -1;
			if (rec_end(stream + off) > above && list_add(out, stream + off, rl) != 0)
				return -1;
			off += rl;
		}
	}
	for (struct dram_seg *s = e->dram; s; s = s->next)
		for (uint32_t off = 0; off < s->used;) {
			uint32_t rl = rec_size(s->data + off);
			if (rec_end(s->data + off) > above && list_add(out, s->data + off, rl) != 0)
				return -1;
			off += rl;
		}
	return 0;
}

enum ppl_pool_status ppl_pool_append(struct ppl_pool *p, uint32_t space, uint32_t page_no,
				     const struct ppl_pool_rec *r)
{
	if (p->read_only || r->len > REC_LEN_MASK || r->end_lsn < r->start_lsn ||
	    r->end_lsn - r->start_lsn > UINT32_MAX || (r->len && r->bytes == NULL))
		return PPL_POOL_ERROR;
	uint8_t rec[REC_MAX];
	uint32_t rl = (uint32_t)rec_encode(rec, space, page_no, r);
	uint64_t key = pool_key(space, page_no);
	pthread_mutex_t *lk = writer_lock(p, key);
	pthread_mutex_lock(lk);
	ADD(p, n_appends, 1);
	struct pool_page *e = writer_lookup(p, key);
	enum ppl_pool_status st;
	if (e == NULL || r->from_init) {
		struct rec_list l = { .buf = rec, .len = rl, .cap = rl, .n = 1 };
		st = replace_chain(p, e, key, &l, e ? e->base_lsn : 0, 0);
	} else if (e->spill || e->damaged || e->head == 0) {
		uint8_t reason = e->damaged ? PPL_POOL_CORRUPT : e->spill ? e->spill : PPL_POOL_FULL;
		st = dram_append(p, e, rec, rl, r->start_lsn, reason) == 0 ? (enum ppl_pool_status)reason
									  : PPL_POOL_ERROR;
	} else {
		st = pmem_append(p, e, space, page_no, rec, rl);
		if (st == PPL_POOL_OVER_CAP || st == PPL_POOL_FULL) {
			if (dram_append(p, e, rec, rl, r->start_lsn, (uint8_t)st) != 0)
				st = PPL_POOL_ERROR;
		}
	}
	if (st == PPL_POOL_OVER_CAP)
		ADD(p, n_over_cap, 1);
	else if (st == PPL_POOL_FULL)
		ADD(p, n_full, 1);
	pthread_mutex_unlock(lk);
	return st;
}

enum ppl_pool_status ppl_pool_note_in_log(struct ppl_pool *p, uint32_t space, uint32_t page_no, uint64_t start_lsn,
					  uint64_t end_lsn)
{
	struct ppl_pool_rec r = { .start_lsn = start_lsn, .end_lsn = end_lsn, .len = 0 };
	if (p->read_only || end_lsn < start_lsn || end_lsn - start_lsn > UINT32_MAX)
		return PPL_POOL_ERROR;
	uint8_t rec[REC_MAX];
	uint32_t rl = (uint32_t)rec_encode(rec, space, page_no, &r);
	uint64_t key = pool_key(space, page_no);
	pthread_mutex_t *lk = writer_lock(p, key);
	pthread_mutex_lock(lk);
	struct pool_page *e = writer_lookup(p, key);
	enum ppl_pool_status st;
	if (e == NULL) {
		/* a new entry: an empty head (the mark) and the note in DRAM */
		struct rec_list l = { .buf = rec, .len = rl, .cap = rl, .n = 1 };
		st = replace_chain(p, NULL, key, &l, 0, PPL_POOL_OVER_CAP);
	} else {
		st = dram_append(p, e, rec, rl, start_lsn, e->spill ? e->spill : PPL_POOL_OVER_CAP) == 0
			     ? PPL_POOL_OVER_CAP
			     : PPL_POOL_ERROR;
	}
	pthread_mutex_unlock(lk);
	return st;
}

enum ppl_pool_status ppl_pool_reclaim(struct ppl_pool *p, uint32_t space, uint32_t page_no, uint64_t upto)
{
	if (p->read_only)
		return PPL_POOL_ERROR;
	uint64_t key = pool_key(space, page_no);
	pthread_mutex_t *lk = writer_lock(p, key);
	pthread_mutex_lock(lk);
	struct pool_page *e = writer_lookup(p, key);
	enum ppl_pool_status st = PPL_POOL_OK;
	if (e) {
		struct rec_list l = { 0 };
		ADD(p, n_reclaims, 1);
		if (collect(p, e, upto, &l) != 0)
			st = PPL_POOL_ERROR;
		else
			st = replace_chain(p, e, key, &l, upto, 0);
		free(l.buf);
	}
	pthread_mutex_unlock(lk);
	return st == PPL_POOL_OVER_CAP || st == PPL_POOL_FULL ? PPL_POOL_OK : st;
}

uint64_t ppl_pool_drop_space(struct ppl_pool *p, uint32_t space)
{
	size_t n = 0, cap = 0;
	uint64_t *keys = NULL;
	struct cds_lfht_iter it;
	struct pool_page *e;
	pool_index_wait(p);
	rcu_read_lock();
	cds_lfht_for_each_entry(p->ht, &it, e, node) {
		PPL_TSAN_FOUND(e);
		if ((uint32_t)(e->key >> 32) != space)
			continue;
		if (n == cap) {
			cap = cap ? 2 * cap : 256;
			uint64_t *k = realloc(keys, cap * sizeof(*k));
			if (k == NULL)
				break;
			keys = k;
		}
		keys[n++] = e->key;
	}
	pool_read_unlock(p);
	uint64_t dropped = 0;
	for (size_t i = 0; i < n; i++) {
		pthread_mutex_t *lk = writer_lock(p, keys[i]);
		pthread_mutex_lock(lk);
		e = writer_lookup(p, keys[i]);
		if (e) {
			struct rec_list none = { 0 };
			replace_chain(p, e, keys[i], &none, 0, 0);
			dropped++;
		}
		pthread_mutex_unlock(lk);
	}
	free(keys);
	return dropped;
}

/* ---- reading ------------------------------------------------------------------------ */

static void mark_damaged(struct ppl_pool *p, struct pool_page *e, const char *why)
{
	if (!__atomic_exchange_n(&e->damaged, true, __ATOMIC_ACQ_REL)) {
		ADD(p, n_damaged, 1);
		pool_logf(p, "pool: page %u:%u: %s; its pool records are not applied; the page must be rebuilt "
			  "from the redo log", (uint32_t)(e->key >> 32), (uint32_t)e->key, why);
	}
}

struct deliver {
	ppl_pool_rec_fn fn;
	void *arg;
	bool in_dram, stopped;
};

static int deliver_one(void *arg, const struct ppl_pool_rec *r)
{
	struct deliver *d = arg;
	struct ppl_pool_rec c = *r;
	c.in_dram = d->in_dram;
	if (d->fn(d->arg, &c) != 0) {
		d->stopped = true;
		return 1;
	}
	return 0;
}

enum ppl_pool_status ppl_pool_records(struct ppl_pool *p, uint32_t space, uint32_t page_no, ppl_pool_rec_fn fn,
				      void *arg)
{
	uint64_t key = pool_key(space, page_no);
	uint8_t stream[4096];
	uint32_t len = 0, nb, tail;
	char why[200];
	enum ppl_pool_status st = PPL_POOL_OK;
	struct pool_page tmp;
	rcu_read_lock();
	struct pool_page *e = lookup(p, key);
	if (e == NULL) {
		/* not built yet: read the chain the scan found */
		struct dir_ent *dir = dir_find(p, key);
		if (dir == NULL)
			goto out;
		memset(&tmp, 0, sizeof(tmp));
		tmp.key = key;
		tmp.head = dir->head;
		e = &tmp;
	}
	if (__atomic_load_n(&e->damaged, __ATOMIC_ACQUIRE)) {
		st = PPL_POOL_CORRUPT;
		goto out;
	}
	if (__atomic_load_n(&e->log_only, __ATOMIC_ACQUIRE)) {
		st = PPL_POOL_IN_LOG; /* the records cannot all be given */
		goto out;
	}
	if (e->head) {
		if (pool_chain_load(p, e->head, space, page_no, stream, &len, &nb, &tail, NULL, why, sizeof(why)) != 0 ||
		    pool_stream_parse(space, page_no, stream, len, NULL, NULL, NULL, NULL, NULL) != 0) {
			if (why[0] == '\0')
				snprintf(why, sizeof(why), "a record fails its checksum");
			if (e == &tmp)
				pool_logf(p, "pool: page %u:%u: %s; its pool records are not applied", space, page_no, why);
			else
				mark_damaged(p, e, why);
			st = PPL_POOL_CORRUPT;
			goto out;
		}
	}
	for (struct dram_seg *s = __atomic_load_n(&e->dram, __ATOMIC_ACQUIRE); s;
	     s = __atomic_load_n(&s->next, __ATOMIC_ACQUIRE))
		if (pool_stream_parse(space, page_no, s->data, __atomic_load_n(&s->used, __ATOMIC_ACQUIRE), NULL, NULL,
				      NULL, NULL, NULL) != 0) {
			mark_damaged(p, e, "a DRAM record fails its checksum (memory corruption)");
			st = PPL_POOL_CORRUPT;
			goto out;
		}
	struct deliver d = { fn, arg, false, false };
	pool_stream_parse(space, page_no, stream, len, deliver_one, &d, NULL, NULL, NULL);
	d.in_dram = true;
	for (struct dram_seg *s = __atomic_load_n(&e->dram, __ATOMIC_ACQUIRE); s && !d.stopped;
	     s = __atomic_load_n(&s->next, __ATOMIC_ACQUIRE))
		pool_stream_parse(space, page_no, s->data, __atomic_load_n(&s->used, __ATOMIC_ACQUIRE), deliver_one,
				  &d, NULL, NULL, NULL);
out:
	pool_read_unlock(p);
	return st;
}

static void snapshot(const struct pool_page *e, struct ppl_pool_page_info *o)
{
	memset(o, 0, sizeof(*o));
	o->present = true;
	o->spilled = __atomic_load_n(&e->spill, __ATOMIC_RELAXED) != 0;
	o->damaged = __atomic_load_n(&e->damaged, __ATOMIC_RELAXED);
	o->seq = e->seq;
	o->blocks = __atomic_load_n(&e->nblocks, __ATOMIC_RELAXED);
	o->records = __atomic_load_n(&e->records, __ATOMIC_RELAXED);
	o->dram_records = __atomic_load_n(&e->dram_records, __ATOMIC_RELAXED);
	o->bytes = __atomic_load_n(&e->bytes, __ATOMIC_RELAXED);
	o->dram_bytes = __atomic_load_n(&e->dram_bytes, __ATOMIC_RELAXED);
	o->base_lsn = e->base_lsn;
	o->first_lsn = __atomic_load_n(&e->first_lsn, __ATOMIC_RELAXED);
	o->last_lsn = __atomic_load_n(&e->last_lsn, __ATOMIC_RELAXED);
}

bool ppl_pool_page_info(struct ppl_pool *p, uint32_t space, uint32_t page_no, struct ppl_pool_page_info *out)
{
	uint64_t key = pool_key(space, page_no);
	bool found = true;
	rcu_read_lock();
	struct pool_page *e = lookup(p, key);
	struct dir_ent *dir = e ? NULL : dir_find(p, key);
	if (e) {
		snapshot(e, out);
	} else if (dir) {
		struct pool_page tmp;
		uint8_t stream[4096];
		char why[200];
		memset(&tmp, 0, sizeof(tmp));
		tmp.key = key;
		tmp.head = dir->head;
		tmp.seq = dir->seq;
		tmp.damaged = load_entry(p, &tmp, stream, why, sizeof(why)) != 0;
		snapshot(&tmp, out);
	} else {
		memset(out, 0, sizeof(*out));
		found = false;
	}
	pool_read_unlock(p);
	return found;
}

void ppl_pool_for_each_page(struct ppl_pool *p,
			    void (*fn)(void *arg, uint32_t space, uint32_t page_no,
				       const struct ppl_pool_page_info *info),
			    void *arg)
{
	struct cds_lfht_iter it;
	struct pool_page *e;
	struct ppl_pool_page_info info;
	pool_index_wait(p);
	rcu_read_lock();
	cds_lfht_for_each_entry(p->ht, &it, e, node) {
		PPL_TSAN_FOUND(e);
		snapshot(e, &info);
		fn(arg, (uint32_t)(e->key >> 32), (uint32_t)e->key, &info);
	}
	pool_read_unlock(p);
}

static bool older(const struct ppl_pool_page_ref *a, const struct ppl_pool_page_ref *b)
{
	if (a->spilled != b->spilled)
		return a->spilled;
	return a->first_lsn < b->first_lsn;
}

size_t ppl_pool_oldest(struct ppl_pool *p, struct ppl_pool_page_ref *out, size_t n)
{
	size_t have = 0;
	struct cds_lfht_iter it;
	struct pool_page *e;
	if (n == 0)
		return 0;
	pool_index_wait(p);
	rcu_read_lock();
	cds_lfht_for_each_entry(p->ht, &it, e, node) {
		PPL_TSAN_FOUND(e);
		struct ppl_pool_page_ref r = { (uint32_t)(e->key >> 32), (uint32_t)e->key,
					       __atomic_load_n(&e->first_lsn, __ATOMIC_RELAXED),
					       __atomic_load_n(&e->spill, __ATOMIC_RELAXED) != 0 };
		if (have == n && !older(&r, &out[n - 1]))
			continue;
		size_t i = have < n ? have++ : n - 1;
		while (i > 0 && older(&r, &out[i - 1])) {
			out[i] = out[i - 1];
			i--;
		}
		out[i] = r;
	}
	pool_read_unlock(p);
	return have;
}

uint64_t ppl_pool_oldest_dram_lsn(struct ppl_pool *p)
{
	uint64_t min = UINT64_MAX;
	if (__atomic_load_n(&p->n_spilled, __ATOMIC_RELAXED) == 0)
		return min;
	struct cds_lfht_iter it;
	struct pool_page *e;
	rcu_read_lock();
	cds_lfht_for_each_entry(p->ht, &it, e, node) {
		PPL_TSAN_FOUND(e);
		uint64_t l = __atomic_load_n(&e->dram_first_lsn, __ATOMIC_RELAXED);
		if (__atomic_load_n(&e->dram_records, __ATOMIC_RELAXED) && l < min)
			min = l;
	}
	pool_read_unlock(p);
	return min;
}

void ppl_pool_usage(struct ppl_pool *p, struct ppl_pool_usage *o)
{
	memset(o, 0, sizeof(*o));
	o->nblocks = p->nblocks - 1;
	pthread_mutex_lock(&p->alloc_lock);
	o->free_blocks = p->free_top;
	pthread_mutex_unlock(&p->alloc_lock);
	o->pages = __atomic_load_n(&p->n_pages, __ATOMIC_RELAXED);
	o->spilled_pages = __atomic_load_n(&p->n_spilled, __ATOMIC_RELAXED);
	o->damaged_pages = __atomic_load_n(&p->n_damaged, __ATOMIC_RELAXED);
	o->dram_records = __atomic_load_n(&p->n_dram_records, __ATOMIC_RELAXED);
	o->dram_bytes = __atomic_load_n(&p->n_dram_bytes, __ATOMIC_RELAXED);
	o->appends = __atomic_load_n(&p->n_appends, __ATOMIC_RELAXED);
	o->appends_over_cap = __atomic_load_n(&p->n_over_cap, __ATOMIC_RELAXED);
	o->appends_full = __atomic_load_n(&p->n_full, __ATOMIC_RELAXED);
	o->reclaims = __atomic_load_n(&p->n_reclaims, __ATOMIC_RELAXED);
	o->low_water_blocks = o->nblocks * p->opt.low_water_pct / 100;
	o->high_water_blocks = o->nblocks * p->opt.high_water_pct / 100;
	/* blocks of chains already reclaimed come back after a grace
	 * period: a cleaner that waited for them would materialize past the
	 * high-water mark */
	o->retiring_blocks = __atomic_load_n(&p->n_retiring, __ATOMIC_RELAXED);
	o->needs_cleaning = o->free_blocks + o->retiring_blocks < o->low_water_blocks;
	o->cleaned_enough = o->free_blocks + o->retiring_blocks >= o->high_water_blocks;
}
