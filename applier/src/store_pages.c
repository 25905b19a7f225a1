/* The store's page I/O: a read of a page file served rebuilt from the
 * file and the log where the page may have been elided (I7), a page write
 * taken as its page's new base, a write over part of a page leaving the
 * page to its file, an old page replayed by a client kept out of its file
 * after a restart, and verify mode comparing page writes with rebuilds
 * (I4). Also the stripes that keep MariaDB's I/O of a page and the store's
 * materialization of it apart, and the brackets the host puts around every
 * write and read (ppl_store_write_begin/_end, _read_begin/_end).
 *
 * A file of its own because it is the path of every READ and WRITE of a
 * data file: it asks the elided set and the gate (store_gate.c) what a page
 * is owed, and does not decide it. */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <urcu-bp.h>

#include "ppl/crash.h"
#include "ppl/datadir.h"
#include "ppl/histogram.h"
#include "ppl/node.h"
#include "ppl/page.h"
#include "ppl/page_cache.h"
#include "ppl/pool.h"
#include "ppl/store.h"
#include "store_internal.h"

/* ---- pages ------------------------------------------------------------------ */

/* Copies len bytes at byte position pos of the iovec into/out of buf. */
void store_iov_copy(struct iovec *iov, int iovcnt, size_t pos, uint8_t *buf, size_t len, bool out)
{
	for (int i = 0; i < iovcnt && len; i++) {
		if (pos >= iov[i].iov_len) {
			pos -= iov[i].iov_len;
			continue;
		}
		size_t n = iov[i].iov_len - pos < len ? iov[i].iov_len - pos : len;
		if (out)
			memcpy(buf, (uint8_t *)iov[i].iov_base + pos, n);
		else
			memcpy((uint8_t *)iov[i].iov_base + pos, buf, n);
		buf += n;
		len -= n;
		pos = 0;
	}
}

/* Whether len bytes at pos of the request are all zeros; read in place,
 * and a real page stops the scan within its first bytes. */
static bool iov_zero(const struct iovec *iov, int iovcnt, size_t pos, size_t len)
{
	for (int i = 0; i < iovcnt && len; i++) {
		if (pos >= iov[i].iov_len) {
			pos -= iov[i].iov_len;
			continue;
		}
		size_t n = iov[i].iov_len - pos < len ? iov[i].iov_len - pos : len;
		if (!ppl_page_all_zero((const uint8_t *)iov[i].iov_base + pos, n))
			return false;
		len -= n;
		pos = 0;
	}
	return true;
}

/* The space a page belongs to: its header says, or (a page never written)
 * what the file's other pages said. */
static bool page_space(struct ppl_store *e, uint64_t fileid, const uint8_t *page, uint32_t page_no,
		       uint32_t *space)
{
	if (ppl_page_no(page) == page_no && !ppl_page_all_zero(page, e->page_size)) {
		*space = ppl_page_space(page);
		/* A page file copied under another name (a backup, the
		 * .ibd copied for IMPORT TABLESPACE) carries its space's
		 * pages; they are not that space's pages while the space's
		 * own file is elsewhere: no base, no binding (I7). */
		uint32_t known;
		if (store_map_get(e, fileid, &known) && known == *space)
			return true; /* the usual case, without a look at the datadir */
		uint64_t ino;
		if (store_space_file_ino(e, *space, &ino) && ino != fileid)
			return false;
		store_map_set(e, fileid, *space);
		return true;
	}
	/* else what its other pages said, or (a file none of whose pages
	 * reached the disk yet) what the log named it */
	if (!store_file_space(e, fileid, space))
		return false;
	store_map_set(e, fileid, *space);
	return true;
}

enum ppl_apply_status store_rebuild(struct ppl_store *e, struct ppl_node *n, uint32_t space, uint32_t page_no,
				    const struct ppl_node_page_info *info, uint8_t *frame, uint8_t **spare, bool *changed,
				    unsigned *applied, struct ppl_apply_error *err)
{
	size_t ps = e->page_size;
	/* a page this base rebuilt before, older: only the records after it
	 * are applied; should that fail, the base decides */
	uint32_t base_sum;
	uint64_t base = ppl_node_base_key(info->from_init, info->init_lsn, frame, ps, &base_sum);
	if (e->cache && (*spare != NULL || (*spare = aligned_alloc(4096, ps)) != NULL) &&
	    ppl_page_cache_get_before(e->cache, space, page_no, base, base_sum, info->last_lsn, *spare) &&
	    ppl_node_rebuild_resumed(n, space, page_no, *spare, UINT64_MAX, changed, applied, err) == PPL_APPLY_OK &&
	    *changed) {
		memcpy(frame, *spare, ps);
		return PPL_APPLY_OK;
	}
	*changed = false;
	*applied = info->chunks; /* from the base: every pending one */
	return ppl_node_rebuild(n, space, page_no, frame, UINT64_MAX, changed, err);
}

