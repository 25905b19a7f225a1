/* ppl-inspect archive DIR: what a log archive (Archive_Path) holds, every
 * record read and checked on the way: its LSN window, the wall-clock time
 * of its first and last mini-transactions, its segments and size. Exit
 * status 0, 1 when it is damaged or cannot be read (the message names
 * the file and the LSNs), 2 on bad usage. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "inspect.h"
#include "ppl/archive.h"

int archive_main(int argc, char **argv, void (*usage)(FILE *))
{
	const char *dir = NULL;
	int json = 0;
	for (int i = 0; i < argc; i++) {
		if (strcmp(argv[i], "--json") == 0)
			json = 1;
		else if (dir == NULL)
			dir = argv[i];
		else {
			usage(stderr);
			return 2;
		}
	}
	if (dir == NULL) {
		usage(stderr);
		return 2;
	}
	struct ppl_archive_window w;
	char err[4400], first[40], last[40];
	if (ppl_archive_window(dir, &w, err, sizeof err) != 0) {
		fprintf(stderr, "ppl-inspect archive: %s\n", err);
		return 1;
	}
	inspect_utc(w.first_ns, first, sizeof first);
	inspect_utc(w.last_ns, last, sizeof last);
	if (json)
		printf("{\"dir\": \"%s\", \"first_lsn\": %" PRIu64 ", \"end_lsn\": %" PRIu64 ", \"first_time\": \"%s\", "
		       "\"last_time\": \"%s\", \"first_ns\": %" PRIu64 ", \"last_ns\": %" PRIu64 ", \"records\": %" PRIu64
		       ", \"segments\": %" PRIu64 ", \"bytes\": %" PRIu64 "}\n", dir, w.first_lsn, w.end_lsn, first, last,
		       w.first_ns, w.last_ns, w.records, w.segments, w.bytes);
	else
		printf("archive %s: LSN %" PRIu64 " to %" PRIu64 ", mini-transactions accepted from %s to %s (UTC); "
		       "%" PRIu64 " mini-transactions in %" PRIu64 " segment(s), %.1f MB; every record checked\n", dir,
		       w.first_lsn, w.end_lsn, first, last, w.records, w.segments, (double)w.bytes / 1e6);
	return 0;
}
