/* FSAL_PPL object handles: each wraps the sub-FSAL's handle and remembers
 * which InnoDB file it is (by the name it was reached by), so that the I/O
 * paths know where the engine hooks apply. Namespace operations are
 * forwarded; unlink and rename also tell the engine after they succeed. */
#include "ppl_fsal.h"

#include <string.h>

static void handle_key(struct ppl_export *pexp, struct fsal_obj_handle *sub, struct gsh_buffdesc *key)
{
	PPL_SUBCALL(pexp, sub->obj_ops->handle_to_key(sub, key));
}

void ppl_handle_set_name(struct ppl_export *pexp, struct ppl_handle *h, const char *name)
{
	struct gsh_buffdesc key;
	enum ppl_file_class cls;
	char *copy;

	if (h->obj.type != REGULAR_FILE || name == NULL)
		return;
	cls = ppl_classify(name);
	copy = gsh_strdup(name);
	pthread_mutex_lock(&h->lock);
	gsh_free(h->name);
	h->name = copy;
	__atomic_store_n(&h->cls, cls, __ATOMIC_RELAXED);
	pthread_mutex_unlock(&h->lock);
	handle_key(pexp, h->sub, &key);
	ppl_classmap_set(&pexp->classes, &key, cls, name);
	LogFullDebug(COMPONENT_FSAL, "PPL: file %" PRIu64 " is %s (%s)", h->obj.fileid, name,
		     ppl_file_class_name(cls));
}

void ppl_file_of(struct ppl_handle *h, struct ppl_file *f, char *name_buf, size_t len)
{
	pthread_mutex_lock(&h->lock);
	f->cls = h->cls;
	if (h->name && len) {
		snprintf(name_buf, len, "%s", h->name);
		f->name = name_buf;
	} else {
		f->name = NULL;
	}
	pthread_mutex_unlock(&h->lock);
	f->fileid = h->obj.fileid;
}

fsal_status_t ppl_wrap(struct ppl_export *pexp, struct fsal_obj_handle *sub, const char *name,
		       struct fsal_obj_handle **out, fsal_status_t st)
{
	struct ppl_handle *h;

	if (FSAL_IS_ERROR(st))
		return st;
	h = gsh_calloc(1, sizeof(*h));
	fsal_obj_handle_init(&h->obj, &pexp->exp, sub->type);
	h->obj.obj_ops = &PPL.handle_ops;
	h->obj.fsid = sub->fsid;
	h->obj.fileid = sub->fileid;
	h->obj.fs = sub->fs;
	h->obj.state_hdl = sub->state_hdl;
	h->sub = sub;
	pthread_mutex_init(&h->lock, NULL);
	h->cls = PPL_FILE_OTHER;
	if (sub->type == REGULAR_FILE) {
		if (name) {
			ppl_handle_set_name(pexp, h, name);
		} else {
			/* Reached by NFS file handle: the name is what we
			 * recorded when it was last seen by name, if ever. */
			struct gsh_buffdesc key;
			char buf[NAME_MAX + 1];

			handle_key(pexp, sub, &key);
			h->cls = ppl_classmap_get(&pexp->classes, &key, buf, sizeof(buf));
			if (buf[0])
				h->name = gsh_strdup(buf);
			if (h->cls == PPL_FILE_UNRESOLVED)
				LogDebug(COMPONENT_FSAL, "PPL: file %" PRIu64 " reached by handle, name never "
					 "seen: class unresolved", sub->fileid);
		}
	}
	*out = &h->obj;
	return st;
}

static void release(struct fsal_obj_handle *obj)
{
	struct ppl_handle *h = ppl_handle_of(obj);
	struct ppl_export *pexp = ppl_ctx_export();

	PPL_SUBCALL(pexp, h->sub->obj_ops->release(h->sub));
	fsal_obj_handle_fini(&h->obj);
	pthread_mutex_destroy(&h->lock);
	gsh_free(h->name);
	gsh_free(h);
}

