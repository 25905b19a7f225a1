/* The storage node's engine (see ppl/node.h).
 *
 * Pending records are kept per page as a list of chunks, one per
 * mini-transaction, each holding that mtr's records for the page in the
 * server's own encoding, as InnoDB's recovery keeps them (log_phys_t). An
 * INIT_PAGE or FREE_PAGE voids everything before it for that page, even
 * earlier records of the same mtr (page_recv_t::will_not_read). A page is
 * rebuilt by replaying its chunks over a base image with recovery's LSN
 * rules (ppl_replay_*). A full page write that reaches the data file
 * becomes the new base and takes the chunks it already contains with it.
 *
 * One reader-writer lock: ingest and base changes write, rebuilds and
 * elision questions read. Chunks are immutable once linked. */
#include "ppl/node.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/mman.h>

#include "ppl/elision_proto.h"
#include "ppl/mach.h"
#include "ppl/page.h"

/* Chunks live in large blocks, allocated in log order; a block is released
 * when the last chunk in it dies. Pages die roughly in the order their log
 * was written (materialized, rewritten, dropped), so memory comes back
 * without per-chunk malloc and free, which dominated ingest. */
struct ablock {
	struct ablock *prev, *next;
	size_t used, cap, live;
	uint8_t data[];
};
#define ABLOCK_SIZE ((size_t)16 << 20)

/* A chunk finds its block by address: blocks are ABLOCK_SIZE-aligned. */
struct nchunk {
	struct nchunk *next;
	uint64_t start;
	uint32_t span; /* end LSN - start LSN: a mini-transaction is < 1 MiB */
	uint32_t len;
	uint8_t data[];
};
#define CHUNK_END(c) ((c)->start + (c)->span)
#define CHUNK_BLOCK(c) ((struct ablock *)((uintptr_t)(c) & ~(uintptr_t)(ABLOCK_SIZE - 1)))

struct npage {
	uint64_t key;
	uint64_t init_lsn;
	struct nchunk *head, *tail;
	unsigned nchunks;
	size_t bytes;
	bool from_init, freed, diverged;
	bool chunk_from_init;   /* this mtr's chunk starts with INIT/FREE */
	/* The LSN of the newest page write of MariaDB's that ppl_node_elide
	 * acknowledged (atomic: set under the read lock), 0 once anything is
	 * written over the page (ppl_node_page_written). MariaDB's page
	 * cleaner writes a page again only after changing it, and its
	 * recovery restores a page from the doublewrite buffer only when
	 * the file's copy is damaged (which wrote over it): a write at this
	 * LSN or below meanwhile is a tool editing the page in place. */
	uint64_t acked_lsn;
	void *user;             /* the streaming sink's per-page state */
	/* building this mtr's chunk */
	uint64_t mark;
	size_t mtr_len, mtr_fill;
	size_t valid_from;
	struct nchunk *building;
};

struct entry {
	struct npage *p;
	const uint8_t *raw;
	size_t len;
};

struct pending_event {
	struct pending_event *next;
	struct ppl_node_file_event e;
};

struct ppl_node {
	struct ppl_node_config cfg;
	pthread_rwlock_t lock;
	struct ppl_redo_reader *reader;
	/* The parse point, published after every step of the reader, for
	 * readers without the lock and for ppl_node_wait_parsed(). */
	uint64_t parsed;        /* atomic */
	pthread_mutex_t parsed_lock;
	pthread_cond_t parsed_cond;
	uint64_t log_size;
	char err[512];

	struct ablock *blocks;  /* newest first; blocks->used grows */
	size_t arena_bytes;

	struct npage **map;     /* open addressing by key */
	size_t map_cap, map_n;
	struct npage *last;     /* the page get() returned last */

	struct entry *ents;     /* records of the mtr being indexed */
	size_t ents_cap;
	struct npage **touched;
	size_t touched_cap;
	uint64_t mtr_seq;

	struct pending_event *ev_head, **ev_tail;
	ppl_node_file_fn file_fn;
	void *file_arg;

	struct ppl_node_stats st;     /* counted under the write lock */
	/* counted by readers, which share the read lock (atomic) */
	struct {
		uint64_t rebuilds, rebuild_mtrs_applied, rebuild_mtrs_skipped, elide_asked, elide_acked;
		uint64_t unexplained_said; /* verify's unexplained page writes logged so far */
	} shared;
	int fail;

	/* ppl_node_only_below: records of mtrs starting below only_below are
	 * indexed only for the pages in only_keys (sorted, (space<<32|page)) */
	uint64_t only_below;
	uint64_t *only_keys;
	size_t only_n;
};

#define say(n, ...) PPL_LOG(&(n)->cfg.log, PPL_LOG_EVENT, __VA_ARGS__)

static uint64_t key_of(uint32_t space, uint32_t page) { return ((uint64_t)space << 32 | page) + 1; }
static uint32_t key_space(uint64_t k) { return (uint32_t)((k - 1) >> 32); }
static uint32_t key_page(uint64_t k) { return (uint32_t)(k - 1); }

static size_t slot_of(uint64_t k, size_t cap)
{
	k ^= k >> 33;
	k *= 0xff51afd7ed558ccdull;
	k ^= k >> 33;
	return (size_t)k & (cap - 1);
}

static struct npage *find(const struct ppl_node *n, uint64_t k)
{
	if (!n->map_cap)
		return NULL;
	for (size_t j = slot_of(k, n->map_cap);; j = (j + 1) & (n->map_cap - 1)) {
		if (!n->map[j])
			return NULL;
		if (n->map[j]->key == k)
			return n->map[j];
	}
}

static int rehash(struct ppl_node *n)
{
	size_t cap = n->map_cap ? n->map_cap * 2 : 1 << 14;
	struct npage **m = calloc(cap, sizeof *m);
	if (!m)
		return -1;
	for (size_t i = 0; i < n->map_cap; i++) {
		if (!n->map[i])
			continue;
		size_t j = slot_of(n->map[i]->key, cap);
		while (m[j])
			j = (j + 1) & (cap - 1);
		m[j] = n->map[i];
	}
	free(n->map);
	n->map = m;
	n->map_cap = cap;
	return 0;
}

static struct npage *get(struct ppl_node *n, uint64_t k)
{
	/* Consecutive records are mostly for the same page. */
	if (n->last && n->last->key == k)
		return n->last;
	struct npage *p = find(n, k);
	if (p)
		return n->last = p;
	if ((n->map_n + 1) * 2 > n->map_cap && rehash(n))
		return NULL;
	p = calloc(1, sizeof *p);
	if (!p)
		return NULL;
	p->key = k;
	size_t j = slot_of(k, n->map_cap);
	while (n->map[j])
		j = (j + 1) & (n->map_cap - 1);
	n->map[j] = p;
	n->map_n++;
	n->st.pages_indexed = n->map_n;
	return n->last = p;
}

