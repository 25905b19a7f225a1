/* Applying redo records to a page image, following InnoDB's recovery
 * (log0recv.cc: log_phys_t::apply for the records, recv_recover_page for
 * the LSN rules and the final LSN stamp). EXTENDED records are delegated to
 * page_ext*.c. */
#include <stdio.h>
#include <string.h>

#include "ppl/crc32c.h"
#include "ppl/mach.h"
#include "ppl/page.h"
#include "ppl/page_apply.h"
#include "ppl/redo.h"

static enum ppl_apply_status bad(struct ppl_apply_error *e, uint8_t type, int ext, size_t at, const char *msg)
{
	if (e) {
		e->rec_type = type;
		e->ext_subtype = ext;
		e->rec_offset = (uint32_t)at;
		snprintf(e->msg, sizeof e->msg, "%s", msg);
	}
	return PPL_APPLY_CORRUPT;
}

/* OPT_PAGE_CHECKSUM (mtr_t::page_checksum): CRC-32C over the page without
 * the fields recovery rewrites (checksum, LSN, trailer). */
static bool opt_checksum_ok(const struct ppl_page_ref *pg, const uint8_t *crc)
{
	const uint8_t *f = pg->frame;
	uint32_t c = ppl_crc32c(0, f + PPL_FIL_PAGE_OFFSET, PPL_FIL_PAGE_LSN - PPL_FIL_PAGE_OFFSET);
	c = ppl_crc32c(c, f + PPL_FIL_PAGE_TYPE, 2);
	c = ppl_crc32c(c, f + PPL_FIL_PAGE_SPACE_ID, pg->size - (PPL_FIL_PAGE_SPACE_ID + 8));
	return c == ppl_rd4(crc);
}

enum ppl_apply_status ppl_apply_mtr_recs(const struct ppl_page_ref *pg, struct ppl_apply_cursor *cur,
					 const uint8_t *recs, size_t len, bool *modified,
					 struct ppl_apply_error *err)
{
	uint8_t *const frame = pg->frame;
	const size_t size = pg->size;
	const uint8_t *l = recs, *const end = recs + len;
	*modified = false;
	if (!ppl_page_size_valid(size)) {
		if (err) {
			err->rec_type = len ? recs[0] & 0x70 : 0;
			err->ext_subtype = -1;
			err->rec_offset = 0;
			snprintf(err->msg, sizeof err->msg, "page size %zu is not an InnoDB page size (4096..65536)",
				 size);
		}
		return PPL_APPLY_UNSUPPORTED;
	}

	while (l < end) {
		const size_t at = (size_t)(l - recs);
		const uint8_t b = *l++;
		const uint8_t type = b & 0x70;
		if (b <= 1)
			return bad(err, b, -1, at, "termination byte inside stored records");
		uint32_t rlen = b & 0xf;
		if (!rlen) {
			uint32_t add;
			unsigned n = ppl_varint_get(l, (size_t)(end - l), &add);
			if (!n)
				return bad(err, type, -1, at, "bad record length");
			l += n;
			rlen = add + 15 - n;
		}
		if (rlen > (size_t)(end - l))
			return bad(err, type, -1, at, "record runs past the stored records");
		const uint8_t *const next = l + rlen;
		if (!(b & 0x80)) {
			uint32_t sp, pn;
			unsigned n1 = ppl_varint_get(l, rlen, &sp);
			unsigned n2 = n1 ? ppl_varint_get(l + n1, rlen - n1, &pn) : 0;
			if (!n1 || !n2)
				return bad(err, type, -1, at, "bad page identifier");
			if (sp != pg->space_id || pn != pg->page_no)
				return bad(err, type, -1, at, "record is for another page");
			l += n1 + n2;
			rlen -= n1 + n2;
			cur->last_offset = 0;
		}

		switch (type) {
		case PPL_REC_FREE_PAGE:
			/* The page is no longer used; recovery leaves it alone. */
			cur->last_offset = 1;
			l = next;
			continue;
		case PPL_REC_INIT_PAGE:
			if (rlen)
				return bad(err, type, -1, at, "INIT_PAGE with a payload");
			memset(frame, 0, size);
			ppl_wr4(frame + PPL_FIL_PAGE_OFFSET, pg->page_no);
			memset(frame + PPL_FIL_PAGE_PREV, 0xff, 8);
			ppl_wr4(frame + PPL_FIL_PAGE_SPACE_ID, pg->space_id);
			cur->last_offset = PPL_FIL_PAGE_TYPE;
			*modified = true;
			l = next;
			continue;
		case PPL_REC_OPTION:
			if (rlen == 5 && *l == PPL_OPT_PAGE_CHECKSUM) {
				if (!opt_checksum_ok(pg, l + 1))
					return bad(err, type, -1, at, "OPT_PAGE_CHECKSUM mismatch: the page differs "
						   "from the one the server logged");
				*modified = true;
			}
			l = next;
			continue;
		case PPL_REC_RESERVED:
			return bad(err, type, -1, at, "RESERVED record type");
		case PPL_REC_EXTENDED: {
			if (pg->page_no < 3)
				return bad(err, type, rlen ? *l : -1, at, "EXTENDED record on page 0, 1 or 2");
			if (!rlen)
				return bad(err, type, -1, at, "EXTENDED record without subtype");
			enum ppl_apply_status s = ppl_apply_extended(pg, l, rlen, err);
			if (s != PPL_APPLY_OK) {
				if (err) {
					err->rec_type = type;
					err->ext_subtype = *l;
					err->rec_offset = (uint32_t)at;
				}
				return s;
			}
			cur->last_offset = PPL_FIL_PAGE_TYPE;
			*modified = true;
			l = next;
			continue;
		}
		default:
			break;
		}

		/* WRITE, MEMSET, MEMMOVE: at an offset relative to the end of the
		 * previous one on this page within the mini-transaction. */
		if (cur->last_offset == 1 || !rlen)
			return bad(err, type, -1, at, "byte record after FREE_PAGE or without payload");
		uint32_t off;
		unsigned olen = ppl_varint_get(l, rlen, &off);
		if (!olen || olen >= rlen || olen > 3 || off >= size || off + cur->last_offset < 8 ||
		    off + cur->last_offset >= size)
			return bad(err, type, -1, at, "byte offset outside the page");
		cur->last_offset += off;
		l += olen;
		rlen -= olen;
		if (type == PPL_REC_WRITE) {
			if (rlen + cur->last_offset > size)
				return bad(err, type, -1, at, "WRITE past the end of the page");
			memcpy(frame + cur->last_offset, l, rlen);
			cur->last_offset += rlen;
			*modified = true;
			l = next;
			continue;
		}
		uint32_t dlen;
		unsigned llen = ppl_varint_get(l, rlen, &dlen);
		if (!llen || llen > 3 || llen > rlen || dlen + cur->last_offset > size)
			return bad(err, type, -1, at, "bad MEMSET/MEMMOVE length");
		l += llen;
		rlen -= llen;
		if (type == PPL_REC_MEMSET) {
			if (!rlen || rlen > dlen)
				return bad(err, type, -1, at, "MEMSET pattern empty or longer than its length");
			uint8_t *dst = frame + cur->last_offset;
			for (size_t s = 0; s < dlen; s += rlen)
				memcpy(dst + s, l, dlen - s < rlen ? dlen - s : rlen);
			cur->last_offset += dlen;
			*modified = true;
			l = next;
			continue;
		}
		uint32_t src;
		unsigned slen = ppl_varint_get(l, rlen, &src);
		if (!slen || slen != rlen || slen > 3)
			return bad(err, type, -1, at, "bad MEMMOVE source");
		src = (src & 1) ? cur->last_offset - (src >> 1) - 1 : cur->last_offset + (src >> 1) + 1;
		if (src < 8 || (size_t)src + dlen > size)
			return bad(err, type, -1, at, "MEMMOVE source outside the page");
		memmove(frame + cur->last_offset, frame + src, dlen);
		cur->last_offset += dlen;
		*modified = true;
		l = next;
	}
	return PPL_APPLY_OK;
}

