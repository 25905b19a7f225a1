/* io_uring page writes completed by libcatcher's own thread.
 *
 * Why. MariaDB's page cleaner prepares one write, calls io_uring_submit
 * and goes on to the next page; its completions arrive on another thread.
 * Asked inside that call, the question made the cleaner wait one round
 * trip per page: 175-240 us p50 on the emulated link, of which the
 * storage node's own answer is 13 us (the rest is the link and the
 * wake-ups of two busy one-core nodes). With many client threads on the
 * compute core the cleaner fell behind and every thread waited for free
 * pages, slower than writing in full (BENCHMARKS.md, issue 17).
 *
 * How. At submit, a write all of whose pages passed the local checks is
 * taken out of the application's ring: its SQE becomes a NOP that posts
 * no completion (IOSQE_CQE_SKIP_SUCCESS). Once the real submit has
 * returned, the submitting thread sends the write's questions on a
 * connection of libcatcher's own, pipelined (at most
 * LIBCATCHER_URING_DEFER pages in flight; verdicts are matched by
 * request id), and goes on. libcatcher's thread reads the verdicts and
 * completes each write in the application's ring with IORING_OP_MSG_RING,
 * posting the application's user_data and the result the kernel would
 * have posted: the full length for a write whose every page was ACKed,
 * else whatever the real write -- issued by the thread through a ring of
 * its own -- returned. The submitter waits only when the window is full.
 *
 * Off by default (LIBCATCHER_URING_DEFER=N turns it on with N pages in
 * flight). Measured on the two-node emulation with one compute core
 * (BENCHMARKS.md, issue 17), it is slower than asking inside the submit:
 * on a saturated core every hand-off between threads costs a wake-up,
 * so a write completes about 0.8 ms after its submit (p50, 8 threads)
 * where the cleaner asking itself waited 0.22 ms, and hot pages stay
 * latched for their writes that much longer. Without the window the
 * cleaner submitted whole batches at once and writes completed 3.8-5.9
 * ms late. It is kept, tested, for compute nodes with cores to spare.
 *
 * A write's life:
 *
 *   submit ──take──> TAKEN ──kernel consumed the NOP──> ASKED ──last verdict──┐
 *                      │          (the submitter sends its questions)        │
 *                      └──not consumed: SQE put back, the kernel              │
 *                         writes it as if we had never looked                 │
 *        ┌───────── every page ACKed ──────────────────────────────────────────┤
 *        │                                   otherwise: WRITING ◄──────────────┘
 *        ▼                                               │ its CQE
 *     POSTING (MSG_RING into the application's ring) ◄───┘
 *        │ its CQE: 0 -> freed; -EOVERFLOW/-EAGAIN -> posted again
 *
 * Invariants:
 *  D1 Every write the kernel took in is completed exactly once, and only
 *     after its bytes were written or every page of it was ACKed (I1).
 *  D2 An SQE is left changed only if the kernel consumed it in the same
 *     submit (the ring's head says so); any other is restored byte for
 *     byte before the submit returns.
 *  D3 The thread writes through a duplicate of the descriptor taken at
 *     submit: a descriptor closed and its number reused meanwhile is
 *     never written.
 *  D4 Only rings whose set-up is known are touched (no SQPOLL, IOPOLL,
 *     128-byte SQEs or 32-byte CQEs), and only SQEs without links, drains
 *     or personalities: nothing else of the application's ordering
 *     changes. MariaDB issues every page write on its own and orders
 *     them only by waiting for completions.
 */
#include "uring_defer.h"

#include "ppl/elision_proto.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <time.h>
#include <sys/syscall.h>
#include <unistd.h>

#define OWN_ENTRIES 256  /* the thread's ring */

#define TAG_WRITE 0u     /* in the low bits of an entry's address (16-byte aligned) */
#define TAG_POST 1u
#define TAG_MASK 15u

struct deferred {
	struct deferred *next;
	struct io_uring_sqe orig; /* the application's SQE as prepared (D2) */
	unsigned index;           /* its position in the SQ ring */
	int ring_fd;              /* the application's ring */
	int fd;                   /* a duplicate of the descriptor written (D3), -1 once closed */
	struct iovec one;         /* the buffer of a WRITE or WRITE_FIXED */
	const struct iovec *iov;
	int cnt;
	int32_t res;              /* the result to post */
	uint64_t start_ns;
	size_t unanswered;        /* its pages without a verdict */
	struct catcher_plan plan;
	struct catcher_query q[]; /* plan.npages */
};

