/* The store's log archive (store_archive.c) over a synthetic log: it holds
 * exactly the log's mini-transactions, in order, and only once the log
 * file holds them durably; after a restart it catches up from the log
 * file what it missed while it was off; when MariaDB's log wraps over
 * what it could not make durable, archiving stops with a CRIT line and
 * MariaDB's writes go on; a damaged archive, or one inside the export,
 * refuses the start. */
#include <dirent.h>
#include <inttypes.h>

#include "ppl/archive.h"
#include "ppl/bases.h"
#include "ppl/redo.h"
#include "store_host.h"

static char adir[400];
static char err[1024];

static void start_store(struct host *h, bool archive, uint64_t segment)
{
	pthread_mutex_lock(&h->lines_lock);
	h->nlines = 0;
	pthread_mutex_unlock(&h->lines_lock);
	h->clock_ns = START_NS;
	struct ppl_store_env env = {.log = {.log = on_log, .arg = h}, .now_ns = clock_of, .clock_arg = h};
	h->s = ppl_store_new(h->dir, &env);
	CHECK(h->s != NULL);
	struct ppl_config c = {.archive_path = archive ? adir : NULL, .archive_segment_size = segment,
			       .ingest_behind = behind_from_env()};
	int rc = ppl_store_start_archive(h->s, &c, err, sizeof err);
	if (rc == 0)
		rc = ppl_store_start_ingest_behind(h->s, &c, err, sizeof err);
	if (rc != 0)
		printf("start_archive: %s\n", err);
	CHECK(rc == 0);
	ppl_store_start_from_disk(h->s);
}

/* n mini-transactions on page_no, written: the LSN they end at */
static uint64_t batch(struct host *h, uint32_t page_no, unsigned n, uint8_t *image)
{
	for (unsigned i = 0; i < n; i++)
		change(h, page_no, 300 + 10 * i, (uint8_t)i, 60, image);
	flush_log(h);
	ppl_store_log_drain(h->s); /* with Ingest_Behind: parsed, as the checks below expect */
	return h->l.lsn;
}

/* MariaDB writes on: after a store starts, a log write is known to be
 * final only once the next ones come (ppl_redo_hold), so the first of
 * three batches is the one surely parsed: its end LSN. */
static uint64_t three_batches(struct host *h, uint32_t page_no, uint8_t *image)
{
	uint64_t first = batch(h, page_no, 20, image);
	batch(h, page_no, 20, image);
	batch(h, page_no, 20, image);
	return first;
}

static void sync_log(struct host *h)
{
	ppl_store_log_synced(h->s, h->log_ino, ppl_store_log_mark(h->s));
}

/* Waits (the archive thread flushes every 100 ms) until the archive is
 * durable up to lsn; whether it got there. */
static bool durable_by(struct host *h, uint64_t lsn)
{
	struct ppl_store_figures f;
	for (int i = 0; i < 500; i++) {
		ppl_store_figures(h->s, &f);
		if (f.archive_durable_lsn >= lsn)
			return true;
		usleep(10000);
	}
	return false;
}

/* The log's mini-transactions from..to, read from the host's copy of the
 * file (no wrap in these tests), against the archive's. */
struct mtrs {
	size_t n, cap;
	struct ppl_mtr *m;
};

static int keep(void *arg, const struct ppl_mtr *m)
{
	struct mtrs *v = arg;
	if (v->n == v->cap) {
		v->cap = v->cap ? 2 * v->cap : 64;
		v->m = realloc(v->m, v->cap * sizeof *v->m);
	}
	uint8_t *copy = malloc(m->len);
	memcpy(copy, m->recs, m->len);
	v->m[v->n++] = (struct ppl_mtr){m->start_lsn, m->end_lsn, copy, m->len, m->seen};
	return 0;
}

static int keep_archived(void *arg, const struct ppl_mtr *m, uint64_t wall_ns)
{
	(void)wall_ns;
	return keep(arg, m);
}

static void free_mtrs(struct mtrs *v)
{
	for (size_t i = 0; i < v->n; i++)
		free((void *)v->m[i].recs);
	free(v->m);
	memset(v, 0, sizeof *v);
}

static void log_mtrs(struct host *h, uint64_t from, uint64_t to, struct mtrs *out)
{
	struct ppl_redo_sink sink = {.arg = out, .on_mtr = keep};
	struct ppl_redo_reader *r = ppl_redo_reader_new(&ppl_dialect_mariadb_10_8, h->l.size, PPL_REDO_FILE_IMAGE,
							&sink);
	CHECK(ppl_redo_feed(r, 0, h->l.file, SYN_AREA) == 0);
	CHECK(ppl_redo_start_at(r, from) == 0);
	size_t a = syn_off(&h->l, from), b = syn_off(&h->l, to);
	CHECK(b >= a);
	CHECK(ppl_redo_feed(r, a, h->l.file + a, b - a) >= 0);
	ppl_redo_reader_free(r);
}

