/* The elision channel on its own: frame encoding and strict decoding
 * (ppl/elision_proto.h), and the server component (ppl/elision_server.h)
 * driven by a raw client: hello and token, version negotiation, a
 * pipelined burst answered by request id, malformed frames, the allowed
 * address list, a callback that closes the connection, and stop() with
 * clients still connected. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdbool.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "check.h"
#include "ppl/elision_proto.h"
#include "ppl/elision_server.h"
#include "ppl/mach.h"

static void test_frames(void)
{
	uint8_t buf[PPL_ELIDE_FRAME_MAX];
	struct ppl_elide_hdr h;

	struct ppl_elide_req r = {.id = 0xdeadbeef, .space = 7, .page_no = 123456, .lsn = 0x0102030405060708ull,
				  .checksum = 0xcafef00d, .page_size = 16384};
	size_t n = ppl_elide_put_req(buf, &r);
	CHECK_EQ_U(n, PPL_ELIDE_REQ_LEN);
	for (size_t k = 0; k < n; k++)
		CHECK(ppl_elide_frame(buf, k, &h) == 0); /* incomplete: need more */
	CHECK(ppl_elide_frame(buf, n, &h) == (long)n);
	struct ppl_elide_req r2;
	CHECK(ppl_elide_get_req(buf, &h, &r2) == 0);
	CHECK(r2.id == r.id && r2.space == 7 && r2.page_no == 123456 && r2.lsn == r.lsn && r2.checksum == r.checksum &&
	      r2.page_size == 16384);
	CHECK_EQ_U(ppl_rd8(buf + 16), r.lsn); /* big-endian on the wire */

	struct ppl_elide_verdict v = {.id = 42, .reason = PPL_ELIDE_NACK_CHECKSUM}, v2;
	n = ppl_elide_put_verdict(buf, &v);
	CHECK(ppl_elide_frame(buf, n, &h) == (long)n && ppl_elide_get_verdict(buf, &h, &v2) == 0);
	CHECK(v2.id == 42 && v2.reason == PPL_ELIDE_NACK_CHECKSUM);
	buf[PPL_ELIDE_HDR_LEN + 3] = 1; /* reserved byte set */
	CHECK(ppl_elide_get_verdict(buf, &h, &v2) == -1);

	n = ppl_elide_put_hello(buf, "secret", 6);
	struct ppl_elide_hello hello;
	CHECK(ppl_elide_frame(buf, n, &h) == (long)n && ppl_elide_get_hello(buf, &h, &hello) == 0);
	CHECK(hello.token_len == 6 && !memcmp(hello.token, "secret", 6) && hello.version_min == PPL_ELIDE_VERSION);
	ppl_wr4(buf + PPL_ELIDE_HDR_LEN, 0x12345678); /* wrong magic */
	CHECK(ppl_elide_get_hello(buf, &h, &hello) == -1);

	/* what can never be a frame of this protocol */
	n = ppl_elide_put_req(buf, &r);
	buf[0] = 99;
	CHECK(ppl_elide_frame(buf, n, &h) == -1); /* unknown type */
	n = ppl_elide_put_req(buf, &r);
	buf[1] = 1;
	CHECK(ppl_elide_frame(buf, n, &h) == -1); /* flags */
	n = ppl_elide_put_req(buf, &r);
	ppl_wr2(buf + 2, 25);
	CHECK(ppl_elide_frame(buf, n, &h) == -1); /* wrong body length for the type */
	n = ppl_elide_put_hello(buf, "x", 1);
	ppl_wr2(buf + 2, 12 + PPL_ELIDE_TOKEN_MAX + 1);
	CHECK(ppl_elide_frame(buf, n, &h) == -1); /* token too long */

	CHECK(!strcmp(ppl_elide_reason_name(PPL_ELIDE_ACK), "ack"));
	CHECK(!strcmp(ppl_elide_reason_name(200), "other"));
}

/* ---- server ---- */

static unsigned decide(void *arg, const struct ppl_elision_page *p)
{
	(void)arg;
	if (p->page_no == 666)
		return PPL_ELISION_CLOSE;
	return p->page_no % 2 == 0 && p->page_size == 16384 ? PPL_ELIDE_ACK : PPL_ELIDE_NACK_LSN_BEHIND;
}

static void quiet(void *arg, enum ppl_log_level level, const char *func, int line, const char *msg)
{
	(void)arg;
	(void)level;
	(void)func;
	(void)line;
	(void)msg;
}

static int dial(uint16_t port)
{
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(port)};
	inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
	if (connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
		close(fd);
		return -1;
	}
	return fd;
}

