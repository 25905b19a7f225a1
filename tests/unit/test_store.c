/* The store (ppl/store.h) driven as ganesha.nfsd's FSAL drives it, with
 * no Ganesha: this harness is the host. It writes the files of a
 * synthetic datadir itself (16 KiB full_crc32 pages, a log from
 * redo_synth.h), calls the store around each write and read as the
 * FSAL's hooks do, asks elision questions directly, and collects the
 * store's log lines through its logger. The clock is injected.
 *
 * What it checks: an elided page is rebuilt on read exactly as MariaDB
 * wrote it; every refusal the harness can provoke gets its reason; the
 * checkpoint gate keeps a page's records in the pool while they fit under
 * the per-page cap and materializes the page into its data file once they
 * do not, so that after the gate the file (or the pool) and never only
 * the log holds what MariaDB was told is written. */
#include <pthread.h>
#include <sys/wait.h>

#include <urcu-bp.h>

#include "ppl/node.h"
#include "ppl/pool_marker.h"
#include "store_host.h"

/* Elided, rebuilt on read, refused for every reason the harness can make. */
static void test_elide_and_read(void)
{
	struct host h;
	host_open(&h);
	static uint8_t image[PS], got[PS];
	read_file(h.ibd_path, image, PS, 3 * PS);
	change(&h, 3, 200, 0xab, 40, image);
	change(&h, 3, 1000, 0xcd, 10, image);
	flush_log(&h);

	/* a page size other than the datadir's */
	CHECK_EQ_U(ask(&h, 3, image, 8192), PPL_ELIDE_NACK_PAGE_SIZE);

	/* the exact page: yes, and a read serves it though the file is older */
	CHECK_EQ_U(ask(&h, 3, image, PS), PPL_ELIDE_ACK);
	struct ppl_store_figures f0, f1;
	ppl_store_figures(h.s, &f0);
	CHECK_EQ_U(host_read(&h, 3, got), 0);
	CHECK(memcmp(got, image, PS) == 0);
	/* its latency counts as a rebuilt read's */
	ppl_store_figures(h.s, &f1);
	CHECK_EQ_U(f1.read_rebuilt_n, f0.read_rebuilt_n + 1);
	CHECK_EQ_U(f1.read_plain_n, f0.read_plain_n);
	read_file(h.ibd_path, got, PS, 3 * PS);
	CHECK(memcmp(got, image, PS) != 0); /* nothing written to the file yet */

	/* a checksum the rebuild does not give: no, and the page stays on
	 * full page writes (a divergence), even for its right image */
	static uint8_t p5[PS], wrong[PS];
	read_file(h.ibd_path, p5, PS, 5 * PS);
	change(&h, 5, 64, 0x77, 16, p5);
	flush_log(&h);
	memcpy(wrong, p5, PS);
	wrong[300] ^= 1;
	ppl_page_stamp(wrong, PS, ppl_page_lsn(p5));
	CHECK_EQ_U(ask(&h, 5, wrong, PS), PPL_ELIDE_NACK_CHECKSUM);
	CHECK(logged(&h, "divergence"));
	CHECK_EQ_U(ask(&h, 5, p5, PS), PPL_ELIDE_NACK_UNSUPPORTED);

	/* a page nobody elided is served as its file holds it */
	static uint8_t p4[PS], f4[PS];
	read_file(h.ibd_path, f4, PS, 4 * PS);
	memcpy(p4, f4, PS);
	change(&h, 4, 500, 0x11, 8, p4);
	flush_log(&h);
	ppl_store_figures(h.s, &f0);
	CHECK_EQ_U(host_read(&h, 4, got), 0);
	CHECK(memcmp(got, f4, PS) == 0);
	/* and its latency as a plain read's */
	ppl_store_figures(h.s, &f1);
	CHECK_EQ_U(f1.read_plain_n, f0.read_plain_n + 1);
	CHECK_EQ_U(f1.read_rebuilt_n, f0.read_rebuilt_n);
	host_close(&h);
}

/* The page an elision question rebuilt is cached for its next read (an
 * elided page is mostly one MariaDB evicted, read back unchanged): the
 * read is a cache hit and serves the same bytes; once a record changes
 * the page, the read rebuilds it again. */
static void test_elided_page_cached_for_its_read(void)
{
	struct host h;
	host_make(&h);
	h.page_cache = 16 * PS;
	host_start(&h);
	static uint8_t image[PS], got[PS];
	elide_one(&h, 6, 300, 0x5a, 40, image);
	struct ppl_store_figures f0, f1;
	ppl_store_figures(h.s, &f0);
	CHECK_EQ_U(host_read(&h, 6, got), 0);
	CHECK(memcmp(got, image, PS) == 0);
	ppl_store_figures(h.s, &f1);
	CHECK_EQ_U(f1.cache.hits, f0.cache.hits + 1);
	CHECK_EQ_U(f1.pages_rebuilt, f0.pages_rebuilt + 1);

	/* MariaDB reads it, changes it and evicts it again: the answer for
	 * the new version replaces the cached one, and the read serves it */
	change(&h, 6, 900, 0x6b, 20, image);
	flush_log(&h);
	CHECK_EQ_U(ask(&h, 6, image, PS), PPL_ELIDE_ACK);
	ppl_store_figures(h.s, &f0);
	CHECK_EQ_U(host_read(&h, 6, got), 0);
	CHECK(memcmp(got, image, PS) == 0);
	ppl_store_figures(h.s, &f1);
	CHECK_EQ_U(f1.cache.hits, f0.cache.hits + 1);

	/* a version not elided, written into the file: a new base, and the
	 * cached page is never served for it */
	change(&h, 6, 1500, 0x7c, 16, image);
	flush_log(&h);
	host_page_write(&h, 6, image);
	ppl_store_figures(h.s, &f0);
	CHECK_EQ_U(host_read(&h, 6, got), 0);
	CHECK(memcmp(got, image, PS) == 0);
	ppl_store_figures(h.s, &f1);
	CHECK_EQ_U(f1.cache.hits, f0.cache.hits);
	host_close(&h);
}

/* One mini-transaction that initializes the page (INIT_PAGE, as InnoDB
 * logs a page it allocates) and writes len bytes of fill at at. */
