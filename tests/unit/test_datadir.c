/* The datadir map: spaces found from page 0 and from bindings, a file
 * renamed after its space was learned from its inode, and a file under a
 * binding's inode that names another space refused; page reads and
 * writes refused for a file under the space's name that is not its file;
 * the files kept open for reads. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "ppl/datadir.h"
#include "ppl/io.h"
#include "ppl/mach.h"
#include "ppl/page.h"

#define PS 16384u

static char root[256];

/* A one-page file; space 0 leaves page 0 blank (never written). */
static uint64_t make_file(const char *rel, uint32_t space)
{
	char p[512];
	static uint8_t page[PS];
	memset(page, 0, sizeof(page));
	if (space) {
		ppl_wr4(page + PPL_FSP_HEADER_OFFSET + PPL_FSP_SPACE_ID, space);
		ppl_wr4(page + PPL_FSP_HEADER_OFFSET + PPL_FSP_SPACE_FLAGS, 0x15);
		ppl_wr4(page + 16 + 4, 1000); /* the page LSN's low half: written */
	}
	snprintf(p, sizeof(p), "%s/%s", root, rel);
	FILE *f = fopen(p, "wb");
	CHECK(f != NULL);
	if (f == NULL)
		return 0;
	CHECK(fwrite(page, 1, sizeof(page), f) == sizeof(page));
	fclose(f);
	struct stat st;
	CHECK(stat(p, &st) == 0);
	return (uint64_t)st.st_ino;
}

static void expect_path(struct ppl_datadir *d, uint32_t space, const char *rel)
{
	char got[4096], want[512];
	snprintf(want, sizeof(want), "%s/%s", root, rel);
	int rc = ppl_datadir_path(d, space, got, sizeof(got));
	CHECK(rc == 0);
	if (rc == 0 && strcmp(got, want) != 0) {
		fprintf(stderr, "space %u: %s, expected %s\n", space, got, want);
		CHECK(!"path");
	}
}

static void mv(const char *from, const char *to)
{
	char a[512], b[512];
	snprintf(a, sizeof(a), "%s/%s", root, from);
	snprintf(b, sizeof(b), "%s/%s", root, to);
	CHECK(rename(a, b) == 0);
}

static unsigned opens;
static int counting_open(void *arg, const char *path, int flags)
{
	(void)arg;
	opens++;
	return ppl_io_posix()->open(NULL, path, flags);
}

static uint64_t lsn_low(const uint8_t *page) { return ppl_rd4(page + 16 + 4); }

/* Reads go to a file the datadir keeps open: no open, no path walk per
 * page. A removal heard (ppl_datadir_forget) makes the next read look at
 * the directory again at once; a file replaced behind the datadir's back
 * is seen within a tenth of a second; ppl_datadir_check always looks. */
