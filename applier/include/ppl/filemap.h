/* Which space id a file (by its inode number, the NFS fileid) holds, as
 * learned from its pages or from the log: asked on every page read and
 * write, so lookups take no lock. Entries come and go with the files for
 * the life of a datadir (tables created and dropped, ALTERs that copy),
 * so the map grows and shrinks with them; a removed file's entry is
 * deleted, not marked, so an inode number that comes back with a new
 * file is unknown until that file's own pages or the log say otherwise.
 * Thread-safe (liburcu's lock-free hash table; urcu-bp registers each
 * thread by itself). */
#ifndef PPL_FILEMAP_H
#define PPL_FILEMAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct ppl_filemap;

/* NULL if out of memory. */
struct ppl_filemap *ppl_filemap_new(void);
void ppl_filemap_free(struct ppl_filemap *m);
/* Records that fileid (not 0) holds space: 1 if that is new (the fileid
 * was unknown or held another space), 0 if it was already known, -1 if
 * out of memory (the map is unchanged). */
int ppl_filemap_set(struct ppl_filemap *m, uint64_t fileid, uint32_t space);
/* The space fileid holds, if known. */
bool ppl_filemap_get(struct ppl_filemap *m, uint64_t fileid, uint32_t *space);
/* Forgets fileid (its file is gone): true, with the space it held in
 * *space (may be NULL), if it was known. */
bool ppl_filemap_remove(struct ppl_filemap *m, uint64_t fileid, uint32_t *space);
/* Forgets every file. */
void ppl_filemap_clear(struct ppl_filemap *m);
size_t ppl_filemap_count(struct ppl_filemap *m);

#endif
