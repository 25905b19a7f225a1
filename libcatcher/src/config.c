/* Configuration from the environment (LIBCATCHER_*, see libcatcher/README.md).
 * A bad value is reported on stderr and replaced by the safe choice: never
 * eliding. libcatcher must not stop the host from starting. */
#include "catcher.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ppl/elision_proto.h"

struct catcher_config catcher_cfg;

static long env_long(const char *name, long def, long min, long max)
{
	const char *v = getenv(name);
	if (!v || !*v)
		return def;
	char *end;
	errno = 0;
	long n = strtol(v, &end, 10);
	if (errno || *end || n < min || n > max) {
		catcher_log("%s=%s is not a number in [%ld, %ld]; using %ld", name, v, min, max, def);
		return def;
	}
	return n;
}

static void copy(char *dst, size_t cap, const char *src)
{
	size_t n = strlen(src);
	if (n >= cap)
		n = cap - 1;
	memcpy(dst, src, n);
	dst[n] = 0;
}

/* "host:port", "[v6addr]:port". */
static int parse_server(const char *v)
{
	const char *colon;
	const char *host = v;
	size_t hlen;
	if (*v == '[') {
		const char *close = strchr(v, ']');
		if (!close || close[1] != ':')
			return -1;
		host = v + 1;
		hlen = (size_t)(close - host);
		colon = close + 1;
	} else {
		colon = strrchr(v, ':');
		if (!colon)
			return -1;
		hlen = (size_t)(colon - v);
	}
	const char *port = colon + 1;
	char *end;
	long p = strtol(port, &end, 10);
	if (hlen == 0 || hlen >= sizeof catcher_cfg.server_host || *end || p <= 0 || p > 65535)
		return -1;
	memcpy(catcher_cfg.server_host, host, hlen);
	catcher_cfg.server_host[hlen] = 0;
	snprintf(catcher_cfg.server_port, sizeof catcher_cfg.server_port, "%ld", p);
	return 0;
}

static void load_token(void)
{
	const char *t = getenv("LIBCATCHER_TOKEN");
	const char *file = getenv("LIBCATCHER_TOKEN_FILE");
	char buf[PPL_ELIDE_TOKEN_MAX + 2];
	if (file && *file) {
		int fd = catcher_sys_openat(AT_FDCWD, file, O_RDONLY | O_CLOEXEC, 0);
		ssize_t n = fd >= 0 ? read(fd, buf, sizeof buf - 1) : -1;
		if (fd >= 0)
			catcher_sys_close(fd);
		if (n < 0) {
			catcher_log("LIBCATCHER_TOKEN_FILE=%s cannot be read (%s); connecting without a token", file,
				    strerror(errno));
			return;
		}
		buf[n] = 0;
		buf[strcspn(buf, "\r\n")] = 0;
		t = buf;
	}
	if (!t)
		return;
	if (strlen(t) > PPL_ELIDE_TOKEN_MAX) {
		catcher_log("the token is longer than %u bytes; elision disabled (passthrough)", PPL_ELIDE_TOKEN_MAX);
		catcher_cfg.mode = CATCHER_PASSTHROUGH;
		return;
	}
	copy(catcher_cfg.token, sizeof catcher_cfg.token, t);
	catcher_cfg.token_len = strlen(catcher_cfg.token);
}

static void add_datadir(const char *d)
{
	char canon[PATH_MAX];
	if (catcher_cfg.ndatadirs == CATCHER_MAX_DIRS) {
		catcher_log("more than %d data directories given; ignoring %s", CATCHER_MAX_DIRS, d);
		return;
	}
	if (!realpath(d, canon)) {
		catcher_log("data directory %s: %s; its files are not tracked", d, strerror(errno));
		return;
	}
	size_t n = strlen(canon);
	while (n > 1 && canon[n - 1] == '/')
		canon[--n] = 0;
	copy(catcher_cfg.datadirs[catcher_cfg.ndatadirs++], sizeof catcher_cfg.datadirs[0], canon);
}

/* mariadbd --datadir=DIR (or --datadir DIR, -h DIR) from our own command
 * line, for when LIBCATCHER_DATADIR is not set. */
static void datadir_from_cmdline(void)
{
	static char buf[16384];
	int fd = catcher_sys_openat(AT_FDCWD, "/proc/self/cmdline", O_RDONLY | O_CLOEXEC, 0);
	if (fd < 0)
		return;
	ssize_t n = 0, r;
	while (n < (ssize_t)sizeof buf - 1 && (r = read(fd, buf + n, sizeof buf - 1 - (size_t)n)) > 0)
		n += r;
	catcher_sys_close(fd);
	if (n <= 0)
		return;
	buf[n] = 0;
	const char *prev = "";
	for (char *a = buf; a < buf + n; a += strlen(a) + 1) {
		if (strncmp(a, "--datadir=", 10) == 0)
			add_datadir(a + 10);
		else if (strcmp(prev, "--datadir") == 0 || strcmp(prev, "-h") == 0)
			add_datadir(a);
		else if (strncmp(a, "-h", 2) == 0 && a[2] && strncmp(a, "--", 2) != 0)
			add_datadir(a + 2);
		prev = a;
	}
}

