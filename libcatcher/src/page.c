/* What libcatcher checks on a page image before asking the storage node
 * about it (DESIGN I1): the page says it belongs exactly where it is being
 * written, it has been through a mini-transaction (LSN != 0), and its
 * full_crc32 checksum and trailer are intact. Anything else is written. */
#include "catcher.h"

#include "ppl/crc32c.h"
#include "ppl/mach.h"
#include "ppl/page.h"

/* FSP flags, full_crc32 layout (fsp0types.h): page_ssize in bits 0..3,
 * the full_crc32 marker in bit 4, page_compressed algorithm in 5..7. */
#define FCRC32_MARKER (1u << 4)
#define FCRC32_COMPRESSED_ALGO(f) (((f) >> 5) & 7u)

uint8_t catcher_flags_fmt(uint32_t flags, uint32_t *page_size)
{
	if (!(flags & FCRC32_MARKER) || FCRC32_COMPRESSED_ALGO(flags))
		return FMT_UNSUPPORTED; /* old checksums, ROW_FORMAT=COMPRESSED, page_compressed */
	unsigned ssize = flags & 0xfu;
	if (ssize < 3 || ssize > 7)
		return FMT_UNSUPPORTED;
	*page_size = 1u << (ssize + 9);
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
	uint32_t stored = ppl_rd4(page + ps - PPL_FIL_PAGE_FCRC32_CHECKSUM);
	if (ppl_crc32c(0, page, ps - PPL_FIL_PAGE_FCRC32_CHECKSUM) != stored)
		return R_CHECKSUM;
	q->space = space;
	q->page_no = page_no;
	q->lsn = lsn;
	q->checksum = stored;
	q->page_size = ps;
	return 0;
}