const char *ppl_apply_status_name(enum ppl_apply_status s)
{
	switch (s) {
	case PPL_APPLY_OK:
		return "applied";
	case PPL_APPLY_UNSUPPORTED:
		return "unsupported";
	case PPL_APPLY_BASE_DAMAGED:
		return "damaged page";
	default:
		return "corrupt";
	}
}

void ppl_replay_begin(struct ppl_page_replay *r, const struct ppl_page_ref *pg, uint64_t init_lsn)
{
	memset(r, 0, sizeof *r);
	r->pg = *pg;
	r->init_lsn = init_lsn;
	r->page_lsn = init_lsn ? 0 : ppl_page_lsn(pg->frame);
	if (!init_lsn)
		r->damaged = !ppl_page_all_zero(pg->frame, pg->size) && !ppl_page_crc_ok(pg->frame, pg->size);
}

void ppl_replay_resume(struct ppl_page_replay *r, const struct ppl_page_ref *pg, uint64_t init_lsn)
{
	memset(r, 0, sizeof *r);
	r->pg = *pg;
	r->init_lsn = init_lsn;
	/* every mtr up to the image's LSN is in it (mtrs do not overlap: the
	 * next one starts at or after it); the image was stamped because
	 * records changed it, which is what a nonzero start_lsn says, and a
	 * replay that applies nothing more stamps it again with its own LSN */
	r->page_lsn = r->start_lsn = r->end_lsn = ppl_page_lsn(pg->frame);
}

enum ppl_apply_status ppl_replay_mtr(struct ppl_page_replay *r, uint64_t start_lsn, uint64_t end_lsn,
				     const uint8_t *recs, size_t len, struct ppl_apply_error *err)
{
	/* recv_recover_page(): an mtr that started before the page's LSN is
	 * already in the page; one before the page's (re)initialization is
	 * irrelevant. Both still move the end LSN. */
	if (start_lsn < r->page_lsn || start_lsn < r->init_lsn) {
		r->end_lsn = end_lsn;
		r->skipped++;
		return PPL_APPLY_OK;
	}
	r->end_lsn = end_lsn;
	if (r->damaged) {
		if (err) {
			err->rec_type = 0;
			err->ext_subtype = -1;
			err->rec_offset = 0;
			snprintf(err->msg, sizeof err->msg, "the stored page fails its checksum (torn, or changed "
				 "without redo) and the log does not initialize it");
		}
		return PPL_APPLY_BASE_DAMAGED;
	}
	bool modified;
	enum ppl_apply_status s = ppl_apply_mtr_recs(&r->pg, &r->cur, recs, len, &modified, err);
	if (s != PPL_APPLY_OK)
		return s;
	r->applied++;
	if (!modified) {
		/* FREE_PAGE: whatever was applied before is not written. */
		r->start_lsn = 0;
		return PPL_APPLY_OK;
	}
	if (!r->start_lsn)
		r->start_lsn = start_lsn;
	return PPL_APPLY_OK;
}

bool ppl_replay_finish(struct ppl_page_replay *r)
{
	if (!r->start_lsn)
		return false;
	ppl_page_stamp(r->pg.frame, r->pg.size, r->end_lsn);
	return true;
}