static struct {
	pthread_mutex_t lock;   /* state, the queue */
	int state;              /* 0 not started, 1 running, -1 unusable */
	struct deferred *head, **tail;
	int efd;                /* wakes the thread */
	struct io_uring ring;   /* the thread's own */
	pthread_t thread;
} D = {.lock = PTHREAD_MUTEX_INITIALIZER, .efd = -1};

static const unsigned known_setup = IORING_SETUP_CQSIZE | IORING_SETUP_CLAMP | IORING_SETUP_SUBMIT_ALL |
				    IORING_SETUP_COOP_TASKRUN | IORING_SETUP_TASKRUN_FLAG | IORING_SETUP_ATTACH_WQ;

/* ---- the thread ---- */

static struct io_uring_sqe *own_sqe(void)
{
	struct io_uring_sqe *sqe;
	while (!(sqe = io_uring_get_sqe(&D.ring)))
		io_uring_submit(&D.ring); /* the kernel takes every SQE at once: room again */
	return sqe;
}

static void post(struct deferred *d)
{
	struct io_uring_sqe *sqe = own_sqe();
	io_uring_prep_msg_ring(sqe, d->ring_fd, (unsigned)d->res, d->orig.user_data, 0);
	io_uring_sqe_set_data64(sqe, (uint64_t)(uintptr_t)d | TAG_POST);
}

static void close_dup(struct deferred *d)
{
	if (d->fd >= 0)
		catcher_sys_close(d->fd);
	d->fd = -1;
}

static void write_through(struct deferred *d)
{
	struct io_uring_sqe *sqe = own_sqe();
	io_uring_prep_writev(sqe, d->fd, d->iov, (unsigned)d->cnt, (uint64_t)d->plan.off);
	sqe->rw_flags = d->orig.rw_flags;
	sqe->ioprio = d->orig.ioprio;
	io_uring_sqe_set_data64(sqe, (uint64_t)(uintptr_t)d | TAG_WRITE);
}

/* ---- the questions: one connection, pipelined, a bounded window ----
 *
 * The submitting thread sends the questions of the writes it hands over
 * (no wake-up stands between a submit and its questions); the thread
 * reads the verdicts, matched to their pages by request id, and finishes
 * a write when its last page is answered. At most
 * LIBCATCHER_URING_DEFER pages are in flight: a submitter that would
 * exceed it waits for room, so the page cleaner stays paced by the
 * answers, a few pages at a time instead of one, and a write completes a
 * round trip after its submit, not after the rest of a burst. A missing
 * answer past LIBCATCHER_TIMEOUT_MS, a lost connection or a verdict we
 * did not ask for fails every question in flight (the pages are written)
 * and drops the connection; while it is down (the backoff of client.c)
 * the pages are refused at once. Everything here is under Q.lock. */

#define PEND_MAX 256

static struct {
	pthread_mutex_t lock;
	pthread_cond_t room;     /* inflight went down */
	struct catcher_conn conn;
	struct pend {
		struct deferred *d; /* NULL: free */
		uint32_t id, qi;
		uint64_t deadline;
	} pend[PEND_MAX];
	unsigned inflight;
	uint8_t inbuf[4096];
	size_t inlen;
} Q = {.lock = PTHREAD_MUTEX_INITIALIZER, .conn = {.fd = -1}};

/* Writes whose every page has its verdict, for the thread to finish. */
struct done_list {
	struct deferred *head, **tail;
};

static void answered(struct deferred *d, size_t n, struct done_list *done)
{
	d->unanswered -= n;
	if (d->unanswered == 0) {
		d->next = NULL;
		*done->tail = d;
		done->tail = &d->next;
	}
}

/* Refuses every question in flight and drops the connection. */
static void fail_inflight(unsigned reason, const char *why, struct done_list *done)
{
	for (unsigned i = 0; i < PEND_MAX; i++) {
		struct pend *p = &Q.pend[i];
		if (!p->d)
			continue;
		struct deferred *d = p->d;
		d->q[p->qi].verdict = (uint8_t)reason;
		p->d = NULL;
		answered(d, 1, done);
	}
	Q.inflight = 0;
	Q.inlen = 0;
	catcher_conn_drop(&Q.conn, why);
	pthread_cond_broadcast(&Q.room);
}

