/* EXTENDED redo records (mrec_ext_t) applied to uncompressed index and undo
 * pages, following InnoDB's recovery: page_create_low (page0page.cc),
 * trx_undo_page_init (trx0undo.cc), log_phys_t::undo_append (log0recv.cc),
 * page_apply_insert_redundant/_dynamic and page_apply_delete_redundant/
 * _dynamic with the directory maintenance they call (page0cur.cc).
 *
 * The page size enters only as `size`, for every innodb_page_size up to
 * 64 KiB: offsets are 16-bit fields, and COMPACT next-record links are
 * 16-bit distances that InnoDB reads modulo the page size (with uint16_t
 * sums), which is what lets a link span more than 32 KiB on 64 KiB pages.
 *
 * Every consistency check InnoDB makes before touching the page is made
 * here too, so a record that does not fit the page is reported as corrupt
 * instead of being applied half-way; all reads and writes stay inside the
 * page buffer. */
#include <stdio.h>
#include <string.h>

#include "ppl/mach.h"
#include "ppl/page.h"
#include "ppl/page_apply.h"
#include "ppl/redo.h"

/* Index page header (page0page.h), offsets from PAGE_HEADER. */
#define PAGE_HEADER PPL_FIL_PAGE_DATA
#define PAGE_N_DIR_SLOTS 0
#define PAGE_HEAP_TOP 2
#define PAGE_N_HEAP 4
#define PAGE_FREE 6
#define PAGE_GARBAGE 8
#define PAGE_LAST_INSERT 10
#define PAGE_INSTANT 12
#define PAGE_DIRECTION_B 13
#define PAGE_N_DIRECTION 14
#define PAGE_N_RECS 16
#define PAGE_HEADER_PRIV_END 26
#define PAGE_LEVEL 26
#define PAGE_DATA (PAGE_HEADER + 36 + 2 * 10)

#define REC_N_OLD_EXTRA_BYTES 6
#define REC_N_NEW_EXTRA_BYTES 5
#define PAGE_OLD_INFIMUM (PAGE_DATA + 1 + REC_N_OLD_EXTRA_BYTES)
#define PAGE_OLD_SUPREMUM (PAGE_DATA + 2 + 2 * REC_N_OLD_EXTRA_BYTES + 8)
#define PAGE_OLD_SUPREMUM_END (PAGE_OLD_SUPREMUM + 9)
#define PAGE_NEW_INFIMUM (PAGE_DATA + REC_N_NEW_EXTRA_BYTES)
#define PAGE_NEW_SUPREMUM (PAGE_DATA + 2 * REC_N_NEW_EXTRA_BYTES + 8)
#define PAGE_NEW_SUPREMUM_END (PAGE_NEW_SUPREMUM + 8)
#define PAGE_HEAP_NO_USER_LOW 2
#define PAGE_DIR 8 /* FIL_PAGE_DATA_END */
#define PAGE_DIR_SLOT_SIZE 2
#define PAGE_DIR_SLOT_MAX_N_OWNED 8
#define PAGE_DIR_SLOT_MIN_N_OWNED 4
#define PAGE_LEFT 1
#define PAGE_RIGHT 2
#define PAGE_NO_DIRECTION 5

/* Record header fields (rem0rec.inl): byte offsets down from the origin. */
#define REC_NEXT 2
#define REC_OLD_SHORT 3
#define REC_OLD_N_FIELDS 4
#define REC_OLD_HEAP_NO 5
#define REC_NEW_HEAP_NO 4
#define REC_OLD_N_OWNED 6
#define REC_NEW_N_OWNED 5
#define REC_OLD_INFO_BITS 6
#define REC_MAX_N_FIELDS (1024 - 1)
#define REC_STATUS_NODE_PTR 1
#define REC_STATUS_INSTANT 4

/* Undo page (trx0undo.h). */
#define TRX_UNDO_PAGE_HDR PPL_FIL_PAGE_DATA
#define TRX_UNDO_PAGE_TYPE 0
#define TRX_UNDO_PAGE_START 2
#define TRX_UNDO_PAGE_FREE 4
#define TRX_UNDO_PAGE_NODE 6
#define TRX_UNDO_PAGE_HDR_SIZE (6 + 12)
#define TRX_UNDO_SEG_HDR (TRX_UNDO_PAGE_HDR + TRX_UNDO_PAGE_HDR_SIZE)
#define TRX_UNDO_SEG_HDR_SIZE (4 + 10 + 16)

static const uint8_t infimum_supremum_redundant[] = {
	0x08, 0x01, 0x00, 0x00, 0x03, 0x00, 0x74, 'i', 'n', 'f', 'i', 'm', 'u', 'm', 0,
	0x09, 0x01, 0x00, 0x08, 0x03, 0x00, 0x00, 's', 'u', 'p', 'r', 'e', 'm', 'u', 'm', 0};
static const uint8_t infimum_supremum_compact[] = {
	0x01, 0x00, 0x02, 0x00, 0x0d, 'i', 'n', 'f', 'i', 'm', 'u', 'm', 0,
	0x01, 0x00, 0x0b, 0x00, 0x00, 's', 'u', 'p', 'r', 'e', 'm', 'u', 'm'};

/* The page being changed; size is the bound for every offset. */
struct pg {
	uint8_t *p;
	size_t size;
	uint32_t page_no;
	struct ppl_apply_error *err;
	const char *what;
};

static enum ppl_apply_status corrupt(struct pg *g, const char *why)
{
	if (g->err)
		snprintf(g->err->msg, sizeof g->err->msg, "not applying %s: %s", g->what, why);
	return PPL_APPLY_CORRUPT;
}

static uint32_t hdr(const struct pg *g, unsigned f) { return ppl_rd2(g->p + PAGE_HEADER + f); }
static void set_hdr(struct pg *g, unsigned f, uint32_t v) { ppl_wr2(g->p + PAGE_HEADER + f, v); }
static size_t slot_off(const struct pg *g, size_t n) { return g->size - PAGE_DIR - PAGE_DIR_SLOT_SIZE * (n + 1); }
/* Whether a directory of n slots fits in the page at all: InnoDB's slot
 * pointer then lies below the frame and its "slot < heap bottom" check
 * fails; in size_t arithmetic slot_off() would wrap around instead. */
