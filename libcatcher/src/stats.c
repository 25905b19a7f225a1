/* Counters per file class, and their two outputs: a JSON file written at
 * exit and whenever LIBCATCHER_STATS_SIGNAL (default SIGUSR2, which MariaDB
 * does not use) arrives, and an optional log line every
 * LIBCATCHER_LOG_INTERVAL seconds, emitted by whichever thread writes
 * first after the interval (no thread of its own for it).
 * The dump only uses async-signal-safe calls: it runs in the handler. */
#include "catcher.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "ppl/elision_proto.h"
#include "ppl/histogram.h"

struct cstats {
	uint64_t writes, bytes, pages, elided, bytes_not_sent, errors;
	uint64_t refused[R_COUNT];
};

static struct cstats stats[CLASS_COUNT];
static uint64_t styles[STYLE_COUNT];
static uint64_t wire_sent, wire_received, wire_questions;
static struct ppl_histogram wait_us; /* catcher_ask() calls, in us */
static struct ppl_histogram deferred_us; /* io_uring writes, submit to completion, in us */
static int dumping;
static uint64_t next_tick_ns;

#define ADD(x, v) __atomic_fetch_add(&(x), (v), __ATOMIC_RELAXED)
#define GET(x) __atomic_load_n(&(x), __ATOMIC_RELAXED)

const char *catcher_reason_name(unsigned r)
{
	static const char *const nack[PPL_ELIDE_REASON_COUNT] = {
		"ack", "nack_unknown_file", "nack_unknown_page", "nack_lsn_behind", "nack_lsn_ahead",
		"nack_checksum", "nack_not_durable", "nack_disabled", "nack_busy", "nack_page_size",
		"nack_unsupported", "nack_internal", "nack_other",
	};
	static const char *const local[R_COUNT - R_UNALIGNED] = {
		"unaligned", "page_size_unknown", "unsupported_format", "page_id_mismatch", "lsn_zero",
		"bad_checksum", "passthrough", "unavailable", "timeout", "connection_lost", "protocol_error",
		"pool_busy", "unsupported_op", "async_mixed", "no_devnull", "doublewrite",
		"never_elided", "buffered_io", "not_asked",
	};
	if (r < PPL_ELIDE_REASON_COUNT)
		return nack[r];
	if (r >= R_UNALIGNED && r < R_COUNT)
		return local[r - R_UNALIGNED];
	return "unknown";
}

void catcher_count_write(unsigned cls, size_t bytes)
{
	ADD(stats[cls].writes, 1);
	ADD(stats[cls].bytes, bytes);
}

void catcher_count_style(enum catcher_style s)
{
	ADD(styles[s], 1);
}

void catcher_count_wire(size_t sent, size_t received, unsigned questions)
{
	if (sent)
		ADD(wire_sent, sent);
	if (received)
		ADD(wire_received, received);
	if (questions)
		ADD(wire_questions, questions);
}

void catcher_count_wait(uint64_t ns)
{
	ppl_histogram_add(&wait_us, ns / 1000);
}

void catcher_count_deferred(uint64_t ns)
{
	ppl_histogram_add(&deferred_us, ns / 1000);
}

void catcher_count_error(unsigned cls)
{
	ADD(stats[cls].errors, 1);
}

void catcher_count_plan(const struct catcher_plan *p, bool async, bool async_elided, size_t sync_done)
{
	struct cstats *c = &stats[p->f.cls];
	if (p->reason) {
		ADD(c->pages, p->npages);
		/* A log write is not a page write that could have been elided:
		 * it is counted in writes and bytes only. */
		if (p->f.cls != CLASS_REDO)
			ADD(c->refused[p->reason < R_COUNT ? p->reason : R_NOT_ASKED], p->npages ? p->npages : 1);
		return;
	}
	uint64_t pages = 0, elided = 0;
	for (size_t i = 0; i < p->npages; i++) {
		unsigned v = p->q[i].verdict;
		if (v >= R_COUNT)
			v = R_NOT_ASKED;
		if (!async && i * p->ps >= sync_done)
			break; /* not done: the caller sees a short write and retries */
		pages++;
		if (async ? async_elided : v == 0)
			elided++;
		else
			ADD(c->refused[v == 0 ? R_ASYNC_MIXED : v], 1);
	}
	ADD(c->pages, pages);
	if (elided) {
		ADD(c->elided, elided);
		ADD(c->bytes_not_sent, elided * p->ps);
	}
}

