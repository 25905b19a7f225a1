/* What libcatcher checks on a page image before asking the storage node
 * about it (DESIGN I1): the page says it belongs exactly where it is being
 * written, it has been through a mini-transaction (LSN != 0), and its
 * full_crc32 checksum and trailer are intact. Anything else is written. */
#include "catcher.h"

#include "ppl/mach.h"
#include "ppl/page.h"

uint8_t catcher_flags_fmt(uint32_t flags, uint32_t *page_size)
{
	/* old checksums, ROW_FORMAT=COMPRESSED and page_compressed are
	 * written, never asked about */
	size_t ps = ppl_fsp_flags_page_size(flags);
	if (ps == 0 || ppl_fsp_flags_page_compressed(flags))
		return FMT_UNSUPPORTED;
	*page_size = (uint32_t)ps;
	return FMT_FCRC32;
}

unsigned catcher_page_check(const uint8_t *page, uint32_t ps, off_t off, const struct catcher_fd *f,
			    struct catcher_query *q)
{
	/* The doublewrite buffer: two extents from the second extent of the
	 * system tablespace (buf0dblwr.cc). It holds copies of other pages,
	 * made durable there before they are written in place; they are not
	 * pages the storage node could vouch for at that position. */
	uint64_t at = (uint64_t)off / ps;
	uint32_t extent = ps < 16384 ? (1u << 20) / ps : 64;
	if (f->cls == CLASS_SYSTEM && at >= extent && at < 3 * (uint64_t)extent)
		return R_DOUBLEWRITE;
	uint32_t page_no = ppl_page_no(page);
	uint32_t space = ppl_page_space(page);
	if (at != page_no || (f->space_known && f->space != space))
		return R_PAGE_ID;
	uint64_t lsn = ppl_page_lsn(page);
	if (lsn == 0)
		return R_LSN_ZERO;
	if (ppl_rd4(page + ps - PPL_FIL_PAGE_FCRC32_END_LSN) != (uint32_t)lsn)
		return R_CHECKSUM;
	if (!ppl_page_crc_ok(page, ps))
		return R_CHECKSUM;
	uint32_t stored = ppl_page_stored_crc(page, ps);
	q->space = space;
	q->page_no = page_no;
	q->lsn = lsn;
	q->checksum = stored;
	q->page_size = ps;
	return 0;
}
