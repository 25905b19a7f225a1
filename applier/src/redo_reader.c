/* The incremental redo reader: turns log writes (file offset + bytes, in
 * the order the server issued them, tail-block rewrites included) into
 * verified mini-transactions in LSN order.
 *
 * It keeps a window of log bytes in LSN space starting at the parse point.
 * A write is placed by its distance from the parse point's file offset in
 * the circular area; a write that starts behind the parse point (the
 * rewrite of the partial tail block) contributes only its bytes ahead of
 * it. Parsing stops at the first thing that is not a whole valid
 * mini-transaction; such a stall is normal at the end of what has been
 * written, and becomes an error only when the server vouches for log
 * beyond it: a checkpoint whose log ends past it, or a page write asked
 * about at an LSN past it (ppl_redo_durable). Bytes written past a stall
 * prove nothing by themselves: an NFS client delivers one flush's WRITEs
 * out of order (the next pages before the rewrite of the stale tail block
 * that ends in an end marker), and a server killed inside a write leaves
 * a torn end that its recovery stops at and then writes over. Nothing
 * past a stall is ever emitted.
 *
 * A write of one block is provisional: MariaDB writes a lone partial block
 * from the buffer other threads keep appending to while the write is in
 * flight, so what follows its last mini-transaction may be old buffer
 * contents that parse as valid, complete mini-transactions, with no end
 * marker before them (seen through a FUSE client, which copies the buffer
 * late). Longer writes come from a buffer nobody touches any more. The
 * server starts every write at the block holding its write position, so
 * bytes before a write's start are final, and so are the bytes of a write
 * longer than a block up to its end marker: the rest of its last block is
 * old buffer contents, which the next write replaces -- and if that write
 * is a lone block, with bytes that are again provisional. Only final
 * bytes are parsed. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ppl/redo.h"

/* The largest block MariaDB writes alone: 4096 with O_DIRECT, 512 buffered. */
#define PROVISIONAL 4096

struct pending {
	uint64_t lsn;
	size_t len;
	struct pending *next;
	uint8_t data[];
};

#define SEEN_MARKS 256

struct ppl_redo_reader {
	const struct ppl_redo_dialect *d;
	struct ppl_redo_sink sink;
	uint64_t file_size, capacity;
	enum ppl_redo_source source;

	uint8_t hdrbuf[512];
	size_t hdr_fill;
	bool have_hdr;
	struct ppl_log_header hdr;

	uint8_t ckbuf[2][64];
	size_t ck_fill[2];
	bool have_ck;
	struct ppl_checkpoint ck;

	bool started;
	bool holding;           /* ppl_redo_hold(): bytes placed, nothing confirmed */
	uint64_t lsn;           /* LSN of buf[0] = next mtr start */
	uint64_t final;         /* bytes below this LSN are final (server writes) */
	uint64_t vouched;       /* the server said its log is durable up to here */
	uint8_t *buf;
	size_t fill, alloc;
	struct pending *pend;   /* sorted by lsn */

	/* When the writes first held the log whole up to where (sink.clock):
	 * a queue of marks, ends and times both rising, that a rewrite
	 * changing bytes below an end pulls that end back. */
	uint64_t framed;        /* whole mtrs from lsn reach here (0: walk again) */
	struct seen_mark { uint64_t end, at; } seen[SEEN_MARKS];
	unsigned seen_head, seen_n;

	enum ppl_frame stall;
	enum ppl_redo_state state;
	char err[512];
	struct ppl_redo_stats st;
};

struct ppl_redo_reader *ppl_redo_reader_new(const struct ppl_redo_dialect *d, uint64_t file_size,
					    enum ppl_redo_source source, const struct ppl_redo_sink *sink)
{
	if (file_size <= d->area_start)
		return NULL;
	struct ppl_redo_reader *r = calloc(1, sizeof *r);
	if (!r)
		return NULL;
	r->d = d;
	r->sink = *sink;
	r->file_size = file_size;
	r->capacity = file_size - d->area_start;
	r->source = source;
	r->stall = PPL_FRAME_MORE;
	return r;
}

