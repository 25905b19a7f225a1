/* The disk-fault switch (ppl/fault.h), built here with PPL_CRASH_POINTS as
 * the test plugin is: an armed fault fails exactly the operations and
 * files its spec names, with its errno and nothing written; a count ends
 * it by itself; a slow fault waits and then does the work; a bad spec is
 * refused with the grammar and leaves the armed fault as it was; a wrong
 * PPL_FAULT stops the process with a line that says so, rather than run a
 * test that never meets its fault. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "ppl/fault.h"

static char dir[] = "/tmp/ppl-test-fault-XXXXXX";

static int open_in_dir(const char *name)
{
	char path[256];
	snprintf(path, sizeof path, "%s/%s", dir, name);
	int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
	if (fd < 0)
		abort();
	close(fd);
	return ppl_fault_io()->open(NULL, path, O_RDWR);
}

static off_t size_of(int fd)
{
	struct stat st;
	return ppl_fault_io()->fstat(NULL, fd, &st) == 0 ? st.st_size : -1;
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static void test_files_of(void)
{
	CHECK(ppl_fault_files_of("ib_logfile0") == PPL_FAULT_FILE_LOG);
	CHECK(ppl_fault_files_of("/x/ib_logfile101") == PPL_FAULT_FILE_LOG);
	CHECK(ppl_fault_files_of("/x/ibdata1") == PPL_FAULT_FILE_DATA);
	CHECK(ppl_fault_files_of("/x/undo001") == PPL_FAULT_FILE_DATA);
	CHECK(ppl_fault_files_of("/x/db/t.ibd") == PPL_FAULT_FILE_DATA);
	CHECK(ppl_fault_files_of("/x/db/t.frm") == PPL_FAULT_FILE_OTHER);
}

static void test_write_fault_hits_only_its_files(void)
{
	const struct ppl_io *io = ppl_fault_io();
	char msg[256], page[512], spec[96];
	unsigned long long hits;
	memset(page, 'p', sizeof page);
	int data = open_in_dir("t.ibd"), log = open_in_dir("ib_logfile0");
	CHECK(data >= 0 && log >= 0);

	/* nothing armed: the calls are the system's */
	CHECK(io->pwrite(NULL, data, page, sizeof page, 0) == (ssize_t)sizeof page);

	CHECK(ppl_fault_arm("write:data:ENOSPC", msg, sizeof msg) == 0);
	CHECK(strcmp(msg, "write:data:ENOSPC") == 0);
	errno = 0;
	CHECK(io->pwrite(NULL, data, page, sizeof page, 512) == -1 && errno == ENOSPC);
	CHECK(size_of(data) == 512); /* nothing of the failed write reached the file */
	CHECK(io->pwrite(NULL, log, page, sizeof page, 0) == (ssize_t)sizeof page); /* another kind of file */
	CHECK(io->sync(NULL, data) == 0);                                              /* another operation */
	CHECK(io->pread(NULL, data, page, sizeof page, 0) == (ssize_t)sizeof page);
	CHECK(ppl_fault_hit(PPL_FAULT_WRITE, PPL_FAULT_FILE_DATA, "t.ibd") == ENOSPC); /* the FSAL's way in */
	CHECK(ppl_fault_hit(PPL_FAULT_WRITE, PPL_FAULT_FILE_OTHER, "t.frm") == 0);
	ppl_fault_state(spec, sizeof spec, &hits);
	CHECK(strcmp(spec, "write:data:ENOSPC") == 0);
	CHECK_EQ_U(hits, 2);

	/* a bad spec is refused and changes nothing */
	const char *bad[] = {"write:data", "foo:data:EIO", "write:disk:EIO", "write:data:EBUSY", "write:data:0ms",
			     "write:data:EIO:0", "write:data:EIO:x", "write:data:70000ms", "write:data:EIO:1:2"};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		CHECK(ppl_fault_arm(bad[i], msg, sizeof msg) == -1);
		CHECK(strstr(msg, bad[i]) != NULL);
	}
	ppl_fault_state(spec, sizeof spec, &hits);
	CHECK(strcmp(spec, "write:data:ENOSPC") == 0);

	/* cleared: the old spec is answered, and the disk works again */
	CHECK(ppl_fault_arm("clear", msg, sizeof msg) == 0);
	CHECK(strcmp(msg, "write:data:ENOSPC") == 0);
	CHECK(io->pwrite(NULL, data, page, sizeof page, 512) == (ssize_t)sizeof page);
	ppl_fault_state(spec, sizeof spec, &hits);
	CHECK(spec[0] == '\0');
	io->close(NULL, data);
	io->close(NULL, log);
}

