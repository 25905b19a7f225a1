/* Connection pool, the event loop that waits for replies, and the
 * retry/timeout policy (see pool.h). */
#include "pool.h"

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "log.h"

/* libnfs 4.0.0 exports nfs_get_rootfh() (libnfs.so: "T nfs_get_rootfh") but
 * declares it, and struct nfs_fh, only in its private header. The layout
 * below is the one libnfs has used since 1.x; pool_open() checks the
 * handle it yields with a GETATTR before anything trusts it. */
struct nfs_fh {
	int len;
	char *val;
};
const struct nfs_fh *nfs_get_rootfh(struct nfs_context *nfs);

struct conn {
	struct nfs_context *nfs;	/* NULL when not connected */
	struct rpc_context *rpc;
	struct conn *next_free;
};

struct pool {
	struct pool_config cfg;
	struct conn *conns;
	struct conn *free;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct fh root;
	uint32_t rsize, wsize;
	int down;			/* for logging state changes once */
};

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Waits until *done (or every call in `calls`) completes, the deadline
 * passes (-ETIMEDOUT) or the socket breaks (-ECONNRESET). */
static int service_until(struct rpc_context *rpc, const int *done, struct call *calls, int n,
			 int64_t deadline)
{
	for (;;) {
		int all = 1;

		if (done)
			all = *done;
		for (int i = 0; i < n && all; i++)
			all = calls[i].done;
		if (all)
			return 0;
		int wait = 100;
		if (deadline) {
			int64_t left = deadline - now_ms();
			if (left <= 0)
				return -ETIMEDOUT;
			if (left < wait)
				wait = (int)left;
		}
		struct pollfd pfd = { .fd = rpc_get_fd(rpc), .events = (short)rpc_which_events(rpc) };
		int r = poll(&pfd, 1, wait);
		if (r < 0 && errno != EINTR)
			return -EIO;
		if (rpc_service(rpc, r > 0 ? pfd.revents : 0) < 0)
			return -ECONNRESET;
	}
}

struct mount_wait {
	int done;
	int status;
	char msg[256];
};

static void on_mount(int status, struct nfs_context *nfs, void *data, void *private_data)
{
	struct mount_wait *w = private_data;

	(void)nfs;
	w->status = status;
	if (status != 0 && data)
		snprintf(w->msg, sizeof w->msg, "%s", (const char *)data);
	w->done = 1;
}

static const char *rpc_why(struct rpc_context *rpc, const char *fallback)
{
	const char *e = rpc ? rpc_get_error(rpc) : NULL;

	return e && *e ? e : fallback;
}

static void conn_drop(struct conn *c)
{
	if (c->nfs)
		nfs_destroy_context(c->nfs);
	c->nfs = NULL;
	c->rpc = NULL;
}

/* A connection whose server end is gone while this end waits for a reply
 * is half-open: the server gave up on it during a link cut (its unacked
 * reply timed out) and its reset was lost with the link, while this end,
 * with nothing unacknowledged to resend, would wait for that reply
 * forever, hard mount or not. Keepalive probes find such a connection
 * within about 11 s of silence, and a user timeout bounds how long sent
 * bytes may go unacknowledged; either error makes run() drop the
 * connection and send its calls again on a new one, as for any lost
 * connection. A slow server is no silence: its kernel acknowledges and
 * answers probes whatever Ganesha is doing. */
static void keep_alive(int fd)
{
	int on = 1, idle = 5, intvl = 2, cnt = 3;
	unsigned int user_timeout_ms = 30000;

	if (fd < 0)
		return;
	if (setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &on, sizeof on) != 0 ||
	    setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof idle) != 0 ||
	    setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof intvl) != 0 ||
	    setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof cnt) != 0 ||
	    setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &user_timeout_ms, sizeof user_timeout_ms) != 0)
		log_msg("cannot set keepalive on the NFS connection (%s): a link cut may leave it waiting",
			strerror(errno));
}

/* Opens a fresh context: parse the URL (which also applies its arguments,
 * e.g. nfsport=/mountport=, to the context), MOUNT, connect to NFS. */