static void init_and_change(struct host *h, uint32_t page_no, uint32_t at, uint8_t fill, size_t len, uint8_t *image)
{
	uint8_t rec[700], body[16], data[600];
	size_t b = syn_varint(body, SPACE);
	b += syn_varint(body + b, page_no);
	size_t n = syn_rec(rec, 0x10, body, b);
	memset(data, fill, len);
	n += syn_write_rec(rec + n, SPACE, page_no, at, data, len);
	syn_mtr(&h->l, rec, n);
	memset(image, 0, PS);
	ppl_wr4(image + PPL_FIL_PAGE_OFFSET, page_no);
	memset(image + PPL_FIL_PAGE_PREV, 0xff, 8);
	ppl_wr4(image + PPL_FIL_PAGE_SPACE_ID, SPACE);
	memcpy(image + at, data, len);
	ppl_page_stamp(image, PS, h->l.lsn);
}

/* A page MariaDB changes and writes again and again (a hot page its page
 * cleaner keeps elided): each answer goes on from the page the one before
 * rebuilt and applies only the new mini-transaction, not the page's whole
 * history; a read after records no answer saw goes on from the cache too.
 * Every page served and every yes is the exact page. A page the log
 * initializes does the same, and once it is freed and initialized again
 * nothing is gone on from the page it was before. */
static void test_hot_page_goes_on_from_the_cache(void)
{
	struct host h;
	host_make(&h);
	h.page_cache = 16 * PS;
	host_start(&h);
	static uint8_t image[PS], got[PS];
	struct ppl_store_figures f0, f1;
	for (int round = 0; round < 2; round++) {
		uint32_t pg = round == 0 ? 7 : 8; /* 8: initialized by the log */
		if (round == 0) {
			elide_one(&h, pg, 100, 0x01, 8, image);
		} else {
			init_and_change(&h, pg, 100, 0x01, 8, image);
			flush_log(&h);
			CHECK_EQ_U(ask(&h, pg, image, PS), PPL_ELIDE_ACK);
		}
		for (int i = 1; i <= 40; i++) {
			ppl_store_figures(h.s, &f0);
			change(&h, pg, 100 + 8 * (uint32_t)i, (uint8_t)i, 8, image);
			flush_log(&h);
			CHECK_EQ_U(ask(&h, pg, image, PS), PPL_ELIDE_ACK);
			ppl_store_figures(h.s, &f1);
			CHECK_EQ_U(f1.cache.resumed, f0.cache.resumed + 1);
			CHECK_EQ_U(f1.node.rebuild_mtrs_applied, f0.node.rebuild_mtrs_applied + 1);
		}
		/* two records no answer for this page saw (another page's
		 * answer vouches for the log that holds them): the read
		 * applies those two */
		change(&h, pg, 3000, 0xee, 8, image);
		change(&h, pg, 3100, 0xef, 8, image);
		elide_one(&h, 9 + (uint32_t)round, 500, 0x33, 8, got);
		ppl_store_figures(h.s, &f0);
		CHECK_EQ_U(host_read(&h, pg, got), 0);
		CHECK(memcmp(got, image, PS) == 0);
		ppl_store_figures(h.s, &f1);
		CHECK_EQ_U(f1.cache.resumed, f0.cache.resumed + 1);
		CHECK_EQ_U(f1.node.rebuild_mtrs_applied, f0.node.rebuild_mtrs_applied + 2);
		/* and what it rebuilt is served again as it is */
		CHECK_EQ_U(host_read(&h, pg, got), 0);
		CHECK(memcmp(got, image, PS) == 0);
		ppl_store_figures(h.s, &f0);
		CHECK_EQ_U(f0.cache.hits, f1.cache.hits + 1);
	}
	/* page 8 freed and initialized again, other bytes: a new page */
	uint8_t rec[32];
	syn_mtr(&h.l, rec, syn_free_page_rec(rec, SPACE, 8));
	init_and_change(&h, 8, 2000, 0x42, 8, image);
	flush_log(&h);
	CHECK_EQ_U(ask(&h, 8, image, PS), PPL_ELIDE_ACK);
	CHECK_EQ_U(host_read(&h, 8, got), 0);
	CHECK(memcmp(got, image, PS) == 0);
	CHECK(got[100] == 0 && got[3000] == 0);
	CHECK(!logged(&h, "CRIT") && !logged(&h, "divergence"));
	host_close(&h);
}

/* The checkpoint gate: while a page's records fit under the per-page cap
 * they are kept in the pool and the checkpoint passes; once they do not,
 * the page is marked in the pool, its records stay in the log, and the
 * checkpoint passes without a data-file write: the store's restart point
 * stays at the page's first record that is in the log only (I3). */
static void test_gate_keeps_over_cap_pages_in_the_log(void)
{
	struct host h;
	host_open(&h);
	static uint8_t image[PS], got[PS];
	elide_one(&h, 3, 200, 0x21, 20, image);
	CHECK_EQ_U(checkpoint(&h, h.l.lsn), 0);
	struct ppl_store_figures f;
	ppl_store_figures(h.s, &f);
	CHECK_EQ_U(f.pool_kept, 1);      /* small: kept in the pool */
	CHECK_EQ_U(f.materialized, 0);
	CHECK_EQ_U(f.pool_durable_lsn, h.l.lsn);
	CHECK_EQ_U(host_read(&h, 3, got), 0);
	CHECK(memcmp(got, image, PS) == 0);

	/* more records than the cap (256 B) */
	uint64_t over = h.l.lsn;
	change(&h, 3, 2000, 0x22, 300, image);
	flush_log(&h);
	CHECK_EQ_U(ask(&h, 3, image, PS), PPL_ELIDE_ACK);
	CHECK_EQ_U(checkpoint(&h, h.l.lsn), 0);
	ppl_store_figures(h.s, &f);
	CHECK_EQ_U(f.materialized, 0);
	CHECK_EQ_U(f.checkpoints_held, 0);
	CHECK_EQ_U(f.pool_spilled_kept, 1);
	CHECK_EQ_U(f.pool_durable_lsn, over); /* a restart reads the log from there */
	read_file(h.ibd_path, got, PS, 3 * PS);
	CHECK(memcmp(got, image, PS) != 0); /* the file is older */
	CHECK_EQ_U(host_read(&h, 3, got), 0);
	CHECK(memcmp(got, image, PS) == 0);
	CHECK(!logged(&h, "CRIT"));
	host_close(&h);
}