static fsal_status_t lookup(struct fsal_obj_handle *parent, const char *path,
			    struct fsal_obj_handle **handle, struct fsal_attrlist *attrs_out)
{
	struct ppl_export *pexp = ppl_ctx_export();
	struct fsal_obj_handle *sub = NULL;
	fsal_status_t st;

	*handle = NULL;
	PPL_SUBCALL(pexp, st = ppl_handle_of(parent)->sub->obj_ops->lookup(ppl_handle_of(parent)->sub, path,
									 &sub, attrs_out));
	return ppl_wrap(pexp, sub, path, handle, st);
}

static fsal_status_t makedir(struct fsal_obj_handle *dir, const char *name, struct fsal_attrlist *attrs_in,
			     struct fsal_obj_handle **new_obj, struct fsal_attrlist *attrs_out)
{
	struct ppl_export *pexp = ppl_ctx_export();
	struct fsal_obj_handle *sub = NULL;
	fsal_status_t st;

	*new_obj = NULL;
	PPL_SUBCALL(pexp, st = ppl_handle_of(dir)->sub->obj_ops->mkdir(ppl_handle_of(dir)->sub, name,
								     attrs_in, &sub, attrs_out));
	return ppl_wrap(pexp, sub, name, new_obj, st);
}

static fsal_status_t makenode(struct fsal_obj_handle *dir, const char *name, object_file_type_t type,
			      struct fsal_attrlist *attrs_in, struct fsal_obj_handle **new_obj,
			      struct fsal_attrlist *attrs_out)
{
	struct ppl_export *pexp = ppl_ctx_export();
	struct fsal_obj_handle *sub = NULL;
	fsal_status_t st;

	*new_obj = NULL;
	PPL_SUBCALL(pexp, st = ppl_handle_of(dir)->sub->obj_ops->mknode(ppl_handle_of(dir)->sub, name, type,
								      attrs_in, &sub, attrs_out));
	return ppl_wrap(pexp, sub, name, new_obj, st);
}

static fsal_status_t makesymlink(struct fsal_obj_handle *dir, const char *name, const char *target,
				 struct fsal_attrlist *attrs_in, struct fsal_obj_handle **new_obj,
				 struct fsal_attrlist *attrs_out)
{
	struct ppl_export *pexp = ppl_ctx_export();
	struct fsal_obj_handle *sub = NULL;
	fsal_status_t st;

	*new_obj = NULL;
	PPL_SUBCALL(pexp, st = ppl_handle_of(dir)->sub->obj_ops->symlink(ppl_handle_of(dir)->sub, name,
								       target, attrs_in, &sub, attrs_out));
	return ppl_wrap(pexp, sub, name, new_obj, st);
}

static fsal_status_t readsymlink(struct fsal_obj_handle *obj, struct gsh_buffdesc *content, bool refresh)
{
	struct ppl_export *pexp = ppl_ctx_export();
	fsal_status_t st;

	PPL_SUBCALL(pexp, st = ppl_handle_of(obj)->sub->obj_ops->readlink(ppl_handle_of(obj)->sub, content,
									refresh));
	return st;
}

static fsal_status_t linkfile(struct fsal_obj_handle *obj, struct fsal_obj_handle *destdir, const char *name)
{
	struct ppl_export *pexp = ppl_ctx_export();
	struct ppl_handle *h = ppl_handle_of(obj);
	fsal_status_t st;

	PPL_SUBCALL(pexp, st = h->sub->obj_ops->link(h->sub, ppl_handle_of(destdir)->sub, name));
	/* A second name for a file reached only by handle resolves it. */
	if (!FSAL_IS_ERROR(st) && ppl_handle_class(h) == PPL_FILE_UNRESOLVED)
		ppl_handle_set_name(pexp, h, name);
	return st;
}

struct readdir_state {
	fsal_readdir_cb cb;
	struct ppl_export *pexp;
	void *dir_state;
};

/* Called by the sub-FSAL with op_ctx on the sub export: wrap the entry,
 * hand it up with op_ctx on ours. */
