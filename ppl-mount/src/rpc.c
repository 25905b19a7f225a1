/* Sending NFSv3 calls through libnfs's raw interface and copying replies
 * out of libnfs's buffers before the callback returns. */
#include "rpc.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

void fh_to_nfs(const struct fh *fh, nfs_fh3 *out)
{
	out->data.data_len = fh->len;
	out->data.data_val = (char *)fh->data;
}

int fh_from_nfs(struct fh *fh, const nfs_fh3 *in)
{
	if (in->data.data_len == 0 || in->data.data_len > NFS3_FHSIZE)
		return -1;
	fh->len = in->data.data_len;
	memcpy(fh->data, in->data.data_val, fh->len);
	return 0;
}

int nfs3_errno(int status)
{
	switch (status) {
	case NFS3_OK: return 0;
	case NFS3ERR_PERM: return -EPERM;
	case NFS3ERR_NOENT: return -ENOENT;
	case NFS3ERR_IO: return -EIO;
	case NFS3ERR_NXIO: return -ENXIO;
	case NFS3ERR_ACCES: return -EACCES;
	case NFS3ERR_EXIST: return -EEXIST;
	case NFS3ERR_XDEV: return -EXDEV;
	case NFS3ERR_NODEV: return -ENODEV;
	case NFS3ERR_NOTDIR: return -ENOTDIR;
	case NFS3ERR_ISDIR: return -EISDIR;
	case NFS3ERR_INVAL: return -EINVAL;
	case NFS3ERR_FBIG: return -EFBIG;
	case NFS3ERR_NOSPC: return -ENOSPC;
	case NFS3ERR_ROFS: return -EROFS;
	case NFS3ERR_MLINK: return -EMLINK;
	case NFS3ERR_NAMETOOLONG: return -ENAMETOOLONG;
	case NFS3ERR_NOTEMPTY: return -ENOTEMPTY;
	case NFS3ERR_DQUOT: return -EDQUOT;
	case NFS3ERR_STALE: return -ESTALE;
	case NFS3ERR_NOTSUPP: return -EOPNOTSUPP;
	case NFS3ERR_JUKEBOX: return -EAGAIN;
	default: return -EIO;
	}
}

static void take_attr(struct reply *r, const post_op_attr *a)
{
	if (a->attributes_follow) {
		r->has_attr = 1;
		r->attr = a->post_op_attr_u.attributes;
	}
}

static void take_fh(struct reply *r, const post_op_fh3 *h)
{
	if (h->handle_follows && fh_from_nfs(&r->fh, &h->post_op_fh3_u.handle) == 0)
		r->has_fh = 1;
}

/* libnfs 4.0.0 decodes entry lists into memory without aligning each
 * entry, so every entry is copied to an aligned local before use. */
static void take_readdirplus(struct reply *r, READDIRPLUS3resok *ok)
{
	memcpy(r->cookieverf, ok->cookieverf, sizeof r->cookieverf);
	r->eof = ok->reply.eof;
	for (const void *raw = ok->reply.entries; raw;) {
		entryplus3 e;
		memcpy(&e, raw, sizeof e);
		const fattr3 *a = e.name_attributes.attributes_follow ?
			&e.name_attributes.post_op_attr_u.attributes : NULL;
		if (r->sink(r->sink_ctx, e.name, e.fileid, e.cookie, a) != 0) {
			r->sink_error = 1;
			return;
		}
		raw = e.nextentry;
	}
}

