/* ppl-replay: recovery without a server. Applies a datadir's redo log, from
 * its checkpoint, to its data files, or to a copy of the datadir, and prints
 * what it did and how fast. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ppl/replay.h"

static void usage(FILE *f)
{
	fprintf(f,
		"usage: ppl-replay [options] DATADIR\n"
		"Applies DATADIR's InnoDB redo log (ib_logfile0, MariaDB 10.8+) from its latest checkpoint\n"
		"to the data files, like InnoDB crash recovery or mariadb-backup --prepare, without a server.\n"
		"The log itself is left as it is.\n\n"
		"  --copy-to DIR    copy DATADIR to DIR (which must not exist) and apply to the copy\n"
		"  --log FILE       redo log to read (default DATADIR/ib_logfile0)\n"
		"  --start-lsn N    start at LSN N instead of the checkpoint\n"
		"  --dry-run        parse and apply in memory; write nothing\n"
		"  --json           print the summary as one JSON object\n"
		"  -v, --verbose    say which files and spaces were found and created\n"
		"  --progress-every S  a line on stderr every S seconds (default 1; 0: at every step), from\n"
		"                   S seconds after the start: how far the log is read, how many pages rebuilt\n"
		"  -q, --quiet      no progress lines\n"
		"  --trace S:P      print every mini-transaction applied to page P of space S (stderr)\n"
		"  --stream         rebuild pages in memory while reading the log: memory stays at the\n"
		"                   pages touched (default: keep all records in the storage engine's\n"
		"                   per-page index, as the storage node does, and rebuild at the end;\n"
		"                   faster, but needs about as much memory as the log to apply)\n"
		"  --threads N      apply with N threads (default 2; 1..16)\n"
		"  --archive DIR    take the mini-transactions from a log archive (a storage node's\n"
		"                   Archive_Path) instead of a log file: those after --start-lsn (the\n"
		"                   base copy's start LSN, required) up to --stop-lsn (required)\n"
		"  --stop-lsn N     with --archive: the LSN to stop at (a mini-transaction's end)\n"
		"  --new-log BYTES  afterwards, write a new ib_logfile0 of BYTES (at least 1 MiB) whose\n"
		"                   checkpoint is the end LSN, as mariadb-backup --prepare leaves it:\n"
		"                   mariadbd then starts on the datadir with nothing to recover\n"
		"  --elide-against DIR  for every page, ask the storage engine whether it can reproduce the\n"
		"                   page with the LSN and checksum it has in DIR (a copy recovered by other\n"
		"                   means); print how many it accepted and refused\n"
		"  -h, --help       this text\n"
		"Exit status: 0 on success, 1 on a damaged log, unsupported record or I/O error, 2 on usage errors.\n");
}

static int copy_file(const char *from, const char *to)
{
	int in = open(from, O_RDONLY), out = -1, ret = -1;
	if (in < 0)
		return -1;
	struct stat st;
	fstat(in, &st);
	out = open(to, O_WRONLY | O_CREAT | O_EXCL, st.st_mode & 0777);
	if (out < 0)
		goto done;
	static char buf[1 << 20];
	ssize_t n;
	while ((n = read(in, buf, sizeof buf)) > 0)
		if (write(out, buf, (size_t)n) != n)
			goto done;
	ret = n == 0 ? 0 : -1;
done:
	if (out >= 0 && close(out))
		ret = -1;
	close(in);
	return ret;
}

static int copy_tree(const char *from, const char *to)
{
	if (mkdir(to, 0750)) {
		fprintf(stderr, "ppl-replay: cannot create %s: %s\n", to, strerror(errno));
		return -1;
	}
	DIR *d = opendir(from);
	if (!d) {
		fprintf(stderr, "ppl-replay: cannot open %s: %s\n", from, strerror(errno));
		return -1;
	}
	struct dirent *e;
	int ret = 0;
	while (!ret && (e = readdir(d))) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		char a[4096], b[4096];
		snprintf(a, sizeof a, "%s/%s", from, e->d_name);
		snprintf(b, sizeof b, "%s/%s", to, e->d_name);
		struct stat st;
		if (lstat(a, &st))
			continue;
		if (S_ISDIR(st.st_mode))
			ret = copy_tree(a, b);
		else if (S_ISREG(st.st_mode) && copy_file(a, b)) {
			fprintf(stderr, "ppl-replay: copying %s to %s failed: %s\n", a, b, strerror(errno));
			ret = -1;
		}
	}
	closedir(d);
	return ret;
}

static const char *const page_types[8] = {"FREE_PAGE", "INIT_PAGE", "EXTENDED", "WRITE",
					  "MEMSET",    "MEMMOVE",   "RESERVED", "OPTION"};
static const char *const file_types[5] = {"FILE_CREATE", "FILE_DELETE", "FILE_RENAME", "FILE_MODIFY",
					  "FILE_CHECKPOINT"};

static void print_json(const struct ppl_replay_result *r, const char *dir)
{
	printf("{\"datadir\":\"%s\",\"start_lsn\":%llu,\"end_lsn\":%llu,\"log_bytes\":%llu,\"mtrs\":%llu,"
	       "\"records\":%llu,\"pages_touched\":%llu,\"pages_written\":%llu,\"pages_left_freed\":%llu,"
	       "\"mtrs_skipped_by_lsn\":%llu,\"files_created\":%llu,\"files_deleted\":%llu,\"files_extended\":%llu,"
	       "\"elide_asked\":%llu,\"elide_acked\":%llu,\"elide_nacked\":%llu,"
	       "\"parse_s\":%.3f,\"apply_s\":%.3f,\"total_s\":%.3f,\"records_per_s\":%.0f,\"mb_per_s\":%.1f,"
	       "\"records_by_type\":{",
	       dir, (unsigned long long)r->start_lsn, (unsigned long long)r->end_lsn,
	       (unsigned long long)r->log_bytes, (unsigned long long)r->mtrs, (unsigned long long)r->records,
	       (unsigned long long)r->pages_touched, (unsigned long long)r->pages_written,
	       (unsigned long long)r->pages_skipped_freed, (unsigned long long)r->mtrs_skipped_lsn,
	       (unsigned long long)r->files_created, (unsigned long long)r->files_deleted,
	       (unsigned long long)r->files_extended, (unsigned long long)r->elide_asked,
	       (unsigned long long)r->elide_acked, (unsigned long long)r->elide_nacked, r->parse_s, r->apply_s, r->total_s,
	       r->total_s > 0 ? (double)r->records / r->total_s : 0.0,
	       r->total_s > 0 ? (double)r->log_bytes / 1e6 / r->total_s : 0.0);
	const char *sep = "";
	for (int i = 0; i < 8; i++)
		if (i != 2 && r->rec_by_type[i]) {
			printf("%s\"%s\":%llu", sep, page_types[i], (unsigned long long)r->rec_by_type[i]);
			sep = ",";
		}
	for (int i = 0; i < PPL_EXT_COUNT; i++)
		if (r->rec_by_ext[i]) {
			printf("%s\"%s\":%llu", sep, ppl_rec_type_name(PPL_REC_EXTENDED, i),
			       (unsigned long long)r->rec_by_ext[i]);
			sep = ",";
		}
	for (int i = 0; i < 5; i++)
		if (r->file_recs[i]) {
			printf("%s\"%s\":%llu", sep, file_types[i], (unsigned long long)r->file_recs[i]);
			sep = ",";
		}
	printf("}}\n");
}

static void print_text(const struct ppl_replay_result *r, const char *dir)
{
	printf("ppl-replay %s: LSN %llu -> %llu (%.1f MB of redo)\n", dir, (unsigned long long)r->start_lsn,
	       (unsigned long long)r->end_lsn, (double)r->log_bytes / 1e6);
	printf("  mini-transactions %llu, records %llu\n", (unsigned long long)r->mtrs, (unsigned long long)r->records);
	printf("  pages touched %llu, written %llu, left freed %llu; mtrs skipped by page LSN %llu\n",
	       (unsigned long long)r->pages_touched, (unsigned long long)r->pages_written,
	       (unsigned long long)r->pages_skipped_freed, (unsigned long long)r->mtrs_skipped_lsn);
	if (r->files_created || r->files_deleted || r->files_extended)
		printf("  files created %llu, deleted %llu, extended %llu\n", (unsigned long long)r->files_created,
		       (unsigned long long)r->files_deleted, (unsigned long long)r->files_extended);
	if (r->elide_asked)
		printf("  elision questions against the reference: %llu asked, %llu acked, %llu refused\n",
		       (unsigned long long)r->elide_asked, (unsigned long long)r->elide_acked,
		       (unsigned long long)r->elide_nacked);
	printf("  time: parse %.3f s, apply %.3f s, total %.3f s\n", r->parse_s, r->apply_s, r->total_s);
	if (r->total_s > 0)
		printf("  throughput: %.0f records/s, %.1f MB/s of redo\n", (double)r->records / r->total_s,
		       (double)r->log_bytes / 1e6 / r->total_s);
	printf("  records by type:\n");
	for (int i = 0; i < 8; i++)
		if (i != 2 && r->rec_by_type[i])
			printf("    %-28s %llu\n", page_types[i], (unsigned long long)r->rec_by_type[i]);
	for (int i = 0; i < PPL_EXT_COUNT; i++)
		if (r->rec_by_ext[i])
			printf("    %-28s %llu\n", ppl_rec_type_name(PPL_REC_EXTENDED, i),
			       (unsigned long long)r->rec_by_ext[i]);
	for (int i = 0; i < 5; i++)
		if (r->file_recs[i])
			printf("    %-28s %llu\n", file_types[i], (unsigned long long)r->file_recs[i]);
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{"copy-to", required_argument, 0, 'c'}, {"log", required_argument, 0, 'l'},
		{"start-lsn", required_argument, 0, 's'}, {"dry-run", no_argument, 0, 'n'},
		{"json", no_argument, 0, 'j'}, {"trace", required_argument, 0, 't'}, {"elide-against", required_argument, 0, 'e'}, {"stream", no_argument, 0, 'x'}, {"threads", required_argument, 0, 'T'}, {"verbose", no_argument, 0, 'v'}, {"quiet", no_argument, 0, 'q'}, {"progress-every", required_argument, 0, 'P'}, {"help", no_argument, 0, 'h'},
		{"archive", required_argument, 0, 'a'}, {"stop-lsn", required_argument, 0, 'S'},
		{"new-log", required_argument, 0, 'N'},
		{0, 0, 0, 0}};
	struct ppl_replay_opts o = {.progress = stderr, .progress_every = 1.0};
	const char *copy_to = NULL;
	int json = 0, c;
	while ((c = getopt_long(argc, argv, "vqh", opts, NULL)) != -1) {
		switch (c) {
		case 'c': copy_to = optarg; break;
		case 'l': o.logfile = optarg; break;
		case 's': {
			char *end;
			o.start_lsn = strtoull(optarg, &end, 10);
			if (*end || !o.start_lsn) {
				fprintf(stderr, "ppl-replay: --start-lsn needs a positive number, got \"%s\"\n", optarg);
				return 2;
			}
			break;
		}
		case 'a': o.archive_dir = optarg; break;
		case 'S':
		case 'N': {
			char *end;
			unsigned long long v = strtoull(optarg, &end, 10);
			if (*end || !v) {
				fprintf(stderr, "ppl-replay: --%s needs a positive number, got \"%s\"\n",
					c == 'S' ? "stop-lsn" : "new-log", optarg);
				return 2;
			}
			if (c == 'S')
				o.stop_lsn = v;
			else
				o.new_log_size = v;
			break;
		}
		case 'n': o.dry_run = true; break;
		case 'j': json = 1; break;
		case 'v': o.verbose = stderr; break;
		case 'q': o.progress = NULL; break;
		case 'P': {
			char *end;
			o.progress_every = strtod(optarg, &end);
			if (*end || end == optarg || !(o.progress_every >= 0 && o.progress_every <= 86400)) {
				fprintf(stderr, "ppl-replay: --progress-every needs seconds from 0 to 86400, got \"%s\"\n",
					optarg);
				return 2;
			}
			break;
		}
		case 'e': o.elide_against = optarg; break;
		case 'x': o.stream = true; break;
		case 'T': {
			char *end;
			unsigned long t = strtoul(optarg, &end, 10);
			if (*end || t < 1 || t > 16) {
				fprintf(stderr, "ppl-replay: --threads needs a number from 1 to 16, got \"%s\"\n", optarg);
				return 2;
			}
			o.threads = (unsigned)t;
			break;
		}
		case 't':
			if (sscanf(optarg, "%u:%u", &o.trace_space, &o.trace_page) != 2) {
				fprintf(stderr, "ppl-replay: --trace needs SPACE:PAGE, got \"%s\"\n", optarg);
				return 2;
			}
			o.trace = true;
			o.verbose = stderr;
			break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (optind != argc - 1) {
		usage(stderr);
		return 2;
	}
	if (o.archive_dir && (!o.start_lsn || !o.stop_lsn || o.stop_lsn <= o.start_lsn)) {
		fprintf(stderr, "ppl-replay: --archive needs --start-lsn (the base copy's) and a later --stop-lsn\n");
		return 2;
	}
	if (!o.archive_dir && o.stop_lsn) {
		fprintf(stderr, "ppl-replay: --stop-lsn goes with --archive\n");
		return 2;
	}
	o.datadir = argv[optind];
	if (copy_to) {
		if (copy_tree(o.datadir, copy_to))
			return 1;
		o.datadir = copy_to;
	}
	struct ppl_replay_result r;
	if (ppl_replay_datadir(&o, &r)) {
		fprintf(stderr, "ppl-replay: %s\n", r.error);
		return 1;
	}
	if (json)
		print_json(&r, o.datadir);
	else
		print_text(&r, o.datadir);
	return 0;
}
