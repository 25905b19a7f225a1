/* A pool of NFS connections. A libnfs context is not thread-safe, so each
 * FUSE worker checks one out for the length of one batch of calls.
 *
 * Failure semantics: a batch that gets no complete answer (connection
 * refused or reset, no reply) is retried on a fresh connection (a new
 * MOUNT + TCP session) until the deadline. Soft mode (timeout_ms > 0):
 * after timeout_ms the batch fails with -EIO. Hard mode (timeout_ms == 0):
 * retry forever, like a `hard` kernel NFS mount. */
#ifndef PPL_MOUNT_POOL_H
#define PPL_MOUNT_POOL_H

#include "rpc.h"

struct pool_config {
	const char *url;
	int size;		/* number of connections */
	int timeout_ms;		/* 0 = hard */
	uint32_t max_rsize;	/* caps on the server's rtmax/wtmax; 0 = none */
	uint32_t max_wsize;
};

struct pool;

/* Connects the first connection (reporting why it fails in `err`), learns
 * the export's root handle and the server's rsize/wsize. */
struct pool *pool_open(const struct pool_config *cfg, char *err, size_t errlen);
void pool_close(struct pool *p);

const struct fh *pool_root(const struct pool *p);
uint32_t pool_rsize(const struct pool *p);
uint32_t pool_wsize(const struct pool *p);

/* Sends `n` calls on one connection and waits for every reply.
 * Returns 0 when all replies arrived (each call's NFS status is in its
 * reply), -EIO when the deadline passed (soft mode). */
int pool_run(struct pool *p, struct call *calls, int n);

/* Convenience for one call: returns -errno from the RPC or the NFS status. */
int pool_call(struct pool *p, enum proc proc, void *args, struct reply *r);

#endif
