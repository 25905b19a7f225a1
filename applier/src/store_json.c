/* The engine's figures and one page's pending records as JSON, for the
 * live socket (ppl_control.c) and `ppl-inspect live`. The names follow
 * the stats lines. */
#include <ctype.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>
#include <urcu-bp.h>

#include "ppl/crash.h"
#include "ppl/fault.h"
#include "ppl/elision_proto.h"
#include "ppl/node.h"
#include "ppl/pool.h"
#include "ppl/redo.h"
#include "ppl/store.h"

static void put_u64(json_object *o, const char *k, uint64_t v)
{
	json_object_object_add(o, k, json_object_new_uint64(v));
}

static json_object *records_by_type(const struct ppl_node_stats *s)
{
	json_object *o = json_object_new_object();
	for (int t = 1; t < 8; t++)
		if (s->rec_by_type[t])
			put_u64(o, ppl_rec_type_name((uint8_t)(t << 4), -1), s->rec_by_type[t]);
	for (int x = 0; x < PPL_EXT_COUNT; x++)
		if (s->rec_by_ext[x])
			put_u64(o, ppl_rec_type_name(PPL_REC_EXTENDED, x), s->rec_by_ext[x]);
	return o;
}

static json_object *stats_json(struct ppl_store *e)
{
	struct ppl_store_figures f;
	ppl_store_figures(e, &f);
	json_object *o = json_object_new_object(), *x;
	json_object_object_add(o, "datadir", json_object_new_string(f.datadir));
	json_object_object_add(o, "ingest", json_object_new_string(f.stopped ? "stopped" : f.started ? "running" :
								    f.copying ? "waiting (log being copied in)" : "waiting"));
	put_u64(o, "logs_copied_in", f.logs_copied_in);
	/* I7: what the engine dropped because the log no longer covers it */
	put_u64(o, "spaces_dropped", f.spaces_dropped);
	put_u64(o, "spaces_missing", f.spaces_missing);
	put_u64(o, "page_size", f.page_size);
	put_u64(o, "parsed_lsn", f.parsed_lsn);

	x = json_object_new_object();
	put_u64(x, "log_bytes", f.node.log_bytes);
	put_u64(x, "mtrs", f.node.mtrs);
	put_u64(x, "records", f.node.records);
	json_object_object_add(x, "records_by_type", records_by_type(&f.node));
	put_u64(x, "pages_pending", f.node.pages_indexed);
	put_u64(x, "chunks", f.node.chunks);
	put_u64(x, "chunk_bytes", f.node.chunk_bytes);
	json_object_object_add(o, "redo", x);

	x = json_object_new_object();
	put_u64(x, "reads", f.reads);
	put_u64(x, "pages_rebuilt", f.pages_rebuilt);
	put_u64(x, "mtrs_applied", f.node.rebuild_mtrs_applied);
	put_u64(x, "mtrs_applied_per_page_p50", f.mtrs_per_rebuild_p50);
	put_u64(x, "mtrs_applied_per_page_p99", f.mtrs_per_rebuild_p99);
	put_u64(x, "plain_reads", f.read_plain_n);
	put_u64(x, "plain_read_p50_us", f.read_plain_p50_us);
	put_u64(x, "plain_read_p99_us", f.read_plain_p99_us);
	put_u64(x, "rebuilt_reads", f.read_rebuilt_n);
	put_u64(x, "rebuilt_read_p50_us", f.read_rebuilt_p50_us);
	put_u64(x, "rebuilt_read_p99_us", f.read_rebuilt_p99_us);
	put_u64(x, "hot_pages_settled", f.hot_settled);
	put_u64(x, "mtrs_skipped", f.node.rebuild_mtrs_skipped);
	put_u64(x, "rebuild_failures", f.rebuild_failures);
	put_u64(x, "cache_slots", f.cache.slots);
	put_u64(x, "cache_hits", f.cache.hits);
	put_u64(x, "cache_misses", f.cache.misses);
	put_u64(x, "cache_resumed", f.cache.resumed);
	put_u64(x, "page_writes_taken_as_bases", f.pages_written);
	put_u64(x, "stale_page_writes_kept_newer", f.stale_writes);
	put_u64(x, "page_writes_superseding_records", f.superseded_writes);
	json_object_object_add(o, "pages", x);

	if (f.verify) {
		x = json_object_new_object();
		put_u64(x, "identical", f.verify_same);
		put_u64(x, "diverged", f.verify_diverged);
		put_u64(x, "not_comparable", f.verify_skipped);
		json_object *c = json_object_new_object();
		for (unsigned i = 1; i < PPL_VERIFY_SKIP_COUNT; i++)
			if (f.verify_skip[i])
				put_u64(c, ppl_verify_skip_name((enum ppl_verify_skip)i), f.verify_skip[i]);
		json_object_object_add(x, "not_comparable_by_cause", c);
		put_u64(x, "unexplained", f.verify_unexplained);
		json_object_object_add(o, "verify", x);
	}
	if (f.elision) {
		x = json_object_new_object();
		put_u64(x, "asked", f.service.requests);
		put_u64(x, "acked", f.service.verdicts[0]);
		json_object *r = json_object_new_object();
		for (unsigned i = 1; i < PPL_ELIDE_REASON_COUNT; i++)
			if (f.service.verdicts[i])
				put_u64(r, ppl_elide_reason_name(i), f.service.verdicts[i]);
		json_object_object_add(x, "refused", r);
		put_u64(x, "answer_p50_us", f.answer_p50_us);
		put_u64(x, "answer_p99_us", f.answer_p99_us);
		put_u64(x, "connections", f.service.connections);
		put_u64(x, "clients_refused", f.service.refused_address + f.service.refused_hello);
		put_u64(x, "protocol_errors", f.service.protocol_errors);
		put_u64(x, "idle_clients_closed", f.service.idle_evicted);
		put_u64(x, "materialized", f.materialized);
		put_u64(x, "checkpoints_held", f.checkpoints_held);
		json_object_object_add(x, "checkpoint_wait_s", json_object_new_double((double)f.checkpoint_wait_ns / 1e9));
		put_u64(x, "log_wraps_held", f.log_wraps_held);
		json_object_object_add(x, "log_wrap_wait_s", json_object_new_double((double)f.log_wrap_wait_ns / 1e9));
		put_u64(x, "log_wrap_pages", f.log_wrap_pages);
		json_object_object_add(x, "disk_failing", json_object_new_boolean(f.disk_failing));
		put_u64(x, "disk_failures", f.disk_failures);
		put_u64(x, "refused_disk_failing", f.elide_refused_disk);
		json_object_object_add(o, "elision", x);
	}
	if (f.log_on_pmem) {
		json_object *x = json_object_new_object();
		put_u64(x, "writes", f.pmem_log_writes);
		put_u64(x, "bytes", f.pmem_log_bytes);
		put_u64(x, "synced_in_reply", f.pmem_log_fallbacks);
		put_u64(x, "syncs_behind", f.pmem_log_syncs);
		put_u64(x, "sync_failures", f.pmem_log_sync_failures);
		json_object_object_add(x, "sync_s", json_object_new_double((double)f.pmem_log_sync_ns / 1e9));
		put_u64(x, "area_bytes", f.pmem_log_area);
		put_u64(x, "area_used", f.pmem_log_used);
		json_object_object_add(o, "log_on_pmem", x);
	}
	if (f.ingest_behind) {
		x = json_object_new_object();
		put_u64(x, "writes_waiting", f.behind_writes);
		put_u64(x, "bytes_waiting", f.behind_bytes);
		put_u64(x, "max_bytes_waiting", f.behind_max_bytes);
		put_u64(x, "waits_for_room", f.behind_waits);
		json_object_object_add(x, "wait_for_room_s", json_object_new_double((double)f.behind_wait_ns / 1e9));
		put_u64(x, "parsed_in_place", f.behind_inline);
		json_object_object_add(o, "ingest_behind", x);
	}
	if (f.archive) {
		x = json_object_new_object();
		put_u64(x, "first_lsn", f.archive_first_lsn);
		put_u64(x, "end_lsn", f.archive_end_lsn);
		put_u64(x, "durable_lsn", f.archive_durable_lsn);
		put_u64(x, "log_durable_lsn", f.log_durable_lsn);
		put_u64(x, "segments", f.archive_segments);
		put_u64(x, "bytes", f.archive_bytes);
		put_u64(x, "waiting_bytes", f.archive_buffered);
		put_u64(x, "flush_failures", f.archive_flush_failures);
		json_object_object_add(x, "stopped", json_object_new_boolean(f.archive_broken));
		json_object_object_add(o, "archive", x);
	}
	if (f.pool) {
		x = json_object_new_object();
		put_u64(x, "blocks", f.pool_usage.nblocks);
		put_u64(x, "blocks_free", f.pool_usage.free_blocks);
		put_u64(x, "pages", f.pool_usage.pages);
		put_u64(x, "durable_lsn", f.pool_durable_lsn);
		put_u64(x, "pages_kept", f.pool_kept);
		put_u64(x, "records_appended", f.pool_records);
		put_u64(x, "spilled_kept", f.pool_spilled_kept);
		put_u64(x, "materialized_over_cap", f.pool_over_cap);
		put_u64(x, "materialized_pool_full", f.pool_full);
		put_u64(x, "materialized_by_cleaner", f.cleaned);
		put_u64(x, "settled_ahead", f.ahead);
		put_u64(x, "put_back_pages", f.pool_loaded_pages);
		put_u64(x, "put_back_records", f.pool_loaded_records);
		json_object_object_add(x, "persist_error", f.pool_persist_failed
				       ? json_object_new_string(strerror(f.pool_persist_failed)) : NULL);
		/* where to look first: the pages holding the oldest records */
		struct ppl_pool_page_ref refs[8];
		size_t k = ppl_pool_oldest(ppl_store_pool(e), refs, 8);
		json_object *a = json_object_new_array();
		for (size_t i = 0; i < k; i++) {
			char id[32];
			snprintf(id, sizeof(id), "%" PRIu32 ":%" PRIu32, refs[i].space, refs[i].page_no);
			json_object_array_add(a, json_object_new_string(id));
		}
		json_object_object_add(x, "oldest_pages", a);
		json_object_object_add(o, "pool", x);
	}
	return o;
}

