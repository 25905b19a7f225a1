/* Writing OpenMetrics 1.0 text (the exposition format Prometheus
 * scrapes, Content-Type PPL_OM_CONTENT_TYPE): families with their TYPE, UNIT
 * and HELP lines, samples, label values escaped, "# EOF" at the end. One
 * writer for every producer of metrics in the project, so that the
 * store's endpoint (store_metrics.c) and `ppl-inspect catcher-metrics`
 * follow the same rules:
 *
 *   - a counter family is named without "_total", its sample with it;
 *   - a family with a unit ends in "_<unit>" (bytes, seconds);
 *   - a family's samples follow its header, and each family once.
 *
 * Nothing here knows what a figure means; the callers name them. */
#ifndef PPL_OPENMETRICS_H
#define PPL_OPENMETRICS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define PPL_OM_CONTENT_TYPE "application/openmetrics-text; version=1.0.0; charset=utf-8"

struct ppl_om {
	FILE *f;                       /* an open_memstream over buf */
	char *buf;
	size_t len;
};

/* 0, or -1 when out of memory. */
int ppl_om_open(struct ppl_om *m);
/* The text with "# EOF\n" appended, malloc'ed (the caller frees it), or
 * NULL when out of memory. m is closed either way. */
char *ppl_om_close(struct ppl_om *m);

/* A family's header. type: "counter", "gauge", "histogram", "info", ...;
 * unit NULL or "" for none (else name must end in "_" unit). */
void ppl_om_family(struct ppl_om *m, const char *name, const char *type, const char *unit, const char *help);
/* One sample: name{label="value"} v, without labels when label is NULL.
 * The label value is escaped as the format wants (\\, \", \n). */
void ppl_om_sample(struct ppl_om *m, const char *name, const char *label, const char *value, uint64_t v);
/* One sample with any number of labels: labels holds name, value, name,
 * value, ..., NULL (NULL itself: none). */
void ppl_om_sample_labels(struct ppl_om *m, const char *name, const char *const *labels, uint64_t v);
/* The same with a value counted in ns, written in seconds (exactly: the
 * figures are integers of ns, and a double would round them). */
void ppl_om_sample_seconds(struct ppl_om *m, const char *name, const char *label, const char *value, uint64_t ns);

/* A family and its one unlabelled sample: name_total for a counter. */
void ppl_om_counter(struct ppl_om *m, const char *name, const char *unit, const char *help, uint64_t v);
/* A counter of seconds, name ending in "_seconds", from a figure in ns. */
void ppl_om_counter_seconds(struct ppl_om *m, const char *name, const char *help, uint64_t ns);
void ppl_om_gauge(struct ppl_om *m, const char *name, const char *unit, const char *help, uint64_t v);

/* A histogram in seconds of values counted in ns: n buckets whose upper
 * bounds (inclusive, ascending) are bounds_ns[0..n-1], counts[0..n-1] the
 * values in each (not cumulative), counts[n] the values above the last,
 * sum_ns their sum. name ends in "_seconds". */
void ppl_om_histogram_ns(struct ppl_om *m, const char *name, const char *help, const uint64_t *bounds_ns,
			 const uint64_t *counts, size_t n, uint64_t sum_ns);

#endif
