/* `ppl-inspect pool ...`: create a pool, check it, summarize it, dump one
 * page's chain. Everything but create opens the pool read-only. */
#include <getopt.h>
#include <inttypes.h>
#include <json-c/json.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "inspect.h"
#include "ppl/datadir.h"
#include "ppl/pool.h"
#include "ppl/pool_marker.h"

struct args {
	const char *path, *identity, *datadir, *page;
	bool json;
	struct ppl_pool_geometry g;
};

static int parse_size(const char *s, uint64_t *out)
{
	char *end;
	unsigned long long v = strtoull(s, &end, 10);
	if (end == s)
		return -1;
	switch (*end) {
	case 'k': case 'K': v <<= 10; end++; break;
	case 'm': case 'M': v <<= 20; end++; break;
	case 'g': case 'G': v <<= 30; end++; break;
	}
	if (*end != '\0')
		return -1;
	*out = v;
	return 0;
}

static int parse_u32(const char *s, uint32_t *out)
{
	uint64_t v;
	if (parse_size(s, &v) != 0 || v > UINT32_MAX)
		return -1;
	*out = (uint32_t)v;
	return 0;
}

static int parse(int argc, char **argv, struct args *a)
{
	static const struct option opts[] = {
		{ "identity", required_argument, 0, 'i' }, { "size", required_argument, 0, 's' },
		{ "block-size", required_argument, 0, 'b' }, { "max-per-page", required_argument, 0, 'm' },
		{ "dw-slots", required_argument, 0, 'w' }, { "dw-page-size", required_argument, 0, 'p' },
		{ "datadir", required_argument, 0, 'd' }, { "json", no_argument, 0, 'j' },
		{ "log-size", required_argument, 0, 'l' }, { 0, 0, 0, 0 },
	};
	int c;
	memset(a, 0, sizeof(*a));
	optind = 1;
	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		int bad = 0;
		switch (c) {
		case 'i': a->identity = optarg; break;
		case 's': bad = parse_size(optarg, &a->g.size); break;
		case 'b': bad = parse_u32(optarg, &a->g.block_size); break;
		case 'm': bad = parse_u32(optarg, &a->g.max_per_page); break;
		case 'w': bad = parse_u32(optarg, &a->g.dw_slots); break;
		case 'p': bad = parse_u32(optarg, &a->g.dw_page_size); break;
		case 'l':
			if (strcmp(optarg, "none") == 0 || strcmp(optarg, "0") == 0)
				a->g.log_size = PPL_POOL_NO_LOG_AREA;
			else
				bad = parse_size(optarg, &a->g.log_size) || a->g.log_size == 0;
			break;
		case 'd': a->datadir = optarg; break;
		case 'j': a->json = true; break;
		default: return -1;
		}
		if (bad) {
			const char *name = "?";
			for (const struct option *op = opts; op->name; op++)
				if (op->val == c)
					name = op->name;
			fprintf(stderr, "ppl-inspect: bad value for --%s: %s\n", name, optarg);
			return -1;
		}
	}
	if (optind < argc)
		a->path = argv[optind++];
	if (optind < argc)
		a->page = argv[optind++];
	if (optind < argc || a->path == NULL)
		return -1;
	return 0;
}

static void log_stderr(void *arg, enum ppl_log_level level, const char *func, int line, const char *msg)
{
	(void)arg;
	(void)level;
	(void)func;
	(void)line;
	fprintf(stderr, "%s\n", msg);
}

static void print_json(json_object *o)
{
	printf("%s\n", json_object_to_json_string_ext(o, JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_NOSLASHESCAPE));
	json_object_put(o);
}

static void add_u64(json_object *o, const char *k, uint64_t v) { json_object_object_add(o, k, json_object_new_uint64(v)); }

