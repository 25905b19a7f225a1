/* FSAL_PPL exports: parse and validate the FSAL block, create the
 * sub-FSAL's export underneath, and forward every export operation to it. */
#include "ppl_fsal.h"

#include "config_parsing.h"
#include "nfs_exports.h"
#include "export_mgr.h"

static struct ppl_export *pexp_of(struct fsal_export *e)
{
	return container_of(e, struct ppl_export, exp);
}

static void release(struct fsal_export *exp_hdl)
{
	struct ppl_export *pexp = pexp_of(exp_hdl);
	struct fsal_module *sub_fsal = pexp->exp.sub_export->fsal;

	ppl_stats_stop(pexp);
	ppl_stats_log(pexp, "at unexport");
	pexp->exp.sub_export->exp_ops.release(pexp->exp.sub_export);
	fsal_put(sub_fsal);
	fsal_detach_export(exp_hdl->fsal, &exp_hdl->exports);
	free_export_ops(exp_hdl);
	ppl_hooks_destroy(pexp->hooks);
	ppl_classmap_destroy(&pexp->classes);
	ppl_config_free(&pexp->cfg);
	gsh_free(pexp->fullpath);
	pthread_mutex_destroy(&pexp->stats_lock);
	pthread_cond_destroy(&pexp->stats_cond);
	gsh_free(pexp);
}

static void prepare_unexport(struct fsal_export *e)
{
	struct ppl_export *p = pexp_of(e);

	PPL_SUBCALL(p, p->exp.sub_export->exp_ops.prepare_unexport(p->exp.sub_export));
}

static fsal_status_t get_dynamic_info(struct fsal_export *e, struct fsal_obj_handle *obj,
				      fsal_dynamicfsinfo_t *info)
{
	struct ppl_export *p = pexp_of(e);
	fsal_status_t st;

	PPL_SUBCALL(p, st = p->exp.sub_export->exp_ops.get_fs_dynamic_info(p->exp.sub_export,
									ppl_handle_of(obj)->sub, info));
	return st;
}

static bool fs_supports(struct fsal_export *e, fsal_fsinfo_options_t option)
{
	struct ppl_export *p = pexp_of(e);
	bool r;

	PPL_SUBCALL(p, r = p->exp.sub_export->exp_ops.fs_supports(p->exp.sub_export, option));
	return r;
}

static uint64_t fs_maxfilesize(struct fsal_export *e)
{
	struct ppl_export *p = pexp_of(e);
	uint64_t r;

	PPL_SUBCALL(p, r = p->exp.sub_export->exp_ops.fs_maxfilesize(p->exp.sub_export));
	return r;
}

#define FORWARD_U32(fn)                                                                   \
	static uint32_t fn(struct fsal_export *e)                                          \
	{                                                                                  \
		struct ppl_export *p = pexp_of(e);                                         \
		uint32_t r;                                                                \
		PPL_SUBCALL(p, r = p->exp.sub_export->exp_ops.fn(p->exp.sub_export));     \
		return r;                                                                  \
	}
FORWARD_U32(fs_maxread)
FORWARD_U32(fs_maxwrite)
FORWARD_U32(fs_maxlink)
FORWARD_U32(fs_maxnamelen)
FORWARD_U32(fs_maxpathlen)
FORWARD_U32(fs_umask)
#undef FORWARD_U32

static int32_t fs_expiretimeparent(struct fsal_export *e)
{
	struct ppl_export *p = pexp_of(e);
	int32_t r;

	PPL_SUBCALL(p, r = p->exp.sub_export->exp_ops.fs_expiretimeparent(p->exp.sub_export));
	return r;
}

static fsal_aclsupp_t fs_acl_support(struct fsal_export *e)
{
	struct ppl_export *p = pexp_of(e);
	fsal_aclsupp_t r;

	PPL_SUBCALL(p, r = p->exp.sub_export->exp_ops.fs_acl_support(p->exp.sub_export));
	return r;
}

static attrmask_t fs_supported_attrs(struct fsal_export *e)
{
	struct ppl_export *p = pexp_of(e);
	attrmask_t r;

	PPL_SUBCALL(p, r = p->exp.sub_export->exp_ops.fs_supported_attrs(p->exp.sub_export));
	return r;
}

