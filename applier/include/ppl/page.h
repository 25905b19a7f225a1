/* InnoDB page layout: the FIL header/trailer fields every page carries, and
 * the full_crc32 checksum. One place for these offsets (fil0fil.h, fsp0types.h,
 * buf0buf.cc in MariaDB). */
#ifndef PPL_PAGE_H
#define PPL_PAGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define PPL_FIL_PAGE_SPACE_OR_CHKSUM 0u /* unused by full_crc32 */
#define PPL_FIL_PAGE_OFFSET 4u        /* page number */
#define PPL_FIL_PAGE_PREV 8u
#define PPL_FIL_PAGE_NEXT 12u
#define PPL_FIL_PAGE_LSN 16u          /* 8 bytes */
#define PPL_FIL_PAGE_TYPE 24u         /* 2 bytes */
#define PPL_FIL_PAGE_FILE_FLUSH_LSN 26u
#define PPL_FIL_PAGE_SPACE_ID 34u
#define PPL_FIL_PAGE_DATA 38u
#define PPL_FIL_PAGE_DATA_END 8u      /* trailer size */
/* full_crc32 trailer: low 32 bits of the LSN at size-8, CRC-32C of
 * bytes [0, size-4) at size-4. */
#define PPL_FIL_PAGE_FCRC32_END_LSN 8u
#define PPL_FIL_PAGE_FCRC32_CHECKSUM 4u

/* The file space header on page 0 (fsp0fsp.h). */
#define PPL_FSP_HEADER_OFFSET PPL_FIL_PAGE_DATA
#define PPL_FSP_SPACE_ID 0u
#define PPL_FSP_SIZE 8u
#define PPL_FSP_FREE_LIMIT 12u
#define PPL_FSP_SPACE_FLAGS 16u

/* Page types (fil0fil.h) that tests and logs name. */
#define PPL_FIL_PAGE_INDEX 17855u
#define PPL_FIL_PAGE_RTREE 17854u
#define PPL_FIL_PAGE_UNDO_LOG 2u
#define PPL_FIL_PAGE_INODE 3u
#define PPL_FIL_PAGE_TYPE_ALLOCATED 0u
#define PPL_FIL_PAGE_TYPE_FSP_HDR 8u
#define PPL_FIL_PAGE_TYPE_XDES 9u
#define PPL_FIL_PAGE_TYPE_BLOB 10u
#define PPL_FIL_PAGE_TYPE_SYS 6u
#define PPL_FIL_PAGE_TYPE_TRX_SYS 7u
#define PPL_FIL_PAGE_IBUF_BITMAP 5u

static inline uint32_t ppl_page_no(const uint8_t *page);
static inline uint32_t ppl_page_space(const uint8_t *page);
static inline uint64_t ppl_page_lsn(const uint8_t *page);
static inline uint16_t ppl_page_type(const uint8_t *page);

#include "ppl/mach.h"
static inline uint32_t ppl_page_no(const uint8_t *page) { return ppl_rd4(page + PPL_FIL_PAGE_OFFSET); }
static inline uint32_t ppl_page_space(const uint8_t *page) { return ppl_rd4(page + PPL_FIL_PAGE_SPACE_ID); }
static inline uint64_t ppl_page_lsn(const uint8_t *page) { return ppl_rd8(page + PPL_FIL_PAGE_LSN); }
static inline uint16_t ppl_page_type(const uint8_t *page) { return (uint16_t)ppl_rd2(page + PPL_FIL_PAGE_TYPE); }

/* Stored full_crc32 checksum of a page. */
static inline uint32_t ppl_page_stored_crc(const uint8_t *page, size_t size)
{
	return ppl_rd4(page + size - PPL_FIL_PAGE_FCRC32_CHECKSUM);
}
/* CRC-32C over [0, size-4), as InnoDB computes it for full_crc32. */
uint32_t ppl_page_compute_crc(const uint8_t *page, size_t size);
/* Whether a page is all zeros: never written (InnoDB's zero-filled
 * extension, or a page a tool or a scrub wiped). */
static inline bool ppl_page_all_zero(const uint8_t *page, size_t size)
{
	for (size_t i = 0; i < size; i++)
		if (page[i])
			return false;
	return true;
}
/* The head of page 0 that says which space a file holds and its format:
 * through FSP_SPACE_FLAGS. */
#define PPL_PAGE0_HEAD (PPL_FSP_HEADER_OFFSET + PPL_FSP_SPACE_FLAGS + 4)
/* Whether page 0 was never written, from its head (PPL_PAGE0_HEAD bytes):
 * all zeros (a file InnoDB extended before writing page 0, a page 0 whose
 * writes were elided, a file being created). A written page 0 is never
 * all zeros there, whatever its format: its page type is FSP_HDR. The one
 * rule for the storage node (datadir.c, make_node), ppl-replay and
 * libcatcher's fdtable.c. */
static inline bool ppl_page0_unwritten(const uint8_t *head)
{
	return ppl_page_all_zero(head, PPL_PAGE0_HEAD);
}
/* Whether a page passes the full_crc32 check (and is not all zero). */
bool ppl_page_crc_ok(const uint8_t *page, size_t size);
/* Writes the page LSN into header and trailer and recomputes the checksum,
 * exactly as recovery + buf_flush_init_for_writing() leave a page. */
void ppl_page_stamp(uint8_t *page, size_t size, uint64_t lsn);
/* Short name of a page type for diagnostics ("INDEX", "UNDO_LOG", ...). */
const char *ppl_page_type_name(uint16_t type);

/* innodb_page_size takes these values only (4K..64K). Record offsets and
 * next-record links are 16-bit and relative links are taken modulo the
 * page size, so any other size would be misread rather than applied. */
static inline bool ppl_page_size_valid(size_t size)
{
	return size >= 4096 && size <= 65536 && !(size & (size - 1));
}

/* Tablespace flags (fsp0types.h): full_crc32 format and the page size. */
#define PPL_FSP_FLAGS_FCRC32_MASK_MARKER (1u << 4)
/* Page size in bytes from FSP_SPACE_FLAGS, 0 if the flags are not a
 * full_crc32 tablespace we understand. */
size_t ppl_fsp_flags_page_size(uint32_t flags);
/* Whether full_crc32 flags mark the tablespace page_compressed (an
 * algorithm in bits 5..7): its pages on disk are not the pages the redo
 * describes. */
static inline bool ppl_fsp_flags_page_compressed(uint32_t flags)
{
	return ((flags >> 5) & 7u) != 0;
}

#endif