static enum fsal_dir_result readdir_cb(const char *name, struct fsal_obj_handle *sub,
				       struct fsal_attrlist *attrs, void *dir_state, fsal_cookie_t cookie)
{
	struct readdir_state *s = dir_state;
	struct fsal_obj_handle *obj;
	enum fsal_dir_result r;

	op_ctx->fsal_export = &s->pexp->exp;
	ppl_wrap(s->pexp, sub, name, &obj, fsalstat(ERR_FSAL_NO_ERROR, 0));
	r = s->cb(name, obj, attrs, s->dir_state, cookie);
	op_ctx->fsal_export = s->pexp->exp.sub_export;
	return r;
}

static fsal_status_t read_dirents(struct fsal_obj_handle *dir, fsal_cookie_t *whence, void *dir_state,
				  fsal_readdir_cb cb, attrmask_t attrmask, bool *eof)
{
	struct ppl_export *pexp = ppl_ctx_export();
	struct readdir_state s = { .cb = cb, .pexp = pexp, .dir_state = dir_state };
	fsal_status_t st;

	PPL_SUBCALL(pexp, st = ppl_handle_of(dir)->sub->obj_ops->readdir(ppl_handle_of(dir)->sub, whence, &s,
								       readdir_cb, attrmask, eof));
	return st;
}

static fsal_cookie_t compute_readdir_cookie(struct fsal_obj_handle *parent, const char *name)
{
	struct ppl_export *pexp = ppl_ctx_export();
	fsal_cookie_t c;

	PPL_SUBCALL(pexp, c = ppl_handle_of(parent)->sub->obj_ops->compute_readdir_cookie(
				  ppl_handle_of(parent)->sub, name));
	return c;
}

static int dirent_cmp(struct fsal_obj_handle *parent, const char *name1, fsal_cookie_t cookie1,
		      const char *name2, fsal_cookie_t cookie2)
{
	struct ppl_export *pexp = ppl_ctx_export();
	int r;

	PPL_SUBCALL(pexp, r = ppl_handle_of(parent)->sub->obj_ops->dirent_cmp(ppl_handle_of(parent)->sub, name1,
									    cookie1, name2, cookie2));
	return r;
}

/* The file a rename will overwrite, if it is one of InnoDB's: the engine
 * must drop its state (MariaDB's log re-creation renames over
 * ib_logfile0). Returns false if there is none; else fills `victim` and
 * copies its handle key (key_len 0 if it does not fit). */
static bool rename_victim(struct ppl_export *pexp, struct ppl_handle *newdir, const char *new_name,
			  struct ppl_handle *moving, struct ppl_file *victim, char *name_buf, size_t len,
			  unsigned char *key_buf, size_t key_cap, size_t *key_len)
{
	struct fsal_obj_handle *sub = NULL;
	fsal_status_t st;
	bool found = false;

	if (ppl_classify(new_name) == PPL_FILE_OTHER)
		return false;
	PPL_SUBCALL(pexp, st = newdir->sub->obj_ops->lookup(newdir->sub, new_name, &sub, NULL));
	if (FSAL_IS_ERROR(st) || sub == NULL)
		return false;
	if (sub->type == REGULAR_FILE && sub->fileid != moving->obj.fileid) {
		struct gsh_buffdesc key;

		victim->cls = ppl_classify(new_name);
		victim->fileid = sub->fileid;
		snprintf(name_buf, len, "%s", new_name);
		victim->name = name_buf;
		found = true;
		handle_key(pexp, sub, &key);
		*key_len = key.len <= key_cap ? key.len : 0;
		memcpy(key_buf, key.addr, *key_len);
	}
	PPL_SUBCALL(pexp, sub->obj_ops->release(sub));
	return found;
}

