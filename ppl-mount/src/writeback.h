/* Writes and their durability.
 *
 * WRITEs go out UNSTABLE (unless --sync-writes) and a copy of the data is
 * kept on the node until a COMMIT covers it. fsync, close and truncate
 * call writeback_flush(): COMMIT, then compare the COMMIT verifier with
 * every WRITE verifier. A different verifier means the server restarted
 * and may have lost the data, so all kept data is re-sent FILE_SYNC, in
 * the original order, before the flush reports success. If the server
 * cannot be reached, the flush fails with EIO and the data stays kept for
 * the next flush. */
#ifndef PPL_MOUNT_WRITEBACK_H
#define PPL_MOUNT_WRITEBACK_H

#include <stddef.h>
#include <sys/types.h>

#include "nodes.h"
#include "pool.h"

void writeback_init(struct pool *p, int sync_writes, size_t max_dirty);

/* Returns bytes written or -errno. */
ssize_t writeback_write(struct node *n, const char *buf, size_t size, off_t off);
int writeback_flush(struct node *n);
/* Frees kept data without sending it; returns how many bytes that was. */
size_t writeback_discard(struct node *n);

/* Statistics for tests and operators (printed at unmount). */
unsigned long writeback_resends(void);

#endif
