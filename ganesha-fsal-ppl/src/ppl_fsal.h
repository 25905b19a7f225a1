/* FSAL_PPL's Ganesha-side types: the module, the export (our parameters,
 * the engine hooks, the file-class map) and the object handle that wraps
 * the sub-FSAL's handle. */
#ifndef PPL_FSAL_H
#define PPL_FSAL_H

#include "config.h"

#include <pthread.h>

#include "fsal.h"
#include "FSAL/fsal_commonlib.h"

#include "ppl_classmap.h"
#include "ppl/store_config.h"
#include "ppl_hooks.h"

struct ppl_fsal_module {
	struct fsal_module module;
	struct fsal_obj_ops handle_ops;
};

extern struct ppl_fsal_module PPL;
/* The store's logger and thread hook onto Ganesha's (ppl_log.c). */
struct ppl_store_env;
extern const struct ppl_store_env ppl_ganesha_env;

struct ppl_export {
	struct fsal_export exp;
	struct ppl_config cfg;
	struct ppl_hooks *hooks;
	struct ppl_classmap classes;
	char *fullpath;                  /* for log lines */
	pthread_t stats_thread;
	bool stats_running;
	pthread_mutex_t stats_lock;
	pthread_cond_t stats_cond;
	bool stopping;
};

struct ppl_handle {
	struct fsal_obj_handle obj;
	struct fsal_obj_handle *sub;
	/* Class and name as last seen (lookup, create, readdir, rename);
	 * protected by `lock` because renames race with I/O. */
	pthread_mutex_t lock;
	enum ppl_file_class cls;
	char *name;
};

/* Run `expr` with op_ctx pointing at the sub-FSAL's export, as every
 * sub-FSAL call requires, and restore our export afterwards. */
#define PPL_SUBCALL(pexp, expr)                                  \
	do {                                                     \
		op_ctx->fsal_export = (pexp)->exp.sub_export;    \
		expr;                                            \
		op_ctx->fsal_export = &(pexp)->exp;              \
	} while (0)

static inline struct ppl_export *ppl_ctx_export(void)
{
	return container_of(op_ctx->fsal_export, struct ppl_export, exp);
}

static inline struct ppl_handle *ppl_handle_of(struct fsal_obj_handle *o)
{
	return container_of(o, struct ppl_handle, obj);
}

/* The class without taking the lock: I/O paths check it on every call and
 * only take the lock (ppl_file_of) for InnoDB's files. */
static inline enum ppl_file_class ppl_handle_class(struct ppl_handle *h)
{
	return __atomic_load_n(&h->cls, __ATOMIC_RELAXED);
}

/* ppl_export.c */
fsal_status_t ppl_create_export(struct fsal_module *fsal_hdl, void *parse_node,
				struct config_error_type *err_type, const struct fsal_up_vector *up_ops);
fsal_status_t ppl_update_export(struct fsal_module *fsal_hdl, void *parse_node,
				struct config_error_type *err_type, struct fsal_export *original,
				struct fsal_module *updated_super);

/* ppl_handle.c */
void ppl_handle_ops_init(struct fsal_obj_ops *ops);
/* Wraps a sub-FSAL handle (on success of `st`); `name` (may be NULL)
 * classifies regular files. */
fsal_status_t ppl_wrap(struct ppl_export *pexp, struct fsal_obj_handle *sub, const char *name,
		       struct fsal_obj_handle **out, fsal_status_t st);
fsal_status_t ppl_lookup_path(struct fsal_export *exp_hdl, const char *path,
			      struct fsal_obj_handle **handle, struct fsal_attrlist *attrs_out);
fsal_status_t ppl_create_handle(struct fsal_export *exp_hdl, struct gsh_buffdesc *hdl_desc,
				struct fsal_obj_handle **handle, struct fsal_attrlist *attrs_out);
/* The handle as the hooks see it; `name_buf` receives a copy of the name. */
void ppl_file_of(struct ppl_handle *h, struct ppl_file *f, char *name_buf, size_t len);
/* Records a (new) name for a handle: class and the class map follow. */
void ppl_handle_set_name(struct ppl_export *pexp, struct ppl_handle *h, const char *name);

/* ppl_file.c */
void ppl_file_ops_init(struct fsal_obj_ops *ops);

/* ppl_xattr.c */
void ppl_xattr_ops_init(struct fsal_obj_ops *ops);

/* ppl_scan.c: records the class of the files already in the export. */
void ppl_scan_export(struct ppl_export *pexp);

/* ppl_stats.c */
void ppl_stats_start(struct ppl_export *pexp);
void ppl_stats_stop(struct ppl_export *pexp);
void ppl_stats_log(struct ppl_export *pexp, const char *when);

#endif