static fsal_status_t get_quota(struct fsal_export *e, const char *path, int type, int id,
			       fsal_quota_t *q)
{
	struct ppl_export *p = pexp_of(e);
	fsal_status_t st;

	PPL_SUBCALL(p, st = p->exp.sub_export->exp_ops.get_quota(p->exp.sub_export, path, type, id, q));
	return st;
}

static fsal_status_t set_quota(struct fsal_export *e, const char *path, int type, int id,
			       fsal_quota_t *q, fsal_quota_t *res)
{
	struct ppl_export *p = pexp_of(e);
	fsal_status_t st;

	PPL_SUBCALL(p, st = p->exp.sub_export->exp_ops.set_quota(p->exp.sub_export, path, type, id, q,
								  res));
	return st;
}

static struct state_t *alloc_state(struct fsal_export *e, enum state_type type, struct state_t *related)
{
	struct ppl_export *p = pexp_of(e);
	struct state_t *s;

	/* The sub-FSAL's state carries its open file descriptors; we keep no
	 * per-open state of our own. */
	PPL_SUBCALL(p, s = p->exp.sub_export->exp_ops.alloc_state(p->exp.sub_export, type, related));
	return s;
}

static void free_state(struct fsal_export *e, struct state_t *state)
{
	struct ppl_export *p = pexp_of(e);

	PPL_SUBCALL(p, p->exp.sub_export->exp_ops.free_state(p->exp.sub_export, state));
}

static bool is_superuser(struct fsal_export *e, const struct user_cred *creds)
{
	struct ppl_export *p = pexp_of(e);
	bool r;

	PPL_SUBCALL(p, r = p->exp.sub_export->exp_ops.is_superuser(p->exp.sub_export, creds));
	return r;
}

static fsal_status_t wire_to_host(struct fsal_export *e, fsal_digesttype_t type,
				  struct gsh_buffdesc *fh, int flags)
{
	struct ppl_export *p = pexp_of(e);
	fsal_status_t st;

	PPL_SUBCALL(p, st = p->exp.sub_export->exp_ops.wire_to_host(p->exp.sub_export, type, fh, flags));
	return st;
}

static fsal_status_t host_to_key(struct fsal_export *e, struct gsh_buffdesc *fh)
{
	struct ppl_export *p = pexp_of(e);
	fsal_status_t st;

	PPL_SUBCALL(p, st = p->exp.sub_export->exp_ops.host_to_key(p->exp.sub_export, fh));
	return st;
}

static void export_ops_init(struct export_ops *ops)
{
	ops->release = release;
	ops->prepare_unexport = prepare_unexport;
	ops->lookup_path = ppl_lookup_path;
	ops->wire_to_host = wire_to_host;
	ops->host_to_key = host_to_key;
	ops->create_handle = ppl_create_handle;
	ops->get_fs_dynamic_info = get_dynamic_info;
	ops->fs_supports = fs_supports;
	ops->fs_maxfilesize = fs_maxfilesize;
	ops->fs_maxread = fs_maxread;
	ops->fs_maxwrite = fs_maxwrite;
	ops->fs_maxlink = fs_maxlink;
	ops->fs_maxnamelen = fs_maxnamelen;
	ops->fs_maxpathlen = fs_maxpathlen;
	ops->fs_acl_support = fs_acl_support;
	ops->fs_supported_attrs = fs_supported_attrs;
	ops->fs_umask = fs_umask;
	ops->fs_expiretimeparent = fs_expiretimeparent;
	ops->get_quota = get_quota;
	ops->set_quota = set_quota;
	ops->alloc_state = alloc_state;
	ops->free_state = free_state;
	ops->is_superuser = is_superuser;
}

/* The FSAL block: our parameters plus the sub-FSAL's block. Ranges are
 * left wide on purpose: ppl_config_check() refuses bad values with a
 * message naming the parameter and the fix. */
struct ppl_args {
	struct ppl_config cfg;
	struct subfsal_args subfsal;
};

static struct config_item sub_fsal_params[] = {
	CONF_ITEM_STR("name", 1, 10, NULL, subfsal_args, name),
	CONFIG_EOL
};

