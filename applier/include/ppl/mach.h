/* Big-endian field access and InnoDB's variable-length integers.
 * InnoDB stores every multi-byte field big-endian; these helpers are the one
 * place that knows it. */
#ifndef PPL_MACH_H
#define PPL_MACH_H

#include <stddef.h>
#include <stdint.h>

static inline uint32_t ppl_rd2(const uint8_t *p) { return (uint32_t)p[0] << 8 | p[1]; }
static inline uint32_t ppl_rd3(const uint8_t *p) { return (uint32_t)p[0] << 16 | (uint32_t)p[1] << 8 | p[2]; }
static inline uint32_t ppl_rd4(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}
static inline uint64_t ppl_rd8(const uint8_t *p) { return (uint64_t)ppl_rd4(p) << 32 | ppl_rd4(p + 4); }

static inline void ppl_wr1(uint8_t *p, uint32_t v) { p[0] = (uint8_t)v; }
static inline void ppl_wr2(uint8_t *p, uint32_t v) { p[0] = (uint8_t)(v >> 8); p[1] = (uint8_t)v; }
static inline void ppl_wr4(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24); p[1] = (uint8_t)(v >> 16); p[2] = (uint8_t)(v >> 8); p[3] = (uint8_t)v;
}
static inline void ppl_wr8(uint8_t *p, uint64_t v) { ppl_wr4(p, (uint32_t)(v >> 32)); ppl_wr4(p + 4, (uint32_t)v); }

/* InnoDB redo varint (mtr0log.h): 1 byte for < 0x80, 2 bytes 10xxxxxx for
 * < 0x4080, 3 bytes 110xxxxx for < 0x204080, 4 bytes 1110xxxx for
 * < 0x10204080, 5 bytes 11110000 + 4 bytes beyond that. Each longer form is
 * offset by the range of the shorter ones. */
#define PPL_VARINT_ERROR UINT32_MAX

/* Length in bytes of the varint starting with byte b, 0 if b cannot start one. */
static inline unsigned ppl_varint_len(uint8_t b)
{
	if (b < 0x80) return 1;
	if (b < 0xc0) return 2;
	if (b < 0xe0) return 3;
	if (b < 0xf0) return 4;
	if (b == 0xf0) return 5;
	return 0;
}

/* Decodes a varint whose whole length (ppl_varint_len) the caller checked is
 * readable. */
static inline uint32_t ppl_varint_decode(const uint8_t *p)
{
	uint32_t b = p[0];
	if (b < 0x80) return b;
	if (b < 0xc0) return 0x80 + ((b & 0x3f) << 8 | p[1]);
	if (b < 0xe0) return 0x4080 + ((b & 0x1f) << 16 | (uint32_t)p[1] << 8 | p[2]);
	if (b < 0xf0) return 0x204080 + ((b & 0x0f) << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3]);
	if (b == 0xf0) {
		uint32_t v = ppl_rd4(p + 1);
		return v > UINT32_MAX - 0x10204080 ? PPL_VARINT_ERROR : v + 0x10204080;
	}
	return PPL_VARINT_ERROR;
}

/* Bounds-checked decode: returns bytes consumed, 0 on truncation/error. */
static inline unsigned ppl_varint_get(const uint8_t *p, size_t avail, uint32_t *out)
{
	if (!avail) return 0;
	unsigned n = ppl_varint_len(p[0]);
	if (!n || n > avail) return 0;
	uint32_t v = ppl_varint_decode(p);
	if (v == PPL_VARINT_ERROR) return 0;
	*out = v;
	return n;
}

#endif
