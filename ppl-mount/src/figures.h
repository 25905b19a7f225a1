/* Read latency as the compute node sees it: from a FUSE READ's arrival to
 * its data in hand, the NFS round trip and the server's work together.
 * The storage node times only its own part; this is the figure a database
 * waits for, and the one to compare across servers (a page the server
 * rebuilt against one it read from its disk). */
#ifndef PPL_MOUNT_FIGURES_H
#define PPL_MOUNT_FIGURES_H

#include <stddef.h>
#include <stdint.h>

/* One READ answered with data (failed reads are not timed). */
void figures_read(uint64_t ns, size_t size);

/* Blocks SIGUSR1 in the calling thread and so in every thread it creates
 * later. Call first in main, before any thread exists: SIGUSR1's default
 * action ends the process, so no thread may leave it open. */
void figures_block_signal(void);

/* Starts a thread that, on each SIGUSR1, logs the read figures since the
 * previous SIGUSR1 (or the mount). Call after detaching: threads do not
 * survive fork. Returns 0, or -1 if the thread could not start (the mount
 * works without it; SIGUSR1 stays blocked and does nothing). */
int figures_start(void);

/* Logs the figures of the whole mount (at unmount). */
void figures_log_total(void);

#endif
