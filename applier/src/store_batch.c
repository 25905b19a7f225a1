/* Materializations written together: every page still goes through a
 * doublewrite slot of its own (I5), but the data files are synced once
 * per file for the whole batch instead of once per page. A checkpoint
 * that needs a hundred pages of three files then waits for three syncs,
 * not a hundred: the sync, not the write, is what a materialization costs
 * on a disk.
 *
 * Why it is safe to drop a page's records before its file is synced by
 * another thread's hand: a staged slot is durable in the pool from the
 * moment ppl_pool_dw_stage returns, and opening the pool after a crash
 * copies every staged slot newer than its file's page back into the file
 * (pool_dw_recover). The slot is released only after the sync, so the
 * page is durable throughout -- in the slot, then in its file.
 *
 * Slots: a batch holds up to cap of them and never waits for another
 * while it holds its own (ppl_pool_dw_try_stage; on "all in use" it
 * writes what it has first), so batches of several threads cannot wait
 * on each other. */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "ppl/crash.h"
#include "ppl/datadir.h"
#include "ppl/node.h"
#include "ppl/pool.h"
#include "ppl/store.h"
#include "store_internal.h"

void store_batch_init(struct store_batch *b, struct ppl_store *e, struct ppl_node *n)
{
	memset(b, 0, sizeof(*b));
	b->e = e;
	b->n = n;
	struct ppl_pool_header h;
	ppl_pool_get_header(e->pool, &h);
	/* half the slots at most: single-page materializations (a read of
	 * a hot page, a restart) keep finding one */
	b->cap = h.dw_slots / 2;
	if (b->cap > STORE_BATCH_MAX)
		b->cap = STORE_BATCH_MAX;
	if (b->cap < 1)
		b->cap = 1;
}

/* The batch's open descriptor of the space's file ino; -1 with errno. */
static int file_of(struct store_batch *b, uint32_t space, uint64_t ino, unsigned *idx)
{
	for (unsigned i = 0; i < b->nfiles; i++)
		if (b->file[i].space == space && b->file[i].ino == ino) {
			*idx = i;
			return b->file[i].fd;
		}
	int fd = ppl_datadir_open_write(b->e->dd, space, ino);
	if (fd < 0)
		return -1;
	*idx = b->nfiles;
	b->file[b->nfiles++] = (struct store_batch_file){ .space = space, .ino = ino, .fd = fd };
	return fd;
}

/* A page whose data-file write or sync failed: its slot is kept (it is the
 * page's newest durable image; older ones of the page go) and its records
 * stay, as for a single materialization. */
static void page_failed(struct store_batch *b, uint32_t space, uint32_t page_no, int slot, const char *what, int err)
{
	struct ppl_store *e = b->e;
	if (store_disk_failed(e, space, page_no, *what ? "a sync" : "a write", err))
		SLOG(e, PPL_LOG_CRIT, "PPL: %s: page %" PRIu32 ":%" PRIu32 " could not be written to its file: "
			"%s%s; its doublewrite slot is kept", e->datadir, space, page_no, what, strerror(err));
	ppl_pool_dw_keep(e->pool, slot);
	ppl_pool_dw_release_page(e->pool, space, page_no, slot);
}

size_t store_batch_flush(struct store_batch *b)
{
	struct ppl_store *e = b->e;
	b->checked = false; /* the next pages look at the directory again */
	int err[STORE_BATCH_MAX];
	for (unsigned i = 0; i < b->nfiles; i++) {
		errno = 0;
		err[i] = ppl_datadir_sync_close(e->dd, b->file[i].fd, true) == 0 ? 0 : (errno ? errno : EIO);
	}
	if (b->nfiles)
		PPL_CRASH(PAGE_SYNCED);
	size_t done = 0;
	for (size_t i = 0; i < b->npages; i++) {
		struct store_batch_page *p = &b->page[i];
		if (err[p->file]) {
			page_failed(b, p->space, p->page_no, p->slot, "its sync failed, ", err[p->file]);
			if (store_elided_has(e, (uint64_t)p->space << 32 | p->page_no))
				b->failed_acked++;
			b->failed++;
		} else {
			ppl_pool_dw_release(e->pool, p->slot);
			if (p->kept) /* the file now durably holds a newer image */
				ppl_pool_dw_release_page(e->pool, p->space, p->page_no, -1);
			store_page_settled(e, b->n, p->frame);
			done++;
		}
		free(p->frame);
	}
	__atomic_add_fetch(&e->materialized, done, __ATOMIC_RELAXED);
	if (done)
		store_disk_wrote(e, "a page was written into its file again");
	b->npages = 0;
	b->nfiles = 0;
	return b->failed;
}

int store_batch_write(struct store_batch *b, uint32_t space, uint32_t page_no, uint64_t ino, uint8_t *frame, bool kept)
{
	struct ppl_store *e = b->e;
	size_t ps = e->page_size;
	char msg[256];
	int slot = ppl_pool_dw_try_stage(e->pool, space, page_no, frame, ps, msg, sizeof(msg));
	if (slot == -2) {
		store_batch_flush(b);
		slot = ppl_pool_dw_stage(e->pool, space, page_no, frame, ps, msg, sizeof(msg));
	}
	if (slot < 0) {
		if (store_no_slot_tell(e))
			SLOG(e, PPL_LOG_CRIT, "PPL: %s: page %" PRIu32 ":%" PRIu32 ": %s", e->datadir, space,
				page_no, msg);
		free(frame);
		return -1;
	}
	unsigned f = 0;
	errno = 0;
	if (file_of(b, space, ino, &f) < 0 || ppl_datadir_put_page(e->dd, b->file[f].fd, page_no, frame, ps) != 0) {
		int err = errno ? errno : EIO;
		page_failed(b, space, page_no, slot, "", err);
		free(frame);
		return -1;
	}
	b->written++;
	b->page[b->npages++] = (struct store_batch_page){ .space = space, .page_no = page_no, .slot = slot,
							   .kept = kept, .file = f, .frame = frame };
	if (b->npages == b->cap)
		store_batch_flush(b);
	return 0;
}