static bool dir_fits(const struct pg *g, size_t n) { return n <= (g->size - PAGE_DIR) / PAGE_DIR_SLOT_SIZE - 1; }
static bool is_comp(const struct pg *g) { return g->p[PAGE_HEADER + PAGE_N_HEAP] & 0x80; }
static bool is_leaf(const struct pg *g) { return hdr(g, PAGE_LEVEL) == 0; }
/* fil_page_index_page_check() plus the page number check every B-tree
 * apply function makes. */
static bool is_index(const struct pg *g)
{
	uint16_t t = ppl_page_type(g->p);
	return (t == PPL_FIL_PAGE_INDEX || t == PPL_FIL_PAGE_RTREE || t == 18 /* FIL_PAGE_TYPE_INSTANT */) &&
	       ppl_page_no(g->p) == g->page_no;
}

/* A directory slot's record, if it can be a record origin in this page. */
static uint8_t *slot_rec(const struct pg *g, size_t slot)
{
	uint32_t o = ppl_rd2(g->p + slot);
	return o >= REC_N_OLD_EXTRA_BYTES && o < g->size ? g->p + o : NULL;
}

/* Record header bytes live below the record origin; callers keep origins
 * at least REC_N_*_EXTRA_BYTES above the heap bottom, so these are in
 * bounds. */
static unsigned n_owned_old(const uint8_t *rec) { return rec[-REC_OLD_N_OWNED] & 0xf; }
static unsigned n_owned_new(const uint8_t *rec) { return rec[-REC_NEW_N_OWNED] & 0xf; }
static void set_n_owned(uint8_t *rec, unsigned n, bool comp)
{
	uint8_t *b = rec - (comp ? REC_NEW_N_OWNED : REC_OLD_N_OWNED);
	*b = (uint8_t)((*b & ~0xfu) | n);
}
static unsigned n_fields_old(const uint8_t *rec) { return (ppl_rd2(rec - REC_OLD_N_FIELDS) & 0x7fe) >> 1; }
static bool short_old(const uint8_t *rec) { return rec[-REC_OLD_SHORT] & 1; }
static unsigned heap_no_old(const uint8_t *rec) { return (ppl_rd2(rec - REC_OLD_HEAP_NO) & 0xfff8) >> 3; }
static unsigned heap_no_new(const uint8_t *rec) { return (ppl_rd2(rec - REC_NEW_HEAP_NO) & 0xfff8) >> 3; }

/* rec_get_data_size_old(): the end offset of the last field. The caller
 * made sure the extra bytes of the record are inside the page. */
static size_t data_size_old(const uint8_t *rec)
{
	unsigned n = n_fields_old(rec);
	if (!n)
		return 0;
	if (short_old(rec))
		return rec[-(REC_N_OLD_EXTRA_BYTES + (int)n)] & ~0x80u;
	return ppl_rd2(rec - (REC_N_OLD_EXTRA_BYTES + 2 * n)) & ~0xc000u;
}

/* ---- page creation and undo pages ---------------------------------------- */

static enum ppl_apply_status page_create(struct pg *g, bool comp)
{
	uint8_t *page = g->p;
	ppl_wr2(page + PPL_FIL_PAGE_TYPE, PPL_FIL_PAGE_INDEX);
	memset(page + PAGE_HEADER, 0, PAGE_HEADER_PRIV_END);
	page[PAGE_HEADER + PAGE_N_DIR_SLOTS + 1] = 2;
	page[PAGE_HEADER + PAGE_INSTANT] = 0;
	page[PAGE_HEADER + PAGE_DIRECTION_B] = PAGE_NO_DIRECTION;
	if (comp) {
		page[PAGE_HEADER + PAGE_N_HEAP] = 0x80;
		page[PAGE_HEADER + PAGE_N_HEAP + 1] = PAGE_HEAP_NO_USER_LOW;
		page[PAGE_HEADER + PAGE_HEAP_TOP + 1] = PAGE_NEW_SUPREMUM_END;
		memcpy(page + PAGE_DATA, infimum_supremum_compact, sizeof infimum_supremum_compact);
		memset(page + PAGE_NEW_SUPREMUM_END, 0, g->size - PAGE_DIR - PAGE_NEW_SUPREMUM_END);
		page[g->size - PAGE_DIR - PAGE_DIR_SLOT_SIZE * 2 + 1] = PAGE_NEW_SUPREMUM;
		page[g->size - PAGE_DIR - PAGE_DIR_SLOT_SIZE + 1] = PAGE_NEW_INFIMUM;
	} else {
		page[PAGE_HEADER + PAGE_N_HEAP + 1] = PAGE_HEAP_NO_USER_LOW;
		page[PAGE_HEADER + PAGE_HEAP_TOP + 1] = PAGE_OLD_SUPREMUM_END;
		memcpy(page + PAGE_DATA, infimum_supremum_redundant, sizeof infimum_supremum_redundant);
		memset(page + PAGE_OLD_SUPREMUM_END, 0, g->size - PAGE_DIR - PAGE_OLD_SUPREMUM_END);
		page[g->size - PAGE_DIR - PAGE_DIR_SLOT_SIZE * 2 + 1] = PAGE_OLD_SUPREMUM;
		page[g->size - PAGE_DIR - PAGE_DIR_SLOT_SIZE + 1] = PAGE_OLD_INFIMUM;
	}
	return PPL_APPLY_OK;
}

static enum ppl_apply_status undo_page_init(struct pg *g)
{
	uint8_t *p = g->p;
	ppl_wr2(p + PPL_FIL_PAGE_TYPE, PPL_FIL_PAGE_UNDO_LOG);
	ppl_wr2(p + TRX_UNDO_PAGE_HDR + TRX_UNDO_PAGE_TYPE, 0);
	ppl_wr2(p + TRX_UNDO_PAGE_HDR + TRX_UNDO_PAGE_START, TRX_UNDO_PAGE_HDR + TRX_UNDO_PAGE_HDR_SIZE);
	ppl_wr2(p + TRX_UNDO_PAGE_HDR + TRX_UNDO_PAGE_FREE, TRX_UNDO_PAGE_HDR + TRX_UNDO_PAGE_HDR_SIZE);
	/* flst_zero_both() on the page list node: FIL_NULL addresses */
	uint8_t *node = p + TRX_UNDO_PAGE_HDR + TRX_UNDO_PAGE_NODE;
	memset(node, 0xff, 4);
	memset(node + 4, 0, 2);
	memset(node + 6, 0xff, 4);
	memset(node + 10, 0, 2);
	/* keep the undo segment header, clear the rest of the page */
	memset(p + TRX_UNDO_SEG_HDR + TRX_UNDO_SEG_HDR_SIZE, 0,
	       g->size - (TRX_UNDO_SEG_HDR + TRX_UNDO_SEG_HDR_SIZE + PPL_FIL_PAGE_DATA_END));
	return PPL_APPLY_OK;
}

