/* ppl-inspect clone: a datadir at a chosen LSN or time, from a base copy
 * (`ppl-inspect live POOL backup DEST`) and the log archive after it.
 * The base is copied into the clone's directory, the archive's
 * mini-transactions from the base's start up to the target are applied
 * as InnoDB's recovery applies them (ppl-replay's engine), and a new log
 * whose checkpoint is the target is written, as mariadb-backup --prepare
 * leaves a backup: unmodified mariadbd starts on it and rolls back what
 * was uncommitted at that point. A target outside what the base and the
 * archive can give is refused with the window in the message. */
#define _XOPEN_SOURCE 700
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <json-c/json.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "inspect.h"
#include "ppl/archive.h"
#include "ppl/bases.h"
#include "ppl/replay.h"

#define DEFAULT_LOG_SIZE (96ull << 20) /* MariaDB's innodb_log_file_size default */

/* "2026-11-28T10:42:00[.123]Z" (UTC) to ns since the epoch; false when it
 * is not that. */
static bool parse_time(const char *s, uint64_t *ns)
{
	struct tm tm;
	memset(&tm, 0, sizeof tm);
	const char *rest = strptime(s, "%Y-%m-%dT%H:%M:%S", &tm);
	if (rest == NULL)
		return false;
	uint64_t frac = 0, scale = 1000000000ull;
	if (*rest == '.') {
		rest++;
		while (*rest >= '0' && *rest <= '9') {
			if (scale > 1) {
				scale /= 10;
				frac += (uint64_t)(*rest - '0') * scale;
			}
			rest++;
		}
	}
	if (strcmp(rest, "Z") != 0)
		return false;
	time_t t = timegm(&tm);
	if (t < 0)
		return false;
	*ns = (uint64_t)t * 1000000000ull + frac;
	return true;
}

/* How far the base's copy has come, for a line each second: a base of
 * many gigabytes takes minutes. */
struct copied {
	uint64_t files, bytes, total;
	double next;
};

static double mono_s(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static void copy_progress(struct copied *c)
{
	double t = mono_s();
	if (t < c->next)
		return;
	c->next = t + 1.0;
	fprintf(stderr, "clone: %.1f of %.1f MB of the base copied (%" PRIu64 " file(s))\n", (double)c->bytes / 1e6,
		(double)c->total / 1e6, c->files);
}

static int copy_one(const char *from, const char *to, mode_t mode, struct copied *c)
{
	int in = open(from, O_RDONLY), out = in < 0 ? -1 : open(to, O_WRONLY | O_CREAT | O_EXCL, mode & 0777);
	int rc = in >= 0 && out >= 0 ? 0 : -1;
	static char buf[1 << 20];
	ssize_t n = 0;
	while (rc == 0 && (n = read(in, buf, sizeof buf)) > 0) {
		if (write(out, buf, (size_t)n) != n)
			rc = -1;
		c->bytes += (uint64_t)n;
		copy_progress(c);
	}
	if (n < 0 || (out >= 0 && fsync(out) != 0))
		rc = -1;
	if (in >= 0)
		close(in);
	if (out >= 0 && close(out) != 0)
		rc = -1;
	return rc;
}

/* The base's tree (its files and database directories) into to. */
static int copy_base(const char *from, const char *to, int depth, struct copied *c)
{
	DIR *d = opendir(from);
	struct dirent *e;
	if (d == NULL) {
		fprintf(stderr, "ppl-inspect clone: %s cannot be read: %s\n", from, strerror(errno));
		return -1;
	}
	int rc = 0;
	while (rc == 0 && (e = readdir(d)) != NULL) {
		if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0 ||
		    (depth == 0 && strcmp(e->d_name, "ppl-base.json") == 0))
			continue;
		char src[PATH_MAX], dst[PATH_MAX];
		struct stat st;
		if (snprintf(src, sizeof src, "%s/%s", from, e->d_name) >= (int)sizeof src ||
		    snprintf(dst, sizeof dst, "%s/%s", to, e->d_name) >= (int)sizeof dst || stat(src, &st) != 0) {
			rc = -1;
		} else if (S_ISDIR(st.st_mode)) {
			rc = depth == 0 && mkdir(dst, 0750) == 0 ? copy_base(src, dst, depth + 1, c) : -1;
		} else if (S_ISREG(st.st_mode)) {
			rc = copy_one(src, dst, st.st_mode, c);
			c->files += rc == 0;
		}
		if (rc)
			fprintf(stderr, "ppl-inspect clone: %s cannot be copied to %s: %s\n", src, dst, strerror(errno));
	}
	closedir(d);
	return rc;
}

