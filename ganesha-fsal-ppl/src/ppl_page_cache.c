/* The rebuilt-page cache. See ppl_page_cache.h. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "ppl_page_cache.h"

#define LOCKS 256u

struct slot {
	uint64_t key;                  /* (space << 32 | page) + 1; 0: empty */
	uint64_t base_lsn, result_lsn;
};

struct ppl_page_cache {
	size_t page_size, nslots;
	struct slot *slots;
	uint8_t *pages;
	pthread_mutex_t locks[LOCKS];
	uint64_t hits, misses;
};

struct ppl_page_cache *ppl_page_cache_new(size_t bytes, size_t page_size)
{
	if (page_size == 0 || bytes < page_size)
		return NULL;
	struct ppl_page_cache *c = calloc(1, sizeof(*c));
	if (c == NULL)
		return NULL;
	c->page_size = page_size;
	c->nslots = bytes / page_size;
	c->slots = calloc(c->nslots, sizeof(*c->slots));
	c->pages = malloc(c->nslots * page_size);
	if (c->slots == NULL || c->pages == NULL) {
		free(c->slots);
		free(c->pages);
		free(c);
		return NULL;
	}
	for (unsigned i = 0; i < LOCKS; i++)
		pthread_mutex_init(&c->locks[i], NULL);
	return c;
}

void ppl_page_cache_free(struct ppl_page_cache *c)
{
	if (c == NULL)
		return;
	for (unsigned i = 0; i < LOCKS; i++)
		pthread_mutex_destroy(&c->locks[i]);
	free(c->slots);
	free(c->pages);
	free(c);
}

static size_t slot_of(const struct ppl_page_cache *c, uint64_t key)
{
	uint64_t h = key * 0x9e3779b97f4a7c15ull;
	return (size_t)((h ^ (h >> 31)) % c->nslots);
}

bool ppl_page_cache_get(struct ppl_page_cache *c, uint32_t space, uint32_t page_no, uint64_t base_lsn,
			uint64_t result_lsn, uint8_t *out)
{
	uint64_t key = ((uint64_t)space << 32 | page_no) + 1;
	size_t i = slot_of(c, key);
	pthread_mutex_t *m = &c->locks[i % LOCKS];
	pthread_mutex_lock(m);
	const struct slot *s = &c->slots[i];
	bool hit = s->key == key && s->base_lsn == base_lsn && s->result_lsn == result_lsn;
	if (hit)
		memcpy(out, c->pages + i * c->page_size, c->page_size);
	pthread_mutex_unlock(m);
	__atomic_add_fetch(hit ? &c->hits : &c->misses, 1, __ATOMIC_RELAXED);
	return hit;
}

void ppl_page_cache_put(struct ppl_page_cache *c, uint32_t space, uint32_t page_no, uint64_t base_lsn,
			uint64_t result_lsn, const uint8_t *page)
{
	uint64_t key = ((uint64_t)space << 32 | page_no) + 1;
	size_t i = slot_of(c, key);
	pthread_mutex_t *m = &c->locks[i % LOCKS];
	pthread_mutex_lock(m);
	c->slots[i] = (struct slot){ key, base_lsn, result_lsn };
	memcpy(c->pages + i * c->page_size, page, c->page_size);
	pthread_mutex_unlock(m);
}

void ppl_page_cache_get_stats(struct ppl_page_cache *c, struct ppl_page_cache_stats *out)
{
	out->slots = c->nslots;
	out->hits = __atomic_load_n(&c->hits, __ATOMIC_RELAXED);
	out->misses = __atomic_load_n(&c->misses, __ATOMIC_RELAXED);
}
