/* FUSE low-level operations mapped onto NFSv3.
 *
 * Permissions are checked by the kernel (default_permissions); the server
 * sees the mounting user's credentials. New objects get the caller's
 * uid/gid when we run as root. POSIX and flock locks are not implemented
 * here on purpose: the kernel then keeps them locally, per mount. */
#include "ops.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

#include "figures.h"
#include "log.h"
#include "reply.h"
#include "unlink.h"
#include "writeback.h"

static struct pool *pool;
static struct ops_config cfg;

void ops_init(struct pool *p, const struct ops_config *c)
{
	pool = p;
	cfg = *c;
	unlink_init(p);
}

static mode_t type_bits(int type)
{
	switch (type) {
	case NF3REG: return S_IFREG;
	case NF3DIR: return S_IFDIR;
	case NF3BLK: return S_IFBLK;
	case NF3CHR: return S_IFCHR;
	case NF3LNK: return S_IFLNK;
	case NF3SOCK: return S_IFSOCK;
	case NF3FIFO: return S_IFIFO;
	default: return 0;
	}
}

static void to_stat(const fattr3 *a, struct stat *st)
{
	memset(st, 0, sizeof *st);
	st->st_ino = a->fileid;
	st->st_mode = type_bits(a->type) | (a->mode & 07777);
	st->st_nlink = a->nlink;
	st->st_uid = a->uid;
	st->st_gid = a->gid;
	st->st_size = (off_t)a->size;
	st->st_blocks = (blkcnt_t)((a->used + 511) / 512);
	st->st_blksize = 4096;
	st->st_rdev = makedev(a->rdev.specdata1, a->rdev.specdata2);
	st->st_atim.tv_sec = a->atime.seconds;
	st->st_atim.tv_nsec = a->atime.nseconds;
	st->st_mtim.tv_sec = a->mtime.seconds;
	st->st_mtim.tv_nsec = a->mtime.nseconds;
	st->st_ctim.tv_sec = a->ctime.seconds;
	st->st_ctim.tv_nsec = a->ctime.nseconds;
}

static int getattr_fh(const struct fh *fh, fattr3 *out)
{
	GETATTR3args a = { 0 };
	struct reply r = { 0 };

	fh_to_nfs(fh, &a.object);
	int e = pool_call(pool, P_GETATTR, &a, &r);
	if (!e)
		*out = r.attr;
	return e;
}

static int lookup_fh(const struct fh *dir, const char *name, struct reply *r)
{
	LOOKUP3args a = { 0 };

	fh_to_nfs(dir, &a.what.dir);
	a.what.name = (char *)name;
	int e = pool_call(pool, P_LOOKUP, &a, r);
	if (!e && !r->has_fh)
		e = -EIO;
	return e;
}

/* Answers a lookup-like request from a reply holding a handle and maybe
 * attributes (fetched when the server left them out). */
static void reply_entry(fuse_req_t req, struct reply *r)
{
	struct fuse_entry_param ep;

	if (!r->has_attr) {
		int e = getattr_fh(&r->fh, &r->attr);
		if (e) {
			fuse_reply_err(req, -e);
			return;
		}
	}
	struct node *n = nodes_get(&r->fh);
	if (!n) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	memset(&ep, 0, sizeof ep);
	ep.ino = ino_of(n);
	ep.attr_timeout = cfg.attr_timeout;
	ep.entry_timeout = cfg.attr_timeout;
	to_stat(&r->attr, &ep.attr);
	if (fuse_reply_entry(req, &ep) != 0)
		nodes_forget(n, 1);	/* the kernel never got it */
}

/* Objects created by root on behalf of a caller belong to the caller. */
static void owner_sattr(fuse_req_t req, sattr3 *s)
{
	const struct fuse_ctx *ctx = fuse_req_ctx(req);

	if (geteuid() != 0)
		return;
	s->uid.set_it = 1;
	s->uid.set_uid3_u.uid = ctx->uid;
	s->gid.set_it = 1;
	s->gid.set_gid3_u.gid = ctx->gid;
}

