/* The seam between FSAL_PPL's NFS plumbing and the storage engine.
 *
 * The FSAL classifies every file by name (ppl_classify) and calls one of
 * these hooks at the exact point where the engine has to act; nothing here
 * knows Ganesha's types, so the engine side can be written and tested
 * without it. Each hook counts the operation per file class, logs it at
 * debug level and hands it to the engine (ppl_store.h): redo writes are
 * ingested before the WRITE is acknowledged, page reads are rebuilt, page
 * writes become bases.
 *
 * Ordering guarantees given by the call sites:
 * - ppl_hook_write: called after the sub-FSAL wrote the bytes (written
 *   through, durable if `stable`), before the NFS reply is sent. A nonzero
 *   return (an errno) fails the WRITE instead of acknowledging it: this is
 *   where redo is ingested before the ack (I2) and where the log-wrap guard
 *   may block (I3).
 * - ppl_hook_commit: after the sub-FSAL's COMMIT succeeded, before the
 *   reply; nonzero fails the COMMIT.
 * - ppl_hook_read: after the sub-FSAL filled the buffers, before the reply;
 *   the hook may rewrite the bytes in place (rebuilt pages). Nonzero fails
 *   the READ rather than serve a page that may be wrong.
 * - ppl_hook_resize: after a size change (SETATTR size) succeeded.
 * - ppl_hook_unlink / ppl_hook_rename: after the sub-FSAL did it.
 * All hooks may run concurrently from Ganesha's worker threads. */
#ifndef PPL_HOOKS_H
#define PPL_HOOKS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

enum ppl_file_class {
	PPL_FILE_OTHER = 0,    /* not InnoDB's: passes through untouched */
	PPL_FILE_REDO_LOG,     /* ib_logfile0 */
	PPL_FILE_REDO_NEW,     /* ib_logfile101: a log being re-created, renamed to ib_logfile0 */
	PPL_FILE_TABLESPACE,   /* *.ibd */
	PPL_FILE_SYSTEM_TS,    /* ibdata[0-9]* */
	PPL_FILE_UNDO_TS,      /* undo[0-9]* */
	PPL_FILE_UNRESOLVED,   /* regular file reached by handle only, name never seen */
	PPL_FILE_CLASS_COUNT
};

/* Class of a regular file by its name (the last path component). */
enum ppl_file_class ppl_classify(const char *name);
const char *ppl_file_class_name(enum ppl_file_class cls);
/* Files made of InnoDB pages: tablespaces, system and undo tablespaces. */
bool ppl_class_has_pages(enum ppl_file_class cls);

/* One file as the hooks see it. `fileid` is the sub-FSAL's file id (the
 * inode number for FSAL_VFS); `name` is the name the FSAL last saw for it,
 * or NULL when it was reached by handle only. */
struct ppl_file {
	enum ppl_file_class cls;
	uint64_t fileid;
	const char *name;
};

enum ppl_op {
	PPL_OP_READ,
	PPL_OP_WRITE,
	PPL_OP_COMMIT,
	PPL_OP_RESIZE,
	PPL_OP_UNLINK,
	PPL_OP_RENAME_FROM,
	PPL_OP_RENAME_TO,
	PPL_OP_COUNT
};

struct ppl_hook_counts {
	uint64_t ops[PPL_FILE_CLASS_COUNT][PPL_OP_COUNT];
	uint64_t bytes[PPL_FILE_CLASS_COUNT][PPL_OP_COUNT]; /* READ and WRITE only */
};

struct ppl_hooks;

/* datadir: the export's directory (the sub-FSAL's files on local disk). */
struct ppl_config;
/* NULL with a message in err (the export is refused). */
struct ppl_hooks *ppl_hooks_create(const char *datadir, const struct ppl_config *cfg, char *err, size_t errlen);
void ppl_hooks_destroy(struct ppl_hooks *h);
void ppl_hooks_snapshot(struct ppl_hooks *h, struct ppl_hook_counts *out);
/* "redo_log: write 3/1536 B, commit 1; tablespace: read 2/32768 B" for
 * the classes and operations that happened; "no InnoDB file activity"
 * otherwise. Returns the length (as snprintf). */
