/* Page checksum and LSN stamping for full_crc32 tablespaces (the format
 * MariaDB 10.5+ creates by default). */
#include "ppl/page.h"

#include "ppl/crc32c.h"
#include "ppl/mach.h"

uint32_t ppl_page_compute_crc(const uint8_t *page, size_t size)
{
	return ppl_crc32c(0, page, size - PPL_FIL_PAGE_FCRC32_CHECKSUM);
}

bool ppl_page_crc_ok(const uint8_t *page, size_t size)
{
	/* An all-zero page has checksum 0 stored and a non-zero CRC; InnoDB
	 * treats it as a valid never-written page, but it is never a page we
	 * could have rebuilt, so it does not pass here. */
	return ppl_page_compute_crc(page, size) == ppl_page_stored_crc(page, size);
}

void ppl_page_stamp(uint8_t *page, size_t size, uint64_t lsn)
{
	/* recv_recover_page() writes the 8-byte LSN into the header and the
	 * old-style trailer; buf_flush_init_for_writing() then copies the low
	 * half of the header LSN to size-8 and puts the CRC in the last 4. */
	ppl_wr8(page + PPL_FIL_PAGE_LSN, lsn);
	ppl_wr8(page + size - PPL_FIL_PAGE_FCRC32_END_LSN, lsn);
	ppl_wr4(page + size - PPL_FIL_PAGE_FCRC32_END_LSN, (uint32_t)lsn);
	ppl_wr4(page + size - PPL_FIL_PAGE_FCRC32_CHECKSUM, ppl_page_compute_crc(page, size));
}

size_t ppl_fsp_flags_page_size(uint32_t flags)
{
	if (!(flags & PPL_FSP_FLAGS_FCRC32_MASK_MARKER))
		return 0;
	unsigned ssize = flags & 0xf;
	/* ssize 3..7 = 4K..64K; 1 << (ssize + 9) */
	if (ssize < 3 || ssize > 7)
		return 0;
	return (size_t)1 << (ssize + 9);
}

const char *ppl_page_type_name(uint16_t type)
{
	switch (type) {
	case PPL_FIL_PAGE_INDEX: return "INDEX";
	case PPL_FIL_PAGE_RTREE: return "RTREE";
	case PPL_FIL_PAGE_UNDO_LOG: return "UNDO_LOG";
	case PPL_FIL_PAGE_INODE: return "INODE";
	case PPL_FIL_PAGE_TYPE_ALLOCATED: return "ALLOCATED";
	case PPL_FIL_PAGE_TYPE_FSP_HDR: return "FSP_HDR";
	case PPL_FIL_PAGE_TYPE_XDES: return "XDES";
	case PPL_FIL_PAGE_TYPE_BLOB: return "BLOB";
	case PPL_FIL_PAGE_TYPE_SYS: return "SYS";
	case PPL_FIL_PAGE_TYPE_TRX_SYS: return "TRX_SYS";
	case PPL_FIL_PAGE_IBUF_BITMAP: return "IBUF_BITMAP";
	case 4: return "IBUF_FREE_LIST";
	case 11: return "ZBLOB";
	case 12: return "ZBLOB2";
	case 13: return "UNKNOWN";
	case 18: return "INSTANT";
	default: return "OTHER";
	}
}
