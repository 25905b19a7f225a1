/* A chained hash table, grown by doubling; InnoDB data directories hold at
 * most tens of thousands of files, so one mutex is enough. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ppl_classmap.h"

struct ppl_classmap_entry {
	struct ppl_classmap_entry *next;
	enum ppl_file_class cls;
	char *name;
	size_t keylen;
	unsigned char key[];
};

static uint64_t hash(const void *key, size_t len)
{
	const unsigned char *p = key;
	uint64_t h = 1469598103934665603ull; /* FNV-1a */

	for (size_t i = 0; i < len; i++)
		h = (h ^ p[i]) * 1099511628211ull;
	return h;
}

int ppl_classmap_init(struct ppl_classmap *m)
{
	m->nbuckets = 256;
	m->count = 0;
	m->buckets = calloc(m->nbuckets, sizeof(*m->buckets));
	if (m->buckets == NULL)
		return -1;
	pthread_mutex_init(&m->lock, NULL);
	return 0;
}

void ppl_classmap_destroy(struct ppl_classmap *m)
{
	for (size_t i = 0; m->buckets && i < m->nbuckets; i++) {
		struct ppl_classmap_entry *e = m->buckets[i], *next;

		for (; e; e = next) {
			next = e->next;
			free(e->name);
			free(e);
		}
	}
	free(m->buckets);
	m->buckets = NULL;
	pthread_mutex_destroy(&m->lock);
}

static struct ppl_classmap_entry **find(struct ppl_classmap *m, const void *key, size_t keylen)
{
	struct ppl_classmap_entry **pp = &m->buckets[hash(key, keylen) & (m->nbuckets - 1)];

	for (; *pp; pp = &(*pp)->next)
		if ((*pp)->keylen == keylen && memcmp((*pp)->key, key, keylen) == 0)
			break;
	return pp;
}

static void grow(struct ppl_classmap *m)
{
	size_t n = m->nbuckets * 2;
	struct ppl_classmap_entry **b = calloc(n, sizeof(*b));

	if (b == NULL)
		return; /* keep the longer chains: still correct */
	for (size_t i = 0; i < m->nbuckets; i++) {
		struct ppl_classmap_entry *e = m->buckets[i], *next;

		for (; e; e = next) {
			size_t j = hash(e->key, e->keylen) & (n - 1);

			next = e->next;
			e->next = b[j];
			b[j] = e;
		}
	}
	free(m->buckets);
	m->buckets = b;
	m->nbuckets = n;
}

void ppl_classmap_remove(struct ppl_classmap *m, const struct gsh_buffdesc *k)
{
	const void *key = k->addr;
	size_t keylen = k->len;
	struct ppl_classmap_entry **pp, *e;

	pthread_mutex_lock(&m->lock);
	pp = find(m, key, keylen);
	e = *pp;
	if (e) {
		*pp = e->next;
		m->count--;
		free(e->name);
		free(e);
	}
	pthread_mutex_unlock(&m->lock);
}

void ppl_classmap_set(struct ppl_classmap *m, const struct gsh_buffdesc *k, enum ppl_file_class cls,
		      const char *name)
{
	const void *key = k->addr;
	size_t keylen = k->len;
	struct ppl_classmap_entry **pp, *e;
	char *copy;

	if (cls == PPL_FILE_UNRESOLVED)
		return;
	copy = name ? strdup(name) : NULL;
	pthread_mutex_lock(&m->lock);
	pp = find(m, key, keylen);
	e = *pp;
	if (e == NULL) {
		e = malloc(sizeof(*e) + keylen);
		if (e == NULL) {
			/* The handle keeps its class; only a later by-handle
			 * lookup would see it as unresolved. */
			pthread_mutex_unlock(&m->lock);
			free(copy);
			return;
		}
		e->next = NULL;
		e->name = NULL;
		e->keylen = keylen;
		memcpy(e->key, key, keylen);
		*pp = e;
		if (++m->count > m->nbuckets * 2)
			grow(m);
	}
	e->cls = cls;
	free(e->name);
	e->name = copy;
	pthread_mutex_unlock(&m->lock);
}

enum ppl_file_class ppl_classmap_get(struct ppl_classmap *m, const struct gsh_buffdesc *k,
				     char *name_buf, size_t len)
{
	const void *key = k->addr;
	size_t keylen = k->len;
	struct ppl_classmap_entry *e;
	enum ppl_file_class cls = PPL_FILE_UNRESOLVED;

	if (len)
		name_buf[0] = '\0';
	pthread_mutex_lock(&m->lock);
	e = *find(m, key, keylen);
	if (e) {
		cls = e->cls;
		if (e->name && len)
			snprintf(name_buf, len, "%s", e->name);
	}
	pthread_mutex_unlock(&m->lock);
	return cls;
}
