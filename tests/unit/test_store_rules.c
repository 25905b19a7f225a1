/* The store's rules at their edges, driven by the host of store_host.h
 * (no Ganesha): every refusal reason the store gives an elision question,
 * page 0 at the checkpoint gate, a pool that runs full and the cleaner
 * that keeps it from doing so, an inode number that comes back with
 * another file after unlink and after rename, a log resize, and pages
 * that programs other than MariaDB write (mysql-test-run's perl).
 *
 * Each test ends by reading the pages it touched: whatever the path (the
 * pool, the data file, a rebuild), a read returns the page MariaDB wrote,
 * and a page of another file never receives a space's records. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "ppl/page_apply.h"
#include <sys/wait.h>
#include <unistd.h>

#include "store_host.h"

/* One question for each reason the store itself gives (the service adds
 * its own: busy, disabled). The order of the checks in the store is the
 * order of the questions. */
static void test_every_refusal(void)
{
	struct host h;
	host_open(&h);
	static uint8_t p3[PS], old3[PS], p6[PS], p7[PS];
	read_file(h.ibd_path, p3, PS, 3 * PS);
	read_file(h.ibd_path, p6, PS, 6 * PS);
	read_file(h.ibd_path, p7, PS, 7 * PS);
	uint64_t l1 = change(&h, 3, 200, 0x61, 30, p3);
	change(&h, 6, 300, 0x62, 30, p6);
	flush_log(&h);
	memcpy(old3, p3, PS);

	/* a space no file of this datadir holds */
	struct ppl_elision_page pg = {77, 3, l1, ppl_page_stored_crc(p3, PS), PS};
	CHECK_EQ_U(ppl_store_elide(h.s, &pg), PPL_ELIDE_NACK_UNKNOWN_FILE);

	/* a page with no records: only its file's exact image is a yes */
	CHECK_EQ_U(ask(&h, 7, p7, PS), PPL_ELIDE_ACK);
	static uint8_t other7[PS];
	memcpy(other7, p7, PS);
	ppl_page_stamp(other7, PS, l1);
	CHECK_EQ_U(ask(&h, 7, other7, PS), PPL_ELIDE_NACK_UNKNOWN_PAGE);

	/* a page image newer than the page's last record (the log has later
	 * records of other pages, none of this one's) */
	static uint8_t later3[PS];
	memcpy(later3, p3, PS);
	ppl_page_stamp(later3, PS, h.l.lsn);
	CHECK_EQ_U(ask(&h, 3, later3, PS), PPL_ELIDE_NACK_LSN_BEHIND);

	/* an image older than the page's last record, once the store knows
	 * that record is final (the last log write's bytes are provisional
	 * until a question or a checkpoint says the log reaches past them) */
	change(&h, 3, 900, 0x63, 20, p3);
	flush_log(&h);
	CHECK_EQ_U(ask(&h, 3, p3, PS), PPL_ELIDE_ACK); /* says the log is durable up to it */
	CHECK_EQ_U(ask(&h, 3, old3, PS), PPL_ELIDE_NACK_LSN_AHEAD);

	/* an image at an LSN the log has not reached yet */
	static uint8_t ahead[PS];
	memcpy(ahead, p3, PS);
	ppl_page_stamp(ahead, PS, h.l.lsn + 4096);
	CHECK_EQ_U(ask(&h, 3, ahead, PS), PPL_ELIDE_NACK_NOT_DURABLE);

	/* a question from an allowed client at an LSN inside the last,
	 * provisional log write but past its end marker (no page of
	 * MariaDB's has that LSN): refused, and the log is not called
	 * damaged -- ingest goes on, the next real question is a yes */
	change(&h, 3, 950, 0x64, 20, p3);
	flush_log(&h); /* a lone block: provisional, zeros after its end */
	memcpy(ahead, p3, PS);
	ppl_page_stamp(ahead, PS, h.l.lsn + 40);
	CHECK_EQ_U(ask(&h, 3, ahead, PS), PPL_ELIDE_NACK_NOT_DURABLE);
	CHECK(!logged(&h, "redo ingest stopped"));
	CHECK_EQ_U(ask(&h, 3, p3, PS), PPL_ELIDE_ACK);

	/* another datadir's log written under the same export: nothing is
	 * elided until it has been quiet for a while (its pages could match
	 * this datadir's), then the same question is a yes */
	uint8_t blk[512];
	memcpy(blk, h.l.file + SYN_AREA, sizeof blk);
	struct iovec iov = {blk, sizeof blk};
	uint64_t other_log = h.log_ino + 1000003;
	CHECK_EQ_U(ppl_store_write_begin(h.s, true, other_log, SYN_AREA, &iov, 1, sizeof blk), 0);
	CHECK_EQ_U(ppl_store_log_write(h.s, other_log, SYN_AREA, &iov, 1, sizeof blk), 0);
	ppl_store_write_end(h.s, true, other_log, SYN_AREA, sizeof blk);
	CHECK(logged(&h, "another ib_logfile0")); /* at once, with Ingest_Behind too */
	CHECK_EQ_U(ask(&h, 3, p3, PS), PPL_ELIDE_NACK_OTHER);
	__atomic_add_fetch(&h.clock_ns, 11ull * 1000000000ull, __ATOMIC_RELAXED);
	CHECK_EQ_U(ask(&h, 3, p3, PS), PPL_ELIDE_ACK);

	/* none of the noes changed what is served */
	static uint8_t got[PS];
	CHECK_EQ_U(host_read(&h, 3, got), 0);
	CHECK(memcmp(got, p3, PS) == 0);
	CHECK_EQ_U(host_read(&h, 7, got), 0);
	CHECK(memcmp(got, p7, PS) == 0);
	CHECK(!logged(&h, "CRIT") && !logged(&h, "divergence"));
	host_close(&h);
}

