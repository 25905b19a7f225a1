/* Base copies on disk: the manifest a finished copy holds
 * (BASE/ppl-base.json: the LSNs a clone can start from) and the registry
 * of the copies made for an archive (ARCHIVE/ppl-bases.jsonl, one line
 * per finished copy), which tells the archive's retention what the
 * newest base still needs and lets a clone find the newest base before
 * its target. A base whose directory is gone no longer counts. */
#ifndef PPL_BASES_H
#define PPL_BASES_H

#include <stddef.h>
#include <stdint.h>

struct ppl_base_info {
	char dir[4096];
	uint64_t start_lsn;    /* MariaDB's checkpoint when the copy began: the archive is needed from here */
	uint64_t end_lsn;      /* the parse when it ended: clones from here on */
	uint64_t started_ns, finished_ns; /* wall clock */
	uint64_t log_file_size, page_size, files, bytes;
	char archive[4096];    /* the archive it was made for */
};

/* Writes dir/ppl-base.json (through a temporary file, synced): the copy
 * counts as finished once it is there. 0, or -1 with errno. */
int ppl_base_write(const char *dir, const struct ppl_base_info *b);
/* Reads dir/ppl-base.json: 0, or -1 with why in err (no manifest: the
 * copy did not finish). */
int ppl_base_read(const char *dir, struct ppl_base_info *b, char *err, size_t errlen);

/* Appends a finished base to archive_dir's registry (synced). 0, or -1
 * with err. */
int ppl_bases_add(const char *archive_dir, const struct ppl_base_info *b, char *err, size_t errlen);
/* The registered bases that still exist (their manifest readable), oldest
 * first: *out malloc'ed (NULL when none). 0, or -1 with err (the registry
 * cannot be read; none yet is 0 with none). */
int ppl_bases_list(const char *archive_dir, struct ppl_base_info **out, size_t *n, char *err, size_t errlen);

#endif
