/* Base manifests and the archive's registry of bases (ppl/bases.h). */
#include "ppl/bases.h"

#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MANIFEST "ppl-base.json"
#define REGISTRY "ppl-bases.jsonl"

static json_object *to_json(const struct ppl_base_info *b)
{
	json_object *o = json_object_new_object();
	json_object_object_add(o, "format", json_object_new_int(1));
	json_object_object_add(o, "dir", json_object_new_string(b->dir));
	json_object_object_add(o, "start_lsn", json_object_new_int64((int64_t)b->start_lsn));
	json_object_object_add(o, "end_lsn", json_object_new_int64((int64_t)b->end_lsn));
	json_object_object_add(o, "started_ns", json_object_new_int64((int64_t)b->started_ns));
	json_object_object_add(o, "finished_ns", json_object_new_int64((int64_t)b->finished_ns));
	json_object_object_add(o, "log_file_size", json_object_new_int64((int64_t)b->log_file_size));
	json_object_object_add(o, "page_size", json_object_new_int64((int64_t)b->page_size));
	json_object_object_add(o, "files", json_object_new_int64((int64_t)b->files));
	json_object_object_add(o, "bytes", json_object_new_int64((int64_t)b->bytes));
	json_object_object_add(o, "archive", json_object_new_string(b->archive));
	return o;
}

static uint64_t u64_of(json_object *o, const char *key)
{
	json_object *v;
	return json_object_object_get_ex(o, key, &v) ? (uint64_t)json_object_get_int64(v) : 0;
}

static void str_of(json_object *o, const char *key, char *out, size_t len)
{
	json_object *v;
	snprintf(out, len, "%s", json_object_object_get_ex(o, key, &v) ? json_object_get_string(v) : "");
}

static int from_json(json_object *o, struct ppl_base_info *b)
{
	memset(b, 0, sizeof *b);
	str_of(o, "dir", b->dir, sizeof b->dir);
	str_of(o, "archive", b->archive, sizeof b->archive);
	b->start_lsn = u64_of(o, "start_lsn");
	b->end_lsn = u64_of(o, "end_lsn");
	b->started_ns = u64_of(o, "started_ns");
	b->finished_ns = u64_of(o, "finished_ns");
	b->log_file_size = u64_of(o, "log_file_size");
	b->page_size = u64_of(o, "page_size");
	b->files = u64_of(o, "files");
	b->bytes = u64_of(o, "bytes");
	return b->start_lsn && b->end_lsn >= b->start_lsn ? 0 : -1;
}

/* b as one JSON line at the end of f, synced: 0 or -1 */
static int put_line(FILE *f, const struct ppl_base_info *b)
{
	json_object *o = to_json(b);
	int rc = fprintf(f, "%s\n", json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN)) > 0 && fflush(f) == 0 &&
			 fsync(fileno(f)) == 0 ? 0 : -1;
	json_object_put(o);
	return rc;
}

int ppl_base_write(const char *dir, const struct ppl_base_info *b)
{
	char path[4200], tmp[4210];
	snprintf(path, sizeof path, "%s/" MANIFEST, dir);
	snprintf(tmp, sizeof tmp, "%s.tmp", path);
	FILE *f = fopen(tmp, "w");
	if (f == NULL)
		return -1;
	int rc = put_line(f, b);
	if (fclose(f) != 0)
		rc = -1;
	return rc == 0 ? rename(tmp, path) : -1;
}

int ppl_base_read(const char *dir, struct ppl_base_info *b, char *err, size_t errlen)
{
	char path[4200];
	snprintf(path, sizeof path, "%s/" MANIFEST, dir);
	json_object *o = json_object_from_file(path);
	if (o == NULL) {
		snprintf(err, errlen, "%s has no readable %s: not a finished base copy (a copy still running, or one "
			 "that failed)", dir, MANIFEST);
		return -1;
	}
	int rc = from_json(o, b);
	json_object_put(o);
	if (rc != 0)
		snprintf(err, errlen, "%s/%s does not give the copy's LSNs", dir, MANIFEST);
	else
		snprintf(b->dir, sizeof b->dir, "%s", dir);
	return rc;
}

int ppl_bases_add(const char *archive_dir, const struct ppl_base_info *b, char *err, size_t errlen)
{
	char path[4200];
	snprintf(path, sizeof path, "%s/" REGISTRY, archive_dir);
	FILE *f = fopen(path, "a");
	if (f == NULL) {
		snprintf(err, errlen, "%s cannot be opened: %s", path, strerror(errno));
		return -1;
	}
	int rc = put_line(f, b);
	if (fclose(f) != 0)
		rc = -1;
	if (rc != 0)
		snprintf(err, errlen, "%s cannot be written: %s", path, strerror(errno));
	return rc;
}

int ppl_bases_list(const char *archive_dir, struct ppl_base_info **out, size_t *n, char *err, size_t errlen)
{
	char path[4200];
	*out = NULL;
	*n = 0;
	snprintf(path, sizeof path, "%s/" REGISTRY, archive_dir);
	FILE *f = fopen(path, "r");
	if (f == NULL) {
		if (errno == ENOENT)
			return 0;
		snprintf(err, errlen, "%s cannot be read: %s", path, strerror(errno));
		return -1;
	}
	char *line = NULL;
	size_t cap = 0, have = 0;
	while (getline(&line, &cap, f) > 0) {
		json_object *o = json_tokener_parse(line);
		struct ppl_base_info b, on_disk;
		char why[300];
		/* a torn last line (a crash while adding) is not a base; a base
		 * whose directory was removed no longer counts */
		bool ok = o && from_json(o, &b) == 0 && ppl_base_read(b.dir, &on_disk, why, sizeof why) == 0 &&
			  on_disk.start_lsn == b.start_lsn;
		if (o)
			json_object_put(o);
		if (!ok)
			continue;
		if (*n == have) {
			have = have ? 2 * have : 8;
			struct ppl_base_info *m = realloc(*out, have * sizeof *m);
			if (m == NULL) {
				free(line);
				fclose(f);
				free(*out);
				*out = NULL;
				*n = 0;
				snprintf(err, errlen, "out of memory reading %s", path);
				return -1;
			}
			*out = m;
		}
		(*out)[(*n)++] = b;
	}
	free(line);
	fclose(f);
	return 0;
}