static void drop_pending(struct ppl_redo_reader *r)
{
	while (r->pend) {
		struct pending *p = r->pend;
		r->pend = p->next;
		free(p);
	}
	r->framed = 0;
	r->seen_n = 0;
}

/* How far whole, valid mtrs reach in the window from buf[pos], looking at
 * no byte at or past buf[end]: the position where the next one would
 * start. Final or not, it does not ask. */
static size_t frames_end(const struct ppl_redo_reader *r, size_t pos, size_t end)
{
	while (pos < end) {
		size_t total, rl;
		if (r->d->frame(r->buf + pos, end - pos, r->lsn + pos, r->hdr.first_lsn, r->capacity, &total, &rl) !=
		    PPL_FRAME_OK)
			break;
		pos += total;
	}
	return pos;
}

/* ---- when the writes first held an mtr ------------------------------------ */

/* Called after a feed placed its bytes: how far whole mtrs now reach from
 * the parse point, over every byte held, final or not -- a commit's mtr
 * is in its tail-block write, before MariaDB acknowledges the commit, and
 * is final only at the next write. */
static void note_framed(struct ppl_redo_reader *r)
{
	if (!r->sink.clock || !r->started || r->state == PPL_REDO_CORRUPT)
		return;
	size_t pos = r->framed > r->lsn && r->framed - r->lsn <= r->fill ? (size_t)(r->framed - r->lsn) : 0;
	pos = frames_end(r, pos, r->fill);
	r->framed = r->lsn + pos;
	struct seen_mark *last = r->seen_n ? &r->seen[(r->seen_head + r->seen_n - 1) % SEEN_MARKS] : NULL;
	if (pos == 0 || (last && last->end >= r->framed))
		return;
	if (r->seen_n == SEEN_MARKS) { /* never while the log is parsed: lose the oldest */
		r->seen_head = (r->seen_head + 1) % SEEN_MARKS;
		r->seen_n--;
	}
	r->seen[(r->seen_head + r->seen_n++) % SEEN_MARKS] = (struct seen_mark){r->framed, r->sink.clock(r->sink.arg)};
}

/* A rewrite changed the byte at lsn: no earlier write held the log past it. */
static void note_changed(struct ppl_redo_reader *r, uint64_t lsn)
{
	for (unsigned i = 0; i < r->seen_n; i++) {
		struct seen_mark *m = &r->seen[(r->seen_head + i) % SEEN_MARKS];
		if (m->end > lsn)
			m->end = lsn;
	}
	if (r->framed > lsn)
		r->framed = 0;
}

/* The first mark reaching end: the marks before it will not serve the mtrs
 * after this one either. */
static uint64_t seen_of(struct ppl_redo_reader *r, uint64_t end)
{
	while (r->seen_n && r->seen[r->seen_head].end < end) {
		r->seen_head = (r->seen_head + 1) % SEEN_MARKS;
		r->seen_n--;
	}
	if (r->seen_n)
		return r->seen[r->seen_head].at;
	return r->sink.clock ? r->sink.clock(r->sink.arg) : 0;
}

void ppl_redo_reader_free(struct ppl_redo_reader *r)
{
	if (!r)
		return;
	drop_pending(r);
	free(r->buf);
	free(r);
}

uint64_t ppl_redo_offset_of(const struct ppl_redo_reader *r, uint64_t lsn)
{
	return r->d->area_start + (lsn - r->hdr.first_lsn) % r->capacity;
}

uint64_t ppl_redo_capacity(const struct ppl_redo_reader *r)
{
	return r->capacity;
}

int64_t ppl_redo_distance_at(const struct ppl_redo_reader *r, uint64_t off, uint64_t near)
{
	uint64_t ahead = (off + r->capacity - ppl_redo_offset_of(r, near)) % r->capacity;
	return ahead < r->capacity / 2 ? (int64_t)ahead : -(int64_t)(r->capacity - ahead);
}

static int corrupt(struct ppl_redo_reader *r, const char *why)
{
	r->state = PPL_REDO_CORRUPT;
	snprintf(r->err, sizeof r->err,
		 "redo log damaged at LSN %llu (file offset %llu): %s; nothing after this LSN is applied. "
		 "Check the log device and the client's writes; pages newer than this LSN must come from full page writes",
		 (unsigned long long)r->lsn, (unsigned long long)ppl_redo_offset_of(r, r->lsn), why);
	return -1;
}