static int chunk_json(void *arg, uint64_t start_lsn, uint64_t end_lsn, bool from_init, const uint8_t *recs, size_t len)
{
	json_object *c = json_object_new_object(), *types = json_object_new_array();
	put_u64(c, "start_lsn", start_lsn);
	put_u64(c, "end_lsn", end_lsn);
	put_u64(c, "bytes", len);
	json_object_object_add(c, "initializes", json_object_new_boolean(from_init));
	struct ppl_rec_iter it;
	struct ppl_rec r;
	ppl_rec_iter_init(&it, recs, len, 65536);
	while (ppl_rec_next(&it, &r) > 0)
		json_object_array_add(types, json_object_new_string(ppl_rec_type_name(r.type, r.ext_subtype)));
	json_object_object_add(c, "records", types);
	json_object_array_add(arg, c);
	return 0;
}

static json_object *page_json(struct ppl_store *e, uint32_t space, uint32_t page_no)
{
	json_object *o = json_object_new_object();
	put_u64(o, "space", space);
	put_u64(o, "page", page_no);
	rcu_read_lock();
	struct ppl_node *n = ppl_store_node(e);
	struct ppl_node_page_info i;
	if (n && ppl_node_page_info(n, space, page_no, &i)) {
		json_object *x = json_object_new_object(), *chunks = json_object_new_array();
		put_u64(x, "first_lsn", i.first_lsn);
		put_u64(x, "last_lsn", i.last_lsn);
		put_u64(x, "bytes", i.bytes);
		json_object_object_add(x, "initialized_by_log", json_object_new_boolean(i.from_init));
		json_object_object_add(x, "diverged", json_object_new_boolean(i.diverged));
		ppl_node_page_chunks(n, space, page_no, chunk_json, chunks);
		json_object_object_add(x, "mtrs", chunks);
		json_object_object_add(o, "pending", x);
	} else {
		json_object_object_add(o, "pending", NULL);
	}
	rcu_read_unlock();
	struct ppl_pool *p = ppl_store_pool(e);
	struct ppl_pool_page_info pi;
	if (p && ppl_pool_page_info(p, space, page_no, &pi)) {
		json_object *x = json_object_new_object();
		put_u64(x, "records", pi.records);
		put_u64(x, "blocks", pi.blocks);
		put_u64(x, "bytes", pi.bytes);
		/* over the cap, or no blocks free: in memory until materialized */
		put_u64(x, "dram_records", pi.dram_records);
		put_u64(x, "dram_bytes", pi.dram_bytes);
		put_u64(x, "first_lsn", pi.first_lsn);
		put_u64(x, "last_lsn", pi.last_lsn);
		json_object_object_add(x, "damaged", json_object_new_boolean(pi.damaged));
		json_object_object_add(o, "pool", x);
	} else {
		json_object_object_add(o, "pool", NULL);
	}
	return o;
}