static unsigned window(void)
{
	unsigned w = Q.conn.window < PEND_MAX ? Q.conn.window : PEND_MAX;
	return w < catcher_cfg.uring_defer ? w : catcher_cfg.uring_defer;
}

/* Asks about every page of d, from the submitting thread. */
static void ask(struct deferred *d, struct done_list *done)
{
	uint64_t start = catcher_now_ns(), timeout = (uint64_t)catcher_cfg.timeout_ms * 1000000u;
	uint64_t deadline = start + timeout;
	pthread_mutex_lock(&Q.lock);
	unsigned reason = 0;
	bool woke = false;
	if (Q.conn.fd < 0) {
		const char *err = start < Q.conn.retry_at ? "" : catcher_conn_open(&Q.conn, deadline);
		if (err) {
			if (*err)
				catcher_conn_drop(&Q.conn, err);
			reason = R_UNAVAILABLE;
		} else {
			woke = true; /* the thread must watch the new connection */
		}
	}
	/* wait for room: the pages of one write go out together */
	size_t n = d->plan.npages;
	while (!reason && Q.conn.fd >= 0 && Q.inflight + n > window() && Q.inflight > 0) {
		struct timespec ts = {(time_t)(deadline / 1000000000u), (long)(deadline % 1000000000u)};
		if (pthread_cond_timedwait(&Q.room, &Q.lock, &ts) == ETIMEDOUT)
			reason = R_TIMEOUT; /* the answers in flight did not come in time */
	}
	if (!reason && Q.conn.fd < 0)
		reason = R_UNAVAILABLE; /* dropped while we waited */
	if (reason) {
		for (size_t i = 0; i < n; i++)
			d->q[i].verdict = (uint8_t)reason;
		answered(d, n, done);
		pthread_mutex_unlock(&Q.lock);
		return;
	}
	uint8_t out[CATCHER_PLAN_MAX_PAGES * PPL_ELIDE_REQ_LEN];
	size_t olen = 0, sent = 0;
	uint64_t now = catcher_now_ns();
	for (; sent < n; sent++) {
		struct pend *p = &Q.pend[Q.conn.next_id % PEND_MAX];
		if (p->d)
			break; /* an older question still holds that place */
		olen += catcher_put_question(out + olen, &d->q[sent], Q.conn.next_id);
		*p = (struct pend){.d = d, .id = Q.conn.next_id, .qi = (uint32_t)sent, .deadline = now + timeout};
		Q.conn.next_id++;
		Q.inflight++;
	}
	if (sent < n) {
		for (size_t i = sent; i < n; i++)
			d->q[i].verdict = R_POOL_BUSY;
		answered(d, n - sent, done);
	}
	if (olen) {
		catcher_count_wire(0, 0, (unsigned)(olen / PPL_ELIDE_REQ_LEN));
		int r = catcher_conn_send(Q.conn.fd, out, olen, deadline);
		if (r != 0)
			fail_inflight(r == -2 ? R_TIMEOUT : R_CONN_LOST,
				      r == -2 ? "no answer within LIBCATCHER_TIMEOUT_MS" : "connection lost", done);
	}
	pthread_mutex_unlock(&Q.lock);
	if (woke)
		eventfd_write(D.efd, 1);
}

/* Reads the verdicts that arrived; from the thread. */
static void read_verdicts(struct done_list *done)
{
	pthread_mutex_lock(&Q.lock);
	unsigned before = Q.inflight;
	while (Q.conn.fd >= 0) {
		ssize_t r = recv(Q.conn.fd, Q.inbuf + Q.inlen, sizeof Q.inbuf - Q.inlen, MSG_DONTWAIT);
		if (r == 0 || (r < 0 && errno != EAGAIN && errno != EINTR)) {
			fail_inflight(R_CONN_LOST, "connection lost", done);
			break;
		}
		if (r < 0)
			break;
		catcher_count_wire(0, (size_t)r, 0);
		Q.inlen += (size_t)r;
		size_t off = 0;
		long len;
		struct ppl_elide_hdr h;
		while ((len = ppl_elide_frame(Q.inbuf + off, Q.inlen - off, &h)) > 0) {
			struct ppl_elide_verdict v;
			struct pend *p = &Q.pend[h.id % PEND_MAX];
			if (ppl_elide_get_verdict(Q.inbuf + off, &h, &v) != 0 || !p->d || p->id != h.id) {
				len = -1;
				break;
			}
			struct deferred *d = p->d;
			d->q[p->qi].verdict = catcher_verdict_reason(v.reason);
			p->d = NULL;
			Q.inflight--;
			answered(d, 1, done);
			off += (size_t)len;
		}
		if (len < 0) {
			fail_inflight(R_PROTOCOL, Q.inflight ? "sent an answer we do not understand"
							     : "sent more answers than questions", done);
			break;
		}
		memmove(Q.inbuf, Q.inbuf + off, Q.inlen - off);
		Q.inlen -= off;
	}
	if (Q.inflight < before)
		pthread_cond_broadcast(&Q.room);
	pthread_mutex_unlock(&Q.lock);
}