static const char *stall_name(enum ppl_frame f)
{
	switch (f) {
	case PPL_FRAME_END: return "end marker";
	case PPL_FRAME_SEQ: return "sequence bit of an older pass";
	case PPL_FRAME_CRC: return "mini-transaction CRC-32C mismatch";
	case PPL_FRAME_BAD: return "bytes that are not a mini-transaction";
	default: return "incomplete mini-transaction";
	}
}

/* A stall is a damage report when the server vouches for log past it. */
static int judge_stall(struct ppl_redo_reader *r)
{
	if (r->stall == PPL_FRAME_OK)
		return 0;
	char why[200];
	if (r->stall == PPL_FRAME_MORE) {
		/* A mini-transaction whose end has not arrived, unless a
		 * checkpoint says the log ends past its start and every byte
		 * up to there is here: a checkpoint's end is the end of a
		 * mini-transaction, so this one claims more than was written
		 * (a damaged length). (A page write's LSN is one too, but the
		 * reader does not rely on that.) */
		size_t have = r->fill; /* what the frame was given: only final bytes of a server's writes */
		if (r->source != PPL_REDO_FILE_IMAGE)
			have = r->final > r->lsn ? (r->final - r->lsn < have ? (size_t)(r->final - r->lsn) : have) : 0;
		if (!r->have_ck || r->ck.end_lsn <= r->lsn || r->lsn + have < r->ck.end_lsn)
			return 0;
		snprintf(why, sizeof why, "incomplete mini-transaction that runs past the end of the log at the "
			 "checkpoint written at LSN %llu", (unsigned long long)r->ck.end_lsn);
		return corrupt(r, why);
	}
	if (r->vouched > r->lsn) {
		snprintf(why, sizeof why, "%s, before LSN %llu, up to which a page write says the log is durable",
			 stall_name(r->stall), (unsigned long long)r->vouched);
		return corrupt(r, why);
	}
	if (r->have_ck && r->ck.end_lsn > r->lsn) {
		snprintf(why, sizeof why, "%s, before the checkpoint written at LSN %llu", stall_name(r->stall),
			 (unsigned long long)r->ck.end_lsn);
		return corrupt(r, why);
	}
	return 0;
}

static int parse(struct ppl_redo_reader *r)
{
	if (r->state == PPL_REDO_CORRUPT)
		return -1;
	size_t pos = 0;
	int ret = 0;
	for (;;) {
		size_t total, rl, avail = r->fill - pos;
		if (r->source != PPL_REDO_FILE_IMAGE)
			avail = r->final > r->lsn ? (r->final - r->lsn < avail ? (size_t)(r->final - r->lsn) : avail) : 0;
		enum ppl_frame f = r->d->frame(r->buf + pos, avail, r->lsn, r->hdr.first_lsn, r->capacity,
					       &total, &rl);
		r->stall = f;
		if (f != PPL_FRAME_OK)
			break;
		struct ppl_mtr m = {r->lsn, r->lsn + total, r->buf + pos, rl, 0};
		if (r->sink.clock && r->source != PPL_REDO_FILE_IMAGE)
			m.seen = seen_of(r, m.end_lsn);
		if (r->sink.on_mtr && (ret = r->sink.on_mtr(r->sink.arg, &m)) != 0)
			break;
		r->st.mtrs++;
		r->st.rec_bytes += rl;
		pos += total;
		r->lsn += total;
	}
	if (pos) {
		memmove(r->buf, r->buf + pos, r->fill - pos);
		r->fill -= pos;
	}
	/* An end marker is where the writer's log ended: what its write
	 * carried after it is old buffer contents, final only once another
	 * write or a durable mark says so. */
	if (r->stall == PPL_FRAME_END && r->source != PPL_REDO_FILE_IMAGE)
		r->final = r->lsn;
	if (ret)
		return ret;
	return judge_stall(r);
}

