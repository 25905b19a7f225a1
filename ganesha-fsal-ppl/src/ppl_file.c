/* FSAL_PPL file I/O: forwarded to the sub-FSAL, with the engine hooks on
 * the completion of reads, writes and commits of InnoDB's files (see
 * ppl_hooks.h for what each hook may do and when it runs). */
#include <time.h>
#include "ppl_fsal.h"
#include "ppl/fault.h"

#include "fsal_convert.h"

/* Carries our handle through the sub-FSAL's asynchronous completion. */
struct io_done {
	struct fsal_obj_handle *obj;
	struct ppl_export *pexp;
	fsal_async_cb cb;
	void *cb_arg;
	bool began;              /* ppl_hook_{write,read}_begin() done: pair it */
	uint64_t w_off;          /* the range it was given */
	size_t w_len;
	uint64_t t0_ns;          /* when the sub-FSAL was called (reads: their latency) */
	bool pmem_log;           /* Log_On_Pmem: written unsynced, made durable in the pool */
	bool want_stable;        /* the client asked for a stable write */
};

static uint64_t now_ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

static fsal_status_t hook_error(int err)
{
	return fsalstat(posix2fsal_error(err), err);
}

/* An error of the sub-FSAL that says the disk failed (not a file gone,
 * a permission, a stale handle: those are the client's business). */
static bool disk_error(fsal_status_t st)
{
	return st.major == ERR_FSAL_IO || st.major == ERR_FSAL_NOSPC || st.major == ERR_FSAL_DQUOT ||
	       st.major == ERR_FSAL_ROFS || st.major == ERR_FSAL_NXIO;
}

static size_t iov_total(const struct fsal_io_arg *arg)
{
	size_t len = 0;

	for (int i = 0; i < (int)arg->iov_count; i++)
		len += arg->iov[i].iov_len;
	return len;
}

/* A READ, WRITE or COMMIT of the export's files that its file system
 * failed (the sub-FSAL's error, or the test build's injected fault): the
 * client gets the error, and the operator a line that says which file,
 * which operation and what to do, since MariaDB's own message names only
 * its side. At most one line in 10 s: a full disk fails every write, and
 * MariaDB retries some of them at once. */
static void io_failed(struct ppl_handle *h, enum ppl_fault_op op, uint64_t offset, size_t len, int err)
{
	/* per operation and kind of file: a full disk's failed page writes
	 * must not hide the log write that fails next */
	static uint64_t last_ns[3][PPL_FILE_CLASS_COUNT], quiet[3][PPL_FILE_CLASS_COUNT];
	static const char *const ops[] = {"WRITE", "COMMIT", "READ"};
	struct ppl_file f;
	char name[NAME_MAX + 1];

	ppl_file_of(h, &f, name, sizeof(name));
	uint64_t *lastp = &last_ns[op][f.cls], *quietp = &quiet[op][f.cls];
	uint64_t now = now_ns(), last = __atomic_load_n(lastp, __ATOMIC_RELAXED);

	if (last != 0 && now - last < 10000000000ull) {
		__atomic_add_fetch(quietp, 1, __ATOMIC_RELAXED);
		return;
	}
	if (!__atomic_compare_exchange_n(lastp, &last, now, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED))
		return;
	LogCrit(COMPONENT_FSAL,
		"PPL: a %s of %s (%zu bytes at offset %" PRIu64 ") failed in the export's file system: %s; the "
		"client gets the error (MariaDB stops on a failed log write or sync; it retries a failed page "
		"write). %s (%" PRIu64 " more such failure(s) not logged in the last 10 s)",
		ops[op], f.name ? f.name : "a file of the export", len, offset, strerror(err),
		err == ENOSPC || err == EDQUOT ? "Free space on the export's file system"
					       : "Check the disk (the kernel log says more), then restart MariaDB if it stopped",
		__atomic_exchange_n(quietp, 0, __ATOMIC_RELAXED));
}

/* The test build's disk-fault switch (ppl/fault.h), asked before the
 * sub-FSAL is: 0, or the errno the operation fails with as the disk's
 * would. Nothing outside the test build. */
