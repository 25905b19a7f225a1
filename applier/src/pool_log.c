/* The pool's log area: MariaDB's log writes made durable in persistent
 * memory, so that a commit is acknowledged once its bytes are here, not
 * once the log file is synced (NV-PPL's redo log on NVDIMM, Exadata's
 * commit accelerator). The file is still written at once (its page cache
 * serves reads) and synced behind, by the store (store_pmemlog.c), which
 * then releases what the sync covered; after a crash, the entries still
 * needed are written into the file before anything reads it.
 *
 * The format is in pool_media.h ("the log area"). Invariants:
 *   L1 an entry is persisted whole, header and bytes, before
 *      ppl_pool_log_append returns 0 (and the write is acknowledged);
 *   L2 appends are serialized under log_lock, so entry n+1 is never
 *      persisted before entry n: the pending run holds every
 *      acknowledged write not yet released;
 *   L3 the tail moves only past entries whose bytes a sync made durable
 *      in the file (the caller's mark, taken before its sync);
 *   L4 sequence numbers only grow over the pool's life, so no entry of an
 *      earlier lap continues the run. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pool_int.h"
#include "ppl/crc32c.h"

static uint64_t log_align(uint64_t n) { return (n + POOL_LOG_ALIGN - 1) / POOL_LOG_ALIGN * POOL_LOG_ALIGN; }

static uint8_t word_check(uint64_t low56)
{
	uint8_t b[7];
	for (int i = 0; i < 7; i++)
		b[i] = (uint8_t)(low56 >> (8 * i));
	return (uint8_t)(ppl_crc32c(0, b, sizeof(b)) | 1); /* never 0: a zero word is a new pool */
}

static uint64_t tail_word(uint64_t seq, uint64_t ring_pos)
{
	uint64_t low = (seq & 0xffffffffull) | (ring_pos / POOL_LOG_ALIGN) << 32;
	return low | (uint64_t)word_check(low) << 56;
}

static uint32_t ent_crc(const struct pool_log_ent *h, const uint8_t *bytes)
{
	struct pool_log_ent c = *h;
	c.crc = 0;
	return ppl_crc32c(ppl_crc32c(0, &c, sizeof(c)), bytes, h->len);
}

static uint64_t hdr_off(const struct ppl_pool *p) { return p->log_ring_off - POOL_LOG_HDR; }

/* The entry at ring position pos if it is entry seq, whole; else NULL. */
static const struct pool_log_ent *entry_at(const struct ppl_pool *p, uint64_t pos, uint64_t seq)
{
	if (pos + sizeof(struct pool_log_ent) > p->log_ring_size)
		return NULL;
	const struct pool_log_ent *h = (const void *)(p->pm.base + p->log_ring_off + pos);
	if (h->seq != seq || (h->kind != POOL_LOG_DATA && h->kind != POOL_LOG_WRAP))
		return NULL;
	if (h->kind == POOL_LOG_DATA && pos + sizeof(*h) + h->len > p->log_ring_size)
		return NULL;
	if (h->kind == POOL_LOG_WRAP && h->len != 0)
		return NULL;
	return ent_crc(h, (const uint8_t *)(h + 1)) == h->crc ? h : NULL;
}

/* Walks the run of entries from the tail; fn (may be NULL) for each data
 * entry. Sets the head and the next sequence number. */
static int walk(struct ppl_pool *p, ppl_pool_log_fn fn, void *arg, uint64_t *head, uint64_t *next_seq,
		uint64_t *entries, uint64_t *bytes)
{
	uint64_t at = p->log_tail, seq = p->log_tail_seq;
	*entries = *bytes = 0;
	for (;;) {
		uint64_t pos = at % p->log_ring_size;
		const struct pool_log_ent *h = entry_at(p, pos, seq);
		if (h == NULL)
			break;
		if (h->kind == POOL_LOG_WRAP) {
			at += p->log_ring_size - pos;
		} else {
			if (fn) {
				int rc = fn(arg, h->seq, h->fileid, h->offset, (const uint8_t *)(h + 1), h->len);
				if (rc)
					return rc;
			}
			at += sizeof(*h) + log_align(h->len);
			++*entries;
			*bytes += h->len;
		}
		seq++;
		if (at - p->log_tail > p->log_ring_size)
			break; /* cannot happen with a sound ring: never walk round twice */
	}
	*head = at;
	*next_seq = seq;
	return 0;
}

