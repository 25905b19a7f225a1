/* Log_On_Pmem in the store (applier/src/store_pmemlog.c): a log write is
 * made durable in the pool's log area and the file synced behind it; a
 * storage node that dies before that sync, with the file's unsynced bytes
 * lost, gets them back from the pool when it opens it, before anything
 * reads the log (even with Log_On_Pmem turned off since); a pool without
 * a log area, or on tmpfs without Allow_Volatile_Pool, is refused with
 * what to do; a clean stop leaves the area empty. */
#include <signal.h>
#include <sys/wait.h>

#include "store_host.h"

static struct host h;

/* POSIX (ppl_io_posix), but every sync of the log file fails: the syncer
 * never gets to release anything, as if the node died before its first
 * sync. */
static int log_fds[64];

static int p_open(void *arg, const char *path, int flags)
{
	int fd = ppl_io_posix()->open(arg, path, flags);
	size_t n = strlen(path);
	if (fd >= 0 && fd < 64)
		log_fds[fd] = n >= 11 && strcmp(path + n - 11, "ib_logfile0") == 0;
	return fd;
}
static int p_sync(void *arg, int fd)
{
	if (fd >= 0 && fd < 64 && log_fds[fd]) {
		errno = EIO;
		return -1;
	}
	return ppl_io_posix()->sync(arg, fd);
}
static int p_close(void *arg, int fd)
{
	if (fd >= 0 && fd < 64)
		log_fds[fd] = 0;
	return ppl_io_posix()->close(arg, fd);
}
static struct ppl_io log_sync_fails;

static const struct ppl_io *log_sync_fails_io(void)
{
	log_sync_fails = *ppl_io_posix();
	log_sync_fails.open = p_open;
	log_sync_fails.sync = p_sync;
	log_sync_fails.close = p_close;
	return &log_sync_fails;
}

static uint8_t *slurp(const char *path, size_t *len)
{
	struct stat st;
	CHECK(stat(path, &st) == 0);
	uint8_t *b = malloc((size_t)st.st_size);
	read_file(path, b, (size_t)st.st_size, 0);
	*len = (size_t)st.st_size;
	return b;
}

struct zap {
	int fd;
	uint64_t ino, entries, bytes;
};

/* What a power loss may do to bytes the file's sync never covered. */
static int zap_range(void *arg, uint64_t seq, uint64_t fileid, uint64_t offset, const uint8_t *bytes, uint32_t len)
{
	(void)seq;
	(void)bytes;
	struct zap *z = arg;
	CHECK_EQ_U(fileid, z->ino);
	static uint8_t zeros[1 << 20];
	CHECK(len <= sizeof zeros);
	CHECK(pwrite(z->fd, zeros, len, (off_t)offset) == (ssize_t)len);
	z->entries++;
	z->bytes += len;
	return 0;
}

static void test_crash_before_the_sync(bool on_again)
{
	printf("log writes lost from the file come back from the pool (Log_On_Pmem %s at the restart)\n",
	       on_again ? "on" : "off");
	host_make(&h);
	char expected[400];
	snprintf(expected, sizeof expected, "%s.expected", h.dir);
	int verdict[2];
	CHECK(pipe(verdict) == 0);
	pid_t pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		close(verdict[0]);
		h.io = log_sync_fails_io();
		h.log_on_pmem = true;
		host_start(&h);
		static uint8_t image[PS];
		read_file(h.ibd_path, image, PS, 7 * PS);
		for (unsigned i = 0; i < 40; i++) {
			change(&h, 7, 1000 + (i % 20) * 600, (uint8_t)i, 300, image);
			if (i % 4 == 3)
				flush_log(&h);
		}
		flush_log(&h);
		struct ppl_store_figures f;
		ppl_store_figures(h.s, &f);
		bool ok = h.persisted >= 10 && h.not_persisted == 0 && f.log_on_pmem && f.pmem_log_writes == h.persisted;
		usleep(50000); /* the syncer tries, and fails */
		ok = ok && logged(&h, "the log file's sync failed");
		ppl_store_figures(h.s, &f);
		ok = ok && f.pmem_log_sync_failures > 0 && f.pmem_log_used > 0;
		write_file(expected, h.l.file, h.l.size, 0);
		char v = ok && check_failures == 0 ? '1' : '0';
		CHECK(write(verdict[1], &v, 1) == 1);
		kill(getpid(), SIGKILL); /* dies: no clean stop, its threads as they are */
	}
	close(verdict[1]);
	char v = 0;
	CHECK(read(verdict[0], &v, 1) == 1 && v == '1');
	close(verdict[0]);
	int status;
	CHECK(waitpid(pid, &status, 0) == pid);
	CHECK(WIFSIGNALED(status));
	size_t want_len, got_len;
	uint8_t *want = slurp(expected, &want_len);
	uint8_t *got = slurp(h.log_path, &got_len);
	CHECK(got_len == want_len && memcmp(got, want, want_len) == 0);
	free(got);
	/* the writes the pool holds, lost from the file */
	struct ppl_pool *p;
	struct ppl_pool_options ro = {.read_only = true};
	char err[512];
	CHECK(ppl_pool_open(h.pool_path, &ro, &p, NULL, err, sizeof err) == 0);
	struct zap z = {.fd = open(h.log_path, O_WRONLY), .ino = h.log_ino};
	CHECK(ppl_pool_log_pending(p, zap_range, &z) == 0);
	close(z.fd);
	ppl_pool_close(p);
	CHECK(z.entries >= 10);
	got = slurp(h.log_path, &got_len);
	CHECK(memcmp(got, want, want_len) != 0);
	free(got);
	/* the restart: put back before anything reads the log */
	h.io = NULL;
	h.log_on_pmem = on_again;
	host_start(&h);
	CHECK(logged(&h, "written into"));
	got = slurp(h.log_path, &got_len);
	CHECK(got_len == want_len && memcmp(got, want, want_len) == 0);
	free(got);
	free(want);
	/* the store parsed the whole log: the page it changed reads back
	 * as the changes left it (not from a zeroed log) */
	struct ppl_store_figures f;
	ppl_store_figures(h.s, &f);
	CHECK(f.started && !f.stopped);
	ppl_store_free(h.s);
	h.s = NULL;
	CHECK(ppl_pool_open(h.pool_path, &ro, &p, NULL, err, sizeof err) == 0);
	struct ppl_pool_log_usage u;
	ppl_pool_log_usage(p, &u);
	CHECK_EQ_U(u.pending, 0);
	ppl_pool_close(p);
	unlink(expected);
	h.s = ppl_store_new(h.dir, &(struct ppl_store_env){0});
	host_close(&h);
}

