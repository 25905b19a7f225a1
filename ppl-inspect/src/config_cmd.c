/* `ppl-inspect config ...`: the storage node's Ganesha configuration read
 * the way FSAL_PPL reads its export blocks, so that a systemd unit can
 * refuse to start ganesha.nfsd before the FSAL would refuse the export.
 * Ganesha itself keeps running without an export its FSAL refused, which
 * would leave a unit "active" that serves nothing.
 *
 * Only what decides whether an export comes up is read: EXPORT's Path and
 * its FSAL block with Name = PPL (nested FSAL blocks are the sub-FSAL's).
 * %include is followed, relative to the including file's directory. */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "inspect.h"
#include "ppl/pool.h"
#include "ppl/pool_marker.h"
#include "ppl/store_config.h"

/* The example's token (ganesha.conf.example, /etc/ppl/ganesha.conf as
 * shipped): a storage node answering anyone who read the example would
 * let them make it drop page writes. */
#define EXAMPLE_TOKEN "change-this-shared-secret"
#define MAX_DEPTH 16
#define MAX_EXPORTS 64
#define MAX_INCLUDE_DEPTH 8
#define MAX_PARAMS 64

struct param {
	char *key, *value;
	char where[320];
};

struct ppl_export_conf {
	char *path;          /* EXPORT's Path */
	bool ppl;            /* its FSAL block says Name = PPL */
	/* the FSAL block's parameters, judged once its Name is known */
	struct param params[MAX_PARAMS];
	int nparams;
	struct ppl_config cfg;
	char where[320];     /* file:line of the EXPORT block */
};

struct reader {
	struct ppl_export_conf exports[MAX_EXPORTS];
	int nexports;
	struct ppl_export_conf *cur;   /* inside an EXPORT block */
	char *blocks[MAX_DEPTH];       /* names of the open blocks */
	int depth;
	char err[768];
};

enum tok { T_EOF, T_WORD, T_STRING, T_LBRACE, T_RBRACE, T_EQ, T_SEMI, T_COMMA, T_BAD };

struct lexer {
	const char *file, *s;
	size_t pos, len;
	int line;
	char *text;   /* the token's text (T_WORD, T_STRING), malloc'ed */
};

static enum tok next(struct lexer *l)
{
	free(l->text);
	l->text = NULL;
	for (;;) {
		while (l->pos < l->len && isspace((unsigned char)l->s[l->pos]))
			if (l->s[l->pos++] == '\n')
				l->line++;
		if (l->pos < l->len && l->s[l->pos] == '#') {
			while (l->pos < l->len && l->s[l->pos] != '\n')
				l->pos++;
			continue;
		}
		break;
	}
	if (l->pos >= l->len)
		return T_EOF;
	char c = l->s[l->pos];
	switch (c) {
	case '{': l->pos++; return T_LBRACE;
	case '}': l->pos++; return T_RBRACE;
	case '=': l->pos++; return T_EQ;
	case ';': l->pos++; return T_SEMI;
	case ',': l->pos++; return T_COMMA;
	}
	size_t start;
	if (c == '"' || c == '\'') {
		start = ++l->pos;
		while (l->pos < l->len && l->s[l->pos] != c)
			if (l->s[l->pos++] == '\n')
				l->line++;
		if (l->pos >= l->len)
			return T_BAD;
		l->text = strndup(l->s + start, l->pos - start);
		l->pos++;
		return l->text ? T_STRING : T_BAD;
	}
	start = l->pos;
	while (l->pos < l->len && !isspace((unsigned char)l->s[l->pos]) && !strchr("{}=;,#\"'", l->s[l->pos]))
		l->pos++;
	l->text = strndup(l->s + start, l->pos - start);
	return l->text ? T_WORD : T_BAD;
}

static int fail_at(struct reader *r, const char *where, const char *what)
{
	snprintf(r->err, sizeof(r->err), "%s: %s", where, what);
	return -1;
}

static const char *here(const struct lexer *l, char *buf, size_t len)
{
	snprintf(buf, len, "%s:%d", l->file, l->line);
	return buf;
}

static bool parse_u64(const char *v, uint64_t max, uint64_t *out)
{
	char *end;
	errno = 0;
	unsigned long long n = strtoull(v, &end, 0);
	if (errno || end == v || *end || v[0] == '-' || n > max)
		return false;
	*out = n;
	return true;
}

static int set_string(char **field, const char *v)
{
	free(*field);
	*field = strdup(v);
	return *field ? 0 : -1;
}