static mode_t apply_umask(fuse_req_t req, mode_t mode)
{
	return mode & ~fuse_req_ctx(req)->umask & 07777;
}

static void ll_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct reply r = { 0 };
	int e = lookup_fh(&node_of(parent)->fh, name, &r);

	if (e)
		fuse_reply_err(req, -e);
	else
		reply_entry(req, &r);
}

static void ll_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup)
{
	nodes_forget(node_of(ino), nlookup);
	fuse_reply_none(req);
}

static void ll_forget_multi(fuse_req_t req, size_t count, struct fuse_forget_data *f)
{
	for (size_t i = 0; i < count; i++)
		nodes_forget(node_of(f[i].ino), f[i].nlookup);
	fuse_reply_none(req);
}

static void ll_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	fattr3 a;
	struct stat st;

	(void)fi;
	int e = getattr_fh(&node_of(ino)->fh, &a);
	if (e) {
		fuse_reply_err(req, -e);
		return;
	}
	to_stat(&a, &st);
	fuse_reply_attr(req, &st, cfg.attr_timeout);
}

static void set_time(struct timespec ts, int now, time_how *how, nfstime3 *t)
{
	if (now) {
		*how = SET_TO_SERVER_TIME;
	} else {
		*how = SET_TO_CLIENT_TIME;
		t->seconds = (u_int)ts.tv_sec;
		t->nseconds = (u_int)ts.tv_nsec;
	}
}

static void ll_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int to_set,
		       struct fuse_file_info *fi)
{
	struct node *n = node_of(ino);
	SETATTR3args a = { 0 };
	struct reply r = { 0 };
	sattr3 *s = &a.new_attributes;
	int e;

	(void)fi;
	fh_to_nfs(&n->fh, &a.object);
	if (to_set & FUSE_SET_ATTR_MODE) {
		s->mode.set_it = 1;
		s->mode.set_mode3_u.mode = attr->st_mode & 07777;
	}
	if (to_set & FUSE_SET_ATTR_UID) {
		s->uid.set_it = 1;
		s->uid.set_uid3_u.uid = attr->st_uid;
	}
	if (to_set & FUSE_SET_ATTR_GID) {
		s->gid.set_it = 1;
		s->gid.set_gid3_u.gid = attr->st_gid;
	}
	if (to_set & FUSE_SET_ATTR_SIZE) {
		/* Kept uncommitted data must not be re-sent past a new end
		 * of file later, so it is committed first. */
		e = writeback_flush(n);
		if (e) {
			fuse_reply_err(req, -e);
			return;
		}
		s->size.set_it = 1;
		s->size.set_size3_u.size = (size3)attr->st_size;
	}
	if (to_set & (FUSE_SET_ATTR_ATIME | FUSE_SET_ATTR_ATIME_NOW))
		set_time(attr->st_atim, to_set & FUSE_SET_ATTR_ATIME_NOW,
			 &s->atime.set_it, &s->atime.set_atime_u.atime);
	if (to_set & (FUSE_SET_ATTR_MTIME | FUSE_SET_ATTR_MTIME_NOW))
		set_time(attr->st_mtim, to_set & FUSE_SET_ATTR_MTIME_NOW,
			 &s->mtime.set_it, &s->mtime.set_mtime_u.mtime);
	e = pool_call(pool, P_SETATTR, &a, &r);
	if (e) {
		fuse_reply_err(req, -e);
		return;
	}
	fattr3 fa = r.attr;
	if (!r.has_attr && (e = getattr_fh(&n->fh, &fa)) != 0) {
		fuse_reply_err(req, -e);
		return;
	}
	struct stat st;
	to_stat(&fa, &st);
	fuse_reply_attr(req, &st, cfg.attr_timeout);
}

static void ll_readlink(fuse_req_t req, fuse_ino_t ino)
{
	READLINK3args a = { 0 };
	struct reply r = { 0 };

	fh_to_nfs(&node_of(ino)->fh, &a.symlink);
	int e = pool_call(pool, P_READLINK, &a, &r);
	if (!e && !r.str)
		e = -ENOMEM;
	if (e)
		fuse_reply_err(req, -e);
	else
		fuse_reply_readlink(req, r.str);
	free(r.str);
}

