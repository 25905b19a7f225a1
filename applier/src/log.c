/* The logger's one formatting routine (ppl/log.h). Messages longer than
 * the buffer are cut, never dropped: the start says what happened. */
#include <stdarg.h>
#include <stdio.h>

#include "ppl/log.h"

void ppl_logf(const struct ppl_logger *l, enum ppl_log_level level, const char *func, int line, const char *fmt, ...)
{
	if (!l || !l->log || (l->enabled && !l->enabled(l->arg, level)))
		return;
	char msg[2048];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	l->log(l->arg, level, func, line, msg);
}

const char *ppl_log_level_name(enum ppl_log_level level)
{
	switch (level) {
	case PPL_LOG_CRIT: return "CRIT";
	case PPL_LOG_WARN: return "WARN";
	case PPL_LOG_EVENT: return "EVENT";
	case PPL_LOG_INFO: return "INFO";
	case PPL_LOG_DEBUG: return "DEBUG";
	}
	return "?";
}
