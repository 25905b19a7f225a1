/* The pool file: create, open with validation, the recovery scan that
 * rebuilds the DRAM index from the blocks, the durable LSN. Records and
 * the index are in pool_chain.c, doublewrite slots in pool_dw.c. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <libpmem.h>
#include <linux/magic.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <time.h>
#include <unistd.h>

#include "pool_int.h"
#include "ppl/crc32c.h"

#define DEFAULT_SIZE (64ull << 20)
/* up to this many pages, open builds the index itself */
#define POOL_INDEX_INLINE 65536u

static int fail(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	if (err && errlen)
		vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
	return -1;
}


uint32_t pool_head_crc(uint32_t space, uint32_t page_no, uint64_t base_lsn, uint32_t seq)
{
	uint8_t b[20];
	memcpy(b, &space, 4);
	memcpy(b + 4, &page_no, 4);
	memcpy(b + 8, &base_lsn, 8);
	memcpy(b + 16, &seq, 4);
	return ppl_crc32c(0, b, sizeof(b));
}

uint32_t pool_rec_crc(uint32_t space, uint32_t page_no, const uint8_t *hdr, const uint8_t *bytes, size_t len)
{
	uint8_t id[8];
	memcpy(id, &space, 4);
	memcpy(id + 4, &page_no, 4);
	uint32_t c = ppl_crc32c(0, id, sizeof(id));
	c = ppl_crc32c(c, hdr, 14); /* start, delta, len|flags: everything but the crc */
	return ppl_crc32c(c, bytes, len);
}

static uint32_t sb_crc(const struct pool_sb *sb)
{
	return ppl_crc32c(0, sb, offsetof(struct pool_sb, crc));
}

static uint32_t ckpt_crc(const struct pool_ckpt *c)
{
	return ppl_crc32c(0, c, 16);
}