/* Page 0 names its file's space: after a restart the pool's records find
 * their file through the file's own page 0. When that page names the
 * space (InnoDB wrote it when it created the file), the gate keeps page
 * 0's records in the pool like any other page's, and after a crash the
 * store finds the file and serves both pages as MariaDB wrote them. (A
 * file whose page 0 was never written is the other case: the gate
 * materializes it, test_restart_knows_files_created_after_checkpoint.) */
static void test_page0_kept_when_its_file_names_the_space(void)
{
	struct host h;
	host_make(&h);
	static uint8_t p0[PS], p3[PS], got[PS];
	read_file(h.ibd_path, p0, PS, 0);
	read_file(h.ibd_path, p3, PS, 3 * PS);
	pid_t pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		host_start(&h);
		change(&h, 0, 5000, 0x71, 24, p0);
		change(&h, 3, 5000, 0x72, 24, p3);
		flush_log(&h);
		bool ok = ask(&h, 0, p0, PS) == PPL_ELIDE_ACK && ask(&h, 3, p3, PS) == PPL_ELIDE_ACK &&
			  checkpoint(&h, h.l.lsn) == 0;
		struct ppl_store_figures f;
		ppl_store_figures(h.s, &f);
		ok = ok && f.materialized == 0 && f.pool_kept == 2;
		_exit(ok && check_failures == 0 ? 0 : 1); /* the storage node dies */
	}
	int status = 0;
	CHECK(waitpid(pid, &status, 0) == pid);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	change(&h, 0, 5000, 0x71, 24, p0); /* the same, in this process's copy */
	change(&h, 3, 5000, 0x72, 24, p3);
	h.written = h.l.lsn;
	read_file(h.ibd_path, got, PS, 0);
	CHECK(memcmp(got, p0, PS) != 0); /* the file's page 0 is older */
	/* the next store finds the space's file by its page 0 and puts both
	 * pages back from the pool */
	host_start(&h);
	struct ppl_store_figures f;
	ppl_store_figures(h.s, &f);
	CHECK_EQ_U(f.pool_loaded_pages, 2);
	CHECK_EQ_U(host_read(&h, 0, got), 0);
	CHECK(memcmp(got, p0, PS) == 0);
	CHECK_EQ_U(host_read(&h, 3, got), 0);
	CHECK(memcmp(got, p3, PS) == 0);
	CHECK(!logged(&h, "CRIT"));
	host_close(&h);
}

