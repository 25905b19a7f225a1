/* The log archive: every mini-transaction the storage node accepts from
 * MariaDB's redo log, kept in LSN order in segment files, so that base
 * copies plus the archive give the database at any LSN after a base
 * (point-in-time clones, issue 20). MariaDB's own log is circular and
 * forgets; this is the same stream, unrolled and kept.
 *
 * NOTES
 *
 * On disk. A directory of segment files named by the first LSN they hold,
 * `seg-<16 hex digits>.ppla`, so that a listing sorted by name is in LSN
 * order. A segment is a 64-byte header and then records, appended:
 *
 *     header  "PPLARCH1" | u32 version | u32 reserved | u64 first_lsn |
 *             u64 created_ns | 28 zero bytes | u32 CRC-32C of the 60 before
 *     record  u32 length of the records | u64 start_lsn | u64 end_lsn |
 *             u64 wall_ns | u32 CRC-32C of these 28 bytes and the records |
 *             the mini-transaction's records (as ppl_mtr.recs)
 *
 * Integers are big-endian, as InnoDB writes them (ppl/mach.h). Every
 * record's start_lsn is the previous record's end_lsn, across segments:
 * a break in that chain is a missing piece of the archive, never
 * skipped. wall_ns is the storage
 * node's clock when it accepted the mini-transaction: the map from
 * wall-clock time to LSN is the records themselves (a clone "at 10:42"
 * ends at the last mini-transaction accepted by then).
 *
 * Durability. ppl_archive_append copies the record into memory and
 * returns: the commit that wrote the log never waits for the archive.
 * ppl_archive_flush writes what is buffered and syncs it (the host calls
 * it from a thread of its own, and before it lets MariaDB's log wrap over
 * bytes the archive has not made durable: ppl_archive_durable_lsn). After
 * a crash, the last segment may end in a torn record: ppl_archive_open
 * cuts it off at the first record that is short, fails its checksum or
 * breaks the chain of LSNs, and counts the bytes (torn_bytes_cut); the
 * host then feeds those mini-transactions again from the log, and if the
 * log no longer holds them, the next append finds the hole and says so.
 * Damage in any other segment is reported, never cut.
 *
 * Retention. ppl_archive_prune removes whole segments, oldest first,
 * while the archive is over its size limit or they are older than its
 * age limit, but never one holding an LSN at or above keep_from_lsn (what
 * the newest base still needs) and never the segment being written.
 *
 * Threads. One writer object per directory; append, flush and the
 * figures may be called from different threads (one mutex). Readers
 * (ppl_archive_read, ppl_archive_window, ppl_archive_lsn_at) open the
 * files themselves and can run beside the writer: they read what was
 * flushed. */
#ifndef PPL_ARCHIVE_H
#define PPL_ARCHIVE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ppl/redo.h"

#define PPL_ARCHIVE_VERSION 1
#define PPL_ARCHIVE_HEADER 64
#define PPL_ARCHIVE_RECORD_HEADER 32

struct ppl_archive_config {
	const char *dir;           /* an existing directory, the archive's own */
	uint64_t segment_bytes;    /* a segment is closed once it would grow past this (0: 64 MiB) */
	uint64_t retention_bytes;  /* ppl_archive_prune keeps the archive under this (0: no limit) */
	uint64_t retention_s;      /* and removes segments older than this (0: no limit) */
};

struct ppl_archive;

/* Opens the archive in cfg->dir (creating nothing until the first
 * append): checks every segment's header and the chain of LSNs between
 * segments, and reads the last segment to its end, cutting off a torn
 * last record. NULL with the reason in err when the directory cannot be
 * read or holds a damaged archive. */
struct ppl_archive *ppl_archive_open(const struct ppl_archive_config *cfg, char *err, size_t errlen);
/* Closes without a flush: what is still buffered is dropped (the host
 * flushes first what it may keep: only what MariaDB's log holds durably). */