static enum ppl_apply_status undo_append(struct pg *g, const uint8_t *data, size_t len)
{
	uint8_t *free_p = g->p + TRX_UNDO_PAGE_HDR + TRX_UNDO_PAGE_FREE;
	uint32_t free = ppl_rd2(free_p);
	if (free < TRX_UNDO_PAGE_HDR + TRX_UNDO_PAGE_HDR_SIZE ||
	    free + len + 6 >= g->size - PPL_FIL_PAGE_DATA_END)
		return corrupt(g, "TRX_UNDO_PAGE_FREE out of range");
	uint8_t *p = g->p + free;
	ppl_wr2(free_p, (uint32_t)(free + 4 + len));
	memcpy(p, free_p, 2);
	memcpy(p + 2, data, len);
	ppl_wr2(p + 2 + len, free);
	return PPL_APPLY_OK;
}

/* ---- the page directory --------------------------------------------------- */

/* page_rec_next_get(): the next record, or NULL if the link leaves the heap. */
static uint8_t *rec_next(const struct pg *g, const uint8_t *rec, bool comp)
{
	uint32_t offs = ppl_rd2(rec - REC_NEXT);
	if (comp) {
		if (!offs)
			return NULL;
		offs = (uint32_t)((size_t)(rec - g->p) + offs) & (uint32_t)(g->size - 1);
	}
	if (offs < (comp ? PAGE_NEW_SUPREMUM : PAGE_OLD_SUPREMUM) || offs > hdr(g, PAGE_HEAP_TOP))
		return NULL;
	return g->p + offs;
}

/* page_dir_split_slot(): the slot owns 9 records; split it in two. */
static enum ppl_apply_status dir_split_slot(struct pg *g, size_t slot)
{
	const unsigned n_owned = PAGE_DIR_SLOT_MAX_N_OWNED + 1;
	bool comp = is_comp(g);
	/* the record after the one the next slot (towards the infimum) points to */
	size_t s = ppl_rd2(g->p + slot + PAGE_DIR_SLOT_SIZE);
	if (s < PAGE_NEW_INFIMUM || s > hdr(g, PAGE_HEAP_TOP))
		return corrupt(g, "directory slot out of range while splitting");
	const uint8_t *rec = g->p + s;
	for (unsigned i = n_owned / 2; i--;) {
		rec = rec_next(g, rec, comp);
		if (!rec)
			return corrupt(g, "broken record list while splitting a slot");
	}
	uint32_t n_slots = hdr(g, PAGE_N_DIR_SLOTS);
	size_t last_slot = g->size - (PAGE_DIR + PAGE_DIR_SLOT_SIZE) - n_slots * PAGE_DIR_SLOT_SIZE;
	if (slot < last_slot)
		return corrupt(g, "directory slot below the last one");
	memmove(g->p + last_slot, g->p + last_slot + PAGE_DIR_SLOT_SIZE, slot - last_slot);
	const unsigned half = n_owned / 2;
	set_hdr(g, PAGE_N_DIR_SLOTS, n_slots + 1);
	ppl_wr2(g->p + slot, (uint32_t)(rec - g->p));
	uint8_t *owner = slot_rec(g, slot - PAGE_DIR_SLOT_SIZE);
	set_n_owned(g->p + ppl_rd2(g->p + slot), half, comp);
	if (owner)
		set_n_owned(owner, n_owned - half, comp);
	return PPL_APPLY_OK;
}

/* page_dir_balance_slot(): slot s owns too few records after a delete. */
static void dir_balance_slot(struct pg *g, size_t s)
{
	bool comp = is_comp(g);
	uint32_t n_slots = hdr(g, PAGE_N_DIR_SLOTS);
	if (s + 1 == n_slots)
		return; /* the last slot cannot be balanced */
	size_t slot = slot_off(g, s);
	uint8_t *up_rec = slot_rec(g, slot - PAGE_DIR_SLOT_SIZE);
	uint8_t *srec = slot_rec(g, slot);
	if (!up_rec || !srec)
		return; /* corrupt directory: InnoDB would read out of the page */
	unsigned up_n_owned = comp ? n_owned_new(up_rec) : n_owned_old(up_rec);
	if (up_n_owned <= PAGE_DIR_SLOT_MIN_N_OWNED) {
		/* merge the slots */
		set_n_owned(srec, 0, comp);
		set_n_owned(up_rec, up_n_owned + (PAGE_DIR_SLOT_MIN_N_OWNED - 1), comp);
		size_t last = slot_off(g, n_slots - 1);
		memmove(g->p + last + PAGE_DIR_SLOT_SIZE, g->p + last, slot - last);
		memset(g->p + last, 0, 2);
		set_hdr(g, PAGE_N_DIR_SLOTS, n_slots - 1);
		return;
	}
	/* transfer one record to the underfilled slot */
	uint8_t *new_rec = rec_next(g, srec, comp);
	if (!new_rec)
		return; /* InnoDB asserts in debug builds and goes on */
	set_n_owned(srec, 0, comp);
	set_n_owned(new_rec, PAGE_DIR_SLOT_MIN_N_OWNED, comp);
	set_n_owned(up_rec, up_n_owned - 1, comp);
	ppl_wr2(g->p + slot, (uint32_t)(new_rec - g->p));
}

