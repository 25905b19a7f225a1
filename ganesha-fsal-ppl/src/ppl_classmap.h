/* File class by sub-FSAL handle key, for handles the FSAL is given without
 * a name (NFS file handles presented after Ganesha's cache dropped the
 * object). Every regular file seen by name is stored; a key never seen
 * is unresolved. In memory, per export. */
#ifndef PPL_CLASSMAP_H
#define PPL_CLASSMAP_H

#include <pthread.h>
#include <stddef.h>

#include "gsh_types.h" /* struct gsh_buffdesc: the sub-FSAL's handle key */

#include "ppl_hooks.h"

struct ppl_classmap_entry;

struct ppl_classmap {
	pthread_mutex_t lock;
	struct ppl_classmap_entry **buckets;
	size_t nbuckets;
	size_t count;
};

int ppl_classmap_init(struct ppl_classmap *m);
void ppl_classmap_destroy(struct ppl_classmap *m);
/* Stores the class and name of a key (PPL_FILE_UNRESOLVED is not stored). */
void ppl_classmap_set(struct ppl_classmap *m, const struct gsh_buffdesc *key, enum ppl_file_class cls,
		      const char *name);
void ppl_classmap_remove(struct ppl_classmap *m, const struct gsh_buffdesc *key);
/* Returns the class and copies the name into name_buf; PPL_FILE_UNRESOLVED
 * if the key was never stored. */
enum ppl_file_class ppl_classmap_get(struct ppl_classmap *m, const struct gsh_buffdesc *key, char *name_buf,
				     size_t len);

#endif
