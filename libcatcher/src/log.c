/* Messages go to the host's stderr (mariadbd's error log) in one write(2)
 * each, so lines from several threads never interleave. The number
 * formatters are async-signal-safe; catcher_log() itself is not (vsnprintf)
 * and is never called from a signal handler. */
#include "catcher.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

void catcher_fmt_u64(char *buf, size_t cap, size_t *pos, uint64_t v)
{
	char tmp[24];
	size_t n = 0;
	do {
		tmp[n++] = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	while (n && *pos + 1 < cap)
		buf[(*pos)++] = tmp[--n];
}

void catcher_fmt_str(char *buf, size_t cap, size_t *pos, const char *s)
{
	while (*s && *pos + 1 < cap)
		buf[(*pos)++] = *s++;
}

void catcher_log(const char *fmt, ...)
{
	int saved = errno;
	char line[1024];
	size_t pos = 0;
	catcher_fmt_str(line, sizeof line, &pos, "libcatcher[");
	catcher_fmt_u64(line, sizeof line, &pos, (uint64_t)getpid());
	catcher_fmt_str(line, sizeof line, &pos, "]: ");
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(line + pos, sizeof line - pos - 1, fmt, ap);
	va_end(ap);
	if (n > 0)
		pos += (size_t)n < sizeof line - pos - 1 ? (size_t)n : sizeof line - pos - 2;
	line[pos++] = '\n';
	ssize_t w = write(2, line, pos);
	(void)w;
	errno = saved;
}
