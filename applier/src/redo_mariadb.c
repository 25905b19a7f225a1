/* The MariaDB 10.8+ redo log format ("Phys"), as written by MariaDB 10.8
 * through 11.x: the file header, the two checkpoint blocks, the framing of a
 * mini-transaction (records, a termination byte carrying the sequence bit,
 * CRC-32C of the records) and the records themselves.
 *
 * Everything here follows storage/innobase/log/log0recv.cc
 * (recv_sys_t::find_checkpoint, log_parse_start, recv_sys_t::parse_tail,
 * log_parse_file); the checks are the ones recovery makes, so that what this
 * file accepts is exactly what InnoDB would apply. */
#include <stdio.h>
#include <string.h>

#include "ppl/crc32c.h"
#include "ppl/mach.h"
#include "ppl/page.h"
#include "ppl/redo.h"

#define FORMAT_10_8 0x50687973u
#define FORMAT_ENCRYPTED 0x80000000u
#define FORMAT_ENC_11 0xf09f979du
#define HDR_START_LSN 8
#define HDR_CREATOR 16
#define HDR_CREATOR_END 48
#define HDR_CRC 508
#define AREA_START 12288u
/* recv_sys_t::MTR_SIZE_MAX: no mini-transaction is larger. */
#define MTR_SIZE_MAX (1u << 20)

static int parse_header(const uint8_t *b, struct ppl_log_header *h, char *err, size_t errlen)
{
	memset(h, 0, sizeof *h);
	h->format = ppl_rd4(b);
	memcpy(h->creator, b + HDR_CREATOR, HDR_CREATOR_END - HDR_CREATOR);
	h->creator[32] = 0;
	if (h->format == (FORMAT_10_8 | FORMAT_ENCRYPTED) || h->format == FORMAT_ENC_11) {
		h->encrypted = true;
		snprintf(err, errlen, "redo log is encrypted (format 0x%08x, created by \"%s\"); encrypted logs "
			 "are not supported: leave this datadir to full page writes", h->format, h->creator);
		return -1;
	}
	if (h->format != FORMAT_10_8) {
		snprintf(err, errlen, "not a MariaDB 10.8+ redo log: format 0x%08x (expected 0x%08x \"Phys\")",
			 h->format, FORMAT_10_8);
		return -1;
	}
	if (ppl_crc32c(0, b, HDR_CRC) != ppl_rd4(b + HDR_CRC)) {
		snprintf(err, errlen, "redo log header checksum mismatch (stored 0x%08x, computed 0x%08x)",
			 ppl_rd4(b + HDR_CRC), ppl_crc32c(0, b, HDR_CRC));
		return -1;
	}
	h->first_lsn = ppl_rd8(b + HDR_START_LSN);
	if (ppl_rd4(b + 4) || h->first_lsn < AREA_START) {
		snprintf(err, errlen, "invalid redo log header block (first LSN %llu), created by \"%s\"",
			 (unsigned long long)h->first_lsn, h->creator);
		return -1;
	}
	/* Non-zero bytes after the creator hold encryption parameters. */
	if (ppl_rd4(b + HDR_CREATOR_END)) {
		h->encrypted = true;
		snprintf(err, errlen, "redo log header carries encryption info; encrypted logs are not supported");
		return -1;
	}
	return 0;
}

static void peek_checkpoint(const uint8_t *b, struct ppl_checkpoint *c)
{
	c->lsn = ppl_rd8(b);
	c->end_lsn = ppl_rd8(b + 8);
}

static int parse_checkpoint(const uint8_t *b, const struct ppl_log_header *h, struct ppl_checkpoint *c)
{
	peek_checkpoint(b, c);
	if (c->lsn < h->first_lsn || c->end_lsn < c->lsn)
		return -1;
	for (int i = 16; i < 60; i++)
		if (b[i])
			return -1;
	return ppl_crc32c(0, b, 60) == ppl_rd4(b + 60) ? 0 : -1;
}