/* The direction bookkeeping both insert variants share. */
static void update_direction(struct pg *g, uint32_t last_insert, const uint8_t *prev_rec, const uint8_t *next_rec)
{
	if (g->p[PPL_FIL_PAGE_TYPE + 1] == (uint8_t)PPL_FIL_PAGE_RTREE)
		return;
	uint8_t *dir = g->p + PAGE_HEADER + PAGE_DIRECTION_B;
	uint8_t *n_dir = g->p + PAGE_HEADER + PAGE_N_DIRECTION;
	if (last_insert && g->p + last_insert == prev_rec && (*dir & 7) != PAGE_LEFT) {
		*dir = (uint8_t)((*dir & ~7u) | PAGE_RIGHT);
		ppl_wr2(n_dir, ppl_rd2(n_dir) + 1);
	} else if (last_insert && g->p + last_insert == next_rec && (*dir & 7) != PAGE_RIGHT) {
		*dir = (uint8_t)((*dir & ~7u) | PAGE_LEFT);
		ppl_wr2(n_dir, ppl_rd2(n_dir) + 1);
	} else {
		*dir = (uint8_t)((*dir & ~7u) | PAGE_NO_DIRECTION);
		memset(n_dir, 0, 2);
	}
}

/* The slot that points to owner_rec, searching from the last slot towards
 * the first (which points to the infimum, never an owner here). */
static int find_slot(const struct pg *g, const uint8_t *owner_rec, size_t last_slot, size_t *out)
{
	uint8_t want[2];
	ppl_wr2(want, (uint32_t)(owner_rec - g->p));
	const size_t first = slot_off(g, 0);
	size_t s = last_slot;
	while (memcmp(g->p + s, want, 2))
		if ((s += 2) == first)
			return -1;
	*out = s;
	return 0;
}

/* ---- inserts ------------------------------------------------------------- */

static enum ppl_apply_status insert_redundant(struct pg *g, bool reuse, size_t prev, size_t enc_hdr, size_t hdr_c,
					       size_t data_c, const uint8_t *data, size_t data_len)
{
	uint8_t *const page = g->p;
	const uint32_t n_slots = hdr(g, PAGE_N_DIR_SLOTS);
	const uint32_t h = hdr(g, PAGE_N_HEAP);
	if (n_slots < 2 || h < n_slots || h < PAGE_HEAP_NO_USER_LOW || h >= g->size / REC_N_OLD_EXTRA_BYTES ||
	    !is_index(g) || ppl_rd2(page + PAGE_OLD_SUPREMUM - REC_NEXT))
		return corrupt(g, "page header inconsistent");
	const size_t last_slot = slot_off(g, n_slots - 1);
	const uint8_t *const heap_bot = page + PAGE_OLD_SUPREMUM_END;
	uint8_t *heap_top = page + hdr(g, PAGE_HEAP_TOP);
	if (heap_bot > heap_top || heap_top > page + last_slot)
		return corrupt(g, "PAGE_HEAP_TOP out of range");
	if (ppl_rd2(page + last_slot) != PAGE_OLD_SUPREMUM || ppl_rd2(page + slot_off(g, 0)) != PAGE_OLD_INFIMUM)
		return corrupt(g, "directory does not start at infimum and end at supremum");
	if (prev > g->size - PAGE_OLD_INFIMUM)
		return corrupt(g, "predecessor outside the page");
	uint8_t *const prev_rec = page + PAGE_OLD_INFIMUM + prev;
	if (prev && (heap_bot + (REC_N_OLD_EXTRA_BYTES + 1) > prev_rec || prev_rec > heap_top))
		return corrupt(g, "predecessor outside the heap");
	const unsigned pn_fields = n_fields_old(prev_rec);
	if (pn_fields == 0 || pn_fields > REC_MAX_N_FIELDS)
		return corrupt(g, "predecessor has a bad field count");
	const size_t pextra = REC_N_OLD_EXTRA_BYTES + (short_old(prev_rec) ? pn_fields : pn_fields * 2);
	/* the infimum's header lies below the heap, but not below the page data */
	const size_t plow = prev_rec == page + PAGE_OLD_INFIMUM ? PAGE_DATA : (size_t)(heap_bot - page);
	if ((size_t)(prev_rec - page) < plow + pextra)
		return corrupt(g, "predecessor header below the heap");
	if (hdr_c && prev_rec - hdr_c < heap_bot)
		return corrupt(g, "copied header bytes below the heap");
	const size_t pdata = data_size_old(prev_rec);
	if (prev_rec + pdata > heap_top)
		return corrupt(g, "predecessor data above the heap top");
	uint8_t *const next_rec = page + ppl_rd2(prev_rec - REC_NEXT);
	if (next_rec != page + PAGE_OLD_SUPREMUM && (heap_bot + REC_N_OLD_EXTRA_BYTES > next_rec || next_rec > heap_top))
		return corrupt(g, "successor outside the heap");
	const bool is_short = (enc_hdr >> 2) & 1;
	const size_t n_fields = (enc_hdr >> 3) + 1;
	if (n_fields > REC_MAX_N_FIELDS)
		return corrupt(g, "too many fields");
	const size_t extra_size = REC_N_OLD_EXTRA_BYTES + (is_short ? n_fields : n_fields * 2);
	hdr_c += REC_N_OLD_EXTRA_BYTES;
	if (hdr_c > extra_size || extra_size - hdr_c > data_len)
		return corrupt(g, "header lengths inconsistent");
	uint8_t insert_buf[REC_N_OLD_EXTRA_BYTES + REC_MAX_N_FIELDS * 2];

	unsigned n_owned;
	uint8_t *owner_rec = next_rec;
	for (unsigned ns = PAGE_DIR_SLOT_MAX_N_OWNED; !(n_owned = n_owned_old(owner_rec));) {
		owner_rec = page + ppl_rd2(owner_rec - REC_NEXT);
		if (owner_rec != page + PAGE_OLD_SUPREMUM &&
		    (heap_bot + REC_N_OLD_EXTRA_BYTES > owner_rec || owner_rec > heap_top))
			return corrupt(g, "record list leaves the heap");
		if (!ns--)
			return corrupt(g, "record list does not reach an owner (cycle?)");
	}
	if (n_owned > PAGE_DIR_SLOT_MAX_N_OWNED)
		return corrupt(g, "slot owns too many records");
	size_t owner_slot = last_slot;
	if (find_slot(g, owner_rec, last_slot, &owner_slot))
		return corrupt(g, "no directory slot for the owner record");

	memcpy(insert_buf, data, extra_size - hdr_c);
	uint8_t *insert_rec = insert_buf + extra_size;
	memcpy(insert_rec - hdr_c, prev_rec - hdr_c, hdr_c);
	insert_rec[-REC_OLD_INFO_BITS] = (uint8_t)((insert_rec[-REC_OLD_INFO_BITS] & ~0xf0u) | ((enc_hdr & 3) << 4));
	insert_rec[-REC_OLD_SHORT] = (uint8_t)((insert_rec[-REC_OLD_SHORT] & ~1u) | is_short);
	ppl_wr2(insert_rec - REC_OLD_N_FIELDS,
		(ppl_rd2(insert_rec - REC_OLD_N_FIELDS) & ~0x7feu) | (uint32_t)(n_fields << 1));
	insert_rec[-REC_OLD_N_OWNED] &= 0xf0;

	const size_t data_size = data_size_old(insert_rec);
	if (data_c > data_size)
		return corrupt(g, "more common data bytes than the record has");
	if (extra_size - hdr_c + data_size - data_c != data_len)
		return corrupt(g, "literal bytes do not add up to the record size");
	if (data_c && prev_rec + data_c > page + g->size)
		return corrupt(g, "copied data bytes past the page");

	uint8_t *buf;
	uint32_t heap_no;
	if (reuse) {
		uint8_t *page_free = page + PAGE_HEADER + PAGE_FREE;
		uint8_t *free_rec = page + ppl_rd2(page_free);
		if (heap_bot + REC_N_OLD_EXTRA_BYTES > free_rec || free_rec > heap_top)
			return corrupt(g, "PAGE_FREE outside the heap");
		const unsigned fn = n_fields_old(free_rec);
		const size_t fextra = REC_N_OLD_EXTRA_BYTES + (short_old(free_rec) ? fn : fn * 2);
		if (free_rec - fextra < heap_bot)
			return corrupt(g, "free record header below the heap");
		const size_t fdata = data_size_old(free_rec);
		if (free_rec + fdata > heap_top)
			return corrupt(g, "free record above the heap top");
		if (extra_size + data_size > fextra + fdata)
			return corrupt(g, "record does not fit the free record it reuses");
		uint8_t *garbage = page_free + 2;
		if (ppl_rd2(garbage) < fextra + fdata)
			return corrupt(g, "PAGE_GARBAGE smaller than the free record");
		buf = free_rec - fextra;
		const uint8_t *next_free = page + ppl_rd2(free_rec - REC_NEXT);
		if (next_free != page && (next_free < heap_bot + REC_N_OLD_EXTRA_BYTES + 1 || heap_top < next_free))
			return corrupt(g, "PAGE_FREE list leaves the heap");
		ppl_wr2(garbage, (uint32_t)(ppl_rd2(garbage) - extra_size - data_size));
		heap_no = heap_no_old(free_rec);
		memcpy(page_free, free_rec - REC_NEXT, 2);
	} else {
		if (heap_top + extra_size + data_size > page + last_slot)
			return corrupt(g, "no room above the heap top");
		heap_no = h;
		set_hdr(g, PAGE_N_HEAP, h + 1);
		set_hdr(g, PAGE_HEAP_TOP, (uint32_t)(hdr(g, PAGE_HEAP_TOP) + extra_size + data_size));
		buf = heap_top;
	}
	ppl_wr2(insert_rec - REC_OLD_HEAP_NO, (ppl_rd2(insert_rec - REC_OLD_HEAP_NO) & 7u) | heap_no << 3);

	const uint32_t last_insert = hdr(g, PAGE_LAST_INSERT);
	memcpy(buf, insert_buf, extra_size);
	buf += extra_size;
	set_hdr(g, PAGE_LAST_INSERT, (uint32_t)(buf - page));
	memcpy(prev_rec - REC_NEXT, page + PAGE_HEADER + PAGE_LAST_INSERT, 2);
	memmove(buf, prev_rec, data_c);
	memcpy(buf + data_c, data + (extra_size - hdr_c), data_len - (extra_size - hdr_c));
	set_n_owned(owner_rec, n_owned + 1, false);
	update_direction(g, last_insert, prev_rec, next_rec);
	set_hdr(g, PAGE_N_RECS, hdr(g, PAGE_N_RECS) + 1);
	if (n_owned == PAGE_DIR_SLOT_MAX_N_OWNED)
		return dir_split_slot(g, owner_slot);
	return PPL_APPLY_OK;
}

