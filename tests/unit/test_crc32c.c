/* CRC-32C: known vectors (RFC 3720 appendix B.4) and agreement of the
 * hardware and portable paths on every length and alignment. */
#include <string.h>

#include "check.h"
#include "ppl/crc32c.h"

int main(void)
{
	uint8_t buf[300];
	memset(buf, 0, 32);
	CHECK_EQ_U(ppl_crc32c(0, buf, 32), 0x8a9136aau);
	memset(buf, 0xff, 32);
	CHECK_EQ_U(ppl_crc32c(0, buf, 32), 0x62a8ab43u);
	for (int i = 0; i < 32; i++)
		buf[i] = (uint8_t)i;
	CHECK_EQ_U(ppl_crc32c(0, buf, 32), 0x46dd794eu);
	CHECK_EQ_U(ppl_crc32c(0, "123456789", 9), 0xe3069283u);
	CHECK_EQ_U(ppl_crc32c_portable(0, "123456789", 9), 0xe3069283u);
	/* Continuation equals one pass. */
	CHECK_EQ_U(ppl_crc32c(ppl_crc32c(0, "1234", 4), "56789", 5), 0xe3069283u);

	for (int i = 0; i < (int)sizeof buf; i++)
		buf[i] = (uint8_t)(i * 131 + 7);
	for (size_t off = 0; off < 9; off++)
		for (size_t len = 0; len + off <= sizeof buf; len += 7)
			CHECK_EQ_U(ppl_crc32c(0, buf + off, len), ppl_crc32c_portable(0, buf + off, len));
	printf("hardware crc32c: %s\n", ppl_crc32c_hw() ? "yes" : "no");
	CHECK_DONE();
}