/* A pool of 63 blocks (28 KiB, one 16 KiB doublewrite slot). */
static const struct ppl_pool_geometry small_pool = {.size = 28 << 10, .dw_slots = 1, .dw_page_size = PS};

/* `n` pages from page `first` on, each with about 130 B of records (3 blocks
 * in the pool), elided; their images in imgs. */
static void elide_pages(struct host *h, uint32_t first, uint32_t n, uint8_t (*imgs)[PS])
{
	for (uint32_t i = first; i < first + n; i++) {
		read_file(h->ibd_path, imgs[i], PS, (off_t)i * PS);
		change(h, i, 1000, (uint8_t)(0x80 + i), 120, imgs[i]);
	}
	flush_log(h);
	for (uint32_t i = first; i < first + n; i++)
		CHECK_EQ_U(ask(h, i, imgs[i], PS), PPL_ELIDE_ACK);
}

static void check_pages(struct host *h, uint32_t n, uint8_t (*imgs)[PS])
{
	static uint8_t got[PS];
	for (uint32_t i = 1; i <= n; i++) {
		CHECK_EQ_U(host_read(h, i, got), 0);
		CHECK(memcmp(got, imgs[i], PS) == 0);
	}
}

/* The pool runs full at the checkpoint gate: the pages that no longer fit
 * are materialized instead (foreground reclamation), the checkpoint
 * passes, and every page is where a read finds it. */
static void test_pool_full(void)
{
	struct host h;
	host_make_pool(&h, &small_pool);
	host_start(&h);
	static uint8_t imgs[NPAGES][PS], got[PS];
	elide_pages(&h, 1, 24, imgs);
	CHECK_EQ_U(checkpoint(&h, h.l.lsn), 0);
	struct ppl_store_figures f;
	ppl_store_figures(h.s, &f);
	CHECK(f.pool_kept >= 8);
	CHECK(f.pool_full >= 1);
	CHECK_EQ_U(f.pool_kept + f.pool_full, 24);
	CHECK(f.pool_usage.free_blocks < 8);
	/* a page the pool had no room for is in its file */
	unsigned in_file = 0;
	for (uint32_t i = 1; i <= 24; i++) {
		read_file(h.ibd_path, got, PS, (off_t)i * PS);
		in_file += memcmp(got, imgs[i], PS) == 0;
	}
	CHECK_EQ_U(in_file, f.pool_full);
	check_pages(&h, 24, imgs);
	CHECK(!logged(&h, "CRIT"));
	host_close(&h);
}

static void wait_cleaned(struct host *h, struct ppl_store_figures *f)
{
	for (int i = 0; i < 200; i++) { /* 10 s at most: the worker wakes at least once a second */
		ppl_store_figures(h->s, f);
		if (f->cleaned > 0 && f->pool_usage.cleaned_enough)
			return;
		nanosleep(&(struct timespec){.tv_nsec = 50 * 1000000}, NULL);
	}
}

/* An apply worker cleans the pool once its free blocks are below the
 * low-water mark (10 %) and stops at the high-water mark (25 %): it
 * materializes the pages holding the oldest records. Above the low-water
 * mark it leaves the pool alone. */