/* Reads exactly n bytes (1s per read); returns bytes read (< n on EOF). */
static size_t read_n(int fd, uint8_t *buf, size_t n)
{
	size_t got = 0;
	while (got < n) {
		struct pollfd p = {.fd = fd, .events = POLLIN};
		if (poll(&p, 1, 2000) <= 0)
			break;
		ssize_t r = read(fd, buf + got, n - got);
		if (r <= 0)
			break;
		got += (size_t)r;
	}
	return got;
}

static bool at_eof(int fd)
{
	uint8_t b;
	return read_n(fd, &b, 1) == 0;
}

static int hello(uint16_t port, const char *token, unsigned vmin, unsigned vmax, unsigned *status)
{
	int fd = dial(port);
	uint8_t buf[PPL_ELIDE_FRAME_MAX];
	size_t n = ppl_elide_put_hello(buf, token, strlen(token));
	ppl_wr2(buf + PPL_ELIDE_HDR_LEN + 4, vmin);
	ppl_wr2(buf + PPL_ELIDE_HDR_LEN + 6, vmax);
	CHECK(write(fd, buf, n) == (ssize_t)n);
	struct ppl_elide_hdr h;
	struct ppl_elide_hello_reply rep = {0};
	CHECK(read_n(fd, buf, PPL_ELIDE_HELLO_REPLY_LEN) == PPL_ELIDE_HELLO_REPLY_LEN);
	CHECK(ppl_elide_frame(buf, PPL_ELIDE_HELLO_REPLY_LEN, &h) == PPL_ELIDE_HELLO_REPLY_LEN);
	CHECK(ppl_elide_get_hello_reply(buf, &h, &rep) == 0);
	*status = rep.status;
	if (rep.status == PPL_ELIDE_HELLO_OK)
		CHECK(rep.version == PPL_ELIDE_VERSION && rep.max_inflight == 256);
	return fd;
}

static void test_server(void)
{
	struct ppl_elision_server *s;
	char err[256];
	struct ppl_elision_server_config cfg = {.token = "tok", .decide = decide, .log = {.log = quiet}};
	CHECK(ppl_elision_server_start(&cfg, &s, err, sizeof err) == 0);
	uint16_t port = ppl_elision_server_port(s);
	CHECK(port != 0);

	/* a pipelined burst: 200 questions in one write, answers by id */
	unsigned st;
	int fd = hello(port, "tok", 1, 1, &st);
	CHECK_EQ_U(st, PPL_ELIDE_HELLO_OK);
	enum { N = 200 };
	static uint8_t out[N * PPL_ELIDE_REQ_LEN], in[N * PPL_ELIDE_VERDICT_LEN];
	size_t olen = 0;
	for (unsigned i = 0; i < N; i++) {
		struct ppl_elide_req r = {.id = 5000 + i, .space = 3, .page_no = i, .lsn = 100 + i, .checksum = i,
					  .page_size = 16384};
		olen += ppl_elide_put_req(out + olen, &r);
	}
	CHECK(write(fd, out, olen) == (ssize_t)olen);
	CHECK_EQ_U(read_n(fd, in, sizeof in), sizeof in);
	uint8_t seen[N] = {0};
	for (unsigned i = 0; i < N; i++) {
		struct ppl_elide_hdr h;
		struct ppl_elide_verdict v;
		const uint8_t *f = in + i * PPL_ELIDE_VERDICT_LEN;
		CHECK(ppl_elide_frame(f, PPL_ELIDE_VERDICT_LEN, &h) == PPL_ELIDE_VERDICT_LEN);
		CHECK(ppl_elide_get_verdict(f, &h, &v) == 0);
		unsigned idx = v.id - 5000;
		CHECK(idx < N && !seen[idx]);
		if (idx < N) {
			seen[idx] = 1;
			CHECK_EQ_U(v.reason, idx % 2 == 0 ? PPL_ELIDE_ACK : PPL_ELIDE_NACK_LSN_BEHIND);
		}
	}
	/* a malformed frame closes the connection */
	uint8_t junk[PPL_ELIDE_REQ_LEN] = {99};
	CHECK(write(fd, junk, sizeof junk) == (ssize_t)sizeof junk);
	CHECK(at_eof(fd));
	close(fd);

	/* wrong token, no common version */
	fd = hello(port, "nope", 1, 1, &st);
	CHECK_EQ_U(st, PPL_ELIDE_HELLO_BAD_TOKEN);
	CHECK(at_eof(fd));
	close(fd);
	fd = hello(port, "tok", 2, 3, &st);
	CHECK_EQ_U(st, PPL_ELIDE_HELLO_BAD_VERSION);
	CHECK(at_eof(fd));
	close(fd);

	/* the callback may close the connection instead of answering */
	fd = hello(port, "tok", 1, 1, &st);
	struct ppl_elide_req r = {.id = 1, .page_no = 666, .page_size = 16384};
	olen = ppl_elide_put_req(out, &r);
	CHECK(write(fd, out, olen) == (ssize_t)olen);
	CHECK(at_eof(fd));
	close(fd);

	/* stop() with a client still connected and idle */
	int idle = hello(port, "tok", 1, 1, &st);
	struct ppl_elision_server_stats ss;
	ppl_elision_server_get_stats(s, &ss);
	CHECK_EQ_U(ss.requests, N);
	CHECK_EQ_U(ss.verdicts[PPL_ELIDE_ACK], N / 2);
	CHECK_EQ_U(ss.verdicts[PPL_ELIDE_NACK_LSN_BEHIND], N / 2);
	CHECK_EQ_U(ss.protocol_errors, 1);
	CHECK_EQ_U(ss.refused_hello, 2);
	CHECK_EQ_U(ss.closes, 1);
	ppl_elision_server_stop(s);
	CHECK(at_eof(idle));
	close(idle);

	/* clients outside the allowed list are closed at accept */
	cfg.allow = "10.0.0.0/8, fd00::/8";
	CHECK(ppl_elision_server_start(&cfg, &s, err, sizeof err) == 0);
	fd = dial(ppl_elision_server_port(s));
	CHECK(fd >= 0 && at_eof(fd));
	close(fd);
	ppl_elision_server_get_stats(s, &ss);
	CHECK_EQ_U(ss.refused_address, 1);
	ppl_elision_server_stop(s);

	/* configuration errors say what is wrong */
	cfg.allow = "127.0.0.1,not-an-address";
	CHECK(ppl_elision_server_start(&cfg, &s, err, sizeof err) == -1);
	CHECK(strstr(err, "not-an-address") != NULL);
	cfg.allow = NULL;
	cfg.address = "localhost.invalid";
	CHECK(ppl_elision_server_start(&cfg, &s, err, sizeof err) == -1);
	CHECK(strstr(err, "numeric") != NULL);
}

