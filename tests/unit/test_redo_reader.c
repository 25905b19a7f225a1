/* The incremental redo reader and the MariaDB record decoder, on logs
 * written by redo_synth.h: whole and byte-by-byte feeds, tail-block
 * rewrites, torn tails, CRC damage, sequence-bit wraps, garbage, headers
 * and checkpoints. */
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "ppl/redo.h"
#include "redo_synth.h"

#define MAXM 4096
struct seen {
	int n;
	uint64_t start[MAXM], end[MAXM];
	uint32_t tag[MAXM];
	uint64_t seen[MAXM];
};

static uint64_t clock_now; /* the sink's clock, set by a test before each feed */

static uint64_t test_clock(void *arg)
{
	(void)arg;
	return clock_now;
}

static int on_mtr(void *arg, const struct ppl_mtr *m)
{
	struct seen *s = arg;
	if (s->n < MAXM) {
		s->start[s->n] = m->start_lsn;
		s->end[s->n] = m->end_lsn;
		/* every synthetic mtr is one WRITE whose last 4 bytes are a tag */
		s->tag[s->n] = m->len >= 4 ? ppl_rd4(m->recs + m->len - 4) : 0;
		s->seen[s->n] = m->seen;
	}
	s->n++;
	return 0;
}

static struct ppl_redo_reader *reader(struct synlog *l, struct seen *s, enum ppl_redo_source source)
{
	memset(s, 0, sizeof *s);
	struct ppl_redo_sink sink = {.arg = s, .on_mtr = on_mtr};
	return ppl_redo_reader_new(&ppl_dialect_mariadb_10_8, l->size, source, &sink);
}

/* n mtrs of varying size, each tagged with its index. */
static void fill(struct synlog *l, int n, uint64_t *starts)
{
	for (int i = 0; i < n; i++) {
		uint8_t data[200], rec[256];
		size_t len = 4 + (size_t)(i * 37 % 150);
		memset(data, 0xa0 + i % 16, len);
		ppl_wr4(data + len - 4, (uint32_t)i);
		size_t r = syn_write_rec(rec, 5, 3 + (uint32_t)i % 7, 100 + (uint32_t)(i % 50), data, len);
		uint64_t s = syn_mtr(l, rec, r);
		if (starts)
			starts[i] = s;
	}
}

static void test_whole_and_bytewise(void)
{
	struct synlog l;
	syn_init(&l, 1 << 20, 12288);
	uint64_t starts[300];
	fill(&l, 300, starts);
	struct seen s;
	/* A file image: the zeros after the end are not evidence of damage. */
	struct ppl_redo_reader *r = reader(&l, &s, PPL_REDO_FILE_IMAGE);
	CHECK(ppl_redo_feed(r, 0, l.file, l.size) == 0);
	CHECK_EQ_U(s.n, 300);
	CHECK(ppl_redo_stall(r) == PPL_FRAME_END);
	for (int i = 0; i < 300 && i < s.n; i++) {
		CHECK_EQ_U(s.start[i], starts[i]);
		CHECK_EQ_U(s.tag[i], i);
	}
	CHECK_EQ_U(ppl_redo_lsn(r), l.lsn);
	CHECK(ppl_redo_finish(r) == 0);
	ppl_redo_reader_free(r);
	/* The same bytes as server writes: a megabyte written past an end
	 * marker is no proof of damage by itself (an NFS client's WRITEs
	 * arrive out of order; a killed server leaves a torn write)... */
	r = reader(&l, &s, PPL_REDO_WRITES);
	CHECK(ppl_redo_feed(r, 0, l.file, l.size) == 0);
	CHECK_EQ_U(s.n, 300);
	CHECK(ppl_redo_stall(r) == PPL_FRAME_END);
	/* ...a page write asked about past it is. */
	CHECK(ppl_redo_durable(r, l.lsn + 100) == -1);
	CHECK_EQ_U(s.n, 300);
	CHECK(strstr(ppl_redo_error(r), "end marker") != NULL);
	CHECK(strstr(ppl_redo_error(r), "page write") != NULL);
	ppl_redo_reader_free(r);

	/* One byte at a time, header first: the same mtrs, never a partial one. */
	r = reader(&l, &s, PPL_REDO_WRITES);
	size_t end = syn_off(&l, l.lsn);
	for (size_t off = 0; off < end; off++)
		CHECK(ppl_redo_feed(r, off, l.file + off, 1) == 0);
	CHECK_EQ_U(s.n, 299); /* the last write's byte is provisional... */
	uint8_t ck[64];
	syn_checkpoint(ck, l.lsn, l.lsn);
	CHECK(ppl_redo_feed(r, 8192, ck, sizeof(ck)) == 0);
	CHECK_EQ_U(s.n, 300); /* ...until the server's checkpoint passes it */
	CHECK_EQ_U(s.tag[299], 299);
	ppl_redo_reader_free(r);
	free(l.file);
}

/* The server writes whole blocks: the partial tail block is written with a
 * NUL after the last mtr and rewritten, longer, by the next write. */
