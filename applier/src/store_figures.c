/* What the store shows of itself: every figure at one moment
 * (ppl_store_figures, for the live JSON of store_json.c), the node and the
 * pool for one page's dump, and the stats lines (ppl_store_format,
 * ppl_store_format_pool).
 *
 * A file of its own because it only reads -- counters, the node's, the
 * pool's and the service's stats -- and nothing in it changes what the
 * engine does. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <urcu-bp.h>

#include "ppl/elision_server.h"
#include "ppl/histogram.h"
#include "ppl/node.h"
#include "ppl/page_cache.h"
#include "ppl/pool.h"
#include "ppl/store.h"
#include "store_internal.h"

static int format_node(struct ppl_store *e, struct ppl_node *n, char *buf, size_t len)
{
	struct ppl_node_stats s;
	ppl_node_get_stats(n, &s);
	struct ppl_page_cache_stats cs = { 0 };
	if (e->cache)
		ppl_page_cache_get_stats(e->cache, &cs);
	return snprintf(buf, len,
			"engine: redo %.1f MB parsed to LSN %" PRIu64 ", %" PRIu64 " mtrs, %" PRIu64
			" records, %" PRIu64 " pages pending; reads %" PRIu64 ", pages rebuilt %" PRIu64
			" (%" PRIu64 " mtrs applied, per page p50 %" PRIu64 " p99 %" PRIu64 "; %" PRIu64
			" from the cache, %" PRIu64 " resumed from it), rebuild failures %" PRIu64
			"; read latency p50/p99 plain %" PRIu64 "/%" PRIu64 " us, rebuilt %" PRIu64 "/%" PRIu64 " us"
			"; page writes taken as bases %" PRIu64 "%s",
			(double)s.log_bytes / 1e6, ppl_node_parsed_lsn(n), s.mtrs, s.records, s.pages_indexed,
			__atomic_load_n(&e->reads, __ATOMIC_RELAXED),
			__atomic_load_n(&e->pages_rebuilt, __ATOMIC_RELAXED), s.rebuild_mtrs_applied,
			ppl_histogram_percentile(&e->mtrs_per_rebuild, 50),
			ppl_histogram_percentile(&e->mtrs_per_rebuild, 99), cs.hits, cs.resumed,
			__atomic_load_n(&e->rebuild_failures, __ATOMIC_RELAXED),
			ppl_histogram_percentile(&e->read_plain_us, 50), ppl_histogram_percentile(&e->read_plain_us, 99),
			ppl_histogram_percentile(&e->read_rebuilt_us, 50),
			ppl_histogram_percentile(&e->read_rebuilt_us, 99),
			__atomic_load_n(&e->pages_written, __ATOMIC_RELAXED), STOPPED(e) ? "; INGEST STOPPED" : "");
}

static int format_engine(struct ppl_store *e, char *buf, size_t len)
{
	rcu_read_lock();
	struct ppl_node *n = store_node_of(e);
	int r = n ? format_node(e, n, buf, len) :
		    snprintf(buf, len, "engine: %s", STOPPED(e) ? "ingest stopped (see above)" :
				   e->copying ? "waiting: the log is being copied in" :
				   "waiting for ibdata1 and the log's checkpoint");
	rcu_read_unlock();
	return r;
}

/* Verify mode's not-compared counts by cause, their sum and the
 * unexplained part of it. */
static void load_verify_skips(struct ppl_store *e, uint64_t skip[PPL_VERIFY_SKIP_COUNT], uint64_t *all,
			      uint64_t *unexplained)
{
	*all = *unexplained = 0;
	skip[PPL_VERIFY_COMPARED] = 0;
	for (unsigned i = 1; i < PPL_VERIFY_SKIP_COUNT; i++) {
		skip[i] = __atomic_load_n(&e->verify_skip[i], __ATOMIC_RELAXED);
		*all += skip[i];
		if (!ppl_verify_skip_explained((enum ppl_verify_skip)i))
			*unexplained += skip[i];
	}
}

