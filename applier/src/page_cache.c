/* The rebuilt-page cache. See ppl_page_cache.h. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "ppl/page_cache.h"

#define LOCKS 256u

struct slot {
	uint64_t key;                  /* (space << 32 | page) + 1; 0: empty */
	uint64_t base_lsn, result_lsn, gen;
	uint32_t base_sum;
};

struct ppl_page_cache {
	size_t page_size, nslots;
	struct slot *slots;
	uint8_t *pages;
	pthread_mutex_t locks[LOCKS];
	uint64_t hits, misses, resumed;
	uint64_t gen;                  /* atomic; entries of older generations are misses */
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

/* The page's slot, its lock taken; *base_ok: it holds this page of the
 * current generation rebuilt from this base. */
static size_t lock_slot(struct ppl_page_cache *c, uint32_t space, uint32_t page_no, uint64_t base_lsn,
			uint32_t base_sum, bool *base_ok)
{
	uint64_t gen = __atomic_load_n(&c->gen, __ATOMIC_ACQUIRE);
	uint64_t key = ((uint64_t)space << 32 | page_no) + 1;
	size_t i = slot_of(c, key);
	pthread_mutex_lock(&c->locks[i % LOCKS]);
	const struct slot *s = &c->slots[i];
	*base_ok = s->key == key && s->gen == gen && s->base_lsn == base_lsn && s->base_sum == base_sum;
	return i;
}

bool ppl_page_cache_get(struct ppl_page_cache *c, uint32_t space, uint32_t page_no, uint64_t base_lsn,
			uint32_t base_sum, uint64_t result_lsn, uint8_t *out)
{
	bool base_ok;
	size_t i = lock_slot(c, space, page_no, base_lsn, base_sum, &base_ok);
	bool hit = base_ok && c->slots[i].result_lsn == result_lsn;
	if (hit)
		memcpy(out, c->pages + i * c->page_size, c->page_size);
	pthread_mutex_unlock(&c->locks[i % LOCKS]);
	__atomic_add_fetch(hit ? &c->hits : &c->misses, 1, __ATOMIC_RELAXED);
	return hit;
}

uint64_t ppl_page_cache_get_before(struct ppl_page_cache *c, uint32_t space, uint32_t page_no, uint64_t base_lsn,
				   uint32_t base_sum, uint64_t upto_lsn, uint8_t *out)
{
	bool base_ok;
	size_t i = lock_slot(c, space, page_no, base_lsn, base_sum, &base_ok);
	uint64_t lsn = base_ok && c->slots[i].result_lsn <= upto_lsn ? c->slots[i].result_lsn : 0;
	if (lsn)
		memcpy(out, c->pages + i * c->page_size, c->page_size);
	pthread_mutex_unlock(&c->locks[i % LOCKS]);
	if (lsn)
		__atomic_add_fetch(&c->resumed, 1, __ATOMIC_RELAXED);
	return lsn;
}

void ppl_page_cache_put(struct ppl_page_cache *c, uint64_t gen, uint32_t space, uint32_t page_no,
			uint64_t base_lsn, uint32_t base_sum, uint64_t result_lsn, const uint8_t *page)
{
	uint64_t key = ((uint64_t)space << 32 | page_no) + 1;
	size_t i = slot_of(c, key);
	pthread_mutex_t *m = &c->locks[i % LOCKS];
	pthread_mutex_lock(m);
	/* checked under the slot's lock: forget_all bumps the generation
	 * first, so a put that passes here is of the current one or is
	 * a miss for every later get */
	if (gen != __atomic_load_n(&c->gen, __ATOMIC_ACQUIRE)) {
		pthread_mutex_unlock(m);
		return;
	}
	c->slots[i] = (struct slot){ .key = key, .base_lsn = base_lsn, .result_lsn = result_lsn, .gen = gen,
				     .base_sum = base_sum };
	memcpy(c->pages + i * c->page_size, page, c->page_size);
	pthread_mutex_unlock(m);
}

uint64_t ppl_page_cache_generation(struct ppl_page_cache *c)
{
	return __atomic_load_n(&c->gen, __ATOMIC_ACQUIRE);
}

void ppl_page_cache_forget_all(struct ppl_page_cache *c)
{
	__atomic_add_fetch(&c->gen, 1, __ATOMIC_ACQ_REL);
}

void ppl_page_cache_get_stats(struct ppl_page_cache *c, struct ppl_page_cache_stats *out)
{
	out->slots = c->nslots;
	out->hits = __atomic_load_n(&c->hits, __ATOMIC_RELAXED);
	out->misses = __atomic_load_n(&c->misses, __ATOMIC_RELAXED);
	out->resumed = __atomic_load_n(&c->resumed, __ATOMIC_RELAXED);
}