/* One mini-transaction whose records for a page are larger than a pool
 * record holds (a page split's new page, a bulk insert): the pool notes
 * its LSNs and marks the page, the records stay in the log, the
 * checkpoint passes without a data-file write, and the restart point stays
 * before them; the page reads as MariaDB wrote it. */
static void test_record_too_large_for_the_pool(void)
{
	struct host h;
	host_open(&h);
	leave_restart_window(&h);
	static uint8_t image[PS], got[PS];
	static uint8_t recs[16 * 700];
	read_file(h.ibd_path, image, PS, 3 * PS);
	size_t n = 0;
	uint8_t data[600];
	for (unsigned i = 0; i < 16; i++) {
		memset(data, 0x30 + i, sizeof data);
		n += syn_write_rec(recs + n, SPACE, 3, 200 + i * 700, data, sizeof data);
		memcpy(image + 200 + i * 700, data, sizeof data);
	}
	CHECK(n > PPL_POOL_RECORD_MAX);
	uint64_t start = h.l.lsn;
	syn_mtr(&h.l, recs, n);
	ppl_page_stamp(image, PS, h.l.lsn);
	flush_log(&h);
	CHECK_EQ_U(ask(&h, 3, image, PS), PPL_ELIDE_ACK);
	CHECK_EQ_U(checkpoint(&h, h.l.lsn), 0);
	struct ppl_store_figures f;
	ppl_store_figures(h.s, &f);
	CHECK_EQ_U(f.materialized, 0);
	CHECK_EQ_U(f.checkpoints_held, 0);
	CHECK_EQ_U(f.pool_spilled_kept, 1);
	CHECK_EQ_U(f.pool_durable_lsn, start);
	CHECK_EQ_U(host_read(&h, 3, got), 0);
	CHECK(memcmp(got, image, PS) == 0);
	CHECK(!logged(&h, "CRIT"));
	host_close(&h); /* the clean stop writes it */
}

/* MariaDB's log goes on (other pages, checkpoints) until its next writes
 * would overwrite the records of a page marked in the pool: before that
 * write, the wrap guard materializes the page, and the restart point
 * moves past its records. Without the guard the log would be the only
 * copy of them and would lose it. */
static void test_wrap_guard_materializes(void)
{
	struct host h;
	host_open(&h);
	leave_restart_window(&h);
	static uint8_t image[PS], other[PS], got[PS];
	read_file(h.ibd_path, image, PS, 3 * PS);
	read_file(h.ibd_path, other, PS, 5 * PS);
	uint64_t over = h.l.lsn, cap = h.l.size - SYN_AREA;
	change(&h, 3, 2000, 0x23, 300, image);
	flush_log(&h);
	CHECK_EQ_U(ask(&h, 3, image, PS), PPL_ELIDE_ACK);
	CHECK_EQ_U(checkpoint(&h, h.l.lsn), 0);
	struct ppl_store_figures f;
	ppl_store_figures(h.s, &f);
	CHECK_EQ_U(f.pool_durable_lsn, over);
	/* up to just short of overwriting the page's records: no wait */
	log_on_until(&h, over + cap - 4096, other);
	flush_log(&h);
	ppl_store_figures(h.s, &f);
	CHECK_EQ_U(f.log_wraps_held, 0);
	CHECK_EQ_U(f.materialized, 0);
	/* the next writes wrap over them */
	log_on_until(&h, h.l.lsn + 16 * 420, other);
	flush_log(&h);
	ppl_store_figures(h.s, &f);
	CHECK_EQ_U(f.log_wraps_held, 1);
	CHECK_EQ_U(f.log_wrap_pages, 1);
	CHECK_EQ_U(f.materialized, 1);
	CHECK(f.pool_durable_lsn > over);
	read_file(h.ibd_path, got, PS, 3 * PS);
	CHECK(memcmp(got, image, PS) == 0); /* in its file before the log lost it */
	CHECK_EQ_U(host_read(&h, 3, got), 0);
	CHECK(memcmp(got, image, PS) == 0);
	CHECK(!logged(&h, "CRIT"));
	host_close(&h);
}

/* The apply workers keep the restart point less than half the log behind
 * the parse: a marked page whose records fall further behind is written
 * by a worker, and MariaDB's log writes never wait for the guard. */
static void test_workers_keep_ahead_of_the_wrap(void)
{
	struct host h;
	host_make(&h);
	host_start_threads(&h, 1);
	leave_restart_window(&h);
	static uint8_t image[PS], other[PS], got[PS];
	read_file(h.ibd_path, image, PS, 3 * PS);
	read_file(h.ibd_path, other, PS, 5 * PS);
	uint64_t over = h.l.lsn, cap = h.l.size - SYN_AREA;
	change(&h, 3, 2000, 0x24, 300, image);
	flush_log(&h);
	CHECK_EQ_U(ask(&h, 3, image, PS), PPL_ELIDE_ACK);
	CHECK_EQ_U(checkpoint(&h, h.l.lsn), 0);
	log_on_until(&h, over + cap * 3 / 4, other);
	flush_log(&h);
	struct ppl_store_figures f;
	for (int k = 0; k < 60; k++) { /* the worker wakes at least once a second */
		ppl_store_figures(h.s, &f);
		if (f.materialized)
			break;
		nanosleep(&(struct timespec){.tv_nsec = 100 * 1000000}, NULL);
	}
	CHECK_EQ_U(f.materialized, 1);
	CHECK(f.pool_durable_lsn > over);
	CHECK_EQ_U(f.log_wraps_held, 0);
	read_file(h.ibd_path, got, PS, 3 * PS);
	CHECK(memcmp(got, image, PS) == 0);
	CHECK(!logged(&h, "CRIT"));
	host_close(&h);
}

/* Issue 17's store-level trial: a log fed fast through a small log (1
 * MiB), sixteen pages elided again and again with more records than the
 * per-page cap, MariaDB's checkpoint after every round, and the log
 * pushed a third of its size further each round (almost three wraps).
 * The checkpoint gate never waits (it marks the pages in the pool; the
 * workers or, as a last resort, the wrap guard write them before the log
 * wraps over their records), and nothing is dropped: every page reads
 * back as MariaDB last wrote it. */