static uint64_t align_up(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

/* Where the areas go for a geometry; also the check that it makes sense. */
static int layout(struct pool_sb *sb, char *err, size_t errlen)
{
	if (sb->block_size < 64 || sb->block_size > POOL_MAX_BLOCK || (sb->block_size & (sb->block_size - 1)))
		return fail(err, errlen, "block size %u: must be a power of two from 64 to %u", sb->block_size,
			    POOL_MAX_BLOCK);
	if (sb->max_per_page < sb->block_size || sb->max_per_page % sb->block_size || sb->max_per_page > 4096)
		return fail(err, errlen, "per-page cap %u: must be a multiple of the block size (%u), at most 4096",
			    sb->max_per_page, sb->block_size);
	if (sb->dw_slots < 1 || sb->dw_slots > 4096)
		return fail(err, errlen, "doublewrite slots %u: must be 1..4096", sb->dw_slots);
	if (sb->dw_page_size < 4096 || sb->dw_page_size > 65536 || (sb->dw_page_size & (sb->dw_page_size - 1)))
		return fail(err, errlen, "doublewrite page size %u: must be a power of two from 4096 to 65536",
			    sb->dw_page_size);
	if (sb->log_size && (sb->log_size % POOL_ALIGN || sb->log_size < (64u << 10) || sb->log_size > (1ull << 30)))
		return fail(err, errlen, "log area %llu B: must be a multiple of 4096 from 64 KiB to 1 GiB (or none)",
			    (unsigned long long)sb->log_size);
	sb->dw_img_off = align_up(POOL_DW_HDR_OFF + (uint64_t)sb->dw_slots * POOL_DW_HDR_SIZE, POOL_ALIGN);
	sb->log_off = align_up(sb->dw_img_off + (uint64_t)sb->dw_slots * sb->dw_page_size, POOL_ALIGN);
	sb->blocks_off = sb->log_off + sb->log_size;
	if (sb->size < sb->blocks_off + 16ull * sb->block_size)
		return fail(err, errlen, "pool size %llu B is too small: the superblock, %u doublewrite slots and "
			    "a log area of %llu B alone take %llu B", (unsigned long long)sb->size, sb->dw_slots,
			    (unsigned long long)sb->log_size, (unsigned long long)sb->blocks_off);
	uint64_t n = (sb->size - sb->blocks_off) / sb->block_size;
	if (n > UINT32_MAX)
		return fail(err, errlen, "pool size %llu B holds more than 2^32 blocks of %u B: use larger blocks",
			    (unsigned long long)sb->size, sb->block_size);
	sb->nblocks = n;
	return 0;
}

int ppl_pool_create(const char *path, const struct ppl_pool_geometry *g, char *err, size_t errlen)
{
	struct pool_sb sb;
	memset(&sb, 0, sizeof(sb));
	memcpy(sb.magic, POOL_MAGIC, 8);
	sb.version = POOL_VERSION;
	sb.size = g->size ? g->size : DEFAULT_SIZE;
	sb.block_size = g->block_size ? g->block_size : 64;
	sb.max_per_page = g->max_per_page ? g->max_per_page : 256;
	sb.dw_slots = g->dw_slots ? g->dw_slots : 32;
	sb.dw_page_size = g->dw_page_size ? g->dw_page_size : 65536;
	if (g->log_size == PPL_POOL_NO_LOG_AREA) {
		sb.log_size = 0;
	} else if (g->log_size) {
		sb.log_size = g->log_size;
	} else {
		/* an eighth of the pool, at most 16 MiB: a second of MariaDB's
		 * log at 16 MB/s between two syncs of the file */
		sb.log_size = sb.size / 8 / POOL_ALIGN * POOL_ALIGN;
		if (sb.log_size > (16u << 20))
			sb.log_size = 16u << 20;
		if (sb.log_size < (256u << 10))
			sb.log_size = 0;
	}
	if (g->identity == NULL || g->identity[0] == '\0')
		return fail(err, errlen, "a pool needs an identity (the datadir it belongs to)");
	if (strlen(g->identity) > PPL_POOL_IDENTITY_MAX)
		return fail(err, errlen, "identity is longer than %d bytes", PPL_POOL_IDENTITY_MAX);
	snprintf(sb.identity, sizeof(sb.identity), "%s", g->identity);
	if (layout(&sb, err, errlen) != 0)
		return -1;
	sb.created_unix = (uint64_t)time(NULL);
	if (getrandom(sb.uuid, sizeof(sb.uuid), 0) != (ssize_t)sizeof(sb.uuid))
		return fail(err, errlen, "getrandom: %s", strerror(errno));
	sb.crc = sb_crc(&sb);

	size_t mapped;
	int is_pmem;
	void *base = pmem_map_file(path, sb.size, PMEM_FILE_CREATE | PMEM_FILE_EXCL, 0600, &mapped, &is_pmem);
	if (base == NULL) {
		if (errno == EEXIST)
			return fail(err, errlen, "%s exists: a pool is never overwritten; remove the file first if "
				    "you mean to discard its contents", path);
		return fail(err, errlen, "cannot create %s (%llu B): %s", path, (unsigned long long)sb.size,
			    pmem_errormsg());
	}
	/* A new file reads as zeros: every block and slot is free. Only the
	 * superblock and the first durable-LSN slot need writing. */
	struct pool_ckpt c;
	memset(&c, 0, sizeof(c));
	c.seq = 1;
	c.crc = ckpt_crc(&c);
	uint8_t *b = base;
	memcpy(b + POOL_CKPT_OFF, &c, sizeof(c));
	memcpy(b + POOL_SB_OFF, &sb, sizeof(sb));
	int rc = 0;
	if (is_pmem) {
		pmem_persist(b, POOL_DW_HDR_OFF);
	} else if (pmem_msync(b, POOL_DW_HDR_OFF) != 0) {
		rc = fail(err, errlen, "msync %s: %s", path, strerror(errno));
	}
	pmem_unmap(base, mapped);
	if (rc == 0) {
		/* the file's size and name must survive too */
		int fd = open(path, O_RDONLY);
		if (fd < 0 || fsync(fd) != 0)
			rc = fail(err, errlen, "fsync %s: %s", path, strerror(errno));
		if (fd >= 0)
			close(fd);
	}
	if (rc != 0)
		unlink(path);
	return rc;
}

static enum pm_mode choose_mode(const char *path, int is_pmem)
{
	struct statfs s;
	if (is_pmem)
		return PM_PMEM;
	if (statfs(path, &s) == 0 && s.f_type == TMPFS_MAGIC)
		return PM_EMUL;
	return PM_MSYNC;
}

static int check_sb(struct ppl_pool *p, const char *path, uint64_t file_size, char *err, size_t errlen)
{
	struct pool_sb sb;
	if (file_size < POOL_SB_SIZE)
		return fail(err, errlen, "%s is %llu B: too short to be a pool (truncated?)", path,
			    (unsigned long long)file_size);
	memcpy(&sb, p->pm.base + POOL_SB_OFF, sizeof(sb));
	if (memcmp(sb.magic, POOL_MAGIC, 8) != 0)
		return fail(err, errlen, "%s is not a PPL pool (bad magic); nothing was changed. Create a pool "
			    "with `ppl-inspect pool create`", path);
	if (sb_crc(&sb) != sb.crc)
		return fail(err, errlen, "%s: the pool superblock is damaged (checksum mismatch); the pool was "
			    "not opened and not changed. Restore it from a copy or, if its contents may be lost, "
			    "re-create it (the redo log is then the only source of unmaterialized changes)", path);
	if (sb.version != POOL_VERSION)
		return fail(err, errlen, "%s: pool layout version %u, this build reads version %u; the pool was "
			    "not opened. Use the matching build, or drain and re-create the pool", path, sb.version,
			    POOL_VERSION);
	struct pool_sb chk = sb;
	char why[256];
	if (layout(&chk, why, sizeof(why)) != 0 || chk.nblocks != sb.nblocks || chk.blocks_off != sb.blocks_off ||
	    chk.dw_img_off != sb.dw_img_off || chk.log_off != sb.log_off)
		return fail(err, errlen, "%s: the superblock's geometry is inconsistent (%s)", path,
			    chk.nblocks != sb.nblocks ? "block count" : why);
	if (file_size < sb.size)
		return fail(err, errlen, "%s is %llu B but its superblock says %llu B: the file was truncated; "
			    "the pool was not opened", path, (unsigned long long)file_size,
			    (unsigned long long)sb.size);
	sb.identity[PPL_POOL_IDENTITY_MAX] = '\0';
	if (p->opt.identity && strcmp(p->opt.identity, sb.identity) != 0)
		return fail(err, errlen, "%s belongs to \"%s\", not \"%s\": a pool serves one datadir. Point the "
			    "configuration at that datadir's pool, or create a new pool for this one", path,
			    sb.identity, p->opt.identity);
	if (p->opt.block_size && p->opt.block_size != sb.block_size)
		return fail(err, errlen, "%s has %u B blocks, the configuration asks for %u: set the block size "
			    "to %u or create a new pool", path, sb.block_size, p->opt.block_size, sb.block_size);
	if (p->opt.max_per_page && p->opt.max_per_page != sb.max_per_page)
		return fail(err, errlen, "%s has a per-page cap of %u B, the configuration asks for %u: set it to "
			    "%u or create a new pool", path, sb.max_per_page, p->opt.max_per_page,
			    sb.max_per_page);
	p->sb = sb;
	p->bs = sb.block_size;
	p->cap_blocks = sb.max_per_page / sb.block_size;
	p->nblocks = sb.nblocks;
	p->blocks_off = sb.blocks_off;
	return 0;
}

static void load_ckpt(struct ppl_pool *p)
{
	p->ckpt_seq = 0;
	p->durable_lsn = 0;
	for (int i = 0; i < 2; i++) {
		struct pool_ckpt c;
		memcpy(&c, p->pm.base + POOL_CKPT_OFF + (size_t)i * POOL_CKPT_SLOT, sizeof(c));
		if (c.seq && ckpt_crc(&c) == c.crc && c.seq > p->ckpt_seq) {
			p->ckpt_seq = c.seq;
			p->durable_lsn = c.lsn;
		}
	}
}

int ppl_pool_set_durable_lsn(struct ppl_pool *p, uint64_t lsn)
{
	if (p->read_only)
		return -1;
	pthread_mutex_lock(&p->ckpt_lock);
	struct pool_ckpt c;
	memset(&c, 0, sizeof(c));
	c.seq = p->ckpt_seq + 1;
	c.lsn = lsn;
	c.crc = ckpt_crc(&c);
	/* The slot not holding the current value: a torn write leaves that
	 * one intact. */
	uint64_t off = POOL_CKPT_OFF + (c.seq & 1) * POOL_CKPT_SLOT;
	pm_write(&p->pm, off, &c, sizeof(c));
	pm_persist(&p->pm, off, sizeof(c));
	p->ckpt_seq = c.seq;
	__atomic_store_n(&p->durable_lsn, lsn, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&p->ckpt_lock);
	return 0;
}

int ppl_pool_persist_failed(const struct ppl_pool *p)
{
	return __atomic_load_n(&p->pm.failed, __ATOMIC_ACQUIRE);
}

uint64_t ppl_pool_durable_lsn(const struct ppl_pool *p)
{
	return __atomic_load_n(&p->durable_lsn, __ATOMIC_ACQUIRE);
}

/* ---- the recovery scan -------------------------------------------------- */

struct head_ref {
	uint64_t key;
	uint32_t seq, block;
};

/* By page, so generations of one page are adjacent; and pages filled one
 * after the other sit in neighbouring blocks, so the chains are then read
 * mostly in file order. */
static int head_cmp(const void *a, const void *b)
{
	const struct head_ref *x = a, *y = b;
	if (x->key != y->key)
		return x->key < y->key ? -1 : 1;
	/* newest generation first; wrap-around compare */
	int32_t d = (int32_t)(y->seq - x->seq);
	return d > 0 ? 1 : d < 0 ? -1 : 0;
}

/* heads sorted as head_cmp orders them. A radix sort on the key's bytes
 * that differ (a pool's pages share their space ids' high bytes): on a
 * full 1 GiB pool, qsort of its 2.6 million heads per half took 0.17-0.40
 * s of an open that must stay near 0.5 s. Stable, so generations of one
 * page stay in block order; those runs (a replacement a crash cut short:
 * rare, short) are then put newest first by head_cmp. false: no memory
 * for the scratch copy (the caller falls back to qsort). */
static bool sort_heads(struct head_ref *v, size_t n)
{
	if (n < 2)
		return true;
	uint64_t and_ = ~0ull, or_ = 0;
	for (size_t i = 0; i < n; i++) {
		and_ &= v[i].key;
		or_ |= v[i].key;
	}
	struct head_ref *tmp = malloc(n * sizeof(*tmp));
	if (tmp == NULL)
		return false;
	struct head_ref *from = v, *to = tmp;
	for (unsigned shift = 0; shift < 64; shift += 8) {
		if (((and_ ^ or_) >> shift & 0xff) == 0)
			continue; /* every key has the same byte here */
		size_t count[256] = { 0 };
		for (size_t i = 0; i < n; i++)
			count[from[i].key >> shift & 0xff]++;
		size_t at = 0;
		for (unsigned d = 0; d < 256; d++) {
			size_t c = count[d];
			count[d] = at;
			at += c;
		}
		for (size_t i = 0; i < n; i++)
			to[count[from[i].key >> shift & 0xff]++] = from[i];
		struct head_ref *t = from;
		from = to;
		to = t;
	}
	if (from != v)
		memcpy(v, from, n * sizeof(*v));
	free(tmp);
	for (size_t i = 1, start = 0; i <= n; i++) {
		if (i < n && v[i].key == v[start].key)
			continue;
		/* v[start, i) share a key: insertion sort by head_cmp */
		for (size_t j = start + 1; j < i; j++) {
			struct head_ref x = v[j];
			size_t k = j;
			for (; k > start && head_cmp(&v[k - 1], &x) > 0; k--)
				v[k] = v[k - 1];
			v[k] = x;
		}
		start = i;
	}
	return true;
}

/* Pass 1 over a range of blocks: chain heads, and commit words that are
 * damaged. Two of these run at once at open (one per half of the pool). */
struct pass1 {
	struct ppl_pool *p;
	uint64_t from, to;
	uint8_t *visited;
	struct head_ref *heads;
	size_t n, cap;
	uint64_t damaged;
	bool oom;
};

static void *pass1_run(void *arg)
{
	struct pass1 *a = arg;
	struct ppl_pool *p = a->p;
	for (uint64_t b = a->from; b < a->to; b++) {
		uint64_t w = pm_load8(&p->pm, blk_off(p, (uint32_t)b));
		if (!blk_word_ok(w) || blk_kind(w) > BLK_CONT) {
			if (a->damaged++ < 8)
				pool_logf(p, "pool block %llu: its commit word is damaged (%016llx); if it began a "
					  "page's chain, that page's pool records are lost and must come from the "
					  "redo log. The block is not reused", (unsigned long long)b,
					  (unsigned long long)w);
			p->quarantine[b] = 1;
			a->visited[b] = 1;
			continue;
		}
		if (blk_kind(w) != BLK_HEAD)
			continue;
		const uint8_t *h = blk_ptr(p, (uint32_t)b);
		uint32_t space, page_no, seq, hcrc;
		uint64_t base;
		memcpy(&space, h + BLK_OFF_SPACE, 4);
		memcpy(&page_no, h + BLK_OFF_PAGE, 4);
		memcpy(&base, h + BLK_OFF_BASE, 8);
		memcpy(&seq, h + BLK_OFF_SEQ, 4);
		memcpy(&hcrc, h + BLK_OFF_HCRC, 4);
		if (hcrc != pool_head_crc(space, page_no, base, seq)) {
			if (a->damaged++ < 8)
				pool_logf(p, "pool block %llu: a chain head whose page id fails its checksum; that "
					  "page's pool records are not applied and must come from the redo log. The "
					  "block is not reused", (unsigned long long)b);
			p->quarantine[b] = 1;
			a->visited[b] = 1;
			continue;
		}
		if (a->n == a->cap) {
			size_t cap = a->cap ? 2 * a->cap : 4096;
			struct head_ref *n = realloc(a->heads, cap * sizeof(*n));
			if (n == NULL) {
				a->oom = true;
				return NULL;
			}
			a->heads = n;
			a->cap = cap;
		}
		a->heads[a->n++] = (struct head_ref){ pool_key(space, page_no), seq, (uint32_t)b };
	}
	if (!sort_heads(a->heads, a->n))
		qsort(a->heads, a->n, sizeof(*a->heads), head_cmp);
	return NULL;
}

/* Checks the shape of the chains of heads[from, to): marks their blocks
 * used, finishes interrupted replacements, and lists the pages in the
 * directory (slots from `from` on) or, if broken, as damaged entries. */
struct walk {
	struct ppl_pool *p;
	const struct head_ref *heads;
	size_t from, to, ndir;
	uint8_t *visited;
	uint64_t replaced, damaged, blocks, pages;
	bool oom;
};

static void *walk_run(void *arg)
{
	struct walk *a = arg;
	struct ppl_pool *p = a->p;
	for (size_t i = a->from; i < a->to; i++) {
		const struct head_ref *h = &a->heads[i];
		uint32_t space = (uint32_t)(h->key >> 32), page_no = (uint32_t)h->key;
		if (i > a->from && a->heads[i - 1].key == h->key) {
			/* An older generation whose replacement committed just
			 * before a crash: finish the replacement. */
			a->replaced++;
			if (!p->read_only) {
				uint64_t w = pm_load8(&p->pm, blk_off(p, h->block));
				pm_store8(&p->pm, blk_off(p, h->block), blk_word(blk_next(w), blk_used(w), BLK_FREE));
				pm_persist(&p->pm, blk_off(p, h->block), 8);
			} else {
				a->visited[h->block] = 1; /* not ours to free in a read-only look */
			}
			continue;
		}
		char why[200];
		uint32_t len = 0, nb = 0, tail = 0;
		if (pool_chain_load(p, h->block, space, page_no, NULL, &len, &nb, &tail, a->visited, why,
				    sizeof(why)) != 0) {
			/* A broken chain: its entry exists from now on, marked
			 * damaged, holding the blocks it reached. */
			struct pool_page *e = pool_page_new(p, h->key);
			if (e == NULL) {
				a->oom = true;
				return NULL;
			}
			e->head = h->block;
			e->seq = h->seq;
			e->nblocks = nb;
			e->tail = tail;
			memcpy(&e->base_lsn, blk_ptr(p, h->block) + BLK_OFF_BASE, 8);
			e->damaged = true;
			a->damaged++;
			__atomic_add_fetch(&p->n_damaged, 1, __ATOMIC_RELAXED);
			pool_logf(p, "pool: page %u:%u: %s; its %u pool block(s) are kept and not applied; the page "
				  "must be rebuilt from the redo log or its data file checked", space, page_no, why, nb);
			pool_page_insert(p, e);
		} else {
			/* records are checked when the entry is built */
			p->dir[a->from + a->ndir++] = (struct dir_ent){ h->key, h->block, h->seq, 0 };
		}
		a->blocks += nb;
		a->pages++;
	}
	return NULL;
}

static int scan(struct ppl_pool *p, struct ppl_pool_recovery *rec, char *err, size_t errlen)
{
	uint8_t *visited = calloc(p->nblocks, 1);
	if (visited == NULL)
		return fail(err, errlen, "out of memory scanning %llu blocks", (unsigned long long)p->nblocks);
	visited[0] = 1;
	/* Both halves of the pool at once (the machine's cores are otherwise
	 * idle at open), each sorted by page; then one merge. */
	struct pass1 half[2] = {
		{ .p = p, .from = 1, .to = p->nblocks / 2, .visited = visited },
		{ .p = p, .from = p->nblocks / 2, .to = p->nblocks, .visited = visited },
	};
	if (half[0].to < 1)
		half[0].to = 1;
	uint64_t t0 = pool_now_ns();
	pthread_t t;
	bool threaded = p->nblocks > 65536 && pthread_create(&t, NULL, pass1_run, &half[1]) == 0;
	pass1_run(&half[0]);
	if (threaded)
		pthread_join(t, NULL);
	else
		pass1_run(&half[1]);
	uint64_t t1 = pool_now_ns();
	rec->heads_ns = t1 - t0;
	size_t nheads = half[0].n + half[1].n;
	struct head_ref *heads = malloc((nheads ? nheads : 1) * sizeof(*heads));
	rec->damaged_blocks += half[0].damaged + half[1].damaged;
	if (heads == NULL || half[0].oom || half[1].oom) {
		free(visited);
		free(heads);
		free(half[0].heads);
		free(half[1].heads);
		return fail(err, errlen, "out of memory scanning pool heads");
	}
	for (size_t i = 0, j = 0, k = 0; k < nheads; k++) {
		if (j == half[1].n || (i < half[0].n && head_cmp(&half[0].heads[i], &half[1].heads[j]) <= 0))
			heads[k] = half[0].heads[i++];
		else
			heads[k] = half[1].heads[j++];
	}
	free(half[0].heads);
	free(half[1].heads);

	/* Sized for what is there: inserting millions of pages into a small
	 * table that resizes in the background makes long bucket chains. */
	unsigned long buckets = 1024;
	while (buckets < nheads && buckets < (1ul << 30))
		buckets <<= 1;
	p->ht = cds_lfht_new(buckets, 1024, 0, CDS_LFHT_AUTO_RESIZE | CDS_LFHT_ACCOUNTING, NULL);
	p->dir = malloc((nheads ? nheads : 1) * sizeof(*p->dir));
	p->ndir = 0;
	if (p->ht == NULL || p->dir == NULL) {
		free(visited);
		free(heads);
		return fail(err, errlen, "out of memory for the pool index (%zu pages)", nheads);
	}

	uint64_t t2 = pool_now_ns();
	rec->table_ns = t2 - t1;

	/* Walk the chains, both halves at once (split between pages). */
	struct walk w[2] = {
		{ .p = p, .heads = heads, .from = 0, .to = nheads / 2, .visited = visited },
		{ .p = p, .heads = heads, .from = nheads / 2, .to = nheads, .visited = visited },
	};
	while (w[0].to > 0 && w[0].to < nheads && heads[w[0].to - 1].key == heads[w[0].to].key)
		w[0].to++;
	w[1].from = w[0].to;
	threaded = nheads > 65536 && p->opt.tracer == NULL && pthread_create(&t, NULL, walk_run, &w[1]) == 0;
	walk_run(&w[0]);
	if (threaded)
		pthread_join(t, NULL);
	else
		walk_run(&w[1]);
	if (w[0].oom || w[1].oom) {
		free(visited);
		free(heads);
		return fail(err, errlen, "out of memory building the pool index");
	}
	/* the second half's directory slots follow the first's */
	memmove(p->dir + w[0].ndir, p->dir + w[1].from, w[1].ndir * sizeof(*p->dir));
	p->ndir = w[0].ndir + w[1].ndir;
	uint64_t t3 = pool_now_ns();
	rec->walk_ns = t3 - t2;
	for (int i = 0; i < 2; i++) {
		rec->replaced_chains += w[i].replaced;
		rec->damaged_pages += w[i].damaged;
		rec->blocks_used += w[i].blocks;
		rec->pages += w[i].pages;
	}
	for (uint64_t b = 1; b < p->nblocks; b++) {
		if (visited[b])
			continue;
		uint64_t w = pm_load8(&p->pm, blk_off(p, (uint32_t)b));
		if (blk_kind(w) != BLK_FREE)
			rec->orphan_blocks++; /* of a freed chain, or of an append a crash cut short */
		pool_free_push(p, (uint32_t)b);
		rec->blocks_free++;
	}
	p->n_pages += p->ndir;
	free(visited);
	free(heads);
	rec->free_ns = pool_now_ns() - t3;
	return 0;
}

static void index_done(struct ppl_pool *p, bool readers_possible)
{
	pthread_mutex_lock(&p->idx_lock);
	__atomic_store_n(&p->dir_state, 0, __ATOMIC_RELEASE);
	pthread_cond_broadcast(&p->idx_cond);
	pthread_mutex_unlock(&p->idx_lock);
	if (readers_possible)
		synchronize_rcu(); /* no reader is still searching the directory */
	free(p->dir);
	p->dir = NULL;
}

static void *indexer_main(void *arg)
{
	struct ppl_pool *p = arg;
	pool_index_build(p);
	if (!__atomic_load_n(&p->indexer_stop, __ATOMIC_RELAXED))
		pool_logf(p, "pool: index of %zu pages built in %.3f s after open (%" PRIu64 " records%s)", p->ndir,
			  (double)p->idx_ns / 1e9, p->idx_records, p->idx_damaged ? ", some pages damaged" : "");
	index_done(p, true);
	return NULL;
}

static void prefault(struct ppl_pool *p)
{
	/* Fault the whole mapping in now, so an append never waits for the
	 * kernel. */
#ifdef MADV_POPULATE_WRITE
	if (madvise(p->pm.base, p->pm.len, p->read_only ? MADV_POPULATE_READ : MADV_POPULATE_WRITE) == 0)
		return;
#endif
	volatile uint8_t sink = 0;
	for (size_t off = 0; off < p->pm.len; off += 4096)
		sink ^= p->pm.base[off];
	(void)sink;
}

static void unmap(struct ppl_pool *p)
{
	if (p->read_only) {
		munmap(p->pm.base, p->pm.len);
		close(p->fd);
	} else {
		pmem_unmap(p->pm.base, p->pm.len);
	}
}

static void *prefault_run(void *arg)
{
	prefault(arg);
	return NULL;
}

int ppl_pool_open(const char *path, const struct ppl_pool_options *o, struct ppl_pool **out,
		  struct ppl_pool_recovery *rec_out, char *err, size_t errlen)
{
	uint64_t t0 = pool_now_ns();
	struct ppl_pool *p = calloc(1, sizeof(*p));
	if (p == NULL)
		return fail(err, errlen, "out of memory");
	static const struct ppl_pool_options defaults;
	p->opt = o ? *o : defaults;
	if (p->opt.low_water_pct == 0)
		p->opt.low_water_pct = 10;
	if (p->opt.high_water_pct == 0)
		p->opt.high_water_pct = 25;
	if (p->opt.low_water_pct >= 100 || p->opt.high_water_pct > 100 ||
	    p->opt.high_water_pct < p->opt.low_water_pct) {
		fail(err, errlen, "water marks low %u%% high %u%%: need 0 < low <= high <= 100",
		     p->opt.low_water_pct, p->opt.high_water_pct);
		free(p);
		return -1;
	}
	p->read_only = p->opt.read_only;
	p->fd = -1;
	p->pm.tracer = p->opt.tracer;
	struct stat st;
	if (stat(path, &st) != 0) {
		free(p);
		return fail(err, errlen, "pool %s: %s (create it with `ppl-inspect pool create`)", path,
			    strerror(errno));
	}
	if (!S_ISREG(st.st_mode) || st.st_size < (off_t)POOL_SB_SIZE) {
		free(p);
		return fail(err, errlen, "%s is %s: not a pool (truncated?)", path,
			    S_ISREG(st.st_mode) ? "too short" : "not a regular file");
	}
	if (p->read_only) {
		p->fd = open(path, O_RDONLY);
		void *m = p->fd < 0 ? MAP_FAILED : mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_SHARED, p->fd, 0);
		if (m == MAP_FAILED) {
			int e = errno;
			if (p->fd >= 0)
				close(p->fd);
			free(p);
			return fail(err, errlen, "cannot map %s: %s", path, strerror(e));
		}
		p->pm.base = m;
		p->pm.len = (size_t)st.st_size;
		p->pm.mode = PM_MSYNC;
	} else {
		size_t mapped;
		int is_pmem;
		void *m = pmem_map_file(path, 0, 0, 0, &mapped, &is_pmem);
		if (m == NULL) {
			free(p);
			return fail(err, errlen, "cannot map %s: %s", path, pmem_errormsg());
		}
		p->pm.base = m;
		p->pm.len = mapped;
		p->pm.mode = choose_mode(path, is_pmem);
	}
	if (check_sb(p, path, p->pm.len, err, errlen) != 0)
		goto bad_map;
	p->free_stack = malloc(p->nblocks * sizeof(uint32_t));
	p->quarantine = calloc(p->nblocks, 1);
	if (p->free_stack == NULL || p->quarantine == NULL) {
		fail(err, errlen, "out of memory for a pool of %llu blocks", (unsigned long long)p->nblocks);
		goto bad_alloc;
	}
	for (unsigned i = 0; i < POOL_WRITER_LOCKS; i++)
		pthread_mutex_init(&p->writer[i], NULL);
	pthread_mutex_init(&p->alloc_lock, NULL);
	pthread_mutex_init(&p->ckpt_lock, NULL);
	pthread_mutex_init(&p->ent_lock, NULL);
	pthread_mutex_init(&p->idx_lock, NULL);
	pthread_cond_init(&p->idx_cond, NULL);
	load_ckpt(p);
	if (p->ckpt_seq == 0)
		pool_logf(p, "pool %s: both durable-LSN slots are damaged; the durable LSN reads as 0, so the "
			  "whole redo log will be re-read", path);

	struct ppl_pool_recovery rec;
	memset(&rec, 0, sizeof(rec));
	if (pool_log_open(p, &rec, err, errlen) != 0) {
		if (rec_out)
			*rec_out = rec;
		goto bad_scan;
	}
	if (scan(p, &rec, err, errlen) != 0)
		goto bad_scan;
	if (pool_dw_init(p) != 0) {
		fail(err, errlen, "out of memory for doublewrite slots");
		goto bad_scan;
	}
	uint64_t dw0 = pool_now_ns();
	pool_dw_recover(p, &rec);
	rec.dw_ns = pool_now_ns() - dw0;
	/* The scan read every block, so every page of the mapping is in;
	 * what is left is making them writable without a fault on an
	 * append's path. That runs behind the open: beside the scan's two
	 * threads it doubled their time (heads 0.34-0.56 s against 0.20 s on
	 * a full 1 GiB pool), and an append meanwhile takes at most a minor
	 * fault. Without the thread, the appends take those faults. */
	p->prefaulter_running = pthread_create(&p->prefaulter, NULL, prefault_run, p) == 0;
	rec.durable_lsn = p->durable_lsn;
	/* Entries for a few pages are built now; for many, in the background
	 * (lookups meanwhile search the scan's directory). */
	__atomic_store_n(&p->dir_state, 1, __ATOMIC_RELEASE);
	if (p->opt.index_wait || p->ndir <= POOL_INDEX_INLINE) {
		pool_index_build(p);
		index_done(p, false);
		rec.records = p->idx_records;
		rec.damaged_pages += p->idx_damaged;
		rec.index_ns = p->idx_ns;
	} else if (pthread_create(&p->indexer, NULL, indexer_main, p) == 0) {
		p->indexer_running = true;
		rec.index_background = true;
	} else {
		pool_index_build(p);
		index_done(p, false);
		rec.records = p->idx_records;
		rec.damaged_pages += p->idx_damaged;
		rec.index_ns = p->idx_ns;
	}
	rec.elapsed_ns = pool_now_ns() - t0;
	if (rec_out)
		*rec_out = rec;
	*out = p;
	return 0;

bad_scan:
	ppl_pool_close(p);
	return -1;
bad_alloc:
	free(p->free_stack);
	free(p->quarantine);
bad_map:
	unmap(p);
	free(p);
	return -1;
}

