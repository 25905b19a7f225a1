/* CRC-32C (Castagnoli), as InnoDB uses for redo mini-transactions, the log
 * header and checkpoints, and full_crc32 page checksums. */
#ifndef PPL_CRC32C_H
#define PPL_CRC32C_H
#include <stddef.h>
#include <stdint.h>

/* Continues a CRC-32C from `crc` (0 to start) over `len` bytes, using the
 * SSE4.2 instruction when the CPU has it and a table otherwise. */
uint32_t ppl_crc32c(uint32_t crc, const void *buf, size_t len);
/* The portable implementation alone, so tests can compare both paths. */
uint32_t ppl_crc32c_portable(uint32_t crc, const void *buf, size_t len);
/* Whether ppl_crc32c uses the hardware instruction on this machine. */
int ppl_crc32c_hw(void);
#endif