static int disk_fault(struct ppl_handle *h, enum ppl_fault_op op)
{
#ifdef PPL_CRASH_POINTS
	struct ppl_file f;
	char name[NAME_MAX + 1];
	enum ppl_fault_files files = PPL_FAULT_FILE_OTHER;

	ppl_file_of(h, &f, name, sizeof(name));
	switch (f.cls) {
	case PPL_FILE_REDO_LOG:
	case PPL_FILE_REDO_NEW:
		files = PPL_FAULT_FILE_LOG;
		break;
	case PPL_FILE_TABLESPACE:
	case PPL_FILE_SYSTEM_TS:
	case PPL_FILE_UNDO_TS:
		files = PPL_FAULT_FILE_DATA;
		break;
	default:
		break;
	}
	return ppl_fault_hit(op, files, f.name ? f.name : "a file of the export");
#else
	(void)h, (void)op;
	return 0;
#endif
}

/* Log_On_Pmem: the sub-FSAL wrote a log WRITE without a sync. Its bytes
 * durable in the pool's log area, it is answered as stable (FILE_SYNC:
 * the client has nothing to COMMIT, and the commit it carries is done).
 * When the area cannot take them (full, too large), a WRITE the client
 * asked to be stable is synced here, as the sub-FSAL would have; an
 * UNSTABLE one stays unstable and waits for the client's COMMIT. */
static fsal_status_t pmem_log_durable(struct io_done *done, struct ppl_handle *h, struct fsal_io_arg *arg)
{
	struct ppl_file f;
	char name[NAME_MAX + 1];
	fsal_status_t st = fsalstat(ERR_FSAL_NO_ERROR, 0);

	ppl_file_of(h, &f, name, sizeof(name));
	if (ppl_hook_log_persist(done->pexp->hooks, &f, arg->offset, arg->iov, arg->iov_count, arg->io_amount)) {
		arg->fsal_stable = true;
		return st;
	}
	if (done->want_stable) {
		PPL_SUBCALL(done->pexp, st = h->sub->obj_ops->commit2(h->sub, (off_t)arg->offset, arg->io_amount));
		if (disk_error(st))
			io_failed(h, PPL_FAULT_SYNC, arg->offset, arg->io_amount, st.minor ? (int)st.minor : EIO);
		if (!FSAL_IS_ERROR(st))
			arg->fsal_stable = true;
	}
	return st;
}

/* The sub-FSAL wrote the bytes through; the engine sees them before the
 * client is told (the reply is sent by done->cb). */
static void write_done(struct fsal_obj_handle *sub, fsal_status_t ret, void *obj_data, void *caller_data)
{
	struct io_done *done = caller_data;
	struct fsal_io_arg *arg = obj_data;
	struct fsal_export *saved = op_ctx->fsal_export;
	struct ppl_handle *h = ppl_handle_of(done->obj);

	(void)sub;
	op_ctx->fsal_export = &done->pexp->exp;
	if (disk_error(ret))
		io_failed(h, PPL_FAULT_WRITE, arg->offset, iov_total(arg), ret.minor ? (int)ret.minor : EIO);
	if (!FSAL_IS_ERROR(ret) && done->pmem_log)
		ret = pmem_log_durable(done, h, arg);
	if (!FSAL_IS_ERROR(ret) && ppl_handle_class(h) != PPL_FILE_OTHER) {
		struct ppl_file f;
		char name[NAME_MAX + 1];
		int err;

		ppl_file_of(h, &f, name, sizeof(name));
		err = ppl_hook_write(done->pexp->hooks, &f, arg->offset, arg->iov, arg->iov_count,
				     arg->io_amount, arg->fsal_stable);
		if (err)
			ret = hook_error(err);
	}
	if (done->began) {
		struct ppl_file f;
		char name[NAME_MAX + 1];

		ppl_file_of(h, &f, name, sizeof(name));
		ppl_hook_write_end(done->pexp->hooks, &f, done->w_off, done->w_len);
	}
	done->cb(done->obj, ret, obj_data, done->cb_arg);
	op_ctx->fsal_export = saved;
	gsh_free(done);
}

