/* Validation and display of FSAL_PPL's parameters. Ganesha's parser only
 * checks types; every rule that decides whether the engine can run with a
 * setting lives here, so that a refusal names the setting and the fix. */
#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>


#include "ppl/store_config.h"

static int fail(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
	return -1;
}

static bool is_pow2(uint64_t v)
{
	return v && (v & (v - 1)) == 0;
}

static bool numeric_address(const char *s)
{
	unsigned char buf[sizeof(struct in6_addr)];

	return inet_pton(AF_INET, s, buf) == 1 || inet_pton(AF_INET6, s, buf) == 1;
}

/* One Elision_Clients entry: "any", an address, or address/prefix. */
static bool client_entry_ok(const char *e)
{
	char addr[INET6_ADDRSTRLEN + 8];
	unsigned char buf[sizeof(struct in6_addr)];
	const char *slash = strchr(e, '/');
	size_t n = slash ? (size_t)(slash - e) : strlen(e);
	int family;

	if (strcmp(e, "any") == 0)
		return true;
	if (n == 0 || n >= sizeof(addr))
		return false;
	memcpy(addr, e, n);
	addr[n] = '\0';
	if (inet_pton(AF_INET, addr, buf) == 1)
		family = AF_INET;
	else if (inet_pton(AF_INET6, addr, buf) == 1)
		family = AF_INET6;
	else
		return false;
	if (slash) {
		char *end;
		long bits;

		errno = 0;
		bits = strtol(slash + 1, &end, 10);
		if (errno || end == slash + 1 || *end || bits < 0 || bits > (family == AF_INET ? 32 : 128))
			return false;
	}
	return true;
}

static int check_clients(const char *list, char *err, size_t errlen)
{
	char *copy, *save = NULL, *tok;
	int rc = 0;

	if (list == NULL || *list == '\0')
		return fail(err, errlen, "Elision_Clients is empty: list the addresses (or address/prefix "
			    "blocks, or \"any\") of the compute nodes allowed to ask for elisions");
	copy = strdup(list);
	if (copy == NULL)
		return fail(err, errlen, "out of memory checking Elision_Clients");
	for (tok = strtok_r(copy, ", ", &save); tok; tok = strtok_r(NULL, ", ", &save)) {
		if (!client_entry_ok(tok)) {
			rc = fail(err, errlen, "Elision_Clients entry \"%s\" is not a numeric IPv4/IPv6 address, "
				  "an address/prefix block or \"any\"", tok);
			break;
		}
	}
	free(copy);
	return rc;
}

static int check_archive(const struct ppl_config *c, char *err, size_t errlen)
{
	struct stat st;
	bool bases = c->base_path && c->base_path[0];
	if (c->archive_path == NULL || c->archive_path[0] == '\0') {
		if (bases || c->base_interval)
			return fail(err, errlen, "Base_Path and Base_Interval need the log archive: set Archive_Path too "
				    "(a base copy without the archive after it gives no database)");
		return 0;
	}
	if (c->base_interval && !bases)
		return fail(err, errlen, "Base_Interval = %u needs Base_Path: the directory the copies go into",
			    c->base_interval);
	if (bases && c->base_path[0] != '/')
		return fail(err, errlen, "Base_Path \"%s\" is relative: give an absolute path", c->base_path);
	if (bases && (stat(c->base_path, &st) != 0 || !S_ISDIR(st.st_mode)))
		return fail(err, errlen, "Base_Path \"%s\" is not an existing directory: create it (outside the "
			    "export) or fix the path", c->base_path);
	if (c->base_interval && c->base_interval < PPL_MIN_BASE_INTERVAL)
		return fail(err, errlen, "Base_Interval = %u: at least %u seconds (a copy reads the whole datadir), "
			    "or 0 for no schedule", c->base_interval, PPL_MIN_BASE_INTERVAL);
	if (c->base_keep < 1 || c->base_keep > PPL_MAX_BASE_KEEP)
		return fail(err, errlen, "Base_Keep = %u: from 1 to %u", c->base_keep, PPL_MAX_BASE_KEEP);
	if (c->archive_path[0] != '/')
		return fail(err, errlen, "Archive_Path \"%s\" is relative: give an absolute path", c->archive_path);
	if (stat(c->archive_path, &st) != 0 || !S_ISDIR(st.st_mode))
		return fail(err, errlen, "Archive_Path \"%s\" is not an existing directory: create it (on a disk "
			    "other than the export's, so that a full archive never fills the datadir's disk) or fix "
			    "the path", c->archive_path);
	if (c->archive_segment_size < PPL_MIN_ARCHIVE_SEGMENT_SIZE ||
	    c->archive_segment_size > PPL_MAX_ARCHIVE_SEGMENT_SIZE)
		return fail(err, errlen, "Archive_Segment_Size = %llu: must be from %llu to %llu bytes",
			    (unsigned long long)c->archive_segment_size,
			    (unsigned long long)PPL_MIN_ARCHIVE_SEGMENT_SIZE,
			    (unsigned long long)PPL_MAX_ARCHIVE_SEGMENT_SIZE);
	if (c->archive_retention_size != 0 && c->archive_retention_size < 2 * c->archive_segment_size)
		return fail(err, errlen, "Archive_Retention_Size = %llu: keep at least two segments (%llu bytes "
			    "with Archive_Segment_Size = %llu), or 0 for no size limit",
			    (unsigned long long)c->archive_retention_size,
			    (unsigned long long)(2 * c->archive_segment_size),
			    (unsigned long long)c->archive_segment_size);
	return 0;
}

