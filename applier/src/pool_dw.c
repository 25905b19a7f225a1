/* Doublewrite slots: a page image is durable in the pool before its data
 * file sees it, so a data-file write torn by a crash can be repaired at the
 * next open (DESIGN I5). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ppl/crash.h"
#include "pool_int.h"
#include "ppl/crc32c.h"
#include "ppl/page.h"

static uint64_t hdr_off(int slot) { return POOL_DW_HDR_OFF + (uint64_t)slot * POOL_DW_HDR_SIZE; }
static uint64_t img_off(const struct ppl_pool *p, int slot)
{
	return p->sb.dw_img_off + (uint64_t)slot * p->sb.dw_page_size;
}

static uint32_t slot_crc(const struct pool_dw_hdr *h, const uint8_t *img)
{
	uint32_t c = ppl_crc32c(0, &h->space, 20); /* space, page_no, lsn, size */
	return ppl_crc32c(c, img, h->size);
}

int pool_dw_init(struct ppl_pool *p)
{
	p->dw_busy = calloc(p->sb.dw_slots, 1);
	p->dw_page = calloc(p->sb.dw_slots, sizeof(*p->dw_page));
	if (p->dw_busy == NULL || p->dw_page == NULL) {
		free(p->dw_busy);
		free(p->dw_page);
		p->dw_busy = NULL;
		p->dw_page = NULL;
		return -1;
	}
	pthread_mutex_init(&p->dw_lock, NULL);
	pthread_cond_init(&p->dw_cond, NULL);
	return 0;
}

void pool_dw_fini(struct ppl_pool *p)
{
	if (p->dw_busy == NULL)
		return;
	free(p->dw_busy);
	free(p->dw_page);
	p->dw_busy = NULL;
	p->dw_page = NULL;
	pthread_mutex_destroy(&p->dw_lock);
	pthread_cond_destroy(&p->dw_cond);
}

static void slot_free(struct ppl_pool *p, int slot)
{
	uint64_t w = pm_load8(&p->pm, hdr_off(slot));
	pm_store8(&p->pm, hdr_off(slot), (w & ~0xffull) | DW_FREE);
	pm_persist(&p->pm, hdr_off(slot), 8);
}

static int stage(struct ppl_pool *p, uint32_t space, uint32_t page_no, const uint8_t *image, size_t size, bool wait,
		 char *err, size_t errlen)
{
	if (p->read_only) {
		snprintf(err, errlen, "the pool is open read-only");
		return -1;
	}
	if (size == 0 || size > p->sb.dw_page_size) {
		snprintf(err, errlen, "a %zu B page does not fit the pool's %u B doublewrite slots: create the pool "
			 "with a larger doublewrite page size", size, p->sb.dw_page_size);
		return -1;
	}
	pthread_mutex_lock(&p->dw_lock);
	int slot;
	for (;;) {
		int kept = 0;
		for (slot = 0; slot < (int)p->sb.dw_slots && p->dw_busy[slot]; slot++)
			kept += p->dw_busy[slot] == DW_KEPT;
		if (slot < (int)p->sb.dw_slots)
			break;
		/* Waiting is for a slot in flight to come back; a kept one
		 * comes back only once its page is written, which a failing
		 * disk may never allow: say so rather than wait forever. */
		if (kept == (int)p->sb.dw_slots) {
			pthread_mutex_unlock(&p->dw_lock);
			snprintf(err, errlen, "every doublewrite slot (%u) holds a page whose data-file write failed: "
				 "the data files cannot be written (a full or failing disk?); free space or fix the "
				 "disk: the kept pages are tried again each second (with Apply_Threads), and at the "
				 "storage node's next start, and their slots come back once written",
				 p->sb.dw_slots);
			return -1;
		}
		if (!wait) {
			pthread_mutex_unlock(&p->dw_lock);
			return -2;
		}
		pthread_cond_wait(&p->dw_cond, &p->dw_lock);
	}
	p->dw_busy[slot] = DW_IN_FLIGHT;
	p->dw_page[slot] = (uint64_t)space << 32 | page_no;
	uint64_t seq = ++p->dw_seq;
	pthread_mutex_unlock(&p->dw_lock);

	struct pool_dw_hdr h;
	memset(&h, 0, sizeof(h));
	h.space = space;
	h.page_no = page_no;
	h.lsn = ppl_page_lsn(image);
	h.size = (uint32_t)size;
	h.crc = slot_crc(&h, image);
	/* image and header fields durable first; the state word publishes */
	pm_write(&p->pm, img_off(p, slot), image, size);
	pm_flush(&p->pm, img_off(p, slot), size);
	pm_write(&p->pm, hdr_off(slot) + 8, (const uint8_t *)&h + 8, 24);
	pm_flush(&p->pm, hdr_off(slot) + 8, 24);
	pm_drain(&p->pm);
	pm_store8(&p->pm, hdr_off(slot), DW_VALID | seq << 8);
	pm_persist(&p->pm, hdr_off(slot), 8);
	PPL_CRASH(DW_STAGED);
	return slot;
}

