/* The metrics endpoint: GET http://ADDRESS:PORT/metrics answers with the
 * OpenMetrics text a callback makes (the store's: ppl_store_metrics), for
 * Prometheus to scrape. libmicrohttpd serves it from one thread of its
 * own; the endpoint keeps no state of the store. */
#ifndef PPL_METRICS_HTTP_H
#define PPL_METRICS_HTTP_H

#include <stddef.h>
#include <stdint.h>

struct ppl_metrics_http;

/* The text for one scrape, malloc'ed (the endpoint frees it); NULL: the
 * scrape gets a 500. Called from the endpoint's thread. */
typedef char *(*ppl_metrics_fn)(void *arg);

/* Listens on address (numeric IPv4 or IPv6) and port (0: any free one,
 * for tests). NULL with a message in err when it cannot (the port in
 * use, an address this host does not have). */
struct ppl_metrics_http *ppl_metrics_http_start(const char *address, uint16_t port, ppl_metrics_fn fn, void *arg,
						char *err, size_t errlen);
/* The port listened on. */
uint16_t ppl_metrics_http_port(const struct ppl_metrics_http *s);
/* Closes the port and waits for a scrape in progress. NULL: nothing. */
void ppl_metrics_http_stop(struct ppl_metrics_http *s);

#endif