static void test_settling_keeps_the_gate_from_waiting(void)
{
	struct host h;
	host_make(&h);
	host_start_threads(&h, 2);
	leave_restart_window(&h);
	enum { FIRST = 6, N = 16, ROUNDS = 8 };
	static uint8_t image[N][PS], five[PS], got[PS];
	for (unsigned i = 0; i < N; i++)
		read_file(h.ibd_path, image[i], PS, (off_t)(FIRST + i) * PS);
	read_file(h.ibd_path, five, PS, 5 * PS);
	uint64_t cap = h.l.size - SYN_AREA;
	for (unsigned r = 0; r < ROUNDS; r++) {
		for (unsigned i = 0; i < N; i++) {
			change(&h, FIRST + i, 400 + 40 * r, (uint8_t)(r * N + i), 300, image[i]);
			change(&h, FIRST + i, 4000 + 40 * r, (uint8_t)(r + i), 200, image[i]);
		}
		flush_log(&h);
		for (unsigned i = 0; i < N; i++)
			CHECK_EQ_U(ask(&h, FIRST + i, image[i], PS), PPL_ELIDE_ACK);
		CHECK_EQ_U(checkpoint(&h, h.l.lsn), 0);
		log_on_until(&h, h.l.lsn + cap / 3, five);
	}
	flush_log(&h);
	struct ppl_store_figures f;
	ppl_store_figures(h.s, &f);
	CHECK_EQ_U(f.checkpoints_held, 0);
	CHECK(f.pool_spilled_kept > 0); /* the pages did go over their cap */
	for (unsigned i = 0; i < N; i++) {
		CHECK_EQ_U(host_read(&h, FIRST + i, got), 0);
		CHECK(memcmp(got, image[i], PS) == 0);
	}
	CHECK(!logged(&h, "CRIT"));
	host_close(&h);
}

/* The storage node dies after MariaDB's checkpoint passed a marked page's
 * records (the pool has its head, the log its records, the file is
 * older). The next store reads the log from the restart point before the
 * checkpoint and serves the page MariaDB wrote; and below the checkpoint
 * it takes records only for pages in the pool: page 4, which a tool wrote
 * without redo (LSN 0, as IMPORT TABLESPACE does) after its last record,
 * is served as its file holds it, never rebuilt from records its file
 * does not descend from (I7). */
static void test_restart_from_the_restart_point(void)
{
	struct host h;
	host_make(&h);
	static uint8_t image[PS], p4[PS], tool4[PS], got[PS];
	read_file(h.ibd_path, image, PS, 3 * PS);
	read_file(h.ibd_path, p4, PS, 4 * PS);
	make_page(tool4, SPACE, 4, PPL_FIL_PAGE_INDEX, 0);
	memset(tool4 + 3000, 0x7e, 64);
	ppl_page_stamp(tool4, PS, 0);
	pid_t pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		host_start(&h);
		leave_restart_window(&h);
		uint64_t over = h.l.lsn;
		change(&h, 3, 2000, 0x25, 300, image);
		change(&h, 4, 600, 0x44, 30, p4);
		change(&h, 3, 100, 0x26, 10, image); /* its LSN makes the ask parse page 4's record too */
		flush_log(&h);
		bool ok = ask(&h, 3, image, PS) == PPL_ELIDE_ACK;
		host_page_write(&h, 4, tool4);
		ok = ok && checkpoint(&h, h.l.lsn) == 0;
		struct ppl_store_figures f;
		ppl_store_figures(h.s, &f);
		ok = ok && f.pool_spilled_kept == 1 && f.materialized == 0 && f.pool_durable_lsn == over;
		_exit(ok && check_failures == 0 ? 0 : 1);
	}
	int status = 0;
	CHECK(waitpid(pid, &status, 0) == pid);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	leave_restart_window_as(&h, false); /* the same, in this process's copy */
	change(&h, 3, 2000, 0x25, 300, image);
	change(&h, 4, 600, 0x44, 30, p4);
	change(&h, 3, 100, 0x26, 10, image);
	h.written = h.l.lsn;
	read_file(h.ibd_path, got, PS, 3 * PS);
	CHECK(memcmp(got, image, PS) != 0); /* not materialized */

	host_start(&h);
	CHECK(logged(&h, "redo ingest started at the restart point LSN"));
	CHECK_EQ_U(host_read(&h, 3, got), 0);
	CHECK(memcmp(got, image, PS) == 0);
	CHECK_EQ_U(host_read(&h, 4, got), 0);
	CHECK(memcmp(got, tool4, PS) == 0);
	CHECK(!logged(&h, "CRIT"));
	host_close(&h);
}

/* The child: a store that elides one change of `page` (and, with
 * `then_checkpoint`, passes MariaDB's checkpoint over it: the gate keeps
 * its records in the pool) and dies. */
static void crash_after_eliding(struct host *h, uint32_t page, uint32_t at, uint8_t fill, size_t len, uint8_t *image,
				bool then_checkpoint)
{
	pid_t pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		host_start(h);
		change(h, page, at, fill, len, image);
		flush_log(h);
		bool ok = ask(h, page, image, PS) == PPL_ELIDE_ACK;
		if (then_checkpoint) {
			struct ppl_store_figures f;
			ok = ok && checkpoint(h, h->l.lsn) == 0;
			ppl_store_figures(h->s, &f);
			ok = ok && f.pool_kept == 1;
		}
		_exit(ok && check_failures == 0 ? 0 : 1);
	}
	int status = 0;
	CHECK(waitpid(pid, &status, 0) == pid);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	change(h, page, at, fill, len, image); /* the same, in this process's copy */
	h->written = h->l.lsn;
}

/* The storage node dies (no clean stop) after the checkpoint gate kept a
 * page's records in the pool and MariaDB's checkpoint passed them: the
 * log no longer has them, the data file is older, only the pool holds the
 * page. The next store on the same files puts the pool's records back and
 * serves the page MariaDB wrote. */