static struct nchunk *chunk_alloc(struct ppl_node *n, size_t len)
{
	size_t need = (sizeof(struct nchunk) + len + 7) & ~(size_t)7;
	struct ablock *b = n->blocks;
	if (need > ABLOCK_SIZE - sizeof *b)
		return NULL; /* cannot happen: an mtr is at most 1 MiB */
	if (b && b->used + need > b->cap && !b->live) {
		b->used = 0; /* every chunk in it is gone: reuse it as is */
	} else if (!b || b->used + need > b->cap) {
		b = aligned_alloc(ABLOCK_SIZE, ABLOCK_SIZE);
		if (!b)
			return NULL;
		/* Huge pages: millions of small chunks otherwise cost a page
		 * fault per 4 KiB of new log. */
		madvise(b, ABLOCK_SIZE, MADV_HUGEPAGE);
		b->used = b->live = 0;
		b->cap = ABLOCK_SIZE - sizeof *b;
		b->prev = NULL;
		b->next = n->blocks;
		if (n->blocks)
			n->blocks->prev = b;
		n->blocks = b;
		n->arena_bytes += ABLOCK_SIZE;
	}
	struct nchunk *c = (struct nchunk *)(b->data + b->used);
	b->used += need;
	b->live++;
	return c;
}

static void chunk_free(struct ppl_node *n, struct nchunk *c)
{
	struct ablock *b = CHUNK_BLOCK(c);
	n->st.chunks--;
	n->st.chunk_bytes -= c->len;
	n->st.chunks_dropped++;
	if (--b->live || b == n->blocks)
		return; /* the newest block stays open for allocation */
	if (b->prev)
		b->prev->next = b->next;
	if (b->next)
		b->next->prev = b->prev;
	n->arena_bytes -= ABLOCK_SIZE;
	free(b);
}

static void drop_chunks(struct ppl_node *n, struct npage *p)
{
	for (struct nchunk *c = p->head, *next; c; c = next) {
		next = c->next;
		chunk_free(n, c);
	}
	p->head = p->tail = NULL;
	p->nchunks = 0;
	p->bytes = 0;
}

/* Appends a filled chunk to the page's list, the newest last. */
static void link_chunk(struct ppl_node *n, struct npage *p, struct nchunk *c)
{
	if (p->tail)
		p->tail->next = c;
	else
		p->head = c;
	p->tail = c;
	p->nchunks++;
	p->bytes += c->len;
	n->st.chunks++;
	n->st.chunk_bytes += c->len;
}

struct ppl_node *ppl_node_new(const struct ppl_node_config *cfg)
{
	struct ppl_node *n = calloc(1, sizeof *n);
	if (!n)
		return NULL;
	n->cfg = *cfg;
	if (!n->cfg.page_size)
		n->cfg.page_size = 16384;
	pthread_rwlock_init(&n->lock, NULL);
	pthread_mutex_init(&n->parsed_lock, NULL);
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&n->parsed_cond, &ca);
	pthread_condattr_destroy(&ca);
	n->ev_tail = &n->ev_head;
	return n;
}

void ppl_node_free(struct ppl_node *n)
{
	if (!n)
		return;
	for (size_t i = 0; i < n->map_cap; i++)
		free(n->map[i]);
	while (n->blocks) {
		struct ablock *b = n->blocks;
		n->blocks = b->next;
		free(b);
	}
	while (n->ev_head) {
		struct pending_event *e = n->ev_head;
		n->ev_head = e->next;
		free(e);
	}
	free(n->map);
	free(n->ents);
	free(n->touched);
	free(n->only_keys);
	ppl_redo_reader_free(n->reader);
	pthread_rwlock_destroy(&n->lock);
	pthread_mutex_destroy(&n->parsed_lock);
	pthread_cond_destroy(&n->parsed_cond);
	free(n);
}

/* ---- ingest -------------------------------------------------------------- */

static void queue_event(struct ppl_node *n, const struct ppl_node_file_event *e)
{
	if (n->cfg.chunk_sink) {
		/* Streaming: the sink needs file names before the pages that
		 * follow in the log; it already runs inside ingest. */
		if (n->file_fn)
			n->file_fn(n->file_arg, e);
		return;
	}
	struct pending_event *pe = malloc(sizeof *pe);
	if (!pe)
		return;
	pe->e = *e;
	pe->next = NULL;
	*n->ev_tail = pe;
	n->ev_tail = &pe->next;
}

/* Drops the records of the space's pages from first_page on. */
static void drop_pages_locked(struct ppl_node *n, uint32_t space, uint32_t first_page)
{
	for (size_t i = 0; i < n->map_cap; i++) {
		struct npage *p = n->map[i];
		if (p && key_space(p->key) == space && key_page(p->key) >= first_page) {
			drop_chunks(n, p);
			p->from_init = p->freed = p->diverged = false;
			p->init_lsn = 0;
		}
	}
}

static void drop_space_locked(struct ppl_node *n, uint32_t space)
{
	drop_pages_locked(n, space, 0);
}

static void copy_name(char *dst, const uint8_t *src, size_t len)
{
	if (len > 511)
		len = 511;
	memcpy(dst, src, len);
	dst[len] = 0;
}

/* Room for one more entry (and one more touched page: never more than
 * entries). */
static int reserve_entry(struct ppl_node *n, size_t cnt)
{
	if (cnt == n->ents_cap) {
		size_t cap = n->ents_cap ? n->ents_cap * 2 : 256;
		struct entry *e = realloc(n->ents, cap * sizeof *e);
		struct npage **t = realloc(n->touched, cap * sizeof *t);
		if (e)
			n->ents = e;
		if (t)
			n->touched = t;
		if (!e || !t)
			return -1;
		n->ents_cap = n->touched_cap = cap;
	}
	return 0;
}

static int cmp_u64(const void *a, const void *b);

static bool only_keeps(const struct ppl_node *n, uint32_t space, uint32_t page_no)
{
	uint64_t k = (uint64_t)space << 32 | page_no;
	return n->only_n && bsearch(&k, n->only_keys, n->only_n, sizeof(k), cmp_u64) != NULL;
}

int ppl_node_only_below(struct ppl_node *n, uint64_t lsn, const uint64_t *keys, size_t count)
{
	uint64_t *copy = NULL;
	if (count) {
		copy = malloc(count * sizeof(*copy));
		if (copy == NULL)
			return -1;
		memcpy(copy, keys, count * sizeof(*copy));
		qsort(copy, count, sizeof(*copy), cmp_u64);
	}
	pthread_rwlock_wrlock(&n->lock);
	free(n->only_keys);
	n->only_keys = copy;
	n->only_n = count;
	n->only_below = lsn;
	pthread_rwlock_unlock(&n->lock);
	return 0;
}

