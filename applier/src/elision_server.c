/* Elision channel server: listener thread, per-connection threads, address
 * and token checks, and the frame loop that turns ELIDE requests into
 * verdicts from the embedder's callback. */
#include "ppl/elision_server.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <time.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define HELLO_TIMEOUT_MS 5000
#define RECV_BUF 65536

struct allow_rule {
	int family;        /* AF_INET or AF_INET6 */
	uint8_t addr[16];
	unsigned prefix;   /* bits */
};

struct conn {
	struct ppl_elision_server *srv;
	int fd;
	pthread_t thread;
	bool done;         /* the thread has finished; join it */
	uint64_t active_ms; /* when it was greeted or last sent a frame (0: not greeted yet) */
	struct conn *next;
};

struct ppl_elision_server {
	struct ppl_elision_server_config cfg;
	char *token;
	size_t token_len;
	struct allow_rule *rules;
	size_t nrules;
	bool allow_any;
	int listen_fd;
	int wake[2];       /* stop() writes here to wake the listener */
	uint16_t port;
	pthread_t listener;
	pthread_mutex_t lock; /* conns, nconns, stats, stopping */
	struct conn *conns;
	unsigned nconns;
	bool stopping;
	struct ppl_elision_server_stats stats;
};

/* Every message says which part speaks: the host's log has many. */
#define slog(s, fmt, ...) PPL_LOG(&(s)->cfg.log, PPL_LOG_WARN, "elision service: " fmt, __VA_ARGS__)