static void ll_mknod(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode, dev_t rdev)
{
	MKNOD3args a = { 0 };
	struct reply r = { 0 };
	sattr3 *s;

	fh_to_nfs(&node_of(parent)->fh, &a.where.dir);
	a.where.name = (char *)name;
	switch (mode & S_IFMT) {
	case S_IFIFO:
		a.what.type = NF3FIFO;
		s = &a.what.mknoddata3_u.pipe_attributes;
		break;
	case S_IFSOCK:
		a.what.type = NF3SOCK;
		s = &a.what.mknoddata3_u.sock_attributes;
		break;
	case S_IFCHR:
	case S_IFBLK:
		a.what.type = S_ISCHR(mode) ? NF3CHR : NF3BLK;
		s = &a.what.mknoddata3_u.chr_device.dev_attributes;
		a.what.mknoddata3_u.chr_device.spec.specdata1 = major(rdev);
		a.what.mknoddata3_u.chr_device.spec.specdata2 = minor(rdev);
		break;
	default:
		/* Regular files come through create(). */
		fuse_reply_err(req, EINVAL);
		return;
	}
	s->mode.set_it = 1;
	s->mode.set_mode3_u.mode = apply_umask(req, mode);
	owner_sattr(req, s);
	int e = pool_call(pool, P_MKNOD, &a, &r);
	if (!e && !r.has_fh)
		e = lookup_fh(&node_of(parent)->fh, name, &r);
	if (e)
		fuse_reply_err(req, -e);
	else
		reply_entry(req, &r);
}

static void ll_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode)
{
	MKDIR3args a = { 0 };
	struct reply r = { 0 };

	fh_to_nfs(&node_of(parent)->fh, &a.where.dir);
	a.where.name = (char *)name;
	a.attributes.mode.set_it = 1;
	a.attributes.mode.set_mode3_u.mode = apply_umask(req, mode);
	owner_sattr(req, &a.attributes);
	int e = pool_call(pool, P_MKDIR, &a, &r);
	if (!e && !r.has_fh)
		e = lookup_fh(&node_of(parent)->fh, name, &r);
	if (e)
		fuse_reply_err(req, -e);
	else
		reply_entry(req, &r);
}

static void ll_unlink(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	fuse_reply_err(req, -unlink_name(&node_of(parent)->fh, name));
}

static void ll_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	RMDIR3args a = { 0 };
	struct reply r = { 0 };

	fh_to_nfs(&node_of(parent)->fh, &a.object.dir);
	a.object.name = (char *)name;
	fuse_reply_err(req, -pool_call(pool, P_RMDIR, &a, &r));
}

static void ll_symlink(fuse_req_t req, const char *target, fuse_ino_t parent, const char *name)
{
	SYMLINK3args a = { 0 };
	struct reply r = { 0 };

	fh_to_nfs(&node_of(parent)->fh, &a.where.dir);
	a.where.name = (char *)name;
	a.symlink.symlink_data = (char *)target;
	a.symlink.symlink_attributes.mode.set_it = 1;
	a.symlink.symlink_attributes.mode.set_mode3_u.mode = 0777;
	owner_sattr(req, &a.symlink.symlink_attributes);
	int e = pool_call(pool, P_SYMLINK, &a, &r);
	if (!e && !r.has_fh)
		e = lookup_fh(&node_of(parent)->fh, name, &r);
	if (e)
		fuse_reply_err(req, -e);
	else
		reply_entry(req, &r);
}

static void ll_rename(fuse_req_t req, fuse_ino_t parent, const char *name, fuse_ino_t newparent,
		      const char *newname, unsigned int flags)
{
	RENAME3args a = { 0 };
	struct reply r = { 0 };

	if (flags) {
		/* NFSv3 has no atomic RENAME_NOREPLACE/RENAME_EXCHANGE. */
		fuse_reply_err(req, EINVAL);
		return;
	}
	fh_to_nfs(&node_of(parent)->fh, &a.from.dir);
	a.from.name = (char *)name;
	fh_to_nfs(&node_of(newparent)->fh, &a.to.dir);
	a.to.name = (char *)newname;
	fuse_reply_err(req, -pool_call(pool, P_RENAME, &a, &r));
}