int pool_log_open(struct ppl_pool *p, struct ppl_pool_recovery *rec, char *err, size_t errlen)
{
	pthread_mutex_init(&p->log_lock, NULL);
	if (p->sb.log_size == 0)
		return 0;
	p->log_ring_off = p->sb.log_off + POOL_LOG_HDR;
	p->log_ring_size = p->sb.log_size - POOL_LOG_HDR;
	uint64_t word = pm_load8(&p->pm, hdr_off(p)), full = pm_load8(&p->pm, hdr_off(p) + 8);
	if (word == 0) {
		p->log_tail = 0;
		p->log_tail_seq = 1;
	} else {
		uint64_t low = word & 0x00ffffffffffffffull, pos = (low >> 32) * POOL_LOG_ALIGN;
		if ((uint8_t)(word >> 56) != word_check(low) || pos >= p->log_ring_size) {
			rec->log_damaged = true;
			snprintf(err, errlen, "the pool's log area header is damaged (tail word %016llx): the log "
				 "writes it may hold cannot be found, and MariaDB's log file may lack acknowledged "
				 "commits. The pool was not changed; restore it from a copy, or recover the datadir "
				 "from a backup", (unsigned long long)word);
			return -1;
		}
		/* the whole number was made durable first: it is the word's
		 * sequence number or a later one (a crash between the two) */
		uint64_t seq = (full & ~0xffffffffull) | (word & 0xffffffffull);
		if (seq > full)
			seq -= 1ull << 32;
		p->log_tail = pos;
		p->log_tail_seq = seq;
	}
	uint64_t n, b;
	walk(p, NULL, NULL, &p->log_head, &p->log_next_seq, &n, &b);
	p->log_entries = n;
	p->log_tail_entries = 0;
	rec->log_pending = n;
	rec->log_pending_bytes = b;
	return 0;
}

static void put_entry(struct ppl_pool *p, uint64_t pos, struct pool_log_ent *h, const struct iovec *iov,
		      int iovcnt)
{
	uint64_t off = p->log_ring_off + pos + sizeof(*h);
	uint32_t crc = 0;
	h->crc = 0;
	crc = ppl_crc32c(0, h, sizeof(*h));
	size_t left = h->len;
	for (int i = 0; i < iovcnt && left; i++) {
		size_t n = iov[i].iov_len < left ? iov[i].iov_len : left;
		pm_write(&p->pm, off, iov[i].iov_base, n);
		crc = ppl_crc32c(crc, iov[i].iov_base, n);
		off += n;
		left -= n;
	}
	h->crc = crc;
	pm_write(&p->pm, p->log_ring_off + pos, h, sizeof(*h));
	pm_flush(&p->pm, p->log_ring_off + pos, sizeof(*h) + h->len);
}

