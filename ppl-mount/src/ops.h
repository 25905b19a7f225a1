/* The FUSE low-level operations, each one or a few NFSv3 calls. */
#ifndef PPL_MOUNT_OPS_H
#define PPL_MOUNT_OPS_H

#include "nodes.h"
#include "pool.h"

struct ops_config {
	double attr_timeout;		/* seconds the kernel may cache attributes/entries */
	int direct_io_all;		/* bypass the page cache for every open, not just O_DIRECT */
};

void ops_init(struct pool *p, const struct ops_config *cfg);
extern const struct fuse_lowlevel_ops ppl_ops;

#endif