/* One parameter of the PPL FSAL block, with the FSAL's item table's names
 * and ranges (ganesha-fsal-ppl/src/ppl_export.c); ppl_config_check()
 * judges the values afterwards, as in the FSAL. */
static int set_param(struct reader *r, const char *where, struct ppl_config *c, const char *key, const char *v)
{
	static const struct { const char *name; int kind; size_t off; uint64_t max; } items[] = {
#define S(n, f) { n, 's', offsetof(struct ppl_config, f), 0 }
#define U(n, f, m) { n, sizeof(((struct ppl_config *)0)->f), offsetof(struct ppl_config, f), m }
		S("Pool_Path", pool_path), U("Pool_Size", pool_size, UINT64_MAX),
		U("Block_Size", block_size, UINT32_MAX), U("Max_Per_Page", max_per_page, UINT32_MAX),
		U("Apply_Threads", apply_threads, UINT32_MAX), U("Page_Cache_Size", page_cache_size, UINT64_MAX),
		S("Elision_Address", elision_address), U("Elision_Port", elision_port, UINT16_MAX),
		S("Elision_Clients", elision_clients), S("Elision_Token", elision_token),
		{ "Verify", 'b', offsetof(struct ppl_config, verify), 0 },
		{ "Allow_Volatile_Pool", 'b', offsetof(struct ppl_config, allow_volatile_pool), 0 },
		{ "Ingest_Behind", 'b', offsetof(struct ppl_config, ingest_behind), 0 },
		{ "Log_On_Pmem", 'b', offsetof(struct ppl_config, log_on_pmem), 0 },
		U("Stats_Interval", stats_interval, UINT32_MAX), S("Metrics_Address", metrics_address),
		U("Metrics_Port", metrics_port, UINT16_MAX), S("Archive_Path", archive_path),
		U("Archive_Segment_Size", archive_segment_size, UINT64_MAX),
		U("Archive_Retention_Size", archive_retention_size, UINT64_MAX),
		U("Archive_Retention_Age", archive_retention_age, UINT32_MAX), S("Base_Path", base_path),
		U("Base_Interval", base_interval, UINT32_MAX), U("Base_Keep", base_keep, UINT32_MAX),
#undef S
#undef U
	};
	char msg[400];
	if (strcasecmp(key, "Name") == 0)
		return 0;
	for (size_t i = 0; i < sizeof(items) / sizeof(items[0]); i++) {
		if (strcasecmp(key, items[i].name) != 0)
			continue;
		char *field = (char *)c + items[i].off;
		uint64_t n;
		switch (items[i].kind) {
		case 's':
			if (set_string((char **)field, v) != 0)
				return fail_at(r, where, "out of memory");
			return 0;
		case 'b':
			if (strcasecmp(v, "true") == 0 || strcasecmp(v, "yes") == 0 || strcmp(v, "1") == 0)
				*(bool *)field = true;
			else if (strcasecmp(v, "false") == 0 || strcasecmp(v, "no") == 0 || strcmp(v, "0") == 0)
				*(bool *)field = false;
			else
				break;
			return 0;
		default:
			if (!parse_u64(v, items[i].max, &n))
				break;
			if (items[i].kind == 8)
				*(uint64_t *)field = n;
			else if (items[i].kind == 4)
				*(uint32_t *)field = (uint32_t)n;
			else
				*(uint16_t *)field = (uint16_t)n;
			return 0;
		}
		snprintf(msg, sizeof(msg), "%s = %s: not a valid value", items[i].name, v);
		return fail_at(r, where, msg);
	}
	/* The FSAL refuses unknown parameters (a typo would silently leave a
	 * default in force): so does this reader. */
	snprintf(msg, sizeof(msg), "unknown parameter %s in the PPL FSAL block", key);
	return fail_at(r, where, msg);
}

static void config_defaults(struct ppl_config *c)
{
	memset(c, 0, sizeof(*c));
	c->pool_size = PPL_DEFAULT_POOL_SIZE;
	c->block_size = PPL_DEFAULT_BLOCK_SIZE;
	c->max_per_page = PPL_DEFAULT_MAX_PER_PAGE;
	c->apply_threads = PPL_DEFAULT_APPLY_THREADS;
	c->page_cache_size = PPL_DEFAULT_PAGE_CACHE_SIZE;
	c->elision_address = strdup(PPL_DEFAULT_ELISION_ADDRESS);
	c->elision_clients = strdup(PPL_DEFAULT_ELISION_CLIENTS);
	c->stats_interval = PPL_DEFAULT_STATS_INTERVAL;
	c->metrics_address = strdup(PPL_DEFAULT_METRICS_ADDRESS);
	c->archive_segment_size = PPL_DEFAULT_ARCHIVE_SEGMENT_SIZE;
	c->archive_retention_age = PPL_DEFAULT_ARCHIVE_RETENTION_AGE;
	c->base_keep = PPL_DEFAULT_BASE_KEEP;
}