static void test_tail_rewrite(void)
{
	struct synlog l;
	syn_init(&l, 1 << 20, 12288);
	struct seen s;
	struct ppl_redo_reader *r = reader(&l, &s, PPL_REDO_WRITES);
	CHECK(ppl_redo_feed(r, 0, l.file, SYN_AREA) == 0);
	uint8_t blk[4096];
	uint64_t written = l.lsn; /* LSN up to which the previous write went */
	for (int i = 0; i < 200; i++) {
		fill(&l, 1 + i % 3, NULL);
		size_t from = syn_off(&l, written) & ~(size_t)511;
		size_t to = syn_off(&l, l.lsn);
		size_t to_blk = (to + 511) & ~(size_t)511;
		memset(blk, 0x5a, sizeof blk); /* stale bytes beyond the end marker */
		memcpy(blk, l.file + from, to - from);
		blk[to - from] = 0;
		CHECK(ppl_redo_feed(r, from, blk, to_blk - from) == 0);
		written = l.lsn;
	}
	uint8_t ck[64];
	syn_checkpoint(ck, l.lsn, l.lsn);
	CHECK(ppl_redo_feed(r, 4096, ck, sizeof(ck)) == 0);
	CHECK_EQ_U(ppl_redo_lsn(r), l.lsn);
	CHECK(ppl_redo_state(r) == PPL_REDO_WAITING);
	CHECK(ppl_redo_stats(r)->rewrites > 0);
	ppl_redo_reader_free(r);
	free(l.file);
}

/* Each mtr carries the clock of the write that first held it whole: the
 * tail-block write of a commit, though only the next write makes it final
 * and parsed; not an earlier write whose tail held other bytes there (old
 * buffer contents that frame as an mtr, then rewritten). */
static void test_seen(void)
{
	struct synlog l;
	syn_init(&l, 1 << 20, 12288);
	struct seen s;
	memset(&s, 0, sizeof s);
	struct ppl_redo_sink sink = {.arg = &s, .on_mtr = on_mtr, .clock = test_clock};
	struct ppl_redo_reader *r = ppl_redo_reader_new(&ppl_dialect_mariadb_10_8, l.size, PPL_REDO_WRITES, &sink);
	clock_now = 1;
	CHECK(ppl_redo_feed(r, 0, l.file, SYN_AREA) == 0);
	static uint64_t want[MAXM];
	int made = 0;
	uint8_t blk[4096];
	uint64_t written = l.lsn;
	for (int i = 0; i < 100; i++) {
		int k = 1 + i % 3;
		fill(&l, k, NULL);
		for (int j = 0; j < k; j++)
			want[made++] = 10 + (uint64_t)i;
		size_t from = syn_off(&l, written) & ~(size_t)511, to = syn_off(&l, l.lsn);
		size_t to_blk = (to + 511) & ~(size_t)511;
		memset(blk, 0x5a, sizeof blk);
		memcpy(blk, l.file + from, to - from);
		blk[to - from] = 0;
		clock_now = 10 + (uint64_t)i;
		CHECK(ppl_redo_feed(r, from, blk, to_blk - from) == 0);
		written = l.lsn;
	}
	CHECK(s.n < made); /* the last write's mtrs wait for the next */
	/* junk over the tail block: the real end, then a copy of an earlier
	 * mtr where the server's next one will be */
	size_t end = syn_off(&l, l.lsn), from = end & ~(size_t)511;
	uint64_t m1 = s.start[2], m1len = s.end[2] - s.start[2]; /* tag 1: the next real one is tag 0 */
	CHECK(end - from + m1len <= 512);
	memcpy(blk, l.file + from, end - from);
	memcpy(blk + (end - from), l.file + syn_off(&l, m1), m1len);
	memset(blk + (end - from) + m1len, 0, 512 - (end - from) - m1len);
	clock_now = 500;
	CHECK(ppl_redo_feed(r, from, blk, 512) == 0);
	/* the server's real next write, later */
	fill(&l, 20, NULL);
	for (int j = 0; j < 20; j++)
		want[made++] = 600;
	clock_now = 600;
	CHECK(ppl_redo_feed(r, from, l.file + from, syn_off(&l, l.lsn) - from) == 0);
	uint8_t ck[64];
	syn_checkpoint(ck, l.lsn, l.lsn);
	clock_now = 700;
	CHECK(ppl_redo_feed(r, 4096, ck, sizeof(ck)) == 0);
	CHECK_EQ_U(s.n, made);
	for (int i = 0; i < s.n && i < made; i++)
		CHECK_EQ_U(s.seen[i], want[i]);
	ppl_redo_reader_free(r);
	free(l.file);
}

/* A storage node restarting reads the log file to its end, then follows
 * the server's writes, the first of which rewrites the tail block. */
static void test_file_then_live(void)
{
	struct synlog l;
	syn_init(&l, 1 << 20, 12288);
	fill(&l, 100, NULL);
	struct seen s;
	struct ppl_redo_reader *r = reader(&l, &s, PPL_REDO_FILE_IMAGE);
	memset(l.file + syn_off(&l, l.lsn), 0x5a, 64 << 10); /* an old pass's bytes beyond the end */
	CHECK(ppl_redo_feed(r, 0, l.file, l.size) == 0);
	CHECK_EQ_U(s.n, 100);
	CHECK(ppl_redo_go_live(r) == 0);
	uint64_t written = l.lsn;
	fill(&l, 3, NULL);
	size_t from = syn_off(&l, written) & ~(size_t)511, to = syn_off(&l, l.lsn);
	uint8_t blk[4096];
	memcpy(blk, l.file + from, to - from);
	blk[to - from] = 0;
	CHECK(ppl_redo_feed(r, from, blk, to + 1 - from) == 0);
	CHECK_EQ_U(s.n, 100); /* the tail block is provisional */
	/* the server goes on from its tail block */
	from = to & ~(size_t)511;
	fill(&l, 80, NULL);
	CHECK(ppl_redo_feed(r, from, l.file + from, syn_off(&l, l.lsn) - from) == 0);
	CHECK(s.n >= 103);
	CHECK_EQ_U(s.tag[102], 2);
	/* live now: an end marker the server's checkpoint passes is damage */
	static uint8_t zeros[3 * 4096];
	uint8_t ck[64];
	syn_checkpoint(ck, l.lsn, l.lsn);
	CHECK(ppl_redo_feed(r, 8192, ck, sizeof(ck)) == 0);
	CHECK(ppl_redo_feed(r, syn_off(&l, l.lsn), zeros, sizeof zeros) == 0);
	syn_checkpoint(ck, l.lsn, l.lsn + 5000);
	CHECK(ppl_redo_feed(r, 4096, ck, sizeof(ck)) == -1);
	CHECK(strstr(ppl_redo_error(r), "end marker") != NULL);
	CHECK(strstr(ppl_redo_error(r), "checkpoint") != NULL);
	CHECK(ppl_redo_go_live(r) == -1);
	ppl_redo_reader_free(r);
	free(l.file);
}

