/* Which file of a datadir holds a space id, found the way InnoDB names
 * them (ibdata*, undo*, db/table.ibd) and confirmed from each file's page
 * 0; and page reads and writes by (space, page) for doublewrite checks. */
#ifndef PPL_INSPECT_DATADIR_H
#define PPL_INSPECT_DATADIR_H

#include <stddef.h>
#include <stdint.h>

struct datadir;

/* NULL with a message in err if dir cannot be read. */
struct datadir *datadir_open(const char *dir, char *err, size_t errlen);
void datadir_close(struct datadir *d);
size_t datadir_spaces(const struct datadir *d);
/* ppl_pool_page_read_fn / _write_fn shapes; arg is the datadir. */
int datadir_read_page(void *arg, uint32_t space, uint32_t page_no, uint8_t *buf, size_t size);
int datadir_write_page(void *arg, uint32_t space, uint32_t page_no, const uint8_t *buf, size_t size);

#endif
