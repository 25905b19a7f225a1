/* ppl-elision-ref: a reference elision server with scripted answers, for
 * libcatcher's tests and benchmarks. It is the production server component
 * (ppl/elision_server.h) with a decision callback that follows a script
 * instead of asking the applier.
 *
 *   ppl-elision-ref --mode ack|nack|timeout|drop|list [--port N]
 *       [--listen ADDR] [--port-file PATH] [--token T] [--allow LIST]
 *       [--nack-reason NAME] [--delay-ms N] [--pages FILE] [--log FILE]
 *       [--stats-file PATH]
 *
 * Modes: ack = ACK everything; nack = refuse everything with --nack-reason;
 * timeout = answer ACK only after --delay-ms (longer than the client's
 * timeout, so the client must have written the page); drop = close the
 * connection on every request; list = ACK only the "space page" pairs
 * listed in --pages, NACK the rest.
 * Runs until SIGTERM or SIGINT, then writes --stats-file and exits 0. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ppl/elision_server.h"

enum mode { M_ACK, M_NACK, M_TIMEOUT, M_DROP, M_LIST };

struct script {
	enum mode mode;
	unsigned nack_reason;
	unsigned delay_ms;
	uint64_t *pages; /* sorted (space << 32 | page) */
	size_t npages;
	FILE *log;
	pthread_mutex_t log_lock;
};

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

static unsigned decide(void *arg, const struct ppl_elision_page *p)
{
	struct script *sc = arg;
	unsigned v;
	switch (sc->mode) {
	case M_ACK:
		v = PPL_ELIDE_ACK;
		break;
	case M_NACK:
		v = sc->nack_reason;
		break;
	case M_TIMEOUT: {
		struct timespec ts = {sc->delay_ms / 1000, (long)(sc->delay_ms % 1000) * 1000000L};
		while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
			;
		v = PPL_ELIDE_ACK;
		break;
	}
	case M_DROP:
		v = PPL_ELISION_CLOSE;
		break;
	default: {
		uint64_t key = (uint64_t)p->space << 32 | p->page_no;
		v = bsearch(&key, sc->pages, sc->npages, sizeof key, cmp_u64) ? PPL_ELIDE_ACK
									       : PPL_ELIDE_NACK_UNKNOWN_PAGE;
	}
	}
	if (sc->log) {
		pthread_mutex_lock(&sc->log_lock);
		fprintf(sc->log, "%u %u %llu %08x %u %s\n", p->space, p->page_no, (unsigned long long)p->lsn,
			p->checksum, p->page_size, v == PPL_ELISION_CLOSE ? "close" : ppl_elide_reason_name(v));
		fflush(sc->log);
		pthread_mutex_unlock(&sc->log_lock);
	}
	return v;
}

static int load_pages(struct script *sc, const char *path)
{
	FILE *f = fopen(path, "r");
	if (!f) {
		fprintf(stderr, "ppl-elision-ref: cannot open page list %s: %s\n", path, strerror(errno));
		return -1;
	}
	size_t cap = 0;
	unsigned long space, page;
	int n;
	while ((n = fscanf(f, "%lu %lu", &space, &page)) == 2) {
		if (sc->npages == cap) {
			cap = cap ? cap * 2 : 64;
			uint64_t *np = realloc(sc->pages, cap * sizeof *np);
			if (!np) {
				fclose(f);
				return -1;
			}
			sc->pages = np;
		}
		sc->pages[sc->npages++] = (uint64_t)space << 32 | (uint32_t)page;
	}
	fclose(f);
	if (n != EOF) {
		fprintf(stderr, "ppl-elision-ref: %s: want lines of \"space page\" numbers\n", path);
		return -1;
	}
	qsort(sc->pages, sc->npages, sizeof *sc->pages, cmp_u64);
	return 0;
}

static unsigned reason_by_name(const char *name)
{
	for (unsigned r = 1; r < PPL_ELIDE_REASON_COUNT; r++)
		if (strcmp(ppl_elide_reason_name(r), name) == 0)
			return r;
	return 0;
}

static void usage(void)
{
	fprintf(stderr, "usage: ppl-elision-ref --mode ack|nack|timeout|drop|list [--port N] [--listen ADDR]\n"
			"       [--port-file PATH] [--token T] [--allow LIST] [--nack-reason NAME]\n"
			"       [--delay-ms N] [--pages FILE] [--log FILE] [--stats-file PATH]\n");
	exit(2);
}