static struct config_item ppl_params[] = {
	CONF_ITEM_NOOP("name"),
	CONF_ITEM_STR("Pool_Path", 0, 4095, NULL, ppl_args, cfg.pool_path),
	CONF_ITEM_UI64("Pool_Size", 0, UINT64_MAX, PPL_DEFAULT_POOL_SIZE, ppl_args, cfg.pool_size),
	CONF_ITEM_UI32("Block_Size", 0, UINT32_MAX, PPL_DEFAULT_BLOCK_SIZE, ppl_args, cfg.block_size),
	CONF_ITEM_UI32("Max_Per_Page", 0, UINT32_MAX, PPL_DEFAULT_MAX_PER_PAGE, ppl_args, cfg.max_per_page),
	CONF_ITEM_UI32("Apply_Threads", 0, UINT32_MAX, PPL_DEFAULT_APPLY_THREADS, ppl_args,
		       cfg.apply_threads),
	CONF_ITEM_UI64("Page_Cache_Size", 0, UINT64_MAX, PPL_DEFAULT_PAGE_CACHE_SIZE, ppl_args,
		       cfg.page_cache_size),
	CONF_ITEM_STR("Elision_Address", 0, 255, PPL_DEFAULT_ELISION_ADDRESS, ppl_args,
		      cfg.elision_address),
	CONF_ITEM_UI16("Elision_Port", 0, UINT16_MAX, 0, ppl_args, cfg.elision_port),
	CONF_ITEM_STR("Elision_Clients", 0, 4095, PPL_DEFAULT_ELISION_CLIENTS, ppl_args,
		      cfg.elision_clients),
	CONF_ITEM_STR("Elision_Token", 0, 4095, NULL, ppl_args, cfg.elision_token),
	CONF_ITEM_BOOL("Verify", false, ppl_args, cfg.verify),
	CONF_ITEM_BOOL("Allow_Volatile_Pool", false, ppl_args, cfg.allow_volatile_pool),
	CONF_ITEM_BOOL("Ingest_Behind", false, ppl_args, cfg.ingest_behind),
	CONF_ITEM_BOOL("Log_On_Pmem", false, ppl_args, cfg.log_on_pmem),
	CONF_ITEM_UI32("Stats_Interval", 0, UINT32_MAX, PPL_DEFAULT_STATS_INTERVAL, ppl_args,
		       cfg.stats_interval),
	CONF_ITEM_STR("Metrics_Address", 0, 255, PPL_DEFAULT_METRICS_ADDRESS, ppl_args, cfg.metrics_address),
	CONF_ITEM_UI16("Metrics_Port", 0, UINT16_MAX, 0, ppl_args, cfg.metrics_port),
	CONF_ITEM_STR("Archive_Path", 0, 4095, NULL, ppl_args, cfg.archive_path),
	CONF_ITEM_UI64("Archive_Segment_Size", 0, UINT64_MAX, PPL_DEFAULT_ARCHIVE_SEGMENT_SIZE, ppl_args,
		       cfg.archive_segment_size),
	CONF_ITEM_UI64("Archive_Retention_Size", 0, UINT64_MAX, 0, ppl_args, cfg.archive_retention_size),
	CONF_ITEM_UI32("Archive_Retention_Age", 0, UINT32_MAX, PPL_DEFAULT_ARCHIVE_RETENTION_AGE, ppl_args,
		       cfg.archive_retention_age),
	CONF_ITEM_STR("Base_Path", 0, 4095, NULL, ppl_args, cfg.base_path),
	CONF_ITEM_UI32("Base_Interval", 0, UINT32_MAX, 0, ppl_args, cfg.base_interval),
	CONF_ITEM_UI32("Base_Keep", 0, UINT32_MAX, PPL_DEFAULT_BASE_KEEP, ppl_args, cfg.base_keep),
	CONF_RELAX_BLOCK("FSAL", sub_fsal_params, noop_conf_init, subfsal_commit, ppl_args, subfsal),
	CONFIG_EOL
};

static struct config_block ppl_block = {
	.dbus_interface_name = "org.ganesha.nfsd.config.fsal.ppl-export%d",
	.blk_desc.name = "FSAL",
	.blk_desc.type = CONFIG_BLOCK,
	.blk_desc.u.blk.init = noop_conf_init,
	.blk_desc.u.blk.params = ppl_params,
	.blk_desc.u.blk.commit = noop_conf_commit
};