/* MariaDB writes its partial tail block from a buffer other threads keep
 * appending to: seen through a FUSE client, a 512-byte write carried, past
 * its last mini-transaction and with no end marker, old buffer contents
 * that parse as valid mini-transactions. They are never emitted; the
 * server's next write replaces them. */
static void test_tail_block_junk(void)
{
	struct synlog l;
	syn_init(&l, 1 << 20, 12288);
	uint64_t starts[200];
	fill(&l, 100, starts);
	struct seen s;
	struct ppl_redo_reader *r = reader(&l, &s, PPL_REDO_WRITES);
	size_t end = syn_off(&l, l.lsn);
	CHECK(ppl_redo_feed(r, 0, l.file, end) == 0);
	uint8_t ck[64];
	syn_checkpoint(ck, l.lsn, l.lsn);
	CHECK(ppl_redo_feed(r, 8192, ck, sizeof(ck)) == 0);
	CHECK_EQ_U(s.n, 100);
	/* the tail block: the real end, then mtr 50 again where an end marker should be */
	size_t from = end & ~(size_t)511;
	uint8_t blk[512];
	memcpy(blk, l.file + from, end - from);
	size_t m50 = syn_off(&l, starts[50]), m50len = (size_t)(starts[51] - starts[50]);
	size_t k = end - from;
	while (k + m50len <= sizeof blk) {
		memcpy(blk + k, l.file + m50, m50len);
		k += m50len;
	}
	CHECK(ppl_redo_feed(r, from, blk, sizeof blk) == 0);
	CHECK_EQ_U(s.n, 100);
	/* the next write: the real mini-transactions from the tail block on */
	fill(&l, 100, NULL);
	CHECK(ppl_redo_feed(r, from, l.file + from, syn_off(&l, l.lsn) - from) == 0);
	CHECK(ppl_redo_state(r) != PPL_REDO_CORRUPT);
	CHECK(s.n > 150);
	for (int i = 100; i < s.n && i < MAXM; i++)
		CHECK_EQ_U(s.tag[i], (uint32_t)(i - 100));
	ppl_redo_reader_free(r);
	free(l.file);
}

/* The same junk, but over the last block of a longer write: that write
 * is final up to its end, yet the rest of its last block after the end
 * marker is not log, and a lone block written over it later (copied while
 * other threads append) is no more final than any other. Seen with
 * MariaDB over ppl-mount: the junk parsed as a mini-transaction MariaDB
 * never wrote there, and the next write then failed the CRC. */
static void test_junk_over_long_write_tail(void)
{
	struct synlog l;
	syn_init(&l, 1 << 20, 12288);
	uint64_t starts[200];
	fill(&l, 100, starts);
	struct seen s;
	struct ppl_redo_reader *r = reader(&l, &s, PPL_REDO_WRITES);
	CHECK(ppl_redo_feed(r, 0, l.file, SYN_AREA) == 0);
	size_t end = syn_off(&l, l.lsn);
	CHECK(end % 512 != 0);
	/* the long write: whole blocks, an end marker, stale bytes after it */
	size_t to_blk = (end + 511) & ~(size_t)511;
	static uint8_t w[1 << 16];
	memcpy(w, l.file + SYN_AREA, end - SYN_AREA);
	memset(w + (end - SYN_AREA), 0x5a, to_blk - end);
	w[end - SYN_AREA] = 0;
	CHECK(ppl_redo_feed(r, SYN_AREA, w, to_blk - SYN_AREA) == 0);
	CHECK_EQ_U(s.n, 100);
	CHECK(ppl_redo_stall(r) == PPL_FRAME_END);
	/* a lone block over its last block: the real end, then a copy of
	 * mtr 50 (valid on its own) where the server's next mtr will be */
	size_t from = end & ~(size_t)511;
	uint8_t blk[512];
	memcpy(blk, l.file + from, end - from);
	size_t m50 = syn_off(&l, starts[50]), m50len = (size_t)(starts[51] - starts[50]);
	CHECK(end - from + m50len <= sizeof blk);
	memcpy(blk + (end - from), l.file + m50, m50len);
	memset(blk + (end - from) + m50len, 0, sizeof blk - (end - from) - m50len);
	CHECK(ppl_redo_feed(r, from, blk, sizeof blk) == 0);
	CHECK_EQ_U(s.n, 100); /* mtr 50 is not emitted a second time */
	/* the server's next writes: the real mini-transactions from that block on */
	fill(&l, 100, NULL);
	size_t next = syn_off(&l, l.lsn);
	CHECK(ppl_redo_feed(r, from, l.file + from, next - from) == 0);
	CHECK(ppl_redo_state(r) != PPL_REDO_CORRUPT);
	uint8_t ck[64];
	syn_checkpoint(ck, l.lsn, l.lsn);
	CHECK(ppl_redo_feed(r, 4096, ck, sizeof(ck)) == 0);
	CHECK_EQ_U(s.n, 200);
	for (int i = 100; i < s.n && i < MAXM; i++) {
		CHECK_EQ_U(s.tag[i], (uint32_t)(i - 100));
		CHECK_EQ_U(s.start[i], s.end[i - 1]);
	}
	CHECK_EQ_U(ppl_redo_lsn(r), l.lsn);
	ppl_redo_reader_free(r);
	free(l.file);
}