static int read_file(struct reader *r, const char *path, int include_depth);

/* KEY = value[, value...] ; -- values joined with ", " as Ganesha hands a
 * list to a string item. */
static int assignment(struct reader *r, struct lexer *l, const char *key)
{
	char value[4096] = "", where[320];
	enum tok t;
	here(l, where, sizeof(where));
	while ((t = next(l)) == T_WORD || t == T_STRING || t == T_COMMA) {
		if (strlen(value) + (l->text ? strlen(l->text) : 0) + 3 >= sizeof(value))
			return fail_at(r, where, "value too long");
		strcat(value, t == T_COMMA ? ", " : l->text);
	}
	if (t != T_SEMI && t != T_RBRACE)
		return fail_at(r, where, "expected ';' after a value");
	int d = r->depth;
	struct ppl_export_conf *x = r->cur;
	if (d == 1 && x && strcasecmp(key, "Path") == 0) {
		if (set_string(&x->path, value) != 0)
			return fail_at(r, where, "out of memory");
	} else if (d == 2 && x && strcasecmp(r->blocks[1], "FSAL") == 0) {
		/* the export's own FSAL block: PPL's or another FSAL's */
		if (strcasecmp(key, "Name") == 0 && strcasecmp(value, "PPL") == 0)
			x->ppl = true;
		if (x->nparams == MAX_PARAMS)
			return fail_at(r, where, "too many parameters in the FSAL block");
		struct param *p = &x->params[x->nparams++];
		p->key = strdup(key);
		p->value = strdup(value);
		snprintf(p->where, sizeof(p->where), "%s", where);
		if (p->key == NULL || p->value == NULL)
			return fail_at(r, where, "out of memory");
	}
	if (t == T_RBRACE) {
		/* let the caller close the block */
		l->pos--;
	}
	return 0;
}

static void export_free(struct ppl_export_conf *x)
{
	free(x->path);
	for (int i = 0; i < x->nparams; i++) {
		free(x->params[i].key);
		free(x->params[i].value);
	}
	ppl_config_free(&x->cfg);
}

static int close_block(struct reader *r, const struct lexer *l)
{
	char where[320];
	if (r->depth == 0)
		return fail_at(r, here(l, where, sizeof(where)), "'}' without a block");
	r->depth--;
	free(r->blocks[r->depth]);
	r->blocks[r->depth] = NULL;
	struct ppl_export_conf *x = r->cur;
	if (r->depth != 0 || x == NULL)
		return 0;
	r->cur = NULL;
	if (!x->ppl) {
		/* another FSAL's export: not ours to judge */
		export_free(x);
		r->nexports--;
		return 0;
	}
	for (int i = 0; i < x->nparams; i++)
		if (set_param(r, x->params[i].where, &x->cfg, x->params[i].key, x->params[i].value) != 0)
			return -1;
	return 0;
}

static int parse(struct reader *r, struct lexer *l, int include_depth)
{
	enum tok t;
	char where[320];
	while ((t = next(l)) != T_EOF) {
		if (t == T_RBRACE) {
			if (close_block(r, l) != 0)
				return -1;
			continue;
		}
		if (t != T_WORD)
			return fail_at(r, here(l, where, sizeof(where)), "expected a block or parameter name");
		char *word = l->text;
		l->text = NULL;
		if (strcasecmp(word, "%include") == 0) {
			t = next(l);
			free(word);
			if (t != T_WORD && t != T_STRING)
				return fail_at(r, here(l, where, sizeof(where)), "%include needs a file name");
			char inc[4096];
			const char *slash = strrchr(l->file, '/');
			if (l->text[0] == '/' || slash == NULL)
				snprintf(inc, sizeof(inc), "%s", l->text);
			else
				snprintf(inc, sizeof(inc), "%.*s/%s", (int)(slash - l->file), l->file, l->text);
			if (read_file(r, inc, include_depth + 1) != 0)
				return -1;
			continue;
		}
		if (word[0] == '%') {
			free(word);
			return fail_at(r, here(l, where, sizeof(where)), "%dir and %url includes are not followed: list the files with %include");
		}
		t = next(l);
		if (t == T_EQ) {
			int rc = assignment(r, l, word);
			free(word);
			if (rc != 0)
				return -1;
		} else if (t == T_LBRACE) {
			if (r->depth == MAX_DEPTH) {
				free(word);
				return fail_at(r, here(l, where, sizeof(where)), "blocks nested too deep");
			}
			if (r->depth == 0 && strcasecmp(word, "EXPORT") == 0) {
				if (r->nexports == MAX_EXPORTS) {
					free(word);
					return fail_at(r, here(l, where, sizeof(where)), "too many EXPORT blocks");
				}
				r->cur = &r->exports[r->nexports++];
				memset(r->cur, 0, sizeof(*r->cur));
				config_defaults(&r->cur->cfg);
				snprintf(r->cur->where, sizeof(r->cur->where), "%s:%d", l->file, l->line);
			}
			r->blocks[r->depth++] = word;
		} else {
			free(word);
			return fail_at(r, here(l, where, sizeof(where)), "expected '=' or '{' after a name");
		}
	}
	return 0;
}

