/* Injected faults of the storage node's disk: its file operations made
 * to fail, or to be slow, on demand, under a running MariaDB.
 *
 * A disk that returns EIO, fills up (ENOSPC) or stalls is the fault a
 * storage node meets most, and the one its tests meet least: the store's
 * unit tests fail chosen calls through their own I/O table
 * (tests/unit/test_store_faults.c), but what MariaDB sees when the
 * storage node's disk fails under it, and what the node does about its
 * elided pages then, can only be seen with both running. So the test
 * build of the FSAL (the same plugin as the crash points: -DPPL_CRASH_POINTS,
 * build/ganesha-fsal-ppl/plugins-crash, never installed) puts one fault
 * switch in front of every operation on the export's files:
 *
 *   - the store's own reads, writes and syncs (materializing a page,
 *     restoring a doublewrite slot, reading a base to rebuild): its I/O
 *     table is ppl_fault_io(), POSIX behind the switch;
 *   - MariaDB's WRITEs, COMMITs and READs through the FSAL (its log
 *     writes, the pages it writes itself, its reads): the FSAL asks
 *     ppl_fault_hit before it hands them to the sub-FSAL, and fails the
 *     request with the fault's error (NFS4ERR_IO, NFS4ERR_NOSPC).
 *
 * A fault is armed by PPL_FAULT=<spec> in the environment of the process
 * that loads the store (from its start), or by ppl_fault_arm (the control
 * request `ppl-inspect live POOL fault <spec>`, which `fault clear` ends
 * and `fault` alone reports). The spec is
 *
 *     <op>:<files>:<effect>[:<count>]
 *     op      write | sync | read | any
 *     files   log (ib_logfile*) | data (ibdata*, undo*, *.ibd) | pool | any
 *             (pool: the msync of a pool on a disk-backed file, sync only)
 *     effect  EIO | ENOSPC | <N>ms (the call waits N ms, then runs)
 *     count   fail (or slow) only the next <count> matching calls
 *
 * "write:any:ENOSPC" is a full disk; "sync:data:EIO" a disk that loses
 * what it was given; "any:any:200ms" a slow one. One fault at a time: a
 * new spec replaces the old. The first call a fault hits is told on
 * stderr ("PPL fault <spec> hit: <op> of <path>"), so that a test knows
 * its fault was met, not only armed.
 *
 * Without -DPPL_CRASH_POINTS there is no switch: ppl_fault_io() is POSIX,
 * ppl_fault_hit answers 0, and arming is refused with a message saying
 * that this build has no fault injection. */
#ifndef PPL_FAULT_H
#define PPL_FAULT_H

#include <stddef.h>

#include "ppl/io.h"

enum ppl_fault_op { PPL_FAULT_WRITE, PPL_FAULT_SYNC, PPL_FAULT_READ };

/* What a file is, for a fault's <files>: by name (ppl/fileclass.h). */
enum ppl_fault_files { PPL_FAULT_FILE_LOG, PPL_FAULT_FILE_DATA, PPL_FAULT_FILE_OTHER, PPL_FAULT_FILE_POOL };

/* Arms `spec` (or ends the fault: "clear"). 0 and what is armed in msg,
 * or -1 and why not. */
int ppl_fault_arm(const char *spec, char *msg, size_t len);

/* What is armed ("" if nothing) and how many calls it has hit. */
void ppl_fault_state(char *spec, size_t len, unsigned long long *hits);

/* Whether `op` on the file at `path` (a path or a base name; files is its
 * kind) is hit: 0 to go on (after the wait of a slow fault), or the errno
 * the call must fail with. */
int ppl_fault_hit(enum ppl_fault_op op, enum ppl_fault_files files, const char *path);

/* The kind of file a path names, for ppl_fault_hit. */
enum ppl_fault_files ppl_fault_files_of(const char *path);

/* The system calls behind the switch (ppl/io.h); ppl_io_posix() in a
 * build without fault injection. */
const struct ppl_io *ppl_fault_io(void);

#endif