/* The archive from `from` to `to` is, record for record, the log's. */
static void same_as_log(struct host *h, uint64_t from, uint64_t to)
{
	struct mtrs want = {0}, got = {0};
	log_mtrs(h, from, to, &want);
	int rc = ppl_archive_read(adir, from, to, keep_archived, &got, err, sizeof err);
	if (rc != 0)
		printf("archive read: %s\n", err);
	CHECK(rc == 0);
	CHECK(want.n > 0);
	CHECK_EQ_U(got.n, want.n);
	for (size_t i = 0; i < want.n && i < got.n; i++) {
		CHECK_EQ_U(got.m[i].start_lsn, want.m[i].start_lsn);
		CHECK_EQ_U(got.m[i].end_lsn, want.m[i].end_lsn);
		CHECK(got.m[i].len == want.m[i].len && memcmp(got.m[i].recs, want.m[i].recs, got.m[i].len) == 0);
	}
	free_mtrs(&want);
	free_mtrs(&got);
}

static void fresh_archive_dir(struct host *h)
{
	snprintf(adir, sizeof adir, "%s.archive", h->dir);
	CHECK(mkdir(adir, 0700) == 0);
}

static void remove_archive_dir(void)
{
	CHECK(nftw(adir, rm_entry, 8, FTW_DEPTH | FTW_PHYS) == 0);
}

static void test_archive_follows_the_durable_log(void)
{
	struct host h;
	host_make(&h);
	fresh_archive_dir(&h);
	start_store(&h, true, 0);
	uint8_t image[PS];
	read_file(h.ibd_path, image, PS, 6 * PS);
	uint64_t upto = three_batches(&h, 6, image);
	struct ppl_store_figures f;
	ppl_store_figures(h.s, &f);
	CHECK(f.archive);
	CHECK(f.archive_end_lsn >= upto);
	/* written, not synced: the archive waits for the log's durability */
	usleep(300000);
	ppl_store_figures(h.s, &f);
	CHECK_EQ_U(f.archive_durable_lsn, 0);
	CHECK(f.archive_buffered > 0);
	sync_log(&h);
	CHECK(durable_by(&h, upto));
	same_as_log(&h, FIRST_LSN, upto);
	/* the stats line and the live JSON carry it */
	char line[1024];
	CHECK(ppl_store_format_archive(h.s, line, sizeof line) > 0);
	CHECK(strstr(line, "durable to") != NULL);
	char *json = ppl_store_json(h.s, "stats");
	CHECK(json && strstr(json, "\"archive\"") && strstr(json, "\"durable_lsn\""));
	free(json);
	ppl_store_free(h.s);
	h.s = NULL;

	/* a restart goes on from the archive's end */
	start_store(&h, true, 0);
	upto = three_batches(&h, 7, image);
	sync_log(&h);
	CHECK(durable_by(&h, upto));
	same_as_log(&h, FIRST_LSN, upto);
	CHECK(!logged(&h, "CRIT"));
	host_close(&h);
	remove_archive_dir();
}

/* Archiving was off while MariaDB's log moved on and checkpointed: at the
 * next start with it, the archive takes that range from the log file,
 * and the chain has no hole. */
static void test_archive_catches_up_from_the_log(void)
{
	struct host h;
	host_make(&h);
	fresh_archive_dir(&h);
	start_store(&h, true, 0);
	uint8_t image[PS];
	read_file(h.ibd_path, image, PS, 6 * PS);
	uint64_t archived = three_batches(&h, 6, image);
	sync_log(&h);
	CHECK(durable_by(&h, archived));
	ppl_store_free(h.s);

	start_store(&h, false, 0);
	for (unsigned i = 0; i < 40; i++)
		change(&h, 8, 200 + 10 * i, (uint8_t)i, 300, image);
	flush_log(&h);
	uint64_t ck = h.l.lsn;
	CHECK_EQ_U(checkpoint(&h, ck), 0);
	ppl_store_free(h.s);

	start_store(&h, true, 0);
	CHECK(logged(&h, "caught up"));
	struct ppl_store_figures f;
	ppl_store_figures(h.s, &f);
	CHECK(f.archive_end_lsn >= ck);
	CHECK(!f.archive_broken);
	uint64_t upto = three_batches(&h, 9, image);
	sync_log(&h);
	CHECK(durable_by(&h, upto));
	CHECK(archived < ck);
	same_as_log(&h, FIRST_LSN, upto);
	CHECK(!logged(&h, "CRIT"));
	host_close(&h);
	remove_archive_dir();
}