static int read_pages(struct ppl_store *e, struct ppl_node *n, uint64_t fileid, uint64_t off, struct iovec *iov,
		      int iovcnt, size_t len, size_t *served)
{
	size_t ps = e->page_size;
	uint8_t *frame = NULL, *resume = NULL;
	int rc = 0;
	__atomic_add_fetch(&e->reads, 1, __ATOMIC_RELAXED);
	for (uint64_t p = (off + ps - 1) / ps * ps; p + ps <= off + len; p += ps) {
		if (frame == NULL && (frame = aligned_alloc(4096, ps)) == NULL)
			return ENOMEM;
		store_iov_copy(iov, iovcnt, p - off, frame, ps, true);
		uint32_t page_no = (uint32_t)(p / ps), space;
		struct ppl_node_page_info info;
		if (!page_space(e, fileid, frame, page_no, &space) || !store_served_rebuilt(e, space, page_no) ||
		    !store_holds_space(e, fileid, space))
			continue;
		if ((rc = store_hold_wait(e, n, space, page_no)) != 0)
			break;
		/* before the records are looked at: a page rebuilt from
		 * records a new generation has left behind is not cached */
		uint64_t gen = e->cache ? ppl_page_cache_generation(e->cache) : 0;
		if (!ppl_node_page_info(n, space, page_no, &info))
			continue;
		/* torn by a write of the store's that failed: the image that
		 * write staged is the base */
		bool restored = !ppl_page_crc_ok(frame, ps) && store_dw_kept_base(e, space, page_no, frame);
		/* the log initializes the page: the rebuild does not read the base */
		uint32_t base_sum;
		uint64_t base = ppl_node_base_key(info.from_init, info.init_lsn, frame, ps, &base_sum);
		/* the cost of serving the page rebuilt, from here: the wait for
		 * the held tail above is the restart's, not the rebuild's */
		uint64_t t0 = store_now_ns(e);
		if (e->cache && ppl_page_cache_get(e->cache, space, page_no, base, base_sum, info.last_lsn, frame)) {
			store_iov_copy(iov, iovcnt, p - off, frame, ps, false);
			__atomic_add_fetch(&e->pages_rebuilt, 1, __ATOMIC_RELAXED);
			(*served)++;
			ppl_latency_add(&e->rebuild_ns, store_now_ns(e) - t0);
			continue;
		}
		bool changed = false;
		struct ppl_apply_error err;
		unsigned applied = 0;
		enum ppl_apply_status st = store_rebuild(e, n, space, page_no, &info, frame, &resume, &changed,
							 &applied, &err);
		if (st != PPL_APPLY_OK) {
			__atomic_add_fetch(&e->rebuild_failures, 1, __ATOMIC_RELAXED);
			SLOG(e, PPL_LOG_CRIT, "PPL: %s: page %" PRIu32 ":%" PRIu32 " cannot be rebuilt (%s); the "
				"READ fails rather than serve a page that may be wrong", e->datadir, space, page_no,
				err.msg);
			rc = EIO;
			break;
		}
		if (changed || restored) {
			store_iov_copy(iov, iovcnt, p - off, frame, ps, false);
			__atomic_add_fetch(&e->pages_rebuilt, 1, __ATOMIC_RELAXED);
			(*served)++;
			ppl_histogram_add(&e->mtrs_per_rebuild, applied);
			if (info.chunks >= HOT_CHUNKS)
				store_note_hot(e, space, page_no);
			if (e->cache)
				ppl_page_cache_put(e->cache, gen, space, page_no, base, base_sum, ppl_page_lsn(frame),
						   frame);
			ppl_latency_add(&e->rebuild_ns, store_now_ns(e) - t0);
		}
	}
	/* A read that covers only part of a page (never InnoDB's own, which
	 * reads whole pages) must not return stale bytes of a page with
	 * pending records either: rebuild the whole page from its file and
	 * copy the part. */
	uint64_t first = off / ps, last = (off + len - 1) / ps;
	for (uint64_t pg = first; rc == 0 && len && pg <= last; pg++) {
		uint64_t ps0 = pg * ps;
		if (ps0 >= off && ps0 + ps <= off + len)
			continue; /* whole: done above */
		uint32_t space;
		struct ppl_node_page_info info;
		if (!store_file_space(e, fileid, &space) || !store_served_rebuilt(e, space, (uint32_t)pg) ||
		    !store_holds_space(e, fileid, space))
			continue;
		if ((rc = store_hold_wait(e, n, space, (uint32_t)pg)) != 0)
			break;
		if (!ppl_node_page_info(n, space, (uint32_t)pg, &info))
			continue;
		if (frame == NULL && (frame = aligned_alloc(4096, ps)) == NULL)
			return ENOMEM;
		bool changed = false;
		struct ppl_apply_error err;
		bool readable = e->dd != NULL && ppl_datadir_read_page(e->dd, space, (uint32_t)pg, frame, ps) == 0;
		if (readable && !ppl_page_crc_ok(frame, ps))
			store_dw_kept_base(e, space, (uint32_t)pg, frame); /* torn by a failed write of the store's */
		if (!readable ||
		    ppl_node_rebuild(n, space, (uint32_t)pg, frame, UINT64_MAX, &changed, &err) != PPL_APPLY_OK) {
			__atomic_add_fetch(&e->rebuild_failures, 1, __ATOMIC_RELAXED);
			SLOG(e, PPL_LOG_CRIT, "PPL: %s: a READ of part of page %" PRIu32 ":%" PRIu64 " cannot be "
				"served rebuilt; it fails rather than return stale bytes", e->datadir, space, pg);
			rc = EIO;
			break;
		}
		uint64_t from = off > ps0 ? off : ps0, to = off + len < ps0 + ps ? off + len : ps0 + ps;
		store_iov_copy(iov, iovcnt, from - off, frame + (from - ps0), to - from, false);
		if (changed) {
			__atomic_add_fetch(&e->pages_rebuilt, 1, __ATOMIC_RELAXED);
			(*served)++;
		}
	}
	free(frame);
	free(resume);
	return rc;
}