static void test_cleaner_watermarks(void)
{
	struct host h;
	host_make_pool(&h, &small_pool);
	host_start_threads(&h, 1);
	static uint8_t imgs[NPAGES][PS];
	elide_pages(&h, 1, 4, imgs);
	CHECK_EQ_U(checkpoint(&h, h.l.lsn), 0);
	struct ppl_store_figures f;
	ppl_store_figures(h.s, &f);
	CHECK_EQ_U(f.pool_kept, 4);
	CHECK(!f.pool_usage.needs_cleaning);
	/* the worker's timed wake-up (1 s) comes and goes */
	nanosleep(&(struct timespec){.tv_sec = 1, .tv_nsec = 300 * 1000000}, NULL);
	ppl_store_figures(h.s, &f);
	CHECK_EQ_U(f.cleaned, 0);
	CHECK_EQ_U(f.pool_usage.pages, 4);

	/* below the low-water mark (the pages that do not fit are
	 * materialized by the gate itself) */
	elide_pages(&h, 5, 20, imgs);
	CHECK_EQ_U(checkpoint(&h, h.l.lsn), 0);
	wait_cleaned(&h, &f);
	CHECK(f.cleaned > 0);
	CHECK(f.pool_usage.free_blocks + f.pool_usage.retiring_blocks >= f.pool_usage.high_water_blocks);
	CHECK(f.pool_usage.pages > 0); /* only down to the high-water mark, not empty */
	check_pages(&h, 24, imgs);
	CHECK(!logged(&h, "CRIT"));
	host_close(&h);
}

/* The table's file goes (unlinked, or replaced by a rename) with a page
 * elided and unmaterialized, and the file system gives its inode number
 * to the next file created: another space's. The old space's page is
 * never written into the new file (the checkpoint passes without it),
 * and the new file's pages read as that file holds them. */
static void test_inode_reused(bool by_rename)
{
	struct host h;
	host_open(&h);
	static uint8_t p3[PS], mine[PS], got[PS];
	elide_one(&h, 3, 700, 0x91, 40, p3);
	uint64_t old_ino = h.ibd_ino;
	if (by_rename) {
		char tmp[300];
		snprintf(tmp, sizeof tmp, "%s/test/#sql-alter.ibd", h.dir);
		make_space(tmp, 9, 4);
		CHECK(rename(tmp, h.ibd_path) == 0);
	} else {
		CHECK(unlink(h.ibd_path) == 0);
	}
	ppl_store_file_gone(h.s, old_ino);

	snprintf(h.ibd_path, sizeof h.ibd_path, "%s/test/t2.ibd", h.dir);
	make_space(h.ibd_path, 6, 8);
	h.ibd_ino = ino_of(h.ibd_path);
	if (h.ibd_ino != old_ino) {
		/* not every file system hands the number straight back (ext4
		 * does, which is where the suite runs) */
		printf("  inode %llu not reused by this file system (got %llu): reuse not exercised\n",
		       (unsigned long long)old_ino, (unsigned long long)h.ibd_ino);
	}
	read_file(h.ibd_path, mine, PS, 3 * PS);
	CHECK_EQ_U(host_read(&h, 3, got), 0);
	CHECK(memcmp(got, mine, PS) == 0);
	CHECK_EQ_U(checkpoint(&h, h.l.lsn), 0);
	read_file(h.ibd_path, got, PS, 3 * PS);
	CHECK(memcmp(got, mine, PS) == 0);
	CHECK_EQ_U(host_read(&h, 3, got), 0);
	CHECK(memcmp(got, mine, PS) == 0);
	CHECK(!logged(&h, "CRIT"));
	host_close(&h);
}

/* MariaDB resizes its log: a new log (ib_logfile101, another size,
 * starting at the current LSN with its checkpoint there) renamed over
 * ib_logfile0. The pages elided from the old log are written into their
 * files before its index goes; ingest starts over on the new log, and
 * elision goes on with it. */