static json_object *backup_json(struct ppl_store *e)
{
	static const char *const states[] = {"none", "running", "done", "failed"};
	struct ppl_backup_status b;
	ppl_store_backup_status(e, &b);
	json_object *x = json_object_new_object();
	json_object_object_add(x, "state", json_object_new_string(states[b.state]));
	if (b.state == PPL_BACKUP_NONE)
		return x;
	json_object_object_add(x, "dest", json_object_new_string(b.dest));
	put_u64(x, "start_lsn", b.start_lsn);
	put_u64(x, "end_lsn", b.end_lsn);
	put_u64(x, "files", b.files_done);
	put_u64(x, "bytes", b.bytes_done);
	put_u64(x, "started_ns", b.started_ns);
	put_u64(x, "finished_ns", b.finished_ns);
	if (b.state == PPL_BACKUP_FAILED)
		json_object_object_add(x, "error", json_object_new_string(b.error));
	return x;
}

char *ppl_store_json(struct ppl_store *e, const char *request)
{
	json_object *o;
	uint32_t space, page_no;
	char tail;
	if (strcmp(request, "stats") == 0) {
		o = stats_json(e);
	} else if (sscanf(request, "page %" SCNu32 ":%" SCNu32 "%c", &space, &page_no, &tail) == 2) {
		o = page_json(e, space, page_no);
	} else if (strncmp(request, "forget-space ", 13) == 0 && isdigit((unsigned char)request[13]) &&
		   sscanf(request, "forget-space %" SCNu32 "%c", &space, &tail) == 1) {
		char msg[512];
		o = json_object_new_object();
		int rc = ppl_store_forget_space(e, space, msg, sizeof(msg));
		json_object_object_add(o, rc == 0 ? "forgotten" : "error", json_object_new_string(msg));
	} else if (strcmp(request, "backup") == 0 || strncmp(request, "backup ", 7) == 0) {
		char msg[4400];
		o = json_object_new_object();
		if (request[6] == ' ' && ppl_store_backup_start(e, request + 7, msg, sizeof msg) != 0) {
			json_object_object_add(o, "error", json_object_new_string(msg));
		} else {
			if (request[6] == ' ')
				json_object_object_add(o, "started", json_object_new_string(msg));
			json_object_object_add(o, "backup", backup_json(e));
		}
	} else if (strncmp(request, "crash-at ", 9) == 0) {
		char msg[256];
		o = json_object_new_object();
		int rc = ppl_crash_arm(request + 9, msg, sizeof(msg));
		json_object_object_add(o, rc == 0 ? "armed" : "error", json_object_new_string(msg));
	} else if (strcmp(request, "fault") == 0 || strncmp(request, "fault ", 6) == 0) {
		char msg[256], spec[96];
		unsigned long long hits;
		o = json_object_new_object();
		/* the hits of the fault armed until now, read before a new spec resets them */
		ppl_fault_state(spec, sizeof(spec), &hits);
		int rc = request[5] == '\0' ? 0 : ppl_fault_arm(request + 6, msg, sizeof(msg));
		if (rc != 0) {
			json_object_object_add(o, "error", json_object_new_string(msg));
		} else {
			json_object_object_add(o, "fault", json_object_new_string(spec));
			json_object_object_add(o, "hits", json_object_new_int64((int64_t)hits));
			if (request[5] != '\0')
				json_object_object_add(o, strcmp(request + 6, "clear") == 0 ? "cleared" : "armed",
						       json_object_new_string(msg));
		}
	} else {
		o = json_object_new_object();
		json_object_object_add(o, "error", json_object_new_string("unknown request: ask \"stats\", "
									   "\"page SPACE:PAGE\", "
									   "\"forget-space SPACE\", "
									   "\"backup [DEST]\" or "
									   "\"metrics\""));
	}
	char *out = strdup(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN));
	json_object_put(o);
	return out;
}