int ppl_store_read(struct ppl_store *e, uint64_t fileid, uint64_t off, struct iovec *iov, int iovcnt,
		    size_t len, uint64_t read_ns)
{
	/* outside the read-side section: ingest may replace the node meanwhile */
	int w = store_start_wait(e);
	if (w)
		return w;
	uint64_t t0 = store_now_ns(e);
	size_t served = 0;
	rcu_read_lock();
	struct ppl_node *n = store_node_of(e);
	int rc = n ? read_pages(e, n, fileid, off, iov, iovcnt, len, &served) : 0;
	rcu_read_unlock();
	if (rc == 0 && read_ns)
		ppl_histogram_add(served ? &e->read_rebuilt_us : &e->read_plain_us,
				  (read_ns + store_now_ns(e) - t0) / 1000);
	return rc;
}

/* A page of a file was overwritten with bytes that are not that page: its
 * records and its place in the elided set and the pool go (I7). */
/* Everything held for the page goes: index, pool, elided set. */
bool store_forget_page(struct ppl_store *e, struct ppl_node *n, uint32_t space, uint32_t page_no)
{
	uint8_t hdr[38] = { 0 }; /* FIL_PAGE_DATA: the header page_written reads */
	ppl_wr4(hdr + PPL_FIL_PAGE_OFFSET, page_no);
	ppl_wr4(hdr + PPL_FIL_PAGE_SPACE_ID, space);
	if (!ppl_node_page_info(n, space, page_no, &(struct ppl_node_page_info){ 0 }))
		return false;
	ppl_node_page_written(n, hdr, UINT64_MAX);
	if (e->pool)
		ppl_pool_reclaim(e->pool, space, page_no, UINT64_MAX);
	store_elided_put(e, (uint64_t)space << 32 | page_no, false);
	return true;
}

