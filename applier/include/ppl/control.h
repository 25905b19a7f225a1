/* The live inspection socket: `ppl-inspect live POOL_PATH ...` connects
 * to the UNIX socket POOL_PATH.ctl of a running export and gets the
 * engine's figures, or one page's pending records, as JSON. One request
 * line per connection ("stats", or "page SPACE:PAGE"), one JSON reply,
 * then the server closes. The socket is made mode 0600: only the user
 * ganesha.nfsd runs as (and root) may ask. */
#ifndef PPL_CONTROL_H
#define PPL_CONTROL_H

#include <stddef.h>

struct ppl_control;

/* Returns a malloc'ed JSON text answering the request line. */
typedef char *(*ppl_control_fn)(void *arg, const char *request);

/* Listens on path (a stale socket left by a crash is replaced; any other
 * file there is not). NULL with a message in err when it cannot. */
struct ppl_control *ppl_control_start(const char *path, ppl_control_fn fn, void *arg, char *err, size_t errlen);
void ppl_control_stop(struct ppl_control *c);

#endif
