/* Ingest_Behind: MariaDB's log WRITEs answered once their bytes are in the
 * log file, and parsed behind the reply on a thread of the store's own.
 *
 * Why: parsing and indexing a log write costs more than writing it
 * (BENCHMARKS.md, issue 5), and every commit waits for its log write's
 * reply. Invariant I2 asks that log bytes be durable before the reply and
 * parsed before anything that depends on them is answered -- not that the
 * parse happen inside the reply.
 *
 * How: ppl_store_log_write copies the write into a queue (the bytes are
 * already in the file: a crash loses only the parse, which the next start
 * redoes from the file) and returns; the ingest thread takes the writes in
 * the order they came (log writes are ordered by order_lock from begin to
 * end) and ingests each exactly as the synchronous path does
 * (store_log_ingest). Everything that needs the log parsed up to where
 * MariaDB's writes had reached waits for the queue first
 * (store_behind_drain): an elision question at an LSN not parsed yet, a
 * page write (MariaDB writes a page only after the log up to its LSN:
 * WAL), the checkpoint gate, the log-wrap guard's slow path, the
 * archive's guard, the log replaced or removed, a file removed. It waits
 * on a condition the ingest thread signals after each write, never on a
 * poll, and never inside an RCU read section: the ingest thread may wait
 * for a grace period (a detach frees the old node).
 *
 * Memory is bounded: past BEHIND_MAX_BYTES waiting, a log write waits for
 * the thread (counted: behind_waits). When a copy cannot be allocated the
 * write is ingested in its place, after the queue is empty, under q_lock
 * (no later write can overtake it).
 *
 * The archive's durability marks (ppl_store_log_mark/_synced) count
 * writes here instead of LSNs: a COMMIT of the log file says that every
 * write handed over before it is durable, and the LSN that amounts to is
 * known only once the thread has parsed them (q_parsed_at).
 *
 * A page read does not wait. A page is served rebuilt only when it was
 * elided (its elision waited for the log up to its LSN, and MariaDB
 * cannot read it back before it writes or elides any newer version,
 * which waits in turn) or when its records are in the log's tail held at
 * a restart (which has its own wait, store_ingest.c); every other page is
 * served as its file holds it.
 *
 * The thread does not need the pool: an export with Ingest_Behind and no
 * elision (verify mode, the archive) parses behind its replies too
 * (ppl_store_start_ingest_behind). */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <urcu-bp.h>

#include "ppl/store.h"
#include "store_internal.h"

#define BEHIND_MAX_BYTES (64u << 20)

/* What the ingest thread itself calls never waits for the queue (it
 * would wait for itself). */
static _Thread_local bool on_ingest_thread;
/* When the write being ingested arrived (the wall clock; 0: none) */
static _Thread_local uint64_t arrived_ns;

struct log_job {
	struct log_job *next;
	uint64_t fileid, off;
	uint64_t arrived_ns;  /* the archive stamps its mtrs with this, not the parse's time */
	size_t len;
	uint8_t data[];
};

uint64_t store_behind_arrival_ns(void)
{
	return arrived_ns;
}

/* After job k is ingested: the log is parsed to here. A synced mark of k
 * makes that LSN durable for the archive. Under q_lock. */
static void note_parsed(struct ppl_store *e, uint64_t k)
{
	rcu_read_lock();
	struct ppl_node *n = store_node_of(e);
	uint64_t parsed = n ? ppl_node_parsed_lsn(n) : 0;
	rcu_read_unlock();
	e->q_parsed_at[k % BEHIND_MARKS] = parsed;
	if (e->q_synced >= k)
		store_log_durable_to(e, parsed);
}

