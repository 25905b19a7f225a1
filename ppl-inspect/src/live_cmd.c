/* ppl-inspect live: ask a running export (FSAL_PPL's socket POOL_PATH.ctl,
 * ppl_control.c) for its figures or one page's pending records. The reply
 * is JSON; printed pretty by default, as received with --json. "metrics"
 * is the exception: OpenMetrics text, printed as received. */
#include <errno.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <json-c/json.h>

#include "inspect.h"

#define TIMEOUT_MS 5000

static char *ask(const char *path, const char *request)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	if (strlen(path) >= sizeof(a.sun_path)) {
		fprintf(stderr, "ppl-inspect: socket path %s is too long\n", path);
		return NULL;
	}
	strcpy(a.sun_path, path);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof(a)) != 0) {
		fprintf(stderr, "ppl-inspect: cannot reach the export at %s: %s (is ganesha.nfsd running with "
			"this Pool_Path, as a user you may reach?)\n", path, strerror(errno));
		if (fd >= 0)
			close(fd);
		return NULL;
	}
	size_t len = strlen(request);
	if (send(fd, request, len, MSG_NOSIGNAL) != (ssize_t)len || send(fd, "\n", 1, MSG_NOSIGNAL) != 1) {
		fprintf(stderr, "ppl-inspect: sending to %s: %s\n", path, strerror(errno));
		close(fd);
		return NULL;
	}
	size_t cap = 1 << 16, got = 0;
	char *buf = malloc(cap);
	struct pollfd p = { .fd = fd, .events = POLLIN };
	for (;;) {
		if (buf == NULL)
			break;
		if (poll(&p, 1, TIMEOUT_MS) != 1) {
			fprintf(stderr, "ppl-inspect: %s did not answer within %d ms\n", path, TIMEOUT_MS);
			free(buf);
			buf = NULL;
			break;
		}
		if (got + 1 == cap) {
			char *b = realloc(buf, cap *= 2);
			if (b == NULL) {
				free(buf);
				buf = NULL;
				break;
			}
			buf = b;
		}
		ssize_t r = read(fd, buf + got, cap - 1 - got);
		if (r <= 0)
			break;
		got += (size_t)r;
	}
	close(fd);
	if (buf)
		buf[got] = '\0';
	return buf;
}

/* A base copy: started (dest), or its state; with wait, a progress line
 * each second on stderr until it ends. 0 done (or started / running
 * without wait), 1 failed, 2 the node cannot be asked or refused. */
static int backup_cmd(const char *path, const char *dest, bool wait, bool json)
{
	char request[4200];
	snprintf(request, sizeof request, dest ? "backup %s" : "backup", dest);
	for (;;) {
		char *reply = ask(path, request);
		if (reply == NULL)
			return 2;
		json_object *o = json_tokener_parse(reply), *err, *b, *st;
		if (o == NULL) {
			fprintf(stderr, "ppl-inspect: %s answered something that is not JSON\n", path);
			free(reply);
			return 2;
		}
		if (json_object_object_get_ex(o, "error", &err)) {
			fprintf(stderr, "ppl-inspect: %s\n", json_object_get_string(err));
			json_object_put(o);
			free(reply);
			return 2;
		}
		const char *state = json_object_object_get_ex(o, "backup", &b) &&
					    json_object_object_get_ex(b, "state", &st) ? json_object_get_string(st) : "?";
		bool end = strcmp(state, "running") != 0;
		if (!wait || end) {
			if (json)
				printf("%s\n", reply);
			else
				printf("%s\n", json_object_to_json_string_ext(o, JSON_C_TO_STRING_PRETTY |
										 JSON_C_TO_STRING_SPACED));
		} else {
			json_object *bytes, *files;
			json_object_object_get_ex(b, "bytes", &bytes);
			json_object_object_get_ex(b, "files", &files);
			fprintf(stderr, "base copy: %.1f MB, %lld file(s) so far\n",
				(double)json_object_get_int64(bytes) / 1e6, (long long)json_object_get_int64(files));
		}
		json_object_put(o);
		free(reply);
		if (!wait || end)
			return strcmp(state, "failed") == 0 ? 1 : 0;
		snprintf(request, sizeof request, "backup");
		sleep(1);
	}
}

/* ppl-inspect backup POOL DEST [--no-wait] [--json]: the live backup
 * request under the name an operator looks for, waiting by default (a
 * backup command ends when the copy does); DEST relative to the caller's
 * directory, as the storage node's own is not. */