static int on_mtr(void *arg, const struct ppl_mtr *m)
{
	struct ppl_node *n = arg;
	struct ppl_rec_iter it;
	struct ppl_rec r;
	size_t cnt = 0, ntouched = 0;
	int k;
	const uint64_t seq = ++n->mtr_seq;

	if (n->cfg.on_accepted)
		n->cfg.on_accepted(n->cfg.accepted_arg, m);
	ppl_rec_iter_init(&it, m->recs, m->len, n->cfg.page_size);
	while ((k = ppl_rec_next(&it, &r)) > 0) {
		n->st.records++;
		struct ppl_node_file_event ev;
		switch (r.kind) {
		case PPL_RK_PAGE: {
			n->st.rec_by_type[r.type >> 4]++;
			if (r.type == PPL_REC_EXTENDED && r.ext_subtype >= 0 && r.ext_subtype < PPL_EXT_COUNT)
				n->st.rec_by_ext[r.ext_subtype]++;
			if (m->start_lsn < n->only_below && !only_keeps(n, r.space_id, r.page_no))
				break;
			struct npage *p = get(n, key_of(r.space_id, r.page_no));
			if (!p || reserve_entry(n, cnt))
				goto oom;
			if (p->mark != seq) {
				p->mark = seq;
				p->mtr_len = 0;
				p->valid_from = cnt;
				p->chunk_from_init = false;
				n->touched[ntouched++] = p; /* touched_cap == ents_cap >= cnt + 1 below */
			}
			if (r.type == PPL_REC_INIT_PAGE || r.type == PPL_REC_FREE_PAGE) {
				p->chunk_from_init = true;
				drop_chunks(n, p);
				p->init_lsn = m->start_lsn;
				p->from_init = true;
				p->valid_from = cnt; /* earlier records of this mtr are void too */
				p->mtr_len = 0;
			}
			p->freed = r.type == PPL_REC_FREE_PAGE;
			n->ents[cnt++] = (struct entry){p, r.raw, r.raw_len};
			p->mtr_len += r.raw_len;
			break;
		}
		case PPL_RK_TRIM:
			/* recv_sys_t::trim(): the undo tablespace shrinks to
			 * r.page_no pages; the earlier log of the pages past
			 * that is void. The pages below keep theirs, as in
			 * MariaDB's recovery: the truncation rewrites some of
			 * them with plain writes on top of what they held. */
			n->st.rec_by_ext[PPL_EXT_TRIM_PAGES]++;
			drop_pages_locked(n, r.space_id, r.page_no);
			memset(&ev, 0, sizeof ev);
			ev.type = PPL_EXT_TRIM_PAGES;
			ev.space_id = r.space_id;
			ev.pages = r.page_no;
			ev.lsn = m->start_lsn;
			queue_event(n, &ev);
			break;
		case PPL_RK_FILE:
			n->st.file_recs[(r.type >> 4) - 8]++;
			if (r.type == PPL_FILE_DELETE) {
				drop_space_locked(n, r.space_id);
				if (n->cfg.on_drop_space)
					n->cfg.on_drop_space(n->cfg.sink_arg, r.space_id);
			}
			memset(&ev, 0, sizeof ev);
			ev.type = r.type;
			ev.space_id = r.space_id;
			ev.lsn = m->start_lsn;
			copy_name(ev.name, r.name, r.name_len);
			if (r.name2)
				copy_name(ev.name2, r.name2, r.name2_len);
			queue_event(n, &ev);
			break;
		case PPL_RK_CHECKPOINT:
			n->st.file_recs[4]++;
			break;
		case PPL_RK_IGNORED:
		case PPL_RK_PADDING:
			break;
		}
	}
	if (k < 0) {
		snprintf(n->err, sizeof n->err, "mini-transaction at LSN %llu passes its CRC but does not parse: %s",
			 (unsigned long long)m->start_lsn, it.err);
		n->fail = 1;
		return -1;
	}
	/* One chunk per touched page, records in log order. */
	for (size_t i = 0; i < ntouched; i++) {
		struct npage *p = n->touched[i];
		if (!p->mtr_len)
			continue;
		p->building = chunk_alloc(n, p->mtr_len);
		if (!p->building)
			goto oom;
		p->mtr_fill = 0;
	}
	for (size_t i = 0; i < cnt; i++) {
		struct npage *p = n->ents[i].p;
		if (i < p->valid_from || !p->building)
			continue;
		memcpy(p->building->data + p->mtr_fill, n->ents[i].raw, n->ents[i].len);
		p->mtr_fill += n->ents[i].len;
	}
	for (size_t i = 0; i < ntouched; i++) {
		struct npage *p = n->touched[i];
		struct nchunk *c = p->building;
		if (!c)
			continue;
		p->building = NULL;
		c->next = NULL;
		c->start = m->start_lsn;
		c->span = (uint32_t)(m->end_lsn - m->start_lsn);
		c->len = (uint32_t)p->mtr_fill;
		if (n->cfg.chunk_sink) {
			int r = n->cfg.chunk_sink(n->cfg.sink_arg, key_space(p->key), key_page(p->key), &p->user,
						  p->chunk_from_init, m->start_lsn, m->end_lsn, c->data, c->len);
			n->st.chunks++;
			n->st.chunk_bytes += c->len;
			chunk_free(n, c);
			if (r) {
				snprintf(n->err, sizeof n->err, "applying the mini-transaction at LSN %llu to page %u:%u failed",
					 (unsigned long long)m->start_lsn, key_space(p->key), key_page(p->key));
				n->fail = 1;
				return -1;
			}
			continue;
		}
		link_chunk(n, p, c);
	}
	n->st.mtrs++;
	return 0;
oom:
	snprintf(n->err, sizeof n->err, "out of memory indexing the mini-transaction at LSN %llu",
		 (unsigned long long)m->start_lsn);
	n->fail = 1;
	return -1;
}

static void publish_parsed(struct ppl_node *n);

static uint64_t node_clock(void *arg)
{
	struct ppl_node *n = arg;
	return n->cfg.clock(n->cfg.accepted_arg);
}

int ppl_node_log_open(struct ppl_node *n, uint64_t file_size)
{
	struct ppl_redo_sink sink = {.arg = n, .on_mtr = on_mtr, .clock = n->cfg.clock ? node_clock : NULL};
	pthread_rwlock_wrlock(&n->lock);
	ppl_redo_reader_free(n->reader);
	n->reader = ppl_redo_reader_new(&ppl_dialect_mariadb_10_8, file_size,
					n->cfg.log_is_file_image ? PPL_REDO_FILE_IMAGE : PPL_REDO_WRITES, &sink);
	n->log_size = file_size;
	publish_parsed(n);
	pthread_rwlock_unlock(&n->lock);
	if (!n->reader) {
		snprintf(n->err, sizeof n->err, "a %llu-byte file cannot be a redo log", (unsigned long long)file_size);
		return -1;
	}
	return 0;
}

static void deliver_events(struct ppl_node *n)
{
	pthread_rwlock_wrlock(&n->lock);
	struct pending_event *e = n->ev_head;
	n->ev_head = NULL;
	n->ev_tail = &n->ev_head;
	pthread_rwlock_unlock(&n->lock);
	while (e) {
		struct pending_event *next = e->next;
		if (n->file_fn)
			n->file_fn(n->file_arg, &e->e);
		free(e);
		e = next;
	}
}

/* Called with n->lock held for writing, after the reader moved. */
static void publish_parsed(struct ppl_node *n)
{
	uint64_t lsn = n->reader ? ppl_redo_lsn(n->reader) : 0;
	if (lsn == __atomic_load_n(&n->parsed, __ATOMIC_RELAXED))
		return;
	pthread_mutex_lock(&n->parsed_lock);
	__atomic_store_n(&n->parsed, lsn, __ATOMIC_RELEASE);
	pthread_cond_broadcast(&n->parsed_cond);
	pthread_mutex_unlock(&n->parsed_lock);
}

/* After a call into the redo reader under the write lock: the parsed LSN
 * published, the reader's error kept, the lock let go, then the file
 * events delivered to the host outside the lock (its callback takes locks
 * of its own). */
static int reader_done(struct ppl_node *n, int r)
{
	publish_parsed(n);
	if (r && !n->fail)
		snprintf(n->err, sizeof n->err, "%s", ppl_redo_error(n->reader));
	pthread_rwlock_unlock(&n->lock);
	deliver_events(n);
	return r ? -1 : 0;
}