static int cmd_create(struct args *a)
{
	char err[2048];
	a->g.identity = a->identity;
	/* the identity is the export: a pool it ran with and lost, undrained,
	 * is not replaced by an empty one without a word (pool_marker.h) */
	if (ppl_pool_marker_admit(a->identity, NULL, 0, err, sizeof(err)) != 0 ||
	    ppl_pool_create(a->path, &a->g, err, sizeof(err)) != 0) {
		fprintf(stderr, "ppl-inspect: %s\n", err);
		return 2;
	}
	struct ppl_pool *p;
	struct ppl_pool_options o = { .read_only = true };
	if (ppl_pool_open(a->path, &o, &p, NULL, err, sizeof(err)) != 0) {
		fprintf(stderr, "ppl-inspect: created, but cannot reopen: %s\n", err);
		return 2;
	}
	struct ppl_pool_header h;
	ppl_pool_get_header(p, &h);
	printf("created pool %s for \"%s\": %" PRIu64 " B, %" PRIu64 " blocks of %u B, %u B per page, "
	       "%u doublewrite slots of %u B, a log area of %" PRIu64 " B%s\n", a->path, h.identity, h.size,
	       h.nblocks - 1, h.block_size, h.max_per_page, h.dw_slots, h.dw_page_size, h.log_size,
	       h.log_size ? "" : " (none: Log_On_Pmem needs one)");
	ppl_pool_close(p);
	return 0;
}

static struct ppl_pool *open_ro(struct args *a, struct ppl_datadir *dd, struct ppl_pool_recovery *rec, bool quiet)
{
	char err[512];
	struct ppl_pool *p;
	struct ppl_pool_options o = { .identity = a->identity, .read_only = true, .index_wait = true,
				      .log = {.log = quiet ? NULL : log_stderr} };
	if (dd) {
		o.read_page = ppl_datadir_read_page;
		o.page_arg = dd;
	}
	if (ppl_pool_open(a->path, &o, &p, rec, err, sizeof(err)) != 0) {
		fprintf(stderr, "ppl-inspect: %s\n", err);
		return NULL;
	}
	return p;
}

static json_object *recovery_json(const struct ppl_pool_recovery *r)
{
	json_object *o = json_object_new_object();
	add_u64(o, "pages", r->pages);
	add_u64(o, "records", r->records);
	add_u64(o, "blocks_used", r->blocks_used);
	add_u64(o, "blocks_free", r->blocks_free);
	add_u64(o, "blocks_unlinked", r->orphan_blocks);
	add_u64(o, "replaced_chains", r->replaced_chains);
	add_u64(o, "damaged_pages", r->damaged_pages);
	add_u64(o, "damaged_blocks", r->damaged_blocks);
	add_u64(o, "dw_pending", r->dw_pending);
	add_u64(o, "dw_current", r->dw_current);
	add_u64(o, "dw_needs_restore", r->dw_needs_restore);
	add_u64(o, "dw_unreadable", r->dw_unreadable);
	add_u64(o, "dw_damaged", r->dw_damaged);
	add_u64(o, "durable_lsn", r->durable_lsn);
	add_u64(o, "log_pending", r->log_pending);
	add_u64(o, "log_pending_bytes", r->log_pending_bytes);
	json_object_object_add(o, "scan_seconds", json_object_new_double((double)r->elapsed_ns / 1e9));
	return o;
}

/* The log area's entries still needed: the log file's ranges a restart
 * writes again from the pool. */
static int pending_range(void *arg, uint64_t seq, uint64_t fileid, uint64_t offset, const uint8_t *bytes, uint32_t len)
{
	(void)bytes;
	json_object *e = json_object_new_object();
	add_u64(e, "seq", seq);
	add_u64(e, "fileid", fileid);
	add_u64(e, "offset", offset);
	add_u64(e, "len", len);
	json_object_array_add(arg, e);
	return 0;
}

