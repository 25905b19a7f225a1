/* Reading an InnoDB redo log: an incremental reader that takes log bytes as
 * they are written (file offset + bytes) and emits complete,
 * checksum-verified mini-transactions in LSN order, plus the decoding of the
 * records inside one mini-transaction.
 *
 * The on-disk dialect (MariaDB 10.8+ "Phys" today) sits behind
 * struct ppl_redo_dialect so a MySQL 8.0 reader can be added beside it; the
 * reader itself knows nothing of record formats. */
#ifndef PPL_REDO_H
#define PPL_REDO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---- What a dialect tells the reader about a log file ---------------- */

struct ppl_log_header {
	uint32_t format;
	uint64_t first_lsn;   /* LSN at the start of the record area */
	char creator[33];
	bool encrypted;
};

struct ppl_checkpoint {
	uint64_t lsn;         /* recovery starts here */
	uint64_t end_lsn;     /* where the checkpoint's own mini-transaction was written */
	int slot;             /* 0 or 1 */
};

enum ppl_frame {
	PPL_FRAME_OK,         /* a whole valid mini-transaction */
	PPL_FRAME_MORE,       /* not all of it is here yet */
	PPL_FRAME_END,        /* an end marker (NUL after the last mtr) */
	PPL_FRAME_SEQ,        /* sequence bit of an older pass over the file */
	PPL_FRAME_CRC,        /* complete, but the CRC-32C does not match */
	PPL_FRAME_BAD,        /* not a mini-transaction (length runs away) */
};

struct ppl_redo_dialect {
	const char *name;
	size_t header_size;           /* bytes of the header block that matter */
	uint64_t checkpoint_off[2];
	size_t checkpoint_size;
	uint64_t area_start;          /* first byte of the circular record area */
	/* Returns 0, or -1 with a message in err. */
	int (*parse_header)(const uint8_t *blk, struct ppl_log_header *h, char *err, size_t errlen);
	/* Returns 0 when the checkpoint block is valid. */
	int (*parse_checkpoint)(const uint8_t *blk, const struct ppl_log_header *h, struct ppl_checkpoint *c);
	/* The LSNs a checkpoint block states (c->lsn, c->end_lsn), read
	 * from its first checkpoint_peek bytes and checked for nothing: for
	 * a storage node that must act on a checkpoint write before it lands
	 * (the write may carry only part of the block). */
	size_t checkpoint_peek;
	void (*peek_checkpoint)(const uint8_t *blk, struct ppl_checkpoint *c);
	/* Frames the mini-transaction starting at p (avail bytes) at lsn in a
	 * log whose record area starts at first_lsn and holds capacity bytes.
	 * On OK sets *total (bytes the mtr occupies in the log) and *recs_len
	 * (bytes of records). */
	enum ppl_frame (*frame)(const uint8_t *p, size_t avail, uint64_t lsn, uint64_t first_lsn,
				uint64_t capacity, size_t *total, size_t *recs_len);
};

extern const struct ppl_redo_dialect ppl_dialect_mariadb_10_8;

/* The first bytes of a new MariaDB 10.8+ log file whose checkpoint is
 * lsn: a header whose first LSN is lsn, both checkpoint blocks at lsn,
 * and at the start of the record area the FILE_CHECKPOINT
 * mini-transaction recovery looks for there -- the log MariaDB writes
 * when it makes a new one, and mariadb-backup --prepare leaves: MariaDB
 * starts on it with nothing to recover. The caller writes them at offset
 * 0 of a file of the log's size (the rest zeros). Returns the bytes
 * written into buf, or 0 when len is too small or lsn below the record
 * area. */
size_t ppl_mariadb_fresh_log(uint8_t *buf, size_t len, uint64_t lsn, const char *creator);

/* ---- The incremental reader ------------------------------------------ */

struct ppl_mtr {
	uint64_t start_lsn;
	uint64_t end_lsn;             /* start_lsn + bytes it occupies in the log */
	const uint8_t *recs;          /* records, valid only during the callback */
	size_t len;
	/* The sink's clock when the server's writes first held this mtr
	 * whole (0 without a clock). Not when it is parsed: a write's last
	 * block is final, and parsed, only at the next write, after the
	 * commit it carries was acknowledged. */
	uint64_t seen;
};

struct ppl_redo_sink {
	void *arg;
	/* Each verified mini-transaction, in LSN order. Non-zero return stops
	 * the feed; the reader stays at this mtr and returns that value. */
	int (*on_mtr)(void *arg, const struct ppl_mtr *m);
	void (*on_checkpoint)(void *arg, const struct ppl_checkpoint *c);
	/* A header with a new first LSN: the log was (re)created. */
	void (*on_header)(void *arg, const struct ppl_log_header *h);
	/* Optional: read at a feed that carries mtrs further (struct
	 * ppl_mtr's seen). Bytes a later write changes do not count as held:
	 * a tail block may carry old buffer contents that frame as mtrs. */
	uint64_t (*clock)(void *arg);
};

