/* A bounded DRAM cache of rebuilt pages (Page_Cache_Size), so that a page
 * read again before anything about it changed is not rebuilt again. An
 * entry is valid for one base (the data-file page's LSN and stored
 * checksum; both 0 when the log initializes the page), one result (the
 * rebuilt page's LSN) and one generation. Within one log, a new record or
 * a new base changes base or result. LSNs alone do not name a page
 * across logs: mysql-test-run bootstraps the same datadir again and
 * again, and two of its incarnations reach equal LSNs with different
 * records (a stale dictionary page served that way once made InnoDB's
 * recovery lose a table). So the engine starts a new generation whenever
 * the records it holds stop describing the files it follows (a log left
 * behind, a space's file dropped): ppl_page_cache_forget_all. Direct-
 * mapped, with locks striped by slot.
 *
 * An entry for the same base and an older result is still of use: the
 * rebuild goes on from it (ppl_page_cache_get_before). Within one base
 * and one generation a page's records are only appended to (those below
 * the base's LSN are dropped, but a rebuild skips them anyway), so the
 * records up to the entry's LSN are the ones it was rebuilt from. */
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
			uint32_t base_sum, uint64_t result_lsn, uint8_t *out);
/* A page the cache holds for this base rebuilt up to an LSN at or below
 * upto_lsn: copied into out and its LSN returned (0: none). A rebuild
 * goes on from it (ppl_replay_resume) and applies only the records after
 * it: a page elided again and again, or read again after each change,
 * would otherwise be rebuilt from its whole history every time. */
uint64_t ppl_page_cache_get_before(struct ppl_page_cache *c, uint32_t space, uint32_t page_no, uint64_t base_lsn,
				   uint32_t base_sum, uint64_t upto_lsn, uint8_t *out);
/* gen: ppl_page_cache_generation() read before the records the page was
 * rebuilt from were read; a page rebuilt across a new generation is not
 * kept. */
void ppl_page_cache_put(struct ppl_page_cache *c, uint64_t gen, uint32_t space, uint32_t page_no,
			uint64_t base_lsn, uint32_t base_sum, uint64_t result_lsn, const uint8_t *page);
uint64_t ppl_page_cache_generation(struct ppl_page_cache *c);
/* Every entry put before this call is a miss from now on. */
void ppl_page_cache_forget_all(struct ppl_page_cache *c);

struct ppl_page_cache_stats {
	uint64_t slots, hits, misses;
	uint64_t resumed; /* ppl_page_cache_get_before found a page to go on from */
};
void ppl_page_cache_get_stats(struct ppl_page_cache *c, struct ppl_page_cache_stats *out);

#endif