static int format_verify(struct ppl_store *e, char *buf, size_t len)
{
	if (!e->verify)
		return 0;
	uint64_t skip[PPL_VERIFY_SKIP_COUNT], all, unexplained;
	load_verify_skips(e, skip, &all, &unexplained);
	int n = snprintf(buf, len, "; verify: %" PRIu64 " page writes identical to the rebuild, %" PRIu64
			 " diverged, %" PRIu64 " not comparable", __atomic_load_n(&e->verify_same, __ATOMIC_RELAXED),
			 __atomic_load_n(&e->verify_diverged, __ATOMIC_RELAXED), all);
	const char *sep = " (";
	for (unsigned i = 1; i < PPL_VERIFY_SKIP_COUNT; i++) {
		if (skip[i] == 0)
			continue;
		n += snprintf(buf + n, (size_t)n < len ? len - (size_t)n : 0, "%s%s %" PRIu64, sep,
			      ppl_verify_skip_name((enum ppl_verify_skip)i), skip[i]);
		sep = ", ";
	}
	if (all)
		n += snprintf(buf + n, (size_t)n < len ? len - (size_t)n : 0, "; unexplained %" PRIu64 ")",
			      unexplained);
	return n;
}

static int format_elision(struct ppl_store *e, char *buf, size_t len)
{
	if (e->elision == NULL)
		return snprintf(buf, len, "; elision off");
	struct ppl_elision_server_stats s;
	ppl_elision_server_get_stats(e->elision, &s);
	uint64_t nacks = 0;
	for (int i = 1; i < PPL_ELIDE_REASON_COUNT; i++)
		nacks += s.verdicts[i];
	return snprintf(buf, len,
			"; elision: %" PRIu64 " asked, %" PRIu64 " acked, %" PRIu64 " refused (lsn behind %" PRIu64
			", lsn ahead %" PRIu64 ", checksum %" PRIu64 ", not durable %" PRIu64 ", unknown page %" PRIu64
			", other %" PRIu64 "), answer p50/p99 %" PRIu64 "/%" PRIu64 " us, clients refused %" PRIu64
			"; materialized %" PRIu64
			" page(s), checkpoints held %" PRIu64 " (%.3f s), log wraps held %" PRIu64 " (%.3f s)%s",
			s.requests, s.verdicts[0], nacks, s.verdicts[PPL_ELIDE_NACK_LSN_BEHIND],
			s.verdicts[PPL_ELIDE_NACK_LSN_AHEAD], s.verdicts[PPL_ELIDE_NACK_CHECKSUM],
			s.verdicts[PPL_ELIDE_NACK_NOT_DURABLE], s.verdicts[PPL_ELIDE_NACK_UNKNOWN_PAGE],
			nacks - s.verdicts[PPL_ELIDE_NACK_LSN_BEHIND] - s.verdicts[PPL_ELIDE_NACK_LSN_AHEAD] -
				s.verdicts[PPL_ELIDE_NACK_CHECKSUM] - s.verdicts[PPL_ELIDE_NACK_NOT_DURABLE] -
				s.verdicts[PPL_ELIDE_NACK_UNKNOWN_PAGE],
			ppl_histogram_percentile(&e->answer_us, 50), ppl_histogram_percentile(&e->answer_us, 99),
			s.refused_address + s.refused_hello, __atomic_load_n(&e->materialized, __ATOMIC_RELAXED),
			e->gate_waits, (double)e->gate_ns / 1e9, e->wrap_waits, (double)e->wrap_ns / 1e9,
			__atomic_load_n(&e->disk_failing, __ATOMIC_RELAXED) ? "; DISK FAILING: elision stopped" : "");
}

int ppl_store_format_archive(struct ppl_store *e, char *buf, size_t len)
{
	struct ppl_store_figures f;
	memset(&f, 0, sizeof f);
	store_archive_figures(e, &f);
	if (!f.archive)
		return 0;
	return snprintf(buf, len, "LSN %" PRIu64 " to %" PRIu64 ", durable to %" PRIu64 " (the log to %" PRIu64
			"), %" PRIu64 " segment(s), %.1f MB, %" PRIu64 " B waiting, %" PRIu64 " failed flush(es)%s",
			f.archive_first_lsn, f.archive_end_lsn, f.archive_durable_lsn, f.log_durable_lsn,
			f.archive_segments, (double)f.archive_bytes / 1e6, f.archive_buffered, f.archive_flush_failures,
			f.archive_broken ? "; STOPPED (see the CRIT line)" : "");
}