/* A page write asked about at an LSN proves the log durable up to it: the
 * provisional tail write becomes final that far, and no further. */
static void test_durable_mark(void)
{
	struct synlog l;
	syn_init(&l, 1 << 20, 12288);
	fill(&l, 100, NULL);
	struct seen s;
	struct ppl_redo_reader *r = reader(&l, &s, PPL_REDO_WRITES);
	size_t end = syn_off(&l, l.lsn);
	CHECK(ppl_redo_feed(r, 0, l.file, end) == 0);
	uint8_t ck[64];
	syn_checkpoint(ck, l.lsn, l.lsn);
	CHECK(ppl_redo_feed(r, 8192, ck, sizeof(ck)) == 0);
	CHECK_EQ_U(s.n, 100);
	uint64_t starts[3];
	fill(&l, 3, starts);
	uint64_t last_end = l.lsn;
	size_t from = end & ~(size_t)511, to = syn_off(&l, l.lsn);
	CHECK(to - from <= 4096);
	CHECK(ppl_redo_feed(r, from, l.file + from, to - from) == 0);
	CHECK_EQ_U(s.n, 100); /* provisional: nothing parsed */
	CHECK(ppl_redo_durable(r, last_end + 100) == 0);
	CHECK_EQ_U(s.n, 100); /* the reader does not hold those bytes */
	CHECK(ppl_redo_durable(r, starts[1] + 3) == 0);
	CHECK_EQ_U(s.n, 101); /* mtr 101 is cut by the mark */
	CHECK(ppl_redo_state(r) != PPL_REDO_CORRUPT);
	CHECK(ppl_redo_durable(r, last_end) == 0);
	CHECK_EQ_U(s.n, 103);
	CHECK_EQ_U(ppl_redo_lsn(r), last_end);
	CHECK_EQ_U(ppl_redo_stats(r)->durable_marks, 2);
	ppl_redo_reader_free(r);
	free(l.file);
}

/* One flush of a buffered log through an NFS client: the stale tail block
 * (the log's end then an end marker) went out earlier; now the next pages
 * arrive before the rewrite of that block. No damage: the rewrite follows,
 * and every mini-transaction comes out once, in order. (Seen in mtr's
 * innodb.blob-crash: "end marker, with 8699 bytes written beyond it".) */
static void test_out_of_order_flush(void)
{
	struct synlog l;
	syn_init(&l, 1 << 20, 12288);
	uint64_t starts[400];
	fill(&l, 50, starts);
	struct seen s;
	struct ppl_redo_reader *r = reader(&l, &s, PPL_REDO_WRITES);
	size_t end = syn_off(&l, l.lsn);
	size_t page = end & ~(size_t)4095;
	CHECK(ppl_redo_feed(r, 0, l.file, page) == 0);
	/* the tail page as it was: the log's end, then zeros (an end marker) */
	static uint8_t stale[4096];
	memcpy(stale, l.file + page, end - page);
	CHECK(ppl_redo_feed(r, page, stale, sizeof stale) == 0);
	uint64_t before = l.lsn;
	fill(&l, 150, starts + 50);
	size_t end2 = syn_off(&l, l.lsn);
	CHECK(end2 > page + 3 * 4096);
	/* the pages after it come first, in two WRITEs */
	CHECK(ppl_redo_feed(r, page + 4096, l.file + page + 4096, 4096) == 0);
	CHECK(ppl_redo_feed(r, page + 8192, l.file + page + 8192, end2 - page - 8192) == 0);
	CHECK(ppl_redo_state(r) != PPL_REDO_CORRUPT);
	CHECK_EQ_U(ppl_redo_lsn(r), before); /* stalled at the stale end marker */
	/* then the tail page's rewrite, then the server's next write */
	CHECK(ppl_redo_feed(r, page, l.file + page, 4096) == 0);
	fill(&l, 20, starts + 200);
	size_t from = end2 & ~(size_t)511;
	CHECK(ppl_redo_feed(r, from, l.file + from, syn_off(&l, l.lsn) - from) == 0);
	uint8_t ck[64];
	syn_checkpoint(ck, l.lsn, l.lsn);
	CHECK(ppl_redo_feed(r, 8192, ck, sizeof ck) == 0);
	CHECK(ppl_redo_state(r) != PPL_REDO_CORRUPT);
	CHECK_EQ_U(s.n, 220);
	for (int i = 0; i < s.n && i < MAXM; i++)
		CHECK_EQ_U(s.start[i], starts[i]);
	ppl_redo_reader_free(r);
	free(l.file);
}

/* A server killed inside a write: the write is torn (its first pages
 * reached the file, an mtr cut in the middle, the rest old bytes). Its
 * recovery stops at the last whole mtr and writes on from there. No
 * damage, and the cut mtr's bytes are never emitted. */