static fsal_status_t renamefile(struct fsal_obj_handle *obj, struct fsal_obj_handle *olddir,
				const char *old_name, struct fsal_obj_handle *newdir, const char *new_name)
{
	struct ppl_export *pexp = ppl_ctx_export();
	struct ppl_handle *h = ppl_handle_of(obj);
	struct ppl_file from, to, victim;
	char from_name[NAME_MAX + 1], victim_name[NAME_MAX + 1];
	unsigned char victim_key[256];
	size_t victim_key_len = 0;
	bool replaces = false;
	fsal_status_t st;

	if (obj->type == REGULAR_FILE)
		replaces = rename_victim(pexp, ppl_handle_of(newdir), new_name, h, &victim, victim_name,
					 sizeof(victim_name), victim_key, sizeof(victim_key), &victim_key_len);
	enum ppl_file_class old_cls = ppl_classify(old_name);
	if (obj->type == REGULAR_FILE && ppl_class_has_pages(old_cls) && !ppl_class_has_pages(ppl_classify(new_name))) {
		/* moved aside: what a disk would hold goes with it */
		struct ppl_file leaving = { .cls = old_cls, .fileid = obj->fileid, .name = old_name };
		ppl_hook_rename_away(pexp->hooks, &leaving);
	}
	PPL_SUBCALL(pexp, st = ppl_handle_of(olddir)->sub->obj_ops->rename(
				   h->sub, ppl_handle_of(olddir)->sub, old_name, ppl_handle_of(newdir)->sub,
				   new_name));
	if (FSAL_IS_ERROR(st) || obj->type != REGULAR_FILE)
		return st;
	ppl_file_of(h, &from, from_name, sizeof(from_name));
	if (from.name == NULL || strcmp(from.name, old_name) != 0) {
		/* Reached by handle or through another link: the name the
		 * client used is the one that moved. */
		snprintf(from_name, sizeof(from_name), "%s", old_name);
		from.name = from_name;
		if (from.cls == PPL_FILE_UNRESOLVED)
			from.cls = ppl_classify(old_name);
	}
	ppl_handle_set_name(pexp, h, new_name);
	if (victim_key_len)
		ppl_classmap_remove(&pexp->classes, &(struct gsh_buffdesc){.addr = victim_key, .len = victim_key_len});
	to.cls = ppl_classify(new_name);
	to.fileid = obj->fileid;
	to.name = new_name;
	if (from.cls != PPL_FILE_OTHER || to.cls != PPL_FILE_OTHER || replaces)
		ppl_hook_rename(pexp->hooks, &from, &to, replaces ? &victim : NULL);
	return st;
}

static fsal_status_t getattrs(struct fsal_obj_handle *obj, struct fsal_attrlist *attrs)
{
	struct ppl_export *pexp = ppl_ctx_export();
	fsal_status_t st;

	PPL_SUBCALL(pexp, st = ppl_handle_of(obj)->sub->obj_ops->getattrs(ppl_handle_of(obj)->sub, attrs));
	return st;
}

static fsal_status_t setattr2(struct fsal_obj_handle *obj, bool bypass, struct state_t *state,
			      struct fsal_attrlist *attrs)
{
	struct ppl_export *pexp = ppl_ctx_export();
	struct ppl_handle *h = ppl_handle_of(obj);
	fsal_status_t st;

	PPL_SUBCALL(pexp, st = h->sub->obj_ops->setattr2(h->sub, bypass, state, attrs));
	if (!FSAL_IS_ERROR(st) && FSAL_TEST_MASK(attrs->valid_mask, ATTR_SIZE)) {
		struct ppl_file f;
		char name[NAME_MAX + 1];

		ppl_file_of(h, &f, name, sizeof(name));
		if (f.cls != PPL_FILE_OTHER)
			ppl_hook_resize(pexp->hooks, &f, attrs->filesize);
	}
	return st;
}