static void free_entry_now(struct pool_page *e)
{
	struct dram_seg *s = e->dram;
	while (s) {
		struct dram_seg *n = s->next;
		free(s);
		s = n;
	}
}

void ppl_pool_close(struct ppl_pool *p)
{
	if (p == NULL)
		return;
	if (p->prefaulter_running)
		pthread_join(p->prefaulter, NULL); /* it walks the mapping unmapped below */
	if (p->indexer_running) {
		__atomic_store_n(&p->indexer_stop, 1, __ATOMIC_RELAXED);
		pthread_join(p->indexer, NULL);
	}
	free(p->dir);
	/* Entries retired by call_rcu must be gone before the table is. */
	if (__atomic_load_n(&p->n_retire_cbs, __ATOMIC_ACQUIRE) > 0)
		rcu_barrier();
	struct cds_lfht_iter it;
	struct cds_lfht_node *n;
	if (p->ht == NULL)
		goto no_table;
	rcu_read_lock();
	cds_lfht_first(p->ht, &it);
	while ((n = cds_lfht_iter_get_node(&it)) != NULL) {
		struct pool_page *e = caa_container_of(n, struct pool_page, node);
		cds_lfht_next(p->ht, &it);
		cds_lfht_del(p->ht, n);
		free_entry_now(e);
	}
	rcu_read_unlock();
	cds_lfht_destroy(p->ht, NULL);
no_table:
	pool_dw_fini(p);
	pool_entries_fini(p);
	for (unsigned i = 0; i < POOL_WRITER_LOCKS; i++)
		pthread_mutex_destroy(&p->writer[i]);
	pthread_mutex_destroy(&p->alloc_lock);
	pthread_mutex_destroy(&p->ckpt_lock);
	pthread_mutex_destroy(&p->log_lock);
	pthread_mutex_destroy(&p->idx_lock);
	pthread_cond_destroy(&p->idx_cond);
	free(p->free_stack);
	free(p->quarantine);
	unmap(p);
	free(p);
}

void ppl_pool_get_header(const struct ppl_pool *p, struct ppl_pool_header *out)
{
	memset(out, 0, sizeof(*out));
	out->version = p->sb.version;
	out->block_size = p->sb.block_size;
	out->max_per_page = p->sb.max_per_page;
	out->dw_slots = p->sb.dw_slots;
	out->dw_page_size = p->sb.dw_page_size;
	out->size = p->sb.size;
	out->nblocks = p->sb.nblocks;
	out->created_unix = p->sb.created_unix;
	out->log_size = p->sb.log_size;
	memcpy(out->uuid, p->sb.uuid, 16);
	memcpy(out->identity, p->sb.identity, sizeof(out->identity));
	out->identity[PPL_POOL_IDENTITY_MAX] = '\0';
	out->is_pmem = p->pm.mode == PM_PMEM;
	out->is_volatile = p->pm.mode == PM_EMUL;
}

void ppl_pool_uuid_hex(const uint8_t uuid[16], char out[33])
{
	for (int i = 0; i < 16; i++)
		snprintf(out + 2 * i, 3, "%02x", uuid[i]);
}
