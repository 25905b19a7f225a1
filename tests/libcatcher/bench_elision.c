/* Elision answers per second, for scripts/bench-fsal.py (a benchmark, not
 * a test): one client connection to a storage node's elision service,
 * speaking the wire format of ppl/elision_proto.h, asks about the pages
 * listed in a file over and over, with up to DEPTH questions in flight.
 *
 *   bench_elision HOST PORT TOKEN PAGES_FILE SECONDS DEPTH
 *
 * PAGES_FILE: one question per line, "space page_no lsn checksum
 * page_size" in decimal (checksum: the page's last 4 bytes, big-endian).
 * Prints one JSON object: answers, seconds, answers per second, latency
 * of each question (sent to verdict) p50/p99 in microseconds, and the
 * verdicts by reason. Exit 1 if the service cannot be reached or breaks
 * the protocol. */
#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "ppl/elision_proto.h"

static double now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static int die(const char *what)
{
	fprintf(stderr, "bench_elision: %s\n", what);
	return 1;
}

static int send_all(int fd, const uint8_t *b, size_t n)
{
	while (n) {
		ssize_t w = send(fd, b, n, MSG_NOSIGNAL);
		if (w <= 0)
			return -1;
		b += w;
		n -= (size_t)w;
	}
	return 0;
}

/* Reads one whole frame into buf (which holds PPL_ELIDE_FRAME_MAX bytes,
 * *have of them already received). Returns its length, -1 on error. */
static long read_frame(int fd, uint8_t *buf, size_t *have, struct ppl_elide_hdr *h)
{
	for (;;) {
		long n = ppl_elide_frame(buf, *have, h);
		if (n != 0)
			return n;
		ssize_t r = recv(fd, buf + *have, PPL_ELIDE_FRAME_MAX - *have, 0);
		if (r <= 0)
			return -1;
		*have += (size_t)r;
	}
}

static void consume(uint8_t *buf, size_t *have, size_t n)
{
	memmove(buf, buf + n, *have - n);
	*have -= n;
}

