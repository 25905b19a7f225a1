
#include <pthread.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "ppl/crash.h"
#include "ppl/datadir.h"
#include "ppl/fileclass.h"
#include "ppl/io.h"
#include "ppl/mach.h"
#include "ppl/page.h"

struct space_file {
	uint32_t space;
	uint64_t ino;
	char path[4096];
};

/* Files pages are read from, kept open. Every elision answer reads its
 * page's base, and each read looked the space's file up by path, opened
 * it, checked its inode and its page 0 and closed it again: six system
 * calls and two path walks per page, a third of the storage node's CPU
 * under TPC-C at one thread (perf, issue 17). An open file stands for the
 * inode those checks found (a rename moves the name, not the inode), and
 * it is used while nothing the map knows of changed (gen: a note of the
 * log, a binding, a removal heard, a scan) and for OPEN_RECHECK_NS at
 * most, after which the checks run again: a file replaced behind the
 * export's back (neither through it nor named by the log) is seen that
 * late at most, as a page read a moment before the replacement would
 * be. Writes open their file as before. */
#define OPEN_FILES 64
#define OPEN_RECHECK_NS 100000000ull
struct open_file {
	int fd;                 /* -1: free */
	uint32_t space;
	uint64_t ino, gen, checked_ns;
	unsigned users;         /* reads under way on fd */
	bool retired;           /* closed when the last user is done */
};

struct ppl_datadir {
	char *dir;
	const struct ppl_io *io;  /* every file operation (ppl/io.h) */
	pthread_rwlock_t lock;
	struct space_file *f;    /* found by scanning (page 0 says the space) */
	size_t n, cap;
	struct space_file *notes; /* told by the log (FILE_CREATE, FILE_RENAME) */
	size_t nnotes, capnotes;
	uint64_t gen;             /* atomic: bumped by every change of the above */
	pthread_mutex_t open_lock; /* a leaf lock */
	struct open_file open[OPEN_FILES];
	unsigned open_next;       /* the next slot to reuse */
};

static void open_sweep(struct ppl_datadir *d);

/* What the map says changed: open files are checked again before use. */
static void map_changed(struct ppl_datadir *d)
{
	__atomic_add_fetch(&d->gen, 1, __ATOMIC_ACQ_REL);
}

static int dd_stat(const struct ppl_datadir *d, const char *path, struct stat *st)
{
	return d->io->stat(d->io->arg, path, st);
}

static struct space_file *grow(struct space_file **a, size_t *n, size_t *cap)
{
	if (*n == *cap) {
		size_t c = *cap ? 2 * *cap : 64;
		struct space_file *f = realloc(*a, c * sizeof(*f));
		if (f == NULL)
			return NULL;
		*a = f;
		*cap = c;
	}
	return &(*a)[(*n)++];
}

/* The space a file's page 0 names; false while page 0 was never written.
 * hdr holds the page's first PPL_PAGE0_HEAD bytes. */
static bool page0_space(const uint8_t *hdr, uint32_t *space)
{
	if (ppl_page0_unwritten(hdr))
		return false;
	*space = ppl_rd4(hdr + PPL_FSP_HEADER_OFFSET + PPL_FSP_SPACE_ID);
	return true;
}

static void add_file(struct ppl_datadir *d, const char *path)
{
	uint8_t hdr[PPL_PAGE0_HEAD];
	const struct ppl_io *io = d->io;
	int fd = io->open(io->arg, path, O_RDONLY);
	if (fd < 0)
		return;
	struct stat st;
	ssize_t got = io->pread(io->arg, fd, hdr, sizeof(hdr), 0);
	int sr = io->fstat(io->arg, fd, &st);
	io->close(io->arg, fd);
	if (got != (ssize_t)sizeof(hdr) || sr != 0)
		return;
	struct space_file *e = grow(&d->f, &d->n, &d->cap);
	if (e == NULL)
		return;
	/* A page 0 never written (a table whose first writes were elided)
	 * says nothing: the space is bound later (ppl_datadir_bind, or a
	 * FILE_CREATE note). ibdata1 is space 0 by InnoDB's naming, whatever
	 * its page 0 holds yet: a datadir being created has its page 0 elided
	 * like any other page, and it can only be materialized once its file
	 * is known. */
	const char *base = strrchr(path, '/');
	bool sys = strcmp(base ? base + 1 : path, "ibdata1") == 0;
	uint32_t named;
	e->space = sys ? 0 : page0_space(hdr, &named) ? named : UINT32_MAX;
	e->ino = (uint64_t)st.st_ino;
	snprintf(e->path, sizeof(e->path), "%s", path);
}

