/* The store's logger (ppl/log.h) onto Ganesha's log: the FSAL component,
 * the library's own function and line, its level mapped one to one. */
#include "config.h"
#include "log.h"

#include "ppl/log.h"
#include "ppl/store.h"
#include "ppl_fsal.h"

static log_levels_t ganesha_level(enum ppl_log_level level)
{
	switch (level) {
	case PPL_LOG_CRIT: return NIV_CRIT;
	case PPL_LOG_WARN: return NIV_WARN;
	case PPL_LOG_EVENT: return NIV_EVENT;
	case PPL_LOG_INFO: return NIV_INFO;
	case PPL_LOG_DEBUG: return NIV_DEBUG;
	}
	return NIV_EVENT;
}

static bool enabled(void *arg, enum ppl_log_level level)
{
	(void)arg;
	return component_log_level[COMPONENT_FSAL] >= ganesha_level(level);
}

static void emit(void *arg, enum ppl_log_level level, const char *func, int line, const char *msg)
{
	(void)arg;
	DisplayLogComponentLevel(COMPONENT_FSAL, "store", line, func, ganesha_level(level), "%s", msg);
}

static void thread_started(void *arg, const char *name)
{
	(void)arg;
	SetNameFunction(name);
}

const struct ppl_store_env ppl_ganesha_env = {
	.log = {.log = emit, .enabled = enabled},
	.thread_started = thread_started,
	/* .io NULL: the store reads and writes the export's files with the
	 * system calls, as the sub-FSAL (VFS) does the same local files */
};