/* The sub-FSAL filled the buffers; the engine may rebuild pages in them
 * before the reply goes out. */
static void read_done(struct fsal_obj_handle *sub, fsal_status_t ret, void *obj_data, void *caller_data)
{
	struct io_done *done = caller_data;
	struct fsal_io_arg *arg = obj_data;
	struct fsal_export *saved = op_ctx->fsal_export;
	struct ppl_handle *h = ppl_handle_of(done->obj);

	(void)sub;
	op_ctx->fsal_export = &done->pexp->exp;
	if (disk_error(ret))
		io_failed(h, PPL_FAULT_READ, arg->offset, iov_total(arg), ret.minor ? (int)ret.minor : EIO);
	if (!FSAL_IS_ERROR(ret) && ppl_handle_class(h) != PPL_FILE_OTHER) {
		struct ppl_file f;
		char name[NAME_MAX + 1];
		int err;

		ppl_file_of(h, &f, name, sizeof(name));
		err = ppl_hook_read(done->pexp->hooks, &f, arg->offset, arg->iov, arg->iov_count, arg->io_amount,
				    now_ns() - done->t0_ns);
		if (err)
			ret = hook_error(err);
	}
	if (done->began) {
		struct ppl_file f;
		char name[NAME_MAX + 1];

		ppl_file_of(h, &f, name, sizeof(name));
		ppl_hook_read_end(done->pexp->hooks, &f, done->w_off, done->w_len);
	}
	done->cb(done->obj, ret, obj_data, done->cb_arg);
	op_ctx->fsal_export = saved;
	gsh_free(done);
}

static struct io_done *io_done_new(struct fsal_obj_handle *obj, fsal_async_cb cb, void *cb_arg)
{
	struct io_done *d = gsh_malloc(sizeof(*d));

	d->obj = obj;
	d->pexp = ppl_ctx_export();
	d->cb = cb;
	d->cb_arg = cb_arg;
	d->began = false;
	d->pmem_log = false;
	d->want_stable = false;
	return d;
}

static void read2(struct fsal_obj_handle *obj, bool bypass, fsal_async_cb cb, struct fsal_io_arg *arg,
		  void *cb_arg)
{
	struct ppl_export *pexp = ppl_ctx_export();
	struct io_done *d = io_done_new(obj, cb, cb_arg);
	struct ppl_handle *h = ppl_handle_of(obj);
	int fault = disk_fault(h, PPL_FAULT_READ);

	if (fault) {
		io_failed(h, PPL_FAULT_READ, arg->offset, iov_total(arg), fault);
		gsh_free(d);
		cb(obj, hook_error(fault), arg, cb_arg);
		return;
	}
	if (ppl_handle_class(h) != PPL_FILE_OTHER) {
		struct ppl_file f;
		char name[NAME_MAX + 1];
		size_t len = iov_total(arg);

		ppl_file_of(h, &f, name, sizeof(name));
		ppl_hook_read_begin(pexp->hooks, &f, arg->offset, len);
		d->began = true;
		d->w_off = arg->offset;
		d->w_len = len;
	}
	d->t0_ns = now_ns();
	PPL_SUBCALL(pexp, h->sub->obj_ops->read2(h->sub, bypass, read_done, arg, d));
}