static enum ppl_frame frame(const uint8_t *p, size_t avail, uint64_t lsn, uint64_t first_lsn, uint64_t capacity,
			    size_t *total, size_t *recs_len)
{
	if (!avail)
		return PPL_FRAME_MORE;
	if (p[0] <= 1) /* an empty mini-transaction is never written */
		return PPL_FRAME_END;
	size_t i = 0;
	for (;;) {
		if (i >= avail)
			return PPL_FRAME_MORE;
		if (i >= MTR_SIZE_MAX)
			return PPL_FRAME_BAD;
		if (p[i] <= 1)
			break;
		uint32_t rlen = p[i] & 0xf;
		i++;
		if (!rlen) {
			if (i >= avail)
				return PPL_FRAME_MORE;
			unsigned n = ppl_varint_len(p[i]);
			if (!n)
				return PPL_FRAME_BAD;
			if (i + n > avail)
				return PPL_FRAME_MORE;
			uint32_t add = ppl_varint_decode(p + i);
			if (add >= MTR_SIZE_MAX)
				return PPL_FRAME_BAD;
			rlen = add + 15;
		}
		i += rlen;
	}
	/* The termination byte carries 1 on the first pass over the file and
	 * flips on every wrap (log_t::get_sequence_bit), at its own LSN. */
	uint8_t seqbit = !(((lsn + i - first_lsn) / capacity) & 1);
	if (p[i] != seqbit)
		return PPL_FRAME_SEQ;
	if (i + 5 > avail)
		return PPL_FRAME_MORE;
	if (ppl_crc32c(0, p, i) != ppl_rd4(p + i + 1))
		return PPL_FRAME_CRC;
	*total = i + 5;
	*recs_len = i;
	return PPL_FRAME_OK;
}

size_t ppl_mariadb_fresh_log(uint8_t *buf, size_t len, uint64_t lsn, const char *creator)
{
	/* the record area's first bytes: FILE_CHECKPOINT(lsn) for space 0
	 * page 0 (type byte with its length, two one-byte varints, the LSN),
	 * the first pass's termination byte, CRC-32C of the records */
	const size_t recs = 1 + 1 + 1 + 8, need = AREA_START + recs + 5 + 1;
	if (len < need || lsn < AREA_START)
		return 0;
	memset(buf, 0, need);
	ppl_wr4(buf, FORMAT_10_8);
	ppl_wr8(buf + HDR_START_LSN, lsn);
	snprintf((char *)buf + HDR_CREATOR, HDR_CREATOR_END - HDR_CREATOR, "%s", creator);
	ppl_wr4(buf + HDR_CRC, ppl_crc32c(0, buf, HDR_CRC));
	for (int i = 0; i < 2; i++) {
		uint8_t *ck = buf + ppl_dialect_mariadb_10_8.checkpoint_off[i];
		ppl_wr8(ck, lsn);
		ppl_wr8(ck + 8, lsn);
		ppl_wr4(ck + 60, ppl_crc32c(0, ck, 60));
	}
	uint8_t *m = buf + AREA_START;
	m[0] = (uint8_t)(PPL_FILE_CHECKPOINT | (recs - 1));
	m[1] = 0;
	m[2] = 0;
	ppl_wr8(m + 3, lsn);
	m[recs] = 1;
	ppl_wr4(m + recs + 1, ppl_crc32c(0, m, recs));
	/* m[recs + 5] stays 0: the end of the log */
	return need;
}

const struct ppl_redo_dialect ppl_dialect_mariadb_10_8 = {
	.name = "MariaDB 10.8+ (Phys)",
	.header_size = 512,
	.checkpoint_off = {4096, 8192},
	.checkpoint_size = 64,
	.area_start = AREA_START,
	.parse_header = parse_header,
	.parse_checkpoint = parse_checkpoint,
	.checkpoint_peek = 16,
	.peek_checkpoint = peek_checkpoint,
	.frame = frame,
};

/* ---- Records ---------------------------------------------------------- */

void ppl_rec_iter_init(struct ppl_rec_iter *it, const uint8_t *recs, size_t len, size_t page_size)
{
	memset(it, 0, sizeof *it);
	it->begin = it->p = recs;
	it->end = recs + len;
	it->page_size = page_size ? page_size : 65536;
}

static int fail(struct ppl_rec_iter *it, const uint8_t *at, const char *what)
{
	snprintf(it->err, sizeof it->err, "malformed record at byte %zu of the mini-transaction: %s",
		 (size_t)(at - it->begin), what);
	return -1;
}