int ppl_node_log_write(struct ppl_node *n, uint64_t off, const void *buf, size_t len)
{
	if (!n->reader) {
		snprintf(n->err, sizeof n->err, "log written before ppl_node_log_open()");
		return -1;
	}
	pthread_rwlock_wrlock(&n->lock);
	int r = ppl_redo_feed(n->reader, off, buf, len);
	n->st.log_bytes += len;
	return reader_done(n, r);
}

int ppl_node_feed_mtr(struct ppl_node *n, const struct ppl_mtr *m)
{
	pthread_rwlock_wrlock(&n->lock);
	if (n->reader) {
		pthread_rwlock_unlock(&n->lock);
		snprintf(n->err, sizeof n->err, "mini-transactions fed to a node that reads a log");
		return -1;
	}
	int r = on_mtr(n, m);
	n->st.log_bytes += m->end_lsn - m->start_lsn;
	if (r == 0) {
		pthread_mutex_lock(&n->parsed_lock);
		__atomic_store_n(&n->parsed, m->end_lsn, __ATOMIC_RELEASE);
		pthread_cond_broadcast(&n->parsed_cond);
		pthread_mutex_unlock(&n->parsed_lock);
	}
	pthread_rwlock_unlock(&n->lock);
	deliver_events(n);
	return r ? -1 : 0;
}

int ppl_node_log_hold(struct ppl_node *n, uint64_t off, const void *buf, size_t len)
{
	if (!n->reader)
		return -1;
	pthread_rwlock_wrlock(&n->lock);
	return reader_done(n, ppl_redo_hold(n->reader, off, buf, len));
}

int ppl_node_log_durable(struct ppl_node *n, uint64_t lsn)
{
	if (!n->reader)
		return -1;
	pthread_rwlock_wrlock(&n->lock);
	return reader_done(n, ppl_redo_durable(n->reader, lsn));
}

int ppl_node_log_durable_if_whole(struct ppl_node *n, uint64_t lsn)
{
	if (!n->reader)
		return -1;
	pthread_rwlock_wrlock(&n->lock);
	if (!ppl_redo_reaches(n->reader, lsn)) {
		pthread_rwlock_unlock(&n->lock);
		return 0;
	}
	return reader_done(n, ppl_redo_durable(n->reader, lsn)) == 0 ? 1 : -1;
}

int ppl_node_log_live(struct ppl_node *n)
{
	if (!n->reader)
		return -1;
	pthread_rwlock_wrlock(&n->lock);
	int r = ppl_redo_go_live(n->reader);
	publish_parsed(n);
	pthread_rwlock_unlock(&n->lock);
	return r;
}

int ppl_node_log_start(struct ppl_node *n, uint64_t lsn)
{
	pthread_rwlock_wrlock(&n->lock);
	int r = n->reader ? ppl_redo_start_at(n->reader, lsn) : -1;
	publish_parsed(n);
	pthread_rwlock_unlock(&n->lock);
	if (r)
		snprintf(n->err, sizeof n->err, "cannot start the log at LSN %llu (no header yet, or before the log's first LSN)",
			 (unsigned long long)lsn);
	return r;
}

int ppl_node_log_finish(struct ppl_node *n)
{
	pthread_rwlock_wrlock(&n->lock);
	int r = n->reader ? ppl_redo_finish(n->reader) : -1;
	if (r)
		snprintf(n->err, sizeof n->err, "%s", n->reader ? ppl_redo_error(n->reader) : "no log");
	pthread_rwlock_unlock(&n->lock);
	return r;
}

uint64_t ppl_node_parsed_lsn(const struct ppl_node *n) { return __atomic_load_n(&n->parsed, __ATOMIC_ACQUIRE); }

bool ppl_node_wait_parsed(struct ppl_node *n, uint64_t lsn, uint64_t timeout_ns)
{
	if (ppl_node_parsed_lsn(n) >= lsn)
		return true;
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	uint64_t ns = (uint64_t)t.tv_nsec + timeout_ns % 1000000000ull;
	t.tv_sec += (time_t)(timeout_ns / 1000000000ull + ns / 1000000000ull);
	t.tv_nsec = (long)(ns % 1000000000ull);
	pthread_mutex_lock(&n->parsed_lock);
	int rc = 0;
	while (__atomic_load_n(&n->parsed, __ATOMIC_ACQUIRE) < lsn && rc == 0)
		rc = pthread_cond_timedwait(&n->parsed_cond, &n->parsed_lock, &t);
	pthread_mutex_unlock(&n->parsed_lock);
	return ppl_node_parsed_lsn(n) >= lsn;
}
const struct ppl_redo_reader *ppl_node_reader(const struct ppl_node *n) { return n->reader; }
const char *ppl_node_error(const struct ppl_node *n) { return n->err; }

void ppl_node_on_file_event(struct ppl_node *n, ppl_node_file_fn fn, void *arg)
{
	n->file_fn = fn;
	n->file_arg = arg;
}

/* ---- pages --------------------------------------------------------------- */

static void info_of(const struct npage *p, struct ppl_node_page_info *o)
{
	memset(o, 0, sizeof *o);
	if (!p)
		return;
	o->known = p->head != NULL;
	o->from_init = p->from_init;
	o->freed = p->freed;
	o->diverged = p->diverged;
	o->init_lsn = p->init_lsn;
	o->first_lsn = p->head ? p->head->start : 0;
	o->last_lsn = p->tail ? CHUNK_END(p->tail) : 0;
	o->chunks = p->nchunks;
	o->bytes = p->bytes;
}

bool ppl_node_page_info(struct ppl_node *n, uint32_t space, uint32_t page_no, struct ppl_node_page_info *out)
{
	pthread_rwlock_rdlock(&n->lock);
	const struct npage *p = find(n, key_of(space, page_no));
	info_of(p, out);
	pthread_rwlock_unlock(&n->lock);
	return out->known;
}

/* resumed: frame is an image an earlier rebuild of the page's current
 * base produced (ppl_node_rebuild_resumed), not the base itself */
static enum ppl_apply_status rebuild_locked(struct ppl_node *n, const struct npage *p, uint32_t space,
					    uint32_t page_no, uint8_t *frame, uint64_t upto, bool resumed,
					    bool *changed, unsigned *applied, struct ppl_apply_error *err)
{
	*changed = false;
	if (applied)
		*applied = 0;
	if (!p || !p->head)
		return PPL_APPLY_OK;
	struct ppl_page_ref ref = {frame, n->cfg.page_size, space, page_no};
	struct ppl_page_replay rp;
	const struct nchunk *c = p->head;
	if (resumed) {
		ppl_replay_resume(&rp, &ref, p->from_init ? p->init_lsn : 0);
		while (c && CHUNK_END(c) <= rp.page_lsn) /* in the image */
			c = c->next;
	} else {
		ppl_replay_begin(&rp, &ref, p->from_init ? p->init_lsn : 0);
	}
	for (; c && CHUNK_END(c) <= upto; c = c->next) {
		enum ppl_apply_status s = ppl_replay_mtr(&rp, c->start, CHUNK_END(c), c->data, c->len, err);
		if (s != PPL_APPLY_OK)
			return s;
	}
	*changed = ppl_replay_finish(&rp);
	if (applied)
		*applied = rp.applied;
	__atomic_add_fetch(&n->shared.rebuilds, 1, __ATOMIC_RELAXED);
	__atomic_add_fetch(&n->shared.rebuild_mtrs_applied, rp.applied, __ATOMIC_RELAXED);
	__atomic_add_fetch(&n->shared.rebuild_mtrs_skipped, rp.skipped, __ATOMIC_RELAXED);
	return PPL_APPLY_OK;
}