static void test_count_ends_the_fault(void)
{
	const struct ppl_io *io = ppl_fault_io();
	char msg[256], spec[96];
	unsigned long long hits;
	int fd = open_in_dir("ibdata1");
	CHECK(ppl_fault_arm("sync:any:EIO:2", msg, sizeof msg) == 0);
	errno = 0;
	CHECK(io->sync(NULL, fd) == -1 && errno == EIO);
	errno = 0;
	CHECK(io->sync(NULL, fd) == -1 && errno == EIO);
	CHECK(io->sync(NULL, fd) == 0);
	ppl_fault_state(spec, sizeof spec, &hits);
	CHECK(spec[0] == '\0');
	CHECK_EQ_U(hits, 2);
	io->close(NULL, fd);
}

/* The pool's msync (pool_persist.c) asks the switch as kind "pool". */
static void test_pool_kind(void)
{
	char msg[256];
	CHECK(ppl_fault_arm("sync:pool:EIO", msg, sizeof msg) == 0);
	CHECK(ppl_fault_hit(PPL_FAULT_SYNC, PPL_FAULT_FILE_POOL, "the pool") == EIO);
	CHECK(ppl_fault_hit(PPL_FAULT_SYNC, PPL_FAULT_FILE_DATA, "t.ibd") == 0);
	CHECK(ppl_fault_arm("sync:any:EIO", msg, sizeof msg) == 0);
	CHECK(ppl_fault_hit(PPL_FAULT_SYNC, PPL_FAULT_FILE_POOL, "the pool") == EIO); /* the same disk */
	CHECK(ppl_fault_arm("write:other:EIO", msg, sizeof msg) == -1);              /* not a kind to name */
	CHECK(ppl_fault_arm("clear", msg, sizeof msg) == 0);
}

static void test_slow_fault_waits_then_works(void)
{
	const struct ppl_io *io = ppl_fault_io();
	char msg[256], buf[64] = "log bytes";
	int fd = open_in_dir("ib_logfile0");
	CHECK(io->pwrite(NULL, fd, buf, sizeof buf, 0) == (ssize_t)sizeof buf);
	CHECK(ppl_fault_arm("read:log:30ms:1", msg, sizeof msg) == 0);
	double t0 = now_s();
	memset(buf, 0, sizeof buf);
	CHECK(io->pread(NULL, fd, buf, sizeof buf, 0) == (ssize_t)sizeof buf);
	CHECK(now_s() - t0 >= 0.029);
	CHECK(strcmp(buf, "log bytes") == 0);
	io->close(NULL, fd);
}

/* PPL_FAULT in a child's environment: armed from its first call, or a
 * stop with the reason when it cannot be. */
static int child_with_env(const char *env, char *err, size_t len)
{
	int p[2];
	if (pipe(p) != 0)
		abort();
	pid_t pid = fork();
	if (pid == 0) {
		close(p[0]);
		dup2(p[1], 2);
		setenv("PPL_FAULT", env, 1);
		_exit(ppl_fault_hit(PPL_FAULT_WRITE, PPL_FAULT_FILE_OTHER, "db/t.frm") == EIO ? 0 : 1);
	}
	close(p[1]);
	size_t got = 0;
	ssize_t n;
	while (got < len - 1 && (n = read(p[0], err + got, len - 1 - got)) > 0)
		got += (size_t)n;
	err[got] = '\0';
	close(p[0]);
	int status;
	waitpid(pid, &status, 0);
	return status;
}

static void test_env(void)
{
	char err[512];
	int st = child_with_env("write:any:EIO", err, sizeof err);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	CHECK(strstr(err, "PPL fault write:any:EIO hit: write of db/t.frm") != NULL);
	st = child_with_env("write:any:EIOX", err, sizeof err);
	CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT);
	CHECK(strstr(err, "no such effect") != NULL && strstr(err, "PPL_FAULT") != NULL);
}

int main(void)
{
	if (mkdtemp(dir) == NULL)
		return 2;
	unsetenv("PPL_FAULT");
	/* first: PPL_FAULT is read once per process, and a child forked
	 * after the parent read it would not read it again */
	test_env();
	test_files_of();
	test_write_fault_hits_only_its_files();
	test_count_ends_the_fault();
	test_pool_kind();
	test_slow_fault_waits_then_works();
	const char *made[] = {"t.ibd", "ib_logfile0", "ibdata1"};
	char path[256];
	for (size_t i = 0; i < sizeof made / sizeof made[0]; i++) {
		snprintf(path, sizeof path, "%s/%s", dir, made[i]);
		unlink(path);
	}
	rmdir(dir);
	CHECK_DONE();
}