static void page_overwritten(struct ppl_store *e, struct ppl_node *n, uint32_t space, uint32_t page_no)
{
	if (!store_forget_page(e, n, space, page_no))
		return;
	SLOG(e, PPL_LOG_EVENT, "PPL: %s: page %" PRIu32 ":%" PRIu32 " was overwritten with bytes that are not an "
		 "InnoDB page of that position: it is served as written, and its records are dropped", e->datadir,
		 space, page_no);
}

static void write_pages(struct ppl_store *e, struct ppl_node *n, uint64_t fileid, uint64_t off,
			const struct iovec *iov, int iovcnt, size_t len)
{
	if (off % e->page_size)
		return;
	size_t ps = e->page_size;
	uint8_t *frame = aligned_alloc(4096, ps);
	if (frame == NULL)
		return;
	uint64_t parsed = ppl_node_parsed_lsn(n);
	for (uint64_t p = off; p + ps <= off + len; p += ps) {
		store_iov_copy((struct iovec *)iov, iovcnt, p - off, frame, ps, true);
		uint32_t space, page_no = (uint32_t)(p / ps);
		/* Only a page written where it belongs is that page's new
		 * base: not the doublewrite buffer's copies of other pages in
		 * ibdata1, not zeros that extend a file. */
		if (ppl_page_all_zero(frame, ps))
			continue;
		if (ppl_page_no(frame) != page_no) {
			/* Not an InnoDB page of this position: bytes written over
			 * a page by something else (a tool that corrupts a page on
			 * purpose, a partial copy) -- the page is what was
			 * written, and nothing the log said of it applies any
			 * more. The doublewrite area of ibdata1, whose pages hold
			 * copies of other pages, has no records of its own. */
			if (store_file_space(e, fileid, &space))
				page_overwritten(e, n, space, page_no);
			continue;
		}
		if (!page_space(e, fileid, frame, page_no, &space))
			continue;
		/* An LSN 0 image is a page written without redo (IMPORT
		 * TABLESPACE writes its pages so): every record parsed by now
		 * belongs to a page that no longer exists. Any other image
		 * supersedes only what its LSN covers: a client may deliver a
		 * page write after log writes of later changes to the page
		 * (ppl-mount sends page writes unstable and commits only the
		 * log file), and those records are newer than the image. A
		 * page that may be elided keeps its newer records in any case:
		 * they are its only copy. */
		uint64_t superseded = ppl_page_lsn(frame) == 0 && !store_served_rebuilt(e, space, page_no) ? parsed : 0;
		struct ppl_node_page_info before;
		if (superseded > ppl_page_lsn(frame) && ppl_node_page_info(n, space, page_no, &before) &&
		    before.last_lsn > ppl_page_lsn(frame))
			__atomic_add_fetch(&e->superseded_writes, 1, __ATOMIC_RELAXED);
		ppl_node_page_written(n, frame, superseded);
		if (e->pool) {
			/* the pool lets go of what the index let go of: records
			 * left there would come back at the next ingest start */
			uint64_t upto = superseded > ppl_page_lsn(frame) ? superseded : ppl_page_lsn(frame);
			ppl_pool_reclaim(e->pool, space, ppl_page_no(frame), upto);
			/* still elided while records newer than this image
			 * wait (a replayed old write, see keep_newer_pages) */
			struct ppl_node_page_info info;
			if (!ppl_node_page_info(n, space, ppl_page_no(frame), &info))
				store_elided_put(e, (uint64_t)space << 32 | ppl_page_no(frame), false);
		}
		__atomic_add_fetch(&e->pages_written, 1, __ATOMIC_RELAXED);
	}
	free(frame);
}

/* A write that covers only part of a page is never one of InnoDB's page
 * writes of a logged page: it is a tool overwriting bytes (mysql-test-run
 * zeroes half of a page 0 to test the doublewrite buffer), or a file
 * copied in pieces. A disk would then hold MariaDB's newest page with
 * those bytes over it. So before the write an elided page is materialized
 * (its file then holds that newest page), and after it the page is what
 * its file holds: its records are dropped, nothing rebuilds it. */