static enum ppl_apply_status insert_dynamic(struct pg *g, bool reuse, size_t prev, size_t shift, size_t enc_hdr_l,
					     size_t hdr_c, size_t data_c, const uint8_t *data, size_t data_len)
{
	uint8_t *const page = g->p;
	const uint32_t n_slots = hdr(g, PAGE_N_DIR_SLOTS);
	uint32_t h = hdr(g, PAGE_N_HEAP);
	if (n_slots < 2 || h < (PAGE_HEAP_NO_USER_LOW | 0x8000) || (h & 0x7fff) >= g->size / REC_N_NEW_EXTRA_BYTES ||
	    (h & 0x7fff) < n_slots || !is_index(g) || ppl_rd2(page + PAGE_NEW_SUPREMUM - REC_NEXT) ||
	    ((enc_hdr_l & REC_STATUS_INSTANT) && !is_leaf(g)) || (enc_hdr_l >> 3) > data_len)
		return corrupt(g, "page header inconsistent");
	const size_t last_slot = slot_off(g, n_slots - 1);
	const uint8_t *const heap_bot = page + PAGE_NEW_SUPREMUM_END;
	uint8_t *heap_top = page + hdr(g, PAGE_HEAP_TOP);
	if (heap_bot > heap_top || heap_top > page + last_slot)
		return corrupt(g, "PAGE_HEAP_TOP out of range");
	if (ppl_rd2(page + last_slot) != PAGE_NEW_SUPREMUM || ppl_rd2(page + slot_off(g, 0)) != PAGE_NEW_INFIMUM)
		return corrupt(g, "directory does not start at infimum and end at supremum");

	uint16_t n = (uint16_t)(PAGE_NEW_INFIMUM + prev);
	if ((size_t)PAGE_NEW_INFIMUM + prev >= g->size)
		return corrupt(g, "predecessor outside the page");
	uint8_t *prev_rec = page + n;
	if (prev && (heap_bot + REC_N_NEW_EXTRA_BYTES > prev_rec || prev_rec > heap_top))
		return corrupt(g, "predecessor outside the heap");
	n = (uint16_t)(n + ppl_rd2(prev_rec - REC_NEXT));
	uint8_t *const next_rec = page + n;
	if (n != PAGE_NEW_SUPREMUM && (heap_bot + REC_N_NEW_EXTRA_BYTES > next_rec || next_rec > heap_top))
		return corrupt(g, "successor outside the heap");

	unsigned n_owned;
	uint8_t *owner_rec = next_rec;
	n = (uint16_t)(next_rec - page);
	for (unsigned ns = PAGE_DIR_SLOT_MAX_N_OWNED; !(n_owned = n_owned_new(owner_rec));) {
		n = (uint16_t)(n + ppl_rd2(owner_rec - REC_NEXT));
		owner_rec = page + n;
		if (n != PAGE_NEW_SUPREMUM && (heap_bot + REC_N_NEW_EXTRA_BYTES > owner_rec || owner_rec > heap_top))
			return corrupt(g, "record list leaves the heap");
		if (!ns--)
			return corrupt(g, "record list does not reach an owner (cycle?)");
	}
	if (n_owned > PAGE_DIR_SLOT_MAX_N_OWNED)
		return corrupt(g, "slot owns too many records");
	size_t owner_slot = last_slot;
	if (find_slot(g, owner_rec, last_slot, &owner_slot))
		return corrupt(g, "no directory slot for the owner record");

	const size_t lit_hdr = enc_hdr_l >> 3;
	const size_t extra_size = REC_N_NEW_EXTRA_BYTES + hdr_c + lit_hdr;
	const size_t data_size = data_c + data_len - lit_hdr;
	if ((size_t)(prev_rec - page) < REC_N_NEW_EXTRA_BYTES + hdr_c)
		return corrupt(g, "copied header bytes before the page start");
	if (prev_rec + data_c > page + g->size)
		return corrupt(g, "copied data bytes past the page");

	uint8_t *buf;
	if (reuse) {
		uint8_t *page_free = page + PAGE_HEADER + PAGE_FREE;
		uint8_t *free_rec = page + ppl_rd2(page_free);
		if (heap_bot + REC_N_NEW_EXTRA_BYTES > free_rec || free_rec > heap_top)
			return corrupt(g, "PAGE_FREE outside the heap");
		ptrdiff_t b = (free_rec - page) - (ptrdiff_t)extra_size;
		b += (shift & 1) ? -(ptrdiff_t)(shift >> 1) : (ptrdiff_t)(shift >> 1);
		if (b < (ptrdiff_t)(heap_bot - page) || b + (ptrdiff_t)(extra_size + data_size) > heap_top - page)
			return corrupt(g, "reused space outside the heap");
		buf = page + b;
		uint8_t *garbage = page_free + 2;
		if (ppl_rd2(garbage) < extra_size + data_size)
			return corrupt(g, "PAGE_GARBAGE smaller than the record");
		if ((n = (uint16_t)ppl_rd2(free_rec - REC_NEXT)) != 0) {
			n = (uint16_t)(n + (free_rec - page));
			if (n < PAGE_NEW_SUPREMUM_END + REC_N_NEW_EXTRA_BYTES || heap_top < page + n)
				return corrupt(g, "PAGE_FREE list leaves the heap");
		}
		ppl_wr2(page_free, n);
		ppl_wr2(garbage, (uint32_t)(ppl_rd2(garbage) - (extra_size + data_size)));
		h = heap_no_new(free_rec);
	} else {
		if (heap_top + extra_size + data_size > page + last_slot)
			return corrupt(g, "no room above the heap top");
		set_hdr(g, PAGE_N_HEAP, h + 1);
		h &= 0x7fff;
		set_hdr(g, PAGE_HEAP_TOP, (uint32_t)(hdr(g, PAGE_HEAP_TOP) + extra_size + data_size));
		buf = heap_top;
	}

	/* The copied header bytes come from below prev_rec, which may overlap
	 * the destination when reusing: memmove keeps InnoDB's memcpy result
	 * for the non-overlapping case it relies on. */
	memcpy(buf, data, lit_hdr);
	buf += lit_hdr;
	data_len -= lit_hdr;
	data += lit_hdr;
	memmove(buf, prev_rec - REC_N_NEW_EXTRA_BYTES - hdr_c, hdr_c);
	buf += hdr_c;
	*buf++ = (uint8_t)((enc_hdr_l & 3) << 4); /* info bits; n_owned = 0 */
	*buf++ = (uint8_t)(h >> 5);
	h = (h & 31) << 3;
	if (is_leaf(g))
		h |= enc_hdr_l & REC_STATUS_INSTANT;
	else
		h |= REC_STATUS_NODE_PTR;
	*buf++ = (uint8_t)h;
	buf += REC_NEXT;
	ppl_wr2(buf - REC_NEXT, (uint16_t)(next_rec - buf));
	const uint32_t last_insert = hdr(g, PAGE_LAST_INSERT);
	set_hdr(g, PAGE_LAST_INSERT, (uint32_t)(buf - page));
	ppl_wr2(prev_rec - REC_NEXT, (uint16_t)(buf - prev_rec));
	memmove(buf, prev_rec, data_c);
	buf += data_c;
	memcpy(buf, data, data_len);
	set_n_owned(owner_rec, n_owned + 1, true);
	update_direction(g, last_insert, prev_rec, next_rec);
	set_hdr(g, PAGE_N_RECS, hdr(g, PAGE_N_RECS) + 1);
	if (n_owned == PAGE_DIR_SLOT_MAX_N_OWNED)
		return dir_split_slot(g, owner_slot);
	return PPL_APPLY_OK;
}