static int conn_open(struct conn *c, const char *url, int64_t deadline, char *err, size_t errlen)
{
	struct nfs_context *nfs = nfs_init_context();
	if (!nfs) {
		snprintf(err, errlen, "cannot create an NFS context (out of memory)");
		return -ENOMEM;
	}
	struct nfs_url *u = nfs_parse_url_dir(nfs, url);
	if (!u) {
		snprintf(err, errlen, "bad NFS URL '%s': %s (expected nfs://HOST/EXPORT"
			 "[?nfsport=N&mountport=N])", url, nfs_get_error(nfs));
		nfs_destroy_context(nfs);
		return -EINVAL;
	}
	if (nfs_set_version(nfs, NFS_V3) != 0) {
		snprintf(err, errlen, "cannot select NFSv3: %s", nfs_get_error(nfs));
		nfs_destroy_url(u);
		nfs_destroy_context(nfs);
		return -EINVAL;
	}
	/* We reconnect ourselves, with a fresh MOUNT, under our own deadline. */
	nfs_set_autoreconnect(nfs, 0);
	struct mount_wait w = { 0 };
	if (nfs_mount_async(nfs, u->server, u->path, on_mount, &w) != 0) {
		snprintf(err, errlen, "cannot start mounting %s:%s: %s", u->server, u->path,
			 nfs_get_error(nfs));
		nfs_destroy_url(u);
		nfs_destroy_context(nfs);
		return -EIO;
	}
	int r = service_until(nfs_get_rpc_context(nfs), &w.done, NULL, 0, deadline);
	if (r == 0 && w.status != 0) {
		snprintf(err, errlen, "mounting %s:%s failed: %s", u->server, u->path, w.msg);
		r = w.status < 0 ? w.status : -EIO;
	} else if (r == -ETIMEDOUT) {
		snprintf(err, errlen, "mounting %s:%s timed out", u->server, u->path);
	} else if (r != 0) {
		snprintf(err, errlen, "mounting %s:%s failed: %s", u->server, u->path,
			 rpc_why(nfs_get_rpc_context(nfs), "connection lost"));
	}
	nfs_destroy_url(u);
	if (r != 0) {
		nfs_destroy_context(nfs);
		return r;
	}
	c->nfs = nfs;
	c->rpc = nfs_get_rpc_context(nfs);
	keep_alive(rpc_get_fd(c->rpc));
	/* Each connection gets its own XID range: the server's duplicate
	 * request cache must never mistake one connection's WRITE for another's
	 * retry. libnfs spaces contexts apart with an unlocked static counter,
	 * which concurrent reconnects could race on. */
	static atomic_uint next_range;
	rpc_set_next_xid(c->rpc, (atomic_fetch_add(&next_range, 1) << 24) |
				  ((uint32_t)now_ms() & 0x00ffffffu));
	return 0;
}

static struct conn *checkout(struct pool *p)
{
	pthread_mutex_lock(&p->lock);
	while (!p->free)
		pthread_cond_wait(&p->cond, &p->lock);
	struct conn *c = p->free;
	p->free = c->next_free;
	pthread_mutex_unlock(&p->lock);
	return c;
}

static void checkin(struct pool *p, struct conn *c)
{
	pthread_mutex_lock(&p->lock);
	c->next_free = p->free;
	p->free = c;
	pthread_cond_signal(&p->cond);
	pthread_mutex_unlock(&p->lock);
}

static void note_state(struct pool *p, int down, const char *why)
{
	pthread_mutex_lock(&p->lock);
	int changed = p->down != down;
	p->down = down;
	pthread_mutex_unlock(&p->lock);
	if (changed && down)
		log_msg("NFS server unreachable (%s); retrying%s", why,
			p->cfg.timeout_ms ? " until the operation times out" : " (hard mode: forever)");
	else if (changed)
		log_msg("NFS server reachable again");
}