static void ll_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent, const char *newname)
{
	LINK3args a = { 0 };
	struct reply r = { 0 };
	struct node *n = node_of(ino);

	fh_to_nfs(&n->fh, &a.file);
	fh_to_nfs(&node_of(newparent)->fh, &a.link.dir);
	a.link.name = (char *)newname;
	int e = pool_call(pool, P_LINK, &a, &r);
	if (e) {
		fuse_reply_err(req, -e);
		return;
	}
	r.fh = n->fh;
	r.has_fh = 1;
	reply_entry(req, &r);
}

static void set_open_flags(struct fuse_file_info *fi)
{
	fi->direct_io = cfg.direct_io_all || (fi->flags & O_DIRECT);
	fi->keep_cache = 0;
}

static void ll_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct node *n = node_of(ino);

	set_open_flags(fi);
	open_count_up(n);
	if (reply_open(req, fi) != 0)
		open_count_down(n);	/* no release will come */
}

static void ll_create(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
		      struct fuse_file_info *fi)
{
	CREATE3args a = { 0 };
	struct reply r = { 0 };
	sattr3 *s;

	fh_to_nfs(&node_of(parent)->fh, &a.where.dir);
	a.where.name = (char *)name;
	if (fi->flags & O_EXCL) {
		a.how.mode = GUARDED;
		s = &a.how.createhow3_u.g_obj_attributes;
	} else {
		a.how.mode = UNCHECKED;
		s = &a.how.createhow3_u.obj_attributes;
	}
	s->mode.set_it = 1;
	s->mode.set_mode3_u.mode = apply_umask(req, mode);
	owner_sattr(req, s);
	if (fi->flags & O_TRUNC) {
		s->size.set_it = 1;
		s->size.set_size3_u.size = 0;
	}
	int e = pool_call(pool, P_CREATE, &a, &r);
	if (!e && !r.has_fh)
		e = lookup_fh(&node_of(parent)->fh, name, &r);
	if (!e && !r.has_attr)
		e = getattr_fh(&r.fh, &r.attr);
	if (e) {
		fuse_reply_err(req, -e);
		return;
	}
	struct node *n = nodes_get(&r.fh);
	if (!n) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	struct fuse_entry_param ep;
	memset(&ep, 0, sizeof ep);
	ep.ino = ino_of(n);
	ep.attr_timeout = cfg.attr_timeout;
	ep.entry_timeout = cfg.attr_timeout;
	to_stat(&r.attr, &ep.attr);
	set_open_flags(fi);
	open_count_up(n);
	if (reply_create(req, &ep, fi) != 0) {
		open_count_down(n);
		nodes_forget(n, 1);
	}
}

/* Reads [off, off+size) in rsize pieces, all in flight at once; stops at
 * the first short piece that is at end of file, and re-reads the rest of
 * a short piece that is not. Returns bytes read or -errno. */
static ssize_t read_range(const struct fh *fh, char *buf, size_t size, uint64_t off)
{
	size_t rs = pool_rsize(pool);
	size_t n = size ? (size + rs - 1) / rs : 0;
	READ3args *args = calloc(n ? n : 1, sizeof *args);
	struct reply *rep = calloc(n ? n : 1, sizeof *rep);
	struct call *calls = calloc(n ? n : 1, sizeof *calls);
	ssize_t total = 0;

	if (!args || !rep || !calls) {
		total = -ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < n; i++) {
		size_t piece = size - i * rs < rs ? size - i * rs : rs;
		fh_to_nfs(fh, &args[i].file);
		args[i].offset = off + i * rs;
		args[i].count = (count3)piece;
		rep[i].read_into = buf + i * rs;
		calls[i] = (struct call){ .proc = P_READ, .args = &args[i], .reply = &rep[i] };
	}
	int e = pool_run(pool, calls, (int)n);
	if (e) {
		total = e;
		goto out;
	}
	for (size_t i = 0; i < n; i++) {
		e = nfs3_errno(rep[i].status);
		if (e) {
			total = total ? total : e;
			break;
		}
		total += rep[i].count;
		if (rep[i].count == args[i].count)
			continue;
		if (rep[i].eof || rep[i].count == 0)
			break;
		ssize_t more = read_range(fh, buf + i * rs + rep[i].count,
					  args[i].count - rep[i].count, args[i].offset + rep[i].count);
		if (more < 0)
			break;
		total += more;
		if ((size_t)more < args[i].count - rep[i].count)
			break;
	}
out:
	free(args);
	free(rep);
	free(calls);
	return total;
}