enum ppl_redo_state {
	PPL_REDO_WAITING,     /* everything written so far is parsed */
	PPL_REDO_CORRUPT,     /* bytes beyond the parse point prove the log is damaged */
};

struct ppl_redo_stats {
	uint64_t bytes_fed, mtrs, rec_bytes, rewrites, ignored_old_bytes, header_writes, checkpoint_writes;
	uint64_t durable_marks; /* ppl_redo_durable() calls that made bytes final */
};

struct ppl_redo_reader;

/* Where the bytes come from. PPL_REDO_WRITES: a server's writes, as they
 * arrive; a stall (end marker, CRC mismatch, ...) is damage only once the
 * server vouches for log beyond it (a checkpoint whose log ends past it, a
 * ppl_redo_durable() mark past it). PPL_REDO_FILE_IMAGE: a log file read
 * from its start; what lies past the end of the log is stale, and only a
 * checkpoint beyond a stall proves damage. */
enum ppl_redo_source { PPL_REDO_WRITES, PPL_REDO_FILE_IMAGE };

/* file_size: size of ib_logfile0 (the record area is circular within it). */
struct ppl_redo_reader *ppl_redo_reader_new(const struct ppl_redo_dialect *d, uint64_t file_size,
					    enum ppl_redo_source source, const struct ppl_redo_sink *sink);
void ppl_redo_reader_free(struct ppl_redo_reader *r);

/* Feeds bytes written at a file offset: header, checkpoint blocks, records,
 * rewrites of the tail block. Returns 0, a sink's non-zero value, or -1 if
 * the log is corrupt (ppl_redo_error() says why; nothing past the last valid
 * mtr was or will be emitted). */
int ppl_redo_feed(struct ppl_redo_reader *r, uint64_t off, const void *buf, size_t len);

/* After ppl_redo_go_live(): bytes the log file holds at off that may not be
 * final (the end of a file read after a crash: the last write before it
 * may carry, past the log's real end, old buffer contents that parse as
 * mini-transactions). They wait in the window, unparsed, for the server's
 * next write (which makes the bytes before its start final and replaces
 * the rest) or for ppl_redo_durable(). Ignored for a file image. */
int ppl_redo_hold(struct ppl_redo_reader *r, uint64_t off, const void *buf, size_t len);

/* The server says its log is durable up to lsn: InnoDB writes a page only
 * after flushing its log up to the page's LSN, so a page write asked about
 * at that LSN is such a statement (from an authenticated client). The bytes
 * the reader holds below lsn are then final, even those of a provisional
 * tail write, and are parsed. Ignored when the reader does not hold every
 * byte up to lsn (the write has not arrived: nothing is final then), and
 * for a file image. Returns like ppl_redo_feed(). */
int ppl_redo_durable(struct ppl_redo_reader *r, uint64_t lsn);

/* Whether the bytes the reader holds from its parse point up to lsn are
 * whole, valid mini-transactions, the last ending exactly at lsn: what a
 * server's statement that its log is durable up to lsn must find. A claim
 * from a source that may be wrong (a page write a tool may have made) is
 * checked with this first, so that it can never make old buffer contents
 * final or call an intact log damaged. Changes nothing. */
bool ppl_redo_reaches(const struct ppl_redo_reader *r, uint64_t lsn);

/* Starts (or restarts) parsing at lsn; needs a parsed header. Record bytes
 * fed before are dropped: call this before feeding the record area. */
int ppl_redo_start_at(struct ppl_redo_reader *r, uint64_t lsn);

/* The log read from the file so far ends at the parse point; from now on
 * the bytes come from a server's writes (PPL_REDO_WRITES). What was read
 * past the parse point is dropped: the server writes it again, starting
 * with its tail block. -1 if the log is already corrupt. */
int ppl_redo_go_live(struct ppl_redo_reader *r);

/* Call when no more bytes will come (batch replay): a stall that is
 * contradicted by a checkpoint beyond it becomes an error. */
int ppl_redo_finish(struct ppl_redo_reader *r);

uint64_t ppl_redo_lsn(const struct ppl_redo_reader *r);          /* next mtr start */
/* Log bytes the reader holds and has not parsed (the ingest lag, for the
 * metrics): bytes known final past the parse point (a stall), and writes
 * waiting beyond a gap. A lone tail-block write's bytes are not known to
 * be log until the next write, and are not counted. */
uint64_t ppl_redo_unparsed_bytes(const struct ppl_redo_reader *r);
uint64_t ppl_redo_offset_of(const struct ppl_redo_reader *r, uint64_t lsn);
/* Bytes of records the log file holds (its size less the header area): a
 * write at LSN l overwrites what was written at l - capacity. */
uint64_t ppl_redo_capacity(const struct ppl_redo_reader *r);
/* How far the log byte at file offset off (in the record area) lies from
 * the LSN near, in bytes: a writer goes sequentially, so a write within
 * half the log ahead of near is that far ahead (>= 0), and any other
 * rewrites what near already passed (< 0). */