static void partial_pages(struct ppl_store *e, uint64_t fileid, uint64_t off, size_t len, bool before)
{
	size_t ps = e->page_size;
	uint32_t space;
	if (ps == 0 || len == 0 || (off % ps == 0 && len % ps == 0) || !store_file_space(e, fileid, &space) ||
	    !store_holds_space(e, fileid, space))
		return;
	rcu_read_lock();
	struct ppl_node *n = store_node_of(e);
	for (uint64_t pg = off / ps; n && pg <= (off + len - 1) / ps; pg++) {
		if (pg * ps >= off && pg * ps + ps <= off + len)
			continue; /* covered whole: a page write (write_pages) */
		if (before) {
			if (store_served_rebuilt(e, space, (uint32_t)pg))
				store_materialize_page(e, n, space, (uint32_t)pg, NULL);
		} else if (store_forget_page(e, n, space, (uint32_t)pg) &&
			   __atomic_add_fetch(&e->partial_overwrites, 1, __ATOMIC_RELAXED) <= 16) {
			SLOG(e, PPL_LOG_EVENT, "PPL: %s: page %" PRIu32 ":%" PRIu64 " was partly overwritten (%zu B at "
				 "offset %" PRIu64 " of its file), not by a page write of InnoDB's: it is served as its "
				 "file holds it, and its records are dropped", e->datadir, space, pg, len, off);
		}
	}
	rcu_read_unlock();
}

void ppl_store_write(struct ppl_store *e, uint64_t fileid, uint64_t off, const struct iovec *iov, int iovcnt,
		      size_t len)
{
	rcu_read_lock();
	struct ppl_node *n = store_node_of(e);
	if (n)
		write_pages(e, n, fileid, off, iov, iovcnt, len);
	rcu_read_unlock();
	partial_pages(e, fileid, off, len, false);
	PPL_CRASH(PAGE_WRITE_TAKEN);
}

/* ---- the stripes, verify mode, the brackets around page I/O ------------------ */

unsigned store_stripe_of(uint64_t fileid, uint64_t unit)
{
	uint64_t k = fileid * 0x9e3779b97f4a7c15ull ^ unit * 0xbf58476d1ce4e5b9ull;
	return (unsigned)((k ^ (k >> 29)) % STRIPES);
}

/* A page write or read of MariaDB's and a materialization of the same
 * page never overlap: a read that took the file's bytes before the page
 * was materialized, and decided after it left the elided set, would serve
 * the old page. I/O enters its stripes (waiting while one is being
 * materialized); materialization waits until none is in flight. */
static void stripes_enter(struct ppl_store *e, uint64_t fileid, uint64_t off, size_t len)
{
	pthread_mutex_lock(&e->stripe_lock);
	for (uint64_t u = off >> STRIPE_SHIFT; u <= (off + len - 1) >> STRIPE_SHIFT; u++) {
		unsigned s = store_stripe_of(fileid, u);
		while (e->busy[s])
			pthread_cond_wait(&e->stripe_cond, &e->stripe_lock);
		e->inflight[s]++;
	}
	pthread_mutex_unlock(&e->stripe_lock);
}

static void stripes_leave(struct ppl_store *e, uint64_t fileid, uint64_t off, size_t len)
{
	pthread_mutex_lock(&e->stripe_lock);
	for (uint64_t u = off >> STRIPE_SHIFT; u <= (off + len - 1) >> STRIPE_SHIFT; u++)
		e->inflight[store_stripe_of(fileid, u)]--;
	pthread_cond_broadcast(&e->stripe_cond);
	pthread_mutex_unlock(&e->stripe_lock);
}

/* Verify mode: the last pages zeroed inside their files. A page that is
 * then written with nothing pending over those zeros is not records the
 * index lost: a tool wiped it, and MariaDB writes it back (from its
 * doublewrite buffer, as mysql-test-run's doublewrite tests make it do). */
static void note_wiped(struct ppl_store *e, uint32_t space, uint32_t page_no)
{
	pthread_mutex_lock(&e->wiped_lock);
	e->wiped[e->wiped_next++ % WIPED_KEPT] = (uint64_t)space << 32 | page_no;
	pthread_mutex_unlock(&e->wiped_lock);
}

static bool was_wiped(struct ppl_store *e, uint32_t space, uint32_t page_no)
{
	uint64_t key = (uint64_t)space << 32 | page_no;
	bool found = false;
	pthread_mutex_lock(&e->wiped_lock);
	for (unsigned i = 0; i < WIPED_KEPT && i < e->wiped_next && !found; i++)
		found = e->wiped[i] == key;
	pthread_mutex_unlock(&e->wiped_lock);
	return found;
}