static int run(struct pool *p, struct call *calls, int n, int timeout_ms)
{
	int64_t deadline = timeout_ms ? now_ms() + timeout_ms : 0;
	int backoff = 50;

	for (;;) {
		struct conn *c = checkout(p);
		char err[512] = "";
		int r = 0;

		if (!c->nfs)
			r = conn_open(c, p->cfg.url, deadline, err, sizeof err);
		if (r == 0) {
			int sent = 0;
			for (; sent < n; sent++)
				if (rpc_send_call(c->rpc, &calls[sent]) != 0)
					break;
			if (sent < n) {
				snprintf(err, sizeof err, "cannot queue RPC: %s",
					 rpc_why(c->rpc, "libnfs refused the call"));
				r = -EIO;
			}
			/* Wait for what was queued even on a queueing failure, so
			 * no callback can outlive `calls`. */
			int w = service_until(c->rpc, NULL, calls, sent, deadline);
			if (r == 0 && w != 0) {
				snprintf(err, sizeof err, "%s", w == -ETIMEDOUT ? "no reply in time"
					 : rpc_why(c->rpc, "connection lost"));
				r = w;
			}
			for (int i = 0; r == 0 && i < n; i++)
				if (calls[i].rpc_status != RPC_STATUS_SUCCESS) {
					snprintf(err, sizeof err, "RPC failed: %s",
						 rpc_why(c->rpc, "no valid reply"));
					r = -EIO;
				}
		}
		if (r == 0) {
			/* NFS3ERR_JUKEBOX: the server is alive but asks to retry
			 * later; the call was not performed. Retry the batch on
			 * this connection, within the same deadline. */
			int busy = 0;
			for (int i = 0; i < n; i++)
				busy |= calls[i].reply->status == NFS3ERR_JUKEBOX;
			checkin(p, c);
			note_state(p, 0, NULL);
			if (!busy)
				return 0;
		} else {
			/* Destroying the context cancels what is still queued;
			 * those callbacks run now, while `calls` is alive. */
			conn_drop(c);
			checkin(p, c);
			note_state(p, 1, err);
		}
		int64_t t = now_ms();
		if (deadline && t >= deadline)
			return -EIO;
		int nap = backoff;
		if (deadline && deadline - t < nap)
			nap = (int)(deadline - t);
		struct timespec ts = { .tv_sec = nap / 1000, .tv_nsec = (long)(nap % 1000) * 1000000 };
		nanosleep(&ts, NULL);
		if (backoff < 1000)
			backoff *= 2;
	}
}

int pool_run(struct pool *p, struct call *calls, int n)
{
	return run(p, calls, n, p->cfg.timeout_ms);
}

int pool_call(struct pool *p, enum proc proc, void *args, struct reply *r)
{
	struct call c = { .proc = proc, .args = args, .reply = r };
	int e = pool_run(p, &c, 1);

	return e ? e : nfs3_errno(r->status);
}

struct pool *pool_open(const struct pool_config *cfg, char *err, size_t errlen)
{
	struct pool *p = calloc(1, sizeof *p);
	if (!p) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	p->cfg = *cfg;
	p->conns = calloc((size_t)cfg->size, sizeof *p->conns);
	if (!p->conns) {
		free(p);
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	pthread_mutex_init(&p->lock, NULL);
	pthread_cond_init(&p->cond, NULL);
	for (int i = cfg->size - 1; i >= 0; i--) {
		p->conns[i].next_free = p->free;
		p->free = &p->conns[i];
	}

	/* The first connection is made here so that a wrong URL, port or
	 * export fails the command with the server's reason. */
	struct conn *c = &p->conns[0];
	int64_t deadline = now_ms() + (cfg->timeout_ms ? cfg->timeout_ms : 30000);
	if (conn_open(c, cfg->url, deadline, err, errlen) != 0) {
		pool_close(p);
		return NULL;
	}
	const struct nfs_fh *root = nfs_get_rootfh(c->nfs);
	if (!root || root->len <= 0 || root->len > NFS3_FHSIZE) {
		snprintf(err, errlen, "libnfs returned no usable root file handle");
		pool_close(p);
		return NULL;
	}
	p->root.len = (uint32_t)root->len;
	memcpy(p->root.data, root->val, p->root.len);
	p->rsize = (uint32_t)nfs_get_readmax(c->nfs);
	p->wsize = (uint32_t)nfs_get_writemax(c->nfs);
	if (p->rsize == 0 || p->rsize > 1024 * 1024)
		p->rsize = 1024 * 1024;
	if (p->wsize == 0 || p->wsize > 1024 * 1024)
		p->wsize = 1024 * 1024;
	if (cfg->max_rsize && p->rsize > cfg->max_rsize)
		p->rsize = cfg->max_rsize;
	if (cfg->max_wsize && p->wsize > cfg->max_wsize)
		p->wsize = cfg->max_wsize;

	GETATTR3args a = { 0 };
	struct reply r = { 0 };
	fh_to_nfs(&p->root, &a.object);
	int e = pool_call(p, P_GETATTR, &a, &r);
	if (e != 0 || r.attr.type != NF3DIR) {
		snprintf(err, errlen, "GETATTR of the export's root failed: %s",
			 e ? strerror(-e) : "not a directory");
		pool_close(p);
		return NULL;
	}
	return p;
}

void pool_close(struct pool *p)
{
	if (!p)
		return;
	for (int i = 0; i < p->cfg.size; i++)
		conn_drop(&p->conns[i]);
	free(p->conns);
	pthread_mutex_destroy(&p->lock);
	pthread_cond_destroy(&p->cond);
	free(p);
}

const struct fh *pool_root(const struct pool *p) { return &p->root; }
uint32_t pool_rsize(const struct pool *p) { return p->rsize; }
uint32_t pool_wsize(const struct pool *p) { return p->wsize; }