/* ---- output ---- */

struct out {
	int fd;
	char buf[1024];
	size_t pos;
};

static void flush_out(struct out *o)
{
	size_t off = 0;
	while (off < o->pos) {
		ssize_t w = syscall(SYS_write, o->fd, o->buf + off, o->pos - off);
		if (w <= 0)
			break;
		off += (size_t)w;
	}
	o->pos = 0;
}

static void put(struct out *o, const char *s)
{
	while (*s) {
		if (o->pos == sizeof o->buf)
			flush_out(o);
		o->buf[o->pos++] = *s++;
	}
}

static void put_u64(struct out *o, uint64_t v)
{
	char tmp[24];
	size_t n = 0;
	catcher_fmt_u64(tmp, sizeof tmp, &n, v);
	tmp[n] = 0;
	put(o, tmp);
}

static void put_kv(struct out *o, const char *k, uint64_t v, bool comma)
{
	put(o, "\"");
	put(o, k);
	put(o, "\": ");
	put_u64(o, v);
	if (comma)
		put(o, ", ");
}

static void sum_into(struct cstats *t, const struct cstats *c)
{
	t->writes += GET(c->writes);
	t->bytes += GET(c->bytes);
	t->pages += GET(c->pages);
	t->elided += GET(c->elided);
	t->bytes_not_sent += GET(c->bytes_not_sent);
	t->errors += GET(c->errors);
	for (unsigned r = 0; r < R_COUNT; r++)
		t->refused[r] += GET(c->refused[r]);
}

static void put_class(struct out *o, const struct cstats *c)
{
	struct cstats s = {0};
	sum_into(&s, c);
	uint64_t refused = 0;
	for (unsigned r = 0; r < R_COUNT; r++)
		refused += s.refused[r];
	put(o, "{");
	put_kv(o, "writes", s.writes, true);
	put_kv(o, "bytes", s.bytes, true);
	put_kv(o, "pages", s.pages, true);
	put_kv(o, "elided", s.elided, true);
	put_kv(o, "bytes_not_sent", s.bytes_not_sent, true);
	put_kv(o, "errors", s.errors, true);
	put_kv(o, "refused_total", refused, true);
	put(o, "\"refused\": {");
	bool first = true;
	for (unsigned r = 0; r < R_COUNT; r++) {
		if (!s.refused[r])
			continue;
		if (!first)
			put(o, ", ");
		first = false;
		put_kv(o, catcher_reason_name(r), s.refused[r], false);
	}
	put(o, "}}");
}

void catcher_stats_dump(void)
{
	if (!catcher_cfg.stats_file[0] || __atomic_exchange_n(&dumping, 1, __ATOMIC_ACQUIRE))
		return;
	int saved = errno;
	char tmp[sizeof catcher_cfg.stats_file + 8];
	size_t n = 0;
	catcher_fmt_str(tmp, sizeof tmp, &n, catcher_cfg.stats_file);
	catcher_fmt_str(tmp, sizeof tmp, &n, ".tmp");
	tmp[n] = 0;
	struct out o = {.fd = catcher_sys_openat(AT_FDCWD, tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644)};
	if (o.fd >= 0) {
		static const char *const modes[] = {"off", "passthrough", "elide"};
		put(&o, "{");
		put_kv(&o, "pid", (uint64_t)getpid(), true);
		put(&o, "\"mode\": \"");
		put(&o, modes[catcher_cfg.mode]);
		put(&o, "\", \"classes\": {");
		struct cstats total = {0};
		for (unsigned c = CLASS_IBD; c < CLASS_COUNT; c++) {
			put(&o, c == CLASS_IBD ? "\"" : ", \"");
			put(&o, catcher_class_name(c));
			put(&o, "\": ");
			put_class(&o, &stats[c]);
			sum_into(&total, &stats[c]);
		}
		put(&o, "}, \"total\": ");
		put_class(&o, &total);
		put(&o, ", \"styles\": {");
		put_kv(&o, "pwrite", GET(styles[STYLE_PWRITE]), true);
		put_kv(&o, "pwritev", GET(styles[STYLE_PWRITEV]), true);
		put_kv(&o, "io_uring", GET(styles[STYLE_IO_URING]), true);
		put_kv(&o, "libaio", GET(styles[STYLE_LIBAIO]), false);
		put(&o, "}, \"elision\": {");
		put_kv(&o, "questions", GET(wire_questions), true);
		put_kv(&o, "bytes_sent", GET(wire_sent), true);
		put_kv(&o, "bytes_received", GET(wire_received), true);
		/* a writer's wait per exchange (all its pages' questions at once) */
		put_kv(&o, "exchanges", ppl_histogram_count(&wait_us), true);
		put_kv(&o, "wait_p50_us", ppl_histogram_percentile(&wait_us, 50), true);
		put_kv(&o, "wait_p99_us", ppl_histogram_percentile(&wait_us, 99), true);
		put_kv(&o, "wait_p999_us", ppl_histogram_percentile(&wait_us, 99.9), true);
		/* io_uring writes completed by libcatcher's thread: what the
		 * application saw from its submit to its completion */
		put_kv(&o, "deferred_writes", ppl_histogram_count(&deferred_us), true);
		put_kv(&o, "deferred_p50_us", ppl_histogram_percentile(&deferred_us, 50), true);
		put_kv(&o, "deferred_p99_us", ppl_histogram_percentile(&deferred_us, 99), false);
		put(&o, "}");
		put(&o, "}\n");
		flush_out(&o);
		catcher_sys_close(o.fd);
		syscall(SYS_rename, tmp, catcher_cfg.stats_file);
	}
	__atomic_store_n(&dumping, 0, __ATOMIC_RELEASE);
	errno = saved;
}