/* ---- deletes ------------------------------------------------------------- */

/* page_mem_free(): put a deleted record on PAGE_FREE, or shrink the heap
 * if it was the last one allocated. */
static void mem_free(struct pg *g, uint8_t *rec, size_t data_size, size_t extra_size)
{
	uint8_t *const page = g->p;
	const uint32_t free = hdr(g, PAGE_FREE);
	const uint16_t n_heap = (uint16_t)(hdr(g, PAGE_N_HEAP) - 1);
	const bool deleting_top = n_heap == ((n_heap & 0x8000) ? (heap_no_new(rec) | 0x8000) : heap_no_old(rec));
	if (deleting_top) {
		const uint32_t heap_top = hdr(g, PAGE_HEAP_TOP);
		const size_t extra_savings = heap_top - (size_t)(rec + data_size - page);
		set_hdr(g, PAGE_HEAP_TOP, (uint32_t)(rec - extra_size - page));
		set_hdr(g, PAGE_N_HEAP, n_heap);
		if (extra_savings)
			set_hdr(g, PAGE_GARBAGE, (uint32_t)(hdr(g, PAGE_GARBAGE) - extra_savings));
	} else {
		set_hdr(g, PAGE_FREE, (uint32_t)(rec - page));
		set_hdr(g, PAGE_GARBAGE, (uint32_t)(hdr(g, PAGE_GARBAGE) + extra_size + data_size));
	}
	set_hdr(g, PAGE_LAST_INSERT, 0);
	set_hdr(g, PAGE_N_RECS, hdr(g, PAGE_N_RECS) - 1);
	uint8_t *const end = rec + data_size;
	if (!deleting_top) {
		uint16_t next = free ? ((n_heap & 0x8000) ? (uint16_t)(free - (size_t)(rec - page)) : (uint16_t)free) : 0;
		ppl_wr2(rec - REC_NEXT, next);
	} else {
		rec -= extra_size;
	}
	memset(rec, 0, (size_t)(end - rec));
}

