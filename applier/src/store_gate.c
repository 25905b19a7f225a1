/* The elided set and the promise kept for every page in it: the set
 * (pages acknowledged to libcatcher since their last base), a page settled
 * (its records into the pmem pool) or materialized (into its data file
 * through a doublewrite slot, I5), the checkpoint gate that does one or
 * the other before MariaDB's checkpoint passes a page's records (I1, I3),
 * a space that goes taking its state with it (I7), a file renamed away
 * given its pages first, and the elision decision itself (I1, I2, I4).
 *
 * A file of its own because these are the rules that make a dropped write
 * safe: the yes, and everything that must happen before the log may
 * forget what the yes relied on, read together. */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <urcu-bp.h>

#include "ppl/crash.h"
#include "ppl/datadir.h"
#include "ppl/elision_server.h"
#include "ppl/node.h"
#include "ppl/page.h"
#include "ppl/page_cache.h"
#include "ppl/pool.h"
#include "ppl/redo.h"
#include "ppl/store.h"
#include "store_internal.h"

/* ---- elision, materialization, the checkpoint gate ----------------------------- */

/* Slot of key in t (cap a power of two): where it is, or the first free
 * slot its probe reaches. Removed keys leave a tombstone (1) that keeps
 * later keys of the same probe reachable. */
static size_t elided_slot(const uint64_t *t, size_t cap, uint64_t k)
{
	size_t j = (size_t)((k * 0x9e3779b97f4a7c15ull) >> 17) & (cap - 1);
	while (t[j] != 0 && t[j] != k)
		j = (j + 1) & (cap - 1);
	return j;
}

/* Adds or removes a page. An add that cannot be recorded returns false:
 * the caller must not acknowledge the elision then. */
bool store_elided_put(struct ppl_store *e, uint64_t key, bool add)
{
	uint64_t k = key + 2; /* 0 empty, 1 removed */
	bool ok = true;
	pthread_mutex_lock(&e->elided_lock);
	/* tombstones count as used: a table full of them has no free slot
	 * left to end a probe */
	if (add && (e->elided_used + 1) * 2 > e->elided_cap) {
		size_t cap = 1024;
		while (cap < 4 * (e->elided_n + 1))
			cap *= 2;
		uint64_t *t = calloc(cap, sizeof(*t));
		if (t == NULL) {
			ok = false;
			goto out;
		}
		for (size_t i = 0; i < e->elided_cap; i++)
			if (e->elided[i] > 1)
				t[elided_slot(t, cap, e->elided[i])] = e->elided[i];
		free(e->elided);
		e->elided = t;
		e->elided_cap = cap;
		e->elided_used = e->elided_n;
	}
	if (e->elided_cap == 0)
		goto out;
	size_t j = elided_slot(e->elided, e->elided_cap, k);
	if (add && e->elided[j] == 0) {
		e->elided[j] = k;
		e->elided_n++;
		e->elided_used++;
	} else if (!add && e->elided[j] == k) {
		e->elided[j] = 1;
		e->elided_n--;
	}
out:
	pthread_mutex_unlock(&e->elided_lock);
	return ok;
}

bool store_elided_has(struct ppl_store *e, uint64_t key)
{
	bool found = false;
	pthread_mutex_lock(&e->elided_lock);
	if (e->elided_cap)
		found = e->elided[elided_slot(e->elided, e->elided_cap, key + 2)] == key + 2;
	pthread_mutex_unlock(&e->elided_lock);
	return found;
}

/* Removes every page of a space from the elided set; returns how many. */
size_t store_elided_drop_pages(struct ppl_store *e, uint32_t space, uint32_t first_page)
{
	size_t n = 0;
	pthread_mutex_lock(&e->elided_lock);
	for (size_t i = 0; i < e->elided_cap; i++) {
		if (e->elided[i] > 1 && (uint32_t)((e->elided[i] - 2) >> 32) == space &&
		    (uint32_t)(e->elided[i] - 2) >= first_page) {
			e->elided[i] = 1;
			e->elided_n--;
			n++;
		}
	}
	pthread_mutex_unlock(&e->elided_lock);
	return n;
}

size_t store_elided_drop_space(struct ppl_store *e, uint32_t space)
{
	return store_elided_drop_pages(e, space, 0);
}

static bool missing_mark(struct ppl_store *e, uint32_t space, bool on);

/* I7: a space whose file is gone (or was replaced by something the log
 * does not describe) keeps nothing here: no records in the index or the
 * pool, no page in the elided set. Its pages then need no materializing
 * before a checkpoint, and a file that later holds the same space id
 * starts from what it holds. */
bool store_drop_space(struct ppl_store *e, uint32_t space, const char *why)
{
	struct ppl_node_stats before = { 0 }, after = { 0 };
	rcu_read_lock();
	struct ppl_node *n = store_node_of(e);
	if (n) {
		ppl_node_get_stats(n, &before);
		ppl_node_drop_space(n, space);
		ppl_node_get_stats(n, &after);
	}
	rcu_read_unlock();
	size_t elided = store_elided_drop_space(e, space);
	uint64_t pooled = e->pool ? ppl_pool_drop_space(e->pool, space) : 0;
	/* the space's next file (a copy, a re-created tablespace) may have
	 * pages of the same LSNs */
	if (e->cache)
		ppl_page_cache_forget_all(e->cache);
	__atomic_add_fetch(&e->spaces_dropped, 1, __ATOMIC_RELAXED);
	missing_mark(e, space, false);
	bool any = elided || pooled || after.chunks_dropped != before.chunks_dropped;
	if (any)
		SLOG(e, PPL_LOG_EVENT, "PPL: %s: space %" PRIu32 ": %s; its records (%" PRIu64 " mini-transaction "
			 "chunk(s) in memory, %" PRIu64 " page(s) in the pool) and %zu elided page(s) are dropped",
			 e->datadir, space, why, after.chunks_dropped - before.chunks_dropped, pooled, elided);
	return any;
}

