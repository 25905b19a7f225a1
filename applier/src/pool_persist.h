/* Persistence for the pool: every store to the mapped file goes through
 * here, so the ordering discipline (bytes, flush, drain, then the 8-byte
 * word that publishes them) is visible in one place and can be traced by
 * the crash-consistency test.
 *
 * How durable a store is depends on what the file is:
 *   PM_PMEM   real persistent memory (libpmem says so): cache-line flush
 *             and fence (pmem_flush/pmem_drain).
 *   PM_EMUL   a file on tmpfs standing in for NVDIMM: the same flush and
 *             fence, so the cost and the ordering are those of real pmem;
 *             the contents survive the process, not a power cut.
 *   PM_MSYNC  any other file system: msync, slow but durable on disk. */
#ifndef PPL_POOL_PERSIST_H
#define PPL_POOL_PERSIST_H

#include <stddef.h>
#include <stdint.h>

#include "ppl/pool.h"

enum pm_mode { PM_PMEM, PM_EMUL, PM_MSYNC };

struct pool_pm {
	uint8_t *base;
	size_t len;
	enum pm_mode mode;
	const struct ppl_pool_tracer *tracer;
	/* PM_MSYNC: the errno of the first msync that failed (atomic), 0
	 * while none has. Sticky: what was flushed since may not be on the
	 * disk, and the pool cannot tell which stores those were. */
	int failed;
};

const char *pm_mode_name(enum pm_mode m);
/* Copies len bytes to off; not durable until flushed and drained. */
void pm_write(struct pool_pm *pm, uint64_t off, const void *src, size_t len);
void pm_zero(struct pool_pm *pm, uint64_t off, size_t len);
/* One aligned 8-byte store: the unit a crash cannot tear. */
void pm_store8(struct pool_pm *pm, uint64_t off, uint64_t v);
void pm_flush(struct pool_pm *pm, uint64_t off, size_t len);
void pm_drain(struct pool_pm *pm);
static inline void pm_persist(struct pool_pm *pm, uint64_t off, size_t len)
{
	pm_flush(pm, off, len);
	pm_drain(pm);
}
static inline uint64_t pm_load8(const struct pool_pm *pm, uint64_t off)
{
	return __atomic_load_n((const uint64_t *)(pm->base + off), __ATOMIC_ACQUIRE);
}

#endif