static void test_pool_survives_a_crash(void)
{
	struct host h;
	host_make(&h);
	static uint8_t image[PS], got[PS];
	read_file(h.ibd_path, image, PS, 3 * PS);
	crash_after_eliding(&h, 3, 200, 0x31, 24, image, true);
	uint64_t log_end = h.l.lsn;
	read_file(h.ibd_path, got, PS, 3 * PS);
	CHECK(memcmp(got, image, PS) != 0); /* the file is older: not materialized */
	/* the log file's newest checkpoint is past the page's records */
	static uint8_t hdr[12288];
	read_file(h.log_path, hdr, sizeof hdr, 0);
	CHECK(ppl_rd8(hdr + 8192) == log_end || ppl_rd8(hdr + 4096) == log_end);

	host_start(&h);
	struct ppl_store_figures f;
	ppl_store_figures(h.s, &f);
	CHECK_EQ_U(f.pool_loaded_pages, 1);
	CHECK_EQ_U(host_read(&h, 3, got), 0);
	CHECK(memcmp(got, image, PS) == 0);
	host_close(&h);
}

/* MariaDB's page reads while it writes its log, asks, and checkpoints,
 * with the store's apply workers running: every page read is a whole,
 * valid page (materialization and reads of a page never overlap), and at
 * the end every page reads as MariaDB last wrote it. Run under
 * ThreadSanitizer in the suite. */
struct reader_arg {
	struct host *h;
	int stop;
	unsigned reads, seed;
};

static void *reader(void *arg)
{
	struct reader_arg *a = arg;
	uint8_t *got = malloc(PS);
	while (!__atomic_load_n(&a->stop, __ATOMIC_ACQUIRE)) {
		a->seed = a->seed * 1103515245u + 12345u;
		uint32_t p = 1 + (a->seed >> 8) % (NPAGES - 1);
		CHECK_EQ_U(host_read(a->h, p, got), 0);
		CHECK(ppl_page_crc_ok(got, PS));
		CHECK_EQ_U(ppl_page_no(got), p);
		a->reads++;
	}
	free(got);
	return NULL;
}

static void test_concurrent_reads_and_gate(void)
{
	static struct host h;
	static uint8_t images[NPAGES][PS], got[PS];
	host_make(&h);
	host_start_threads(&h, 2);
	for (uint32_t p = 1; p < NPAGES; p++)
		read_file(h.ibd_path, images[p], PS, (off_t)p * PS);
	struct reader_arg ra[2] = {{.h = &h, .seed = 1}, {.h = &h, .seed = 2}};
	pthread_t t[2];
	for (int i = 0; i < 2; i++)
		CHECK(pthread_create(&t[i], NULL, reader, &ra[i]) == 0);
	unsigned acks = 0, round;
	struct ppl_store_figures f;
	/* until the pages over their cap fall half the log behind and the
	 * workers write them: materializations among the reads */
	for (round = 0; round < 12 || (f.materialized == 0 && round < 1000); round++) {
		for (uint32_t p = 1; p < NPAGES; p++)
			change(&h, p, 100 + (round * 997 + p * 131) % 15000, (uint8_t)(round * 16 + p), 60 + p % 5 * 20,
			       images[p]);
		flush_log(&h);
		for (uint32_t p = 1; p < NPAGES; p++)
			acks += ask(&h, p, images[p], PS) == PPL_ELIDE_ACK;
		CHECK_EQ_U(checkpoint(&h, h.l.lsn), 0);
		ppl_store_figures(h.s, &f);
	}
	for (int i = 0; i < 2; i++) {
		__atomic_store_n(&ra[i].stop, 1, __ATOMIC_RELEASE);
		pthread_join(t[i], NULL);
	}
	CHECK_EQ_U(acks, round * (NPAGES - 1));
	CHECK(ra[0].reads > 0 && ra[1].reads > 0);
	ppl_store_figures(h.s, &f);
	CHECK(f.materialized > 0 && f.pool_kept > 0);
	for (uint32_t p = 1; p < NPAGES; p++) {
		CHECK_EQ_U(host_read(&h, p, got), 0);
		CHECK(memcmp(got, images[p], PS) == 0);
	}
	CHECK(!logged(&h, "CRIT"));
	printf("concurrent: %u + %u reads, %u acks, %llu materialized, %llu kept in the pool\n", ra[0].reads,
	       ra[1].reads, acks, (unsigned long long)f.materialized, (unsigned long long)f.pool_kept);
	host_close(&h);
}

/* A storage-node restart whose log file ends in records of an elided
 * page: those last bytes are held (not known to be final), and a read of
 * the page waits until the parse passes them, woken by MariaDB's next log
 * writes. Then, after another restart, a log that stays quiet is taken as
 * it stands (the injected clock jumps past the quiet time). */
struct held_read {
	struct host *h;
	uint32_t page;
	uint8_t *out;
	int rc, done;
};

static void *held_reader(void *arg)
{
	struct held_read *a = arg;
	a->rc = host_read(a->h, a->page, a->out);
	__atomic_store_n(&a->done, 1, __ATOMIC_RELEASE);
	return NULL;
}

static void test_held_tail_after_restart(void)
{
	static struct host h;
	static uint8_t image[PS], got[PS];
	host_make(&h);
	read_file(h.ibd_path, image, PS, 3 * PS);
	crash_after_eliding(&h, 3, 300, 0x41, 32, image, false);

	/* restart; a read just after it waits for MariaDB's next log write */
	host_start(&h);
	__atomic_store_n(&h.clock_ns, START_NS + 500000000ull, __ATOMIC_RELAXED);
	struct held_read a = {.h = &h, .page = 3, .out = got};
	pthread_t t;
	CHECK(pthread_create(&t, NULL, held_reader, &a) == 0);
	usleep(200 * 1000);
	CHECK(!__atomic_load_n(&a.done, __ATOMIC_ACQUIRE)); /* waiting, not served older */
	static uint8_t p4[PS];
	read_file(h.ibd_path, p4, PS, 4 * PS);
	change(&h, 4, 100, 0x42, 500, p4);
	flush_log(&h); /* a lone block: final only once a write starts past it */
	change(&h, 4, 1000, 0x44, 500, p4);
	flush_log(&h);
	pthread_join(t, NULL);
	CHECK_EQ_U(a.rc, 0);
	CHECK(memcmp(got, image, PS) == 0);
	ppl_store_free(h.s);

	/* another crash and restart, and the log stays quiet: the read is
	 * served once the quiet time has passed on the store's clock */
	crash_after_eliding(&h, 3, 900, 0x43, 16, image, false);
	host_start(&h);
	__atomic_store_n(&h.clock_ns, START_NS + 500000000ull, __ATOMIC_RELAXED);
	a = (struct held_read){.h = &h, .page = 3, .out = got};
	CHECK(pthread_create(&t, NULL, held_reader, &a) == 0);
	usleep(200 * 1000);
	CHECK(!__atomic_load_n(&a.done, __ATOMIC_ACQUIRE));
	__atomic_add_fetch(&h.clock_ns, 5ull * 1000000000ull, __ATOMIC_RELAXED);
	pthread_join(t, NULL);
	CHECK_EQ_U(a.rc, 0);
	CHECK(memcmp(got, image, PS) == 0);
	CHECK(!logged(&h, "CRIT"));
	host_close(&h);
}