static void ll_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		    struct fuse_file_info *fi)
{
	char *buf = malloc(size ? size : 1);

	(void)fi;
	if (!buf) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	ssize_t got = read_range(&node_of(ino)->fh, buf, size, (uint64_t)off);
	if (got < 0) {
		fuse_reply_err(req, (int)-got);
	} else {
		clock_gettime(CLOCK_MONOTONIC, &t1);
		figures_read((uint64_t)(t1.tv_sec - t0.tv_sec) * 1000000000u + (uint64_t)t1.tv_nsec -
				     (uint64_t)t0.tv_nsec,
			     size);
		fuse_reply_buf(req, buf, (size_t)got);
	}
	free(buf);
}

static void ll_write(fuse_req_t req, fuse_ino_t ino, const char *buf, size_t size, off_t off,
		     struct fuse_file_info *fi)
{
	(void)fi;
	ssize_t r = writeback_write(node_of(ino), buf, size, off);

	if (r < 0)
		fuse_reply_err(req, (int)-r);
	else
		fuse_reply_write(req, (size_t)r);
}

/* close() of any copy of a descriptor (also in every fork()ed child that
 * closes inherited descriptors) lands here. It does not COMMIT: POSIX
 * promises nothing about durability at close, write errors were already
 * reported by write() (writes are synchronous), and a COMMIT here would
 * make every such close wait for the server. Durability is fsync's job. */
static void ll_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	(void)ino;
	(void)fi;
	fuse_reply_err(req, 0);
}

/* The last close: commit what is kept so the memory is freed. Nobody waits
 * for this reply, so a failure can only be logged; the data stays kept and
 * a later fsync through another open retries it. */
static void ll_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct node *n = node_of(ino);

	(void)fi;
	/* Count the close first: an unlink may be waiting for it. */
	if (open_count_down(n)) {
		writeback_discard(n);	/* the file is gone; its data with it */
	} else {
		int e = writeback_flush(n);
		if (e && e != -ESTALE)
			log_msg("COMMIT after the last close failed (%s); the data is kept for "
				"the next fsync of this file", strerror(-e));
	}
	fuse_reply_err(req, 0);
}

static void ll_fsync(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi)
{
	(void)datasync;
	(void)fi;
	fuse_reply_err(req, -writeback_flush(node_of(ino)));
}

/* NFSv3 servers must make directory changes stable before replying
 * (RFC 1813, section 3.3), so there is nothing left to sync. */
static void ll_fsyncdir(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi)
{
	(void)ino;
	(void)datasync;
	(void)fi;
	fuse_reply_err(req, 0);
}

struct dirbuf {
	char *p;			/* fuse_add_direntry() records, back to back */
	size_t size, cap;
	size_t *ends;			/* end offset of each record */
	size_t count, ends_cap;
	uint64_t last_cookie;
	fuse_req_t req;
};

static void dirbuf_free(struct dirbuf *d)
{
	free(d->p);
	free(d->ends);
	free(d);
}

static int grow(void *pp, size_t *cap, size_t need, size_t elem)
{
	if (need <= *cap)
		return 0;
	size_t c = *cap ? *cap : 64;
	while (c < need)
		c *= 2;
	void *n = realloc(*(void **)pp, c * elem);
	if (!n)
		return -1;
	*(void **)pp = n;
	*cap = c;
	return 0;
}