/* Copies what callers use out of a decoded reply; `data` dies after this. */
static void take(struct call *c, void *data)
{
	struct reply *r = c->reply;

	r->status = *(int *)data;	/* every XXX3res starts with nfsstat3 */
	switch (c->proc) {
	case P_GETATTR: {
		GETATTR3res *res = data;
		if (res->status == NFS3_OK) {
			r->has_attr = 1;
			r->attr = res->GETATTR3res_u.resok.obj_attributes;
		}
		break;
	}
	case P_SETATTR: {
		SETATTR3res *res = data;
		take_attr(r, res->status == NFS3_OK ? &res->SETATTR3res_u.resok.obj_wcc.after
				: &res->SETATTR3res_u.resfail.obj_wcc.after);
		break;
	}
	case P_LOOKUP: {
		LOOKUP3res *res = data;
		if (res->status == NFS3_OK) {
			if (fh_from_nfs(&r->fh, &res->LOOKUP3res_u.resok.object) == 0)
				r->has_fh = 1;
			take_attr(r, &res->LOOKUP3res_u.resok.obj_attributes);
		}
		break;
	}
	case P_READLINK: {
		READLINK3res *res = data;
		if (res->status == NFS3_OK && res->READLINK3res_u.resok.data)
			r->str = strdup(res->READLINK3res_u.resok.data);
		break;
	}
	case P_READ: {
		READ3res *res = data;
		if (res->status == NFS3_OK) {
			READ3resok *ok = &res->READ3res_u.resok;
			r->count = ok->data.data_len < ok->count ? ok->data.data_len : ok->count;
			r->eof = ok->eof;
			memcpy(r->read_into, ok->data.data_val, r->count);
			take_attr(r, &ok->file_attributes);
		}
		break;
	}
	case P_WRITE: {
		WRITE3res *res = data;
		if (res->status == NFS3_OK) {
			WRITE3resok *ok = &res->WRITE3res_u.resok;
			r->count = ok->count;
			r->committed = ok->committed;
			memcpy(r->verf, ok->verf, sizeof r->verf);
			take_attr(r, &ok->file_wcc.after);
		}
		break;
	}
	case P_CREATE: {
		CREATE3res *res = data;
		if (res->status == NFS3_OK) {
			take_fh(r, &res->CREATE3res_u.resok.obj);
			take_attr(r, &res->CREATE3res_u.resok.obj_attributes);
		}
		break;
	}
	case P_MKDIR: {
		MKDIR3res *res = data;
		if (res->status == NFS3_OK) {
			take_fh(r, &res->MKDIR3res_u.resok.obj);
			take_attr(r, &res->MKDIR3res_u.resok.obj_attributes);
		}
		break;
	}
	case P_SYMLINK: {
		SYMLINK3res *res = data;
		if (res->status == NFS3_OK) {
			take_fh(r, &res->SYMLINK3res_u.resok.obj);
			take_attr(r, &res->SYMLINK3res_u.resok.obj_attributes);
		}
		break;
	}
	case P_MKNOD: {
		MKNOD3res *res = data;
		if (res->status == NFS3_OK) {
			take_fh(r, &res->MKNOD3res_u.resok.obj);
			take_attr(r, &res->MKNOD3res_u.resok.obj_attributes);
		}
		break;
	}
	case P_LINK: {
		LINK3res *res = data;
		if (res->status == NFS3_OK)
			take_attr(r, &res->LINK3res_u.resok.file_attributes);
		break;
	}
	case P_READDIRPLUS: {
		READDIRPLUS3res *res = data;
		if (res->status == NFS3_OK)
			take_readdirplus(r, &res->READDIRPLUS3res_u.resok);
		break;
	}
	case P_FSSTAT: {
		FSSTAT3res *res = data;
		if (res->status == NFS3_OK) {
			FSSTAT3resok *ok = &res->FSSTAT3res_u.resok;
			r->tbytes = ok->tbytes; r->fbytes = ok->fbytes; r->abytes = ok->abytes;
			r->tfiles = ok->tfiles; r->ffiles = ok->ffiles; r->afiles = ok->afiles;
		}
		break;
	}
	case P_COMMIT: {
		COMMIT3res *res = data;
		if (res->status == NFS3_OK)
			memcpy(r->verf, res->COMMIT3res_u.resok.verf, sizeof r->verf);
		break;
	}
	case P_REMOVE: case P_RMDIR: case P_RENAME:
		break;
	}
}

static void on_reply(struct rpc_context *rpc, int status, void *data, void *private_data)
{
	struct call *c = private_data;

	(void)rpc;
	c->rpc_status = status;
	if (status == RPC_STATUS_SUCCESS && data)
		take(c, data);
	else if (status == RPC_STATUS_SUCCESS)
		c->rpc_status = RPC_STATUS_ERROR;
	c->done = 1;
}

int rpc_send_call(struct rpc_context *rpc, struct call *c)
{
	void *a = c->args;

	c->done = 0;
	c->rpc_status = RPC_STATUS_ERROR;
	switch (c->proc) {
	case P_GETATTR: return rpc_nfs3_getattr_async(rpc, on_reply, a, c);
	case P_SETATTR: return rpc_nfs3_setattr_async(rpc, on_reply, a, c);
	case P_LOOKUP: return rpc_nfs3_lookup_async(rpc, on_reply, a, c);
	case P_READLINK: return rpc_nfs3_readlink_async(rpc, on_reply, a, c);
	case P_READ: return rpc_nfs3_read_async(rpc, on_reply, a, c);
	case P_WRITE: return rpc_nfs3_write_async(rpc, on_reply, a, c);
	case P_CREATE: return rpc_nfs3_create_async(rpc, on_reply, a, c);
	case P_MKDIR: return rpc_nfs3_mkdir_async(rpc, on_reply, a, c);
	case P_SYMLINK: return rpc_nfs3_symlink_async(rpc, on_reply, a, c);
	case P_MKNOD: return rpc_nfs3_mknod_async(rpc, on_reply, a, c);
	case P_REMOVE: return rpc_nfs3_remove_async(rpc, on_reply, a, c);
	case P_RMDIR: return rpc_nfs3_rmdir_async(rpc, on_reply, a, c);
	case P_RENAME: return rpc_nfs3_rename_async(rpc, on_reply, a, c);
	case P_LINK: return rpc_nfs3_link_async(rpc, on_reply, a, c);
	case P_READDIRPLUS: return rpc_nfs3_readdirplus_async(rpc, on_reply, a, c);
	case P_FSSTAT: return rpc_nfs3_fsstat_async(rpc, on_reply, a, c);
	case P_COMMIT: return rpc_nfs3_commit_async(rpc, on_reply, a, c);
	}
	return -1;
}
