/* The metrics endpoint over libmicrohttpd. See ppl/metrics_http.h.
 *
 * The listening socket is made here, not by libmicrohttpd: its bind
 * error (EADDRINUSE above all) then reaches the operator as it is, where
 * libmicrohttpd would only fail, or print to stderr, which the storage
 * node's log never shows. libmicrohttpd closes the socket when it stops. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <microhttpd.h>

#include "ppl/metrics_http.h"
#include "ppl/openmetrics.h"

/* A scraper that stops reading must not hold a connection for long, nor
 * many scrapers the thread. */
#define CONNECTION_TIMEOUT_S 10u
#define CONNECTION_LIMIT 16u

struct ppl_metrics_http {
	struct MHD_Daemon *d;
	uint16_t port;
	ppl_metrics_fn fn;
	void *arg;
};

static enum MHD_Result reply(struct MHD_Connection *c, unsigned status, const char *type, const char *body,
			     enum MHD_ResponseMemoryMode mode, const char *allow)
{
	struct MHD_Response *r = MHD_create_response_from_buffer(strlen(body), (void *)body, mode);
	if (r == NULL) {
		if (mode == MHD_RESPMEM_MUST_FREE)
			free((void *)body);
		return MHD_NO;
	}
	MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type);
	if (allow)
		MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW, allow);
	enum MHD_Result ok = MHD_queue_response(c, status, r);
	MHD_destroy_response(r);
	return ok;
}

static enum MHD_Result answer(void *cls, struct MHD_Connection *c, const char *url, const char *method,
			      const char *version, const char *upload_data, size_t *upload_data_size, void **con_cls)
{
	struct ppl_metrics_http *s = cls;
	(void)version;
	(void)upload_data;
	(void)con_cls;
	static const char text[] = "text/plain; charset=utf-8";
	if (*upload_data_size) {
		*upload_data_size = 0; /* a body is not wanted: read and dropped */
		return MHD_YES;
	}
	if (strcmp(method, MHD_HTTP_METHOD_GET) != 0 && strcmp(method, MHD_HTTP_METHOD_HEAD) != 0)
		return reply(c, MHD_HTTP_METHOD_NOT_ALLOWED, text, "only GET /metrics is served here\n",
			     MHD_RESPMEM_PERSISTENT, "GET, HEAD");
	if (strcmp(url, "/metrics") != 0)
		return reply(c, MHD_HTTP_NOT_FOUND, text, "the storage node's metrics are at /metrics\n",
			     MHD_RESPMEM_PERSISTENT, NULL);
	char *body = s->fn(s->arg);
	if (body == NULL)
		return reply(c, MHD_HTTP_INTERNAL_SERVER_ERROR, text, "out of memory making the metrics\n",
			     MHD_RESPMEM_PERSISTENT, NULL);
	return reply(c, MHD_HTTP_OK, PPL_OM_CONTENT_TYPE, body, MHD_RESPMEM_MUST_FREE, NULL);
}

static int listen_on(const char *address, uint16_t port, uint16_t *bound, bool *v6, char *err, size_t errlen)
{
	struct sockaddr_storage ss;
	socklen_t len;
	memset(&ss, 0, sizeof(ss));
	struct sockaddr_in *a4 = (struct sockaddr_in *)&ss;
	struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)&ss;
	if (inet_pton(AF_INET, address, &a4->sin_addr) == 1) {
		a4->sin_family = AF_INET;
		a4->sin_port = htons(port);
		len = sizeof(*a4);
		*v6 = false;
	} else if (inet_pton(AF_INET6, address, &a6->sin6_addr) == 1) {
		a6->sin6_family = AF_INET6;
		a6->sin6_port = htons(port);
		len = sizeof(*a6);
		*v6 = true;
	} else {
		snprintf(err, errlen, "Metrics_Address \"%s\" is not a numeric IPv4 or IPv6 address", address);
		return -1;
	}
	int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	int one = 1;
	/* a restarted node takes its port back at once, despite TIME_WAIT */
	if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) != 0 ||
	    bind(fd, (struct sockaddr *)&ss, len) != 0 || listen(fd, 16) != 0 ||
	    getsockname(fd, (struct sockaddr *)&ss, &len) != 0) {
		int e = errno;
		snprintf(err, errlen, "cannot listen on %s%s%s:%u: %s%s", *v6 ? "[" : "", address, *v6 ? "]" : "",
			 (unsigned)port, strerror(e),
			 e == EADDRINUSE ? " (another program, or another export's Metrics_Port, has that port: "
					   "choose another Metrics_Port)" :
			 e == EADDRNOTAVAIL ? " (no interface of this host has that address)" : "");
		if (fd >= 0)
			close(fd);
		return -1;
	}
	*bound = ntohs(*v6 ? a6->sin6_port : a4->sin_port);
	return fd;
}

struct ppl_metrics_http *ppl_metrics_http_start(const char *address, uint16_t port, ppl_metrics_fn fn, void *arg,
						char *err, size_t errlen)
{
	struct ppl_metrics_http *s = calloc(1, sizeof(*s));
	if (s == NULL) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	s->fn = fn;
	s->arg = arg;
	bool v6;
	int fd = listen_on(address, port, &s->port, &v6, err, errlen);
	if (fd < 0) {
		free(s);
		return NULL;
	}
	/* One thread polls every connection: a scrape is a snapshot of
	 * counters, and nothing here may take threads from the NFS server. */
	unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL | (v6 ? MHD_USE_IPv6 : 0);
	s->d = MHD_start_daemon(flags, 0, NULL, NULL, answer, s, MHD_OPTION_LISTEN_SOCKET, fd,
				MHD_OPTION_CONNECTION_TIMEOUT, CONNECTION_TIMEOUT_S, MHD_OPTION_CONNECTION_LIMIT,
				CONNECTION_LIMIT, MHD_OPTION_END);
	if (s->d == NULL) {
		snprintf(err, errlen, "libmicrohttpd could not start serving port %u (out of threads or memory?)",
			 (unsigned)s->port);
		close(fd);
		free(s);
		return NULL;
	}
	return s;
}

uint16_t ppl_metrics_http_port(const struct ppl_metrics_http *s)
{
	return s->port;
}

void ppl_metrics_http_stop(struct ppl_metrics_http *s)
{
	if (s == NULL)
		return;
	MHD_stop_daemon(s->d);
	free(s);
}