/* I7: reads are served rebuilt only for pages this node may have told
 * libcatcher not to write -- the elided set, every page with records
 * when that set is incomplete (gate_all), and after a restart the pages
 * whose records are still in the log's held tail. MariaDB wrote every
 * other page itself, so its file holds it exactly; records the node
 * holds for such a page can only be older than the file (the checkpoint
 * passed them), or describe a file that was replaced without redo (a
 * copy, IMPORT TABLESPACE, undo tablespaces re-created), and must never
 * be applied to it. */
static bool held_has(struct ppl_store *e, uint64_t key)
{
	if (!__atomic_load_n(&e->held, __ATOMIC_ACQUIRE))
		return false;
	struct held_page k = { key, 0 };
	return bsearch(&k, e->held_pages, e->held_n, sizeof(k), store_held_cmp) != NULL;
}

bool store_served_rebuilt(struct ppl_store *e, uint32_t space, uint32_t page_no)
{
	uint64_t key = (uint64_t)space << 32 | page_no;
	return e->pool != NULL && (e->gate_all || store_elided_has(e, key) || held_has(e, key));
}

/* ---- a file that vanished without a word ------------------------------------- */

struct space_probe {
	uint32_t space;
	bool found;
};

static void pool_page_of_space(void *arg, uint32_t space, uint32_t page_no, const struct ppl_pool_page_info *i)
{
	struct space_probe *p = arg;
	(void)page_no;
	(void)i;
	p->found |= space == p->space;
}

/* Whether some version of a page of the space exists nowhere but here: a
 * page acknowledged to libcatcher (its write was dropped; every page may
 * have been, in gate_all), or records kept in the pool. */
static bool space_holds_data(struct ppl_store *e, uint32_t space)
{
	if (e->pool == NULL)
		return false;
	if (e->gate_all)
		return true;
	bool found = false;
	pthread_mutex_lock(&e->elided_lock);
	for (size_t i = 0; i < e->elided_cap && !found; i++)
		found = e->elided[i] > 1 && (uint32_t)((e->elided[i] - 2) >> 32) == space;
	pthread_mutex_unlock(&e->elided_lock);
	struct space_probe p = { space, false };
	if (!found)
		ppl_pool_for_each_page(e->pool, pool_page_of_space, &p);
	return found || p.found;
}

/* Marks (or unmarks) the space as one whose file vanished while it held
 * data; returns whether the mark changed. */
static bool missing_mark(struct ppl_store *e, uint32_t space, bool on)
{
	bool changed = false;
	pthread_mutex_lock(&e->missing_lock);
	size_t i = 0;
	while (i < e->missing_n && e->missing[i] != space)
		i++;
	if (on && i == e->missing_n) {
		if (e->missing_n == e->missing_cap) {
			size_t cap = e->missing_cap ? 2 * e->missing_cap : 8;
			uint32_t *m = realloc(e->missing, cap * sizeof(*m));
			if (m != NULL) {
				e->missing = m;
				e->missing_cap = cap;
			}
		}
		/* out of memory: unmarked, so the CRIT line comes again,
		 * which is the loud side to err on */
		if (e->missing_n < e->missing_cap) {
			e->missing[e->missing_n++] = space;
			changed = true;
		}
	} else if (!on && i < e->missing_n) {
		e->missing[i] = e->missing[--e->missing_n];
		changed = true;
	}
	pthread_mutex_unlock(&e->missing_lock);
	return changed;
}

/* How long a page claim waits, once per space, for the store to hear of
 * the removal of a file it found gone: the sub-FSAL removes a file before
 * the host's hook tells the store, and a checkpoint gate can fall in
 * between (MariaDB logs FILE_DELETE, removes the file, and may write a
 * checkpoint meanwhile). */
#define VANISH_GRACE_MS 1000

/* The space's file is gone (ENOENT), replaced by another space's
 * (ESTALE), or no file of the datadir holds it, and the store was not
 * told: no removal came through the host and no FILE_DELETE through the
 * log. A page acknowledged to libcatcher, or kept in the pool, exists
 * nowhere else: it is never dropped on a guess. Its checkpoint is refused
 * (the gate) until the file is back or the operator says it was removed
 * on purpose (ppl_store_forget_space). Records of pages MariaDB wrote
 * itself describe a file that is gone and, with may_drop (the file the
 * log or its page 0 named is gone, or the whole datadir is), go with it
 * (I7). Returns 1 when the space was dropped (by this rule, or by the
 * removal heard within the grace), -1 when its records are kept. */
static int space_vanished(struct ppl_store *e, uint32_t space, const char *what, const char *path, bool may_drop)
{
	if (!space_holds_data(e, space)) {
		if (may_drop) {
			store_drop_space(e, space, what);
			return 1;
		}
		SLOG(e, PPL_LOG_EVENT, "PPL: %s: space %" PRIu32 ": %s (%s); its records are kept until the store "
			 "hears of its removal", e->datadir, space, what, path);
		return -1;
	}
	pthread_mutex_lock(&e->missing_lock);
	bool marked = false;
	for (size_t i = 0; i < e->missing_n && !marked; i++)
		marked = e->missing[i] == space;
	pthread_mutex_unlock(&e->missing_lock);
	for (int waited = 0; !marked && waited < VANISH_GRACE_MS; waited += 20) {
		struct timespec t = { 0, 20 * 1000000L };
		nanosleep(&t, NULL);
		if (!space_holds_data(e, space))
			return 1; /* dropped by the removal the host reported meanwhile */
	}
	if (missing_mark(e, space, true))
		SLOG(e, PPL_LOG_CRIT, "PPL: %s: space %" PRIu32 ": %s (%s), and no removal was heard (over NFS or "
			"as a FILE_DELETE in the log). Page versions of it that exist nowhere else are kept, and "
			"MariaDB checkpoints that need them are refused. Put the file back if it was moved by "
			"mistake; if it was removed on purpose, run `ppl-inspect live POOL_PATH forget-space "
			"%" PRIu32 "`", e->datadir, space, what, path, space);
	return -1;
}

/* The page's stripe, taken for materialization or for moving its records
 * to the pool: no write of MariaDB's to it is in flight meanwhile, and no
 * other thread works on it. -1 when no file can be found for the space; 1
 * (no stripe taken) when its file is gone and the space was dropped. */
