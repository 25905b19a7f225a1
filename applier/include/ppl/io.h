/* The store's file I/O, through a table of routines the host gives it
 * (struct ppl_store_env.io; ppl_datadir_open's io): every open, read,
 * write, sync, stat and directory listing the store (applier/src/store*.c)
 * and the datadir map (applier/src/datadir.c) make on the export's files
 * goes through it, as every OS call of SQLite goes through its VFS and
 * PostgreSQL's xlogreader reads through its routine table and private
 * data. ppl_io_posix() is the table of the system calls themselves.
 *
 * Why. A test gives a table that wraps POSIX and fails chosen calls on
 * chosen files (EIO from a page write, ENOSPC on a full disk, fdatasync
 * failing, a file vanishing between its lookup and its open) to check
 * what the store promises under them: a checkpoint is refused rather
 * than pass a page that is not durable, and a wrong page is never served
 * (tests/unit/test_store_faults.c). A host whose export is not a local
 * POSIX directory can give its own. The FSAL gives none (POSIX): its
 * sub-FSAL (VFS) writes the same local files.
 *
 * What the store promises about the calls:
 *   - open with O_RDONLY or O_RDWR only, never O_CREAT: the store never
 *     creates, removes, renames or truncates a file of the export (the
 *     host does, and tells the store). Each descriptor it opens is
 *     closed once, by the thread that opened it, and used only by that
 *     thread in between (the table may keep per-descriptor state).
 *   - pread of a page, of page 0's header, or of the log file; pwrite of
 *     a whole page (materialization, a doublewrite restore), or of log
 *     bytes the pool's log area holds (Log_On_Pmem's repair at start),
 *     each followed by sync before it counts as durable; sync of the log
 *     file behind MariaDB's log writes (Log_On_Pmem's syncer thread); stat and fstat
 *     for a file's existence, inode, type and size; list to scan the
 *     datadir (ibdata*, undo*, db/t.ibd) and the export (where
 *     ib_logfile0 is).
 *   - Errors are taken as the system calls give them: -1 and errno. A
 *     short pread is the end of the file (a page past it reads as
 *     zeros); a short pwrite is a full disk (ENOSPC). A failed pwrite or
 *     sync leaves the page where it was (its records in the index and
 *     the pool, its doublewrite slot kept): the checkpoint that needed
 *     it is refused, and the page is still served rebuilt.
 *   - Threads: the table is called concurrently from every thread that
 *     calls into the store (the host's I/O threads), the elision
 *     service's threads, the apply workers (Apply_Threads), and the
 *     thread that calls ppl_store_start_elision (the pool's doublewrite
 *     check at open); often with the store's locks held. It must be
 *     thread-safe and must not call back into the store.
 *   - The table and its arg are not copied: they must outlive the store
 *     (and the datadir map) they are given to.
 *
 * Not through it: the pmem pool (pool.c maps its file with libpmem, and
 * persistence there is cache flushes to the mapping, not file I/O of the
 * export), the check of Pool_Path in store_config.c (the pool again),
 * the host's own reads and writes of the files, and log lines
 * (struct ppl_store_env.log). */
#ifndef PPL_IO_H
#define PPL_IO_H

#include <stddef.h>
#include <sys/stat.h>
#include <sys/types.h>

/* What a directory entry is, as the listing knows it without a stat
 * (UNKNOWN: the caller stats the entry if it needs to know). */
enum ppl_io_type { PPL_IO_UNKNOWN, PPL_IO_FILE, PPL_IO_DIR, PPL_IO_OTHER };

/* Called for each entry of a listed directory but "." and ".."; a
 * non-zero return stops the listing, which returns that value. */
typedef int (*ppl_io_each_fn)(void *each_arg, const char *name, enum ppl_io_type type);

struct ppl_io {
	/* open(2) without a mode (the store never creates a file) */
	int (*open)(void *arg, const char *path, int flags);
	ssize_t (*pread)(void *arg, int fd, void *buf, size_t len, off_t off);
	ssize_t (*pwrite)(void *arg, int fd, const void *buf, size_t len, off_t off);
	/* fdatasync(2): 0 once what was written to fd is durable */
	int (*sync)(void *arg, int fd);
	int (*close)(void *arg, int fd);
	int (*stat)(void *arg, const char *path, struct stat *st);
	int (*fstat)(void *arg, int fd, struct stat *st);
	/* each entry of dir in turn: 0, -1 with errno (dir cannot be
	 * read), or the non-zero value `each` stopped with */
	int (*list)(void *arg, const char *dir, ppl_io_each_fn each, void *each_arg);
	void *arg;
};

/* The system calls themselves: a static table, arg unused. */
const struct ppl_io *ppl_io_posix(void);

#endif
