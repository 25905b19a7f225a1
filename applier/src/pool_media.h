/* The pool file's layout on persistent memory: the one place that says
 * where everything is and what each byte means. Little-endian (x86), every
 * multi-byte field at its natural alignment.
 *
 *   0       superblock (written once, at create)
 *   1024    two durable-LSN slots, 64 B each, written alternately
 *   4096    doublewrite slot headers, 64 B each
 *   ...     doublewrite images, dw_page_size each, 4 KiB aligned
 *   ...     the log area (log_size bytes, 4 KiB aligned; 0: none): MariaDB's
 *           log writes made durable here before the log file's own sync
 *           (Log_On_Pmem; format below, code in pool_log.c)
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
/* 2: the log area (version 1 pools have none, and are refused: drain
 * and re-create them) */
#define POOL_VERSION 2u

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
	uint64_t log_off;
	uint64_t log_size;
	uint8_t pad1[POOL_SB_SIZE - 232 - 4];
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

/* ---- the log area ----
 *
 * A ring of the log file's writes not yet synced into the file. At
 * log_off, one 64-byte header whose first 8 bytes are the tail word,
 * the field that publishes a release (one aligned store, so a crash
 * leaves the old tail or the new one):
 *   bits  0..31  the sequence number (low 32 bits) of the oldest entry
 *                still needed
 *   bits 32..55  where that entry starts, in 64-byte units from the ring
 *   bits 56..63  check byte over bits 0..55
 * and at +8 that sequence number whole (u64), made durable before the
 * word: the word's low bits say which of its values the word meant
 * (sequence numbers never repeat in a pool's life, so an entry of any
 * earlier lap, even in the padding a WRAP skipped long ago, never
 * matches). A word of 0 is a new pool: entry 1 at the ring's start.
 * The ring follows (log_size - 64 bytes). An entry is 64-byte aligned:
 * a 64-byte header (struct pool_log_ent) and its bytes, padded to 64.
 * Entries carry consecutive sequence numbers; an entry that would cross
 * the ring's end is preceded by a WRAP entry (no bytes) and starts at the
 * ring's beginning. The pending entries are those from the tail on whose
 * sequence numbers follow each other and whose CRC holds: an entry of an
 * earlier lap has an older number, a torn one a bad CRC, and either ends
 * the run. An entry is persisted whole before its write is acknowledged,
 * and entries are appended one at a time, so every acknowledged write
 * lies inside the run. */
#define POOL_LOG_HDR 64u
#define POOL_LOG_ALIGN 64u
#define POOL_LOG_DATA 1u
#define POOL_LOG_WRAP 2u

struct pool_log_ent {
	uint64_t seq;
	uint64_t fileid;         /* the log file's inode number */
	uint64_t offset;         /* where the bytes go in it */
	uint32_t len;
	uint32_t kind;           /* POOL_LOG_DATA or POOL_LOG_WRAP */
	uint32_t crc;            /* CRC-32C of this header (crc 0) and the bytes */
	uint8_t pad[POOL_LOG_ALIGN - 36];
};
_Static_assert(sizeof(struct pool_log_ent) == POOL_LOG_ALIGN, "log entry header size");

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