static unsigned parse_classes(const char *v)
{
	unsigned mask = 0;
	char item[32];
	while (*v) {
		size_t n = strcspn(v, ", ");
		if (n && n < sizeof item) {
			memcpy(item, v, n);
			item[n] = 0;
			if (!strcmp(item, "ibd"))
				mask |= 1u << CLASS_IBD;
			else if (!strcmp(item, "ibdata"))
				mask |= 1u << CLASS_SYSTEM;
			else if (!strcmp(item, "undo"))
				mask |= 1u << CLASS_UNDO;
			else if (strcmp(item, "none") != 0)
				catcher_log("LIBCATCHER_CLASSES: unknown class \"%s\" ignored (known: ibd, ibdata, undo, none)",
					    item);
		}
		v += n;
		v += strspn(v, ", ");
	}
	return mask;
}

static int parse_signal(const char *v)
{
	if (!v || !*v)
		return SIGUSR2;
	if (!strcmp(v, "0") || !strcmp(v, "none"))
		return 0;
	if (!strncmp(v, "SIG", 3))
		v += 3;
	if (!strcmp(v, "USR2"))
		return SIGUSR2;
	if (!strcmp(v, "USR1"))
		return SIGUSR1;
	if (!strcmp(v, "PWR"))
		return SIGPWR;
	if (!strcmp(v, "WINCH"))
		return SIGWINCH;
	char *end;
	long n = strtol(v, &end, 10);
	if (*end || n <= 0 || n >= NSIG || n == SIGKILL || n == SIGSTOP) {
		catcher_log("LIBCATCHER_STATS_SIGNAL=%s is not a usable signal; using SIGUSR2", v);
		return SIGUSR2;
	}
	return (int)n;
}

void catcher_config_refresh_pid(void)
{
	const char *pat = catcher_cfg.stats_file_pattern;
	char *out = catcher_cfg.stats_file;
	size_t cap = sizeof catcher_cfg.stats_file, pos = 0;
	for (; *pat && pos + 1 < cap; pat++) {
		if (pat[0] == '%' && pat[1] == 'p') {
			catcher_fmt_u64(out, cap, &pos, (uint64_t)getpid());
			pat++;
		} else {
			out[pos++] = *pat;
		}
	}
	out[pos] = 0;
}

void catcher_config_load(void)
{
	struct catcher_config *c = &catcher_cfg;
	const char *mode = getenv("LIBCATCHER_MODE");
	const char *server = getenv("LIBCATCHER_SERVER");
	c->mode = CATCHER_ELIDE;
	if (mode && *mode) {
		if (!strcmp(mode, "off"))
			c->mode = CATCHER_OFF;
		else if (!strcmp(mode, "passthrough"))
			c->mode = CATCHER_PASSTHROUGH;
		else if (strcmp(mode, "elide") != 0) {
			catcher_log("LIBCATCHER_MODE=%s unknown (want elide, passthrough or off); using passthrough", mode);
			c->mode = CATCHER_PASSTHROUGH;
		}
	}
	if (c->mode == CATCHER_OFF)
		return;
	if (c->mode == CATCHER_ELIDE) {
		if (!server || !*server) {
			catcher_log("LIBCATCHER_SERVER is not set; nothing is elided (passthrough)");
			c->mode = CATCHER_PASSTHROUGH;
		} else if (parse_server(server) != 0) {
			catcher_log("LIBCATCHER_SERVER=%s is not HOST:PORT; nothing is elided (passthrough)", server);
			c->mode = CATCHER_PASSTHROUGH;
		}
	}
	load_token();

	const char *dd = getenv("LIBCATCHER_DATADIR");
	if (dd && *dd) {
		char tmp[4096];
		while (*dd) {
			size_t n = strcspn(dd, ":");
			if (n && n < sizeof tmp) {
				memcpy(tmp, dd, n);
				tmp[n] = 0;
				add_datadir(tmp);
			}
			dd += n;
			dd += *dd == ':';
		}
	} else {
		datadir_from_cmdline();
	}
	if (c->ndatadirs == 0)
		catcher_log("no data directory (set LIBCATCHER_DATADIR or run mariadbd --datadir=...): no file is tracked");

	const char *classes = getenv("LIBCATCHER_CLASSES");
	c->class_mask = classes ? parse_classes(classes)
				: (1u << CLASS_IBD) | (1u << CLASS_SYSTEM) | (1u << CLASS_UNDO);
	long ps = env_long("LIBCATCHER_PAGE_SIZE", 0, 0, 65536);
	if (ps && ps != 4096 && ps != 8192 && ps != 16384 && ps != 32768 && ps != 65536) {
		catcher_log("LIBCATCHER_PAGE_SIZE=%ld is not an InnoDB page size; learning it from the files", ps);
		ps = 0;
	}
	c->page_size = (uint32_t)ps;
	c->timeout_ms = (int)env_long("LIBCATCHER_TIMEOUT_MS", 100, 1, 60000);
	c->connections = (unsigned)env_long("LIBCATCHER_CONNECTIONS", 4, 1, 64);
	c->backoff_ms = (int)env_long("LIBCATCHER_BACKOFF_MS", 10, 1, 60000);
	c->backoff_max_ms = (int)env_long("LIBCATCHER_BACKOFF_MAX_MS", 2000, c->backoff_ms, 600000);
	c->log_interval_s = (int)env_long("LIBCATCHER_LOG_INTERVAL", 0, 0, 86400);
	c->max_fds = (unsigned)env_long("LIBCATCHER_MAX_FDS", 65536, 1024, 1 << 22);
	c->uring_defer = (unsigned)env_long("LIBCATCHER_URING_DEFER", 0, 0, 256);
	const char *sf = getenv("LIBCATCHER_STATS_FILE");
	copy(c->stats_file_pattern, sizeof c->stats_file_pattern, sf ? sf : "");
	catcher_config_refresh_pid();
	c->stats_signal = parse_signal(getenv("LIBCATCHER_STATS_SIGNAL"));
}
