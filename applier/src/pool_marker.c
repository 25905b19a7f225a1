/* <export>/.ppl-pool: which pool holds the export's pages (ppl/pool_marker.h).
 *
 * Plain system calls, not the store's I/O table: the marker is the
 * storage node's own record beside the export, as the pool is, and a
 * host's table serves MariaDB's files. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ppl/crash.h"
#include "ppl/pool.h"
#include "ppl/pool_marker.h"

struct marker {
	enum ppl_pool_marker_state state;
	uint8_t uuid[16];
	uint64_t lsn;                  /* the pool's durable LSN when last noted (0: none) */
};

static bool unhex(const char *s, uint8_t *u)
{
	for (int i = 0; i < 16; i++) {
		unsigned v;
		if (sscanf(s + 2 * i, "%2x", &v) != 1)
			return false;
		u[i] = (uint8_t)v;
	}
	return s[32] == '\0';
}

static int path_of(const char *exportdir, char *path, size_t len)
{
	int n = snprintf(path, len, "%s/%s", exportdir, PPL_POOL_MARKER_NAME);
	return n < 0 || (size_t)n >= len ? -1 : 0;
}

/* 0 with m (NONE: no marker, or a copy's), -1 with err (unreadable or damaged). */
static int marker_read(const char *exportdir, struct marker *m, char *err, size_t errlen)
{
	char path[4096], line[4200], exp[4200] = "";
	bool have_pool = false;
	m->state = PPL_MARKER_NONE;
	m->lsn = 0;
	if (path_of(exportdir, path, sizeof(path)) != 0) {
		snprintf(err, errlen, "the export path %s is too long", exportdir);
		return -1;
	}
	FILE *f = fopen(path, "r");
	if (f == NULL) {
		if (errno == ENOENT)
			return 0;
		snprintf(err, errlen, "%s cannot be read (%s)", path, strerror(errno));
		return -1;
	}
	enum ppl_pool_marker_state st = PPL_MARKER_NONE;
	while (fgets(line, sizeof(line), f)) {
		line[strcspn(line, "\n")] = '\0';
		if (strncmp(line, "export ", 7) == 0)
			snprintf(exp, sizeof(exp), "%s", line + 7);
		else if (strncmp(line, "pool ", 5) == 0)
			have_pool = unhex(line + 5, m->uuid);
		else if (strncmp(line, "lsn ", 4) == 0)
			m->lsn = strtoull(line + 4, NULL, 10);
		else if (strcmp(line, "state open") == 0)
			st = PPL_MARKER_OPEN;
		else if (strcmp(line, "state drained") == 0)
			st = PPL_MARKER_DRAINED;
	}
	bool bad = ferror(f);
	fclose(f);
	if (bad || !have_pool || st == PPL_MARKER_NONE || exp[0] == '\0') {
		snprintf(err, errlen, "%s is damaged: it does not say which pool holds the export's pages. If the "
			 "pool at Pool_Path is the one the storage node last ran with, or the last stop was clean, "
			 "remove the file and start again", path);
		return -1;
	}
	if (strcmp(exp, exportdir) == 0)
		m->state = st; /* else a copy of another export's: not this export's record */
	return 0;
}

int ppl_pool_marker_admit(const char *exportdir, const uint8_t *uuid, uint64_t durable_lsn, char *err,
			  size_t errlen)
{
	struct marker m;
	if (marker_read(exportdir, &m, err, errlen) != 0)
		return -1;
	if (m.state != PPL_MARKER_OPEN)
		return 0;
	char old[33], now[33] = "";
	ppl_pool_uuid_hex(m.uuid, old);
	if (uuid != NULL && memcmp(uuid, m.uuid, 16) == 0) {
		if (durable_lsn >= m.lsn)
			return 0;
		snprintf(err, errlen, "the pool at Pool_Path is an older copy of pool %s: it is durable up to LSN "
			 "%llu, and the export last ran with it durable up to LSN %llu: the records it kept in "
			 "between are not in this copy, nor in any data file. Put the pool the storage node last ran "
			 "with back at Pool_Path; if it is lost, the datadir is not consistent: restore it from a "
			 "backup. Only if you know that pool held nothing, remove %s/%s and start again", old,
			 (unsigned long long)durable_lsn, (unsigned long long)m.lsn, exportdir, PPL_POOL_MARKER_NAME);
		return -1;
	}
	if (uuid)
		ppl_pool_uuid_hex(uuid, now);
	snprintf(err, errlen, "the export %s last ran with pool %s, which no clean stop drained (a crash, a kill or a "
		 "power loss), and %s%s%s: the records of the pages that pool kept are in no data file. Put that pool "
		 "back at Pool_Path if it still exists; if it is lost, the datadir is not consistent: restore it from "
		 "a backup. Only if that pool held nothing (no page elided since its last clean stop), remove "
		 "%s/%s and start again", exportdir, old, uuid ? "the pool at hand is another (" : "a new pool is "
		 "about to be made for it", now, uuid ? ")" : "", exportdir, PPL_POOL_MARKER_NAME);
	return -1;
}

static int write_marker(const char *exportdir, const uint8_t uuid[16], bool drained, uint64_t lsn, char *err,
			size_t errlen)
{
	char path[4096], tmp[4200], u[33];
	if (path_of(exportdir, path, sizeof(path)) != 0) {
		snprintf(err, errlen, "the export path %s is too long", exportdir);
		return -1;
	}
	snprintf(tmp, sizeof(tmp), "%s.new", path);
	ppl_pool_uuid_hex(uuid, u);
	int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0) {
		snprintf(err, errlen, "%s cannot be written (%s)", tmp, strerror(errno));
		return -1;
	}
	char body[4400];
	int n = snprintf(body, sizeof(body),
			 "# FSAL_PPL: the pool that holds this export's pages (docs/deploy.md). Do not edit.\n"
			 "export %s\npool %s\nstate %s\nlsn %llu\n", exportdir, u, drained ? "drained" : "open",
			 (unsigned long long)lsn);
	bool ok = n > 0 && (size_t)n < sizeof(body) && write(fd, body, (size_t)n) == n && fsync(fd) == 0;
	int werr = errno;
	close(fd);
	if (ok)
		PPL_CRASH(MARKER_WRITTEN);
	if (!ok || rename(tmp, path) != 0) {
		snprintf(err, errlen, "%s cannot be written (%s)", path, strerror(ok ? errno : werr));
		unlink(tmp);
		return -1;
	}
	/* the rename itself durable: the directory synced */
	int dfd = open(exportdir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd >= 0) {
		fsync(dfd);
		close(dfd);
	}
	return 0;
}

int ppl_pool_marker_write(const char *exportdir, const uint8_t uuid[16], bool drained, char *err, size_t errlen)
{
	return write_marker(exportdir, uuid, drained, 0, err, errlen);
}

int ppl_pool_marker_note_lsn(const char *exportdir, const uint8_t uuid[16], uint64_t lsn, char *err, size_t errlen)
{
	return write_marker(exportdir, uuid, false, lsn, err, errlen);
}
