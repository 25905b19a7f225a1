/* FSAL_PPL module registration. Ganesha dlopen()s libfsalppl.so for an
 * export with `FSAL { Name = PPL; ... FSAL { Name = VFS; } }`; everything
 * specific to an export (parameters, engine state) lives in the export,
 * since one module may serve several exports. */
#include "ppl_fsal.h"

#include "FSAL/fsal_init.h"

struct ppl_fsal_module PPL = {
	.module = {
		.fs_info = {
			/* What Ganesha assumes before an export exists; the
			 * export answers every fs_* query from the sub-FSAL. */
			.maxfilesize = UINT64_MAX,
			.maxlink = _POSIX_LINK_MAX,
			.maxnamelen = 1024,
			.maxpathlen = 1024,
			.no_trunc = true,
			.chown_restricted = true,
			.case_preserving = true,
			.link_support = true,
			.symlink_support = true,
			.lock_support = true,
			.named_attr = true,
			.unique_handles = true,
			.acl_support = FSAL_ACLSUPPORT_ALLOW,
			.cansettime = true,
			.homogenous = true,
			.supported_attrs = ALL_ATTRIBUTES,
			.maxread = FSAL_MAXIOSIZE,
			.maxwrite = FSAL_MAXIOSIZE,
			.link_supports_permission_checks = true,
			.expire_time_parent = -1,
		}
	}
};

static fsal_status_t ppl_init_config(struct fsal_module *module, config_file_t config,
				     struct config_error_type *err_type)
{
	(void)config;
	(void)err_type;
	/* No module-wide parameters: they are per export, in the FSAL block. */
	display_fsinfo(module);
	return fsalstat(ERR_FSAL_NO_ERROR, 0);
}

MODULE_INIT void ppl_module_init(void)
{
	struct fsal_module *m = &PPL.module;

	if (register_fsal(m, "PPL", FSAL_MAJOR_VERSION, FSAL_MINOR_VERSION, FSAL_ID_NO_PNFS) != 0) {
		LogCrit(COMPONENT_FSAL, "PPL: could not register FSAL PPL (API %d.%d): this plugin must be "
			"built against the headers of the running ganesha.nfsd", FSAL_MAJOR_VERSION,
			FSAL_MINOR_VERSION);
		return;
	}
	m->m_ops.create_export = ppl_create_export;
	m->m_ops.update_export = ppl_update_export;
	m->m_ops.init_config = ppl_init_config;
	ppl_handle_ops_init(&PPL.handle_ops);
}

MODULE_FINI void ppl_module_fini(void)
{
	if (unregister_fsal(&PPL.module) != 0)
		LogCrit(COMPONENT_FSAL, "PPL: could not unregister FSAL PPL (exports still use it)");
}
