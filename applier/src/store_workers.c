/* Background apply (Apply_Threads): worker i settles the elided pages
 * whose key falls in part i ahead of MariaDB's checkpoints, and
 * materializes the pool's oldest pages of part i when its free blocks run
 * low.
 *
 * A file of its own because it is the store's own threads and their
 * schedule, and no rule: what they do to a page is store_gate.c's settle
 * and materialize, only earlier than a checkpoint would. */
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <urcu-bp.h>

#include "ppl/crash.h"
#include "ppl/node.h"
#include "ppl/pool.h"
#include "ppl/store.h"
#include "store_internal.h"

/* ---- background apply ----------------------------------------------------- */

struct worker {
	struct ppl_store *e;
	unsigned idx;
	uint64_t walked_lsn, walked_ns; /* the parse and the time at the last walk */
};

/* settle_ahead and store_keep_ahead walk every page the index (or the
 * pool) holds. Workers wake on every hot page queued and every page the
 * full pool turns away, many times a second under load, and a walk each
 * time cost a tenth of the storage node's CPU under TPC-C (perf, issue
 * 17). A page becomes due only as the parse moves on, so a wake that finds
 * the parse less than 1/64 of the log past the last walk skips them: the
 * half-the-log lag they keep slips by at most that much, or for at most
 * a second. */
static bool walk_due(struct worker *w, struct ppl_node *n)
{
	struct ppl_store *e = w->e;
	uint64_t parsed = ppl_node_parsed_lsn(n), now = store_now_ns(e);
	if (parsed < w->walked_lsn + e->log_capacity / 64 && now < w->walked_ns + 1000000000ull)
		return false;
	w->walked_lsn = parsed;
	w->walked_ns = now;
	return true;
}

/* Pool below its low-water mark: materialize its oldest pages (this
 * worker's share) until the high-water mark is reached, checked page by
 * page: every page materialized is a data-file write the pool was there
 * to save. */
static void clean_pool(struct ppl_store *e, struct ppl_node *n, unsigned idx)
{
	struct ppl_pool_page_ref refs[256];
	struct ppl_pool_usage u;
	ppl_pool_usage(e->pool, &u);
	if (!u.needs_cleaning)
		return;
	PPL_CRASH(CLEANER_PASS);
	unsigned long done = 0;
	struct store_batch b;
	store_batch_init(&b, e, n);
	for (int round = 0; round < 64 && !u.cleaned_enough && !__atomic_load_n(&e->work_stop, __ATOMIC_RELAXED);
	     round++) {
		size_t k = ppl_pool_oldest(e->pool, refs, sizeof(refs) / sizeof(refs[0])), mine = 0;
		for (size_t i = 0; i < k; i++) {
			uint64_t key = (uint64_t)refs[i].space << 32 | refs[i].page_no;
			if (store_key_part(key, e->nworkers) != idx)
				continue;
			mine++;
			if (store_materialize_page(e, n, refs[i].space, refs[i].page_no, &b) == 0)
				done++;
			if (b.npages == 0) /* flushed: what it freed shows */
				ppl_pool_usage(e->pool, &u);
			if (u.cleaned_enough)
				break;
		}
		store_batch_flush(&b); /* ppl_pool_oldest lists the pages again until then */
		ppl_pool_usage(e->pool, &u);
		if (mine == 0)
			break;
	}
	store_batch_flush(&b);
	done = done > b.failed ? done - b.failed : 0; /* written, but their files could not be synced */
	__atomic_add_fetch(&e->cleaned, done, __ATOMIC_RELAXED);
	if (done)
		SLOG(e, PPL_LOG_DEBUG, "PPL: %s: pool cleaner materialized %lu page(s); %" PRIu64 " of %" PRIu64
			 " blocks free", e->datadir, done, u.free_blocks, u.nblocks);
}

/* Elided pages whose first record is older than half the log behind the
 * parse: settle them now, so that MariaDB's checkpoint does not wait for
 * them (seed 001's background apply, partitioned by page). */
static void settle_ahead(struct ppl_store *e, struct ppl_node *n, unsigned idx)
{
	uint64_t parsed = ppl_node_parsed_lsn(n), lag = e->log_capacity / 2;
	if (lag == 0 || parsed <= lag)
		return;
	struct due d = { .e = e, .upto = parsed - lag, .part = idx, .nparts = e->nworkers };
	ppl_node_for_each_page(n, store_collect_due, &d);
	if (d.l.n)
		PPL_CRASH(SETTLE_AHEAD);
	struct store_batch b;
	store_batch_init(&b, e, n);
	size_t done = 0;
	for (size_t i = 0; i < d.l.n && !__atomic_load_n(&e->work_stop, __ATOMIC_RELAXED); i++)
		if (store_settle_page(e, n, (uint32_t)(d.l.keys[i] >> 32), (uint32_t)d.l.keys[i], &b) == 0)
			done++;
	size_t failed = store_batch_flush(&b);
	__atomic_add_fetch(&e->ahead, done > failed ? done - failed : 0, __ATOMIC_RELAXED);
	free(d.l.keys);
}