static int reserve(struct ppl_redo_reader *r, size_t need)
{
	if (need <= r->alloc)
		return 0;
	size_t n = r->alloc ? r->alloc : 1 << 20;
	while (n < need)
		n *= 2;
	uint8_t *b = realloc(r->buf, n);
	if (!b)
		return -1;
	r->buf = b;
	r->alloc = n;
	return 0;
}

/* Copies bytes for [lsn, lsn+len) into the window if they touch its
 * contiguous part; returns 1 if placed, 0 if they lie beyond a gap. */
static int place(struct ppl_redo_reader *r, uint64_t lsn, const uint8_t *p, size_t len)
{
	if (lsn + len <= r->lsn)
		return 1;
	if (lsn < r->lsn) {
		p += r->lsn - lsn;
		len -= r->lsn - lsn;
		lsn = r->lsn;
	}
	size_t at = (size_t)(lsn - r->lsn);
	if (at > r->fill)
		return 0;
	if (at < r->fill) {
		r->st.rewrites++;
		size_t over = r->fill - at < len ? r->fill - at : len;
		if ((r->seen_n || r->framed) && memcmp(r->buf + at, p, over) != 0) {
			size_t i = 0;
			while (r->buf[at + i] == p[i])
				i++;
			note_changed(r, lsn + i);
		}
	}
	if (reserve(r, at + len))
		return -1;
	memcpy(r->buf + at, p, len);
	if (at + len > r->fill)
		r->fill = at + len;
	return 1;
}

static int add_pending(struct ppl_redo_reader *r, uint64_t lsn, const uint8_t *p, size_t len)
{
	struct pending *n = malloc(sizeof *n + len);
	if (!n)
		return -1;
	n->lsn = lsn;
	n->len = len;
	memcpy(n->data, p, len);
	struct pending **pp = &r->pend;
	while (*pp && (*pp)->lsn <= lsn)
		pp = &(*pp)->next;
	n->next = *pp;
	*pp = n;
	return 0;
}

/* A server's write [lsn, lsn+len) reached the window: what it proves final.
 * A provisional write proves only the bytes before it, and its own bytes
 * are not final even where they replaced bytes that were: the rest of a
 * longer write's last block, past its end marker. */
static void confirm(struct ppl_redo_reader *r, uint64_t lsn, size_t len)
{
	if (len > PROVISIONAL) {
		if (lsn + len > r->final)
			r->final = lsn + len;
		return;
	}
	r->final = lsn > r->lsn ? lsn : r->lsn;
}

static int merge_pending(struct ppl_redo_reader *r)
{
	struct pending **pp = &r->pend;
	while (*pp) {
		struct pending *p = *pp;
		int k = place(r, p->lsn, p->data, p->len);
		if (k < 0)
			return -1;
		if (k) {
			confirm(r, p->lsn, p->len);
			*pp = p->next;
			free(p);
			pp = &r->pend; /* the window grew: earlier ones may fit now */
		} else {
			pp = &p->next;
		}
	}
	return 0;
}

static int feed_area(struct ppl_redo_reader *r, uint64_t off, const uint8_t *p, size_t len)
{
	if (!r->started) {
		r->st.ignored_old_bytes += len;
		return 0;
	}
	int64_t d = ppl_redo_distance_at(r, off, r->lsn);
	uint64_t delta, wstart, wlen = len;
	if (d < 0) {
		/* Starts behind the parse point: a rewrite of the tail block. */
		uint64_t back = (uint64_t)-d;
		wstart = r->lsn - back;
		if (len <= back) {
			r->st.ignored_old_bytes += len;
			return 0;
		}
		r->st.ignored_old_bytes += back;
		p += back;
		len -= (size_t)back;
		delta = 0;
	} else {
		delta = (uint64_t)d;
		wstart = r->lsn + delta;
	}
	uint64_t lsn = r->lsn + delta;
	int k = place(r, lsn, p, len);
	if (k < 0)
		return -1;
	if (!k)
		return r->holding ? 0 : add_pending(r, lsn, p, len);
	if (!r->holding)
		confirm(r, wstart, (size_t)wlen);
	return merge_pending(r);
}

