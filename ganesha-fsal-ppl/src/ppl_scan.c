/* Start-up scan: NFS clients keep file handles across a Ganesha restart
 * (mariadbd keeps writing ib_logfile0 through the handle it had), and a
 * handle carries no name. Walking the export once through the sub-FSAL
 * records the class of every file where MariaDB puts them (a data
 * directory up to three levels below the export, as the engine looks for
 * ib_logfile0, and its database directories), so such handles resolve to
 * the right class from the first request on. A table whose handle stayed
 * unresolved would be read without its pending records: a page whose
 * write was elided would come back stale. */
#include "ppl_fsal.h"

#include <time.h>

#define SCAN_DEPTH 5            /* export/a/b/c/ib_logfile0, export/a/b/c/db/t.ibd */
#define SCAN_MAX_FILES 1000000u /* a bound, not a limit MariaDB reaches */

struct scan {
	struct ppl_export *pexp;
	unsigned files;
	unsigned by_class[PPL_FILE_CLASS_COUNT];
	struct fsal_obj_handle **dirs; /* subdirectories still to walk */
	size_t ndirs, capdirs;
	bool truncated;
};

/* Called by the sub-FSAL with op_ctx on its export; owns `sub`. */
static enum fsal_dir_result scan_entry(const char *name, struct fsal_obj_handle *sub,
				       struct fsal_attrlist *attrs, void *state, fsal_cookie_t cookie)
{
	struct scan *s = state;

	(void)attrs;
	(void)cookie;
	if (s->files >= SCAN_MAX_FILES) {
		s->truncated = true;
		sub->obj_ops->release(sub);
		return DIR_TERMINATE;
	}
	if (sub->type == REGULAR_FILE) {
		struct gsh_buffdesc key;
		enum ppl_file_class cls = ppl_classify(name);

		sub->obj_ops->handle_to_key(sub, &key);
		ppl_classmap_set(&s->pexp->classes, &key, cls, name);
		s->files++;
		s->by_class[cls]++;
	} else if (sub->type == DIRECTORY && s->dirs) {
		if (s->ndirs == s->capdirs) {
			s->capdirs = s->capdirs ? 2 * s->capdirs : 16;
			s->dirs = gsh_realloc(s->dirs, s->capdirs * sizeof(*s->dirs));
		}
		s->dirs[s->ndirs++] = sub;
		return DIR_CONTINUE;
	}
	sub->obj_ops->release(sub);
	return DIR_CONTINUE;
}

static fsal_status_t scan_dir(struct scan *s, struct fsal_obj_handle *dir)
{
	fsal_cookie_t cookie = 0;
	bool eof = false;
	fsal_status_t st = fsalstat(ERR_FSAL_NO_ERROR, 0);

	while (!eof && !s->truncated) {
		st = dir->obj_ops->readdir(dir, cookie ? &cookie : NULL, s, scan_entry, 0, &eof);
		if (FSAL_IS_ERROR(st))
			break;
		if (!eof)
			break; /* the callback stopped it: the bound was hit */
	}
	return st;
}

void ppl_scan_export(struct ppl_export *pexp)
{
	struct fsal_export *sub_exp = pexp->exp.sub_export;
	struct fsal_export *saved = op_ctx->fsal_export;
	struct fsal_obj_handle *root = NULL;
	struct scan s = { .pexp = pexp };
	struct timespec t0, t1;
	fsal_status_t st;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	op_ctx->fsal_export = sub_exp;
	st = sub_exp->exp_ops.lookup_path(sub_exp, pexp->fullpath, &root, NULL);
	if (FSAL_IS_ERROR(st)) {
		op_ctx->fsal_export = saved;
		LogWarn(COMPONENT_FSAL, "PPL: export %s: cannot look up the export root to scan it (%s): "
			"files reached by NFS handle before being looked up by name stay unresolved",
			pexp->fullpath, msg_fsal_err(st.major));
		return;
	}
	s.dirs = gsh_malloc(16 * sizeof(*s.dirs));
	s.capdirs = 16;
	st = scan_dir(&s, root);
	root->obj_ops->release(root);
	/* The levels below, down to database directories of the deepest
	 * data directory; the last level's subdirectories are not walked
	 * (s.dirs = NULL makes scan_entry release them). */
	for (int depth = 1; depth < SCAN_DEPTH && !FSAL_IS_ERROR(st); depth++) {
		size_t end = s.ndirs;
		struct fsal_obj_handle **level = s.dirs;

		s.dirs = depth + 1 < SCAN_DEPTH ? gsh_malloc(16 * sizeof(*s.dirs)) : NULL;
		s.ndirs = 0;
		s.capdirs = s.dirs ? 16 : 0;
		for (size_t i = 0; i < end; i++) {
			if (!FSAL_IS_ERROR(st) && !s.truncated)
				st = scan_dir(&s, level[i]);
			level[i]->obj_ops->release(level[i]);
		}
		gsh_free(level);
	}
	for (size_t i = 0; s.dirs && i < s.ndirs; i++)
		s.dirs[i]->obj_ops->release(s.dirs[i]);
	gsh_free(s.dirs);
	op_ctx->fsal_export = saved;
	clock_gettime(CLOCK_MONOTONIC, &t1);

	if (FSAL_IS_ERROR(st))
		LogWarn(COMPONENT_FSAL, "PPL: export %s: scan stopped by an error (%s): files it did not "
			"reach resolve when next looked up by name", pexp->fullpath, msg_fsal_err(st.major));
	LogEvent(COMPONENT_FSAL, "PPL: export %s: scanned %u files in %ld ms%s: redo log %s, %u "
		 "tablespaces, %u system, %u undo, %u other", pexp->fullpath, s.files,
		 (long)((t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000),
		 s.truncated ? " (stopped at the bound)" : "",
		 s.by_class[PPL_FILE_REDO_LOG] ? "found" : "absent", s.by_class[PPL_FILE_TABLESPACE],
		 s.by_class[PPL_FILE_SYSTEM_TS], s.by_class[PPL_FILE_UNDO_TS], s.by_class[PPL_FILE_OTHER]);
}
