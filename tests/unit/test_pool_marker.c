/* The export's pool marker (ppl/pool_marker.h): a pool lost before a clean
 * stop -- tmpfs after a power loss, a deleted file -- is never silently
 * replaced by an empty one, while a clean stop lets a new pool serve. */
#include <errno.h>
#include <stdio.h>
#include <sys/wait.h>

#include "ppl/io.h"
#include "ppl/pool_marker.h"
#include "store_host.h"

static void marker_path(struct host *h, char *out, size_t len)
{
	snprintf(out, len, "%s/%s", h->dir, PPL_POOL_MARKER_NAME);
}

static void pool_uuid(const char *path, uint8_t *uuid)
{
	char err[512];
	struct ppl_pool *p;
	struct ppl_pool_options o = {.read_only = true};
	CHECK(ppl_pool_open(path, &o, &p, NULL, err, sizeof err) == 0);
	struct ppl_pool_header ph;
	ppl_pool_get_header(p, &ph);
	memcpy(uuid, ph.uuid, 16);
	ppl_pool_close(p);
}

/* A store runs with pool A; while it runs (or after it was killed: the
 * marker is the same) another pool B for the export is refused, and so is
 * making a new one; after A's clean stop B serves. */
static void test_lost_pool_refused(void)
{
	printf("a pool lost before a clean stop is not replaced without a word\n");
	struct host h;
	host_open(&h);
	char mpath[400], err[1024], b_path[400];
	marker_path(&h, mpath, sizeof mpath);
	uint8_t a[16], b[16];
	pool_uuid(h.pool_path, a);
	CHECK_EQ_U(ppl_pool_marker_admit(h.dir, a, UINT64_MAX, err, sizeof err), 0);

	/* some page records kept in pool A (under the per-page cap) */
	static uint8_t image[PS];
	elide_one(&h, 3, 2000, 0x21, 40, image);
	CHECK_EQ_U(checkpoint(&h, h.l.lsn), 0);

	snprintf(b_path, sizeof b_path, "%s.b", h.pool_path);
	struct ppl_pool_geometry g = {.size = 8 << 20, .identity = h.dir};
	CHECK(ppl_pool_create(b_path, &g, err, sizeof err) == 0);
	pool_uuid(b_path, b);
	CHECK(ppl_pool_marker_admit(h.dir, b, UINT64_MAX, err, sizeof err) != 0);
	CHECK(strstr(err, "no clean stop drained") != NULL);
	CHECK(strstr(err, "restore it from a backup") != NULL);
	CHECK(strstr(err, PPL_POOL_MARKER_NAME) != NULL);
	CHECK(ppl_pool_marker_admit(h.dir, NULL, 0, err, sizeof err) != 0);
	CHECK(strstr(err, "a new pool is about to be made") != NULL);

	/* the store itself refuses pool B */
	struct ppl_store *s2;
	CHECK(host_store_elision(&h, b_path, 1, &s2, err, sizeof err) != 0);
	CHECK(strstr(err, "no clean stop drained") != NULL);
	ppl_store_free(s2);

	/* A's clean stop writes the page into its file: A is drained, B may serve */
	ppl_store_free(h.s);
	static uint8_t got[PS];
	read_file(h.ibd_path, got, PS, 3 * PS);
	CHECK(memcmp(got, image, PS) == 0);
	CHECK_EQ_U(ppl_pool_marker_admit(h.dir, b, UINT64_MAX, err, sizeof err), 0);
	CHECK_EQ_U(ppl_pool_marker_admit(h.dir, NULL, 0, err, sizeof err), 0);
	CHECK(unlink(h.pool_path) == 0);
	CHECK(rename(b_path, h.pool_path) == 0);
	host_start(&h);
	CHECK_EQ_U(ppl_pool_marker_admit(h.dir, b, UINT64_MAX, err, sizeof err), 0);
	CHECK(ppl_pool_marker_admit(h.dir, a, UINT64_MAX, err, sizeof err) != 0); /* B is the one now */
	host_close(&h);
}

/* POSIX, but data-file writes fail with EIO while fail_writes is set. */
static bool fail_writes;
static struct ppl_io failing;

static ssize_t failing_pwrite(void *arg, int fd, const void *buf, size_t len, off_t off)
{
	if (fail_writes) {
		errno = EIO;
		return -1;
	}
	return ppl_io_posix()->pwrite(arg, fd, buf, len, off);
}

/* A stop that leaves records in the pool (a page that could not be
 * written) does not mark it drained: a new pool is refused after it, the
 * same pool serves. */
static void test_undrained_stop(void)
{
	printf("a stop that leaves the pool holding pages keeps the marker open\n");
	struct host h;
	host_make(&h);
	failing = *ppl_io_posix();
	failing.pwrite = failing_pwrite;
	h.io = &failing;
	host_start(&h);
	uint8_t a[16];
	char err[1024];
	pool_uuid(h.pool_path, a);
	static uint8_t image[PS], got[PS];
	elide_one(&h, 3, 2000, 0x22, 40, image);
	CHECK_EQ_U(checkpoint(&h, h.l.lsn), 0);
	fail_writes = true; /* the clean stop cannot write the page */
	ppl_store_free(h.s);
	CHECK(logged(&h, "still holds 1 page(s)"));
	CHECK(ppl_pool_marker_admit(h.dir, NULL, 0, err, sizeof err) != 0);
	fail_writes = false;
	host_start(&h); /* the same pool: the page comes back from it */
	CHECK_EQ_U(ppl_pool_marker_admit(h.dir, a, UINT64_MAX, err, sizeof err), 0);
	CHECK_EQ_U(host_read(&h, 3, got), 0);
	CHECK(memcmp(got, image, PS) == 0);
	host_close(&h);
}