void ppl_store_figures(struct ppl_store *e, struct ppl_store_figures *f)
{
	memset(f, 0, sizeof(*f));
	rcu_read_lock();
	struct ppl_node *n = store_node_of(e);
	f->datadir = e->datadir;
	f->started = n != NULL;
	f->stopped = STOPPED(e);
	f->page_size = e->page_size;
	if (e->cache)
		ppl_page_cache_get_stats(e->cache, &f->cache);
	if (n) {
		f->parsed_lsn = ppl_node_parsed_lsn(n);
		ppl_node_get_stats(n, &f->node);
	}
	f->reads = __atomic_load_n(&e->reads, __ATOMIC_RELAXED);
	f->pages_rebuilt = __atomic_load_n(&e->pages_rebuilt, __ATOMIC_RELAXED);
	f->mtrs_per_rebuild_p50 = ppl_histogram_percentile(&e->mtrs_per_rebuild, 50);
	f->mtrs_per_rebuild_p99 = ppl_histogram_percentile(&e->mtrs_per_rebuild, 99);
	ppl_latency_get(&e->rebuild_ns, &f->rebuild_latency);
	f->read_plain_n = ppl_histogram_count(&e->read_plain_us);
	f->read_plain_p50_us = ppl_histogram_percentile(&e->read_plain_us, 50);
	f->read_plain_p99_us = ppl_histogram_percentile(&e->read_plain_us, 99);
	f->read_rebuilt_n = ppl_histogram_count(&e->read_rebuilt_us);
	f->read_rebuilt_p50_us = ppl_histogram_percentile(&e->read_rebuilt_us, 50);
	f->read_rebuilt_p99_us = ppl_histogram_percentile(&e->read_rebuilt_us, 99);
	f->rebuild_failures = __atomic_load_n(&e->rebuild_failures, __ATOMIC_RELAXED);
	f->pages_written = __atomic_load_n(&e->pages_written, __ATOMIC_RELAXED);
	f->stale_writes = __atomic_load_n(&e->stale_writes, __ATOMIC_RELAXED);
	f->verify = e->verify;
	f->verify_same = __atomic_load_n(&e->verify_same, __ATOMIC_RELAXED);
	f->verify_diverged = __atomic_load_n(&e->verify_diverged, __ATOMIC_RELAXED);
	load_verify_skips(e, f->verify_skip, &f->verify_skipped, &f->verify_unexplained);
	f->elision = e->elision != NULL;
	if (e->elision)
		ppl_elision_server_get_stats(e->elision, &f->service);
	f->answer_p50_us = ppl_histogram_percentile(&e->answer_us, 50);
	f->answer_p99_us = ppl_histogram_percentile(&e->answer_us, 99);
	f->materialized = __atomic_load_n(&e->materialized, __ATOMIC_RELAXED);
	f->checkpoints_held = e->gate_waits;
	f->checkpoint_wait_ns = e->gate_ns;
	f->log_wraps_held = e->wrap_waits;
	f->log_wrap_wait_ns = e->wrap_ns;
	f->log_wrap_pages = e->wrap_pages;
	f->pool_spilled_kept = __atomic_load_n(&e->spilled_kept, __ATOMIC_RELAXED);
	f->hot_settled = __atomic_load_n(&e->hot_settled, __ATOMIC_RELAXED);
	store_behind_figures(e, f);
	store_pmemlog_figures(e, f);
	f->pool = e->pool != NULL;
	if (e->pool) {
		ppl_pool_usage(e->pool, &f->pool_usage);
		f->pool_durable_lsn = ppl_pool_durable_lsn(e->pool);
	}
	f->pool_kept = __atomic_load_n(&e->pool_kept, __ATOMIC_RELAXED);
	f->pool_records = __atomic_load_n(&e->pool_records, __ATOMIC_RELAXED);
	f->pool_over_cap = __atomic_load_n(&e->pool_over_cap, __ATOMIC_RELAXED);
	f->pool_full = __atomic_load_n(&e->pool_full, __ATOMIC_RELAXED);
	f->cleaned = __atomic_load_n(&e->cleaned, __ATOMIC_RELAXED);
	f->disk_failing = __atomic_load_n(&e->disk_failing, __ATOMIC_RELAXED) != 0;
	f->disk_failures = __atomic_load_n(&e->disk_failures, __ATOMIC_RELAXED);
	f->elide_refused_disk = __atomic_load_n(&e->elide_refused_disk, __ATOMIC_RELAXED);
	f->pool_persist_failed = e->pool ? ppl_pool_persist_failed(e->pool) : 0;
	f->ahead = __atomic_load_n(&e->ahead, __ATOMIC_RELAXED);
	f->pool_loaded_pages = e->pool_loaded_pages;
	f->pool_loaded_records = e->pool_loaded_records;
	f->copying = e->copying;
	f->logs_copied_in = e->logs_copied_in;
	f->superseded_writes = __atomic_load_n(&e->superseded_writes, __ATOMIC_RELAXED);
	f->spaces_dropped = __atomic_load_n(&e->spaces_dropped, __ATOMIC_RELAXED);
	pthread_mutex_lock(&e->missing_lock);
	f->spaces_missing = e->missing_n;
	pthread_mutex_unlock(&e->missing_lock);
	rcu_read_unlock();
	store_archive_figures(e, f);
}

