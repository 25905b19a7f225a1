/* The engine hooks: classify, count, log at debug level, and hand redo
 * writes, page reads and page writes to the engine (applier's store.c and
 * store_*.c). See ppl_hooks.h for where each is called. */
#include "config.h"
#include "log.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ppl/fileclass.h"
#include "ppl/store_config.h"
#include "ppl/control.h"
#include "ppl/fault.h"
#include "ppl/store.h"
#include "ppl_hooks.h"
#include "ppl_fsal.h"

struct ppl_hooks {
	struct ppl_hook_counts c; /* updated with relaxed atomics */
	struct ppl_store *engine;
	struct ppl_control *control;
	bool log_on_pmem;
};

static char *control_answer(void *arg, const char *request)
{
	struct ppl_hooks *h = arg;
	/* the endpoint's text, for node_exporter's textfile collector */
	if (strcmp(request, "metrics") == 0)
		return ppl_store_metrics(h->engine);
	return ppl_store_json(h->engine, request);
}

static const char *const class_names[PPL_FILE_CLASS_COUNT] = {
	[PPL_FILE_OTHER] = "other",
	[PPL_FILE_REDO_LOG] = "redo_log",
	[PPL_FILE_REDO_NEW] = "redo_new",
	[PPL_FILE_TABLESPACE] = "tablespace",
	[PPL_FILE_SYSTEM_TS] = "system_ts",
	[PPL_FILE_UNDO_TS] = "undo_ts",
	[PPL_FILE_UNRESOLVED] = "unresolved",
};

static const char *const op_names[PPL_OP_COUNT] = {
	[PPL_OP_READ] = "read",
	[PPL_OP_WRITE] = "write",
	[PPL_OP_COMMIT] = "commit",
	[PPL_OP_RESIZE] = "resize",
	[PPL_OP_UNLINK] = "unlink",
	[PPL_OP_RENAME_FROM] = "rename_from",
	[PPL_OP_RENAME_TO] = "rename_to",
};

const char *ppl_file_class_name(enum ppl_file_class cls)
{
	return cls < PPL_FILE_CLASS_COUNT ? class_names[cls] : "?";
}

/* What the engine does with each kind of InnoDB file (ppl/fileclass.h
 * says which name is which): the files whose pages the redo covers are
 * rebuilt and their writes verified or elided (the intermediate #sql
 * tables of ALTER ... COPY included: they are logged like any table);
 * everything else, the temporary tablespace and older logs included,
 * passes through. */
enum ppl_file_class ppl_classify(const char *name)
{
	if (name == NULL)
		return PPL_FILE_UNRESOLVED;
	switch (ppl_innodb_file_of(name)) {
	case PPL_INNODB_REDO:
		return PPL_FILE_REDO_LOG;
	case PPL_INNODB_REDO_NEW:
		return PPL_FILE_REDO_NEW;
	case PPL_INNODB_SYSTEM:
		return PPL_FILE_SYSTEM_TS;
	case PPL_INNODB_UNDO:
		return PPL_FILE_UNDO_TS;
	case PPL_INNODB_TABLE:
	case PPL_INNODB_INTERMEDIATE:
		return PPL_FILE_TABLESPACE;
	default:
		return PPL_FILE_OTHER;
	}
}

bool ppl_class_has_pages(enum ppl_file_class cls)
{
	return cls == PPL_FILE_TABLESPACE || cls == PPL_FILE_SYSTEM_TS || cls == PPL_FILE_UNDO_TS;
}