static void test_open_files(void)
{
	char err[256], p[512], q[512];
	static uint8_t page[PS];
	struct ppl_io io = *ppl_io_posix();
	io.open = counting_open;
	snprintf(p, sizeof(p), "%s/db", root);
	CHECK(mkdir(p, 0700) == 0);
	uint64_t first = make_file("db/o.ibd", 30);
	struct ppl_datadir *d = ppl_datadir_open(root, &io, err, sizeof(err));
	CHECK(d != NULL);
	if (d == NULL)
		return;
	CHECK(ppl_datadir_read_page_of(d, 30, 0, 0, page, PS) == 0 && lsn_low(page) == 1000);
	unsigned after_first = opens;
	uint64_t ino = 0;
	for (int i = 0; i < 10; i++)
		CHECK(ppl_datadir_read_page_of(d, 30, first, 0, page, PS) == 0 && lsn_low(page) == 1000);
	CHECK(ppl_datadir_known(d, 30, &ino) == 0 && ino == first);
	CHECK_EQ_U(opens, after_first);
	CHECK(ppl_datadir_check(d, 30, &ino) == 0 && ino == first);
	CHECK_EQ_U(opens, after_first + 1);

	/* replaced behind its back by another file of the space (LSN 3000) */
	snprintf(p, sizeof(p), "%s/db/o.ibd", root);
	snprintf(q, sizeof(q), "%s/db/o.new", root);
	CHECK(rename(p, q) == 0);
	uint64_t second = make_file("db/o.ibd", 30);
	FILE *f = fopen(p, "r+b");
	CHECK(f != NULL);
	if (f) {
		uint8_t lsn[4];
		ppl_wr4(lsn, 3000);
		CHECK(fseek(f, 16 + 4, SEEK_SET) == 0 && fwrite(lsn, 1, 4, f) == 4);
		fclose(f);
	}
	CHECK(second != first);
	CHECK(ppl_datadir_check(d, 30, &ino) == 0 && ino == second); /* looks */
	struct timespec t = { 0, 150 * 1000000L };
	nanosleep(&t, NULL);
	CHECK(ppl_datadir_read_page_of(d, 30, 0, 0, page, PS) == 0 && lsn_low(page) == 3000);
	CHECK(ppl_datadir_known(d, 30, &ino) == 0 && ino == second);
	/* work begun on the first file never lands in the second */
	CHECK(ppl_datadir_read_page_of(d, 30, first, 0, page, PS) == -1 && errno == ESTALE);

	/* the first file back under the name, and its removal heard: the
	 * very next read looks again */
	CHECK(rename(q, p) == 0);
	ppl_datadir_forget(d, second);
	CHECK(ppl_datadir_read_page_of(d, 30, 0, 0, page, PS) == 0 && lsn_low(page) == 1000);
	CHECK(ppl_datadir_known(d, 30, &ino) == 0 && ino == first);
	ppl_datadir_close(d);
	unlink(p);
	snprintf(p, sizeof(p), "%s/db", root);
	rmdir(p);
}

