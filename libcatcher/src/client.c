/* The client side of the elision channel: a small pool of TCP connections
 * to the storage node, each used by one thread at a time for one pipelined
 * exchange (send every question, then collect the verdicts by request id).
 * Every failure (no connection, slow answer, closed connection, a frame we
 * do not understand) turns the unanswered pages into ordinary writes and
 * drops the connection; a dropped connection is retried after a backoff
 * that doubles up to LIBCATCHER_BACKOFF_MAX_MS. Nothing here waits past the
 * deadline computed at the start of catcher_ask(). */
#include "catcher.h"

#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "ppl/elision_proto.h"

#define MAX_SLOTS 64

struct slot {
	pthread_mutex_t lock;
	struct catcher_conn c;
};

static struct slot slots[MAX_SLOTS];
static unsigned nslots;
static struct addrinfo *server_ai; /* resolved once, on first use */
static pthread_mutex_t resolve_lock = PTHREAD_MUTEX_INITIALIZER;
static int down_logged;            /* one "cannot reach" message per outage */

uint64_t catcher_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int ms_left(uint64_t deadline)
{
	uint64_t now = catcher_now_ns();
	if (now >= deadline)
		return 0;
	uint64_t ms = (deadline - now + 999999) / 1000000;
	return ms > 60000 ? 60000 : (int)ms;
}

void catcher_client_init(void)
{
	nslots = catcher_cfg.connections < MAX_SLOTS ? catcher_cfg.connections : MAX_SLOTS;
	for (unsigned i = 0; i < MAX_SLOTS; i++) {
		pthread_mutex_init(&slots[i].lock, NULL);
		slots[i].c.fd = -1;
		slots[i].c.backoff_ms = catcher_cfg.backoff_ms;
	}
}

void catcher_client_after_fork(void)
{
	/* The child shares the parent's sockets: using them would mix two
	 * processes' answers. Close the child's copies; it reconnects. */
	for (unsigned i = 0; i < MAX_SLOTS; i++) {
		pthread_mutex_init(&slots[i].lock, NULL);
		if (slots[i].c.fd >= 0)
			catcher_sys_close(slots[i].c.fd);
		slots[i].c.fd = -1;
		slots[i].c.retry_at = 0;
	}
	pthread_mutex_init(&resolve_lock, NULL);
}

void catcher_conn_drop(struct catcher_conn *c, const char *why)
{
	if (c->fd >= 0)
		catcher_sys_close(c->fd);
	c->fd = -1;
	c->retry_at = catcher_now_ns() + (uint64_t)c->backoff_ms * 1000000u;
	if (!__atomic_exchange_n(&down_logged, 1, __ATOMIC_RELAXED))
		catcher_log("elision server %s:%s: %s; writing pages normally, retrying every %d..%d ms",
			    catcher_cfg.server_host, catcher_cfg.server_port, why, c->backoff_ms,
			    catcher_cfg.backoff_max_ms);
	c->backoff_ms = c->backoff_ms * 2 > catcher_cfg.backoff_max_ms ? catcher_cfg.backoff_max_ms : c->backoff_ms * 2;
}

int catcher_conn_send(int fd, const uint8_t *p, size_t n, uint64_t deadline)
{
	while (n) {
		ssize_t w = send(fd, p, n, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (w > 0) {
			catcher_count_wire((size_t)w, 0, 0);
			p += w;
			n -= (size_t)w;
			continue;
		}
		if (w < 0 && errno != EAGAIN && errno != EINTR)
			return -1;
		struct pollfd pfd = {.fd = fd, .events = POLLOUT};
		int left = ms_left(deadline);
		if (!left || poll(&pfd, 1, left) == 0)
			return -2;
	}
	return 0;
}

/* Receives at least one more byte into buf. 1 ok, 0 EOF/error, -2 timeout. */
static int recv_until(int fd, uint8_t *buf, size_t cap, size_t *have, uint64_t deadline)
{
	for (;;) {
		ssize_t r = recv(fd, buf + *have, cap - *have, MSG_DONTWAIT);
		if (r > 0) {
			catcher_count_wire(0, (size_t)r, 0);
			*have += (size_t)r;
			return 1;
		}
		if (r == 0 || (errno != EAGAIN && errno != EINTR))
			return 0;
		struct pollfd pfd = {.fd = fd, .events = POLLIN};
		int left = ms_left(deadline);
		if (!left || poll(&pfd, 1, left) == 0)
			return -2;
	}
}

static int resolve(void)
{
	pthread_mutex_lock(&resolve_lock);
	if (!server_ai) {
		struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
					 .ai_flags = AI_NUMERICSERV};
		int r = getaddrinfo(catcher_cfg.server_host, catcher_cfg.server_port, &hints, &server_ai);
		if (r != 0) {
			server_ai = NULL;
			pthread_mutex_unlock(&resolve_lock);
			return r;
		}
	}
	pthread_mutex_unlock(&resolve_lock);
	return 0;
}