int ppl_pool_dw_stage(struct ppl_pool *p, uint32_t space, uint32_t page_no, const uint8_t *image, size_t size,
		      char *err, size_t errlen)
{
	return stage(p, space, page_no, image, size, true, err, errlen);
}

int ppl_pool_dw_try_stage(struct ppl_pool *p, uint32_t space, uint32_t page_no, const uint8_t *image, size_t size,
			  char *err, size_t errlen)
{
	return stage(p, space, page_no, image, size, false, err, errlen);
}

void ppl_pool_dw_release(struct ppl_pool *p, int slot)
{
	if (slot < 0 || slot >= (int)p->sb.dw_slots)
		return;
	slot_free(p, slot);
	PPL_CRASH(DW_RELEASED);
	pthread_mutex_lock(&p->dw_lock);
	p->dw_busy[slot] = 0;
	pthread_cond_signal(&p->dw_cond);
	pthread_mutex_unlock(&p->dw_lock);
}

void ppl_pool_dw_keep(struct ppl_pool *p, int slot)
{
	if (slot < 0 || slot >= (int)p->sb.dw_slots)
		return;
	pthread_mutex_lock(&p->dw_lock);
	if (p->dw_busy[slot])
		p->dw_busy[slot] = DW_KEPT;
	/* a stage waiting for a slot must learn that the last one in flight
	 * is kept now: it would wait forever for a slot a failing disk never
	 * gives back */
	pthread_cond_broadcast(&p->dw_cond);
	pthread_mutex_unlock(&p->dw_lock);
}

static bool slot_read(const struct ppl_pool *p, int slot, struct pool_dw_hdr *h, const uint8_t **img)
{
	memcpy(h, p->pm.base + hdr_off(slot), sizeof(*h));
	h->state = pm_load8(&p->pm, hdr_off(slot));
	*img = p->pm.base + img_off(p, slot);
	return h->size > 0 && h->size <= p->sb.dw_page_size && slot_crc(h, *img) == h->crc;
}

/* Whether slot is in use for the page and holds an intact image of it;
 * dw_lock held. Slots of other pages are not read: they may be being
 * staged. */
static bool slot_of_page(const struct ppl_pool *p, int slot, uint32_t space, uint32_t page_no,
			 struct pool_dw_hdr *h, const uint8_t **img)
{
	return p->dw_busy[slot] && p->dw_page[slot] == ((uint64_t)space << 32 | page_no) &&
	       slot_read(p, slot, h, img) && (h->state & 0xff) == DW_VALID && h->space == space &&
	       h->page_no == page_no;
}

int ppl_pool_dw_kept(struct ppl_pool *p, uint32_t space, uint32_t page_no, uint64_t *lsn, const uint8_t **img)
{
	int found = -1;
	if (p->dw_busy == NULL)
		return -1;
	pthread_mutex_lock(&p->dw_lock);
	for (int s = 0; s < (int)p->sb.dw_slots; s++) {
		struct pool_dw_hdr h;
		const uint8_t *im;
		if (slot_of_page(p, s, space, page_no, &h, &im) && (found < 0 || h.lsn > *lsn)) {
			found = s;
			*lsn = h.lsn;
			*img = im;
		}
	}
	pthread_mutex_unlock(&p->dw_lock);
	return found;
}

void ppl_pool_dw_release_page(struct ppl_pool *p, uint32_t space, uint32_t page_no, int keep)
{
	for (int s = 0; p->dw_busy && s < (int)p->sb.dw_slots; s++) {
		struct pool_dw_hdr h;
		const uint8_t *im;
		pthread_mutex_lock(&p->dw_lock);
		bool mine = s != keep && slot_of_page(p, s, space, page_no, &h, &im);
		pthread_mutex_unlock(&p->dw_lock);
		if (mine)
			ppl_pool_dw_release(p, s);
	}
}

