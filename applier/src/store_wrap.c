/* The store's restart point and the log's wrap (DESIGN I3).
 *
 * MariaDB's log is circular: a log write at LSN l overwrites what was
 * written at l - capacity. The store keeps an elided page's records in
 * three places: the pmem pool (under the per-page cap), its data file
 * (materialized), or -- a page over its cap -- only the log, with a head
 * in the pool marking the page. The last is the cheap one: no data-file
 * write at every checkpoint, many of MariaDB's writes of a hot page
 * folded into one materialization. It holds only while the log still has
 * those records, so:
 *
 *   restart point R  the pool's durable LSN: the oldest record of a
 *                    marked page that is in neither pmem nor its file
 *                    (ppl_pool_oldest_dram_lsn), and never past the last
 *                    checkpoint the gate saw. A restart reads the log
 *                    from min(R, MariaDB's checkpoint), and below the
 *                    checkpoint only for the pages the pool holds
 *                    (ppl_node_only_below: for every other page the file
 *                    is authoritative there, I7).
 *   workers          materialize marked pages oldest first once R is more
 *                    than half the log behind the parse (store_keep_ahead).
 *   wrap guard       the last line: a log write that would overwrite LSNs
 *                    at or past R waits until the pages holding R back are
 *                    materialized; if one cannot be, the write fails
 *                    (MariaDB stops) rather than lose its records.
 *
 * So MariaDB's checkpoint write waits only for what is cheap (pool appends)
 * or rare (page 0, a full pool), and a log write waits only when the
 * workers fell a whole half log behind: the figures count both
 * (checkpoints held, log wraps held).
 *
 *   R <= last gated checkpoint <= parse        log written up to W:
 *   |---- marked pages' records (log only) ----|----- W - capacity < R */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <urcu-bp.h>

#include "ppl/crash.h"
#include "ppl/node.h"
#include "ppl/pool.h"
#include "ppl/redo.h"
#include "ppl/store.h"
#include "store_internal.h"

/* How far past the LSN a write would overwrite the guard settles, as a
 * share of the log: so that it does not run again at the next write. */
#define GUARD_SLACK_DIV 16

/* Materializes the marked (spilled) pages of part `part` of nparts (0:
 * all) whose records start below upto, oldest first. Returns how many
 * could not be written. */
static size_t settle_spilled(struct ppl_store *e, struct ppl_node *n, uint64_t upto, unsigned part,
			     unsigned nparts, size_t *done)
{
	struct ppl_pool_page_ref refs[256];
	size_t failed = 0;
	*done = 0;
	struct store_batch b;
	store_batch_init(&b, e, n);
	for (int round = 0; round < 4096 && !__atomic_load_n(&e->work_stop, __ATOMIC_RELAXED); round++) {
		size_t k = ppl_pool_oldest(e->pool, refs, sizeof(refs) / sizeof(refs[0])), tried = 0, before = *done;
		for (size_t i = 0; i < k; i++) {
			if (!refs[i].spilled || refs[i].first_lsn >= upto)
				break; /* spilled pages come first, oldest first */
			uint64_t key = (uint64_t)refs[i].space << 32 | refs[i].page_no;
			if (nparts && store_key_part(key, nparts) != part)
				continue;
			tried++;
			if (store_materialize_page(e, n, refs[i].space, refs[i].page_no, &b) == 0)
				(*done)++;
			else
				failed++;
		}
		failed += store_batch_flush(&b);
		b.failed = 0;
		if (tried == 0 || failed || *done == before)
			break; /* nothing left below upto, or no progress */
	}
	return failed;
}

int store_restart_advance(struct ppl_store *e, struct ppl_node *n, uint64_t ckpt)
{
	if (ckpt > __atomic_load_n(&e->gated_ckpt, __ATOMIC_RELAXED))
		__atomic_store_n(&e->gated_ckpt, ckpt, __ATOMIC_RELAXED);
	uint64_t old = ppl_pool_durable_lsn(e->pool), oldest = ppl_pool_oldest_dram_lsn(e->pool);
	if (oldest < old) {
		/* A page marked with records the restart point already passed
		 * (elided while the previous run's answers were unknown): it
		 * is written now, for R never moves back. */
		size_t done;
		if (settle_spilled(e, n, old, 0, 0, &done) != 0)
			return EIO;
		oldest = ppl_pool_oldest_dram_lsn(e->pool);
	}
	uint64_t r = __atomic_load_n(&e->gated_ckpt, __ATOMIC_RELAXED);
	if (oldest < r)
		r = oldest;
	if (r <= old)
		return 0;
	if (ppl_pool_set_durable_lsn(e->pool, r) != 0)
		return EIO;
	PPL_CRASH(RESTART_ADVANCED);
	return 0;
}

