#include "writeback.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"

struct extent {
	struct extent *next;
	uint64_t off;
	size_t len;
	int verf_known;			/* 0: chunks came back with different verifiers */
	char verf[NFS3_WRITEVERFSIZE];
	char data[];
};

static struct pool *pool;
static int sync_writes;
static size_t max_dirty;
static atomic_ulong resends;

void writeback_init(struct pool *p, int sync, size_t maxd)
{
	pool = p;
	sync_writes = sync;
	max_dirty = maxd;
}

unsigned long writeback_resends(void)
{
	return atomic_load(&resends);
}

/* Sends [off, off+len) in wsize pieces, all in flight at once, then
 * finishes any piece the server accepted only partly. On success stores
 * whether every piece came back FILE_SYNC, and the common verifier. */
static int send_range(const struct fh *fh, const char *buf, size_t len, uint64_t off,
		      int stable, int *all_stable, int *verf_known, char *verf)
{
	size_t ws = pool_wsize(pool);
	size_t n = len ? (len + ws - 1) / ws : 0;
	WRITE3args *args = calloc(n ? n : 1, sizeof *args);
	struct reply *rep = calloc(n ? n : 1, sizeof *rep);
	struct call *calls = calloc(n ? n : 1, sizeof *calls);
	int e = 0;

	if (!args || !rep || !calls) {
		e = -ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < n; i++) {
		size_t piece = len - i * ws < ws ? len - i * ws : ws;
		fh_to_nfs(fh, &args[i].file);
		args[i].offset = off + i * ws;
		args[i].count = (count3)piece;
		args[i].stable = stable;
		args[i].data.data_len = (u_int)piece;
		args[i].data.data_val = (char *)buf + i * ws;
		calls[i] = (struct call){ .proc = P_WRITE, .args = &args[i], .reply = &rep[i] };
	}
	e = pool_run(pool, calls, (int)n);
	if (e)
		goto out;
	*all_stable = 1;
	*verf_known = 1;
	int have_verf = 0;
	for (size_t i = 0; i < n && !e; i++) {
		e = nfs3_errno(rep[i].status);
		if (e)
			break;
		if (rep[i].count > args[i].count) {
			e = -EIO;
			break;
		}
		if (rep[i].committed != FILE_SYNC) {
			*all_stable = 0;
			if (have_verf && memcmp(verf, rep[i].verf, NFS3_WRITEVERFSIZE) != 0)
				*verf_known = 0;
			memcpy(verf, rep[i].verf, NFS3_WRITEVERFSIZE);
			have_verf = 1;
		}
		if (rep[i].count < args[i].count) {
			/* A short WRITE is legal; send the rest on its own. */
			int st, vk;
			char v[NFS3_WRITEVERFSIZE];
			size_t done = rep[i].count;
			if (done == 0) {
				e = -EIO;	/* no progress: don't loop forever */
				break;
			}
			e = send_range(fh, args[i].data.data_val + done, args[i].count - done,
				       args[i].offset + done, stable, &st, &vk, v);
			if (!e && !st) {
				*all_stable = 0;
				if (!vk || (have_verf && memcmp(verf, v, NFS3_WRITEVERFSIZE) != 0))
					*verf_known = 0;
				memcpy(verf, v, NFS3_WRITEVERFSIZE);
				have_verf = 1;
			}
		}
	}
out:
	free(args);
	free(rep);
	free(calls);
	return e;
}

static void append(struct node *n, struct extent *head, struct extent *tail, size_t bytes)
{
	if (!head)
		return;
	if (n->dirty_tail)
		n->dirty_tail->next = head;
	else
		n->dirty = head;
	n->dirty_tail = tail;
	n->dirty_bytes += bytes;
}

ssize_t writeback_write(struct node *n, const char *buf, size_t size, off_t off)
{
	int all_stable = 0, verf_known = 0;
	char verf[NFS3_WRITEVERFSIZE];

	pthread_rwlock_rdlock(&n->io_lock);
	int e = send_range(&n->fh, buf, size, (uint64_t)off, sync_writes ? FILE_SYNC : UNSTABLE,
			   &all_stable, &verf_known, verf);
	if (!e && !all_stable) {
		struct extent *x = malloc(sizeof *x + size);
		if (!x) {
			e = -ENOMEM;
		} else {
			x->next = NULL;
			x->off = (uint64_t)off;
			x->len = size;
			x->verf_known = verf_known;
			memcpy(x->verf, verf, sizeof verf);
			memcpy(x->data, buf, size);
			pthread_mutex_lock(&n->lock);
			append(n, x, x, size);
			pthread_mutex_unlock(&n->lock);
		}
	}
	pthread_rwlock_unlock(&n->io_lock);
	if (e)
		return e;

	pthread_mutex_lock(&n->lock);
	size_t dirty = n->dirty_bytes;
	pthread_mutex_unlock(&n->lock);
	if (dirty > max_dirty) {
		e = writeback_flush(n);
		if (e)
			return e;
	}
	return (ssize_t)size;
}

