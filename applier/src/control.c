/* The live inspection socket. See ppl_control.h. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "ppl/control.h"

struct ppl_control {
	int fd;
	int stop[2];                   /* a byte written here ends the thread */
	pthread_t thread;
	ppl_control_fn fn;
	void *arg;
	char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
};

/* A slow or silent client must not hold the thread for long. */
#define CLIENT_TIMEOUT_MS 2000

static void serve(struct ppl_control *c, int cfd)
{
	char req[4200]; /* a verb and a path */
	size_t got = 0;
	struct pollfd p = { .fd = cfd, .events = POLLIN };
	while (got < sizeof(req) - 1 && poll(&p, 1, CLIENT_TIMEOUT_MS) == 1) {
		ssize_t r = read(cfd, req + got, sizeof(req) - 1 - got);
		if (r <= 0)
			break;
		got += (size_t)r;
		if (memchr(req, '\n', got))
			break;
	}
	req[got] = '\0';
	char *nl = strchr(req, '\n');
	if (nl == NULL)
		return; /* no complete request line */
	*nl = '\0';
	char *reply = c->fn(c->arg, req);
	if (reply == NULL)
		return;
	size_t len = strlen(reply), off = 0;
	struct pollfd w = { .fd = cfd, .events = POLLOUT };
	while (off < len && poll(&w, 1, CLIENT_TIMEOUT_MS) == 1) {
		ssize_t r = send(cfd, reply + off, len - off, MSG_NOSIGNAL);
		if (r <= 0)
			break;
		off += (size_t)r;
	}
	free(reply);
}

static void *control_main(void *arg)
{
	struct ppl_control *c = arg;
	struct pollfd p[2] = { { .fd = c->fd, .events = POLLIN }, { .fd = c->stop[0], .events = POLLIN } };
	for (;;) {
		if (poll(p, 2, -1) < 0 && errno != EINTR)
			break;
		if (p[1].revents)
			break;
		if (!(p[0].revents & POLLIN))
			continue;
		int cfd = accept4(c->fd, NULL, NULL, SOCK_CLOEXEC);
		if (cfd < 0)
			continue;
		serve(c, cfd);
		close(cfd);
	}
	return NULL;
}

struct ppl_control *ppl_control_start(const char *path, ppl_control_fn fn, void *arg, char *err, size_t errlen)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	if (strlen(path) >= sizeof(a.sun_path)) {
		snprintf(err, errlen, "socket path %s is longer than %zu bytes", path, sizeof(a.sun_path) - 1);
		return NULL;
	}
	struct stat st;
	if (lstat(path, &st) == 0) {
		if (!S_ISSOCK(st.st_mode)) {
			snprintf(err, errlen, "%s exists and is not a socket; move it away", path);
			return NULL;
		}
		unlink(path); /* left by a server that crashed */
	}
	struct ppl_control *c = calloc(1, sizeof(*c));
	if (c == NULL) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	c->fn = fn;
	c->arg = arg;
	c->stop[0] = c->stop[1] = -1;
	snprintf(c->path, sizeof(c->path), "%s", path);
	strcpy(a.sun_path, path);
	c->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	/* Owner only, set before listen() (nobody can connect before it):
	 * umask() would change the mode of files other threads create. */
	int rc = c->fd < 0 ? -1 : bind(c->fd, (struct sockaddr *)&a, sizeof(a));
	if (rc == 0)
		rc = chmod(path, 0600);
	if (rc != 0 || listen(c->fd, 8) != 0 || pipe2(c->stop, O_CLOEXEC) != 0 ||
	    (rc = pthread_create(&c->thread, NULL, control_main, c)) != 0) {
		snprintf(err, errlen, "cannot listen on %s: %s", path, strerror(rc > 0 ? rc : errno));
		if (c->fd >= 0)
			close(c->fd);
		if (c->stop[0] >= 0) {
			close(c->stop[0]);
			close(c->stop[1]);
		}
		unlink(path);
		free(c);
		return NULL;
	}
	return c;
}

void ppl_control_stop(struct ppl_control *c)
{
	if (c == NULL)
		return;
	char b = 1;
	if (write(c->stop[1], &b, 1) != 1)
		pthread_cancel(c->thread);
	pthread_join(c->thread, NULL);
	close(c->fd);
	close(c->stop[0]);
	close(c->stop[1]);
	unlink(c->path);
	free(c);
}