/* Verify mode: each whole page about to be written, against the page this
 * node would serve at its LSN (the index's rebuild from the data file, not
 * yet overwritten, or the file's page). The write vouches for the log up
 * to its LSN (WAL), so the log's last, provisional write is parsed first:
 * records below the LSN still unparsed would make the page look short of
 * them. */
static void verify_write(struct ppl_store *e, uint64_t fileid, uint64_t off, const struct iovec *iov, int iovcnt,
			 size_t len)
{
	size_t ps = e->page_size;
	if (e->dd == NULL || ps == 0 || off % ps)
		return;
	uint8_t *frame = aligned_alloc(4096, ps);
	if (frame == NULL)
		return;
	char path[4096];
	rcu_read_lock();
	struct ppl_node *n = store_node_of(e);
	for (uint64_t p = off; p + ps <= off + len; p += ps) {
		if (n == NULL) {
			__atomic_add_fetch(&e->verify_skip[PPL_VERIFY_NO_INDEX], 1, __ATOMIC_RELAXED);
			continue;
		}
		store_iov_copy((struct iovec *)iov, iovcnt, p - off, frame, ps, true);
		/* Only a plain full_crc32 page is what the log describes:
		 * ROW_FORMAT=COMPRESSED files (other page sizes, old
		 * checksums) and page_compressed pages (the type's top bit, or
		 * the old compressed types) are written in a form the redo
		 * does not produce, and are never elided (libcatcher) or
		 * rebuilt (store_served_rebuilt): not comparable. */
		uint16_t type = ppl_page_type(frame);
		enum ppl_verify_skip skip = PPL_VERIFY_COMPARED;
		int r = 0;
		if ((type & 0x8000u) || type == 34354u || type == 37401u)
			skip = PPL_VERIFY_PAGE_COMPRESSED;
		else if (!ppl_page_crc_ok(frame, ps))
			skip = PPL_VERIFY_NOT_FULL_CRC32;
		else if (ppl_page_no(frame) != p / ps)
			skip = PPL_VERIFY_OTHER_PAGE; /* a copy of another page (doublewrite buffer) */
		else if (ppl_datadir_path(e->dd, ppl_page_space(frame), path, sizeof path) != 0)
			/* MariaDB writes a page only into its space's file, which
			 * the datadir knows by then (the FILE_CREATE before it):
			 * this is a copy of pages of a space whose file is gone
			 * or not yet there (a table's .ibd copied for IMPORT) */
			skip = PPL_VERIFY_NO_FILE;
		else if (!store_holds_space(e, fileid, ppl_page_space(frame)))
			/* a file of another datadir under the export (a server
			 * started with another innodb_data_home_dir: its own
			 * system tablespace, the same space ids): another log's */
			skip = PPL_VERIFY_OTHER_DATADIR;
		else if (!store_log_vouched(e, n, ppl_page_lsn(frame))) {
			/* MariaDB writes a page only once its log is written,
			 * and no log can be ahead of the parse by more than
			 * its size: such an LSN (mysql-test-run's pages of all
			 * ones) is no write of MariaDB's */
			uint64_t cap = ppl_redo_capacity(ppl_node_reader(n));
			skip = STOPPED(e) ? PPL_VERIFY_NO_INDEX
			       : cap && ppl_page_lsn(frame) - ppl_node_parsed_lsn(n) > cap &&
					 ppl_page_lsn(frame) > ppl_node_parsed_lsn(n) ? PPL_VERIFY_LSN_FUTURE
									      : PPL_VERIFY_LOG_BEHIND;
			if (skip == PPL_VERIFY_LOG_BEHIND &&
			    __atomic_fetch_add(&e->verify_behind_said, 1, __ATOMIC_RELAXED) < PPL_VERIFY_SAID_MAX)
				SLOG(e, PPL_LOG_EVENT, "PPL: %s: verify: page %" PRIu32 ":%" PRIu32 " written at LSN %"
					 PRIu64 " not compared (log_behind): the log this node holds is parsed to LSN %"
					 PRIu64 " and does not reach that LSN in whole mini-transactions; MariaDB writes "
					 "a page only after its log, so a tool wrote it", e->datadir, ppl_page_space(frame),
					 ppl_page_no(frame), ppl_page_lsn(frame), ppl_node_parsed_lsn(n));
		}
		else
			r = ppl_node_verify(n, frame, store_read_base, e, &skip);
		if (r == 0 && skip == PPL_VERIFY_NO_BASE && was_wiped(e, ppl_page_space(frame), ppl_page_no(frame)))
			skip = PPL_VERIFY_AFTER_WIPE;
		__atomic_add_fetch(r > 0 ? &e->verify_same : r < 0 ? &e->verify_diverged : &e->verify_skip[skip], 1,
				   __ATOMIC_RELAXED);
	}
	rcu_read_unlock();
	free(frame);
}