int64_t ppl_redo_distance_at(const struct ppl_redo_reader *r, uint64_t off, uint64_t near);
const struct ppl_log_header *ppl_redo_header(const struct ppl_redo_reader *r); /* NULL before one */
const struct ppl_checkpoint *ppl_redo_checkpoint(const struct ppl_redo_reader *r); /* NULL before one */
enum ppl_redo_state ppl_redo_state(const struct ppl_redo_reader *r);
const char *ppl_redo_error(const struct ppl_redo_reader *r);
/* Why the reader is waiting at ppl_redo_lsn(): a ppl_frame value. */
enum ppl_frame ppl_redo_stall(const struct ppl_redo_reader *r);
const struct ppl_redo_stats *ppl_redo_stats(const struct ppl_redo_reader *r);

/* ---- Records inside one MariaDB 10.8+ mini-transaction --------------- */

/* Page record types: first byte & 0x70 (mrec_type_t). */
enum {
	PPL_REC_FREE_PAGE = 0x00,
	PPL_REC_INIT_PAGE = 0x10,
	PPL_REC_EXTENDED = 0x20,
	PPL_REC_WRITE = 0x30,
	PPL_REC_MEMSET = 0x40,
	PPL_REC_MEMMOVE = 0x50,
	PPL_REC_RESERVED = 0x60,
	PPL_REC_OPTION = 0x70,
};
/* File records: first byte & 0xf0 (mfile_type_t). */
enum {
	PPL_FILE_CREATE = 0x80,
	PPL_FILE_DELETE = 0x90,
	PPL_FILE_RENAME = 0xa0,
	PPL_FILE_MODIFY = 0xb0,
	PPL_FILE_CHECKPOINT = 0xf0,
};
/* EXTENDED subtypes (mrec_ext_t). */
enum {
	PPL_EXT_INIT_ROW_FORMAT_REDUNDANT = 0,
	PPL_EXT_INIT_ROW_FORMAT_DYNAMIC = 1,
	PPL_EXT_UNDO_INIT = 2,
	PPL_EXT_UNDO_APPEND = 3,
	PPL_EXT_INSERT_HEAP_REDUNDANT = 4,
	PPL_EXT_INSERT_REUSE_REDUNDANT = 5,
	PPL_EXT_INSERT_HEAP_DYNAMIC = 6,
	PPL_EXT_INSERT_REUSE_DYNAMIC = 7,
	PPL_EXT_DELETE_ROW_FORMAT_REDUNDANT = 8,
	PPL_EXT_DELETE_ROW_FORMAT_DYNAMIC = 9,
	PPL_EXT_TRIM_PAGES = 10,
	PPL_EXT_COUNT = 11,
};
#define PPL_OPT_PAGE_CHECKSUM 0

/* What recovery does with a record. */
enum ppl_rec_kind {
	PPL_RK_PAGE,      /* kept for its page and applied */
	PPL_RK_IGNORED,   /* optional record recovery does not keep (OPTION) */
	PPL_RK_FILE,      /* FILE_CREATE/DELETE/RENAME/MODIFY */
	PPL_RK_CHECKPOINT,/* FILE_CHECKPOINT with an LSN */
	PPL_RK_PADDING,   /* FILE_CHECKPOINT padding */
	PPL_RK_TRIM,      /* EXTENDED TRIM_PAGES: an undo tablespace is truncated */
};

struct ppl_rec {
	enum ppl_rec_kind kind;
	uint8_t type;             /* PPL_REC_* or PPL_FILE_* */
	int ext_subtype;          /* for EXTENDED, else -1 */
	bool same_page;
	uint32_t space_id, page_no;
	const uint8_t *raw;       /* the whole record */
	size_t raw_len;
	const uint8_t *body;      /* payload after the page id */
	size_t body_len;
	/* FILE_* names (not NUL-terminated); name2 only for FILE_RENAME. */
	const uint8_t *name, *name2;
	size_t name_len, name2_len;
	uint64_t checkpoint_lsn;  /* PPL_RK_CHECKPOINT */
};

struct ppl_rec_iter {
	const uint8_t *begin, *p, *end;
	bool got_page_op;
	uint32_t space_id, page_no;
	uint32_t last_offset;     /* validation of WRITE/MEMSET/MEMMOVE offsets */
	size_t page_size;         /* bound for offsets; 65536 if unknown */
	char err[160];
};

void ppl_rec_iter_init(struct ppl_rec_iter *it, const uint8_t *recs, size_t len, size_t page_size);
/* 1 = a record in *rec, 0 = end of the mini-transaction, -1 = malformed
 * (it->err says why). */
int ppl_rec_next(struct ppl_rec_iter *it, struct ppl_rec *rec);
const char *ppl_rec_type_name(uint8_t type, int ext_subtype);

#endif