static void test_log_resize(void)
{
	struct host h;
	host_open(&h);
	static uint8_t p3[PS], p4[PS], got[PS];
	read_file(h.ibd_path, p3, PS, 3 * PS);
	read_file(h.ibd_path, p4, PS, 4 * PS);
	change(&h, 3, 1200, 0xa1, 50, p3);
	flush_log(&h);
	CHECK_EQ_U(ask(&h, 3, p3, PS), PPL_ELIDE_ACK);

	struct synlog bigger;
	syn_init(&bigger, 2 << 20, h.l.lsn);
	char next[300];
	snprintf(next, sizeof next, "%s/ib_logfile101", h.dir);
	write_file(next, bigger.file, bigger.size, 0);
	uint64_t old_ino = h.log_ino;
	CHECK(rename(next, h.log_path) == 0);
	ppl_store_log_replaced(h.s, old_ino);
	read_file(h.ibd_path, got, PS, 3 * PS);
	CHECK(memcmp(got, p3, PS) == 0); /* written before the old index went */

	free(h.l.file);
	h.l = bigger;
	h.log_ino = ino_of(h.log_path);
	h.written = h.l.lsn;
	change(&h, 4, 300, 0xa2, 60, p4);
	flush_log(&h);
	change(&h, 4, 3000, 0xa3, 60, p4);
	flush_log(&h);
	CHECK_EQ_U(ask(&h, 4, p4, PS), PPL_ELIDE_ACK);
	CHECK_EQ_U(host_read(&h, 4, got), 0);
	CHECK(memcmp(got, p4, PS) == 0);
	CHECK_EQ_U(host_read(&h, 3, got), 0);
	CHECK(memcmp(got, p3, PS) == 0);
	CHECK(!logged(&h, "CRIT"));
	host_close(&h);
}

/* Pages written by something other than MariaDB's page cleaner:
 * mysql-test-run's perl edits a page in place at its LSN, zeroes a whole
 * page, tears one. A disk keeps what was written, and so must the store;
 * and verify mode, which compares MariaDB's page writes with the rebuild,
 * must not count these as divergences (a divergence is a rebuild bug). */