static const char *export_path(void)
{
	if (op_ctx && op_ctx->ctx_fullpath)
		return op_ctx->ctx_fullpath->gr_val;
	return "(unknown path)";
}

/* Ganesha's subfsal_commit() loads the sub-FSAL and keeps a reference to
 * it once it has parsed the inner FSAL block (it then sets fsal_node). An
 * export keeps that reference until release(); every other path that
 * parsed the block must drop it, or ganesha.nfsd reports "Extra
 * references" to the sub-FSAL at shutdown. Also frees the name. */
static void drop_subfsal(struct ppl_args *args)
{
	if (args->subfsal.fsal_node && args->subfsal.name) {
		struct fsal_module *m = lookup_fsal(args->subfsal.name);

		if (m) {
			fsal_put(m); /* lookup_fsal's */
			fsal_put(m); /* subfsal_commit's */
		}
	}
	gsh_free(args->subfsal.name);
	args->subfsal.name = NULL;
	args->subfsal.fsal_node = NULL;
}

/* Parses our block into args; on any problem logs why the export is
 * refused and returns false. On success the caller owns the sub-FSAL
 * reference (see drop_subfsal). */
static bool parse_args(void *parse_node, struct config_error_type *err_type, struct ppl_args *args)
{
	bool was_bogus = err_type->bogus, bogus;
	char err[512];
	int rc;

	memset(args, 0, sizeof(*args));
	/* Ganesha only warns about unknown parameters; for ours a typo would
	 * silently run the engine with a default, so it refuses the export. */
	err_type->bogus = false;
	rc = load_config_from_node(parse_node, &ppl_block, args, true, err_type);
	bogus = err_type->bogus;
	err_type->bogus = was_bogus || bogus;
	if (rc != 0 || bogus) {
		LogCrit(COMPONENT_FSAL, "PPL: export %s refused: its FSAL block has %s (the CONFIG "
			"lines that follow name them); fix ganesha.conf and restart", export_path(),
			bogus ? "unknown parameters" : "errors");
		ppl_config_free(&args->cfg);
		drop_subfsal(args);
		return false;
	}
	if (args->subfsal.name == NULL) {
		LogCrit(COMPONENT_FSAL, "PPL: export %s refused: no sub-FSAL; add FSAL { Name = VFS; } "
			"inside the PPL FSAL block", export_path());
		ppl_config_free(&args->cfg);
		drop_subfsal(args);
		return false;
	}
	if (ppl_config_check(&args->cfg, err, sizeof(err)) != 0) {
		LogCrit(COMPONENT_FSAL, "PPL: export %s refused: %s", export_path(), err);
		ppl_config_free(&args->cfg);
		drop_subfsal(args);
		return false;
	}
	return true;
}

static void free_export(struct ppl_export *pexp)
{
	ppl_classmap_destroy(&pexp->classes);
	ppl_hooks_destroy(pexp->hooks);
	ppl_config_free(&pexp->cfg);
	gsh_free(pexp);
}

fsal_status_t ppl_create_export(struct fsal_module *fsal_hdl, void *parse_node,
				struct config_error_type *err_type, const struct fsal_up_vector *up_ops)
{
	struct ppl_args args;
	struct fsal_module *sub_fsal;
	struct ppl_export *pexp;
	fsal_status_t st;
	char line[2048];

	if (!parse_args(parse_node, err_type, &args))
		return fsalstat(ERR_FSAL_INVAL, EINVAL);
	/* Loaded by subfsal_commit(), so this finds it. */
	sub_fsal = lookup_fsal(args.subfsal.name);
	if (sub_fsal == NULL) {
		LogCrit(COMPONENT_FSAL, "PPL: export %s refused: sub-FSAL %s is not loaded; put its plugin "
			"(libfsal%s.so, lower case) in Plugins_Dir next to libfsalppl.so", export_path(),
			args.subfsal.name, args.subfsal.name);
		ppl_config_free(&args.cfg);
		drop_subfsal(&args);
		return fsalstat(ERR_FSAL_INVAL, EINVAL);
	}