static int cmd_check(struct args *a)
{
	char err[512];
	struct ppl_datadir *dd = NULL;
	if (a->datadir && (dd = ppl_datadir_open(a->datadir, NULL, err, sizeof(err))) == NULL) {
		fprintf(stderr, "ppl-inspect: %s\n", err);
		return 2;
	}
	struct ppl_pool_recovery r;
	struct ppl_pool *p = open_ro(a, dd, &r, false);
	if (p == NULL) {
		ppl_datadir_close(dd);
		return 2;
	}
	bool bad = r.damaged_pages || r.damaged_blocks || r.dw_damaged || r.dw_needs_restore;
	if (a->json) {
		json_object *o = recovery_json(&r);
		json_object_object_add(o, "ok", json_object_new_boolean(!bad));
		print_json(o);
	} else {
		printf("pool %s: %s\n", a->path, bad ? "PROBLEMS FOUND" : "ok");
		printf("  pages %" PRIu64 ", records %" PRIu64 ", blocks used %" PRIu64 ", free %" PRIu64
		       " (%" PRIu64 " unlinked)\n", r.pages, r.records, r.blocks_used, r.blocks_free, r.orphan_blocks);
		printf("  damaged pages %" PRIu64 ", damaged blocks %" PRIu64 ", interrupted replacements %" PRIu64 "\n",
		       r.damaged_pages, r.damaged_blocks, r.replaced_chains);
		printf("  doublewrite slots in use %" PRIu64 ": %" PRIu64 " data page current, %" PRIu64
		       " to restore, %" PRIu64 " not checked%s, %" PRIu64 " damaged\n", r.dw_pending, r.dw_current,
		       r.dw_needs_restore, r.dw_unreadable, dd ? " (page unreadable)" : " (no --datadir)",
		       r.dw_damaged);
		printf("  durable LSN %" PRIu64 "; scan took %.3f s\n", r.durable_lsn, (double)r.elapsed_ns / 1e9);
		printf("  log area: %" PRIu64 " write(s) of MariaDB's log (%" PRIu64 " B) not yet known to be in the "
		       "log file%s\n", r.log_pending, r.log_pending_bytes,
		       r.log_pending ? ": the storage node writes them into it when it opens the pool" : "");
		if (r.dw_needs_restore)
			printf("  the storage node restores those pages when it opens the pool\n");
	}
	ppl_pool_close(p);
	ppl_datadir_close(dd);
	return bad ? 1 : 0;
}

struct hist {
	uint64_t by_blocks[17], bytes, records, spilled, damaged;
};

static void count_page(void *arg, uint32_t space, uint32_t page_no, const struct ppl_pool_page_info *i)
{
	(void)space;
	(void)page_no;
	struct hist *h = arg;
	h->by_blocks[i->blocks < 16 ? i->blocks : 16]++;
	h->bytes += i->bytes;
	h->records += i->records;
	h->spilled += i->spilled;
	h->damaged += i->damaged;
}