static void test_pages_written_by_tools(void)
{
	struct host h;
	host_open(&h);
	ppl_store_set_verify(h.s, true);
	static uint8_t p3[PS], tool3[PS], p5[PS], p6[PS], p9[PS], tool9[PS], got[PS];

	/* 1. MariaDB's write of page 3 is elided; a tool reads the page (served
	 * rebuilt), changes bytes and writes it back at the same LSN */
	uint64_t l3 = elide_one(&h, 3, 700, 0x41, 40, p3);
	memcpy(tool3, p3, PS);
	memset(tool3 + 141, 0xff, 6);
	ppl_page_stamp(tool3, PS, l3);
	host_page_write(&h, 3, tool3);
	CHECK(logged(&h, "edited the page in place"));
	CHECK_EQ_U(host_read(&h, 3, got), 0);
	CHECK(memcmp(got, tool3, PS) == 0); /* the tool's bytes, not the rebuild */

	/* 2. the index still holds a page's records from its initialization
	 * when MariaDB's write of it arrives before that log is parsed; then
	 * a tool edits the page in place */
	uint8_t recs[200];
	size_t n = 0;
	recs[n++] = PPL_REC_INIT_PAGE | 2;
	recs[n++] = SPACE;
	recs[n++] = 9;
	uint8_t fill[30];
	memset(fill, 0x5a, sizeof fill);
	n += syn_write_rec(recs + n, SPACE, 9, 300, fill, sizeof fill);
	uint64_t start = syn_mtr(&h.l, recs, n);
	memset(p9, 0, PS);
	struct ppl_page_ref ref = {p9, PS, SPACE, 9};
	struct ppl_page_replay rp;
	struct ppl_apply_error aerr;
	ppl_replay_begin(&rp, &ref, start);
	CHECK_EQ_U(ppl_replay_mtr(&rp, start, h.l.lsn, recs, n, &aerr), PPL_APPLY_OK);
	CHECK(ppl_replay_finish(&rp));
	host_page_write(&h, 9, p9); /* MariaDB's page, before its log is parsed */
	flush_log(&h);
	static uint8_t p10[PS];
	read_file(h.ibd_path, p10, PS, 10 * PS);
	change(&h, 10, 400, 0x44, 10, p10);
	flush_log(&h);
	CHECK_EQ_U(ask(&h, 10, p10, PS), PPL_ELIDE_ACK); /* the store parses the log up to its LSN */
	memcpy(tool9, p9, PS);
	memset(tool9 + 500, 0xee, 4);
	ppl_page_stamp(tool9, PS, ppl_page_lsn(p9));
	host_page_write(&h, 9, tool9);
	CHECK(logged(&h, "changed without redo"));
	CHECK_EQ_U(host_read(&h, 9, got), 0);
	CHECK(memcmp(got, tool9, PS) == 0);

	/* 3. a tool zeroes a whole page inside the file over an elided page:
	 * the page is zeros, as on a disk (MariaDB's recovery then restores
	 * it from its doublewrite buffer) */
	elide_one(&h, 6, 900, 0x42, 40, p6);
	static const uint8_t zeros[PS];
	host_page_write(&h, 6, zeros);
	CHECK(logged(&h, "overwritten with zeros"));
	CHECK_EQ_U(host_read(&h, 6, got), 0);
	CHECK(memcmp(got, zeros, PS) == 0);

	/* 4. a page torn in its file behind the store's back (not through
	 * it: nothing told the store), with records to apply: recovery
	 * would not apply them to it, and neither does the store -- the
	 * elision is refused as a page it cannot rebuild, not as a
	 * divergence, and MariaDB's write is the page's base */
	read_file(h.ibd_path, p5, PS, 5 * PS);
	change(&h, 5, 1000, 0x43, 40, p5);
	flush_log(&h);
	write_file(h.ibd_path, zeros, PS / 2, 5 * PS + PS / 2);
	CHECK_EQ_U(ask(&h, 5, p5, PS), PPL_ELIDE_NACK_UNKNOWN_PAGE);
	CHECK(logged(&h, "fails its checksum"));
	host_page_write(&h, 5, p5);
	CHECK_EQ_U(host_read(&h, 5, got), 0);
	CHECK(memcmp(got, p5, PS) == 0);

	struct ppl_store_figures f;
	ppl_store_figures(h.s, &f);
	CHECK_EQ_U(f.verify_diverged, 0);
	CHECK(!logged(&h, "divergence") && !logged(&h, "CRIT"));
	host_close(&h);
}

/* Verify mode compares every page write MariaDB makes: a page whose last
 * records sit in the log's last, provisional write is written right after
 * it (InnoDB flushes its log first), and the write itself says the log is
 * durable up to its LSN, so those records are parsed before the compare.
 * Without that the page looked short of its records (4,486 of 42,093
 * writes in tests/fsal/test_verify_mode.py, counted "not comparable").
 * What stays not comparable is counted by cause. */
