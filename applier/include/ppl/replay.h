/* Recovery without a server: apply a datadir's redo log, from its latest
 * checkpoint, to its data files (in place). The engine behind ppl-replay. */
#ifndef PPL_REPLAY_H
#define PPL_REPLAY_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "ppl/redo.h"

struct ppl_replay_opts {
	const char *datadir;      /* data files are found (and written) here */
	const char *logfile;      /* default: <datadir>/ib_logfile0 */
	uint64_t start_lsn;       /* 0 = the log's checkpoint */
	bool dry_run;             /* parse and apply in memory, write nothing */
	FILE *verbose;            /* per-file / per-space notes, or NULL */
	/* Every progress_every seconds (0: at every step), a line saying how
	 * far the read of the log (LSN, and the share of the range when its
	 * end is known) and the rebuilding of pages (done of to do) have
	 * come, or NULL: a long clone or replay must not look hung. The
	 * first line comes one interval after the start. */
	FILE *progress;
	double progress_every;
	bool trace;               /* print every mtr applied to trace_space:trace_page to verbose */
	/* A reference datadir recovered by other means (mariadb-backup
	 * --prepare): before each page is rebuilt, the storage engine is asked
	 * whether it can reproduce that reference page's LSN and checksum
	 * (the elision question); the answers are counted. */
	const char *elide_against;
	/* Rebuild pages in memory while the log is read, keeping no records:
	 * memory stays at the pages touched instead of growing with the log,
	 * at some cost in speed (pages are visited in log order, not file
	 * order). Default: keep every page's records in the storage engine's
	 * index, as the storage node does, and rebuild at the end. */
	bool stream;
	unsigned threads;         /* apply threads (index mode); 0 = 2 */
	/* Mini-transactions from a log archive (ppl/archive.h) instead of a
	 * log file: those ending after start_lsn (required: where the base
	 * copy's redo begins) up to stop_lsn (required: a mini-transaction's
	 * end, the point in time wanted) */
	const char *archive_dir;
	uint64_t stop_lsn;
	/* After the apply: a new ib_logfile0 of this many bytes (at least
	 * 1 MiB) whose checkpoint is the end LSN (ppl_mariadb_fresh_log), as
	 * mariadb-backup --prepare leaves it, so that mariadbd starts on the
	 * datadir with nothing to recover. 0: the log is left alone. */
	uint64_t new_log_size;
	uint32_t trace_space, trace_page;
};

struct ppl_replay_result {
	uint64_t start_lsn, end_lsn;
	uint64_t log_bytes, mtrs, records;
	uint64_t rec_by_type[16];           /* index: first byte >> 4 of PAGE records (0..7) */
	uint64_t rec_by_ext[PPL_EXT_COUNT];
	uint64_t file_recs[5];              /* CREATE, DELETE, RENAME, MODIFY, CHECKPOINT */
	uint64_t pages_touched, pages_written, pages_skipped_freed, mtrs_skipped_lsn;
	uint64_t spaces, files_created, files_deleted, files_extended;
	uint64_t elide_asked, elide_acked, elide_nacked;
	double parse_s, apply_s, total_s;
	char error[512];
};

/* Returns 0 on success; otherwise -1 and res->error says what and where. */
int ppl_replay_datadir(const struct ppl_replay_opts *o, struct ppl_replay_result *res);

#endif