static int write_port_file(const char *path, unsigned port)
{
	char tmp[4096];
	snprintf(tmp, sizeof tmp, "%s.tmp", path);
	FILE *f = fopen(tmp, "w");
	if (!f || fprintf(f, "%u\n", port) < 0 || fclose(f) != 0 || rename(tmp, path) != 0) {
		fprintf(stderr, "ppl-elision-ref: cannot write port file %s: %s\n", path, strerror(errno));
		return -1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	struct script sc = {.mode = M_ACK, .nack_reason = PPL_ELIDE_NACK_NOT_DURABLE, .delay_ms = 10000};
	struct ppl_elision_server_config cfg = {.decide = decide, .decide_arg = &sc};
	const char *port_file = NULL, *stats_file = NULL, *pages = NULL, *logpath = NULL;
	pthread_mutex_init(&sc.log_lock, NULL);
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (!v)
			usage();
		i++;
		if (!strcmp(a, "--mode")) {
			if (!strcmp(v, "ack")) sc.mode = M_ACK;
			else if (!strcmp(v, "nack")) sc.mode = M_NACK;
			else if (!strcmp(v, "timeout")) sc.mode = M_TIMEOUT;
			else if (!strcmp(v, "drop")) sc.mode = M_DROP;
			else if (!strcmp(v, "list")) sc.mode = M_LIST;
			else usage();
		} else if (!strcmp(a, "--port")) {
			cfg.port = (uint16_t)atoi(v);
		} else if (!strcmp(a, "--listen")) {
			cfg.address = v;
		} else if (!strcmp(a, "--port-file")) {
			port_file = v;
		} else if (!strcmp(a, "--token")) {
			cfg.token = v;
		} else if (!strcmp(a, "--allow")) {
			cfg.allow = v;
		} else if (!strcmp(a, "--nack-reason")) {
			sc.nack_reason = reason_by_name(v);
			if (!sc.nack_reason) {
				fprintf(stderr, "ppl-elision-ref: unknown NACK reason %s\n", v);
				return 2;
			}
		} else if (!strcmp(a, "--delay-ms")) {
			sc.delay_ms = (unsigned)atoi(v);
		} else if (!strcmp(a, "--pages")) {
			pages = v;
		} else if (!strcmp(a, "--log")) {
			logpath = v;
		} else if (!strcmp(a, "--stats-file")) {
			stats_file = v;
		} else {
			usage();
		}
	}
	if (sc.mode == M_LIST && (!pages || load_pages(&sc, pages) != 0))
		return pages ? 1 : (usage(), 2);
	if (logpath && !(sc.log = fopen(logpath, "a"))) {
		fprintf(stderr, "ppl-elision-ref: cannot open log %s: %s\n", logpath, strerror(errno));
		return 1;
	}

	/* Block the stop signals before any thread exists so that only
	 * sigwait() below sees them. */
	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	pthread_sigmask(SIG_BLOCK, &set, NULL);

	struct ppl_elision_server *srv;
	char err[256];
	if (ppl_elision_server_start(&cfg, &srv, err, sizeof err) != 0) {
		fprintf(stderr, "ppl-elision-ref: %s\n", err);
		return 1;
	}
	if (port_file && write_port_file(port_file, ppl_elision_server_port(srv)) != 0) {
		ppl_elision_server_stop(srv);
		return 1;
	}
	int sig;
	sigwait(&set, &sig);

	struct ppl_elision_server_stats st;
	ppl_elision_server_get_stats(srv, &st);
	/* Stats first: stop() waits for callbacks that may be sleeping. */
	if (stats_file) {
		FILE *f = fopen(stats_file, "w");
		if (f) {
			fprintf(f, "connections %llu\nrequests %llu\nrefused_address %llu\nrefused_hello %llu\n"
				   "protocol_errors %llu\ncloses %llu\n",
				(unsigned long long)st.connections, (unsigned long long)st.requests,
				(unsigned long long)st.refused_address, (unsigned long long)st.refused_hello,
				(unsigned long long)st.protocol_errors, (unsigned long long)st.closes);
			for (unsigned r = 0; r < PPL_ELIDE_REASON_COUNT; r++)
				fprintf(f, "verdict.%s %llu\n", ppl_elide_reason_name(r),
					(unsigned long long)st.verdicts[r]);
			fclose(f);
		}
	}
	if (sc.mode == M_TIMEOUT)
		_exit(0); /* connection threads may sleep for delay_ms; nothing to clean up */
	ppl_elision_server_stop(srv);
	if (sc.log)
		fclose(sc.log);
	free(sc.pages);
	return 0;
}