static void test_verify_compares_every_page_write(void)
{
	struct host h;
	host_open(&h);
	ppl_store_set_verify(h.s, true);
	static uint8_t p3[PS], p4[PS], p5[PS], tool[PS];
	read_file(h.ibd_path, p3, PS, 3 * PS);
	change(&h, 3, 300, 0x31, 40, p3);
	flush_log(&h); /* a lone block: provisional */
	host_page_write(&h, 3, p3);
	struct ppl_store_figures f;
	ppl_store_figures(h.s, &f);
	CHECK_EQ_U(f.verify_same, 1);
	CHECK_EQ_U(f.verify_skipped, 0);

	/* page 4 written again at the LSN its file holds, nothing pending:
	 * compared with the file's page */
	read_file(h.ibd_path, p4, PS, 4 * PS);
	change(&h, 4, 500, 0x41, 20, p4);
	flush_log(&h);
	host_page_write(&h, 4, p4);
	host_page_write(&h, 4, p4);
	ppl_store_figures(h.s, &f);
	CHECK_EQ_U(f.verify_same, 3);

	/* not comparable, each with its cause: a page written without redo
	 * (LSN 0), a copy of another page (the doublewrite buffer's), a page
	 * whose LSN the log has not reached (a tool: MariaDB writes its log
	 * first), a page_compressed page */
	read_file(h.ibd_path, p5, PS, 5 * PS);
	memcpy(tool, p5, PS);
	ppl_wr2(tool + PPL_FIL_PAGE_TYPE, 34354); /* FIL_PAGE_PAGE_COMPRESSED */
	ppl_page_stamp(tool, PS, ppl_page_lsn(p5));
	host_page_write(&h, 5, tool);
	memcpy(tool, p5, PS);
	ppl_page_stamp(tool, PS, 0);
	host_page_write(&h, 5, tool);
	host_page_write(&h, 6, p4);
	read_file(h.ibd_path, tool, PS, 7 * PS);
	ppl_page_stamp(tool, PS, UINT64_MAX); /* no log holds it (mysql-test-run's pages of all ones) */
	host_page_write(&h, 7, tool);
	memcpy(tool, p5, PS);
	ppl_page_stamp(tool, PS, h.l.lsn + 100000); /* last: the file keeps it */
	host_page_write(&h, 5, tool);
	ppl_store_figures(h.s, &f);
	CHECK_EQ_U(f.verify_skip[PPL_VERIFY_NO_LSN], 1);
	CHECK_EQ_U(f.verify_skip[PPL_VERIFY_OTHER_PAGE], 1);
	CHECK_EQ_U(f.verify_skip[PPL_VERIFY_LOG_BEHIND], 1);
	CHECK_EQ_U(f.verify_skip[PPL_VERIFY_PAGE_COMPRESSED], 1);
	CHECK_EQ_U(f.verify_skip[PPL_VERIFY_LSN_FUTURE], 1);
	CHECK_EQ_U(f.verify_skipped, 5);
	/* a file of another datadir under the export holding the same space
	 * (a server started with another innodb_data_home_dir): not this
	 * log's to describe */
	char other[400];
	snprintf(other, sizeof other, "%s/test/t1-of-another-datadir.ibd", h.dir);
	make_space(other, SPACE, 8);
	uint64_t other_ino = ino_of(other);
	read_file(other, tool, PS, 3 * PS);
	struct iovec oiov = {tool, PS};
	CHECK_EQ_U(ppl_store_write_begin(h.s, false, other_ino, 3 * PS, &oiov, 1, PS), 0);
	write_file(other, tool, PS, 3 * PS);
	ppl_store_write(h.s, other_ino, 3 * PS, &oiov, 1, PS);
	ppl_store_write_end(h.s, false, other_ino, 3 * PS, PS);
	ppl_store_figures(h.s, &f);
	CHECK_EQ_U(f.verify_skip[PPL_VERIFY_OTHER_DATADIR], 1);
	CHECK(ppl_verify_skip_explained(PPL_VERIFY_OTHER_DATADIR));
	CHECK_EQ_U(f.verify_skipped, 6);
	/* a page a tool zeroed in its file, then written back (MariaDB's
	 * doublewrite recovery): nothing to compare with, explained */
	static uint8_t zeros[PS];
	read_file(h.ibd_path, tool, PS, 8 * PS);
	host_page_write(&h, 8, zeros);
	host_page_write(&h, 8, tool);
	ppl_store_figures(h.s, &f);
	CHECK_EQ_U(f.verify_skip[PPL_VERIFY_AFTER_WIPE], 1);
	CHECK(ppl_verify_skip_explained(PPL_VERIFY_AFTER_WIPE));
	CHECK_EQ_U(f.verify_skipped, 8); /* and the zeros themselves: not full_crc32 */
	CHECK_EQ_U(f.verify_unexplained, 1); /* the page ahead of its log, within its reach */
	CHECK_EQ_U(f.verify_diverged, 0);
	char line[4096];
	ppl_store_format(h.s, line, sizeof line);
	CHECK(strstr(line, "8 not comparable (not_full_crc32 1, page_compressed 1, other_page 1, lsn_0 1, "
			   "log_behind 1, lsn_future 1, other_datadir 1, after_wipe 1; unexplained 1)") != NULL);
	host_close(&h);
}