/* ms until the oldest question times out (-1: none in flight), and the
 * connection to watch; fails the questions whose time is up. */
static int watch(int *fd, struct done_list *done)
{
	pthread_mutex_lock(&Q.lock);
	int ms = -1;
	if (Q.inflight) {
		uint64_t first = UINT64_MAX;
		for (unsigned i = 0; i < PEND_MAX; i++)
			if (Q.pend[i].d && Q.pend[i].deadline < first)
				first = Q.pend[i].deadline;
		uint64_t now = catcher_now_ns();
		if (first <= now)
			fail_inflight(R_TIMEOUT, "no answer within LIBCATCHER_TIMEOUT_MS", done);
		else
			ms = (int)((first - now + 999999) / 1000000);
	}
	*fd = Q.conn.fd;
	pthread_mutex_unlock(&Q.lock);
	return ms;
}

static void finish(struct deferred *d)
{
	bool elide = catcher_plan_all_acked(&d->plan);
	catcher_count_plan(&d->plan, true, elide, 0);
	if (elide) {
		close_dup(d);
		d->res = (int32_t)d->plan.len;
		post(d);
	} else {
		write_through(d);
	}
}

static void finish_all(struct done_list *done)
{
	struct deferred *d = done->head;
	while (d) {
		struct deferred *next = d->next;
		finish(d);
		d = next;
	}
	done->head = NULL;
	done->tail = &done->head;
}

/* Writes finished by a submitter (refused before any verdict), handed
 * over through D's queue. */
static void take_queue(struct done_list *done)
{
	pthread_mutex_lock(&D.lock);
	struct deferred *d = D.head;
	D.head = NULL;
	D.tail = &D.head;
	pthread_mutex_unlock(&D.lock);
	if (!d)
		return;
	*done->tail = d;
	while (d->next)
		d = d->next;
	done->tail = &d->next;
}

static void reap(struct io_uring_cqe *cqe)
{
	uint64_t data = io_uring_cqe_get_data64(cqe);
	struct deferred *d = (struct deferred *)(uintptr_t)(data & ~(uint64_t)TAG_MASK);
	if ((data & TAG_MASK) == TAG_WRITE) {
		close_dup(d);
		if (cqe->res < 0)
			catcher_count_error(d->plan.f.cls);
		d->res = cqe->res;
		post(d);
		return;
	}
	if (cqe->res == -EOVERFLOW || cqe->res == -EAGAIN || cqe->res == -EINTR) {
		post(d); /* the application's completion queue is full: again */
		return;
	}
	if (cqe->res < 0)
		catcher_log("cannot complete a write in the application's io_uring (fd %d): %s; the application "
			    "will wait for that write forever. Set LIBCATCHER_URING_DEFER=0 to complete writes "
			    "in the application's own ring", d->ring_fd, strerror(-cqe->res));
	else
		catcher_count_deferred(catcher_now_ns() - d->start_ns);
	free(d);
}