static int page_claim(struct ppl_store *e, struct ppl_node *n, uint32_t space, uint32_t page_no, unsigned *stripe,
		      uint64_t *inop, struct store_batch *b)
{
	char path[4096] = "";
	uint64_t ino = 0;
	bool named = true;
	if (b != NULL && b->checked && b->checked_space == space) {
		ino = b->checked_ino;
	} else if (!(named = ppl_datadir_path(e->dd, space, path, sizeof(path)) == 0) ||
		   ppl_datadir_check(e->dd, space, &ino) != 0) {
		/* A file known to be gone -- the file the log or its page 0
		 * named no longer exists, or another file (another space's:
		 * its inode or its page 0 says so) took its name, or the
		 * whole datadir went: space_vanished. Never forget records
		 * only because a file cannot be found: the decision
		 * acknowledges pages of files it found. */
		int err = named ? errno : ENOENT;
		struct stat st;
		if (named && (err == ENOENT || err == ESTALE))
			return space_vanished(e, space, err == ENOENT ? "its file is gone"
								      : "its file was replaced by another space's file",
					      path, true);
		if (!named && store_stat(e, e->datadir, &st) != 0)
			return space_vanished(e, space, "its datadir is gone", e->datadir, true);
		/* The space was dropped (its file removed) after the page was
		 * picked: nothing of it is left to materialize. */
		struct ppl_node_page_info ni;
		struct ppl_pool_page_info pi;
		if (!ppl_node_page_info(n, space, page_no, &ni) &&
		    (e->pool == NULL || !ppl_pool_page_info(e->pool, space, page_no, &pi)) &&
		    !store_elided_has(e, (uint64_t)space << 32 | page_no))
			return 1;
		/* mysql-test-run removes a datadir file by file: the space goes
		 * when the store hears of its file's removal, within the grace.
		 * A file renamed where its page 0 is not found yet is kept for. */
		if (!named)
			return space_vanished(e, space, "no file of the datadir holds it", e->datadir, false);
		if (store_disk_failed(e, space, page_no, "an open", err))
			SLOG(e, PPL_LOG_CRIT, "PPL: %s: page %" PRIu32 ":%" PRIu32 " is not materialized now: its "
				"file %s cannot be opened (%s); its records are kept", e->datadir, space, page_no,
				path, strerror(err));
		return -1;
	}
	if (b != NULL) {
		b->checked = true;
		b->checked_space = space;
		b->checked_ino = ino;
	}
	if (missing_mark(e, space, false))
		SLOG(e, PPL_LOG_EVENT, "PPL: %s: space %" PRIu32 "'s file %s is back: its kept pages are written "
			 "into it again", e->datadir, space, path);
	unsigned s = store_stripe_of(ino, ((uint64_t)page_no * e->page_size) >> STRIPE_SHIFT);
	pthread_mutex_lock(&e->stripe_lock);
	while (e->busy[s] || e->inflight[s])
		pthread_cond_wait(&e->stripe_cond, &e->stripe_lock);
	e->busy[s] = 1;
	pthread_mutex_unlock(&e->stripe_lock);
	*stripe = s;
	*inop = ino;
	return 0;
}

static void page_release(struct ppl_store *e, unsigned s)
{
	pthread_mutex_lock(&e->stripe_lock);
	e->busy[s] = 0;
	pthread_cond_broadcast(&e->stripe_cond);
	pthread_mutex_unlock(&e->stripe_lock);
}

/* The page now in its data file is at LSN lsn: records up to it leave the
 * index and the pool, and the page leaves the elided set unless records
 * newer than the image wait: libcatcher may have been told yes for a
 * newer version while this one was being written (elision takes no
 * stripe), and that version exists nowhere but in those records. */
void store_page_settled(struct ppl_store *e, struct ppl_node *n, const uint8_t *frame)
{
	uint32_t space = ppl_page_space(frame), page_no = ppl_page_no(frame);
	struct ppl_node_page_info info;
	ppl_node_page_written(n, frame, 0);
	ppl_pool_reclaim(e->pool, space, page_no, ppl_page_lsn(frame));
	if (!ppl_node_page_info(n, space, page_no, &info))
		store_elided_put(e, (uint64_t)space << 32 | page_no, false);
	PPL_CRASH(PAGE_SETTLED);
}

bool store_dw_kept_base(struct ppl_store *e, uint32_t space, uint32_t page_no, uint8_t *frame)
{
	uint64_t lsn;
	const uint8_t *img;
	if (e->pool == NULL || ppl_pool_dw_kept(e->pool, space, page_no, &lsn, &img) < 0)
		return false;
	if (!ppl_page_crc_ok(frame, e->page_size) || ppl_page_lsn(frame) <= lsn)
		memcpy(frame, img, e->page_size);
	return true;
}

/* Lines of one failing-disk episode beyond its first that name their page */
#define DISK_LINES 8

bool store_disk_failed(struct ppl_store *e, uint32_t space, uint32_t page_no, const char *what, int err)
{
	__atomic_add_fetch(&e->disk_failures, 1, __ATOMIC_RELAXED);
	uint64_t nth = __atomic_add_fetch(&e->disk_episode_failures, 1, __ATOMIC_RELAXED);
	if (__atomic_exchange_n(&e->disk_failing, 1, __ATOMIC_ACQ_REL) == 0) {
		char path[4096];
		if (e->dd == NULL || ppl_datadir_path(e->dd, space, path, sizeof(path)) != 0)
			snprintf(path, sizeof(path), "the file of space %" PRIu32, space);
		pthread_mutex_lock(&e->elided_lock);
		size_t elided = e->elided_n;
		pthread_mutex_unlock(&e->elided_lock);
		SLOG(e, PPL_LOG_CRIT, "PPL: %s: the disk fails: %s failed for page %" PRIu32 ":%" PRIu32 " of %s: %s. "
			"Elision is stopped until a page can be written here again: MariaDB writes its pages itself "
			"meanwhile. The %zu elided page(s) keep their records (pool, doublewrite slots) and are "
			"served rebuilt; a checkpoint that needs one is refused, and MariaDB stops rather than lose "
			"it. %s; failures are counted in disk_failures (ppl-inspect live POOL stats)",
			e->datadir, what, space, page_no, path, strerror(err), elided,
			err == ENOSPC || err == EDQUOT ? "Free space on the export's file system"
						       : "Check the disk (the kernel log says more), then restart "
							 "MariaDB if it stopped");
	}
	return nth <= DISK_LINES;
}