static int cmd_info(struct args *a)
{
	struct ppl_pool_recovery r;
	struct ppl_pool *p = open_ro(a, NULL, &r, true);
	if (p == NULL)
		return 2;
	struct ppl_pool_header h;
	struct ppl_pool_usage u;
	struct hist hist = { 0 };
	ppl_pool_get_header(p, &h);
	ppl_pool_usage(p, &u);
	ppl_pool_for_each_page(p, count_page, &hist);
	char created[64], uuid[33];
	time_t t = (time_t)h.created_unix;
	strftime(created, sizeof(created), "%Y-%m-%dT%H:%M:%SZ", gmtime(&t));
	ppl_pool_uuid_hex(h.uuid, uuid);
	uint32_t cap_blocks = h.max_per_page / h.block_size;
	if (a->json) {
		json_object *o = json_object_new_object(), *hist_o = json_object_new_array();
		json_object_object_add(o, "path", json_object_new_string(a->path));
		json_object_object_add(o, "identity", json_object_new_string(h.identity));
		json_object_object_add(o, "uuid", json_object_new_string(uuid));
		json_object_object_add(o, "created", json_object_new_string(created));
		add_u64(o, "version", h.version);
		add_u64(o, "size", h.size);
		add_u64(o, "block_size", h.block_size);
		add_u64(o, "max_per_page", h.max_per_page);
		add_u64(o, "dw_slots", h.dw_slots);
		add_u64(o, "dw_page_size", h.dw_page_size);
		add_u64(o, "blocks", u.nblocks);
		add_u64(o, "blocks_free", u.free_blocks);
		add_u64(o, "blocks_used", r.blocks_used);
		add_u64(o, "blocks_damaged", r.damaged_blocks);
		add_u64(o, "pages", u.pages);
		add_u64(o, "records", hist.records);
		add_u64(o, "record_bytes", hist.bytes);
		add_u64(o, "damaged_pages", hist.damaged);
		add_u64(o, "durable_lsn", r.durable_lsn);
		add_u64(o, "dw_slots_in_use", r.dw_pending);
		struct ppl_pool_log_usage lu;
		ppl_pool_log_usage(p, &lu);
		add_u64(o, "log_area", h.log_size);
		add_u64(o, "log_used", lu.used);
		add_u64(o, "log_pending", r.log_pending);
		add_u64(o, "log_pending_bytes", r.log_pending_bytes);
		json_object *ranges = json_object_new_array();
		ppl_pool_log_pending(p, pending_range, ranges);
		json_object_object_add(o, "log_pending_ranges", ranges);
		for (uint32_t b = 1; b <= cap_blocks && b <= 16; b++) {
			json_object *e = json_object_new_object();
			add_u64(e, "blocks", b);
			add_u64(e, "bytes_max", (uint64_t)b * h.block_size);
			add_u64(e, "pages", hist.by_blocks[b]);
			json_object_array_add(hist_o, e);
		}
		json_object_object_add(o, "pages_by_blocks", hist_o);
		json_object_object_add(o, "scan_seconds", json_object_new_double((double)r.elapsed_ns / 1e9));
		print_json(o);
	} else {
		printf("pool %s\n", a->path);
		printf("  identity     %s\n", h.identity);
		printf("  layout       version %u; %u B blocks, %u B per page; %u doublewrite slots of %u B\n", h.version,
		       h.block_size, h.max_per_page, h.dw_slots, h.dw_page_size);
		printf("  size         %" PRIu64 " B, %" PRIu64 " blocks; created %s; uuid %s\n", h.size, u.nblocks,
		       created, uuid);
		printf("  blocks       %" PRIu64 " used, %" PRIu64 " free (%.1f%%), %" PRIu64 " damaged\n",
		       r.blocks_used, u.free_blocks, u.nblocks ? 100.0 * (double)u.free_blocks / (double)u.nblocks : 0,
		       r.damaged_blocks);
		printf("  pages        %" PRIu64 " with %" PRIu64 " records, %" PRIu64 " B of records%s\n", u.pages,
		       hist.records, hist.bytes, hist.damaged ? " (some damaged: run check)" : "");
		printf("  durable LSN  %" PRIu64 "\n", r.durable_lsn);
		printf("  doublewrite  %" PRIu64 " slot(s) in use\n", r.dw_pending);
		if (h.log_size)
			printf("  log area     %" PRIu64 " B; %" PRIu64 " write(s), %" PRIu64 " B, of the log file not yet "
			       "known to be in it\n", h.log_size, r.log_pending, r.log_pending_bytes);
		else
			printf("  log area     none (Log_On_Pmem needs one: re-create the pool)\n");
		printf("  bytes per page (blocks held):\n");
		for (uint32_t b = 1; b <= cap_blocks && b <= 16; b++)
			printf("    %5u B  %" PRIu64 " pages\n", b * h.block_size, hist.by_blocks[b]);
	}
	ppl_pool_close(p);
	return 0;
}

struct dump {
	json_object *arr;
	int n;
};