static void test_torn_write_then_recovery(void)
{
	struct synlog l;
	syn_init(&l, 1 << 20, 12288);
	uint64_t starts[400];
	fill(&l, 40, starts);
	struct seen s;
	struct ppl_redo_reader *r = reader(&l, &s, PPL_REDO_WRITES);
	size_t written = syn_off(&l, l.lsn);
	CHECK(ppl_redo_feed(r, 0, l.file, written) == 0);
	fill(&l, 200, starts + 40);
	/* the torn write: from the tail block, cut inside mtr 150, zeros after */
	size_t from = written & ~(size_t)511, cut = syn_off(&l, starts[150]) + 5;
	size_t to = (syn_off(&l, l.lsn) + 4095) & ~(size_t)4095;
	static uint8_t torn[1 << 16];
	CHECK(to - from <= sizeof torn);
	memset(torn, 0, sizeof torn);
	memcpy(torn, l.file + from, cut - from);
	CHECK(ppl_redo_feed(r, from, torn, to - from) == 0);
	CHECK_EQ_U(s.n, 150);
	CHECK(ppl_redo_state(r) != PPL_REDO_CORRUPT);
	/* recovery ends at mtr 150; the server writes new mtrs from there */
	struct synlog l2 = l;
	l2.file = malloc(l.size);
	memcpy(l2.file, l.file, l.size);
	l2.lsn = starts[150];
	memset(l2.file + syn_off(&l2, l2.lsn), 0, l.size - syn_off(&l2, l2.lsn));
	fill(&l2, 30, starts + 150);
	size_t rfrom = syn_off(&l2, starts[150]) & ~(size_t)511;
	CHECK(ppl_redo_feed(r, rfrom, l2.file + rfrom, syn_off(&l2, l2.lsn) - rfrom) == 0);
	uint8_t ck[64];
	syn_checkpoint(ck, l2.lsn, l2.lsn);
	CHECK(ppl_redo_feed(r, 8192, ck, sizeof ck) == 0);
	CHECK(ppl_redo_state(r) != PPL_REDO_CORRUPT);
	CHECK_EQ_U(s.n, 180);
	for (int i = 0; i < s.n && i < MAXM; i++) {
		CHECK_EQ_U(s.start[i], starts[i]);
		CHECK_EQ_U(s.tag[i], (uint32_t)(i < 40 ? i : i < 150 ? i - 40 : i - 150));
	}
	CHECK_EQ_U(ppl_redo_lsn(r), l2.lsn);
	ppl_redo_reader_free(r);
	free(l2.file);
	free(l.file);
}

/* A storage node restarting after a crash: the file's last write may hold
 * old buffer contents past the real end. Held bytes are not parsed until
 * the server's next write, which makes what precedes it final and replaces
 * the rest. */
static void test_hold(void)
{
	struct synlog l;
	syn_init(&l, 1 << 20, 12288);
	uint64_t starts[200];
	fill(&l, 100, starts);
	struct seen s;
	struct ppl_redo_reader *r = reader(&l, &s, PPL_REDO_FILE_IMAGE);
	size_t end = syn_off(&l, l.lsn), held = syn_off(&l, starts[90]);
	CHECK(ppl_redo_feed(r, 0, l.file, held) == 0);
	CHECK_EQ_U(s.n, 90);
	CHECK(ppl_redo_go_live(r) == 0);
	static uint8_t tail[8192];
	memcpy(tail, l.file + held, end - held);
	size_t k = end - held, m50 = syn_off(&l, starts[50]), m50len = (size_t)(starts[51] - starts[50]);
	while (k + m50len <= sizeof tail) { /* mtr 50 again where the end should be */
		memcpy(tail + k, l.file + m50, m50len);
		k += m50len;
	}
	CHECK(ppl_redo_hold(r, held, tail, k) == 0);
	CHECK_EQ_U(s.n, 90);
	CHECK(ppl_redo_state(r) != PPL_REDO_CORRUPT);
	/* the server's next write starts at the block of its real end */
	fill(&l, 40, NULL);
	size_t from = end & ~(size_t)511;
	CHECK(ppl_redo_feed(r, from, l.file + from, syn_off(&l, l.lsn) - from) == 0);
	CHECK(ppl_redo_state(r) != PPL_REDO_CORRUPT);
	CHECK(s.n >= 100);
	for (int i = 0; i < s.n && i < MAXM; i++)
		CHECK_EQ_U(s.tag[i], (uint32_t)(i < 100 ? i : i - 100));
	ppl_redo_reader_free(r);
	free(l.file);
}

static void test_torn_tail(void)
{
	struct synlog l;
	syn_init(&l, 1 << 20, 12288);
	uint64_t starts[10];
	fill(&l, 10, starts);
	struct seen s;
	struct ppl_redo_reader *r = reader(&l, &s, PPL_REDO_FILE_IMAGE);
	size_t cut = syn_off(&l, starts[9]) + 7; /* the last mtr only half there */
	CHECK(ppl_redo_feed(r, 0, l.file, cut) == 0);
	CHECK_EQ_U(s.n, 9);
	CHECK_EQ_U(ppl_redo_lsn(r), starts[9]);
	CHECK(ppl_redo_stall(r) == PPL_FRAME_MORE);
	CHECK(ppl_redo_finish(r) == 0); /* a torn tail is the end of the log, not damage */
	CHECK(ppl_redo_feed(r, cut, l.file + cut, syn_off(&l, l.lsn) - cut) == 0);
	CHECK_EQ_U(s.n, 10);
	ppl_redo_reader_free(r);
	free(l.file);
}