static int read_file(struct reader *r, const char *path, int include_depth)
{
	if (include_depth > MAX_INCLUDE_DEPTH) {
		snprintf(r->err, sizeof(r->err), "%s: %%include nested more than %d deep", path, MAX_INCLUDE_DEPTH);
		return -1;
	}
	FILE *f = fopen(path, "r");
	if (f == NULL) {
		snprintf(r->err, sizeof(r->err), "cannot read %s: %s", path, strerror(errno));
		return -1;
	}
	char *buf = NULL;
	size_t cap = 0, len = 0, n;
	char chunk[65536];
	while ((n = fread(chunk, 1, sizeof(chunk), f)) > 0) {
		if (len + n > cap) {
			cap = (len + n) * 2;
			char *nb = realloc(buf, cap);
			if (nb == NULL) {
				free(buf);
				fclose(f);
				snprintf(r->err, sizeof(r->err), "out of memory reading %s", path);
				return -1;
			}
			buf = nb;
		}
		memcpy(buf + len, chunk, n);
		len += n;
	}
	fclose(f);
	struct lexer l = { .file = path, .s = buf ? buf : "", .len = len, .line = 1 };
	int rc = parse(r, &l, include_depth);
	free(l.text);
	free(buf);
	return rc;
}

static void reader_free(struct reader *r)
{
	for (int i = 0; i < r->nexports; i++)
		export_free(&r->exports[i]);
	for (int i = 0; i < r->depth; i++)
		free(r->blocks[i]);
}

static int load(struct reader *r, const char *conf)
{
	memset(r, 0, sizeof(*r));
	if (read_file(r, conf, 0) != 0)
		return -1;
	if (r->depth != 0) {
		snprintf(r->err, sizeof(r->err), "%s: a block is not closed ('}' missing)", conf);
		return -1;
	}
	for (int i = 0; i < r->nexports; i++) {
		struct ppl_export_conf *x = &r->exports[i];
		if (x->path == NULL) {
			snprintf(r->err, sizeof(r->err), "%s: an EXPORT with FSAL PPL has no Path", x->where);
			return -1;
		}
		/* Ganesha names the export by its Path without a trailing slash */
		for (size_t n = strlen(x->path); n > 1 && x->path[n - 1] == '/'; n--)
			x->path[n - 1] = '\0';
	}
	if (r->nexports == 0) {
		snprintf(r->err, sizeof(r->err), "%s has no EXPORT block with FSAL { Name = PPL; ... }", conf);
		return -1;
	}
	return 0;
}

/* Whether the export would come up: the FSAL's parameter checks, then the
 * pool opened with the identity, block size and cap the FSAL asks for
 * (read-only: nothing is restored or changed), and its size. */
