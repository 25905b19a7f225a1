/* unlink() of an open file, the way NFS clients do it ("silly rename"):
 * NFSv3 has no open state, so removing the name would remove the file
 * under the process still using it. Instead the name is renamed to
 * .ppl-mount-hidden-* in the same directory and removed at the last close.
 * If ppl-mount dies first, the hidden file stays; it is safe to delete. */
#ifndef PPL_MOUNT_UNLINK_H
#define PPL_MOUNT_UNLINK_H

#include "nodes.h"
#include "pool.h"

void unlink_init(struct pool *p);

/* REMOVE, or the hidden rename when the file is open. Returns -errno. */
int unlink_name(const struct fh *dir, const char *name);

/* Counts opens; the last close of a hidden file removes it. */
void open_count_up(struct node *n);
/* Returns 1 when this was the last close of a hidden file, now removed. */
int open_count_down(struct node *n);

#endif