int ppl_hook_counts_format(const struct ppl_hook_counts *c, char *buf, size_t len);
/* The engine's figures for the stats line. */
int ppl_hooks_engine_format(struct ppl_hooks *h, char *buf, size_t len);
/* The pool's figures (elision on), for a stats line of their own: a
 * Ganesha log line holds at most 2 KiB. */
int ppl_hooks_pool_format(struct ppl_hooks *h, char *buf, size_t len);
/* The log archive's figures (Archive_Path set), likewise. */
int ppl_hooks_archive_format(struct ppl_hooks *h, char *buf, size_t len);

int ppl_hook_write(struct ppl_hooks *h, const struct ppl_file *f, uint64_t offset,
		   const struct iovec *iov, int iovcnt, size_t len, bool stable);
/* Before the sub-FSAL writes: may wait (a checkpoint write waits until
 * the pages it would make unrecoverable are materialized; a page write
 * waits while the engine materializes that page). Nonzero (an errno) fails
 * the WRITE without writing. Every successful call is paired with
 * ppl_hook_write_end() once the sub-FSAL's write completed (or failed). */
int ppl_hook_write_begin(struct ppl_hooks *h, const struct ppl_file *f, uint64_t offset,
			 const struct iovec *iov, int iovcnt, size_t len);
void ppl_hook_write_end(struct ppl_hooks *h, const struct ppl_file *f, uint64_t offset, size_t len);
/* Before and after the sub-FSAL reads a page file (paired like the write
 * hooks): the engine keeps materialization of those pages out meanwhile. */
void ppl_hook_read_begin(struct ppl_hooks *h, const struct ppl_file *f, uint64_t offset, size_t len);
void ppl_hook_read_end(struct ppl_hooks *h, const struct ppl_file *f, uint64_t offset, size_t len);
/* Log_On_Pmem: whether a WRITE of this file goes to the sub-FSAL without a
 * sync, to be made durable by ppl_hook_log_persist (true: answer it as
 * stable) after the sub-FSAL wrote it and before ppl_hook_write; false:
 * the FSAL syncs it itself if the client asked for a stable write. */
bool ppl_hook_log_on_pmem(struct ppl_hooks *h, const struct ppl_file *f);
bool ppl_hook_log_persist(struct ppl_hooks *h, const struct ppl_file *f, uint64_t offset, const struct iovec *iov,
			  int iovcnt, size_t len);
/* Taken before the sub-FSAL's COMMIT of a file, given to ppl_hook_commit
 * after it succeeded: a COMMIT of the log makes durable what was parsed
 * before it began (the log archive waits for that). */
uint64_t ppl_hook_commit_mark(struct ppl_hooks *h, const struct ppl_file *f);
int ppl_hook_commit(struct ppl_hooks *h, const struct ppl_file *f, uint64_t offset, size_t len, uint64_t mark);
/* read_ns: how long the sub-FSAL's read took (the READ latency figures) */
int ppl_hook_read(struct ppl_hooks *h, const struct ppl_file *f, uint64_t offset,
		  struct iovec *iov, int iovcnt, size_t len, uint64_t read_ns);
void ppl_hook_resize(struct ppl_hooks *h, const struct ppl_file *f, uint64_t new_size);
void ppl_hook_unlink(struct ppl_hooks *h, const struct ppl_file *f);
/* Before a page file is renamed to a name that is not a page file's. */
void ppl_hook_rename_away(struct ppl_hooks *h, const struct ppl_file *f);
/* `replaced` is the file the rename overwrote at the destination, or NULL. */
void ppl_hook_rename(struct ppl_hooks *h, const struct ppl_file *from, const struct ppl_file *to,
		     const struct ppl_file *replaced);

#endif