/* A data file vanishes without a word to the store (moved or removed on
 * the storage node's own disk; or the node crashed between a removal and
 * its hook) while it holds an elided page, a version that exists nowhere
 * else: the checkpoint that needs it is refused and nothing is dropped.
 * Once the file is back the checkpoint passes and a read serves the page.
 * Vanished again, the operator's forget-space (refused while the space's
 * file is there) drops what was kept and the checkpoint passes. */
static void test_vanished_file(void)
{
	struct host h;
	host_open(&h);
	static uint8_t p3[PS], p4[PS], got[PS];
	char aside[320];
	snprintf(aside, sizeof aside, "%s/t1.ibd.aside", h.dir);
	elide_one(&h, 3, 600, 0x51, 40, p3);

	CHECK(rename(h.ibd_path, aside) == 0);
	CHECK(checkpoint(&h, h.l.lsn) != 0);
	CHECK(logged(&h, "is refused"));
	CHECK(logged(&h, "forget-space 5"));
	char *j = ppl_store_json(h.s, "page 5:3");
	CHECK(strstr(j, "\"pending\":{") != NULL); /* kept */
	free(j);
	struct ppl_store_figures f;
	ppl_store_figures(h.s, &f);
	CHECK_EQ_U(f.spaces_missing, 1);
	CHECK_EQ_U(f.spaces_dropped, 0);
	j = ppl_store_json(h.s, "forget-space 0"); /* ibdata1 is there */
	CHECK(strstr(j, "\"error\"") != NULL && strstr(j, "is there") != NULL);
	free(j);

	/* the file is put back */
	CHECK(rename(aside, h.ibd_path) == 0);
	CHECK_EQ_U(checkpoint(&h, h.l.lsn), 0);
	CHECK(logged(&h, "is back"));
	ppl_store_figures(h.s, &f);
	CHECK_EQ_U(f.spaces_missing, 0);
	CHECK_EQ_U(host_read(&h, 3, got), 0);
	CHECK(memcmp(got, p3, PS) == 0);

	/* gone again, and the operator says it was removed on purpose */
	elide_one(&h, 4, 600, 0x52, 40, p4);
	CHECK(rename(h.ibd_path, aside) == 0);
	CHECK(checkpoint(&h, h.l.lsn) != 0);
	j = ppl_store_json(h.s, "forget-space 5");
	CHECK(strstr(j, "\"forgotten\"") != NULL);
	free(j);
	CHECK_EQ_U(checkpoint(&h, h.l.lsn), 0);
	for (uint32_t pg = 3; pg <= 4; pg++) {
		char req[32];
		snprintf(req, sizeof req, "page 5:%" PRIu32, pg);
		j = ppl_store_json(h.s, req);
		CHECK(strstr(j, "\"pending\":null") != NULL && strstr(j, "\"pool\":null") != NULL);
		free(j);
	}
	ppl_store_figures(h.s, &f);
	CHECK_EQ_U(f.spaces_missing, 0);
	CHECK(rename(aside, h.ibd_path) == 0); /* for host_close */
	host_close(&h);
}

int main(void)
{
	test_verify_compares_every_page_write();
	test_every_refusal();
	test_page0_kept_when_its_file_names_the_space();
	test_pool_full();
	test_cleaner_watermarks();
	test_inode_reused(false);
	test_inode_reused(true);
	test_log_resize();
	test_pages_written_by_tools();
	test_vanished_file();
	CHECK_DONE();
}
