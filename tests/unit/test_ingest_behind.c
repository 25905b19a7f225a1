/* Ingest_Behind (applier/src/store_behind.c): log writes answered before
 * they are parsed, and everything that depends on them waiting for the
 * parse. The ingest thread is held at will through the store's clock (it
 * reads the clock first thing for each write), so that a test can show a
 * write answered while its parse has not happened, and a question or a
 * writer waiting for it. The whole store suite also runs with the queue
 * (PPL_TEST_INGEST_BEHIND=1, tests/CMakeLists.txt). */
#include <inttypes.h>
#include <stdatomic.h>

#include "ppl/archive.h"
#include "store_host.h"

static pthread_mutex_t hold_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t hold_cond = PTHREAD_COND_INITIALIZER;
static bool holding;          /* the ingest thread waits in the clock */
static atomic_int held_now;   /* it is waiting there now */
static pthread_t ingest_tid;
static atomic_bool have_tid;

static void thread_started(void *arg, const char *name)
{
	(void)arg;
	if (strcmp(name, "ppl_ingest") == 0) {
		ingest_tid = pthread_self();
		atomic_store(&have_tid, true);
	}
}

static uint64_t holding_clock(void *arg)
{
	if (atomic_load(&have_tid) && pthread_equal(pthread_self(), ingest_tid)) {
		pthread_mutex_lock(&hold_lock);
		while (holding) {
			atomic_store(&held_now, 1);
			pthread_cond_wait(&hold_cond, &hold_lock);
		}
		atomic_store(&held_now, 0);
		pthread_mutex_unlock(&hold_lock);
	}
	return clock_of(arg);
}

static void hold(bool on)
{
	pthread_mutex_lock(&hold_lock);
	holding = on;
	pthread_cond_broadcast(&hold_cond);
	pthread_mutex_unlock(&hold_lock);
}

/* host_start with Ingest_Behind and the holding clock (and the log
 * archive in archive_dir, if given). */
static void start_behind_with(struct host *h, const char *archive_dir, bool pool)
{
	/* the last store's ingest thread is gone: its id must not be read
	 * (by this store's archive thread, started before the ingest
	 * thread) while the new one writes it */
	atomic_store(&have_tid, false);
	h->clock_ns = START_NS;
	struct ppl_store_env env = {.log = {.log = on_log, .arg = h}, .now_ns = holding_clock, .clock_arg = h,
				    .thread_started = thread_started};
	h->s = ppl_store_new(h->dir, &env);
	CHECK(h->s != NULL);
	struct ppl_config c = {.pool_path = h->pool_path, .block_size = 64, .max_per_page = 256,
			       .apply_threads = 0, .elision_address = "127.0.0.1", .elision_clients = "127.0.0.1",
			       .elision_token = "t", .ingest_behind = true};
	char err[512];
	int rc = pool ? ppl_store_start_elision(h->s, &c, err, sizeof err) : 0;
	if (rc)
		printf("start_elision: %s\n", err);
	CHECK(rc == 0);
	c.archive_path = (char *)archive_dir;
	if (archive_dir) {
		rc = ppl_store_start_archive(h->s, &c, err, sizeof err);
		if (rc)
			printf("start_archive: %s\n", err);
		CHECK(rc == 0);
	}
	rc = ppl_store_start_ingest_behind(h->s, &c, err, sizeof err);
	if (rc)
		printf("start_ingest_behind: %s\n", err);
	CHECK(rc == 0);
	ppl_store_start_from_disk(h->s);
	__atomic_add_fetch(&h->clock_ns, 60ull * 1000000000ull, __ATOMIC_RELAXED);
}

static void start_behind(struct host *h)
{
	start_behind_with(h, NULL, true);
}

static void figures(struct host *h, struct ppl_store_figures *f)
{
	ppl_store_figures(h->s, f);
}

struct asker {
	struct host *h;
	uint32_t page;
	const uint8_t *image;
	atomic_int done;
	unsigned verdict;
};

static void *ask_main(void *arg)
{
	struct asker *a = arg;
	a->verdict = ask(a->h, a->page, a->image, PS);
	atomic_store(&a->done, 1);
	return NULL;
}

static void wait_held(void)
{
	for (int i = 0; i < 2000 && !atomic_load(&held_now); i++)
		usleep(1000);
	CHECK(atomic_load(&held_now));
}

/* A log write is answered while its parse waits; a question about the
 * page it changed waits for that parse, then says yes to the exact image;
 * the page reads back rebuilt. */