/* MariaDB's log is never synced (the archive cannot take anything) and
 * wraps: archiving stops with a CRIT line naming its end, the log writes
 * all succeed, and nothing is appended after. */
static void test_wrap_over_unarchived_stops_archiving(void)
{
	struct host h;
	host_make(&h);
	fresh_archive_dir(&h);
	start_store(&h, true, 0);
	uint8_t five[PS];
	read_file(h.ibd_path, five, PS, 5 * PS);
	uint64_t cap = h.l.size - SYN_AREA;
	log_on_until(&h, FIRST_LSN + cap + cap / 4, five); /* flush_log checks every write succeeds */
	flush_log(&h);
	CHECK(logged(&h, "log archive"));
	CHECK(logged(&h, "stops, holding nothing durable yet"));
	struct ppl_store_figures f;
	ppl_store_figures(h.s, &f);
	CHECK(f.archive_broken);
	uint64_t end = f.archive_end_lsn;
	log_on_until(&h, h.l.lsn + 4096, five);
	flush_log(&h);
	ppl_store_figures(h.s, &f);
	CHECK_EQ_U(f.archive_end_lsn, end);
	host_close(&h);
	remove_archive_dir();
}

/* A damaged archive, or one inside the export: the start is refused,
 * saying which file or why. */
static void test_refused_archives(void)
{
	struct host h;
	host_make(&h);
	fresh_archive_dir(&h);
	start_store(&h, true, 4096);
	uint8_t image[PS];
	read_file(h.ibd_path, image, PS, 6 * PS);
	for (unsigned i = 0; i < 200; i++)
		change(&h, 6, 200 + 10 * (i % 100), (uint8_t)i, 200, image);
	flush_log(&h);
	sync_log(&h);
	CHECK(durable_by(&h, h.l.lsn));
	ppl_store_free(h.s);
	/* the second segment damaged */
	DIR *d = opendir(adir);
	char names[8][64];
	unsigned n = 0;
	struct dirent *de;
	while ((de = readdir(d)) != NULL)
		if (strncmp(de->d_name, "seg-", 4) == 0 && n < 8 && strlen(de->d_name) < 64)
			memcpy(names[n++], de->d_name, strlen(de->d_name) + 1);
	closedir(d);
	CHECK(n >= 3);
	qsort(names, n, 64, (int (*)(const void *, const void *))strcmp);
	char path[600];
	snprintf(path, sizeof path, "%s/%s", adir, names[1]);
	int fd = open(path, O_RDWR);
	uint8_t b = 0x5a;
	CHECK(pwrite(fd, &b, 1, 100) == 1);
	close(fd);
	struct ppl_store_env env = {.log = {.log = on_log, .arg = &h}, .now_ns = clock_of, .clock_arg = &h};
	h.s = ppl_store_new(h.dir, &env);
	struct ppl_config c = {.archive_path = adir, .archive_segment_size = 4096};
	CHECK(ppl_store_start_archive(h.s, &c, err, sizeof err) != 0);
	CHECK(strstr(err, names[1]) != NULL);
	ppl_store_free(h.s);

	/* inside the export */
	char inside[400];
	snprintf(inside, sizeof inside, "%s/archive", h.dir);
	CHECK(mkdir(inside, 0700) == 0);
	h.s = ppl_store_new(h.dir, &env);
	c.archive_path = inside;
	CHECK(ppl_store_start_archive(h.s, &c, err, sizeof err) != 0);
	CHECK(strstr(err, "inside the export") != NULL);
	host_close(&h);
	remove_archive_dir();
}

static unsigned finished_bases(const char *dir)
{
	DIR *d = opendir(dir);
	unsigned n = 0;
	struct dirent *de;
	while (d && (de = readdir(d)) != NULL) {
		char m[1024];
		n += strncmp(de->d_name, "base-", 5) == 0 &&
		     snprintf(m, sizeof m, "%s/%s/ppl-base.json", dir, de->d_name) < (int)sizeof m && access(m, F_OK) == 0;
	}
	if (d)
		closedir(d);
	return n;
}

/* Base_Interval: copies into Base_Path one after the other, the oldest
 * removed beyond Base_Keep, each registered with the archive (whose
 * retention then keeps what the newest needs); a manual copy into an
 * existing directory or inside the export is refused. */
