/* Extended attributes (Ganesha's ext_attr calls and NFSv4.2 xattrs):
 * forwarded unchanged; InnoDB does not use them. */
#include "ppl_fsal.h"

#define SUB(obj) (ppl_handle_of(obj)->sub)

static fsal_status_t list_ext_attrs(struct fsal_obj_handle *obj, unsigned int cookie,
				    struct fsal_xattrent *tab, unsigned int tabsize, unsigned int *nb,
				    int *eol)
{
	struct ppl_export *pexp = ppl_ctx_export();
	fsal_status_t st;

	PPL_SUBCALL(pexp, st = SUB(obj)->obj_ops->list_ext_attrs(SUB(obj), cookie, tab, tabsize, nb, eol));
	return st;
}

static fsal_status_t getextattr_id_by_name(struct fsal_obj_handle *obj, const char *name, unsigned int *id)
{
	struct ppl_export *pexp = ppl_ctx_export();
	fsal_status_t st;

	PPL_SUBCALL(pexp, st = SUB(obj)->obj_ops->getextattr_id_by_name(SUB(obj), name, id));
	return st;
}

static fsal_status_t getextattr_value_by_name(struct fsal_obj_handle *obj, const char *name, void *buf,
					      size_t size, size_t *out)
{
	struct ppl_export *pexp = ppl_ctx_export();
	fsal_status_t st;

	PPL_SUBCALL(pexp, st = SUB(obj)->obj_ops->getextattr_value_by_name(SUB(obj), name, buf, size, out));
	return st;
}

static fsal_status_t getextattr_value_by_id(struct fsal_obj_handle *obj, unsigned int id, void *buf,
					    size_t size, size_t *out)
{
	struct ppl_export *pexp = ppl_ctx_export();
	fsal_status_t st;

	PPL_SUBCALL(pexp, st = SUB(obj)->obj_ops->getextattr_value_by_id(SUB(obj), id, buf, size, out));
	return st;
}

static fsal_status_t setextattr_value(struct fsal_obj_handle *obj, const char *name, void *buf, size_t size,
				      int create)
{
	struct ppl_export *pexp = ppl_ctx_export();
	fsal_status_t st;

	PPL_SUBCALL(pexp, st = SUB(obj)->obj_ops->setextattr_value(SUB(obj), name, buf, size, create));
	return st;
}

static fsal_status_t setextattr_value_by_id(struct fsal_obj_handle *obj, unsigned int id, void *buf,
					    size_t size)
{
	struct ppl_export *pexp = ppl_ctx_export();
	fsal_status_t st;

	PPL_SUBCALL(pexp, st = SUB(obj)->obj_ops->setextattr_value_by_id(SUB(obj), id, buf, size));
	return st;
}

static fsal_status_t remove_extattr_by_id(struct fsal_obj_handle *obj, unsigned int id)
{
	struct ppl_export *pexp = ppl_ctx_export();
	fsal_status_t st;

	PPL_SUBCALL(pexp, st = SUB(obj)->obj_ops->remove_extattr_by_id(SUB(obj), id));
	return st;
}

static fsal_status_t remove_extattr_by_name(struct fsal_obj_handle *obj, const char *name)
{
	struct ppl_export *pexp = ppl_ctx_export();
	fsal_status_t st;

	PPL_SUBCALL(pexp, st = SUB(obj)->obj_ops->remove_extattr_by_name(SUB(obj), name));
	return st;
}

static fsal_status_t getxattrs(struct fsal_obj_handle *obj, xattrkey4 *name, xattrvalue4 *value)
{
	struct ppl_export *pexp = ppl_ctx_export();
	fsal_status_t st;

	PPL_SUBCALL(pexp, st = SUB(obj)->obj_ops->getxattrs(SUB(obj), name, value));
	return st;
}

static fsal_status_t setxattrs(struct fsal_obj_handle *obj, setxattr_option4 option, xattrkey4 *name,
			       xattrvalue4 *value)
{
	struct ppl_export *pexp = ppl_ctx_export();
	fsal_status_t st;

	PPL_SUBCALL(pexp, st = SUB(obj)->obj_ops->setxattrs(SUB(obj), option, name, value));
	return st;
}

static fsal_status_t removexattrs(struct fsal_obj_handle *obj, xattrkey4 *name)
{
	struct ppl_export *pexp = ppl_ctx_export();
	fsal_status_t st;

	PPL_SUBCALL(pexp, st = SUB(obj)->obj_ops->removexattrs(SUB(obj), name));
	return st;
}

static fsal_status_t listxattrs(struct fsal_obj_handle *obj, count4 maxcount, nfs_cookie4 *cookie,
				bool_t *eof, xattrlist4 *names)
{
	struct ppl_export *pexp = ppl_ctx_export();
	fsal_status_t st;

	PPL_SUBCALL(pexp, st = SUB(obj)->obj_ops->listxattrs(SUB(obj), maxcount, cookie, eof, names));
	return st;
}

void ppl_xattr_ops_init(struct fsal_obj_ops *ops)
{
	ops->list_ext_attrs = list_ext_attrs;
	ops->getextattr_id_by_name = getextattr_id_by_name;
	ops->getextattr_value_by_name = getextattr_value_by_name;
	ops->getextattr_value_by_id = getextattr_value_by_id;
	ops->setextattr_value = setextattr_value;
	ops->setextattr_value_by_id = setextattr_value_by_id;
	ops->remove_extattr_by_id = remove_extattr_by_id;
	ops->remove_extattr_by_name = remove_extattr_by_name;
	ops->getxattrs = getxattrs;
	ops->setxattrs = setxattrs;
	ops->removexattrs = removexattrs;
	ops->listxattrs = listxattrs;
}
