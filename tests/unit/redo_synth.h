/* A tiny MariaDB 10.8+ redo log writer for tests: header, checkpoint
 * blocks, and mini-transactions placed in a circular record area, the way
 * the server lays them out. */
#ifndef PPL_TEST_REDO_SYNTH_H
#define PPL_TEST_REDO_SYNTH_H
#include <stdlib.h>
#include <string.h>

#include "ppl/crc32c.h"
#include "ppl/mach.h"

#define SYN_AREA 12288u

struct synlog {
	uint8_t *file;
	size_t size;        /* whole file */
	uint64_t first_lsn, lsn;
};

static inline size_t syn_varint(uint8_t *p, uint32_t v)
{
	if (v < 0x80) { p[0] = (uint8_t)v; return 1; }
	if (v < 0x4080) { v -= 0x80; p[0] = (uint8_t)(0x80 | v >> 8); p[1] = (uint8_t)v; return 2; }
	if (v < 0x204080) { v -= 0x4080; p[0] = (uint8_t)(0xc0 | v >> 16); p[1] = (uint8_t)(v >> 8); p[2] = (uint8_t)v; return 3; }
	v -= 0x204080;
	p[0] = (uint8_t)(0xe0 | v >> 24); p[1] = (uint8_t)(v >> 16); p[2] = (uint8_t)(v >> 8); p[3] = (uint8_t)v;
	return 4;
}

static inline void syn_header(uint8_t *b, uint64_t first_lsn)
{
	memset(b, 0, 512);
	ppl_wr4(b, 0x50687973u);
	ppl_wr8(b + 8, first_lsn);
	memcpy(b + 16, "ppl test", 8);
	ppl_wr4(b + 508, ppl_crc32c(0, b, 508));
}

static inline void syn_checkpoint(uint8_t *b, uint64_t lsn, uint64_t end_lsn)
{
	memset(b, 0, 64);
	ppl_wr8(b, lsn);
	ppl_wr8(b + 8, end_lsn);
	ppl_wr4(b + 60, ppl_crc32c(0, b, 60));
}

static inline void syn_init(struct synlog *l, size_t capacity, uint64_t first_lsn)
{
	l->size = SYN_AREA + capacity;
	l->file = calloc(1, l->size);
	l->first_lsn = l->lsn = first_lsn;
	syn_header(l->file, first_lsn);
	syn_checkpoint(l->file + 4096, first_lsn, first_lsn);
}

static inline size_t syn_off(const struct synlog *l, uint64_t lsn)
{
	return SYN_AREA + (size_t)((lsn - l->first_lsn) % (l->size - SYN_AREA));
}

/* Appends a mini-transaction made of `recs`; returns its start LSN. */
static inline uint64_t syn_mtr(struct synlog *l, const uint8_t *recs, size_t n)
{
	uint8_t tmp[1 << 16];
	memcpy(tmp, recs, n);
	uint64_t cap = l->size - SYN_AREA;
	tmp[n] = (uint8_t)!(((l->lsn + n - l->first_lsn) / cap) & 1);
	ppl_wr4(tmp + n + 1, ppl_crc32c(0, recs, n));
	uint64_t start = l->lsn;
	for (size_t i = 0; i < n + 5; i++)
		l->file[syn_off(l, l->lsn + i)] = tmp[i];
	l->lsn += n + 5;
	return start;
}

/* A record of type `type` (high nibble) whose bytes after the type byte
 * are body[0..b): the length in the low nibble, or 0 there and
 * varint(length - 15) first when it does not fit. */
static inline size_t syn_rec(uint8_t *p, uint8_t type, const uint8_t *body, size_t b)
{
	size_t h = 0;
	if (b < 16) {
		p[h++] = (uint8_t)(type | b);
	} else {
		/* length = 15 + varint-encoded extra, counted after the type byte */
		uint8_t v[5];
		size_t vl = syn_varint(v, (uint32_t)(b - 15));
		if (syn_varint(v, (uint32_t)(b + vl - 15)) != vl)
			vl++;
		vl = syn_varint(v, (uint32_t)(b + vl - 15));
		p[h++] = type;
		memcpy(p + h, v, vl);
		h += vl;
	}
	memcpy(p + h, body, b);
	return h + b;
}

/* A WRITE record with page id: data at byte offset `off` of (space, page). */
static inline size_t syn_write_rec(uint8_t *p, uint32_t space, uint32_t page, uint32_t off, const void *data,
				   size_t len)
{
	uint8_t body[1024];
	size_t b = 0;
	b += syn_varint(body + b, space);
	b += syn_varint(body + b, page);
	b += syn_varint(body + b, off);
	memcpy(body + b, data, len);
	b += len;
	return syn_rec(p, 0x30, body, b);
}

/* FREE_PAGE: the page is free (InnoDB writes it no more until an INIT_PAGE). */
static inline size_t syn_free_page_rec(uint8_t *p, uint32_t space, uint32_t page)
{
	uint8_t body[16];
	size_t b = 0;
	b += syn_varint(body + b, space);
	b += syn_varint(body + b, page);
	return syn_rec(p, 0x00, body, b);
}

/* FILE_CREATE: the space's file is `name` ("./db/t.ibd"), as InnoDB logs
 * it when it creates a table's file. */
static inline size_t syn_file_create_rec(uint8_t *p, uint32_t space, const char *name)
{
	uint8_t body[512];
	size_t b = 0;
	b += syn_varint(body + b, space);
	b += syn_varint(body + b, 0);
	memcpy(body + b, name, strlen(name));
	b += strlen(name);
	return syn_rec(p, 0x80, body, b);
}
#endif
