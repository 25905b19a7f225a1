#include "pool_persist.h"

#include <errno.h>
#include <libpmem.h>
#include <string.h>

#include "ppl/fault.h"

const char *pm_mode_name(enum pm_mode m)
{
	switch (m) {
	case PM_PMEM: return "pmem";
	case PM_EMUL: return "emulated (tmpfs)";
	case PM_MSYNC: return "msync";
	}
	return "?";
}

void pm_write(struct pool_pm *pm, uint64_t off, const void *src, size_t len)
{
	memcpy(pm->base + off, src, len);
	if (pm->tracer)
		pm->tracer->store(pm->tracer->arg, off, src, len);
}

void pm_zero(struct pool_pm *pm, uint64_t off, size_t len)
{
	static const uint8_t zeros[256];
	while (len) {
		size_t n = len < sizeof(zeros) ? len : sizeof(zeros);
		pm_write(pm, off, zeros, n);
		off += n;
		len -= n;
	}
}

void pm_store8(struct pool_pm *pm, uint64_t off, uint64_t v)
{
	__atomic_store_n((uint64_t *)(pm->base + off), v, __ATOMIC_RELEASE);
	if (pm->tracer)
		pm->tracer->store(pm->tracer->arg, off, &v, sizeof(v));
}

void pm_flush(struct pool_pm *pm, uint64_t off, size_t len)
{
	if (len == 0)
		return;
	if (pm->mode == PM_MSYNC) {
		/* synchronous: flush and drain at once */
		int err = ppl_fault_hit(PPL_FAULT_SYNC, PPL_FAULT_FILE_POOL, "the pool");
		if (err == 0 && pmem_msync(pm->base + off, len) != 0)
			err = errno ? errno : EIO;
		if (err) {
			int none = 0;
			__atomic_compare_exchange_n(&pm->failed, &none, err, false, __ATOMIC_RELEASE, __ATOMIC_RELAXED);
		}
	} else
		pmem_flush(pm->base + off, len);
	if (pm->tracer)
		pm->tracer->flush(pm->tracer->arg, off, len);
}

void pm_drain(struct pool_pm *pm)
{
	if (pm->mode != PM_MSYNC)
		pmem_drain();
	if (pm->tracer)
		pm->tracer->drain(pm->tracer->arg);
}