enum ppl_pool_status ppl_pool_log_append(struct ppl_pool *p, uint64_t fileid, uint64_t offset,
					 const struct iovec *iov, int iovcnt, size_t len)
{
	if (p->read_only || p->log_ring_size == 0 || __atomic_load_n(&p->pm.failed, __ATOMIC_RELAXED))
		return PPL_POOL_ERROR;
	uint64_t need = sizeof(struct pool_log_ent) + log_align(len);
	pthread_mutex_lock(&p->log_lock);
	size_t have = 0;
	for (int i = 0; i < iovcnt; i++)
		have += iov[i].iov_len;
	if (len > UINT32_MAX || len > have || need > p->log_ring_size / 2) {
		p->log_too_big++;
		pthread_mutex_unlock(&p->log_lock);
		return PPL_POOL_ERROR;
	}
	uint64_t pos = p->log_head % p->log_ring_size;
	uint64_t skip = pos + need > p->log_ring_size ? p->log_ring_size - pos : 0;
	/* a WRAP entry takes a sequence number: the run stays unbroken */
	if (p->log_head + skip + need - p->log_tail > p->log_ring_size) {
		p->log_full++;
		pthread_mutex_unlock(&p->log_lock);
		return PPL_POOL_FULL;
	}
	if (skip) {
		struct pool_log_ent w = {.seq = p->log_next_seq++, .kind = POOL_LOG_WRAP};
		put_entry(p, pos, &w, NULL, 0);
		p->log_head += skip;
		pos = 0;
	}
	struct pool_log_ent h = {.seq = p->log_next_seq, .fileid = fileid, .offset = offset, .len = (uint32_t)len,
				 .kind = POOL_LOG_DATA};
	put_entry(p, pos, &h, iov, iovcnt);
	pm_drain(&p->pm);
	enum ppl_pool_status st = PPL_POOL_OK;
	if (__atomic_load_n(&p->pm.failed, __ATOMIC_RELAXED)) {
		/* not durable: the next append must not continue a run
		 * whose last entries may be missing */
		st = PPL_POOL_ERROR;
	} else {
		p->log_next_seq++;
		p->log_head += need;
		p->log_entries++;
		p->log_appends++;
		p->log_append_bytes += len;
	}
	pthread_mutex_unlock(&p->log_lock);
	return st;
}

void ppl_pool_log_mark(struct ppl_pool *p, struct ppl_pool_log_mark *m)
{
	pthread_mutex_lock(&p->log_lock);
	m->seq = p->log_next_seq;
	m->head = p->log_head;
	m->entries = p->log_entries;
	pthread_mutex_unlock(&p->log_lock);
}

int ppl_pool_log_release(struct ppl_pool *p, const struct ppl_pool_log_mark *m)
{
	if (p->read_only || p->log_ring_size == 0)
		return -1;
	pthread_mutex_lock(&p->log_lock);
	if (m->head <= p->log_tail || m->head > p->log_head) {
		pthread_mutex_unlock(&p->log_lock);
		return 0;
	}
	uint64_t pos = m->head % p->log_ring_size;
	pm_store8(&p->pm, hdr_off(p) + 8, m->seq);
	pm_persist(&p->pm, hdr_off(p) + 8, 8);
	pm_store8(&p->pm, hdr_off(p), tail_word(m->seq, pos));
	pm_persist(&p->pm, hdr_off(p), 8);
	p->log_tail_entries = m->entries;
	p->log_tail = m->head;
	p->log_tail_seq = m->seq;
	p->log_releases++;
	pthread_mutex_unlock(&p->log_lock);
	return __atomic_load_n(&p->pm.failed, __ATOMIC_RELAXED) ? -1 : 0;
}

int ppl_pool_log_pending(struct ppl_pool *p, ppl_pool_log_fn fn, void *arg)
{
	if (p->log_ring_size == 0)
		return 0;
	pthread_mutex_lock(&p->log_lock);
	uint64_t head, seq, n, b;
	int rc = walk(p, fn, arg, &head, &seq, &n, &b);
	pthread_mutex_unlock(&p->log_lock);
	return rc;
}

void ppl_pool_log_usage(struct ppl_pool *p, struct ppl_pool_log_usage *out)
{
	memset(out, 0, sizeof(*out));
	if (p->log_ring_size == 0)
		return;
	pthread_mutex_lock(&p->log_lock);
	out->area = p->log_ring_size;
	out->used = p->log_head - p->log_tail;
	out->pending = p->log_entries - p->log_tail_entries;
	out->appends = p->log_appends;
	out->append_bytes = p->log_append_bytes;
	out->full = p->log_full;
	out->too_big = p->log_too_big;
	out->releases = p->log_releases;
	pthread_mutex_unlock(&p->log_lock);
}