/* A file of a space the log can name: a table (*.ibd, in the datadir or a
 * database directory), the system or an undo tablespace (in the datadir
 * only). Not the temporary tablespace: the log never names it. */
static bool holds_space(const char *name, int depth)
{
	switch (ppl_innodb_file_of(name)) {
	case PPL_INNODB_TABLE:
	case PPL_INNODB_INTERMEDIATE:
		return true;
	case PPL_INNODB_SYSTEM:
	case PPL_INNODB_UNDO:
		return depth == 0;
	default:
		return false;
	}
}

static void scan_dir(struct ppl_datadir *d, const char *dir, int depth);

struct scan {
	struct ppl_datadir *d;
	const char *dir;
	int depth;
};

static int scan_entry(void *arg, const char *name, enum ppl_io_type type)
{
	struct scan *sc = arg;
	char p[4096];
	struct stat st;
	(void)type; /* a link to a file or a directory counts as what it points to */
	if (name[0] == '.')
		return 0;
	snprintf(p, sizeof(p), "%s/%s", sc->dir, name);
	if (dd_stat(sc->d, p, &st) != 0)
		return 0;
	if (S_ISDIR(st.st_mode) && sc->depth == 0)
		scan_dir(sc->d, p, 1);
	else if (S_ISREG(st.st_mode) && holds_space(name, sc->depth))
		add_file(sc->d, p);
	return 0;
}

static void scan_dir(struct ppl_datadir *d, const char *dir, int depth)
{
	struct scan sc = { .d = d, .dir = dir, .depth = depth };
	d->io->list(d->io->arg, dir, scan_entry, &sc);
}

/* The files are looked at again (what page 0 says of each); the notes
 * stay. Lock held for writing. */
static void rescan_locked(struct ppl_datadir *d)
{
	map_changed(d);
	d->n = 0;
	scan_dir(d, d->dir, 0);
}