bool store_pool_failed(struct ppl_store *e)
{
	int err = e->pool ? ppl_pool_persist_failed(e->pool) : 0;
	if (err == 0)
		return false;
	if (__atomic_exchange_n(&e->pool_failed_told, 1, __ATOMIC_RELAXED) == 0)
		SLOG(e, PPL_LOG_CRIT, "PPL: %s: the pool's file could not be made durable (msync: %s): what it "
			"took since may not be on its disk. No page is elided any more, and every elided page a "
			"checkpoint needs is written into its data file instead of being kept in the pool. Fix or "
			"replace the pool's device, then restart the storage node (ppl-inspect pool check POOL "
			"first); until then MariaDB writes its pages itself", e->datadir, strerror(err));
	return true;
}

bool store_no_slot_tell(struct ppl_store *e)
{
	return !__atomic_load_n(&e->disk_failing, __ATOMIC_ACQUIRE) ||
	       __atomic_exchange_n(&e->disk_no_slot_told, 1, __ATOMIC_RELAXED) == 0;
}

void store_disk_wrote(struct ppl_store *e, const char *why)
{
	if (__atomic_load_n(&e->disk_failing, __ATOMIC_ACQUIRE) == 0 ||
	    __atomic_exchange_n(&e->disk_failing, 0, __ATOMIC_ACQ_REL) == 0)
		return;
	uint64_t n = __atomic_exchange_n(&e->disk_episode_failures, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&e->disk_no_slot_told, 0, __ATOMIC_RELAXED);
	SLOG(e, PPL_LOG_EVENT, "PPL: %s: %s after %" PRIu64 " failed open(s), read(s), write(s) or sync(s) of "
		"materializations: elision resumes", e->datadir, why, n);
}

/* While the disk fails, no page is elided: unless no elided page is
 * left waiting for it (each was written, or its file dropped), when the
 * next elided page is the only way to find out whether it works again. */
static bool disk_refuses(struct ppl_store *e)
{
	if (__atomic_load_n(&e->disk_failing, __ATOMIC_ACQUIRE) == 0)
		return false;
	pthread_mutex_lock(&e->elided_lock);
	size_t waiting = e->elided_n;
	pthread_mutex_unlock(&e->elided_lock);
	if (waiting == 0) {
		store_disk_wrote(e, "no elided page is left waiting for the disk");
		return false;
	}
	__atomic_add_fetch(&e->elide_refused_disk, 1, __ATOMIC_RELAXED);
	return true;
}

/* Writes the page as the index has it, through a doublewrite slot, unless
 * the data file already holds it; then it is the page's base. A page whose
 * last write failed is written again whatever the file seems to hold (a
 * failed fdatasync leaves bytes in the page cache that may never reach the
 * disk), from its kept doublewrite image if the file's page is torn. The
 * caller holds the page's stripe. */
static int materialize(struct ppl_store *e, struct ppl_node *n, uint32_t space, uint32_t page_no, uint64_t ino,
		       struct store_batch *b)
{
	size_t ps = e->page_size;
	int rc = -1;
	uint8_t *frame = aligned_alloc(4096, ps);
	bool changed = false, kept = false;
	struct ppl_apply_error aerr;
	char err[256];
	struct ppl_node_page_info fi;
	uint8_t *spare = NULL;
	unsigned applied;
	if (ppl_node_page_info(n, space, page_no, &fi) && fi.freed) {
		/* The log's last word on the page frees it: MariaDB's recovery
		 * does not touch it, MariaDB writes it no more, and it is
		 * initialized by the log before any reuse. Nothing is
		 * written; its records would otherwise wait in the pool and
		 * the elided set for a write that never comes. */
		store_forget_page(e, n, space, page_no);
		free(frame);
		return 0;
	}
	bool readable = frame != NULL && ppl_datadir_read_page_of(e->dd, space, ino, page_no, frame, ps) == 0;
	if (readable)
		kept = store_dw_kept_base(e, space, page_no, frame);
	if (!readable) {
		int err = errno;
		if (frame == NULL || store_disk_failed(e, space, page_no, "a read", err))
			SLOG(e, PPL_LOG_CRIT, "PPL: %s: page %" PRIu32 ":%" PRIu32 " cannot be read to materialize "
				"it: %s", e->datadir, space, page_no, frame == NULL ? "out of memory" : strerror(err));
	} else if (store_rebuild(e, n, space, page_no, &fi, frame, &spare, &changed, &applied, &aerr) !=
		   PPL_APPLY_OK) {
		SLOG(e, PPL_LOG_CRIT, "PPL: %s: page %" PRIu32 ":%" PRIu32 " cannot be rebuilt to materialize it "
			"(%s)", e->datadir, space, page_no, aerr.msg);
	} else if (!changed && !kept) {
		store_page_settled(e, n, frame); /* the file already holds it */
		rc = 0;
	} else if (b != NULL) {
		rc = store_batch_write(b, space, page_no, ino, frame, kept);
		frame = NULL; /* the batch's now */
	} else {
		int slot = ppl_pool_dw_stage(e->pool, space, page_no, frame, ps, err, sizeof(err));
		/* No slot (every one is kept by a page whose write failed), but
		 * this page holds one: it is written without a new slot, its
		 * kept image standing for it should this write tear (an open of
		 * the pool writes kept images back before anything is served,
		 * and the page's records are still there). That is how a disk
		 * that works again gets its slots back (store_disk_probe). */
		bool direct = slot < 0 && kept;
		if (slot < 0 && !direct) {
			if (store_no_slot_tell(e))
				SLOG(e, PPL_LOG_CRIT, "PPL: %s: page %" PRIu32 ":%" PRIu32 ": %s", e->datadir, space,
					page_no, err);
		} else if (ppl_datadir_write_page_of(e->dd, space, ino, page_no, frame, ps) != 0) {
			int err = errno;
			if (store_disk_failed(e, space, page_no, "a write", err))
				SLOG(e, PPL_LOG_CRIT, "PPL: %s: page %" PRIu32 ":%" PRIu32 " could not be written to "
					"its file: %s; its doublewrite slot is kept", e->datadir, space, page_no,
					strerror(err));
			/* this slot's image is the newest: older ones of the page go */
			if (!direct) {
				ppl_pool_dw_keep(e->pool, slot);
				ppl_pool_dw_release_page(e->pool, space, page_no, slot);
			}
		} else {
			PPL_CRASH(PAGE_SYNCED);
			ppl_pool_dw_release(e->pool, slot);
			if (kept) /* the file now durably holds a newer image */
				ppl_pool_dw_release_page(e->pool, space, page_no, -1);
			store_page_settled(e, n, frame);
			__atomic_add_fetch(&e->materialized, 1, __ATOMIC_RELAXED);
			store_disk_wrote(e, "a page was written into its file again");
			rc = 0;
		}
	}
	free(frame);
	free(spare);
	return rc;
}