const char *catcher_conn_open(struct catcher_conn *c, uint64_t deadline)
{
	int gai = resolve();
	if (gai)
		return gai_strerror(gai);
	int fd = socket(server_ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return "cannot create a socket";
	c->fd = fd;
	if (connect(fd, server_ai->ai_addr, server_ai->ai_addrlen) != 0) {
		if (errno != EINPROGRESS)
			return "connection refused";
		struct pollfd pfd = {.fd = fd, .events = POLLOUT};
		int left = ms_left(deadline);
		if (!left || poll(&pfd, 1, left) <= 0)
			return "connect timed out";
		int err = 0;
		socklen_t el = sizeof err;
		if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el) != 0 || err)
			return "connection refused";
	}
	int one = 1;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);

	uint8_t buf[PPL_ELIDE_FRAME_MAX];
	size_t len = ppl_elide_put_hello(buf, catcher_cfg.token, catcher_cfg.token_len);
	if (catcher_conn_send(fd, buf, len, deadline) != 0)
		return "hello not sent";
	size_t have = 0;
	struct ppl_elide_hdr h;
	long n;
	while ((n = ppl_elide_frame(buf, have, &h)) == 0) {
		int r = recv_until(fd, buf, sizeof buf, &have, deadline);
		if (r == -2)
			return "no answer to hello";
		if (r == 0)
			return "closed the connection at hello";
	}
	struct ppl_elide_hello_reply rep;
	if (n < 0 || (size_t)n != have || ppl_elide_get_hello_reply(buf, &h, &rep) != 0)
		return "answered hello with something else (not an elision server?)";
	if (rep.status != PPL_ELIDE_HELLO_OK)
		return ppl_elide_hello_status_name(rep.status);
	if (rep.version != PPL_ELIDE_VERSION)
		return "chose a protocol version we did not offer";
	c->window = rep.max_inflight == 0 ? 1 : rep.max_inflight > 256 ? 256 : rep.max_inflight;
	c->backoff_ms = catcher_cfg.backoff_ms;
	if (__atomic_exchange_n(&down_logged, 0, __ATOMIC_RELAXED))
		catcher_log("elision server %s:%s: connected", catcher_cfg.server_host, catcher_cfg.server_port);
	return NULL;
}

static struct slot *acquire(uint64_t deadline)
{
	static __thread unsigned home __attribute__((tls_model("initial-exec")));
	static unsigned next_home;
	if (!home)
		home = __atomic_add_fetch(&next_home, 1, __ATOMIC_RELAXED);
	for (unsigned i = 0; i < nslots; i++) {
		struct slot *s = &slots[(home + i) % nslots];
		if (pthread_mutex_trylock(&s->lock) == 0)
			return s;
	}
	struct slot *s = &slots[home % nslots];
	struct timespec ts = {(time_t)(deadline / 1000000000u), (long)(deadline % 1000000000u)};
	return pthread_mutex_clocklock(&s->lock, CLOCK_MONOTONIC, &ts) == 0 ? s : NULL;
}

size_t catcher_put_question(uint8_t *out, const struct catcher_query *q, uint32_t id)
{
	struct ppl_elide_req r = {.id = id, .space = q->space, .page_no = q->page_no, .lsn = q->lsn,
				  .checksum = q->checksum, .page_size = q->page_size};
	return ppl_elide_put_req(out, &r);
}