void ppl_archive_close(struct ppl_archive *a);

/* The LSN the next record must start at (0 for an empty archive), and up
 * to which the archive is durable. */
uint64_t ppl_archive_end_lsn(struct ppl_archive *a);
uint64_t ppl_archive_durable_lsn(struct ppl_archive *a);

/* Appends one mini-transaction (buffered). A mini-transaction that ends
 * at or below the archive's end is already there (a restart parses the
 * log again from its checkpoint): 0, nothing added. One that starts past
 * the end would leave a hole: -1 with the two LSNs in err, nothing added
 * (the host decides: the archive cannot go on as one chain). */
int ppl_archive_append(struct ppl_archive *a, const struct ppl_mtr *m, uint64_t wall_ns, char *err, size_t errlen);

/* Writes the buffered records that end at or below upto_lsn (UINT64_MAX:
 * all) into the segment files, opening a new segment when the current
 * one is full, and syncs them: 0, or -1 with the file and the error in
 * err (what was not made durable stays buffered, to try again). The host
 * passes how far MariaDB's log file is durable: the archive never holds
 * a mini-transaction that a crash of the storage node could take out of
 * the log. */
int ppl_archive_flush(struct ppl_archive *a, uint64_t upto_lsn, char *err, size_t errlen);

/* Removes segments as the configuration's retention asks, never one that
 * holds an LSN >= keep_from_lsn (UINT64_MAX: no base constrains it) and
 * never the last. now_ns: the wall clock (the segments' ages). Returns
 * the number of segments removed, or -1 with err. */
int ppl_archive_prune(struct ppl_archive *a, uint64_t keep_from_lsn, uint64_t now_ns, char *err, size_t errlen);

struct ppl_archive_figures {
	uint64_t first_lsn, end_lsn, durable_lsn; /* the chain the archive holds (0s when empty) */
	uint64_t first_ns, last_ns;               /* wall clock of its first and last records */
	uint64_t segments, bytes;                 /* on disk */
	uint64_t buffered_bytes;                  /* appended, not yet flushed */
	uint64_t records_appended, flushes, segments_pruned;
	uint64_t torn_bytes_cut;                  /* cut off a torn last record at open */
};
void ppl_archive_get_figures(struct ppl_archive *a, struct ppl_archive_figures *f);

/* ---- Reading (no writer needed) ----------------------------------------- */

/* The window an archive directory covers: its first and end LSN, the
 * wall clock of its first and last records, and its size. Every record
 * is read and checked on the way. 0, or -1 with err (an empty archive,
 * or a damaged one: what and where). */
struct ppl_archive_window {
	uint64_t first_lsn, end_lsn, first_ns, last_ns;
	uint64_t records, segments, bytes;
};
int ppl_archive_window(const char *dir, struct ppl_archive_window *w, char *err, size_t errlen);

/* The end LSN of the last mini-transaction accepted at or before wall_ns:
 * where a clone "at that time" ends. -1 with the window in err when
 * wall_ns is before the archive's first record. */
int ppl_archive_lsn_at(const char *dir, uint64_t wall_ns, uint64_t *lsn, char *err, size_t errlen);

/* Every mini-transaction that ends after from_lsn and at or before
 * to_lsn, in LSN order, to on_mtr (a non-zero return stops the read and
 * is returned). to_lsn must be the end of a record. -1 with err when the
 * archive does not hold the whole range (before its first LSN, past its
 * end, a missing segment: the hole's LSNs) or a record in it is damaged
 * (the file and offset): never a silent skip. */
typedef int (*ppl_archive_mtr_fn)(void *arg, const struct ppl_mtr *m, uint64_t wall_ns);
int ppl_archive_read(const char *dir, uint64_t from_lsn, uint64_t to_lsn, ppl_archive_mtr_fn on_mtr, void *arg,
		     char *err, size_t errlen);

#endif