static int dump_rec(void *arg, const struct ppl_pool_rec *r)
{
	struct dump *d = arg;
	char hex[2 * 8192 + 1];
	for (unsigned i = 0; i < r->len; i++)
		snprintf(hex + 2 * i, 3, "%02x", r->bytes[i]);
	hex[2 * r->len] = '\0';
	if (d->arr) {
		json_object *e = json_object_new_object();
		add_u64(e, "start_lsn", r->start_lsn);
		add_u64(e, "end_lsn", r->end_lsn);
		add_u64(e, "len", r->len);
		json_object_object_add(e, "from_init", json_object_new_boolean(r->from_init));
		json_object_object_add(e, "bytes", json_object_new_string(hex));
		json_object_array_add(d->arr, e);
	} else {
		printf("  %3d  lsn %" PRIu64 "..%" PRIu64 "  %3u B%s  %s\n", d->n, r->start_lsn, r->end_lsn, r->len,
		       r->from_init ? "  init" : "", hex);
	}
	d->n++;
	return 0;
}

static int cmd_dump(struct args *a)
{
	unsigned long space, page_no;
	char *end;
	if (a->page == NULL || (space = strtoul(a->page, &end, 10), *end != ':') ||
	    (page_no = strtoul(end + 1, &end, 10), *end != '\0') || space > UINT32_MAX || page_no > UINT32_MAX) {
		fprintf(stderr, "ppl-inspect: pool dump needs SPACE:PAGE, e.g. 5:3\n");
		return 2;
	}
	struct ppl_pool *p = open_ro(a, NULL, NULL, false);
	if (p == NULL)
		return 2;
	struct ppl_pool_page_info i;
	bool present = ppl_pool_page_info(p, (uint32_t)space, (uint32_t)page_no, &i);
	struct dump d = { a->json ? json_object_new_array() : NULL, 0 };
	json_object *o = a->json ? json_object_new_object() : NULL;
	if (!a->json) {
		if (!present)
			printf("page %lu:%lu: no records in the pool\n", space, page_no);
		else
			printf("page %lu:%lu: chain generation %u, %u block(s), %u record(s), %u B, base LSN %" PRIu64
			       "%s\n", space, page_no, i.seq, i.blocks, i.records, i.bytes, i.base_lsn,
			       i.damaged ? ", DAMAGED" : "");
	}
	enum ppl_pool_status st = ppl_pool_records(p, (uint32_t)space, (uint32_t)page_no, dump_rec, &d);
	if (o) {
		add_u64(o, "space", space);
		add_u64(o, "page", page_no);
		json_object_object_add(o, "present", json_object_new_boolean(present));
		add_u64(o, "seq", i.seq);
		add_u64(o, "blocks", i.blocks);
		add_u64(o, "base_lsn", i.base_lsn);
		json_object_object_add(o, "status", json_object_new_string(ppl_pool_status_name(st)));
		json_object_object_add(o, "records", d.arr);
		print_json(o);
	} else if (st != PPL_POOL_OK) {
		printf("  records not shown: %s\n", ppl_pool_status_name(st));
	}
	ppl_pool_close(p);
	return st == PPL_POOL_OK ? 0 : 1;
}

int pool_main(int argc, char **argv, void (*usage)(FILE *))
{
	struct args a;
	const char *verb = argv[0];
	if (parse(argc, argv, &a) != 0) {
		usage(stderr);
		return 2;
	}
	if (strcmp(verb, "create") == 0) {
		if (a.identity == NULL) {
			fprintf(stderr, "ppl-inspect: pool create needs --identity (the datadir the pool serves)\n");
			return 2;
		}
		return cmd_create(&a);
	}
	if (strcmp(verb, "check") == 0)
		return cmd_check(&a);
	if (strcmp(verb, "info") == 0)
		return cmd_info(&a);
	if (strcmp(verb, "dump") == 0)
		return cmd_dump(&a);
	usage(stderr);
	return 2;
}
