#ifndef PPL_INSPECT_H
#define PPL_INSPECT_H
#include <stdio.h>

/* argv[0] is the verb (create, check, info, dump). Returns the exit status. */
int pool_main(int argc, char **argv, void (*usage)(FILE *));

/* argv[0] is POOL_PATH; then "stats" or "page SPACE:PAGE". */
int live_main(int argc, char **argv, void (*usage)(FILE *));

#endif