/* Running normally: the syncer makes the file durable behind the writes
 * and empties the area; a clean stop leaves nothing in it. */
static void test_syncs_behind(void)
{
	printf("the log file is synced behind the writes and the area released\n");
	host_make(&h);
	h.log_on_pmem = true;
	host_start(&h);
	CHECK(logged(&h, "Log_On_Pmem: MariaDB's log writes are answered once durable"));
	static uint8_t image[PS];
	read_file(h.ibd_path, image, PS, 7 * PS);
	for (unsigned i = 0; i < 20; i++) {
		change(&h, 7, 1000 + i * 600, (uint8_t)i, 300, image);
		flush_log(&h);
	}
	struct ppl_store_figures f;
	for (int t = 0; t < 200; t++) {
		ppl_store_figures(h.s, &f);
		if (f.pmem_log_used == 0 && f.pmem_log_syncs > 0)
			break;
		usleep(10000);
	}
	CHECK_EQ_U(f.pmem_log_used, 0);
	CHECK(f.pmem_log_syncs > 0);
	CHECK_EQ_U(f.pmem_log_writes, 20);
	CHECK_EQ_U(h.not_persisted, 0);
	char line[8192];
	CHECK(ppl_store_format(h.s, line, sizeof line) > 0 && strstr(line, "log on pmem: 20 write(s)"));
	CHECK_EQ_U(host_read(&h, 7, image), 0);
	host_close(&h);
}

static void test_refusals(void)
{
	printf("Log_On_Pmem refuses a pool without a log area, and one on tmpfs unless allowed\n");
	struct ppl_pool_geometry none = {.size = 8 << 20, .log_size = PPL_POOL_NO_LOG_AREA};
	host_make_pool(&h, &none);
	h.log_on_pmem = true;
	struct ppl_store *s;
	char err[1024];
	CHECK(host_store_elision(&h, h.pool_path, 0, &s, err, sizeof err) != 0);
	CHECK(strstr(err, "has no log area") != NULL && strstr(err, "ppl-inspect pool create") != NULL);
	ppl_store_free(s);
	h.s = NULL;
	h.s = ppl_store_new(h.dir, &(struct ppl_store_env){0});
	host_close(&h);

	if (access("/dev/shm", W_OK) != 0)
		return;
	host_make(&h);
	CHECK(unlink(h.pool_path) == 0);
	snprintf(h.pool_path, sizeof h.pool_path, "/dev/shm/ppl-test-pmemlog-%d.pool", (int)getpid());
	struct ppl_pool_geometry g = {.size = 8 << 20, .identity = h.dir};
	CHECK(ppl_pool_create(h.pool_path, &g, err, sizeof err) == 0);
	h.log_on_pmem = true;
	CHECK(host_store_elision(&h, h.pool_path, 0, &s, err, sizeof err) != 0);
	CHECK(strstr(err, "on tmpfs") != NULL && strstr(err, "Allow_Volatile_Pool = true") != NULL);
	ppl_store_free(s);
	h.allow_volatile_pool = true;
	CHECK(host_store_elision(&h, h.pool_path, 0, &s, err, sizeof err) == 0);
	ppl_store_free(s);
	h.s = ppl_store_new(h.dir, &(struct ppl_store_env){0});
	host_close(&h);
}

int main(void)
{
	test_crash_before_the_sync(true);
	test_crash_before_the_sync(false);
	test_syncs_behind();
	test_refusals();
	CHECK_DONE();
}