/* The export starts while a datadir's log is still being copied in (its
 * last piece not there yet): ingest reads the file at a size too small.
 * The copy's last write, past that size, makes ingest start over with the
 * real size, and the log is then followed across its wrap point. (Seen in
 * mtr's innodb_scrub: "sequence bit of an older pass" 19 bytes before
 * the end of a log taken 16 bytes short.) */
static void test_log_still_arriving(void)
{
	static struct host h;
	static uint8_t image[PS], got[PS];
	host_make(&h);
	CHECK(truncate(h.log_path, (off_t)(h.l.size - 8192)) == 0);
	host_start(&h);
	CHECK_EQ_U(host_log_write(&h, h.l.size - 8192, h.l.file + h.l.size - 8192, 8192), 0);
	ppl_store_log_drain(h.s);
	CHECK(logged(&h, "past the"));
	/* well past one wrap of the 1 MiB area, with checkpoints as MariaDB makes them */
	static uint8_t scratch[PS];
	for (int i = 0; i < 2400; i++) {
		change(&h, 6, 100, (uint8_t)i, 500, scratch);
		if (i % 50 == 49) {
			flush_log(&h);
			CHECK_EQ_U(checkpoint(&h, h.l.lsn), 0);
		}
	}
	CHECK(h.l.lsn - FIRST_LSN > (h.l.size - SYN_AREA) + 100000);
	read_file(h.ibd_path, image, PS, 3 * PS);
	change(&h, 3, 400, 0x51, 40, image);
	flush_log(&h);
	CHECK_EQ_U(ask(&h, 3, image, PS), PPL_ELIDE_ACK);
	CHECK_EQ_U(host_read(&h, 3, got), 0);
	CHECK(memcmp(got, image, PS) == 0);
	CHECK(!logged(&h, "CRIT"));
	host_close(&h);
}

/* The storage node dies while a log write of MariaDB's had not reached
 * the file, though the checkpoint block written after it had (a client's
 * WRITEs run at once, and the dead server carried out one and not the
 * other): at the restart the file's log ends in damage before the end its
 * checkpoint vouches for. Ingest waits for MariaDB's next log write (the
 * client sends the missing bytes again), and a read of a page whose write
 * was elided waits too: its file holds an older page. Seen in
 * test_crash_ledger: such reads were served from the file, and InnoDB
 * asserted on the old page. Then again, and nobody writes the log: after
 * the wait limit the log is taken as it stands, ingest stopped, and the
 * read is served from what was parsed. */
static void crash_losing_last_log_write(struct host *h, uint32_t page, uint32_t at, uint8_t fill, uint8_t *image,
					uint64_t *lost_from)
{
	*lost_from = h->l.lsn;
	crash_after_eliding(h, page, at, fill, 32, image, false);
	size_t a = syn_off(&h->l, *lost_from), b = syn_off(&h->l, h->l.lsn);
	CHECK(a < b);
	static uint8_t zeros[4096];
	CHECK(b - a <= sizeof zeros);
	write_file(h->log_path, zeros, b - a, (off_t)a);
	uint8_t ck[64];
	syn_checkpoint(ck, FIRST_LSN, h->l.lsn);
	write_file(h->log_path, ck, sizeof ck, 4096);
	write_file(h->log_path, ck, sizeof ck, 8192);
}

static void test_restart_with_log_write_lost(void)
{
	static struct host h;
	static uint8_t image[PS], got[PS];
	host_make(&h);
	read_file(h.ibd_path, image, PS, 3 * PS);
	uint64_t lost;
	crash_losing_last_log_write(&h, 3, 700, 0x61, image, &lost);
	host_start(&h);
	__atomic_store_n(&h.clock_ns, START_NS + 500000000ull, __ATOMIC_RELAXED); /* just after the restart */
	CHECK(logged(&h, "page reads wait until then"));
	struct held_read a = {.h = &h, .page = 3, .out = got};
	pthread_t t;
	CHECK(pthread_create(&t, NULL, held_reader, &a) == 0);
	usleep(200 * 1000);
	CHECK(!__atomic_load_n(&a.done, __ATOMIC_ACQUIRE)); /* waiting, not served from the file */
	/* the client sends the lost write again, from its block */
	size_t from = syn_off(&h.l, lost) & ~(size_t)511, to = syn_off(&h.l, h.l.lsn);
	CHECK_EQ_U(host_log_write(&h, from, h.l.file + from, to - from), 0);
	h.written = h.l.lsn;
	usleep(100 * 1000);
	CHECK(!__atomic_load_n(&a.done, __ATOMIC_ACQUIRE)); /* its records are in the held tail now */
	/* MariaDB goes on: its next writes make that tail final */
	static uint8_t p4[PS];
	read_file(h.ibd_path, p4, PS, 4 * PS);
	change(&h, 4, 100, 0x63, 500, p4);
	flush_log(&h);
	change(&h, 4, 1000, 0x64, 500, p4);
	flush_log(&h);
	pthread_join(t, NULL);
	CHECK_EQ_U(a.rc, 0);
	CHECK(memcmp(got, image, PS) == 0);
	CHECK(logged(&h, "redo ingest started"));
	ppl_store_free(h.s);

	/* again, after a write of page 5 was elided too, and nobody
	 * completes the log: past the wait limit it is taken as it stands.
	 * Page 3 is what the log before the lost write says; page 5, whose
	 * records lie between the checkpoint and the damage, is rebuilt. */
	static uint8_t before_lost[PS], p5[PS];
	memcpy(before_lost, image, PS);
	read_file(h.ibd_path, p5, PS, 5 * PS);
	pid_t pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		host_start(&h);
		__atomic_store_n(&h.clock_ns, START_NS + 500000000ull, __ATOMIC_RELAXED);
		change(&h, 5, 800, 0x65, 40, p5);
		flush_log(&h);
		_exit(ask(&h, 5, p5, PS) == PPL_ELIDE_ACK && check_failures == 0 ? 0 : 1);
	}
	int status = 0;
	CHECK(waitpid(pid, &status, 0) == pid);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	change(&h, 5, 800, 0x65, 40, p5); /* the same, in this process's copy */
	h.written = h.l.lsn;
	crash_losing_last_log_write(&h, 3, 900, 0x62, image, &lost);
	host_start(&h);
	__atomic_store_n(&h.clock_ns, START_NS + 500000000ull, __ATOMIC_RELAXED);
	a = (struct held_read){.h = &h, .page = 3, .out = got};
	CHECK(pthread_create(&t, NULL, held_reader, &a) == 0);
	usleep(200 * 1000);
	CHECK(!__atomic_load_n(&a.done, __ATOMIC_ACQUIRE));
	__atomic_add_fetch(&h.clock_ns, 25ull * 1000000000ull, __ATOMIC_RELAXED);
	pthread_join(t, NULL);
	CHECK_EQ_U(a.rc, 0);
	CHECK(memcmp(got, before_lost, PS) == 0);
	CHECK(logged(&h, "what was parsed is kept"));
	static uint8_t got5[PS];
	CHECK_EQ_U(host_read(&h, 5, got5), 0);
	CHECK(memcmp(got5, p5, PS) == 0);
	host_close(&h);
}