static void test_bad_crc(void)
{
	struct synlog l;
	syn_init(&l, 1 << 20, 12288);
	uint64_t starts[100];
	fill(&l, 100, starts);
	l.file[syn_off(&l, starts[40]) + 3] ^= 0x40; /* damage inside mtr 40 */
	struct seen s;
	struct ppl_redo_reader *r = reader(&l, &s, PPL_REDO_WRITES);
	CHECK(ppl_redo_feed(r, 0, l.file, l.size) == 0);
	CHECK_EQ_U(s.n, 40); /* everything before, nothing after */
	CHECK(ppl_redo_stall(r) == PPL_FRAME_CRC);
	uint8_t ck0[64];
	syn_checkpoint(ck0, starts[0], starts[60]);
	CHECK(ppl_redo_feed(r, 8192, ck0, 64) == -1); /* the server vouches for mtr 60 */
	CHECK(ppl_redo_state(r) == PPL_REDO_CORRUPT);
	CHECK_EQ_U(s.n, 40);
	CHECK_EQ_U(ppl_redo_lsn(r), starts[40]);
	CHECK(strstr(ppl_redo_error(r), "CRC") != NULL);
	printf("bad crc: %s\n", ppl_redo_error(r));
	/* More bytes do not revive it. */
	CHECK(ppl_redo_feed(r, syn_off(&l, starts[50]), l.file + syn_off(&l, starts[50]), 10) == -1);
	CHECK_EQ_U(s.n, 40);
	ppl_redo_reader_free(r);

	/* Damage in the last mtr, nothing beyond: a stall, not yet an error;
	 * a checkpoint beyond it proves damage. */
	r = reader(&l, &s, PPL_REDO_WRITES);
	struct synlog l2;
	syn_init(&l2, 1 << 20, 12288);
	fill(&l2, 5, starts);
	l2.file[syn_off(&l2, starts[4]) + 10] ^= 1;
	ppl_redo_reader_free(r);
	r = reader(&l2, &s, PPL_REDO_WRITES);
	CHECK(ppl_redo_feed(r, 0, l2.file, syn_off(&l2, l2.lsn)) == 0);
	CHECK_EQ_U(s.n, 0); /* all in the write's provisional end */
	uint8_t ck[64];
	syn_checkpoint(ck, starts[0], l2.lsn);
	CHECK(ppl_redo_feed(r, 8192, ck, 64) == -1);
	CHECK_EQ_U(s.n, 4);
	CHECK(ppl_redo_stall(r) == PPL_FRAME_CRC);
	CHECK(strstr(ppl_redo_error(r), "checkpoint") != NULL);
	ppl_redo_reader_free(r);
	free(l2.file);
	free(l.file);
}

/* A damaged length makes a mini-transaction claim more bytes than the
 * server wrote: the parse waits for them, until a checkpoint says the
 * log ends inside what it claims. */
static void test_damaged_length(void)
{
	struct synlog l;
	syn_init(&l, 1 << 20, 12288);
	uint64_t starts[100];
	fill(&l, 60, starts);
	/* the last mtr's first record: a WRITE whose extended length (a
	 * 3-byte varint, 16512 + 15) runs far past the end of the log */
	size_t at = syn_off(&l, starts[59]);
	struct seen s;
	struct ppl_redo_reader *r = reader(&l, &s, PPL_REDO_WRITES);
	l.file[at] = 0x30;
	l.file[at + 1] = 0xc0;
	l.file[at + 2] = 0;
	l.file[at + 3] = 0;
	CHECK(ppl_redo_feed(r, 0, l.file, syn_off(&l, l.lsn)) == 0);
	CHECK(s.n <= 59);
	CHECK(ppl_redo_stall(r) == PPL_FRAME_MORE);
	uint8_t ck[64];
	syn_checkpoint(ck, starts[0], l.lsn);
	int rc = ppl_redo_feed(r, 8192, ck, sizeof ck);
	CHECK(rc == -1);
	CHECK(ppl_redo_state(r) == PPL_REDO_CORRUPT);
	CHECK(strstr(ppl_redo_error(r), "incomplete") != NULL);
	printf("damaged length: %s\n", ppl_redo_error(r));
	ppl_redo_reader_free(r);
	free(l.file);
}

/* A small circular area written over several times: every mtr comes out
 * once, in order, across wraps and sequence-bit flips; bytes of an older
 * pass past the end are never taken for records. */