int ppl_config_check(const struct ppl_config *c, char *err, size_t errlen)
{
	struct stat st;
	char dir[PATH_MAX];
	const char *slash;

	if (c->pool_path == NULL || c->pool_path[0] == '\0')
		return fail(err, errlen, "Pool_Path is not set: give the pmem pool file (on a DAX file "
			    "system, or on tmpfs to emulate NVDIMM), e.g. Pool_Path = \"/mnt/pmem/ppl.pool\"");
	if (c->pool_path[0] != '/')
		return fail(err, errlen, "Pool_Path \"%s\" is relative: give an absolute path", c->pool_path);
	slash = strrchr(c->pool_path, '/');
	snprintf(dir, sizeof(dir), "%.*s", slash == c->pool_path ? 1 : (int)(slash - c->pool_path), c->pool_path);
	if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode))
		return fail(err, errlen, "Pool_Path \"%s\": directory %s does not exist: create it (a DAX or "
			    "tmpfs mount) or fix the path", c->pool_path, dir);
	if (stat(c->pool_path, &st) == 0 && !S_ISREG(st.st_mode) && !S_ISCHR(st.st_mode))
		return fail(err, errlen, "Pool_Path \"%s\" exists and is neither a regular file nor a DAX "
			    "character device", c->pool_path);

	if (!is_pow2(c->block_size) || c->block_size < 64 || c->block_size > PPL_MAX_BLOCK_SIZE)
		return fail(err, errlen, "Block_Size = %u: must be a power of two from 64 to %u (64 is the "
			    "NVDIMM write unit the design assumes)", c->block_size, PPL_MAX_BLOCK_SIZE);
	if (c->pool_size != 0 && (c->pool_size < PPL_MIN_POOL_SIZE || c->pool_size % c->block_size))
		return fail(err, errlen, "Pool_Size = %llu: must be at least %llu bytes and a multiple of "
			    "Block_Size (%u)", (unsigned long long)c->pool_size,
			    (unsigned long long)PPL_MIN_POOL_SIZE, c->block_size);
	if (c->max_per_page < c->block_size || c->max_per_page % c->block_size ||
	    c->max_per_page > PPL_MAX_PER_PAGE_LIMIT)
		return fail(err, errlen, "Max_Per_Page = %u: must be a multiple of Block_Size (%u) and at "
			    "most %u bytes", c->max_per_page, c->block_size, PPL_MAX_PER_PAGE_LIMIT);
	if (c->pool_size != 0 && c->pool_size / c->max_per_page < 16)
		return fail(err, errlen, "Pool_Size = %llu holds fewer than 16 pages of Max_Per_Page = %u "
			    "bytes: make the pool larger", (unsigned long long)c->pool_size, c->max_per_page);
	if (c->apply_threads < 1 || c->apply_threads > PPL_MAX_APPLY_THREADS)
		return fail(err, errlen, "Apply_Threads = %u: must be from 1 to %u", c->apply_threads,
			    PPL_MAX_APPLY_THREADS);
	if (c->page_cache_size != 0 && c->page_cache_size < PPL_MIN_PAGE_SIZE)
		return fail(err, errlen, "Page_Cache_Size = %llu: use 0 to turn the rebuilt-page cache off, "
			    "or at least %u bytes (one page)", (unsigned long long)c->page_cache_size,
			    PPL_MIN_PAGE_SIZE);
	/* the cache fills as pages are rebuilt: sized past the machine's
	 * memory, it ends in the OOM killer under load, not at start */
	long pages = sysconf(_SC_PHYS_PAGES), psize = sysconf(_SC_PAGESIZE);
	unsigned long long phys = pages > 0 && psize > 0 ? (unsigned long long)pages * (unsigned long long)psize : 0;
	if (phys != 0 && c->page_cache_size > phys / 4 * 3)
		return fail(err, errlen, "Page_Cache_Size = %llu: more than three quarters of this machine's memory "
			    "(%llu bytes); the cache fills as pages are rebuilt, so make it smaller",
			    (unsigned long long)c->page_cache_size, phys);

	if (c->elision_address == NULL || !numeric_address(c->elision_address))
		return fail(err, errlen, "Elision_Address \"%s\" is not a numeric IPv4 or IPv6 address",
			    c->elision_address ? c->elision_address : "");
	if (check_clients(c->elision_clients, err, errlen) != 0)
		return -1;
	if (c->elision_token && strlen(c->elision_token) > PPL_TOKEN_MAX)
		return fail(err, errlen, "Elision_Token is %zu bytes long: at most %u", strlen(c->elision_token),
			    PPL_TOKEN_MAX);
	if (c->elision_port != 0 && (c->elision_token == NULL || c->elision_token[0] == '\0'))
		return fail(err, errlen, "Elision_Port = %u but Elision_Token is empty: set a shared secret "
			    "(the same as libcatcher's LIBCATCHER_TOKEN), or Elision_Port = 0 to turn the "
			    "elision service off", c->elision_port);
	if (c->metrics_port != 0 && (c->metrics_address == NULL || !numeric_address(c->metrics_address)))
		return fail(err, errlen, "Metrics_Address \"%s\" is not a numeric IPv4 or IPv6 address",
			    c->metrics_address ? c->metrics_address : "");
	if (c->metrics_port != 0 && c->metrics_port == c->elision_port &&
	    (c->metrics_address == NULL || c->elision_address == NULL ||
	     strcmp(c->metrics_address, c->elision_address) == 0))
		return fail(err, errlen, "Metrics_Port = %u is also Elision_Port: give the metrics endpoint "
			    "a port of its own", c->metrics_port);
	if (c->stats_interval > PPL_MAX_STATS_INTERVAL)
		return fail(err, errlen, "Stats_Interval = %u: at most %u seconds (0 turns the stats line off)",
			    c->stats_interval, PPL_MAX_STATS_INTERVAL);
	return check_archive(c, err, errlen);
}

