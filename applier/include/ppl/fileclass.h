/* What a file of a MariaDB datadir is, by its name: the one place that
 * knows InnoDB's file names. Each part applies its own policy to the
 * answer (the storage node rebuilds what the redo covers, libcatcher
 * elides less than that, replay reads every page file), but they all
 * agree on what a name means. Plain libc: compiled into libcatcher too. */
#ifndef PPL_FILECLASS_H
#define PPL_FILECLASS_H

#include <stdbool.h>

enum ppl_innodb_file {
	PPL_INNODB_NONE = 0,     /* not an InnoDB file */
	PPL_INNODB_REDO,         /* ib_logfile0: the redo log */
	PPL_INNODB_REDO_NEW,     /* ib_logfile101: a log being made, renamed to ib_logfile0 */
	PPL_INNODB_REDO_OLD,     /* ib_logfile1..: logs of older formats, never written by 10.8+ */
	PPL_INNODB_SYSTEM,       /* ibdataN: the system tablespace (space 0 in ibdata1) */
	PPL_INNODB_UNDO,         /* undoNNN: an undo tablespace */
	PPL_INNODB_TEMP,         /* ibtmpN: the temporary tablespace, never redo-logged */
	PPL_INNODB_TABLE,        /* db/NAME.ibd: a file-per-table tablespace */
	PPL_INNODB_INTERMEDIATE, /* db/#sqlNAME.ibd: ALTER ... COPY's and OPTIMIZE's table */
};

/* The kind of file a name (a base name, or a path: only the part after the
 * last '/' counts) is. */
enum ppl_innodb_file ppl_innodb_file_of(const char *name);
/* Whether files of this kind hold pages that the redo log describes
 * (every change to them is logged): tablespaces, system and undo, and the
 * intermediate tables (logged like any table; dropped or renamed when the
 * ALTER ends). Not the temporary tablespace. */
bool ppl_innodb_file_redo_covered(enum ppl_innodb_file k);
/* Whether files of this kind hold InnoDB pages at all. */
bool ppl_innodb_file_has_pages(enum ppl_innodb_file k);

#endif
