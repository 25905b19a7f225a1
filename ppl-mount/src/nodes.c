#include "nodes.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "log.h"
#include "writeback.h"

#define BUCKETS 65536

static pthread_mutex_t table_lock = PTHREAD_MUTEX_INITIALIZER;
static struct node *table[BUCKETS];
static struct node root;

static uint32_t hash_fh(const struct fh *fh)
{
	uint32_t h = 2166136261u;	/* FNV-1a */

	for (uint32_t i = 0; i < fh->len; i++)
		h = (h ^ fh->data[i]) * 16777619u;
	return h % BUCKETS;
}

static int same_fh(const struct fh *a, const struct fh *b)
{
	return a->len == b->len && memcmp(a->data, b->data, a->len) == 0;
}

static void node_init(struct node *n, const struct fh *fh)
{
	memset(n, 0, sizeof *n);
	n->fh = *fh;
	pthread_rwlock_init(&n->io_lock, NULL);
	pthread_mutex_init(&n->flush_lock, NULL);
	pthread_mutex_init(&n->lock, NULL);
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&n->closed, &ca);
	pthread_condattr_destroy(&ca);
}

void nodes_init(const struct fh *fh)
{
	node_init(&root, fh);
	root.nlookup = 1;
}

struct node *nodes_root(void)
{
	return &root;
}

struct node *nodes_get(const struct fh *fh)
{
	if (same_fh(fh, &root.fh))
		return &root;
	uint32_t h = hash_fh(fh);
	pthread_mutex_lock(&table_lock);
	struct node *n = table[h];
	while (n && !same_fh(&n->fh, fh))
		n = n->next;
	if (!n) {
		n = malloc(sizeof *n);
		if (!n) {
			pthread_mutex_unlock(&table_lock);
			return NULL;
		}
		node_init(n, fh);
		n->next = table[h];
		table[h] = n;
	}
	n->nlookup++;
	pthread_mutex_unlock(&table_lock);
	return n;
}

void nodes_forget(struct node *n, uint64_t count)
{
	if (n == &root)
		return;
	pthread_mutex_lock(&table_lock);
	n->nlookup = n->nlookup > count ? n->nlookup - count : 0;
	if (n->nlookup > 0) {
		pthread_mutex_unlock(&table_lock);
		return;
	}
	struct node **pp = &table[hash_fh(&n->fh)];
	while (*pp != n)
		pp = &(*pp)->next;
	*pp = n->next;
	pthread_mutex_unlock(&table_lock);

	/* The kernel flushes on every close, so dirty data here means a
	 * COMMIT failed and nobody is left to retry it: say so loudly. */
	size_t lost = writeback_discard(n);
	if (lost)
		log_msg("file handle dropped with %zu bytes the server never committed "
			"(an earlier fsync/close already reported EIO)", lost);
	pthread_rwlock_destroy(&n->io_lock);
	pthread_mutex_destroy(&n->flush_lock);
	pthread_mutex_destroy(&n->lock);
	pthread_cond_destroy(&n->closed);
	free(n);
}

struct node *nodes_lock_if_open(const struct fh *fh)
{
	struct node *n = &root;

	pthread_mutex_lock(&table_lock);
	if (!same_fh(fh, &root.fh)) {
		n = table[hash_fh(fh)];
		while (n && !same_fh(&n->fh, fh))
			n = n->next;
	}
	if (n) {
		/* Taken under the table lock, so forget cannot free it meanwhile. */
		pthread_mutex_lock(&n->lock);
		if (n->open_count == 0) {
			pthread_mutex_unlock(&n->lock);
			n = NULL;
		}
	}
	pthread_mutex_unlock(&table_lock);
	return n;
}

struct node *node_of(fuse_ino_t ino)
{
	return ino == FUSE_ROOT_ID ? &root : (struct node *)(uintptr_t)ino;
}

fuse_ino_t ino_of(const struct node *n)
{
	return n == &root ? FUSE_ROOT_ID : (fuse_ino_t)(uintptr_t)n;
}