static void feed_header(struct ppl_redo_reader *r, uint64_t off, const uint8_t *p, size_t len)
{
	size_t end = (size_t)(off + len > 512 ? 512 : off + len);
	memcpy(r->hdrbuf + off, p, end - off);
	if (off <= r->hdr_fill && end > r->hdr_fill)
		r->hdr_fill = end;
	if (r->hdr_fill < 512)
		return;
	r->st.header_writes++;
	struct ppl_log_header h;
	char err[256];
	if (r->d->parse_header(r->hdrbuf, &h, err, sizeof err)) {
		r->state = PPL_REDO_CORRUPT;
		snprintf(r->err, sizeof r->err, "%s", err);
		return;
	}
	bool fresh = !r->have_hdr || h.first_lsn != r->hdr.first_lsn || h.format != r->hdr.format;
	r->hdr = h;
	r->have_hdr = true;
	if (fresh) {
		/* A new log: records start at its first LSN. */
		r->have_ck = false;
		r->started = true;
		r->lsn = h.first_lsn;
		r->final = h.first_lsn;
		r->vouched = 0;
		r->fill = 0;
		r->stall = PPL_FRAME_MORE;
		if (r->state != PPL_REDO_CORRUPT)
			r->state = PPL_REDO_WAITING;
		drop_pending(r);
		if (r->sink.on_header)
			r->sink.on_header(r->sink.arg, &h);
	}
}

static void feed_checkpoint(struct ppl_redo_reader *r, int slot, uint64_t off, const uint8_t *p, size_t len)
{
	size_t sz = r->d->checkpoint_size;
	size_t end = (size_t)(off + len > sz ? sz : off + len);
	memcpy(r->ckbuf[slot] + off, p, end - off);
	if (off <= r->ck_fill[slot] && end > r->ck_fill[slot])
		r->ck_fill[slot] = end;
	if (r->ck_fill[slot] < sz || !r->have_hdr)
		return;
	r->st.checkpoint_writes++;
	struct ppl_checkpoint c;
	if (r->d->parse_checkpoint(r->ckbuf[slot], &r->hdr, &c))
		return; /* recovery ignores an invalid block and uses the other one */
	c.slot = slot;
	/* The server wrote and flushed the log up to the checkpoint's end
	 * before writing it: those bytes are final. */
	if (c.end_lsn > r->final)
		r->final = c.end_lsn;
	if (!r->have_ck || c.lsn >= r->ck.lsn) {
		r->ck = c;
		r->have_ck = true;
		if (r->sink.on_checkpoint)
			r->sink.on_checkpoint(r->sink.arg, &c);
	}
}

int ppl_redo_feed(struct ppl_redo_reader *r, uint64_t off, const void *buf, size_t len)
{
	const uint8_t *p = buf;
	r->st.bytes_fed += len;
	while (len) {
		size_t n;
		if (off < r->d->area_start) {
			n = (size_t)(r->d->area_start - off < len ? r->d->area_start - off : len);
			if (off < r->d->header_size)
				feed_header(r, off, p, n);
			for (int s = 0; s < 2; s++) {
				uint64_t lo = r->d->checkpoint_off[s], hi = lo + r->d->checkpoint_size;
				if (off < hi && off + n > lo) {
					uint64_t a = off > lo ? off : lo;
					feed_checkpoint(r, s, a - lo, p + (a - off),
							(size_t)((off + n < hi ? off + n : hi) - a));
				}
			}
		} else if (off < r->file_size) {
			/* A single write never crosses the end of the file, but
			 * a caller's chunk might: split it. */
			n = (size_t)(r->file_size - off < len ? r->file_size - off : len);
			if (feed_area(r, off, p, n))
				return corrupt(r, "out of memory buffering the log");
		} else {
			n = len; /* beyond the file size: not log */
		}
		off += n;
		p += n;
		len -= n;
		if (off == r->file_size)
			off = r->d->area_start;
	}
	if (r->state == PPL_REDO_CORRUPT)
		return -1;
	if (!r->started)
		return 0;
	if (r->source != PPL_REDO_FILE_IMAGE)
		note_framed(r);
	return parse(r);
}

