/* The hash of 64-bit keys for the engine's liburcu hash tables (pages by
 * space and number, files by inode number). */
#ifndef PPL_HASH_H
#define PPL_HASH_H

#include <stdint.h>

/* splitmix64's finalizer: the keys come dense and in runs (page numbers,
 * inode numbers), and the tables are split by the hash's low bits. */
static inline unsigned long ppl_hash64(uint64_t key)
{
	key ^= key >> 30;
	key *= 0xbf58476d1ce4e5b9ull;
	key ^= key >> 27;
	key *= 0x94d049bb133111ebull;
	key ^= key >> 31;
	return (unsigned long)key;
}

#endif
