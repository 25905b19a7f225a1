/* Named crash points (ppl/crash.h): the names always, the killing only in
 * a build with PPL_CRASH_POINTS. */
#include "ppl/crash.h"

#include <stddef.h>

static const char *const names[] = {
#define PPL_CRASH_NAME(id, name, what) name,
	PPL_CRASH_POINT_LIST(PPL_CRASH_NAME)
#undef PPL_CRASH_NAME
};

static const char *const whats[] = {
#define PPL_CRASH_WHAT(id, name, what) what,
	PPL_CRASH_POINT_LIST(PPL_CRASH_WHAT)
#undef PPL_CRASH_WHAT
};

const char *ppl_crash_point_name(enum ppl_crash_point p)
{
	return (unsigned)p < PPL_CRASH_POINT_COUNT ? names[p] : NULL;
}

const char *ppl_crash_point_what(enum ppl_crash_point p)
{
	return (unsigned)p < PPL_CRASH_POINT_COUNT ? whats[p] : NULL;
}

#ifdef PPL_CRASH_POINTS
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static pthread_once_t once = PTHREAD_ONCE_INIT;
static int armed = -1;           /* the point, or -1: none; -2: PPL_CRASH_AT is wrong */
static uint64_t target;          /* the hit that kills */
static uint64_t hits;            /* of the armed point */
static char bad[300];            /* why PPL_CRASH_AT is wrong */

/* Plain write(2): the process is about to die and stdio may hold locks. */
void ppl_crash_say(const char *line)
{
	size_t len = strlen(line), off = 0;
	while (off < len) {
		ssize_t n = write(2, line + off, len - off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		off += (size_t)n;
	}
}

/* spec "<name>:<N>" into its point and N; -1 with why in err */
static int parse(const char *spec, int *point, uint64_t *n, char *err, size_t errlen)
{
	const char *colon = strrchr(spec, ':');
	char *end = NULL;
	errno = 0;
	unsigned long long v = colon ? strtoull(colon + 1, &end, 10) : 0;
	if (colon == NULL || end == colon + 1 || *end != '\0' || errno || v == 0) {
		snprintf(err, errlen, "crash point \"%s\": give <point>:<N>, N from 1 (the Nth pass kills)", spec);
		return -1;
	}
	for (int p = 0; p < PPL_CRASH_POINT_COUNT; p++)
		if (strlen(names[p]) == (size_t)(colon - spec) && strncmp(names[p], spec, (size_t)(colon - spec)) == 0) {
			*point = p;
			*n = v;
			return 0;
		}
	snprintf(err, errlen, "crash point \"%s\": no such point (the names are in ppl/crash.h)", spec);
	return -1;
}

static void arm(void)
{
	const char *s = getenv("PPL_CRASH_AT");
	int p;
	uint64_t n;
	if (s == NULL || *s == '\0')
		return;
	if (parse(s, &p, &n, bad, sizeof bad - 1) != 0) {
		strcat(bad, "\n");
		__atomic_store_n(&armed, -2, __ATOMIC_RELEASE);
		return;
	}
	target = n;
	__atomic_store_n(&armed, p, __ATOMIC_RELEASE);
}

int ppl_crash_arm(const char *spec, char *err, size_t errlen)
{
	int p;
	uint64_t n;
	pthread_once(&once, arm);
	if (parse(spec, &p, &n, err, errlen) != 0)
		return -1;
	/* disarmed while the count restarts, so no pass sees half of it */
	__atomic_store_n(&armed, -1, __ATOMIC_SEQ_CST);
	__atomic_store_n(&hits, 0, __ATOMIC_SEQ_CST);
	__atomic_store_n(&target, n, __ATOMIC_SEQ_CST);
	__atomic_store_n(&armed, p, __ATOMIC_SEQ_CST);
	snprintf(err, errlen, "%s:%" PRIu64, names[p], n);
	return 0;
}

void ppl_crash_point(enum ppl_crash_point p)
{
	pthread_once(&once, arm);
	int a = __atomic_load_n(&armed, __ATOMIC_ACQUIRE);
	if (a == -2) {
		ppl_crash_say(bad);
		abort();
	}
	if ((int)p != a)
		return;
	uint64_t h = __atomic_add_fetch(&hits, 1, __ATOMIC_SEQ_CST);
	if (h != __atomic_load_n(&target, __ATOMIC_SEQ_CST))
		return;
	char line[200];
	snprintf(line, sizeof line, "PPL crash point %s hit %" PRIu64 ": killing the process (PPL_CRASH_AT)\n",
		 names[p], h);
	ppl_crash_say(line);
	raise(SIGKILL);
}
#else
#include <stdio.h>

int ppl_crash_arm(const char *spec, char *err, size_t errlen)
{
	snprintf(err, errlen, "crash point \"%s\": this build has no crash points (they are compiled into "
		 "build/ganesha-fsal-ppl/plugins-crash only)", spec);
	return -1;
}
#endif