static void free_list(struct extent *x)
{
	while (x) {
		struct extent *next = x->next;
		free(x);
		x = next;
	}
}

static size_t list_bytes(const struct extent *x, const struct extent **tail)
{
	size_t b = 0;

	*tail = NULL;
	for (; x; x = x->next) {
		b += x->len;
		*tail = x;
	}
	return b;
}

/* Puts a detached list back in front of anything written since. */
static void reattach(struct node *n, struct extent *list)
{
	const struct extent *tail;
	size_t bytes = list_bytes(list, &tail);

	if (!list)
		return;
	pthread_mutex_lock(&n->lock);
	((struct extent *)tail)->next = n->dirty;
	if (!n->dirty)
		n->dirty_tail = (struct extent *)tail;
	n->dirty = list;
	n->dirty_bytes += bytes;
	pthread_mutex_unlock(&n->lock);
}

static struct extent *detach(struct node *n)
{
	pthread_mutex_lock(&n->lock);
	struct extent *list = n->dirty;
	n->dirty = n->dirty_tail = NULL;
	n->dirty_bytes = 0;
	pthread_mutex_unlock(&n->lock);
	return list;
}

static int commit(struct node *n, char *verf)
{
	COMMIT3args a = { 0 };
	struct reply r = { 0 };

	fh_to_nfs(&n->fh, &a.file);
	int e = pool_call(pool, P_COMMIT, &a, &r);
	if (!e)
		memcpy(verf, r.verf, NFS3_WRITEVERFSIZE);
	return e;
}

/* The server lost (or may have lost) uncommitted data: write everything
 * kept again, oldest first, FILE_SYNC. Runs with io_lock held exclusively
 * so that no concurrent WRITE can be overtaken by an older re-sent one. */
static int resend(struct node *n, struct extent *older)
{
	const struct extent *tail;
	struct extent *newer = detach(n);
	struct extent *all = older;

	if (all) {
		list_bytes(all, &tail);
		((struct extent *)tail)->next = newer;
	} else {
		all = newer;
	}
	size_t bytes = list_bytes(all, &tail);
	log_msg("server write verifier changed (server restarted?): re-sending %zu uncommitted bytes",
		bytes);
	for (struct extent *x = all; x; x = x->next) {
		int st, vk;
		char v[NFS3_WRITEVERFSIZE];
		int e = send_range(&n->fh, x->data, x->len, x->off, FILE_SYNC, &st, &vk, v);
		if (!e && !st)
			e = -EIO;	/* the server ignored FILE_SYNC */
		if (e) {
			reattach(n, all);
			return e;
		}
	}
	atomic_fetch_add(&resends, 1);
	free_list(all);
	return 0;
}

int writeback_flush(struct node *n)
{
	pthread_mutex_lock(&n->flush_lock);
	struct extent *list = detach(n);
	int e = 0;

	if (!list)
		goto out;
	char verf[NFS3_WRITEVERFSIZE];
	e = commit(n, verf);
	if (e == -ESTALE) {
		/* The file is gone on the server; its data cannot matter or
		 * be committed, but the caller must still hear about it. */
		free_list(list);
		goto out;
	}
	if (e) {
		reattach(n, list);
		goto out;
	}
	int lost = 0;
	for (struct extent *x = list; x && !lost; x = x->next)
		lost = !x->verf_known || memcmp(x->verf, verf, sizeof verf) != 0;
	if (!lost) {
		free_list(list);
		goto out;
	}
	pthread_rwlock_wrlock(&n->io_lock);
	e = resend(n, list);
	pthread_rwlock_unlock(&n->io_lock);
out:
	pthread_mutex_unlock(&n->flush_lock);
	return e;
}

size_t writeback_discard(struct node *n)
{
	const struct extent *tail;
	struct extent *list = detach(n);
	size_t bytes = list_bytes(list, &tail);

	free_list(list);
	return bytes;
}