int backup_main(int argc, char **argv, void (*usage)(FILE *))
{
	const char *pool = NULL, *dest = NULL;
	bool wait = true, json = false;
	for (int i = 0; i < argc; i++) {
		if (strcmp(argv[i], "--no-wait") == 0)
			wait = false;
		else if (strcmp(argv[i], "--json") == 0)
			json = true;
		else if (pool == NULL)
			pool = argv[i];
		else if (dest == NULL)
			dest = argv[i];
		else {
			usage(stderr);
			return 2;
		}
	}
	if (pool == NULL || dest == NULL) {
		usage(stderr);
		return 2;
	}
	char path[4096], abs_dest[4096], cwd[4096];
	if (dest[0] != '/') {
		if (getcwd(cwd, sizeof cwd) == NULL ||
		    (size_t)snprintf(abs_dest, sizeof abs_dest, "%s/%s", cwd, dest) >= sizeof abs_dest) {
			fprintf(stderr, "ppl-inspect: cannot make %s an absolute path: give one\n", dest);
			return 2;
		}
		dest = abs_dest;
	}
	snprintf(path, sizeof(path), "%s.ctl", pool);
	return backup_cmd(path, dest, wait, json);
}

int live_main(int argc, char **argv, void (*usage)(FILE *))
{
	const char *pool = NULL, *what = NULL, *page = NULL;
	int json = 0, wait = 0;
	for (int i = 0; i < argc; i++) {
		if (strcmp(argv[i], "--json") == 0)
			json = 1;
		else if (strcmp(argv[i], "--wait") == 0)
			wait = 1;
		else if (pool == NULL)
			pool = argv[i];
		else if (what == NULL)
			what = argv[i];
		else if (page == NULL)
			page = argv[i];
		else {
			usage(stderr);
			return 2;
		}
	}
	if (pool && what && strcmp(what, "backup") == 0) {
		char path[4096];
		snprintf(path, sizeof(path), "%s.ctl", pool);
		return backup_cmd(path, page, wait, json);
	}
	if (wait) {
		usage(stderr);
		return 2;
	}
	bool takes_arg = what && (strcmp(what, "page") == 0 || strcmp(what, "forget-space") == 0 ||
				  strcmp(what, "crash-at") == 0);
	bool metrics = what && strcmp(what, "metrics") == 0;
	/* fault takes a spec, or nothing (what is armed, and its hits) */
	bool fault = what && strcmp(what, "fault") == 0;
	if (pool == NULL || what == NULL ||
	    (strcmp(what, "stats") != 0 && strcmp(what, "page") != 0 && strcmp(what, "forget-space") != 0 &&
	     strcmp(what, "crash-at") != 0 && !fault &&
	     !metrics) ||
	    (!fault && takes_arg != (page != NULL)) || (metrics && json)) {
		usage(stderr);
		return 2;
	}
	char path[4096], request[128];
	snprintf(path, sizeof(path), "%s.ctl", pool);
	if (page)
		snprintf(request, sizeof(request), "%s %s", what, page);
	else
		snprintf(request, sizeof(request), "%s", what);
	char *reply = ask(path, request);
	if (reply == NULL)
		return 2;
	if (metrics) {
		/* OpenMetrics text, printed as it came: a textfile collector
		 * reads it from a file this output is redirected to. An older
		 * node answers with a JSON error instead. */
		size_t n = strlen(reply);
		int whole = n >= 6 && strcmp(reply + n - 6, "# EOF\n") == 0;
		if (whole)
			fputs(reply, stdout);
		else
			fprintf(stderr, "ppl-inspect: %s did not answer with metrics: %s\n", path, reply);
		free(reply);
		return whole ? 0 : 2;
	}
	json_object *o = json_tokener_parse(reply);
	if (o == NULL) {
		fprintf(stderr, "ppl-inspect: %s answered something that is not JSON\n", path);
		free(reply);
		return 2;
	}
	json_object *err;
	int rc = json_object_object_get_ex(o, "error", &err) ? 2 : 0;
	if (json)
		printf("%s\n", reply);
	else
		printf("%s\n", json_object_to_json_string_ext(o, JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_SPACED));
	if (rc)
		fprintf(stderr, "ppl-inspect: %s\n", json_object_get_string(err));
	json_object_put(o);
	free(reply);
	return rc;
}
