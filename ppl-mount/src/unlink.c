#include "unlink.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "log.h"

#define RELEASE_WAIT_MS 500

static struct pool *pool;
static atomic_uint hidden_seq;

void unlink_init(struct pool *p)
{
	pool = p;
}

static int remove_name(const struct fh *dir, const char *name)
{
	REMOVE3args a = { 0 };
	struct reply r = { 0 };

	fh_to_nfs(dir, &a.object.dir);
	a.object.name = (char *)name;
	return pool_call(pool, P_REMOVE, &a, &r);
}

/* The kernel sends RELEASE asynchronously after the last close(), so a
 * program that closes a file and unlinks it at once (rm -rf, DROP TABLE)
 * can have its UNLINK overtake the RELEASE, which is already queued. Hiding
 * such a file would leave a name behind and make rmdir fail, so wait a
 * little for the release first. Called with n->lock held. The kernel pins
 * the inode being unlinked, so the node cannot be forgotten meanwhile. */
static void wait_for_release(struct node *n)
{
	struct timespec until;

	clock_gettime(CLOCK_MONOTONIC, &until);
	until.tv_nsec += RELEASE_WAIT_MS * 1000000L;
	until.tv_sec += until.tv_nsec / 1000000000L;
	until.tv_nsec %= 1000000000L;
	while (n->open_count > 0)
		if (pthread_cond_timedwait(&n->closed, &n->lock, &until) != 0)
			break;
}

int unlink_name(const struct fh *dir, const char *name)
{
	LOOKUP3args la = { 0 };
	struct reply lr = { 0 };

	fh_to_nfs(dir, &la.what.dir);
	la.what.name = (char *)name;
	int e = pool_call(pool, P_LOOKUP, &la, &lr);
	if (e)
		return e;
	struct node *n = lr.has_fh ? nodes_lock_if_open(&lr.fh) : NULL;
	if (n && !n->hidden)
		wait_for_release(n);
	if (!n || n->hidden || n->open_count == 0) {
		/* Not open, or already hidden under another name (this is
		 * one more hard link): plain REMOVE. */
		if (n)
			pthread_mutex_unlock(&n->lock);
		return remove_name(dir, name);
	}
	char hidden[sizeof n->hidden_name];
	snprintf(hidden, sizeof hidden, ".ppl-mount-hidden-%llx-%x",
		 (unsigned long long)(lr.has_attr ? lr.attr.fileid : 0),
		 atomic_fetch_add(&hidden_seq, 1));
	RENAME3args ra = { 0 };
	struct reply rr = { 0 };
	fh_to_nfs(dir, &ra.from.dir);
	ra.from.name = (char *)name;
	fh_to_nfs(dir, &ra.to.dir);
	ra.to.name = hidden;
	e = pool_call(pool, P_RENAME, &ra, &rr);
	if (!e) {
		n->hidden = 1;
		n->hidden_dir = *dir;
		memcpy(n->hidden_name, hidden, sizeof hidden);
	}
	pthread_mutex_unlock(&n->lock);
	return e;
}

void open_count_up(struct node *n)
{
	pthread_mutex_lock(&n->lock);
	n->open_count++;
	pthread_mutex_unlock(&n->lock);
}

int open_count_down(struct node *n)
{
	struct fh dir;
	char name[sizeof n->hidden_name];
	int remove = 0;

	pthread_mutex_lock(&n->lock);
	if (--n->open_count == 0)
		pthread_cond_broadcast(&n->closed);
	if (n->open_count == 0 && n->hidden) {
		n->hidden = 0;
		dir = n->hidden_dir;
		memcpy(name, n->hidden_name, sizeof name);
		remove = 1;
	}
	pthread_mutex_unlock(&n->lock);
	if (remove) {
		int e = remove_name(&dir, name);
		if (e && e != -ENOENT)
			log_msg("cannot remove hidden file %s of an unlinked open file: %s; "
				"delete it by hand", name, strerror(-e));
	}
	return remove;
}