static fsal_status_t file_unlink(struct fsal_obj_handle *dir, struct fsal_obj_handle *obj, const char *name)
{
	struct ppl_export *pexp = ppl_ctx_export();
	struct ppl_handle *h = ppl_handle_of(obj);
	fsal_status_t st;

	PPL_SUBCALL(pexp, st = ppl_handle_of(dir)->sub->obj_ops->unlink(ppl_handle_of(dir)->sub, h->sub, name));
	if (!FSAL_IS_ERROR(st) && obj->type == REGULAR_FILE) {
		struct ppl_file f = { .cls = ppl_classify(name), .fileid = obj->fileid, .name = name };
		struct gsh_buffdesc key;

		if (f.cls != PPL_FILE_OTHER)
			ppl_hook_unlink(pexp->hooks, &f);
		/* Keeps the map as large as the live files (InnoDB does not
		 * hard-link, so this was the file's only name). */
		handle_key(pexp, h->sub, &key);
		ppl_classmap_remove(&pexp->classes, &key);
	}
	return st;
}

static fsal_status_t handle_to_wire(const struct fsal_obj_handle *obj, fsal_digesttype_t type,
				    struct gsh_buffdesc *fh)
{
	struct ppl_export *pexp = ppl_ctx_export();
	const struct ppl_handle *h = container_of(obj, struct ppl_handle, obj);
	fsal_status_t st;

	PPL_SUBCALL(pexp, st = h->sub->obj_ops->handle_to_wire(h->sub, type, fh));
	return st;
}

static void handle_to_key(struct fsal_obj_handle *obj, struct gsh_buffdesc *fh)
{
	struct ppl_export *pexp = ppl_ctx_export();

	PPL_SUBCALL(pexp, ppl_handle_of(obj)->sub->obj_ops->handle_to_key(ppl_handle_of(obj)->sub, fh));
}

static bool is_referral(struct fsal_obj_handle *obj, struct fsal_attrlist *attrs, bool cache_attrs)
{
	struct ppl_export *pexp = ppl_ctx_export();
	bool r;

	PPL_SUBCALL(pexp, r = ppl_handle_of(obj)->sub->obj_ops->is_referral(ppl_handle_of(obj)->sub, attrs,
									  cache_attrs));
	return r;
}

void ppl_handle_ops_init(struct fsal_obj_ops *ops)
{
	fsal_default_obj_ops_init(ops);
	ops->release = release;
	ops->lookup = lookup;
	ops->readdir = read_dirents;
	ops->compute_readdir_cookie = compute_readdir_cookie;
	ops->dirent_cmp = dirent_cmp;
	ops->mkdir = makedir;
	ops->mknode = makenode;
	ops->symlink = makesymlink;
	ops->readlink = readsymlink;
	ops->getattrs = getattrs;
	ops->link = linkfile;
	ops->rename = renamefile;
	ops->unlink = file_unlink;
	ops->setattr2 = setattr2;
	ops->handle_to_wire = handle_to_wire;
	ops->handle_to_key = handle_to_key;
	ops->is_referral = is_referral;
	ppl_file_ops_init(ops);
	ppl_xattr_ops_init(ops);
}

fsal_status_t ppl_lookup_path(struct fsal_export *exp_hdl, const char *path, struct fsal_obj_handle **handle,
			      struct fsal_attrlist *attrs_out)
{
	struct ppl_export *pexp = container_of(exp_hdl, struct ppl_export, exp);
	struct fsal_obj_handle *sub = NULL;
	const char *base = strrchr(path, '/');
	fsal_status_t st;

	*handle = NULL;
	PPL_SUBCALL(pexp, st = pexp->exp.sub_export->exp_ops.lookup_path(pexp->exp.sub_export, path, &sub,
									 attrs_out));
	return ppl_wrap(pexp, sub, base ? base + 1 : path, handle, st);
}

fsal_status_t ppl_create_handle(struct fsal_export *exp_hdl, struct gsh_buffdesc *hdl_desc,
				struct fsal_obj_handle **handle, struct fsal_attrlist *attrs_out)
{
	struct ppl_export *pexp = container_of(exp_hdl, struct ppl_export, exp);
	struct fsal_obj_handle *sub = NULL;
	fsal_status_t st;

	*handle = NULL;
	PPL_SUBCALL(pexp, st = pexp->exp.sub_export->exp_ops.create_handle(pexp->exp.sub_export, hdl_desc,
									   &sub, attrs_out));
	return ppl_wrap(pexp, sub, NULL, handle, st);
}
