#ifndef PPL_INSPECT_H
#define PPL_INSPECT_H
#include <stdio.h>

#include <stddef.h>
#include <stdint.h>

/* ns since the epoch as "2026-11-28T10:42:00.123Z" (UTC, milliseconds). */
void inspect_utc(uint64_t ns, char *out, size_t len);

/* argv[0] is the verb (create, check, info, dump). Returns the exit status. */
int pool_main(int argc, char **argv, void (*usage)(FILE *));

/* argv[0] is POOL_PATH; then "stats", "page SPACE:PAGE", "forget-space
 * SPACE" or "metrics". */
int live_main(int argc, char **argv, void (*usage)(FILE *));
int backup_main(int argc, char **argv, void (*usage)(FILE *));

/* argv[0] is a libcatcher stats file: printed as OpenMetrics text. */
int catcher_metrics_main(int argc, char **argv, void (*usage)(FILE *));

/* argv[0] is "check" or "create-pool"; argv[1] a Ganesha configuration
 * file; create-pool's argv[2] the Pool_Path of one of its PPL exports. */
int config_main(int argc, char **argv, void (*usage)(FILE *));

/* --base DIR [--archive DIR] --at LSN|TIME DEST */
int clone_main(int argc, char **argv, void (*usage)(FILE *));

/* argv[0] is an archive directory (Archive_Path); then --json or not. */
int archive_main(int argc, char **argv, void (*usage)(FILE *));

#endif