/* The part both delete variants share once the record is located. */
static enum ppl_apply_status delete_common(struct pg *g, bool comp, uint8_t *prev_rec, uint8_t *rec, uint8_t *next,
					   size_t data_size, size_t extra_size, size_t slot)
{
	uint8_t *const page = g->p;
	const uint32_t n_recs = hdr(g, PAGE_N_RECS);
	const uint32_t sup = comp ? PAGE_NEW_SUPREMUM : PAGE_OLD_SUPREMUM;
	const uint32_t min = comp ? PAGE_NEW_SUPREMUM_END + REC_N_NEW_EXTRA_BYTES
				  : PAGE_OLD_SUPREMUM_END + REC_N_OLD_EXTRA_BYTES;
	uint8_t *s = rec;
	uint32_t n = (uint32_t)(rec - page);
	unsigned slot_owned;
	for (uint32_t i = n_recs; !(slot_owned = comp ? n_owned_new(s) : n_owned_old(s));) {
		uint32_t link = ppl_rd2(s - REC_NEXT);
		if (comp) {
			if (link < REC_N_NEW_EXTRA_BYTES || link > (uint16_t)-REC_N_NEW_EXTRA_BYTES)
				return corrupt(g, "record link out of range");
			n = (uint16_t)(n + link);
		} else {
			n = link;
		}
		s = page + n;
		if (n != sup && (n < min || page + slot < s))
			return corrupt(g, "record list leaves the heap");
		if (!i--)
			return corrupt(g, "record list does not reach an owner (cycle?)");
	}
	slot_owned--;
	const size_t first_slot = g->size - (PAGE_DIR + 2);
	uint8_t want[2];
	ppl_wr2(want, (uint32_t)(s - page));
	while (memcmp(page + slot, want, 2))
		if ((slot += 2) == first_slot)
			return corrupt(g, "no directory slot for the owner record");
	if (rec == s) {
		s = prev_rec;
		ppl_wr2(page + slot, (uint32_t)(s - page));
	}
	if (comp)
		ppl_wr2(prev_rec - REC_NEXT, (uint16_t)(next - prev_rec));
	else
		memcpy(prev_rec - REC_NEXT, rec - REC_NEXT, 2);
	set_n_owned(s, slot_owned, comp);
	mem_free(g, rec, data_size, extra_size);
	if (slot_owned < PAGE_DIR_SLOT_MIN_N_OWNED)
		dir_balance_slot(g, (first_slot - slot) / 2);
	return PPL_APPLY_OK;
}

static enum ppl_apply_status delete_redundant(struct pg *g, size_t prev)
{
	uint8_t *const page = g->p;
	const uint32_t n_slots = hdr(g, PAGE_N_DIR_SLOTS);
	if (!hdr(g, PAGE_N_RECS) || n_slots < 2 || !is_index(g) || ppl_rd2(page + PAGE_OLD_SUPREMUM - REC_NEXT) ||
	    is_comp(g))
		return corrupt(g, "page header inconsistent");
	const size_t slot = dir_fits(g, n_slots) ? slot_off(g, n_slots - 1) : 0;
	if (slot < PAGE_OLD_SUPREMUM_END)
		return corrupt(g, "too many directory slots");
	uint8_t *prev_rec = page + PAGE_OLD_INFIMUM + prev;
	if (PAGE_OLD_INFIMUM + prev > slot)
		return corrupt(g, "predecessor outside the page");
	uint32_t n = ppl_rd2(prev_rec - REC_NEXT);
	uint8_t *rec = page + n;
	if (n < PAGE_OLD_SUPREMUM_END + REC_N_OLD_EXTRA_BYTES || page + slot < rec)
		return corrupt(g, "record to delete outside the heap");
	const size_t extra_size = REC_N_OLD_EXTRA_BYTES + n_fields_old(rec) * (short_old(rec) ? 1 : 2);
	if (n < PAGE_OLD_SUPREMUM_END + extra_size)
		return corrupt(g, "record header below the heap");
	const size_t data_size = data_size_old(rec);
	if (page + slot < rec + data_size)
		return corrupt(g, "record data beyond the directory");
	n = ppl_rd2(rec - REC_NEXT);
	uint8_t *next = page + n;
	if (n != PAGE_OLD_SUPREMUM && (n < PAGE_OLD_SUPREMUM_END + REC_N_OLD_EXTRA_BYTES || page + slot < next))
		return corrupt(g, "successor outside the heap");
	return delete_common(g, false, prev_rec, rec, next, data_size, extra_size, slot);
}