int ppl_redo_hold(struct ppl_redo_reader *r, uint64_t off, const void *buf, size_t len)
{
	if (r->source == PPL_REDO_FILE_IMAGE)
		return 0;
	r->holding = true;
	int rc = ppl_redo_feed(r, off, buf, len);
	r->holding = false;
	return rc;
}

int ppl_redo_durable(struct ppl_redo_reader *r, uint64_t lsn)
{
	if (r->state == PPL_REDO_CORRUPT)
		return -1;
	if (!r->started || r->source == PPL_REDO_FILE_IMAGE || lsn > r->lsn + r->fill)
		return 0;
	if (lsn > r->vouched)
		r->vouched = lsn;
	if (lsn <= r->final)
		return judge_stall(r);
	r->final = lsn;
	r->st.durable_marks++;
	return parse(r);
}

bool ppl_redo_reaches(const struct ppl_redo_reader *r, uint64_t lsn)
{
	if (r->state == PPL_REDO_CORRUPT || !r->started || lsn < r->lsn || lsn - r->lsn > r->fill)
		return false;
	size_t end = (size_t)(lsn - r->lsn);
	return frames_end(r, 0, end) == end;
}

int ppl_redo_start_at(struct ppl_redo_reader *r, uint64_t lsn)
{
	if (!r->have_hdr || lsn < r->hdr.first_lsn)
		return -1;
	r->started = true;
	r->lsn = lsn;
	/* the checkpoint's end stays final (feed_checkpoint): the server
	 * flushed its log that far before it wrote the block */
	r->final = r->have_ck && r->ck.end_lsn > lsn ? r->ck.end_lsn : lsn;
	r->vouched = 0;
	r->fill = 0;
	r->stall = PPL_FRAME_MORE;
	drop_pending(r);
	return 0;
}

int ppl_redo_go_live(struct ppl_redo_reader *r)
{
	if (r->state == PPL_REDO_CORRUPT)
		return -1;
	r->source = PPL_REDO_WRITES;
	r->final = r->lsn; /* the file's log up to the parse point is final */
	r->fill = 0;
	r->stall = PPL_FRAME_MORE;
	drop_pending(r);
	return 0;
}

int ppl_redo_finish(struct ppl_redo_reader *r)
{
	if (r->state == PPL_REDO_CORRUPT)
		return -1;
	if (r->stall != PPL_FRAME_MORE && r->stall != PPL_FRAME_OK && r->have_ck && r->ck.end_lsn > r->lsn)
		return judge_stall(r);
	if (r->stall == PPL_FRAME_MORE && r->fill) {
		/* Bytes of an mtr whose end never arrived: harmless at the end
		 * of a log, but damage if a checkpoint lies beyond. */
		if (r->have_ck && r->ck.end_lsn > r->lsn)
			return corrupt(r, "mini-transaction cut short before the last checkpoint");
	}
	return 0;
}

uint64_t ppl_redo_lsn(const struct ppl_redo_reader *r) { return r->lsn; }

uint64_t ppl_redo_unparsed_bytes(const struct ppl_redo_reader *r)
{
	/* Not the window's fill: past an end marker it holds the rest of the
	 * tail block, old buffer contents that are no log at all. */
	uint64_t n = r->final > r->lsn ? r->final - r->lsn : 0;
	if (n > r->fill)
		n = r->fill;
	for (const struct pending *p = r->pend; p; p = p->next)
		n += p->len;
	return n;
}
const struct ppl_log_header *ppl_redo_header(const struct ppl_redo_reader *r) { return r->have_hdr ? &r->hdr : NULL; }
const struct ppl_checkpoint *ppl_redo_checkpoint(const struct ppl_redo_reader *r) { return r->have_ck ? &r->ck : NULL; }
enum ppl_redo_state ppl_redo_state(const struct ppl_redo_reader *r) { return r->state; }
const char *ppl_redo_error(const struct ppl_redo_reader *r) { return r->err; }
enum ppl_frame ppl_redo_stall(const struct ppl_redo_reader *r) { return r->stall; }
const struct ppl_redo_stats *ppl_redo_stats(const struct ppl_redo_reader *r) { return &r->st; }
