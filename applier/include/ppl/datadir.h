/* Which file of a MariaDB datadir holds a space id, found the way InnoDB
 * names them (ibdata*, undo*, db/table.ibd) and confirmed from each file's
 * page 0; page reads and durable page writes by (space, page). Used where
 * a page has to be fetched or put back by id: the doublewrite restore, the
 * elision decision's base page, materialization. Thread-safe; a space not
 * found makes it look again once (a table created since). Every file
 * operation goes through the I/O table given at open (ppl/io.h). */
#ifndef PPL_DATADIR_H
#define PPL_DATADIR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct ppl_datadir;
struct ppl_io;

/* NULL with a message in err if dir cannot be read. io: the file I/O
 * table (NULL: POSIX), used until ppl_datadir_close. */
struct ppl_datadir *ppl_datadir_open(const char *dir, const struct ppl_io *io, char *err, size_t errlen);
void ppl_datadir_close(struct ppl_datadir *d);
size_t ppl_datadir_spaces(struct ppl_datadir *d);
/* How many notes (from the log, and bindings learned from pages) are kept:
 * the live ones only. */
size_t ppl_datadir_notes(struct ppl_datadir *d);
/* The log says `relpath` (as InnoDB names it: "./db/t.ibd") holds space:
 * for files whose page 0 was never written. */
void ppl_datadir_note(struct ppl_datadir *d, uint32_t space, const char *relpath);
/* MariaDB's datadir turned out to be dir (found later than the map was
 * made): look there from now on. */
int ppl_datadir_set_root(struct ppl_datadir *d, const char *dir);
/* The file with this inode holds space (learned from a page of it). */
void ppl_datadir_bind(struct ppl_datadir *d, uint64_t ino, uint32_t space);
/* The file with this inode is gone (unlinked, or replaced by a rename):
 * what was learned from it must not apply to a new file that reuses the
 * inode number. */
void ppl_datadir_forget(struct ppl_datadir *d, uint64_t ino);
/* The log that named files is left behind (removed, replaced, another
 * datadir's): what it said, and what was bound from it, is forgotten, and
 * the files are known again by their page 0. */
void ppl_datadir_forget_notes(struct ppl_datadir *d);
/* The space a binding or a note of the log ties to the file with this
 * inode (not what its page 0 says: a copy's page 0 names the space of
 * the file it was copied from): 0, or -1 if none does. */
int ppl_datadir_bound_space(struct ppl_datadir *d, uint64_t ino, uint32_t *space);
/* Whether a file other than the one with inode ino is there and holds
 * space, by its page 0 or by a binding (the directory is looked at
 * again). */
bool ppl_datadir_held_elsewhere(struct ppl_datadir *d, uint32_t space, uint64_t ino);
/* The space held by the file with this inode: 0, or -1 if not known. */
int ppl_datadir_space_of(struct ppl_datadir *d, uint64_t ino, uint32_t *space);
/* The path of the space's file into out: 0, or -1 if there is none. */
int ppl_datadir_path(struct ppl_datadir *d, uint32_t space, char *out, size_t outlen);
/* Whether the space's file is there and is still that space's file (the
 * inode the map bound, page 0 naming the space once written): 0 with its
 * inode in *ino (may be NULL), or -1 with errno ENOENT (no file holds the
 * space any more) or ESTALE (the file under its name is another space's). */
int ppl_datadir_check(struct ppl_datadir *d, uint32_t space, uint64_t *ino);
/* ppl_datadir_check, answered from the file the datadir keeps open for
 * the space's reads when nothing the map knows of changed since it was
 * checked, less than a tenth of a second ago: a file moved or replaced
 * behind the export's back is seen that late (ppl_datadir_check, which
 * always looks at the directory, is for work that must not miss it). */
int ppl_datadir_known(struct ppl_datadir *d, uint32_t space, uint64_t *ino);
/* Shaped as ppl_pool_page_read_fn / _write_fn; arg is the datadir. A page
 * past the end of its file reads as zeros. write: 0 once durable. Both
 * touch only the file ppl_datadir_check accepts (errno as there); reads
 * go to the file kept open as ppl_datadir_known says. */
int ppl_datadir_read_page(void *arg, uint32_t space, uint32_t page_no, uint8_t *buf, size_t size);
int ppl_datadir_write_page(void *arg, uint32_t space, uint32_t page_no, const uint8_t *buf, size_t size);
/* The same, only if the space's file is still the file with inode ino (as
 * ppl_datadir_check gave it; 0: any the check accepts): work begun on one
 * file never lands in the file that replaced it meanwhile (ESTALE). */
int ppl_datadir_read_page_of(struct ppl_datadir *d, uint32_t space, uint64_t ino, uint32_t page_no, uint8_t *buf,
			     size_t size);
int ppl_datadir_write_page_of(struct ppl_datadir *d, uint32_t space, uint64_t ino, uint32_t page_no,
			      const uint8_t *buf, size_t size);
/* Several pages of one file written with one sync (a batch of
 * materializations): open as ppl_datadir_write_page_of checks the file
 * (fd, or -1 with errno), put pages (no sync; -1 with errno, ENOSPC for a
 * short write), then sync (0 once everything put is durable) and close. */
int ppl_datadir_open_write(struct ppl_datadir *d, uint32_t space, uint64_t ino);
int ppl_datadir_put_page(struct ppl_datadir *d, int fd, uint32_t page_no, const uint8_t *buf, size_t size);
int ppl_datadir_sync_close(struct ppl_datadir *d, int fd, bool sync);

#endif