static void errf(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void errf(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	if (err && errlen)
		vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
}

/* ---- allowed client addresses ---- */

static int parse_rule(const char *text, struct allow_rule *r)
{
	char buf[128];
	size_t n = strlen(text);
	if (n == 0 || n >= sizeof buf)
		return -1;
	memcpy(buf, text, n + 1);
	char *slash = strchr(buf, '/');
	long prefix = -1;
	if (slash) {
		*slash = 0;
		char *end;
		prefix = strtol(slash + 1, &end, 10);
		if (*end || slash[1] == 0 || prefix < 0)
			return -1;
	}
	if (inet_pton(AF_INET, buf, r->addr) == 1) {
		r->family = AF_INET;
		if (prefix > 32)
			return -1;
		r->prefix = prefix < 0 ? 32 : (unsigned)prefix;
	} else if (inet_pton(AF_INET6, buf, r->addr) == 1) {
		r->family = AF_INET6;
		if (prefix > 128)
			return -1;
		r->prefix = prefix < 0 ? 128 : (unsigned)prefix;
	} else {
		return -1;
	}
	return 0;
}

static int parse_allow(struct ppl_elision_server *s, const char *list, char *err, size_t errlen)
{
	if (!list)
		list = "127.0.0.0/8,::1";
	if (strcmp(list, "any") == 0) {
		s->allow_any = true;
		return 0;
	}
	size_t cap = 1;
	for (const char *p = list; *p; p++)
		cap += *p == ',';
	s->rules = calloc(cap, sizeof *s->rules);
	if (!s->rules) {
		errf(err, errlen, "out of memory");
		return -1;
	}
	const char *p = list;
	while (*p) {
		const char *comma = strchr(p, ',');
		size_t len = comma ? (size_t)(comma - p) : strlen(p);
		char item[128];
		while (len && (*p == ' ')) {
			p++;
			len--;
		}
		while (len && p[len - 1] == ' ')
			len--;
		if (len == 0 || len >= sizeof item || (memcpy(item, p, len), item[len] = 0,
							  parse_rule(item, &s->rules[s->nrules])) != 0) {
			errf(err, errlen, "allowed client list: cannot parse \"%.*s\" (want an address or CIDR block, e.g. 10.0.0.0/8)",
			     (int)len, p);
			return -1;
		}
		s->nrules++;
		p += comma ? (size_t)(comma - p) + 1 : strlen(p);
	}
	if (s->nrules == 0) {
		errf(err, errlen, "allowed client list is empty (use \"any\" to allow every address)");
		return -1;
	}
	return 0;
}

static bool prefix_match(const uint8_t *a, const uint8_t *b, unsigned bits)
{
	unsigned bytes = bits / 8, rest = bits % 8;
	if (memcmp(a, b, bytes) != 0)
		return false;
	if (rest == 0)
		return true;
	uint8_t mask = (uint8_t)(0xff << (8 - rest));
	return (a[bytes] & mask) == (b[bytes] & mask);
}

static bool address_allowed(struct ppl_elision_server *s, const struct sockaddr_storage *ss)
{
	if (s->allow_any)
		return true;
	int family;
	uint8_t addr[16];
	if (ss->ss_family == AF_INET) {
		family = AF_INET;
		memcpy(addr, &((const struct sockaddr_in *)ss)->sin_addr, 4);
	} else if (ss->ss_family == AF_INET6) {
		const struct in6_addr *a6 = &((const struct sockaddr_in6 *)ss)->sin6_addr;
		if (IN6_IS_ADDR_V4MAPPED(a6)) {
			family = AF_INET;
			memcpy(addr, a6->s6_addr + 12, 4);
		} else {
			family = AF_INET6;
			memcpy(addr, a6->s6_addr, 16);
		}
	} else {
		return false;
	}
	for (size_t i = 0; i < s->nrules; i++)
		if (s->rules[i].family == family && prefix_match(addr, s->rules[i].addr, s->rules[i].prefix))
			return true;
	return false;
}

static void addr_text(const struct sockaddr_storage *ss, char *buf, size_t len)
{
	if (getnameinfo((const struct sockaddr *)ss, sizeof *ss, buf, (socklen_t)len, NULL, 0, NI_NUMERICHOST) != 0)
		snprintf(buf, len, "?");
}

/* ---- one client connection ---- */

static int send_all(int fd, const uint8_t *p, size_t n)
{
	while (n) {
		ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

/* Constant-time so that a wrong token reveals nothing by its timing. */
static bool token_ok(const struct ppl_elision_server *s, const struct ppl_elide_hello *h)
{
	if (h->token_len != s->token_len)
		return false;
	uint8_t diff = 0;
	for (size_t i = 0; i < s->token_len; i++)
		diff |= (uint8_t)(h->token[i] ^ s->token[i]);
	return diff == 0;
}

static void count(struct ppl_elision_server *s, uint64_t *field, uint64_t n)
{
	pthread_mutex_lock(&s->lock);
	*field += n;
	pthread_mutex_unlock(&s->lock);
}

static uint64_t now_ms(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000 + (uint64_t)t.tv_nsec / 1000000;
}

/* The server is full and c waits to be admitted: closes the greeted
 * connection idle longest if it has been idle long enough (its thread
 * sees EOF and ends; the listener joins it). Called with s->lock held,
 * so every listed connection's fd is still open. */
static bool evict_idle(struct ppl_elision_server *s, struct conn *c)
{
	uint64_t now = now_ms(), min_idle = s->cfg.idle_evict_ms ? s->cfg.idle_evict_ms : 30000;
	struct conn *victim = NULL;
	for (struct conn *o = s->conns; o; o = o->next) {
		uint64_t at = __atomic_load_n(&o->active_ms, __ATOMIC_RELAXED);
		if (o == c || o->done || at == 0 || now - at < min_idle)
			continue;
		if (victim == NULL || at < __atomic_load_n(&victim->active_ms, __ATOMIC_RELAXED))
			victim = o;
	}
	if (victim == NULL)
		return false;
	uint64_t idle = now - __atomic_load_n(&victim->active_ms, __ATOMIC_RELAXED);
	__atomic_store_n(&victim->active_ms, 0, __ATOMIC_RELAXED); /* not chosen twice */
	shutdown(victim->fd, SHUT_RDWR);
	s->stats.idle_evicted++;
	slog(s, "every client slot (%u) is taken: closed a connection idle for %.1f s to admit a new client",
	     s->cfg.max_clients ? s->cfg.max_clients : 64, (double)idle / 1000.0);
	return true;
}

/* Reads until one whole frame is buffered or the deadline passes. Returns
 * the frame length, 0 on EOF/timeout/error, -1 on a malformed frame. */
static long read_frame(int fd, uint8_t *buf, size_t *have, struct ppl_elide_hdr *h, int timeout_ms)
{
	for (;;) {
		long n = ppl_elide_frame(buf, *have, h);
		if (n != 0)
			return n;
		if (timeout_ms >= 0) {
			struct pollfd pfd = {.fd = fd, .events = POLLIN};
			int pr = poll(&pfd, 1, timeout_ms);
			if (pr <= 0)
				return 0;
		}
		ssize_t r = recv(fd, buf + *have, RECV_BUF - *have, 0);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return 0;
		*have += (size_t)r;
	}
}

static bool greet(struct conn *c, uint8_t *buf, size_t *have)
{
	struct ppl_elision_server *s = c->srv;
	struct ppl_elide_hdr h;
	struct ppl_elide_hello hello;
	long n = read_frame(c->fd, buf, have, &h, HELLO_TIMEOUT_MS);
	struct ppl_elide_hello_reply rep = {.version = PPL_ELIDE_VERSION,
					    .max_inflight = s->cfg.max_inflight ? s->cfg.max_inflight : 256};
	if (n == 0)
		return false;
	if (n < 0 || ppl_elide_get_hello(buf, &h, &hello) != 0) {
		rep.status = PPL_ELIDE_HELLO_BAD_MAGIC;
	} else if (hello.version_min > PPL_ELIDE_VERSION || hello.version_max < PPL_ELIDE_VERSION) {
		rep.status = PPL_ELIDE_HELLO_BAD_VERSION;
	} else if (!token_ok(s, &hello)) {
		rep.status = PPL_ELIDE_HELLO_BAD_TOKEN;
	} else {
		pthread_mutex_lock(&s->lock);
		unsigned max = s->cfg.max_clients ? s->cfg.max_clients : 64;
		rep.status = s->nconns <= max || evict_idle(s, c) ? PPL_ELIDE_HELLO_OK : PPL_ELIDE_HELLO_BUSY;
		if (rep.status == PPL_ELIDE_HELLO_OK)
			__atomic_store_n(&c->active_ms, now_ms(), __ATOMIC_RELAXED);
		pthread_mutex_unlock(&s->lock);
	}
	uint8_t out[PPL_ELIDE_HELLO_REPLY_LEN];
	size_t len = ppl_elide_put_hello_reply(out, &rep);
	send_all(c->fd, out, len);
	if (rep.status != PPL_ELIDE_HELLO_OK) {
		slog(s, "client refused at hello: %s", ppl_elide_hello_status_name(rep.status));
		count(s, &s->stats.refused_hello, 1);
		return false;
	}
	memmove(buf, buf + n, *have - (size_t)n);
	*have -= (size_t)n;
	count(s, &s->stats.connections, 1);
	return true;
}

/* Answers every complete request in the buffer, then sends the answers in
 * one go: a pipelining client gets its verdicts in batches. */
static void serve(struct conn *c)
{
	struct ppl_elision_server *s = c->srv;
	uint8_t *buf = malloc(RECV_BUF);
	uint8_t *out = malloc(RECV_BUF / PPL_ELIDE_REQ_LEN * PPL_ELIDE_VERDICT_LEN + PPL_ELIDE_VERDICT_LEN);
	size_t have = 0;
	if (!buf || !out || !greet(c, buf, &have))
		goto done;
	for (;;) {
		size_t olen = 0, off = 0;
		struct ppl_elide_hdr h;
		long n;
		if (have == 0 || ppl_elide_frame(buf, have, &h) == 0) {
			n = read_frame(c->fd, buf, &have, &h, -1);
			if (n == 0)
				goto done;
		}
		__atomic_store_n(&c->active_ms, now_ms(), __ATOMIC_RELAXED);
		while ((n = ppl_elide_frame(buf + off, have - off, &h)) > 0) {
			struct ppl_elide_req req;
			if (ppl_elide_get_req(buf + off, &h, &req) != 0) {
				n = -1;
				break;
			}
			struct ppl_elision_page pg = {req.space, req.page_no, req.lsn, req.checksum, req.page_size};
			unsigned v = s->cfg.decide(s->cfg.decide_arg, &pg);
			if (v == PPL_ELISION_CLOSE) {
				send_all(c->fd, out, olen);
				count(s, &s->stats.closes, 1);
				goto done;
			}
			if (v >= PPL_ELIDE_REASON_COUNT)
				v = PPL_ELIDE_NACK_OTHER;
			pthread_mutex_lock(&s->lock);
			s->stats.requests++;
			s->stats.verdicts[v]++;
			pthread_mutex_unlock(&s->lock);
			struct ppl_elide_verdict vd = {.id = req.id, .reason = (uint8_t)v};
			olen += ppl_elide_put_verdict(out + olen, &vd);
			off += (size_t)n;
		}
		if (olen && send_all(c->fd, out, olen) != 0)
			goto done;
		if (n < 0) {
			slog(s, "malformed frame (type %u, length %u): closing the connection", h.type, h.body_len);
			count(s, &s->stats.protocol_errors, 1);
			goto done;
		}
		memmove(buf, buf + off, have - off);
		have -= off;
	}
done:
	free(buf);
	free(out);
}

static void *conn_main(void *arg)
{
	struct conn *c = arg;
	serve(c);
	/* Tell the client now (FIN); the fd itself is closed when joined. */
	shutdown(c->fd, SHUT_RDWR);
	pthread_mutex_lock(&c->srv->lock);
	/* The listener or stop() closes the fd when joining, so a shutdown()
	 * from stop() never hits a reused descriptor. */
	c->done = true;
	pthread_mutex_unlock(&c->srv->lock);
	return NULL;
}

/* Joins finished connection threads (all of them when `all`). */
static void reap(struct ppl_elision_server *s, bool all)
{
	for (;;) {
		struct conn *victim = NULL, **pp;
		pthread_mutex_lock(&s->lock);
		for (pp = &s->conns; *pp; pp = &(*pp)->next) {
			if ((*pp)->done || all) {
				victim = *pp;
				*pp = victim->next;
				s->nconns--;
				break;
			}
		}
		pthread_mutex_unlock(&s->lock);
		if (!victim)
			return;
		pthread_join(victim->thread, NULL);
		close(victim->fd);
		free(victim);
	}
}

static void *listener_main(void *arg)
{
	struct ppl_elision_server *s = arg;
	for (;;) {
		struct pollfd pfd[2] = {{.fd = s->listen_fd, .events = POLLIN}, {.fd = s->wake[0], .events = POLLIN}};
		int pr = poll(pfd, 2, 1000);
		reap(s, false);
		if (pr < 0 && errno != EINTR)
			break;
		if (pfd[1].revents)
			break;
		if (pr <= 0 || !(pfd[0].revents & POLLIN))
			continue;
		struct sockaddr_storage ss;
		socklen_t sl = sizeof ss;
		int fd = accept4(s->listen_fd, (struct sockaddr *)&ss, &sl, SOCK_CLOEXEC);
		if (fd < 0)
			continue;
		if (!address_allowed(s, &ss)) {
			char a[INET6_ADDRSTRLEN];
			addr_text(&ss, a, sizeof a);
			slog(s, "connection from %s refused: address not in the allowed client list", a);
			count(s, &s->stats.refused_address, 1);
			close(fd);
			continue;
		}
		int one = 1;
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
		struct conn *c = calloc(1, sizeof *c);
		if (!c) {
			close(fd);
			continue;
		}
		c->srv = s;
		c->fd = fd;
		pthread_mutex_lock(&s->lock);
		if (s->stopping) {
			pthread_mutex_unlock(&s->lock);
			close(fd);
			free(c);
			break;
		}
		if (pthread_create(&c->thread, NULL, conn_main, c) != 0) {
			pthread_mutex_unlock(&s->lock);
			slog(s, "%s", "cannot start a connection thread: closing the connection");
			close(fd);
			free(c);
			continue;
		}
		c->next = s->conns;
		s->conns = c;
		s->nconns++;
		pthread_mutex_unlock(&s->lock);
	}
	return NULL;
}

/* ---- lifecycle ---- */

static void free_server(struct ppl_elision_server *s)
{
	if (s->listen_fd >= 0)
		close(s->listen_fd);
	if (s->wake[0] >= 0)
		close(s->wake[0]);
	if (s->wake[1] >= 0)
		close(s->wake[1]);
	pthread_mutex_destroy(&s->lock);
	free(s->rules);
	free(s->token);
	free(s);
}

int ppl_elision_server_start(const struct ppl_elision_server_config *cfg, struct ppl_elision_server **out,
			     char *err, size_t errlen)
{
	if (!cfg->decide) {
		errf(err, errlen, "no decision callback given");
		return -1;
	}
	struct ppl_elision_server *s = calloc(1, sizeof *s);
	if (!s) {
		errf(err, errlen, "out of memory");
		return -1;
	}
	s->cfg = *cfg;
	s->listen_fd = s->wake[0] = s->wake[1] = -1;
	pthread_mutex_init(&s->lock, NULL);
	const char *token = cfg->token ? cfg->token : "";
	s->token_len = strlen(token);
	if (s->token_len > PPL_ELIDE_TOKEN_MAX) {
		errf(err, errlen, "token is %zu bytes, the protocol allows at most %u", s->token_len,
		     PPL_ELIDE_TOKEN_MAX);
		free_server(s);
		return -1;
	}
	s->token = strdup(token);
	s->cfg.token = s->token;
	s->cfg.allow = NULL;
	s->cfg.address = NULL;
	if (!s->token || parse_allow(s, cfg->allow, err, errlen) != 0) {
		free_server(s);
		return -1;
	}

	const char *addr = cfg->address ? cfg->address : "127.0.0.1";
	struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
				 .ai_flags = AI_NUMERICHOST | AI_NUMERICSERV | AI_PASSIVE};
	struct addrinfo *ai = NULL;
	char port[8];
	snprintf(port, sizeof port, "%u", cfg->port);
	int gai = getaddrinfo(addr, port, &hints, &ai);
	if (gai != 0) {
		errf(err, errlen, "listen address \"%s\": %s (give a numeric IPv4 or IPv6 address)", addr,
		     gai_strerror(gai));
		free_server(s);
		return -1;
	}
	s->listen_fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	int one = 1;
	if (s->listen_fd >= 0)
		setsockopt(s->listen_fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
	if (s->listen_fd < 0 || bind(s->listen_fd, ai->ai_addr, ai->ai_addrlen) != 0 ||
	    listen(s->listen_fd, 64) != 0) {
		errf(err, errlen, "cannot listen on %s port %u: %s", addr, cfg->port, strerror(errno));
		freeaddrinfo(ai);
		free_server(s);
		return -1;
	}
	freeaddrinfo(ai);
	struct sockaddr_storage ss;
	socklen_t sl = sizeof ss;
	getsockname(s->listen_fd, (struct sockaddr *)&ss, &sl);
	s->port = ntohs(ss.ss_family == AF_INET ? ((struct sockaddr_in *)&ss)->sin_port
						: ((struct sockaddr_in6 *)&ss)->sin6_port);
	if (pipe2(s->wake, O_CLOEXEC) != 0 || pthread_create(&s->listener, NULL, listener_main, s) != 0) {
		errf(err, errlen, "cannot start the listener thread: %s", strerror(errno));
		free_server(s);
		return -1;
	}
	*out = s;
	return 0;
}

uint16_t ppl_elision_server_port(const struct ppl_elision_server *s)
{
	return s->port;
}

void ppl_elision_server_get_stats(struct ppl_elision_server *s, struct ppl_elision_server_stats *out)
{
	pthread_mutex_lock(&s->lock);
	*out = s->stats;
	pthread_mutex_unlock(&s->lock);
}

void ppl_elision_server_stop(struct ppl_elision_server *s)
{
	pthread_mutex_lock(&s->lock);
	s->stopping = true;
	for (struct conn *c = s->conns; c; c = c->next)
		shutdown(c->fd, SHUT_RDWR);
	pthread_mutex_unlock(&s->lock);
	ssize_t w;
	do
		w = write(s->wake[1], "x", 1);
	while (w < 0 && errno == EINTR);
	pthread_join(s->listener, NULL);
	reap(s, true);
	free_server(s);
}
