/* ppl-mount: mount an NFSv3 export through FUSE.
 *
 * Order matters for error reporting: parse options, connect to the server
 * (a wrong URL or port fails here, on the terminal), mount, then detach
 * (unless -f) and serve until `fusermount3 -u MOUNTPOINT` or a signal. */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "figures.h"
#include "log.h"
#include "nodes.h"
#include "ops.h"
#include "pool.h"
#include "writeback.h"

#define VERSION "1.0"

static void usage(FILE *f)
{
	fprintf(f,
"usage: ppl-mount nfs://HOST/EXPORT[?ARG=VAL&...] MOUNTPOINT [options]\n"
"\n"
"Mounts an NFSv3 export through FUSE, for hosts without a kernel NFS client.\n"
"Unmount with: fusermount3 -u MOUNTPOINT\n"
"\n"
"URL arguments (libnfs, see libnfs(3)): nfsport=N and mountport=N use these\n"
"ports instead of asking rpcbind; uid=N and gid=N set the credentials sent\n"
"to the server (default: this process's).\n"
"\n"
"options:\n"
"  -f, --foreground        stay in the foreground (default: detach once mounted)\n"
"  -d, --debug             log every FUSE request to stderr (implies -f)\n"
"  -c, --connections=N     NFS connections, one per operation in flight (default 8)\n"
"  -j, --threads=N         most FUSE worker threads (default 16)\n"
"  -t, --timeout=SECONDS   soft mode: an operation that gets no reply from the\n"
"                          server within SECONDS (reconnecting as needed) fails\n"
"                          with EIO (default 30)\n"
"      --hard              hard mode: retry forever instead; processes block\n"
"                          until the server is back (like a `hard` NFS mount)\n"
"      --sync-writes       send every WRITE FILE_SYNC (durable at once; slower)\n"
"      --direct-io         bypass the page cache for every open file, not only\n"
"                          for O_DIRECT opens\n"
"      --attr-timeout=SEC  how long the kernel may cache attributes and names\n"
"                          (default 1; 0 for other writers on the same export)\n"
"      --rsize=KIB         largest READ sent (default: the server's, at most 1024)\n"
"      --wsize=KIB         largest WRITE sent (default: the server's, at most 1024);\n"
"                          bigger requests are split and the pieces sent at once\n"
"      --max-dirty=MIB     uncommitted data kept per file before a COMMIT is\n"
"                          forced (default 64)\n"
"  -o OPT[,OPT...]         FUSE mount options, e.g. allow_other\n"
"  -h, --help              this text\n"
"  -V, --version           version\n"
"\n"
"Durability: WRITEs are sent UNSTABLE and a copy is kept until a COMMIT\n"
"covers it; fsync, fdatasync, close and truncate COMMIT and return only once\n"
"the server has the data on stable storage. If the server restarted in between\n"
"(its write verifier changed), the kept data is sent again, FILE_SYNC, before\n"
"success is returned. If the server cannot be reached, they fail with EIO.\n");
}

static int parse_int(const char *s, const char *what, long lo, long hi, long *out)
{
	char *end;
	errno = 0;
	long v = strtol(s, &end, 10);
	if (errno || *end || end == s || v < lo || v > hi) {
		fprintf(stderr, "ppl-mount: %s must be an integer from %ld to %ld, not '%s'\n",
			what, lo, hi, s);
		return -1;
	}
	*out = v;
	return 0;
}

static int parse_seconds(const char *s, const char *what, double *out)
{
	char *end;
	errno = 0;
	double v = strtod(s, &end);
	if (errno || *end || end == s || v < 0 || v > 86400) {
		fprintf(stderr, "ppl-mount: %s must be seconds from 0 to 86400, not '%s'\n",
			what, s);
		return -1;
	}
	*out = v;
	return 0;
}