void store_note_hot(struct ppl_store *e, uint32_t space, uint32_t page_no)
{
	uint64_t key = (uint64_t)space << 32 | page_no;
	if (__atomic_load_n(&e->nstarted, __ATOMIC_RELAXED) == 0 || !store_elided_has(e, key))
		return; /* MariaDB's own write is its base */
	pthread_mutex_lock(&e->hot_lock);
	bool queued = false;
	for (size_t i = 0; i < e->hot_n && !queued; i++)
		queued = e->hot[i] == key;
	if (!queued && e->hot_n < sizeof(e->hot) / sizeof(e->hot[0]))
		e->hot[e->hot_n++] = key;
	pthread_mutex_unlock(&e->hot_lock);
	if (!queued)
		pthread_cond_broadcast(&e->work_cond);
}

/* Hot pages (store_note_hot) of this worker's part written into their
 * files: a read found them rebuilt from a long history, and every read
 * until their next materialization would apply it again. */
static void settle_hot(struct ppl_store *e, struct ppl_node *n, unsigned idx)
{
	uint64_t mine[64];
	size_t k = 0;
	pthread_mutex_lock(&e->hot_lock);
	for (size_t i = 0; i < e->hot_n;) {
		if (store_key_part(e->hot[i], e->nworkers) == idx) {
			mine[k++] = e->hot[i];
			e->hot[i] = e->hot[--e->hot_n];
		} else {
			i++;
		}
	}
	pthread_mutex_unlock(&e->hot_lock);
	if (k == 0)
		return;
	struct store_batch b;
	store_batch_init(&b, e, n);
	size_t done = 0;
	for (size_t i = 0; i < k && !__atomic_load_n(&e->work_stop, __ATOMIC_RELAXED); i++)
		if (store_materialize_page(e, n, (uint32_t)(mine[i] >> 32), (uint32_t)mine[i], &b) == 0)
			done++;
	size_t failed = store_batch_flush(&b);
	__atomic_add_fetch(&e->hot_settled, done > failed ? done - failed : 0, __ATOMIC_RELAXED);
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	struct ppl_store *e = w->e;
	char name[16];
	snprintf(name, sizeof(name), "ppl_apply%u", w->idx);
	if (e->env.thread_started)
		e->env.thread_started(e->env.thread_arg, name);
	pthread_mutex_lock(&e->work_lock);
	while (!e->work_stop) {
		struct timespec t;
		clock_gettime(CLOCK_REALTIME, &t);
		t.tv_sec += 1;
		pthread_cond_timedwait(&e->work_cond, &e->work_lock, &t);
		if (e->work_stop)
			break;
		pthread_mutex_unlock(&e->work_lock);
		rcu_read_lock();
		struct ppl_node *n = store_node_of(e);
		if (n != NULL && !STOPPED(e)) {
			settle_hot(e, n, w->idx);
			clean_pool(e, n, w->idx);
			if (walk_due(w, n)) {
				settle_ahead(e, n, w->idx);
				store_keep_ahead(e, n, w->idx);
			}
			if (w->idx == 0) {
				store_marker_follow(e);
				store_disk_probe(e, n);
			}
		}
		rcu_read_unlock();
		pthread_mutex_lock(&e->work_lock);
	}
	pthread_mutex_unlock(&e->work_lock);
	free(w);
	return NULL;
}

void store_start_workers(struct ppl_store *e, unsigned count)
{
	/* what store_key_part() divides by: fixed before any worker runs (config
	 * caps Apply_Threads at the array's size) */
	e->nworkers = count;
	for (unsigned i = 0; i < count; i++) {
		struct worker *w = malloc(sizeof(*w));
		if (w == NULL) {
			e->nworkers = i;
			break;
		}
		*w = (struct worker){ .e = e, .idx = i };
		int rc = pthread_create(&e->workers[i], NULL, worker_main, w);
		if (rc != 0) {
			free(w);
			SLOG(e, PPL_LOG_CRIT, "PPL: %s: apply thread %u could not start (%s); pages are still "
				"settled at MariaDB's checkpoints", e->exportdir, i, strerror(rc));
			e->nworkers = i;
			break;
		}
		__atomic_add_fetch(&e->nstarted, 1, __ATOMIC_RELAXED);
	}
}

void store_stop_workers(struct ppl_store *e)
{
	pthread_mutex_lock(&e->work_lock);
	__atomic_store_n(&e->work_stop, true, __ATOMIC_RELAXED);
	pthread_cond_broadcast(&e->work_cond);
	pthread_mutex_unlock(&e->work_lock);
	for (unsigned i = 0; i < e->nstarted; i++)
		pthread_join(e->workers[i], NULL);
	__atomic_store_n(&e->nstarted, 0, __ATOMIC_RELAXED);
}
