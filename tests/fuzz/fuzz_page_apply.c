/* libFuzzer target: arbitrary records applied to realistic pages. The first
 * input byte picks a page (zeroed, a fresh COMPACT/DYNAMIC index page, a
 * fresh REDUNDANT index page, a fresh undo page) and a page size (4K to
 * 64K); the rest is either a run of records for that page (with its page
 * id in front) or one EXTENDED record body. Whatever the bytes, apply must
 * stay inside the page and return a status. */
#include <stdlib.h>
#include <string.h>

#include "ppl/page_apply.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 2)
		return 0;
	static const size_t sizes[5] = {4096, 8192, 16384, 32768, 65536};
	size_t ps = sizes[(data[0] >> 2) % 5];
	uint8_t *page = aligned_alloc(4096, ps);
	memset(page, 0, ps);
	struct ppl_page_ref pg = {page, ps, 7, 3 + (data[0] >> 5)};
	struct ppl_apply_error e;
	uint8_t sub = (uint8_t[]){0xff, 1, 0, 2}[data[0] & 3];
	if (sub != 0xff)
		ppl_apply_extended(&pg, &sub, 1, &e);
	const uint8_t *body = data + 1;
	size_t len = size - 1;
	if (data[0] & 0x10) {
		ppl_apply_extended(&pg, body, len, &e);
	} else {
		uint8_t *recs = malloc(len + 16);
		size_t h = 0;
		/* a leading page-id-carrying WRITE of one byte at offset 38 */
		recs[h++] = 0x30 | 4;
		recs[h++] = 7;
		recs[h++] = (uint8_t)pg.page_no;
		recs[h++] = 38;
		recs[h++] = 0;
		memcpy(recs + h, body, len);
		struct ppl_apply_cursor cur = {0};
		bool mod;
		ppl_apply_mtr_recs(&pg, &cur, recs, h + len, &mod, &e);
		free(recs);
	}
	free(page);
	return 0;
}