/* Clients that say hello and then stay quiet must not lock out the
 * others: once every slot is taken, a newcomer is admitted in the place of
 * the connection idle longest, if it has been idle long enough; a client
 * that is asking questions keeps its slot. */
static void test_idle_clients_make_room(void)
{
	struct ppl_elision_server *s;
	char err[256];
	struct ppl_elision_server_config cfg = {.token = "tok", .decide = decide, .log = {.log = quiet},
						.max_clients = 2, .idle_evict_ms = 300};
	CHECK(ppl_elision_server_start(&cfg, &s, err, sizeof err) == 0);
	uint16_t port = ppl_elision_server_port(s);
	unsigned st;
	int quiet1 = hello(port, "tok", 1, 1, &st);
	CHECK_EQ_U(st, PPL_ELIDE_HELLO_OK);
	usleep(50 * 1000);
	int busy = hello(port, "tok", 1, 1, &st);
	CHECK_EQ_U(st, PPL_ELIDE_HELLO_OK);
	/* full, and nobody idle long enough yet: BUSY */
	int third = hello(port, "tok", 1, 1, &st);
	CHECK_EQ_U(st, PPL_ELIDE_HELLO_BUSY);
	close(third);
	/* `busy` keeps asking, quiet1 stays quiet */
	uint8_t out[PPL_ELIDE_REQ_LEN], in[PPL_ELIDE_VERDICT_LEN];
	for (int i = 0; i < 8; i++) {
		usleep(60 * 1000);
		struct ppl_elide_req r = {.id = 7 + (unsigned)i, .space = 3, .page_no = 2, .lsn = 100, .page_size = 16384};
		size_t olen = ppl_elide_put_req(out, &r);
		CHECK(write(busy, out, olen) == (ssize_t)olen);
		CHECK_EQ_U(read_n(busy, in, sizeof in), sizeof in);
	}
	int late = hello(port, "tok", 1, 1, &st);
	CHECK_EQ_U(st, PPL_ELIDE_HELLO_OK);
	CHECK(at_eof(quiet1));
	/* the active client is still served */
	struct ppl_elide_req r = {.id = 99, .space = 3, .page_no = 4, .lsn = 100, .page_size = 16384};
	size_t olen = ppl_elide_put_req(out, &r);
	CHECK(write(busy, out, olen) == (ssize_t)olen);
	CHECK_EQ_U(read_n(busy, in, sizeof in), sizeof in);
	struct ppl_elision_server_stats ss;
	ppl_elision_server_get_stats(s, &ss);
	CHECK_EQ_U(ss.idle_evicted, 1);
	close(quiet1);
	close(busy);
	close(late);
	ppl_elision_server_stop(s);
}

int main(void)
{
	test_frames();
	test_server();
	test_idle_clients_make_room();
	CHECK_DONE();
}