	pexp = gsh_calloc(1, sizeof(*pexp));
	pexp->cfg = args.cfg;
	pexp->hooks = ppl_hooks_create(export_path(), &pexp->cfg, line, sizeof(line));
	if (pexp->hooks == NULL || ppl_classmap_init(&pexp->classes) != 0) {
		LogCrit(COMPONENT_FSAL, "PPL: export %s refused: %s", export_path(),
			pexp->hooks ? "out of memory" : line);
		fsal_put(sub_fsal);
		free_export(pexp);
		drop_subfsal(&args);
		return fsalstat(ERR_FSAL_NOMEM, ENOMEM);
	}

	st = sub_fsal->m_ops.create_export(sub_fsal, args.subfsal.fsal_node, err_type, up_ops);
	fsal_put(sub_fsal);
	if (FSAL_IS_ERROR(st)) {
		LogCrit(COMPONENT_FSAL, "PPL: export %s refused: the sub-FSAL %s could not create its "
			"export (see its message above)", export_path(), args.subfsal.name);
		free_export(pexp);
		drop_subfsal(&args);
		return st;
	}

	/* The sub-FSAL's create_export left its export in op_ctx. The
	 * reference subfsal_commit() took is the export's now; release()
	 * drops it. */
	fsal_export_stack(op_ctx->fsal_export, &pexp->exp);
	fsal_export_init(&pexp->exp);
	export_ops_init(&pexp->exp.exp_ops);
	pexp->exp.up_ops = up_ops;
	pexp->exp.fsal = fsal_hdl;
	pexp->fullpath = gsh_strdup(export_path());
	pthread_mutex_init(&pexp->stats_lock, NULL);
	pthread_cond_init(&pexp->stats_cond, NULL);
	op_ctx->fsal_export = &pexp->exp;

	ppl_config_format(&pexp->cfg, line, sizeof(line));
	LogEvent(COMPONENT_FSAL, "PPL: export %s over FSAL %s: %s", pexp->fullpath, args.subfsal.name, line);
	gsh_free(args.subfsal.name);
	ppl_scan_export(pexp);
	ppl_stats_start(pexp);
	return fsalstat(ERR_FSAL_NO_ERROR, 0);
}

/* Export updates come from a configuration reload (SIGHUP). The engine's
 * parameters (pool, block size, ...) cannot change under a running engine,
 * so a reload may only keep them; the sub-FSAL updates its own block. */
fsal_status_t ppl_update_export(struct fsal_module *fsal_hdl, void *parse_node,
				struct config_error_type *err_type, struct fsal_export *original,
				struct fsal_module *updated_super)
{
	struct ppl_config *running = &pexp_of(original)->cfg;
	struct ppl_args args;
	struct fsal_module *sub_fsal;
	fsal_status_t st;
	char now[1024], then[1024];

	st = update_export(fsal_hdl, parse_node, err_type, original, updated_super);
	if (FSAL_IS_ERROR(st))
		return st;
	if (!parse_args(parse_node, err_type, &args))
		return fsalstat(ERR_FSAL_INVAL, EINVAL);
	ppl_config_format(&args.cfg, now, sizeof(now));
	ppl_config_format(running, then, sizeof(then));
	if (strcmp(now, then) != 0 ||
	    strcmp(args.cfg.elision_token ? args.cfg.elision_token : "",
		   running->elision_token ? running->elision_token : "") != 0) {
		LogCrit(COMPONENT_FSAL, "PPL: export %s: PPL parameters cannot change on reload (running "
			"with %s); restart ganesha.nfsd to apply them", export_path(), then);
		st = fsalstat(ERR_FSAL_INVAL, EINVAL);
	} else if ((sub_fsal = lookup_fsal(args.subfsal.name)) == NULL) {
		LogCrit(COMPONENT_FSAL, "PPL: export %s: sub-FSAL %s is not loaded", export_path(),
			args.subfsal.name);
		st = fsalstat(ERR_FSAL_INVAL, EINVAL);
	} else {
		st = sub_fsal->m_ops.update_export(sub_fsal, args.subfsal.fsal_node, err_type,
						   original->sub_export, fsal_hdl);
		fsal_put(sub_fsal);
	}
	ppl_config_free(&args.cfg);
	/* The running export already holds its reference. */
	drop_subfsal(&args);
	return st;
}