struct ppl_node *ppl_store_node(struct ppl_store *e)
{
	return store_node_of(e);
}

struct ppl_pool *ppl_store_pool(struct ppl_store *e)
{
	return e->pool;
}

int ppl_store_format_pool(struct ppl_store *e, char *buf, size_t len)
{
	if (e->pool == NULL)
		return 0;
	struct ppl_pool_usage u;
	ppl_pool_usage(e->pool, &u);
	return snprintf(buf, len,
			"%" PRIu64 " page(s) kept unmaterialized, %" PRIu64 " of %" PRIu64 " blocks used, %"
			PRIu64 " record(s) appended, %" PRIu64 " page(s) over the cap kept with their records in the "
			"log, materialized over the cap %" PRIu64 ", when the pool was full %"
			PRIu64 ", a record too large for the pool %" PRIu64 ", by the cleaner %" PRIu64
			", put back at start %" PRIu64 " page(s)",
			u.pages, u.nblocks - u.free_blocks, u.nblocks,
			__atomic_load_n(&e->pool_records, __ATOMIC_RELAXED),
			__atomic_load_n(&e->spilled_kept, __ATOMIC_RELAXED),
			__atomic_load_n(&e->pool_over_cap, __ATOMIC_RELAXED),
			__atomic_load_n(&e->pool_full, __ATOMIC_RELAXED),
			__atomic_load_n(&e->pool_unfit, __ATOMIC_RELAXED),
			__atomic_load_n(&e->cleaned, __ATOMIC_RELAXED), e->pool_loaded_pages);
}

int ppl_store_format(struct ppl_store *e, char *buf, size_t len)
{
	int k = format_engine(e, buf, len);
	if (k < 0 || (size_t)k >= len)
		return k;
	int v = format_verify(e, buf + k, len - (size_t)k);
	if (v < 0 || (size_t)(k + v) >= len)
		return k + (v < 0 ? 0 : v);
	k += v;
	uint64_t waits = __atomic_load_n(&e->held_waits, __ATOMIC_RELAXED);
	if (waits) {
		v = snprintf(buf + k, len - (size_t)k, "; reads that waited for the log's tail after the restart %"
			     PRIu64 " (failed %" PRIu64 ")", waits,
			     __atomic_load_n(&e->held_timeouts, __ATOMIC_RELAXED));
		if (v < 0 || (size_t)(k + v) >= len)
			return k + (v < 0 ? 0 : v);
		k += v;
	}
	v = store_behind_format(e, buf + k, len - (size_t)k);
	if (v < 0 || (size_t)(k + v) >= len)
		return k + (v < 0 ? 0 : v);
	k += v;
	v = store_pmemlog_format(e, buf + k, len - (size_t)k);
	if (v < 0 || (size_t)(k + v) >= len)
		return k + (v < 0 ? 0 : v);
	k += v;
	return k + format_elision(e, buf + k, len - (size_t)k);
}