struct to_pool {
	struct ppl_pool *pool;
	uint32_t space, page_no;
	uint64_t have;                 /* the pool holds the page's records up to here */
	enum ppl_pool_status st;       /* the first status other than OK */
	bool unfit;                    /* a chunk no pool record can hold: materialize */
	unsigned appended;
};

static int chunk_to_pool(void *arg, uint64_t start_lsn, uint64_t end_lsn, bool from_init, const uint8_t *recs,
			 size_t len)
{
	struct to_pool *t = arg;
	if (end_lsn <= t->have)
		return 0;
	enum ppl_pool_status st;
	if (len > PPL_POOL_RECORD_MAX) {
		/* a page split's new page, a bulk insert: the log keeps the
		 * records, the pool their LSNs (the restart point stays
		 * before them) */
		st = ppl_pool_note_in_log(t->pool, t->space, t->page_no, start_lsn, end_lsn);
	} else {
		struct ppl_pool_rec r = { .start_lsn = start_lsn, .end_lsn = end_lsn, .from_init = from_init,
					  .len = (uint16_t)len, .bytes = recs };
		st = ppl_pool_append(t->pool, t->space, t->page_no, &r);
	}
	if (t->st == PPL_POOL_OK)
		t->st = st;
	if (st != PPL_POOL_OK && st != PPL_POOL_OVER_CAP && st != PPL_POOL_FULL) {
		t->unfit = true;
		return 1;
	}
	/* over the cap or a full pool: the record is kept in DRAM, and every
	 * later one with it, in order */
	t->appended++;
	return 0;
}

/* Makes every record the index holds for an elided page durable outside
 * the log's reach. Under its cap (NV-PPL) they go into the pmem pool and
 * the page stays unmaterialized. Over it, the pool keeps a head for the
 * page (ppl_pool_page_info's blocks: the durable mark that a restart
 * reads its records from the log) and its records in DRAM; the log holds
 * them until the store's restart point passes them, which the wrap guard
 * and the workers make happen by materializing the page before the log
 * is overwritten there (store_wrap.c). Materialized at once: page 0 when
 * its file's own page 0 does not name the space yet (after a restart the
 * pool's records find their file only through it), a page the pool has
 * no head for (a full
 * pool), a damaged one, and every page when the pool is on tmpfs and may
 * not keep records (Allow_Volatile_Pool): a power loss would take them.
 * The caller holds the page's stripe. */
/* Whether the file's own page 0 names the space (a valid page whose FIL
 * header and FSP header say so): then a restart finds the file of the
 * space's pooled pages without the log, and page 0 may stay in the pool
 * like any other page. InnoDB writes page 0 when it creates a file, so
 * this is the rule; a file whose page 0 was never written (zeros: every
 * write of it elided) is the exception, materialized. */
static bool names_space(const uint8_t *p0, size_t ps, uint32_t space)
{
	return ppl_page_crc_ok(p0, ps) && ppl_page_no(p0) == 0 && ppl_page_space(p0) == space &&
	       ppl_rd4(p0 + PPL_FSP_HEADER_OFFSET + PPL_FSP_SPACE_ID) == space;
}

static bool page0_names_space(struct ppl_store *e, uint32_t space, uint64_t ino)
{
	uint8_t *p0 = aligned_alloc(4096, e->page_size);
	bool ok = p0 != NULL && ppl_datadir_read_page_of(e->dd, space, ino, 0, p0, e->page_size) == 0 &&
		  names_space(p0, e->page_size, space);
	free(p0);
	return ok;
}

static int settle(struct ppl_store *e, struct ppl_node *n, uint32_t space, uint32_t page_no, uint64_t ino,
		  struct store_batch *b)
{
	struct ppl_pool_page_info pi;
	struct to_pool t = { .pool = e->pool, .space = space, .page_no = page_no, .st = PPL_POOL_OK };
	if (e->pool_keeps_nothing || store_pool_failed(e) || (page_no == 0 && !page0_names_space(e, space, ino)))
		return materialize(e, n, space, page_no, ino, b);
	if (ppl_pool_page_info(e->pool, space, page_no, &pi)) {
		if (pi.damaged)
			return materialize(e, n, space, page_no, ino, b);
		t.have = pi.last_lsn;
		struct ppl_node_page_info ni;
		if (pi.blocks > 0 && ppl_node_page_info(n, space, page_no, &ni) && ni.last_lsn <= pi.last_lsn)
			return 0; /* the pool has it all already (every checkpoint meets such pages) */
	}
	bool was_spilled = pi.present && pi.spilled;
	ppl_node_page_chunks(n, space, page_no, chunk_to_pool, &t);
	if (t.appended) {
		ppl_node_rehome(n, space, page_no);
		__atomic_add_fetch(&e->pool_records, t.appended, __ATOMIC_RELAXED);
	}
	if (t.st == PPL_POOL_OK && !t.unfit) {
		if (t.appended)
			__atomic_add_fetch(&e->pool_kept, 1, __ATOMIC_RELAXED);
		return 0;
	}
	if (t.st == PPL_POOL_FULL)
		pthread_cond_broadcast(&e->work_cond); /* wake the cleaner */
	if (!t.unfit && ppl_pool_page_info(e->pool, space, page_no, &pi) && pi.blocks > 0 && !pi.damaged) {
		if (!was_spilled)
			__atomic_add_fetch(&e->spilled_kept, 1, __ATOMIC_RELAXED);
		return 0; /* marked in the pool; its records wait in the log */
	}
	if (t.unfit)
		__atomic_add_fetch(&e->pool_unfit, 1, __ATOMIC_RELAXED);
	else if (t.st == PPL_POOL_OVER_CAP || t.st == PPL_POOL_FULL)
		__atomic_add_fetch(t.st == PPL_POOL_FULL ? &e->pool_full : &e->pool_over_cap, 1, __ATOMIC_RELAXED);
	return materialize(e, n, space, page_no, ino, b);
}

