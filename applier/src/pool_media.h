/* The pool file's layout on persistent memory: the one place that says
 * where everything is and what each byte means. Little-endian (x86), every
 * multi-byte field at its natural alignment.
 *
 *   0       superblock (written once, at create)
 *   1024    two durable-LSN slots, 64 B each, written alternately
 *   4096    doublewrite slot headers, 64 B each
 *   ...     doublewrite images, dw_page_size each, 4 KiB aligned
 *   ...     blocks, block_size each, to the end of the file; block 0 is
 *           never allocated so that 0 can mean "no next block"
 *
 * A block starts with a 16-byte header; the first 8 bytes are its commit
 * word, the only field whose change publishes anything:
 *   bits  0..31  next block of the chain (0 = last)
 *   bits 32..47  payload bytes committed in this block
 *   bits 48..55  kind: FREE, HEAD (first block of a page's chain), CONT
 *   bits 56..63  check byte over bits 0..55, so a flipped bit in the word
 *                that publishes everything is detected rather than read as
 *                "free"
 * then space id (u32) and page number (u32). A HEAD block continues with
 * the chain's base LSN (u64), its generation (u32) and a CRC-32C of the
 * head fields (u32); its payload starts at 32, a CONT block's at 16.
 *
 * The payload of a chain is one byte stream of records:
 *   start_lsn u64, end_lsn - start_lsn u32, len|flags u16, crc u32, bytes
 * (18-byte header, no padding). The CRC-32C covers space, page, the header
 * fields and the bytes, so a record read under the wrong page fails too. */
#ifndef PPL_POOL_MEDIA_H
#define PPL_POOL_MEDIA_H

#include <stdint.h>

#define POOL_MAGIC "PPLPOOL\0"
#define POOL_VERSION 1u

#define POOL_SB_OFF 0u
#define POOL_SB_SIZE 512u
#define POOL_CKPT_OFF 1024u
#define POOL_CKPT_SLOT 64u
#define POOL_DW_HDR_OFF 4096u
#define POOL_DW_HDR_SIZE 64u
#define POOL_ALIGN 4096u

struct pool_sb {
	char magic[8];
	uint32_t version;
	uint32_t block_size;
	uint32_t max_per_page;
	uint32_t dw_slots;
	uint32_t dw_page_size;
	uint32_t pad0;
	uint64_t size;
	uint64_t nblocks;
	uint64_t dw_img_off;
	uint64_t blocks_off;
	uint64_t created_unix;
	uint8_t uuid[16];
	char identity[128];
	uint8_t pad1[POOL_SB_SIZE - 216 - 4];
	uint32_t crc;            /* CRC-32C of everything before it */
};
_Static_assert(sizeof(struct pool_sb) == POOL_SB_SIZE, "superblock size");

/* Durable-LSN slot: the one with the higher sequence and a good CRC wins. */
struct pool_ckpt {
	uint64_t seq;
	uint64_t lsn;
	uint32_t crc;            /* over seq and lsn */
	uint32_t pad;
	uint8_t pad2[POOL_CKPT_SLOT - 24];
};
_Static_assert(sizeof(struct pool_ckpt) == POOL_CKPT_SLOT, "checkpoint slot size");

/* ---- blocks ---- */
#define BLK_FREE 0u
#define BLK_HEAD 1u
#define BLK_CONT 2u

#define BLK_HDR 16u
#define BLK_HEAD_HDR 32u
#define BLK_OFF_SPACE 8u
#define BLK_OFF_PAGE 12u
#define BLK_OFF_BASE 16u
#define BLK_OFF_SEQ 24u
#define BLK_OFF_HCRC 28u

#define REC_HDR 18u
#define REC_FLAG_INIT 0x8000u
#define REC_LEN_MASK 0x1fffu

static inline uint64_t blk_word(uint32_t next, uint32_t used, uint32_t kind);
static inline uint32_t blk_next(uint64_t w) { return (uint32_t)w; }
static inline uint32_t blk_used(uint64_t w) { return (uint32_t)(w >> 32) & 0xffffu; }
static inline uint32_t blk_kind(uint64_t w) { return (uint32_t)(w >> 48) & 0xffu; }

/* A byte of the 56 low bits folded, rotated so that a single flipped bit
 * anywhere in the word (check byte included) changes the check. An all-zero
 * word (a never-written block) checks. */
static inline uint8_t blk_check(uint64_t low56)
{
	uint64_t x = low56 & 0x00ffffffffffffffull;
	uint8_t c = 0;
	for (int i = 0; i < 7; i++)
		c = (uint8_t)(((c << 1) | (c >> 7)) ^ (uint8_t)(x >> (8 * i)));
	return c;
}
static inline uint64_t blk_word(uint32_t next, uint32_t used, uint32_t kind)
{
	uint64_t w = (uint64_t)next | ((uint64_t)(used & 0xffffu) << 32) | ((uint64_t)(kind & 0xffu) << 48);
	return w | ((uint64_t)blk_check(w) << 56);
}
static inline int blk_word_ok(uint64_t w) { return (uint8_t)(w >> 56) == blk_check(w); }

/* ---- doublewrite slot header ---- */
#define DW_FREE 0u
#define DW_VALID 1u
struct pool_dw_hdr {
	uint64_t state;          /* commit word: DW_VALID | seq << 8 */
	uint32_t space;
	uint32_t page_no;
	uint64_t lsn;
	uint32_t size;
	uint32_t crc;            /* over space, page_no, lsn, size and the image */
	uint8_t pad[POOL_DW_HDR_SIZE - 32];
};
_Static_assert(sizeof(struct pool_dw_hdr) == POOL_DW_HDR_SIZE, "dw header size");

#endif