/* The LSN a log write at file offset off ends at, placed by the parse
 * point (ppl_redo_distance_at). 0 when it cannot tell. */
uint64_t store_log_write_end_lsn(struct ppl_node *n, uint64_t off, size_t len, uint64_t *cap)
{
	const struct ppl_redo_reader *r = ppl_node_reader(n);
	uint64_t parsed = ppl_node_parsed_lsn(n);
	*cap = r ? ppl_redo_capacity(r) : 0;
	if (*cap == 0 || parsed == 0)
		return 0;
	return parsed + (uint64_t)ppl_redo_distance_at(r, off, parsed) + len;
}

static int wrap_guard(struct ppl_store *e, uint64_t off, size_t len, bool drained)
{
	int rc = 0;
	rcu_read_lock();
	struct ppl_node *n = store_node_of(e);
	uint64_t cap = 0, end = n && !STOPPED(e) ? store_log_write_end_lsn(n, off, len, &cap) : 0;
	/* the common case, one load: the write stays short of the restart point */
	if (end > cap && end - cap > ppl_pool_durable_lsn(e->pool) && !drained && store_behind_on(e)) {
		/* with log writes waiting to be parsed (Ingest_Behind), the
		 * restart point lags them: parse them first, then look again */
		rcu_read_unlock();
		store_behind_drain(e);
		return wrap_guard(e, off, len, true);
	}
	if (end > cap && end - cap > ppl_pool_durable_lsn(e->pool)) {
		uint64_t over = end - cap, t0 = store_now_ns(e);
		size_t done = 0, failed = 0;
		pthread_mutex_lock(&e->gate_lock);
		rc = store_restart_advance(e, n, 0);
		if (rc == 0 && ppl_pool_oldest_dram_lsn(e->pool) < over) {
			failed = settle_spilled(e, n, over + cap / GUARD_SLACK_DIV, 0, 0, &done);
			if (store_restart_advance(e, n, 0) != 0 || ppl_pool_oldest_dram_lsn(e->pool) < over)
				rc = EIO;
			e->wrap_waits++;
			e->wrap_ns += store_now_ns(e) - t0;
			e->wrap_pages += done;
		}
		pthread_mutex_unlock(&e->gate_lock);
		if (rc)
			SLOG(e, PPL_LOG_CRIT, "PPL: %s: a log write up to LSN %" PRIu64 " is refused: it would overwrite "
				"records of elided pages kept nowhere else (from LSN %" PRIu64 "), and %zu of them could "
				"not be written to their files (see above); MariaDB stops on this error rather than lose "
				"them: find why the pages could not be written, then restart it", e->datadir, end,
				ppl_pool_oldest_dram_lsn(e->pool), failed);
		else if (done)
			SLOG(e, PPL_LOG_DEBUG, "PPL: %s: a log write up to LSN %" PRIu64 " waited for %zu page(s) to be "
				 "materialized before the log wrapped over their records", e->datadir, end, done);
	}
	rcu_read_unlock();
	return rc;
}

int store_wrap_guard(struct ppl_store *e, uint64_t off, size_t len)
{
	if (e->pool == NULL || e->pool_keeps_nothing || off < ppl_dialect_mariadb_10_8.area_start || len == 0)
		return 0;
	return wrap_guard(e, off, len, false);
}

void store_keep_ahead(struct ppl_store *e, struct ppl_node *n, unsigned idx)
{
	const struct ppl_redo_reader *r = ppl_node_reader(n);
	uint64_t cap = r ? ppl_redo_capacity(r) : 0, parsed = ppl_node_parsed_lsn(n);
	if (e->pool_keeps_nothing || cap == 0 || parsed <= cap / 2 ||
	    ppl_pool_oldest_dram_lsn(e->pool) >= parsed - cap / 2)
		return;
	size_t done;
	settle_spilled(e, n, parsed - cap / 2, idx, e->nworkers, &done);
	__atomic_add_fetch(&e->ahead, done, __ATOMIC_RELAXED);
	pthread_mutex_lock(&e->gate_lock);
	store_restart_advance(e, n, 0);
	pthread_mutex_unlock(&e->gate_lock);
}
