/* The OpenMetrics text writer. See ppl/openmetrics.h. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "ppl/openmetrics.h"

int ppl_om_open(struct ppl_om *m)
{
	m->buf = NULL;
	m->len = 0;
	m->f = open_memstream(&m->buf, &m->len);
	return m->f ? 0 : -1;
}

char *ppl_om_close(struct ppl_om *m)
{
	if (m->f == NULL)
		return NULL;
	fputs("# EOF\n", m->f);
	/* a write that failed for want of memory shows in the stream's error
	 * flag; a truncated text would parse as a scrape with figures missing */
	int bad = ferror(m->f);
	if (fclose(m->f) != 0)
		bad = 1;
	m->f = NULL;
	if (bad) {
		free(m->buf);
		m->buf = NULL;
	}
	return m->buf;
}

/* HELP text escapes backslash and newline; a label value also the quote. */
static void put_escaped(FILE *f, const char *s, int quote)
{
	for (; *s; s++) {
		if (*s == '\\')
			fputs("\\\\", f);
		else if (*s == '\n')
			fputs("\\n", f);
		else if (quote && *s == '"')
			fputs("\\\"", f);
		else
			fputc(*s, f);
	}
}

void ppl_om_family(struct ppl_om *m, const char *name, const char *type, const char *unit, const char *help)
{
	fprintf(m->f, "# TYPE %s %s\n", name, type);
	if (unit && *unit)
		fprintf(m->f, "# UNIT %s %s\n", name, unit);
	fprintf(m->f, "# HELP %s ", name);
	put_escaped(m->f, help, 0);
	fputc('\n', m->f);
}

static void put_labels(struct ppl_om *m, const char *name, const char *const *labels)
{
	fputs(name, m->f);
	if (labels == NULL || labels[0] == NULL)
		return;
	for (size_t i = 0; labels[i] && labels[i + 1]; i += 2) {
		fprintf(m->f, "%s%s=\"", i ? "," : "{", labels[i]);
		put_escaped(m->f, labels[i + 1], 1);
		fputc('"', m->f);
	}
	fputc('}', m->f);
}

static void put_name(struct ppl_om *m, const char *name, const char *label, const char *value)
{
	const char *const labels[] = { label, value, NULL };
	put_labels(m, name, label ? labels : NULL);
}

void ppl_om_sample_labels(struct ppl_om *m, const char *name, const char *const *labels, uint64_t v)
{
	put_labels(m, name, labels);
	fprintf(m->f, " %" PRIu64 "\n", v);
}

void ppl_om_sample(struct ppl_om *m, const char *name, const char *label, const char *value, uint64_t v)
{
	put_name(m, name, label, value);
	fprintf(m->f, " %" PRIu64 "\n", v);
}

void ppl_om_sample_seconds(struct ppl_om *m, const char *name, const char *label, const char *value, uint64_t ns)
{
	put_name(m, name, label, value);
	fprintf(m->f, " %" PRIu64 ".%09" PRIu64 "\n", ns / 1000000000u, ns % 1000000000u);
}

void ppl_om_counter(struct ppl_om *m, const char *name, const char *unit, const char *help, uint64_t v)
{
	char sample[256];
	ppl_om_family(m, name, "counter", unit, help);
	snprintf(sample, sizeof(sample), "%s_total", name);
	ppl_om_sample(m, sample, NULL, NULL, v);
}

void ppl_om_counter_seconds(struct ppl_om *m, const char *name, const char *help, uint64_t ns)
{
	char sample[256];
	ppl_om_family(m, name, "counter", "seconds", help);
	snprintf(sample, sizeof(sample), "%s_total", name);
	ppl_om_sample_seconds(m, sample, NULL, NULL, ns);
}

void ppl_om_gauge(struct ppl_om *m, const char *name, const char *unit, const char *help, uint64_t v)
{
	ppl_om_family(m, name, "gauge", unit, help);
	ppl_om_sample(m, name, NULL, NULL, v);
}

void ppl_om_histogram_ns(struct ppl_om *m, const char *name, const char *help, const uint64_t *bounds_ns,
			 const uint64_t *counts, size_t n, uint64_t sum_ns)
{
	char sample[256], le[32];
	uint64_t cum = 0;
	ppl_om_family(m, name, "histogram", "seconds", help);
	snprintf(sample, sizeof(sample), "%s_bucket", name);
	for (size_t i = 0; i < n; i++) {
		cum += counts[i];
		snprintf(le, sizeof(le), "%.9g", (double)bounds_ns[i] / 1e9);
		ppl_om_sample(m, sample, "le", le, cum);
	}
	cum += counts[n];
	ppl_om_sample(m, sample, "le", "+Inf", cum);
	snprintf(sample, sizeof(sample), "%s_count", name);
	ppl_om_sample(m, sample, NULL, NULL, cum);
	snprintf(sample, sizeof(sample), "%s_sum", name);
	ppl_om_sample_seconds(m, sample, NULL, NULL, sum_ns);
}