static int dir_add(void *ctx, const char *name, uint64_t fileid, uint64_t cookie,
		   const fattr3 *attr)
{
	struct dirbuf *d = ctx;
	struct stat st;

	d->last_cookie = cookie;
	memset(&st, 0, sizeof st);
	st.st_ino = fileid;
	st.st_mode = attr ? type_bits(attr->type) : 0;
	size_t need = fuse_add_direntry(d->req, NULL, 0, name, NULL, 0);
	if (grow(&d->p, &d->cap, d->size + need, 1) || grow(&d->ends, &d->ends_cap, d->count + 1,
							     sizeof *d->ends))
		return -1;
	/* The offset of an entry is where the next one starts. */
	fuse_add_direntry(d->req, d->p + d->size, need, name, &st, (off_t)(d->size + need));
	d->size += need;
	d->ends[d->count++] = d->size;
	return 0;
}

/* The whole listing is read at opendir, so offsets stay valid while the
 * directory changes and rewinddir() sees a consistent snapshot. */
static void ll_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct dirbuf *d = calloc(1, sizeof *d);
	READDIRPLUS3args a = { 0 };
	int e = 0;

	if (!d) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	d->req = req;
	fh_to_nfs(&node_of(ino)->fh, &a.dir);
	a.dircount = 16384;
	a.maxcount = 65536;
	for (;;) {
		struct reply r = { .sink = dir_add, .sink_ctx = d };
		size_t before = d->count;
		e = pool_call(pool, P_READDIRPLUS, &a, &r);
		if (!e && r.sink_error)
			e = -ENOMEM;
		if (e || r.eof)
			break;
		if (d->count == before) {
			e = -EIO;	/* not at end, yet no entries: would loop */
			break;
		}
		memcpy(a.cookieverf, r.cookieverf, sizeof a.cookieverf);
		a.cookie = d->last_cookie;
	}
	if (e) {
		dirbuf_free(d);
		fuse_reply_err(req, -e);
		return;
	}
	fi->fh = (uint64_t)(uintptr_t)d;
	if (fuse_reply_open(req, fi) != 0)
		dirbuf_free(d);
}

static void ll_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		       struct fuse_file_info *fi)
{
	struct dirbuf *d = (struct dirbuf *)(uintptr_t)fi->fh;
	size_t start = (size_t)off, end = start;

	(void)ino;
	/* Only whole records: stop before the first one that does not fit. */
	for (size_t i = 0; i < d->count; i++) {
		if (d->ends[i] <= start)
			continue;
		if (d->ends[i] - start > size)
			break;
		end = d->ends[i];
	}
	fuse_reply_buf(req, end > start ? d->p + start : NULL, end - start);
}

static void ll_releasedir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	(void)ino;
	dirbuf_free((struct dirbuf *)(uintptr_t)fi->fh);
	fuse_reply_err(req, 0);
}

static void ll_statfs(fuse_req_t req, fuse_ino_t ino)
{
	FSSTAT3args a = { 0 };
	struct reply r = { 0 };
	struct statvfs sv;
	const unsigned long bs = 4096;

	(void)ino;
	fh_to_nfs(pool_root(pool), &a.fsroot);
	int e = pool_call(pool, P_FSSTAT, &a, &r);
	if (e) {
		fuse_reply_err(req, -e);
		return;
	}
	memset(&sv, 0, sizeof sv);
	sv.f_bsize = bs;
	sv.f_frsize = bs;
	sv.f_blocks = r.tbytes / bs;
	sv.f_bfree = r.fbytes / bs;
	sv.f_bavail = r.abytes / bs;
	sv.f_files = r.tfiles;
	sv.f_ffree = r.ffiles;
	sv.f_favail = r.afiles;
	sv.f_namemax = 255;
	fuse_reply_statfs(req, &sv);
}

/* NFSv3 has no ALLOCATE. Mode 0, which InnoDB asks for each time it
 * extends a data file, grows the file with a SETATTR of its size once
 * FSSTAT says the server has the space: the range then reads as zeros, as
 * after fallocate(2), without the zeros crossing the network (InnoDB's
 * fallback is to write them). The blocks are not reserved, so a later
 * write may still fail with ENOSPC, as on a thinly provisioned disk. The
 * SETATTR is guarded by the ctime just read, so a size set meanwhile by
 * another write or client is never undone. Other modes (keeping the size,
 * punching holes) are EOPNOTSUPP. */
