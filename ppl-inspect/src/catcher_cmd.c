/* ppl-inspect catcher-metrics FILE: libcatcher's stats file (the JSON it
 * writes at LIBCATCHER_STATS_FILE on its signal and at exit; fields in
 * libcatcher/README.md, "Statistics") as OpenMetrics text, so that the
 * compute node's side reaches Prometheus the way the storage node's does
 * (node_exporter's textfile collector reads what this prints). Names
 * begin with ppl_catcher_; a figure kept per file class has the label
 * class, a refusal also reason, a request style. The stats file's "total"
 * is left out: it is the sum over the classes. */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "inspect.h"
#include "ppl/openmetrics.h"

static uint64_t u64_of(json_object *o, const char *key)
{
	json_object *v;
	return json_object_object_get_ex(o, key, &v) ? (uint64_t)json_object_get_uint64(v) : 0;
}

/* One figure of each file class: a family whose samples are labelled by class. */
static void per_class(struct ppl_om *m, json_object *classes, const char *key, const char *name, const char *unit,
		      const char *help)
{
	char sample[128];
	ppl_om_family(m, name, "counter", unit, help);
	snprintf(sample, sizeof(sample), "%s_total", name);
	json_object_object_foreach(classes, cls, c)
		ppl_om_sample(m, sample, "class", cls, u64_of(c, key));
}

int catcher_metrics_main(int argc, char **argv, void (*usage)(FILE *))
{
	if (argc != 1) {
		usage(stderr);
		return 2;
	}
	const char *path = argv[0];
	errno = 0;
	json_object *o = json_object_from_file(path);
	if (o == NULL) {
		char why[256];
		snprintf(why, sizeof(why), "%s", errno ? strerror(errno) : json_util_get_last_err());
		why[strcspn(why, "\n")] = '\0'; /* json-c's message ends in one */
		fprintf(stderr, "ppl-inspect: %s: cannot read it as JSON (%s); give the file libcatcher writes at "
			"LIBCATCHER_STATS_FILE (kill -USR2 the mariadbd it runs in to have it written)\n", path, why);
		return 2;
	}
	json_object *classes, *styles, *elision, *mode;
	if (!json_object_object_get_ex(o, "classes", &classes) || !json_object_is_type(classes, json_type_object)) {
		fprintf(stderr, "ppl-inspect: %s is not a libcatcher stats file: it has no \"classes\" object\n", path);
		json_object_put(o);
		return 2;
	}
	struct ppl_om m;
	if (ppl_om_open(&m) != 0) {
		fprintf(stderr, "ppl-inspect: out of memory\n");
		json_object_put(o);
		return 2;
	}
	ppl_om_family(&m, "ppl_catcher", "info", NULL, "libcatcher in the compute node: its mode (LIBCATCHER_MODE)");
	ppl_om_sample(&m, "ppl_catcher_info", "mode",
		      json_object_object_get_ex(o, "mode", &mode) ? json_object_get_string(mode) : "unknown", 1);

	per_class(&m, classes, "writes", "ppl_catcher_writes", NULL,
		  "Write requests to the datadir's files (one per call, SQE or iocb), by file class");
	per_class(&m, classes, "bytes", "ppl_catcher_written_bytes", "bytes", "Bytes those writes carried");
	per_class(&m, classes, "pages", "ppl_catcher_pages", NULL, "Whole pages among those writes");
	per_class(&m, classes, "elided", "ppl_catcher_pages_elided", NULL,
		  "Pages dropped after the storage node said it can rebuild them");
	per_class(&m, classes, "bytes_not_sent", "ppl_catcher_not_sent_bytes", "bytes",
		  "Bytes of the pages dropped (not sent to the storage node)");
	per_class(&m, classes, "errors", "ppl_catcher_write_errors", NULL, "Real writes that failed");

	ppl_om_family(&m, "ppl_catcher_pages_refused", "counter", NULL,
		      "Pages written in full instead of dropped, by file class and reason (nack_*: the storage "
		      "node's answer; the others: libcatcher's own checks)");
	json_object_object_foreach(classes, cls, c) {
		json_object *refused;
		if (!json_object_object_get_ex(c, "refused", &refused) || !json_object_is_type(refused, json_type_object))
			continue;
		json_object_object_foreach(refused, reason, n) {
			const char *const labels[] = { "class", cls, "reason", reason, NULL };
			ppl_om_sample_labels(&m, "ppl_catcher_pages_refused_total", labels, (uint64_t)json_object_get_uint64(n));
		}
	}

	if (json_object_object_get_ex(o, "styles", &styles) && json_object_is_type(styles, json_type_object)) {
		ppl_om_family(&m, "ppl_catcher_requests", "counter", NULL,
			      "Write requests to tracked files by I/O interface (pwrite, pwritev, io_uring, libaio)");
		json_object_object_foreach(styles, style, n)
			ppl_om_sample(&m, "ppl_catcher_requests_total", "style", style, (uint64_t)json_object_get_uint64(n));
	}
	if (json_object_object_get_ex(o, "elision", &elision)) {
		ppl_om_counter(&m, "ppl_catcher_elision_questions", NULL, "Elision questions sent to the storage node",
			       u64_of(elision, "questions"));
		ppl_om_counter(&m, "ppl_catcher_elision_sent_bytes", "bytes",
			       "Bytes sent on the elision connections (hellos included)", u64_of(elision, "bytes_sent"));
		ppl_om_counter(&m, "ppl_catcher_elision_received_bytes", "bytes",
			       "Bytes received on the elision connections", u64_of(elision, "bytes_received"));
	}
	json_object_put(o);
	char *text = ppl_om_close(&m);
	if (text == NULL) {
		fprintf(stderr, "ppl-inspect: out of memory\n");
		return 2;
	}
	fputs(text, stdout);
	free(text);
	return 0;
}
