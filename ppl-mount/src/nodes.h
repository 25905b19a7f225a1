/* The inode table: one node per NFS file handle, kept while the kernel
 * holds lookups on it. The FUSE inode number is the node's address (the
 * root is FUSE_ROOT_ID). Each node also carries the state of writes the
 * server has not yet committed (writeback.c). */
#ifndef PPL_MOUNT_NODES_H
#define PPL_MOUNT_NODES_H

#include <pthread.h>
#include <stdint.h>

#define FUSE_USE_VERSION 312
#include <fuse_lowlevel.h>

#include "rpc.h"

struct extent;

struct node {
	struct node *next;		/* hash chain, under the table lock */
	uint64_t nlookup;		/* under the table lock */
	struct fh fh;

	/* Writes share io_lock; a re-send after a server restart takes it
	 * exclusively so no newer write can land under an older re-sent one. */
	pthread_rwlock_t io_lock;
	pthread_mutex_t flush_lock;	/* one COMMIT sequence at a time */
	pthread_mutex_t lock;		/* the dirty list below */
	struct extent *dirty, *dirty_tail;
	size_t dirty_bytes;

	/* Open files (under `lock`). A file unlinked while open is renamed
	 * to a hidden name instead, removed at its last release (unlink.c). */
	int open_count;
	pthread_cond_t closed;		/* signalled when open_count drops to 0 */
	int hidden;
	struct fh hidden_dir;
	char hidden_name[64];
};

void nodes_init(const struct fh *root);
struct node *nodes_root(void);

/* Finds or creates the node for `fh` and counts one kernel lookup. */
struct node *nodes_get(const struct fh *fh);
void nodes_forget(struct node *n, uint64_t count);

/* The node for `fh` if it exists and is open, with its `lock` held;
 * NULL otherwise. */
struct node *nodes_lock_if_open(const struct fh *fh);

struct node *node_of(fuse_ino_t ino);
fuse_ino_t ino_of(const struct node *n);

#endif