int main(void)
{
	char err[256], p[512];
	snprintf(root, sizeof(root), "/tmp/ppl-test-datadir-%d", (int)getpid());
	CHECK(mkdir(root, 0700) == 0);
	test_open_files();
	snprintf(p, sizeof(p), "%s/db", root);
	CHECK(mkdir(p, 0700) == 0);
	make_file("db/a.ibd", 5);
	uint64_t blank = make_file("db/b.ibd", 0);
	uint64_t other = make_file("db/c.ibd", 0);

	struct ppl_datadir *d = ppl_datadir_open(root, NULL, err, sizeof(err));
	CHECK(d != NULL);
	if (d == NULL)
		CHECK_DONE();
	expect_path(d, 5, "db/a.ibd");
	char out[4096];
	CHECK(ppl_datadir_path(d, 6, out, sizeof(out)) == -1); /* nothing names space 6 yet */

	/* page 0 names a space: a rename is found by the next look */
	mv("db/a.ibd", "db/a2.ibd");
	expect_path(d, 5, "db/a2.ibd");

	/* page 0 blank: the space is known from the inode only, and the file
	 * is followed across renames */
	ppl_datadir_bind(d, blank, 6);
	expect_path(d, 6, "db/b.ibd");
	mv("db/b.ibd", "db/b2.ibd");
	expect_path(d, 6, "db/b2.ibd");
	mv("db/b2.ibd", "db/b3.ibd");
	expect_path(d, 6, "db/b3.ibd");
	uint32_t sp = 0;
	CHECK(ppl_datadir_space_of(d, blank, &sp) == 0 && sp == 6);

	/* the inode bound to space 7 now holds a page 0 of space 9: not 7's */
	ppl_datadir_bind(d, other, 7);
	mv("db/c.ibd", "db/c2.ibd");
	snprintf(p, sizeof(p), "%s/db/c2.ibd", root);
	FILE *f = fopen(p, "r+b");
	CHECK(f != NULL);
	if (f) {
		uint8_t hdr[PPL_FSP_HEADER_OFFSET + PPL_FSP_SPACE_FLAGS + 4] = {0};
		ppl_wr4(hdr + PPL_FSP_HEADER_OFFSET + PPL_FSP_SPACE_ID, 9);
		ppl_wr4(hdr + PPL_FSP_HEADER_OFFSET + PPL_FSP_SPACE_FLAGS, 0x15);
		ppl_wr4(hdr + 16 + 4, 2000);
		CHECK(fwrite(hdr, 1, sizeof(hdr), f) == sizeof(hdr));
		fclose(f);
	}
	CHECK(ppl_datadir_path(d, 7, out, sizeof(out)) == -1);
	expect_path(d, 9, "db/c2.ibd");

	/* a file that is gone takes its binding with it */
	ppl_datadir_forget(d, blank);
	CHECK(ppl_datadir_path(d, 6, out, sizeof(out)) == -1);

	/* Pages go only to the file that holds the space. A note from the
	 * log names a file before it exists; the file created under that
	 * name whose page 0 names another space is not the space's file:
	 * nothing is written to it, nothing read from it. */
	uint8_t pg[PS];
	memset(pg, 0xa5, sizeof(pg));
	ppl_datadir_note(d, 13, "./db/n.ibd");
	uint64_t n_ino = make_file("db/n.ibd", 15);
	errno = 0;
	CHECK(ppl_datadir_check(d, 13, NULL) == -1 && errno == ESTALE);
	CHECK(ppl_datadir_write_page(d, 13, 1, pg, PS) == -1 && errno == ESTALE);
	CHECK(ppl_datadir_read_page(d, 13, 0, pg, PS) == -1 && errno == ESTALE);
	struct stat st;
	snprintf(p, sizeof(p), "%s/db/n.ibd", root);
	CHECK(stat(p, &st) == 0 && st.st_size == PS); /* not extended by the refused write */
	uint64_t ino = 0;
	CHECK(ppl_datadir_check(d, 15, &ino) == 0 && ino == n_ino);

	/* a file whose page 0 is not written yet takes the pages of the
	 * space the log named it for; once it is removed and another file
	 * takes the name (a datadir copied again), the space has no file */
	memset(pg, 0xa5, sizeof(pg));
	ppl_datadir_note(d, 16, "./db/m.ibd");
	make_file("db/m.ibd", 0);
	CHECK(ppl_datadir_write_page(d, 16, 1, pg, PS) == 0);
	uint64_t m_ino = 0;
	CHECK(ppl_datadir_check(d, 16, &m_ino) == 0);
	ppl_datadir_bind(d, m_ino, 16);
	snprintf(p, sizeof(p), "%s/db/m.ibd", root);
	CHECK(unlink(p) == 0);
	errno = 0;
	CHECK(ppl_datadir_check(d, 16, NULL) == -1 && errno == ENOENT);
	ppl_datadir_forget(d, m_ino); /* as the storage node does when it sees the unlink */
	make_file("db/keep.ibd", 0); /* may reuse the inode number */
	make_file("db/m.ibd", 0);
	CHECK(ppl_datadir_write_page(d, 16, 1, pg, PS) == -1);
	CHECK(stat(p, &st) == 0 && st.st_size == PS);

	/* A note never bound to an inode (all of the file's writes were
	 * elided, nothing looked it up) goes with its file: the next file
	 * made under that name (a table created again, a datadir
	 * bootstrapped again in place) is not taken for the old space. */
	ppl_datadir_note(d, 21, "./db/r.ibd");
	uint64_t r_ino = make_file("db/r.ibd", 0);
	snprintf(p, sizeof(p), "%s/db/r.ibd", root);
	CHECK(unlink(p) == 0);
	ppl_datadir_forget(d, r_ino);
	uint64_t r2_ino = make_file("db/r.ibd", 0);
	uint32_t sp2 = 0;
	CHECK(ppl_datadir_space_of(d, r2_ino, &sp2) == -1);
	CHECK(ppl_datadir_path(d, 21, out, sizeof(out)) == -1);
	/* a later note of the same name supersedes an earlier one */
	ppl_datadir_note(d, 22, "./db/s.ibd");
	ppl_datadir_note(d, 23, "./db/s.ibd");
	uint64_t s_ino = make_file("db/s.ibd", 0);
	CHECK(ppl_datadir_space_of(d, s_ino, &sp2) == 0 && sp2 == 23);
	CHECK(ppl_datadir_path(d, 22, out, sizeof(out)) == -1);
	/* a copy of a table's file names the space in its page 0 too, but
	 * only the bound file is the space's own; removing the copy leaves
	 * the space held, removing both leaves it held by nothing */
	uint64_t own_ino = make_file("db/own.ibd", 30);
	uint64_t copy_ino = make_file("db/copy.ibd", 30);
	ppl_datadir_bind(d, own_ino, 30);
	CHECK(ppl_datadir_bound_space(d, own_ino, &sp2) == 0 && sp2 == 30);
	CHECK(ppl_datadir_bound_space(d, copy_ino, &sp2) == -1);
	/* the bound file is the space's, also once renamed (a table's file
	 * moved aside and back while a copy of it lies next to it) */
	expect_path(d, 30, "db/own.ibd");
	mv("db/own.ibd", "db/aside.ibd");
	expect_path(d, 30, "db/aside.ibd");
	mv("db/aside.ibd", "db/own.ibd");
	expect_path(d, 30, "db/own.ibd");
	snprintf(p, sizeof(p), "%s/db/copy.ibd", root);
	CHECK(unlink(p) == 0);
	CHECK(ppl_datadir_held_elsewhere(d, 30, copy_ino));
	snprintf(p, sizeof(p), "%s/db/own.ibd", root);
	CHECK(unlink(p) == 0);
	CHECK(!ppl_datadir_held_elsewhere(d, 30, own_ino));
	ppl_datadir_forget(d, own_ino);
	/* tables created and dropped without end (a long-lived datadir):
	 * the notes of removed files go, the others stay and still answer */
	size_t before = ppl_datadir_notes(d);
	for (uint32_t i = 0; i < 300; i++) {
		ppl_datadir_note(d, 1000 + i, "./db/churn.ibd");
		uint64_t c_ino = make_file("db/churn.ibd", 0);
		ppl_datadir_bind(d, c_ino, 1000 + i);
		CHECK(ppl_datadir_space_of(d, c_ino, &sp2) == 0 && sp2 == 1000 + i);
		snprintf(p, sizeof(p), "%s/db/churn.ibd", root);
		CHECK(unlink(p) == 0);
		ppl_datadir_forget(d, c_ino);
	}
	CHECK(ppl_datadir_notes(d) <= before);
	CHECK(ppl_datadir_space_of(d, s_ino, &sp2) == 0 && sp2 == 23);
	/* the log left behind: its notes name nothing, files are found by
	 * their page 0 again */
	ppl_datadir_note(d, 24, "./db/t.ibd");
	make_file("db/t.ibd", 0);
	ppl_datadir_forget_notes(d);
	CHECK(ppl_datadir_path(d, 24, out, sizeof(out)) == -1);
	CHECK(ppl_datadir_space_of(d, s_ino, &sp2) == -1);
	CHECK(ppl_datadir_check(d, 15, NULL) == 0);

	/* ibdata1 is space 0 even before its page 0 is written */
	make_file("ibdata1", 0);
	snprintf(p, sizeof(p), "%s/ibdata1", root);
	CHECK(ppl_datadir_path(d, 0, out, sizeof(out)) == 0 && strcmp(out, p) == 0);
	CHECK(unlink(p) == 0);

	/* another datadir followed: what this one's log and files said
	 * names nothing there, although the space ids repeat */
	ppl_datadir_note(d, 20, "./db/x.ibd");
	char other_root[300];
	snprintf(other_root, sizeof(other_root), "%s/db", root);
	CHECK(ppl_datadir_set_root(d, other_root) == 0);
	CHECK(ppl_datadir_path(d, 13, out, sizeof(out)) == -1); /* a note of the old root */
	CHECK(ppl_datadir_path(d, 6, out, sizeof(out)) == -1);  /* a binding of the old root */
	CHECK(ppl_datadir_check(d, 15, NULL) == 0);             /* page 0 of a file under the new root */

	ppl_datadir_close(d);
	const char *left[] = { "db/a2.ibd", "db/b3.ibd", "db/c2.ibd", "db/n.ibd", "db/m.ibd", "db/keep.ibd",
				"db/r.ibd", "db/s.ibd", "db/t.ibd" };
	for (size_t i = 0; i < sizeof(left) / sizeof(left[0]); i++) {
		snprintf(p, sizeof(p), "%s/%s", root, left[i]);
		unlink(p);
	}
	snprintf(p, sizeof(p), "%s/db", root);
	rmdir(p);
	rmdir(root);
	CHECK_DONE();
}