static void write2(struct fsal_obj_handle *obj, bool bypass, fsal_async_cb cb, struct fsal_io_arg *arg,
		   void *cb_arg)
{
	struct ppl_export *pexp = ppl_ctx_export();
	struct io_done *d = io_done_new(obj, cb, cb_arg);
	struct ppl_handle *h = ppl_handle_of(obj);
	int fault = disk_fault(h, PPL_FAULT_WRITE);

	if (fault) {
		io_failed(h, PPL_FAULT_WRITE, arg->offset, iov_total(arg), fault);
		gsh_free(d);
		cb(obj, hook_error(fault), arg, cb_arg);
		return;
	}
	if (ppl_handle_class(h) != PPL_FILE_OTHER) {
		struct ppl_file f;
		char name[NAME_MAX + 1];
		size_t len = iov_total(arg);
		int err;

		ppl_file_of(h, &f, name, sizeof(name));
		err = ppl_hook_write_begin(pexp->hooks, &f, arg->offset, arg->iov, arg->iov_count, len);
		if (err) {
			gsh_free(d);
			cb(obj, hook_error(err), arg, cb_arg);
			return;
		}
		d->began = true;
		d->w_off = arg->offset;
		d->w_len = len;
		if (ppl_hook_log_on_pmem(pexp->hooks, &f)) {
			d->pmem_log = true;
			d->want_stable = arg->fsal_stable;
			arg->fsal_stable = false;
		}
	}
	PPL_SUBCALL(pexp, h->sub->obj_ops->write2(h->sub, bypass, write_done, arg, d));
}

/* The sub-FSAL made the range durable; the engine's part of "durable"
 * (I2) completes before the COMMIT reply. */
static fsal_status_t commit2(struct fsal_obj_handle *obj, off_t offset, size_t len)
{
	struct ppl_export *pexp = ppl_ctx_export();
	struct ppl_handle *h = ppl_handle_of(obj);
	fsal_status_t st;
	int fault = disk_fault(h, PPL_FAULT_SYNC);

	if (fault) {
		io_failed(h, PPL_FAULT_SYNC, (uint64_t)offset, len, fault);
		return hook_error(fault);
	}
	uint64_t mark = 0;
	if (ppl_handle_class(h) == PPL_FILE_REDO_LOG) {
		struct ppl_file f;
		char name[NAME_MAX + 1];

		ppl_file_of(h, &f, name, sizeof(name));
		mark = ppl_hook_commit_mark(pexp->hooks, &f);
	}
	PPL_SUBCALL(pexp, st = h->sub->obj_ops->commit2(h->sub, offset, len));
	if (disk_error(st))
		io_failed(h, PPL_FAULT_SYNC, (uint64_t)offset, len, st.minor ? (int)st.minor : EIO);
	if (!FSAL_IS_ERROR(st) && ppl_handle_class(h) != PPL_FILE_OTHER) {
		struct ppl_file f;
		char name[NAME_MAX + 1];
		int err;

		ppl_file_of(h, &f, name, sizeof(name));
		err = ppl_hook_commit(pexp->hooks, &f, (uint64_t)offset, len, mark);
		if (err)
			st = hook_error(err);
	}
	return st;
}

static fsal_status_t open2(struct fsal_obj_handle *obj, struct state_t *state, fsal_openflags_t openflags,
			   enum fsal_create_mode createmode, const char *name, struct fsal_attrlist *attrs_in,
			   fsal_verifier_t verifier, struct fsal_obj_handle **new_obj,
			   struct fsal_attrlist *attrs_out, bool *caller_perm_check)
{
	struct ppl_export *pexp = ppl_ctx_export();
	struct fsal_obj_handle *sub = NULL;
	fsal_status_t st;

	PPL_SUBCALL(pexp, st = ppl_handle_of(obj)->sub->obj_ops->open2(ppl_handle_of(obj)->sub, state, openflags,
								     createmode, name, attrs_in, verifier, &sub,
								     attrs_out, caller_perm_check));
	/* Opened by name (possibly created): a new object to wrap. Opened by
	 * handle: `obj` itself, nothing to wrap. */
	if (sub)
		return ppl_wrap(pexp, sub, name, new_obj, st);
	return st;
}

static bool check_verifier(struct fsal_obj_handle *obj, fsal_verifier_t verifier)
{
	struct ppl_export *pexp = ppl_ctx_export();
	bool r;

	PPL_SUBCALL(pexp, r = ppl_handle_of(obj)->sub->obj_ops->check_verifier(ppl_handle_of(obj)->sub, verifier));
	return r;
}

static fsal_openflags_t status2(struct fsal_obj_handle *obj, struct state_t *state)
{
	struct ppl_export *pexp = ppl_ctx_export();
	fsal_openflags_t r;

	PPL_SUBCALL(pexp, r = ppl_handle_of(obj)->sub->obj_ops->status2(ppl_handle_of(obj)->sub, state));
	return r;
}