__attribute__((noreturn)) static void *defer_main(void *arg)
{
	(void)arg;
	catcher_busy++; /* our own calls go straight to the system */
	struct done_list done = {NULL, &done.head};
	/* A short slice (EEVDF, Linux 6.12+) for this thread only: woken by
	 * a verdict on a busy core, it runs before the threads around it
	 * finish their slices (measured: oltp_read_write, 8 threads, 223
	 * against 195 TPS without). Where the kernel refuses, the default
	 * stays. The host's own threads are never touched. */
	struct { /* the kernel's struct sched_attr (glibc 2.36 has no wrapper) */
		uint32_t size, policy;
		uint64_t flags;
		int32_t nice;
		uint32_t priority;
		uint64_t runtime, deadline, period;
	} attr = {.size = sizeof attr, .policy = 0 /* SCHED_OTHER */, .runtime = 100000};
	if (syscall(SYS_sched_setattr, 0, &attr, 0) != 0)
		catcher_log("libcatcher's io_uring thread keeps the default scheduler slice (%s)", strerror(errno));
	for (;;) {
		eventfd_t v;
		eventfd_read(D.efd, &v); /* cleared before the queue is taken: no wake-up is lost */
		take_queue(&done);
		finish_all(&done);
		io_uring_submit(&D.ring);
		struct io_uring_cqe *cqe;
		unsigned head, seen = 0;
		io_uring_for_each_cqe(&D.ring, head, cqe) {
			reap(cqe);
			seen++;
		}
		io_uring_cq_advance(&D.ring, seen);
		if (seen) {
			io_uring_submit(&D.ring); /* what reaping queued */
			continue;
		}
		/* Waits in poll(2), not in io_uring_enter: handed-over writes
		 * and new connections (the eventfd), verdicts (the connection)
		 * and completions of our ring (its fd) wake it alike. */
		int cfd;
		int ms = watch(&cfd, &done);
		if (done.head)
			continue;
		struct pollfd pfd[3] = {{.fd = D.efd, .events = POLLIN},
					{.fd = D.ring.ring_fd, .events = POLLIN},
					{.fd = cfd, .events = POLLIN}};
		int pr = poll(pfd, cfd >= 0 ? 3 : 2, ms);
		if (pr < 0 && errno != EINTR) {
			/* (ENOMEM: the writes in hand still need completing) */
			catcher_log("libcatcher's io_uring thread: poll failed (%s); retrying in 1 ms", strerror(errno));
			usleep(1000);
			continue;
		}
		if (cfd >= 0 && pr > 0 && pfd[2].revents)
			read_verdicts(&done);
	}
}

static void init_room(void)
{
	pthread_condattr_t a;
	pthread_condattr_init(&a);
	pthread_condattr_setclock(&a, CLOCK_MONOTONIC); /* deadlines are catcher_now_ns() */
	pthread_cond_init(&Q.room, &a);
	pthread_condattr_destroy(&a);
}

/* Starts the thread; under D.lock. */
static int start(void)
{
	const char *pre = getenv("LD_PRELOAD");
	if (pre && strstr(pre, "/vgpreload_")) {
		/* valgrind runs one thread at a time and holds the others while
		 * one waits in io_uring_enter: the application's wait for a
		 * completion would keep our thread from ever posting it */
		catcher_log("running under valgrind: page writes are asked about inside io_uring_submit "
			    "(libcatcher's own thread would be held while the application waits in io_uring_enter)");
		return -1;
	}
	struct io_uring_probe *probe = io_uring_get_probe();
	bool have = probe && io_uring_opcode_supported(probe, IORING_OP_MSG_RING) &&
		    io_uring_opcode_supported(probe, IORING_OP_WRITEV);
	if (probe)
		io_uring_free_probe(probe);
	if (!have) {
		catcher_log("this kernel lacks io_uring's MSG_RING: page writes are asked about inside "
			    "io_uring_submit (the submitting thread waits for each answer)");
		return -1;
	}
	D.efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	int e = D.efd < 0 ? -errno : io_uring_queue_init(OWN_ENTRIES, &D.ring, 0);
	if (e < 0) {
		catcher_log("cannot set up libcatcher's own io_uring (%s): page writes are asked about inside "
			    "io_uring_submit", strerror(-e));
		if (D.efd >= 0)
			catcher_sys_close(D.efd);
		D.efd = -1;
		return -1;
	}
	D.tail = &D.head;
	Q.conn.backoff_ms = catcher_cfg.backoff_ms;
	init_room();
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old); /* the host's signals are not for this thread */
	e = pthread_create(&D.thread, NULL, defer_main, NULL);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (e != 0) {
		catcher_log("cannot start libcatcher's io_uring thread (%s): page writes are asked about inside "
			    "io_uring_submit", strerror(e));
		io_uring_queue_exit(&D.ring);
		catcher_sys_close(D.efd);
		D.efd = -1;
		return -1;
	}
	pthread_detach(D.thread);
	return 1;
}

/* ---- the submitting side ---- */