/* A marker copied with another export's files says nothing about this
 * one; a damaged marker refuses, saying what to do. */
static void test_copied_and_damaged(void)
{
	printf("a copied marker is ignored, a damaged one refuses\n");
	char dir[] = "/tmp/ppl-test-marker-XXXXXX", path[300], err[1024];
	CHECK(mkdtemp(dir) != NULL);
	uint8_t u[16] = {1, 2, 3}, v[16] = {9};
	CHECK_EQ_U(ppl_pool_marker_admit(dir, u, UINT64_MAX, err, sizeof err), 0); /* none yet */
	CHECK_EQ_U(ppl_pool_marker_write(dir, u, false, err, sizeof err), 0);
	CHECK(ppl_pool_marker_admit(dir, v, UINT64_MAX, err, sizeof err) != 0);
	CHECK_EQ_U(ppl_pool_marker_note_lsn(dir, u, 5000, err, sizeof err), 0);
	CHECK_EQ_U(ppl_pool_marker_admit(dir, u, UINT64_MAX, err, sizeof err), 0);
	CHECK(ppl_pool_marker_admit(dir, u, 4999, err, sizeof err) != 0 && strstr(err, "older copy"));
	CHECK_EQ_U(ppl_pool_marker_admit(dir, u, 5000, err, sizeof err), 0);
	/* another pool is refused as another pool, whatever its LSN */
	CHECK(ppl_pool_marker_admit(dir, v, 0, err, sizeof err) != 0 && strstr(err, "no clean stop drained"));
	snprintf(path, sizeof path, "%s/%s", dir, PPL_POOL_MARKER_NAME);
	FILE *f = fopen(path, "w");
	CHECK(f != NULL);
	fprintf(f, "export /some/other/export\npool %032x\nstate open\n", 7);
	fclose(f);
	CHECK_EQ_U(ppl_pool_marker_admit(dir, v, UINT64_MAX, err, sizeof err), 0);
	f = fopen(path, "w");
	CHECK(f != NULL);
	fprintf(f, "export %s\nstate op", dir);
	fclose(f);
	CHECK(ppl_pool_marker_admit(dir, v, UINT64_MAX, err, sizeof err) != 0);
	CHECK(strstr(err, "is damaged") != NULL);
	CHECK(unlink(path) == 0);
	CHECK(rmdir(dir) == 0);
}

static bool marker_notes(struct host *h, uint64_t lsn)
{
	char path[400], want[64], text[2048] = "";
	marker_path(h, path, sizeof path);
	snprintf(want, sizeof want, "lsn %llu\n", (unsigned long long)lsn);
	FILE *f = fopen(path, "r");
	if (f == NULL)
		return false;
	size_t got = fread(text, 1, sizeof text - 1, f);
	fclose(f);
	text[got] = '\0';
	return strstr(text, want) != NULL;
}

static void copy_file(const char *from, const char *to)
{
	FILE *a = fopen(from, "rb"), *b = fopen(to, "wb");
	CHECK(a != NULL && b != NULL);
	static char buf[1 << 16];
	size_t n;
	while ((n = fread(buf, 1, sizeof buf, a)) > 0)
		CHECK(fwrite(buf, 1, n, b) == n);
	fclose(a);
	fclose(b);
}

/* An older copy of the same pool (a file restored from a backup or a
 * snapshot: same uuid, fewer records) is refused: while the pool holds
 * records past MariaDB's checkpoint, an apply worker notes its durable LSN
 * in the marker, and a pool durable only up to an earlier LSN is not the
 * one the export last ran with. The pool itself put back serves. */
static void test_older_copy_refused(void)
{
	printf("an older copy of the same pool is refused\n");
	struct host h;
	host_make(&h);
	char stale[400], err[1024];
	snprintf(stale, sizeof stale, "%s.stale", h.pool_path);
	copy_file(h.pool_path, stale); /* before anything was kept */
	static uint8_t image[PS], got[PS];
	read_file(h.ibd_path, image, PS, 3 * PS);
	pid_t pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		host_start_threads(&h, 1);
		change(&h, 3, 2000, 0x3c, 40, image);
		flush_log(&h);
		bool ok = ask(&h, 3, image, PS) == PPL_ELIDE_ACK && checkpoint(&h, h.l.lsn) == 0;
		for (int i = 0; i < 50 && ok && !marker_notes(&h, h.l.lsn); i++)
			usleep(100 * 1000); /* apply worker 0 notes it within about a second */
		_exit(ok && marker_notes(&h, h.l.lsn) && check_failures == 0 ? 0 : 1);
	}
	int status = 0;
	CHECK(waitpid(pid, &status, 0) == pid);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	change(&h, 3, 2000, 0x3c, 40, image);
	h.written = h.l.lsn;

	char kept[400];
	snprintf(kept, sizeof kept, "%s.kept", h.pool_path);
	CHECK(rename(h.pool_path, kept) == 0);
	CHECK(rename(stale, h.pool_path) == 0);
	struct ppl_store *s2;
	CHECK(host_store_elision(&h, h.pool_path, 1, &s2, err, sizeof err) != 0);
	CHECK(strstr(err, "is an older copy of pool") != NULL);
	ppl_store_free(s2);

	CHECK(unlink(h.pool_path) == 0);
	CHECK(rename(kept, h.pool_path) == 0);
	host_start(&h);
	CHECK_EQ_U(host_read(&h, 3, got), 0);
	CHECK(memcmp(got, image, PS) == 0);
	host_close(&h);
}

int main(void)
{
	test_lost_pool_refused();
	test_undrained_stop();
	test_copied_and_damaged();
	test_older_copy_refused();
	CHECK_DONE();
}