static void test_wraps(void)
{
	struct synlog l;
	syn_init(&l, 8192, 12288);
	struct seen s;
	struct ppl_redo_reader *r = reader(&l, &s, PPL_REDO_WRITES);
	CHECK(ppl_redo_feed(r, 0, l.file, SYN_AREA) == 0);
	int total = 0;
	uint64_t written = l.lsn;
	for (int round = 0; round < 150; round++) {
		fill(&l, 5, NULL);
		total += 5;
		/* feed [written, lsn) in file order, splitting at the wrap */
		uint64_t a = written;
		while (a < l.lsn) {
			size_t off = syn_off(&l, a);
			size_t n = l.size - off;
			if (n > l.lsn - a)
				n = (size_t)(l.lsn - a);
			CHECK(ppl_redo_feed(r, off, l.file + off, n) == 0);
			a += n;
		}
		written = l.lsn;
	}
	CHECK(s.n < total); /* the last write's end is provisional... */
	uint8_t ck[64];
	syn_checkpoint(ck, l.lsn, l.lsn);
	CHECK(ppl_redo_feed(r, 4096, ck, sizeof(ck)) == 0);
	CHECK_EQ_U(s.n, total); /* ...until a checkpoint covers it */
	CHECK((l.lsn - l.first_lsn) / 8192 >= 3); /* really wrapped several times */
	for (int i = 1; i < s.n && i < MAXM; i++)
		CHECK(s.start[i] == s.end[i - 1]);
	/* A rewrite of bytes behind the parse point adds nothing. */
	size_t back = syn_off(&l, l.lsn - 600);
	if (back + 600 <= l.size) {
		CHECK(ppl_redo_feed(r, back, l.file + back, 600) == 0);
		CHECK_EQ_U(s.n, total);
		CHECK(ppl_redo_stats(r)->ignored_old_bytes >= 600);
	}
	/* What follows the end in the file is the previous pass: its sequence
	 * bit stops the parse (fed as a file image, not as writes). */
	struct seen s2;
	struct ppl_redo_reader *r2 = reader(&l, &s2, PPL_REDO_FILE_IMAGE);
	CHECK(ppl_redo_feed(r2, 0, l.file, SYN_AREA) == 0);
	CHECK(ppl_redo_start_at(r2, s.start[s.n - 1]) == 0);
	size_t o = syn_off(&l, s.start[s.n - 1]);
	CHECK(ppl_redo_feed(r2, o, l.file + o, l.size - o) == 0);
	CHECK(ppl_redo_feed(r2, SYN_AREA, l.file + SYN_AREA, o - SYN_AREA) == 0);
	CHECK_EQ_U(s2.n, 1);
	CHECK(ppl_redo_stall(r2) == PPL_FRAME_SEQ);
	ppl_redo_reader_free(r2);
	ppl_redo_reader_free(r);
	free(l.file);
}

static void test_garbage(void)
{
	uint32_t seed = 12345;
	for (int round = 0; round < 200; round++) {
		struct synlog l;
		syn_init(&l, 65536, 12288);
		fill(&l, 20, NULL);
		uint64_t good = l.lsn;
		/* random bytes after the good mtrs */
		for (size_t i = syn_off(&l, good); i < l.size; i++) {
			seed = seed * 1103515245 + 12345;
			l.file[i] = (uint8_t)(seed >> 16);
		}
		struct seen s;
		struct ppl_redo_reader *r = reader(&l, &s, PPL_REDO_WRITES);
		int k = ppl_redo_feed(r, 0, l.file, l.size);
		CHECK(k == 0 || k == -1);
		CHECK_EQ_U(s.n, 20); /* garbage never parses as a mini-transaction */
		CHECK(ppl_redo_lsn(r) == good);
		ppl_redo_reader_free(r);
		free(l.file);
	}
}

static void test_header(void)
{
	struct synlog l;
	syn_init(&l, 65536, 12288);
	struct seen s;
	struct ppl_redo_reader *r = reader(&l, &s, PPL_REDO_WRITES);
	l.file[20] ^= 1; /* creator byte: header CRC breaks */
	CHECK(ppl_redo_feed(r, 0, l.file, 512) == -1);
	CHECK(strstr(ppl_redo_error(r), "checksum") != NULL);
	ppl_redo_reader_free(r);
	free(l.file);
	/* encrypted format is refused with a clear message */
	syn_init(&l, 65536, 12288);
	ppl_wr4(l.file, 0x50687973u | 0x80000000u);
	ppl_wr4(l.file + 508, ppl_crc32c(0, l.file, 508));
	r = reader(&l, &s, PPL_REDO_WRITES);
	CHECK(ppl_redo_feed(r, 0, l.file, 512) == -1);
	CHECK(strstr(ppl_redo_error(r), "encrypted") != NULL);
	ppl_redo_reader_free(r);
	free(l.file);
	/* a file too small to hold a log */
	struct ppl_redo_sink sink = {0};
	CHECK(ppl_redo_reader_new(&ppl_dialect_mariadb_10_8, 4096, PPL_REDO_WRITES, &sink) == NULL);

	/* checkpoints: the newer valid block wins; a damaged one is ignored */
	syn_init(&l, 65536, 12288);
	fill(&l, 3, NULL);
	syn_checkpoint(l.file + 8192, 12288 + 10, 12288 + 20);
	r = reader(&l, &s, PPL_REDO_WRITES);
	CHECK(ppl_redo_feed(r, 0, l.file, SYN_AREA) == 0);
	CHECK(ppl_redo_checkpoint(r) && ppl_redo_checkpoint(r)->lsn == 12288 + 10);
	uint8_t ck[64];
	syn_checkpoint(ck, 12288 + 30, 12288 + 40);
	ck[61] ^= 1;
	CHECK(ppl_redo_feed(r, 4096, ck, 64) == 0);
	CHECK(ppl_redo_checkpoint(r)->lsn == 12288 + 10);
	ppl_redo_reader_free(r);
	free(l.file);
}