struct ppl_datadir *ppl_datadir_open(const char *dir, const struct ppl_io *io, char *err, size_t errlen)
{
	struct stat st;
	if (io == NULL)
		io = ppl_io_posix();
	errno = 0;
	if (io->stat(io->arg, dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
		snprintf(err, errlen, "datadir %s: %s", dir, errno ? strerror(errno) : "not a directory");
		return NULL;
	}
	struct ppl_datadir *d = calloc(1, sizeof(*d));
	if (d == NULL || (d->dir = strdup(dir)) == NULL) {
		free(d);
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	d->io = io;
	pthread_rwlock_init(&d->lock, NULL);
	pthread_mutex_init(&d->open_lock, NULL);
	for (unsigned i = 0; i < OPEN_FILES; i++)
		d->open[i].fd = -1;
	scan_dir(d, dir, 0);
	return d;
}

void ppl_datadir_close(struct ppl_datadir *d)
{
	if (d) {
		for (unsigned i = 0; i < OPEN_FILES; i++)
			if (d->open[i].fd >= 0)
				d->io->close(d->io->arg, d->open[i].fd);
		pthread_mutex_destroy(&d->open_lock);
		pthread_rwlock_destroy(&d->lock);
		free(d->f);
		free(d->notes);
		free(d->dir);
		free(d);
	}
}

size_t ppl_datadir_spaces(struct ppl_datadir *d)
{
	pthread_rwlock_rdlock(&d->lock);
	size_t n = d->n;
	pthread_rwlock_unlock(&d->lock);
	return n;
}

size_t ppl_datadir_notes(struct ppl_datadir *d)
{
	pthread_rwlock_rdlock(&d->lock);
	size_t n = d->nnotes;
	pthread_rwlock_unlock(&d->lock);
	return n;
}

/* Whether the file seen at this path is still the one there: TRUNCATE and
 * ALTER put another file (another space) under the same name. Notes from
 * the log name a path only and are taken as they are. */
static bool still_there(const struct ppl_datadir *d, const struct space_file *f)
{
	struct stat st;
	return f->ino == 0 || (dd_stat(d, f->path, &st) == 0 && (uint64_t)st.st_ino == f->ino);
}

/* A space bound to an inode (ppl_datadir_bind: learned from a page of
 * the file) whose file is no longer at the remembered path: a rename keeps
 * the inode, so the file is wherever the last scan saw that inode. Needed
 * when nothing else names the space there: a table renamed while its page
 * 0 was never written, after the log that would have said so stopped
 * being parsed. A file there whose page 0 names another space is not it
 * (an inode number reused after a removal this map never saw). The note
 * follows the file. The caller holds the write lock, after a scan. */
static bool follow_rename(struct ppl_datadir *d, uint32_t space, char *out, size_t outlen, uint64_t *ino)
{
	for (size_t i = d->nnotes; i-- > 0;) {
		struct space_file *nt = &d->notes[i];
		if (nt->space != space || nt->ino == 0)
			continue;
		for (size_t j = 0; j < d->n; j++)
			if (d->f[j].ino == nt->ino && (d->f[j].space == UINT32_MAX || d->f[j].space == space)) {
				snprintf(nt->path, sizeof(nt->path), "%s", d->f[j].path);
				snprintf(out, outlen, "%s", nt->path);
				*ino = nt->ino;
				return true;
			}
	}
	return false;
}

/* Whether a binding or a note ties inode ino to space; lock held. */
static bool bound_to(const struct ppl_datadir *d, uint32_t space, uint64_t ino)
{
	for (size_t i = 0; i < d->nnotes; i++)
		if (d->notes[i].space == space && d->notes[i].ino == ino && ino != 0)
			return true;
	return false;
}

/* The space's file, in order of trust; lock held. A file the space is
 * bound to (a note of the log, or a page MariaDB wrote at its position)
 * comes first: a copy of it under another name (a backup, mysql-test-run's
 * copies aside) has the same page 0. While the bound file is not where
 * it was seen (renamed since the last look), `wait_for_bound` keeps the
 * copies out until the directory was looked at again. Then a file whose
 * page 0 names the space, then a note not bound yet (matched by name, the
 * latest first). */
static const struct space_file *pick(const struct ppl_datadir *d, uint32_t space, bool wait_for_bound)
{
	bool bound_known = false;
	for (size_t i = d->nnotes; i-- > 0;) /* the latest note wins */
		if (d->notes[i].space == space && d->notes[i].ino != 0) {
			bound_known = true;
			if (still_there(d, &d->notes[i]))
				return &d->notes[i];
		}
	for (size_t i = 0; i < d->n; i++)
		if (d->f[i].space == space && bound_to(d, space, d->f[i].ino) && still_there(d, &d->f[i]))
			return &d->f[i];
	if (bound_known && wait_for_bound)
		return NULL;
	for (size_t i = 0; i < d->n; i++)
		if (d->f[i].space == space && still_there(d, &d->f[i]))
			return &d->f[i];
	for (size_t i = d->nnotes; i-- > 0;)
		if (d->notes[i].space == space && d->notes[i].ino == 0 && still_there(d, &d->notes[i]))
			return &d->notes[i];
	return NULL;
}

/* Copies the path of the space's file into out and its inode into *ino (0:
 * a note not bound to a file yet, matched by name); looks again once if
 * the space is not known (a table created or renamed since the last look). */
static int find(struct ppl_datadir *d, uint32_t space, char *out, size_t outlen, uint64_t *ino)
{
	for (int attempt = 0; attempt < 2; attempt++) {
		pthread_rwlock_rdlock(&d->lock);
		const struct space_file *f = pick(d, space, attempt == 0);
		if (f) {
			snprintf(out, outlen, "%s", f->path);
			*ino = f->ino;
			pthread_rwlock_unlock(&d->lock);
			return 0;
		}
		pthread_rwlock_unlock(&d->lock);
		if (attempt == 0) {
			pthread_rwlock_wrlock(&d->lock);
			rescan_locked(d);
			bool moved = follow_rename(d, space, out, outlen, ino);
			pthread_rwlock_unlock(&d->lock);
			if (moved)
				return 0;
		}
	}
	return -1;
}

/* Notes and bindings dropped, files known again by their page 0; lock
 * held for writing. */
static void forget_locked(struct ppl_datadir *d)
{
	d->nnotes = 0;
	rescan_locked(d);
}

int ppl_datadir_set_root(struct ppl_datadir *d, const char *dir)
{
	char *copy = strdup(dir);
	if (copy == NULL)
		return -1;
	pthread_rwlock_wrlock(&d->lock);
	free(d->dir);
	d->dir = copy;
	/* What the old datadir's log said, and the bindings learned from
	 * its files, name that datadir's files: space ids repeat from one
	 * datadir to the next (mysql-test-run bootstraps several under one
	 * export), and a page of this one must never reach those. */
	forget_locked(d);
	pthread_rwlock_unlock(&d->lock);
	open_sweep(d); /* the old datadir's files are not kept open */
	return 0;
}

void ppl_datadir_bind(struct ppl_datadir *d, uint64_t ino, uint32_t space)
{
	struct stat st;
	pthread_rwlock_wrlock(&d->lock);
	map_changed(d);
	/* notes that named this file before it existed name it only, now:
	 * a later file under the same name is another */
	for (size_t i = 0; i < d->nnotes; i++)
		if (d->notes[i].space == space && d->notes[i].ino == 0 && dd_stat(d, d->notes[i].path, &st) == 0 &&
		    (uint64_t)st.st_ino == ino)
			d->notes[i].ino = ino;
	pthread_rwlock_unlock(&d->lock);
	for (int attempt = 0; attempt < 2; attempt++) {
		pthread_rwlock_wrlock(&d->lock);
		for (size_t i = 0; i < d->n; i++)
			if (d->f[i].ino == ino) {
				d->f[i].space = space;
				/* remembered as a note too: a rescan forgets bindings */
				struct space_file *nt = grow(&d->notes, &d->nnotes, &d->capnotes);
				if (nt)
					*nt = d->f[i];
				pthread_rwlock_unlock(&d->lock);
				return;
			}
		if (attempt == 0) { /* a file created since the last look */
			rescan_locked(d);
		}
		pthread_rwlock_unlock(&d->lock);
	}
}

void ppl_datadir_note(struct ppl_datadir *d, uint32_t space, const char *relpath)
{
	pthread_rwlock_wrlock(&d->lock);
	map_changed(d);
	struct space_file *e = grow(&d->notes, &d->nnotes, &d->capnotes);
	if (e) {
		e->space = space;
		if (relpath[0] == '.' && relpath[1] == '/')
			relpath += 2;
		snprintf(e->path, sizeof(e->path), "%s/%s", d->dir, relpath);
		/* The file there now is the one the record names (MariaDB logs
		 * the name before it creates or renames the file, and parsing
		 * follows soon after): a later file under the same name (a
		 * TRUNCATE, a DROP and CREATE) is another space and must not
		 * match this note. Not there yet: matched by name. */
		struct stat st;
		e->ino = dd_stat(d, e->path, &st) == 0 ? (uint64_t)st.st_ino : 0;
		/* What older records said of this name is superseded: the
		 * name now belongs to this space (a DROP and CREATE, a
		 * datadir of the same path made again) */
		for (size_t i = 0; i + 1 < d->nnotes; i++)
			if (strcmp(d->notes[i].path, e->path) == 0)
				d->notes[i].space = UINT32_MAX;
	}
	pthread_rwlock_unlock(&d->lock);
}

void ppl_datadir_forget(struct ppl_datadir *d, uint64_t ino)
{
	pthread_rwlock_wrlock(&d->lock);
	map_changed(d);
	/* No space matches UINT32_MAX: the entries stay, unused. A note
	 * never bound to an inode names its file by path only: left alive
	 * it would take the next file made under that name (a table created
	 * again, a datadir bootstrapped again in place) for the old space.
	 * So unbound notes whose path has no file now go too. One of them
	 * may name a file not created yet (the log names it first): its
	 * space then has no known file until its page 0 is written, and
	 * nothing of it is elided meanwhile (the decision needs the file),
	 * which costs elisions, never a page. */
	struct stat st;
	for (size_t i = 0; i < d->nnotes; i++)
		if (d->notes[i].ino == ino || (d->notes[i].ino == 0 && dd_stat(d, d->notes[i].path, &st) != 0))
			d->notes[i].space = UINT32_MAX;
	/* Dead notes (these, and those a later note of the same path
	 * superseded) go, in order (the latest note wins): a datadir that
	 * lives long creates and drops files without end, and each note is
	 * a path searched on every lookup. */
	size_t kept = 0;
	for (size_t i = 0; i < d->nnotes; i++)
		if (d->notes[i].space != UINT32_MAX)
			d->notes[kept++] = d->notes[i];
	d->nnotes = kept;
	for (size_t i = 0; i < d->n; i++)
		if (d->f[i].ino == ino)
			d->f[i].space = UINT32_MAX;
	pthread_rwlock_unlock(&d->lock);
	open_sweep(d); /* a removed file's inode is not kept alive */
}

void ppl_datadir_forget_notes(struct ppl_datadir *d)
{
	pthread_rwlock_wrlock(&d->lock);
	forget_locked(d);
	pthread_rwlock_unlock(&d->lock);
	open_sweep(d);
}

int ppl_datadir_bound_space(struct ppl_datadir *d, uint64_t ino, uint32_t *space)
{
	int rc = -1;
	pthread_rwlock_rdlock(&d->lock);
	for (size_t i = d->nnotes; rc && i-- > 0;) /* the latest note wins */
		if (d->notes[i].space != UINT32_MAX && d->notes[i].ino == ino) {
			*space = d->notes[i].space;
			rc = 0;
		}
	pthread_rwlock_unlock(&d->lock);
	return rc;
}

bool ppl_datadir_held_elsewhere(struct ppl_datadir *d, uint32_t space, uint64_t ino)
{
	bool held = false;
	pthread_rwlock_wrlock(&d->lock);
	rescan_locked(d);
	for (size_t i = 0; !held && i < d->n; i++)
		held = d->f[i].space == space && d->f[i].ino != ino;
	for (size_t i = 0; !held && i < d->nnotes; i++)
		held = d->notes[i].space == space && d->notes[i].ino != 0 && d->notes[i].ino != ino &&
		       still_there(d, &d->notes[i]);
	pthread_rwlock_unlock(&d->lock);
	return held;
}

int ppl_datadir_space_of(struct ppl_datadir *d, uint64_t ino, uint32_t *space)
{
	int rc = -1;
	struct stat st;
	pthread_rwlock_wrlock(&d->lock);
	for (size_t i = d->nnotes; rc && i-- > 0;)
		if (d->notes[i].space != UINT32_MAX &&
		    (d->notes[i].ino ? d->notes[i].ino == ino
				     : dd_stat(d, d->notes[i].path, &st) == 0 && (uint64_t)st.st_ino == ino)) {
			/* a note matched by name now names this file only: when
			 * it goes (ppl_datadir_forget), so does the note */
			if (d->notes[i].ino == 0)
				map_changed(d);
			d->notes[i].ino = ino;
			*space = d->notes[i].space;
			rc = 0;
		}
	for (size_t i = 0; rc && i < d->n; i++)
		if (d->f[i].ino == ino && d->f[i].space != UINT32_MAX) {
			*space = d->f[i].space;
			rc = 0;
		}
	pthread_rwlock_unlock(&d->lock);
	return rc;
}

int ppl_datadir_path(struct ppl_datadir *d, uint32_t space, char *out, size_t outlen)
{
	uint64_t ino;
	return find(d, space, out, outlen, &ino);
}

/* Opens the file that holds space, and only that file. The map can be a
 * moment behind the directory: a file removed and another created under
 * the same name (a datadir removed and copied again, undo tablespaces
 * re-created, DROP and CREATE) must never receive, or lend its bytes to,
 * the pages of the space that was there. So the file opened must be the
 * inode the map bound (when it bound one), and its page 0, once written,
 * must name the space. -1 with errno ENOENT when no file holds the space
 * any more, ESTALE when the file under its name is another space's. */
static int open_space(struct ppl_datadir *d, uint32_t space, uint64_t want, int flags, uint64_t *opened)
{
	char path[4096];
	uint64_t ino = 0;
	if (find(d, space, path, sizeof(path), &ino) != 0) {
		errno = ENOENT;
		return -1;
	}
	if (want != 0) {
		if (ino != 0 && ino != want) {
			errno = ESTALE; /* the map has moved on to another file */
			return -1;
		}
		ino = want;
	}
	const struct ppl_io *io = d->io;
	int fd = io->open(io->arg, path, flags);
	if (fd < 0)
		return -1;
	struct stat st;
	uint8_t hdr[PPL_PAGE0_HEAD];
	ssize_t got = io->pread(io->arg, fd, hdr, sizeof(hdr), 0);
	uint32_t named;
	int err = 0;
	if (io->fstat(io->arg, fd, &st) != 0 || got < 0)
		err = errno ? errno : EIO;
	else if (ino != 0 && (uint64_t)st.st_ino != ino)
		err = ESTALE;
	else if (got == (ssize_t)sizeof(hdr) && page0_space(hdr, &named) && named != space)
		err = ESTALE;
	if (err) {
		io->close(io->arg, fd);
		errno = err;
		return -1;
	}
	if (opened)
		*opened = (uint64_t)st.st_ino;
	return fd;
}

/* ---- open files (struct open_file) ---------------------------------------- */

static uint64_t mono_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

/* open_lock held: o's fd is closed now, or by its last user */
static void open_retire(struct ppl_datadir *d, struct open_file *o)
{
	if (o->users > 0) {
		o->retired = true;
		return;
	}
	d->io->close(d->io->arg, o->fd);
	*o = (struct open_file){ .fd = -1 };
}

/* Closes the files whose checks the map has moved past, unless in use. */
static void open_sweep(struct ppl_datadir *d)
{
	uint64_t gen = __atomic_load_n(&d->gen, __ATOMIC_ACQUIRE);
	pthread_mutex_lock(&d->open_lock);
	for (unsigned i = 0; i < OPEN_FILES; i++)
		if (d->open[i].fd >= 0 && !d->open[i].retired && d->open[i].gen != gen)
			open_retire(d, &d->open[i]);
	pthread_mutex_unlock(&d->open_lock);
}

/* The open file of space (of inode want, unless 0), still good: its slot,
 * with one more user. -1: none. */
static int open_get(struct ppl_datadir *d, uint32_t space, uint64_t want)
{
	uint64_t gen = __atomic_load_n(&d->gen, __ATOMIC_ACQUIRE), now = mono_ns();
	int slot = -1;
	pthread_mutex_lock(&d->open_lock);
	for (unsigned i = 0; i < OPEN_FILES && slot < 0; i++) {
		struct open_file *o = &d->open[i];
		if (o->fd < 0 || o->retired || o->space != space)
			continue;
		if (o->gen != gen || now - o->checked_ns >= OPEN_RECHECK_NS) {
			open_retire(d, o); /* checked again by the caller's open */
		} else if (want == 0 || want == o->ino) {
			o->users++;
			slot = (int)i;
		}
	}
	pthread_mutex_unlock(&d->open_lock);
	return slot;
}

static void open_put(struct ppl_datadir *d, int slot)
{
	pthread_mutex_lock(&d->open_lock);
	struct open_file *o = &d->open[slot];
	if (--o->users == 0 && o->retired)
		open_retire(d, o);
	pthread_mutex_unlock(&d->open_lock);
}

/* fd: space's file, checked by open_space under map generation gen:
 * kept open, its slot returned with the caller as its one user; -1 when
 * no slot is free (fd stays the caller's). */
static int open_keep(struct ppl_datadir *d, uint32_t space, uint64_t ino, int fd, uint64_t gen)
{
	pthread_mutex_lock(&d->open_lock);
	int slot = -1;
	for (unsigned i = 0; i < OPEN_FILES; i++) {
		struct open_file *o = &d->open[i];
		if (o->fd >= 0 && !o->retired && o->space == space)
			open_retire(d, o); /* the newer check wins */
	}
	/* a free slot, else the next one not in use, round the table */
	for (unsigned pass = 0; pass < 2 && slot < 0; pass++)
		for (unsigned k = 0; k < OPEN_FILES && slot < 0; k++) {
			unsigned i = (d->open_next + k) % OPEN_FILES;
			struct open_file *o = &d->open[i];
			if (pass == 1 && o->fd >= 0 && !o->retired && o->users == 0)
				open_retire(d, o);
			if (o->fd < 0)
				slot = (int)i;
		}
	if (slot >= 0) {
		d->open[slot] = (struct open_file){ .fd = fd, .space = space, .ino = ino, .gen = gen,
						    .checked_ns = mono_ns(), .users = 1 };
		d->open_next = ((unsigned)slot + 1) % OPEN_FILES;
	}
	pthread_mutex_unlock(&d->open_lock);
	return slot;
}

/* The space's file for reading: an open one still good, or one opened and
 * checked now (then kept). *slot: the open file's, for open_put. */
static int open_read(struct ppl_datadir *d, uint32_t space, uint64_t want, uint64_t *ino, int *slot)
{
	*slot = open_get(d, space, want);
	if (*slot >= 0) {
		if (ino)
			*ino = d->open[*slot].ino; /* set before the slot was handed out */
		return d->open[*slot].fd;
	}
	/* the generation before the checks: a change of the map during
	 * them leaves the file to be checked again by the next read */
	uint64_t gen = __atomic_load_n(&d->gen, __ATOMIC_ACQUIRE), opened = 0;
	int fd = open_space(d, space, want, O_RDONLY, &opened);
	if (fd < 0)
		return -1;
	if (ino)
		*ino = opened;
	*slot = open_keep(d, space, opened, fd, gen); /* -1: every slot in use; fd used once */
	return fd;
}

static void open_done(struct ppl_datadir *d, int fd, int slot)
{
	if (slot >= 0)
		open_put(d, slot);
	else
		d->io->close(d->io->arg, fd);
}

int ppl_datadir_check(struct ppl_datadir *d, uint32_t space, uint64_t *ino)
{
	int fd = open_space(d, space, 0, O_RDONLY, ino);
	if (fd < 0)
		return -1;
	d->io->close(d->io->arg, fd);
	return 0;
}

int ppl_datadir_known(struct ppl_datadir *d, uint32_t space, uint64_t *ino)
{
	int slot;
	int fd = open_read(d, space, 0, ino, &slot);
	if (fd < 0)
		return -1;
	open_done(d, fd, slot);
	return 0;
}

int ppl_datadir_read_page_of(struct ppl_datadir *d, uint32_t space, uint64_t ino, uint32_t page_no, uint8_t *buf,
			     size_t size)
{
	int slot;
	int fd = open_read(d, space, ino, NULL, &slot);
	if (fd < 0)
		return -1;
	ssize_t got = d->io->pread(d->io->arg, fd, buf, size, (off_t)page_no * (off_t)size);
	int err = errno;
	open_done(d, fd, slot);
	if (got >= 0 && (size_t)got < size)
		memset(buf + got, 0, size - (size_t)got); /* past the end: never written */
	errno = err;
	return got < 0 ? -1 : 0;
}

int ppl_datadir_open_write(struct ppl_datadir *d, uint32_t space, uint64_t ino)
{
	return open_space(d, space, ino, O_RDWR, NULL); /* page 0 is read first */
}

int ppl_datadir_put_page(struct ppl_datadir *d, int fd, uint32_t page_no, const uint8_t *buf, size_t size)
{
	ssize_t put = d->io->pwrite(d->io->arg, fd, buf, size, (off_t)page_no * (off_t)size);
	if (put == (ssize_t)size) {
		PPL_CRASH(PAGE_WRITTEN);
		return 0;
	}
	if (put >= 0)
		errno = ENOSPC; /* a short write: the file system had no room for the rest */
	return -1;
}

int ppl_datadir_sync_close(struct ppl_datadir *d, int fd, bool sync)
{
	const struct ppl_io *io = d->io;
	int rc = sync ? io->sync(io->arg, fd) : 0;
	int err = errno;
	io->close(io->arg, fd);
	errno = err;
	return rc;
}

int ppl_datadir_write_page_of(struct ppl_datadir *d, uint32_t space, uint64_t ino, uint32_t page_no,
			      const uint8_t *buf, size_t size)
{
	int fd = ppl_datadir_open_write(d, space, ino);
	if (fd < 0)
		return -1;
	if (ppl_datadir_put_page(d, fd, page_no, buf, size) != 0) {
		ppl_datadir_sync_close(d, fd, false);
		return -1;
	}
	return ppl_datadir_sync_close(d, fd, true);
}

int ppl_datadir_read_page(void *arg, uint32_t space, uint32_t page_no, uint8_t *buf, size_t size)
{
	return ppl_datadir_read_page_of(arg, space, 0, page_no, buf, size);
}

int ppl_datadir_write_page(void *arg, uint32_t space, uint32_t page_no, const uint8_t *buf, size_t size)
{
	return ppl_datadir_write_page_of(arg, space, 0, page_no, buf, size);
}
