/* The metrics (issue 19): the OpenMetrics writer's rules (ppl/openmetrics.h),
 * the store's figures in it after known work (ppl_store_metrics), and the
 * HTTP endpoint (metrics_http.c) as a scraper meets it: the text and its
 * Content-Type on GET /metrics, 404 and 405 elsewhere, and a port in use
 * refused with a message that names it. Every text is checked line by
 * line against the format (a sample belongs to the family declared before
 * it, counters end in _total, "# EOF" last). The Python test
 * tests/e2e/test_metrics.py checks a live node's text with
 * prometheus_client's strict parser. */
#include <arpa/inet.h>
#include <ctype.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include "ppl/histogram.h"
#include "ppl/metrics_http.h"
#include "ppl/openmetrics.h"
#include "store_host.h"

/* The text follows the format: a family header before its samples, each
 * family once, counters' samples with _total, label values quoted, the
 * value a number, "# EOF\n" at the very end. */
static bool well_formed(const char *text)
{
	size_t n = strlen(text);
	if (n < 6 || strcmp(text + n - 6, "# EOF\n") != 0) {
		fprintf(stderr, "no # EOF at the end\n");
		return false;
	}
	char family[128] = "", type[32] = "", seen[4096] = " ";
	const char *line = text;
	while (*line) {
		const char *end = strchr(line, '\n');
		char l[1024];
		snprintf(l, sizeof(l), "%.*s", (int)(end - line), line);
		line = end + 1;
		if (strcmp(l, "# EOF") == 0)
			return *line == '\0';
		if (strncmp(l, "# TYPE ", 7) == 0) {
			if (sscanf(l, "# TYPE %127s %31s", family, type) != 2)
				return false;
			char key[140];
			snprintf(key, sizeof(key), " %s ", family);
			if (strstr(seen, key)) {
				fprintf(stderr, "family %s twice\n", family);
				return false;
			}
			strncat(seen, key + 1, sizeof(seen) - strlen(seen) - 1);
			continue;
		}
		if (strncmp(l, "# HELP ", 7) == 0 || strncmp(l, "# UNIT ", 7) == 0) {
			if (strncmp(l + 7, family, strlen(family)) != 0 || l[7 + strlen(family)] != ' ')
				return false;
			continue;
		}
		/* a sample: its name starts with the family's, then a known suffix */
		size_t fl = strlen(family);
		const char *rest = l + fl;
		if (fl == 0 || strncmp(l, family, fl) != 0) {
			fprintf(stderr, "sample outside its family: %s\n", l);
			return false;
		}
		static const char *const counter[] = { "_total", NULL }, *const gauge[] = { "", NULL },
					 *const histogram[] = { "_bucket", "_count", "_sum", NULL },
					 *const info[] = { "_info", NULL };
		const char *const *ok = strcmp(type, "counter") == 0 ? counter : strcmp(type, "gauge") == 0 ? gauge :
					strcmp(type, "histogram") == 0 ? histogram : info;
		size_t sl = strcspn(rest, "{ ");
		bool suffix = false;
		for (int i = 0; ok[i]; i++)
			suffix |= strlen(ok[i]) == sl && strncmp(rest, ok[i], sl) == 0;
		if (!suffix) {
			fprintf(stderr, "sample name does not fit a %s: %s\n", type, l);
			return false;
		}
		rest += sl;
		if (*rest == '{') {
			const char *close = strstr(rest, "\"} ");
			if (close == NULL)
				return false;
			rest = close + 2;
		}
		char *num_end;
		if (*rest != ' ' || (strtod(rest + 1, &num_end), *num_end != '\0')) {
			fprintf(stderr, "bad value: %s\n", l);
			return false;
		}
	}
	return false;
}

/* The value of the sample line that starts with `sample ` (name and labels). */
static bool value_of(const char *text, const char *sample, double *v)
{
	char key[256];
	snprintf(key, sizeof(key), "\n%s ", sample);
	const char *p = strstr(text, key);
	if (p == NULL)
		return false;
	*v = strtod(p + strlen(key), NULL);
	return true;
}

