/* ppl-inspect: look at the storage node's state. Subcommands by object:
 *   pool             the per-page log pool file (create, check, info, dump)
 *   live             a running export's figures and pending records, as
 *                    JSON, or its metrics as OpenMetrics text
 *   backup           a base copy of the datadir, made by the storage node
 *   archive          a log archive's window, every record checked
 *   clone            a datadir at an LSN or a time, from a base and the archive
 *   catcher-metrics  libcatcher's stats file as OpenMetrics text
 *   config           a storage node's ganesha.conf: would its PPL exports
 *                    come up (systemd's ExecStartPre), and their pools */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "inspect.h"

static void usage(FILE *f)
{
	fprintf(f,
		"usage: ppl-inspect pool create PATH --identity ID [--size N[K|M|G]] [--block-size 64]\n"
		"                                [--max-per-page 256] [--dw-slots 32] [--dw-page-size 65536]\n"
		"                                [--log-size N[K|M]|none]  (default: an eighth of the pool, at most\n"
		"                                16 MiB, none under 256 KiB; Log_On_Pmem's area for the log writes)\n"
		"       ppl-inspect pool check PATH [--identity ID] [--datadir DIR] [--json]\n"
		"       ppl-inspect pool info PATH [--json]\n"
		"       ppl-inspect pool dump PATH SPACE:PAGE [--json]\n"
		"       ppl-inspect live POOL_PATH stats [--json]\n"
		"       ppl-inspect live POOL_PATH page SPACE:PAGE [--json]\n"
		"       ppl-inspect live POOL_PATH forget-space SPACE [--json]\n"
		"       ppl-inspect live POOL_PATH metrics\n"
		"       ppl-inspect live POOL_PATH backup [DEST] [--wait] [--json]\n"
		"       ppl-inspect live POOL_PATH crash-at POINT:N [--json]\n"
		"       ppl-inspect live POOL_PATH fault [OP:FILES:EFFECT[:COUNT] | clear] [--json]\n"
		"       ppl-inspect backup POOL_PATH DEST [--no-wait] [--json]\n"
		"       ppl-inspect archive DIR [--json]\n"
		"       ppl-inspect clone --at LSN|TIME (--base BASE | --archive DIR) DEST\n"
		"       ppl-inspect catcher-metrics STATS_FILE\n"
		"       ppl-inspect config check GANESHA_CONF\n"
		"       ppl-inspect config create-pool GANESHA_CONF POOL_PATH\n"
		"\n"
		"live asks the running ganesha.nfsd whose export uses the pool at POOL_PATH (over\n"
		"the socket POOL_PATH.ctl) for its figures, or for one page's pending records\n"
		"(in memory and in the pool); JSON, pretty unless --json. forget-space tells it\n"
		"that a data file it found gone (its log names the space in a CRIT line) was\n"
		"removed on purpose: the pages it kept of that space are dropped, and the\n"
		"checkpoints it refused for them pass. It refuses while the space's file is there.\n"
		"live ... metrics prints the figures as OpenMetrics text, the same as the export's\n"
		"Metrics_Port serves (for node_exporter's textfile collector); catcher-metrics prints\n"
		"a libcatcher stats file (LIBCATCHER_STATS_FILE) the same way. crash-at arms a named\n"
		"crash point (ppl/crash.h) in a storage node built with them (the test plugin\n"
		"build/ganesha-fsal-ppl/plugins-crash): its Nth pass from now kills ganesha.nfsd.\n"
		"fault makes the same test build's disk fail (ppl/fault.h): OP write|sync|read|any,\n"
		"FILES log|data|any, EFFECT EIO|ENOSPC|<N>ms, COUNT calls (default: until clear);\n"
		"without a spec it says what is armed and how many calls it has hit.\n"
		"live ... backup DEST has the storage node copy the datadir into DEST (a new\n"
		"directory outside the export) on a thread of its own, each page as it serves it,\n"
		"and write DEST/ppl-base.json with the LSNs a clone can start from; it needs the\n"
		"export's log archive. Without DEST it says how the last copy went; --wait prints\n"
		"progress each second until the copy ends (exit 1 if it failed). backup POOL_PATH DEST\n"
		"is the same request, waiting with progress unless --no-wait.\n"
		"archive reads the log archive in DIR (an export's Archive_Path), checking every\n"
		"record and the chain of LSNs, and says what it holds: its LSN window, the times its\n"
		"first and last mini-transactions were accepted, its segments and size.\n"
		"clone makes DEST (new) a datadir at LSN, or at TIME (UTC, 2026-11-28T10:42:00Z: the last\n"
		"mini-transaction the storage node had accepted then), from the base copy BASE and the\n"
		"archive after it (default: the archive BASE names), or from the newest base the\n"
		"archive DIR registered that ends before the target; mariadbd starts on it as on a\n"
		"prepared backup. A target outside the window is refused with the window.\n"
		"config check reads every EXPORT with FSAL PPL in GANESHA_CONF (%%include followed)\n"
		"and says whether FSAL_PPL would refuse it: its parameters, and its pool opened\n"
		"read-only with the export's Path as identity, Block_Size, Max_Per_Page and\n"
		"Pool_Size; the example's Elision_Token is refused too. config create-pool makes\n"
		"the pool at POOL_PATH the way that export needs it (Pool_Size required) and\n"
		"never touches an existing file.\n"
		"check, info and dump open the pool read-only and change nothing. Exit status:\n"
		"0 fine, 1 the pool has damage or pages to repair, 2 bad usage or the pool cannot be opened.\n");
}

void inspect_utc(uint64_t ns, char *out, size_t len)
{
	time_t s = (time_t)(ns / 1000000000ull);
	struct tm tm;
	gmtime_r(&s, &tm);
	size_t k = strftime(out, len, "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(out + k, len - k, ".%03uZ", (unsigned)(ns / 1000000u % 1000u));
}

int main(int argc, char **argv)
{
	if (argc >= 2 && (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0)) {
		usage(stdout);
		return 0;
	}
	if (argc >= 3 && strcmp(argv[1], "pool") == 0)
		return pool_main(argc - 2, argv + 2, usage);
	if (argc >= 3 && strcmp(argv[1], "live") == 0)
		return live_main(argc - 2, argv + 2, usage);
	if (argc >= 3 && strcmp(argv[1], "config") == 0)
		return config_main(argc - 2, argv + 2, usage);
	if (argc >= 3 && strcmp(argv[1], "clone") == 0)
		return clone_main(argc - 2, argv + 2, usage);
	if (argc >= 3 && strcmp(argv[1], "backup") == 0)
		return backup_main(argc - 2, argv + 2, usage);
	if (argc >= 3 && strcmp(argv[1], "archive") == 0)
		return archive_main(argc - 2, argv + 2, usage);
	if (argc >= 2 && strcmp(argv[1], "catcher-metrics") == 0)
		return catcher_metrics_main(argc - 2, argv + 2, usage);
	usage(stderr);
	return 2;
}
