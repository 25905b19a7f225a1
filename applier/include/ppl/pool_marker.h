/* Which pool holds an export's pages: <export>/.ppl-pool.
 *
 * The pool is the only copy of the records of pages kept in it (MariaDB's
 * checkpoint has passed them in the log). On tmpfs -- NVDIMM emulated --
 * it is gone after a power loss or a reboot, and so is it when someone
 * deletes it; a new, empty pool made at the same Pool_Path would then let
 * the storage node serve those pages as their files hold them: older than
 * MariaDB committed, and without a word. The marker, on the export's own
 * (persistent) file system, closes that gap: the store writes "open" with
 * its pool's uuid when it starts and "drained" after a clean stop that
 * left nothing in the pool; a pool that is not the one an "open" marker
 * names is refused, and so is making a new one for that export.
 *
 * A marker that names another export path is a copy (a datadir copied
 * with its export): it says nothing about this export and is replaced. */
#ifndef PPL_POOL_MARKER_H
#define PPL_POOL_MARKER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define PPL_POOL_MARKER_NAME ".ppl-pool"

enum ppl_pool_marker_state { PPL_MARKER_NONE, PPL_MARKER_OPEN, PPL_MARKER_DRAINED };

/* 0, or -1 with the message: what was lost and what to do. uuid is the
 * pool about to serve the export, durable up to durable_lsn (an older copy
 * of the pool the marker names is refused too); NULL for a pool about to
 * be made. */
int ppl_pool_marker_admit(const char *exportdir, const uint8_t *uuid, uint64_t durable_lsn, char *err,
			  size_t errlen);
/* Records that the pool uuid serves the export (drained: a clean stop left
 * nothing in it). Written to a new file, synced and renamed over the old
 * one, so a crash leaves the old marker or the new. 0, or -1 with err. */
int ppl_pool_marker_write(const char *exportdir, const uint8_t uuid[16], bool drained, char *err, size_t errlen);
/* The same, open, with the pool's durable LSN: noted while the pool holds
 * records past MariaDB's checkpoint, so that an older copy of the same
 * pool (a file restored from a backup or a snapshot) is told apart. */
int ppl_pool_marker_note_lsn(const char *exportdir, const uint8_t uuid[16], uint64_t lsn, char *err, size_t errlen);

#endif
