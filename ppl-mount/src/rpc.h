/* One NFSv3 RPC as a value: what to send and where its reply lands.
 *
 * libnfs hands a reply to a callback and frees it when the callback
 * returns, so everything a caller needs is copied into `struct reply`
 * inside that callback (rpc.c). The pool (pool.c) sends batches of calls
 * on one connection and waits for them. */
#ifndef PPL_MOUNT_RPC_H
#define PPL_MOUNT_RPC_H

#include <stddef.h>
#include <stdint.h>

#include <nfsc/libnfs.h>
#include <nfsc/libnfs-raw.h>
#include <nfsc/libnfs-raw-nfs.h>

struct fh {
	uint32_t len;
	unsigned char data[NFS3_FHSIZE];
};

enum proc {
	P_GETATTR, P_SETATTR, P_LOOKUP, P_READLINK, P_READ, P_WRITE, P_CREATE,
	P_MKDIR, P_SYMLINK, P_MKNOD, P_REMOVE, P_RMDIR, P_RENAME, P_LINK,
	P_READDIRPLUS, P_FSSTAT, P_COMMIT,
};

/* READDIRPLUS entries are handed to this sink while the reply is alive. */
typedef int (*dir_sink)(void *ctx, const char *name, uint64_t fileid, uint64_t cookie,
			const fattr3 *attr);

struct reply {
	int status;			/* nfsstat3 */
	int has_attr;
	fattr3 attr;			/* object's post-op attributes */
	int has_fh;
	struct fh fh;			/* new object's handle */
	uint32_t count;			/* READ/WRITE bytes */
	int eof;
	int committed;			/* WRITE: stable_how the server used */
	char verf[NFS3_WRITEVERFSIZE];	/* WRITE/COMMIT verifier */
	char cookieverf[NFS3_COOKIEVERFSIZE];
	char *read_into;		/* READ: caller's buffer, `count` bytes land here */
	char *str;			/* READLINK target, malloc'd; caller frees */
	dir_sink sink;			/* READDIRPLUS */
	void *sink_ctx;
	int sink_error;
	uint64_t tbytes, fbytes, abytes, tfiles, ffiles, afiles;
};

struct call {
	enum proc proc;
	void *args;			/* the matching XXX3args */
	struct reply *reply;
	int done;
	int rpc_status;			/* RPC_STATUS_* */
};

/* Queue `c` on `rpc`; returns 0 or -1 if libnfs could not queue it. */
int rpc_send_call(struct rpc_context *rpc, struct call *c);

/* nfsstat3 → negative errno. */
int nfs3_errno(int status);

void fh_to_nfs(const struct fh *fh, nfs_fh3 *out);
int fh_from_nfs(struct fh *fh, const nfs_fh3 *in);

#endif