static void *behind_main(void *arg)
{
	struct ppl_store *e = arg;
	if (e->env.thread_started)
		e->env.thread_started(e->env.thread_arg, "ppl_ingest");
	on_ingest_thread = true;
	pthread_mutex_lock(&e->q_lock);
	for (;;) {
		while (e->q_head == NULL && !e->q_stop)
			pthread_cond_wait(&e->q_work, &e->q_lock);
		if (e->q_head == NULL)
			break;
		struct log_job *j = e->q_head;
		pthread_mutex_unlock(&e->q_lock);
		struct iovec iov = {j->data, j->len};
		arrived_ns = j->arrived_ns;
		store_log_ingest(e, j->fileid, j->off, &iov, 1, j->len);
		arrived_ns = 0;
		pthread_mutex_lock(&e->q_lock);
		e->q_head = j->next;
		if (e->q_head == NULL)
			e->q_tail = NULL;
		e->q_bytes -= j->len;
		e->q_out++;
		note_parsed(e, e->q_out);
		pthread_cond_broadcast(&e->q_done);
		free(j);
	}
	pthread_mutex_unlock(&e->q_lock);
	return NULL;
}

int ppl_store_start_ingest_behind(struct ppl_store *e, const struct ppl_config *c, char *err, size_t errlen)
{
	if (!c->ingest_behind || store_behind_on(e))
		return 0;
	pthread_mutex_lock(&e->q_lock);
	e->q_stop = false;
	int rc = pthread_create(&e->q_thread, NULL, behind_main, e);
	__atomic_store_n(&e->behind, rc == 0, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&e->q_lock);
	if (rc != 0)
		snprintf(err, errlen, "Ingest_Behind: cannot start the ingest thread: %s", strerror(rc));
	return rc == 0 ? 0 : -1;
}

void store_behind_stop(struct ppl_store *e)
{
	pthread_mutex_lock(&e->q_lock);
	bool running = e->behind;
	e->q_stop = true;
	pthread_cond_broadcast(&e->q_work);
	pthread_mutex_unlock(&e->q_lock);
	if (running)
		pthread_join(e->q_thread, NULL); /* it ingests what is queued before it ends */
	pthread_mutex_lock(&e->q_lock);
	__atomic_store_n(&e->behind, false, __ATOMIC_RELEASE);
	pthread_cond_broadcast(&e->q_done); /* a drain waiting now returns */
	pthread_mutex_unlock(&e->q_lock);
}

bool store_behind_on(struct ppl_store *e)
{
	return __atomic_load_n(&e->behind, __ATOMIC_ACQUIRE);
}

int store_behind_enqueue(struct ppl_store *e, uint64_t fileid, uint64_t off, const struct iovec *iov, int iovcnt,
			 size_t len)
{
	/* the copy is made before the lock: the ingest thread takes q_lock
	 * after every write it parses */
	struct log_job *j = malloc(sizeof *j + len);
	if (j != NULL) {
		j->next = NULL;
		j->fileid = fileid;
		j->off = off;
		j->arrived_ns = store_wall_ns();
		size_t at = 0;
		for (int i = 0; i < iovcnt && at < len; i++) {
			size_t n = iov[i].iov_len < len - at ? iov[i].iov_len : len - at;
			memcpy(j->data + at, iov[i].iov_base, n);
			at += n;
		}
		j->len = at;
	}
	pthread_mutex_lock(&e->q_lock);
	if (j == NULL || e->q_stop) {
		/* no copy, or the thread is ending: ingest it here, once the
		 * writes before it are */
		while (e->q_head != NULL)
			pthread_cond_wait(&e->q_done, &e->q_lock);
		if (j == NULL)
			e->behind_inline++; /* counted for want of memory only, as the figures say */
		free(j);
		store_log_ingest(e, fileid, off, iov, iovcnt, len);
		e->q_in++;
		e->q_out++;
		note_parsed(e, e->q_out);
		pthread_cond_broadcast(&e->q_done);
		pthread_mutex_unlock(&e->q_lock);
		return 0;
	}
	/* a lag past half the log would make the write offsets' LSNs
	 * ambiguous (ppl_redo_distance_at): an eighth at most */
	uint64_t cap = __atomic_load_n(&e->log_capacity, __ATOMIC_RELAXED);
	uint64_t max = cap && cap / 8 < BEHIND_MAX_BYTES ? cap / 8 : BEHIND_MAX_BYTES;
	if (e->q_bytes + j->len > max && e->q_head != NULL) {
		uint64_t t0 = store_now_ns(e);
		e->behind_waits++;
		while (e->q_bytes + j->len > max && e->q_head != NULL)
			pthread_cond_wait(&e->q_done, &e->q_lock);
		e->behind_wait_ns += store_now_ns(e) - t0;
	}
	if (e->q_tail)
		e->q_tail->next = j;
	else
		e->q_head = j;
	e->q_tail = j;
	e->q_bytes += j->len;
	e->q_in++;
	if (e->q_bytes > e->behind_max_bytes)
		e->behind_max_bytes = e->q_bytes;
	pthread_cond_signal(&e->q_work);
	pthread_mutex_unlock(&e->q_lock);
	return 0;
}

