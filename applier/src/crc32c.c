/* CRC-32C with a runtime choice between SSE4.2 and a slicing-by-8 table.
 * The table is built once; the choice is made once, lazily, so the library
 * needs no init call. */
#include "ppl/crc32c.h"

#include <pthread.h>
#include <string.h>

#define POLY 0x82f63b78u /* reflected Castagnoli polynomial */

static uint32_t table[8][256];
static uint32_t (*impl)(uint32_t, const uint8_t *, size_t);
static pthread_once_t once = PTHREAD_ONCE_INIT;

static uint32_t crc_sw(uint32_t crc, const uint8_t *p, size_t n)
{
	while (n && ((uintptr_t)p & 7)) {
		crc = table[0][(crc ^ *p++) & 0xff] ^ (crc >> 8);
		n--;
	}
	while (n >= 8) {
		uint64_t w;
		memcpy(&w, p, 8); /* little-endian hosts only: x86-64 is the target */
		w ^= crc;
		crc = table[7][w & 0xff] ^ table[6][(w >> 8) & 0xff] ^ table[5][(w >> 16) & 0xff] ^
		      table[4][(w >> 24) & 0xff] ^ table[3][(w >> 32) & 0xff] ^ table[2][(w >> 40) & 0xff] ^
		      table[1][(w >> 48) & 0xff] ^ table[0][w >> 56];
		p += 8;
		n -= 8;
	}
	while (n--)
		crc = table[0][(crc ^ *p++) & 0xff] ^ (crc >> 8);
	return crc;
}

#if defined(__x86_64__)
#include <cpuid.h>
#include <nmmintrin.h>

__attribute__((target("sse4.2"))) static uint32_t crc_hw(uint32_t crc, const uint8_t *p, size_t n)
{
	uint64_t c = crc;
	while (n && ((uintptr_t)p & 7)) {
		c = _mm_crc32_u8((uint32_t)c, *p++);
		n--;
	}
	while (n >= 8) {
		uint64_t w;
		memcpy(&w, p, 8);
		c = _mm_crc32_u64(c, w);
		p += 8;
		n -= 8;
	}
	while (n--)
		c = _mm_crc32_u8((uint32_t)c, *p++);
	return (uint32_t)c;
}

static int cpu_has_sse42(void)
{
	unsigned a, b, c, d;
	return __get_cpuid(1, &a, &b, &c, &d) && (c & bit_SSE4_2);
}
#endif

static void init(void)
{
	for (unsigned i = 0; i < 256; i++) {
		uint32_t c = i;
		for (int k = 0; k < 8; k++)
			c = c & 1 ? (c >> 1) ^ POLY : c >> 1;
		table[0][i] = c;
	}
	for (unsigned i = 0; i < 256; i++)
		for (int t = 1; t < 8; t++)
			table[t][i] = (table[t - 1][i] >> 8) ^ table[0][table[t - 1][i] & 0xff];
	impl = crc_sw;
#if defined(__x86_64__)
	if (cpu_has_sse42())
		impl = crc_hw;
#endif
}

uint32_t ppl_crc32c(uint32_t crc, const void *buf, size_t len)
{
	pthread_once(&once, init);
	return ~impl(~crc, buf, len);
}

uint32_t ppl_crc32c_portable(uint32_t crc, const void *buf, size_t len)
{
	pthread_once(&once, init);
	return ~crc_sw(~crc, buf, len);
}

int ppl_crc32c_hw(void)
{
	pthread_once(&once, init);
	return impl != crc_sw;
}