enum { OPT_HARD = 256, OPT_SYNC, OPT_DIRECT, OPT_ATTR, OPT_DIRTY, OPT_RSIZE, OPT_WSIZE };

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "foreground", no_argument, NULL, 'f' },
		{ "debug", no_argument, NULL, 'd' },
		{ "connections", required_argument, NULL, 'c' },
		{ "threads", required_argument, NULL, 'j' },
		{ "timeout", required_argument, NULL, 't' },
		{ "hard", no_argument, NULL, OPT_HARD },
		{ "sync-writes", no_argument, NULL, OPT_SYNC },
		{ "direct-io", no_argument, NULL, OPT_DIRECT },
		{ "attr-timeout", required_argument, NULL, OPT_ATTR },
		{ "max-dirty", required_argument, NULL, OPT_DIRTY },
		{ "rsize", required_argument, NULL, OPT_RSIZE },
		{ "wsize", required_argument, NULL, OPT_WSIZE },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ NULL, 0, NULL, 0 },
	};
	int foreground = 0, debug = 0, hard = 0, sync_writes = 0;
	long connections = 8, threads = 16, max_dirty_mib = 64, rsize_kib = 0, wsize_kib = 0;
	double timeout = 30;
	struct ops_config ocfg = { .attr_timeout = 1.0, .direct_io_all = 0 };
	struct fuse_args fargs = FUSE_ARGS_INIT(0, NULL);

	figures_block_signal();
	const char *fuse_o[64];
	int n_o = 0;
	int c;

	while ((c = getopt_long(argc, argv, "fdc:j:t:o:hV", longopts, NULL)) != -1) {
		switch (c) {
		case 'f': foreground = 1; break;
		case 'd': debug = foreground = 1; break;
		case 'c':
			if (parse_int(optarg, "--connections", 1, 256, &connections))
				return 2;
			break;
		case 'j':
			if (parse_int(optarg, "--threads", 1, 1024, &threads))
				return 2;
			break;
		case 't':
			if (parse_seconds(optarg, "--timeout", &timeout))
				return 2;
			if (timeout < 0.1) {
				fprintf(stderr, "ppl-mount: --timeout must be at least 0.1 s; "
					"use --hard to wait forever\n");
				return 2;
			}
			break;
		case OPT_HARD: hard = 1; break;
		case OPT_SYNC: sync_writes = 1; break;
		case OPT_DIRECT: ocfg.direct_io_all = 1; break;
		case OPT_ATTR:
			if (parse_seconds(optarg, "--attr-timeout", &ocfg.attr_timeout))
				return 2;
			break;
		case OPT_DIRTY:
			if (parse_int(optarg, "--max-dirty", 1, 4096, &max_dirty_mib))
				return 2;
			break;
		case OPT_RSIZE:
			if (parse_int(optarg, "--rsize", 4, 1024, &rsize_kib))
				return 2;
			break;
		case OPT_WSIZE:
			if (parse_int(optarg, "--wsize", 4, 1024, &wsize_kib))
				return 2;
			break;
		case 'o':
			if (n_o == (int)(sizeof fuse_o / sizeof fuse_o[0])) {
				fprintf(stderr, "ppl-mount: too many -o options; join them with ','\n");
				return 2;
			}
			fuse_o[n_o++] = optarg;
			break;
		case 'h': usage(stdout); return 0;
		case 'V': printf("ppl-mount %s\n", VERSION); return 0;
		default:
			fprintf(stderr, "Try 'ppl-mount --help'.\n");
			return 2;
		}
	}
	if (argc - optind != 2) {
		fprintf(stderr, "ppl-mount: need exactly two arguments, nfs://HOST/EXPORT and "
			"MOUNTPOINT (got %d). Try 'ppl-mount --help'.\n", argc - optind);
		return 2;
	}
	const char *url = argv[optind];
	const char *mountpoint = argv[optind + 1];
	if (strncmp(url, "nfs://", 6) != 0) {
		fprintf(stderr, "ppl-mount: '%s' is not an nfs:// URL (expected "
			"nfs://HOST/EXPORT[?nfsport=N&mountport=N])\n", url);
		return 2;
	}
	fuse_opt_add_arg(&fargs, argv[0]);
	for (int i = 0; i < n_o; i++) {
		fuse_opt_add_arg(&fargs, "-o");
		fuse_opt_add_arg(&fargs, fuse_o[i]);
	}
	if (debug)
		fuse_opt_add_arg(&fargs, "-d");
	/* libfuse splits -o values at ',' unless escaped with '\\'. */
	char fsname[3 * PATH_MAX];
	size_t k = (size_t)snprintf(fsname, sizeof fsname, "-ofsname=");
	for (const char *s = url; *s && k + 4 < sizeof fsname; s++) {
		if (*s == ',' || *s == '\\')
			fsname[k++] = '\\';
		fsname[k++] = *s;
	}
	snprintf(fsname + k, sizeof fsname - k, ",subtype=ppl-mount,default_permissions");
	fuse_opt_add_arg(&fargs, fsname);

	char err[1024];
	struct pool_config pcfg = {
		.url = url,
		.size = (int)connections,
		.timeout_ms = hard ? 0 : (int)(timeout * 1000),
		.max_rsize = (uint32_t)rsize_kib * 1024,
		.max_wsize = (uint32_t)wsize_kib * 1024,
	};
	struct pool *pool = pool_open(&pcfg, err, sizeof err);
	if (!pool) {
		fprintf(stderr, "ppl-mount: cannot connect to %s: %s\n", url, err);
		fuse_opt_free_args(&fargs);
		return 1;
	}
	nodes_init(pool_root(pool));
	writeback_init(pool, sync_writes, (size_t)max_dirty_mib << 20);
	ops_init(pool, &ocfg);

	int rc = 1;
	struct fuse_session *se = fuse_session_new(&fargs, &ppl_ops, sizeof ppl_ops, NULL);
	if (!se) {
		fprintf(stderr, "ppl-mount: bad FUSE options (see above)\n");
		goto out_pool;
	}
	if (fuse_set_signal_handlers(se) != 0) {
		fprintf(stderr, "ppl-mount: cannot install signal handlers\n");
		goto out_session;
	}
	if (fuse_session_mount(se, mountpoint) != 0) {
		fprintf(stderr, "ppl-mount: cannot mount on %s (does it exist, is /dev/fuse "
			"usable, is something mounted there already?)\n", mountpoint);
		goto out_signals;
	}
	if (!foreground) {
		if (fuse_daemonize(0) != 0)
			goto out_unmount;
		log_to_syslog();
	}
	log_msg("mounted %s on %s (%ld connections, %s, rsize %u, wsize %u)", url, mountpoint,
		connections, hard ? "hard" : "soft", pool_rsize(pool), pool_wsize(pool));

	figures_start();

	struct fuse_loop_config *lc = fuse_loop_cfg_create();
	if (!lc) {
		fprintf(stderr, "ppl-mount: out of memory\n");
		goto out_unmount;
	}
	fuse_loop_cfg_set_max_threads(lc, (unsigned)threads);
	fuse_loop_cfg_set_idle_threads(lc, (unsigned)(threads < 4 ? threads : 4));
	rc = fuse_session_loop_mt(se, lc) == 0 ? 0 : 1;
	fuse_loop_cfg_destroy(lc);
	figures_log_total();
	log_msg("unmounted %s (write verifier changes handled by re-sending: %lu)",
		mountpoint, writeback_resends());
out_unmount:
	fuse_session_unmount(se);
out_signals:
	fuse_remove_signal_handlers(se);
out_session:
	fuse_session_destroy(se);
out_pool:
	pool_close(pool);
	fuse_opt_free_args(&fargs);
	return rc;
}
