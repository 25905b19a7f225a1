/* A bounded DRAM cache of rebuilt pages (Page_Cache_Size), so that a page
 * read again before anything about it changed is not rebuilt again. An
 * entry is valid for one base (the data-file page's LSN, 0 when the log
 * initializes the page) and one result (the rebuilt page's LSN): any new
 * record or new base changes one of them, so entries never need to be
 * invalidated; they are only replaced. Direct-mapped, with locks striped
 * by slot. */
#ifndef PPL_PAGE_CACHE_H
#define PPL_PAGE_CACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct ppl_page_cache;

/* NULL when bytes holds not even one page (the cache is off). */
struct ppl_page_cache *ppl_page_cache_new(size_t bytes, size_t page_size);
void ppl_page_cache_free(struct ppl_page_cache *c);

/* Copies the page into out if the cache holds it for this base and result. */
bool ppl_page_cache_get(struct ppl_page_cache *c, uint32_t space, uint32_t page_no, uint64_t base_lsn,
			uint64_t result_lsn, uint8_t *out);
void ppl_page_cache_put(struct ppl_page_cache *c, uint32_t space, uint32_t page_no, uint64_t base_lsn,
			uint64_t result_lsn, const uint8_t *page);

struct ppl_page_cache_stats {
	uint64_t slots, hits, misses;
};
void ppl_page_cache_get_stats(struct ppl_page_cache *c, struct ppl_page_cache_stats *out);

#endif