static void test_answered_before_parsed(void)
{
	struct host h;
	host_make(&h);
	start_behind(&h);
	static uint8_t image[PS], got[PS];
	read_file(h.ibd_path, image, PS, 3 * PS);
	hold(true);
	change(&h, 3, 200, 0x5a, 100, image);
	flush_log(&h); /* returns: the write is queued */
	change(&h, 3, 900, 0x5b, 100, image);
	flush_log(&h);
	wait_held();
	struct ppl_store_figures f;
	figures(&h, &f);
	CHECK(f.ingest_behind);
	CHECK(f.behind_writes >= 1);
	CHECK(f.parsed_lsn < h.l.lsn);
	struct asker a = {.h = &h, .page = 3, .image = image};
	pthread_t t;
	CHECK(pthread_create(&t, NULL, ask_main, &a) == 0);
	usleep(100 * 1000);
	CHECK(!atomic_load(&a.done)); /* the question waits for the parse */
	hold(false);
	pthread_join(t, NULL);
	CHECK_EQ_U(a.verdict, PPL_ELIDE_ACK);
	CHECK_EQ_U(host_read(&h, 3, got), 0);
	CHECK(memcmp(got, image, PS) == 0);
	ppl_store_log_drain(h.s);
	figures(&h, &f);
	CHECK_EQ_U(f.behind_writes, 0);
	CHECK_EQ_U(f.behind_bytes, 0);
	CHECK(f.behind_max_bytes > 0);
	CHECK(!logged(&h, "CRIT"));
	host_close(&h);
}

struct writer {
	struct host *h;
	uint8_t *image;
	int rounds;
	atomic_int done;
};

static void *write_main(void *arg)
{
	struct writer *w = arg;
	for (int i = 0; i < w->rounds; i++) {
		change(w->h, 4, 100 + (uint32_t)(i % 30) * 500, (uint8_t)i, 400, w->image);
		flush_log(w->h);
	}
	atomic_store(&w->done, 1);
	return NULL;
}

/* The queue holds at most an eighth of the log (1 MiB here): a writer past
 * that waits for the parse, and is counted; the page changed again and
 * again comes out with every change in order. */
static void test_bounded_queue(void)
{
	struct host h;
	host_make(&h);
	start_behind(&h);
	static uint8_t image[PS], got[PS];
	read_file(h.ibd_path, image, PS, 4 * PS);
	hold(true);
	struct writer w = {.h = &h, .image = image, .rounds = 400}; /* ~170 KB of log: past 128 KiB */
	pthread_t t;
	CHECK(pthread_create(&t, NULL, write_main, &w) == 0);
	wait_held();
	usleep(200 * 1000);
	CHECK(!atomic_load(&w.done)); /* waiting for room */
	struct ppl_store_figures f;
	figures(&h, &f);
	CHECK(f.behind_bytes <= (h.l.size - SYN_AREA) / 8);
	hold(false);
	pthread_join(t, NULL);
	CHECK_EQ_U(ask(&h, 4, image, PS), PPL_ELIDE_ACK);
	CHECK_EQ_U(host_read(&h, 4, got), 0);
	CHECK(memcmp(got, image, PS) == 0);
	figures(&h, &f);
	CHECK(f.behind_waits >= 1);
	CHECK(f.behind_max_bytes <= (h.l.size - SYN_AREA) / 8);
	CHECK(!logged(&h, "CRIT"));
	host_close(&h);
}

/* A damaged mini-transaction in a queued write stops ingest where the
 * synchronous path stops it, with the same words, once MariaDB's
 * checkpoint vouches for the log past it; a page changed after the damage
 * is not elided, one changed before it still is. */
static void damaged_log(bool behind, char *crit, size_t critlen)
{
	struct host h;
	host_make(&h);
	if (behind)
		start_behind(&h);
	else
		host_start(&h);
	static uint8_t p3[PS], p6[PS];
	read_file(h.ibd_path, p3, PS, 3 * PS);
	read_file(h.ibd_path, p6, PS, 6 * PS);
	change(&h, 3, 300, 0x31, 50, p3);
	uint64_t bad = h.l.lsn;
	change(&h, 6, 300, 0x61, 50, p6);
	h.l.file[syn_off(&h.l, bad) + 20] ^= 0x40; /* inside the second mtr's data: its CRC fails */
	change(&h, 6, 900, 0x62, 50, p6);
	flush_log(&h);
	CHECK_EQ_U(ask(&h, 3, p3, PS), PPL_ELIDE_ACK);
	CHECK_EQ_U(checkpoint(&h, h.l.lsn), 0);
	ppl_store_log_drain(h.s);
	CHECK(ask(&h, 6, p6, PS) != PPL_ELIDE_ACK);
	pthread_mutex_lock(&h.lines_lock);
	crit[0] = '\0';
	for (int i = 0; i < h.nlines; i++)
		if (strstr(h.lines[i], "redo ingest stopped")) {
			const char *m = strstr(h.lines[i], "redo ingest stopped");
			snprintf(crit, critlen, "%s", m);
		}
	pthread_mutex_unlock(&h.lines_lock);
	host_close(&h);
}

