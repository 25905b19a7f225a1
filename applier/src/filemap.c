/* fileid -> space id. See ppl/filemap.h.
 *
 * Writers replace whole entries (cds_lfht_add_replace) and retire the old
 * one after a grace period, so a reader never sees an entry change under
 * it; an entry's fields are written before it is published. */
#include <stdlib.h>

#include <urcu-bp.h>
#include <urcu/rculfhash.h>

#include "ppl/filemap.h"
#include "ppl/hash.h"

struct entry {
	struct cds_lfht_node node;
	uint64_t fileid;
	uint32_t space;
	struct rcu_head rcu;
};

struct ppl_filemap {
	struct cds_lfht *ht;
	unsigned long retired; /* call_rcu callbacks queued, for free's barrier */
};

static int match(struct cds_lfht_node *node, const void *key)
{
	return caa_container_of(node, struct entry, node)->fileid == *(const uint64_t *)key;
}

static void free_cb(struct rcu_head *head)
{
	free(caa_container_of(head, struct entry, rcu));
}

static void retire(struct ppl_filemap *m, struct cds_lfht_node *node)
{
	__atomic_add_fetch(&m->retired, 1, __ATOMIC_RELAXED);
	call_rcu(&caa_container_of(node, struct entry, node)->rcu, free_cb);
}

struct ppl_filemap *ppl_filemap_new(void)
{
	struct ppl_filemap *m = calloc(1, sizeof(*m));
	if (m == NULL)
		return NULL;
	m->ht = cds_lfht_new(64, 64, 0, CDS_LFHT_AUTO_RESIZE | CDS_LFHT_ACCOUNTING, NULL);
	if (m->ht == NULL) {
		free(m);
		return NULL;
	}
	return m;
}

void ppl_filemap_free(struct ppl_filemap *m)
{
	if (m == NULL)
		return;
	ppl_filemap_clear(m);
	/* the retired entries' callbacks must not outlive the code that
	 * queued them (the FSAL plugin may be unloaded next) */
	if (__atomic_load_n(&m->retired, __ATOMIC_ACQUIRE))
		rcu_barrier();
	cds_lfht_destroy(m->ht, NULL);
	free(m);
}

int ppl_filemap_set(struct ppl_filemap *m, uint64_t fileid, uint32_t space)
{
	uint32_t known;
	if (ppl_filemap_get(m, fileid, &known) && known == space)
		return 0;
	struct entry *e = malloc(sizeof(*e));
	if (e == NULL)
		return -1;
	e->fileid = fileid;
	e->space = space;
	cds_lfht_node_init(&e->node);
	rcu_read_lock();
	struct cds_lfht_node *old = cds_lfht_add_replace(m->ht, ppl_hash64(fileid), match, &fileid, &e->node);
	/* A concurrent set of the same pair can have won the race: still
	 * "new" for the caller, whose follow-up (binding the file in the
	 * datadir) is idempotent. */
	if (old)
		retire(m, old);
	rcu_read_unlock();
	return 1;
}

bool ppl_filemap_get(struct ppl_filemap *m, uint64_t fileid, uint32_t *space)
{
	struct cds_lfht_iter it;
	rcu_read_lock();
	cds_lfht_lookup(m->ht, ppl_hash64(fileid), match, &fileid, &it);
	struct cds_lfht_node *n = cds_lfht_iter_get_node(&it);
	if (n)
		*space = caa_container_of(n, struct entry, node)->space;
	rcu_read_unlock();
	return n != NULL;
}

bool ppl_filemap_remove(struct ppl_filemap *m, uint64_t fileid, uint32_t *space)
{
	struct cds_lfht_iter it;
	bool removed = false;
	rcu_read_lock();
	cds_lfht_lookup(m->ht, ppl_hash64(fileid), match, &fileid, &it);
	struct cds_lfht_node *n = cds_lfht_iter_get_node(&it);
	if (n && cds_lfht_del(m->ht, n) == 0) {
		if (space)
			*space = caa_container_of(n, struct entry, node)->space;
		retire(m, n);
		removed = true;
	}
	rcu_read_unlock();
	return removed;
}

void ppl_filemap_clear(struct ppl_filemap *m)
{
	struct cds_lfht_iter it;
	struct cds_lfht_node *n;
	rcu_read_lock();
	cds_lfht_for_each(m->ht, &it, n) {
		if (cds_lfht_del(m->ht, n) == 0)
			retire(m, n);
	}
	rcu_read_unlock();
}

size_t ppl_filemap_count(struct ppl_filemap *m)
{
	long before, after;
	unsigned long count;
	rcu_read_lock();
	cds_lfht_count_nodes(m->ht, &before, &count, &after);
	rcu_read_unlock();
	return (size_t)count;
}
