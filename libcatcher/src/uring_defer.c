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
 * no completion (IOSQE_CQE_SKIP_SUCCESS) and the write is queued. One
 * thread asks the storage node about every queued page on a connection
 * of its own, pipelined (a page is asked as soon as the server's window
 * has room; verdicts are matched by request id), then completes each
 * write in the application's ring with IORING_OP_MSG_RING, posting the
 * application's user_data and the result the kernel would have posted:
 * the full length for a write whose every page was ACKed, else whatever
 * the real write -- issued by the thread through a ring of its own --
 * returned. The submitter never waits.
 *
 * Off by default (LIBCATCHER_URING_DEFER=1 turns it on). Measured on the
 * two-node emulation with one compute core (BENCHMARKS.md, issue 17), it
 * is slower than asking inside the submit: the cleaner, no longer paced
 * by the round trip, submits its whole batch at once; the storage node
 * answers the burst one page after another and the thread waits for a
 * core, so a write completes 3.8 ms after its submit (p50, 8 threads)
 * instead of 0.22 ms, and hot pages stay latched for their writes that
 * much longer: oltp_read_write 199 against 285 TPS at 8 threads, 299
 * against 343 at 32. It is kept, tested, for compute nodes with cores to
 * spare, where neither the thread nor the cleaner waits for a core.
 *
 * A write's life:
 *
 *   submit ──take──> TAKEN ──kernel consumed the NOP──> QUEUED ──asked──┐
 *                      │                                                │
 *                      └──not consumed: SQE put back, the kernel        │
 *                         writes it as if we had never looked           │
 *        ┌───────── every page ACKed ────────────────────────────────────┤
 *        │                                   otherwise: WRITING ◄────────┘
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
	size_t next_q;            /* its next page to ask about */
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

/* ---- the thread's questions: one connection, pipelined ----
 *
 * Every page of a queued write is asked as soon as the server's window
 * has room, without waiting for earlier answers; each verdict is matched
 * to its page by request id. A write is finished when its last page is
 * answered. A missing answer past LIBCATCHER_TIMEOUT_MS, a lost
 * connection or a verdict we did not ask for fails every question in
 * flight (the pages are written) and drops the connection; while it is
 * down (the backoff of client.c) new pages are refused at once. */

#define PEND_MAX 256

static struct catcher_conn conn = {.fd = -1};
static struct pend {
	struct deferred *d; /* NULL: free */
	uint32_t id, qi;
	uint64_t deadline;
} pend[PEND_MAX];
static unsigned inflight;
static struct deferred *waiting, **waiting_tail = &waiting; /* pages not all sent yet */
static uint8_t inbuf[4096];
static size_t inlen;

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

static void answered(struct deferred *d, size_t n)
{
	d->unanswered -= n;
	if (d->unanswered == 0)
		finish(d);
}

/* Refuses the pages not sent yet. */
static void fail_waiting(unsigned reason)
{
	struct deferred *d = waiting;
	waiting = NULL;
	waiting_tail = &waiting;
	while (d) {
		struct deferred *next = d->next;
		size_t n = d->plan.npages - d->next_q;
		for (size_t i = d->next_q; i < d->plan.npages; i++)
			d->q[i].verdict = (uint8_t)reason;
		d->next_q = d->plan.npages;
		answered(d, n);
		d = next;
	}
}

/* Refuses every question in flight and drops the connection. */
static void fail_inflight(unsigned reason, const char *why)
{
	for (unsigned i = 0; i < PEND_MAX; i++) {
		struct pend *p = &pend[i];
		if (!p->d)
			continue;
		struct deferred *d = p->d;
		d->q[p->qi].verdict = (uint8_t)reason;
		p->d = NULL;
		answered(d, 1);
	}
	inflight = 0;
	inlen = 0;
	catcher_conn_drop(&conn, why);
}

/* Sends what the window allows of the waiting pages. */
static void send_waiting(void)
{
	if (!waiting)
		return;
	uint64_t now = catcher_now_ns(), timeout = (uint64_t)catcher_cfg.timeout_ms * 1000000u;
	if (conn.fd < 0) {
		if (now < conn.retry_at) {
			fail_waiting(R_UNAVAILABLE);
			return;
		}
		const char *err = catcher_conn_open(&conn, now + timeout);
		if (err) {
			catcher_conn_drop(&conn, err);
			fail_waiting(R_UNAVAILABLE);
			return;
		}
		now = catcher_now_ns();
	}
	uint8_t out[PEND_MAX * PPL_ELIDE_REQ_LEN];
	size_t olen = 0;
	unsigned window = conn.window < PEND_MAX ? conn.window : PEND_MAX;
	while (waiting && inflight < window) {
		struct deferred *d = waiting;
		while (d->next_q < d->plan.npages && inflight < window) {
			struct pend *p = &pend[conn.next_id % PEND_MAX];
			if (p->d)
				break; /* an older question still holds that place */
			struct catcher_query *q = &d->q[d->next_q];
			struct ppl_elide_req r = {.id = conn.next_id, .space = q->space, .page_no = q->page_no,
						  .lsn = q->lsn, .checksum = q->checksum, .page_size = q->page_size};
			olen += ppl_elide_put_req(out + olen, &r);
			*p = (struct pend){.d = d, .id = conn.next_id, .qi = (uint32_t)d->next_q, .deadline = now + timeout};
			conn.next_id++;
			d->next_q++;
			inflight++;
		}
		if (d->next_q < d->plan.npages)
			break;
		waiting = d->next;
		if (!waiting)
			waiting_tail = &waiting;
	}
	if (!olen)
		return;
	catcher_count_wire(0, 0, (unsigned)(olen / PPL_ELIDE_REQ_LEN));
	int r = catcher_conn_send(conn.fd, out, olen, now + timeout);
	if (r != 0)
		fail_inflight(r == -2 ? R_TIMEOUT : R_CONN_LOST,
			      r == -2 ? "no answer within LIBCATCHER_TIMEOUT_MS" : "connection lost");
}