typedef int (*page_op)(struct ppl_store *e, struct ppl_node *n, uint32_t space, uint32_t page_no, uint64_t ino,
		       struct store_batch *b);

/* op with the page's stripe held. */
static int claimed(struct ppl_store *e, struct ppl_node *n, uint32_t space, uint32_t page_no, page_op op,
		   struct store_batch *b)
{
	unsigned s;
	uint64_t ino;
	int c = page_claim(e, n, space, page_no, &s, &ino, b);
	if (c != 0)
		return c < 0 ? -1 : 0; /* a dropped space needs nothing more */
	int rc = op(e, n, space, page_no, ino, b);
	page_release(e, s);
	return rc;
}

/* The page's records durable somewhere the log's wrap cannot reach: the
 * pool while they fit under the per-page cap, else its data file. */
int store_settle_page(struct ppl_store *e, struct ppl_node *n, uint32_t space, uint32_t page_no,
		      struct store_batch *b)
{
	return claimed(e, n, space, page_no, settle, b);
}

/* The page written into its data file (through a doublewrite slot). */
int store_materialize_page(struct ppl_store *e, struct ppl_node *n, uint32_t space, uint32_t page_no,
			   struct store_batch *b)
{
	return claimed(e, n, space, page_no, materialize, b);
}

unsigned store_key_part(uint64_t key, unsigned nparts)
{
	return (unsigned)(((key * 0x9e3779b97f4a7c15ull) >> 32) % nparts);
}

void store_collect_due(void *arg, uint32_t space, uint32_t page_no, const struct ppl_node_page_info *i)
{
	struct due *d = arg;
	if (!i->known || i->first_lsn >= d->upto || (d->one_space && space != d->space))
		return;
	uint64_t key = (uint64_t)space << 32 | page_no;
	if (d->nparts && store_key_part(key, d->nparts) != d->part)
		return;
	if (!d->e->gate_all && !store_elided_has(d->e, key))
		return; /* MariaDB wrote it itself */
	store_key_list_add(&d->l, space, page_no);
}

/* The checkpoint gate proper, for a checkpoint at ckpt whose log ends at
 * end. */
static int gate(struct ppl_store *e, struct ppl_node *n, uint64_t ckpt, uint64_t end)
{
	/* MariaDB flushed its log up to the checkpoint's end before writing
	 * it: parse all of that first, so that a FILE_DELETE in the last,
	 * provisional log write has dropped its space (its file is gone and
	 * its pages need no materializing). */
	pthread_mutex_lock(&e->log_lock);
	if (end >= ckpt && e->started && !e->stopped && e->node == n) {
		if (ppl_node_log_durable(n, end) != 0)
			store_stop_ingest(e, ppl_node_error(n));
		store_after_restart_parse(e, false);
	}
	pthread_mutex_unlock(&e->log_lock);
	pthread_mutex_lock(&e->gate_lock);
	uint64_t t0 = store_now_ns(e);
	struct due d = { .e = e, .upto = ckpt };
	ppl_node_for_each_page(n, store_collect_due, &d);
	int rc = d.l.incomplete ? ENOMEM : 0; /* never pass a page it could not list */
	PPL_CRASH(GATE_ENTER);
	struct store_batch b;
	store_batch_init(&b, e, n);
	for (size_t i = 0; i < d.l.n && rc == 0; i++) {
		if (store_settle_page(e, n, (uint32_t)(d.l.keys[i] >> 32), (uint32_t)d.l.keys[i], &b) != 0 &&
		    store_elided_has(e, d.l.keys[i]))
			rc = EIO; /* an acknowledged page: the checkpoint must not pass it */
		PPL_CRASH(GATE_SETTLED);
	}
	store_batch_flush(&b);
	if (b.failed_acked)
		rc = EIO;
	free(d.l.keys);
	/* what lies before the checkpoint is now in the pool, in the data
	 * files, or marked in the pool with its records in the log, which
	 * the restart point keeps (store_wrap.c) */
	if (rc == 0)
		rc = store_restart_advance(e, n, ckpt);
	size_t m = b.written; /* this gate's own: the workers write meanwhile */
	if (m) {
		e->gate_waits++;
		e->gate_ns += store_now_ns(e) - t0;
		SLOG(e, PPL_LOG_DEBUG, "PPL: %s: checkpoint %" PRIu64 " waited for %zu page(s) to be "
			 "materialized", e->datadir, ckpt, m);
	}
	pthread_mutex_unlock(&e->gate_lock);
	if (rc == 0)
		PPL_CRASH(GATE_PASSED);
	if (rc)
		SLOG(e, PPL_LOG_CRIT, "PPL: %s: the checkpoint write (LSN %" PRIu64 ") is refused: a page it needs "
			"could not be materialized (see above); MariaDB stops on this error rather than lose "
			"the page: find why the page could not be written, then restart it", e->datadir, ckpt);
	return rc;
}

/* How long after MariaDB's first checkpoint since a restart a client's
 * replays of older page writes are still expected. */
#define REPLAY_AFTER_CHECKPOINT_NS (30 * 1000000000ull)

/* MariaDB is about to write a checkpoint: below it, a data file is
 * authoritative for every page the store did not elide (I7), and a
 * restart reads the log from it or from the store's own restart point
 * before it (store_wrap.c). Every elided page still holding records below
 * it is settled first: its records into the pool, or marked there, or
 * the page materialized; if that fails the write fails (MariaDB 10.11
 * then stops with a fatal error) rather than lose them (DESIGN I1, I3). */