static int grow_to(struct node *n, uint64_t end)
{
	for (int tries = 0; tries < 16; tries++) {
		fattr3 fa;
		int e = getattr_fh(&n->fh, &fa);
		if (e)
			return e;
		if (fa.size >= end)
			return 0;

		FSSTAT3args fs = { 0 };
		struct reply fr = { 0 };
		fh_to_nfs(pool_root(pool), &fs.fsroot);
		if ((e = pool_call(pool, P_FSSTAT, &fs, &fr)) != 0)
			return e;
		if (fr.abytes < end - fa.size)
			return -ENOSPC;

		SETATTR3args a = { 0 };
		struct reply r = { 0 };
		fh_to_nfs(&n->fh, &a.object);
		a.new_attributes.size.set_it = 1;
		a.new_attributes.size.set_size3_u.size = (size3)end;
		a.guard.check = 1;
		a.guard.sattrguard3_u.obj_ctime = fa.ctime;
		e = pool_call(pool, P_SETATTR, &a, &r);
		if (r.status != NFS3ERR_NOT_SYNC)
			return e;
	}
	return -EAGAIN; /* the file kept changing under us */
}

static void ll_fallocate(fuse_req_t req, fuse_ino_t ino, int mode, off_t off, off_t len,
			 struct fuse_file_info *fi)
{
	(void)fi;
	if (mode != 0) {
		fuse_reply_err(req, EOPNOTSUPP);
		return;
	}
	if (off < 0 || len <= 0) {
		fuse_reply_err(req, EINVAL);
		return;
	}
	if (off > INT64_MAX - len) {
		fuse_reply_err(req, EFBIG);
		return;
	}
	fuse_reply_err(req, -grow_to(node_of(ino), (uint64_t)off + (uint64_t)len));
}

static void ll_init(void *userdata, struct fuse_conn_info *conn)
{
	(void)userdata;
	reply_set_kernel_minor(conn->proto_minor);
	/* Large requests: the NFS side splits them by rsize/wsize anyway. */
	if (conn->max_write < 1024 * 1024)
		conn->max_write = 1024 * 1024;
	conn->max_readahead = 1024 * 1024;
	conn->want &= ~(unsigned)FUSE_CAP_WRITEBACK_CACHE;
	/* Without atomic O_TRUNC the kernel truncates through setattr(),
	 * which commits kept data first (see ll_setattr). */
	conn->want &= ~(unsigned)FUSE_CAP_ATOMIC_O_TRUNC;
	conn->want &= ~(unsigned)FUSE_CAP_POSIX_LOCKS;
	conn->want &= ~(unsigned)FUSE_CAP_FLOCK_LOCKS;
	if (conn->capable & FUSE_CAP_ASYNC_DIO)
		conn->want |= FUSE_CAP_ASYNC_DIO;
	if (conn->capable & FUSE_CAP_PARALLEL_DIROPS)
		conn->want |= FUSE_CAP_PARALLEL_DIROPS;
}

const struct fuse_lowlevel_ops ppl_ops = {
	.init = ll_init,
	.lookup = ll_lookup,
	.forget = ll_forget,
	.forget_multi = ll_forget_multi,
	.getattr = ll_getattr,
	.setattr = ll_setattr,
	.readlink = ll_readlink,
	.mknod = ll_mknod,
	.mkdir = ll_mkdir,
	.unlink = ll_unlink,
	.rmdir = ll_rmdir,
	.symlink = ll_symlink,
	.rename = ll_rename,
	.link = ll_link,
	.open = ll_open,
	.create = ll_create,
	.read = ll_read,
	.write = ll_write,
	.flush = ll_flush,
	.release = ll_release,
	.fsync = ll_fsync,
	.opendir = ll_opendir,
	.readdir = ll_readdir,
	.releasedir = ll_releasedir,
	.fsyncdir = ll_fsyncdir,
	.statfs = ll_statfs,
	.fallocate = ll_fallocate,
};