static void test_damage_stops_where_it_did(void)
{
	static char sync_crit[1024], behind_crit[1024];
	damaged_log(false, sync_crit, sizeof sync_crit);
	damaged_log(true, behind_crit, sizeof behind_crit);
	CHECK(strstr(sync_crit, "redo log damaged at LSN") != NULL);
	/* the same line but for the datadir's name */
	const char *a = strstr(sync_crit, "redo log damaged"), *b = strstr(behind_crit, "redo log damaged");
	CHECK(a != NULL && b != NULL);
	if (a && b)
		CHECK(strcmp(a, b) == 0);
}

static uint64_t wall_now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_REALTIME, &t);
	return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

struct stamps {
	uint64_t upto, lo, hi;
	unsigned n;
};

static int stamp_of(void *arg, const struct ppl_mtr *m, uint64_t wall_ns)
{
	struct stamps *st = arg;
	if (m->end_lsn <= st->upto) {
		st->n++;
		st->lo = st->lo && st->lo < wall_ns ? st->lo : wall_ns;
		st->hi = st->hi > wall_ns ? st->hi : wall_ns;
	}
	return 0;
}

/* The log archive stamps a mini-transaction with the time its log write
 * arrived -- its reply went out then, and a clone "at" a time must hold
 * what was acknowledged before it -- not with the parse's time behind it. */
static void test_archive_stamped_at_arrival(void)
{
	struct host h;
	host_make(&h);
	char adir[400];
	snprintf(adir, sizeof adir, "%s.archive", h.dir);
	CHECK(mkdir(adir, 0755) == 0);
	start_behind_with(&h, adir, true);
	static uint8_t image[PS], other[PS];
	read_file(h.ibd_path, image, PS, 3 * PS);
	read_file(h.ibd_path, other, PS, 5 * PS);
	hold(true);
	uint64_t t0 = wall_now();
	change(&h, 3, 200, 0x71, 100, image);
	change(&h, 3, 900, 0x72, 100, image);
	uint64_t upto = h.l.lsn;
	flush_log(&h);
	uint64_t t1 = wall_now();
	wait_held();
	usleep(300 * 1000); /* the parse comes 300 ms after the reply */
	hold(false);
	/* the next writes make the first final (after a start, a write is
	 * known final only once the next ones come: test_store_archive.c) */
	for (int i = 0; i < 2; i++) {
		for (int k = 0; k < 4; k++) /* past the tail block: a write makes final only what is before it */
			change(&h, 5, 300 + 500 * (uint32_t)k, (uint8_t)(0x73 + i), 400, other);
		flush_log(&h);
	}
	ppl_store_log_drain(h.s);
	ppl_store_log_synced(h.s, h.log_ino, ppl_store_log_mark(h.s));
	struct ppl_store_figures f;
	for (int i = 0; i < 500; i++) {
		ppl_store_figures(h.s, &f);
		if (f.archive_durable_lsn >= upto)
			break;
		usleep(10000);
	}
	CHECK(f.archive_durable_lsn >= upto);
	struct stamps st = {.upto = upto};
	char err[512];
	CHECK(ppl_archive_read(adir, FIRST_LSN, upto, stamp_of, &st, err, sizeof err) == 0);
	CHECK(st.n >= 2);
	CHECK(st.lo >= t0);
	CHECK(st.hi <= t1); /* not the parse's time, 300 ms later */
	CHECK(!logged(&h, "CRIT"));
	host_close(&h);
	CHECK(nftw(adir, rm_entry, 8, FTW_DEPTH | FTW_PHYS) == 0);
}

/* Without elision (no pool) the log is parsed behind the replies too
 * (for verify mode and the archive: such an export serves pages as its
 * files hold them): the option is not silently inert there. */
static void test_without_pool(void)
{
	struct host h;
	host_make(&h);
	start_behind_with(&h, NULL, false);
	static uint8_t image[PS];
	read_file(h.ibd_path, image, PS, 3 * PS);
	hold(true);
	uint64_t end = change(&h, 3, 400, 0x6c, 100, image);
	flush_log(&h); /* returns: the write is queued */
	/* the reader parses a log's last bytes once something says they are
	 * final (redo_reader.c): here a checkpoint block, whose end LSN is
	 * past them, queued behind the first write */
	CHECK_EQ_U(checkpoint(&h, 12288), 0);
	wait_held();
	struct ppl_store_figures f;
	figures(&h, &f);
	CHECK(f.ingest_behind);
	CHECK(f.behind_writes >= 1);
	CHECK(f.parsed_lsn < end);
	hold(false);
	ppl_store_log_drain(h.s);
	figures(&h, &f);
	CHECK_EQ_U(f.behind_writes, 0);
	CHECK(f.parsed_lsn >= end);
	CHECK(f.node.records >= 1 && f.node.pages_indexed >= 1);
	CHECK(!logged(&h, "CRIT"));
	host_close(&h);
}

int main(void)
{
	test_answered_before_parsed();
	test_without_pool();
	test_bounded_queue();
	test_damage_stops_where_it_did();
	test_archive_stamped_at_arrival();
	CHECK_DONE();
}