enum ppl_apply_status ppl_node_rebuild(struct ppl_node *n, uint32_t space, uint32_t page_no, uint8_t *frame,
				       uint64_t upto_lsn, bool *changed, struct ppl_apply_error *err)
{
	pthread_rwlock_rdlock(&n->lock);
	enum ppl_apply_status s = rebuild_locked(n, find(n, key_of(space, page_no)), space, page_no, frame, upto_lsn,
						 false, changed, NULL, err);
	pthread_rwlock_unlock(&n->lock);
	return s;
}

enum ppl_apply_status ppl_node_rebuild_resumed(struct ppl_node *n, uint32_t space, uint32_t page_no, uint8_t *frame,
					       uint64_t upto_lsn, bool *changed, unsigned *applied,
					       struct ppl_apply_error *err)
{
	pthread_rwlock_rdlock(&n->lock);
	enum ppl_apply_status s = rebuild_locked(n, find(n, key_of(space, page_no)), space, page_no, frame, upto_lsn,
						 true, changed, applied, err);
	pthread_rwlock_unlock(&n->lock);
	return s;
}

static int cmp_page_key(const void *a, const void *b)
{
	uint64_t x = (*(struct npage *const *)a)->key, y = (*(struct npage *const *)b)->key;
	return x < y ? -1 : x > y;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

void ppl_node_for_each_page(struct ppl_node *n,
			    void (*fn)(void *arg, uint32_t space, uint32_t page_no, const struct ppl_node_page_info *info),
			    void *arg)
{
	pthread_rwlock_rdlock(&n->lock);
	uint64_t *keys = malloc((n->map_n + 1) * sizeof *keys);
	size_t cnt = 0;
	for (size_t i = 0; keys && i < n->map_cap; i++)
		if (n->map[i] && n->map[i]->head)
			keys[cnt++] = n->map[i]->key;
	pthread_rwlock_unlock(&n->lock);
	if (!keys)
		return;
	qsort(keys, cnt, sizeof *keys, cmp_u64);
	for (size_t i = 0; i < cnt; i++) {
		struct ppl_node_page_info info;
		if (ppl_node_page_info(n, key_space(keys[i]), key_page(keys[i]), &info))
			fn(arg, key_space(keys[i]), key_page(keys[i]), &info);
	}
	free(keys);
}

void ppl_node_for_each_user(struct ppl_node *n, void (*fn)(void *arg, uint32_t space, uint32_t page_no, void *user),
			    void *arg)
{
	pthread_rwlock_rdlock(&n->lock);
	struct npage **pages = malloc((n->map_n + 1) * sizeof *pages);
	size_t cnt = 0;
	for (size_t i = 0; pages && i < n->map_cap; i++)
		if (n->map[i] && n->map[i]->user)
			pages[cnt++] = n->map[i];
	pthread_rwlock_unlock(&n->lock);
	if (!pages)
		return;
	qsort(pages, cnt, sizeof *pages, cmp_page_key);
	for (size_t i = 0; i < cnt; i++)
		fn(arg, key_space(pages[i]->key), key_page(pages[i]->key), pages[i]->user);
	free(pages);
}

void ppl_node_page_written(struct ppl_node *n, const uint8_t *image, uint64_t superseded)
{
	uint32_t space = ppl_page_space(image), page_no = ppl_page_no(image);
	uint64_t lsn = ppl_page_lsn(image);
	if (superseded > lsn)
		lsn = superseded;
	pthread_rwlock_wrlock(&n->lock);
	struct npage *p = find(n, key_of(space, page_no));
	if (p) {
		n->st.bases_taken++;
		/* a page written (or forgotten) since: the elided write is
		 * no longer what the page's file stands for */
		p->acked_lsn = 0;
		while (p->head && CHUNK_END(p->head) <= lsn) {
			struct nchunk *c = p->head;
			p->head = c->next;
			p->nchunks--;
			p->bytes -= c->len;
			chunk_free(n, c);
		}
		if (!p->head) {
			p->tail = NULL;
			p->from_init = p->freed = false;
			p->init_lsn = 0;
		} else if (p->from_init && p->head->start >= lsn) {
			/* the written page already holds the initialization */
			p->from_init = false;
			p->init_lsn = 0;
		}
		p->diverged = false;
	}
	pthread_rwlock_unlock(&n->lock);
}

/* The page's head chunk is its initialization when the page is from_init:
 * drop_chunks() cleared everything before it. */
static bool chunk_is_init(const struct npage *p, const struct nchunk *c)
{
	return p->from_init && c == p->head && c->start == p->init_lsn;
}

int ppl_node_page_chunks(struct ppl_node *n, uint32_t space, uint32_t page_no, ppl_node_chunk_fn fn, void *arg)
{
	int r = 0;
	pthread_rwlock_rdlock(&n->lock);
	const struct npage *p = find(n, key_of(space, page_no));
	for (const struct nchunk *c = p ? p->head : NULL; c && r == 0; c = c->next)
		r = fn(arg, c->start, CHUNK_END(c), chunk_is_init(p, c), c->data, c->len);
	pthread_rwlock_unlock(&n->lock);
	return r;
}

int ppl_node_add_chunk(struct ppl_node *n, uint32_t space, uint32_t page_no, uint64_t start_lsn, uint64_t end_lsn,
		       bool from_init, const uint8_t *recs, size_t len)
{
	if (end_lsn <= start_lsn || end_lsn - start_lsn > UINT32_MAX || len > UINT32_MAX)
		return -1;
	pthread_rwlock_wrlock(&n->lock);
	struct npage *p = get(n, key_of(space, page_no));
	int rc = -1;
	if (p && (!p->tail || start_lsn >= CHUNK_END(p->tail))) {
		struct nchunk *c = chunk_alloc(n, len);
		if (c) {
			if (from_init) {
				drop_chunks(n, p);
				p->from_init = true;
				p->init_lsn = start_lsn;
			}
			memcpy(c->data, recs, len);
			/* a chunk that is one FREE_PAGE record (type 0, its
			 * length in the low nibble) frees the page, as in
			 * ingest: nothing of it is written any more */
			p->freed = from_init && len > 0 && (recs[0] & 0xf0) == 0 && (recs[0] & 0x0f) != 0 &&
				   len == 1u + (recs[0] & 0x0fu);
			c->next = NULL;
			c->start = start_lsn;
			c->span = (uint32_t)(end_lsn - start_lsn);
			c->len = (uint32_t)len;
			link_chunk(n, p, c);
			rc = 0;
		}
	}
	pthread_rwlock_unlock(&n->lock);
	return rc;
}

void ppl_node_rehome(struct ppl_node *n, uint32_t space, uint32_t page_no)
{
	pthread_rwlock_wrlock(&n->lock);
	struct npage *p = find(n, key_of(space, page_no));
	struct nchunk **link = p ? &p->head : NULL;
	while (link && *link) {
		struct nchunk *old = *link, *c;
		if (CHUNK_BLOCK(old) == n->blocks || (c = chunk_alloc(n, old->len)) == NULL) {
			/* already in the open block, or no memory: it stays */
			link = &old->next;
			continue;
		}
		memcpy(c, old, sizeof(*c) + old->len);
		*link = c;
		if (p->tail == old)
			p->tail = c;
		/* chunk_free() counts a drop; this is a move */
		n->st.chunks++;
		n->st.chunk_bytes += old->len;
		n->st.chunks_dropped--;
		chunk_free(n, old);
		link = &c->next;
	}
	pthread_rwlock_unlock(&n->lock);
}

void ppl_node_drop_space(struct ppl_node *n, uint32_t space)
{
	pthread_rwlock_wrlock(&n->lock);
	drop_space_locked(n, space);
	pthread_rwlock_unlock(&n->lock);
}

/* ---- elision ------------------------------------------------------------- */

static void record_types(const struct npage *p, char *out, size_t outlen)
{
	size_t o = 0;
	out[0] = 0;
	bool seen[8 + PPL_EXT_COUNT] = {0};
	for (const struct nchunk *c = p->head; c; c = c->next) {
		struct ppl_rec_iter it;
		struct ppl_rec r;
		ppl_rec_iter_init(&it, c->data, c->len, 65536);
		while (ppl_rec_next(&it, &r) > 0) {
			int i = r.type == PPL_REC_EXTENDED && r.ext_subtype >= 0 ? 8 + r.ext_subtype : r.type >> 4;
			if (i < 8 + PPL_EXT_COUNT && !seen[i] && o + 32 < outlen) {
				seen[i] = true;
				o += (size_t)snprintf(out + o, outlen - o, "%s%s", o ? "," : "",
						      ppl_rec_type_name(r.type, r.ext_subtype));
			}
		}
	}
}

static void mark_diverged(struct ppl_node *n, uint32_t space, uint32_t page_no)
{
	pthread_rwlock_wrlock(&n->lock);
	struct npage *w = find(n, key_of(space, page_no));
	if (w && !w->diverged) {
		w->diverged = true;
		n->st.divergences++;
	}
	pthread_rwlock_unlock(&n->lock);
}

uint64_t ppl_node_base_key(bool from_init, uint64_t init_lsn, const uint8_t *base, size_t page_size,
			   uint32_t *sum)
{
	*sum = from_init ? 0 : ppl_rd4(base + page_size - 4);
	return from_init ? init_lsn | PPL_NODE_BASE_FROM_INIT : ppl_page_lsn(base);
}

/* The page a rebuild of p starts from into frame: its data-file page, or
 * zeros when the log initializes it. 0, or read_base's failure. */
static int base_of(struct ppl_node *n, const struct npage *p, uint32_t space, uint32_t page_no, uint8_t *frame,
		   ppl_node_read_fn read_base, void *read_arg)
{
	if (!p->from_init)
		return read_base(read_arg, space, page_no, frame);
	memset(frame, 0, n->cfg.page_size);
	return 0;
}

unsigned ppl_node_elide(struct ppl_node *n, uint32_t space, uint32_t page_no, uint64_t lsn, uint32_t checksum,
			ppl_node_read_fn read_base, void *read_arg)
{
	return ppl_node_elide_rebuilt(n, space, page_no, lsn, checksum, read_base, read_arg, NULL);
}

unsigned ppl_node_elide_rebuilt(struct ppl_node *n, uint32_t space, uint32_t page_no, uint64_t lsn,
				uint32_t checksum, ppl_node_read_fn read_base, void *read_arg,
				struct ppl_node_rebuilt *out)
{
	if (out)
		out->filled = false;
	__atomic_add_fetch(&n->shared.elide_asked, 1, __ATOMIC_RELAXED);
	/* the rebuild happens in the caller's frame when it wants the page */
	uint8_t *frame = out ? out->frame : aligned_alloc(4096, n->cfg.page_size);
	if (!frame)
		return PPL_ELIDE_NACK_INTERNAL;
	unsigned verdict;
	bool no_redo = false;
	pthread_rwlock_rdlock(&n->lock);
	const struct npage *p = find(n, key_of(space, page_no));
	if (!p || !p->head) {
		/* Nothing pending: only a data file that already holds this
		 * very page (materialized since its last change) can stand
		 * in for the write. */
		verdict = read_base(read_arg, space, page_no, frame) == 0 && ppl_page_lsn(frame) == lsn &&
				  ppl_page_stored_crc(frame, n->cfg.page_size) == checksum
			  ? PPL_ELIDE_ACK
			  : PPL_ELIDE_NACK_UNKNOWN_PAGE;
	} else if (p->diverged) {
		verdict = PPL_ELIDE_NACK_UNSUPPORTED;
	} else if (lsn > CHUNK_END(p->tail)) {
		verdict = lsn > ppl_node_parsed_lsn(n) ? PPL_ELIDE_NACK_NOT_DURABLE : PPL_ELIDE_NACK_LSN_BEHIND;
	} else if (lsn < CHUNK_END(p->tail)) {
		verdict = PPL_ELIDE_NACK_LSN_AHEAD;
	} else {
		bool changed = false;
		struct ppl_apply_error e;
		int rd = base_of(n, p, space, page_no, frame, read_base, read_arg);
		uint32_t base_sum = 0;
		uint64_t base_lsn = rd ? 0 : ppl_node_base_key(p->from_init, p->init_lsn, frame, n->cfg.page_size,
							       &base_sum);
		enum ppl_apply_status s = PPL_APPLY_CORRUPT;
		bool resumed = false;
		if (!rd && out && out->resume &&
		    out->resume(out->resume_arg, space, page_no, base_lsn, base_sum, lsn, frame)) {
			s = rebuild_locked(n, p, space, page_no, frame, UINT64_MAX, true, &changed, NULL, &e);
			resumed = s == PPL_APPLY_OK && changed && ppl_page_lsn(frame) == lsn &&
				  ppl_page_stored_crc(frame, n->cfg.page_size) == checksum;
			/* anything but a yes is the base's and the records' to say */
			if (!resumed)
				rd = base_of(n, p, space, page_no, frame, read_base, read_arg);
		}
		if (!rd && !resumed)
			s = rebuild_locked(n, p, space, page_no, frame, UINT64_MAX, false, &changed, NULL, &e);
		if (rd)
			verdict = PPL_ELIDE_NACK_INTERNAL;
		else if (s == PPL_APPLY_BASE_DAMAGED)
			verdict = PPL_ELIDE_NACK_UNKNOWN_PAGE; /* no page to rebuild from */
		else if (s != PPL_APPLY_OK)
			verdict = PPL_ELIDE_NACK_UNSUPPORTED;
		else if (ppl_page_lsn(frame) == lsn && ppl_page_stored_crc(frame, n->cfg.page_size) == checksum)
			verdict = PPL_ELIDE_ACK; /* rebuilt, or the data file already holds exactly this page */
		else
			verdict = PPL_ELIDE_NACK_CHECKSUM;
		/* Nothing applied and the file's page at this very LSN with
		 * another checksum: its bytes were changed without redo (a
		 * tool, a restore); the rebuild has no say, the write goes
		 * through and is the page's base. Not a divergence. */
		if (out && verdict == PPL_ELIDE_ACK && changed) {
			out->base_lsn = base_lsn;
			out->base_sum = base_sum;
			out->filled = true;
		}
		no_redo = verdict == PPL_ELIDE_NACK_CHECKSUM && !changed && ppl_page_lsn(frame) == lsn;
		if (s == PPL_APPLY_BASE_DAMAGED) {
			/* Torn by a partial write (the store took it as the file's
			 * bytes: partial_pages), or changed by a tool: MariaDB
			 * restores such a page from its doublewrite buffer, and
			 * its write of the page is the only copy. */
			say(n, "page %u:%u at LSN %llu is not elided: %s; the write goes through and is its base", space,
			    page_no, (unsigned long long)lsn, e.msg);
		} else if (no_redo) {
			say(n, "page %u:%u at LSN %llu is not elided: its file holds other bytes at that LSN and no record "
			    "applies (changed without redo: a tool or a restore wrote it); the write is its base",
			    space, page_no, (unsigned long long)lsn);
		} else if (verdict == PPL_ELIDE_NACK_CHECKSUM || verdict == PPL_ELIDE_NACK_UNSUPPORTED) {
			char types[200];
			record_types(p, types, sizeof types);
			char base[80];
			if (p->from_init)
				snprintf(base, sizeof base, "initialized by the log at LSN %llu",
					 (unsigned long long)p->init_lsn);
			else
				snprintf(base, sizeof base, "the file's page at LSN %llu", (unsigned long long)base_lsn);
			say(n, "divergence: page %u:%u (%s) at LSN %llu: %s; rebuilt from %s to LSN %llu, records: %s; this "
			    "page falls back to full page writes", space, page_no, ppl_page_type_name(ppl_page_type(frame)),
			    (unsigned long long)lsn, s != PPL_APPLY_OK ? e.msg : "rebuilt checksum differs from the server's page",
			    base, (unsigned long long)ppl_page_lsn(frame), types);
		}
	}
	if (verdict == PPL_ELIDE_ACK && p && lsn > __atomic_load_n(&p->acked_lsn, __ATOMIC_RELAXED))
		__atomic_store_n(&((struct npage *)p)->acked_lsn, lsn, __ATOMIC_RELAXED);
	pthread_rwlock_unlock(&n->lock);
	if (!out)
		free(frame);
	if ((verdict == PPL_ELIDE_NACK_CHECKSUM && !no_redo) || verdict == PPL_ELIDE_NACK_UNSUPPORTED)
		mark_diverged(n, space, page_no);
	if (verdict == PPL_ELIDE_ACK)
		__atomic_add_fetch(&n->shared.elide_acked, 1, __ATOMIC_RELAXED);
	return verdict;
}

/* Whether two pages differ; if so, how, into why. */
static bool describe_diff(const uint8_t *a, const uint8_t *b, size_t ps, char *why, size_t len)
{
	size_t at = 0, differ = 0;
	while (at < ps && a[at] == b[at])
		at++;
	if (at == ps)
		return false;
	for (size_t i = at; i < ps; i++)
		differ += a[i] != b[i];
	snprintf(why, len, "%zu byte(s) differ, the first at offset %zu", differ, at);
	return true;
}

const char *ppl_verify_skip_name(enum ppl_verify_skip s)
{
	static const char *const names[PPL_VERIFY_SKIP_COUNT] = {
		[PPL_VERIFY_COMPARED] = "compared",
		[PPL_VERIFY_NOT_FULL_CRC32] = "not_full_crc32",
		[PPL_VERIFY_PAGE_COMPRESSED] = "page_compressed",
		[PPL_VERIFY_OTHER_PAGE] = "other_page",
		[PPL_VERIFY_NO_LSN] = "lsn_0",
		[PPL_VERIFY_NO_INDEX] = "no_index",
		[PPL_VERIFY_LOG_BEHIND] = "log_behind",
		[PPL_VERIFY_NO_FILE] = "no_file",
		[PPL_VERIFY_TOOL_OVER_ELIDED] = "tool_over_elided",
		[PPL_VERIFY_DIVERGED_BEFORE] = "diverged_before",
		[PPL_VERIFY_BASE_DAMAGED] = "base_damaged",
		[PPL_VERIFY_NO_REDO] = "no_redo",
		[PPL_VERIFY_OLDER] = "older_than_file",
		[PPL_VERIFY_NO_BASE] = "no_base",
		[PPL_VERIFY_NOT_REACHED] = "records_short",
		[PPL_VERIFY_RECORDS_GONE] = "records_gone",
		[PPL_VERIFY_LSN_FUTURE] = "lsn_future",
		[PPL_VERIFY_OTHER_DATADIR] = "other_datadir",
		[PPL_VERIFY_AFTER_WIPE] = "after_wipe",
	};
	return (unsigned)s < PPL_VERIFY_SKIP_COUNT && names[s] ? names[s] : "?";
}

bool ppl_verify_skip_explained(enum ppl_verify_skip s)
{
	return s != PPL_VERIFY_NOT_REACHED && s != PPL_VERIFY_RECORDS_GONE && s != PPL_VERIFY_NO_BASE &&
	       s != PPL_VERIFY_LOG_BEHIND;
}

/* No record of the page lies at or below the image's LSN: the page the
 * node serves is its file's (records above the LSN, if any, came later).
 * Comparable when the file holds the page at that very LSN; at an older
 * one, the records between are missing from the index. */
static int verify_against_file(const uint8_t *image, const uint8_t *file, int rd, size_t ps,
			       enum ppl_verify_skip *skip)
{
	uint64_t lsn = ppl_page_lsn(image);
	if (rd == 0 && !ppl_page_all_zero(file, ps) && !ppl_page_crc_ok(file, ps)) {
		/* the file's page fails its checksum (a tool damaged it;
		 * MariaDB writes it back from its doublewrite buffer): the
		 * write is the page's new base, nothing to compare with */
		*skip = PPL_VERIFY_BASE_DAMAGED;
		return 0;
	}
	if (rd != 0 || !ppl_page_crc_ok(file, ps)) {
		/* beyond the file's end, or zeros: a page InnoDB writes
		 * first with records the index no longer holds */
		*skip = PPL_VERIFY_NO_BASE;
		return 0;
	}
	if (ppl_page_lsn(file) > lsn) {
		*skip = PPL_VERIFY_OLDER; /* a client's replay (keep_newer_pages) */
		return 0;
	}
	if (ppl_page_lsn(file) < lsn) {
		*skip = PPL_VERIFY_RECORDS_GONE;
		return 0;
	}
	if (memcmp(file, image, ps) == 0)
		return 1;
	*skip = PPL_VERIFY_NO_REDO; /* other bytes at the same LSN */
	return 0;
}

int ppl_node_verify(struct ppl_node *n, const uint8_t *image, ppl_node_read_fn read_base, void *read_arg,
		    enum ppl_verify_skip *skip_out)
{
	size_t ps = n->cfg.page_size;
	uint32_t space = ppl_page_space(image), page_no = ppl_page_no(image);
	uint64_t lsn = ppl_page_lsn(image);
	enum ppl_verify_skip skip = PPL_VERIFY_COMPARED, ignored;
	if (skip_out == NULL)
		skip_out = &ignored;
	if (lsn == 0) {
		/* written without redo (a new file's pages, IMPORT): the
		 * log says nothing of it */
		*skip_out = PPL_VERIFY_NO_LSN;
		return 0;
	}
	uint8_t *frame = aligned_alloc(4096, ps);
	if (!frame) {
		*skip_out = PPL_VERIFY_NO_BASE;
		return 0;
	}
	int result = 0;
	bool no_redo = false, damaged = false, not_mariadb = false; /* as in ppl_node_elide */
	char types[200] = "", why[200] = "";
	pthread_rwlock_rdlock(&n->lock);
	const struct npage *p = find(n, key_of(space, page_no));
	if (p && lsn <= __atomic_load_n(&p->acked_lsn, __ATOMIC_RELAXED)) {
		/* MariaDB's write of this page at this LSN was elided (see
		 * acked_lsn): these bytes are a tool's, whatever they hold,
		 * and the write is the page's base (ppl_node_page_written). */
		not_mariadb = true;
		skip = PPL_VERIFY_TOOL_OVER_ELIDED;
	} else if (p && p->diverged) {
		skip = PPL_VERIFY_DIVERGED_BEFORE; /* reported when it diverged */
	} else if (p && p->head && p->head->start < lsn) {
		bool changed = false;
		struct ppl_apply_error e;
		int rd = read_base(read_arg, space, page_no, frame);
		enum ppl_apply_status s = PPL_APPLY_OK;
		if (rd == 0 && ppl_page_lsn(frame) == lsn && ppl_page_crc_ok(frame, ps) &&
		    describe_diff(frame, image, ps, why, sizeof why)) {
			/* The file already holds a sound page at this very LSN
			 * and the write changes its bytes: every change of
			 * MariaDB's moves a page's LSN, so no record made this
			 * one (a tool editing the page in place). Whatever
			 * records the index still holds for the page (they can
			 * reach back to its initialization: a page write may
			 * come before the log that covers it is parsed), they
			 * say nothing of these bytes. */
			no_redo = true;
			rd = -1;
		} else if (p->from_init) {
			memset(frame, 0, ps);
			rd = 0;
		}
		if (rd == 0)
			s = rebuild_locked(n, p, space, page_no, frame, lsn, false, &changed, NULL, &e);
		if (no_redo) {
			skip = PPL_VERIFY_NO_REDO;
		} else if (rd != 0) {
			skip = PPL_VERIFY_NO_BASE;
		} else if (s == PPL_APPLY_BASE_DAMAGED) {
			/* nothing to compare with: the write is the page's base */
			snprintf(why, sizeof why, "%s", e.msg);
			damaged = true;
			skip = PPL_VERIFY_BASE_DAMAGED;
		} else if (s != PPL_APPLY_OK) {
			result = -1;
			snprintf(why, sizeof why, "the records do not apply: %s", e.msg);
		} else if (ppl_page_lsn(frame) == lsn) {
			result = describe_diff(frame, image, ps, why, sizeof why) ? -1 : 1;
			/* Nothing applied: the "rebuild" is the file's page, at
			 * the written LSN. Other bytes at the same LSN are a
			 * change no record made -- a tool overwriting a page on
			 * purpose (mysql-test-run's corruption tests), a restore
			 * -- and say nothing of the rebuild; the write makes them
			 * the page's base. */
			if (result < 0 && !changed) {
				no_redo = true;
				result = 0;
				skip = PPL_VERIFY_NO_REDO;
			}
		} else {
			skip = PPL_VERIFY_NOT_REACHED; /* the records end short of the LSN */
			snprintf(why, sizeof why, "rebuilt to LSN %llu from records starting at %llu",
				 (unsigned long long)ppl_page_lsn(frame), (unsigned long long)p->head->start);
		}
		if (result < 0)
			record_types(p, types, sizeof types);
	} else {
		int rd = read_base(read_arg, space, page_no, frame);
		result = verify_against_file(image, frame, rd, ps, &skip);
		if (result == 0 && rd == 0)
			snprintf(why, sizeof why, "the file's page is at LSN %llu", (unsigned long long)ppl_page_lsn(frame));
	}
	pthread_rwlock_unlock(&n->lock);
	if (not_mariadb)
		say(n, "page %u:%u is written at LSN %llu, where MariaDB's page write was elided and nothing was written "
		    "over it since: a tool edited the page in place, not compared; it is the page's base from now on", space, page_no,
		    (unsigned long long)lsn);
	if (damaged)
		say(n, "page %u:%u is written at LSN %llu over a page that cannot be rebuilt (%s): not compared; it is "
		    "the page's base from now on", space, page_no, (unsigned long long)lsn, why);
	if (no_redo && why[0])
		say(n, "page %u:%u is written at LSN %llu with other bytes than its file holds at that LSN (%s), and no "
		    "record lies between: changed without redo (a tool or a restore wrote it), not compared; it is "
		    "the page's base from now on", space, page_no, (unsigned long long)lsn, why);
	if (result == 0 && !ppl_verify_skip_explained(skip) &&
	    __atomic_fetch_add(&n->shared.unexplained_said, 1, __ATOMIC_RELAXED) < PPL_VERIFY_SAID_MAX)
		say(n, "verify: page %u:%u (%s) written at LSN %llu not compared (%s): %s (%s); a tool's write, or "
		    "records the index should hold", space, page_no, ppl_page_type_name(ppl_page_type(image)),
		    (unsigned long long)lsn, ppl_verify_skip_name(skip),
		    skip == PPL_VERIFY_NOT_REACHED ? "the records the index holds end below that LSN"
		    : skip == PPL_VERIFY_RECORDS_GONE ? "no record is pending and the file's page is older"
		    : "the file holds no sound page there and no record is pending",
		    why[0] ? why : "the file's page could not be read");
	if (result < 0) {
		say(n, "divergence (verify): page %u:%u (%s) at LSN %llu: the page rebuilt from the log differs from "
		    "the page written: %s; records: %s; this page falls back to full page writes",
		    space, page_no, ppl_page_type_name(ppl_page_type(image)), (unsigned long long)lsn, why, types);
		mark_diverged(n, space, page_no);
	}
	free(frame);
	*skip_out = result == 0 ? skip : PPL_VERIFY_COMPARED;
	return result;
}

void ppl_node_get_stats(struct ppl_node *n, struct ppl_node_stats *out)
{
	pthread_rwlock_rdlock(&n->lock);
	*out = n->st;
	/* counted by readers, which share the read lock with this copy */
	out->rebuilds = __atomic_load_n(&n->shared.rebuilds, __ATOMIC_RELAXED);
	out->rebuild_mtrs_applied = __atomic_load_n(&n->shared.rebuild_mtrs_applied, __ATOMIC_RELAXED);
	out->rebuild_mtrs_skipped = __atomic_load_n(&n->shared.rebuild_mtrs_skipped, __ATOMIC_RELAXED);
	out->elide_asked = __atomic_load_n(&n->shared.elide_asked, __ATOMIC_RELAXED);
	out->elide_acked = __atomic_load_n(&n->shared.elide_acked, __ATOMIC_RELAXED);
	out->unparsed_bytes = n->reader ? ppl_redo_unparsed_bytes(n->reader) : 0;
	pthread_rwlock_unlock(&n->lock);
}