struct ppl_hooks *ppl_hooks_create(const char *datadir, const struct ppl_config *cfg, char *err, size_t errlen)
{
	struct ppl_hooks *h = calloc(1, sizeof(struct ppl_hooks));
	struct ppl_store_env env = ppl_ganesha_env;
	/* POSIX, behind the disk-fault switch in the test build (ppl/fault.h) */
	env.io = ppl_fault_io();
	if (h == NULL || (h->engine = ppl_store_new(datadir, &env)) == NULL) {
		snprintf(err, errlen, "out of memory");
		free(h);
		return NULL;
	}
	ppl_store_set_verify(h->engine, cfg->verify);
	ppl_store_set_page_cache(h->engine, (size_t)cfg->page_cache_size);
	if (cfg->elision_port && ppl_store_start_elision(h->engine, cfg, err, errlen) != 0) {
		ppl_store_free(h->engine);
		free(h);
		return NULL;
	}
	if (ppl_store_start_archive(h->engine, cfg, err, errlen) != 0 ||
	    ppl_store_start_ingest_behind(h->engine, cfg, err, errlen) != 0 ||
	    ppl_store_start_log_on_pmem(h->engine, cfg, err, errlen) != 0) {
		ppl_store_free(h->engine);
		free(h);
		return NULL;
	}
	h->log_on_pmem = cfg->log_on_pmem;
	ppl_store_start_from_disk(h->engine);
	char path[4096], cerr[512];
	snprintf(path, sizeof(path), "%s.ctl", cfg->pool_path);
	h->control = ppl_control_start(path, control_answer, h, cerr, sizeof(cerr));
	if (h->control == NULL)
		LogWarn(COMPONENT_FSAL, "PPL: %s: no live inspection socket (%s); the export works, "
			"`ppl-inspect live` cannot reach it", datadir, cerr);
	if (cfg->metrics_port && ppl_store_start_metrics(h->engine, cfg, cerr, sizeof(cerr)) != 0)
		LogWarn(COMPONENT_FSAL, "PPL: %s: the metrics endpoint is off: %s; the export works, "
			"`ppl-inspect live %s metrics` gives the same figures", datadir, cerr, cfg->pool_path);
	return h;
}

int ppl_hook_write_begin(struct ppl_hooks *h, const struct ppl_file *f, uint64_t offset,
			 const struct iovec *iov, int iovcnt, size_t len)
{
	if (f->cls != PPL_FILE_REDO_LOG && !ppl_class_has_pages(f->cls))
		return 0;
	return ppl_store_write_begin(h->engine, f->cls == PPL_FILE_REDO_LOG, f->fileid, offset, iov, iovcnt, len);
}

void ppl_hook_write_end(struct ppl_hooks *h, const struct ppl_file *f, uint64_t offset, size_t len)
{
	if (f->cls != PPL_FILE_REDO_LOG && !ppl_class_has_pages(f->cls))
		return;
	ppl_store_write_end(h->engine, f->cls == PPL_FILE_REDO_LOG, f->fileid, offset, len);
}

/* No class test here: a file renamed between the two calls must still
 * leave the stripes it entered. */
void ppl_hook_read_begin(struct ppl_hooks *h, const struct ppl_file *f, uint64_t offset, size_t len)
{
	ppl_store_read_begin(h->engine, f->fileid, offset, len);
}

void ppl_hook_read_end(struct ppl_hooks *h, const struct ppl_file *f, uint64_t offset, size_t len)
{
	ppl_store_read_end(h->engine, f->fileid, offset, len);
}

void ppl_hooks_destroy(struct ppl_hooks *h)
{
	if (h == NULL)
		return;
	ppl_control_stop(h->control);
	ppl_store_free(h->engine);
	free(h);
}

int ppl_hooks_engine_format(struct ppl_hooks *h, char *buf, size_t len)
{
	return ppl_store_format(h->engine, buf, len);
}

int ppl_hooks_pool_format(struct ppl_hooks *h, char *buf, size_t len)
{
	return h->engine ? ppl_store_format_pool(h->engine, buf, len) : 0;
}

int ppl_hooks_archive_format(struct ppl_hooks *h, char *buf, size_t len)
{
	return h->engine ? ppl_store_format_archive(h->engine, buf, len) : 0;
}

static void count(struct ppl_hooks *h, enum ppl_file_class cls, enum ppl_op op, uint64_t bytes)
{
	__atomic_fetch_add(&h->c.ops[cls][op], 1, __ATOMIC_RELAXED);
	if (bytes)
		__atomic_fetch_add(&h->c.bytes[cls][op], bytes, __ATOMIC_RELAXED);
}

void ppl_hooks_snapshot(struct ppl_hooks *h, struct ppl_hook_counts *out)
{
	for (int c = 0; c < PPL_FILE_CLASS_COUNT; c++)
		for (int o = 0; o < PPL_OP_COUNT; o++) {
			out->ops[c][o] = __atomic_load_n(&h->c.ops[c][o], __ATOMIC_RELAXED);
			out->bytes[c][o] = __atomic_load_n(&h->c.bytes[c][o], __ATOMIC_RELAXED);
		}
}

