/* The store's options: defaults, validation and the one-line summary
 * logged at start-up. The FSAL fills them from its export block with
 * Ganesha's config machinery (the item table is in
 * ganesha-fsal-ppl/src/ppl_export.c); the parameters are documented in
 * ganesha.conf.example. */
#ifndef PPL_CONFIG_H
#define PPL_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define PPL_DEFAULT_POOL_SIZE 0ull /* the size the pool was created with */
#define PPL_DEFAULT_BLOCK_SIZE 64u
#define PPL_DEFAULT_MAX_PER_PAGE 256u
#define PPL_DEFAULT_APPLY_THREADS 2u
#define PPL_DEFAULT_PAGE_CACHE_SIZE (64ull << 20)
#define PPL_DEFAULT_ELISION_ADDRESS "127.0.0.1"
#define PPL_DEFAULT_ELISION_CLIENTS "127.0.0.1"
#define PPL_DEFAULT_STATS_INTERVAL 60u
#define PPL_DEFAULT_METRICS_ADDRESS "127.0.0.1" /* loopback: figures are for this host's scraper */

#define PPL_DEFAULT_ARCHIVE_SEGMENT_SIZE (64ull << 20)
#define PPL_DEFAULT_ARCHIVE_RETENTION_AGE (7u * 86400u) /* a week */
#define PPL_DEFAULT_BASE_KEEP 2u
#define PPL_MAX_BASE_KEEP 1000u
#define PPL_MIN_BASE_INTERVAL 60u

#define PPL_MIN_POOL_SIZE (1ull << 20)
#define PPL_MIN_ARCHIVE_SEGMENT_SIZE (1ull << 20)
#define PPL_MAX_ARCHIVE_SEGMENT_SIZE (1ull << 30)
#define PPL_MAX_BLOCK_SIZE 4096u
#define PPL_MAX_PER_PAGE_LIMIT 4096u  /* the pool's limit (applier/src/pool.c) */
#define PPL_MAX_APPLY_THREADS 64u
#define PPL_MIN_PAGE_SIZE 4096u       /* a cache smaller than one page is a mistake */
#define PPL_MAX_STATS_INTERVAL 86400u
#define PPL_TOKEN_MAX 256u            /* the elision hello's limit */

struct ppl_config {
	char *pool_path;
	uint64_t pool_size;
	uint32_t block_size;
	uint32_t max_per_page;
	uint32_t apply_threads;
	uint64_t page_cache_size;
	char *elision_address;
	uint16_t elision_port;        /* 0: the elision service is off */
	char *elision_clients;
	char *elision_token;
	bool verify;
	/* A pool on tmpfs keeps records past MariaDB's checkpoint as on
	 * NVDIMM: the operator takes the risk of a power loss (false: it
	 * keeps none there, every page the checkpoint needs is written) */
	bool allow_volatile_pool;
	/* Log WRITEs answered once written; parsed behind the reply on a
	 * thread of the store's (store_behind.c) */
	bool ingest_behind;
	/* Log WRITEs answered once durable in the pool's log area; the log
	 * file synced behind them (store_pmemlog.c) */
	bool log_on_pmem;
	uint32_t stats_interval;      /* seconds; 0: no periodic stats line */
	char *metrics_address;
	uint16_t metrics_port;        /* 0: no metrics endpoint */
	/* The log archive (ppl/archive.h): a directory of the storage
	 * node's own, outside the export; NULL or "": no archive */
	char *archive_path;
	uint64_t archive_segment_size;
	uint64_t archive_retention_size; /* bytes; 0: no limit */
	uint32_t archive_retention_age;  /* seconds; 0: no limit */
	/* Base copies on a schedule: every base_interval seconds (0: none)
	 * into base_path/base-TIME, keeping the newest base_keep there */
	char *base_path;
	uint32_t base_interval;
	uint32_t base_keep;
};

/* Checks every parameter and their combinations. Returns 0, or -1 with a
 * message in err that names the parameter, the value and what to do. */
int ppl_config_check(const struct ppl_config *c, char *err, size_t errlen);
/* A pool of pool_bytes found at Pool_Path for the export at exportdir:
 * 0, or -1 with what to do when Pool_Size names another size. The FSAL and
 * `ppl-inspect config check` refuse with the same words. */
int ppl_config_check_pool_size(const struct ppl_config *c, const char *exportdir, uint64_t pool_bytes, char *err,
			       size_t errlen);
/* "Pool_Path=... Pool_Size=... ..." (the token itself is never shown). */
int ppl_config_format(const struct ppl_config *c, char *buf, size_t len);
/* Frees the strings (malloc'ed: Ganesha's parser allocates with
 * gsh_malloc, which is malloc). */
void ppl_config_free(struct ppl_config *c);

#endif