/* A whole page write older than the page in its file never comes from
 * InnoDB's page cleaner (a page's LSN only grows), but a client replays
 * its UNSTABLE writes after the server restarted (the write verifier
 * changed): an image written before pages were elided and materialized
 * since would put an old page back over one whose records are already
 * dropped. Such a page is replaced in the request by the file's newer
 * image, so the write changes nothing for it. Only with elision on
 * (otherwise every page the file holds came from the client in order),
 * only in the replay window after a restart (replay_until_ns), and never
 * for an LSN 0 image: that is a page written without redo (IMPORT
 * TABLESPACE), which a disk would take, and so does this node. */
static void keep_newer_pages(struct ppl_store *e, uint64_t off, const struct iovec *iov, int iovcnt, size_t len)
{
	size_t ps = e->page_size;
	if (e->dd == NULL || ps == 0 || off % ps || len < ps ||
	    store_now_ns(e) >= __atomic_load_n(&e->replay_until_ns, __ATOMIC_ACQUIRE))
		return;
	uint8_t *in = aligned_alloc(4096, ps), *disk = aligned_alloc(4096, ps);
	for (uint64_t p = off; in && disk && p + ps <= off + len; p += ps) {
		store_iov_copy((struct iovec *)iov, iovcnt, p - off, in, ps, true);
		uint32_t space = ppl_page_space(in), page_no = ppl_page_no(in);
		/* LSN 0: a page written without redo, never a replay of one
		 * of InnoDB's logged pages */
		if (page_no != p / ps || ppl_page_lsn(in) == 0 || !ppl_page_crc_ok(in, ps) ||
		    ppl_datadir_read_page(e->dd, space, page_no, disk, ps) != 0 || !ppl_page_crc_ok(disk, ps) ||
		    ppl_page_space(disk) != space || ppl_page_no(disk) != page_no || ppl_page_lsn(disk) <= ppl_page_lsn(in))
			continue;
		store_iov_copy((struct iovec *)iov, iovcnt, p - off, disk, ps, false);
		if (__atomic_add_fetch(&e->stale_writes, 1, __ATOMIC_RELAXED) <= 16)
			SLOG(e, PPL_LOG_EVENT, "PPL: %s: a write of page %" PRIu32 ":%" PRIu32 " at LSN %" PRIu64
				 " is older than the page in its file (LSN %" PRIu64 "; a client replaying its "
				 "unstable writes after a restart): the file keeps the newer page", e->datadir,
				 space, page_no, ppl_page_lsn(in), ppl_page_lsn(disk));
	}
	free(in);
	free(disk);
}

/* A whole page of zeros written inside a file, not past its end (where
 * InnoDB extends a file with zeros): MariaDB scrubbing a page it freed
 * (innodb_immediate_scrub_data_uncompressed), or a tool wiping the page
 * (mysql-test-run zeroes page 0 of a table to test the doublewrite
 * buffer). A disk then holds zeros, and so does this node: the page's
 * records and its place in the elided set and the pool go, nothing
 * rebuilds it, and MariaDB finds the zeros its recovery expects. Except a
 * page the log initializes again (its records start with INIT_PAGE and do
 * not end freed): its rebuild never reads the file, and a scrub of its
 * earlier life racing its reuse must not take it away. Called before the
 * write, inside the page's stripe: no read serves the old page rebuilt
 * once the zeros are there. */