static void on_signal(int sig)
{
	(void)sig;
	catcher_stats_dump();
}

void catcher_stats_init(void)
{
	int sig = catcher_cfg.stats_signal;
	if (catcher_cfg.log_interval_s)
		next_tick_ns = catcher_now_ns() + (uint64_t)catcher_cfg.log_interval_s * 1000000000u;
	if (!sig || !catcher_cfg.stats_file[0])
		return;
	struct sigaction old;
	if (sigaction(sig, NULL, &old) != 0)
		return;
	if (old.sa_handler != SIG_DFL || (old.sa_flags & SA_SIGINFO)) {
		/* Never take a signal the host already handles. */
		catcher_log("signal %d already has a handler in this process: statistics are written at exit only", sig);
		return;
	}
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_signal;
	sa.sa_flags = SA_RESTART;
	sigemptyset(&sa.sa_mask);
	sigaction(sig, &sa, NULL);
}

void catcher_stats_after_fork(void)
{
	__atomic_store_n(&dumping, 0, __ATOMIC_RELAXED);
	memset(stats, 0, sizeof stats); /* the child's own writes from here on */
	memset(styles, 0, sizeof styles);
	memset(&wait_us, 0, sizeof wait_us);
	memset(&deferred_us, 0, sizeof deferred_us);
	catcher_config_refresh_pid();
	/* Without %p in the path the child would overwrite the parent's file. */
	if (!strstr(catcher_cfg.stats_file_pattern, "%p"))
		catcher_cfg.stats_file[0] = 0;
}

void catcher_stats_tick(void)
{
	if (!catcher_cfg.log_interval_s)
		return;
	uint64_t now = catcher_now_ns(), due = GET(next_tick_ns);
	if (now < due ||
	    !__atomic_compare_exchange_n(&next_tick_ns, &due, now + (uint64_t)catcher_cfg.log_interval_s * 1000000000u,
					 false, __ATOMIC_RELAXED, __ATOMIC_RELAXED))
		return;
	struct cstats t = {0};
	for (unsigned c = CLASS_IBD; c < CLASS_COUNT; c++)
		sum_into(&t, &stats[c]);
	uint64_t refused = 0;
	for (unsigned r = 0; r < R_COUNT; r++)
		refused += t.refused[r];
	catcher_log("writes %llu pages %llu elided %llu refused %llu errors %llu bytes_not_sent %llu "
		    "wait p50/p99 %llu/%llu us",
		    (unsigned long long)t.writes, (unsigned long long)t.pages, (unsigned long long)t.elided,
		    (unsigned long long)refused, (unsigned long long)t.errors, (unsigned long long)t.bytes_not_sent,
		    (unsigned long long)ppl_histogram_percentile(&wait_us, 50),
		    (unsigned long long)ppl_histogram_percentile(&wait_us, 99));
}