/* A table created after MariaDB's checkpoint, and the storage node dies
 * before its file holds anything: the file is zeros, so only the log's
 * FILE_CREATE says which space it is. Page 0 is not elided while the file
 * does not name its space (MariaDB's write must name it), but page 3,
 * initialized by the log, is. The restart reads the FILE_CREATE while it
 * catches up from the checkpoint; the next checkpoint then passes, and
 * page 3 reads as MariaDB wrote it. Before, file events of the catch-up
 * were dropped: "space 6: no file of the datadir holds it", and the
 * checkpoint was refused (test_crash_ledger over TPC-C). */
static void test_restart_knows_files_created_after_checkpoint(void)
{
	printf("a table created after the checkpoint, a page of it elided, survives a crash\n");
	struct host h;
	host_make(&h);
	enum { NEW = 6 };
	char t2[300], saved[300];
	snprintf(t2, sizeof t2, "%s/test/t2.ibd", h.dir);
	snprintf(saved, sizeof saved, "%s/page3.expected", h.dir);
	static uint8_t zero[PS], page0[PS], got[PS], p7[PS], image3[PS];
	read_file(h.ibd_path, p7, PS, 7 * PS);
	for (int i = 0; i < 4; i++)
		write_file(t2, zero, PS, (off_t)i * PS);
	/* MariaDB's page 0 of the new space: the header fields, written by the mini-transaction that logs the file */
	make_page(page0, NEW, 0, PPL_FIL_PAGE_TYPE_FSP_HDR, FIRST_LSN);
	size_t head = PPL_FSP_HEADER_OFFSET + PPL_FSP_SPACE_FLAGS + 4;
	uint8_t recs[1200], body[16], data[64];
	size_t n = syn_file_create_rec(recs, NEW, "./test/t2.ibd");
	n += syn_write_rec(recs + n, NEW, 0, 8, page0 + 8, head - 8); /* InnoDB logs nothing below byte 8 */
	size_t b = syn_varint(body, NEW);
	b += syn_varint(body + b, 3);
	n += syn_rec(recs + n, 0x10, body, b); /* INIT_PAGE of page 3 */
	memset(data, 0x3c, sizeof data);
	n += syn_write_rec(recs + n, NEW, 3, 200, data, sizeof data);
	memset(page0, 0, PS);
	make_page(page0, NEW, 0, PPL_FIL_PAGE_TYPE_FSP_HDR, FIRST_LSN);
	memset(page0 + head, 0, PS - head);

	pid_t pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		host_start(&h);
		syn_mtr(&h.l, recs, n);
		ppl_page_stamp(page0, PS, h.l.lsn);
		flush_log(&h);
		struct ppl_elision_page pg0 = {NEW, 0, ppl_page_lsn(page0), ppl_page_stored_crc(page0, PS), PS};
		bool ok = ppl_store_elide(h.s, &pg0) == PPL_ELIDE_NACK_UNKNOWN_FILE;
		/* page 3 as the index rebuilds it (what MariaDB's buffer pool holds) */
		bool changed = false;
		struct ppl_apply_error err;
		rcu_read_lock();
		struct ppl_node *node = ppl_store_node(h.s);
		ok = ok && node != NULL &&
		     ppl_node_rebuild(node, NEW, 3, image3, UINT64_MAX, &changed, &err) == PPL_APPLY_OK && changed;
		rcu_read_unlock();
		write_file(saved, image3, PS, 0);
		struct ppl_elision_page pg3 = {NEW, 3, ppl_page_lsn(image3), ppl_page_stored_crc(image3, PS), PS};
		ok = ok && ppl_store_elide(h.s, &pg3) == PPL_ELIDE_ACK;
		/* MariaDB goes on: the FILE_CREATE is far before the log's
		 * last bytes, which a restart holds back */
		for (int i = 0; i < 40; i++) {
			change(&h, 7, 500, (uint8_t)(0x70 + i), 500, p7);
			flush_log(&h);
		}
		_exit(ok && check_failures == 0 ? 0 : 1);
	}
	int status = 0;
	CHECK(waitpid(pid, &status, 0) == pid);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	syn_mtr(&h.l, recs, n); /* the same, in this process's copy */
	for (int i = 0; i < 40; i++)
		change(&h, 7, 500, (uint8_t)(0x70 + i), 500, p7);
	h.written = h.l.lsn;
	read_file(t2, got, PS, 3 * PS);
	CHECK(memcmp(got, zero, PS) == 0); /* never materialized */
	read_file(saved, image3, PS, 0);

	host_start(&h);
	CHECK_EQ_U(checkpoint(&h, h.l.lsn), 0);
	CHECK(!logged(&h, "no file of the datadir holds it"));
	/* MariaDB reads page 3 back: the file's zeros, served rebuilt */
	uint64_t ino = ino_of(t2);
	memset(got, 0, PS);
	struct iovec iov = {got, PS};
	ppl_store_read_begin(h.s, ino, 3 * PS, PS);
	CHECK_EQ_U(ppl_store_read(h.s, ino, 3 * PS, &iov, 1, PS, 1), 0);
	ppl_store_read_end(h.s, ino, 3 * PS, PS);
	CHECK(memcmp(got, image3, PS) == 0);
	host_close(&h);
}