uint8_t catcher_verdict_reason(uint8_t reason)
{
	return reason < PPL_ELIDE_REASON_COUNT ? reason : PPL_ELIDE_NACK_OTHER;
}

static void fail_rest(struct catcher_query **q, size_t n, const uint8_t *done, uint8_t reason)
{
	for (size_t i = 0; i < n; i++)
		if (!done[i])
			q[i]->verdict = reason;
}

/* One pipelined exchange on a connected slot. Verdicts received before a
 * failure stand: an ACK is the storage node's word, whatever happens to
 * the connection afterwards. */
static void exchange(struct slot *s, struct catcher_query **q, size_t n, uint64_t deadline)
{
	uint8_t done[CATCHER_PLAN_MAX_PAGES] = {0};
	uint8_t out[CATCHER_PLAN_MAX_PAGES * PPL_ELIDE_REQ_LEN];
	uint8_t in[4096];
	size_t have = 0, sent = 0, answered = 0;
	uint32_t base = s->c.next_id;
	s->c.next_id += (uint32_t)n;
	while (answered < n) {
		size_t olen = 0;
		while (sent < n && sent - answered < s->c.window) {
			olen += catcher_put_question(out + olen, q[sent], base + (uint32_t)sent);
			sent++;
		}
		catcher_count_wire(0, 0, (unsigned)(olen / PPL_ELIDE_REQ_LEN));
		int r = olen ? catcher_conn_send(s->c.fd, out, olen, deadline) : 0;
		if (r == 0)
			r = recv_until(s->c.fd, in, sizeof in, &have, deadline);
		if (r == -2) {
			fail_rest(q, n, done, R_TIMEOUT);
			catcher_conn_drop(&s->c, "no answer within LIBCATCHER_TIMEOUT_MS");
			return;
		}
		if (r <= 0) {
			fail_rest(q, n, done, R_CONN_LOST);
			catcher_conn_drop(&s->c, "connection lost");
			return;
		}
		size_t off = 0;
		long len;
		struct ppl_elide_hdr h;
		while ((len = ppl_elide_frame(in + off, have - off, &h)) > 0) {
			struct ppl_elide_verdict v;
			uint32_t idx = h.id - base;
			if (ppl_elide_get_verdict(in + off, &h, &v) != 0 || idx >= n || done[idx]) {
				len = -1;
				break;
			}
			done[idx] = 1;
			answered++;
			q[idx]->verdict = catcher_verdict_reason(v.reason);
			off += (size_t)len;
		}
		if (len < 0) {
			fail_rest(q, n, done, R_PROTOCOL);
			catcher_conn_drop(&s->c, "sent an answer we do not understand");
			return;
		}
		memmove(in, in + off, have - off);
		have -= off;
	}
	if (have) {
		/* More than we asked for: the stream cannot be trusted. */
		catcher_conn_drop(&s->c, "sent more answers than questions");
	}
}

static void ask(struct catcher_query **q, size_t n, uint64_t start)
{
	uint64_t deadline = start + (uint64_t)catcher_cfg.timeout_ms * 1000000u;
	uint8_t none[CATCHER_PLAN_MAX_PAGES] = {0};
	struct slot *s = acquire(deadline);
	if (!s) {
		fail_rest(q, n, none, R_POOL_BUSY);
		return;
	}
	if (s->c.fd < 0) {
		if (catcher_now_ns() < s->c.retry_at) {
			fail_rest(q, n, none, R_UNAVAILABLE);
			pthread_mutex_unlock(&s->lock);
			return;
		}
		const char *err = catcher_conn_open(&s->c, deadline);
		if (err) {
			fail_rest(q, n, none, R_UNAVAILABLE);
			catcher_conn_drop(&s->c, err);
			pthread_mutex_unlock(&s->lock);
			return;
		}
	}
	exchange(s, q, n, deadline);
	pthread_mutex_unlock(&s->lock);
}

void catcher_ask(struct catcher_query **q, size_t n)
{
	uint64_t start = catcher_now_ns();
	ask(q, n, start);
	catcher_count_wait(catcher_now_ns() - start);
}