int clone_main(int argc, char **argv, void (*usage)(FILE *))
{
	const char *base_dir = NULL, *archive = NULL, *at = NULL, *dest = NULL;
	for (int i = 0; i < argc; i++) {
		if (strcmp(argv[i], "--base") == 0 && i + 1 < argc)
			base_dir = argv[++i];
		else if (strcmp(argv[i], "--archive") == 0 && i + 1 < argc)
			archive = argv[++i];
		else if (strcmp(argv[i], "--at") == 0 && i + 1 < argc)
			at = argv[++i];
		else if (dest == NULL && argv[i][0] != '-')
			dest = argv[i];
		else {
			usage(stderr);
			return 2;
		}
	}
	if (at == NULL || dest == NULL || (base_dir == NULL && archive == NULL)) {
		usage(stderr);
		return 2;
	}
	char err[4400], t1[40], t2[40];
	struct ppl_base_info b;
	memset(&b, 0, sizeof b);
	if (base_dir && ppl_base_read(base_dir, &b, err, sizeof err) != 0) {
		fprintf(stderr, "ppl-inspect clone: %s\n", err);
		return 2;
	}
	if (archive == NULL)
		archive = b.archive;
	struct ppl_archive_window w;
	fprintf(stderr, "clone: reading the archive %s\n", archive);
	if (ppl_archive_window(archive, &w, err, sizeof err) != 0) {
		fprintf(stderr, "ppl-inspect clone: %s\n", err);
		return 1;
	}
	inspect_utc(w.first_ns, t1, sizeof t1);
	inspect_utc(w.last_ns, t2, sizeof t2);
	uint64_t target = 0, ns = 0;
	char *end;
	unsigned long long v = strtoull(at, &end, 10);
	if (*at && *end == '\0') {
		target = v;
	} else if (parse_time(at, &ns)) {
		if (ppl_archive_lsn_at(archive, ns, &target, err, sizeof err) != 0) {
			fprintf(stderr, "ppl-inspect clone: %s\n", err);
			return 1;
		}
	} else {
		fprintf(stderr, "ppl-inspect clone: --at %s is neither an LSN nor a UTC time like 2026-11-28T10:42:00Z\n",
			at);
		return 2;
	}
	if (base_dir == NULL) {
		/* the newest base registered for this archive that ends at or
		 * before the target */
		struct ppl_base_info *all;
		size_t n;
		if (ppl_bases_list(archive, &all, &n, err, sizeof err) != 0) {
			fprintf(stderr, "ppl-inspect clone: %s\n", err);
			return 1;
		}
		for (size_t i = 0; i < n; i++)
			if (all[i].end_lsn <= target && all[i].start_lsn >= w.first_lsn &&
			    (base_dir == NULL || all[i].end_lsn > b.end_lsn)) {
				b = all[i];
				base_dir = b.dir;
			}
		free(all);
		if (base_dir == NULL) {
			fprintf(stderr, "ppl-inspect clone: no base copy registered in %s ends at or before LSN %" PRIu64
				" (%s) and is still covered by the archive (LSN %" PRIu64 " to %" PRIu64 "): make one with "
				"`ppl-inspect live POOL backup DEST`\n", archive, target, at, w.first_lsn, w.end_lsn);
			return 1;
		}
		fprintf(stderr, "clone: the newest base before the target is %s\n", base_dir);
	}
	if (target < b.end_lsn || target > w.end_lsn || b.start_lsn < w.first_lsn) {
		fprintf(stderr, "ppl-inspect clone: %s (LSN %" PRIu64 ") is outside what this base and archive give: "
			"from LSN %" PRIu64 " (the base %s finished) to LSN %" PRIu64 " (the archive's end, %s); the "
			"archive covers LSN %" PRIu64 " (%s) to %" PRIu64 "%s\n", at, target, b.end_lsn, base_dir,
			w.end_lsn, t2, w.first_lsn, t1, w.end_lsn,
			b.start_lsn < w.first_lsn ? ", which no longer reaches back to the base's start: take a new base"
						  : "");
		return 1;
	}
	if (mkdir(dest, 0750) != 0) {
		fprintf(stderr, "ppl-inspect clone: %s cannot be made: %s (it must not exist)\n", dest, strerror(errno));
		return 2;
	}
	struct copied copied = {.total = b.bytes, .next = mono_s() + 1.0};
	fprintf(stderr, "clone: copying the base %s (%" PRIu64 " file(s), %.1f MB)\n", base_dir, b.files,
		(double)b.bytes / 1e6);
	if (copy_base(base_dir, dest, 0, &copied) != 0)
		return 1;
	struct ppl_replay_opts o = {.datadir = dest, .archive_dir = archive, .start_lsn = b.start_lsn,
				    .stop_lsn = target, .new_log_size = b.log_file_size ? b.log_file_size : DEFAULT_LOG_SIZE,
				    .progress = stderr, .progress_every = 1.0};
	struct ppl_replay_result r;
	fprintf(stderr, "clone: applying the archive from LSN %" PRIu64 " to %" PRIu64 " (%.1f MB of log)\n",
		b.start_lsn, target, (double)(target - b.start_lsn) / 1e6);
	if (ppl_replay_datadir(&o, &r) != 0) {
		fprintf(stderr, "ppl-inspect clone: %s; %s is incomplete: remove it\n", r.error, dest);
		return 1;
	}
	printf("clone %s at LSN %" PRIu64 ": base %s (from LSN %" PRIu64 "), %" PRIu64 " mini-transactions applied "
	       "to %" PRIu64 " page(s) in %.1f s; a new log at LSN %" PRIu64 "; start mariadbd on it\n", dest, target,
	       base_dir, b.start_lsn, r.mtrs, r.pages_written, r.total_s, target);
	return 0;
}
