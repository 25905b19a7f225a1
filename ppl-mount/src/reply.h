/* Open and create replies that libfuse 3.14 cannot express: they add
 * FOPEN_PARALLEL_DIRECT_WRITES (kernel FUSE 7.36+), so that O_DIRECT
 * writes to one file (InnoDB's page flushes to one tablespace) are not
 * serialized by the kernel's inode lock. */
#ifndef PPL_MOUNT_REPLY_H
#define PPL_MOUNT_REPLY_H

#include "nodes.h"

/* Called from init with the kernel's protocol minor version. */
void reply_set_kernel_minor(unsigned minor);

int reply_open(fuse_req_t req, const struct fuse_file_info *fi);
int reply_create(fuse_req_t req, const struct fuse_entry_param *e, const struct fuse_file_info *fi);

#endif