/* FILE_* records (log_parse_file). */
static int file_record(struct ppl_rec_iter *it, struct ppl_rec *r, uint8_t b, const uint8_t *l, uint32_t rlen)
{
	r->type = b & 0xf0;
	if (!rlen) {
		if (!r->space_id && !r->page_no && b == PPL_FILE_CHECKPOINT + 2) {
			r->kind = PPL_RK_PADDING;
			return 1;
		}
		return fail(it, l, "empty file record");
	}
	if (r->page_no)
		return fail(it, l, "file record with a page number");
	switch (b & 0xf0) {
	case PPL_FILE_CHECKPOINT:
		if (r->space_id || it->p != it->end)
			return fail(it, l, "FILE_CHECKPOINT not the last record of its mini-transaction");
		if (rlen != 8) {
			for (uint32_t i = 0; i < rlen; i++)
				if (l[i])
					return fail(it, l, "FILE_CHECKPOINT of wrong length");
			r->kind = PPL_RK_PADDING;
			return 1;
		}
		r->kind = PPL_RK_CHECKPOINT;
		r->checkpoint_lsn = ppl_rd8(l);
		return 1;
	case PPL_FILE_DELETE:
	case PPL_FILE_MODIFY:
	case PPL_FILE_RENAME:
	case PPL_FILE_CREATE: {
		if (!r->space_id)
			return fail(it, l, "file record for the system tablespace");
		const uint8_t *nul = memchr(l, 0, rlen);
		if ((nul != NULL) != ((b & 0xf0) == PPL_FILE_RENAME))
			return fail(it, l, "file name separator wrong for the record type");
		r->kind = PPL_RK_FILE;
		r->name = l;
		r->name_len = nul ? (size_t)(nul - l) : rlen;
		if (nul) {
			r->name2 = nul + 1;
			r->name2_len = rlen - r->name_len - 1;
			if (memchr(r->name2, 0, r->name2_len) || r->name2_len < 4 ||
			    memcmp(r->name2 + r->name2_len - 4, ".ibd", 4))
				return fail(it, l, "bad new name in FILE_RENAME");
		}
		if (r->name_len < 4 || memcmp(r->name + r->name_len - 4, ".ibd", 4))
			return fail(it, l, "file name does not end in .ibd");
		return 1;
	}
	default:
		return fail(it, l, "unknown file record type");
	}
}

int ppl_rec_next(struct ppl_rec_iter *it, struct ppl_rec *r)
{
	if (it->p >= it->end)
		return 0;
	const uint8_t *recs = it->p;
	const uint8_t b = *recs;
	memset(r, 0, sizeof *r);
	r->ext_subtype = -1;
	r->raw = recs;
	if (b <= 1)
		return fail(it, recs, "termination byte inside the records");
	if ((b & 0x70) == PPL_REC_RESERVED)
		return fail(it, recs, "record of RESERVED (unknown) type");

	/* Length: low 4 bits, or 0 and a varint of the extra length. */
	const uint8_t *l = recs + 1;
	uint32_t rlen = b & 0xf;
	if (!rlen) {
		uint32_t add;
		unsigned n = ppl_varint_get(l, (size_t)(it->end - l), &add);
		if (!n || add >= MTR_SIZE_MAX)
			return fail(it, recs, "bad record length");
		l += n;
		rlen = add + 15 - n;
	}
	if (rlen > (size_t)(it->end - l))
		return fail(it, recs, "record runs past the mini-transaction");
	it->p = l + rlen;
	r->raw_len = (size_t)(it->p - recs);

	if ((b & 0x80) && it->got_page_op) {
		r->same_page = true;
		if ((b & 0x70) <= PPL_REC_INIT_PAGE)
			return fail(it, recs, "FREE_PAGE or INIT_PAGE with the same_page flag");
	} else {
		it->last_offset = 0;
		unsigned idlen = ppl_varint_len(*l);
		if (!idlen || idlen > 5 || idlen >= rlen) {
			if (!*l && b == PPL_FILE_CHECKPOINT + 1) {
				r->kind = PPL_RK_PADDING;
				r->type = PPL_FILE_CHECKPOINT;
				return 1;
			}
			return fail(it, recs, "bad page identifier");
		}
		uint32_t v = ppl_varint_decode(l);
		if (v == PPL_VARINT_ERROR)
			return fail(it, recs, "bad space id");
		it->space_id = v;
		l += idlen;
		rlen -= idlen;
		idlen = ppl_varint_len(*l);
		if (!idlen || idlen > 5 || idlen > rlen)
			return fail(it, recs, "bad page number");
		v = ppl_varint_decode(l);
		if (v == PPL_VARINT_ERROR)
			return fail(it, recs, "bad page number");
		it->page_no = v;
		l += idlen;
		rlen -= idlen;
		it->got_page_op = !(b & 0x80);
		r->space_id = it->space_id;
		r->page_no = it->page_no;
		if (!it->got_page_op) {
			r->body = l;
			r->body_len = rlen;
			return file_record(it, r, b, l, rlen);
		}
	}
	r->space_id = it->space_id;
	r->page_no = it->page_no;
	r->type = b & 0x70;
	r->body = l;
	r->body_len = rlen;
	r->kind = PPL_RK_PAGE;
	if (rlen && (size_t)(l - recs) + rlen > it->page_size)
		return fail(it, recs, "record longer than a page");

	switch (b & 0x70) {
	case PPL_REC_FREE_PAGE:
	case PPL_REC_INIT_PAGE:
		if (rlen)
			return fail(it, recs, "FREE_PAGE/INIT_PAGE with a payload");
		it->last_offset = (b & 0x70) == PPL_REC_FREE_PAGE ? 1 : PPL_FIL_PAGE_TYPE;
		return 1;
	case PPL_REC_EXTENDED:
		if (!rlen)
			return fail(it, recs, "EXTENDED record without subtype");
		r->ext_subtype = *l;
		if (rlen == 1 && *l == PPL_EXT_TRIM_PAGES) {
			r->kind = PPL_RK_TRIM;
			it->last_offset = 1;
			return 1;
		}
		it->last_offset = PPL_FIL_PAGE_TYPE;
		return 1;
	case PPL_REC_OPTION:
		if (!(rlen == 5 && *l == PPL_OPT_PAGE_CHECKSUM))
			r->kind = PPL_RK_IGNORED;
		return 1;
	default: /* WRITE, MEMSET, MEMMOVE */
		break;
	}

	if (!rlen || it->last_offset == 1)
		return fail(it, recs, "WRITE/MEMSET/MEMMOVE without a preceding page record");
	uint32_t off;
	unsigned olen = ppl_varint_get(l, rlen, &off);
	if (!olen || olen >= rlen || olen > 3 || off >= it->page_size)
		return fail(it, recs, "bad byte offset");
	it->last_offset += off;
	if (it->last_offset < 8 || it->last_offset >= it->page_size)
		return fail(it, recs, "byte offset outside the page");
	l += olen;
	rlen -= olen;
	if ((b & 0x70) == PPL_REC_WRITE) {
		if (rlen + it->last_offset > it->page_size)
			return fail(it, recs, "WRITE past the end of the page");
		it->last_offset += rlen;
		return 1;
	}
	uint32_t dlen;
	unsigned llen = ppl_varint_get(l, rlen, &dlen);
	if (!llen || llen > 3 || it->last_offset + dlen > it->page_size)
		return fail(it, recs, "bad MEMSET/MEMMOVE length");
	l += llen;
	rlen -= llen;
	if ((b & 0x70) == PPL_REC_MEMSET) {
		if (rlen > dlen || !rlen)
			return fail(it, recs, "MEMSET pattern longer than its length");
		it->last_offset += dlen;
		return 1;
	}
	uint32_t s;
	unsigned slen = ppl_varint_get(l, rlen, &s);
	if (!slen || slen != rlen || slen > 3)
		return fail(it, recs, "bad MEMMOVE source");
	s = (s & 1) ? it->last_offset - (s >> 1) - 1 : it->last_offset + (s >> 1) + 1;
	if (s < 8 || (size_t)s + dlen > it->page_size)
		return fail(it, recs, "MEMMOVE source outside the page");
	it->last_offset += dlen;
	return 1;
}

