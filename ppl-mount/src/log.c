#include "log.h"

#include <stdarg.h>
#include <stdio.h>
#include <syslog.h>
#include <time.h>

static int use_syslog;

void log_to_syslog(void)
{
	openlog("ppl-mount", LOG_PID, LOG_DAEMON);
	use_syslog = 1;
}

void log_msg(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	if (use_syslog) {
		vsyslog(LOG_WARNING, fmt, ap);
	} else {
		char stamp[32];
		time_t t = time(NULL);
		struct tm tm;
		strftime(stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%SZ", gmtime_r(&t, &tm));
		fprintf(stderr, "%s ppl-mount: ", stamp);
		vfprintf(stderr, fmt, ap);
		fputc('\n', stderr);
	}
	va_end(ap);
}