/* A pool on tmpfs (a power loss empties it) keeps no page's records past
 * MariaDB's checkpoint: the gate writes the page into its file instead,
 * and says so at start. With Allow_Volatile_Pool the operator takes that
 * risk and the pool keeps them, as on NVDIMM; the start says what a power
 * loss then costs. */
static void test_volatile_pool(void)
{
	printf("a pool on tmpfs keeps nothing past a checkpoint unless allowed\n");
	if (access("/dev/shm", W_OK) != 0) {
		printf("  /dev/shm is not writable here: the test needs a tmpfs\n");
		CHECK(access("/dev/shm", W_OK) == 0);
		return;
	}
	for (int allow = 0; allow < 2; allow++) {
		struct host h;
		host_make(&h);
		CHECK(unlink(h.pool_path) == 0);
		snprintf(h.pool_path, sizeof h.pool_path, "/dev/shm/ppl-test-volatile-%d-%d.pool", (int)getpid(), allow);
		char err[512];
		struct ppl_pool_geometry g = {.size = 8 << 20, .identity = h.dir};
		CHECK(ppl_pool_create(h.pool_path, &g, err, sizeof err) == 0);
		h.allow_volatile_pool = allow;
		host_start(&h);
		CHECK(logged(&h, allow ? "Allow_Volatile_Pool = true: records of pages kept in it past"
				       : "it keeps no page's records past MariaDB's checkpoint"));
		static uint8_t image[PS], got[PS];
		elide_one(&h, 3, 2000, 0x5a, 40, image); /* small: under the per-page cap */
		CHECK_EQ_U(checkpoint(&h, h.l.lsn), 0);
		struct ppl_store_figures f;
		ppl_store_figures(h.s, &f);
		read_file(h.ibd_path, got, PS, 3 * PS);
		if (allow) {
			CHECK_EQ_U(f.pool_kept, 1);
			CHECK_EQ_U(f.materialized, 0);
			CHECK(memcmp(got, image, PS) != 0); /* only the pool has it */
		} else {
			CHECK_EQ_U(f.pool_kept, 0);
			CHECK_EQ_U(f.materialized, 1);
			CHECK(memcmp(got, image, PS) == 0);
		}
		CHECK_EQ_U(host_read(&h, 3, got), 0);
		CHECK(memcmp(got, image, PS) == 0);
		/* the pool lost now (a power loss): without the risk taken, it
		 * held nothing and a new one may serve; with it, it is refused */
		char merr[1024];
		CHECK_EQ_U(ppl_pool_marker_admit(h.dir, NULL, 0, merr, sizeof merr) != 0, (unsigned)allow);
		host_close(&h);
	}
}

/* A page freed after its write was elided: the gate keeps the FREE_PAGE
 * record in the pool, the storage node dies, and the restart puts it back
 * into the index. It must come back freed: the clean stop then forgets it
 * (nothing of a free page is written) and leaves the pool empty, so the
 * export's marker says drained. Before, it came back as a page with
 * records, stayed in the pool across every restart, and the pool was never
 * drained. */
static void test_freed_page_put_back_is_forgotten(void)
{
	printf("a freed page put back from the pool is forgotten at the clean stop\n");
	struct host h;
	host_make(&h);
	static uint8_t image[PS];
	read_file(h.ibd_path, image, PS, 9 * PS);
	uint8_t rec[32];
	size_t n = syn_free_page_rec(rec, SPACE, 9);
	pid_t pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		host_start(&h);
		change(&h, 9, 300, 0x44, 20, image);
		flush_log(&h);
		bool ok = ask(&h, 9, image, PS) == PPL_ELIDE_ACK;
		syn_mtr(&h.l, rec, n); /* the page is freed */
		flush_log(&h);
		struct ppl_store_figures f;
		ok = ok && checkpoint(&h, h.l.lsn) == 0;
		ppl_store_figures(h.s, &f);
		ok = ok && f.pool_kept == 1;
		_exit(ok && check_failures == 0 ? 0 : 1);
	}
	int status = 0;
	CHECK(waitpid(pid, &status, 0) == pid);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	change(&h, 9, 300, 0x44, 20, image);
	syn_mtr(&h.l, rec, n);
	h.written = h.l.lsn;

	host_start(&h);
	struct ppl_store_figures f;
	ppl_store_figures(h.s, &f);
	CHECK_EQ_U(f.pool_loaded_pages, 1);
	ppl_store_free(h.s); /* the clean stop */
	char err[1024];
	CHECK_EQ_U(ppl_pool_marker_admit(h.dir, NULL, 0, err, sizeof err), 0); /* drained */
	CHECK(!logged(&h, "still holds"));
	host_start(&h);
	ppl_store_figures(h.s, &f);
	CHECK_EQ_U(f.pool_loaded_pages, 0);
	host_close(&h);
}

int main(void)
{
	test_elide_and_read();
	test_elided_page_cached_for_its_read();
	test_hot_page_goes_on_from_the_cache();
	test_gate_keeps_over_cap_pages_in_the_log();
	test_record_too_large_for_the_pool();
	test_wrap_guard_materializes();
	test_workers_keep_ahead_of_the_wrap();
	test_settling_keeps_the_gate_from_waiting();
	test_restart_from_the_restart_point();
	test_pool_survives_a_crash();
	test_concurrent_reads_and_gate();
	test_held_tail_after_restart();
	test_log_still_arriving();
	test_restart_with_log_write_lost();
	test_restart_knows_files_created_after_checkpoint();
	test_volatile_pool();
	test_freed_page_put_back_is_forgotten();
	CHECK_DONE();
}
