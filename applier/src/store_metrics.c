/* The store's figures (ppl_store_figures) as OpenMetrics text, for the
 * metrics endpoint (metrics_http.c, Metrics_Port) and `ppl-inspect live
 * POOL metrics` (the control socket), which serve the same text: one
 * scrape answers both, and node_exporter's textfile collector takes the
 * latter's output as it is.
 *
 * Names follow Prometheus' conventions: "ppl_" first, the unit in the
 * name (_bytes, _seconds), counters end in _total, one family per figure
 * with a label where the figure has kinds (verdict, result). The figures
 * of the store's parts that are off (elision, pool) are left out rather
 * than shown as zeros: a pool with 0 blocks free reads as a full one.
 * Counters start at zero with the storage node; the index's (ingest,
 * records) also when MariaDB's log is replaced, which Prometheus' rate()
 * takes as a reset. */
#include <inttypes.h>
#include <stdio.h>

#include "ppl/elision_proto.h"
#include "ppl/openmetrics.h"
#include "ppl/store.h"

char *ppl_store_metrics(struct ppl_store *e)
{
	struct ppl_store_figures f;
	struct ppl_om m;
	ppl_store_figures(e, &f);
	if (ppl_om_open(&m) != 0)
		return NULL;

	ppl_om_family(&m, "ppl_store", "info", NULL, "The export's store: the datadir whose log it follows");
	ppl_om_sample(&m, "ppl_store_info", "datadir", f.datadir ? f.datadir : "", 1);

	/* ingest: the redo log followed */
	ppl_om_gauge(&m, "ppl_ingest_running", NULL,
		     "1 while the redo log is parsed as MariaDB writes it; 0 before its checkpoint is found, "
		     "while a log is copied in, or after ingest stopped", f.started && !f.stopped);
	ppl_om_gauge(&m, "ppl_ingest_stopped", NULL,
		     "1 when the log could not be parsed and ingest stopped (pages are then served as their "
		     "files hold them; the storage node's log says why)", f.stopped);
	ppl_om_counter(&m, "ppl_ingest_bytes", "bytes", "Redo log bytes fed to the parser", f.node.log_bytes);
	ppl_om_gauge(&m, "ppl_ingest_lag_bytes", "bytes",
		     "Redo log bytes received and not parsed yet: known final past the parse point (a stall), "
		     "or written beyond a gap (NFS writes out of order)",
		     f.node.unparsed_bytes);
	ppl_om_gauge(&m, "ppl_ingest_parsed_lsn", NULL, "The LSN the redo log is parsed up to", f.parsed_lsn);
	ppl_om_counter(&m, "ppl_ingest_mtrs", NULL, "Mini-transactions parsed", f.node.mtrs);
	ppl_om_counter(&m, "ppl_ingest_records", NULL, "Redo records parsed", f.node.records);
	ppl_om_gauge(&m, "ppl_pages_pending", NULL, "Pages with redo records the store holds for them",
		     f.node.pages_indexed);
	ppl_om_gauge(&m, "ppl_spaces_missing", NULL,
		     "Spaces whose file vanished unannounced while the store keeps pages of them (checkpoints "
		     "that need them are refused: see `ppl-inspect live POOL forget-space`)", f.spaces_missing);

	/* reads rebuilt */
	ppl_om_counter(&m, "ppl_page_reads", NULL, "Reads of page files the store looked at", f.reads);
	ppl_om_counter(&m, "ppl_pages_rebuilt", NULL, "Pages served rebuilt from their file and the log",
		       f.pages_rebuilt);
	ppl_om_counter(&m, "ppl_rebuild_failures", NULL,
		       "Pages that could not be rebuilt (the READ failed rather than serve a wrong page)",
		       f.rebuild_failures);
	uint64_t counts[PPL_LATENCY_BOUNDS + 1];
	for (unsigned i = 0; i <= PPL_LATENCY_BOUNDS; i++)
		counts[i] = f.rebuild_latency.n[i];
	ppl_om_histogram_ns(&m, "ppl_rebuild_latency_seconds",
			    "Time to serve one page rebuilt for a read (applying its records, or the cache)",
			    ppl_latency_bounds_ns, counts, PPL_LATENCY_BOUNDS, f.rebuild_latency.sum_ns);
	ppl_om_counter(&m, "ppl_page_cache_hits", NULL, "Rebuilt pages served from the page cache", f.cache.hits);
	ppl_om_counter(&m, "ppl_page_cache_misses", NULL, "Rebuilt pages the page cache did not hold",
		       f.cache.misses);
	ppl_om_counter(&m, "ppl_page_writes_bases", NULL, "Page writes taken as the pages' new bases",
		       f.pages_written);

	/* verify mode (Verify = true) */
	ppl_om_gauge(&m, "ppl_verify_enabled", NULL, "1 when page writes are compared with the rebuild", f.verify);
	ppl_om_family(&m, "ppl_verify_pages", "counter", NULL,
		      "Page writes compared with the rebuild, by result; result=\"diverged\" counts the "
		      "divergences (I4: each is logged, and is a bug to report)");
	ppl_om_sample(&m, "ppl_verify_pages_total", "result", "identical", f.verify_same);
	ppl_om_sample(&m, "ppl_verify_pages_total", "result", "diverged", f.verify_diverged);
	ppl_om_sample(&m, "ppl_verify_pages_total", "result", "not_comparable", f.verify_skipped);
	ppl_om_family(&m, "ppl_verify_not_comparable", "counter", NULL,
		      "Page writes verify mode did not compare, by cause; log_behind, records_short, "
		      "records_gone and no_base are unexplained (a page written before its log, or records "
		      "the index lost)");
	for (unsigned i = 1; i < PPL_VERIFY_SKIP_COUNT; i++)
		ppl_om_sample(&m, "ppl_verify_not_comparable_total", "cause",
			      ppl_verify_skip_name((enum ppl_verify_skip)i), f.verify_skip[i]);

	if (f.elision) {
		ppl_om_counter(&m, "ppl_elision_requests", NULL, "Elision questions asked by libcatcher",
			       f.service.requests);
		ppl_om_family(&m, "ppl_elision_answers", "counter", NULL,
			      "Elision answers by verdict: ack (the write may be dropped) or the reason for no");
		for (unsigned i = 0; i < PPL_ELIDE_REASON_COUNT; i++)
			ppl_om_sample(&m, "ppl_elision_answers_total", "verdict", ppl_elide_reason_name(i),
				      f.service.verdicts[i]);
		ppl_om_counter(&m, "ppl_elision_connections", NULL, "Elision connections accepted and greeted",
			       f.service.connections);
		ppl_om_counter(&m, "ppl_elision_clients_refused", NULL,
			       "Elision connections refused (address not allowed, bad hello or token, busy)",
			       f.service.refused_address + f.service.refused_hello);
		ppl_om_counter(&m, "ppl_elision_protocol_errors", NULL, "Malformed elision frames",
			       f.service.protocol_errors);
		ppl_om_counter(&m, "ppl_elision_idle_clients_closed", NULL,
			       "Idle elision connections closed to admit a new client when every slot was taken",
			       f.service.idle_evicted);
		ppl_om_counter(&m, "ppl_materializations", NULL,
			       "Elided pages written into their data files (through a doublewrite slot)", f.materialized);
		ppl_om_counter(&m, "ppl_checkpoint_gate_waits", NULL,
			       "MariaDB checkpoint writes held while elided pages below them were settled (I3)",
			       f.checkpoints_held);
		ppl_om_counter_seconds(&m, "ppl_checkpoint_gate_wait_seconds",
				       "Time MariaDB checkpoint writes were held by the gate", f.checkpoint_wait_ns);
		ppl_om_counter(&m, "ppl_hot_pages_settled", NULL,
			       "Elided pages written into their files because a read rebuilt them from a long history",
			       f.hot_settled);
		ppl_om_counter(&m, "ppl_log_wrap_waits", NULL,
			       "MariaDB log writes held until elided pages whose records they would overwrite were "
			       "materialized (I3)", f.log_wraps_held);
		ppl_om_counter_seconds(&m, "ppl_log_wrap_wait_seconds",
				       "Time MariaDB log writes were held by the wrap guard", f.log_wrap_wait_ns);
		if (f.log_on_pmem) {
			ppl_om_counter(&m, "ppl_log_pmem_writes", NULL,
				       "Log writes answered once durable in the pool's log area (Log_On_Pmem)",
				       f.pmem_log_writes);
			ppl_om_counter(&m, "ppl_log_pmem_synced_in_reply", NULL,
				       "Log writes synced in their replies instead (log area full or write too large)",
				       f.pmem_log_fallbacks);
			ppl_om_counter(&m, "ppl_log_pmem_sync_failures", NULL,
				       "Syncs of the log file behind the replies that failed", f.pmem_log_sync_failures);
			ppl_om_gauge(&m, "ppl_log_pmem_area_used_bytes", NULL,
				     "Bytes of the pool's log area holding writes not yet synced into the log file",
				     f.pmem_log_used);
		}
		if (f.ingest_behind) {
			ppl_om_gauge(&m, "ppl_ingest_behind_bytes", NULL,
				     "Log bytes answered and waiting to be parsed (Ingest_Behind)", f.behind_bytes);
			ppl_om_counter(&m, "ppl_ingest_behind_waits", NULL,
				       "Log writes that waited for room in the ingest queue", f.behind_waits);
			ppl_om_counter_seconds(&m, "ppl_ingest_behind_wait_seconds",
					       "Time log writes waited for room in the ingest queue", f.behind_wait_ns);
		}
		ppl_om_gauge(&m, "ppl_disk_failing", NULL,
			     "1 while the data files' disk fails materializations: no page is elided", f.disk_failing);
		ppl_om_counter(&m, "ppl_disk_failures", NULL,
			       "Reads, writes and syncs of materializations that failed", f.disk_failures);
		ppl_om_counter(&m, "ppl_elision_refused_disk_failing", NULL,
			       "Elision questions refused because the disk was failing", f.elide_refused_disk);
	}
	if (f.pool) {
		ppl_om_gauge(&m, "ppl_pool_blocks_used", NULL, "Blocks of the per-page log pool in use",
			     f.pool_usage.nblocks - f.pool_usage.free_blocks);
		ppl_om_gauge(&m, "ppl_pool_blocks_free", NULL, "Blocks of the per-page log pool free",
			     f.pool_usage.free_blocks);
		ppl_om_gauge(&m, "ppl_pool_persist_failed", NULL,
			     "1 once the pool file's msync failed: nothing is elided or kept in it until a restart",
			     f.pool_persist_failed != 0);
		ppl_om_gauge(&m, "ppl_pool_pages", NULL, "Pages whose records the pool keeps (unmaterialized)",
			     f.pool_usage.pages);
		ppl_om_gauge(&m, "ppl_pool_durable_lsn", NULL, "The LSN the pool's records are durable up to",
			     f.pool_durable_lsn);
		ppl_om_counter(&m, "ppl_pool_records_appended", NULL, "Records appended to the pool", f.pool_records);
		ppl_om_counter(&m, "ppl_pool_spilled_kept", NULL,
			       "Elided pages over their cap kept marked in the pool, their records in the log",
			       f.pool_spilled_kept);
		ppl_om_family(&m, "ppl_pool_materializations", "counter", NULL,
			      "Pages materialized instead of kept in the pool, by cause (a part of "
			      "ppl_materializations_total)");
		ppl_om_sample(&m, "ppl_pool_materializations_total", "cause", "over_cap", f.pool_over_cap);
		ppl_om_sample(&m, "ppl_pool_materializations_total", "cause", "pool_full", f.pool_full);
		ppl_om_sample(&m, "ppl_pool_materializations_total", "cause", "cleaner", f.cleaned);
	}
	if (f.archive) {
		ppl_om_gauge(&m, "ppl_archive_end_lsn", NULL, "LSN the log archive holds mini-transactions up to",
			     f.archive_end_lsn);
		ppl_om_gauge(&m, "ppl_archive_durable_lsn", NULL, "LSN the log archive holds durably up to",
			     f.archive_durable_lsn);
		ppl_om_gauge(&m, "ppl_archive_bytes", NULL, "Bytes of the log archive's segment files", f.archive_bytes);
		ppl_om_gauge(&m, "ppl_archive_waiting_bytes", NULL,
			     "Archive records in memory, waiting for MariaDB's log to be durable or for a flush",
			     f.archive_buffered);
		ppl_om_counter(&m, "ppl_archive_flush_failures", NULL, "Flushes of the log archive that failed",
			       f.archive_flush_failures);
		ppl_om_gauge(&m, "ppl_archive_stopped", NULL,
			     "1 once archiving stopped for good (the CRIT line says why and from which LSN)",
			     f.archive_broken);
	}
	return ppl_om_close(&m);
}