/* Reads the verdicts that arrived. */
static void read_verdicts(void)
{
	for (;;) {
		ssize_t r = recv(conn.fd, inbuf + inlen, sizeof inbuf - inlen, MSG_DONTWAIT);
		if (r == 0 || (r < 0 && errno != EAGAIN && errno != EINTR)) {
			fail_inflight(R_CONN_LOST, "connection lost");
			return;
		}
		if (r < 0)
			return;
		catcher_count_wire(0, (size_t)r, 0);
		inlen += (size_t)r;
		size_t off = 0;
		long len;
		struct ppl_elide_hdr h;
		while ((len = ppl_elide_frame(inbuf + off, inlen - off, &h)) > 0) {
			struct ppl_elide_verdict v;
			struct pend *p = &pend[h.id % PEND_MAX];
			if (ppl_elide_get_verdict(inbuf + off, &h, &v) != 0 || !p->d || p->id != h.id) {
				len = -1;
				break;
			}
			struct deferred *d = p->d;
			d->q[p->qi].verdict = v.reason < PPL_ELIDE_REASON_COUNT ? v.reason : PPL_ELIDE_NACK_OTHER;
			p->d = NULL;
			inflight--;
			answered(d, 1);
			off += (size_t)len;
		}
		if (len < 0) {
			fail_inflight(R_PROTOCOL, inflight ? "sent an answer we do not understand"
							   : "sent more answers than questions");
			return;
		}
		memmove(inbuf, inbuf + off, inlen - off);
		inlen -= off;
	}
}

/* ms until the oldest question times out; -1 if none is in flight. */
static int next_deadline_ms(void)
{
	if (!inflight)
		return -1;
	uint64_t first = UINT64_MAX;
	for (unsigned i = 0; i < PEND_MAX; i++)
		if (pend[i].d && pend[i].deadline < first)
			first = pend[i].deadline;
	uint64_t now = catcher_now_ns();
	return first <= now ? 0 : (int)((first - now + 999999) / 1000000);
}

static void take_queue(void)
{
	pthread_mutex_lock(&D.lock);
	struct deferred *d = D.head;
	D.head = NULL;
	D.tail = &D.head;
	pthread_mutex_unlock(&D.lock);
	if (!d)
		return;
	*waiting_tail = d;
	while (d->next)
		d = d->next;
	waiting_tail = &d->next;
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
	for (;;) {
		eventfd_t v;
		eventfd_read(D.efd, &v); /* cleared before the queue is taken: no wake-up is lost */
		take_queue();
		send_waiting();
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
		/* Waits in poll(2), not in io_uring_enter: new writes (the
		 * eventfd), verdicts (the connection) and completions of our
		 * ring (its fd) wake it alike. */
		struct pollfd pfd[3] = {{.fd = D.efd, .events = POLLIN},
					{.fd = D.ring.ring_fd, .events = POLLIN},
					{.fd = conn.fd, .events = POLLIN}};
		int pr = poll(pfd, conn.fd >= 0 ? 3 : 2, next_deadline_ms());
		if (pr < 0 && errno != EINTR) {
			/* (ENOMEM: the writes in hand still need completing) */
			catcher_log("libcatcher's io_uring thread: poll failed (%s); retrying in 1 ms", strerror(errno));
			usleep(1000);
			continue;
		}
		if (conn.fd >= 0 && pr > 0 && pfd[2].revents)
			read_verdicts();
		if (inflight && next_deadline_ms() == 0)
			fail_inflight(R_TIMEOUT, "no answer within LIBCATCHER_TIMEOUT_MS");
	}
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
	conn.backoff_ms = catcher_cfg.backoff_ms;
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
	d->plan.fd = d->fd;
	memcpy(d->q, p->q, p->npages * sizeof(struct catcher_query));
	d->next_q = 0;
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
	if (!taken)
		return;
	pthread_mutex_lock(&D.lock);
	*D.tail = taken;
	D.tail = tail;
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
	if (conn.fd >= 0)
		catcher_sys_close(conn.fd);
	conn = (struct catcher_conn){.fd = -1, .backoff_ms = catcher_cfg.backoff_ms};
	memset(pend, 0, sizeof pend);
	inflight = 0;
	inlen = 0;
	waiting = NULL;
	waiting_tail = &waiting;
}