static void zero_pages(struct ppl_store *e, uint64_t fileid, uint64_t off, const struct iovec *iov, int iovcnt,
		       size_t len)
{
	size_t ps = e->page_size;
	if (e->dd == NULL || ps == 0 || off % ps)
		return;
	bool looked = false;
	uint32_t space = 0;
	struct stat st;
	rcu_read_lock();
	struct ppl_node *n = store_node_of(e);
	for (uint64_t p = off; n && p + ps <= off + len; p += ps) {
		if (!iov_zero(iov, iovcnt, p - off, ps))
			continue;
		/* Which space, and the file's size before the write: looked
		 * up once, and only for a write that holds a page of zeros */
		if (!looked) {
			looked = true;
			if (!store_file_space(e, fileid, &space) || !store_space_file_stat(e, space, &st) ||
			    (uint64_t)st.st_ino != fileid)
				break;
		}
		if (p + ps > (uint64_t)st.st_size)
			break; /* extending the file */
		if (e->verify)
			note_wiped(e, space, (uint32_t)(p / ps));
		struct ppl_node_page_info info;
		if (!ppl_node_page_info(n, space, (uint32_t)(p / ps), &info) || (info.from_init && !info.freed) ||
		    !store_forget_page(e, n, space, (uint32_t)(p / ps)))
			continue;
		/* a freed page scrubbed is MariaDB's everyday business */
		if (!info.freed && __atomic_add_fetch(&e->partial_overwrites, 1, __ATOMIC_RELAXED) <= 16)
			SLOG(e, PPL_LOG_EVENT, "PPL: %s: page %" PRIu32 ":%" PRIu64 " was overwritten with zeros inside "
				 "its file (not a page MariaDB freed: a tool wiped it): it is served as written, and its "
				 "records are dropped", e->datadir, space, p / ps);
	}
	rcu_read_unlock();
}

/* A log write about to overwrite what the archive has not made durable
 * (store_archive.c): never held, the archive stops instead. */
static void archive_guard(struct ppl_store *e, uint64_t off, size_t len)
{
	if (off < ppl_dialect_mariadb_10_8.area_start || len == 0)
		return;
	rcu_read_lock();
	struct ppl_node *n = store_node_of(e);
	uint64_t cap = 0, end = n && !STOPPED(e) ? store_log_write_end_lsn(n, off, len, &cap) : 0;
	rcu_read_unlock();
	if (end > cap)
		store_archive_before_overwrite(e, end - cap);
}

int ppl_store_write_begin(struct ppl_store *e, bool is_log, uint64_t fileid, uint64_t off, const struct iovec *iov,
			   int iovcnt, size_t len)
{
	if (is_log) {
		if (e->archive)
			archive_guard(e, off, len);
		int rc = e->pool ? store_wrap_guard(e, off, len) : 0;
		if (rc == 0 && e->pool)
			rc = store_checkpoint_gate(e, off, iov, iovcnt, len);
		/* The file and the reader must see log writes in the same
		 * order: two WRITEs of the tail block processed at once could
		 * otherwise reach the disk in one order and the reader in the
		 * other, leaving it older bytes than the file holds. */
		if (rc == 0)
			pthread_mutex_lock(&e->order_lock);
		return rc;
	}
	/* MariaDB writes a page only after the log up to its LSN is durable
	 * (WAL), so the page write comes after the log writes that carry its
	 * records: with those queued (Ingest_Behind), they are parsed first,
	 * as they would have been before their replies */
	store_behind_drain(e);
	if (e->pool == NULL || len == 0) {
		if (len != 0)
			zero_pages(e, fileid, off, iov, iovcnt, len);
		if (e->verify)
			verify_write(e, fileid, off, iov, iovcnt, len);
		return 0;
	}
	partial_pages(e, fileid, off, len, true); /* before its stripes: materialization takes them */
	stripes_enter(e, fileid, off, len);
	zero_pages(e, fileid, off, iov, iovcnt, len);
	keep_newer_pages(e, off, iov, iovcnt, len);
	if (e->verify)
		verify_write(e, fileid, off, iov, iovcnt, len);
	return 0;
}

void ppl_store_write_end(struct ppl_store *e, bool is_log, uint64_t fileid, uint64_t off, size_t len)
{
	if (is_log) {
		pthread_mutex_unlock(&e->order_lock);
		return;
	}
	if (e->pool != NULL && len != 0)
		stripes_leave(e, fileid, off, len);
}

void ppl_store_read_begin(struct ppl_store *e, uint64_t fileid, uint64_t off, size_t len)
{
	if (e->pool != NULL && len != 0)
		stripes_enter(e, fileid, off, len);
}

void ppl_store_read_end(struct ppl_store *e, uint64_t fileid, uint64_t off, size_t len)
{
	if (e->pool != NULL && len != 0)
		stripes_leave(e, fileid, off, len);
}