void ppl_pool_dw_for_each(struct ppl_pool *p,
			  void (*fn)(void *arg, int slot, uint32_t space, uint32_t page_no, uint64_t lsn,
				     uint32_t size, bool intact),
			  void *arg)
{
	for (int s = 0; s < (int)p->sb.dw_slots; s++) {
		struct pool_dw_hdr h;
		const uint8_t *img;
		bool ok = slot_read(p, s, &h, &img);
		if ((h.state & 0xff) == DW_VALID)
			fn(arg, s, h.space, h.page_no, h.lsn, h.size, ok);
	}
}

static void count_slot(void *arg, int slot, uint32_t space, uint32_t page_no, uint64_t lsn, uint32_t size,
		       bool intact)
{
	(void)slot, (void)space, (void)page_no, (void)lsn, (void)size, (void)intact;
	(*(unsigned *)arg)++;
}

unsigned ppl_pool_dw_in_use(struct ppl_pool *p)
{
	unsigned n = 0;
	ppl_pool_dw_for_each(p, count_slot, &n);
	return n;
}

size_t ppl_pool_dw_kept_pages(struct ppl_pool *p, uint64_t *keys, size_t max)
{
	size_t n = 0;
	if (p->dw_busy == NULL)
		return 0;
	pthread_mutex_lock(&p->dw_lock);
	for (int s = 0; s < (int)p->sb.dw_slots && n < max; s++)
		if (p->dw_busy[s] == DW_KEPT)
			keys[n++] = p->dw_page[s];
	pthread_mutex_unlock(&p->dw_lock);
	return n;
}

void pool_dw_recover(struct ppl_pool *p, struct ppl_pool_recovery *rec)
{
	uint8_t *buf = NULL;
	for (int s = 0; s < (int)p->sb.dw_slots; s++) {
		struct pool_dw_hdr h;
		const uint8_t *img;
		bool ok = slot_read(p, s, &h, &img);
		uint64_t seq = h.state >> 8;
		if (seq > p->dw_seq)
			p->dw_seq = seq;
		if ((h.state & 0xff) != DW_VALID)
			continue;
		p->dw_page[s] = (uint64_t)h.space << 32 | h.page_no; /* if it is kept */
		rec->dw_pending++;
		if (!ok) {
			rec->dw_damaged++;
			pool_logf(p, "pool doublewrite slot %d (page %u:%u) fails its checksum: it cannot repair that "
				  "page; check the data file (CHECK TABLE). %s", s, h.space, h.page_no,
				  p->read_only ? "" : "The slot is released");
			if (!p->read_only)
				slot_free(p, s);
			continue;
		}
		if (p->opt.read_page == NULL) {
			rec->dw_unreadable++;
			if (!p->read_only)
				p->dw_busy[s] = DW_KEPT; /* for an open that can check the page */
			continue;
		}
		if (buf == NULL && (buf = malloc(p->sb.dw_page_size)) == NULL) {
			rec->dw_unreadable++;
			p->dw_busy[s] = DW_KEPT;
			continue;
		}
		if (p->opt.read_page(p->opt.page_arg, h.space, h.page_no, buf, h.size) != 0) {
			rec->dw_unreadable++;
			pool_logf(p, "pool doublewrite slot %d: data-file page %u:%u cannot be read; the slot is kept "
				  "so a later open can repair it", s, h.space, h.page_no);
			p->dw_busy[s] = DW_KEPT;
			continue;
		}
		bool torn = !ppl_page_crc_ok(buf, h.size);
		bool stale = !torn && ppl_page_lsn(buf) < h.lsn;
		if (!torn && !stale) {
			rec->dw_current++;
			if (!p->read_only)
				slot_free(p, s);
			continue;
		}
		if (p->read_only || p->opt.write_page == NULL ||
		    p->opt.write_page(p->opt.page_arg, h.space, h.page_no, img, h.size) != 0) {
			rec->dw_needs_restore++;
			pool_logf(p, "pool doublewrite slot %d: data-file page %u:%u is %s and was not repaired%s", s,
				  h.space, h.page_no, torn ? "torn" : "older than the slot",
				  p->read_only ? " (read-only open)" : ": the write failed; the slot is kept");
			if (!p->read_only)
				p->dw_busy[s] = DW_KEPT;
			continue;
		}
		PPL_CRASH(DW_RESTORED);
		rec->dw_restored++;
		pool_logf(p, "pool doublewrite slot %d: data-file page %u:%u was %s; restored the image at LSN %llu",
			  s, h.space, h.page_no, torn ? "torn" : "older", (unsigned long long)h.lsn);
		slot_free(p, s);
	}
	free(buf);
}
