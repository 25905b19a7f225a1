/* Same byte layout libfuse's fuse_reply_open()/fuse_reply_create() send
 * (struct fuse_open_out, struct fuse_entry_out from <linux/fuse.h>), sent
 * through fuse_reply_iov(), plus the one flag libfuse 3.14 lacks. */
#include "reply.h"

#include <linux/fuse.h>
#include <string.h>
#include <sys/uio.h>

static unsigned kernel_minor;

void reply_set_kernel_minor(unsigned minor)
{
	kernel_minor = minor;
}

static void fill_open(struct fuse_open_out *o, const struct fuse_file_info *fi)
{
	memset(o, 0, sizeof *o);
	o->fh = fi->fh;
	if (fi->direct_io) {
		o->open_flags |= FOPEN_DIRECT_IO;
		if (kernel_minor >= 36)
			o->open_flags |= FOPEN_PARALLEL_DIRECT_WRITES;
	}
	if (fi->keep_cache)
		o->open_flags |= FOPEN_KEEP_CACHE;
	if (fi->nonseekable)
		o->open_flags |= FOPEN_NONSEEKABLE;
}

static void split_time(double t, uint64_t *sec, uint32_t *nsec)
{
	if (t <= 0) {
		*sec = 0;
		*nsec = 0;
		return;
	}
	*sec = (uint64_t)t;
	*nsec = (uint32_t)((t - (double)*sec) * 1.0e9);
}

static void fill_entry(struct fuse_entry_out *o, const struct fuse_entry_param *e)
{
	const struct stat *st = &e->attr;

	memset(o, 0, sizeof *o);
	o->nodeid = e->ino;
	o->generation = e->generation;
	split_time(e->entry_timeout, &o->entry_valid, &o->entry_valid_nsec);
	split_time(e->attr_timeout, &o->attr_valid, &o->attr_valid_nsec);
	o->attr.ino = st->st_ino;
	o->attr.mode = st->st_mode;
	o->attr.nlink = (uint32_t)st->st_nlink;
	o->attr.uid = st->st_uid;
	o->attr.gid = st->st_gid;
	o->attr.rdev = (uint32_t)st->st_rdev;
	o->attr.size = (uint64_t)st->st_size;
	o->attr.blksize = (uint32_t)st->st_blksize;
	o->attr.blocks = (uint64_t)st->st_blocks;
	o->attr.atime = (uint64_t)st->st_atim.tv_sec;
	o->attr.mtime = (uint64_t)st->st_mtim.tv_sec;
	o->attr.ctime = (uint64_t)st->st_ctim.tv_sec;
	o->attr.atimensec = (uint32_t)st->st_atim.tv_nsec;
	o->attr.mtimensec = (uint32_t)st->st_mtim.tv_nsec;
	o->attr.ctimensec = (uint32_t)st->st_ctim.tv_nsec;
}

int reply_open(fuse_req_t req, const struct fuse_file_info *fi)
{
	struct fuse_open_out o;
	struct iovec iov = { .iov_base = &o, .iov_len = sizeof o };

	fill_open(&o, fi);
	return fuse_reply_iov(req, &iov, 1);
}

int reply_create(fuse_req_t req, const struct fuse_entry_param *e, const struct fuse_file_info *fi)
{
	struct fuse_entry_out eo;
	struct fuse_open_out o;
	struct iovec iov[2] = {
		{ .iov_base = &eo, .iov_len = sizeof eo },
		{ .iov_base = &o, .iov_len = sizeof o },
	};

	fill_entry(&eo, e);
	fill_open(&o, fi);
	return fuse_reply_iov(req, iov, 2);
}