static int check_export(const struct ppl_export_conf *x)
{
	char err[2048];
	const struct ppl_config *c = &x->cfg;
	if (ppl_config_check(c, err, sizeof(err)) != 0) {
		fprintf(stderr, "ppl-inspect: export %s (%s) would be refused: %s\n", x->path, x->where, err);
		return -1;
	}
	if (c->elision_port == 0) {
		printf("export %s: elision service off (Elision_Port = 0); the pool is not opened\n", x->path);
		return 0;
	}
	if (c->elision_token && strcmp(c->elision_token, EXAMPLE_TOKEN) == 0) {
		fprintf(stderr, "ppl-inspect: export %s (%s): Elision_Token is still the example's \"%s\": set a secret of "
			"your own, the same as the compute node's token file (LIBCATCHER_TOKEN_FILE)\n", x->path,
			x->where, EXAMPLE_TOKEN);
		return -1;
	}
	struct ppl_pool_options o = { .identity = x->path, .block_size = c->block_size,
				      .max_per_page = c->max_per_page, .read_only = true };
	struct ppl_pool *p;
	if (ppl_pool_open(c->pool_path, &o, &p, NULL, err, sizeof(err)) != 0) {
		fprintf(stderr, "ppl-inspect: export %s (%s) would be refused: %s (a pool is made with `ppl-inspect pool "
			"create %s --identity %s --size N`, or by ppl-pool@.service)\n", x->path, x->where, err,
			c->pool_path, x->path);
		return -1;
	}
	struct ppl_pool_header h;
	ppl_pool_get_header(p, &h);
	uint64_t durable = ppl_pool_durable_lsn(p);
	ppl_pool_close(p);
	if (ppl_config_check_pool_size(c, x->path, h.size, err, sizeof(err)) != 0 ||
	    ppl_pool_marker_admit(x->path, h.uuid, durable, err, sizeof(err)) != 0) {
		fprintf(stderr, "ppl-inspect: export %s (%s) would be refused: %s\n", x->path, x->where, err);
		return -1;
	}
	printf("export %s: pool %s is this export's (%" PRIu64 " bytes, block size %u, Max_Per_Page %u, %s)\n",
	       x->path, c->pool_path, h.size, h.block_size, h.max_per_page,
	       h.is_pmem ? "persistent memory" : "not DAX: every persist is an msync unless on tmpfs");
	return 0;
}

static int cmd_check(const struct reader *r)
{
	int bad = 0;
	for (int i = 0; i < r->nexports; i++)
		bad |= check_export(&r->exports[i]) != 0;
	return bad ? 2 : 0;
}

/* Makes the pool of the export whose Pool_Path is `pool`, with the export's
 * Path as identity and its Pool_Size, Block_Size and Max_Per_Page: the
 * pool the FSAL will accept. An existing file is never touched
 * (ppl_pool_create refuses it). */
static int cmd_create_pool(const struct reader *r, const char *conf, const char *pool)
{
	char err[2048];
	for (int i = 0; i < r->nexports; i++) {
		const struct ppl_export_conf *x = &r->exports[i];
		const struct ppl_config *c = &x->cfg;
		if (c->pool_path == NULL || strcmp(c->pool_path, pool) != 0)
			continue;
		if (c->pool_size == 0) {
			fprintf(stderr, "ppl-inspect: export %s (%s) has Pool_Size = 0 (any size): set Pool_Size, the size "
				"the pool is made with\n", x->path, x->where);
			return 2;
		}
		if (ppl_config_check(c, err, sizeof(err)) != 0) {
			fprintf(stderr, "ppl-inspect: export %s (%s) would be refused: %s\n", x->path, x->where, err);
			return 2;
		}
		struct ppl_pool_geometry g = { .size = c->pool_size, .block_size = c->block_size,
					       .max_per_page = c->max_per_page, .identity = x->path };
		if (ppl_pool_marker_admit(x->path, NULL, 0, err, sizeof(err)) != 0 ||
		    ppl_pool_create(pool, &g, err, sizeof(err)) != 0) {
			fprintf(stderr, "ppl-inspect: %s\n", err);
			return 2;
		}
		printf("created pool %s for export %s: %" PRIu64 " bytes, block size %u, Max_Per_Page %u\n", pool,
		       x->path, c->pool_size, c->block_size, c->max_per_page);
		return 0;
	}
	fprintf(stderr, "ppl-inspect: no PPL export in %s has Pool_Path = \"%s\"\n", conf, pool);
	return 2;
}

int config_main(int argc, char **argv, void (*usage)(FILE *))
{
	const char *verb = argv[0];
	bool check = strcmp(verb, "check") == 0 && argc == 2;
	bool create = strcmp(verb, "create-pool") == 0 && argc == 3;
	if (!check && !create) {
		usage(stderr);
		return 2;
	}
	struct reader *r = malloc(sizeof(*r));
	if (r == NULL) {
		fprintf(stderr, "ppl-inspect: out of memory\n");
		return 2;
	}
	int rc;
	if (load(r, argv[1]) != 0) {
		fprintf(stderr, "ppl-inspect: %s\n", r->err);
		rc = 2;
	} else {
		rc = check ? cmd_check(r) : cmd_create_pool(r, argv[1], argv[2]);
	}
	reader_free(r);
	free(r);
	return rc;
}