int main(int argc, char **argv)
{
	if (argc != 7) {
		fprintf(stderr, "usage: bench_elision HOST PORT TOKEN PAGES_FILE SECONDS DEPTH\n");
		return 2;
	}
	double seconds = atof(argv[5]);
	unsigned depth = (unsigned)atoi(argv[6]);
	if (seconds <= 0 || depth < 1 || depth > 4096)
		return die("SECONDS must be > 0 and DEPTH 1..4096");

	FILE *f = fopen(argv[4], "r");
	if (f == NULL)
		return die("cannot open the pages file");
	size_t nq = 0, capq = 1024;
	struct ppl_elide_req *q = malloc(capq * sizeof(*q));
	unsigned long long sp, pg, lsn, ck, ps;
	while (q && fscanf(f, "%llu %llu %llu %llu %llu", &sp, &pg, &lsn, &ck, &ps) == 5) {
		if (nq == capq) {
			capq *= 2;
			q = realloc(q, capq * sizeof(*q));
			if (q == NULL)
				break;
		}
		q[nq++] = (struct ppl_elide_req){ .space = (uint32_t)sp, .page_no = (uint32_t)pg, .lsn = lsn,
						  .checksum = (uint32_t)ck, .page_size = (uint32_t)ps };
	}
	fclose(f);
	if (q == NULL || nq == 0)
		return die("no questions in the pages file");

	struct addrinfo hints = { .ai_socktype = SOCK_STREAM }, *ai;
	if (getaddrinfo(argv[1], argv[2], &hints, &ai) != 0)
		return die("bad HOST or PORT");
	int fd = socket(ai->ai_family, SOCK_STREAM, 0);
	if (fd < 0 || connect(fd, ai->ai_addr, ai->ai_addrlen) != 0)
		return die("cannot connect to the elision service");
	freeaddrinfo(ai);
	int one = 1;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));

	uint8_t out[PPL_ELIDE_FRAME_MAX], in[PPL_ELIDE_FRAME_MAX];
	size_t have = 0;
	struct ppl_elide_hdr h;
	if (send_all(fd, out, ppl_elide_put_hello(out, argv[3], strlen(argv[3]))) != 0)
		return die("hello not sent");
	long n = read_frame(fd, in, &have, &h);
	struct ppl_elide_hello_reply hr;
	if (n < 0 || h.type != PPL_ELIDE_T_HELLO_REPLY || ppl_elide_get_hello_reply(in, &h, &hr) != 0)
		return die("no hello reply");
	if (hr.status != PPL_ELIDE_HELLO_OK) {
		fprintf(stderr, "bench_elision: refused: %s\n", ppl_elide_hello_status_name(hr.status));
		return 1;
	}
	consume(in, &have, (size_t)n);
	if (hr.max_inflight && depth > hr.max_inflight)
		depth = hr.max_inflight;

	/* sent[id]: when question id went out, -1 once answered (the server
	 * may answer in any order) */
	size_t sent_cap = 1 << 20, lat_cap = 1 << 20, nlat = 0;
	double *sent = malloc(sent_cap * sizeof(double));
	double *lat = malloc(lat_cap * sizeof(double));
	unsigned long long by_reason[PPL_ELIDE_REASON_COUNT] = { 0 };
	if (sent == NULL || lat == NULL)
		return die("out of memory");
	uint32_t next_id = 1, answered = 0;
	double t0 = now_us(), end = t0 + seconds * 1e6;
	bool sending = true;
	while (sending || answered + 1 < next_id) {
		while (sending && next_id - 1 - answered < depth) {
			struct ppl_elide_req r = q[(next_id - 1) % nq];
			r.id = next_id;
			if (next_id == sent_cap) {
				sent_cap *= 2;
				if ((sent = realloc(sent, sent_cap * sizeof(double))) == NULL)
					return die("out of memory");
			}
			sent[next_id] = now_us();
			if (send_all(fd, out, ppl_elide_put_req(out, &r)) != 0)
				return die("question not sent");
			next_id++;
		}
		n = read_frame(fd, in, &have, &h);
		struct ppl_elide_verdict v;
		if (n < 0 || h.type != PPL_ELIDE_T_VERDICT || ppl_elide_get_verdict(in, &h, &v) != 0)
			return die("the connection closed or a frame is not a verdict");
		consume(in, &have, (size_t)n);
		if (v.id == 0 || v.id >= next_id || sent[v.id] < 0)
			return die("a verdict for a question not asked, or asked once and answered twice");
		double t = now_us();
		if (nlat == lat_cap) {
			lat_cap *= 2;
			if ((lat = realloc(lat, lat_cap * sizeof(double))) == NULL)
				return die("out of memory");
		}
		lat[nlat++] = t - sent[v.id];
		sent[v.id] = -1;
		by_reason[v.reason < PPL_ELIDE_REASON_COUNT ? v.reason : PPL_ELIDE_NACK_OTHER]++;
		answered++;
		if (t >= end)
			sending = false;
	}
	double elapsed = (now_us() - t0) / 1e6;
	close(fd);
	qsort(lat, nlat, sizeof(double), cmp);
	printf("{\"answers\": %zu, \"questions\": %zu, \"depth\": %u, \"seconds\": %.3f, \"per_second\": %.0f, "
	       "\"p50_us\": %.1f, \"p99_us\": %.1f, \"verdicts\": {",
	       nlat, nq, depth, elapsed, nlat / elapsed, lat[nlat / 2], lat[(size_t)(nlat * 0.99)]);
	const char *sep = "";
	for (unsigned r = 0; r < PPL_ELIDE_REASON_COUNT; r++)
		if (by_reason[r]) {
			printf("%s\"%s\": %llu", sep, ppl_elide_reason_name(r), by_reason[r]);
			sep = ", ";
		}
	printf("}}\n");
	free(lat);
	free(sent);
	free(q);
	return 0;
}