const char *ppl_rec_type_name(uint8_t type, int ext)
{
	static const char *const ext_names[PPL_EXT_COUNT] = {
		"INIT_ROW_FORMAT_REDUNDANT", "INIT_ROW_FORMAT_DYNAMIC", "UNDO_INIT", "UNDO_APPEND",
		"INSERT_HEAP_REDUNDANT", "INSERT_REUSE_REDUNDANT", "INSERT_HEAP_DYNAMIC",
		"INSERT_REUSE_DYNAMIC", "DELETE_ROW_FORMAT_REDUNDANT", "DELETE_ROW_FORMAT_DYNAMIC",
		"TRIM_PAGES"};
	switch (type) {
	case PPL_REC_FREE_PAGE: return "FREE_PAGE";
	case PPL_REC_INIT_PAGE: return "INIT_PAGE";
	case PPL_REC_EXTENDED:
		return ext >= 0 && ext < PPL_EXT_COUNT ? ext_names[ext] : "EXTENDED(unknown)";
	case PPL_REC_WRITE: return "WRITE";
	case PPL_REC_MEMSET: return "MEMSET";
	case PPL_REC_MEMMOVE: return "MEMMOVE";
	case PPL_REC_RESERVED: return "RESERVED";
	case PPL_REC_OPTION: return "OPTION";
	case PPL_FILE_CREATE: return "FILE_CREATE";
	case PPL_FILE_DELETE: return "FILE_DELETE";
	case PPL_FILE_RENAME: return "FILE_RENAME";
	case PPL_FILE_MODIFY: return "FILE_MODIFY";
	case PPL_FILE_CHECKPOINT: return "FILE_CHECKPOINT";
	default: return "UNKNOWN";
	}
}