static fsal_status_t reopen2(struct fsal_obj_handle *obj, struct state_t *state, fsal_openflags_t openflags)
{
	struct ppl_export *pexp = ppl_ctx_export();
	fsal_status_t st;

	PPL_SUBCALL(pexp, st = ppl_handle_of(obj)->sub->obj_ops->reopen2(ppl_handle_of(obj)->sub, state,
								       openflags));
	return st;
}

static fsal_status_t seek2(struct fsal_obj_handle *obj, struct state_t *state, struct io_info *info)
{
	struct ppl_export *pexp = ppl_ctx_export();
	fsal_status_t st;

	PPL_SUBCALL(pexp, st = ppl_handle_of(obj)->sub->obj_ops->seek2(ppl_handle_of(obj)->sub, state, info));
	return st;
}

static fsal_status_t io_advise2(struct fsal_obj_handle *obj, struct state_t *state, struct io_hints *hints)
{
	struct ppl_export *pexp = ppl_ctx_export();
	fsal_status_t st;

	PPL_SUBCALL(pexp, st = ppl_handle_of(obj)->sub->obj_ops->io_advise2(ppl_handle_of(obj)->sub, state,
									  hints));
	return st;
}

static fsal_status_t lock_op2(struct fsal_obj_handle *obj, struct state_t *state, void *owner,
			      fsal_lock_op_t op, fsal_lock_param_t *req, fsal_lock_param_t *conflict)
{
	struct ppl_export *pexp = ppl_ctx_export();
	fsal_status_t st;

	PPL_SUBCALL(pexp, st = ppl_handle_of(obj)->sub->obj_ops->lock_op2(ppl_handle_of(obj)->sub, state, owner,
									op, req, conflict));
	return st;
}

static fsal_status_t lease_op2(struct fsal_obj_handle *obj, struct state_t *state, void *owner,
			       fsal_deleg_t deleg)
{
	struct ppl_export *pexp = ppl_ctx_export();
	fsal_status_t st;

	PPL_SUBCALL(pexp, st = ppl_handle_of(obj)->sub->obj_ops->lease_op2(ppl_handle_of(obj)->sub, state, owner,
									 deleg));
	return st;
}

static fsal_status_t close2(struct fsal_obj_handle *obj, struct state_t *state)
{
	struct ppl_export *pexp = ppl_ctx_export();
	fsal_status_t st;

	PPL_SUBCALL(pexp, st = ppl_handle_of(obj)->sub->obj_ops->close2(ppl_handle_of(obj)->sub, state));
	return st;
}

static fsal_status_t close_global(struct fsal_obj_handle *obj)
{
	struct ppl_export *pexp = ppl_ctx_export();
	fsal_status_t st;

	PPL_SUBCALL(pexp, st = ppl_handle_of(obj)->sub->obj_ops->close(ppl_handle_of(obj)->sub));
	return st;
}

static fsal_status_t fallocate(struct fsal_obj_handle *obj, struct state_t *state, uint64_t offset,
			       uint64_t length, bool allocate)
{
	struct ppl_export *pexp = ppl_ctx_export();
	fsal_status_t st;

	PPL_SUBCALL(pexp, st = ppl_handle_of(obj)->sub->obj_ops->fallocate(ppl_handle_of(obj)->sub, state, offset,
									 length, allocate));
	return st;
}

void ppl_file_ops_init(struct fsal_obj_ops *ops)
{
	ops->open2 = open2;
	ops->check_verifier = check_verifier;
	ops->status2 = status2;
	ops->reopen2 = reopen2;
	ops->read2 = read2;
	ops->write2 = write2;
	ops->seek2 = seek2;
	ops->io_advise2 = io_advise2;
	ops->commit2 = commit2;
	ops->lock_op2 = lock_op2;
	ops->lease_op2 = lease_op2;
	ops->close2 = close2;
	ops->close = close_global;
	ops->fallocate = fallocate;
}
