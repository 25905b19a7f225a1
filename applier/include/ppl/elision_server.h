/* The storage side of the elision channel (wire format in
 * ppl/elision_proto.h): a TCP listener that checks client addresses and the
 * shared token, then answers each ELIDE request with the verdict of a
 * decision callback supplied by the embedder. The FSAL plugs in the real
 * decision (can the applier rebuild exactly this page, durably?); the test
 * reference server (ppl-elision-ref) plugs in scripted ones.
 *
 * Threads: one listener, one thread per client connection (a client is a
 * mariadbd with a small pool of connections, so there are few). The
 * callback runs on the connection's thread, one request at a time per
 * connection, concurrently across connections: it must be thread-safe. A
 * callback that blocks delays only that connection's answers; the client's
 * own timeout turns that into ordinary writes. */
#ifndef PPL_ELISION_SERVER_H
#define PPL_ELISION_SERVER_H

#include <stddef.h>
#include <stdint.h>

#include "ppl/log.h"

#include "ppl/elision_proto.h"

struct ppl_elision_server;

/* What a client asks about: exactly the page image it is about to write. */
struct ppl_elision_page {
	uint32_t space;
	uint32_t page_no;
	uint64_t lsn;
	uint32_t checksum; /* the page's last 4 bytes (full_crc32) */
	uint32_t page_size;
};

/* Callback verdicts beyond enum ppl_elide_reason: close this client's
 * connection without answering the request (the client then writes the
 * page and reconnects later). For a server that is going away. */
#define PPL_ELISION_CLOSE 255u

/* Returns PPL_ELIDE_ACK only if the page can be reproduced exactly and
 * durably; otherwise a NACK reason or PPL_ELISION_CLOSE. */
typedef unsigned (*ppl_elision_decide_fn)(void *arg, const struct ppl_elision_page *page);

struct ppl_elision_server_config {
	const char *address;   /* numeric IPv4/IPv6 address to listen on; NULL = 127.0.0.1 */
	uint16_t port;         /* 0 = any free port, see ppl_elision_server_port() */
	const char *token;     /* shared secret clients must present; NULL or "" = none */
	const char *allow;     /* comma-separated addresses or CIDR blocks
				  ("127.0.0.1,10.1.0.0/16,::1"), "any" for all;
				  NULL = loopback only */
	unsigned max_clients;  /* concurrent connections; 0 = 64 */
	/* A client greeted while max_clients are connected is admitted in
	 * the place of the connection idle longest, if that one has sent
	 * nothing for this long (ms; 0 = 30 s): clients that said hello and
	 * then went quiet must not lock the others out. The client closed so
	 * sees its connection lost, writes its pages itself meanwhile, and
	 * connects again. Otherwise the newcomer is answered BUSY. */
	unsigned idle_evict_ms;
	unsigned max_inflight; /* pipelining depth advertised to clients; 0 = 256 */
	ppl_elision_decide_fn decide;
	void *decide_arg;
	/* Where the server reports refused clients and protocol errors (no
	 * function: silent). Called from server threads. */
	struct ppl_logger log;
};

struct ppl_elision_server_stats {
	uint64_t connections;      /* accepted and greeted */
	uint64_t refused_address;  /* closed at accept: address not allowed */
	uint64_t refused_hello;    /* bad magic, version or token, or busy */
	uint64_t protocol_errors;  /* malformed frames (connection closed) */
	uint64_t requests;
	uint64_t verdicts[PPL_ELIDE_REASON_COUNT]; /* [0] = ACKs */
	uint64_t closes;           /* PPL_ELISION_CLOSE from the callback */
	uint64_t idle_evicted;     /* idle connections closed to admit a new client */
};

/* Binds, listens and starts the listener thread. Returns 0, or -1 with a
 * message in err (bad address or allow list, port in use, ...). */
int ppl_elision_server_start(const struct ppl_elision_server_config *cfg, struct ppl_elision_server **out,
			     char *err, size_t errlen);
/* The port actually bound (useful with port 0). */
uint16_t ppl_elision_server_port(const struct ppl_elision_server *s);
void ppl_elision_server_get_stats(struct ppl_elision_server *s, struct ppl_elision_server_stats *out);
/* Closes the listener and every connection, joins all threads (waiting for
 * callbacks in progress to return) and frees the server. */
void ppl_elision_server_stop(struct ppl_elision_server *s);

#endif