static void test_writer(void)
{
	struct ppl_om m;
	CHECK(ppl_om_open(&m) == 0);
	ppl_om_counter(&m, "x_bytes", "bytes", "help with \\ and\nnewline", 42);
	ppl_om_family(&m, "x_answers", "counter", NULL, "labelled");
	ppl_om_sample(&m, "x_answers_total", "verdict", "a \"quoted\"\\ \nvalue", 7);
	const char *const two[] = { "a", "1", "b", "2", NULL };
	ppl_om_sample_labels(&m, "x_answers_total", two, 8);
	ppl_om_counter_seconds(&m, "x_wait_seconds", "seconds waited", 1500000001);
	static const uint64_t bounds[] = { 1000, 2500 };
	static const uint64_t counts[] = { 1, 0, 2 };
	ppl_om_histogram_ns(&m, "x_latency_seconds", "latency", bounds, counts, 2, 3000000000u);
	char *t = ppl_om_close(&m);
	CHECK(t != NULL);
	if (t == NULL)
		return;
	CHECK(well_formed(t));
	CHECK(strstr(t, "# TYPE x_bytes counter\n# UNIT x_bytes bytes\n# HELP x_bytes help with \\\\ and\\nnewline\n"
			"x_bytes_total 42\n") != NULL);
	CHECK(strstr(t, "x_answers_total{verdict=\"a \\\"quoted\\\"\\\\ \\nvalue\"} 7\n") != NULL);
	CHECK(strstr(t, "x_answers_total{a=\"1\",b=\"2\"} 8\n") != NULL);
	CHECK(strstr(t, "x_wait_seconds_total 1.500000001\n") != NULL);
	/* cumulative buckets, +Inf equal to the count */
	CHECK(strstr(t, "x_latency_seconds_bucket{le=\"1e-06\"} 1\nx_latency_seconds_bucket{le=\"2.5e-06\"} 1\n"
			"x_latency_seconds_bucket{le=\"+Inf\"} 3\nx_latency_seconds_count 3\n"
			"x_latency_seconds_sum 3.000000000\n") != NULL);
	free(t);
}

static void test_latency_histogram(void)
{
	static struct ppl_latency h, got;
	ppl_latency_add(&h, 0);
	ppl_latency_add(&h, 1000);          /* at a bound: in it */
	ppl_latency_add(&h, 1001);
	ppl_latency_add(&h, 20000000000ull); /* above the last bound */
	ppl_latency_get(&h, &got);
	CHECK_EQ_U(got.n[0], 2);
	CHECK_EQ_U(got.n[1], 1);
	CHECK_EQ_U(got.n[PPL_LATENCY_BOUNDS], 1);
	CHECK_EQ_U(got.sum_ns, 20000002001ull);
	for (unsigned i = 1; i < PPL_LATENCY_BOUNDS; i++)
		CHECK(ppl_latency_bounds_ns[i] > ppl_latency_bounds_ns[i - 1]);
}

/* GET (or another method) of path from 127.0.0.1:port; the whole reply. */
static char *http(uint16_t port, const char *method, const char *path)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(port) };
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	CHECK(fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0);
	char req[256];
	int n = snprintf(req, sizeof(req), "%s %s HTTP/1.0\r\nHost: localhost\r\n\r\n", method, path);
	CHECK(send(fd, req, (size_t)n, MSG_NOSIGNAL) == n);
	size_t cap = 1 << 20, got = 0;
	char *buf = calloc(1, cap);
	struct pollfd p = { .fd = fd, .events = POLLIN };
	while (got + 1 < cap && poll(&p, 1, 5000) == 1) {
		ssize_t r = read(fd, buf + got, cap - 1 - got);
		if (r <= 0)
			break;
		got += (size_t)r;
	}
	close(fd);
	return buf;
}

static char *fixed_text(void *arg)
{
	return strdup(arg);
}