int store_checkpoint_gate(struct ppl_store *e, uint64_t off, const struct iovec *iov, int iovcnt, size_t len)
{
	const struct ppl_redo_dialect *d = &ppl_dialect_mariadb_10_8;
	uint8_t blk[64];
	uint64_t at = UINT64_MAX;
	if (off == 0 || off >= d->area_start || d->checkpoint_peek > sizeof(blk))
		return 0; /* from the first byte: a log copied in (ppl_store_log_write) */
	for (int slot = 0; slot < 2 && at == UINT64_MAX; slot++)
		if (off <= d->checkpoint_off[slot] && off + len >= d->checkpoint_off[slot] + d->checkpoint_peek)
			at = d->checkpoint_off[slot] - off;
	if (at == UINT64_MAX)
		return 0;
	store_iov_copy((struct iovec *)iov, iovcnt, at, blk, d->checkpoint_peek, true);
	struct ppl_checkpoint c;
	d->peek_checkpoint(blk, &c);
	uint64_t ckpt = c.lsn, end = c.end_lsn;
	if (ckpt == 0)
		return 0;
	store_behind_drain(e); /* the log up to the checkpoint may wait in the queue */
	rcu_read_lock();
	struct ppl_node *n = store_node_of(e);
	int rc = n ? gate(e, n, ckpt, end) : 0;
	rcu_read_unlock();
	uint64_t until = UINT64_MAX;
	if (rc == 0)
		__atomic_compare_exchange_n(&e->replay_until_ns, &until, store_now_ns(e) + REPLAY_AFTER_CHECKPOINT_NS,
					    false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
	return rc;
}

/* Writes every page elided so far (d's filter: of one space or all) to
 * its data file; how many could not be. d->l is left with the pages
 * listed (the caller frees it). */
static size_t materialize_due(struct ppl_store *e, struct ppl_node *n, struct due *d)
{
	pthread_mutex_lock(&e->gate_lock);
	ppl_node_for_each_page(n, store_collect_due, d);
	size_t failed = 0;
	struct store_batch b;
	store_batch_init(&b, e, n);
	for (size_t i = 0; i < d->l.n; i++)
		if (store_materialize_page(e, n, (uint32_t)(d->l.keys[i] >> 32), (uint32_t)d->l.keys[i], &b) != 0)
			failed++;
	failed += store_batch_flush(&b);
	pthread_mutex_unlock(&e->gate_lock);
	return failed;
}

void store_disk_probe(struct ppl_store *e, struct ppl_node *n)
{
	if (__atomic_load_n(&e->disk_failing, __ATOMIC_ACQUIRE) == 0)
		return;
	/* first the pages whose slots are kept: without slots, no other page
	 * can be written */
	uint64_t kept[64];
	size_t k = e->pool ? ppl_pool_dw_kept_pages(e->pool, kept, 64) : 0;
	for (size_t i = 0; i < k; i++)
		if (store_materialize_page(e, n, (uint32_t)(kept[i] >> 32), (uint32_t)kept[i], NULL) != 0)
			return;
	if (k > 0)
		return;
	uint64_t key = 0;
	bool found = false;
	pthread_mutex_lock(&e->elided_lock);
	for (size_t i = 0; i < e->elided_cap && !found; i++)
		if (e->elided[i] > 1) {
			key = e->elided[i] - 2;
			found = true;
		}
	pthread_mutex_unlock(&e->elided_lock);
	if (!found)
		store_disk_wrote(e, "no elided page is left waiting for the disk");
	else
		store_materialize_page(e, n, (uint32_t)(key >> 32), (uint32_t)key, NULL);
}

void store_materialize_elided(struct ppl_store *e, struct ppl_node *n)
{
	struct due d = { .e = e, .upto = UINT64_MAX };
	size_t failed = materialize_due(e, n, &d);
	free(d.l.keys);
	if (failed || d.l.incomplete)
		SLOG(e, PPL_LOG_CRIT, "PPL: %s: %zu page(s) could not be materialized%s; their records stay in "
			"the pool and are put back into the index at the next ingest start", e->datadir, failed,
			d.l.incomplete ? " (out of memory listing them)" : "");
	else if (d.l.n)
		SLOG(e, PPL_LOG_EVENT, "PPL: %s: %zu page(s) kept in the pool or memory written to their data "
			 "files", e->datadir, d.l.n);
}

void ppl_store_file_leaving(struct ppl_store *e, uint64_t fileid)
{
	uint32_t space;
	if (e->pool == NULL || !store_file_space(e, fileid, &space) || !store_holds_space(e, fileid, space))
		return;
	struct due d = { .e = e, .upto = UINT64_MAX, .one_space = true, .space = space };
	size_t failed = 0;
	rcu_read_lock();
	struct ppl_node *n = store_node_of(e);
	if (n)
		failed = materialize_due(e, n, &d);
	rcu_read_unlock();
	free(d.l.keys);
	if (failed || d.l.incomplete)
		SLOG(e, PPL_LOG_CRIT, "PPL: %s: space %" PRIu32 "'s file is renamed away with %zu elided page(s) not "
			"written into it%s (see the lines above): those pages are lost to it", e->datadir, space,
			failed, d.l.incomplete ? " (out of memory listing them)" : "");
	else if (d.l.n)
		SLOG(e, PPL_LOG_EVENT, "PPL: %s: space %" PRIu32 "'s file is renamed away: its %zu elided page(s) "
			 "were written into it first", e->datadir, space, d.l.n);
}

int ppl_store_forget_space(struct ppl_store *e, uint32_t space, char *msg, size_t msglen)
{
	char path[4096];
	uint64_t ino;
	if (e->dd == NULL) {
		snprintf(msg, msglen, "no datadir is followed: there is nothing to forget");
		return -1;
	}
	bool named = ppl_datadir_path(e->dd, space, path, sizeof(path)) == 0;
	if (named && ppl_datadir_check(e->dd, space, &ino) == 0) {
		snprintf(msg, msglen, "space %" PRIu32 "'s file %s is there: nothing is forgotten (its kept pages "
			 "are written into it)", space, path);
		return -1;
	}
	SLOG(e, PPL_LOG_WARN, "PPL: %s: the operator says space %" PRIu32 "'s file (%s) was removed on purpose "
		"(ppl-inspect live forget-space): what the storage node kept of it is dropped", e->datadir, space,
		named ? path : "no file known");
	if (store_drop_space(e, space, "forgotten at the operator's request"))
		snprintf(msg, msglen, "space %" PRIu32 " forgotten (%s): its records, kept pages and elided pages "
			 "are dropped (the storage node's log says how many)", space, named ? path : "no file known");
	else
		snprintf(msg, msglen, "space %" PRIu32 " forgotten (%s): the storage node held nothing of it",
			 space, named ? path : "no file known");
	return 0;
}

/* ---- the elision decision ---------------------------------------------------- */

int store_read_base(void *arg, uint32_t space, uint32_t page_no, uint8_t *frame)
{
	struct ppl_store *e = arg;
	return ppl_datadir_read_page(e->dd, space, page_no, frame, e->page_size);
}

uint64_t store_cache_resume(void *arg, uint32_t space, uint32_t page_no, uint64_t base_lsn, uint32_t base_sum,
			    uint64_t upto, uint8_t *frame)
{
	struct ppl_store *e = arg;
	return e->cache ? ppl_page_cache_get_before(e->cache, space, page_no, base_lsn, base_sum, upto, frame) : 0;
}

/* The elision decision: yes only for the exact page (LSN and checksum) the
 * index can rebuild from the data file and the log. The log up to the
 * page's LSN is durable and parsed: InnoDB writes a page only after its
 * log is flushed, and log writes are parsed before they are acknowledged. */
static unsigned decide_page(struct ppl_store *e, struct ppl_node *n, const struct ppl_elision_page *pg)
{
	if (STOPPED(e) || e->dd == NULL)
		return PPL_ELIDE_NACK_NOT_DURABLE;
	uint64_t other = __atomic_load_n(&e->other_log_ns, __ATOMIC_RELAXED);
	if (other != 0 && store_now_ns(e) - other < 2 * OTHER_LOG_QUIET_NS)
		return PPL_ELIDE_NACK_OTHER; /* the page may be of that other datadir */
	/* a page it could not materialize through a doublewrite slot is
	 * never elided */
	if (pg->page_size != e->page_size || pg->page_size > e->dw_page_size)
		return PPL_ELIDE_NACK_PAGE_SIZE;
	/* the question itself says the log is durable up to its LSN; an
	 * allowed client could still ask with any LSN, which must never make
	 * old buffer contents final or call an intact log damaged */
	if (!store_log_vouched(e, n, pg->lsn))
		return PPL_ELIDE_NACK_NOT_DURABLE;
	/* not while the disk cannot take materializations: a page elided
	 * then would live only in its records for as long as the disk fails */
	if (disk_refuses(e))
		return PPL_ELIDE_NACK_BUSY;
	if (store_pool_failed(e))
		return PPL_ELIDE_NACK_INTERNAL;
	/* only pages it could materialize before a checkpoint passes them */
	/* (a file the store keeps open: one moved away meanwhile is found
	 * by the checkpoint's settle, which looks at the directory, refuses
	 * the checkpoint and keeps the page) */
	uint64_t ino;
	if (ppl_datadir_known(e->dd, pg->space, &ino) != 0)
		return PPL_ELIDE_NACK_UNKNOWN_FILE;
	/* Page 0 of a file whose own page 0 does not name its space yet (a
	 * file InnoDB just created: its header exists only in the buffer
	 * pool and the log) is not elided: MariaDB's write names the file.
	 * Elided, it would have to be written into the file at the next
	 * checkpoint, holding MariaDB's checkpoint write (settle), because a
	 * restart finds a space's file by its page 0. */
	if (pg->page_no == 0) {
		uint8_t *p0 = aligned_alloc(4096, e->page_size);
		bool named = p0 != NULL && store_read_base(e, pg->space, 0, p0) == 0 &&
			     names_space(p0, e->page_size, pg->space);
		free(p0);
		if (!named)
			return PPL_ELIDE_NACK_UNKNOWN_FILE;
	}
	/* recorded before the answer leaves: a checkpoint write can only
	 * follow the elided write */
	uint64_t key = (uint64_t)pg->space << 32 | pg->page_no;
	bool was = store_elided_has(e, key);
	if (!was && !store_elided_put(e, key, true))
		return PPL_ELIDE_NACK_INTERNAL; /* out of memory: it could not be materialized */
	/* the page the answer rebuilds goes to the cache for its next read
	 * (ppl_node_rebuilt); the generation read before the records are */
	uint64_t gen = e->cache ? ppl_page_cache_generation(e->cache) : 0;
	struct ppl_node_rebuilt rb = { .frame = e->cache ? aligned_alloc(4096, e->page_size) : NULL,
				       .resume = store_cache_resume, .resume_arg = e };
	unsigned v = ppl_node_elide_rebuilt(n, pg->space, pg->page_no, pg->lsn, pg->checksum, store_read_base, e,
					    rb.frame ? &rb : NULL);
	if (v == PPL_ELIDE_ACK && rb.filled)
		ppl_page_cache_put(e->cache, gen, pg->space, pg->page_no, rb.base_lsn, rb.base_sum, pg->lsn, rb.frame);
	free(rb.frame);
	/* a page elided before stays elided: that older version still
	 * exists only in its records until MariaDB's write of this one */
	if (v != PPL_ELIDE_ACK && !was)
		store_elided_put(e, key, false);
	return v;
}

unsigned ppl_store_elide(struct ppl_store *e, const struct ppl_elision_page *pg)
{
	uint64_t t0 = store_now_ns(e);
	store_behind_drain_to(e, pg->lsn); /* the log writes that carry the page's records */
	rcu_read_lock();
	struct ppl_node *n = store_node_of(e);
	unsigned v = n ? decide_page(e, n, pg) : PPL_ELIDE_NACK_NOT_DURABLE;
	rcu_read_unlock();
	if (v == PPL_ELIDE_ACK)
		PPL_CRASH(ELISION_ACK);
	ppl_histogram_add(&e->answer_us, (store_now_ns(e) - t0) / 1000);
	return v;
}