static enum ppl_apply_status delete_dynamic(struct pg *g, size_t prev, size_t hdr_size, size_t data_size)
{
	uint8_t *const page = g->p;
	const uint32_t n_slots = hdr(g, PAGE_N_DIR_SLOTS);
	if (!hdr(g, PAGE_N_RECS) || n_slots < 2 || !is_index(g) || ppl_rd2(page + PAGE_NEW_SUPREMUM - REC_NEXT) ||
	    !is_comp(g))
		return corrupt(g, "page header inconsistent");
	const size_t slot = dir_fits(g, n_slots) ? slot_off(g, n_slots - 1) : 0;
	if (slot < PAGE_NEW_SUPREMUM_END)
		return corrupt(g, "too many directory slots");
	uint16_t n = (uint16_t)(PAGE_NEW_INFIMUM + prev);
	if (PAGE_NEW_INFIMUM + prev > slot)
		return corrupt(g, "predecessor outside the page");
	uint8_t *prev_rec = page + n;
	n = (uint16_t)(n + ppl_rd2(prev_rec - REC_NEXT));
	uint8_t *rec = page + n;
	if (n < PAGE_NEW_SUPREMUM_END + REC_N_NEW_EXTRA_BYTES || page + slot < rec)
		return corrupt(g, "record to delete outside the heap");
	const size_t extra_size = REC_N_NEW_EXTRA_BYTES + hdr_size;
	if (n < PAGE_NEW_SUPREMUM_END + extra_size || page + slot < rec + data_size)
		return corrupt(g, "record does not fit between heap bottom and directory");
	n = (uint16_t)(n + ppl_rd2(rec - REC_NEXT));
	uint8_t *next = page + n;
	if (n != PAGE_NEW_SUPREMUM && (n < PAGE_NEW_SUPREMUM_END + REC_N_NEW_EXTRA_BYTES || page + slot < next))
		return corrupt(g, "successor outside the heap");
	return delete_common(g, true, prev_rec, rec, next, data_size, extra_size, slot);
}

/* ---- decoding (log_phys_t::apply) --------------------------------------- */

static int varint(const uint8_t **l, size_t *rlen, unsigned maxlen, bool need_more, size_t *out)
{
	if (!*rlen)
		return -1;
	unsigned ll = ppl_varint_len(**l);
	if (!ll || ll > maxlen || (need_more ? ll >= *rlen : ll > *rlen))
		return -1;
	uint32_t v = ppl_varint_decode(*l);
	if (v == PPL_VARINT_ERROR)
		return -1;
	*out = v;
	*l += ll;
	*rlen -= ll;
	return 0;
}

enum ppl_apply_status ppl_apply_extended(const struct ppl_page_ref *ref, const uint8_t *l, size_t rlen,
					 struct ppl_apply_error *err)
{
	struct pg g = {ref->frame, ref->size, ref->page_no, err, ppl_rec_type_name(PPL_REC_EXTENDED, *l)};
	if (!ppl_page_size_valid(ref->size)) {
		if (err)
			snprintf(err->msg, sizeof err->msg, "page size %zu is not an InnoDB page size (4096..65536)",
				 ref->size);
		return PPL_APPLY_UNSUPPORTED;
	}
	const uint8_t subtype = *l;
	size_t prev, shift = 0, a, b, c;
	switch (subtype) {
	case PPL_EXT_INIT_ROW_FORMAT_REDUNDANT:
	case PPL_EXT_INIT_ROW_FORMAT_DYNAMIC:
		if (rlen != 1)
			return corrupt(&g, "payload after the subtype");
		return page_create(&g, subtype != PPL_EXT_INIT_ROW_FORMAT_REDUNDANT);
	case PPL_EXT_UNDO_INIT:
		if (rlen != 1)
			return corrupt(&g, "payload after the subtype");
		return undo_page_init(&g);
	case PPL_EXT_UNDO_APPEND:
		if (rlen <= 3)
			return corrupt(&g, "undo record too short");
		return undo_append(&g, l + 1, rlen - 1);
	case PPL_EXT_INSERT_HEAP_REDUNDANT:
	case PPL_EXT_INSERT_REUSE_REDUNDANT:
	case PPL_EXT_INSERT_HEAP_DYNAMIC:
	case PPL_EXT_INSERT_REUSE_DYNAMIC:
		if (rlen < 2)
			return corrupt(&g, "record too short");
		l++;
		rlen--;
		if (varint(&l, &rlen, 3, true, &prev))
			return corrupt(&g, "bad predecessor offset");
		if (subtype & 2) {
			if ((subtype & 1) && varint(&l, &rlen, 3, true, &shift))
				return corrupt(&g, "bad shift");
			if (varint(&l, &rlen, 3, true, &a) || varint(&l, &rlen, 2, true, &b) ||
			    varint(&l, &rlen, 3, false, &c))
				return corrupt(&g, "bad header or data lengths");
			return insert_dynamic(&g, subtype & 1, prev, shift, a, b, c, l, rlen);
		}
		if (varint(&l, &rlen, 2, true, &a) || varint(&l, &rlen, 2, true, &b) || varint(&l, &rlen, 2, false, &c))
			return corrupt(&g, "bad header or data lengths");
		return insert_redundant(&g, subtype & 1, prev, a, b, c, l, rlen);
	case PPL_EXT_DELETE_ROW_FORMAT_REDUNDANT:
		if (rlen < 2 || rlen > 4)
			return corrupt(&g, "bad length");
		l++;
		rlen--;
		if (ppl_varint_len(*l) != rlen || varint(&l, &rlen, 3, false, &prev))
			return corrupt(&g, "bad predecessor offset");
		return delete_redundant(&g, prev);
	case PPL_EXT_DELETE_ROW_FORMAT_DYNAMIC:
		if (rlen < 2)
			return corrupt(&g, "record too short");
		l++;
		rlen--;
		if (varint(&l, &rlen, 3, true, &prev) || varint(&l, &rlen, 2, true, &a))
			return corrupt(&g, "bad predecessor or header size");
		if (ppl_varint_len(*l) != rlen || varint(&l, &rlen, 3, false, &b))
			return corrupt(&g, "bad data size");
		return delete_dynamic(&g, prev, a, b);
	case PPL_EXT_TRIM_PAGES:
		if (err)
			snprintf(err->msg, sizeof err->msg, "TRIM_PAGES is a file operation, not a page change");
		return PPL_APPLY_UNSUPPORTED;
	default:
		return corrupt(&g, "unknown EXTENDED subtype");
	}
}