static void test_endpoint(void)
{
	char err[512];
	char text[] = "# TYPE a gauge\n# HELP a a\na 1\n# EOF\n";
	struct ppl_metrics_http *s = ppl_metrics_http_start("127.0.0.1", 0, fixed_text, text, err, sizeof(err));
	CHECK(s != NULL);
	if (s == NULL) {
		printf("endpoint: %s\n", err);
		return;
	}
	uint16_t port = ppl_metrics_http_port(s);
	CHECK(port != 0);
	char *r = http(port, "GET", "/metrics");
	CHECK(strncmp(r, "HTTP/1.0 200", 12) == 0 || strncmp(r, "HTTP/1.1 200", 12) == 0);
	CHECK(strcasestr(r, "\r\nContent-Type: " PPL_OM_CONTENT_TYPE "\r\n") != NULL);
	CHECK(strstr(r, "\r\n\r\n# TYPE a gauge\n") != NULL);
	free(r);
	r = http(port, "GET", "/");
	CHECK(strstr(r, " 404 ") != NULL);
	free(r);
	r = http(port, "DELETE", "/metrics");
	CHECK(strstr(r, " 405 ") != NULL);
	free(r);

	/* the same port again: refused, saying why and what to do */
	struct ppl_metrics_http *again = ppl_metrics_http_start("127.0.0.1", port, fixed_text, text, err, sizeof(err));
	CHECK(again == NULL);
	CHECK(strstr(err, "Address already in use") != NULL && strstr(err, "choose another Metrics_Port") != NULL);
	ppl_metrics_http_stop(again);
	CHECK(ppl_metrics_http_start("not-an-address", 0, fixed_text, text, err, sizeof(err)) == NULL);
	CHECK(strstr(err, "Metrics_Address \"not-an-address\"") != NULL);
	ppl_metrics_http_stop(s);

	/* stopped: the port is free again */
	s = ppl_metrics_http_start("127.0.0.1", port, fixed_text, text, err, sizeof(err));
	CHECK(s != NULL);
	ppl_metrics_http_stop(s);
	/* IPv6 loopback, where the host has it */
	s = ppl_metrics_http_start("::1", 0, fixed_text, text, err, sizeof(err));
	if (s == NULL)
		printf("  (no IPv6 loopback here: %s)\n", err);
	ppl_metrics_http_stop(s);
}

/* The store's figures after known work: one page elided and read back
 * rebuilt; the same text over the store's own endpoint. */
static void test_store_metrics(void)
{
	struct host h;
	host_open(&h);
	static uint8_t image[PS], got[PS];
	elide_one(&h, 3, 200, 0xab, 40, image);
	CHECK_EQ_U(host_read(&h, 3, got), 0);
	CHECK(memcmp(got, image, PS) == 0);

	char *t = ppl_store_metrics(h.s);
	CHECK(t != NULL && well_formed(t));
	double v;
	CHECK(value_of(t, "ppl_pages_rebuilt_total", &v) && v == 1);
	CHECK(value_of(t, "ppl_page_reads_total", &v) && v == 1);
	/* the injected clock stands still: the rebuild took 0 ns */
	CHECK(value_of(t, "ppl_rebuild_latency_seconds_count", &v) && v == 1);
	CHECK(value_of(t, "ppl_rebuild_latency_seconds_bucket{le=\"1e-06\"}", &v) && v == 1);
	CHECK(value_of(t, "ppl_ingest_bytes_total", &v) && v > 0);
	CHECK(value_of(t, "ppl_ingest_lag_bytes", &v) && v == 0);
	CHECK(value_of(t, "ppl_ingest_running", &v) && v == 1);
	CHECK(value_of(t, "ppl_pages_pending", &v) && v == 1);
	/* elision is on (a pool): its families are there; the question was
	 * asked directly, not over the service, which counts its own */
	CHECK(value_of(t, "ppl_elision_answers_total{verdict=\"ack\"}", &v));
	CHECK(value_of(t, "ppl_elision_answers_total{verdict=\"lsn_ahead\"}", &v));
	CHECK(value_of(t, "ppl_pool_blocks_free", &v) && v > 0);
	CHECK(value_of(t, "ppl_pool_blocks_used", &v));
	CHECK(value_of(t, "ppl_checkpoint_gate_wait_seconds_total", &v) && v == 0);
	CHECK(value_of(t, "ppl_verify_pages_total{result=\"diverged\"}", &v) && v == 0);
	CHECK(strstr(t, "ppl_store_info{datadir=\"") != NULL);

	struct ppl_config c = { .metrics_address = "127.0.0.1", .metrics_port = 0 };
	char err[512];
	CHECK(ppl_store_start_metrics(h.s, &c, err, sizeof(err)) == 0);
	CHECK(logged(&h, "metrics at http://127.0.0.1:"));
	const char *at = NULL;
	pthread_mutex_lock(&h.lines_lock);
	for (int i = 0; i < h.nlines && !at; i++)
		if ((at = strstr(h.lines[i], "http://127.0.0.1:")))
			at += strlen("http://127.0.0.1:");
	pthread_mutex_unlock(&h.lines_lock);
	if (at) {
		char *r = http((uint16_t)atoi(at), "GET", "/metrics");
		const char *body = strstr(r, "\r\n\r\n");
		CHECK(body && well_formed(body + 4));
		CHECK(body && strstr(body, "\nppl_pages_rebuilt_total 1\n") != NULL);
		free(r);
	}
	free(t);
	host_close(&h); /* stops the endpoint first */
}

int main(void)
{
	test_writer();
	test_latency_histogram();
	test_endpoint();
	test_store_metrics();
	CHECK_DONE();
}