static void test_records(void)
{
	uint8_t m[512];
	size_t n = 0;
	uint8_t d[3] = {1, 2, 3};
	n += syn_write_rec(m + n, 7, 9, 50, d, 3);
	/* same-page MEMSET: offset +2, length 10, pattern 0xee */
	m[n++] = 0x80 | 0x40 | 3;
	m[n++] = 2;
	m[n++] = 10;
	m[n++] = 0xee;
	/* FILE_CREATE space 7 "./d/t.ibd" */
	const char *name = "./d/t.ibd";
	m[n++] = (uint8_t)(0x80 | (2 + strlen(name)));
	m[n++] = 7;
	m[n++] = 0;
	memcpy(m + n, name, strlen(name));
	n += strlen(name);
	struct ppl_rec_iter it;
	struct ppl_rec r;
	ppl_rec_iter_init(&it, m, n, 16384);
	CHECK(ppl_rec_next(&it, &r) == 1);
	CHECK(r.kind == PPL_RK_PAGE && r.type == PPL_REC_WRITE && r.space_id == 7 && r.page_no == 9 && !r.same_page);
	CHECK(ppl_rec_next(&it, &r) == 1);
	CHECK(r.kind == PPL_RK_PAGE && r.type == PPL_REC_MEMSET && r.same_page && r.page_no == 9);
	CHECK_EQ_U(it.last_offset, 50 + 3 + 2 + 10);
	/* a FILE_ record after page records would read as same_page: MariaDB
	 * writes them in mtrs of their own */
	struct ppl_rec_iter it2;
	ppl_rec_iter_init(&it2, m + (n - 2 - strlen(name) - 1), 3 + strlen(name), 16384);
	CHECK(ppl_rec_next(&it2, &r) == 1);
	CHECK(r.kind == PPL_RK_FILE && r.type == PPL_FILE_CREATE && r.space_id == 7 && r.name_len == strlen(name));
	CHECK(ppl_rec_next(&it2, &r) == 0);

	/* malformed: WRITE past the page end; record longer than the mtr */
	uint8_t big[40];
	size_t k = syn_write_rec(big, 1, 3, 16380, d, 3);
	CHECK(k > 0);
	big[k - 3] = 0; /* keep structure */
	ppl_rec_iter_init(&it, big, k, 16384);
	CHECK(ppl_rec_next(&it, &r) == 1);
	ppl_rec_iter_init(&it, big, k, 4096); /* offset 16380 outside a 4K page */
	CHECK(ppl_rec_next(&it, &r) == -1);
	CHECK(it.err[0] != 0);
	ppl_rec_iter_init(&it, big, k - 2, 16384);
	CHECK(ppl_rec_next(&it, &r) == -1);
	/* padding: FILE_CHECKPOINT+1 with a NUL */
	uint8_t pad[2] = {0xf1, 0};
	ppl_rec_iter_init(&it, pad, 2, 16384);
	CHECK(ppl_rec_next(&it, &r) == 1 && r.kind == PPL_RK_PADDING);
	/* RESERVED type is refused */
	uint8_t res[4] = {0x62, 1, 3};
	ppl_rec_iter_init(&it, res, 3, 16384);
	CHECK(ppl_rec_next(&it, &r) == -1);
}

/* The new log a clone starts on (ppl_mariadb_fresh_log): its header and
 * checkpoint read back at the LSN asked for, and the record area holds
 * exactly one mini-transaction there, a FILE_CHECKPOINT naming that LSN,
 * then the log's end. */
static void test_fresh_log(void)
{
	enum { SIZE = 1 << 20 };
	static uint8_t file[SIZE];
	const uint64_t lsn = 123456789;
	size_t n = ppl_mariadb_fresh_log(file, sizeof file, lsn, "ppl clone");
	CHECK(n > ppl_dialect_mariadb_10_8.area_start);
	CHECK(ppl_mariadb_fresh_log(file, 100, lsn, "x") == 0);
	struct seen s;
	memset(&s, 0, sizeof s);
	struct ppl_redo_sink sink = {.arg = &s, .on_mtr = on_mtr};
	struct ppl_redo_reader *r = ppl_redo_reader_new(&ppl_dialect_mariadb_10_8, SIZE, PPL_REDO_FILE_IMAGE, &sink);
	CHECK(ppl_redo_feed(r, 0, file, ppl_dialect_mariadb_10_8.area_start) == 0);
	CHECK(ppl_redo_header(r) != NULL && ppl_redo_header(r)->first_lsn == lsn);
	CHECK(strcmp(ppl_redo_header(r)->creator, "ppl clone") == 0);
	CHECK(ppl_redo_checkpoint(r) != NULL && ppl_redo_checkpoint(r)->lsn == lsn &&
	      ppl_redo_checkpoint(r)->end_lsn == lsn);
	CHECK(ppl_redo_start_at(r, lsn) == 0);
	size_t area = ppl_dialect_mariadb_10_8.area_start;
	CHECK(ppl_redo_feed(r, area, file + area, SIZE - area) == 0);
	CHECK(ppl_redo_finish(r) == 0);
	CHECK_EQ_U(s.n, 1);
	CHECK_EQ_U(s.start[0], lsn);
	CHECK_EQ_U(ppl_redo_lsn(r), s.end[0]);
	CHECK(ppl_redo_stall(r) == PPL_FRAME_END);
	struct ppl_rec_iter it;
	struct ppl_rec rec;
	ppl_rec_iter_init(&it, file + area, s.end[0] - s.start[0] - 5, 16384);
	CHECK(ppl_rec_next(&it, &rec) > 0);
	CHECK(rec.kind == PPL_RK_CHECKPOINT && rec.checkpoint_lsn == lsn);
	CHECK(ppl_rec_next(&it, &rec) == 0);
	ppl_redo_reader_free(r);
}

int main(void)
{
	test_fresh_log();
	test_whole_and_bytewise();
	test_tail_rewrite();
	test_seen();
	test_file_then_live();
	test_tail_block_junk();
	test_junk_over_long_write_tail();
	test_durable_mark();
	test_damaged_length();
	test_out_of_order_flush();
	test_torn_write_then_recovery();
	test_hold();
	test_torn_tail();
	test_bad_crc();
	test_wraps();
	test_garbage();
	test_header();
	test_records();
	CHECK_DONE();
}