void store_behind_drain(struct ppl_store *e)
{
	if (!store_behind_on(e) || on_ingest_thread)
		return;
	pthread_mutex_lock(&e->q_lock);
	uint64_t upto = e->q_in;
	while (e->q_out < upto && e->behind)
		pthread_cond_wait(&e->q_done, &e->q_lock);
	pthread_mutex_unlock(&e->q_lock);
}

void store_behind_drain_to(struct ppl_store *e, uint64_t lsn)
{
	if (!store_behind_on(e) || on_ingest_thread)
		return;
	rcu_read_lock();
	struct ppl_node *n = store_node_of(e);
	bool behind = n == NULL || ppl_node_parsed_lsn(n) < lsn;
	rcu_read_unlock();
	if (behind)
		store_behind_drain(e);
}

void ppl_store_log_drain(struct ppl_store *e)
{
	store_behind_drain(e);
}

uint64_t store_behind_mark(struct ppl_store *e)
{
	pthread_mutex_lock(&e->q_lock);
	uint64_t k = e->q_in;
	pthread_mutex_unlock(&e->q_lock);
	return k;
}

void store_behind_synced(struct ppl_store *e, uint64_t k)
{
	pthread_mutex_lock(&e->q_lock);
	if (k > e->q_out) {
		if (k > e->q_synced)
			e->q_synced = k; /* the thread applies it when it gets there */
	} else if (e->q_out - k < BEHIND_MARKS) {
		store_log_durable_to(e, e->q_parsed_at[k % BEHIND_MARKS]);
	}
	/* else: a mark so old that later syncs have said more */
	pthread_mutex_unlock(&e->q_lock);
}

void store_behind_figures(struct ppl_store *e, struct ppl_store_figures *f)
{
	pthread_mutex_lock(&e->q_lock);
	f->ingest_behind = e->behind;
	f->behind_writes = e->q_in - e->q_out;
	f->behind_bytes = e->q_bytes;
	f->behind_max_bytes = e->behind_max_bytes;
	f->behind_waits = e->behind_waits;
	f->behind_wait_ns = e->behind_wait_ns;
	f->behind_inline = e->behind_inline;
	pthread_mutex_unlock(&e->q_lock);
}

int store_behind_format(struct ppl_store *e, char *buf, size_t len)
{
	struct ppl_store_figures f;
	store_behind_figures(e, &f);
	if (!f.ingest_behind)
		return 0;
	return snprintf(buf, len, "; ingest behind the replies: %" PRIu64 " write(s) of %" PRIu64 " B waiting (at "
			"most %" PRIu64 " B), %" PRIu64 " write(s) waited for room (%.3f s), %" PRIu64 " parsed in "
			"place for want of memory", f.behind_writes, f.behind_bytes, f.behind_max_bytes, f.behind_waits,
			(double)f.behind_wait_ns / 1e9, f.behind_inline);
}