int ppl_config_check_pool_size(const struct ppl_config *c, const char *exportdir, uint64_t pool_bytes, char *err,
			       size_t errlen)
{
	if (c->pool_size == 0 || pool_bytes == c->pool_size)
		return 0;
	return fail(err, errlen, "pool %s holds %llu bytes but Pool_Size = %llu: set Pool_Size to the pool's size (or "
		    "leave it out), or re-create the pool with `ppl-inspect pool create %s --identity %s --size %llu` "
		    "once its pages are materialized (a clean stop does that)", c->pool_path,
		    (unsigned long long)pool_bytes, (unsigned long long)c->pool_size, c->pool_path, exportdir,
		    (unsigned long long)c->pool_size);
}

int ppl_config_format(const struct ppl_config *c, char *buf, size_t len)
{
	char elision[96], metrics[96];

	if (c->elision_port)
		snprintf(elision, sizeof(elision), "%s%s%s:%u", strchr(c->elision_address, ':') ? "[" : "",
			 c->elision_address, strchr(c->elision_address, ':') ? "]" : "", c->elision_port);
	else
		snprintf(elision, sizeof(elision), "off");
	if (c->metrics_port)
		snprintf(metrics, sizeof(metrics), "%s%s%s:%u", strchr(c->metrics_address, ':') ? "[" : "",
			 c->metrics_address, strchr(c->metrics_address, ':') ? "]" : "", c->metrics_port);
	else
		snprintf(metrics, sizeof(metrics), "off");
	char size[32] = "(as-created)";
	if (c->pool_size)
		snprintf(size, sizeof(size), "%llu", (unsigned long long)c->pool_size);
	char archive[PATH_MAX + 128] = "off";
	if (c->archive_path && c->archive_path[0])
		snprintf(archive, sizeof(archive), "%s (segments %llu B, keep %llu B, %u s; bases %s every %u s, keep %u)",
			 c->archive_path, (unsigned long long)c->archive_segment_size,
			 (unsigned long long)c->archive_retention_size, c->archive_retention_age,
			 c->base_path && c->base_path[0] ? c->base_path : "(none)", c->base_interval, c->base_keep);
	return snprintf(buf, len,
			"Pool_Path=%s Pool_Size=%s Block_Size=%u Max_Per_Page=%u Apply_Threads=%u "
			"Page_Cache_Size=%llu Elision=%s Elision_Clients=%s Elision_Token=%s Verify=%s "
			"Allow_Volatile_Pool=%s Ingest_Behind=%s Log_On_Pmem=%s Stats_Interval=%u Metrics=%s Archive=%s",
			c->pool_path, size, c->block_size, c->max_per_page,
			c->apply_threads, (unsigned long long)c->page_cache_size, elision, c->elision_clients,
			c->elision_token && c->elision_token[0] ? "(set)" : "(none)", c->verify ? "on" : "off",
			c->allow_volatile_pool ? "yes" : "no", c->ingest_behind ? "yes" : "no",
			c->log_on_pmem ? "yes" : "no", c->stats_interval,
			metrics, archive);
}

void ppl_config_free(struct ppl_config *c)
{
	free(c->pool_path);
	free(c->elision_address);
	free(c->elision_clients);
	free(c->elision_token);
	free(c->metrics_address);
	free(c->archive_path);
	free(c->base_path);
	memset(c, 0, sizeof(*c));
}