bool defer_ring_ok(struct io_uring *ring)
{
	if (!catcher_cfg.uring_defer || catcher_cfg.mode != CATCHER_ELIDE)
		return false;
	if ((ring->flags & ~known_setup) || !(ring->features & IORING_FEAT_CQE_SKIP) || ring->ring_fd < 0)
		return false;
	int s = __atomic_load_n(&D.state, __ATOMIC_ACQUIRE);
	if (s == 0) {
		pthread_mutex_lock(&D.lock);
		if (D.state == 0)
			__atomic_store_n(&D.state, start(), __ATOMIC_RELEASE);
		s = D.state;
		pthread_mutex_unlock(&D.lock);
	}
	return s > 0;
}

bool defer_take(struct defer_list *l, struct io_uring *ring, struct io_uring_sqe *sqe, unsigned index,
		const struct catcher_plan *p, const struct iovec *iov, int cnt)
{
	struct deferred *d = aligned_alloc(16, (sizeof *d + p->npages * sizeof(struct catcher_query) + 15) & ~(size_t)15);
	if (!d)
		return false;
	d->fd = fcntl(sqe->fd, F_DUPFD_CLOEXEC, 0);
	if (d->fd < 0) {
		free(d);
		return false;
	}
	d->orig = *sqe;
	d->index = index;
	d->ring_fd = ring->ring_fd;
	d->plan = *p;
	d->plan.q = d->q;
	memcpy(d->q, p->q, p->npages * sizeof(struct catcher_query));
	d->unanswered = p->npages;
	if (sqe->opcode == IORING_OP_WRITEV) {
		d->iov = iov; /* the application's array: it lives until the completion */
		d->cnt = cnt;
	} else {
		d->one = *iov;
		d->iov = &d->one;
		d->cnt = 1;
	}
	d->start_ns = catcher_now_ns();
	uint64_t user_data = sqe->user_data;
	io_uring_prep_nop(sqe);
	sqe->flags = IOSQE_CQE_SKIP_SUCCESS;
	sqe->user_data = user_data;
	d->next = l->head;
	l->head = d;
	return true;
}

void defer_commit(struct defer_list *l, struct io_uring *ring)
{
	if (!l->head)
		return;
	unsigned khead = io_uring_smp_load_acquire(ring->sq.khead);
	unsigned mask = ring->sq.ring_mask ? ring->sq.ring_mask : *ring->sq.kring_mask;
	struct deferred *d = l->head, *taken = NULL, **tail = &taken;
	while (d) {
		struct deferred *next = d->next;
		if ((int)(khead - d->index) > 0) {
			*tail = d; /* consumed: ours to complete (D1) */
			tail = &d->next;
		} else {
			ring->sq.sqes[d->index & mask] = d->orig; /* D2 */
			catcher_plan_refuse(&d->plan, R_UNSUPPORTED_OP);
			catcher_count_plan(&d->plan, true, false, 0);
			close_dup(d);
			free(d);
		}
		d = next;
	}
	*tail = NULL;
	l->head = NULL;
	/* the questions go out now, from this thread; a write refused before
	 * any verdict (no connection, no room in time) goes to the thread */
	struct done_list done = {NULL, &done.head};
	for (d = taken; d;) {
		struct deferred *next = d->next;
		ask(d, &done);
		d = next;
	}
	if (!done.head)
		return;
	pthread_mutex_lock(&D.lock);
	*D.tail = done.head;
	D.tail = done.tail;
	pthread_mutex_unlock(&D.lock);
	eventfd_write(D.efd, 1);
}

void defer_after_fork(void)
{
	/* The child has no thread and none of the parent's writes: its own
	 * writes start a thread of its own on first use. */
	pthread_mutex_init(&D.lock, NULL);
	if (D.state > 0) {
		io_uring_queue_exit(&D.ring);
		catcher_sys_close(D.efd);
		D.efd = -1;
	}
	D.head = NULL;
	D.tail = &D.head;
	D.state = 0;
	if (Q.conn.fd >= 0)
		catcher_sys_close(Q.conn.fd);
	pthread_mutex_init(&Q.lock, NULL);
	memset(&Q.room, 0, sizeof Q.room); /* never destroyed: a parent's waiter would hold it */
	init_room();
	memset(Q.pend, 0, sizeof Q.pend);
	Q.conn = (struct catcher_conn){.fd = -1, .backoff_ms = catcher_cfg.backoff_ms};
	Q.inflight = 0;
	Q.inlen = 0;
}