static void test_scheduled_bases(void)
{
	struct host h;
	host_make(&h);
	fresh_archive_dir(&h);
	char bases[450];
	snprintf(bases, sizeof bases, "%s.bases", h.dir);
	CHECK(mkdir(bases, 0700) == 0);
	pthread_mutex_lock(&h.lines_lock);
	h.nlines = 0;
	pthread_mutex_unlock(&h.lines_lock);
	__atomic_store_n(&h.clock_ns, START_NS, __ATOMIC_RELAXED);
	struct ppl_store_env env = {.log = {.log = on_log, .arg = &h}, .now_ns = clock_of, .clock_arg = &h};
	h.s = ppl_store_new(h.dir, &env);
	struct ppl_config c = {.archive_path = adir, .archive_segment_size = 1 << 20, .base_path = bases,
			       .base_interval = 1, .base_keep = 2};
	uint8_t image[PS];
	read_file(h.ibd_path, image, PS, 6 * PS);
	CHECK(ppl_store_start_archive(h.s, &c, err, sizeof err) == 0);
	ppl_store_start_from_disk(h.s);
	uint64_t upto = three_batches(&h, 6, image);
	sync_log(&h);
	CHECK(durable_by(&h, upto));
	/* three copies or more, two kept */
	for (int i = 0; i < 300 && !logged(&h, "removed (Base_Keep"); i++)
		usleep(50000);
	CHECK(logged(&h, "removed (Base_Keep"));
	CHECK_EQ_U(finished_bases(bases), 2);
	struct ppl_base_info *all;
	size_t n;
	CHECK(ppl_bases_list(adir, &all, &n, err, sizeof err) == 0);
	CHECK_EQ_U(n, 2); /* the removed one no longer counts */
	for (size_t i = 0; i < n; i++) {
		CHECK(all[i].start_lsn >= FIRST_LSN && all[i].end_lsn >= all[i].start_lsn);
		char ibd[4200];
		snprintf(ibd, sizeof ibd, "%s/test/t1.ibd", all[i].dir);
		CHECK(access(ibd, F_OK) == 0);
	}
	free(all);
	/* a manual copy: into an existing directory, or inside the export */
	CHECK(ppl_store_backup_start(h.s, bases, err, sizeof err) != 0);
	char inside[400];
	snprintf(inside, sizeof inside, "%s/copy", h.dir);
	CHECK(ppl_store_backup_start(h.s, inside, err, sizeof err) != 0);
	CHECK(strstr(err, "inside the export") != NULL);
	ppl_store_free(h.s);
	h.s = NULL;
	CHECK(nftw(bases, rm_entry, 8, FTW_DEPTH | FTW_PHYS) == 0);
	host_close(&h);
	remove_archive_dir();
}

/* Another database's log under the archive (a datadir re-created under
 * the export: its LSNs start over): its first mini-transaction the
 * archive already holds differs from the archive's, and archiving stops
 * rather than splice two databases into one chain. */
static void test_another_database_stops_archiving(void)
{
	struct host h;
	host_make(&h);
	fresh_archive_dir(&h);
	start_store(&h, true, 0);
	uint8_t image[PS];
	read_file(h.ibd_path, image, PS, 6 * PS);
	uint64_t upto = three_batches(&h, 6, image);
	sync_log(&h);
	CHECK(durable_by(&h, upto));
	ppl_store_free(h.s);
	h.s = NULL;
	char keep[400];
	snprintf(keep, sizeof keep, "%s", adir);
	host_close(&h);

	struct host g;
	host_make(&g);
	snprintf(adir, sizeof adir, "%s", keep); /* the first datadir's archive */
	start_store(&g, true, 0);
	read_file(g.ibd_path, image, PS, 9 * PS);
	for (unsigned i = 0; i < 3; i++)
		batch(&g, 9, 30, image); /* other records at the same LSNs */
	sync_log(&g);
	for (int i = 0; i < 100 && !logged(&g, "is not the archive's there"); i++)
		usleep(20000);
	CHECK(logged(&g, "is not the archive's there"));
	struct ppl_store_figures f;
	ppl_store_figures(g.s, &f);
	CHECK(f.archive_broken);
	host_close(&g);
	remove_archive_dir();
}

int main(void)
{
	test_archive_follows_the_durable_log();
	test_archive_catches_up_from_the_log();
	test_wrap_over_unarchived_stops_archiving();
	test_refused_archives();
	test_scheduled_bases();
	test_another_database_stops_archiving();
	CHECK_DONE();
}