/* snprintf-style append that keeps counting past the end of buf. */
static size_t append(char *buf, size_t len, size_t used, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
static size_t append(char *buf, size_t len, size_t used, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(used < len ? buf + used : NULL, used < len ? len - used : 0, fmt, ap);
	va_end(ap);
	return used + (n > 0 ? (size_t)n : 0);
}

int ppl_hook_counts_format(const struct ppl_hook_counts *c, char *buf, size_t len)
{
	size_t used = 0;

	if (len)
		buf[0] = '\0';
	/* Only InnoDB's files: "other" is plain pass-through traffic. */
	for (int cls = PPL_FILE_REDO_LOG; cls < PPL_FILE_CLASS_COUNT; cls++) {
		const char *sep = used ? "; " : "";
		bool named = false;

		for (int op = 0; op < PPL_OP_COUNT; op++) {
			if (c->ops[cls][op] == 0)
				continue;
			if (!named)
				used = append(buf, len, used, "%s%s:", sep, class_names[cls]);
			used = append(buf, len, used, "%s %s %" PRIu64, named ? "," : "", op_names[op],
				      c->ops[cls][op]);
			if (op == PPL_OP_READ || op == PPL_OP_WRITE)
				used = append(buf, len, used, "/%" PRIu64 " B", c->bytes[cls][op]);
			named = true;
		}
	}
	if (used == 0)
		used = append(buf, len, used, "no InnoDB file activity");
	return (int)used;
}

static size_t iov_total(const struct iovec *iov, int iovcnt)
{
	size_t n = 0;

	for (int i = 0; i < iovcnt; i++)
		n += iov[i].iov_len;
	return n;
}

int ppl_hook_write(struct ppl_hooks *h, const struct ppl_file *f, uint64_t offset,
		   const struct iovec *iov, int iovcnt, size_t len, bool stable)
{
	count(h, f->cls, PPL_OP_WRITE, len);
	LogDebug(COMPONENT_FSAL, "PPL: write %s %s (fileid %" PRIu64 ") offset %" PRIu64
		 " length %zu of %zu in %d buffers%s", ppl_file_class_name(f->cls),
		 f->name ? f->name : "(name unknown)", f->fileid, offset, len, iov_total(iov, iovcnt),
		 iovcnt, stable ? " stable" : "");
	if (f->cls == PPL_FILE_REDO_LOG) {
		int rc = ppl_store_log_write(h->engine, f->fileid, offset, iov, iovcnt, len);
		/* a stable WRITE: the sub-FSAL synced the file, so the log is
		 * durable up to everything parsed, this write included */
		if (rc == 0 && stable)
			ppl_store_log_synced(h->engine, f->fileid, ppl_store_log_mark(h->engine));
		return rc;
	}
	if (ppl_class_has_pages(f->cls))
		ppl_store_write(h->engine, f->fileid, offset, iov, iovcnt, len);
	return 0;
}

bool ppl_hook_log_on_pmem(struct ppl_hooks *h, const struct ppl_file *f)
{
	return h->log_on_pmem && f->cls == PPL_FILE_REDO_LOG;
}

bool ppl_hook_log_persist(struct ppl_hooks *h, const struct ppl_file *f, uint64_t offset, const struct iovec *iov,
			  int iovcnt, size_t len)
{
	return ppl_store_log_persist(h->engine, f->fileid, offset, iov, iovcnt, len) == 0;
}

uint64_t ppl_hook_commit_mark(struct ppl_hooks *h, const struct ppl_file *f)
{
	return f->cls == PPL_FILE_REDO_LOG ? ppl_store_log_mark(h->engine) : 0;
}

int ppl_hook_commit(struct ppl_hooks *h, const struct ppl_file *f, uint64_t offset, size_t len, uint64_t mark)
{
	count(h, f->cls, PPL_OP_COMMIT, 0);
	if (f->cls == PPL_FILE_REDO_LOG)
		ppl_store_log_synced(h->engine, f->fileid, mark);
	LogDebug(COMPONENT_FSAL, "PPL: commit %s %s (fileid %" PRIu64 ") offset %" PRIu64 " length %zu",
		 ppl_file_class_name(f->cls), f->name ? f->name : "(name unknown)", f->fileid, offset,
		 len);
	return 0;
}

int ppl_hook_read(struct ppl_hooks *h, const struct ppl_file *f, uint64_t offset,
		  struct iovec *iov, int iovcnt, size_t len, uint64_t read_ns)
{
	count(h, f->cls, PPL_OP_READ, len);
	LogDebug(COMPONENT_FSAL, "PPL: read %s %s (fileid %" PRIu64 ") offset %" PRIu64
		 " length %zu in %d buffers of %zu", ppl_file_class_name(f->cls),
		 f->name ? f->name : "(name unknown)", f->fileid, offset, len, iovcnt,
		 iov_total(iov, iovcnt));
	if (ppl_class_has_pages(f->cls))
		return ppl_store_read(h->engine, f->fileid, offset, iov, iovcnt, len, read_ns);
	return 0;
}

void ppl_hook_resize(struct ppl_hooks *h, const struct ppl_file *f, uint64_t new_size)
{
	count(h, f->cls, PPL_OP_RESIZE, 0);
	LogDebug(COMPONENT_FSAL, "PPL: resize %s %s (fileid %" PRIu64 ") to %" PRIu64,
		 ppl_file_class_name(f->cls), f->name ? f->name : "(name unknown)", f->fileid,
		 new_size);
	/* Truncated to nothing: what follows is a new file (a copy over it,
	 * O_TRUNC), not what the log describes. InnoDB itself shrinks files
	 * only after logging it (TRIM_PAGES), never to zero. */
	if (new_size == 0 && (ppl_class_has_pages(f->cls) || f->cls == PPL_FILE_UNRESOLVED))
		ppl_store_file_gone(h->engine, f->fileid);
}

void ppl_hook_rename_away(struct ppl_hooks *h, const struct ppl_file *f)
{
	ppl_store_file_leaving(h->engine, f->fileid);
}

void ppl_hook_unlink(struct ppl_hooks *h, const struct ppl_file *f)
{
	count(h, f->cls, PPL_OP_UNLINK, 0);
	LogDebug(COMPONENT_FSAL, "PPL: unlink %s %s (fileid %" PRIu64 ")", ppl_file_class_name(f->cls),
		 f->name ? f->name : "(name unknown)", f->fileid);
	if (ppl_class_has_pages(f->cls) || f->cls == PPL_FILE_UNRESOLVED)
		ppl_store_file_gone(h->engine, f->fileid);
	else if (f->cls == PPL_FILE_REDO_LOG)
		ppl_store_log_gone(h->engine, f->fileid);
}

void ppl_hook_rename(struct ppl_hooks *h, const struct ppl_file *from, const struct ppl_file *to,
		     const struct ppl_file *replaced)
{
	count(h, from->cls, PPL_OP_RENAME_FROM, 0);
	count(h, to->cls, PPL_OP_RENAME_TO, 0);
	/* An open file a client unlinks is renamed to a hidden name and
	 * removed only at its last close (ppl-mount, like NFS clients): to
	 * the engine it is gone now, and its inode number may come back. */
	if (ppl_class_has_pages(from->cls) && !ppl_class_has_pages(to->cls))
		ppl_store_file_gone(h->engine, from->fileid);
	if (replaced) {
		count(h, replaced->cls, PPL_OP_UNLINK, 0);
		if (ppl_class_has_pages(replaced->cls) || replaced->cls == PPL_FILE_UNRESOLVED)
			ppl_store_file_gone(h->engine, replaced->fileid);
	}
	LogDebug(COMPONENT_FSAL, "PPL: rename %s %s -> %s %s (fileid %" PRIu64 ")%s%s",
		 ppl_file_class_name(from->cls), from->name ? from->name : "?",
		 ppl_file_class_name(to->cls), to->name ? to->name : "?", from->fileid,
		 replaced ? ", replacing " : "", replaced ? ppl_file_class_name(replaced->cls) : "");
	if (to->cls == PPL_FILE_REDO_LOG && from->cls != PPL_FILE_REDO_LOG)
		ppl_store_log_replaced(h->engine, replaced && replaced->cls == PPL_FILE_REDO_LOG ? replaced->fileid : 0);
	else if (from->cls == PPL_FILE_REDO_LOG && to->cls != PPL_FILE_REDO_LOG)
		ppl_store_log_gone(h->engine, from->fileid);
}
